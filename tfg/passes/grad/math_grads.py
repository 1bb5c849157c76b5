"""Gradients of element-wise maths, matrix products, reductions and scans (TensorFlow's
math_grad.py rules).

    Before: y = Tanh(x)                  After: gradients/y_grad/TanhGrad = TanhGrad(y, g)
    Before: z = Mul(x[3,1], w[1,4])      After: Mul(g, w), Mul(x, g), each Sum+Reshape'd back
                                          over BroadcastGradientArgs(Shape(x), Shape(w))
"""
import math

from tfg.passes.grad.registry import (
    broadcast_binary, gradient, identity_gradient, no_gradient, unary)
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
    x = op.inputs[0]
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
    return _mul(b, g, op.outputs[0])


@unary("Expm1")
def _expm1(b, op, g):
    return _mul(b, g, b.op("Exp", [op.inputs[0]]))


@unary("Log")
def _log(b, op, g):
    return _mul(b, g, b.op("Reciprocal", [op.inputs[0]]))


@unary("Log1p")
def _log1p(b, op, g):
    x = op.inputs[0]
    return _mul(b, g, b.op("Reciprocal", [b.op("AddV2", [b.scalar_like(1, x), x])]))


@unary("Sin")
def _sin(b, op, g):
    return _mul(b, g, b.op("Cos", [op.inputs[0]]))


@unary("Cos")
def _cos(b, op, g):
    return _mul(b, g, b.op("Neg", [b.op("Sin", [op.inputs[0]])]))


@unary("Tan")
def _tan(b, op, g):
    secx = b.op("Reciprocal", [b.op("Cos", [op.inputs[0]])])
    return _mul(b, g, b.op("Square", [secx]))


@unary("Tanh")
def _tanh(b, op, g):
    return b.op("TanhGrad", [op.outputs[0], g])


@unary("Sigmoid")
def _sigmoid(b, op, g):
    return b.op("SigmoidGrad", [op.outputs[0], g])


@unary("Erf")
def _erf(b, op, g):
    x = op.inputs[0]
    two_over_root_pi = b.scalar_like(2 / math.sqrt(math.pi), x)
    e = b.op("Exp", [b.op("Neg", [b.op("Square", [x])])])
    return _mul(b, g, _mul(b, two_over_root_pi, e))


@unary("Erfc")
def _erfc(b, op, g):
    x = op.inputs[0]
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
no_gradient("Floor", "Ceil", "Round", "Rint", "IsFinite", "IsNan", "IsInf", "LogicalNot",
            "LogicalAnd", "LogicalOr", "Equal", "NotEqual", "Less", "LessEqual", "Greater",
            "GreaterEqual", "FloorDiv", "TruncateDiv", "TruncateMod", "ArgMax", "ArgMin",
            "All", "Any")


# --- second order of the *Grad ops ----------------------------------------------------------
@gradient("TanhGrad")
def _tanh_grad_grad(b, op, grads):
    y, dy = op.inputs
    g = grads[0]
    return [_mul(b, _mul(b, g, b.scalar_like(-2, y)), _mul(b, dy, y)),
            b.op("TanhGrad", [y, g])]


@gradient("SigmoidGrad")
def _sigmoid_grad_grad(b, op, grads):
    y, dy = op.inputs
    gb = _mul(b, grads[0], dy)
    return [b.op("Sub", [gb, _mul(b, _mul(b, b.scalar_like(2, y), gb), y)]),
            b.op("SigmoidGrad", [y, grads[0]])]


@gradient("SqrtGrad")
def _sqrt_grad_grad(b, op, grads):
    y = op.inputs[0]
    ga = b.op("RealDiv", [grads[0], y])
    return [_mul(b, b.op("Neg", [ga]), op.outputs[0]), _mul(b, b.scalar_like(0.5, y), ga)]


@gradient("RsqrtGrad")
def _rsqrt_grad_grad(b, op, grads):
    a, dy = op.inputs
    ga = _mul(b, _mul(b, b.scalar_like(-1.5, a), grads[0]), _mul(b, dy, b.op("Square", [a])))
    return [ga, b.op("RsqrtGrad", [a, grads[0]])]


@gradient("ReciprocalGrad", "InvGrad")
def _reciprocal_grad_grad(b, op, grads):
    a, dy = op.inputs
    return [_mul(b, _mul(b, grads[0], b.scalar_like(-2, a)), _mul(b, dy, a)),
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
    return list(broadcast_binary(b, x, y, _mul(b, g, y), _mul(b, x, g)))


@gradient("RealDiv", "Div")
def _div(b, op, grads):
    x, y = op.inputs
    g = grads[0]
    gx = b.op("RealDiv", [g, y])
    gy = _mul(b, g, b.op("RealDiv", [b.op("RealDiv", [b.op("Neg", [x]), y]), y]))
    return list(broadcast_binary(b, x, y, gx, gy))


@gradient("DivNoNan")
def _div_no_nan(b, op, grads):
    x, y = op.inputs
    g = grads[0]
    gx = b.op("DivNoNan", [g, y])
    gy = _mul(b, g, b.op("DivNoNan", [b.op("DivNoNan", [b.op("Neg", [x]), y]), y]))
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
    z, g = op.outputs[0], grads[0]
    gx = _mul(b, _mul(b, g, y), b.op("Pow", [x, b.op("Sub", [y, b.scalar_like(1, y)])]))
    positive = b.op("Greater", [x, b.scalar_like(0, x)])
    safe_x = b.op("SelectV2", [positive, x, b.op("OnesLike", [x])])
    log_x = b.op("SelectV2", [positive, b.op("Log", [safe_x]), b.zeros_like(x)])
    gy = _mul(b, _mul(b, g, z), log_x)
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


@gradient("AddN")
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
    a, w = op.inputs
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
