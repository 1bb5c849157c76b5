"""A compiled loop's side work on a second thread (tfg/executor/loop_overlap.py): which calls
go there, values bit for bit the one-thread run's, errors named, the decision per loop run."""
import numpy as np
import pytest

import tfg
from tfg import builder as tb
from tfg.executor import Session
from tfg.executor import loop_overlap as LO
from tfg.executor.loops import LoopProgram

STEPS, BATCH, HIDDEN = 6, 4, 8


def _rnn(steps=STEPS):
    """h_t = tanh(h_{t-1} W + x_t U), loss = sum(h_T), with tfg.grad's gradient loop."""
    rng = np.random.default_rng(0)
    g = tb.Graph()
    with g:
        x = tb.placeholder(tb.float32, [steps, BATCH, HIDDEN], name="x")
        w = tb.constant(rng.standard_normal((HIDDEN, HIDDEN)).astype(np.float32) * 0.3,
                        name="W")
        u = tb.constant(rng.standard_normal((HIDDEN, HIDDEN)).astype(np.float32) * 0.3,
                        name="U")
        n = tb.placeholder(tb.int32, [], name="n")

        def body(i, h):
            return i + 1, tb.tanh(tb.matmul(h, w) + tb.matmul(tb.gather(x, i), u))
        _, h = tb.while_loop(lambda i, h: i < n, body,
                             [tb.constant(0), tb.zeros([BATCH, HIDDEN])], name="rnn")
        tb.reduce_sum(h, name="loss")
    return tfg.grad(g.graph, "loss", "W,U")


FETCHES = ["loss:0", "grad/W:0", "grad/U:0"]


def _feeds(steps=STEPS, n=STEPS):
    x = np.random.default_rng(1).standard_normal((steps, BATCH, HIDDEN)).astype(np.float32)
    return {"x:0": x, "n:0": np.int32(n)}


def _programs(sess, feeds):
    seen = []
    real = LoopProgram.run

    def spy(self, *args):
        seen.append(self)
        return real(self, *args)
    LoopProgram.run = spy
    try:
        sess.run(FETCHES, feeds)
    finally:
        LoopProgram.run = real
    return seen


def test_the_gradient_loops_accumulations_are_the_side_work():
    sess = Session(_rnn(), blas_threads=1)
    progs = _programs(sess, _feeds())
    by_frame = {p.frame_name.decode(): p for p in progs}
    assert by_frame["rnn/while_context"].overlap is None  # every product feeds h
    ov = by_frame["gradients/rnn/while_context"].overlap
    assert ov is not None
    ops = sorted(m.op for call, it in ov.calls for m in getattr(call, "members", (it,)))
    assert ops == ["AddV2", "AddV2", "MatMul", "MatMul"]  # dW += h^T g, dU += x^T g
    assert len(ov.merges) == 2  # the two accumulators, nothing else the loop carries
    # the product on the main thread (dh = g W^T) is not handed over
    body_ops = [it.op for _, it in by_frame["gradients/rnn/while_context"].body_rest]
    assert "MatMul" in body_ops


@pytest.mark.parametrize("n", [STEPS, 1, 0])
def test_values_identical_with_and_without_overlap(monkeypatch, n):
    sess = Session(_rnn(), blas_threads=1)
    feeds = _feeds(n=n)
    monkeypatch.setenv(LO.ENV_VAR, "0")
    one = sess.run(FETCHES, feeds)
    monkeypatch.setenv(LO.ENV_VAR, "1")
    for _ in range(3):
        two = sess.run(FETCHES, feeds)
        for a, b in zip(one, two):
            assert a.dtype == b.dtype and np.array_equal(a, b)
    # and the gradient is right: against the dataflow executor (no compiled loops)
    plain = Session(_rnn(), blas_threads=1, fast_path=False).run(FETCHES, feeds)
    for a, b in zip(plain, two):
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6)


def test_an_error_in_the_side_work_names_its_node(monkeypatch):
    g = tb.Graph()
    with g:
        a = tb.placeholder(tb.float32, None, name="a")  # a shape the side's product refuses
        xs = tb.constant(np.ones((3, 2, 3), np.float32), name="xs")
        w = tb.constant(np.ones((3, 3), np.float32), name="w")

        def body(i, h, acc):
            # (a value of a fused chain would draw the product into the chain: x_i is not)
            return (i + 1, tb.tanh(tb.matmul(h, w)),
                    acc + tb.matmul(a, tb.gather(xs, i), transpose_a=True))
        tb.while_loop(lambda i, h, acc: i < 3, body,
                      [tb.constant(0), tb.constant(np.ones((2, 3), np.float32)),
                       tb.zeros([3, 3])], name="loop")
    sess = Session(g.graph, blas_threads=1)
    fetch = ["loop/Exit_1:0", "loop/Exit_2:0"]  # (h too: else the h chain is pruned)
    prog = _programs_for(sess, fetch, {"a:0": np.ones((2, 3), np.float32)})
    assert prog.overlap is not None
    errors = []
    for flag in ("0", "1"):
        monkeypatch.setenv(LO.ENV_VAR, flag)
        with pytest.raises(Exception) as e:
            sess.run(fetch, {"a:0": np.ones((5, 3), np.float32)})
        errors.append(str(e.value))
    assert errors[0] == errors[1] and "MatMul" in errors[1]


def _programs_for(sess, fetch, feeds):
    seen = []
    real = LoopProgram.run

    def spy(self, *args):
        seen.append(self)
        return real(self, *args)
    LoopProgram.run = spy
    try:
        sess.run(fetch, feeds)
    finally:
        LoopProgram.run = real
    return seen[0]


def test_decided_per_loop_run_from_contention(monkeypatch):
    monkeypatch.setenv(LO.ENV_VAR, "0")
    assert not LO.enabled()
    monkeypatch.setenv(LO.ENV_VAR, "1")
    assert LO.enabled()
    monkeypatch.delenv(LO.ENV_VAR)
    monkeypatch.setattr(LO, "usable_cores", lambda: 2)
    monkeypatch.setattr(LO, "current_blas_threads", lambda: 1)
    quiet, loaded = type("M", (), {"others": lambda self: 0.1})(), \
        type("M", (), {"others": lambda self: 1.5})()
    monkeypatch.setattr(LO, "meter", lambda: quiet)
    assert LO.enabled()
    monkeypatch.setattr(LO, "meter", lambda: loaded)  # another process holds a core
    assert not LO.enabled()
    monkeypatch.setattr(LO, "meter", lambda: quiet)
    monkeypatch.setattr(LO, "current_blas_threads", lambda: 2)  # BLAS has the second core
    assert not LO.enabled()
    monkeypatch.setattr(LO, "current_blas_threads", lambda: 1)
    monkeypatch.setattr(LO, "usable_cores", lambda: 1)
    assert not LO.enabled()
