"""Dense NHWC Conv2D (+ bias, + Relu/Relu6) in chunks of output rows whose patch matrix stays
in the core's cache, each chunk's GEMM written straight into the output.

    run = prepared(x.shape, w.shape, g, x.dtype)     # None when one whole GEMM is better
    y = run(x, w)                                    # Conv2D
    y = run(x, w, bias, clamp.relu)                  # _FusedConv2D [BiasAdd, Relu]

Why: conv_gemm's im2col copies the whole patch matrix [N*OH*OW, KH*KW*C] before one GEMM
reads it back: the cnn row's second layer (32 x 16x16x32, 3x3) makes 9.4 MB of it, several
times the 512 KB L2, freshly mapped by malloc every call (page faults), then the output
(2 MB) is read twice more for the bias and the Relu. Here the patch rows of a few images (or
of a band of one image's output rows) are copied into one reused buffer of about CHUNK_BYTES,
multiplied into their slice of the output (`np.matmul(..., out=)`), and the bias and the
activation are applied to that slice while it is still in cache. The values are the same
dot products over the same K; OpenBLAS's blocking over M differs with the chunk's height, so
a bit may differ from the one-GEMM result (not from TensorFlow's tolerance).

`workers` (conv_threads.py) may run the chunks on two threads: numpy's copy, OpenBLAS's GEMM
(one BLAS thread each) and the ufuncs all release the GIL, so both cores work on every part
of the convolution, as TensorFlow's intra-op pool does, instead of only the GEMM with two
BLAS threads. Chunks are taken from a shared counter, so a thread that loses its core to
another process takes fewer chunks rather than stalling the other.
"""
import numpy as np

from tfg.kernels import conv_threads
from tfg.kernels.conv_geom import padded, strided

# Patch bytes per chunk (benchmarks/bench_conv_chunks.py, one thread, min CPU of 20 rounds:
# 1 MB beat 256-512 KB on the cnn row's layers and ResNet's 24x24x64: 256 KB made GEMMs of
# too few rows; 4 MB lost the gain, the buffer no longer in the L2/L3 it was written to).
CHUNK_BYTES = 1 << 20
# Fewer GEMM rows than this and OpenBLAS's per-call packing of the filter shows.
MIN_ROWS = 128
# Convolutions whose whole patch matrix is under this stay one GEMM (no gain, more calls).
MIN_PATCH_BYTES = 1 << 20
_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def prepared(x_shape, w_shape, g, dtype):
    """`run(x, w, bias=None, act=None)` for NHWC inputs of these shapes, or None when the
    convolution is 1x1 (no patch matrix), has a W dilation, or its patches are small."""
    n, h, wd, c = x_shape
    kh, kw, _, oc = w_shape
    k = kh * kw * c
    itemsize = np.dtype(dtype).itemsize
    rows_per_image = g.oh * g.ow
    if np.dtype(dtype) not in _FLOATS or kh == kw == 1 or g.dw != 1 or n * rows_per_image * k * itemsize < MIN_PATCH_BYTES:
        return None
    want_rows = max(MIN_ROWS, CHUNK_BYTES // (k * itemsize))
    spans = _spans(n, g.oh, g.ow, want_rows)
    return ChunkedConv(g, (n, g.oh, g.ow, oc), k, oc, spans, dtype)


def _spans(n, oh, ow, want_rows):
    """(image, first image, images, first output row, output rows) per chunk: whole images
    grouped when one image has fewer than `want_rows` patch rows, else bands of one image."""
    rows_per_image = oh * ow
    if rows_per_image <= want_rows:
        per = max(1, want_rows // rows_per_image)
        return [(i, min(per, n - i), 0, oh) for i in range(0, n, per)]
    band = max(1, want_rows // ow)
    bands = -(-oh // band)
    band = -(-oh // bands)  # even bands
    return [(i, 1, r, min(band, oh - r)) for i in range(n) for r in range(0, oh, band)]


class ChunkedConv:
    __slots__ = ("g", "out_shape", "k", "oc", "spans", "dtype", "buf_rows")

    def __init__(self, g, out_shape, k, oc, spans, dtype):
        self.g, self.out_shape, self.k, self.oc = g, out_shape, k, oc
        self.spans, self.dtype = spans, np.dtype(dtype)
        self.buf_rows = max(imgs * rows * out_shape[2] for _, imgs, _, rows in spans)

    def __call__(self, x, w, bias=None, act=None):
        g, (n, oh, ow, oc), k = self.g, self.out_shape, self.k
        c = x.shape[3]
        xpad = padded(x, g)
        sn, sh, sw, sc = xpad.strides
        wm = w.reshape(k, oc)
        out = np.empty(self.out_shape, self.dtype)
        flat = out.reshape(n, oh * ow, oc)

        def chunk(span, buf):
            i, imgs, r0, rows = span
            m = imgs * rows * ow
            win = strided(xpad[i:, r0 * g.sh:], (imgs, rows, ow, g.kh, g.kw * c),
                          (sn, sh * g.sh, sw * g.sw, sh * g.dh, sc))
            p = buf[:m]
            p.reshape(win.shape)[...] = win
            o = flat[i:i + imgs, r0 * ow:(r0 + rows) * ow].reshape(m, oc)
            np.matmul(p, wm, out=o)
            if bias is not None:
                np.add(o, bias, out=o)
            if act is not None:
                act(o, out=o)

        conv_threads.run_chunks(chunk, self.spans, (self.buf_rows, k), self.dtype)
        return out
