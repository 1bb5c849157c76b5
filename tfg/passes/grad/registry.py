"""The gradient registry: one function per op, keyed by op name, one block per op family.

A gradient function receives the builder scope `b` (where new nodes go, see
tfg.passes.grad.emitter), a view `op` of the forward node, and the incoming gradients, one per
output (None where nothing flows back), and returns one gradient per data input (None where
the input gets none):

    @gradient("Mul")
    def _mul(b, op, grads):
        x, y = op.inputs
        return broadcast_binary(b, x, y, b.op("Mul", [grads[0], y]), b.op("Mul", [x, grads[0]]))

Before: `z = Mul(x, y)`.  After: `gradients/z_grad/Mul = Mul(g, y)` and friends, reduced to the
shapes of x and y with BroadcastGradientArgs + Sum + Reshape.

`no_gradient("Shape", ...)` marks ops through which no gradient flows (TensorFlow's
NotDifferentiable); an op that is on the path but not registered at all is an error.
"""
from dataclasses import dataclass
from typing import Callable, Optional

from tfg.errors import TfgInputError, UnknownOpError
from tfg.schemas.dtypes import DType


@dataclass(frozen=True)
class GradDef:
    op: str
    fn: Optional[Callable]  # None: not differentiable (no gradient flows)
    # Whether the function needs a gradient for every float output: missing ones are then
    # filled with zeros first (TensorFlow always does this); False lets it receive None.
    fill_zeros: bool = True


_GRADS = {}


def gradient(*ops, fill_zeros=True):
    """Decorator registering `fn(b, op, grads)` as the gradient of each op in `ops`."""

    def register(fn):
        for name in ops:
            _GRADS[name] = GradDef(name, fn, fill_zeros)
        return fn

    return register


def no_gradient(*ops):
    """Mark ops as not differentiable: their inputs get no gradient through them."""
    for name in ops:
        _GRADS[name] = GradDef(name, None)


def get_gradient(op, node=None):
    """The GradDef of `op`; UnknownOpError naming the node if none is registered."""
    gd = _GRADS.get(op)
    if gd is None:
        where = f" (node {node!r})" if node else ""
        raise UnknownOpError(
            f"no gradient defined for op {op!r}{where}; tfg has gradients for "
            f"{sum(1 for g in _GRADS.values() if g.fn)} ops (tfg.passes.grad.registered())")
    return gd


def has_gradient(op):
    return op in _GRADS


def registered(differentiable_only=True):
    """Op names with a registered gradient (or every registration, when asked)."""
    return sorted(name for name, gd in _GRADS.items() if gd.fn or not differentiable_only)


# --- helpers for common shapes of rules ------------------------------------------------------

def unary(*ops, fill_zeros=True):
    """Register `dy_dx(b, op, g) -> gradient` for single-input ops (the rule multiplies)."""

    def register(fn):
        def grad_fn(b, op, grads):
            return [fn(b, op, grads[0])]

        grad_fn.__name__ = fn.__name__
        grad_fn.__doc__ = fn.__doc__
        return gradient(*ops, fill_zeros=fill_zeros)(grad_fn)

    return register


def identity_gradient(*ops):
    """The gradient passes through unchanged to input 0; other inputs get none."""

    def grad_fn(b, op, grads):
        return [grads[0]] + [None] * (len(op.inputs) - 1)

    gradient(*ops)(grad_fn)


def error_gradient(op_name, reason):
    """Register an op whose gradient must never be taken (PreventGradient)."""

    def grad_fn(b, op, grads):
        message = op.attr("message", b"") if reason is None else reason
        if isinstance(message, bytes):
            message = message.decode("utf-8", "replace")
        raise TfgInputError(f"gradient explicitly disabled for node {op.name!r} ({op.type})"
                            + (f": {message}" if message else ""))

    gradient(op_name)(grad_fn)


def conj(b, t):
    """The complex conjugate of t for a complex t (a Conj node), t itself for any other dtype,
    as TensorFlow's math_ops.conj, which adds no node for real tensors: gradients of complex
    functions are taken in the conjugate direction, and real graphs stay as they were.

        Before: y = Exp(z), z complex64    After: Mul(g, Conj(y))    (float: Mul(g, y))
    """
    dtype = b.dtype(t)
    if dtype is None or not dtype.is_complex:
        return t
    return b.op("Conj", [t])


def reduce_to(b, grad, shape, reduce_axes):
    """Sum `grad` over the broadcast axes and reshape it to `shape` (a tensor)."""
    summed = b.op("Sum", [grad, reduce_axes], {"keep_dims": False})
    return b.op("Reshape", [summed, shape])


def broadcast_binary(b, x, y, gx, gy):
    """Reduce the full-shaped partial gradients gx, gy of a broadcasting op to x's and y's shapes.

    Before: gx, gy shaped like the broadcast output.  After: BroadcastGradientArgs(Shape(x),
    Shape(y)) -> Sum + Reshape, as TensorFlow does. Either of gx, gy may be None. When both
    shapes are known while building, the axes are constants and an operand that needs no
    reduction gets its gradient unchanged (TensorFlow's SmartBroadcastGradientArgs):

        x[16,12] + b[12]  ->  gx = g, gb = Sum(g, [0])
    """
    if b.same_shape(x, y):
        return gx, gy
    shape_x, shape_y = b.static_shape(x), b.static_shape(y)
    static = static_broadcast_axes(shape_x, shape_y)
    if static is not None:
        (rx, reshape_x), (ry, reshape_y) = static
        return (_reduce_static(b, gx, shape_x, rx, reshape_x),
                _reduce_static(b, gy, shape_y, ry, reshape_y))
    sx, sy = b.shape(x), b.shape(y)
    args = b.op("BroadcastGradientArgs", [sx, sy])
    rx, ry = b.out(args, 0), b.out(args, 1)
    if gx is not None:
        gx = reduce_to(b, gx, sx, rx)
    if gy is not None:
        gy = reduce_to(b, gy, sy, ry)
    return gx, gy


def static_broadcast_axes(sx, sy):
    """For fully known shapes sx, sy: ((axes_x, reshape_x), (axes_y, reshape_y)), the axes of
    the broadcast output each operand's gradient is summed over, and whether the sum must be
    reshaped back (it must when one of the operand's own size-1 dims was broadcast, not only
    leading dims). None when a shape is unknown or the two do not broadcast (the dynamic path
    then fails at run time, as the forward op does)."""
    if sx is None or sy is None:
        return None
    rank = max(len(sx), len(sy))
    px, py = (1,) * (rank - len(sx)) + tuple(sx), (1,) * (rank - len(sy)) + tuple(sy)
    out = []
    for dx, dy in zip(px, py):
        if dx != dy and 1 not in (dx, dy):
            return None
        out.append(dy if dx == 1 else dx)

    def axes(shape, padded):
        lead = rank - len(shape)
        own = [i for i in range(lead, rank) if padded[i] == 1 and out[i] != 1]
        return list(range(lead)) + own, bool(own)

    return axes(sx, px), axes(sy, py)


def _reduce_static(b, grad, shape, axes, reshape):
    """Sum grad over the constant `axes` (and Reshape it to `shape` when asked)."""
    if grad is None or not axes:
        return grad

    summed = b.op("Sum", [grad, b.const(axes, DType.INT32, name="axes")], {"keep_dims": False})
    if not reshape:
        return summed
    return b.op("Reshape", [summed, b.const(list(shape), DType.INT32, name="shape")])
