"""Reductions (Sum, Mean, Max, Min, Prod, All, Any, EuclideanNorm), ArgMax/ArgMin and the
CumulativeLogsumexp scan.

    Sum(x[3,4,2], axis=[0,-1], keep_dims=True) -> shape [1,4,1]
    Sum(x, axis=[])                            -> x unchanged
    Mean([[-3,-4,2]], 1) on int32              -> [-1]  (integer mean truncates, as C++ does)
    Max over an empty axis                     -> the dtype's lowest value (-inf for floats)
"""
import numpy as np

from tfg.kernels._util import errstate, fail, norm_axes, norm_axis, np_dtype, tf_dims, tf_name
from tfg.kernels.registry import ALL_DEVICES, kernel


def _reduce_setup(ctx, x, axis):
    if ctx.xp is np:
        x = np.asarray(x)
        if type(axis) is np.ndarray and axis.size <= 8:
            # The axes parsed once per node, input rank and axis value: a squeeze-excite
            # block's spatial Mean is a few microseconds of work and cost 3x that in parsing.
            key = ("axes", x.ndim, axis.dtype.char, axis.tobytes())
            hit = ctx.cache.get(key)
            if hit is None:
                hit = ctx.cache[key] = _parse_axes(ctx, x, axis)
            return (x,) + hit
    return (x,) + _parse_axes(ctx, x, axis)


def _parse_axes(ctx, x, axis):
    axes = norm_axes(axis, max(x.ndim, 1) if x.ndim else 0) if np.size(axis) else ()
    return axes, bool(ctx.attrs.get("keep_dims", False))


def _lowest(dtype):
    return -np.inf if dtype.kind == "f" else np.iinfo(dtype).min


def _highest(dtype):
    return np.inf if dtype.kind == "f" else np.iinfo(dtype).max


def _reduction(op, fn, empty=None, kinds="fciub"):
    @kernel(op, device_types=ALL_DEVICES, host_inputs=(1,))
    def run(ctx, x, axis):
        xp = ctx.xp
        x, axes, keep = _reduce_setup(ctx, x, axis)
        if x.dtype.kind not in kinds:
            fail(f"{op} does not support dtype {tf_name(x)}")
        if not axes:
            return x
        if empty is not None and any(x.shape[a] == 0 for a in axes):
            shape = tuple(1 if a in axes else d for a, d in enumerate(x.shape)) if keep else \
                tuple(d for a, d in enumerate(x.shape) if a not in axes)
            return xp.full(shape, empty(x.dtype), x.dtype)
        return xp.asarray(fn(xp, x, axes, keep))
    run.__name__ = op
    return run


def _sum(xp, x, axes, keep):
    return xp.sum(x, axis=axes, keepdims=keep, dtype=x.dtype)


def _mean(xp, x, axes, keep):
    if x.dtype.kind in "iu":
        count = int(np.prod([x.shape[a] for a in axes]))
        total = xp.sum(x, axis=axes, keepdims=keep, dtype=x.dtype)
        if count == 0:
            return xp.zeros_like(total)
        # C++ integer division truncates toward zero.
        q = xp.abs(total) // count
        return xp.where(total < 0, -q, q).astype(x.dtype)
    if x.dtype.itemsize < 4 and x.dtype.kind == "f":  # half: accumulate in float32
        return xp.mean(x, axis=axes, keepdims=keep, dtype=np.float32).astype(x.dtype)
    if xp is np and x.dtype.kind == "f" and type(x) is np.ndarray:
        count = 1
        for a in axes:
            count *= x.shape[a]
        if count:  # np.mean's sum and division, without its Python wrapper and errstate
            total = np.add.reduce(x, axis=axes, dtype=x.dtype, keepdims=keep)
            if type(total) is np.ndarray:
                return np.true_divide(total, count, out=total)
            return np.true_divide(total, count)
    with errstate(xp, invalid="ignore", divide="ignore"):
        return xp.mean(x, axis=axes, keepdims=keep, dtype=x.dtype)


_reduction("Sum", _sum, kinds="fciu")
_reduction("Mean", _mean, kinds="fciu")
_reduction("Prod", lambda xp, x, a, k: xp.prod(x, axis=a, keepdims=k, dtype=x.dtype),
           kinds="fciu")


def _euclidean_norm(xp, x, axes, keep):
    """sqrt(sum(x * conj(x))) in x's dtype: an integer norm is truncated (C++'s sqrt of an
    int converted back), a complex one complex; half precision sums in float32."""
    if x.dtype.kind == "c":
        return xp.sqrt(xp.sum(x * xp.conj(x), axis=axes, keepdims=keep, dtype=x.dtype))
    if x.dtype.kind in "iu":
        total = xp.sum(x * x, axis=axes, keepdims=keep, dtype=x.dtype)
        return xp.sqrt(total).astype(x.dtype)
    wide = x.astype(np.float32) if x.dtype.itemsize < 4 else x
    return xp.sqrt(xp.sum(wide * wide, axis=axes, keepdims=keep)).astype(x.dtype)


@kernel("EuclideanNorm", device_types=ALL_DEVICES, host_inputs=(1,))
def euclidean_norm(ctx, x, axis):
    """Unlike the other reductions, no axes still takes each element's norm (|x|)."""
    x, axes, keep = _reduce_setup(ctx, x, axis)
    if x.dtype.kind not in "fciu":
        fail(f"EuclideanNorm does not support dtype {tf_name(x)}")
    return ctx.xp.asarray(_euclidean_norm(ctx.xp, x, axes, keep))

_reduction("Max", lambda xp, x, a, k: xp.max(x, axis=a, keepdims=k), empty=_lowest, kinds="fiu")
_reduction("Min", lambda xp, x, a, k: xp.min(x, axis=a, keepdims=k), empty=_highest, kinds="fiu")
# (numpy's logical reductions themselves: np.all's Python wrapper was 2.5 of its 4.3 us on a
# beam search's [2, 3] finished flags)
_reduction("All", lambda xp, x, a, k: (np.logical_and.reduce if xp is np else xp.all)(
    x, axis=a, keepdims=k), kinds="b")
_reduction("Any", lambda xp, x, a, k: (np.logical_or.reduce if xp is np else xp.any)(
    x, axis=a, keepdims=k), kinds="b")


def _arg(op, name):
    @kernel(op, device_types=ALL_DEVICES, host_inputs=(1,))
    def run(ctx, x, dimension):
        if ctx.xp is np:
            x = np.asarray(x)
        if x.ndim == 0:
            fail(f"{op} needs an input of rank >= 1")
        ax = norm_axis(np.asarray(dimension).reshape(()), x.ndim, "dimension")
        if x.shape[ax] == 0:
            fail(f"{op}: reduction axis {ax} is empty in shape {list(x.shape)}")
        out_type = np_dtype(ctx.attrs.get("output_type", "int64"))
        return getattr(ctx.xp, name)(x, axis=ax).astype(out_type)
    return run


_arg("ArgMax", "argmax")
_arg("ArgMin", "argmin")


def _log_add_exp(a, b):
    """TensorFlow's LogSumExp step: max + log1p(exp(min - max)), -inf when max is -inf. The
    min and max are Eigen's scalar ones ((b < a) ? b : a), so a NaN operand can lose to the
    other: TensorFlow's own results, NaN handling included."""
    lo = np.where(b < a, b, a)
    hi = np.where(a < b, b, a)
    with np.errstate(invalid="ignore", over="ignore"):
        out = np.log1p(np.exp(lo - hi)) + hi
    return np.where(hi == -np.inf, hi, out).astype(a.dtype, copy=False)


@kernel("CumulativeLogsumexp", host_inputs=(1,))
def cumulative_logsumexp(ctx, x, axis):
    """log(cumsum(exp(x))) along axis, one element at a time as TensorFlow's scan does (so
    rounding, infinities and NaNs come out the same); exclusive starts at -inf."""
    x, axis = np.asarray(x), np.asarray(axis)
    if axis.ndim != 0:
        fail(f"ScanOp: axis must be a scalar, not {tf_dims(axis.shape)}")
    a = int(axis)
    if not -x.ndim <= a < x.ndim:
        fail(f"ScanOp: Expected scan axis in the range [{-x.ndim}, {x.ndim}), but got {a}")
    a %= x.ndim
    reverse, exclusive = ctx.attrs.get("reverse", False), ctx.attrs.get("exclusive", False)
    lines = np.moveaxis(x, a, 0)
    if reverse:
        lines = lines[::-1]
    out = np.empty(lines.shape, x.dtype)
    acc = np.full(lines.shape[1:], -np.inf, x.dtype)
    for i in range(lines.shape[0]):
        if exclusive:
            out[i] = acc
        acc = _log_add_exp(acc, lines[i])
        if not exclusive:
            out[i] = acc
    if reverse:
        out = out[::-1]
    return np.ascontiguousarray(np.moveaxis(out, 0, a))
