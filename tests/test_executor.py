"""The dataflow executor against graphs TensorFlow built and ran (tests/fixtures/executor),
made by tools/gen_executor_fixtures.py: v1 control flow, dead values, frames, stacks, errors."""
import json
import threading

import numpy as np
import pytest

import tfg
from tfg.errors import TfgRuntimeError
from tfg.executor import Session
from tfg.executor.plan import build_plan
from tfg.executor.devices import DeviceSet

from conftest import FIXTURES

CASES = FIXTURES / "executor"


def load_case(name):
    d = CASES / name
    meta = json.loads((d / "case.json").read_text())
    graph = tfg.load(str(d / "graph.pb"))
    with np.load(d / "feeds.npz") as f:
        feeds = {k: f[k] for k in f.files}
    with np.load(d / "expected.npz") as f:
        expected = {k: f[k] for k in f.files}
    return graph, meta, feeds, expected


def run_case(name, graph=None):
    g, meta, feeds, expected = load_case(name)
    sess = Session(graph or g)
    if meta["init"]:
        sess.run(None, feeds, targets=meta["init"])
    for _ in range(meta["steps"]):
        got = dict(zip(meta["fetches"], sess.run(meta["fetches"], feeds, targets=meta["targets"])))
    # (A ref variable's read in the step that updates it is its buffer, which the update
    # writes in place: the fetch shows the new value, as TensorFlow's does.)
    return got, expected


OK_CASES = ["cond_in_while", "while_in_cond_taken", "while_in_cond_untaken",
            "nested_invariants", "nested_invariants_pi1", "parallel_1", "parallel_10",
            "zero_iter", "dead_cond", "stack_loop", "control_trigger", "variables",
            "resource_variables", "ref_aliasing"]


@pytest.mark.parametrize("name", OK_CASES)
def test_matches_tensorflow(name):
    got, expected = run_case(name)
    for key, want in expected.items():
        assert got[key].shape == want.shape, key
        assert got[key].dtype == want.dtype, key
        np.testing.assert_allclose(got[key], want, rtol=1e-5, atol=1e-6, err_msg=key)


def test_parallel_iterations_do_not_change_results():
    one, _ = run_case("parallel_1")
    ten, _ = run_case("parallel_10")
    for key in one:
        np.testing.assert_array_equal(one[key], ten[key])


def test_parallel_iterations_bound_outstanding_iterations():
    # With parallel_iterations=1 no iteration may start before the previous one ended.
    g, meta, feeds, _ = load_case("parallel_1")
    from tfg.executor import executor as ex

    seen = []
    orig = ex.DataflowRun._increment_iteration

    def spy(self, frame):
        seen.append(frame.outstanding_iterations)
        return orig(self, frame)

    ex.DataflowRun._increment_iteration = spy
    try:  # the dataflow executor's own iterations (not a compiled loop's)
        Session(g, fast_path=False).run(meta["fetches"], feeds)
    finally:
        ex.DataflowRun._increment_iteration = orig
    assert seen and max(seen) <= 1


def test_zero_iteration_loop_returns_inputs():
    got, _ = run_case("zero_iter")
    np.testing.assert_array_equal(got["y:0"], [3.0, 4.0])
    assert got["count:0"] == 0


def test_dead_branch_fetch_is_an_error():
    g, meta, feeds, _ = load_case("dead_cond")
    # cond's true branch is untaken (p=False): its nodes are dead; fetching one fails cleanly.
    true_branch = [n.name for n in g if n.op == "Exp"][0]
    with pytest.raises(TfgRuntimeError, match="dead"):
        Session(g).run(true_branch, feeds)


def test_failing_kernel_inside_loop_stops_the_step():
    g, meta, feeds, _ = load_case("loop_error")
    assert "error" in meta
    sess = Session(g)
    done = []

    def run():
        try:
            sess.run(meta["fetches"], feeds)
        except TfgRuntimeError as e:
            done.append(str(e))

    t = threading.Thread(target=run, daemon=True)
    t.start()
    t.join(30)
    assert not t.is_alive(), "the step hung"
    assert done and "while/check/Assert" in done[0] and "Assert" in done[0]
    # The session still works after a failed step.
    feeds["n:0"] = np.int32(2)
    assert sess.run("y", feeds) == 2.0


def test_uninitialized_variable():
    g, meta, feeds, _ = load_case("variables")
    with pytest.raises(TfgRuntimeError, match="uninitialized"):
        Session(g).run("loss", feeds)


def test_variables_persist_across_runs():
    g, meta, feeds, _ = load_case("variables")
    sess = Session(g)
    sess.run(None, targets="init")
    w0 = sess.run("w_value")
    sess.run(None, feeds, targets="train")
    w1 = sess.run("w_value")
    assert not np.allclose(w0, w1)
    # A fetched value is a copy: later updates do not change it.
    w1_copy = w1.copy()
    sess.run(None, feeds, targets="train")
    np.testing.assert_array_equal(w1, w1_copy)


def test_nested_frames_and_constant_enters_structure():
    g, _, _, _ = load_case("nested_invariants")
    plan = build_plan(list(g), DeviceSet.from_spec("cpu:1").default)
    constant = [it for it in plan.items if it.kind == "enter" and it.is_constant]
    assert constant, "the fixture must have loop invariants"
    assert len(plan.frame_inputs) == 2  # the outer and the inner frame


def test_trace_records_every_node_and_peak_memory():
    g, meta, feeds, _ = load_case("cond_in_while")
    sess = Session(g)
    sess.run(meta["fetches"], feeds, trace=True)
    tr = sess.last_trace
    names = {e[0] for e in tr.events}
    assert "y" in names and any(n.startswith("while/") for n in names)
    assert tr.peak_bytes > 0


def test_a_fetched_view_of_a_variable_does_not_change_in_later_steps():
    # A ref variable's read is its buffer, which AssignAdd writes in place; a Reshape of it
    # is a view. What a step returned is the caller's: a copy, as TensorFlow's fetch is.
    from tfg.graphdef.graph import Graph
    from tfg.schemas.dtypes import DType
    g = Graph()
    f = DType.FLOAT
    g.add_node("w", "VariableV2", attrs={"dtype": f, "shape": (2,)})
    g.add_node("v", "Const", attrs={"dtype": f, "value": np.array([1, 2], np.float32)})
    g.add_node("init", "Assign", ["w", "v"], attrs={"T": f})
    g.add_node("read", "Identity", ["w"], attrs={"T": f})
    g.add_node("shape", "Const", attrs={"dtype": DType.INT32, "value": np.array([2, 1],
                                                                               np.int32)})
    g.add_node("view", "Reshape", ["read", "shape"], attrs={"T": f, "Tshape": DType.INT32})
    g.add_node("add", "AssignAdd", ["w", "v"], attrs={"T": f})
    sess = Session(g)
    sess.run(None, targets=["init"])
    before = sess.run("view")
    sess.run(None, targets=["add"])
    np.testing.assert_array_equal(before, [[1], [2]])
    np.testing.assert_array_equal(sess.run("view"), [[2], [4]])


def test_variable_buffers_of_a_plan():
    # What a compiled loop must not keep as an invariant: values that may be a ref variable's
    # buffer (read by an Identity or a non-ref Switch, then forwarded or viewed), only where a
    # kernel of the step writes a variable in place.
    from tfg.executor.ref_aliases import variable_buffers
    from tfg.graphdef.graph import Graph
    from tfg.schemas.dtypes import DType
    f = DType.FLOAT
    g = Graph()
    g.add_node("w", "VariableV2", attrs={"dtype": f, "shape": (2,)})
    g.add_node("p", "Const", attrs={"dtype": DType.BOOL, "value": np.array(True)})
    g.add_node("one", "Const", attrs={"dtype": f, "value": np.ones(2, np.float32)})
    g.add_node("read", "Identity", ["w"], attrs={"T": f})
    g.add_node("sw", "Switch", ["w", "p"], attrs={"T": f})
    g.add_node("neg", "Neg", ["sw:1"], attrs={"T": f})
    g.add_node("mm", "MatMul", ["read", "read"], attrs={"T": f})  # (a fresh output)
    g.add_node("view", "ExpandDims", ["read", "p"], attrs={"T": f})
    names = lambda plan, ids: sorted(plan.items[i].name for i in ids)  # noqa: E731
    device = DeviceSet.from_spec("cpu:1").default
    assert variable_buffers(build_plan(list(g), device)) == frozenset()  # nothing writes
    g.add_node("add", "AssignAdd", ["w", "one"], attrs={"T": f})
    plan = build_plan(list(g), device)
    assert names(plan, variable_buffers(plan)) == ["neg", "read", "sw", "view"]
