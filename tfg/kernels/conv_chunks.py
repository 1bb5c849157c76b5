"""Dense NHWC Conv2D (+ bias, + Relu/Relu6) in chunks of output rows whose patch matrix stays
in cache, each chunk's GEMM written straight into the output.

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
BLAS threads. Chunks are taken from a shared iterator, so a thread that loses its core to
another process takes fewer chunks rather than stalling the other.
"""
import numpy as np

from tfg.kernels import conv_threads
from tfg.kernels._util import immutable
from tfg.kernels.conv_geom import padded, strided

# Patch bytes per chunk (benchmarks/bench_conv_chunks.py, one thread, min CPU of 20 rounds:
# 1 MB beat 256-512 KB on the cnn row's layers and ResNet's 24x24x64: 256 KB made GEMMs of
# too few rows; 4 MB lost the gain, the buffer no longer in the L2/L3 it was written to).
CHUNK_BYTES = 1 << 20
# A floor on a chunk's GEMM rows, for filters of large K (256 KB chunks, 100-450 rows, were
# slower than 1 MB ones on every layer measured).
MIN_ROWS = 128
# Convolutions whose whole patch matrix is under this stay one GEMM (no gain, more calls).
MIN_PATCH_BYTES = 1 << 20
# Outputs of up to TILE_MAX_ROW bytes a pixel (32 float32 channels) get their bias added from
# a copy repeated to TILE_BYTES (64 channels: 20 against 21 us a chunk, no gain).
TILE_BYTES, TILE_MAX_ROW = 16 << 10, 128
_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def prepared(x_shape, w_shape, g, dtype, thin=False):
    """`run(x, w, bias=None, act=None)` for NHWC inputs of these shapes, or None when the
    convolution is 1x1 (no patch matrix), has a W dilation, or its patches are small.
    `thin`: copy each chunk's patches transposed (conv_gemm's rule for 1-4 channel stems)."""
    n, h, wd, c = x_shape
    kh, kw, _, oc = w_shape
    k = kh * kw * c
    itemsize = np.dtype(dtype).itemsize
    rows_per_image = g.oh * g.ow
    if (np.dtype(dtype) not in _FLOATS or kh == kw == 1 or g.dw != 1
            or n * rows_per_image * k * itemsize < MIN_PATCH_BYTES):
        return None
    want_rows = max(MIN_ROWS, CHUNK_BYTES // (k * itemsize))
    spans = _spans(n, g.oh, g.ow, want_rows)
    return ChunkedConv(g, (n, g.oh, g.ow, oc), k, oc, spans, dtype, thin)


def _spans(n, oh, ow, want_rows):
    """(first image, images, first output row, output rows) per chunk: whole images grouped
    when one image has fewer than `want_rows` patch rows, else even bands of one image."""
    rows_per_image = oh * ow
    if rows_per_image <= want_rows:
        per = max(1, want_rows // rows_per_image)
        # Sizes within one image of each other, and an even count (two threads take equal
        # shares): 32 images by 9 -> 8, 8, 8, 8; by 7 -> 6, 6, 5, 5, 5, 5.
        chunks = -(-n // per)
        chunks = min(n, chunks + (chunks > 1 and chunks % 2))
        size, extra = divmod(n, chunks)
        spans, i = [], 0
        for j in range(chunks):
            imgs = size + (j < extra)
            spans.append((i, imgs, 0, oh))
            i += imgs
        return spans
    band = max(1, want_rows // ow)
    bands = -(-oh // band)
    band = -(-oh // bands)  # even bands
    return [(i, 1, r, min(band, oh - r)) for i in range(n) for r in range(0, oh, band)]


class ChunkedConv:
    """The prepared convolution (see the module docstring); `spans` lists its chunks."""

    __slots__ = ("g", "out_shape", "k", "oc", "spans", "dtype", "buf_size", "thin", "tiled")

    def __init__(self, g, out_shape, k, oc, spans, dtype, thin):
        self.g, self.out_shape, self.k, self.oc = g, out_shape, k, oc
        self.spans, self.dtype, self.thin = spans, np.dtype(dtype), thin
        self.buf_size = k * max(imgs * rows * out_shape[2] for _, imgs, _, rows in spans)
        # (read-only bias, the bias repeated over TILE_BYTES) of the last call
        self.tiled = (None, None)

    def _bias_rows(self, bias):
        """The bias repeated to about TILE_BYTES when the channels are few (a broadcast add
        of 32 channels ran 8-element inner loops: 120 us per chunk of the cnn row's first
        layer against 60 us tiled), else None. Kept while the bias is the same read-only
        array (a Const's)."""
        if bias is None or self.oc * bias.itemsize > TILE_MAX_ROW:
            return None
        last, tile = self.tiled
        if last is bias and immutable(bias):
            return tile
        tile = np.tile(bias, max(1, TILE_BYTES // (self.oc * bias.itemsize)))
        self.tiled = (bias, tile)
        return tile

    def __call__(self, x, w, bias=None, act=None):
        g, (n, oh, ow, oc), k = self.g, self.out_shape, self.k
        c = x.shape[3]
        xpad = padded(x, g)
        sn, sh, sw, sc = xpad.strides
        wm = w.reshape(k, oc)
        out = np.empty(self.out_shape, self.dtype)
        flat = out.reshape(n, oh * ow, oc)
        thin = self.thin
        tile = self._bias_rows(bias)
        per_tile = 0 if tile is None else tile.size // oc

        def chunk(span, buf):
            i, imgs, r0, rows = span
            m = imgs * rows * ow
            base = xpad[i:, r0 * g.sh:]
            if thin:  # [K, m]: the copy's inner loop runs along OW (see conv_gemm)
                win = strided(base, (g.kh, g.kw, c, imgs, rows, ow),
                              (sh * g.dh, sw, sc, sn, sh * g.sh, sw * g.sw))
                p = buf[:k * m].reshape(k, m)
                p.reshape(win.shape)[...] = win
                p = p.T
            else:  # [m, K]: each filter row's KW*C values are one run
                win = strided(base, (imgs, rows, ow, g.kh, g.kw * c),
                              (sn, sh * g.sh, sw * g.sw, sh * g.dh, sc))
                p = buf[:k * m].reshape(m, k)
                p.reshape(win.shape)[...] = win
            o = flat[i:i + imgs, r0 * ow:(r0 + rows) * ow].reshape(m, oc)
            np.matmul(p, wm, out=o)
            if tile is not None:
                whole = m - m % per_tile
                if whole:
                    t = o[:whole].reshape(-1, tile.size)
                    np.add(t, tile, out=t)
                if whole < m:
                    np.add(o[whole:], bias, out=o[whole:])
            elif bias is not None:
                np.add(o, bias, out=o)
            if act is not None:
                act(o, out=o)

        conv_threads.run_chunks(chunk, self.spans, self.buf_size, self.dtype)
        return out
