"""Compiled loop frames (tfg/executor/loops.py) against the dataflow executor and TensorFlow:
the same values on every executor fixture, compiled where the frame qualifies, the dataflow
executor where it does not, and errors that name the node."""
import numpy as np
import pytest

import tfg
from tfg import builder as tb
from tfg.errors import TfgRuntimeError
from tfg.executor import Session

from test_executor import CASES, load_case

LOOP_CASES = sorted(p.name for p in CASES.iterdir() if p.is_dir())


def _run(graph, meta, feeds, fast_path):
    sess = Session(graph, fast_path=fast_path)
    if meta["init"]:
        sess.run(None, feeds, targets=meta["init"])
    got = None
    for _ in range(meta["steps"]):
        got = sess.run(meta["fetches"], feeds, targets=meta["targets"])
    return sess, got


def _programs(sess):
    return {name: prog for prepared in sess.backend._cache.values()
            for plan in prepared.plans for name, prog in (plan.loops or {}).items()}


@pytest.mark.parametrize("case", LOOP_CASES)
def test_compiled_loops_agree_with_the_dataflow_executor(case):
    g, meta, feeds, expected = load_case(case)
    if meta.get("error"):
        pytest.skip("an error case (test_loop_errors_name_the_node)")
    _, compiled = _run(g, meta, feeds, True)
    _, plain = _run(g, meta, feeds, False)
    for name, a, b in zip(meta["fetches"], compiled, plain):
        np.testing.assert_array_equal(a, b, err_msg=f"{case}: {name}")


def _counter_loop(n_value=5):
    with tb.Graph() as b:
        n = tb.placeholder(tb.int32, [], name="n")
        c = tb.constant(2.0, name="c")
        _, x = tb.while_loop(lambda i, x: i < n, lambda i, x: (i + 1, x * c),
                             [tb.constant(0), tb.constant(1.0)], name="loop")
        tb.identity(x, name="out")
    return b.graph


@pytest.mark.parametrize("n,expected", [(0, 1.0), (1, 2.0), (10, 1024.0)])
def test_a_plain_while_loop_is_compiled_and_exact(n, expected):
    sess = Session(_counter_loop())
    assert float(sess.run("out", {"n": n})) == expected  # n = 0: zero iterations
    progs = _programs(sess)
    assert len(progs) == 1
    prog = next(iter(progs.values()))
    # LoopCond, Switch, Identity, NextIteration and Exit share their input's slot: no call;
    # the Const is computed once, before the first iteration.
    assert [it.op for _, it in prog.header] == ["Less"]
    assert sorted(it.op for _, it in prog.body) == ["AddV2", "Mul"]
    assert [it.op for _, it in prog.hoisted] == ["Const"]
    assert prog.tail == [] and [e.op for e, _ in prog.exits] == ["Exit"]  # i's is pruned


def test_a_cond_inside_the_body_is_compiled_with_its_dead_branch_skipped():
    g, meta, feeds, expected = load_case("cond_in_while")
    sess, got = _run(g, meta, feeds, True)
    progs = _programs(sess)
    assert len(progs) == 1  # a Switch on another predicate: its branches guarded
    ops = {it.op for _, it in next(iter(progs.values())).body}
    assert {"Switch", "Merge"} <= ops
    for name, v in zip(meta["fetches"], got):
        np.testing.assert_allclose(v, expected[name], rtol=1e-6)


def test_a_loop_in_an_untaken_branch_runs_its_dead_enters_through_the_dataflow_executor():
    g, meta, feeds, expected = load_case("while_in_cond_untaken")
    sess, got = _run(g, meta, feeds, True)
    for name, v in zip(meta["fetches"], got):
        np.testing.assert_allclose(v, expected[name], rtol=1e-6)


def test_stack_loops_and_their_gradient_loops_are_compiled():
    g, meta, feeds, expected = load_case("stack_loop")
    sess, got = _run(g, meta, feeds, True)
    assert _programs(sess)
    for name, v in zip(meta["fetches"], got):
        np.testing.assert_allclose(v, expected[name], rtol=1e-6)


def reshape_loop_graph():
    """A while loop whose body reshapes x to [3] ('loop/bad'): fails for other sizes."""
    with tb.Graph() as b:
        n = tb.placeholder(tb.int32, [], name="n")
        x0 = tb.placeholder(tb.float32, [None], name="x0")
        _, x = tb.while_loop(lambda i, x: i < n,
                             lambda i, x: (i + 1, tb.reshape(x, [3], name="bad")),
                             [tb.constant(0), x0], name="loop")
        tb.identity(x, name="out")
    return b.graph


def test_a_failing_node_inside_a_compiled_loop_is_named():
    sess = Session(reshape_loop_graph())
    np.testing.assert_array_equal(sess.run("out", {"n": 2, "x0": [1.0, 2.0, 3.0]}), [1, 2, 3])
    with pytest.raises(TfgRuntimeError, match=r"node 'loop/bad' \(Reshape\) failed"):
        sess.run("out", {"n": 3, "x0": [1.0, 2.0]})
    assert _programs(sess)


def test_traced_steps_time_every_iteration_through_the_dataflow_executor():
    sess = Session(_counter_loop())
    sess.run("out", {"n": 4}, trace=True)
    muls = [e for e in sess.last_trace.events if e[1] == "Mul"]
    assert len(muls) == 4


FRAMES = CASES.parent / "frames"


@pytest.mark.parametrize("case", ["cond_in_while_grad", "nested_while_cond_grad",
                                  "while_in_cond_grad"])
def test_conds_and_their_gradient_stacks_compiled_agree_with_the_dataflow_executor(case):
    g = tfg.load(str(FRAMES / case / "graph.pb"))
    feeds = {"x": np.float32(1.5), "n": np.int32(5), "p": True}
    feeds = {k: v for k, v in feeds.items() if k in {n.name for n in g}}
    compiled, plain = Session(g), Session(g, fast_path=False)
    a = compiled.run(["y", "gx"], feeds)
    b = plain.run(["y", "gx"], feeds)
    for name, u, v in zip(["y", "gx"], a, b):
        np.testing.assert_array_equal(u, v, err_msg=f"{case}: {name}")
    assert _programs(compiled)


def _invariant_loop():
    with tb.Graph() as b:
        n = tb.placeholder(tb.int32, [], name="n")
        w = tb.placeholder(tb.float32, [2, 2], name="w")
        _, x = tb.while_loop(
            lambda i, x: i < n,
            lambda i, x: (i + 1, tb.matmul(x, tb.transpose(w, [1, 0], name="wt"))),
            [tb.constant(0), tb.constant(np.eye(2, dtype=np.float32))], name="loop")
        tb.identity(x, name="out")
    return b.graph


@pytest.mark.parametrize("n", [0, 1, 4])
def test_loop_invariants_run_in_the_first_iteration_only(n):
    w = np.float32([[1, 2], [3, 4]])
    sess = Session(_invariant_loop())
    want = np.linalg.matrix_power(w.T, n) if n else np.eye(2, dtype=np.float32)
    np.testing.assert_allclose(sess.run("out", {"n": n, "w": w}), want, rtol=1e-6)
    prog = next(iter(_programs(sess).values()))
    assert "Transpose" in [it.op for _, it in prog.body]
    assert "Transpose" not in [it.op for _, it in prog.body_rest]
    assert "MatMul" in [it.op for _, it in prog.body_rest]


def test_scalar_fast_paths_equal_the_ufuncs_and_wrap_silently():
    import warnings

    from tfg.kernels.registry import get_kernel

    class Ctx:
        xp, attrs, cache = np, {}, {}
    imax = np.iinfo(np.int32).max
    cases = [("AddV2", np.int32(imax), np.int32(1), np.add),
             ("Sub", np.int32(-imax - 1), np.int32(1), np.subtract),
             ("Mul", np.int32(1 << 20), np.int32(1 << 12), np.multiply),
             ("Mul", np.float32(1.5), np.float32(-2), np.multiply),
             ("Less", np.int64(3), np.int64(4), np.less),
             ("Equal", np.float32(np.nan), np.float32(np.nan), np.equal),
             ("FloorMod", np.int32(-7), np.int32(3), np.mod),
             ("LogicalAnd", np.True_, np.False_, np.logical_and),
             ("AddV2", np.array(2, np.int32), np.int32(1), np.add)]
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for op, x, y, ufunc in cases:
            got = get_kernel(op, "CPU", "x").fn(Ctx, x, y)
            want = ufunc(np.asarray(x), np.asarray(y))
            assert np.asarray(got).dtype == want.dtype and np.array_equal(got, want), op


@pytest.mark.parametrize("case", ["keras_lstm", "tf1_dynamic_lstm_grad"])
def test_loops_of_a_partitioned_graph_compile(case):
    """A loop nest placed on one device of a partitioned graph runs as a compiled loop there:
    its Enters read _Recvs whose senders wait for no Exit of it (recv_exit_frames)."""
    import sys
    from conftest import ROOT
    sys.path.insert(0, str(ROOT))
    from tests.gpu_suite import _loop_case
    from tfg.executor.loops import compile_loops
    from tfg.passes.partition import partition
    meta, graph, feeds, fetches, want = _loop_case(f"real_models/{case}")
    s = Session(partition(graph, "cpu:2", warn=lambda *a: None), devices="cpu:2")
    got = s.run(fetches, feeds=feeds)
    for a, w in zip(got, want):
        np.testing.assert_allclose(a, w, rtol=max(meta.get("rtol", 1e-4), 1e-4),
                                   atol=max(meta.get("atol", 1e-5), 1e-5))
    (prepared,) = s.backend._cache.values()
    compiled = {}
    for plan in prepared.plans:
        why = {}
        compiled.update(compile_loops(plan, why))
        assert not why, why
    assert compiled


def test_recv_exit_frames_follow_sends_across_devices():
    from tfg.executor.partitions import recv_exit_frames
    from tfg.passes.partition import partition
    with tb.Graph() as g:
        with tb.device("/device:CPU:1"):
            c = tb.constant(np.float32(2.0), name="c") * tb.constant(np.float32(1.5))
        with tb.device("/device:CPU:0"):
            _, acc = tb.while_loop(lambda i, a: i < 3, lambda i, a: (i + 1, a * c),
                                   [tb.constant(0), tb.constant(np.float32(1.0))], name="w")
        with tb.device("/device:CPU:1"):
            tb.identity(acc * 2.0, name="out")
    parted = partition(g.graph, "cpu:2", warn=lambda *a: None)
    frames = recv_exit_frames(parted)
    into_loop = [n.name for n in parted if n.op == "_Recv" and "CPU:0" in n.device]
    after_loop = [n.name for n in parted if n.op == "_Recv" and "CPU:1" in n.device]
    assert into_loop and all(frames[n] == frozenset() for n in into_loop)
    assert after_loop and any("w/while_context" in frames[n] for n in after_loop)
    assert Session(parted, devices="cpu:2").run("out:0") == pytest.approx(2 * 3.0 ** 3)
