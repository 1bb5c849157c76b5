"""ScaleAndTranslate and its gradient with TensorFlow's sampling rules
(scale_and_translate_op.cc, sampling_kernels.h): what `tf.image.resize` runs for antialiased
bilinear/bicubic and for the lanczos3, lanczos5, gaussian and mitchellcubic methods.

    ScaleAndTranslate(images [N, H, W, C], size [h, w], scale [sy, sx], translation [ty, tx])
        -> float32 [N, h, w, C]

Each axis is separable: output pixel x samples the input at `(x + 0.5) / scale - translation /
scale`, as a span of input pixels weighted by the kernel (widened by 1 / scale when
downsampling with antialias), the weights normalised to sum to 1; samples outside the image
give 0. Everything is float32 and accumulated tap by tap in TensorFlow's order (rows, then
columns), so the results match TensorFlow's to the last bit or two.
"""
import math

import numpy as np

from tfg.kernels._util import fail
from tfg.kernels.registry import kernel

F32 = np.float32
_PI = F32(3.14159265359)


def _lanczos(radius):
    radius = F32(radius)

    def weight(x):
        with np.errstate(divide="ignore", invalid="ignore"):
            v = (radius * np.sin(_PI * x) * np.sin(_PI * x / radius)) / (_PI * _PI * x * x)
        return np.where(x > radius, F32(0), np.where(x <= F32(1e-3), F32(1), v))
    return radius, weight


def _gaussian(x):
    # -x * x is a float product; the division and exp are double (2.0 is a double literal)
    sigma = np.float64(F32(1.5) / F32(3.0))
    v = np.exp((-x * x).astype(np.float64) / (2.0 * sigma * sigma)).astype(F32)
    return np.where(x >= F32(1.5), F32(0), v)


def _box(x):
    return np.where(x < F32(0.5), F32(1), np.where(x == F32(0.5), F32(0.5), F32(0)))


def _triangle(x):
    return np.where(x < F32(1), F32(1) - x, F32(0))


def _keys_cubic(x):
    far = ((F32(-0.5) * x + F32(2.5)) * x - F32(4.0)) * x + F32(2.0)
    near = ((F32(1.5) * x - F32(2.5)) * x) * x + F32(1.0)
    return np.where(x >= F32(2), F32(0), np.where(x >= F32(1), far, near))


def _mitchell_cubic(x):
    far = ((F32(-7.0 / 18.0) * x + F32(2.0)) * x - F32(10.0 / 3.0)) * x + F32(16.0 / 9.0)
    near = ((F32(7.0 / 6.0) * x - F32(2.0)) * x) * x + F32(8.0 / 9.0)
    return np.where(x >= F32(2), F32(0), np.where(x >= F32(1), far, near))


# kernel_type -> (radius, weight function of |distance| in float32)
SAMPLING_KERNELS = {
    "lanczos1": _lanczos(1), "lanczos3": _lanczos(3), "lanczos5": _lanczos(5),
    "gaussian": (F32(1.5), _gaussian), "box": (F32(1), _box), "triangle": (F32(1), _triangle),
    "keyscubic": (F32(2), _keys_cubic), "mitchellcubic": (F32(2), _mitchell_cubic),
}


def _sampling_kernel(ctx):
    name = ctx.attrs.get("kernel_type", "lanczos3")
    name = name.decode() if isinstance(name, bytes) else str(name)
    if name not in SAMPLING_KERNELS:
        fail(f"Unrecognized kernel type: {name}")
    return SAMPLING_KERNELS[name]


def _span_size(radius_scaled, input_size):
    """min(2 * ceil(radius * kernel_scale) + 1, input_size), safe for a huge kernel_scale."""
    r = float(radius_scaled)
    if not math.isfinite(r) or 2 * math.ceil(r) + 1 >= input_size:
        return input_size
    return 2 * math.ceil(r) + 1


def compute_spans(sampler, output_size, input_size, scale, translate, antialias):
    """(starts [output_size], weights [output_size, span_size]) as ComputeSpansCore."""
    radius, weight_of = sampler
    inv_scale = F32(1.0 / np.float64(scale))
    inv_translate = -inv_scale * F32(translate)
    kernel_scale = max(inv_scale, F32(1)) if antialias else F32(1)
    span_size = _span_size(radius * kernel_scale, input_size)
    with np.errstate(invalid="ignore", over="ignore"):
        sample = (np.arange(output_size, dtype=F32) + F32(0.5)) * inv_scale + inv_translate
        inside = (sample >= 0) & (sample <= F32(input_size))  # NaN samples are outside too
        reach = radius * kernel_scale
        first = np.clip(np.ceil(sample - reach - F32(0.5)), 0, input_size - 1)
        last = np.clip(np.floor(sample + reach - F32(0.5)), 0, input_size - 1) + 1
    first = np.where(inside, first, 0).astype(np.int64)
    this_span = np.where(inside, last, 0).astype(np.int64) - first
    if this_span.size and this_span.max() > span_size:
        fail(f"Span is too large: {int(this_span.max())} vs {span_size}.")
    taps = np.arange(span_size)
    used = inside[:, None] & (taps[None, :] < this_span[:, None])
    pos = (first[:, None] + taps[None, :]).astype(F32) + F32(0.5) - sample[:, None]
    with np.errstate(invalid="ignore", over="ignore"):
        weights = np.where(used, weight_of(np.abs(pos * (F32(1) / kernel_scale))), F32(0))
    total = np.zeros(output_size, F32)
    for j in range(span_size):  # float32, tap by tap, as the C++ loop sums
        total = total + weights[:, j]
    ok = np.abs(total) >= F32(1000) * np.finfo(F32).tiny
    with np.errstate(divide="ignore"):
        norm = np.where(ok, F32(1) / np.where(ok, total, F32(1)), F32(0)).astype(F32)
    return first, (weights * norm[:, None]).astype(F32)


def grad_spans(starts, weights, forward_input_size):
    """The transposed spans (ComputeGradSpansCore): for each forward input pixel, the forward
    outputs it fed, from the first one, with their weights."""
    out_idx, tap = np.nonzero(weights)
    in_idx = starts[out_idx] + tap
    keep = in_idx < forward_input_size
    out_idx, in_idx, w = out_idx[keep], in_idx[keep], weights[out_idx[keep], tap[keep]]
    first = np.full(forward_input_size, np.iinfo(np.int64).max)
    last = np.full(forward_input_size, -1)
    np.minimum.at(first, in_idx, out_idx)
    np.maximum.at(last, in_idx, out_idx)
    used = last >= 0
    first = np.where(used, first, 0)
    span_size = int((last - first + 1)[used].max()) if used.any() else 0
    grad_weights = np.zeros((forward_input_size, span_size), F32)
    np.add.at(grad_weights, (in_idx, out_idx - first[in_idx]), w)
    return first, grad_weights


def gather_spans(x, axis, starts, weights, out_len):
    """out[.., o, ..] = sum_j weights[o, j] * x[.., starts[o] + j, ..] along axis, summed in
    float32 in the order of the taps; taps past the end of x are skipped, as GatherRows."""
    in_len = x.shape[axis]
    shape = [1] * x.ndim
    shape[axis] = out_len
    out_shape = list(x.shape)
    out_shape[axis] = out_len
    acc = np.zeros(out_shape, F32)
    for j in range(weights.shape[1]):
        idx = starts + j
        valid = idx < in_len
        tap = np.take(x, np.where(valid, idx, 0), axis=axis)
        term = weights[:, j].reshape(shape) * tap
        acc = acc + np.where(valid.reshape(shape), term, F32(0))
    return acc


def _pair(v, what):
    v = np.asarray(v)
    if v.ndim != 1:
        fail(f"{what} must be 1-dimensional, got shape {list(v.shape)}")
    if v.size != 2:
        fail(f"{what} must have two elements, got {v.size}")
    return v


def _scale_translation(scale, translation):
    (sy, sx) = (F32(v) for v in _pair(scale, "scale"))
    if not (sy > 0 and sx > 0):
        fail(f"Scale must be greater than zero, got {[float(sy), float(sx)]}.")
    ty, tx = (F32(v) for v in _pair(translation, "translation"))
    return (sy, sx), (ty, tx)


def _check_image(x, what):
    if x.ndim != 4:
        fail(f"{what} must be 4-dimensional, got shape {list(x.shape)}")


@kernel("ScaleAndTranslate", host_inputs=(1, 2, 3))
def scale_and_translate(ctx, images, size, scale, translation):
    x = np.asarray(images)
    _check_image(x, "input")
    size = _pair(size, "size")
    h, w = int(size[0]), int(size[1])
    if h <= 0 or w <= 0:
        fail(f"output dimensions must be positive, got {[h, w]}")
    if x.shape[3] <= 0:
        fail("image must have at least one channel")
    if x.shape[1] <= 0 or x.shape[2] <= 0:
        fail(f"input image must be of non-zero size, got shape {list(x.shape)}")
    sampler = _sampling_kernel(ctx)
    antialias = bool(ctx.attrs.get("antialias", True))
    (sy, sx), (ty, tx) = _scale_translation(scale, translation)
    if x.shape[0] == 0:
        return np.zeros((0, h, w, x.shape[3]), F32)
    rows = compute_spans(sampler, h, x.shape[1], sy, ty, antialias)
    cols = compute_spans(sampler, w, x.shape[2], sx, tx, antialias)
    mid = gather_spans(x.astype(F32), 1, *rows, h)
    return gather_spans(mid, 2, *cols, w)


@kernel("ScaleAndTranslateGrad", host_inputs=(2, 3))
def scale_and_translate_grad(ctx, grads, original_image, scale, translation):
    g = np.asarray(grads)
    img = np.asarray(original_image)
    _check_image(g, "input_grad")
    if g.dtype != F32:
        fail(f"input_grad must be of type float, got {g.dtype}")
    _check_image(img, "original_image")
    sampler = _sampling_kernel(ctx)
    antialias = bool(ctx.attrs.get("antialias", True))
    (sy, sx), (ty, tx) = _scale_translation(scale, translation)
    in_h, in_w = img.shape[1], img.shape[2]
    out = np.zeros((g.shape[0], in_h, in_w, g.shape[3]), F32)
    if out.size == 0 or g.shape[1] == 0 or g.shape[2] == 0:
        return out
    rows = grad_spans(*compute_spans(sampler, g.shape[1], in_h, sy, ty, antialias), in_h)
    cols = grad_spans(*compute_spans(sampler, g.shape[2], in_w, sx, tx, antialias), in_w)
    mid = gather_spans(g, 1, *rows, in_h)
    return gather_spans(mid, 2, *cols, in_w)
