"""AvgPool as a compiled loop (tfg/kernels/pool_loops.py, numba through tfg/kernels/jit.py):
bit for bit pool_fast's numpy values on every geometry (SAME/VALID, strides, windows larger
than the map, 1x1 windows), float32 and float64, with NaN and inf; the node's first call on
numpy; MaxPool and other dtypes left to numpy; the plain-Python loop against the brute force."""
import itertools

import numpy as np
import pytest

from test_conv_strategies import _pool_reference
from tfg.kernels import jit, pool_fast, pool_loops
from tfg.kernels.conv_geom import Geom
from tfg.kernels.pool_ops import _avg_divisor

rng = np.random.default_rng(8)
needs_numba = pytest.mark.skipif(not jit.wanted(), reason="numba not installed (tfg[perf])")


def geom(shape, k, s, padding):
    return Geom({"padding": padding.encode(), "strides": [1, *s, 1]}, shape[1], shape[2], *k)


def numpy_pool(g, shape, dtype, monkeypatch):
    with monkeypatch.context() as m:
        m.setenv("TFG_JIT", "0")
        return pool_fast.prepared(g, shape, dtype, np.add, 0, _avg_divisor(g, shape, dtype))


CASES = [(shape, k, s, p) for shape, k, s, p in itertools.product(
    [(2, 12, 12, 44), (1, 3, 3, 176), (2, 7, 5, 3), (1, 1, 1, 8), (2, 9, 9, 1)],
    [(3, 3), (1, 1), (2, 3), (5, 5)], [(1, 1), (2, 2), (1, 2)], ["SAME", "VALID"])
    if p == "SAME" or (shape[1] >= k[0] and shape[2] >= k[1])]


def test_the_plain_python_loop_is_the_average():
    for shape, k, s, padding in CASES[::7]:
        x = rng.standard_normal(shape)
        g = geom(shape, k, s, padding)
        div = _avg_divisor(g, shape, x.dtype)
        counts = np.ones((g.oh, g.ow)) if div is None else div[0, :, :, 0]
        out = np.empty((shape[0], g.oh, g.ow, shape[3]))
        pool_loops.avg_pool_taps(x, out, counts, g.kh, g.kw, g.sh, g.sw, g.pt, g.pl)
        np.testing.assert_allclose(out, _pool_reference(x, "AvgPool", k, s, padding),
                                   rtol=1e-12, atol=1e-12)


@needs_numba
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_compiled_avg_pool_is_pool_fast_bit_for_bit(dtype, monkeypatch):
    for shape, k, s, padding in CASES:
        g = geom(shape, k, s, padding)
        numpy_run = numpy_pool(g, shape, dtype, monkeypatch)
        run = pool_fast.prepared(g, shape, dtype, np.add, 0, _avg_divisor(g, shape, dtype))
        for i in range(3):
            x = rng.standard_normal(shape).astype(dtype)
            if i == 2:
                x[0, 0, 0, 0], x[-1, -1, -1, -1] = np.nan, np.inf
            got, want = run(x), numpy_run(x)
            assert got.dtype == dtype and got.shape == want.shape
            np.testing.assert_array_equal(got, want)


@needs_numba
def test_the_first_call_is_numpy_then_the_loop(monkeypatch):
    calls = []
    real = jit.call
    monkeypatch.setattr(jit, "call", lambda *a: calls.append(a[0]) or real(*a))
    monkeypatch.setattr(jit, "_compiled", {})
    shape = (2, 6, 6, 8)
    g = geom(shape, (3, 3), (1, 1), "SAME")
    run = pool_fast.prepared(g, shape, np.float32, np.add, 0, _avg_divisor(g, shape, np.float32))
    x = rng.standard_normal(shape).astype(np.float32)
    run(x)
    assert calls == []
    run(x)
    assert len(calls) == 1


def test_max_pool_and_integers_stay_numpy():
    g = geom((2, 6, 6, 8), (3, 3), (1, 1), "SAME")
    assert pool_loops.compiled_run(g, np.int32, None, lambda x: x) is None
    run = pool_fast.prepared(g, (2, 6, 6, 8), np.float32, np.maximum, -np.inf, None)
    assert run.__qualname__.startswith("prepared")
    if jit.wanted():
        avg = pool_fast.prepared(g, (2, 6, 6, 8), np.float32, np.add, 0, None)
        assert avg.__qualname__.startswith("compiled_run")
