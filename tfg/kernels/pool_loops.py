"""AvgPool as a compiled loop (numba, where installed: tfg/kernels/jit.py), for pool_fast.py's
prepared NHWC float32/float64 pools.

    run = compiled_run(g, dtype, divisor, numpy_run)   # None: numba absent or off
    y = run(x)                                         # pool_fast's values, bit for bit

Why: pool_fast reduces rows then columns with whole-tensor numpy calls over a padded copy, then
divides by a count table: KH+KW-2 calls, the copy and the divide, each paying numpy's per-call
cost and a pass over the data. The loop reads the input in place, skips the padding's taps and
writes each output once, divided: 1.2-2.1x faster on InceptionV3's and NASNet's AvgPools
(2x9x9x192 3x3: 89 -> 46 us; 2x3x3x176: 28 -> 13 us; docs/performance.md). MaxPool stays
numpy: its compiled loop, with np.maximum's NaN rule (a NaN tap makes the window NaN), did not
vectorize and ran 2-4x slower than pool_fast's separable maxima.

Values: pool_fast's. The sum runs in pool_fast's order (each window column's in-bounds rows
summed first, then the columns left to right) and is divided by the same count in the input's
dtype; pool_fast's zeros of the padding add nothing (a window sum of -0.0 may come out +0.0
there). A node's first call runs numpy (jit.tier_up).
"""
import numpy as np

from tfg.kernels import jit

_DTYPES = (np.dtype(np.float32), np.dtype(np.float64))
_TIER_KEY = "pool_compiled_calls"


def avg_pool_taps(x, out, counts, kh, kw, sh, sw, pt, pl):
    """out[n, i, j, c] = (sum of the window's in-bounds taps) / counts[i, j], each window
    column's rows summed first, then the columns in order (pool_fast's order)."""
    n, h, wd, c = x.shape
    oh, ow = out.shape[1], out.shape[2]
    acc = np.empty(c, x.dtype)
    col = np.empty(c, x.dtype)
    for b in range(n):
        for i in range(oh):
            for j in range(ow):
                no_column = True
                for q in range(kw):
                    iw = j * sw + q - pl
                    if iw < 0 or iw >= wd:
                        continue
                    no_row = True
                    for p in range(kh):
                        ih = i * sh + p - pt
                        if ih < 0 or ih >= h:
                            continue
                        if no_row:
                            for k in range(c):
                                col[k] = x[b, ih, iw, k]
                            no_row = False
                        else:
                            for k in range(c):
                                col[k] += x[b, ih, iw, k]
                    if no_row:
                        continue
                    if no_column:
                        for k in range(c):
                            acc[k] = col[k]
                        no_column = False
                    else:
                        for k in range(c):
                            acc[k] += col[k]
                if no_column:
                    acc[:] = 0
                d = counts[i, j]
                for k in range(c):
                    out[b, i, j, k] = acc[k] / d


def compiled_run(g, dtype, divisor, numpy_run):
    """run(x) for an AvgPool of pool_fast's geometry `g` and input `dtype`: the compiled loop
    from the node's second call on, `numpy_run(x)` before; None where compiled loops are not
    wanted or do not apply (another dtype). `divisor`: pool_fast's count table [1, OH, OW, C]
    (None: 1x1 windows, nothing to divide)."""
    if np.dtype(dtype) not in _DTYPES:
        return None
    loop = jit.function(avg_pool_taps)
    if loop is None:
        return None
    counts = (np.ones((g.oh, g.ow), dtype) if divisor is None
              else np.ascontiguousarray(divisor[0, :, :, 0]))
    geometry = (counts, g.kh, g.kw, g.sh, g.sw, g.pt, g.pl)
    calls = {}

    def run(x):
        if jit.tier_up(calls, _TIER_KEY, loop):
            out = np.empty((x.shape[0], g.oh, g.ow, x.shape[3]), x.dtype)
            if jit.call(loop, np.ascontiguousarray(x), out, *geometry):
                return out
        return numpy_run(x)
    return run
