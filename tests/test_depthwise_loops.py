"""Depthwise convolution as compiled loops (tfg/kernels/depthwise_loops.py, numba through
tfg/kernels/jit.py): against the convolution by definition in float64 on every geometry the
two loops take (per pixel and per row; strides, dilations, SAME/VALID/asymmetric padding,
1 to 100 channels), against the numpy strategies they replace, the node's first call on
numpy and the rest compiled, non-finite filters and inputs, TFG_JIT=0, and numba failing.
The plain-Python loops (the definition numba compiles) are checked without numba too."""
import itertools

import numpy as np
import pytest

from test_conv_fast_paths import reference
from tfg.graphdef.graph import Graph
from tfg.kernels import conv_depthwise, depthwise_loops, jit
from tfg.kernels.context import KernelContext
from tfg.kernels.conv_geom import Geom, padded
from tfg.kernels.registry import get_kernel

# tfg's own depthwise kernels, also where oneDNN is installed (tests/test_onednn.py).
pytestmark = pytest.mark.usefixtures("numpy_convs")

rng = np.random.default_rng(5)
needs_numba = pytest.mark.skipif(not jit.wanted(), reason="numba not installed (tfg[perf])")


def geom(h, w, k, s, d, padding):
    return Geom({"padding": padding.encode(), "strides": [1, *s, 1],
                 "dilations": [1, *d, 1]}, h, w, *k)


def plain_loop(x, w, g, rows):
    """One of the two loops run as plain Python (what numba compiles)."""
    out = np.empty((x.shape[0], g.oh, g.ow, x.shape[3]), x.dtype)
    if rows:
        depthwise_loops.depthwise_rows(x, conv_depthwise._tiled(w, g.ow), out, g.sh, g.dh,
                                       g.dw, g.pt, g.pl)
    else:
        depthwise_loops.depthwise_taps(x, np.ascontiguousarray(w[..., 0]), out, g.sh, g.sw,
                                       g.dh, g.dw, g.pt, g.pl)
    return out


@pytest.mark.parametrize("s, d", [((1, 1), (1, 1)), ((2, 2), (1, 1)), ((1, 2), (1, 1)),
                                  ((2, 1), (1, 1)), ((1, 1), (2, 1)), ((1, 1), (1, 2))])
@pytest.mark.parametrize("padding", ["SAME", "VALID"])
def test_the_plain_python_loops_are_the_definition(s, d, padding):
    x = rng.standard_normal((2, 7, 6, 3))
    w = rng.standard_normal((3, 3, 3, 1))
    g = geom(7, 6, (3, 3), s, d, padding)
    want = reference(x, w, s, d, padding, depthwise=True)
    for rows in ((False, True) if s[1] == 1 else (False,)):
        np.testing.assert_allclose(plain_loop(x, w, g, rows), want, rtol=1e-12, atol=1e-12)


GEOMETRIES = [(h, w, c, k, s, d, p) for h, w, c, k, s, d, p in itertools.product(
    (1, 3, 7), (1, 4, 9), (1, 5, 16, 100), (1, 3, 5), (1, 2), (1, 2), ("SAME", "VALID"))
    if not (s > 1 and d > 1) and (p == "SAME" or min(h, w) > (k - 1) * d)]


@needs_numba
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_compiled_loops_match_the_definition_on_every_geometry(dtype):
    tol = 2e-5 if dtype == np.float32 else 1e-12
    for h, wd, c, k, s, d, padding in GEOMETRIES:
        x = rng.standard_normal((2, h, wd, c)).astype(dtype)
        w = rng.standard_normal((k, k, c, 1)).astype(dtype)
        w.flags.writeable = c != 5  # a fed filter (nothing kept) for some
        g = geom(h, wd, (k, k), (s, s), (d, d), padding)
        run, cache = conv_depthwise.prepared(x.shape, w.shape, g), {}
        run(x, w, cache)
        second = run(x, w, cache)
        numpy_values = conv_depthwise._windows(padded(x, g), w, g)
        assert second.dtype == dtype and second.shape == numpy_values.shape
        np.testing.assert_allclose(second, numpy_values, rtol=tol, atol=tol)
        want = reference(x.astype(np.float64), w.astype(np.float64), (s, s), (d, d),
                         padding, depthwise=True)
        np.testing.assert_allclose(second, want, rtol=tol, atol=tol)


@needs_numba
@pytest.mark.parametrize("shape, strides", [((2, 12, 12, 8), (1, 1)), ((2, 6, 6, 200), (1, 1)),
                                            ((2, 9, 9, 8), (2, 2))])
def test_compiled_loops_keep_inf_and_nan_as_numpy_does(shape, strides):
    """An inf or NaN in the input flows through as the definition has it; a filter with one
    goes to numpy's strategy (its zero padding times inf is NaN at the edges)."""
    fn, ctx = node()
    ctx.attrs["strides"] = [1, *strides, 1]
    w = rng.uniform(0.5, 1.5, (3, 3, shape[3], 1)).astype(np.float32)
    w.flags.writeable = False
    x = rng.standard_normal(shape).astype(np.float32)
    fn(ctx, x, w)  # the numpy call
    x[:, 0, 0, :], x[:, -1, -1, 0], x[0, 2, 2, 1] = np.inf, -1e30, np.nan
    want = reference(x.astype(np.float64), w.astype(np.float64), strides, (1, 1), "SAME",
                     depthwise=True)
    got = fn(ctx, x, w)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    assert np.array_equal(np.isinf(got), np.isinf(want))
    bad = w.copy()
    bad[0, 0, 0, 0] = np.inf
    bad.flags.writeable = False
    x = rng.standard_normal(shape).astype(np.float32)
    g = geom(shape[1], shape[2], (3, 3), strides, (1, 1), "SAME")
    np.testing.assert_array_equal(fn(ctx, x, bad), conv_depthwise.numpy_prepared(
        shape, bad.shape, g)(x, bad, {}))


def node():
    return get_kernel("DepthwiseConv2dNative").fn, KernelContext(
        Graph().add_node("n", "DepthwiseConv2dNative"),
        {"strides": [1, 1, 1, 1], "dilations": [1, 1, 1, 1], "padding": b"SAME",
         "data_format": b"NHWC"})


@needs_numba
def test_a_node_runs_numpy_first_and_its_compiled_loop_after(monkeypatch):
    calls = []
    real = jit.call
    monkeypatch.setattr(jit, "call", lambda *a: calls.append(a[0]) or real(*a))
    monkeypatch.setattr(jit, "_compiled", {})  # a process that has compiled nothing yet
    fn, ctx = node()
    x = rng.standard_normal((2, 6, 6, 8)).astype(np.float32)
    w = rng.standard_normal((3, 3, 8, 1)).astype(np.float32)
    fn(ctx, x, w)
    assert calls == []
    fn(ctx, x, w)
    assert len(calls) == 1
    # another node, first call: the loop is compiled in this process already, so it runs
    fn2, ctx2 = node()
    fn2(ctx2, x, w)
    assert len(calls) == 2


def test_tfg_jit_0_keeps_the_numpy_strategies(monkeypatch):
    monkeypatch.setenv("TFG_JIT", "0")
    g = geom(6, 6, (3, 3), (1, 1), (1, 1), "SAME")
    assert depthwise_loops.compiled_run(g, 8, lambda *a: None, conv_depthwise._tiled) is None
    assert conv_depthwise.prepared((2, 6, 6, 8), (3, 3, 8, 1), g).__qualname__.startswith(
        "numpy_prepared")


@needs_numba
def test_numba_failing_turns_compiled_loops_off_with_one_line(monkeypatch, capsys):
    monkeypatch.setattr(jit, "_state", dict(jit._state))
    fn, ctx = node()
    x = rng.standard_normal((2, 6, 6, 8)).astype(np.float32)
    w = rng.standard_normal((3, 3, 8, 1)).astype(np.float32)
    fn(ctx, x, w)
    want = fn(ctx, x, w)
    loop = jit.function(depthwise_loops.depthwise_rows)
    assert not jit.call(loop, *"abcdefgh")  # numba cannot type strings here: off
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "compiled kernels off" in err
    assert jit.function(depthwise_loops.depthwise_rows) is None
    np.testing.assert_allclose(fn(ctx, x, w), want, rtol=1e-6, atol=1e-6)  # numpy again
