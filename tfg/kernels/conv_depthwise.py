"""Depthwise convolution on the CPU (numpy): DepthwiseConv2dNative's forward pass.

    forward(x[N,H,W,C], w[KH,KW,C,M], g) -> [N, OH, OW, C*M]     (g: conv_geom.Geom)

Each strategy is one numpy einsum (its plain, unoptimized loop: it reads each input once and
sums the KH*KW taps in place, no per-tap temporaries); they differ in the views they hand it,
because einsum's speed is the length of its innermost contiguous loop:

- W stride 1, M == 1, outputs wide enough (most depthwise layers): `conv_geom.row_windows`,
  so the inner loop runs over OW*C adjacent values of both the input and a filter tiled OW
  times, instead of over C values: 1.5-7x faster than windows with C inner (at OW = 6
  up to 320 channels).
- W stride s > 1, dilation 1, M == 1, few channels: the input is split into its W phases
  (columns b, b+s, b+2s, ... for each b < s, straight from the input: conv_phases.py),
  after which phase b is a stride-1 convolution with the filter columns b, b+s, ...: s
  einsums over OW*C runs, summed.
- tiny images under big filters, stride and dilation 1, M == 1 (NASNet's 3x3 cells under
  5x5 and 7x7 filters, MobileNetV3Small's 3x3x576 under 5x5): every output pixel's window
  reaches every input pixel, so the convolution is a [P, Q] spatial matrix per channel
  (`_dense`: out[n,p,c] = sum_q x[n,q,c] * w[qh-ph+pt, qw-pw+pl, c]). It has no padded copy
  and no product with the padding (3x3 under 5x5: 81 products per channel, not 225); the
  taps of each output are summed in the same (kh, kw) order as the windows: the same values.
- otherwise (channel multiplier > 1, strided and dilated, wide strided layers): windows
  [N, OH, OW, KH, KW, C] with C inner.
"""
import numpy as np
from tfg.kernels import conv_phases, depthwise_loops
from tfg.kernels._util import immutable
from tfg.kernels.conv_geom import padded, row_windows, strided, windows

# Measured on every depthwise layer of the keras.applications models (batch 2, 96x96): the
# strided layers' W phases pay off below 64 channels (1.5-2.7x at C = 11..32, 0.9x at 72);
# tap rows of OW*C values win from OW = 12 at any width (1.05-7x) and at OW = 6 up to
# ~160 channels, while a tiled filter of KH*KW*OW*C values costs more than it saves on
# narrower outputs (OW = 3: 0.2-0.8x). Measured again at OW = 6, filters hot and cold
# (evicted between calls): rows/windows 0.79-0.85 hot and 0.93-0.97 cold at 240-288
# channels (MobileNetV3Small's 6x6x240 and 6x6x288 5x5), 0.86-0.93 hot but 1.0-1.15 cold
# from 384 (MobileNetV2's 6x6x384 and 6x6x576 3x3, EfficientNet's 6x6x480 5x5): so 320.
# Phases straight from the input (one copy, not two: conv_phases.py) are faster alone from
# 64 channels too at OW >= 12 (2x48x48x96 3x3/2: windows 1017, phases 908 us; 2x24x24x144
# 5x5/2: 506 against 372), but not inside a model's step (MobileNetV2, EfficientNetB0,
# V3Small's stride-2 layers, interleaved in one process: 0.97-1.03), so those stay windows.
PHASE_MAX_CHANNELS = 64
ROWS_MIN_OW = 12
ROWS_NARROW_MIN_OW, ROWS_NARROW_MAX_CHANNELS = 6, 320
# The spatial matrix `_dense` keeps per node is P*Q*C values (3x3 -> 3x3: 81*C, 3.2x a 5x5
# filter); measured 2.5-3.5x faster than windows on 3x3 images under 5x5 and 7x7 filters,
# filters cold or hot (3x3x176 5x5: 60 -> 22 us hot, 202 -> 80 us cold).
DENSE_MAX_PAIRS = 81


def _dense_fits(g, h, w, m):
    """Whether every output pixel's window covers every input pixel (stride and dilation 1,
    one channel multiplier), for a small enough spatial matrix."""
    return (m == 1 and g.sh == g.sw == g.dh == g.dw == 1
            and g.oh * g.ow * h * w <= DENSE_MAX_PAIRS
            and g.pt >= g.oh - 1 and g.pt + h <= g.kh
            and g.pl >= g.ow - 1 and g.pl + w <= g.kw)


def forward(x, w, g, cache=None):
    """`cache`: the node's dict (ctx.cache), where an immutable filter's tiled copies are kept
    from step to step (a Const's value is the same read-only array every step)."""
    n, _, _, c = x.shape
    m = w.shape[3]
    if min(n, c, m, g.oh, g.ow) == 0:
        return np.zeros((n, g.oh, g.ow, c * m), np.result_type(x, w))
    if _dense_fits(g, x.shape[1], x.shape[2], m):
        return _dense(x, w, g, cache)
    if m == 1 and g.sw == 1 and (g.ow >= ROWS_MIN_OW or (
            g.ow >= ROWS_NARROW_MIN_OW and c <= ROWS_NARROW_MAX_CHANNELS)):
        return _rows(padded(x, g), w, g, cache)
    if _phases_fit(g, c, m):
        return _phases(x, w, g, cache)
    return _windows(padded(x, g), w, g)


def _phases_fit(g, c, m):
    return m == 1 and g.sw > 1 and g.dw == 1 and c < PHASE_MAX_CHANNELS


def prepared(x_shape, w_shape, g):
    """`run(x, w, cache)` for NHWC numpy inputs of these shapes: `numpy_prepared`'s run, which
    from a node's second call on gives way to the compiled loop where numba is installed
    (depthwise_loops.py: the same values). None when `forward` must decide."""
    run = numpy_prepared(x_shape, w_shape, g)
    if run is None:
        return None
    return depthwise_loops.compiled_run(g, x_shape[3], run, _tiled) or run


def numpy_prepared(x_shape, w_shape, g):
    """`run(x, w, cache)` for NHWC numpy inputs of these shapes (dtypes equal), the strategy
    and views chosen once: what `forward` decides on every call (NASNet's 160 depthwise calls
    per step are 3x3 to 12x12 images, where that Python was a visible share). Same values as
    `forward`: the same strategy, padded copy, views and einsums. None when `forward` must
    decide (a channel multiplier, empty shapes)."""
    n, h, wd, c = x_shape
    m = w_shape[3]
    if min(n, c, m, g.oh, g.ow) == 0 or m != 1:
        return None
    if _dense_fits(g, h, wd, m):
        return lambda x, w, cache: _dense(x, w, g, cache)
    if not (g.sw == 1 and (g.ow >= ROWS_MIN_OW or (g.ow >= ROWS_NARROW_MIN_OW
                                                    and c <= ROWS_NARROW_MAX_CHANNELS))):
        if _phases_fit(g, c, m):
            split = conv_phases.PhaseSplit(x_shape, g)
            return lambda x, w, cache: _phases(x, w, g, cache, split)
        return lambda x, w, cache: _windows(padded(x, g), w, g)
    view_shape = (n, g.oh, g.kh, g.kw, g.ow * c)
    out_shape = (n, g.oh, g.ow, c)

    def run(x, w, cache):
        xpad = padded(x, g)
        sn, sh, sw, sc = xpad.strides
        view = strided(xpad, view_shape, (sn, sh * g.sh, sh * g.dh, sw * g.dw, sc))
        out = np.einsum("nhijv,ijv->nhv", view, _tiled(w, g.ow, cache), optimize=False)
        return out.reshape(out_shape)
    return run


def _tiled(w, ow, cache=None, phase=None):
    """w[KH, KW, C, 1] (the columns of `phase` = (start, step) only) -> [KH, KW', OW*C]:
    each tap's C weights repeated for the OW output columns. Kept in `cache` for a `w`
    nothing can write (`_util.immutable`: a Const's value; the cache holds `w` itself, so
    the identity test cannot be fooled by a freed array's address reused)."""
    key = ("tiled", ow, phase)
    if cache is not None and immutable(w):
        hit = cache.get(key)
        if hit is not None and hit[0] is w:
            return hit[1]
    v = w[:, :, :, 0] if phase is None else w[:, phase[0]::phase[1], :, 0]
    tiled = np.repeat(v[..., None, :], ow, axis=-2).reshape(*v.shape[:-1], ow * v.shape[-1])
    if cache is not None and immutable(w):
        tiled.flags.writeable = False
        cache[key] = (w, tiled)
    return tiled


def _spatial(w, g, h, wd, cache=None):
    """w[KH, KW, C, 1] -> [P, Q, C]: the weight output pixel p gives input pixel q (every
    pair within the filter's reach: `_dense_fits`). Kept in `cache` for an immutable `w`,
    as `_tiled` keeps its tiling."""
    key = ("spatial", h, wd)
    if cache is not None and immutable(w):
        hit = cache.get(key)
        if hit is not None and hit[0] is w:
            return hit[1]
    ph, pw = np.divmod(np.arange(g.oh * g.ow), g.ow)
    qh, qw = np.divmod(np.arange(h * wd), wd)
    i = qh[None, :] - ph[:, None] + g.pt
    j = qw[None, :] - pw[:, None] + g.pl
    spatial = w[i, j, :, 0]  # fancy indexing: a fresh C-contiguous [P, Q, C]
    if cache is not None and immutable(w):
        spatial.flags.writeable = False
        cache[key] = (w, spatial)
    return spatial


def _dense(x, w, g, cache=None):
    n, h, wd, c = x.shape
    out = np.einsum("nqc,pqc->npc", x.reshape(n, h * wd, c), _spatial(w, g, h, wd, cache),
                    optimize=False)
    return out.reshape(n, g.oh, g.ow, c)


def _rows(xpad, w, g, cache=None):
    n, c = xpad.shape[0], xpad.shape[3]
    out = np.einsum("nhijv,ijv->nhv", row_windows(xpad, g), _tiled(w, g.ow, cache),
                    optimize=False)
    return out.reshape(n, g.oh, g.ow, c)


def _phases(x, w, g, cache=None, split=None):
    tiles = [_tiled(w, g.ow, cache, (b, g.sw)) for b in range(min(g.sw, g.kw))]
    return conv_phases.phases(x, tiles, g, split)


def _windows(xpad, w, g):
    n, c, m = xpad.shape[0], xpad.shape[3], w.shape[3]
    win = windows(xpad, g)
    if m == 1:
        return np.einsum("nhwijc,ijc->nhwc", win, w[:, :, :, 0], optimize=False)
    out = np.einsum("nhwijc,ijcm->nhwcm", win, w, optimize=False)
    return out.reshape(n, g.oh, g.ow, c * m)
