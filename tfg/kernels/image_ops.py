"""Image resize kernels with TensorFlow's sampling rules (resize_bilinear_op.cc,
resize_nearest_neighbor_op.cc, resize_bicubic_op.cc), and their gradients.

    ResizeBilinear(images [N, H, W, C], size [h, w]) -> float [N, h, w, C]

Each output row y samples the input at `in = scaler(y)`: legacy `y * scale`, or with
half_pixel_centers `(y + 0.5) * scale - 0.5`, where scale = H / h, or (H - 1) / (h - 1) with
align_corners. All three are separable, so each axis is a small table of (index, weight)
pairs; the gradients scatter the incoming gradient back through the same tables.
"""
import numpy as np

from tfg.kernels._util import fail
from tfg.kernels.registry import ALL_DEVICES, kernel

_TABLE = 1024  # resize_bicubic_op.cc samples its cubic kernel at 1/1024 steps


def _flags(ctx):
    align = bool(ctx.attrs.get("align_corners", False))
    half = bool(ctx.attrs.get("half_pixel_centers", False))
    if align and half:
        fail("If half_pixel_centers is True, align_corners must be False.")
    return align, half


def _scale(in_size, out_size, align):
    if align and out_size > 1:
        return np.float32(in_size - 1) / np.float32(out_size - 1)
    return np.float32(in_size) / np.float32(out_size)


def _sizes(size):
    size = np.asarray(size).reshape(-1)
    if size.size != 2:
        fail(f"size must be a 1-D int32 Tensor of 2 elements: new_height, new_width, got "
             f"{size.size} elements")
    h, w = int(size[0]), int(size[1])
    if h <= 0 or w <= 0:
        fail(f"output dimensions must be positive, got {[h, w]}")
    return h, w


def _image(x):
    x = np.asarray(x)
    _check_image(x)
    return x


def _check_image(x):
    """As TensorFlow's resize kernels check their input (an empty image has no pixel to
    sample: numpy's take raised an internal IndexError)."""
    if x.ndim != 4:
        fail(f"input must be 4-dimensional, got shape {list(x.shape)}")
    if x.shape[1] == 0 or x.shape[2] == 0:
        fail(f"input image must be of non-zero size, got shape {list(x.shape)}")


def _linear_table(in_size, out_size, align, half):
    """(lower, upper, lerp) per output position, as compute_interpolation_weights."""
    scale = _scale(in_size, out_size, align)
    pos = np.arange(out_size, dtype=np.float32)
    src = (pos + np.float32(0.5)) * scale - np.float32(0.5) if half else pos * scale
    src = src.astype(np.float32)
    floor = np.floor(src)
    lower = np.maximum(floor, 0).astype(np.int64)
    upper = np.minimum(np.ceil(src), in_size - 1).astype(np.int64)
    return [(lower, 1 - (src - floor)), (upper, (src - floor).astype(np.float32))]


def _nearest_table(in_size, out_size, align, half):
    scale = _scale(in_size, out_size, align)
    pos = np.arange(out_size, dtype=np.float32)
    src = ((pos + np.float32(0.5)) * scale if half else pos * scale).astype(np.float32)
    # roundf rounds halves away from zero; the sources are >= 0 here
    idx = np.floor(src + np.float32(0.5)) if align else np.floor(src)
    idx = np.minimum(idx.astype(np.int64), in_size - 1)
    if half:
        idx = np.maximum(idx, 0)
    return [(idx, np.ones(out_size, np.float32))]


def _cubic_coeffs(a, x):
    """The two halves of the cubic kernel at distance x (in [0, 1]) and 1 + x."""
    near = ((a + 2) * x - (a + 3)) * x * x + 1
    x1 = x + 1
    far = ((a * x1 - 5 * a) * x1 + 8 * a) * x1 - 4 * a
    return near.astype(np.float32), far.astype(np.float32)


def _cubic_table(in_size, out_size, align, half):
    """Four (index, weight) taps per output, as GetWeightsAndIndices: Keys' a = -0.5 with
    out-of-image taps dropped and the rest renormalized (half_pixel_centers), or the legacy
    a = -0.75 with the edge pixel repeated."""
    scale = _scale(in_size, out_size, align)
    pos = np.arange(out_size, dtype=np.float32)
    src = ((pos + np.float32(0.5)) * scale - np.float32(0.5) if half else pos * scale)
    src = src.astype(np.float32)
    base = np.floor(src).astype(np.int64)
    offset = np.rint((src - base) * _TABLE).astype(np.int64)
    a = -0.5 if half else -0.75
    near0, far0 = _cubic_coeffs(a, offset / _TABLE)
    near1, far1 = _cubic_coeffs(a, (_TABLE - offset) / _TABLE)
    taps = [(base - 1, far0), (base, near0), (base + 1, near1), (base + 2, far1)]
    out = []
    for raw, weight in taps:
        idx = np.clip(raw, 0, in_size - 1)
        out.append((idx, np.where(idx == raw, weight, 0).astype(np.float32) if half else weight))
    if half:
        total = sum(w for _, w in out)
        ok = np.abs(total) >= 1000 * np.finfo(np.float32).tiny
        out = [(i, np.where(ok, w / np.where(ok, total, 1), w).astype(np.float32))
               for i, w in out]
    return out


def _apply(x, table, axis):
    """sum over taps of weight * x[..., index, ...] along `axis` (1 or 2)."""
    acc = None
    for idx, weight in table:
        shape = [1, 1, 1, 1]
        shape[axis] = -1
        term = np.take(x, idx, axis=axis) * weight.reshape(shape)
        acc = term if acc is None else acc + term
    return acc


def _scatter(g, matrix, axis):
    """The transpose of _apply: each tap's weighted gradient added back to its index, as one
    product with the transposed [out, in] interpolation matrix (np.add.at per tap was ~0.5 ms
    a DeepLab upsampling's gradient)."""
    n, h, w, c = g.shape
    if axis == 1:
        out = np.matmul(matrix.T, g.reshape(n, h, w * c))
        return out.reshape(n, matrix.shape[1], w, c)
    out = np.matmul(matrix.T, g.reshape(n * h, w, c))
    return out.reshape(n, h, matrix.shape[1], c)


def _matrix(table, in_size, dtype):
    """The [out, in] matrix of a table's taps: row o holds each tap's weight at its index."""
    m = np.zeros((len(table[0][0]), in_size), dtype)
    rows = np.arange(m.shape[0])
    for idx, weight in table:
        np.add.at(m, (rows, idx), weight.astype(dtype))
    return m


def _cached(ctx, what, *key):
    """A table (or its matrix) of `key` = (make_table, in, out, align, half[, dtype]), made
    once per node: the cubic table was most of a small resize's time."""
    cache = getattr(ctx, "cache", None)
    full = (what,) + key
    hit = cache.get(full) if cache is not None else None
    if hit is None:
        make, in_size, out_size, align, half = key[:5]
        hit = make(in_size, out_size, align, half)
        if what == "matrix":
            hit = _matrix(hit, in_size, key[5])
        if cache is not None:
            if len(cache) >= 32:
                cache.clear()
            cache[full] = hit
    return hit


def _resize(ctx, x, size, make_table):
    x = _image(x)
    h, w = _sizes(size)
    align, half = _flags(ctx)
    tables = (_cached(ctx, "table", make_table, x.shape[1], h, align, half),
              _cached(ctx, "table", make_table, x.shape[2], w, align, half))
    return x, tables


@kernel("ResizeBilinear", host_inputs=(1,))
def resize_bilinear(ctx, images, size):
    x, (ty, tx) = _resize(ctx, images, size, _linear_table)
    x = x.astype(np.float32)
    # TensorFlow lerps along x first, then y: top + (bottom - top) * y_lerp.
    cols = [np.take(x, i, axis=2) for i, _ in tx]
    xl = tx[1][1].reshape(1, 1, -1, 1)
    rows = cols[0] + (cols[1] - cols[0]) * xl
    top, bottom = np.take(rows, ty[0][0], axis=1), np.take(rows, ty[1][0], axis=1)
    return (top + (bottom - top) * ty[1][1].reshape(1, -1, 1, 1)).astype(np.float32)


@kernel("ResizeNearestNeighbor", device_types=ALL_DEVICES, host_inputs=(1,))
def resize_nearest(ctx, images, size):
    xp = ctx.xp
    x = xp.asarray(images)
    _check_image(x)
    h, w = _sizes(size)
    align, half = _flags(ctx)
    iy = _nearest_table(x.shape[1], h, align, half)[0][0]
    ix = _nearest_table(x.shape[2], w, align, half)[0][0]
    return xp.take(xp.take(x, xp.asarray(iy), axis=1), xp.asarray(ix), axis=2)


@kernel("ResizeBicubic", host_inputs=(1,))
def resize_bicubic(ctx, images, size):
    x, (ty, tx) = _resize(ctx, images, size, _cubic_table)
    return _apply(_apply(x.astype(np.float32), tx, 2), ty, 1).astype(np.float32)


def _grad(ctx, grads, in_h, in_w, make_table, dtype):
    g = _image(grads)
    align, half = _flags(ctx)
    acc = np.float64 if dtype == np.float64 else np.float32
    my = _cached(ctx, "matrix", make_table, in_h, g.shape[1], align, half, acc)
    mx = _cached(ctx, "matrix", make_table, in_w, g.shape[2], align, half, acc)
    out = _scatter(_scatter(g.astype(acc), my, 1), mx, 2)
    return out.astype(dtype)


@kernel("ResizeBilinearGrad")
def resize_bilinear_grad(ctx, grads, original_image):
    img = _image(original_image)
    return _grad(ctx, grads, img.shape[1], img.shape[2], _linear_table, img.dtype)


@kernel("ResizeBicubicGrad")
def resize_bicubic_grad(ctx, grads, original_image):
    img = _image(original_image)
    return _grad(ctx, grads, img.shape[1], img.shape[2], _cubic_table, img.dtype)


@kernel("ResizeNearestNeighborGrad", host_inputs=(1,))
def resize_nearest_grad(ctx, grads, size):
    h, w = _sizes(size)
    g = _image(grads)
    return _grad(ctx, g, h, w, _nearest_table, g.dtype)


def _area_table(in_size, out_size, align):
    """(index, weight, used) per output position and tap, as resize_area_op.cc: output o
    covers input [o * scale, (o + 1) * scale), each input cell weighted by how much of it
    lies inside (the y rows' `scale_y`; CachedInterpolation's start and end scales)."""
    # a one-pixel axis keeps the plain in / out scale under align_corners (TensorFlow 2.21's
    # values: (1 - 1) / (out - 1) = 0 would cover no input at all)
    scale = _scale(in_size, out_size, align and in_size > 1)
    pos = np.arange(out_size, dtype=np.float32)
    lo = pos * scale
    hi = (pos + np.float32(1)) * scale
    start = np.floor(lo).astype(np.int64)
    taps = int(np.max(np.ceil(hi).astype(np.int64) - start))
    i = start[:, None] + np.arange(taps)
    used = i < np.ceil(hi).astype(np.int64)[:, None]
    fi, lo, hi = i.astype(np.float32), lo[:, None], hi[:, None]
    after = fi + np.float32(1) > hi
    weight = np.where(fi < lo, np.where(after, scale, fi + np.float32(1) - lo),
                      np.where(after, hi - fi, np.float32(1))).astype(np.float32)
    # rows past the image (a rounded-up end) are clamped, as TensorFlow's Bound
    return np.clip(i, 0, in_size - 1), weight, used, scale


def _area_sum(x, table, axis, start_with_zero):
    """The kernel's sequential sum over the taps along `axis`, in float32."""
    idx, weight, used, _ = table
    shape = [1] * x.ndim
    shape[axis] = -1
    acc = None if not start_with_zero else np.float32(0)
    for k in range(idx.shape[1]):
        term = np.take(x, idx[:, k], axis=axis) * weight[:, k].reshape(shape)
        if acc is None:
            acc = term
        else:
            acc = np.where(used[:, k].reshape(shape), acc + term, acc)
    return acc.astype(np.float32)


@kernel("ResizeArea", host_inputs=(1,))
def resize_area(ctx, images, size):
    x = _image(images)
    h, w = _sizes(size)
    align = bool(ctx.attrs.get("align_corners", False))
    ty = _area_table(x.shape[1], h, align)
    tx = _area_table(x.shape[2], w, align)
    rows = _area_sum(x.astype(np.float32), tx, 2, start_with_zero=False)
    out = _area_sum(rows, ty, 1, start_with_zero=True)
    scale = np.float32(1.0 / float(np.float32(ty[3] * tx[3])))
    return (out * scale).astype(np.float32)
