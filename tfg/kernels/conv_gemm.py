"""Dense Conv2D on the CPU (numpy) as one GEMM per call, in either layout, without transposing
the input or the output.

    nhwc(x[N,H,W,C], w[KH,KW,C,O], g) -> [N, OH, OW, O]   patches [N*OH*OW, KH*KW*C] @ w
    nchw(x[N,C,H,W], w[KH,KW,C,O], g) -> [N, O, OH, OW]   per image: w^T [O, C*KH*KW] @ patches

1x1 convolutions need no patch matrix: with stride 1 and no padding the input itself is the
GEMM operand (NHWC: [N*H*W, C]; NCHW: [N, C, H*W], BLAS reads w^T as a transposed view), and
a strided 1x1 copies only the sampled pixels (1/(sh*sw) of the input). Otherwise the patch
matrix is copied once from a strided view of the padded input (conv_geom): in NHWC its rows
are output pixels and, with a W dilation of 1, each filter row's KW*C values are one run of
memory, so the copy moves whole runs (with 1-4 channels, as image models' stems have, those
runs are short: copied transposed instead, `patches_t_nhwc`); in NCHW its rows are (c, kh,
kw) and its columns output pixels, so the product is already NCHW and needs no transpose
back. (Measured against
shifting the padded image once per filter tap and accumulating KH*KW GEMMs with K = C: that
was 0.7-1.9x as fast on the keras.applications layers, so not worth a second path.)

`matmul(a, b)` is the product all of them (and MatMul's kernel) use: OpenBLAS's GEMM is slow
for a left matrix of 2 or 3 rows (a classifier or a squeeze-excite layer at batch 2: the
pixels are the rows), so those rows go to one GEMV each instead.
"""
import numpy as np
from tfg.kernels import conv_chunks, conv_crop, conv_kn2row
from tfg.kernels.conv_geom import padded, padded_nchw, strided
from tfg.kernels.gemm_floor import serial_below_floor

# Measured (OpenBLAS 0.3.31, one thread, float32, M x K @ K x N): with M = 2 or 3 and K*N of
# 32K or more, one GEMV per row took 0.25-0.8x the GEMM's time (2 x 1024 @ 1024 x 1000:
# 312 -> 144 us; 2 x 576 @ 576 x 1024: 192 -> 84 us); below ~16K elements, or from 4
# rows, the GEMM was as fast or faster. One row is a GEMV in numpy already.
SKINNY_ROWS = (2, 3)
SKINNY_MIN_ELEMENTS = 32768
# The 3-channel stems (3x3, stride 2, batch 2, 96x96): the patch matrix's copy runs KW*C = 9
# values at a time; copied transposed ([KH*KW*C, N*OH*OW], runs along the output columns)
# and handed to BLAS as a transposed operand, the convolution took 217-245 us instead of
# 270-303 (MobileNetV2/V3Small, NASNet, InceptionV3 stems), the same values; ResNet50's 7x7
# stem (K = 147) was slower that way (8.3 against 7.2 ms), so only short patch rows.
THIN_MAX_CHANNELS, THIN_MAX_K = 4, 36


def matmul(a, b):
    """a @ b for 2-D numpy arrays; a fresh array (see the module docstring for the GEMVs)."""
    m, (k, n) = a.shape[0], b.shape
    if (m in SKINNY_ROWS and k * n >= SKINNY_MIN_ELEMENTS and a.dtype == b.dtype
            and a.dtype.kind == "f" and a.dtype.itemsize >= 4):
        out = np.empty((m, n), a.dtype)
        for r in range(m):
            np.matmul(a[r], b, out=out[r])
        return out
    return a @ b


def prepared(x_shape, w_shape, g, nchw_layout=False, dtype=np.float32, kn2row=True):
    """`run(x, w)` for inputs of these shapes: what `nhwc`/`nchw` do, with the choice of
    path and the GEMM's dimensions made once (Conv2D keeps it per node and signature). NHWC
    convolutions with a large patch matrix run in cache-sized chunks (conv_chunks.py); the
    stride-1 ones conv_kn2row.wanted picks run as one GEMM against all taps, then shifted
    adds (read-only filters; `kn2row=False`: never). Filter taps that meet only padding
    are dropped first (conv_crop.py): the rest runs on the cropped filter."""
    h, wd = x_shape[2:] if nchw_layout else x_shape[1:3]
    crop = conv_crop.cropped(h, wd, g)
    if crop is not None:
        (h0, h1), (w0, w1), g = crop
        # kn2row keys its kept transpose on the filter object: a view made per call never hits
        inner = prepared(x_shape, (h1 - h0, w1 - w0) + tuple(w_shape[2:]), g, nchw_layout,
                         dtype, False)
        return lambda x, w: inner(x, w[h0:h1, w0:w1])
    if nchw_layout:
        return lambda x, w: nchw(x, w, g)
    if kn2row and conv_kn2row.wanted(x_shape, w_shape, g, dtype):
        return conv_kn2row.prepared(x_shape, w_shape, g,
                                    prepared(x_shape, w_shape, g, False, dtype, False))
    n, h, wd, c = x_shape
    kh, kw, _, oc = w_shape
    macs = n * g.oh * g.ow * kh * kw * c * oc  # small ones on one BLAS thread: gemm_floor.py
    if kh == kw == 1 and not g.has_pad and g.sh == g.sw == 1 and g.oh == h and g.ow == wd:
        rows, out = n * h * wd, (n, h, wd, oc)
        if rows in SKINNY_ROWS:
            return serial_below_floor(
                lambda x, w: matmul(x.reshape(rows, c), w.reshape(c, oc)).reshape(out), macs)
        return serial_below_floor(
            lambda x, w: (x.reshape(rows, c) @ w.reshape(c, oc)).reshape(out), macs)
    thin = c <= THIN_MAX_CHANNELS and kh * kw * c <= THIN_MAX_K and not (kh == kw == 1)
    chunked = conv_chunks.prepared(x_shape, w_shape, g, dtype, thin)
    if chunked is not None:
        return chunked
    if thin:
        out = (n, g.oh, g.ow, oc)
        return serial_below_floor(
            lambda x, w: (patches_t_nhwc(x, g).T @ w.reshape(-1, oc)).reshape(out), macs)
    return serial_below_floor(lambda x, w: nhwc(x, w, g), macs)


def nhwc(x, w, g):
    n, h, wd, c = x.shape
    kh, kw, _, oc = w.shape
    if kh == kw == 1 and not g.has_pad:
        if g.sh != 1 or g.sw != 1 or g.oh != h or g.ow != wd:
            x = x[:, :(g.oh - 1) * g.sh + 1:g.sh, :(g.ow - 1) * g.sw + 1:g.sw, :]
        y = matmul(x.reshape(-1, c), w.reshape(c, oc))  # reshape copies only a strided view
    else:
        y = matmul(patches_nhwc(x, g), w.reshape(-1, oc))
    return y.reshape(n, g.oh, g.ow, oc)


def patches_nhwc(x, g):
    """Patch matrix [N*OH*OW, KH*KW*C] of NHWC `x` (any strides: an NCHW input's transpose is
    fine), rows in output order and columns in the filter's (kh, kw, c) order: one copy."""
    n, c = x.shape[0], x.shape[3]
    xpad = padded(x, g)
    sn, sh, sw, sc = xpad.strides
    if g.dw == 1:
        win = strided(xpad, (n, g.oh, g.ow, g.kh, g.kw * c),
                      (sn, sh * g.sh, sw * g.sw, sh * g.dh, sc))
    else:
        win = strided(xpad, (n, g.oh, g.ow, g.kh, g.kw, c),
                      (sn, sh * g.sh, sw * g.sw, sh * g.dh, sw * g.dw, sc))
    return win.reshape(n * g.oh * g.ow, g.kh * g.kw * c)


def patches_t_nhwc(x, g):
    """The patch matrix transposed, [KH*KW*C, N*OH*OW], of NHWC `x`: one copy whose inner
    loop runs along the output columns (OW values) rather than a filter row (KW*C values):
    the faster copy when C is 1-4."""
    n, c = x.shape[0], x.shape[3]
    xpad = padded(x, g)
    sn, sh, sw, sc = xpad.strides
    win = strided(xpad, (g.kh, g.kw, c, n, g.oh, g.ow),
                  (sh * g.dh, sw * g.dw, sc, sn, sh * g.sh, sw * g.sw))
    return win.reshape(g.kh * g.kw * c, n * g.oh * g.ow)


def nchw(x, w, g):
    n, c, h, wd = x.shape
    kh, kw, _, oc = w.shape
    if kh == kw == 1 and not g.has_pad:
        if g.sh != 1 or g.sw != 1 or g.oh != h or g.ow != wd:
            x = x[:, :, :(g.oh - 1) * g.sh + 1:g.sh, :(g.ow - 1) * g.sw + 1:g.sw]
        cols = x.reshape(n, c, g.oh * g.ow)
        wt = w.reshape(c, oc).T
    else:
        cols = _patches_nchw(x, g)
        wt = w.transpose(3, 2, 0, 1).reshape(oc, c * kh * kw)
    return np.matmul(wt, cols).reshape(n, oc, g.oh, g.ow)


def _patches_nchw(x, g):
    """Patches [N, C*KH*KW, OH*OW] of NCHW `x`: rows in the (c, kh, kw) order of the filter
    transposed to [O, C, KH, KW], columns in output order. One copy of a strided view."""
    n, c = x.shape[:2]
    xpad = padded_nchw(x, g)
    sn, sc, sh, sw = xpad.strides
    win = strided(xpad, (n, c, g.kh, g.kw, g.oh, g.ow),
                  (sn, sc, sh * g.dh, sw * g.dw, sh * g.sh, sw * g.sw))
    return win.reshape(n, c * g.kh * g.kw, g.oh * g.ow)
