"""Gradients of the gathers (TensorFlow's array_grad.py rules, but dense: the rows are summed
by index with UnsortedSegmentSum instead of returned as IndexedSlices).

    Before: y = GatherV2(params, idx, axis)     After: the axis moved to the front of g,
            UnsortedSegmentSum(g', Reshape(idx, [-1]), params.shape[axis]), moved back
    batch_dims B > 0 (tf.gather(..., batch_dims=B), take_along_axis): batch element k's rows
    go to its own params slice, so the B batch dims fold into the summed axis (index i of
    batch element k is row k * params.shape[axis] + i), then the same segment sum.
    Before: y = GatherNd(params, idx)           After: ScatterNd(idx, g, Shape(params))
"""
from tfg.errors import UnknownOpError
from tfg.passes.grad.registry import gradient
from tfg.schemas.dtypes import DType

I32 = DType.INT32


def _dims(b, shape, begin, end=None):
    """shape[begin:end] (end None: to the end)."""
    attrs = {"end_mask": 1} if end is None else {}
    return b.op("StridedSlice", [shape, b.const([begin], I32), b.const([end or 0], I32),
                                 b.const([1], I32)], attrs)


def _dim(b, shape, i):
    return b.op("StridedSlice", [shape, b.const([i], I32), b.const([i + 1], I32),
                                 b.const([1], I32)], {"shrink_axis_mask": 1})


def _gather(b, op, grads, axis_value):
    params, indices = op.inputs[0], op.inputs[1]
    g = grads[0]
    shape = b.shape(params)
    flat_indices = b.op("Reshape", [indices, b.const([-1], I32)])
    # Move the gathered axis of g to the front, sum rows by index, move it back.
    outer, inner = _dims(b, shape, 0, axis_value), _dims(b, shape, axis_value + 1)
    values = b.op("Reshape", [g, b.op("ConcatV2", [outer, b.const([-1], I32), inner,
                                                    b.const(0, I32)])])
    rank = b.op("Rank", [params])
    rest = b.op("Range", [b.const(axis_value + 1, I32), rank, b.const(1, I32)])
    lead = b.op("Range", [b.const(0, I32), b.const(axis_value, I32), b.const(1, I32)])
    perm = b.op("ConcatV2", [b.const([axis_value], I32), lead, rest, b.const(0, I32)])
    rows = b.op("UnsortedSegmentSum", [b.op("Transpose", [values, perm]), flat_indices,
                                       _dim(b, shape, axis_value)])
    return b.op("Transpose", [rows, b.op("InvertPermutation", [perm])])


def _batch_gather(b, op, grads, axis, batch_dims):
    """g: batch + mid + idx + inner (batch = params.shape[:B], mid = [B:axis], inner = after
    axis). Moved to batch + idx + mid + inner, flattened to [-1] + mid + inner, summed into
    batch * params.shape[axis] rows, then unflattened and moved back."""
    params, indices = op.inputs[0], op.inputs[1]
    it = b.dtype(indices)
    shape = b.shape(params, it)
    outer, inner, mid = _dims(b, shape, 0, axis), _dims(b, shape, axis + 1), \
        _dims(b, shape, batch_dims, axis)
    batch, size = _dims(b, shape, 0, batch_dims), _dim(b, shape, axis)
    minus_one = b.const([-1], it)
    values = b.op("Reshape", [grads[0], b.op("ConcatV2", [outer, minus_one, inner,
                                                           b.const(0, I32)])])
    rest = b.op("Range", [b.const(axis + 1, I32), b.op("Rank", [params]), b.const(1, I32)])
    lead = list(range(batch_dims)) + [axis] + list(range(batch_dims, axis))
    perm = b.op("ConcatV2", [b.const(lead, I32), rest, b.const(0, I32)])
    flat = b.op("Reshape", [b.op("Transpose", [values, perm]),
                            b.op("ConcatV2", [minus_one, mid, inner, b.const(0, I32)])])
    n = b.op("Prod", [batch, b.const([0], I32)])
    offsets = b.op("Range", [b.const(0, it), b.op("Mul", [n, size]), size])
    per_batch = b.op("Reshape", [indices, b.op("Pack", [n, b.const(-1, it)], {"axis": 0})])
    ids = b.op("AddV2", [per_batch, b.op("Reshape", [offsets, b.const([-1, 1], it)])])
    rows = b.op("UnsortedSegmentSum", [flat, b.op("Reshape", [ids, minus_one]),
                                       b.op("Mul", [n, size])])
    rows = b.op("Reshape", [rows, b.op("ConcatV2", [batch, b.op("Reshape", [size, minus_one]),
                                                    mid, inner, b.const(0, I32)])])
    return b.op("Transpose", [rows, b.op("InvertPermutation", [perm])])


def _unsupported(op, what):
    return UnknownOpError(f"the gradient of {op.type} (node {op.name!r}) with {what} is not "
                          "supported")


def _static_rank(b, op, i, what):
    rank = b.builder.static_rank(op.inputs[i])
    if rank is None:
        raise _unsupported(op, f"a negative {what} on an input of unknown rank")
    return rank


@gradient("GatherV2")
def _gather_v2(b, op, grads):
    axis = op.const_input(2)
    if axis is None:
        raise _unsupported(op, "a non-constant axis")
    axis = int(axis)
    if axis < 0:
        axis += _static_rank(b, op, 0, "axis")
    batch_dims = int(op.attr("batch_dims", 0))
    if batch_dims < 0:  # counts from the end of the indices' dims, as in TensorFlow
        batch_dims += _static_rank(b, op, 1, "batch_dims")
    if batch_dims == 0:
        return [_gather(b, op, grads, axis), None, None]
    return [_batch_gather(b, op, grads, axis, batch_dims), None, None]


@gradient("Gather")
def _gather_v1(b, op, grads):
    return [_gather(b, op, grads, 0), None]


@gradient("GatherNd")
def _gather_nd(b, op, grads):
    params, indices = op.inputs
    shape = b.shape(params, b.dtype(indices))
    return [b.op("ScatterNd", [indices, grads[0], shape]), None]


@gradient("ScatterNd")
def _scatter_nd(b, op, grads):
    indices = op.inputs[0]
    return [None, b.op("GatherNd", [grads[0], indices]), None]


@gradient("ResourceGather")
def _resource_gather(b, op, grads):
    """TensorFlow's _GatherGrad for ResourceGather, densified as GatherV2's above: the rows
    of g, reshaped to [size(indices)] + params.shape[1:], summed by index into
    VariableShape(resource). TensorFlow's rule ignores batch_dims (its reshape fails at run
    time for batch_dims > 0), so that case is refused here when the gradient is built."""
    if int(op.attr("batch_dims", 0)) != 0:
        raise _unsupported(op, f"batch_dims {int(op.attr('batch_dims', 0))}")
    handle, indices = op.inputs
    params_shape = b.op("VariableShape", [handle], {"out_type": I32})
    size = b.op("ExpandDims", [b.op("Size", [indices], {"out_type": I32}), b.const(0, I32)])
    values = b.op("Reshape", [grads[0], b.op("ConcatV2", [size, _dims(b, params_shape, 1),
                                                          b.const(0, I32)])])
    rows = b.op("UnsortedSegmentSum", [values, b.op("Reshape", [indices, size]),
                                       _dim(b, params_shape, 0)])
    return [rows, None]
