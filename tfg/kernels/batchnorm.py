"""FusedBatchNorm (V1/V2/V3) in training and inference mode, and its gradients.

    FusedBatchNormV3(x[N,H,W,C], scale, offset, mean, var, is_training=True)
      -> y, batch_mean, batch_var (Bessel-corrected, blended with the running value when
         exponential_avg_factor < 1), reserve_space_1 = batch mean, reserve_space_2 = biased
         batch variance, reserve_space_3 = an empty scalar
    FusedBatchNormGradV3(dy, x, scale, reserve_1, reserve_2, reserve_3) -> dx, dscale, doffset,
      and two empty outputs

Statistics are computed in float32 (the U type) even for half inputs, as TensorFlow does.
"""
import numpy as np

from tfg.kernels._util import fail, is_nchw
from tfg.kernels.registry import ALL_DEVICES, kernel


def _channels_last(x, fmt):
    """Return x as [M, C] (a view when NHWC) and a function restoring the layout."""
    if x.ndim != 4:
        fail(f"input must be 4-dimensional, got shape {list(x.shape)}")
    if is_nchw(fmt):
        t = x.transpose(0, 2, 3, 1)
        shape = t.shape
        return t.reshape(-1, shape[-1]), lambda y: y.reshape(shape).transpose(0, 3, 1, 2)
    shape = x.shape
    return x.reshape(-1, shape[-1]), lambda y: y.reshape(shape)


def _check_vec(name, v, c):
    if v.ndim != 1 or v.shape[0] != c:
        fail(f"{name} must be a vector of size {c}, got shape {list(v.shape)}")


@kernel(["FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3"], device_types=ALL_DEVICES)
def fused_batch_norm(ctx, x, scale, offset, mean, variance):
    xp = ctx.xp
    x = xp.asarray(x)
    fmt = ctx.attrs.get("data_format", b"NHWC")
    eps = np.float32(ctx.attrs.get("epsilon", 1e-4))
    factor = float(ctx.attrs.get("exponential_avg_factor", 1.0))
    training = bool(ctx.attrs.get("is_training", True))
    x2, restore = _channels_last(x, fmt)
    c = x2.shape[1]
    u = xp.float32
    scale, offset = xp.asarray(scale, u), xp.asarray(offset, u)
    _check_vec("scale", scale, c)
    _check_vec("offset", offset, c)
    xf = x2.astype(u, copy=False)
    if training:
        m = x2.shape[0]
        bmean = xf.mean(axis=0, dtype=u)
        centered = xf - bmean
        bvar = xp.mean(centered * centered, axis=0, dtype=u)
        inv = 1 / xp.sqrt(bvar + eps)
        y = centered * (inv * scale) + offset
        unbiased = bvar * u(m / (m - 1)) if m > 1 else bvar
        if factor != 1.0:
            mean, variance = xp.asarray(mean, u), xp.asarray(variance, u)
            _check_vec("mean", mean, c)
            _check_vec("variance", variance, c)
            out_mean = (1 - factor) * mean + factor * bmean
            out_var = (1 - factor) * variance + factor * unbiased
        else:
            out_mean, out_var = bmean, unbiased
        reserve = [bmean, bvar]
    else:
        mean, variance = xp.asarray(mean, u), xp.asarray(variance, u)
        _check_vec("mean", mean, c)
        _check_vec("variance", variance, c)
        k = scale / xp.sqrt(variance + eps)
        y = xf * k + (offset - mean * k)
        out_mean, out_var = mean, variance
        # TensorFlow leaves these unset in inference; zeros are a defined stand-in.
        reserve = [xp.zeros(c, u), xp.zeros(c, u)]
    outs = [restore(y.astype(x.dtype, copy=False)), out_mean.astype(u, copy=False),
            out_var.astype(u, copy=False)] + reserve
    if ctx.op == "FusedBatchNormV3":
        outs.append(xp.zeros((), u))
    return outs


@kernel(["FusedBatchNormGrad", "FusedBatchNormGradV2", "FusedBatchNormGradV3"],
        device_types=ALL_DEVICES)
def fused_batch_norm_grad(ctx, dy, x, scale, reserve_1, reserve_2, *reserve_3):
    xp = ctx.xp
    dy, x = xp.asarray(dy), xp.asarray(x)
    fmt = ctx.attrs.get("data_format", b"NHWC")
    eps = np.float32(ctx.attrs.get("epsilon", 1e-4))
    training = bool(ctx.attrs.get("is_training", True))
    u = xp.float32
    x2, restore = _channels_last(x, fmt)
    dy2, _ = _channels_last(dy, fmt)
    c = x2.shape[1]
    scale = xp.asarray(scale, u)
    mean, var = xp.asarray(reserve_1, u), xp.asarray(reserve_2, u)
    for name, v in (("scale", scale), ("reserve_space_1", mean), ("reserve_space_2", var)):
        _check_vec(name, v, c)
    xf, g = x2.astype(u, copy=False), dy2.astype(u, copy=False)
    inv = 1 / xp.sqrt(var + eps)
    xhat = (xf - mean) * inv
    doffset = g.sum(axis=0, dtype=u)
    dscale = (g * xhat).sum(axis=0, dtype=u)
    if training:
        m = u(x2.shape[0])
        dx = (scale * inv / m) * (m * g - doffset - xhat * dscale)
    else:
        dx = g * (scale * inv)
    empty = xp.zeros(0, u)
    return [restore(dx.astype(x.dtype, copy=False)), dscale, doffset, empty, empty]
