"""Gradients of the ragged ops: RaggedTensorToTensor's, as TensorFlow's ragged_conversion_ops.py
computes it, with the values' gradient dense (UnsortedSegmentSum, as tfg gives every gathered
gradient) instead of IndexedSlices and boolean_mask's selection done by SelectV2:

    Before: y = RaggedTensorToTensor(shape, values, default, partitions...)
    After:  idx = RaggedTensorToTensor(Shape(g)[:1 + ragged_rank], Range(nvals), -1, partitions)
            dvalues  = UnsortedSegmentSum(g, idx, nvals)     (idx -1: a default's position)
            ddefault = Reshape(Sum(SelectV2(idx == -1, g, 0), leading axes), Shape(default))

the leading axes being all but default's own rank less its leading 1-sized dims. The shape and
partitions get none. The string-hashing ops, the other ragged ops and the bincounts are not
differentiable, as in TensorFlow.
"""
from tfg.passes.grad.registry import gradient, no_gradient
from tfg.schemas.dtypes import DType

I32 = DType.INT32


def _slice(b, shape, begin, end=None):
    """shape[begin:end] of an int32 vector."""
    attrs = {"end_mask": 1} if end is None else {}
    return b.op("StridedSlice", [shape, b.const([begin], I32), b.const([end or 0], I32),
                                 b.const([1], I32)], attrs)


def _rank_without_leading_ones(b, t):
    """rank(t) less its leading dims of size 1 (how much of t a broadcast really fills)."""
    ones = b.op("Cast", [b.op("Equal", [b.op("Shape", [t]), b.const(1, I32)])],
                {"DstT": I32})
    leading = b.op("Sum", [b.op("Cumprod", [ones, b.const(0, I32)]), b.const([0], I32)])
    return b.op("Sub", [b.op("Rank", [t]), leading])


@gradient("RaggedTensorToTensor")
def _ragged_tensor_to_tensor(b, op, grads):
    g = grads[0]
    values, default, partitions = op.inputs[1], op.inputs[2], op.inputs[3:]
    types = [t.decode() if isinstance(t, bytes) else str(t)
             for t in op.attr("row_partition_types")]
    ragged_rank = sum(1 for t in types if t != "FIRST_DIM_SIZE")
    values_shape = b.op("Shape", [values])
    nvals = b.op("StridedSlice", [values_shape, b.const([0], I32), b.const([1], I32),
                                  b.const([1], I32)], {"shrink_axis_mask": 1})
    # per output position, the index of the value written there, -1 where default_value went
    index = b.op("RaggedTensorToTensor",
                 [_slice(b, b.op("Shape", [g]), 0, 1 + ragged_rank),
                  b.op("Range", [b.const(0, I32), nvals, b.const(1, I32)]), b.const(-1, I32),
                  *partitions],
                 {"T": I32, "Tindex": op.attr("Tindex"), "Tshape": I32,
                  "num_row_partition_tensors": len(partitions),
                  "row_partition_types": op.attr("row_partition_types")})
    dvalues = b.op("UnsortedSegmentSum", [g, index, nvals])
    # default_value's positions, broadcast over the values' inner dims
    ones = b.op("OnesLike", [_slice(b, values_shape, 1)])
    is_default = b.op("Reshape", [b.op("Equal", [index, b.const(-1, I32)]),
                                  b.op("ConcatV2", [b.op("Shape", [index]), ones,
                                                    b.const(0, I32)])])
    picked = b.op("SelectV2", [is_default, g, b.op("ZerosLike", [g])])
    axes = b.op("Range", [b.const(0, I32),
                          b.op("Sub", [b.op("Rank", [g]), _rank_without_leading_ones(b, default)]),
                          b.const(1, I32)])
    ddefault = b.op("Reshape", [b.op("Sum", [picked, axes]), b.op("Shape", [default])])
    return [None, dvalues, ddefault] + [None] * len(partitions)


no_gradient("StringToHashBucketFast", "StringToHashBucketStrong", "StringToHashBucket",
            "Fingerprint", "RaggedTensorToSparse", "RaggedRange", "RaggedGather",
            "RaggedBincount", "SparseBincount")
