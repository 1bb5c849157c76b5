"""A gradient loop's deferred sums made in blocks (tfg/executor/block_sums.py), on the side
worker's compiled loop (tfg/kernels/block_sum_loop.py) while the loop runs or on the loop's
thread at its exit: the same bits either way, whatever the worker managed before it was
stopped; within rounding of the one-GEMM sums and of numpy's reference; a run that never
reaches its exit does not leave the worker busy."""
import numpy as np
import pytest

from test_loop_projection import B, F, H, _rnn_grad, _rnn_grad_reference
from tfg import builder as tb
from tfg.executor import Session
from tfg.executor import block_sums as BS
from tfg.executor import loop_accumulation as LA
from tfg.executor import loop_side as LS
from tfg.kernels import jit

needs_gemm = pytest.mark.skipif(BS.gemm_for(np.float32) is None,
                                reason="no OpenBLAS cblas gemm found in this process")


def _worker_ready():
    jit.mark_warm()
    return BS._worker_loop() is not None


needs_worker = pytest.mark.skipif(not (jit.wanted() and BS.gemm_for(np.float32) is not None),
                                  reason="the blocks' worker needs numba and OpenBLAS's gemm")


def test_a_block_is_whole_iterations_of_about_block_macs():
    assert BS.block_rows(32, [128, 128], 128) == 128  # the rnn's dW and dU: 4 iterations
    assert BS.block_rows(32, [2048], 2048) == 32  # one iteration already makes more
    assert BS.block_rows(0, [5], 5) == -(-BS.BLOCK_MACS // 25)  # (no rows yet: one a row)


@needs_gemm
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_the_gemm_makes_a_transposed_product_and_adds(dtype):
    gemm = BS.gemm_for(dtype)
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((7, 3)).astype(dtype), rng.standard_normal((7, 4)).astype(dtype)
    c = rng.standard_normal((3, 4)).astype(dtype)
    want = a.T @ b + c
    gemm.at_b(3, 4, 7, a.ctypes.data, b.ctypes.data, gemm.one, c.ctypes.data)
    np.testing.assert_allclose(c, want, rtol=1e-5 if dtype == np.float32 else 1e-12)
    assert BS.gemm_for(np.int32) is None


def _blocks(dtype, rows, widths=(3, 5), gw=4, block=6, seed=0):
    rng = np.random.default_rng(seed)
    abufs = [rng.standard_normal((rows, w)).astype(dtype) for w in widths]
    gbuf = rng.standard_normal((rows, gw)).astype(dtype)
    sums = [np.full((w, gw), np.nan, dtype) for w in widths]
    return BS.BlockSums(BS.gemm_for(dtype), block, sums), abufs, gbuf


@needs_gemm
@pytest.mark.parametrize("rows", [0, 5, 6, 23])
def test_blocks_made_here_sum_every_row(rows):
    bs, abufs, gbuf = _blocks(np.float64, max(rows, 1))
    bs.start(abufs, gbuf, rows, 0)  # (too few rows expected: no worker)
    assert bs.job is None
    for s, a in zip(bs.finish(rows), abufs):
        np.testing.assert_allclose(s, a[:rows].T @ gbuf[:rows], atol=1e-12)


@needs_worker
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("stop_at", [None, 0, 13, 40])
def test_the_workers_blocks_are_the_bits_made_here(dtype, stop_at, monkeypatch):
    """The worker takes blocks as ctl says rows are copied; stopped after `stop_at` rows
    (its buffers about to move) or let run to the end, the sums are the bits the loop's
    thread makes alone."""
    assert _worker_ready()
    monkeypatch.setenv("TFG_LOOP_SIDE", "1")
    rows = 47
    alone, abufs, gbuf = _blocks(dtype, rows)
    alone.start(abufs, gbuf, 0, 0)  # (too few rows expected: all made here)
    want = [s.copy() for s in alone.finish(rows)]
    bs, abufs2, gbuf2 = _blocks(dtype, rows)
    bs.start(abufs2, gbuf2, 0, rows)
    assert bs.job is not None
    for r in range(1, rows + 1):
        bs.copied(r)
        if r == stop_at:
            bs.stop()
            assert bs.job is None and bs.done <= r and bs.done % bs.block == 0
            break
    for got, w in zip(bs.finish(rows), want):
        np.testing.assert_array_equal(got, w)


@needs_worker
def test_a_run_that_never_ends_does_not_hold_the_worker(monkeypatch):
    """A job whose loop stopped (an error in its body) is stopped by the next run's first
    rows; the worker then takes new jobs."""
    assert _worker_ready()
    monkeypatch.setenv("TFG_LOOP_SIDE", "1")
    bs, abufs, gbuf = _blocks(np.float32, 30)
    bs.start(abufs, gbuf, 6, 30)
    assert bs.job is not None
    bs.stop()
    assert LS.submit(np.add, 1, 2).wait() == 3


def _sessions(graph, fetches, feeds, side, monkeypatch, runs=3):
    monkeypatch.setenv("TFG_LOOP_SIDE", side)
    jobs = []
    real = BS.BlockSums.start

    def start(self, *args):
        real(self, *args)
        jobs.append(self.job is not None)
    monkeypatch.setattr(BS.BlockSums, "start", start)
    sess = Session(graph)
    return [sess.run(fetches, feeds) for _ in range(runs)], jobs


@needs_worker
@pytest.mark.parametrize("n, dtype", [(0, tb.float64), (1, tb.float64), (9, tb.float64),
                                      (30, tb.float32)])
def test_a_gradient_loops_sums_are_the_same_bits_with_the_worker_or_without(n, dtype,
                                                                          monkeypatch):
    """The rnn gradient's dW and dU in blocks of two iterations: on the worker from the
    second run on (once the Session is warm and the last run's rows make two blocks or
    more), on the loop's thread with TFG_LOOP_SIDE=0: the same bits, every run; and within
    rounding of numpy's reference."""
    monkeypatch.setattr(BS, "BLOCK_MACS", 2 * B * (H + F) * H)
    graph, (w, u) = _rnn_grad(n, dtype)
    npd = np.float32 if dtype == tb.float32 else np.float64
    x = np.random.default_rng(n).standard_normal((max(n, 1), B, F)).astype(npd)
    fetches = ["grad/W", "grad/U"]
    side, jobs = _sessions(graph, fetches, {"x": x}, "1", monkeypatch)
    alone, none = _sessions(graph, fetches, {"x": x}, "0", monkeypatch)
    assert (any(jobs) if n >= 4 else not any(jobs)) and not any(none)
    for run_side, run_alone in zip(side, alone):
        for a, b in zip(run_side, run_alone):
            np.testing.assert_array_equal(a, b)
    if n:
        dw, du = _rnn_grad_reference(x.astype(np.float64), w, u, n)
        tol = 1e-4 if npd == np.float32 else 1e-10
        np.testing.assert_allclose(side[-1][0], dw, rtol=tol, atol=tol)
        np.testing.assert_allclose(side[-1][1], du, rtol=tol, atol=tol)


@needs_worker
def test_blocked_sums_within_the_memory_limit(monkeypatch):
    """Under a 512-byte limit the sums so far are made several times a run (new buffers
    start, each with its own blocks): the same bits with the worker allowed or not."""
    monkeypatch.setattr(BS, "BLOCK_MACS", 1)
    graph, _ = _rnn_grad(10)
    x = np.random.default_rng(3).standard_normal((10, B, F))
    fetches = ["grad/W", "grad/U"]
    monkeypatch.setenv("TFG_LOOP_SIDE", "1")
    side = [Session(graph, max_memory=512).run(fetches, {"x": x}) for _ in range(2)]
    monkeypatch.setenv("TFG_LOOP_SIDE", "0")
    alone = [Session(graph, max_memory=512).run(fetches, {"x": x}) for _ in range(2)]
    for run_side, run_alone in zip(side, alone):
        for a, b in zip(run_side, run_alone):
            np.testing.assert_array_equal(a, b)


@needs_worker
def test_the_states_agree_with_the_compiled_loops():
    from tfg.kernels import block_sum_loop
    assert (BS._RUNNING, BS._STOP) == (block_sum_loop.RUNNING, block_sum_loop.STOP)


def test_without_a_gemm_the_sums_are_one_product_each(monkeypatch):
    """Where block_sums finds no gemm (MKL, Accelerate), the exit makes one GEMM a sum."""
    monkeypatch.setattr(LA, "gemm_for", lambda dtype: None)
    graph, (w, u) = _rnn_grad(5)
    x = np.random.default_rng(5).standard_normal((5, B, F))
    got = Session(graph).run(["grad/W", "grad/U"], {"x": x})
    for g, r in zip(got, _rnn_grad_reference(x, w, u, 5)):
        np.testing.assert_allclose(g, r, rtol=1e-10, atol=1e-10)


@needs_worker
def test_a_worker_that_fails_leaves_its_blocks_to_the_loops_thread(monkeypatch, capsys):
    """A job that raises (numba failing to compile for new argument types) is not the
    graph's error: the blocks it did not make are made here, the same bits, and the worker
    stays off."""
    assert _worker_ready()
    monkeypatch.setenv("TFG_LOOP_SIDE", "1")
    rows = 30
    alone, abufs, gbuf = _blocks(np.float64, rows)
    alone.start(abufs, gbuf, 0, 0)
    want = [s.copy() for s in alone.finish(rows)]

    def broken(*args):
        raise TypeError("no matching definition")
    monkeypatch.setattr(BS, "_loop", [(broken, 0)])
    bs, abufs2, gbuf2 = _blocks(np.float64, rows)
    bs.start(abufs2, gbuf2, rows, rows)
    assert bs.job is not None
    for got, w in zip(bs.finish(rows), want):
        np.testing.assert_array_equal(got, w)
    assert BS._loop == [None] and "worker is off" in capsys.readouterr().err


@needs_worker
@pytest.mark.parametrize("case", ["tf1_multirnn_timemajor_grad_tfgrad", "tf2_lstm_tape_tfgrad",
                                  "tf1_scan_fold_grad"])
def test_real_gradient_loops_give_the_same_bits_with_the_worker(case, monkeypatch):
    """TensorFlow-made gradient loops (their own gradients, or `tfg grad` of their forward
    graph), blocks of one iteration each: the worker's sums equal the loop thread's bit for
    bit on every step, and TensorFlow's values within the case's tolerance."""
    import tfg
    from case_check import grad_name, load_meta
    from conftest import FIXTURES
    assert _worker_ready()
    monkeypatch.setattr(BS, "BLOCK_MACS", 1)
    folder = FIXTURES / "real_loops" / case
    meta = load_meta(folder)
    graph = tfg.load(str(folder / "graph.pb"))
    with np.load(folder / "feeds.npz") as f:
        feeds = {k: f[k] for k in f.files}
    if meta["kind"] == "grad":
        graph = tfg.grad(graph, ",".join(meta["ys"]), ",".join(meta["xs"]))
        fetches, keys = [grad_name(x) for x in meta["xs"]], meta["xs"]
    else:
        fetches = keys = meta["fetches"]
    with np.load(folder / "expected.npz") as f:
        expected = [f[k] for k in keys]
    side, jobs = _sessions(graph, fetches, feeds, "1", monkeypatch)
    alone, none = _sessions(graph, fetches, feeds, "0", monkeypatch)
    assert any(jobs) and not any(none)
    for run_side, run_alone in zip(side, alone):
        for a, b in zip(run_side, run_alone):
            np.testing.assert_array_equal(a, b)
    for got, want in zip(side[-1], expected):
        np.testing.assert_allclose(got, want, rtol=meta.get("rtol", 1e-4),
                                   atol=meta.get("atol", 1e-5))
