"""Stride-1 NHWC Conv2D as one GEMM against every filter tap at once, then shifted adds
("kn2row"): no patch matrix.

    y = x[N*H*W, C] @ wt[C, KH*KW*O]          # wt: the filter transposed, kept per node
    out[n, p, q] = sum over taps (i, j) of y[n, p + i - pt, q + j - pl, (i, j)]
                   (taps whose input pixel is outside the image: padding, skipped)

Why: im2col (conv_gemm, conv_chunks) copies KH*KW*C values per output pixel and then runs a
GEMM whose N is the layer's O output channels; where O is small (DenseNet's 3x3 layers: 128 ->
32 channels) that GEMM runs 25% slower than one of N = KH*KW*O (OpenBLAS, one thread,
1152x1152x32: 1249 us of CPU, 1152x128x288: 1017 us: the same multiply-adds), and the copy is
4x the data the adds move (KH*KW*O against KH*KW*C per pixel). Where the filter is taller or
wider than the image (InceptionV3's 7x1 and 1x7 layers on 4x4 maps), most taps reach the
image only in part; measured there, it did not win reliably (see MIN_CHANNEL_RATIO). `wanted`
says where it pays (benchmarks/bench_conv_kn2row.py).

Values: each output's taps are summed in a different order from im2col's one dot product
(per tap over C, then the taps in (i, j) order, the centre first): the last bits differ,
within TensorFlow's tolerance (its oneDNN kernels sum in their own order too).

The transposed filter is kept per node for a filter nothing can write (`_util.immutable`:
a Const's value, the same array every step; the entry holds the filter itself, so a freed
array's address reused cannot fool the identity test). Any other filter (fed, or a
variable's value, even through a read-only view) takes the im2col path on every call, never
a kept copy; so does a chunked layer in a step that may use two cores
(conv_threads.workers() > 1: the chunks split over both, unmeasured against kn2row).
"""
import numpy as np

from tfg.kernels import conv_chunks, conv_threads
from tfg.kernels._util import immutable

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
# benchmarks/bench_conv_kn2row.py, one BLAS thread, filters cycled as in a model's step.
# Measured and not taken: InceptionV3's 7x1 / 1x7 layers on 4x4 maps (M = 32 rows: 0.88 to
# 1.35 of im2col from one run to the next) and its 3x3 / 1x3 layers of 384-448 channels on
# 4x4 (0.85-0.89 in one run, 1.3-1.6 in another): not a stable win on this machine.
MIN_CHANNEL_RATIO, MIN_ROWS = 4, 256


def wanted(x_shape, w_shape, g, dtype):
    """Whether kn2row beats im2col for this stride-1 SAME convolution (the measured rule)."""
    n, h, wd, c = x_shape
    kh, kw, _, oc = w_shape
    if (np.dtype(dtype) not in _FLOATS or kh * kw == 1 or g.sh != 1 or g.sw != 1
            or g.dh != 1 or g.dw != 1 or min(n, h, wd, c, oc, g.oh, g.ow) == 0):
        return False
    if g.oh != h or g.ow != wd:  # SAME only: one tap (the centre) covers every output
        return False
    # Few output channels for the input's (the adds move O values a tap, the copy C), on maps
    # large enough for the GEMM's shape to matter: DenseNet's 3x3 128 -> 32 layers at 24x24
    # and 12x12 (0.82-0.91 of im2col's CPU time in three interleaved runs); at 6x6 and 3x3
    # the eight adds' calls cost more than they save (1.2-1.6).
    return oc * MIN_CHANNEL_RATIO <= c and n * h * wd >= MIN_ROWS


def prepared(x_shape, w_shape, g, fallback):
    """`run(x, w)`: kn2row for immutable filters, `fallback(x, w)` (im2col) otherwise."""
    n, h, wd, c = x_shape
    kh, kw, _, oc = w_shape
    taps = []  # (tap index, output slices, input slices) in (i, j) order
    centre = None
    for i in range(kh):
        for j in range(kw):
            y0, y1 = max(0, g.pt - i), min(g.oh, h + g.pt - i)
            x0, x1 = max(0, g.pl - j), min(g.ow, wd + g.pl - j)
            if y0 >= y1 or x0 >= x1:
                continue
            tap = (i * kw + j, (slice(None), slice(y0, y1), slice(x0, x1)),
                   (slice(None), slice(y0 + i - g.pt, y1 + i - g.pt),
                    slice(x0 + j - g.pl, x1 + j - g.pl)))
            if centre is None and (y0, y1, x0, x1) == (0, g.oh, 0, g.ow):
                centre = tap
            else:
                taps.append(tap)
    rows, t = n * h * wd, kh * kw
    y_shape, out_shape = (n, h, wd, t, oc), (n, g.oh, g.ow, oc)
    kept = [None]  # (filter, its transpose [C, KH*KW*O]) of the last immutable filter
    # A chunked im2col runs on the step's two cores when it may (conv_threads.py: the copy,
    # GEMM, bias and Relu of each chunk); kn2row's shifted adds would run on one. Measured
    # only with one core (this machine was loaded all along), so there the chunks keep it.
    threaded = isinstance(fallback, conv_chunks.ChunkedConv)

    def run(x, w):
        if (not immutable(w) or x.dtype != w.dtype
                or (threaded and conv_threads.workers() > 1)):
            return fallback(x, w)
        hit = kept[0]
        if hit is None or hit[0] is not w:
            wt = np.ascontiguousarray(w.transpose(2, 0, 1, 3).reshape(c, t * oc))
            wt.flags.writeable = False
            hit = kept[0] = (w, wt)
        y = np.matmul(x.reshape(rows, c), hit[1]).reshape(y_shape)
        out = np.empty(out_shape, x.dtype)
        k, _, src = centre
        np.copyto(out, y[src + (k,)])
        for k, dst, src in taps:
            o = out[dst]
            np.add(o, y[src + (k,)], out=o)
        return out
    return run
