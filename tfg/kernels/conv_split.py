"""Convolutions under conv_chunks.py's 1 MB, 1x1 convolutions and skinny GEMMs in parts on the
step's intra-op threads (conv_threads.py), with their bias and activation applied per part.

    run = prepared(serial, operand, (m, k, n), out_shape, dtype)  # None: always serial
    y = run(x, w)                      # Conv2D: serial(x, w) on one core, parts on two
    y = run(x, w, bias, act)           # _FusedConv2D [BiasAdd, act] (act(o, out=o))

Why: at batch 2 and 96x96 most convolutions of the keras.applications models are 1x1 GEMMs
and 3x3 layers of a few hundred KB of patches: 50 to 3,000 us each, run on one core while
TensorFlow's intra-op pool splits every one of them over both. Two kinds of GEMM, split two
ways (one copy of the input at most, as before):

- many rows (M >= 2 * MIN_PART_ROWS): row blocks, each `a[rows] @ w` into its rows of the
  output, then the bias and the activation on those rows while they are in cache. A
  convolution with a patch matrix runs as conv_chunks.ChunkedConv with as many chunks as
  parts: each thread copies its own patches too.
- few rows (the late layers: 3x3 images at batch 2 are 18 rows; a classifier 2): the GEMM
  streams its weights (MobileNetV2's 960x320 1x1, ResNet50's 4608x512 3x3: 1.2-9.4 MB of
  filter for 18 output rows) and memory is what it waits for, so column blocks, each thread
  reading half of the filter: `a @ w[:, cols]` into those columns of the output.

Each output value is the same dot product over the same K, so the values are the one-GEMM
path's (OpenBLAS may block a shorter M or N differently: the last bit can differ, as with
two BLAS threads). Under one thread (outside steps, a loaded machine where adaptive gives
one, $TFG_CONV_THREADS=0) or under MIN_SPLIT_MACS multiply-adds the call is `serial`, the
code path of before, bit for bit.
"""
from time import perf_counter

import numpy as np

from tfg.kernels import conv_threads
from tfg.kernels.conv_choice import Chooser

# Under this many multiply-adds a GEMM stays one call: a handoff to the helper thread costs
# 10-20 us (benchmarks/bench_conv_split.py: 2x6x6x64 -> 384 1x1, 0.9M MACs, ~100 us cold in
# a step, was no faster on two threads).
MIN_SPLIT_MACS = 1 << 20
# Row blocks of fewer rows than this run the GEMM kernels on too little (and the patch copy
# of a chunk per thread pays only from there): below 2x this, column blocks.
MIN_PART_ROWS = 64
# Column blocks are multiples of this many columns (64-byte lines of float32 outputs).
COL_ALIGN = 16
_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def spans(total, parts, align=1):
    """`parts` (start, stop) ranges covering range(total), their sizes multiples of `align`
    (but the last) and within `align` of each other."""
    units = -(-total // align)
    parts = max(1, min(parts, units))
    size, extra = divmod(units, parts)
    out, start = [], 0
    for j in range(parts):
        stop = min(total, start + (size + (j < extra)) * align)
        out.append((start, stop))
        start = stop
    return out


class SplitGemm:
    """out[M, N] = operand(x)[M, K] @ w.reshape(K, N), (+ bias, act), in row or column blocks
    on conv_threads; `serial(x, w)` (the one-thread path, a fresh array) when the step has
    one thread. `chunked` (a ChunkedConv) replaces the operand and the row blocks where the
    patches are better copied per part."""

    __slots__ = ("serial", "operand", "mkn", "out_shape", "dtype", "rows", "cols", "chunked",
                 "chooser")

    def __init__(self, serial, operand, mkn, out_shape, dtype, chunked=None):
        m, k, n = mkn
        self.serial, self.operand, self.mkn = serial, operand, mkn
        self.out_shape, self.dtype, self.chunked = out_shape, np.dtype(dtype), chunked
        self.rows = self.cols = None
        if m >= 2 * MIN_PART_ROWS:
            self.rows = spans(m, 2)
        else:
            self.cols = spans(n, 2, COL_ALIGN)
        self.chooser = Chooser()

    def __call__(self, x, w, bias=None, act=None):
        if conv_threads.split_workers() < 2:
            return self.whole(x, w, bias, act)
        threaded = self.chooser.pick()
        t = perf_counter()
        y = self.parts(x, w, bias, act) if threaded else self.whole(x, w, bias, act)
        self.chooser.record(threaded, perf_counter() - t)
        return y

    def whole(self, x, w, bias=None, act=None):
        """The one-thread path: `serial`, then the bias and the activation in place."""
        y = self.serial(x, w)
        if bias is not None:
            np.add(y, bias, out=y)
        if act is not None:
            act(y, out=y)
        return y

    def parts(self, x, w, bias=None, act=None):
        """The blocks on conv_threads (serially on the caller when it has one thread)."""
        if self.chunked is not None:
            return self.chunked(x, w, bias, act)
        m, k, n = self.mkn
        a = self.operand(x)
        wm = w.reshape(k, n)
        out = np.empty((m, n), self.dtype)
        if self.rows is not None:
            def part(span, buf):
                o = out[span[0]:span[1]]
                np.matmul(a[span[0]:span[1]], wm, out=o)
                if bias is not None:
                    np.add(o, bias, out=o)
                if act is not None:
                    act(o, out=o)
            conv_threads.run_chunks(part, self.rows, 0, self.dtype)
        else:
            def part(span, buf):
                c0, c1 = span
                o = out[:, c0:c1]
                np.matmul(a, wm[:, c0:c1], out=o)
                if bias is not None:
                    np.add(o, bias[c0:c1], out=o)
                if act is not None:
                    act(o, out=o)
            conv_threads.run_chunks(part, self.cols, 0, self.dtype)
        return out.reshape(self.out_shape)


def prepared(serial, operand, mkn, out_shape, dtype, chunked=None):
    """A SplitGemm for a GEMM of `mkn` (M, K, N) multiply-adds that may pay on two threads,
    else None (the caller keeps `serial`)."""
    m, k, n = mkn
    if np.dtype(dtype) not in _FLOATS or m * k * n < MIN_SPLIT_MACS:
        return None
    if m < 2 * MIN_PART_ROWS and n < 2 * COL_ALIGN:
        return None
    return SplitGemm(serial, operand, mkn, out_shape, dtype, chunked)


_skinny_choosers = {}  # (rows, K, N, dtype) -> Chooser: MatMul has no per-node state here


def skinny_matmul(a, b, out):
    """out[r] = a[r] @ b for each of a's 2-3 rows (conv_gemm.matmul's GEMVs); with the step's
    threads, the columns in two blocks on two threads where that measured faster (b's K x N
    values are read once per row and block, half of them on each core)."""
    n = b.shape[1]
    if conv_threads.split_workers() < 2 or n < 2 * COL_ALIGN or a.size * n < MIN_SPLIT_MACS:
        for r in range(a.shape[0]):
            np.matmul(a[r], b, out=out[r])
        return out
    key = (a.shape[0], a.shape[1], n, a.dtype)
    chooser = _skinny_choosers.get(key)
    if chooser is None:
        if len(_skinny_choosers) > 64:
            _skinny_choosers.clear()
        chooser = _skinny_choosers[key] = Chooser()
    threaded = chooser.pick()
    t = perf_counter()
    if threaded:
        def part(span, buf):
            c0, c1 = span
            for r in range(a.shape[0]):
                np.matmul(a[r], b[:, c0:c1], out=out[r, c0:c1])
        conv_threads.run_chunks(part, spans(n, 2, COL_ALIGN), 0, out.dtype)
    else:
        for r in range(a.shape[0]):
            np.matmul(a[r], b, out=out[r])
    chooser.record(threaded, perf_counter() - t)
    return out
