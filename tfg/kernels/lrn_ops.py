"""Local response normalization over the last (depth) axis of a 4-D tensor, and its gradient,
with TensorFlow's formulas (lrn_op.cc):

    sqr_sum[c] = sum of x[c']**2 for |c' - c| <= depth_radius (clipped to the depth)
    norm[c]    = bias + alpha * sqr_sum[c]
    LRN:     y[c]  = x[c] * norm[c] ** -beta
    LRNGrad: dx[k] = sum over |j - k| <= r of dy[j] * ([k == j] * norm[j] ** -beta
                                                      - 2 * alpha * beta * x[k] * y[j] / norm[j])

The windowed sums over the depth are one product with a [C, C] band matrix of ones (BLAS,
no loop over channels). half runs in float32 and is rounded once at the end.
"""
import numpy as np

from tfg.kernels._util import fail, tf_name
from tfg.kernels.registry import kernel

_TYPES = (np.float16, np.float32)


def _params(ctx, op, *arrays):
    """(depth_radius, bias, alpha, beta) after checking the inputs, as TensorFlow's kernel."""
    for a in arrays:
        if a.ndim != 4:
            fail(f"{op}: inputs must be 4-dimensional, got shape {list(a.shape)}")
        if a.dtype.type not in _TYPES or a.dtype != arrays[0].dtype:
            fail(f"{op} has no CPU kernel for dtype {tf_name(a)}")
    radius = int(ctx.attrs.get("depth_radius", 5))
    if radius < 0 or radius > np.iinfo(np.int32).max:
        fail(f"{op}: depth_radius = {radius} is out of range (it must be a non-negative int)")
    return (radius, float(ctx.attrs.get("bias", 1.0)), float(ctx.attrs.get("alpha", 1.0)),
            float(ctx.attrs.get("beta", 0.5)))


def _band(depth, radius):
    """[C, C] float32 matrix with ones where |row - column| <= radius."""
    i = np.arange(depth)
    return (np.abs(i[:, None] - i[None, :]) <= radius).astype(np.float32)


def _depth_sums(values, band):
    """Windowed sums over the last axis of [..., C] `values` (band is symmetric)."""
    c = values.shape[-1]
    return (values.reshape(-1, c) @ band).reshape(values.shape)


def _norm(x, band, bias, alpha):
    return bias + alpha * _depth_sums(x * x, band)


@kernel("LRN")
def lrn(ctx, x):
    x = np.asarray(x)
    radius, bias, alpha, beta = _params(ctx, "LRN", x)
    if x.size == 0:
        return np.zeros(x.shape, x.dtype)
    wide = x.astype(np.float32, copy=False)
    y = wide * _norm(wide, _band(x.shape[3], radius), bias, alpha) ** np.float32(-beta)
    return y.astype(x.dtype, copy=False)


@kernel("LRNGrad")
def lrn_grad(ctx, dy, x, y):
    dy, x, y = np.asarray(dy), np.asarray(x), np.asarray(y)
    radius, bias, alpha, beta = _params(ctx, "LRNGrad", dy, x, y)
    if not dy.shape == x.shape == y.shape:
        fail(f"LRNGrad: input_grads {list(dy.shape)}, input_image {list(x.shape)} and "
             f"output_image {list(y.shape)} must have the same shape")
    if x.size == 0:
        return np.zeros(x.shape, dy.dtype)
    dy32, x32, y32 = (a.astype(np.float32, copy=False) for a in (dy, x, y))
    band = _band(x.shape[3], radius)
    norm = _norm(x32, band, bias, alpha)
    cross = _depth_sums(dy32 * y32 / norm, band)
    dx = dy32 * norm ** np.float32(-beta) - np.float32(2 * alpha * beta) * x32 * cross
    return dx.astype(dy.dtype, copy=False)
