"""The adaptive BLAS setting's size floor (tfg/executor/blas_floor.py): a step whose GEMMs are
all small runs on one BLAS thread; others keep the adaptive count; explicit counts are kept."""
import numpy as np
import pytest

from tfg import builder as tb
from tfg.executor import Session, blas
from tfg.executor import blas_floor
from tfg.executor.blas_floor import FLOOR_MACS, GemmFloor, gemm_macs
from tfg.graphdef.infer import infer
from tfg.graphdef.names import parse_tensor


@pytest.fixture(autouse=True)
def quiet(monkeypatch):
    """A quiet machine: adaptive would give BLAS two threads (the floor's case)."""
    monkeypatch.setattr(blas_floor, "adaptive_count", lambda: 2)


def _mm_graph(rows, k, n, transpose_a=False, loop=False):
    """x [rows or None, k] @ w [k, n]; with `loop`, the product inside a 3-step while loop."""
    g = tb.Graph()
    with g:
        x = tb.placeholder(tb.float32, [rows, k] if not transpose_a else [k, rows], name="x")
        w = tb.constant(np.full((k, n), 0.01, np.float32), name="w")
        if loop:
            _, y = tb.while_loop(lambda i, h: i < 3,
                                 lambda i, h: (i + 1, tb.tanh(tb.matmul(h, w))),
                                 [tb.constant(0), x])
            tb.identity(y, name="y")
        else:
            tb.matmul(x, w, transpose_a=transpose_a, name="y")
    return g.graph


def _floor(graph):
    return GemmFloor(graph, [n.name for n in graph], [parse_tensor("x:0")])


def test_gemm_macs_from_inferred_shapes():
    g = _mm_graph(32, 128, 64)
    assert gemm_macs(g["y"], infer(g)) == 32 * 128 * 64
    g = _mm_graph(32, 128, 64, transpose_a=True)  # x [128, 32], transposed: K = 128
    assert gemm_macs(g["y"], infer(g)) == 32 * 128 * 64
    g = _mm_graph(None, 128, 64)
    assert gemm_macs(g["y"], infer(g)) is None  # the batch is not known
    assert gemm_macs(g["y"], infer(g, shapes={"x:0": (8, 128)})) == 8 * 128 * 64


def test_conv_macs():
    g = tb.Graph()
    with g:
        x = tb.placeholder(tb.float32, [2, 16, 16, 8], name="x")
        f = tb.constant(np.zeros((3, 3, 8, 4), np.float32))
        tb.conv2d(x, f, padding="SAME", name="y")
    assert gemm_macs(g.graph["y"], infer(g.graph)) == 2 * 16 * 16 * 4 * (3 * 3 * 8)


def _decided(f, limit, feeds):
    """The limit of a signature's second step, where the floor is decided."""
    f.limit(limit, feeds)
    return f.limit(limit, feeds)


def test_a_signature_s_first_step_keeps_adaptive_and_infers_nothing(monkeypatch):
    monkeypatch.delenv("TFG_GEMM_FLOOR", raising=False)
    f = _floor(_mm_graph(32, 128, 128))
    x = np.zeros((32, 128), np.float32)
    assert f.limit(blas.ADAPTIVE, [x]) == blas.ADAPTIVE and not f.small  # a one-shot run
    assert f.limit(blas.ADAPTIVE, [x]) == 1 and len(f.small) == 1


def test_small_gemms_run_on_one_thread_large_ones_adaptive(monkeypatch):
    monkeypatch.delenv("TFG_GEMM_FLOOR", raising=False)
    small = _floor(_mm_graph(32, 128, 128))  # the rnn row's products: 0.5M multiply-adds
    x = np.zeros((32, 128), np.float32)
    assert _decided(small, blas.ADAPTIVE, [x]) == 1
    assert _decided(small, 2, [x]) == 2  # an explicit count is the user's
    assert _decided(small, None, [x]) is None  # BLAS left alone (a BLAS variable was set)
    large = _floor(_mm_graph(128, 784, 1024))  # the mlp row's first layer: 103M
    assert _decided(large, blas.ADAPTIVE, [np.zeros((128, 784), np.float32)]) == blas.ADAPTIVE


def test_the_decision_follows_the_fed_shapes(monkeypatch):
    monkeypatch.delenv("TFG_GEMM_FLOOR", raising=False)
    f = _floor(_mm_graph(None, 256, 256))
    assert _decided(f, blas.ADAPTIVE, [np.zeros((8, 256), np.float32)]) == 1
    rows = FLOOR_MACS // (256 * 256)  # exactly at the floor: large
    assert _decided(f, blas.ADAPTIVE, [np.zeros((rows, 256), np.float32)]) == blas.ADAPTIVE
    assert _decided(f, blas.ADAPTIVE, [np.zeros((rows - 1, 256), np.float32)]) == 1


def test_floor_inside_a_loop_and_env_off(monkeypatch):
    monkeypatch.delenv("TFG_GEMM_FLOOR", raising=False)
    f = _floor(_mm_graph(32, 128, 128, loop=True))
    x = np.zeros((32, 128), np.float32)
    assert _decided(f, blas.ADAPTIVE, [x]) == 1
    monkeypatch.setenv("TFG_GEMM_FLOOR", "0")
    assert _decided(f, blas.ADAPTIVE, [x]) == blas.ADAPTIVE
    monkeypatch.setenv("TFG_GEMM_FLOOR", str(1 << 10))
    assert _decided(f, blas.ADAPTIVE, [x]) == blas.ADAPTIVE


def test_no_blas_op_and_unknown_shapes_keep_adaptive():
    g = tb.Graph()
    with g:
        tb.tanh(tb.placeholder(tb.float32, [4], name="x"), name="y")
    assert _decided(_floor(g.graph), blas.ADAPTIVE, [np.zeros(4, np.float32)]) == blas.ADAPTIVE


def test_not_decided_on_one_core_but_decided_on_a_busy_machine(monkeypatch):
    """One usable core: nothing gives a step two threads, so nothing is inferred. A busy
    machine of two cores (the meter gives one thread) is decided: the trial there may give
    two threads (blas_trial.py), which a step of small products should not get."""
    monkeypatch.delenv("TFG_GEMM_FLOOR", raising=False)
    f = _floor(_mm_graph(32, 128, 128))
    x = np.zeros((32, 128), np.float32)
    monkeypatch.setattr(blas_floor, "adaptive_count", lambda: 1)
    monkeypatch.setattr(blas_floor, "usable_cores", lambda: 1)
    assert _decided(f, blas.ADAPTIVE, [x]) == blas.ADAPTIVE and not f.small  # nothing inferred
    monkeypatch.setattr(blas_floor, "usable_cores", lambda: 2)  # a loaded 2-core machine
    assert _decided(f, blas.ADAPTIVE, [x]) == 1 and len(f.small) == 1


def test_large_graphs_are_not_inferred(monkeypatch):
    monkeypatch.setattr(blas_floor, "_MAX_NODES", 2)  # (the graph has 3)
    f = _floor(_mm_graph(32, 128, 128))
    assert _decided(f, blas.ADAPTIVE, [np.zeros((32, 128), np.float32)]) == blas.ADAPTIVE


@pytest.mark.parametrize("rows,want", [(32, 1), (2048, blas.ADAPTIVE)])
def test_session_applies_the_floor(monkeypatch, rows, want):
    for k in (blas.ENV_VAR, "TFG_GEMM_FLOOR") + blas._USER_ENV:
        monkeypatch.delenv(k, raising=False)
    seen = []
    real = blas.blas_limit

    def spy(limit):
        seen.append(limit)
        return real(limit)
    monkeypatch.setattr(blas, "blas_limit", spy)
    sess = Session(_mm_graph(None, 128, 128))
    x = np.ones((rows, 128), np.float32)
    for _ in range(2):
        y = sess.run("y", {"x": x})
        np.testing.assert_allclose(y, x @ np.full((128, 128), 0.01, np.float32), rtol=1e-6)
    assert seen == [blas.ADAPTIVE, want]  # decided on the signature's second step


def test_a_failing_inference_keeps_adaptive(monkeypatch):
    def boom(*a, **k):
        raise RuntimeError("no shapes")
    monkeypatch.setattr(blas_floor, "infer", boom)
    f = _floor(_mm_graph(32, 128, 128))
    assert _decided(f, blas.ADAPTIVE, [np.zeros((32, 128), np.float32)]) == blas.ADAPTIVE


@pytest.mark.parametrize("onednn_on", [True, False])
def test_a_small_convolution_on_onednn_keeps_adaptive(onednn_on, monkeypatch):
    """oneDNN's convolutions run on its own threads, whose second one pays even for small
    ones: the OpenBLAS floor does not apply to a step that holds one."""
    monkeypatch.delenv("TFG_GEMM_FLOOR", raising=False)
    monkeypatch.setattr(blas_floor.onednn, "wanted", lambda: onednn_on)
    g = tb.Graph()
    with g:
        x = tb.placeholder(tb.float32, [2, 16, 16, 8], name="x")
        tb.conv2d(x, tb.constant(np.zeros((3, 3, 8, 4), np.float32)), padding="SAME", name="y")
    x = np.zeros((2, 16, 16, 8), np.float32)
    assert _decided(_floor(g.graph), blas.ADAPTIVE, [x]) == (blas.ADAPTIVE if onednn_on else 1)
