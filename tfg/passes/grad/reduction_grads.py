"""Gradients of reductions (Sum, Mean, Max, Min, Prod, L2Loss) and scans (Cumsum, Cumprod),
as TensorFlow's math_grad.py computes them: the output gradient is reshaped to the reduction's
shape with kept dims and broadcast back over the reduced axes.

    Before: y = Sum(x[2,3,4], axes=[1])
    After:  Tile(Reshape(g, [2,1,4]), [1,3,1])          (shape and axes known when building)
    Else:   BroadcastTo(Reshape(g, DynamicStitch([range(rank), axes], [Shape(x), 1s])),
                        Shape(x))
"""
import numpy as np

from tfg.passes.grad.registry import conj, gradient
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


def static_reduction(b, op):
    """(input shape, kept-dims output shape) as tuples when the reduction's input shape and
    axes are known while building the gradient (TensorFlow's fast path), else None."""
    shape = b.static_shape(op.inputs[0])
    axes = b.static_value(op.inputs[1])
    if shape is None or axes is None:
        return None
    rank = len(shape)
    axes = np.asarray(axes).reshape(-1)
    if axes.dtype.kind not in "iu" or any(a < -rank or a >= rank for a in axes.tolist()):
        return None  # a bad axis: the dynamic path fails at run time, as the forward op does
    reduced = {int(a) % rank for a in axes.tolist()}
    return shape, tuple(1 if i in reduced else d for i, d in enumerate(shape))


def _kept_shape(b, op, shape=None):
    """The reduction's output shape with kept dims: a Const when known, else computed."""
    static = static_reduction(b, op)
    if static is not None:
        return b.const(list(static[1]), DType.INT32, name="kept_shape")
    return reduced_shape(b, shape if shape is not None else b.shape(op.inputs[0]),
                         _axes_int32(b, op))


def _sum_grad_to_input(b, op, g):
    """g (shaped like the reduction's output) broadcast back to the input's shape."""
    static = static_reduction(b, op)
    if static is not None:
        shape, kept = static
        if not op.attr("keep_dims", False):  # with kept dims g is shaped `kept` already
            g = b.op("Reshape", [g, b.const(list(kept), DType.INT32)])
        multiples = [d // k if k else 1 for d, k in zip(shape, kept)]
        if all(m == 1 for m in multiples):
            return g
        return b.op("Tile", [g, b.const(multiples, DType.INT32, name="multiples")])
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
    static = static_reduction(b, op)
    if static is not None:
        shape, kept = static
        factor = int(np.prod(shape, dtype=np.int64)) // max(int(np.prod(kept, dtype=np.int64)), 1)
        if factor == 1:
            return [full, None]
        return [b.op("RealDiv", [full, b.const(factor, op.input_dtype(0), name="factor")]), None]
    factor = b.op("FloorDiv", [b.op("Size", [x]), b.op("Maximum", [
        b.op("Size", [op.outputs[0]]), b.const(1, DType.INT32)])])
    return [b.op("RealDiv", [full, b.op("Cast", [factor], {"DstT": op.input_dtype(0)})]), None]


def _min_max(b, op, grads):
    x, y = op.inputs[0], op.outputs[0]
    kept = _kept_shape(b, op)
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
    static = static_reduction(b, op)
    if static is not None and int(np.prod(static[0], dtype=np.int64)) < 2 ** 31:
        return [_prod_static(b, op, grads[0], static[0]), None]
    shape = b.shape(x)
    g = b.op("BroadcastTo", [b.op("Reshape", [grads[0], _kept_shape(b, op, shape)]), shape])
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
    # complex x: the gradient is in the conjugate direction
    y = b.op("Reshape", [_mul(b, conj(b, left), conj(b, right)), b.shape(permuted)])
    out = _mul(b, g, b.op("Transpose", [y, b.op("InvertPermutation", [perm])]))
    return [b.op("Reshape", [out, shape]), None]


def _prod_static(b, op, g, shape):
    """_prod with the permutation and the flattened sizes computed while building."""
    i32 = DType.INT32
    rank = len(shape)
    reduced = list(dict.fromkeys(int(a) % rank for a in
                                 np.asarray(b.static_value(op.inputs[1])).reshape(-1).tolist()))
    other = [i for i in range(rank) if i not in reduced]
    perm = reduced + other
    size = (lambda dims: int(np.prod([shape[i] for i in dims], dtype=np.int64)))
    g = _sum_grad_to_input(b, op, g)
    permuted = b.op("Transpose", [op.inputs[0], b.const(perm, i32, name="perm")])
    flat = b.op("Reshape", [permuted, b.const([size(reduced), size(other)], i32)])
    zero = b.const(0, i32, name="axis")
    left = b.op("Cumprod", [flat, zero], {"exclusive": True})
    right = b.op("Cumprod", [flat, zero], {"exclusive": True, "reverse": True})
    y = b.op("Reshape", [_mul(b, conj(b, left), conj(b, right)),
                         b.const([shape[i] for i in perm], i32)])
    inverse = np.argsort(perm).tolist()
    return _mul(b, g, b.op("Transpose", [y, b.const(inverse, i32, name="inverse_perm")]))


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
    # DivNoNan, as TensorFlow: where x is 0 the gradient is 0 (not the NaN of 0 / 0)
    return [b.op("DivNoNan", [out, x]), None]


@gradient("EuclideanNorm")
def _euclidean_norm(b, op, grads):
    """x / (norm / g), norm and g with the reduced dims kept (TensorFlow's math_grad)."""
    norm, g = op.outputs[0], grads[0]
    if not op.attr("keep_dims", False):
        kept = _kept_shape(b, op)
        norm, g = b.op("Reshape", [norm, kept]), b.op("Reshape", [g, kept])
    return [b.op("RealDiv", [op.inputs[0], b.op("RealDiv", [norm, g])]), None]


def _lowest(dtype):
    """The dtype's most negative finite value (TensorFlow's dtype.min)."""
    if dtype.base == DType.BFLOAT16:
        return -3.3895313892515355e38
    return np.finfo(dtype.np).min


@gradient("CumulativeLogsumexp")
def _cumulative_logsumexp(b, op, grads):
    """exp(reversed cumulative logsumexp of log|g| - out, plus x), for the positive and the
    negative parts of g separately (logs of each, TensorFlow's stable formulation)."""
    x, axis = op.inputs
    out, g = op.outputs[0], grads[0]
    dtype = op.input_dtype(0)
    zero, lowest = b.const(0, dtype), b.const(_lowest(dtype), dtype, name="lowest")
    attrs = {"exclusive": bool(op.attr("exclusive", False)),
             "reverse": not bool(op.attr("reverse", False))}

    def part(log_g):
        scan = b.op("CumulativeLogsumexp", [b.op("Sub", [log_g, out]), axis], attrs)
        return b.op("Exp", [b.op("AddV2", [scan, x])])
    positive = b.op("SelectV2", [b.op("Greater", [g, zero]), b.op("Log", [g]), lowest])
    negative = b.op("SelectV2", [b.op("Less", [g, zero]), b.op("Log", [b.op("Neg", [g])]),
                                 lowest])
    return [b.op("Sub", [part(positive), part(negative)]), None]
