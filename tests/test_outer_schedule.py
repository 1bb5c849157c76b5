"""The root frame around compiled loops as one fast-path schedule (tfg/executor/outer.py):
the same values as the dataflow executor on every executor fixture and on Keras' LSTM/GRU
SavedModels, no dataflow dispatch left in a step where every loop is compiled, Consts and
Enters costing no call, control edges and stateful order kept, errors naming the node, and
the dataflow executor wherever something outside the loops needs it."""
import numpy as np
import pytest

from tfg import builder as tb
from tfg.errors import TfgRuntimeError
from tfg.executor import Session
from tfg.executor import executor as E
from tfg.executor.outer import LOOP_OP
from tfg.executor.restore import restore_variables
from tfg.graphdef import io, savedmodel

from conftest import FIXTURES
from test_executor import CASES, load_case
from test_executor_loops import reshape_loop_graph

LOOP_CASES = sorted(p.name for p in CASES.iterdir() if p.is_dir())
SAVED = FIXTURES / "savedmodel"


def _schedule(sess):
    prepared = list(sess.backend._cache.values())[-1]  # the last request prepared
    return prepared.schedules[0]


def _steps(graph, meta, feeds):
    sess = Session(graph)
    if meta["init"]:
        sess.run(None, feeds, targets=meta["init"])
    got = None
    for _ in range(meta["steps"]):
        got = sess.run(meta["fetches"], feeds, targets=meta["targets"])
    return sess, got


@pytest.mark.parametrize("case", LOOP_CASES)
def test_outer_schedule_agrees_with_the_dataflow_executor(case, monkeypatch):
    g, meta, feeds, _ = load_case(case)
    if meta.get("error"):
        pytest.skip("an error case")
    _, outer = _steps(g, meta, feeds)
    monkeypatch.setenv("TFG_OUTER_SCHEDULE", "0")
    _, dataflow = _steps(g, meta, feeds)
    for name, a, b in zip(meta["fetches"], outer, dataflow):
        np.testing.assert_array_equal(a, b, err_msg=f"{case}: {name}")


def _counting(monkeypatch):
    counts = []
    orig = E.DataflowRun._dispatch

    def dispatch(self, tn):
        counts.append(tn[0].op)
        return orig(self, tn)
    monkeypatch.setattr(E.DataflowRun, "_dispatch", dispatch)
    return counts


def _counter_loop():
    with tb.Graph() as b:
        n = tb.placeholder(tb.int32, [], name="n")
        c = tb.constant(2.0, name="c")
        _, x = tb.while_loop(lambda i, x: i < n, lambda i, x: (i + 1, x * c),
                             [tb.constant(0), tb.constant(1.0)], name="loop")
        tb.identity(x * c, name="out")
    return b.graph


@pytest.mark.parametrize("n,expected", [(0, 2.0), (1, 4.0), (10, 2048.0)])
def test_a_loop_and_its_surroundings_run_without_dataflow_dispatches(n, expected, monkeypatch):
    sess = Session(_counter_loop())
    counts = _counting(monkeypatch)
    assert float(sess.run("out", {"n": n})) == expected
    assert counts == []  # nothing went through the ready queue
    sched = _schedule(sess)
    assert sched.outer
    # The Consts are in the template, the Enters are the loop call's inputs, the Identity
    # shares its input's slot: the loop and the Mul after it are the only calls.
    assert sorted(ctx.op for _, ctx in sched.fast.calls) == ["Mul", LOOP_OP]
    assert {item.op for _, item in sched.fast.consts} == {"Const"}


def test_traced_steps_keep_the_dataflow_executor(monkeypatch):
    sess = Session(_counter_loop())
    counts = _counting(monkeypatch)
    sess.run("out", {"n": 3}, trace=True)
    assert "Enter" in counts and "Mul" in counts
    assert len([e for e in sess.last_trace.events if e[1] == "Mul"]) == 4  # 3 + the one after


def test_a_cond_outside_the_loops_keeps_the_dataflow_executor(monkeypatch):
    g, meta, feeds, expected = load_case("while_in_cond_untaken")
    sess, got = _steps(g, meta, feeds)
    assert _schedule(sess) is None
    for name, v in zip(meta["fetches"], got):
        np.testing.assert_allclose(v, expected[name], rtol=1e-6)


def test_sequential_loops_control_edges_and_stateful_order():
    """Loop B reads loop A's Exit; an assign waits for B's Exit by control edge and for
    a Const's control edge: the values of the dataflow executor, every step."""
    def graph():
        with tb.Graph() as b:
            n = tb.placeholder(tb.int32, [], name="n")
            v = tb.Variable(np.float32(1.0), name="v")
            _, a = tb.while_loop(lambda i, x: i < n, lambda i, x: (i + 1, x + 1.0),
                                 [tb.constant(0), tb.constant(0.0)], name="A")
            _, bx = tb.while_loop(lambda i, x: i < n, lambda i, x: (i + 1, x * 2.0),
                                  [tb.constant(0), a], name="B")
            with tb.control_dependencies([bx]):
                up = tb.assign_add(v, bx, name="up")
            with tb.control_dependencies([up]):
                tb.identity(tb.constant(1.0) + 0.0, name="after")
            tb.global_variables_initializer()
        return b.graph

    runs = []
    for fast_path in (True, False):
        sess = Session(graph(), fast_path=fast_path)
        sess.run(None, targets=["init"])
        runs.append([sess.run(["up", "B/Exit_1", "after"], {"n": k}) for k in (0, 2, 3)])
        if fast_path:
            assert _schedule(sess).outer
    for got, want in zip(*runs):
        for a, b in zip(got, want):
            np.testing.assert_array_equal(a, b)
    assert float(runs[0][-1][0]) == 1.0 + 0.0 + 8.0 + 24.0


def test_a_failing_node_inside_a_loop_is_named():
    sess = Session(reshape_loop_graph())
    np.testing.assert_array_equal(sess.run("out", {"n": 2, "x0": [1.0, 2.0, 3.0]}), [1, 2, 3])
    assert _schedule(sess).outer
    with pytest.raises(TfgRuntimeError, match=r"node 'loop/bad' \(Reshape\) failed"):
        sess.run("out", {"n": 3, "x0": [1.0, 2.0]})


@pytest.mark.parametrize("model", ["keras_lstm", "keras_gru"])
def test_keras_rnn_steps_are_one_schedule_with_the_dataflow_values(model, monkeypatch):
    g = io.load(str(SAVED / model))
    feeds = dict(np.load(SAVED / "keras_rnn_feeds.npz"))
    outs = []
    for fast in (True, False):
        sess = Session(g, fast_path=fast)
        restore_variables(sess, g, savedmodel.read_variables(g.saved_model.path))
        sig = "serving_default"
        bound, tensors, _ = savedmodel.bind_signature(g, sig, feeds, [])
        counts = _counting(monkeypatch) if fast else []
        outs.append(sess.run(tensors, feeds=bound))
        outs.append(sess.run(tensors, feeds=bound))
        if fast:
            monkeypatch.undo()
            assert counts == [] and _schedule(sess).outer
    for a, b in zip(outs[0] + outs[1], outs[2] + outs[3]):
        np.testing.assert_array_equal(a, b)
