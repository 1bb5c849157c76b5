"""Sliding-window ops on the CPU that are not Conv2D's pools: the 3-D pools and their
gradients (NDHWC), MaxPoolWithArgmax and its gradient, and ExtractImagePatches.

    MaxPool3D(x[N,D,H,W,C], ksize=[1,2,2,2,1], strides=[1,2,2,2,1]) -> [N, OD, OH, OW, C]
    MaxPoolWithArgmax(x[N,H,W,C]) -> (y, argmax): argmax the flat index ((b*H + y)*W + x)*C + c
        (b*H... only with include_batch_in_index) of each window's first maximum
    ExtractImagePatches(x[N,H,W,C], ksizes=[1,KH,KW,1]) -> [N, OH, OW, KH*KW*C]

Nothing loops over voxels: the 3-D pools and their gradients loop over the window's taps,
each a whole-tensor operation on a strided view of the padded input (conv3d_geom.py), and
MaxPoolWithArgmax and ExtractImagePatches read one view of every window at once (their
gradient scatters with np.add.at). The pools count only real inputs:
an AvgPool's divisor is the number of unpadded values in its window, and padding never wins
a max. Where TensorFlow's kernels differ, these follow them: MaxPool3DGrad gives the gradient
to EVERY input equal to the window's max (its CPU kernel compares against the output), while
MaxPoolWithArgmax picks the first maximum in row-major order. half runs in float32.
"""
import numpy as np

from tfg.kernels._util import fail, s, shape_vector, tf_dims, tf_name
from tfg.kernels.conv3d_geom import WindowGeom, spatial_of
from tfg.kernels.registry import kernel

# TensorFlow's CPU pools run float and bfloat16 only (tfg has no bfloat16 arrays)
_POOL3D_FLOATS = _AVG3D_FLOATS = (np.float32,)


def _lowest(dtype):
    if dtype.kind == "f":
        return -np.inf
    if dtype.kind == "b":
        return False
    return np.iinfo(dtype).min


def _wide(x):
    """float32 for half (the arithmetic's dtype), else `x` itself."""
    return x.astype(np.float32) if x.dtype == np.float16 else x


# --- 3-D pools -------------------------------------------------------------------------------
def _pool3d_geometry(ctx, op, spatial):
    """The node's WindowGeom for an NDHWC input of these spatial sizes, with TensorFlow's CPU
    checks (NDHWC only, no pooling over the batch or the channels)."""
    key = ("pool3d", tuple(spatial))
    g = ctx.cache.get(key)
    if g is not None:
        return g
    if s(ctx.attrs.get("data_format", b"NDHWC")) != "NDHWC":
        fail(f"Default Pooling3DOp only supports NDHWC on device type CPU ({op} with "
             f"data_format NCDHW)")
    kn, ksize, kc = spatial_of(ctx.attrs["ksize"], "ksize", 5)
    sn, strides, sc = spatial_of(ctx.attrs["strides"], "strides", 5)
    if kn != 1 or kc != 1 or sn != 1 or sc != 1:
        fail("Pooling is not yet supported on the batch or depth dimension.")
    g = ctx.cache[key] = WindowGeom(spatial, ksize, strides, (1, 1, 1), ctx.attrs["padding"])
    return g


def _check_input(op, x, rank, dtypes):
    if x.ndim != rank:
        fail(f"{op}: input must be {rank}-dimensional, got shape {list(x.shape)}")
    if x.dtype.type not in dtypes:
        fail(f"{op} has no CPU kernel for dtype {tf_name(x)}")


def _max_of_windows(x, g):
    """[N, *out, C]: the max of each window of `x` (padding never wins)."""
    xpad = g.pad(x, _lowest(x.dtype))
    taps = iter(g.taps())
    best = xpad[g.tap(next(taps))].copy()
    for offsets in taps:
        np.maximum(best, xpad[g.tap(offsets)], out=best)
    return best


def _sum_of_windows(x, g):
    xpad = g.pad(x)
    taps = iter(g.taps())
    total = xpad[g.tap(next(taps))].copy()
    for offsets in taps:
        total += xpad[g.tap(offsets)]
    return total


def _empty_output(x, g):
    return 0 in x.shape or 0 in g.out


@kernel("MaxPool3D")
def max_pool3d(ctx, x):
    x = np.asarray(x)
    _check_input("MaxPool3D", x, 5, _POOL3D_FLOATS)
    g = _pool3d_geometry(ctx, "MaxPool3D", x.shape[1:4])
    if _empty_output(x, g):
        return np.zeros((x.shape[0], *g.out, x.shape[4]), x.dtype)
    return _max_of_windows(x, g)


@kernel("AvgPool3D")
def avg_pool3d(ctx, x):
    x = np.asarray(x)
    _check_input("AvgPool3D", x, 5, _AVG3D_FLOATS)
    g = _pool3d_geometry(ctx, "AvgPool3D", x.shape[1:4])
    if _empty_output(x, g):
        return np.zeros((x.shape[0], *g.out, x.shape[4]), x.dtype)
    wide = _wide(x)
    total = _sum_of_windows(wide, g)
    total /= g.valid_counts()[None, ..., None].astype(wide.dtype)
    return total.astype(x.dtype, copy=False)


@kernel("MaxPool3DGrad")
def max_pool3d_grad(ctx, x, y, dy):
    x, y, dy = np.asarray(x), np.asarray(y), np.asarray(dy)
    _check_input("MaxPool3DGrad", x, 5, _POOL3D_FLOATS)
    if dy.dtype.type not in _POOL3D_FLOATS:
        fail(f"MaxPool3DGrad has no CPU kernel for grad dtype {tf_name(dy)}")
    g = _pool3d_geometry(ctx, "MaxPool3DGrad", x.shape[1:4])
    want = (x.shape[0], *g.out, x.shape[4])
    for name, v in (("orig_output", y), ("grad", dy)):
        if tuple(v.shape) != want:
            fail(f"MaxPool3DGrad: {name} shape {list(v.shape)} must be the pooled shape "
                 f"{list(want)}")
    if _empty_output(x, g):
        return np.zeros(x.shape, dy.dtype)
    # Every input equal to its window's max (orig_output) gets that window's gradient, as
    # TensorFlow's CPU kernel compares each window against the output.
    wide = _wide(dy)
    xpad = g.pad(x, _lowest(x.dtype))
    dxp = np.zeros(g.padded_shape(x.shape[0], x.shape[4]), wide.dtype)
    for offsets in g.taps():
        idx = g.tap(offsets)
        dxp[idx] += np.where(xpad[idx] == y, wide, 0)
    return np.ascontiguousarray(dxp[g.interior()]).astype(dy.dtype, copy=False)


@kernel("MaxPool3DGradGrad")
def max_pool3d_grad_grad(ctx, x, y, grad):
    """MaxPool3DGrad's gradient in its gradient: each window's grad at its first input
    (row-major taps) equal to orig_output (the max), 0 where none is; shaped like y."""
    x, y, grad = np.asarray(x), np.asarray(y), np.asarray(grad)
    for name, v in (("orig_input", x), ("orig_output", y), ("grad", grad)):
        if v.ndim != 5:
            fail(f"{name} must be 5-dimensional")
    _check_input("MaxPool3DGradGrad", x, 5, _POOL3D_FLOATS)
    if grad.shape != x.shape:
        fail(f"grad shape {list(grad.shape)} must equal orig_input shape {list(x.shape)}")
    g = _pool3d_geometry(ctx, "MaxPool3DGradGrad", x.shape[1:4])
    want = (x.shape[0], *g.out, x.shape[4])
    if tuple(y.shape) != want:
        fail(f"orig_output shape {list(y.shape)} is not the pooled shape {list(want)}")
    out = np.zeros(want, grad.dtype)
    if _empty_output(x, g):
        return out
    xpad, gpad = g.pad(x, _lowest(x.dtype)), g.pad(grad)
    real = g.pad(np.ones(x.shape, bool), False)  # padding never matches
    found = np.zeros(want, bool)
    for offsets in g.taps():
        idx = g.tap(offsets)
        hit = (xpad[idx] == y) & real[idx] & ~found
        out[hit] = gpad[idx][hit]
        found |= hit
    return out


@kernel("AvgPool3DGrad", host_inputs=(0,))
def avg_pool3d_grad(ctx, orig_input_shape, dy):
    dy = np.asarray(dy)
    sizes = shape_vector(orig_input_shape, "orig_input_shape")
    if len(sizes) != 5 or min(sizes) < 0:
        fail(f"orig_input_shape must be 5 non-negative sizes, got {list(sizes)}")
    if dy.dtype.type not in _AVG3D_FLOATS:
        fail(f"AvgPool3DGrad has no CPU kernel for dtype {tf_name(dy)}")
    g = _pool3d_geometry(ctx, "AvgPool3DGrad", sizes[1:4])
    want = (sizes[0], *g.out, sizes[4])
    if tuple(dy.shape) != want:
        fail(f"AvgPool3DGrad: grad shape {list(dy.shape)} must be the pooled shape "
             f"{list(want)}")
    if 0 in sizes or 0 in g.out:
        return np.zeros(sizes, dy.dtype)
    wide = _wide(dy)
    share = wide / g.valid_counts()[None, ..., None].astype(wide.dtype)
    dxp = np.zeros(g.padded_shape(sizes[0], sizes[4]), wide.dtype)
    for offsets in g.taps():
        dxp[g.tap(offsets)] += share
    return np.ascontiguousarray(dxp[g.interior()]).astype(dy.dtype, copy=False)


# --- MaxPoolWithArgmax -----------------------------------------------------------------------
_ARGMAX_TYPES = (np.float16, np.float32, np.float64, np.int8, np.int16, np.int32, np.int64,
                 np.uint8, np.uint16, np.uint32, np.uint64)


def _argmax_geometry(ctx, op, spatial):
    key = ("argmax_pool", tuple(spatial))
    g = ctx.cache.get(key)
    if g is not None:
        return g
    kn, ksize, kc = spatial_of(ctx.attrs["ksize"], "ksize", 4)
    sn, strides, sc = spatial_of(ctx.attrs["strides"], "strides", 4)
    if kn != 1 or sn != 1:
        fail("Pooling is not yet supported on the batch dimension.")
    if kc != 1 or sc != 1:
        fail(f"{op}: pooling over the depth dimension is not supported")
    g = ctx.cache[key] = WindowGeom(spatial, ksize, strides, (1, 1), ctx.attrs["padding"])
    return g


def _real_taps(g, h, w):
    """[OH, OW, 1, KH*KW] bool: which taps of each window lie inside the image."""
    starts = [np.arange(o) * st - before for o, st, (before, _) in
              zip(g.out, g.strides, g.pads)]
    rows = starts[0][:, None] + np.arange(g.ksize[0])  # [OH, KH]
    cols = starts[1][:, None] + np.arange(g.ksize[1])  # [OW, KW]
    inside = (((rows >= 0) & (rows < h))[:, None, :, None]
              & ((cols >= 0) & (cols < w))[None, :, None, :])
    return inside.reshape(g.out[0], g.out[1], 1, -1)


def _flat_index(g, tap, shape, with_batch):
    """The flat input index ((b*H + y)*W + x)*C + c (the batch term only `with_batch`) of
    tap number `tap` ([N, OH, OW, C], row-major in the window) of every window."""
    n, h, w, c = shape
    i, j = np.divmod(tap.astype(np.int64), g.ksize[1])
    row = (np.arange(g.out[0]) * g.strides[0] - g.pads[0][0])[:, None, None] + i
    col = (np.arange(g.out[1]) * g.strides[1] - g.pads[1][0])[:, None] + j
    index = (row * w + col) * c + np.arange(c)
    if with_batch:
        index += (np.arange(n, dtype=np.int64) * (h * w * c))[:, None, None, None]
    return index


@kernel("MaxPoolWithArgmax")
def max_pool_with_argmax(ctx, x):
    x = np.asarray(x)
    _check_input("MaxPoolWithArgmax", x, 4, _ARGMAX_TYPES)
    if x.size == 0:  # TensorFlow refuses an empty input rather than return empty outputs
        fail(f"tensor_in must not be empty, got shape {list(x.shape)}")
    n, h, w, c = x.shape
    g = _argmax_geometry(ctx, "MaxPoolWithArgmax", (h, w))
    index_dtype = ctx.attrs.get("Targmax")
    index_dtype = np.int64 if index_dtype is None else index_dtype.np
    if _empty_output(x, g):
        shape = (n, *g.out, c)
        return np.zeros(shape, x.dtype), np.zeros(shape, index_dtype)
    xpad = g.pad(x, _lowest(x.dtype))
    windows = g.windows(xpad)  # [N, OH, OW, KH, KW, C]
    windows = np.moveaxis(windows, 5, 3).reshape(n, *g.out, c, -1)
    y = windows.max(axis=-1)
    # The first real input equal to its window's max, in row-major tap order, as TensorFlow's
    # CPU kernel, which replaces its running max only on a strictly larger value (np.argmax
    # keeps the first True; a padded tap never counts, even when the max is the lowest value).
    best = ((windows == y[..., None]) & _real_taps(g, h, w)).argmax(axis=-1)
    with_batch = bool(ctx.attrs.get("include_batch_in_index", False))
    return y, _flat_index(g, best, x.shape, with_batch).astype(index_dtype)


@kernel("MaxPoolGradWithArgmax")
def max_pool_grad_with_argmax(ctx, x, dy, argmax):
    x, dy, argmax = np.asarray(x), np.asarray(dy), np.asarray(argmax)
    _check_input("MaxPoolGradWithArgmax", x, 4, _ARGMAX_TYPES)
    n, h, w, c = x.shape
    g = _argmax_geometry(ctx, "MaxPoolGradWithArgmax", (h, w))
    want = (n, *g.out, c)
    for what, v in (("grad", dy), ("argmax", argmax)):
        if tuple(v.shape) != want:
            fail(f"Expected {what} shape to be {tf_dims(want)}, but got {tf_dims(v.shape)}")
    if argmax.dtype != np.int64:
        fail(f"MaxPoolGradWithArgmax has no CPU kernel for argmax of dtype {tf_name(argmax)} "
             f"(TensorFlow's takes int64)")
    if dy.dtype != x.dtype:
        fail(f"MaxPoolGradWithArgmax: grad dtype {tf_name(dy)} must be the input's "
             f"{tf_name(x)}")
    per_image = h * w * c
    index = argmax.astype(np.int64).reshape(n, -1) if n else np.zeros((0, 0), np.int64)
    if not ctx.attrs.get("include_batch_in_index", False):
        index = index + (np.arange(n, dtype=np.int64) * per_image)[:, None]
    lo = (np.arange(n, dtype=np.int64) * per_image)[:, None]
    bad = (index < lo) | (index >= lo + per_image)
    if bad.any():
        at = np.argwhere(bad)[0]
        fail(f"Invalid output gradient index: argmax {int(argmax.reshape(n, -1)[tuple(at)])} "
             f"of image {int(at[0])} is outside that image's {per_image} input values")
    out = np.zeros(n * per_image, dy.dtype)
    np.add.at(out, index.reshape(-1), dy.reshape(-1))
    return out.reshape(x.shape)


# --- ExtractImagePatches ---------------------------------------------------------------------
_PATCH_TYPES = (np.float16, np.float32, np.float64, np.int8, np.int16, np.int32, np.int64,
                np.uint8, np.uint16, np.uint32, np.uint64, np.complex64, np.complex128)


def _patch_geometry(ctx, spatial):
    key = ("patches", tuple(spatial))
    g = ctx.cache.get(key)
    if g is not None:
        return g
    parts = {}
    for what in ("ksizes", "strides", "rates"):
        first, inner, last = spatial_of(ctx.attrs[what], what, 4)
        if first != 1 or last != 1:
            fail(f"Only support {what} across space.")
        if min(inner) < 1:
            fail(f"{what} is out of range: {[first, *inner, last]} (entries must be >= 1)")
        parts[what] = inner
    g = ctx.cache[key] = WindowGeom(spatial, parts["ksizes"], parts["strides"], parts["rates"],
                                    ctx.attrs["padding"])
    return g


@kernel("ExtractImagePatches")
def extract_image_patches(ctx, x):
    x = np.asarray(x)
    _check_input("ExtractImagePatches", x, 4, _PATCH_TYPES)
    n, h, w, c = x.shape
    g = _patch_geometry(ctx, (h, w))
    depth = g.ksize[0] * g.ksize[1] * c
    if _empty_output(x, g):
        return np.zeros((n, *g.out, depth), x.dtype)
    # The windows view is [N, OH, OW, KH, KW, C]: its reshape is the (kh, kw, c) depth order.
    # It copies, except for 1x1 patches of an unpadded input: copied then, so that the
    # output is an array of its own (the op's fresh_output trait), never a view of `x`.
    xpad = g.pad(x)
    out = g.windows(xpad).reshape(n, *g.out, depth)
    return out.copy() if np.may_share_memory(out, xpad) else out
