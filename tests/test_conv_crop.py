"""Conv2D with filter taps that meet only padding (conv_crop.py): the taps kept, the geometry
of the cropped filter, and the values against the definition (test_conv_fast_paths.reference)
over small maps, filters, strides, dilations and paddings in both layouts, on the node's first
and its prepared later calls, plain and fused with a bias and a Relu."""
import itertools

import numpy as np
import pytest

from test_conv_fast_paths import _attrs, reference, run
from tfg.graphdef.graph import Graph
from tfg.kernels import conv_crop
from tfg.kernels.conv_geom import Geom
from tfg.kernels.context import KernelContext
from tfg.kernels.registry import get_kernel

# tfg's numpy convolution paths, also where oneDNN is installed (tests/test_onednn.py).
pytestmark = pytest.mark.usefixtures("numpy_convs")

rng = np.random.default_rng(11)


def geom(h, w, kh, kw, padding="SAME", strides=(1, 1), dilations=(1, 1)):
    return Geom(_attrs(strides, dilations, padding, None, b"NHWC"), h, w, kh, kw)


def test_a_1x1_map_keeps_only_the_centre_tap():
    (h0, h1), (w0, w1), g = conv_crop.cropped(1, 1, geom(1, 1, 3, 3))
    assert (h0, h1, w0, w1) == (1, 2, 1, 2)
    assert (g.kh, g.kw, g.oh, g.ow, g.has_pad) == (1, 1, 1, 1, False)


def test_a_1x7_filter_on_a_4_wide_map_keeps_every_tap():
    """Each of the 7 taps reaches the map at some output column: nothing to drop."""
    assert conv_crop.cropped(4, 4, geom(4, 4, 1, 7)) is None
    assert conv_crop.cropped(4, 4, geom(4, 4, 7, 1)) is None


def test_taps_beyond_a_small_map_are_dropped_on_one_axis_only():
    (h0, h1), (w0, w1), g = conv_crop.cropped(2, 9, geom(2, 9, 5, 3))
    assert (h0, h1, w0, w1) == (1, 4, 0, 3)  # rows 0 and 4 only ever meet padding
    assert (g.kh, g.pt, g.pb, g.kw, g.pl, g.pr) == (3, 1, 1, 3, 1, 1)


def test_valid_and_dilated_convolutions_are_left_alone():
    assert conv_crop.cropped(4, 4, geom(4, 4, 3, 3, "VALID", (2, 2))) is None
    assert conv_crop.cropped(1, 1, geom(1, 1, 3, 3, dilations=(2, 2))) is None


def _cases():
    """(h, w), (kh, kw), strides, dilations, padding, explicit: every combination below whose
    padded map holds the dilated filter (a non-empty output)."""
    cases = []
    for (h, w), (kh, kw), s, d, (p, e) in itertools.product(
            [(1, 1), (1, 3), (2, 2), (4, 4), (3, 1)], [(3, 3), (1, 7), (7, 1), (5, 2)],
            [(1, 1), (2, 3)], [(1, 1), (2, 1)],
            [("SAME", None), ("EXPLICIT", ((3, 0), (1, 4))), ("EXPLICIT", ((0, 5), (6, 6)))]):
        (t, b), (lo, r) = e or ((0, 0), (0, 0))
        if p == "SAME" or (h + t + b >= (kh - 1) * d[0] + 1 and w + lo + r >= (kw - 1) * d[1] + 1):
            cases.append(((h, w), (kh, kw), s, d, p, e))
    return cases


CASES = _cases()


@pytest.mark.parametrize("fmt", [b"NHWC", b"NCHW"])
@pytest.mark.parametrize("case", CASES)
def test_values_match_the_definition(case, fmt):
    (h, w), (kh, kw), strides, dilations, padding, explicit = case
    x = rng.standard_normal((2, h, w, 3)).astype(np.float32)
    f = rng.standard_normal((kh, kw, 3, 4)).astype(np.float32)
    want = reference(x.astype(np.float64), f.astype(np.float64), strides, dilations, padding,
                     explicit or ((0, 0), (0, 0)))
    a = _attrs(strides, dilations, padding, explicit, fmt)
    xin = x.transpose(0, 3, 1, 2) if fmt == b"NCHW" else x
    node = Graph().add_node("n", "Conv2D")
    ctx = KernelContext(node, a)
    fn = get_kernel("Conv2D").fn
    for _ in range(2):  # the first call prepares, the second runs the prepared path
        got = fn(ctx, xin, f)
        got = got.transpose(0, 2, 3, 1) if fmt == b"NCHW" else got
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_fused_bias_and_relu_on_a_cropped_convolution():
    x = rng.standard_normal((2, 1, 1, 16)).astype(np.float32)
    f = rng.standard_normal((3, 3, 16, 8)).astype(np.float32)
    b = rng.standard_normal(8).astype(np.float32)
    want = np.maximum(reference(x.astype(np.float64), f.astype(np.float64), (1, 1), (1, 1),
                                "SAME") + b, 0)
    node = Graph().add_node("n", "_FusedConv2D")
    a = dict(_attrs((1, 1), (1, 1), "SAME", None, b"NHWC"), num_args=1,
             fused_ops=[b"BiasAdd", b"Relu"])
    ctx = KernelContext(node, a)
    for _ in range(3):
        got = get_kernel("_FusedConv2D").fn(ctx, x, f, b)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_a_nan_in_a_dropped_tap_does_not_reach_the_output():
    """The definition has no product with padding: a NaN or inf weight that only ever meets
    padding leaves the output finite."""
    x = rng.standard_normal((2, 1, 1, 4)).astype(np.float32)
    f = rng.standard_normal((3, 3, 4, 2)).astype(np.float32)
    f[0, 0] = np.nan
    f[2, 1] = np.inf
    got = run("Conv2D", x, f, **_attrs((1, 1), (1, 1), "SAME", None, b"NHWC"))
    np.testing.assert_allclose(got, np.einsum("nc,co->no", x[:, 0, 0], f[1, 1])[:, None, None],
                               rtol=1e-5)


POOL_CASES = [((1, 1), (3, 3), (1, 1)), ((1, 1), (3, 3), (2, 2)), ((2, 2), (5, 5), (1, 1)),
              ((1, 4), (3, 3), (1, 1)), ((3, 1), (1, 5), (2, 1)), ((2, 5), (7, 2), (1, 3))]


@pytest.mark.parametrize("op", ["MaxPool", "AvgPool"])
@pytest.mark.parametrize("case", POOL_CASES)
def test_pools_on_maps_smaller_than_their_window(case, op):
    """SAME pools whose windows reach past the map: the prepared (cropped) pool gives the
    brute-force max or mean over the real inputs, on the first and later calls; a 1x1 map's
    3x3 pool is a copy of the input, not the input itself."""
    from test_conv_strategies import _pool_reference
    (h, w), k, s = case
    x = rng.standard_normal((2, h, w, 5)).astype(np.float32)
    want = _pool_reference(x, op, k, s, "SAME")
    node = Graph().add_node("p", op)
    ctx = KernelContext(node, dict(ksize=[1, *k, 1], strides=[1, *s, 1], padding=b"SAME",
                                   data_format=b"NHWC"))
    for _ in range(2):
        got = get_kernel(op).fn(ctx, x)
        assert got.shape == want.shape and got.dtype == np.float32
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
        assert not np.shares_memory(got, x)
