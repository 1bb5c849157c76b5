"""The kernels' per-node prepared paths (a closure kept in the node's ctx.cache per input
signature, run from the second call on): NHWC MaxPool/AvgPool (tfg/kernels/pool_fast.py) and
the depthwise strategies (conv_depthwise.prepared). Each node is called several times with
fresh inputs, and with a second input shape in between (a cache entry per signature), against
the brute-force pool and the by-definition convolution; the pools also bit for bit against
their NCHW general path (the same additions and division)."""
import threading

import numpy as np
import pytest

from test_conv_fast_paths import reference
from test_conv_strategies import _pool_reference
from tfg.graphdef.graph import Graph
from tfg.kernels.context import KernelContext
from tfg.kernels.registry import get_kernel

# tfg's numpy convolution paths, also where oneDNN is installed (tests/test_onednn.py).
pytestmark = pytest.mark.usefixtures("numpy_convs")

rng = np.random.default_rng(11)


def node(op, **attrs):
    return get_kernel(op).fn, KernelContext(Graph().add_node("n", op), attrs)


POOLS = [  # ksize, strides, padding, input shapes (NHWC)
    ((3, 3), (1, 1), "SAME", [(2, 12, 12, 5), (1, 6, 7, 3)]),    # NASNet's normal-cell pool
    ((3, 3), (2, 2), "VALID", [(2, 13, 13, 4), (2, 9, 8, 3)]),   # reduction cells
    ((1, 1), (2, 2), "VALID", [(2, 9, 9, 3)]),                   # the adjust blocks' 1x1
    ((3, 1), (1, 1), "SAME", [(2, 5, 4, 3)]),                    # one column: rows only
    ((3, 1), (2, 1), "VALID", [(1, 7, 4, 2)]),
    ((1, 3), (1, 2), "SAME", [(2, 5, 9, 3)]),                    # one row: columns only
    ((4, 3), (3, 2), "SAME", [(2, 10, 9, 2)]),
]


@pytest.mark.parametrize("op", ["AvgPool", "MaxPool"])
@pytest.mark.parametrize("case", POOLS)
def test_prepared_pools_match_brute_force_and_the_general_path(case, op):
    k, s, padding, shapes = case
    fn, ctx = node(op, ksize=[1, *k, 1], strides=[1, *s, 1], padding=padding.encode(),
                   data_format=b"NHWC")
    nchw_fn, nchw_ctx = node(op, ksize=[1, 1, *k], strides=[1, 1, *s],
                             padding=padding.encode(), data_format=b"NCHW")
    for shape in shapes * 2 + shapes[:1]:
        x = rng.standard_normal(shape).astype(np.float32)
        got = fn(ctx, x)
        want = _pool_reference(x, op, k, s, padding)
        assert got.dtype == np.float32 and got.shape == want.shape
        assert not np.shares_memory(got, x)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
        general = nchw_fn(nchw_ctx, x.transpose(0, 3, 1, 2)).transpose(0, 2, 3, 1)
        np.testing.assert_array_equal(got, general)
    runs = [key for key in ctx.cache if key[0] in ("avg_run", "max_run")]
    assert len(runs) == len(shapes)  # one prepared closure per input signature


def test_prepared_pools_keep_integers_nan_and_inf():
    fn, ctx = node("MaxPool", ksize=[1, 3, 3, 1], strides=[1, 1, 1, 1], padding=b"SAME",
                   data_format=b"NHWC")
    xi = rng.integers(-100, 100, (1, 5, 5, 2)).astype(np.int32)
    for _ in range(2):
        np.testing.assert_array_equal(fn(ctx, xi), _pool_reference(
            xi, "MaxPool", (3, 3), (1, 1), "SAME").astype(np.int32))
    afn, actx = node("AvgPool", ksize=[1, 3, 3, 1], strides=[1, 1, 1, 1], padding=b"SAME",
                     data_format=b"NHWC")
    x = np.zeros((1, 4, 4, 1), np.float32)
    x[0, 0, 0, 0], x[0, 3, 3, 0] = np.nan, np.inf
    for _ in range(2):
        m, a = fn(ctx, x), afn(actx, x)
        assert np.isnan(m[0, :2, :2]).all() and np.isnan(a[0, :2, :2]).all()
        assert m[0, 3, 3, 0] == np.inf and a[0, 3, 3, 0] == np.inf
        assert a[0, 3, 0, 0] == 0 and m[0, 3, 0, 0] == 0


@pytest.mark.parametrize("op", ["AvgPool", "MaxPool"])
def test_pools_reuse_their_padded_buffer_without_leaking_values(op):
    """Small padded inputs go into a padded buffer the prepared run keeps (border filled
    once): earlier outputs stay as they were, the border keeps the pad value however large or
    negative the inputs in between were, and NaN/inf inputs do not stay behind."""
    fn, ctx = node(op, ksize=[1, 3, 3, 1], strides=[1, 1, 1, 1], padding=b"SAME",
                   data_format=b"NHWC")
    shape = (2, 6, 6, 4)
    xs = [rng.standard_normal(shape).astype(np.float32) + 100,
          -rng.uniform(1, 2, shape).astype(np.float32),          # every tap negative
          np.full(shape, np.nan, np.float32),
          rng.standard_normal(shape).astype(np.float32)]
    xs[2][0, 0, 0, 0] = np.inf
    outs = [fn(ctx, x) for x in xs]
    kept = [fn(ctx, x) for x in xs]  # the second round runs the prepared closure
    for x, first, second in zip(xs, outs, kept):
        want = _pool_reference(x, op, (3, 3), (1, 1), "SAME")
        np.testing.assert_allclose(first, want, rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(second, first)
    assert (outs[1] < 0).all()  # a zero border would have won every edge window's max
    assert ("avg_run" if op == "AvgPool" else "max_run", shape, np.dtype("float32")) in ctx.cache
    assert not any(np.shares_memory(o, x) for o in outs + kept for x in xs)


def test_pools_called_from_two_threads_at_once_get_their_own_buffers():
    fn, ctx = node("AvgPool", ksize=[1, 3, 3, 1], strides=[1, 1, 1, 1], padding=b"SAME",
                   data_format=b"NHWC")
    xs = [rng.standard_normal((2, 12, 12, 8)).astype(np.float32) for _ in range(2)]
    wants = [_pool_reference(x, "AvgPool", (3, 3), (1, 1), "SAME") for x in xs]
    fn(ctx, xs[0])
    bad = []

    def work(i):
        for _ in range(300):
            got = fn(ctx, xs[i])
            if not np.allclose(got, wants[i], rtol=1e-5, atol=1e-6):
                bad.append(i)
    threads = [threading.Thread(target=work, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not bad


DEPTHWISE = [  # shapes, kernel, strides, padding: all stride 1 along W (the row strategy)
    ([(2, 12, 12, 6), (1, 13, 12, 6)], (5, 5), (1, 1), "SAME"),
    ([(2, 6, 6, 8)], (3, 3), (1, 1), "SAME"),
    ([(2, 14, 13, 3)], (3, 3), (2, 1), "VALID"),
    ([(1, 12, 12, 2)], (7, 7), (1, 1), "SAME"),
    # windows (OW = 3; OW = 6 over 320 channels) and W phases (strided, few channels):
    # prepared too
    ([(2, 3, 3, 176), (1, 3, 4, 176)], (3, 3), (1, 1), "SAME"),
    ([(2, 6, 6, 336)], (5, 5), (1, 1), "SAME"),
    ([(2, 12, 12, 8), (2, 11, 13, 8)], (3, 3), (2, 2), "SAME"),
]


@pytest.mark.parametrize("case", DEPTHWISE)
def test_prepared_depthwise_matches_the_definition(case):
    shapes, k, s, padding = case
    fn, ctx = node("DepthwiseConv2dNative", strides=[1, *s, 1], dilations=[1, 1, 1, 1],
                   padding=padding.encode(), data_format=b"NHWC")
    for shape in shapes * 2:
        x = rng.standard_normal(shape).astype(np.float32)
        w = rng.standard_normal((*k, shape[3], 1)).astype(np.float32)
        w.flags.writeable = False  # as a Const's value: the tiled filter is cached
        want = reference(x.astype(np.float64), w.astype(np.float64), s, (1, 1), padding,
                         depthwise=True)
        got = fn(ctx, x, w)
        assert got.dtype == np.float32 and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    assert sum(key[0] == "dw_run" for key in ctx.cache) == len(shapes)


@pytest.mark.parametrize("shape", [(2, 3, 3, 16), (2, 12, 12, 8), (1, 9, 9, 4)])
def test_prepared_depthwise_strategies_carry_nothing_from_call_to_call(shape):
    """Windows, rows and W phases prepared per node: an inf at the edge of one call, then
    ordinary inputs, each as the definition gives (inf where it has inf, no NaN)."""
    strides = (2, 2) if shape[1] == 9 else (1, 1)  # (the W phases at 9x9)
    fn, ctx = node("DepthwiseConv2dNative", strides=[1, *strides, 1], dilations=[1, 1, 1, 1],
                   padding=b"SAME", data_format=b"NHWC")
    w = rng.uniform(0.5, 1.5, (3, 3, shape[3], 1)).astype(np.float32)
    w.flags.writeable = False
    for k in range(4):
        x = rng.standard_normal(shape).astype(np.float32)
        if k == 1:
            x[:, 0, 0, :], x[:, -1, -1, :] = np.inf, -1e30
        want = reference(x.astype(np.float64), w.astype(np.float64), strides, (1, 1), "SAME",
                         depthwise=True)
        got = fn(ctx, x, w)
        assert np.array_equal(np.isinf(got), np.isinf(want)) and not np.isnan(got).any()
        finite = np.isfinite(want) & (np.abs(want) < 1e20)
        np.testing.assert_allclose(got[finite], want[finite], rtol=1e-4, atol=1e-4)
    assert sum(key[0] == "dw_run" for key in ctx.cache) == 1


def test_depthwise_a_new_filter_is_not_served_a_stale_tiling():
    """The prepared run keeps the tiled filter per node; a different filter array (a
    variable's new value) must be tiled again."""
    fn, ctx = node("DepthwiseConv2dNative", strides=[1, 1, 1, 1], dilations=[1, 1, 1, 1],
                   padding=b"SAME", data_format=b"NHWC")
    x = rng.standard_normal((2, 12, 12, 4)).astype(np.float32)
    for _ in range(3):
        w = rng.standard_normal((3, 3, 4, 1)).astype(np.float32)
        w.flags.writeable = False
        want = reference(x.astype(np.float64), w.astype(np.float64), (1, 1), (1, 1), "SAME",
                         depthwise=True)
        np.testing.assert_allclose(fn(ctx, x, w), want, rtol=1e-4, atol=1e-4)
