"""Filter or pooling-window taps that meet only padding, dropped before a Conv2D or pool runs.

    crop = cropped(h, w, g)        # None when every tap reaches the input at some output
    (h0, h1), (w0, w1), g2 = crop
    conv(x, w[h0:h1, w0:w1], g2)   # the same output, without the dropped taps' products
    pool(x, g2)                    # MaxPool / AvgPool: the same max, sum and window counts

Why: on a map smaller than the filter's reach, a SAME convolution has taps that no output
position ever places on the input: InceptionV3 at 96x96 ends on 1x1 maps, where its 3x3, 1x3
and 3x1 layers (448 -> 384, 384 -> 384 channels) see the centre tap only. im2col multiplies the
other taps by padding zeros and, worse, OpenBLAS packs the whole filter on every call (the
3x3x448x384 filter is 6.2 MB, read from memory every step: 796 us a call in the step, against
the centre tap's 688 KB). Cropped, such a layer is a 1x1 convolution: one small GEMM on the
input itself, no padding, no patch matrix; its 3x3 SAME AvgPools of 1x1 maps become copies.
Users: conv_gemm.prepared and pool_ops' prepared pools.

Values: the dropped products are x * 0 with x a padding position, which the convolution's
definition does not contain at all; a NaN or inf in a dropped tap of the filter no longer
turns an output into NaN through 0 * inf (the definition's value: TensorFlow's oneDNN kernels
skip the padding too). The kept taps are summed as before.

Only axes with a dilation of 1 are cropped (with a dilation the first kept tap could need a
negative padding); the used taps are taken as one range (its ends used by some output).
"""
from tfg.kernels.conv_geom import Geom


def _used(size, k, stride, pad, out):
    """(first, last + 1) of the taps of one axis that read the input at some output, for a
    dilation of 1: tap t reads input index o * stride + t - pad at output o."""
    used = []
    for t in range(k):
        o = max(0, -(-(pad - t) // stride))  # the first output whose index is >= 0
        if o < out and o * stride + t - pad < size:
            used.append(t)
    return (used[0], used[-1] + 1) if used else (0, k)


def _axis(size, k, stride, dil, pad, out):
    """(first tap, end tap, new pad before, new pad after) of one axis; None: keep all."""
    if dil != 1 or out == 0 or size == 0:
        return None
    t0, t1 = _used(size, k, stride, pad, out)
    if (t0, t1) == (0, k):
        return None
    before = pad - t0  # >= 0: a tap before the first used one would read below index 0
    last = (out - 1) * stride + (t1 - t0 - 1) - before  # the last input index read
    return t0, t1, before, max(0, last - (size - 1))


def cropped(h, w, g):
    """((h0, h1), (w0, w1), Geom) for an NHWC input of spatial size (h, w) and geometry `g`
    when some filter rows or columns only ever meet padding, else None."""
    rows = _axis(h, g.kh, g.sh, g.dh, g.pt, g.oh)
    cols = _axis(w, g.kw, g.sw, g.dw, g.pl, g.ow)
    if rows is None and cols is None:
        return None
    rows = rows or (0, g.kh, g.pt, g.pb)
    cols = cols or (0, g.kw, g.pl, g.pr)
    g2 = Geom.__new__(Geom)
    g2.oh, g2.ow, g2.sh, g2.sw, g2.dh, g2.dw = g.oh, g.ow, g.sh, g.sw, g.dh, g.dw
    g2.kh, g2.pt, g2.pb = rows[1] - rows[0], rows[2], rows[3]
    g2.kw, g2.pl, g2.pr = cols[1] - cols[0], cols[2], cols[3]
    return (rows[0], rows[1]), (cols[0], cols[1]), g2
