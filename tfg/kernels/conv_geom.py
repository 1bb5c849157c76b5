"""Geometry shared by the convolution and pooling kernels: output size, padding, strides and
dilations of one call in NHWC terms, the zero- (or -inf-) padded input, and strided views of
the receptive fields, all without copies beyond the one padded input.

    g = geometry(ctx, h, w, kh, kw)        # parsed once per node and input size (ctx.cache)
    xpad = padded(x, g)                    # NHWC, C-contiguous, zeros around (x itself if none)
    xpad[g.tap(i, j)]                      # filter tap (i, j) at every output position
    row_windows(xpad, g)                   # [N, OH, KH, KW, OW*C] view (stride 1 along W only)

`row_windows` is what makes the stride-1 kernels fast: with a stride of 1 along W, the OW
output columns of one filter tap read OW*C adjacent input values, so a kernel that loops over
that run as one axis gets long contiguous inner loops instead of C-long ones.
"""
import numpy as np
from numpy.lib.stride_tricks import as_strided

from tfg.kernels._util import fail, is_nchw, s, spatial_attr
from tfg.kernels.conv3d_geom import check_strides, output_size


class Geom:
    """Output size, padding, strides and dilations of one conv/pool call (NHWC terms)."""

    __slots__ = ("oh", "ow", "pt", "pb", "pl", "pr", "sh", "sw", "dh", "dw", "kh", "kw")

    def __init__(self, attrs, h, w, kh, kw, strides=None, dilations=None):
        fmt = attrs.get("data_format", b"NHWC")
        sn, self.sh, self.sw, sc = spatial_attr(
            strides if strides is not None else attrs["strides"], fmt, "strides")
        if sn != 1 or sc != 1:
            fail("strides in the batch and depth dimensions must be 1")
        dil = dilations if dilations is not None else attrs.get("dilations", [1, 1, 1, 1])
        _, self.dh, self.dw, _ = spatial_attr(dil, fmt, "dilations")
        check_strides((self.sh, self.sw), (self.dh, self.dw))
        padding = s(attrs["padding"])
        eh = ew = (0, 0)
        if padding == "EXPLICIT":
            p = list(attrs.get("explicit_paddings", []))
            if len(p) != 8:
                fail(f"explicit_paddings must have 8 entries, got {len(p)}")
            if min(p) < 0:
                fail(f"All elements of explicit_paddings must be nonnegative, got {p}")
            pairs = [tuple(p[i:i + 2]) for i in range(0, 8, 2)]
            eh, ew = (pairs[2], pairs[3]) if is_nchw(fmt) else (pairs[1], pairs[2])
        self.kh, self.kw = kh, kw
        self.oh, self.pt, self.pb = output_size(h, kh, self.sh, self.dh, padding, eh)
        self.ow, self.pl, self.pr = output_size(w, kw, self.sw, self.dw, padding, ew)

    @property
    def has_pad(self):
        return bool(self.pt or self.pb or self.pl or self.pr)

    def pad(self, xp, x, value=0):
        """`x` padded with `value` by any array module (the GPU path)."""
        if not self.has_pad:
            return x
        return xp.pad(x, ((0, 0), (self.pt, self.pb), (self.pl, self.pr), (0, 0)),
                      constant_values=value)

    def tap(self, i, j):
        """Index of filter tap (i, j) in the padded input, for every output position."""
        h0, w0 = i * self.dh, j * self.dw
        return (slice(None), slice(h0, h0 + (self.oh - 1) * self.sh + 1, self.sh),
                slice(w0, w0 + (self.ow - 1) * self.sw + 1, self.sw), slice(None))

    def padded_shape(self, n, h, w, c):
        return (n, h + self.pt + self.pb, w + self.pl + self.pr, c)

    def crop(self, x, h, w):
        return x[:, self.pt:self.pt + h, self.pl:self.pl + w, :]


def geometry(ctx, h, w, kh, kw, strides=None, dilations=None):
    """The Geom of this node for an input of spatial size (h, w) and a (kh, kw) window,
    parsed once per node and size: a small convolution's attribute parsing cost as much as
    its arithmetic. `strides`/`dilations` override the attrs (MaxPoolV2's inputs)."""
    key = ("geom", h, w, kh, kw,
           None if strides is None else tuple(strides),
           None if dilations is None else tuple(dilations))
    g = ctx.cache.get(key)
    if g is None:
        g = ctx.cache[key] = Geom(ctx.attrs, h, w, kh, kw, strides, dilations)
    return g


# Below this input size the padded copy is filled whole first: np.zeros of a small array is a
# memset of heap memory (no fresh pages), and two numpy calls cost less than the five of
# the border writes (12x12x44 at batch 2: 14 -> 8 us; 3x3x176: 12.5 -> 5 us).
SMALL_PAD_BYTES = 96 * 1024


def padded(x, g, value=0):
    """NHWC numpy `x` padded with `value` per `g`, C-contiguous: one allocation (filled, then
    the interior assigned, which also makes an NCHW view contiguous in the same pass) instead
    of np.pad plus ascontiguousarray (np.pad alone costs ~30 us of Python per call); `x`
    itself when it needs neither."""
    if not g.has_pad and x.flags.c_contiguous:
        return x
    n, h, w, c = x.shape
    shape = g.padded_shape(n, h, w, c)
    if x.nbytes < SMALL_PAD_BYTES:  # filled whole, then the interior: two calls, not five
        xpad = np.zeros(shape, x.dtype) if value == 0 else np.full(shape, value, x.dtype)
        xpad[:, g.pt:g.pt + h, g.pl:g.pl + w, :] = x
        return xpad
    xpad = np.empty(shape, x.dtype)
    xpad[:, g.pt:g.pt + h, g.pl:g.pl + w, :] = x
    fill_border(xpad, g.pt, g.pt + h, g.pl, g.pl + w, value)
    return xpad


def padded_nchw(x, g, value=0):
    """`padded` for an NCHW numpy `x`: [N, C, H + pads, W + pads], C-contiguous."""
    if not g.has_pad and x.flags.c_contiguous:
        return x
    n, c, h, w = x.shape
    hp, wp = h + g.pt + g.pb, w + g.pl + g.pr
    xpad = np.empty((n, c, hp, wp), x.dtype)
    xpad[:, :, g.pt:g.pt + h, g.pl:g.pl + w] = x
    fill_border(xpad.reshape(n * c, hp, wp, 1), g.pt, g.pt + h, g.pl, g.pl + w, value)
    return xpad


def fill_border(xpad, top, bottom, left, right, value):
    """Set everything of [N, H, W, C] `xpad` outside rows top:bottom, columns left:right.

    Why not np.zeros for the whole buffer: numpy takes a large zeroed array from calloc,
    which hands out fresh pages from the kernel (zeroed by page faults, ~35 us for 280 KB),
    while np.empty reuses freed memory; the border is a few small writes."""
    xpad[:, :top] = value
    xpad[:, bottom:] = value
    xpad[:, top:bottom, :left] = value
    xpad[:, top:bottom, right:] = value


def strided(base, shape, strides):
    """A read-only view of `base` with these shape and strides (bytes): as_strided without its
    ~10 us of Python (the ndarray constructor over a C-contiguous base takes ~1 us; several
    views per small convolution made as_strided a visible share of it)."""
    if not base.flags.c_contiguous:
        return as_strided(base, shape, strides, writeable=False)
    view = np.ndarray(shape, base.dtype, base, 0, strides)
    view.flags.writeable = False
    return view


def windows(xpad, g):
    """Read-only view [N, OH, OW, KH, KW, C] of padded NHWC `xpad`: every output position's
    receptive field, strides and dilations included, without a copy."""
    sn, sh, sw, sc = xpad.strides
    return strided(xpad, (xpad.shape[0], g.oh, g.ow, g.kh, g.kw, xpad.shape[3]),
                   (sn, sh * g.sh, sw * g.sw, sh * g.dh, sw * g.dw, sc))


def row_windows(xpad, g):
    """Read-only view [N, OH, KH, KW, OW*C] of C-contiguous padded NHWC `xpad`, for a
    stride of 1 along W: tap (i, j) of output row r is the run of OW*C values starting at
    padded pixel (r*sh + i*dh, j*dw). Any H stride and both dilations are fine."""
    if g.sw != 1 or not xpad.flags.c_contiguous:
        raise ValueError("row_windows needs a W stride of 1 and a C-contiguous input")
    sn, sh, sw, sc = xpad.strides
    return strided(xpad, (xpad.shape[0], g.oh, g.kh, g.kw, g.ow * xpad.shape[3]),
                   (sn, sh * g.sh, sh * g.dh, sw * g.dw, sc))
