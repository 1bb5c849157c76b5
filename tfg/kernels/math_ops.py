"""Element-wise maths: unary and binary ops with broadcasting, comparisons, logic, Select,
Cast, AddN, and the cumulative ops.

    AddV2([1, 2], 10)        -> [11, 12]
    FloorDiv(-7, 2)          -> -4        TruncateDiv(-7, 2) -> -3    Div(-7, 2) -> -3 (ints)
    FloorMod(-7, 3)          -> 2         TruncateMod(-7, 3) -> -1
    Cast([1.9, -1.9], int32) -> [1, -1]
    Cumsum([1, 2, 3], exclusive=True, reverse=True) -> [5, 3, 0]

Outputs keep the inputs' dtype (float32 stays float32): numpy's rules agree with
TensorFlow's once both operands have the same dtype, which TensorFlow's signatures require.
"""
import math

import numpy as np

from tfg.kernels._util import fail, norm_axis, np_dtype, tf_name
from tfg.kernels.list_bulk_ops import add_lists
from tfg.kernels.list_ops import TensorList
from tfg.kernels.registry import kernel
from tfg.kernels.select import where


def _bcast_error(x, y):
    fail(f"Incompatible shapes: {list(np.shape(x))} vs. {list(np.shape(y))}")


def _binary(op, fn):
    @kernel(op)
    def run(ctx, x, y):
        try:
            return fn(x, y)
        except ValueError:
            if _broadcastable(x, y):
                raise
            _bcast_error(x, y)
        except TypeError:  # numpy has no loop for this dtype (strings, bools in arithmetic)
            fail(f"{op} does not support dtype {tf_name(np.asarray(x))}")
    run.__name__ = op
    return run


def _broadcastable(x, y):
    try:
        np.broadcast_shapes(np.shape(x), np.shape(y))
        return True
    except ValueError:
        return False


def _is_int(x):
    return np.asarray(x).dtype.kind in "iu"


def _check_int_divisor(y):
    if not np.all(y):
        fail("Integer division by zero")


def _truncate_div_int(x, y):
    _check_int_divisor(y)
    q = np.floor_divide(x, y)
    # Floor and truncation differ when the signs differ and the division is inexact.
    fix = (np.remainder(x, y) != 0) & ((x < 0) != (y < 0))
    return q + fix.astype(q.dtype)


def _floor_div(x, y):
    if _is_int(x):
        _check_int_divisor(y)
        return np.floor_divide(x, y)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.floor(np.true_divide(x, y))


def _floor_mod(x, y):
    if _is_int(x):
        _check_int_divisor(y)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.mod(x, y)


def _real_div(x, y):
    if _is_int(x):  # integer RealDiv/Div truncate, as C++ does
        return _truncate_div_int(x, y)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.true_divide(x, y)


def _truncate_div(x, y):
    if _is_int(x):
        return _truncate_div_int(x, y)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.trunc(np.true_divide(x, y))


def _truncate_mod(x, y):
    if _is_int(x):
        _check_int_divisor(y)
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.fmod(x, y)


def _div_no_nan(x, y):
    with np.errstate(divide="ignore", invalid="ignore"):
        q = np.true_divide(x, y) if not _is_int(x) else _safe_int_div(x, y)
    return np.where(y == 0, np.zeros((), q.dtype), q)


def _safe_int_div(x, y):
    return _truncate_div_int(x, np.where(y == 0, 1, y).astype(np.asarray(y).dtype))


def _pow(x, y):
    if _is_int(x) and np.any(np.asarray(y) < 0):
        fail("Integers to negative integer powers are not allowed")
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        return np.power(x, y)


def _squared_difference(x, y):
    d = np.subtract(x, y)
    return d * d


BINARY = {
    "AddV2": np.add, "Add": np.add, "Sub": np.subtract, "Mul": np.multiply,
    "RealDiv": _real_div, "Div": _real_div, "DivNoNan": _div_no_nan, "FloorDiv": _floor_div,
    "FloorMod": _floor_mod, "TruncateDiv": _truncate_div, "TruncateMod": _truncate_mod,
    "Pow": _pow, "Maximum": np.maximum, "Minimum": np.minimum,
    "SquaredDifference": _squared_difference,
    "Less": np.less, "LessEqual": np.less_equal, "Greater": np.greater,
    "GreaterEqual": np.greater_equal, "LogicalAnd": np.logical_and, "LogicalOr": np.logical_or,
    "Atan2": np.arctan2, "Xdivy": lambda x, y: np.where(x == 0, 0, x / y).astype(x.dtype),
}
for _op, _fn in BINARY.items():
    _binary(_op, _fn)


def _equality(op, fn):
    @kernel(op)
    def run(ctx, x, y):
        if not _broadcastable(x, y):
            if not ctx.attrs.get("incompatible_shape_error", True):
                return np.bool_(op == "NotEqual")
            _bcast_error(x, y)
        return fn(x, y)
    return run


_equality("Equal", np.equal)
_equality("NotEqual", np.not_equal)


# --------------------------------------------------------------------------- unary
def _sigmoid(x):
    # exp of a non-positive number only: no overflow for large |x|.
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1 / (1 + e), e / (1 + e)).astype(x.dtype, copy=False)


# Abramowitz & Stegun 7.1.26 is only good to ~1e-7, fine for float32 but not float64.
_erf64 = np.vectorize(math.erf, otypes=[np.float64])


def _erf(x):
    x = np.asarray(x)
    if x.dtype == np.float64:
        return _erf64(x)
    t32 = x.astype(np.float64)
    a = np.abs(t32)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027
                                                                          + t * 1.061405429))))
    r = 1.0 - poly * np.exp(-a * a)
    return (np.sign(t32) * r).astype(x.dtype)


_erfc64 = np.vectorize(math.erfc, otypes=[np.float64])


def _erfc(x):
    # In float64 and not as 1 - erf: exact gelu reads erfc(-x/sqrt(2)) far into the tail.
    x = np.asarray(x)
    return _erfc64(x).astype(x.dtype)


def _reciprocal(x):
    if _is_int(x):
        _check_int_divisor(x)
        return _truncate_div_int(np.ones_like(x), x)
    with np.errstate(divide="ignore"):
        return np.reciprocal(x)


def _rsqrt(x):
    with np.errstate(divide="ignore", invalid="ignore"):
        return 1 / np.sqrt(x)


def _log(fn):
    def run(x):
        with np.errstate(divide="ignore", invalid="ignore"):
            return fn(x)
    return run


UNARY = {
    "Neg": np.negative, "Abs": np.abs, "Sign": np.sign, "Square": np.square,
    "Sqrt": _log(np.sqrt), "Rsqrt": _rsqrt, "Reciprocal": _reciprocal, "Inv": _reciprocal,
    "Exp": np.exp, "Expm1": np.expm1, "Log": _log(np.log), "Log1p": _log(np.log1p),
    "Sin": np.sin, "Cos": np.cos, "Tan": np.tan, "Tanh": np.tanh, "Sigmoid": _sigmoid,
    "Erf": _erf, "Erfc": _erfc, "Floor": np.floor, "Ceil": np.ceil, "Rint": np.rint,
    "IsFinite": np.isfinite, "IsNan": np.isnan, "IsInf": np.isinf,
    "LogicalNot": np.logical_not, "Asin": np.arcsin, "Acos": np.arccos, "Atan": np.arctan,
    "Sinh": np.sinh, "Cosh": np.cosh,
}


def _unary(op, fn):
    @kernel(op)
    def run(ctx, x):
        try:
            return fn(x)
        except TypeError:  # numpy has no loop for this dtype
            fail(f"{op} does not support dtype {tf_name(np.asarray(x))}")
    run.__name__ = op
    return run


for _op, _fn in UNARY.items():
    _unary(_op, _fn)


@kernel("Round")
def round_(ctx, x):
    # numpy rounds half to even, as TensorFlow's Round does; integers are unchanged.
    return x if _is_int(x) else np.round(x)


@kernel("AddN")
def add_n(ctx, *xs):
    if len(xs) == 1:
        return xs[0]
    if isinstance(xs[0], TensorList):  # T=variant: gradients of TensorLists summed
        return add_lists(xs)
    try:
        # asarray: the sum of two 0-d arrays is a numpy scalar, which cannot be an `out=`.
        out = np.asarray(np.add(xs[0], xs[1]))
        for x in xs[2:]:
            np.add(out, x, out=out)
    except ValueError:
        fail("AddN inputs must all have the same shape, got "
             + ", ".join(str(list(np.shape(x))) for x in xs))
    return out


@kernel("Cast")
def cast(ctx, x):
    dst = np_dtype(ctx.attrs["DstT"])
    x = np.asarray(x)
    if x.dtype == dst:
        return x
    if dst == np.bool_:
        return x != 0
    if x.dtype.kind == "O" or dst.kind == "O":
        fail(f"Cast between {tf_name(x)} and {tf_name(dst)} is not supported")
    with np.errstate(invalid="ignore", over="ignore"):
        if x.dtype.kind == "f" and dst.kind in "iu":
            # Out-of-range floats and NaN are undefined in C++; saturate like TensorFlow 2.x.
            info = np.iinfo(dst)
            x = np.nan_to_num(np.trunc(x), nan=0, posinf=info.max, neginf=info.min)
            x = np.clip(x, info.min, info.max)
        return x.astype(dst)


@kernel("Select")
def select(ctx, cond, x, y):
    cond = np.asarray(cond)
    if np.shape(x) != np.shape(y):
        fail(f"'then' and 'else' must have the same size, got {list(np.shape(x))} and "
             f"{list(np.shape(y))}")
    if cond.ndim == 0:
        return x if bool(cond) else y
    xs = np.shape(x)
    if cond.shape != xs:
        if cond.ndim == 1 and len(xs) >= 1 and cond.shape[0] == xs[0]:
            cond = cond.reshape(cond.shape + (1,) * (len(xs) - 1))
        else:
            fail(f"condition must be a scalar, a vector of size {xs[0] if xs else 0} or of shape"
                 f" {list(xs)}, got {list(cond.shape)}")
    return where(cond, x, y)


@kernel("SelectV2")
def select_v2(ctx, cond, x, y):
    try:
        return where(cond, x, y)
    except ValueError:
        fail(f"condition, then and else cannot broadcast: {list(np.shape(cond))}, "
             f"{list(np.shape(x))}, {list(np.shape(y))}")


def _cumulative(op, fn, identity):
    @kernel(op)
    def run(ctx, x, axis):
        x = np.asarray(x)
        if x.ndim == 0:
            fail(f"{op} needs an input of rank >= 1")
        ax = norm_axis(np.asarray(axis).reshape(()), x.ndim)
        rev, excl = ctx.attrs.get("reverse", False), ctx.attrs.get("exclusive", False)
        if rev:
            x = np.flip(x, ax)
        out = fn(x, axis=ax, dtype=x.dtype)
        if excl:
            out = np.roll(out, 1, axis=ax)
            first = [slice(None)] * x.ndim
            first[ax] = slice(0, 1)
            out[tuple(first)] = identity
        if rev:
            out = np.flip(out, ax)
        return out
    return run


_cumulative("Cumsum", np.cumsum, 0)
_cumulative("Cumprod", np.cumprod, 1)
