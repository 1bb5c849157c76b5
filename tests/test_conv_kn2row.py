"""Stride-1 Conv2D as one GEMM against all taps, then shifted adds (tfg/kernels/conv_kn2row.py):
values against the convolution by definition, the rule that picks it, a writable (fed) filter
never served a kept transpose, and _FusedConv2D's bias and Relu on top of it."""
import numpy as np
import pytest

from test_conv_fast_paths import reference
from tfg.graphdef.graph import Graph
from tfg.kernels import conv_chunks, conv_gemm, conv_kn2row, conv_threads
from tfg.kernels.conv_geom import Geom
from tfg.kernels.context import KernelContext
from tfg.kernels.registry import get_kernel

# tfg's numpy convolution paths, also where oneDNN is installed (tests/test_onednn.py).
pytestmark = pytest.mark.usefixtures("numpy_convs")

rng = np.random.default_rng(21)
SAME = {"strides": [1, 1, 1, 1], "padding": b"SAME"}


def _node(op, **attrs):
    return get_kernel(op).fn, KernelContext(Graph().add_node("n", op), {**SAME, **attrs})


def _read_only(a):
    a.flags.writeable = False
    return a


@pytest.mark.parametrize("xs,ks", [((2, 16, 16, 16), (3, 3)), ((1, 16, 20, 12), (3, 5)),
                                   ((2, 12, 12, 8), (1, 3)), ((2, 12, 11, 8), (5, 1)),
                                   ((1, 17, 16, 8), (2, 2)), ((2, 24, 24, 128), (3, 3))])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_kn2row_matches_the_definition(xs, ks, dtype):
    oc = max(1, xs[3] // 4)
    x = rng.standard_normal(xs).astype(dtype)
    w = _read_only(rng.standard_normal((*ks, xs[3], oc)).astype(dtype))
    g = Geom(SAME, xs[1], xs[2], *ks)
    assert conv_kn2row.wanted(xs, w.shape, g, dtype)
    fn, ctx = _node("Conv2D")
    for _ in range(2):  # the second call: the kept transposed filter
        got = fn(ctx, x, w)
        want = reference(x.astype(np.float64), w.astype(np.float64), (1, 1), (1, 1), "SAME")
        assert got.dtype == dtype and got.shape == want.shape
        tol = 2e-5 if dtype == np.float32 else 1e-12
        np.testing.assert_allclose(got, want, rtol=tol, atol=tol * np.abs(want).max())


def test_kn2row_inf_and_nan_where_the_definition_has_them():
    x = rng.standard_normal((1, 16, 16, 8)).astype(np.float32)
    x[0, 0, 0, 1] = np.inf  # a corner: its taps at the border are padding, not 0 * inf
    x[0, 7, 9, 2] = np.nan
    w = _read_only(rng.standard_normal((3, 3, 8, 2)).astype(np.float32))
    fn, ctx = _node("Conv2D")
    got = fn(ctx, x, w)
    want = reference(x.astype(np.float64), w.astype(np.float64), (1, 1), (1, 1), "SAME")
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isposinf(got), np.isposinf(want))
    np.testing.assert_array_equal(np.isneginf(got), np.isneginf(want))


@pytest.mark.parametrize("xs,ws,padding,strides,want", [
    ((2, 24, 24, 128), (3, 3, 128, 32), b"SAME", 1, True),    # DenseNet's 3x3 layers
    ((2, 12, 12, 128), (3, 3, 128, 32), b"SAME", 1, True),
    ((2, 6, 6, 128), (3, 3, 128, 32), b"SAME", 1, False),     # too few rows: the adds' calls
    ((2, 24, 24, 64), (3, 3, 64, 64), b"SAME", 1, False),     # as many channels out as in
    ((2, 24, 24, 128), (3, 3, 128, 32), b"VALID", 1, False),  # no tap covers every output
    ((2, 24, 24, 128), (3, 3, 128, 32), b"SAME", 2, False),   # strided
    ((2, 24, 24, 128), (1, 1, 128, 32), b"SAME", 1, False)])  # 1x1: already one GEMM
def test_kn2row_rule(xs, ws, padding, strides, want):
    g = Geom({"strides": [1, strides, strides, 1], "padding": padding}, xs[1], xs[2], *ws[:2])
    assert conv_kn2row.wanted(xs, ws, g, np.float32) is want


def test_a_writable_filter_takes_im2col_and_no_kept_copy():
    xs, ws = (1, 16, 16, 16), (3, 3, 16, 4)
    g = Geom(SAME, 16, 16, 3, 3)
    x = rng.standard_normal(xs).astype(np.float32)
    run = conv_gemm.prepared(xs, ws, g, False, np.float32)
    im2col = conv_gemm.prepared(xs, ws, g, False, np.float32, kn2row=False)
    w = rng.standard_normal(ws).astype(np.float32)  # writable: a fed filter
    np.testing.assert_array_equal(run(x, w), im2col(x, w))
    w[...] = rng.standard_normal(ws)  # changed in place: the next call sees the new values
    np.testing.assert_array_equal(run(x, w), im2col(x, w))
    ro = _read_only(w.copy())
    a = run(x, ro)
    ro2 = _read_only(rng.standard_normal(ws).astype(np.float32))  # another filter, same node
    b = run(x, ro2)
    np.testing.assert_allclose(a, im2col(x, ro), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(b, im2col(x, ro2), rtol=1e-5, atol=1e-5)


def test_fused_conv_bias_relu_on_kn2row():
    x = rng.standard_normal((2, 16, 16, 16)).astype(np.float32)
    w = _read_only(rng.standard_normal((3, 3, 16, 4)).astype(np.float32))
    b = _read_only(rng.standard_normal(4).astype(np.float32))
    fn, ctx = _node("_FusedConv2D", num_args=1, fused_ops=[b"BiasAdd", b"Relu"])
    conv, cctx = _node("Conv2D")
    for _ in range(3):  # first call, then the remembered whole path
        got = fn(ctx, x, w, b)
        np.testing.assert_array_equal(got, np.maximum(conv(cctx, x, w) + b, 0))


def test_a_chunked_layer_keeps_its_chunks_when_two_cores_may_run_them(monkeypatch):
    xs, ws = (2, 24, 24, 128), (3, 3, 128, 32)
    g = Geom(SAME, 24, 24, 3, 3)
    x = rng.standard_normal(xs).astype(np.float32)
    w = _read_only(rng.standard_normal(ws).astype(np.float32))
    im2col = conv_gemm.prepared(xs, ws, g, False, np.float32, kn2row=False)
    assert isinstance(im2col, conv_chunks.ChunkedConv)
    run = conv_gemm.prepared(xs, ws, g, False, np.float32)
    one_core = run(x, w)
    monkeypatch.setattr(conv_threads, "workers", lambda: 2)  # what a step on two cores sets
    np.testing.assert_array_equal(run(x, w), im2col(x, w))
    assert not np.array_equal(one_core, im2col(x, w))  # (so the two paths were both taken)


def _read_only_view(base):
    view = base[...]
    view.flags.writeable = False
    return view


def test_a_read_only_view_of_a_writable_filter_is_never_served_a_stale_copy():
    """A read-only view of memory someone else can write (a variable's buffer, a caller's
    array) stays the same object while the values under it change: no kept transpose."""
    xs, ws = (1, 16, 16, 16), (3, 3, 16, 4)
    g = Geom(SAME, 16, 16, 3, 3)
    x = rng.standard_normal(xs).astype(np.float32)
    run = conv_gemm.prepared(xs, ws, g, False, np.float32)
    im2col = conv_gemm.prepared(xs, ws, g, False, np.float32, kn2row=False)
    base = rng.standard_normal(ws).astype(np.float32)
    w = _read_only_view(base)
    np.testing.assert_array_equal(run(x, w), im2col(x, w))
    base[...] = rng.standard_normal(ws)
    np.testing.assert_array_equal(run(x, w), im2col(x, w))


@pytest.mark.parametrize("xs,ks,strides", [((2, 12, 12, 8), (3, 3), 1),    # rows
                                           ((2, 3, 3, 8), (5, 5), 1),      # dense
                                           ((2, 12, 12, 8), (3, 3), 2)])   # phases
def test_depthwise_kept_tilings_follow_a_read_only_view_of_a_writable_filter(xs, ks, strides):
    attrs = {**SAME, "strides": [1, strides, strides, 1]}
    fn, ctx = _node("DepthwiseConv2dNative", strides=attrs["strides"])
    x = rng.standard_normal(xs).astype(np.float32)
    base = rng.standard_normal((*ks, xs[3], 1)).astype(np.float32)
    w = _read_only_view(base)
    for _ in range(3):
        got = fn(ctx, x, w)
        want = np.einsum("nhwijc,ijc->nhwc", _depthwise_windows(x, ks, strides), base[..., 0])
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
        base[...] = rng.standard_normal(base.shape)  # the next call must see these values


def _depthwise_windows(x, ks, s):
    """SAME windows [N, OH, OW, KH, KW, C] by definition (zero padding)."""
    n, h, w, c = x.shape
    oh, ow = -(-h // s), -(-w // s)
    ph = max((oh - 1) * s + ks[0] - h, 0)
    pw = max((ow - 1) * s + ks[1] - w, 0)
    xp = np.pad(x, ((0, 0), (ph // 2, ph - ph // 2), (pw // 2, pw - pw // 2), (0, 0)))
    return np.stack([np.stack([xp[:, i:i + s * oh:s, j:j + s * ow:s, :]
                               for j in range(ks[1])], axis=3)
                     for i in range(ks[0])], axis=3)
