"""Gradients of the segment reductions, the sparse-segment reductions, UnsortedSegmentSum and
Roll (TensorFlow's math_grad.py / manip_grad.py rules).

    Before: y = SparseSegmentMean(d, idx, ids)
    After:  UnsortedSegmentSum(Gather(g, ids) / Gather(count, ids), idx, Shape(d)[0])
    Before: y = SegmentMax(d, ids)
    After:  Select(d == Gather(y, ids), Gather(g / SegmentSum(d == Gather(y, ids)), ids), 0)

Ties in SegmentMax/Min and UnsortedSegmentMax/Min share the gradient equally, as in
TensorFlow.
"""
from tfg.passes.grad.registry import gradient
from tfg.schemas.dtypes import DType

I32 = DType.INT32


def _column(b, v, like):
    """v [k] reshaped to [k, 1, ..., 1] with like's rank, to scale rows of like."""
    ones = b.op("Fill", [b.op("ExpandDims", [b.op("Sub", [b.op("Rank", [like]),
                                                          b.const(1, I32)]),
                                             b.const(0, I32)]),
                         b.const(1, I32)])
    return b.op("Reshape", [v, b.op("ConcatV2", [b.const([-1], I32), ones, b.const(0, I32)])])


def _rows_of(b, t):
    """t's first dimension, as a scalar int32 tensor."""
    return b.op("StridedSlice", [b.shape(t), b.const([0], I32), b.const([1], I32),
                                 b.const([1], I32)], {"shrink_axis_mask": 1})


def _gather(b, params, ids):
    return b.op("GatherV2", [params, ids, b.const(0, I32)], {"batch_dims": 0})


def _float_ones(b, ids, like):
    return b.op("Cast", [b.op("OnesLike", [ids])], {"DstT": b.dtype(like)})


@gradient("UnsortedSegmentSum")
def _unsorted_segment_sum(b, op, grads):
    """Gather of the output gradient; negative ids (dropped by the op) get zeros."""
    return [_gather_dropping_negatives(b, grads[0], op.inputs[1])[0], None, None]


@gradient("SegmentSum")
def _segment_sum(b, op, grads):
    return [_gather(b, grads[0], op.inputs[1]), None]


@gradient("SegmentMean")
def _segment_mean(b, op, grads):
    data, ids = op.inputs
    counts = b.op("SegmentSum", [_float_ones(b, ids, grads[0]), ids])
    scaled = b.op("RealDiv", [grads[0], _column(b, counts, grads[0])])
    return [_gather(b, scaled, ids), None]


@gradient("SegmentMax", "SegmentMin")
def _segment_min_max(b, op, grads):
    data, ids = op.inputs
    selected = b.op("Equal", [data, _gather(b, op.outputs[0], ids)])
    count = b.op("SegmentSum", [b.op("Cast", [selected], {"DstT": b.dtype(data)}), ids])
    shared = _gather(b, b.op("DivNoNan", [grads[0], count]), ids)
    return [b.op("SelectV2", [selected, shared, b.op("ZerosLike", [shared])]), None]


def _sparse_segment(b, op, grads, kind):
    data, indices, ids = op.inputs[:3]
    rows = _gather(b, grads[0], ids)
    if kind != "Sum":
        counts = b.op("UnsortedSegmentSum", [_float_ones(b, ids, grads[0]), ids,
                                              _rows_of(b, grads[0])])
        per_row = _gather(b, counts, ids)
        if kind == "SqrtN":
            per_row = b.op("Sqrt", [per_row])
        rows = b.op("RealDiv", [rows, _column(b, per_row, rows)])
    dx = b.op("UnsortedSegmentSum", [rows, indices, _rows_of(b, data)])
    return [dx] + [None] * (len(op.inputs) - 1)


for _kind in ("Sum", "Mean", "SqrtN"):
    for _suffix in ("", "WithNumSegments"):
        gradient(f"SparseSegment{_kind}{_suffix}")(
            lambda b, op, grads, kind=_kind: _sparse_segment(b, op, grads, kind))


@gradient("Roll")
def _roll(b, op, grads):
    return [b.op("Roll", [grads[0], b.op("Neg", [op.inputs[1]]), op.inputs[2]]), None, None]


def _gather_dropping_negatives(b, params, ids):
    """(Gather of params at max(ids, 0), zero where ids < 0, ids >= 0 reshaped to broadcast
    over the gathered rows) -- TensorFlow's _GatherDropNegatives."""
    zero = b.op("ZerosLike", [ids])
    gathered = _gather(b, params, b.op("Maximum", [ids, zero]))
    extra = b.op("Sub", [b.op("Rank", [gathered]), b.op("Rank", [ids])])
    shape = b.op("ConcatV2", [b.op("Shape", [ids], {"out_type": I32}),
                              b.op("Fill", [b.op("ExpandDims", [extra, b.const(0, I32)]),
                                            b.const(1, I32)]), b.const(0, I32)])
    keep = b.op("Reshape", [b.op("GreaterEqual", [ids, zero]), shape])
    return b.op("SelectV2", [keep, gathered, b.op("ZerosLike", [gathered])]), keep


@gradient("UnsortedSegmentMax", "UnsortedSegmentMin")
def _unsorted_segment_min_max(b, op, grads):
    """The gradient goes to the rows equal to their segment's result, shared equally."""
    data, ids, n = op.inputs
    picked, keep = _gather_dropping_negatives(b, op.outputs[0], ids)
    selected = b.op("LogicalAnd", [b.op("Equal", [data, picked]), keep])
    count = b.op("UnsortedSegmentSum", [b.op("Cast", [selected], {"DstT": b.dtype(data)}),
                                        ids, n])
    shared, _ = _gather_dropping_negatives(b, b.op("DivNoNan", [grads[0], count]), ids)
    return [b.op("SelectV2", [selected, shared, b.op("ZerosLike", [shared])]), None, None]


@gradient("UnsortedSegmentProd")
def _unsorted_segment_prod(b, op, grads):
    """d prod / d x_i = the product of the segment's other rows: prod / x_i, or, for the one
    zero of a segment, the product of its non-zero rows (two zeros: 0 everywhere)."""
    data, ids, n = op.inputs
    is_zero = b.op("Equal", [data, b.op("ZerosLike", [data])])
    zeros = b.op("UnsortedSegmentSum", [b.op("Cast", [is_zero], {"DstT": I32}), ids, n])
    g = b.op("SelectV2", [b.op("Greater", [zeros, b.const(1, I32)]),
                          b.op("ZerosLike", [grads[0]]), grads[0]])
    ones = b.op("OnesLike", [data])
    non_zero_prod = b.op("UnsortedSegmentProd", [b.op("SelectV2", [is_zero, ones, data]),
                                                 ids, n])
    prod, _ = _gather_dropping_negatives(b, op.outputs[0], ids)
    others, _ = _gather_dropping_negatives(b, non_zero_prod, ids)
    by_el = b.op("DivNoNan", [prod, data])
    partial = b.op("SelectV2", [is_zero, others, by_el])
    gathered, _ = _gather_dropping_negatives(b, g, ids)
    return [b.op("Mul", [gathered, partial]), None, None]


@gradient("SegmentProd")
def _segment_prod(b, op, grads):
    """TensorFlow's _SegmentProdGrad: prod / x_i, for a segment's one zero the product of its
    other rows, 0 throughout a segment with two zeros or more."""
    data, ids = op.inputs
    is_zero = b.op("Equal", [data, b.scalar_like(0, data)])
    zeros = b.op("SegmentSum", [b.op("Cast", [is_zero], {"DstT": I32}), ids])
    g = b.op("SelectV2", [b.op("Greater", [zeros, b.const(1, I32)]),
                          b.op("ZerosLike", [grads[0]]), grads[0]])
    non_zero_data = b.op("SelectV2", [is_zero, b.op("OnesLike", [data]), data])
    non_zero_prod = b.op("SegmentProd", [non_zero_data, ids])
    by_el = b.op("RealDiv", [_gather(b, op.outputs[0], ids), non_zero_data])
    partial = b.op("SelectV2", [is_zero, _gather(b, non_zero_prod, ids), by_el])
    return [b.op("Mul", [_gather(b, g, ids), partial]), None]
