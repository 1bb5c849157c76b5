"""Strided depthwise convolutions by W phases, each phase copied once from the input.

    split = PhaseSplit(x.shape, g)       # per node and signature
    out = phases(x, tiles, g, split)     # tiles[b]: phase b's filter columns, [KH, KW_b, OW*C]

A stride s > 1 along W (dilation 1 along W): phase b holds the padded columns b, b+s, ...
(one contiguous array each), and the filter columns b, b+s, ... read it at offsets 0, 1, ...,
so each phase is a stride-1 row convolution (one einsum over runs of OW*C values, as
conv_depthwise's rows); the phases' sums add up to the output. Not one einsum over
zero-padded phase filters: a zero weight times an inf input would put a NaN where TensorFlow
has an inf.

Each phase is filled straight from the input (its pad rows and columns zeroed): one copy of
the input, where padding it first and then copying each phase out of the padded array made
two, and only the OW + KW_b - 1 columns a phase is read at. The values are those of the
phases of the padded input, bit for bit. (Phase buffers kept by the node from step to step,
their pad zeroed once, measured no faster inside a step than fresh ones: not kept.)

Measured alone, one thread, CPU us (padded then split -> this): NASNet's 2x47x47x32 7x7/2
722 -> 677, 2x47x47x11 5x5/2 294 -> 263, 2x24x24x22 5x5/2 166 -> 147, 2x24x24x22 7x7/2
229 -> 193; 2x48x48x96 3x3/2 1080 -> 908.
"""
import numpy as np

from tfg.kernels.conv_geom import fill_border, strided


class PhaseSplit:
    """Where each W phase of NHWC inputs of `shape` comes from: per phase b, the buffer's
    shape [N, H + pads, OW + KW_b - 1, C], the phase columns k0:k1 that hold input columns
    (src, src + s, ...), the rest pad."""

    def __init__(self, shape, g):
        n, h, wd, c = shape
        s = g.sw
        self.parts = []
        for b in range(min(s, g.kw)):
            kw_b = len(range(b, g.kw, s))
            nb = g.ow + kw_b - 1
            k0 = max(0, -(-(g.pl - b) // s))  # first phase column at an input column
            k1 = max(k0, min(nb, -(-(wd + g.pl - b) // s)))  # past the last one
            src = b + k0 * s - g.pl
            part_shape = (n, h + g.pt + g.pb, nb, c)
            self.parts.append((part_shape, k0, k1, src, src + (k1 - k0 - 1) * s + 1))
        self.rows = slice(g.pt, g.pt + h)
        self.s = s

    def split(self, x):
        """The phases of `x`: fresh arrays (np.empty reuses freed heap memory), pad zeroed."""
        rows, s = self.rows, self.s
        bufs = []
        for shape, k0, k1, start, stop in self.parts:
            xb = np.empty(shape, x.dtype)
            fill_border(xb, rows.start, rows.stop, k0, k1, 0)
            if k1 > k0:
                xb[:, rows, k0:k1] = x[:, :, start:stop:s]
            bufs.append(xb)
        return bufs


def phases(x, tiles, g, split=None):
    """The depthwise convolution of NHWC `x` with geometry `g` (stride > 1 and dilation 1
    along W) by phases: tiles[b] holds the filter columns b, b+s, ... each repeated OW times
    ([KH, KW_b, OW*C], conv_depthwise._tiled); `split`: a PhaseSplit for x's shape (a
    throwaway one when None)."""
    n, c = x.shape[0], x.shape[3]
    split = split or PhaseSplit(x.shape, g)
    bufs = split.split(x)
    ow = g.ow
    out = None
    for xb, wb in zip(bufs, tiles):
        sn, sh, sw, sc = xb.strides
        view = strided(xb, (n, g.oh, g.kh, wb.shape[1], ow * c),
                       (sn, sh * g.sh, sh * g.dh, sw, sc))
        part = np.einsum("nhijv,ijv->nhv", view, wb, optimize=False)
        out = part if out is None else np.add(out, part, out=out)
    return out.reshape(n, g.oh, ow, c)
