"""Gradients of ReverseSequence and TopKV2 (TensorFlow's array_grad.py and nn_grad.py rules).

    Before: y = ReverseSequence(x, lengths)     After: dx = ReverseSequence(dy, lengths)
    Before: v, i = TopKV2(x, k)                 After: dx = zeros like x with dv scattered
                                                       to the positions i of each row
"""
from tfg.passes.grad.registry import gradient
from tfg.schemas.dtypes import DType

I32 = DType.INT32


@gradient("ReverseSequence")
def _reverse_sequence(b, op, grads):
    attrs = {"seq_dim": int(op.attr("seq_dim")), "batch_dim": int(op.attr("batch_dim", 0))}
    return [b.op("ReverseSequence", [grads[0], op.inputs[1]], attrs), None]


@gradient("TopKV2", fill_zeros=False)
def _top_k(b, op, grads):
    """Flat positions row * n + indices, ScatterNd of dv there into a vector of x's size."""
    g = grads[0]
    if g is None:
        return [None, None]
    x, indices = op.inputs[0], op.outputs[1]
    if op.output_dtype(1) != I32:
        indices = b.op("Cast", [indices], {"DstT": I32})
    in_shape = b.shape(x)
    last, k = _last_dim(b, in_shape), _last_dim(b, b.shape(indices))
    rows = b.op("Reshape", [indices, b.op("Pack", [b.const(-1, I32), k], {"axis": 0})])
    n_rows = b.op("GatherV2", [b.shape(rows), b.const(0, I32), b.const(0, I32)])
    offsets = b.op("Range", [b.const(0, I32), b.op("Mul", [n_rows, last]), last])
    flat = b.op("Reshape", [b.op("AddV2", [rows, b.op("ExpandDims", [offsets,
                                                                       b.const(-1, I32)])]),
                            b.const([-1], I32)])
    size = b.op("Prod", [in_shape, b.const(0, I32)], {"keep_dims": False})
    scattered = b.op("ScatterNd", [b.op("ExpandDims", [flat, b.const(-1, I32)]),
                                   b.op("Reshape", [g, b.const([-1], I32)]),
                                   b.op("Reshape", [size, b.const([1], I32)])])
    return [b.op("Reshape", [scattered, in_shape]), None]


def _last_dim(b, shape):
    """shape[-1] as a scalar (StridedSlice: GatherV2 takes no negative index)."""
    return b.op("StridedSlice", [shape, b.const([-1], I32), b.const([0], I32),
                                 b.const([1], I32)],
                {"begin_mask": 0, "end_mask": 1, "ellipsis_mask": 0, "new_axis_mask": 0,
                 "shrink_axis_mask": 1, "Index": I32})




@gradient("TopK", fill_zeros=False)
def _top_k_v1(b, op, grads):
    """TopK (v1) has the one input: TopKV2's rule without the k input's None."""
    return _top_k(b, op, grads)[:1]
