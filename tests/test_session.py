"""Session: fetch/feed forms, early validation, feed casting and checking, pruning, caching,
and the fast path giving the same answers as the dataflow executor."""
import numpy as np
import pytest

from tfg.errors import TfgInputError, TfgRuntimeError
from tfg.executor import Session
from tfg.executor.fastpath import Schedule
from tfg.graphdef.attrs import Shape
from tfg.graphdef.graph import Graph
from tfg.schemas.dtypes import DType

F = DType.FLOAT


def small_graph():
    """y = relu(x @ w) + 1, z = -x; `bad` is a node tfg has no kernel for."""
    g = Graph()
    g.add_node("x", "Placeholder", [], {"dtype": F, "shape": Shape((None, 2))})
    g.add_node("w", "Const", [], {"dtype": F, "value": np.array([[1, -1], [2, 0.5]], np.float32)})
    g.add_node("one", "Const", [], {"dtype": F, "value": np.float32(1)})
    g.add_node("mm", "MatMul", ["x", "w"], {"T": F})
    g.add_node("r", "Relu", ["mm"], {"T": F})
    g.add_node("y", "AddV2", ["r", "one"], {"T": F})
    g.add_node("z", "Neg", ["x"], {"T": F})
    g.add_node("n", "Placeholder", [], {"dtype": DType.INT32, "shape": Shape(())})
    g.add_node("n2", "Mul", ["n", "n"], {"T": DType.INT32})
    g.add_node("bad", "NoSuchOpAnywhere", ["x"], {})
    return g


X = np.array([[1.0, 2.0], [-1.0, 0.5]], np.float32)
W = np.array([[1, -1], [2, 0.5]], np.float32)


def expected_y(x):
    return np.maximum(x @ W, 0) + 1


def test_fetch_forms():
    sess = Session(small_graph())
    y = sess.run("y", {"x": X})
    np.testing.assert_allclose(y, expected_y(X))
    y2, z = sess.run(["y:0", "z"], {"x:0": X})
    np.testing.assert_allclose(z, -X)
    d = sess.run({"a": "y", "b": "z"}, {"x": X})
    assert set(d) == {"a", "b"}
    np.testing.assert_allclose(d["b"], -X)


def test_feeds_are_cast_when_safe():
    sess = Session(small_graph())
    got = sess.run("y", {"x": [[1, 2], [-1, 0.5]]})  # a Python list of float64/int
    assert got.dtype == np.float32
    assert sess.run("n2", {"n": 7}) == 49
    assert sess.run("n2", {"n": np.int64(3)}).dtype == np.int32


@pytest.mark.parametrize("feeds,match", [
    ({"x": np.ones((2, 3), np.float32)}, r"feed 'x:0': shape \[2,3\].*\[\?,2\]"),
    ({"x": np.ones(2, np.float32)}, "feed 'x:0': shape"),
    ({"n": 2.5}, "feed 'n:0'.*float64.*int32"),
    ({"n": 2**40}, "feed 'n:0'.*fit"),
    ({"n": "seven"}, "feed 'n:0'"),
    ({"nope": 1.0}, "nope"),
    ({"x:3": X}, "x:3"),
])
def test_bad_feeds(feeds, match):
    fetch = "n2" if "n" in feeds else "y"
    with pytest.raises(TfgInputError, match=match):
        Session(small_graph()).run(fetch, {**{"x": X, "n": 1}, **feeds})


@pytest.mark.parametrize("fetch,match", [
    ("nothere", "no node named 'nothere'"),
    ("y:1", r"'y' \(AddV2\) has 1 output"),
    ("bad", r"NoSuchOpAnywhere.*bad|bad.*NoSuchOpAnywhere"),
])
def test_bad_fetches_fail_before_running(fetch, match):
    with pytest.raises(TfgInputError, match=match):
        Session(small_graph()).run(fetch, {"x": X})


def test_missing_placeholder_feed():
    with pytest.raises(TfgInputError, match="You must feed a value for placeholder 'x'"):
        Session(small_graph()).run("y")


def test_pruning_ignores_unneeded_nodes():
    # `bad` has no kernel and `n` is not fed: neither matters for z.
    np.testing.assert_allclose(Session(small_graph()).run("z", {"x": X}), -X)


def test_feeding_an_intermediate_cuts_its_producer():
    # mm is fed: x (an unfed placeholder) is not needed any more.
    got = Session(small_graph()).run("y", {"mm": np.array([[-1.0, 2.0]], np.float32)})
    np.testing.assert_allclose(got, [[1.0, 3.0]])


def test_fetching_a_fed_tensor_returns_the_feed():
    np.testing.assert_allclose(Session(small_graph()).run("x", {"x": X}), X)


def test_prepared_step_is_cached():
    sess = Session(small_graph())
    sess.run("y", {"x": X})
    sess.run("y", {"x": X * 2})
    assert len(sess._cache) == 1
    sess.run(["y", "z"], {"x": X})
    assert len(sess._cache) == 2


def test_fast_path_is_used_and_frees_tensors():
    sess = Session(small_graph())
    sess.run("y", {"x": X})
    prepared = next(iter(sess._cache.values()))
    sched = prepared.schedules[0]
    assert isinstance(sched, Schedule)
    # mm's slot is released after its last consumer (r) ran.
    freed = [s for entry in sched.entries for s in (entry[6] or ())]
    assert freed


def test_fast_path_and_dataflow_executor_agree():
    from tfg.executor.executor import DataflowRun, StepGroup
    from tfg.kernels.resources import StepContext

    sess = Session(small_graph())
    fast = sess.run(["y", "z"], {"x": X})
    prepared = sess._cache[next(iter(sess._cache))]
    group = StepGroup(StepContext())
    run = DataflowRun(prepared.plans[0], group, None, [X])
    run.execute()
    for a, b in zip(fast, run.results):
        np.testing.assert_array_equal(a, b)


def test_kernel_error_names_node_and_op():
    g = Graph()
    g.add_node("a", "Const", [], {"dtype": F, "value": np.ones((2, 3), np.float32)})
    g.add_node("b", "Const", [], {"dtype": F, "value": np.ones((2, 3), np.float32)})
    g.add_node("mm", "MatMul", ["a", "b"], {"T": F})
    with pytest.raises(TfgRuntimeError, match=r"node 'mm' \(MatMul\)"):
        Session(g).run("mm")


def test_nothing_to_run():
    with pytest.raises(TfgInputError):
        Session(small_graph()).run(None)


# --- checkpoints ------------------------------------------------------------------------
def _trained(case="variables", steps=3):
    from conftest import FIXTURES

    d = FIXTURES / "executor" / case
    g = __import__("tfg").load(str(d / "graph.pb"))
    with np.load(d / "feeds.npz") as f:
        feeds = {k: f[k] for k in f.files}
    sess = Session(g)
    sess.run(None, targets="init")
    for _ in range(steps):
        sess.run(None, feeds, targets="train")
    return g, sess, feeds


@pytest.mark.parametrize("case", ["variables", "resource_variables"])
def test_checkpoint_round_trip(tmp_path, case):
    g, sess, feeds = _trained(case)
    before = sess.variables()
    assert set(before) == {"w", "b"}
    path = sess.save(tmp_path / "ck")
    assert (tmp_path / "ck").is_dir() and path.endswith(".tfgckpt")
    fresh = Session(g)
    assert fresh.restore(tmp_path / "ck") == ["b", "w"]
    for name, value in before.items():
        np.testing.assert_array_equal(fresh.variables()[name], value)
    # Training goes on identically from the restored state.
    a = sess.run("loss", feeds, targets="train")
    b = fresh.run("loss", feeds, targets="train")
    assert a == b


def test_truncated_checkpoint_is_refused(tmp_path):
    g, sess, _ = _trained()
    path = sess.save(tmp_path)
    data = open(path, "rb").read()
    open(path, "wb").write(data[:-5])
    fresh = Session(g)
    with pytest.raises(TfgInputError, match="truncated"):
        fresh.restore(tmp_path)
    open(path, "wb").write(data[:-1] + bytes([data[-1] ^ 0xFF]))
    with pytest.raises(TfgInputError, match="checksum"):
        fresh.restore(tmp_path)
    assert fresh.variables() == {}  # nothing was half-restored


def test_checkpoint_shape_mismatch_is_refused(tmp_path):
    from tfg.kernels.checkpoint_format import write_checkpoint

    g, _, _ = _trained(steps=0)
    write_checkpoint(tmp_path / "variables.tfgckpt", {"w": np.zeros((2, 2), np.float32)})
    with pytest.raises(TfgInputError, match="'w' has shape"):
        Session(g).restore(tmp_path)


def test_save_without_variables_is_an_input_error(tmp_path):
    with pytest.raises(TfgInputError, match="no variable"):
        Session(small_graph()).save(tmp_path)


@pytest.mark.parametrize("fast_path", [True, False])
def test_control_edge_from_fed_placeholder_is_satisfied_by_the_feed(fast_path):
    # Constant folding turns x*0 into a Const with `^x`; feeding x must not run the Placeholder.
    g = Graph()
    g.add_node("x", "Placeholder", [], {"dtype": F})
    g.add_node("c", "Const", ["^x"], {"dtype": F, "value": np.float32(3)})
    g.add_node("d", "Identity", ["x", "^x"], {"T": F})
    c, d = Session(g, fast_path=fast_path).run(["c", "d"], feeds={"x": 1.0})
    assert c == 3 and d == 1
    with pytest.raises(TfgInputError, match="must feed"):
        Session(g, fast_path=fast_path).run("c")
