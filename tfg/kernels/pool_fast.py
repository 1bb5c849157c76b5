"""MaxPool and AvgPool of NHWC numpy arrays, prepared once per node and input signature.

    run = prepared(g, x.shape, x.dtype, np.add, 0, divisor)   # kept in the node's ctx.cache
    y = run(x)        # the same separable pool as pool_ops._separable, the slices made once
                      # (AvgPool, where numba is installed, from the 2nd call on: pool_loops.py)

pool_ops' general path parses ksize/strides/format, builds each row and column slice from
lists and divides an AvgPool by a [1, OH, OW, 1] count table broadcast over the channels on
every call. NASNet's 52 small pools (3x3 to 12x12 spatial) made that Python and the
broadcast divide (OH*OW inner loops of C values) most of their time: a 12x12x44 AvgPool went
from ~50 to ~25 us alone. Here the slices are tuples made once, and the divisor is the count
table repeated over C (`divisor`, [1, OH, OW, C]): one OH*OW*C-long loop per image. The
values are pool_ops' bit for bit (same additions in the same order, the same division).
A small padded input goes into a padded buffer the prepared run keeps, its border filled once
(kept_pad.py): one numpy call instead of an allocation, a fill and the copy.

Inside a step that may use two cores (conv_threads.workers() > 1), a pool of 1 MB or more
runs its two batch halves on two threads (the cnn row's 32x32x32x32 MaxPool: ~1.1 ms on one
core), each half the same calls on fewer images, so the same values.
"""
import numpy as np

from tfg.kernels import conv_threads, pool_loops
from tfg.kernels.conv_geom import padded
from tfg.kernels.kept_pad import kept_padder

SPLIT_MIN_BYTES = 1 << 20


def _compiled(g, dtype, op, divisor, run):
    """An AvgPool's `run` as pool_loops' compiled loop where numba is installed, else `run`.
    (Pools large enough to split over two threads keep the split: it halves their time in
    a two-core step where the loop runs on one core.)"""
    if op is not np.add:
        return run
    return pool_loops.compiled_run(g, dtype, divisor, run) or run


def prepared(g, shape, dtype, op, value, divisor):
    """`run(x)` for NHWC inputs of `shape` and `dtype` with geometry `g` (oh, ow >= 1): `op`
    (np.maximum or np.add) over every window of `x` padded with `value`, divided by
    `divisor` when given."""
    hspan, wspan = (g.oh - 1) * g.sh + 1, (g.ow - 1) * g.sw + 1
    rows = [(slice(None), slice(i, i + hspan, g.sh)) for i in range(g.kh)]
    cols = [(slice(None), slice(None), slice(j, j + wspan, g.sw)) for j in range(g.kw)]
    # With one window column and every padded column kept, the row stage's fresh result
    # is already the output.
    whole_width = g.sw == 1 and wspan == shape[2] + g.pl + g.pr
    first_row = rows[0]
    second_row, more_rows = (rows[1], rows[2:]) if g.kh > 1 else (None, ())
    first_col = cols[0]
    second_col, more_cols = (cols[1], cols[2:]) if g.kw > 1 else (None, ())
    n = shape[0]
    split = n >= 2 and n * shape[1] * shape[2] * shape[3] * np.dtype(dtype).itemsize \
        >= SPLIT_MIN_BYTES
    # (the batch halves of a split pool are other shapes: padded per call, as before)
    pad_into = None if split else kept_padder(g, shape, dtype, value)

    def run(x):
        xpad = padded(x, g, value) if pad_into is None else pad_into(x)
        if second_row is not None:
            r = op(xpad[first_row], xpad[second_row])
            for sl in more_rows:
                op(r, xpad[sl], out=r)
            # freed (or given back) before the output is allocated (see pool_ops._separable:
            # glibc's heap top given back and faulted in again on every call otherwise)
            if pad_into is not None:
                pad_into.give_back(xpad)
            del xpad
            if second_col is None and whole_width:
                out = r
            elif second_col is None:
                out = r[first_col].copy()
            else:
                out = op(r[first_col], r[second_col])
        else:
            r = xpad[first_row]
            out = r[first_col].copy() if second_col is None else op(r[first_col],
                                                                     r[second_col])
        for sl in more_cols:
            op(out, r[sl], out=out)
        if second_row is None and pad_into is not None:
            pad_into.give_back(xpad)  # (r, a view of it, was read until here)
        if divisor is not None:
            np.divide(out, divisor, out=out)
        return out

    if not split:
        return _compiled(g, dtype, op, divisor, run)
    halves = [(0, n // 2), (n // 2, n)]
    out_shape = (n, g.oh, g.ow, shape[3])

    def split_run(x):
        if conv_threads.workers() < 2:
            return run(x)
        out = np.empty(out_shape, x.dtype)

        def half(span, buf):
            out[span[0]:span[1]] = run(x[span[0]:span[1]])

        conv_threads.run_chunks(half, halves, 0, x.dtype)
        return out

    return split_run
