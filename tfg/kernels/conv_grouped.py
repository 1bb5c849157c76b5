"""Grouped convolution: the matrix step of Conv2D and its two backprops when the filter's
in-channels are a fraction of the input's (TensorFlow infers `groups = C / filter[2]`).

    Conv2D(x[N,H,W,6], w[KH,KW,2,9]) -> groups 3: output channels 0-2 see input channels 0-1,
    3-5 see 2-3, 6-8 see 4-5

conv_ops.py builds the patch matrix (im2col) and scatters patch gradients back into the input
exactly as for a dense convolution; only the matmul between patches and filter differs, so
these functions take and return the same matrices as the dense path:

    cols   [M, KH*KW*C]     (M = N*OH*OW; columns in (kh, kw, c) order)
    w      [KH, KW, C/G, O] (output channel o belongs to group o // (O/G))
    dy     [M, O]

Each group is one GEMM over a strided slice of `cols`, so a grouped convolution costs what
its dense pieces cost. They are array-module generic (numpy or CuPy through `xp`).
"""
from tfg.kernels._util import fail


def groups_of(channels, filter_in, filter_out, op):
    """How many groups a convolution with these channel counts has (1: a dense one)."""
    if filter_in <= 0:  # TensorFlow's words, a known typo aside
        fail(f"{op}: filter depth must be strictly positive, got {filter_in}")
    if channels % filter_in:
        fail(f"{op}: input depth must be evenly divisible by filter depth: {channels} vs "
             f"{filter_in}")
    groups = channels // filter_in
    if filter_out % groups:
        fail(f"{op}: output depth {filter_out} must be a multiple of the number of groups "
             f"{groups} (input depth {channels} / filter in_channels {filter_in})")
    return groups


def _split(cols, taps, groups):
    """cols [M, taps*C] as [M, taps, groups, C/G]: a view, no copy."""
    return cols.reshape(cols.shape[0], taps, groups, -1)


def forward(xp, cols, w, groups):
    """y [M, O] = per group g: cols[:, :, g] [M, taps*Cg] @ w[..., group g] [taps*Cg, Og]."""
    kh, kw, cg, oc = w.shape
    taps, og = kh * kw, oc // groups
    c4 = _split(cols, taps, groups)
    w4 = w.reshape(taps, cg, groups, og)
    out = xp.empty((cols.shape[0], groups, og), dtype=xp.result_type(cols.dtype, w.dtype))
    for g in range(groups):
        out[:, g, :] = c4[:, :, g, :].reshape(-1, taps * cg) @ w4[:, :, g, :].reshape(-1, og)
    return out.reshape(-1, oc)


def input_cols(xp, dy, w, groups):
    """d cols [M, taps*C] from dy [M, O]: each group's dy slice times its filter transposed."""
    kh, kw, cg, oc = w.shape
    taps, og = kh * kw, oc // groups
    w4 = w.reshape(taps, cg, groups, og)
    d4 = xp.empty((dy.shape[0], taps, groups, cg), dtype=dy.dtype)
    for g in range(groups):
        d4[:, :, g, :] = (dy[:, g * og:(g + 1) * og]
                          @ w4[:, :, g, :].reshape(-1, og).T).reshape(-1, taps, cg)
    return d4.reshape(dy.shape[0], -1)


def filter_grad(xp, cols, dy, filter_shape, groups):
    """d w [KH, KW, C/G, O] from cols [M, taps*C] and dy [M, O]."""
    kh, kw, cg, oc = filter_shape
    taps, og = kh * kw, oc // groups
    c4 = _split(cols, taps, groups)
    dw = xp.empty((taps, cg, groups, og), dtype=dy.dtype)
    for g in range(groups):
        dw[:, :, g, :] = (c4[:, :, g, :].reshape(-1, taps * cg).T
                          @ dy[:, g * og:(g + 1) * og]).reshape(taps, cg, og)
    return dw.reshape(kh, kw, cg, oc)
