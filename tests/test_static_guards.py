"""The memory guard decided once per feed signature (tfg/executor/static_guards.py): after a
signature's second step its static calls run without the per-call check, with the same values;
a tensor over the limit is still refused before allocating, with the same message, whether
its size comes from a feed's shape, a fed integer or a data-dependent op whose inputs keep
one signature."""
import numpy as np
import pytest

from tfg import builder as tb
from tfg.executor import Session
from tfg.errors import TfgRuntimeError
from tfg.graphdef.builder.core import make
from tfg.schemas.dtypes import DType


def _guards(sess):
    prepared = list(sess.backend._cache.values())[-1]
    return prepared.schedules[0].guards


def _unguarded(guards, sig_index=-1):
    calls = list(guards._by_sig.values())[sig_index]
    return sum(a is not b for a, b in zip(calls, guards.program.calls))


def _mlp():
    with tb.Graph() as b:
        x = tb.placeholder(tb.float32, [None, 4], name="x")
        y = tb.matmul(x, tb.constant(np.arange(12, dtype=np.float32).reshape(4, 3)))
        z = tb.reshape(y, tb.stack([tb.shape(y)[0] * 3]))
        tb.identity(tb.concat([z, z * 2.0], 0), name="out")
    return b.graph


def test_static_calls_run_unguarded_after_a_signature_s_second_step():
    sess = Session(_mlp(), max_memory="1M")
    plain = Session(_mlp(), max_memory="1M", fast_path=False)
    for i, n in enumerate((2, 2, 5, 2, 5)):
        x = np.arange(n * 4, dtype=np.float32).reshape(n, 4)
        np.testing.assert_array_equal(sess.run("out", {"x": x}), plain.run("out", {"x": x}))
        if i == 0:  # a one-shot run infers nothing
            assert _guards(sess)._by_sig == {}
    guards = _guards(sess)
    assert len(guards._by_sig) == 2  # two signatures, each verified once
    assert _unguarded(guards) >= 4  # MatMul, Reshape, ConcatV2, Mul, ...


def test_a_larger_signature_is_refused_every_time_and_the_small_one_still_runs():
    sess = Session(_mlp(), max_memory=4096)
    small, big = np.ones((8, 4), np.float32), np.ones((200, 4), np.float32)
    sess.run("out", {"x": small})
    sess.run("out", {"x": small})
    for _ in range(2):  # not remembered: the same clear error each time
        with pytest.raises(TfgRuntimeError, match=r"\(ConcatV2\) failed: would allocate "
                                                  r"4.69 KiB .* over the memory limit of "
                                                  r"4.00 KiB"):
            sess.run("out", {"x": big})
    assert sess.run("out", {"x": small}).shape == (48,)


def test_a_fed_integer_is_part_of_the_signature():
    with tb.Graph() as b:
        dims = tb.placeholder(tb.int32, [2], name="dims")
        tb.identity(tb.fill(dims, 1.0) * 2.0, name="out")
    sess = Session(b.graph, max_memory="1M")
    for _ in range(2):
        assert sess.run("out", {"dims": [3, 4]}).shape == (3, 4)
    assert _unguarded(_guards(sess)) >= 1  # the Fill of [3, 4]
    with pytest.raises(TfgRuntimeError, match=r"\(Fill\) failed: would allocate 4.00 GiB"):
        sess.run("out", {"dims": [1 << 15, 1 << 15]})


def test_a_size_from_values_stays_checked_under_one_signature():
    """Where's output shape depends on the values, not the feed's shape: what comes after
    it keeps its check, so the third step (same signature, other values) is refused."""
    with tb.Graph() as b:
        x = tb.placeholder(tb.float32, [64], name="x")
        where = make("Where", [x > 0.0], {"T": DType.BOOL}, "where").outputs[0]
        k = tb.shape(where)[0]
        tb.identity(tb.fill(tb.stack([k * 4096, 4096]), 1.0), name="out")
    sess = Session(b.graph, max_memory="64M")
    for _ in range(2):
        assert sess.run("out", {"x": np.zeros(64, np.float32)}).shape == (0, 4096)
    with pytest.raises(TfgRuntimeError, match=r"\(Fill\) failed: would allocate 4.00 GiB"):
        sess.run("out", {"x": np.ones(64, np.float32)})


def test_state_keeps_its_check():
    """A variable's shape is not the signature's: a read of it stays checked."""
    with tb.Graph() as b:
        v = tb.Variable(np.zeros(4, np.float32), name="v")
        tb.identity(tb.tile(v, tb.constant([2])), name="out")
        tb.global_variables_initializer()
    sess = Session(b.graph, max_memory="1M")
    sess.run(None, targets=["init"])
    for _ in range(2):
        assert sess.run("out").shape == (8,)
    guards = _guards(sess)
    calls = list(guards._by_sig.values())[-1]
    kept = {it.op for it, a, b in zip(guards.program.items, calls, guards.program.calls)
            if a is b}
    assert "Tile" in kept


def test_the_switch_keeps_the_per_call_check(monkeypatch):
    monkeypatch.setenv("TFG_STATIC_GUARDS", "0")
    sess = Session(_mlp(), max_memory="1M")
    sess.run("out", {"x": np.ones((2, 4), np.float32)})
    assert _guards(sess) is None


def test_a_static_graph_over_the_limit_is_refused_on_every_step():
    """Every shape known from the feed's signature and the Consts: the first step runs
    guarded, the second verifies (still guarded), and as the verdict is a refusal nothing is
    remembered: each step refuses, naming the node, and a smaller fetch still runs."""
    with tb.Graph() as b:
        x = tb.placeholder(tb.float32, [4, 4], name="x")
        tb.identity(x * 2.0, name="small")
        tb.identity(tb.tile(x, tb.constant(np.array([1 << 14, 1 << 14], np.int32))),
                    name="big")
    sess = Session(b.graph, max_memory="64M")
    feed = {"x": np.ones((4, 4), np.float32)}
    for _ in range(3):
        with pytest.raises(TfgRuntimeError, match=r"node '\S*' \(Tile\) failed: would "
                                                  r"allocate 16.00 GiB .* over the memory "
                                                  r"limit of 64.00 MiB"):
            sess.run("big", feed)
    assert _guards(sess)._by_sig == {}
    for _ in range(3):
        np.testing.assert_array_equal(sess.run("small", feed), np.full((4, 4), 2.0))
