"""Geometry of a sliding window over any number of spatial dimensions of a channels-last
tensor ([N, *spatial, C]): output sizes, SAME/VALID padding, strides, dilations, the padded
input and per-tap views. The 3-D convolutions and pools, MaxPoolWithArgmax and
ExtractImagePatches share it (conv_geom.py is the 2-D one, tuned for Conv2D).

    g = WindowGeom((4, 5, 6), ksize=(2, 2, 2), strides=(1, 2, 1), dilations=(1, 1, 1),
                   padding="SAME")
    xpad = g.pad(x)             # [N, D + pads, H + pads, W + pads, C]
    xpad[g.tap((i, j, k))]      # tap (i, j, k) at every output position: [N, OD, OH, OW, C]
    g.windows(xpad)             # read-only view [N, OD, OH, OW, KD, KH, KW, C]
"""
import itertools

import numpy as np
from numpy.lib.stride_tricks import as_strided

from tfg.kernels._util import conv_out_and_pads, fail, s


class WindowGeom:
    """Output size and (before, after) padding of every spatial dim of one call."""

    def __init__(self, spatial, ksize, strides, dilations, padding):
        self.spatial, self.ksize = tuple(spatial), tuple(ksize)
        self.strides, self.dilations = tuple(strides), tuple(dilations)
        check_strides(self.strides, self.dilations)
        if min(self.ksize, default=1) < 1:
            fail(f"window sizes must be >= 1, got ksize {list(self.ksize)}")
        padding = s(padding)
        if padding not in ("SAME", "VALID"):
            fail(f"padding must be SAME or VALID, got {padding!r}")
        dims = [output_size(n, k, st, d, padding)
                for n, k, st, d in zip(self.spatial, self.ksize, self.strides, self.dilations)]
        self.out = tuple(d[0] for d in dims)
        self.pads = tuple((d[1], d[2]) for d in dims)

    def taps(self):
        """Every tap of the window, row-major (the order of a flattened filter)."""
        return itertools.product(*(range(k) for k in self.ksize))

    def padded_shape(self, n, c):
        return (n, *(size + b + a for size, (b, a) in zip(self.spatial, self.pads)), c)

    def pad(self, x, value=0):
        """`x` padded with `value`: one filled allocation; `x` itself when it needs none."""
        if not any(b or a for b, a in self.pads):
            return x
        xpad = np.full(self.padded_shape(x.shape[0], x.shape[-1]), value, x.dtype)
        xpad[self.interior()] = x
        return xpad

    def interior(self):
        """Index of the unpadded input inside the padded one."""
        return (slice(None), *(slice(b, b + n) for n, (b, _) in zip(self.spatial, self.pads)),
                slice(None))

    def tap(self, offsets):
        """Index of the tap at `offsets` (per spatial dim) for every output position."""
        idx = [slice(None)]
        for o, k_out, st, d in zip(offsets, self.out, self.strides, self.dilations):
            start = o * d
            idx.append(slice(start, start + (k_out - 1) * st + 1, st))
        return tuple(idx + [slice(None)])

    def slab_tap(self, b, d0, d1, offsets):
        """`tap` for output planes d0:d1 (of the first spatial dim) of image b only."""
        idx = self.tap(offsets)
        first = idx[1]
        start = first.start + d0 * self.strides[0]
        return (b, slice(start, start + (d1 - d0 - 1) * self.strides[0] + 1, self.strides[0]),
                *idx[2:])

    def windows(self, xpad):
        """Read-only view [N, *out, *ksize, C] of padded `xpad`: every output position's
        receptive field, without a copy."""
        st = xpad.strides
        inner = st[1:-1]
        shape = (xpad.shape[0], *self.out, *self.ksize, xpad.shape[-1])
        strides = (st[0], *(a * b for a, b in zip(inner, self.strides)),
                   *(a * b for a, b in zip(inner, self.dilations)), st[-1])
        return as_strided(xpad, shape, strides, writeable=False)

    def valid_counts(self):
        """How many real (unpadded) inputs each output window covers, shape [*out]."""
        table = np.ones((), np.int64)
        for n, k, st, (before, _), o in zip(self.spatial, self.ksize, self.strides,
                                            self.pads, self.out):
            start = np.arange(o) * st - before
            counts = np.minimum(start + k, n) - np.maximum(start, 0)
            table = np.multiply.outer(table, counts)
        return table


def check_strides(strides, dilations=()):
    """Refuse a stride below 1 or a dilation below 1 with TensorFlow's words (its shape
    functions refuse them when a graph is imported; a zero stride would divide by zero)."""
    for st in strides:
        if st < 1:
            fail(f"Stride must be > 0, but got {st}")
    for d in dilations:
        if d < 1:
            fail(f"Dilation rate must be >= 1, but got {d}")


def output_size(size, k, stride, dilation, padding, explicit=(0, 0)):
    """conv_out_and_pads, refusing a window that does not fit as TensorFlow's
    GetWindowedOutputSize does: VALID/EXPLICIT output (padded - eff_k + stride) / stride,
    truncated toward zero as C++ divides, must not be negative. So a VALID window one larger
    than its input gives an empty output, as in TensorFlow, and two larger an error:

        output_size(3, 4, 1, 1, "VALID")    # (0, 0, 0)
        output_size(3, 5, 1, 1, "VALID")    # fails: Computed output size would be negative: -1
    """
    check_strides((stride,), (dilation,))
    padding = s(padding)
    if padding in ("VALID", "EXPLICIT"):
        eff = (k - 1) * dilation + 1
        span = size + (sum(explicit) if padding == "EXPLICIT" else 0) - eff + stride
        out = span // stride if span >= 0 else -(-span // stride)
        if out < 0:
            fail(f"Computed output size would be negative: {out} [input_size: {size}, "
                 f"effective_filter_size: {eff}, stride: {stride}]")
    return conv_out_and_pads(size, k, stride, dilation, padding, explicit)


def spatial_of(values, what, rank):
    """The spatial entries of a channels-last attr list ([1, *spatial, 1]); TensorFlow's
    kernels refuse windows and strides over the batch or the channels."""
    values = [int(v) for v in values]
    if len(values) != rank:
        fail(f"{what} must have {rank} entries, got {values}")
    return values[0], tuple(values[1:-1]), values[-1]
