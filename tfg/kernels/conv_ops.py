"""Convolutions and pooling, NHWC or NCHW, with VALID/SAME/EXPLICIT padding, strides and
dilations.

    Conv2D(x[N,H,W,C], w[KH,KW,C,O], strides=[1,s,s,1], padding="SAME") -> [N,ceil(H/s),..,O]
    Conv2DBackpropInput(input_sizes, w, dy) -> dx;  Conv2DBackpropFilter(x, filter_sizes, dy) -> dw
    MaxPool / AvgPool (+ grads), DepthwiseConv2dNative (+ backprops)

Conv2D is im2col (a strided view of the padded input, copied once into a patch matrix) and one
matmul; the backward ops and the pools loop over the KH*KW filter taps only, each tap a whole-
tensor numpy operation, never over pixels. NCHW inputs are transposed to NHWC and back.
Grouped Conv2D (filter in-channels = input channels / groups) shares the patch matrix and the
scatter; only its matmuls differ (conv_grouped.py).
"""
import numpy as np
from numpy.lib.stride_tricks import as_strided

from tfg.kernels import conv_grouped
from tfg.kernels._util import (conv_out_and_pads, fail, from_nhwc, is_nchw, s, shape_vector,
                               spatial_attr, to_nhwc)
from tfg.kernels.registry import ALL_DEVICES, kernel
from tfg.kernels.select import where


class _Geom:
    """Output size, padding, strides and dilations of one conv/pool call (NHWC terms)."""

    __slots__ = ("oh", "ow", "pt", "pb", "pl", "pr", "sh", "sw", "dh", "dw", "kh", "kw")

    def __init__(self, ctx, h, w, kh, kw, strides=None, dilations=None):
        fmt = ctx.attrs.get("data_format", b"NHWC")
        sn, self.sh, self.sw, sc = spatial_attr(
            strides if strides is not None else ctx.attrs["strides"], fmt, "strides")
        if sn != 1 or sc != 1:
            fail("strides in the batch and depth dimensions must be 1")
        dil = dilations if dilations is not None else ctx.attrs.get("dilations", [1, 1, 1, 1])
        _, self.dh, self.dw, _ = spatial_attr(dil, fmt, "dilations")
        if min(self.sh, self.sw, self.dh, self.dw) < 1:
            fail("strides and dilations must be >= 1")
        padding = s(ctx.attrs["padding"])
        eh = ew = (0, 0)
        if padding == "EXPLICIT":
            p = list(ctx.attrs.get("explicit_paddings", []))
            if len(p) != 8:
                fail(f"explicit_paddings must have 8 entries, got {len(p)}")
            pairs = [tuple(p[i:i + 2]) for i in range(0, 8, 2)]
            eh, ew = (pairs[2], pairs[3]) if is_nchw(fmt) else (pairs[1], pairs[2])
        self.kh, self.kw = kh, kw
        self.oh, self.pt, self.pb = conv_out_and_pads(h, kh, self.sh, self.dh, padding, eh)
        self.ow, self.pl, self.pr = conv_out_and_pads(w, kw, self.sw, self.dw, padding, ew)

    def pad(self, xp, x, value=0):
        if not (self.pt or self.pb or self.pl or self.pr):
            return x
        return xp.pad(x, ((0, 0), (self.pt, self.pb), (self.pl, self.pr), (0, 0)),
                      constant_values=value)

    def tap(self, i, j):
        """Index of filter tap (i, j) in the padded input, for every output position."""
        h0, w0 = i * self.dh, j * self.dw
        return (slice(None), slice(h0, h0 + (self.oh - 1) * self.sh + 1, self.sh),
                slice(w0, w0 + (self.ow - 1) * self.sw + 1, self.sw), slice(None))

    def padded_shape(self, n, h, w, c):
        return (n, h + self.pt + self.pb, w + self.pl + self.pr, c)

    def crop(self, x, h, w):
        return x[:, self.pt:self.pt + h, self.pl:self.pl + w, :]


def _im2col(xp, x, g):
    """Patch matrix [N*OH*OW, KH*KW*C] of NHWC `x` (any strides: an NCHW input's transpose is
    fine), rows in output order and columns in the filter's (kh, kw, c) order.

    On a GPU (`xp` not numpy) the KH*KW taps are stacked: a few whole-tensor copies, then
    one cuBLAS GEMM does the convolution (no cuDNN needed).

    The padded copy is one allocation (zeros, then the interior assigned: this also makes an
    NCHW view contiguous in the same pass) instead of np.pad plus ascontiguousarray. With
    dilation 1 along W the KW taps of a row are adjacent in memory, so (kw, c) is one run of
    KW*C values and the copy into the patch matrix moves whole runs, not C values at a time.
    """
    n, h, w, c = x.shape
    if xp is not np:
        xpad = g.pad(xp, x)
        taps = [xpad[g.tap(i, j)] for i in range(g.kh) for j in range(g.kw)]
        cols = taps[0] if len(taps) == 1 else xp.stack(taps, axis=3)
        return cols.reshape(n * g.oh * g.ow, g.kh * g.kw * c)
    xpad = _padded(x, g)
    sn, sh, sw, sc = xpad.strides
    if g.dw == 1:
        win = as_strided(xpad, (n, g.oh, g.ow, g.kh, g.kw * c),
                         (sn, sh * g.sh, sw * g.sw, sh * g.dh, sc), writeable=False)
    else:
        win = as_strided(xpad, (n, g.oh, g.ow, g.kh, g.kw, c),
                         (sn, sh * g.sh, sw * g.sw, sh * g.dh, sw * g.dw, sc), writeable=False)
    return win.reshape(n * g.oh * g.ow, g.kh * g.kw * c)


def _padded(x, g):
    """NHWC `x` zero-padded per `g`, C-contiguous: one allocation (zeros, then the interior
    assigned, which also makes an NCHW view contiguous in the same pass) instead of np.pad
    plus ascontiguousarray; `x` itself when it needs neither."""
    if not (g.pt or g.pb or g.pl or g.pr) and x.flags.c_contiguous:
        return x
    n, h, w, c = x.shape
    xpad = np.zeros(g.padded_shape(n, h, w, c), x.dtype)
    xpad[:, g.pt:g.pt + h, g.pl:g.pl + w, :] = x
    return xpad


def _windows(xpad, g):
    """Read-only view [N, OH, OW, KH, KW, C] of padded NHWC `xpad`: every output position's
    receptive field, strides and dilations included, without a copy."""
    sn, sh, sw, sc = xpad.strides
    return as_strided(xpad, (xpad.shape[0], g.oh, g.ow, g.kh, g.kw, xpad.shape[3]),
                      (sn, sh * g.sh, sw * g.sw, sh * g.dh, sw * g.dw, sc), writeable=False)


def _depthwise_numpy(x, w, g):
    """Depthwise convolution of NHWC `x` by w[KH, KW, C, M] -> [N, OH, OW, C*M] on the CPU.

    One einsum over the strided window view (no patch matrix, no per-tap temporaries): numpy's
    plain (unoptimized) einsum loop reads each window once and sums the KH*KW taps in place,
    measured 1.5-3x faster than a multiply-add per tap on MobileNetV2's depthwise layers."""
    win = _windows(_padded(x, g), g)
    if w.shape[3] == 1:
        return np.einsum("nhwijc,ijc->nhwc", win, w[:, :, :, 0], optimize=False)
    n, c, m = x.shape[0], x.shape[3], w.shape[3]
    out = np.einsum("nhwijc,ijcm->nhwcm", win, w, optimize=False)
    return out.reshape(n, g.oh, g.ow, c * m)


def _check_conv(x, w, op):
    """The number of groups (1: dense; more: conv_grouped.py does the matmuls)."""
    if x.ndim != 4 or w.ndim != 4:
        fail(f"{op} needs a 4-D input and filter, got {list(x.shape)} and {list(w.shape)}")
    return conv_grouped.groups_of(x.shape[3], w.shape[2], w.shape[3], op)


@kernel("Conv2D", device_types=ALL_DEVICES)
def conv2d(ctx, x, w):
    xp = ctx.xp
    fmt = ctx.attrs.get("data_format", b"NHWC")
    x, w = to_nhwc(xp.asarray(x), fmt), xp.asarray(w)
    groups = _check_conv(x, w, "Conv2D")
    n, h, wd, c = x.shape
    kh, kw, _, oc = w.shape
    g = _Geom(ctx, h, wd, kh, kw)
    if groups > 1:
        y = conv_grouped.forward(xp, _im2col(xp, x, g), w, groups)
    elif kh == kw == 1 and g.sh == g.sw == 1 and not (g.pt or g.pl):
        y = x.reshape(-1, c) @ w.reshape(c, oc)
    else:
        y = _im2col(xp, x, g) @ w.reshape(-1, oc)
    return from_nhwc(y.reshape(n, g.oh, g.ow, oc), fmt)


def _input_sizes(sizes, fmt, channels):
    dims = shape_vector(sizes, "input_sizes")
    if len(dims) != 4:
        fail(f"input_sizes must have 4 elements, got {list(dims)}")
    return (dims[0], dims[2], dims[3], dims[1]) if is_nchw(fmt) else dims


@kernel("Conv2DBackpropInput", device_types=ALL_DEVICES, host_inputs=(0,))
def conv2d_backprop_input(ctx, input_sizes, w, dy):
    xp = ctx.xp
    fmt = ctx.attrs.get("data_format", b"NHWC")
    w, dy = xp.asarray(w), to_nhwc(xp.asarray(dy), fmt)
    if w.ndim != 4:
        fail(f"Conv2DBackpropInput needs a 4-D filter, got {list(w.shape)}")
    n, h, wd, c = _input_sizes(input_sizes, fmt, w.shape[2])
    kh, kw, _, oc = w.shape
    g = _Geom(ctx, h, wd, kh, kw)
    if dy.shape != (n, g.oh, g.ow, oc):
        fail(f"out_backprop shape {list(dy.shape)} does not match the computed output shape "
             f"{[n, g.oh, g.ow, oc]}")
    groups = conv_grouped.groups_of(c, w.shape[2], oc, "Conv2DBackpropInput")
    if groups > 1:
        dcols = conv_grouped.input_cols(xp, dy.reshape(-1, oc), w, groups)
    else:
        dcols = dy.reshape(-1, oc) @ w.reshape(-1, oc).T
    dcols = dcols.reshape(n, g.oh, g.ow, kh, kw, c)
    dxp = xp.zeros(g.padded_shape(n, h, wd, c), dtype=dy.dtype)
    for i in range(kh):
        for j in range(kw):
            dxp[g.tap(i, j)] += dcols[:, :, :, i, j, :]
    return from_nhwc(g.crop(dxp, h, wd), fmt)


@kernel("Conv2DBackpropFilter", device_types=ALL_DEVICES, host_inputs=(1,))
def conv2d_backprop_filter(ctx, x, filter_sizes, dy):
    xp = ctx.xp
    fmt = ctx.attrs.get("data_format", b"NHWC")
    x, dy = to_nhwc(xp.asarray(x), fmt), to_nhwc(xp.asarray(dy), fmt)
    kh, kw, c, oc = shape_vector(filter_sizes, "filter_sizes")
    n, h, wd, _ = x.shape
    g = _Geom(ctx, h, wd, kh, kw)
    if dy.shape != (n, g.oh, g.ow, oc):
        fail(f"out_backprop shape {list(dy.shape)} does not match the computed output shape "
             f"{[n, g.oh, g.ow, oc]}")
    groups = conv_grouped.groups_of(x.shape[3], c, oc, "Conv2DBackpropFilter")
    cols = _im2col(xp, x, g)
    if groups > 1:
        return conv_grouped.filter_grad(xp, cols, dy.reshape(-1, oc), (kh, kw, c, oc), groups)
    return (cols.T @ dy.reshape(-1, oc)).reshape(kh, kw, c, oc)


@kernel("DepthwiseConv2dNative", device_types=ALL_DEVICES)
def depthwise_conv2d(ctx, x, w):
    xp = ctx.xp
    fmt = ctx.attrs.get("data_format", b"NHWC")
    x, w = to_nhwc(xp.asarray(x), fmt), xp.asarray(w)
    n, h, wd, c = x.shape
    kh, kw, wc, m = w.shape
    if wc != c:
        fail(f"input depth {c} must equal the filter's in_channels {wc}")
    g = _Geom(ctx, h, wd, kh, kw)
    if xp is np and x.dtype == w.dtype:
        return from_nhwc(_depthwise_numpy(x, w, g), fmt)
    xpad = g.pad(xp, x)
    out = xp.zeros((n, g.oh, g.ow, c, m), dtype=x.dtype)
    for i in range(kh):
        for j in range(kw):
            out += xpad[g.tap(i, j)][..., None] * w[i, j]
    return from_nhwc(out.reshape(n, g.oh, g.ow, c * m), fmt)


@kernel("DepthwiseConv2dNativeBackpropInput", device_types=ALL_DEVICES, host_inputs=(0,))
def depthwise_backprop_input(ctx, input_sizes, w, dy):
    xp = ctx.xp
    fmt = ctx.attrs.get("data_format", b"NHWC")
    w, dy = xp.asarray(w), to_nhwc(xp.asarray(dy), fmt)
    n, h, wd, c = _input_sizes(input_sizes, fmt, w.shape[2])
    kh, kw, _, m = w.shape
    g = _Geom(ctx, h, wd, kh, kw)
    dyr = dy.reshape(n, g.oh, g.ow, c, m)
    dxp = xp.zeros(g.padded_shape(n, h, wd, c), dtype=dy.dtype)
    for i in range(kh):
        for j in range(kw):
            dxp[g.tap(i, j)] += xp.einsum("nhwcm,cm->nhwc", dyr, w[i, j])
    return from_nhwc(g.crop(dxp, h, wd), fmt)


@kernel("DepthwiseConv2dNativeBackpropFilter", device_types=ALL_DEVICES, host_inputs=(1,))
def depthwise_backprop_filter(ctx, x, filter_sizes, dy):
    xp = ctx.xp
    fmt = ctx.attrs.get("data_format", b"NHWC")
    x, dy = to_nhwc(xp.asarray(x), fmt), to_nhwc(xp.asarray(dy), fmt)
    kh, kw, c, m = shape_vector(filter_sizes, "filter_sizes")
    n, h, wd, _ = x.shape
    g = _Geom(ctx, h, wd, kh, kw)
    xpad = g.pad(xp, x)
    dyr = dy.reshape(n, g.oh, g.ow, c, m)
    dw = xp.empty((kh, kw, c, m), dtype=dy.dtype)
    for i in range(kh):
        for j in range(kw):
            dw[i, j] = xp.einsum("nhwc,nhwcm->cm", xpad[g.tap(i, j)], dyr)
    return dw


# --------------------------------------------------------------------------- pooling
def _pool_geom(ctx, nhwc_shape, ksize=None, strides=None):
    fmt = ctx.attrs.get("data_format", b"NHWC")
    kn, kh, kw, kc = spatial_attr(ksize if ksize is not None else ctx.attrs["ksize"], fmt,
                                  "ksize")
    if kn != 1 or kc != 1:
        fail("pooling over the batch or depth dimension is not supported")
    return _Geom(ctx, nhwc_shape[1], nhwc_shape[2], kh, kw, strides=strides,
                 dilations=[1, 1, 1, 1])


def _lowest(dtype):
    return -np.inf if dtype.kind == "f" else np.iinfo(dtype).min


def _max_pool(ctx, x, ksize=None, strides=None):
    xp = ctx.xp
    fmt = ctx.attrs.get("data_format", b"NHWC")
    x = to_nhwc(xp.asarray(x), fmt)
    if x.ndim != 4:
        fail(f"MaxPool needs a 4-D input, got {list(x.shape)}")
    g = _pool_geom(ctx, x.shape, ksize, strides)
    xpad = g.pad(xp, x, _lowest(x.dtype))
    taps = [g.tap(i, j) for i in range(g.kh) for j in range(g.kw)]
    # The first maximum allocates the output (no separate copy of tap 0); the rest go in place.
    out = xp.maximum(xpad[taps[0]], xpad[taps[1]]) if len(taps) > 1 else xpad[taps[0]].copy()
    for t in taps[2:]:
        xp.maximum(out, xpad[t], out=out)
    return from_nhwc(out, fmt)


@kernel("MaxPool", device_types=ALL_DEVICES)
def max_pool(ctx, x):
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
    xpad = g.pad(xp, x, _lowest(x.dtype))
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
    xp = ctx.xp
    fmt = ctx.attrs.get("data_format", b"NHWC")
    x = to_nhwc(xp.asarray(x), fmt)
    if x.ndim != 4 or x.dtype.kind != "f":
        fail(f"AvgPool needs a 4-D floating input, got {x.dtype} {list(x.shape)}")
    g = _pool_geom(ctx, x.shape)
    xpad = g.pad(xp, x)
    out = xpad[g.tap(0, 0)].copy()
    for i in range(g.kh):
        for j in range(g.kw):
            if i or j:
                out += xpad[g.tap(i, j)]
    out /= _window_counts(ctx, g, x.shape[1], x.shape[2], x.dtype)
    return from_nhwc(out, fmt)


@kernel("AvgPoolGrad", device_types=ALL_DEVICES, host_inputs=(0,))
def avg_pool_grad(ctx, orig_input_shape, dy):
    xp = ctx.xp
    fmt = ctx.attrs.get("data_format", b"NHWC")
    dy = to_nhwc(xp.asarray(dy), fmt)
    n, h, wd, c = _input_sizes(orig_input_shape, fmt, None)
    g = _pool_geom(ctx, (n, h, wd, c))
    share = dy / _window_counts(ctx, g, h, wd, dy.dtype)
    dxp = xp.zeros(g.padded_shape(n, h, wd, c), dtype=dy.dtype)
    for i in range(g.kh):
        for j in range(g.kw):
            dxp[g.tap(i, j)] += share
    return from_nhwc(g.crop(dxp, h, wd), fmt)
