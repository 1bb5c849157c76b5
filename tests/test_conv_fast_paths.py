"""The CPU fast paths of conv_ops (depthwise einsum over a window view, 1x1 convolutions as
GEMMs, im2col from a strided view) against a plain reference that loops over output pixels,
for strides, dilations, paddings, depth multipliers and both layouts. TensorFlow's own values
for the common cases are in tests/fixtures (test_kernels_fixtures.py)."""
import math

import numpy as np
import pytest

from tfg.graphdef.graph import Graph
from tfg.kernels import get_kernel
from tfg.kernels.context import KernelContext

# tfg's numpy convolution paths, also where oneDNN is installed (tests/test_onednn.py).
pytestmark = pytest.mark.usefixtures("numpy_convs")

rng = np.random.default_rng(11)


def run(op, *inputs, **attrs):
    g = Graph()
    node = g.add_node("n", op)
    return get_kernel(op).fn(KernelContext(node, attrs), *inputs)


def pads(size, k, s, d, padding, explicit):
    span = (k - 1) * d + 1
    if padding == "SAME":
        out = math.ceil(size / s)
        total = max((out - 1) * s + span - size, 0)
        return out, total // 2
    if padding == "VALID":
        return math.ceil((size - span + 1) / s), 0
    lo, hi = explicit
    return (size + lo + hi - span) // s + 1, lo


def reference(x, w, strides, dilations, padding, explicit=((0, 0), (0, 0)), depthwise=False):
    """NHWC convolution by definition, in float64, one output pixel at a time."""
    n, h, wd, c = x.shape
    kh, kw = w.shape[:2]
    (sh, sw), (dh, dw) = strides, dilations
    oh, pt = pads(h, kh, sh, dh, padding, explicit[0])
    ow, pl = pads(wd, kw, sw, dw, padding, explicit[1])
    xp = np.zeros((n, h + kh * dh + oh * sh, wd + kw * dw + ow * sw, c))
    xp[:, pt:pt + h, pl:pl + wd] = x
    out = []
    for i in range(oh):
        row = []
        for j in range(ow):
            win = xp[:, i * sh:i * sh + (kh - 1) * dh + 1:dh, j * sw:j * sw + (kw - 1) * dw + 1:dw]
            if depthwise:
                row.append(np.einsum("nijc,ijcm->ncm", win, w).reshape(n, -1))
            else:
                row.append(np.einsum("nijc,ijco->no", win, w))
        out.append(np.stack(row, 1))
    return np.stack(out, 1)


CASES = [  # strides, dilations, padding, explicit pads (H, W)
    ((1, 1), (1, 1), "SAME", None),
    ((2, 2), (1, 1), "SAME", None),
    ((2, 1), (1, 1), "VALID", None),
    ((1, 1), (2, 2), "SAME", None),
    ((1, 2), (2, 1), "VALID", None),
    ((2, 2), (1, 1), "EXPLICIT", ((1, 2), (0, 1))),
]


def _attrs(strides, dilations, padding, explicit, fmt):
    nchw = fmt == b"NCHW"
    st = [1, 1, *strides] if nchw else [1, *strides, 1]
    dl = [1, 1, *dilations] if nchw else [1, *dilations, 1]
    a = dict(strides=st, dilations=dl, padding=padding.encode(), data_format=fmt)
    if explicit:
        pairs = [0, 0, 0, 0, *explicit[0], *explicit[1]] if nchw else \
            [0, 0, *explicit[0], *explicit[1], 0, 0]
        a["explicit_paddings"] = pairs
    return a


@pytest.mark.parametrize("mult", [1, 3])
@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("fmt", [b"NHWC", b"NCHW"])
def test_depthwise_matches_the_definition(case, mult, fmt):
    strides, dilations, padding, explicit = case
    x = rng.standard_normal((2, 9, 8, 4)).astype(np.float32)
    w = rng.standard_normal((3, 2, 4, mult)).astype(np.float32)
    want = reference(x.astype(np.float64), w.astype(np.float64), strides, dilations, padding,
                     explicit or ((0, 0), (0, 0)), depthwise=True)
    xin = x.transpose(0, 3, 1, 2) if fmt == b"NCHW" else x
    got = run("DepthwiseConv2dNative", xin, w, **_attrs(strides, dilations, padding, explicit,
                                                         fmt))
    if fmt == b"NCHW":
        got = got.transpose(0, 2, 3, 1)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("k", [(1, 1), (3, 3), (2, 3)])
@pytest.mark.parametrize("case", CASES)
def test_conv2d_matches_the_definition(case, k):
    strides, dilations, padding, explicit = case
    x = rng.standard_normal((2, 9, 8, 5)).astype(np.float32)
    w = rng.standard_normal((*k, 5, 6)).astype(np.float32)
    want = reference(x.astype(np.float64), w.astype(np.float64), strides, dilations, padding,
                     explicit or ((0, 0), (0, 0)))
    got = run("Conv2D", x, w, **_attrs(strides, dilations, padding, explicit, b"NHWC"))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
