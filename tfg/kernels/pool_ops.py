"""Pooling, NHWC or NCHW, VALID or SAME: MaxPool, MaxPoolV2, AvgPool and their gradients.

    MaxPool(x[N,H,W,C], ksize=[1,3,3,1], strides=[1,2,2,1], padding="VALID") -> [N,OH,OW,C]

The forward pools are separable: a window's max (or sum) is the max over its KW columns of
the max over its KH rows. So the rows are reduced first (KH-1 elementwise maximum/add calls
on whole row slices: H strides keep each image row's W*C values adjacent, so the inner loops
are long), then the columns of that (KW-1 calls): KH+KW-2 whole-tensor operations instead of
KH*KW-1, and no np.pad (the padded input is one filled allocation). Measured 1.3-3x faster
than one operation per window tap on the keras.applications pools. The gradients loop over
the KH*KW taps, each a whole-tensor operation. Everything is written against `ctx.xp`
(numpy or CuPy).
"""
import numpy as np

from tfg.kernels import conv_crop, pool_fast
from tfg.kernels._util import fail, from_nhwc, is_nchw, shape_vector, spatial_attr, to_nhwc
from tfg.kernels.conv_geom import geometry, padded, padded_nchw
from tfg.kernels.registry import ALL_DEVICES, kernel
from tfg.kernels.select import where


def _pool_geom(ctx, nhwc_shape, ksize=None, strides=None):
    fmt = ctx.attrs.get("data_format", b"NHWC")
    kn, kh, kw, kc = spatial_attr(ksize if ksize is not None else ctx.attrs["ksize"], fmt,
                                  "ksize")
    if kn != 1 or kc != 1:
        fail("pooling over the batch or depth dimension is not supported")
    if kh < 1 or kw < 1:  # each op in TensorFlow's words
        what = ("Sliding window ksize must be positive" if ctx.op.startswith("Max") else
                "ksize must be a positive int32 value")
        fail(f"{what}, got {[kn, kh, kw, kc]}")
    return geometry(ctx, nhwc_shape[1], nhwc_shape[2], kh, kw, strides=strides,
                    dilations=[1, 1, 1, 1])


def _prepared_geom(ctx, shape):
    """The geometry a prepared NHWC pool runs on: window rows and columns that meet only
    padding at every output dropped (conv_crop.py; a max or a sum over the real inputs
    is unchanged, and so are an AvgPool's counts of them). A 3x3 SAME pool of a 1x1 map
    becomes a copy (InceptionV3's last two AvgPools), where it padded, added and divided."""
    g = _pool_geom(ctx, shape)
    crop = conv_crop.cropped(shape[1], shape[2], g) if g.oh and g.ow else None
    return g if crop is None else crop[2]


def _lowest(dtype):
    return -np.inf if dtype.kind == "f" else np.iinfo(dtype).min


def _input_sizes(sizes, fmt):
    dims = shape_vector(sizes, "input_sizes")
    if len(dims) != 4:
        fail(f"input_sizes must have 4 elements, got {list(dims)}")
    return (dims[0], dims[2], dims[3], dims[1]) if is_nchw(fmt) else dims


def _separable(xpad, g, op, nchw=False):
    """op-reduce (maximum or add) of every window of padded `xpad` (NHWC, or NCHW when
    `nchw`): rows, then columns. The first call of each stage allocates its result; the
    others write into it."""
    hs, ws = (2, 3) if nchw else (1, 2)

    def take(a, axis, start, stop, step):
        idx = [slice(None)] * 4
        idx[axis] = slice(start, stop, step)
        return a[tuple(idx)]

    hspan, wspan = (g.oh - 1) * g.sh + 1, (g.ow - 1) * g.sw + 1
    if g.kh > 1:
        r = op(take(xpad, hs, 0, hspan, g.sh), take(xpad, hs, 1, 1 + hspan, g.sh))
        for i in range(2, g.kh):
            op(r, take(xpad, hs, i, i + hspan, g.sh), out=r)
        # The padded input is done with: freed before the output is allocated, the output
        # can take its memory (three live buffers of a few hundred KB made glibc give its
        # heap top back and fault it in again on every call: ~130 page faults, 0.6 ms).
        del xpad
    else:
        r = take(xpad, hs, 0, hspan, g.sh)
    if g.kw == 1:
        return take(r, ws, 0, wspan, g.sw).copy()
    out = op(take(r, ws, 0, wspan, g.sw), take(r, ws, 1, 1 + wspan, g.sw))
    for j in range(2, g.kw):
        op(out, take(r, ws, j, j + wspan, g.sw), out=out)
    return out


def _pad(xp, x, g, value):
    """NHWC `x` padded with `value` (numpy: one filled allocation, no np.pad)."""
    return padded(x, g, value) if xp is np else g.pad(xp, x, value)


def _pool(ctx, x, op, value, ksize=None, strides=None):
    """(pool of `x` in its own layout, geometry): an NCHW input pools in NCHW, no transposes."""
    xp = ctx.xp
    fmt = ctx.attrs.get("data_format", b"NHWC")
    nchw = is_nchw(fmt)
    n, c = (x.shape[0], x.shape[1]) if nchw else (x.shape[0], x.shape[3])
    g = _pool_geom(ctx, to_nhwc(x, fmt).shape, ksize, strides)
    if 0 in x.shape or g.oh == 0 or g.ow == 0:
        return xp.zeros((n, c, g.oh, g.ow) if nchw else (n, g.oh, g.ow, c), x.dtype), g
    # Passed on without a name here, so that _separable holds the only reference to it.
    if xp is np and nchw:
        return _separable(padded_nchw(x, g, value), g, op, nchw), g
    return _separable(from_nhwc(_pad(xp, to_nhwc(x, fmt), g, value), fmt), g, op, nchw), g


def _max_pool(ctx, x, ksize=None, strides=None):
    x = ctx.xp.asarray(x)
    if x.ndim != 4:
        fail(f"MaxPool needs a 4-D input, got {list(x.shape)}")
    return _pool(ctx, x, ctx.xp.maximum, _lowest(x.dtype), ksize, strides)[0]


@kernel("MaxPool", device_types=ALL_DEVICES)
def max_pool(ctx, x):
    if type(x) is np.ndarray:
        run = ctx.cache.get(("max_run", x.shape, x.dtype))
        if run is not None:
            return run(x)
        if (ctx.xp is np and x.ndim == 4 and 0 not in x.shape
                and not is_nchw(ctx.attrs.get("data_format", b"NHWC"))):
            g = _prepared_geom(ctx, x.shape)
            if g.oh and g.ow:
                run = ctx.cache[("max_run", x.shape, x.dtype)] = pool_fast.prepared(
                    g, x.shape, x.dtype, np.maximum, _lowest(x.dtype), None)
                return run(x)
    return _max_pool(ctx, x)


@kernel("MaxPoolV2", device_types=ALL_DEVICES, host_inputs=(1, 2))
def max_pool_v2(ctx, x, ksize, strides):
    return _max_pool(ctx, x, shape_vector(ksize, "ksize"), shape_vector(strides, "strides"))


@kernel(["MaxPoolGrad", "MaxPoolGradV2"], device_types=ALL_DEVICES, host_inputs=(3, 4))
def max_pool_grad(ctx, x, y, dy, *ksize_strides):
    xp = ctx.xp
    fmt = ctx.attrs.get("data_format", b"NHWC")
    x, dy = to_nhwc(xp.asarray(x), fmt), to_nhwc(xp.asarray(dy), fmt)
    ks = [shape_vector(v) for v in ksize_strides] if ksize_strides else [None, None]
    g = _pool_geom(ctx, x.shape, *ks)
    n, h, wd, c = x.shape
    xpad = _pad(xp, x, g, _lowest(x.dtype))
    # The first maximum of each window (row-major taps, strict >) gets the gradient. Selected
    # by bit masks (kernels/select.py): the masks are data-dependent, np.where's branches slow.
    best = xpad[g.tap(0, 0)].copy()
    arg = xp.zeros(best.shape, xp.int32)
    for i in range(g.kh):
        for j in range(g.kw):
            if i or j:
                t = xpad[g.tap(i, j)]
                better = t > best
                best = where(better, t, best, xp)
                arg = where(better, np.int32(i * g.kw + j), arg, xp)
    dxp = xp.zeros(g.padded_shape(n, h, wd, c), dtype=dy.dtype)
    zero = xp.zeros((), dy.dtype)
    for i in range(g.kh):
        for j in range(g.kw):
            dxp[g.tap(i, j)] += where(arg == i * g.kw + j, dy, zero, xp)
    return from_nhwc(g.crop(dxp, h, wd), fmt)


def _grad_grad_windows(ctx, ksize_strides, rank):
    """MaxPoolGradGrad's ksize and strides (attrs, or MaxPoolGradGradV2's inputs), checked
    in TensorFlow's words: 4 elements each, no pooling over the batch or the channels."""
    if ksize_strides:
        ksize, strides = (list(shape_vector(v)) for v in ksize_strides)
    else:
        ksize, strides = list(ctx.attrs["ksize"]), list(ctx.attrs["strides"])
    for name, v in (("ksize", ksize), ("strides", strides)):
        if len(v) != rank:
            fail(f"Sliding window {name} field must specify {rank} dimensions")
    fmt = ctx.attrs.get("data_format", b"NHWC")
    kn, _, _, kc = spatial_attr(ksize, fmt, "ksize")
    sn, _, _, sc = spatial_attr(strides, fmt, "strides")
    if kn != 1 or sn != 1:
        fail("Pooling is not yet supported on the batch dimension.")
    if kc != 1 or sc != 1:
        fail("MaxPoolingGradGrad is not yet supported on the depth dimension.")
    return ksize, strides


@kernel(["MaxPoolGradGrad", "MaxPoolGradGradV2"], device_types=ALL_DEVICES,
        host_inputs=(3, 4))
def max_pool_grad_grad(ctx, x, y, grad, *ksize_strides):
    """The gradient of MaxPoolGrad in its gradient: for each window, grad at the window's
    first input (row-major) equal to orig_output, 0 where none is; shaped like orig_output."""
    xp = ctx.xp
    fmt = ctx.attrs.get("data_format", b"NHWC")
    x, y, grad = xp.asarray(x), xp.asarray(y), xp.asarray(grad)
    for name, v in (("orig_input", x), ("orig_output", y), ("grad", grad)):
        if v.ndim != 4:
            fail(f"{name} must be 4-dimensional")
    if grad.shape != x.shape:
        fail(f"grad shape {list(grad.shape)} must equal orig_input shape {list(x.shape)}")
    ks = _grad_grad_windows(ctx, ksize_strides, 4)
    x, y, grad = to_nhwc(x, fmt), to_nhwc(y, fmt), to_nhwc(grad, fmt)
    g = _pool_geom(ctx, x.shape, *ks)
    if y.shape != (x.shape[0], g.oh, g.ow, x.shape[3]):
        fail(f"orig_output shape {list(y.shape)} is not the pooled shape "
             f"{[x.shape[0], g.oh, g.ow, x.shape[3]]}")
    out = xp.zeros(y.shape, grad.dtype)
    if 0 in out.shape:
        return from_nhwc(out, fmt)
    xpad = _pad(xp, x, g, _lowest(x.dtype))
    real = _pad(xp, xp.ones(x.shape, bool), g, False)  # padding never matches
    gpad = _pad(xp, grad, g, 0)
    found = xp.zeros(y.shape, bool)
    for i in range(g.kh):
        for j in range(g.kw):
            tap = g.tap(i, j)
            hit = (xpad[tap] == y) & real[tap] & ~found
            out = where(hit, gpad[tap], out, xp)
            found |= hit
    return from_nhwc(out, fmt)


def _window_counts(ctx, g, h, w, dtype):
    """How many real (unpadded) inputs each output window covers, as [1, OH, OW, 1] of `dtype`
    in the device's memory (made once per node and shape: no host copy per step)."""
    key = ("window_counts", g.oh, g.ow, h, w, dtype)
    cached = ctx.cache.get(key)
    if cached is not None:
        return cached

    def counts(out, stride, pad, k, size):
        start = np.arange(out) * stride - pad
        return np.minimum(start + k, size) - np.maximum(start, 0)
    table = np.outer(counts(g.oh, g.sh, g.pt, g.kh, h), counts(g.ow, g.sw, g.pl, g.kw, w))
    table = ctx.xp.asarray(table[None, :, :, None].astype(dtype))
    ctx.cache[key] = table
    return table


@kernel("AvgPool", device_types=ALL_DEVICES)
def avg_pool(ctx, x):
    if type(x) is np.ndarray:
        run = ctx.cache.get(("avg_run", x.shape, x.dtype))
        if run is not None:
            return run(x)
    xp = ctx.xp
    fmt = ctx.attrs.get("data_format", b"NHWC")
    x = xp.asarray(x)
    if x.ndim != 4 or x.dtype.kind != "f":
        fail(f"AvgPool needs a 4-D floating input, got {x.dtype} {list(x.shape)}")
    nchw = is_nchw(fmt)
    if xp is np and not nchw and type(x) is np.ndarray and 0 not in x.shape:
        g = _prepared_geom(ctx, x.shape)
        if g.oh and g.ow:
            run = ctx.cache[("avg_run", x.shape, x.dtype)] = pool_fast.prepared(
                g, x.shape, x.dtype, np.add, 0, _avg_divisor(g, x.shape, x.dtype))
            return run(x)
    out, g = _pool(ctx, x, xp.add, 0)
    if g.kh * g.kw > 1 and out.size:
        h, w = (x.shape[2], x.shape[3]) if nchw else (x.shape[1], x.shape[2])
        counts = _window_counts(ctx, g, h, w, x.dtype)
        out /= counts.reshape(1, 1, g.oh, g.ow) if nchw else counts
    return out


def _avg_divisor(g, shape, dtype):
    """The window counts of an NHWC AvgPool, repeated over the channels ([OH, OW*C],
    read-only): dividing by it runs one OH*OW*C-long loop per image, where the [1, OH, OW, 1]
    table broadcast over C ran OH*OW loops of C (a third of a 12x12x44 pool's time). None
    for 1x1 windows (nothing to divide)."""
    if g.kh * g.kw == 1:
        return None
    n, h, w, c = shape

    def counts(out, stride, pad, k, size):
        start = np.arange(out) * stride - pad
        return np.minimum(start + k, size) - np.maximum(start, 0)
    table = np.outer(counts(g.oh, g.sh, g.pt, g.kh, h), counts(g.ow, g.sw, g.pl, g.kw, w))
    full = np.repeat(table.astype(dtype).reshape(g.oh, g.ow, 1), c, axis=2)
    full = full.reshape(1, g.oh, g.ow, c)
    full.flags.writeable = False
    return full


@kernel("AvgPoolGrad", device_types=ALL_DEVICES, host_inputs=(0,))
def avg_pool_grad(ctx, orig_input_shape, dy):
    xp = ctx.xp
    fmt = ctx.attrs.get("data_format", b"NHWC")
    dy = to_nhwc(xp.asarray(dy), fmt)
    n, h, wd, c = _input_sizes(orig_input_shape, fmt)
    g = _pool_geom(ctx, (n, h, wd, c))
    share = dy / _window_counts(ctx, g, h, wd, dy.dtype)
    dxp = xp.zeros(g.padded_shape(n, h, wd, c), dtype=dy.dtype)
    for i in range(g.kh):
        for j in range(g.kw):
            dxp[g.tap(i, j)] += share
    return from_nhwc(g.crop(dxp, h, wd), fmt)
