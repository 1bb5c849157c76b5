"""Colour-space kernels with TensorFlow's arithmetic (colorspace_op.h, adjust_contrast_op.cc,
adjust_saturation_op.cc, adjust_hue_op.cc).

    RGBToHSV(images [..., 3]) -> [..., 3]        (h, s, v) in [0, 1], computed in T
    AdjustHue(images [..., H, W, 3], delta) -> images with hue rotated by delta turns

RGBToHSV / HSVToRGB are Eigen expressions evaluated in the image's dtype, one rounding per
operation (numpy does the same for float16). The Adjust* kernels are float32 loops in
TensorFlow (its CPU registers float only; the GPU one also takes half, which tfg computes in
float32 and rounds back); their constants (2.0 / 6.0) are doubles, so those sums are rounded
once from float64, as C++ does.
"""
import numpy as np

from tfg.kernels._util import fail
from tfg.kernels.registry import kernel

F32 = np.float32
# the hue wrap loops of adjust_hue_op.cc / adjust_saturation_op.cc: past this many turns
# TensorFlow would spin (or never end, for an infinite hue); tfg finishes with a modulo
_MAX_WRAPS = 64


def _three_channels(x, what="input"):
    x = np.asarray(x)
    if x.ndim < 1:
        fail(f"input must be at least 1D, got shape {list(x.shape)}")
    if x.shape[-1] != 3:
        fail(f"{what} must have 3 channels but input only has {x.shape[-1]} channels.")
    return x


def _cmax(a, b):
    """std::max(a, b): a < b ? b : a (NaN handling included)."""
    return np.where(a < b, b, a)


def _cmin(a, b):
    return np.where(b < a, b, a)


@kernel("RGBToHSV")
def rgb_to_hsv(ctx, images):
    x = _three_channels(images)
    t = x.dtype.type
    r, g, b = x[..., 0], x[..., 1], x[..., 2]
    with np.errstate(all="ignore"):
        v = np.maximum(np.maximum(r, g), b)
        rng = v - np.minimum(np.minimum(r, g), b)
        s = np.where(v > 0, rng / v, t(0)).astype(x.dtype)
        norm = (t(1) / rng) * (t(1) / t(6))
        h = np.where(r == v, norm * (g - b),
                     np.where(g == v, norm * (b - r) + t(2) / t(6), norm * (r - g) + t(4) / t(6)))
        h = np.where(rng > 0, h, t(0)).astype(x.dtype)
        h = np.where(h < 0, h + t(1), h).astype(x.dtype)
    return np.stack([h, s, v], axis=-1)


@kernel("HSVToRGB")
def hsv_to_rgb(ctx, images):
    x = _three_channels(images)
    t = x.dtype.type
    h, s, v = x[..., 0], x[..., 1], x[..., 2]

    def unit(a):  # cwiseMax(0).cwiseMin(1)
        return np.minimum(np.maximum(a, t(0)), t(1))

    dh = h * t(6)
    dr = unit(np.abs(dh - t(3)) - t(1))
    dg = unit(-np.abs(dh - t(2)) + t(2))
    db = unit(-np.abs(dh - t(4)) + t(2))
    one_s = -s + t(1)
    return np.stack([(one_s + s * d) * v for d in (dr, dg, db)], axis=-1).astype(x.dtype)


# --- the Adjust* kernels: float32 pixel loops ------------------------------------------------
def _image3d(x):
    x = np.asarray(x)
    if x.ndim < 3:
        fail(f"input must be at least 3-D, got shape{_tf_shape(x.shape)}")
    return x


def _tf_shape(shape):
    return "[" + ",".join(str(d) for d in shape) + "]"


def _scalar(v, what):
    v = np.asarray(v)
    if v.ndim != 0:
        fail(f"{what} must be scalar: {_tf_shape(v.shape)}")
    return F32(v)


def _pixels(images):
    """The image as float32 [pixels, 3] (3 channels checked), and its dtype to return."""
    x = _image3d(images)
    if x.shape[-1] != 3:
        fail(f"input must have 3 channels but instead has {x.shape[-1]} channels.")
    return x.astype(F32).reshape(-1, 3), x


def _back(rgb, like):
    return rgb.reshape(like.shape).astype(like.dtype)


def _rgb_to_hsv_f32(p):
    """adjust_saturation_op.cc's internal::rgb_to_hsv on each row of p."""
    r, g, b = p[:, 0], p[:, 1], p[:, 2]
    v = _cmax(r, _cmax(g, b))
    rng = v - _cmin(r, _cmin(g, b))
    s = np.where(v > 0, rng / v, F32(0)).astype(F32)
    norm = F32(1) / (F32(6) * rng)
    h_r = norm * (g - b)
    h_g = (norm * (b - r)).astype(np.float64) + 2.0 / 6.0
    h_b = (norm * (r - g)).astype(np.float64) + 4.0 / 6.0
    h = np.where(r == v, h_r, np.where(g == v, h_g, h_b).astype(F32))
    h = np.where(rng <= 0, F32(0), h)
    return np.where(h < 0, h + F32(1), h).astype(F32), s, v


def _wrap(x, low, high, step):
    """TensorFlow's `while (x <= low) x += step; while (x >= high) x -= step;` (low inclusive
    where `low` is a float; an exclusive lower bound is passed as the pair (0, '<'))."""
    below = (lambda a: a <= low) if not isinstance(low, tuple) else (lambda a: a < low[0])
    for test, sign in ((below, 1), (lambda a: a >= high, -1)):
        for _ in range(_MAX_WRAPS):
            hit = test(x) & np.isfinite(x)
            if not hit.any():
                break
            x = np.where(hit, x + F32(sign * step), x).astype(F32)
        else:  # a hue TensorFlow would spin on for a long time (or forever)
            hit = test(x) & np.isfinite(x)
            x = np.where(hit, np.mod(x, F32(high)), x).astype(F32)
    return x


def _hsv_to_rgb_f32(h, s, v):
    """adjust_saturation_op.cc's internal::hsv_to_rgb."""
    c = s * v
    m = v - c
    dh = h * F32(6)
    cat = _category(dh)
    fmodu = _wrap(dh, F32(0), F32(2), 2.0)
    x = c * (F32(1) - np.abs(fmodu - F32(1)))
    zero = np.zeros_like(c)
    table = {0: (c, x, zero), 1: (x, c, zero), 2: (zero, c, x), 3: (zero, x, c),
             4: (x, zero, c), 5: (c, zero, x)}
    out = [zero, zero, zero]  # the switch's default
    for k, parts in table.items():
        out = [np.where(cat == k, p, o) for p, o in zip(parts, out)]
    return np.stack([o + m for o in out], axis=-1).astype(F32)


def _category(h):
    """static_cast<int>(h), with NaN and out-of-int values as x86 gives them (INT_MIN)."""
    ok = np.isfinite(h) & (np.abs(h) < 2 ** 31)
    return np.where(ok, np.trunc(np.where(ok, h, 0)), -2 ** 31).astype(np.int64)


@kernel("AdjustSaturation")
def adjust_saturation(ctx, images, scale):
    p, x = _pixels(images)
    scale = _scalar(scale, "scale")
    with np.errstate(all="ignore"):
        h, s, v = _rgb_to_hsv_f32(p)
        s = np.minimum(F32(1), np.maximum(F32(0), s * scale))
        return _back(_hsv_to_rgb_f32(h, s, v), x)


def _rgb_to_hv_range(p):
    """adjust_hue_op.cc's internal::rgb_to_hv_range: hue in [0, 6), v_min, v_max."""
    r, g, b = p[:, 0], p[:, 1], p[:, 2]
    r_lt_g = r < g
    cases = [  # (condition, v_max, v_mid, v_min, category), in the kernel's if-order
        (r_lt_g & (b < r), g, r, b, 1), (r_lt_g & ~(b < r) & (b > g), b, g, r, 3),
        (r_lt_g & ~(b < r) & ~(b > g), g, b, r, 2), (~r_lt_g & (b < g), r, g, b, 0),
        (~r_lt_g & ~(b < g) & (b > r), b, r, g, 4), (~r_lt_g & ~(b < g) & ~(b > r), r, b, g, 5)]
    v_max, v_mid, v_min = (np.select([c[0] for c in cases], [c[i] for c in cases])
                           for i in (1, 2, 3))
    cat = np.select([c[0] for c in cases], [c[4] for c in cases]).astype(F32)
    ratio = ((v_mid - v_min) / (v_max - v_min)).astype(F32)
    even = np.isin(cat, (0, 2, 4))
    h = (cat + np.where(even, ratio, F32(1) - ratio)).astype(F32)
    h = np.where(v_max == v_min, F32(0), h)
    return h, v_min.astype(F32), v_max.astype(F32)


def _hv_range_to_rgb(h, v_min, v_max):
    cat = _category(h)
    ratio = (h - cat.astype(F32)).astype(F32)
    ratio = np.where(cat % 2 == 0, ratio, F32(1) - ratio)
    v_mid = v_min + ratio * (v_max - v_min)
    table = {0: (v_max, v_mid, v_min), 1: (v_mid, v_max, v_min), 2: (v_min, v_max, v_mid),
             3: (v_min, v_mid, v_max), 4: (v_mid, v_min, v_max)}
    out = [v_max, v_min, v_mid]  # case 5 and the default
    for k, parts in table.items():
        out = [np.where(cat == k, q, o) for q, o in zip(parts, out)]
    return np.stack(out, axis=-1).astype(F32)


@kernel("AdjustHue")
def adjust_hue(ctx, images, delta):
    p, x = _pixels(images)
    delta = _scalar(delta, "delta")
    with np.errstate(all="ignore"):
        h, v_min, v_max = _rgb_to_hv_range(p)
        h = (h + delta * F32(6)).astype(F32)
        h = _wrap(h, (0, "<"), F32(6), 6.0)
        return _back(_hv_range_to_rgb(h, v_min, v_max), x)


def _fold_sum(x):
    """Sum over axis 1 of x [batch, n, channels] the way ReduceMeanAcrossImage does: add the
    second half onto the first until one row is left."""
    n = x.shape[1]
    right = n // 2
    left = n - right
    acc = x.copy()
    acc[:, :right] = x[:, left:left + right] + x[:, :right]
    n = left
    while n > 1:
        right = n // 2
        left = n - right
        acc[:, :right] += acc[:, left:left + right]
        n = left
    return acc[:, 0]


@kernel("AdjustContrastv2")
def adjust_contrast_v2(ctx, images, contrast_factor):
    x = _image3d(images)
    factor = _scalar(contrast_factor, "contrast_factor")
    if x.size == 0:
        return x.copy()
    h, w, c = x.shape[-3:]
    flat = x.astype(F32).reshape(-1, h * w, c)
    mean = _fold_sum(flat) * (F32(1) / F32(h * w))
    out = mean[:, None, :] + factor * (flat - mean[:, None, :])
    return out.reshape(x.shape).astype(x.dtype)
