"""Convolutions, NHWC or NCHW, with VALID/SAME/EXPLICIT padding, strides and dilations.

    Conv2D(x[N,H,W,C], w[KH,KW,C,O], strides=[1,s,s,1], padding="SAME") -> [N,ceil(H/s),..,O]
    Conv2DBackpropInput(input_sizes, w, dy) -> dx;  Conv2DBackpropFilter(x, filter_sizes, dy) -> dw
    DepthwiseConv2dNative (+ backprops).  Pooling: pool_ops.py.

On the CPU, a dense float32 Conv2D runs on oneDNN where it is installed (onednn.py), and
otherwise is one GEMM in the input's own layout (conv_gemm.py: 1x1 without a patch matrix,
otherwise im2col copied once from a strided view); a depthwise one is an
einsum over strided views (conv_depthwise.py). Elsewhere (a GPU's `xp`) both stack the
KH*KW taps into a patch matrix and multiply, or multiply-add per tap. The backward ops loop
over the KH*KW filter taps only, each tap a whole-tensor operation, never over pixels.
Grouped Conv2D (filter in-channels = input channels / groups) shares the patch matrix and the
scatter; only its matmuls differ (conv_grouped.py). The geometry (output size, padding) is
parsed once per node and input size (conv_geom.py).
"""
import numpy as np

from tfg.kernels import bound, conv_depthwise, conv_gemm, conv_grouped, onednn, onednn_chain
from tfg.kernels._util import fail, from_nhwc, is_nchw, shape_vector, to_nhwc
from tfg.kernels.conv_geom import geometry
from tfg.kernels.registry import ALL_DEVICES, kernel


def _im2col(xp, x, g):
    """Patch matrix [N*OH*OW, KH*KW*C] of NHWC `x`, rows in output order and columns in the
    filter's (kh, kw, c) order. On a GPU (`xp` not numpy) the KH*KW taps are stacked: a few
    whole-tensor copies, then one cuBLAS GEMM does the convolution (no cuDNN needed)."""
    if xp is np:
        return conv_gemm.patches_nhwc(x, g)
    n, c = x.shape[0], x.shape[3]
    xpad = g.pad(xp, x)
    taps = [xpad[g.tap(i, j)] for i in range(g.kh) for j in range(g.kw)]
    cols = taps[0] if len(taps) == 1 else xp.stack(taps, axis=3)
    return cols.reshape(n * g.oh * g.ow, g.kh * g.kw * c)


def _check_conv(x, w, op):
    """The number of groups (1: dense; more: conv_grouped.py does the matmuls)."""
    if x.ndim != 4 or w.ndim != 4:
        fail(f"{op} needs a 4-D input and filter, got {list(x.shape)} and {list(w.shape)}")
    return conv_grouped.groups_of(x.shape[3], w.shape[2], w.shape[3], op)


@bound.binds
@kernel("Conv2D", device_types=ALL_DEVICES)
def conv2d(ctx, x, w):
    if type(x) is np.ndarray and type(w) is np.ndarray:
        # The CPU's GEMM path for inputs of shapes and dtypes this node has run before: the
        # checks and the parsing below are made once per node and signature (a NASNet 1x1
        # convolution's GEMM is ~20 us, the Python around it was as much again).
        run = ctx.cache.get((x.shape, w.shape, x.dtype, w.dtype))
        if run is not None:
            return run(x, w)
    xp = ctx.xp
    fmt = ctx.attrs.get("data_format", b"NHWC")
    x, w = xp.asarray(x), xp.asarray(w)
    nchw = is_nchw(fmt)
    xh = to_nhwc(x, fmt)
    groups = _check_conv(xh, w, "Conv2D")
    n, h, wd, c = xh.shape
    kh, kw, _, oc = w.shape
    g = geometry(ctx, h, wd, kh, kw)
    if n * g.oh * g.ow * oc == 0:  # as TensorFlow: an empty output before the filter check
        return from_nhwc(xp.zeros((n, g.oh, g.ow, oc), x.dtype), fmt)
    if w.size == 0:
        fail("filter must not have zero elements (i.e. all dimensions must be non-zero)")
    if xp is np and groups == 1 and x.dtype == w.dtype:
        # The CPU's GEMM paths, in the input's layout (NCHW stays NCHW: no transposes);
        # oneDNN's direct kernels instead where it is installed (onednn.py).
        run = onednn.prepared(x.shape, w.shape, g, nchw, x.dtype,
                              conv_gemm.prepared(x.shape, w.shape, g, nchw, x.dtype))
        if type(x) is np.ndarray and type(w) is np.ndarray:
            ctx.cache[(x.shape, w.shape, x.dtype, w.dtype)] = run
            if isinstance(run, onednn.Prepared):
                bound.remember(ctx, x.shape, w, None, run.conv.bound(w),
                               onednn_chain.Stage(run.conv, w))
        return run(x, w)
    if groups > 1:
        y = conv_grouped.forward(xp, _im2col(xp, xh, g), w, groups)
    else:
        y = _im2col(xp, xh, g) @ w.reshape(-1, oc)
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
    g = geometry(ctx, h, wd, kh, kw)
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
    g = geometry(ctx, h, wd, kh, kw)
    if dy.shape != (n, g.oh, g.ow, oc):
        fail(f"out_backprop shape {list(dy.shape)} does not match the computed output shape "
             f"{[n, g.oh, g.ow, oc]}")
    groups = conv_grouped.groups_of(x.shape[3], c, oc, "Conv2DBackpropFilter")
    cols = _im2col(xp, x, g)
    if groups > 1:
        return conv_grouped.filter_grad(xp, cols, dy.reshape(-1, oc), (kh, kw, c, oc), groups)
    return (cols.T @ dy.reshape(-1, oc)).reshape(kh, kw, c, oc)


@bound.binds
@kernel("DepthwiseConv2dNative", device_types=ALL_DEVICES)
def depthwise_conv2d(ctx, x, w):
    if type(x) is np.ndarray and type(w) is np.ndarray:
        # The CPU's strategy prepared once per node and signature (conv_depthwise.prepared)
        run = ctx.cache.get(("dw_run", x.shape, w.shape, x.dtype, w.dtype))
        if run is not None:
            return run(x, w, ctx.cache)
    xp = ctx.xp
    fmt = ctx.attrs.get("data_format", b"NHWC")
    given = xp.asarray(x)
    x, w = to_nhwc(given, fmt), xp.asarray(w)
    n, h, wd, c = x.shape
    kh, kw, wc, m = w.shape
    if wc != c:
        fail(f"input and filter must have the same depth: {c} vs {wc}")
    g = geometry(ctx, h, wd, kh, kw)
    if xp is np and x.dtype == w.dtype:
        arrays = type(x) is np.ndarray and type(w) is np.ndarray
        key = ("dw_run", given.shape, w.shape, x.dtype, w.dtype)
        run = None
        if not is_nchw(fmt) and arrays and m == 1:
            run = conv_depthwise.prepared(x.shape, w.shape, g)
        conv = (onednn.convolution(given.shape, w.shape, g, is_nchw(fmt), depthwise=True)
                if arrays and x.dtype == np.float32 else None)
        if conv is not None:
            # oneDNN's depthwise kernels (onednn.py), with tfg's as the fallback
            run = ctx.cache[key] = onednn.Prepared(conv, run or (
                lambda x, w, cache: from_nhwc(conv_depthwise.forward(to_nhwc(x, fmt), w, g,
                                                                     cache), fmt)))
            bound.remember(ctx, given.shape, w, None, conv.bound(w),
                           onednn_chain.Stage(conv, w))
            return run(given, w, ctx.cache)
        if run is not None:
            ctx.cache[key] = run
            return run(x, w, ctx.cache)
        return from_nhwc(conv_depthwise.forward(x, w, g, ctx.cache), fmt)
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
    g = geometry(ctx, h, wd, kh, kw)
    dyr = dy.reshape(n, g.oh, g.ow, c, m)
    dxp = xp.zeros(g.padded_shape(n, h, wd, c), dtype=dy.dtype)
    for i in range(kh):
        for j in range(kw):
            if m == 1:  # (a broadcast product: the einsum's C loop was 10x its time)
                dxp[g.tap(i, j)] += dy * w[i, j, :, 0]
            else:
                dxp[g.tap(i, j)] += xp.einsum("nhwcm,cm->nhwc", dyr, w[i, j])
    return from_nhwc(g.crop(dxp, h, wd), fmt)


@kernel("DepthwiseConv2dNativeBackpropFilter", device_types=ALL_DEVICES, host_inputs=(1,))
def depthwise_backprop_filter(ctx, x, filter_sizes, dy):
    xp = ctx.xp
    fmt = ctx.attrs.get("data_format", b"NHWC")
    x, dy = to_nhwc(xp.asarray(x), fmt), to_nhwc(xp.asarray(dy), fmt)
    kh, kw, c, m = shape_vector(filter_sizes, "filter_sizes")
    n, h, wd, _ = x.shape
    g = geometry(ctx, h, wd, kh, kw)
    xpad = g.pad(xp, x)
    dyr = dy.reshape(n, g.oh, g.ow, c, m)
    dw = xp.empty((kh, kw, c, m), dtype=dy.dtype)
    for i in range(kh):
        for j in range(kw):
            dw[i, j] = xp.einsum("nhwc,nhwcm->cm", xpad[g.tap(i, j)], dyr)
    return dw
