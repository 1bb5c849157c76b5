"""Gradients of element-wise maths, matrix products, reductions and scans (TensorFlow's
math_grad.py rules).

    Before: y = Tanh(x)                  After: gradients/y_grad/TanhGrad = TanhGrad(y, g)
    Before: z = Mul(x[3,1], w[1,4])      After: Mul(g, w), Mul(x, g), each Sum+Reshape'd back
                                          over BroadcastGradientArgs(Shape(x), Shape(w))

Complex inputs get their gradient in the conjugate direction, as TensorFlow's: Mul(g, Conj(w))
and so on (registry.conj: a Conj node for complex dtypes only, real graphs are unchanged).
"""
import math

from tfg.passes.grad.registry import (
    broadcast_binary, conj, gradient, identity_gradient, no_gradient, unary)
from tfg.schemas.dtypes import DType


def _mul(b, x, y):
    return b.op("Mul", [x, y])


# --- unary element-wise --------------------------------------------------------------------
@unary("Neg")
def _neg(b, op, g):
    return b.op("Neg", [g])


@unary("Abs")
def _abs(b, op, g):
    return _mul(b, g, b.op("Sign", [op.inputs[0]]))


@unary("Square")
def _square(b, op, g):
    x = conj(b, op.inputs[0])
    return _mul(b, g, _mul(b, x, b.scalar_like(2, x)))


@unary("Sqrt")
def _sqrt(b, op, g):
    return b.op("SqrtGrad", [op.outputs[0], g])


@unary("Rsqrt")
def _rsqrt(b, op, g):
    return b.op("RsqrtGrad", [op.outputs[0], g])


@unary("Reciprocal", "Inv")
def _reciprocal(b, op, g):
    return b.op("ReciprocalGrad", [op.outputs[0], g])


@unary("Exp")
def _exp(b, op, g):
    return _mul(b, g, conj(b, op.outputs[0]))


@unary("Expm1")
def _expm1(b, op, g):
    return _mul(b, g, b.op("Exp", [conj(b, op.inputs[0])]))


@unary("Log")
def _log(b, op, g):
    return _mul(b, g, b.op("Reciprocal", [conj(b, op.inputs[0])]))


@unary("Log1p")
def _log1p(b, op, g):
    x = conj(b, op.inputs[0])
    return _mul(b, g, b.op("Reciprocal", [b.op("AddV2", [b.scalar_like(1, x), x])]))


@unary("Sin")
def _sin(b, op, g):
    return _mul(b, g, b.op("Cos", [conj(b, op.inputs[0])]))


@unary("Cos")
def _cos(b, op, g):
    return _mul(b, g, b.op("Neg", [b.op("Sin", [conj(b, op.inputs[0])])]))


@unary("Tan")
def _tan(b, op, g):
    secx = b.op("Reciprocal", [b.op("Cos", [conj(b, op.inputs[0])])])
    return _mul(b, g, b.op("Square", [secx]))


@unary("Tanh")
def _tanh(b, op, g):
    return b.op("TanhGrad", [conj(b, op.outputs[0]), g])


@unary("Sigmoid")
def _sigmoid(b, op, g):
    return b.op("SigmoidGrad", [conj(b, op.outputs[0]), g])


@unary("Erf")
def _erf(b, op, g):
    x = conj(b, op.inputs[0])
    two_over_root_pi = b.scalar_like(2 / math.sqrt(math.pi), x)
    e = b.op("Exp", [b.op("Neg", [b.op("Square", [x])])])
    return _mul(b, g, _mul(b, two_over_root_pi, e))


@unary("Erfc")
def _erfc(b, op, g):
    x = conj(b, op.inputs[0])
    minus_two_over_root_pi = b.scalar_like(-2 / math.sqrt(math.pi), x)
    e = b.op("Exp", [b.op("Neg", [b.op("Square", [x])])])
    return _mul(b, g, _mul(b, minus_two_over_root_pi, e))


@unary("Sign")
def _sign(b, op, g):
    return b.zeros_like(op.inputs[0])


@unary("Cast")
def _cast(b, op, g):
    src, dst = op.input_dtype(0), op.output_dtype(0)
    if src is None or dst is None or not (src.is_differentiable and dst.is_differentiable):
        return None
    return b.op("Cast", [g], {"SrcT": dst, "DstT": src})


identity_gradient("Identity", "RefIdentity", "Snapshot", "EnsureShape", "CheckNumerics",
                  "PlaceholderWithDefault")
@unary("Asinh")
def _asinh(b, op, g):
    return b.op("RealDiv", [g, b.op("Cosh", [conj(b, op.outputs[0])])])


@unary("Acosh")
def _acosh(b, op, g):
    return b.op("RealDiv", [g, b.op("Sinh", [conj(b, op.outputs[0])])])


@unary("Atanh")
def _atanh(b, op, g):
    x = conj(b, op.inputs[0])
    inv = b.op("Reciprocal", [b.op("Sub", [b.scalar_like(1, g), b.op("Square", [x])])])
    return _mul(b, g, inv)


@unary("Erfinv")
def _erfinv(b, op, g):
    root_pi_over_two = b.scalar_like(math.sqrt(math.pi) / 2, g)
    return _mul(b, _mul(b, g, root_pi_over_two), b.op("Exp", [b.op("Square", [op.outputs[0]])]))


@unary("Ndtri")
def _ndtri(b, op, g):
    root_two_pi = b.scalar_like(math.sqrt(2 * math.pi), g)
    half_square = b.op("RealDiv", [b.op("Square", [op.outputs[0]]), b.scalar_like(2, g)])
    return _mul(b, _mul(b, g, root_two_pi), b.op("Exp", [half_square]))


@unary("BesselI0")
def _bessel_i0(b, op, g):
    return _mul(b, g, b.op("BesselI1", [op.inputs[0]]))


@unary("BesselI0e")
def _bessel_i0e(b, op, g):
    x, y = op.inputs[0], op.outputs[0]
    partial = b.op("Sub", [b.op("BesselI1e", [x]), _mul(b, b.op("Sign", [x]), y)])
    return _mul(b, g, partial)


@unary("BesselI1")
def _bessel_i1(b, op, g):
    # I1'(x) = I0(x) - I1(x) / x, 1 at x = 0 (where the formula divides by zero)
    x, y = op.inputs[0], op.outputs[0]
    slope = b.op("Sub", [b.op("BesselI0", [x]), b.op("RealDiv", [y, x])])
    at_zero = b.op("Equal", [x, b.scalar_like(0, x)])
    return _mul(b, g, b.op("SelectV2", [at_zero, b.scalar_like(1, x), slope]))


@unary("BesselI1e")
def _bessel_i1e(b, op, g):
    # I1e'(x) = I0e(x) - I1e(x) (sign(x) + 1 / x), 1/2 at x = 0
    x, y = op.inputs[0], op.outputs[0]
    factor = b.op("AddV2", [b.op("Sign", [x]), b.op("Reciprocal", [x])])
    slope = b.op("Sub", [b.op("BesselI0e", [x]), _mul(b, y, factor)])
    at_zero = b.op("Equal", [x, b.scalar_like(0, x)])
    return _mul(b, g, b.op("SelectV2", [at_zero, b.scalar_like(0.5, x), slope]))


# tf.math.special's Dawson, exponential, Fresnel and Spence integrals (math_grad.py's rules)
@unary("Dawsn")
def _dawsn(b, op, g):
    two_xy = _mul(b, _mul(b, b.scalar_like(2, g), op.inputs[0]), op.outputs[0])
    return _mul(b, g, b.op("Sub", [b.scalar_like(1, g), two_xy]))


@unary("Expint")
def _expint(b, op, g):
    x = op.inputs[0]
    return b.op("RealDiv", [_mul(b, g, b.op("Exp", [x])), x])


def _fresnel_grad(trig):
    def rule(b, op, g):
        x = op.inputs[0]
        phase = _mul(b, b.scalar_like(math.pi / 2, g), b.op("Square", [x]))
        return _mul(b, g, b.op(trig, [phase]))
    return rule


unary("FresnelCos")(_fresnel_grad("Cos"))
unary("FresnelSin")(_fresnel_grad("Sin"))


@unary("Spence")
def _spence(b, op, g):
    # log(x) / (1 - x), -1 at x = 1 (where it is 0 / 0)
    x = op.inputs[0]
    slope = b.op("RealDiv", [b.op("Log", [x]), b.op("Sub", [b.scalar_like(1, x), x])])
    at_one = b.op("Equal", [x, b.scalar_like(1, x)])
    minus_ones = b.op("Neg", [b.op("OnesLike", [x])])
    return _mul(b, g, b.op("SelectV2", [at_one, minus_ones, slope]))


# Mod has no gradient in TensorFlow either (tf.gradients raises LookupError): not registered
no_gradient("BitwiseAnd", "BitwiseOr", "BitwiseXor", "Invert", "PopulationCount",
            "LeftShift", "RightShift")
no_gradient("Floor", "Ceil", "Round", "Rint", "IsFinite", "IsNan", "IsInf", "LogicalNot",
            "LogicalAnd", "LogicalOr", "Equal", "NotEqual", "Less", "LessEqual", "Greater",
            "GreaterEqual", "FloorDiv", "TruncateDiv", "TruncateMod", "ArgMax", "ArgMin",
            "All", "Any")


# --- second order of the *Grad ops ----------------------------------------------------------
@gradient("TanhGrad")
def _tanh_grad_grad(b, op, grads):
    y, dy = conj(b, op.inputs[0]), conj(b, op.inputs[1])
    g = grads[0]
    return [_mul(b, _mul(b, g, b.scalar_like(-2, y)), _mul(b, dy, y)),
            b.op("TanhGrad", [y, g])]


@gradient("SigmoidGrad")
def _sigmoid_grad_grad(b, op, grads):
    y, dy = conj(b, op.inputs[0]), conj(b, op.inputs[1])
    gb = _mul(b, grads[0], dy)
    return [b.op("Sub", [gb, _mul(b, _mul(b, b.scalar_like(2, y), gb), y)]),
            b.op("SigmoidGrad", [y, grads[0]])]


@gradient("SqrtGrad")
def _sqrt_grad_grad(b, op, grads):
    y = op.inputs[0]
    ga = b.op("RealDiv", [grads[0], y])
    return [_mul(b, b.op("Neg", [conj(b, ga)]), op.outputs[0]),
            _mul(b, b.scalar_like(0.5, y), ga)]


@gradient("RsqrtGrad")
def _rsqrt_grad_grad(b, op, grads):
    a, dy = conj(b, op.inputs[0]), op.inputs[1]
    ga = _mul(b, _mul(b, b.scalar_like(-1.5, a), conj(b, grads[0])),
              _mul(b, dy, b.op("Square", [a])))
    return [ga, b.op("RsqrtGrad", [a, grads[0]])]


@gradient("ReciprocalGrad", "InvGrad")
def _reciprocal_grad_grad(b, op, grads):
    a, dy = conj(b, op.inputs[0]), op.inputs[1]
    return [_mul(b, _mul(b, conj(b, grads[0]), b.scalar_like(-2, a)), _mul(b, dy, a)),
            b.op("ReciprocalGrad", [a, grads[0]])]


# --- binary element-wise with broadcasting -------------------------------------------------
@gradient("AddV2", "Add")
def _add(b, op, grads):
    x, y = op.inputs
    return list(broadcast_binary(b, x, y, grads[0], grads[0]))


@gradient("Sub")
def _sub(b, op, grads):
    x, y = op.inputs
    return list(broadcast_binary(b, x, y, grads[0], b.op("Neg", [grads[0]])))


@gradient("Mul")
def _mul_grad(b, op, grads):
    x, y = op.inputs
    g = grads[0]
    return list(broadcast_binary(b, x, y, _mul(b, g, conj(b, y)), _mul(b, conj(b, x), g)))


@gradient("RealDiv", "Div")
def _div(b, op, grads):
    x, y = op.inputs
    cx, cy = conj(b, x), conj(b, y)
    g = grads[0]
    gx = b.op("RealDiv", [g, cy])
    gy = _mul(b, g, b.op("RealDiv", [b.op("RealDiv", [b.op("Neg", [cx]), cy]), cy]))
    return list(broadcast_binary(b, x, y, gx, gy))


@gradient("DivNoNan")
def _div_no_nan(b, op, grads):
    x, y = op.inputs
    cx, cy = conj(b, x), conj(b, y)
    g = grads[0]
    gx = b.op("DivNoNan", [g, cy])
    gy = _mul(b, g, b.op("DivNoNan", [b.op("DivNoNan", [b.op("Neg", [cx]), cy]), cy]))
    return list(broadcast_binary(b, x, y, gx, gy))


@gradient("Atan2")
def _atan2(b, op, grads):
    y, x = op.inputs
    g = grads[0]
    scale = b.op("RealDiv", [g, b.op("AddV2", [b.op("Square", [x]), b.op("Square", [y])])])
    return list(broadcast_binary(b, y, x, _mul(b, x, scale), b.op("Neg", [_mul(b, y, scale)])))


@gradient("Pow")
def _pow(b, op, grads):
    x, y = op.inputs
    cx, cy = conj(b, x), conj(b, y)
    z, g = op.outputs[0], grads[0]
    gx = _mul(b, _mul(b, g, cy), b.op("Pow", [cx, b.op("Sub", [cy, b.scalar_like(1, y)])]))
    if (op.input_dtype(0) or DType.FLOAT).is_complex:  # a negative real part is fine
        mask = b.op("NotEqual", [cx, b.scalar_like(0, x)])
    else:  # no sensible real log of x < 0: 0 there
        mask = b.op("Greater", [x, b.scalar_like(0, x)])
    safe_x = b.op("SelectV2", [mask, cx, b.op("OnesLike", [x])])
    log_x = b.op("SelectV2", [mask, b.op("Log", [safe_x]), b.zeros_like(x)])
    gy = _mul(b, _mul(b, g, conj(b, z)), log_x)
    return list(broadcast_binary(b, x, y, gx, gy))


def _max_min(selector):
    def grad_fn(b, op, grads):
        x, y = op.inputs
        g = grads[0]
        xmask = b.op(selector, [x, y])
        zeros = b.zeros_like(g)
        gx = b.op("SelectV2", [xmask, g, zeros])
        gy = b.op("SelectV2", [xmask, zeros, g])
        return list(broadcast_binary(b, x, y, gx, gy))

    return grad_fn


gradient("Maximum")(_max_min("GreaterEqual"))
gradient("Minimum")(_max_min("LessEqual"))


@gradient("SquaredDifference")
def _squared_difference(b, op, grads):
    x, y = op.inputs
    d = _mul(b, _mul(b, b.scalar_like(2, grads[0]), grads[0]), b.op("Sub", [x, y]))
    return list(broadcast_binary(b, x, y, d, b.op("Neg", [d])))


@gradient("FloorMod")
def _floor_mod(b, op, grads):
    x, y = op.inputs
    if not (op.input_dtype(0) or DType.INT32).is_differentiable:
        return [None, None]
    floor_xy = b.op("Floor", [b.op("RealDiv", [x, y])])
    gy = _mul(b, grads[0], b.op("Neg", [floor_xy]))
    return list(broadcast_binary(b, x, y, grads[0], gy))


def _x_times_grad(log_op, shift):
    """Xlogy / Xlog1py: d/dx = f(x != 0, y) (0 where x is 0), d/dy = x / (y + shift)."""
    def grad_fn(b, op, grads):
        x, y = op.inputs
        g = grads[0]
        nonzero = b.op("NotEqual", [x, b.scalar_like(0, x)])
        not_zero_x = b.op("Cast", [nonzero], {"SrcT": DType.BOOL, "DstT": op.input_dtype(0)})
        partial_x = b.op(log_op, [not_zero_x, y])
        shifted = y if not shift else b.op("AddV2", [y, b.scalar_like(shift, y)])
        partial_y = b.op("Xdivy", [x, shifted])
        return list(broadcast_binary(b, x, y, _mul(b, partial_x, g), _mul(b, partial_y, g)))
    return grad_fn


gradient("Xlogy")(_x_times_grad("Xlogy", 0))
gradient("Xlog1py")(_x_times_grad("Xlog1py", 1))


@gradient("MulNoNan")
def _mul_no_nan(b, op, grads):
    x, y = op.inputs
    g = grads[0]
    return list(broadcast_binary(b, x, y, b.op("MulNoNan", [g, y]), b.op("MulNoNan", [x, g])))


@gradient("ClipByValue")
def _clip_by_value(b, op, grads):
    """g where lo <= t <= hi, else to the bound that clipped it (summed over t's elements
    where a bound is a scalar)."""
    t, lo, hi = op.inputs
    g = grads[0]
    zeros = b.zeros_like(g)
    below = b.op("Less", [t, lo])
    above = b.op("Greater", [t, hi])
    gt = b.op("Select", [b.op("LogicalOr", [below, above]), zeros, g])
    g_lo = broadcast_binary(b, t, lo, None, b.op("Select", [below, g, zeros]))[1]
    g_hi = broadcast_binary(b, t, hi, None, b.op("Select", [above, g, zeros]))[1]
    return [gt, g_lo, g_hi]


@gradient("AddN", "AccumulateNV2")  # (tf.math.accumulate_n's: AddN's, TensorFlow's math_ops.py)
def _add_n(b, op, grads):
    return [grads[0]] * len(op.inputs)


@gradient("Select")
def _select(b, op, grads):
    c, x, _ = op.inputs
    zeros = b.zeros_like(x)
    return [None, b.op("Select", [c, grads[0], zeros]), b.op("Select", [c, zeros, grads[0]])]


@gradient("SelectV2")
def _select_v2(b, op, grads):
    c, x, y = op.inputs
    g = grads[0]
    zeros = b.zeros_like(g)
    out_shape = b.shape(op.outputs[0])
    out = [None]
    for t, picked in ((x, b.op("SelectV2", [c, g, zeros])), (y, b.op("SelectV2", [c, zeros, g]))):
        sx = b.shape(t)
        axes = b.out(b.op("BroadcastGradientArgs", [sx, out_shape]), 0)
        summed = b.op("Sum", [picked, axes], {"keep_dims": True})
        out.append(b.op("Reshape", [summed, sx]))
    return out


# --- matrix products -----------------------------------------------------------------------
@gradient("MatMul")
def _matmul(b, op, grads):
    a, w = conj(b, op.inputs[0]), conj(b, op.inputs[1])
    g = grads[0]
    ta, tb = bool(op.attr("transpose_a", False)), bool(op.attr("transpose_b", False))

    def mm(p, q, tp=False, tq=False):
        return b.op("MatMul", [p, q], {"transpose_a": tp, "transpose_b": tq})

    if not ta and not tb:
        return [mm(g, w, tq=True), mm(a, g, tp=True)]
    if not ta and tb:
        return [mm(g, w), mm(g, a, tp=True)]
    if ta and not tb:
        return [mm(w, g, tq=True), mm(a, g)]
    return [mm(w, g, True, True), mm(g, a, True, True)]


@gradient("BatchMatMulV2", "BatchMatMul", "BatchMatMulV3")
def _batch_matmul(b, op, grads):
    x, y = op.inputs
    g = grads[0]
    ax, ay = bool(op.attr("adj_x", False)), bool(op.attr("adj_y", False))

    def bmm(p, q, ap=False, aq=False):
        attrs = {"adj_x": ap, "adj_y": aq}
        if op.type == "BatchMatMulV3":
            attrs["Tout"] = op.output_dtype(0)
        return b.op(op.type if op.type != "BatchMatMul" else "BatchMatMulV2", [p, q], attrs)

    if not ax and not ay:
        gx, gy = bmm(g, y, aq=True), bmm(x, g, ap=True)
    elif not ax and ay:
        gx, gy = bmm(g, y), bmm(g, x, ap=True)
    elif ax and not ay:
        gx, gy = bmm(y, g, aq=True), bmm(x, g)
    else:
        gx, gy = bmm(y, g, True, True), bmm(g, x, True, True)
    if op.type == "BatchMatMul":  # no broadcasting of batch dimensions
        return [gx, gy]
    sx, sy = b.shape(x), b.shape(y)
    batch = [b.op("StridedSlice", [s, b.const([0], DType.INT32), b.const([-2], DType.INT32),
                                   b.const([1], DType.INT32)]) for s in (sx, sy)]
    args = b.op("BroadcastGradientArgs", batch)
    gx = b.op("Reshape", [b.op("Sum", [gx, b.out(args, 0)]), sx])
    gy = b.op("Reshape", [b.op("Sum", [gy, b.out(args, 1)]), sy])
    return [gx, gy]


@unary("Lgamma")
def _lgamma(b, op, g):
    return b.op("Mul", [g, b.op("Digamma", [op.inputs[0]])])


# --- more unary maths (TensorFlow's math_grad.py; complex inputs in the conjugate direction)
@unary("Sinh")
def _sinh(b, op, g):
    return _mul(b, g, b.op("Cosh", [conj(b, op.inputs[0])]))


@unary("Cosh")
def _cosh(b, op, g):
    return _mul(b, g, b.op("Sinh", [conj(b, op.inputs[0])]))


def _one_minus_square_root_inverse(b, op, g):
    """1 / sqrt(1 - conj(x)^2): the slope of Asin (and, negated, of Acos)."""
    x2 = b.op("Square", [conj(b, op.inputs[0])])
    den = b.op("Sqrt", [b.op("Sub", [b.scalar_like(1, g), x2])])
    return b.op("Reciprocal", [den])


@unary("Asin")
def _asin(b, op, g):
    return _mul(b, g, _one_minus_square_root_inverse(b, op, g))


@unary("Acos")
def _acos(b, op, g):
    return _mul(b, b.op("Neg", [g]), _one_minus_square_root_inverse(b, op, g))


@unary("Atan")
def _atan(b, op, g):
    x2 = b.op("Square", [conj(b, op.inputs[0])])
    return _mul(b, g, b.op("Reciprocal", [b.op("AddV2", [b.scalar_like(1, g), x2])]))


@unary("Digamma")
def _digamma(b, op, g):
    """g * polygamma(1, conj(x))."""
    x = conj(b, op.inputs[0])
    return _mul(b, g, b.op("Polygamma", [b.scalar_like(1, x), x]))


# --- the two-argument special functions (math_grad.py): TensorFlow differentiates Zeta in q
# only, Polygamma in x only (None for the other input)
def _reduced(b, x, y, gx, gy):
    return list(broadcast_binary(b, x, y, gx, gy))


@gradient("Zeta")
def _zeta(b, op, grads):
    """d/dq zeta(x, q) = -x zeta(x + 1, q)."""
    x, q = (conj(b, t) for t in op.inputs)
    partial_q = _mul(b, b.op("Neg", [x]), b.op("Zeta", [b.op("AddV2", [x, b.scalar_like(1, x)]),
                                                         q]))
    return _reduced(b, op.inputs[0], op.inputs[1], None, _mul(b, partial_q, grads[0]))


@gradient("Polygamma")
def _polygamma(b, op, grads):
    """d/dx polygamma(n, x) = polygamma(n + 1, x)."""
    n, x = (conj(b, t) for t in op.inputs)
    partial_x = b.op("Polygamma", [b.op("AddV2", [n, b.scalar_like(1, n)]), x])
    return _reduced(b, op.inputs[0], op.inputs[1], None, _mul(b, partial_x, grads[0]))


def _igamma_partials(b, op, grads):
    """TensorFlow's _IgammaGrad: IgammaGradA(a, x) for a, and for x the density
    exp(-x + (a - 1) log(x) - lgamma(a)), computed in log space."""
    a, x = op.inputs
    partial_a = b.op("IgammaGradA", [a, x])
    log_density = b.op("Sub", [b.op("AddV2", [b.op("Neg", [x]), _mul(
        b, b.op("Sub", [a, b.scalar_like(1, a)]), b.op("Log", [x]))]), b.op("Lgamma", [a])])
    partial_x = b.op("Exp", [log_density])
    return _reduced(b, a, x, _mul(b, partial_a, grads[0]), _mul(b, partial_x, grads[0]))


@gradient("Igamma")
def _igamma(b, op, grads):
    return _igamma_partials(b, op, grads)


@gradient("Igammac")
def _igammac(b, op, grads):
    """The negated gradients of Igamma (igammac = 1 - igamma)."""
    return [b.op("Neg", [d]) for d in _igamma_partials(b, op, grads)]


@gradient("Xdivy")
def _xdivy(b, op, grads):
    """d/dx = xdivy(x != 0, y) (0 where x is 0), d/dy = xdivy(-x, y^2)."""
    x, y = op.inputs
    g = grads[0]
    nonzero = b.op("NotEqual", [x, b.scalar_like(0, x)])
    not_zero_x = b.op("Cast", [nonzero], {"SrcT": DType.BOOL, "DstT": op.input_dtype(0)})
    partial_x = b.op("Xdivy", [not_zero_x, y])
    partial_y = b.op("Xdivy", [b.op("Neg", [x]), b.op("Pow", [y, b.scalar_like(2, y)])])
    return list(broadcast_binary(b, x, y, _mul(b, partial_x, g), _mul(b, partial_y, g)))
