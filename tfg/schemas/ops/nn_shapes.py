"""Shape functions of the neural-network ops: convolution, pooling, bias, batch norm, losses.

    >>> conv2d(ctx)  # input [8, 32, 32, 3], filter [5, 5, 3, 16], strides 2, SAME
    [(8, 16, 16, 16)]
    >>> pool(ctx)    # input [8, 32, 32, 16], ksize 3, stride 2, VALID
    [(8, 15, 15, 16)]
"""
from tfg.schemas.ops.shape_fns import (
    ShapeError, broadcast, merge, merge_dim, with_rank, with_rank_at_least)


def _format(ctx):
    fmt = ctx.attr("data_format")
    return fmt.decode() if isinstance(fmt, bytes) else fmt


def _spatial_axes(fmt, r):
    """(batch axis, spatial axes, channel axis) for NHWC/NCHW-style formats of rank r."""
    if fmt.startswith("NC"):
        return 0, list(range(2, r)), 1
    return 0, list(range(1, r - 1)), r - 1


def _to_nhwc(shape, fmt):
    """(batch, [spatial...], channels) of a shape in `fmt`."""
    b, sp, c = _spatial_axes(fmt, len(shape))
    return shape[b], [shape[i] for i in sp], shape[c]


def _from_nhwc(batch, spatial, channels, fmt):
    if fmt.startswith("NC"):
        return (batch, channels, *spatial)
    return (batch, *spatial, channels)


def window_out(size, k, stride, padding, dilation=1, pad=(0, 0)):
    """Output length of a sliding window of size k over `size` (TensorFlow's formulas and
    refusals, GetWindowedOutputSize: VALID/EXPLICIT (padded - eff_k + stride) / stride,
    truncated toward zero as C++ divides, must not be negative; a stride or dilation below 1
    is refused whatever the sizes)."""
    if stride is not None and stride < 1:
        raise ShapeError(f"Stride must be > 0, but got {stride}")
    if dilation < 1:
        raise ShapeError(f"Dilation rate must be >= 1, but got {dilation}")
    if min(pad) < 0:
        raise ShapeError(f"All elements of explicit_paddings must be nonnegative, got {pad}")
    if size is None or k is None or stride is None:
        return None
    eff = (k - 1) * dilation + 1
    if padding in ("VALID", "EXPLICIT"):
        span = size + (pad[0] + pad[1] if padding == "EXPLICIT" else 0) - eff + stride
        out = span // stride if span >= 0 else -(-span // stride)
    elif padding == "SAME":
        out = -(-size // stride)
    else:
        raise ShapeError(f"unknown padding {padding!r}")
    if out < 0:
        raise ShapeError(f"Computed output size would be negative: {out} [input_size: {size}, "
                         f"effective_filter_size: {eff}, stride: {stride}]")
    return out


def _padding(ctx):
    p = ctx.attr("padding")
    return p.decode() if isinstance(p, bytes) else p


def _explicit_pads(ctx, fmt, r):
    pads = list(ctx.attrs.get("explicit_paddings", []) or [])
    if not pads:
        return [(0, 0)] * (r - 2)
    if len(pads) != 2 * r:
        raise ShapeError(f"explicit_paddings must have {2 * r} entries, got {len(pads)}")
    _, sp, _ = _spatial_axes(fmt, r)
    return [(pads[2 * i], pads[2 * i + 1]) for i in sp]


def _conv(ctx, out_channels_fn):
    fmt = _format(ctx)
    x = with_rank(ctx.shape(0), 4, "convolution input")
    f = with_rank(ctx.shape(1), 4, "convolution filter")
    strides, dil = list(ctx.attr("strides")), list(ctx.attrs.get("dilations", [1, 1, 1, 1]))
    if len(strides) != 4 or len(dil) != 4:
        raise ShapeError("strides and dilations must have 4 entries")
    batch, spatial, cin = _to_nhwc(x, fmt)
    _, s_str, _ = _to_nhwc(tuple(strides), fmt)
    _, s_dil, _ = _to_nhwc(tuple(dil), fmt)
    padding = _padding(ctx)
    pads = _explicit_pads(ctx, fmt, 4)
    out = [window_out(spatial[i], f[i], s_str[i], padding, s_dil[i], pads[i]) for i in range(2)]
    return [_from_nhwc(batch, out, out_channels_fn(cin, f), fmt)]


def conv2d(ctx):
    def channels(cin, f):
        if cin is not None and f[2] is not None and f[2] and cin % f[2]:
            raise ShapeError(f"input depth {cin} is not a multiple of filter depth {f[2]}")
        # Grouped: groups = cin / filter depth, and each group owns O / groups outputs.
        if cin is not None and f[2] and f[3] is not None and f[3] % (cin // f[2]):
            raise ShapeError(f"output depth {f[3]} is not a multiple of the number of groups "
                             f"{cin // f[2]}")
        return f[3]
    return _conv(ctx, channels)


def depthwise_conv2d(ctx):
    def channels(cin, f):
        merge_dim(cin, f[2])
        return None if f[2] is None or f[3] is None else f[2] * f[3]
    return _conv(ctx, channels)


def conv2d_backprop_input(ctx):
    sizes = ctx.shape_tensor(0)
    if sizes is not None and len(sizes) == 2:
        # Spatial sizes only: batch from out_backprop, channels from the filter.
        fmt = _format(ctx)
        dy, f = ctx.shape(2), ctx.shape(1)
        batch = dy[0] if dy is not None else None
        cin = f[2] if f is not None else None
        return [_from_nhwc(batch, list(sizes), cin, fmt)]
    return [sizes]


def pool(ctx):
    fmt = _format(ctx)
    x = with_rank(ctx.shape(0), 4, "pooling input")
    if ctx.num_inputs >= 3:  # MaxPoolV2: ksize and strides are tensors
        ksize, strides = ctx.elems(1), ctx.elems(2)
        if ksize is None or strides is None:
            return [(None,) * 4]
    else:
        ksize, strides = ctx.attr("ksize"), ctx.attr("strides")
    if len(ksize) != 4 or len(strides) != 4:
        raise ShapeError("ksize and strides must have 4 entries")
    batch, spatial, c = _to_nhwc(x, fmt)
    kb, ks, kc = _to_nhwc(tuple(ksize), fmt)
    _, ss, _ = _to_nhwc(tuple(strides), fmt)
    if kb != 1 or kc != 1:
        raise ShapeError("pooling over the batch or channel dimension is not supported")
    padding = _padding(ctx)
    pads = _explicit_pads(ctx, fmt, 4) if padding == "EXPLICIT" else [(0, 0)] * 2
    out = [window_out(spatial[i], ks[i], ss[i], padding, 1, pads[i]) for i in range(2)]
    return [_from_nhwc(batch, out, c, fmt)]


def _channel_axis(ctx, r):
    fmt = _format(ctx) if "data_format" in ctx.sig.attrs else "NHWC"
    return 1 if fmt.startswith("NC") and r >= 3 else r - 1


def bias_add(ctx):
    x, b = ctx.shape(0), with_rank(ctx.shape(1), 1, "bias")
    if x is None:
        return [None]
    with_rank_at_least(x, 2, "BiasAdd input")
    axis = _channel_axis(ctx, len(x))
    c = merge_dim(x[axis], b[0])
    return [x[:axis] + (c,) + x[axis + 1:]]


def bias_add_grad(ctx):
    x = ctx.shape(0)
    if x is None:
        return [(None,)]
    with_rank_at_least(x, 2, "BiasAddGrad input")
    return [(x[_channel_axis(ctx, len(x))],)]


def fused_batch_norm(ctx):
    x = ctx.shape(0)
    fmt = _format(ctx)
    r = 5 if fmt in ("NDHWC", "NCDHW") else 4
    x = with_rank(x, r, "batch norm input")
    c = x[1 if fmt.startswith("NC") else r - 1]
    # Training without a running average ignores (and often feeds empty) mean and variance.
    training = ctx.attr("is_training") and ctx.attrs.get("exponential_avg_factor", 1.0) == 1.0
    for i in range(1, 3 if training else 5):
        c = merge_dim(c, with_rank(ctx.shape(i), 1, "batch norm parameter")[0])
    out = [x, (c,), (c,), (c,), (c,)]
    if ctx.num_outputs == 6:
        out.append(None)  # reserve_space_3: opaque scratch
    return out


def fused_batch_norm_grad(ctx):
    fmt = _format(ctx)
    r = 5 if fmt in ("NDHWC", "NCDHW") else 4
    x = merge(with_rank(ctx.shape(0), r, "y_backprop"), with_rank(ctx.shape(1), r, "x"))
    c = x[1 if fmt.startswith("NC") else r - 1]
    for i in (2, 3, 4):
        c = merge_dim(c, with_rank(ctx.shape(i), 1, "batch norm parameter")[0])
    return [x, (c,), (c,), (0,), (0,)]


def softmax(ctx):
    with_rank_at_least(ctx.shape(0), 1, "logits")
    return [ctx.shape(0)]


def softmax_xent(ctx):
    s = broadcast(ctx.shape(0), ctx.shape(1))
    s = with_rank(s, 2, "logits and labels") if s is not None else (None, None)
    return [(s[0],), s]


def sparse_softmax_xent(ctx):
    logits = with_rank(ctx.shape(0), 2, "logits")
    labels = with_rank(ctx.shape(1), 1, "labels")
    batch = merge_dim(logits[0], labels[0])
    return [(batch,), (batch, logits[1])]


# --- 3-D convolution and pooling, pooling with argmax, image patches ----------------------
def _windowed(x, ksize, strides, dilations, padding, fmt, what):
    """(batch, [output spatial sizes], channels) of a sliding window over `x` in `fmt`
    (NDHWC/NCDHW/NHWC), checking that the window covers no batch or channel."""
    r = len(x)
    if len(ksize) != r or len(strides) != r or len(dilations) != r:
        raise ShapeError(f"{what}: ksize, strides and dilations must have {r} entries")
    batch, spatial, c = _to_nhwc(x, fmt)
    kb, ks, kc = _to_nhwc(tuple(ksize), fmt)
    sb, ss, sc = _to_nhwc(tuple(strides), fmt)
    _, ds, _ = _to_nhwc(tuple(dilations), fmt)
    if kb != 1 or kc != 1 or sb != 1 or sc != 1:
        raise ShapeError(f"{what}: windows and strides over the batch or depth dimension are "
                         f"not supported")
    if min(ks) < 1:  # strides and dilations: window_out, in TensorFlow's words
        raise ShapeError(f"{what}: ksize must be >= 1, got {list(ks)}")
    out = [window_out(spatial[i], ks[i], ss[i], padding, ds[i]) for i in range(r - 2)]
    return batch, out, c


def conv3d(ctx):
    """Conv3D: input [N, D, H, W, C] (or NCDHW), filter [KD, KH, KW, C, O]."""
    fmt = _format(ctx)
    x = with_rank(ctx.shape(0), 5, "Conv3D input")
    f = with_rank(ctx.shape(1), 5, "Conv3D filter")
    strides, dil = ctx.attr("strides"), ctx.attrs.get("dilations", [1] * 5)
    if None not in f[:3]:
        ksize = _from_nhwc(1, list(f[:3]), 1, fmt)
    else:
        ksize = (1,) * 5
    batch, out, cin = _windowed(x, ksize, strides, dil, _padding(ctx), fmt, "Conv3D")
    if None in f[:3]:
        out = [None] * 3
    if cin is not None and f[3] is not None and f[3] and cin % f[3]:
        raise ShapeError(f"input depth {cin} is not a multiple of filter depth {f[3]}")
    return [_from_nhwc(batch, out, f[4], fmt)]


def pool3d(ctx):
    """MaxPool3D/AvgPool3D: a [N, D, H, W, C] (or NCDHW) input pooled per channel."""
    fmt = _format(ctx)
    x = with_rank(ctx.shape(0), 5, "3-D pooling input")
    batch, out, c = _windowed(x, ctx.attr("ksize"), ctx.attr("strides"), [1] * 5,
                              _padding(ctx), fmt, "3-D pooling")
    return [_from_nhwc(batch, out, c, fmt)]


def max_pool_with_argmax(ctx):
    """MaxPoolWithArgmax: NHWC only; the argmax has the output's shape."""
    x = with_rank(ctx.shape(0), 4, "MaxPoolWithArgmax input")
    batch, out, c = _windowed(x, ctx.attr("ksize"), ctx.attr("strides"), [1] * 4,
                              _padding(ctx), "NHWC", "MaxPoolWithArgmax")
    y = (batch, *out, c)
    return [y, y]


def max_pool_grad_with_argmax(ctx):
    """MaxPoolGradWithArgmax: the input's shape (rank 4); grad and argmax share a shape."""
    x = with_rank(ctx.shape(0), 4, "MaxPoolGradWithArgmax input")
    merge(with_rank(ctx.shape(1), 4, "grad"), with_rank(ctx.shape(2), 4, "argmax"))
    return [x]


def extract_image_patches(ctx):
    """ExtractImagePatches: [N, H, W, C] -> [N, OH, OW, KH * KW * C]."""
    x = with_rank(ctx.shape(0), 4, "ExtractImagePatches input")
    ksizes = ctx.attr("ksizes")
    batch, out, c = _windowed(x, ksizes, ctx.attr("strides"), ctx.attr("rates"),
                              _padding(ctx), "NHWC", "ExtractImagePatches")
    depth = None if c is None else ksizes[1] * ksizes[2] * c
    return [(batch, *out, depth)]


def lrn(ctx):
    return [with_rank(ctx.shape(0), 4, "LRN input")]


def lrn_grad(ctx):
    s = with_rank(ctx.shape(0), 4, "LRNGrad input_grads")
    for i, what in ((1, "input_image"), (2, "output_image")):
        s = merge(s, with_rank(ctx.shape(i), 4, what))
    return [s]


def unchanged_rank5(ctx):
    return [with_rank(ctx.shape(0), 5, "3-D pooling input")]


def _pool_grad_grad(ctx, r):
    merge(with_rank(ctx.shape(0), r, "orig_input"), with_rank(ctx.shape(2), r, "grad"))
    return [with_rank(ctx.shape(1), r, "orig_output")]


def max_pool_grad_grad(ctx):
    """MaxPoolGradGrad(orig_input, orig_output, grad, ...): shaped like orig_output (the
    pooled shape), grad like orig_input, all rank 4."""
    return _pool_grad_grad(ctx, 4)


def max_pool_3d_grad_grad(ctx):
    """MaxPool3DGradGrad: as max_pool_grad_grad, rank 5."""
    return _pool_grad_grad(ctx, 5)
