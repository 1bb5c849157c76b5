"""The worker thread of tfg/executor/loop_side.py: a gradient loop's deferred sums (dW, dU)
made side by side, and a large input projection's later blocks made while the loop's first
iterations run, give the bits of the one-thread run; errors reach the waiting thread;
TFG_LOOP_SIDE forces the choice."""
import os
import threading

import numpy as np
import pytest

from test_loop_projection import B, F, H, _reference, _rnn, _rnn_grad
from tfg import builder as tb
from tfg.executor import Session
from tfg.executor import loop_accumulation as LA
from tfg.executor import loop_side as LS


def test_a_job_returns_its_result_on_another_thread():
    seen = []

    def where(x):
        seen.append(threading.current_thread().name)
        return x + 1
    job = LS.submit(where, np.float64(2))
    assert job.wait() == 3 and job.wait() == 3  # (a second wait returns at once)
    assert seen == ["tfg-loop-side"]


def test_a_jobs_error_is_raised_where_it_is_awaited():
    job = LS.submit(np.matmul, np.ones((2, 3)), np.ones((2, 3)))
    with pytest.raises(ValueError, match="matmul"):
        job.wait()
    assert LS.submit(np.add, 1, 2).wait() == 3  # (the worker goes on)


@pytest.mark.parametrize("value, want", [("0", False), ("1", True)])
def test_the_environment_forces_the_choice(value, want, monkeypatch):
    monkeypatch.setenv("TFG_LOOP_SIDE", value)
    assert LS.side_free() is want


class _Meter:
    def __init__(self, others):
        self.value = others

    def others(self):
        return self.value


@pytest.mark.parametrize("cores, blas, others, want", [
    (2, 1, 0.0, True),    # a quiet machine, BLAS on one thread (the GEMM floor's steps)
    (1, 1, 0.0, False),   # one core
    (2, 2, 0.0, False),   # OpenBLAS's own threads would contend with the worker's call
    (2, None, 0.0, False),  # BLAS's threads unknown
    (2, 1, 0.9, False),   # another process keeps a core busy
    (4, 1, 1.0, True),    # ... of four
])
def test_by_default_only_where_a_core_is_free(cores, blas, others, want, monkeypatch):
    monkeypatch.delenv("TFG_LOOP_SIDE", raising=False)
    monkeypatch.setattr(LS, "usable_cores", lambda: cores)
    monkeypatch.setattr(LS, "current_blas_threads", lambda: blas)
    monkeypatch.setattr(LS, "meter", lambda: _Meter(others))
    assert LS.side_free() is want


def _run(graph, fetches, feeds, side, monkeypatch, **kw):
    monkeypatch.setenv("TFG_LOOP_SIDE", side)
    sent = []
    real = LS.submit

    def counting(fn, *args):
        sent.append(fn)
        return real(fn, *args)
    monkeypatch.setattr(LA, "submit", counting)
    monkeypatch.setattr(LS, "submit", counting)
    sess = Session(graph, **kw)
    return [sess.run(fetches, feeds) for _ in range(2)], sent


@pytest.mark.parametrize("n, dtype", [(0, tb.float64), (1, tb.float64), (7, tb.float64),
                                      (30, tb.float32)])
def test_deferred_sums_on_the_worker_are_the_same_bits(n, dtype, monkeypatch):
    """Where no BLAS gemm is found for blocks (block_sums.py; tests/test_block_sums.py),
    dU's sum on the worker while dW's is made here: the same values, bit for bit, as
    both on this thread (each run, and a second run of the same Session); the worker is
    used once a run where the loop ran (a zero-iteration loop has no sums to make). (These
    sums are small: the size floor is lowered for them.)"""
    monkeypatch.setattr(LA, "CHUNKED_MACS", 0)
    monkeypatch.setattr(LA, "gemm_for", lambda dtype: None)
    graph, _ = _rnn_grad(n, dtype)
    npd = np.float32 if dtype == tb.float32 else np.float64
    x = np.random.default_rng(n).standard_normal((max(n, 1), B, F)).astype(npd)
    fetches = ["loss", "grad/W", "grad/U"]
    side, sent = _run(graph, fetches, {"x": x}, "1", monkeypatch)
    alone, none = _run(graph, fetches, {"x": x}, "0", monkeypatch)
    assert len(sent) == (2 if n else 0) and not none
    for run_side, run_alone in zip(side, alone):
        for a, b in zip(run_side, run_alone):
            assert a.dtype == b.dtype
            np.testing.assert_array_equal(a, b)


def test_small_sums_stay_on_the_loops_thread(monkeypatch):
    """Sums under the size floor (here 7 x 4 rows of 3 and 5 columns): no wake-up."""
    graph, _ = _rnn_grad(7)
    x = np.random.default_rng(7).standard_normal((7, B, F))
    _, sent = _run(graph, ["grad/W", "grad/U"], {"x": x}, "1", monkeypatch)
    assert sent == []


def test_sums_made_within_the_memory_limit_on_the_worker(monkeypatch):
    """Under a 512-byte limit the sums so far are made several times a run (new buffers
    start): each time side by side, the same bits as on one thread (one GEMM a sum, where
    no BLAS gemm is found for blocks)."""
    monkeypatch.setattr(LA, "CHUNKED_MACS", 0)
    monkeypatch.setattr(LA, "gemm_for", lambda dtype: None)
    graph, _ = _rnn_grad(10)
    x = np.random.default_rng(3).standard_normal((10, B, F))
    fetches = ["grad/W", "grad/U"]
    side, sent = _run(graph, fetches, {"x": x}, "1", monkeypatch, max_memory=512)
    alone, _ = _run(graph, fetches, {"x": x}, "0", monkeypatch, max_memory=512)
    assert len(sent) > 2
    for run_side, run_alone in zip(side, alone):
        for a, b in zip(run_side, run_alone):
            np.testing.assert_array_equal(a, b)


def test_the_worker_restarts_in_a_forked_child():
    if not hasattr(os, "fork"):
        pytest.skip("no fork")
    assert LS.submit(np.add, 1, 1).wait() == 2
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: the parent's worker thread does not exist here
        try:
            ok = LS.submit(np.add, 2, 3).wait() == 5
        except BaseException:  # noqa: BLE001
            ok = False
        os.write(w, b"1" if ok else b"0")
        os._exit(0)
    os.close(w)
    got = os.read(r, 1)
    os.waitpid(pid, 0)
    os.close(r)
    assert got == b"1"


def test_block_cuts():
    assert LS.block_cuts(50) == [0, 2, 6, 18, 50]
    assert LS.block_cuts(8) == [0, 2, 6, 8]


def _big_feeds(n, t=40, batch=64, f=400, npd=np.float64):
    """t * batch * f * H = 5.1M multiply-adds: over CHUNKED_MACS, so made in blocks."""
    rng = np.random.default_rng(n)
    return {"x": rng.standard_normal((t, batch, f)).astype(npd), "n": np.int32(n),
            "h0": rng.standard_normal((batch, H)).astype(npd)}


@pytest.mark.parametrize("read", ["list", "gather"])
@pytest.mark.parametrize("n", [1, 5, 40])
def test_a_large_projection_in_blocks_on_the_worker_is_the_same_bits(read, n, monkeypatch):
    """Its later blocks on the worker while the first iterations run: the bits of the same
    blocks made on this thread, each run (n = 1 and 5: the loop ends before the worker's
    blocks are read); the values of the per-iteration products and numpy's within
    rounding."""
    assert 40 * 64 * 400 * H >= LS.CHUNKED_MACS
    graph, weights = _rnn(read, True, f=400)
    feeds = _big_feeds(n)
    side, sent = _run(graph, "h", feeds, "1", monkeypatch)
    alone, none = _run(graph, "h", feeds, "0", monkeypatch)
    assert [fn.__name__ for fn in sent] == ["_later_blocks"] * 2 and not none
    for a, b in zip(side, alone):
        np.testing.assert_array_equal(a, b)
    monkeypatch.setenv("TFG_LOOP_PROJECT", "0")
    plain = Session(graph).run("h", feeds)
    np.testing.assert_allclose(side[0], plain, rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(side[0], _reference(feeds, weights), rtol=1e-10, atol=1e-12)


def test_a_blocks_error_is_the_projected_nodes(monkeypatch):
    """The worker's block fails (here: a MemoryError put in its GEMM): the iteration that
    waits for it fails with that error, named by the projected MatMul's node."""
    from tfg.errors import TfgRuntimeError

    real = LS._block
    calls = []

    def failing(x, w, bias, flat, a, c):
        calls.append(a)
        if a:  # (the worker's blocks; the first is made on the calling thread)
            raise MemoryError("no memory for the block")
        return real(x, w, bias, flat, a, c)
    monkeypatch.setattr(LS, "_block", failing)
    graph, _ = _rnn("gather", False, f=400)
    monkeypatch.setenv("TFG_LOOP_SIDE", "1")
    with pytest.raises(TfgRuntimeError, match="proj.*no memory for the block"):
        Session(graph).run("h", _big_feeds(40))
    assert calls and calls[0] == 0
