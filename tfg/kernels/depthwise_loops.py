"""Depthwise convolution as one compiled loop (numba, where installed: tfg/kernels/jit.py),
for conv_depthwise.py's channel multiplier 1, NHWC, float32 or float64.

    run = compiled_run(g, c, numpy_run, tiled)   # None: numba absent or off (numpy runs)
    run(x, w, cache)  ->  [N, OH, OW, C]   the numpy kernel's values, to float rounding

Why: numpy's depthwise strategies are einsums over strided views (conv_depthwise.py); on the
small maps of MobileNetV3, NASNet and EfficientNet a call is mostly numpy's per-call and
per-view cost and a padded copy of the input. The loops below read the input in place (taps
that fall on the padding are skipped, never multiplied) and write each output once: per
output pixel (C values at a time) or, with a W stride of 1 and few channels, per output row
(runs of OW*C values). 1.3-5x faster per layer on the keras.applications models' depthwise
layers, filters hot (2x3x3x176 3x3: 18 -> 3.5 us; 2x48x48x96 3x3/2: 750 -> 176 us;
2x24x24x11 7x7: 199 -> 104 us; docs/performance.md).

Values: each output sums its taps in (kh, kw) order from zero, one product at a time (numba
compiles without fast-math: no fused multiply-add). numpy's einsum adds the same products,
mostly in that order but not always (it may pair them for SIMD), so the two agree to float
rounding and mostly bit for bit (873 of 972 geometries against the windows strategy); the
numpy strategies differ among themselves likewise. A node's first call runs numpy (see
jit.tier_up), so its first step's last bits may differ from later steps', as with numexpr's
chains. A filter with an inf or NaN goes to the numpy kernel, whose padded input gives
0 * inf = NaN where a skipped tap would give nothing.
"""
import numpy as np

from tfg.kernels import jit
from tfg.kernels._util import immutable

_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
# With a W stride of 1, per output row (depthwise_rows) up to this many channels, per output
# pixel above: 2-5x numpy's time at 11-44 channels where per pixel was slower than numpy
# (2x24x24x11 7x7: numpy 199, per pixel 580, rows 104 us), per pixel ahead from 144 (2x24x24x144
# 3x3: 241 against 267 us; 2x6x6x88 5x5: rows 19.5, per pixel 23 us).
ROWS_MAX_CHANNELS = 96
# The row loop's tiled filter holds KH*KW*OW*C values: past this many (a 16 MB float32 copy;
# the models' largest is 2x112x112x32 3x3 at 224x224, 1M), the per-pixel loop, which needs
# no copy, runs instead.
ROWS_MAX_TILED = 4 << 20
_TIER_KEY = "dw_compiled_calls"


def depthwise_taps(x, w, out, sh, sw, dh, dw, pt, pl):
    """out[n, i, j, c] = sum over in-bounds taps (p, q) of x[n, ih, iw, c] * w[p, q, c],
    ih = i*sh + p*dh - pt, iw = j*sw + q*dw - pl: per output pixel, C values at a time.
    Compiled by numba (jit.function); as plain Python it is the definition (and slow)."""
    n, h, wd, c = x.shape
    kh, kw = w.shape[0], w.shape[1]
    oh, ow = out.shape[1], out.shape[2]
    acc = np.empty(c, x.dtype)
    for b in range(n):
        for i in range(oh):
            for j in range(ow):
                acc[:] = 0
                for p in range(kh):
                    ih = i * sh + p * dh - pt
                    if ih < 0 or ih >= h:
                        continue
                    for q in range(kw):
                        iw = j * sw + q * dw - pl
                        if iw < 0 or iw >= wd:
                            continue
                        for k in range(c):
                            acc[k] += x[b, ih, iw, k] * w[p, q, k]
                for k in range(c):
                    out[b, i, j, k] = acc[k]


def depthwise_rows(x, tiled, out, sh, dh, dw, pt, pl):
    """The same sums for a W stride of 1, per output row: each tap (p, q) adds the run of
    in-bounds output columns at once, (j1 - j0) * C adjacent values of the input row and of
    `tiled` ([KH, KW, OW*C]: each tap's C weights repeated for the OW columns), so the
    innermost loop is long where C is small (NASNet's 11 to 44 channels)."""
    n, h, wd, c = x.shape
    kh, kw = tiled.shape[0], tiled.shape[1]
    oh, ow = out.shape[1], out.shape[2]
    for b in range(n):
        for i in range(oh):
            row = out[b, i].reshape(ow * c)
            row[:] = 0
            for p in range(kh):
                ih = i * sh + p * dh - pt
                if ih < 0 or ih >= h:
                    continue
                xrow = x[b, ih].reshape(wd * c)
                for q in range(kw):
                    shift = q * dw - pl
                    j0, j1 = max(0, -shift), min(ow, wd - shift)
                    if j1 <= j0:
                        continue
                    # slices, so that the loop's indices are never negative (numba checks
                    # negative indices per access otherwise, and the loop stays scalar)
                    o = row[j0 * c:j1 * c]
                    xs = xrow[(j0 + shift) * c:(j1 + shift) * c]
                    ws = tiled[p, q, j0 * c:j1 * c]
                    for u in range(o.shape[0]):
                        o[u] += xs[u] * ws[u]


def _loop_weights(w, cache, rows, tiled, ow):
    """What the loop reads of the filter w[KH, KW, C, 1]: tiled along OW output columns for
    the row loop, else C-contiguous [KH, KW, C]; None where w holds an inf or NaN. Kept in
    `cache` for a filter nothing can write (a Const's value), made on every call otherwise."""
    hit = cache.get("dw_compiled_weights")
    if hit is not None and hit[0] is w:
        return hit[1]
    weights = None
    if np.isfinite(w).all():
        weights = tiled(w, ow, cache) if rows else np.ascontiguousarray(w[:, :, :, 0])
    if immutable(w):
        cache["dw_compiled_weights"] = (w, weights)
    return weights


def compiled_run(g, channels, numpy_run, tiled):
    """run(x, w, cache) for the geometry `g` and `channels` taking a compiled loop from a
    node's second call on (jit.tier_up) and `numpy_run(x, w, cache)` before and wherever
    the loop does not apply (another dtype, a non-finite filter, numba failing); None where
    compiled loops are not wanted at all (then the caller keeps `numpy_run` itself).
    `tiled(w, ow, cache)`: the filter repeated along OW output columns (conv_depthwise's,
    kept per node for a read-only filter)."""
    rows = (g.sw == 1 and channels <= ROWS_MAX_CHANNELS
            and g.kh * g.kw * g.ow * channels <= ROWS_MAX_TILED)
    loop = jit.function(depthwise_rows if rows else depthwise_taps)
    if loop is None:
        return None
    geometry = (g.sh, g.dh, g.dw, g.pt, g.pl) if rows else (g.sh, g.sw, g.dh, g.dw, g.pt, g.pl)

    def run(x, w, cache):
        if x.dtype in _DTYPES and w.dtype == x.dtype and jit.tier_up(cache, _TIER_KEY, loop):
            weights = _loop_weights(w, cache, rows, tiled, g.ow)
            if weights is not None:
                out = np.empty((x.shape[0], g.oh, g.ow, x.shape[3]), x.dtype)
                if jit.call(loop, np.ascontiguousarray(x), weights, out, *geometry):
                    return out
        return numpy_run(x, w, cache)
    return run
