"""ImageProjectiveTransformV2 / V3: what Keras' RandomRotation, RandomTranslation, RandomZoom
and RandomShear run (TensorFlow's image_ops.h ProjectiveGenerator, in the same float32 steps).

    output[n, y, x, c] = images[n, y', x', c] where, with t = transforms[n] (or [0]),
        k  = t6 x + t7 y + 1                      (k == 0: fill_value)
        x' = (t0 x + t1 y + t2) / k,  y' = (t3 x + t4 y + t5) / k
    x', y' are then mapped into the image by fill_mode (REFLECT dcba|abcd|dcba, WRAP
    abcd|abcd|abcd, NEAREST clamp, CONSTANT as they are) and read by NEAREST (round half away
    from zero) or BILINEAR interpolation; reads outside the image give fill_value (V2: 0).

Every image dtype is interpolated in float32, as TensorFlow does, and converted back the C++
way (integers truncated toward zero). CPU only. An unknown interpolation or fill_mode is
refused; TensorFlow's kernel only logs it and fills the output.
"""
import numpy as np

from tfg.kernels._util import fail
from tfg.kernels.registry import kernel

F32 = np.float32
_INTERPOLATIONS = ("NEAREST", "BILINEAR")
_FILL_MODES = ("REFLECT", "WRAP", "CONSTANT", "NEAREST")


def _attr_text(ctx, name, default=None):
    value = ctx.attrs.get(name, default)
    return value.decode() if isinstance(value, bytes) else str(value)


def _clamp(c, length):
    """Eigen's scalar_clamp_op(0, len - 1): min(max(c, 0), len - 1)."""
    return np.minimum(np.maximum(c, F32(0)), F32(length - 1))


def _trunc_int(v):
    """static_cast<DenseIndex>(float): toward zero (NaN, never in range, maps to 0)."""
    return np.trunc(np.nan_to_num(v, nan=0.0, posinf=0.0, neginf=0.0)).astype(np.int64)


def _reflect(c, length):
    """MapCoordinate<FILL_REFLECT>: [abcd] -> [dcba|abcd|dcba]."""
    if length <= 1:
        return np.where((c < 0) | (c > length - 1), F32(0), c)
    sz2 = 2 * length
    neg = c + (sz2 * _trunc_int(-c / F32(sz2))).astype(F32)  # (-c < sz2 holds for c < 0)
    neg = np.where(neg < -length, neg + F32(sz2), -neg - F32(1))
    pos = c - (sz2 * _trunc_int(c / F32(sz2))).astype(F32)
    pos = np.where(pos >= length, F32(sz2) - pos - F32(1), pos)
    return _clamp(np.where(c < 0, neg, np.where(c > length - 1, pos, c)), length)


def _wrap(c, length):
    """MapCoordinate<FILL_WRAP>: [abcd] -> [abcd|abcd|abcd]."""
    if length <= 1:
        return np.where((c < 0) | (c > length - 1), F32(0), c)
    sz = F32(length - 1)
    neg = c + (length * (_trunc_int(-c / sz) + 1)).astype(F32)
    pos = c - (length * _trunc_int(c / sz)).astype(F32)
    return _clamp(np.where(c < 0, neg, np.where(c > length - 1, pos, c)), length)


_MAPS = {"REFLECT": _reflect, "WRAP": _wrap, "CONSTANT": lambda c, length: c,
         "NEAREST": _clamp}


def _index(v, length):
    """DenseIndex(v) for a float coordinate, -1 where it lies outside [0, length)."""
    inside = (v >= 0) & (v < length)  # (NaN is never inside)
    return np.where(inside, _trunc_int(np.where(inside, v, 0)), -1)


def _read(image, yi, xi, fill):
    """image[yi, xi, :] where both index inside, else fill (read_with_fill_value)."""
    ok = (yi >= 0) & (xi >= 0)
    out = image[np.where(ok, yi, 0), np.where(ok, xi, 0)]
    return np.where(ok[..., None], out, fill)


def _round_half_away(v):
    """std::round."""
    return np.copysign(np.floor(np.abs(v) + F32(0.5)), v)


def _nearest(image, y, x, fill):
    h, w = image.shape[:2]
    return _read(image, _index(_round_half_away(y), h), _index(_round_half_away(x), w), fill)


def _bilinear(image, y, x, fill):
    h, w = image.shape[:2]
    y0, x0 = np.floor(y), np.floor(x)
    y1, x1 = y0 + F32(1), x0 + F32(1)
    iy0, iy1, ix0, ix1 = _index(y0, h), _index(y1, h), _index(x0, w), _index(x1, w)
    f = F32(fill)

    def at(iy, ix):
        return _read(image, iy, ix, f).astype(F32)

    wx1, wx0 = (x1 - x)[..., None], (x - x0)[..., None]
    top = wx1 * at(iy0, ix0) + wx0 * at(iy0, ix1)
    bottom = wx1 * at(iy1, ix0) + wx0 * at(iy1, ix1)
    return (y1 - y)[..., None] * top + (y - y0)[..., None] * bottom


def _to_dtype(values, dtype):
    """T(float): C++ truncation toward zero for integers, rounding for floats."""
    if np.dtype(dtype).kind in "iu":
        values = np.trunc(np.nan_to_num(values))
    return values.astype(dtype)


def _transform_one(image, t, out_hw, interpolation, fill_mode, fill):
    """One image [H, W, C] through one transform t[8] -> [h, w, C]."""
    ys = np.arange(out_hw[0], dtype=F32)[:, None]
    xs = np.arange(out_hw[1], dtype=F32)[None, :]
    t = t.astype(F32)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        k = t[6] * xs + t[7] * ys + F32(1)
        in_x = (t[0] * xs + t[1] * ys + t[2]) / k
        in_y = (t[3] * xs + t[4] * ys + t[5]) / k
        mapping = _MAPS[fill_mode]
        x, y = mapping(in_x, image.shape[1]), mapping(in_y, image.shape[0])
        sample = _nearest if interpolation == "NEAREST" else _bilinear
        out = sample(image, y, x, fill)
    out = _to_dtype(out, image.dtype) if out.dtype != image.dtype else out
    return np.where((k == 0)[..., None], fill, out)


def _checked(ctx, images, transforms, output_shape):
    images, transforms = np.asarray(images), np.asarray(transforms)
    size = np.asarray(output_shape)
    if images.ndim != 4:
        fail(f"Input images must have rank 4, got shape {list(images.shape)}")
    if transforms.ndim != 2 or transforms.shape[1] != 8 or \
            transforms.shape[0] not in (1, images.shape[0]):
        fail(f"Input transform should be num_images x 8 or 1 x 8, got shape "
             f"{list(transforms.shape)} for {images.shape[0]} images")
    if size.ndim != 1:
        fail(f"output_shape must be rank 1, got shape {list(size.shape)}")
    if size.size != 2:
        fail(f"output_shape must have two elements, got {size.size}")
    if size[0] <= 0 or size[1] <= 0:
        fail(f"output dimensions must be positive, got {size.tolist()}")
    interpolation = _attr_text(ctx, "interpolation")
    if interpolation not in _INTERPOLATIONS:
        fail(f"Invalid interpolation {interpolation}. Supported types: NEAREST, BILINEAR")
    fill_mode = _attr_text(ctx, "fill_mode", "CONSTANT")
    if fill_mode not in _FILL_MODES:
        fail(f"Invalid mode {fill_mode}. Supported types: REFLECT, WRAP, CONSTANT, NEAREST")
    return images, transforms, (int(size[0]), int(size[1])), interpolation, fill_mode


def _transform(ctx, images, transforms, output_shape, fill_value):
    images, transforms, out_hw, interpolation, fill_mode = _checked(
        ctx, images, transforms, output_shape)
    fill = _to_dtype(np.asarray(fill_value, F32), images.dtype)  # static_cast<T>(float)
    out = np.empty((images.shape[0],) + out_hw + images.shape[3:], images.dtype)
    for n in range(images.shape[0]):
        t = transforms[n if transforms.shape[0] > 1 else 0]
        out[n] = _transform_one(images[n], t, out_hw, interpolation, fill_mode, fill)
    return out


@kernel("ImageProjectiveTransformV2", host_inputs=(2,))
def image_projective_transform_v2(ctx, images, transforms, output_shape):
    return _transform(ctx, images, transforms, output_shape, 0.0)


@kernel("ImageProjectiveTransformV3", host_inputs=(2,))
def image_projective_transform_v3(ctx, images, transforms, output_shape, fill_value):
    fill = np.asarray(fill_value)
    if fill.ndim:
        fail(f"fill_value must be a scalar, got shape {list(fill.shape)}")
    return _transform(ctx, images, transforms, output_shape, fill)
