"""Gradients of reductions (Sum, Mean, Max, Min, Prod, L2Loss) and scans (Cumsum, Cumprod),
as TensorFlow's math_grad.py computes them: the output gradient is reshaped to the reduction's
shape with kept dims and broadcast back over the reduced axes.

    Before: y = Sum(x[2,3,4], axes=[1])
    After:  BroadcastTo(Reshape(g, DynamicStitch([range(3), [1]], [Shape(x), [1]])), Shape(x))
"""
from tfg.passes.grad.registry import gradient
from tfg.schemas.dtypes import DType


def _mul(b, x, y):
    return b.op("Mul", [x, y])


# --- reductions ----------------------------------------------------------------------------
def _axes_int32(b, op):
    axes = op.inputs[1]
    if op.input_dtype(1) != DType.INT32:
        axes = b.op("Cast", [axes], {"DstT": DType.INT32})
    return axes


def reduced_shape(b, input_shape, axes):
    """The shape of a reduction's output with kept dims (TensorFlow's math_ops.reduced_shape)."""
    rank = b.op("Size", [input_shape])
    # max(rank, 1): a scalar's reduction has no axes, and nothing must divide by zero.
    modulus = b.op("Maximum", [rank, b.const(1, DType.INT32)])
    axes = b.op("FloorMod", [b.op("AddV2", [axes, rank]), modulus])
    ones = b.op("Fill", [b.shape(axes), b.const(1, DType.INT32)])
    full = b.op("Range", [b.const(0, DType.INT32), rank, b.const(1, DType.INT32)])
    return b.op("DynamicStitch", [full, axes, input_shape, ones], {"N": 2})


def _sum_grad_to_input(b, op, g):
    """g (shaped like the reduction's output) broadcast back to the input's shape."""
    shape = b.shape(op.inputs[0])
    kept = reduced_shape(b, shape, _axes_int32(b, op))
    return b.op("BroadcastTo", [b.op("Reshape", [g, kept]), shape])


@gradient("Sum")
def _sum(b, op, grads):
    return [_sum_grad_to_input(b, op, grads[0]), None]


@gradient("Mean")
def _mean(b, op, grads):
    x = op.inputs[0]
    full = _sum_grad_to_input(b, op, grads[0])
    factor = b.op("FloorDiv", [b.op("Size", [x]), b.op("Maximum", [
        b.op("Size", [op.outputs[0]]), b.const(1, DType.INT32)])])
    return [b.op("RealDiv", [full, b.op("Cast", [factor], {"DstT": op.input_dtype(0)})]), None]


def _min_max(b, op, grads):
    x, y = op.inputs[0], op.outputs[0]
    shape = b.shape(x)
    kept = reduced_shape(b, shape, _axes_int32(b, op))
    y = b.op("Reshape", [y, kept])
    g = b.op("Reshape", [grads[0], kept])
    indicators = b.op("Cast", [b.op("Equal", [y, x])], {"DstT": op.input_dtype(0)})
    count = b.op("Reshape", [b.op("Sum", [indicators, op.inputs[1]]), kept])
    return [_mul(b, b.op("RealDiv", [indicators, count]), g), None]


gradient("Max", "Min")(_min_max)


@gradient("Prod")
def _prod(b, op, grads):
    """Products of everything but each element, with exclusive cumprods (zeros are fine)."""
    x = op.inputs[0]
    i32 = DType.INT32
    shape = b.shape(x)
    g = b.op("BroadcastTo", [b.op("Reshape", [grads[0], reduced_shape(
        b, shape, _axes_int32(b, op))]), shape])
    rank = b.op("Rank", [x])
    axes = b.op("Reshape", [_axes_int32(b, op), b.const([-1], i32)])
    reduced = b.op("FloorMod", [b.op("AddV2", [axes, rank]), rank])
    idx = b.op("Range", [b.const(0, i32), rank, b.const(1, i32)])
    other = b.op("ListDiff", [idx, reduced])
    perm = b.op("ConcatV2", [reduced, other, b.const(0, i32)])
    reduced_num = b.op("Prod", [b.op("GatherV2", [shape, reduced, b.const(0, i32)]),
                                b.const(0, i32)])
    other_num = b.op("Prod", [b.op("GatherV2", [shape, other, b.const(0, i32)]),
                              b.const(0, i32)])
    permuted = b.op("Transpose", [x, perm])
    flat = b.op("Reshape", [permuted, b.op("Pack", [reduced_num, other_num], {"axis": 0})])
    left = b.op("Cumprod", [flat, b.const(0, i32)], {"exclusive": True})
    right = b.op("Cumprod", [flat, b.const(0, i32)], {"exclusive": True, "reverse": True})
    y = b.op("Reshape", [_mul(b, left, right), b.shape(permuted)])
    out = _mul(b, g, b.op("Transpose", [y, b.op("InvertPermutation", [perm])]))
    return [b.op("Reshape", [out, shape]), None]


@gradient("L2Loss")
def _l2loss(b, op, grads):
    return [_mul(b, op.inputs[0], grads[0])]


# --- scans -----------------------------------------------------------------------------------
@gradient("Cumsum")
def _cumsum(b, op, grads):
    attrs = {"exclusive": bool(op.attr("exclusive", False)),
             "reverse": not bool(op.attr("reverse", False))}
    return [b.op("Cumsum", [grads[0], op.inputs[1]], attrs), None]


@gradient("Cumprod")
def _cumprod(b, op, grads):
    x, axis = op.inputs
    ex, rev = bool(op.attr("exclusive", False)), bool(op.attr("reverse", False))
    prod = b.op("Cumprod", [x, axis], {"exclusive": ex, "reverse": rev})
    out = b.op("Cumsum", [_mul(b, prod, grads[0]), axis], {"exclusive": ex, "reverse": not rev})
    return [b.op("RealDiv", [out, x]), None]
