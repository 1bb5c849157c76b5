"""GPU device on CuPy: the same graphs give the CPU's values with --devices gpu:1.

Skips without CuPy or a visible GPU (CI has neither)."""
import numpy as np
import pytest

cupy = pytest.importorskip("cupy")

from tfg import builder as tb  # noqa: E402
from tfg.executor.devices import local_gpu_count  # noqa: E402
from tfg.executor.session import Session  # noqa: E402

pytestmark = [pytest.mark.gpu,
              pytest.mark.skipif(local_gpu_count() < 1, reason="no GPU visible to CuPy")]


def _mlp_graph():
    with tb.Graph() as g:
        x = tb.placeholder(tb.float32, [None, 8], name="x")
        w = tb.constant(np.linspace(-1, 1, 32, dtype=np.float32).reshape(8, 4), name="w")
        b = tb.constant(np.arange(4, dtype=np.float32), name="b")
        y = tb.relu(tb.bias_add(tb.matmul(x, w), b), name="y")
        tb.reduce_sum(y, axis=1, name="s")
        tb.shape(y, name="shp")
    return g


def _run(graph, devices, fetches, feeds):
    return Session(graph.graph, devices=devices).run(fetches, feeds=feeds)


def test_mlp_matches_cpu_and_returns_numpy():
    g = _mlp_graph()
    feeds = {"x:0": np.random.default_rng(0).standard_normal((5, 8)).astype(np.float32)}
    want = _run(g, "cpu:1", ["y:0", "s:0", "shp:0"], feeds)
    got = _run(g, "gpu:1", ["y:0", "s:0", "shp:0"], feeds)
    for w, v in zip(want, got):
        assert type(v) is np.ndarray
        np.testing.assert_allclose(v, w, rtol=1e-5, atol=1e-6)


def test_cpu_and_gpu_partitions_exchange_values():
    g = _mlp_graph()
    feeds = {"x:0": np.ones((2, 8), np.float32)}
    got = _run(g, "cpu:1,gpu:1", ["s:0"], feeds)
    want = _run(g, "cpu:1", ["s:0"], feeds)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5)


def test_wrapped_kernel_runs_on_device():
    from tfg.kernels.gpu.wrap import device_kernel, to_output

    def tanh(ctx, x):
        return np.tanh(np.asarray(x))

    class Ctx:
        cache = {}
    out = to_output(device_kernel(tanh)(Ctx(), np.ones(3, np.float32)))
    assert type(out) is cupy.ndarray
    assert not Ctx.cache.get("_gpu_on_host")
