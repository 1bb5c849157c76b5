"""The builder: names, scopes, control dependencies, devices, ops, and cond/while_loop compiled
to Switch/Merge/Enter/Exit/NextIteration as TensorFlow does; values of every builder-written
fixture against TensorFlow's (tests/fixtures/builder, made by tools/gen_builder_fixtures.py)."""
import collections
import importlib.util
import json

import numpy as np
import pytest

import tfg
from tfg import builder as tb
from tfg.errors import TfgInputError
from tfg.graphdef import io

from conftest import FIXTURES, ROOT

BUILDER_FIXTURES = FIXTURES / "builder"
CASES = sorted(p.name for p in BUILDER_FIXTURES.iterdir() if (p / "case.json").exists())


def _tool():
    spec = importlib.util.spec_from_file_location("gen_builder_fixtures",
                                                  ROOT / "tools" / "gen_builder_fixtures.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def ops_of(g):
    return collections.Counter(n.op for n in g.graph)


def frames(g):
    return {n.get_attr("frame_name").decode() for n in g.graph if n.op == "Enter"}


# --- names, scopes, control dependencies, devices ----------------------------------------
def test_unique_names_and_scopes_follow_tensorflow():
    g = tb.Graph()
    with g:
        x = tb.placeholder(tb.float32, [], name="x")
        with tb.name_scope("dense"):
            a = tb.identity(x)
        with tb.name_scope("dense"):
            b = tb.identity(x)
        c = tb.identity(x, name="dense")  # the scope name is taken: TensorFlow gives dense_2
        d = x * 2.0
        e = x * 3.0
        with tb.name_scope("s/"):
            f = tb.constant(1.0)
    assert [a.op.name, b.op.name, c.op.name] == ["dense/Identity", "dense_1/Identity", "dense_2"]
    assert (d.op.name, e.op.name) == ("mul", "mul_1")
    assert g.graph["mul"].inputs == ("x", "mul/y")
    assert f.op.name == "s/Const"
    assert d.name == "mul:0" and d.dtype == tb.float32 and d.shape == ()


def test_control_dependencies_sorted_dominated_and_cleared():
    g = tb.Graph()
    with g:
        x = tb.placeholder(tb.float32, [], name="x")
        z = tb.identity(x, name="z")
        a = tb.identity(x, name="a")
        with tb.control_dependencies([z, a]):
            y = tb.identity(x, name="y")
            w = tb.identity(y, name="w")  # y already runs after z, a: no second copy
            v = tb.identity(a, name="v")  # a is a data input: only ^z
            with tb.control_dependencies(None):
                u = tb.identity(x, name="u")
    assert g.graph["y"].inputs == ("x", "^a", "^z")
    assert g.graph["w"].inputs == ("y",)
    assert g.graph["v"].inputs == ("a", "^z")
    assert g.graph["u"].inputs == ("x",)
    assert y is not w and u is not v


def test_device_scopes_merge_and_colocation_wins():
    g = tb.Graph()
    with g:
        w = tb.Variable(1.0, name="w")
        with tb.device("/job:worker/task:1"):
            a = tb.constant(1.0, name="a")
            with tb.device("/gpu:0"):
                b = tb.constant(1.0, name="b")
            with tb.device("/cpu:0"):
                c = tb.assign_add(w, 1.0)
    assert g.graph["a"].device == "/job:worker/task:1"
    assert g.graph["b"].device == "/job:worker/task:1/device:GPU:0"
    assert g.graph[c.op.name].device == ""  # colocated with w, as TensorFlow writes it
    assert g.graph[c.op.name].get_attr("_class") == [b"loc:@w"]
    assert a is not b


# --- ops -----------------------------------------------------------------------------------
def test_operators_make_tensorflow_ops():
    g = tb.Graph()
    with g:
        x = tb.placeholder(tb.float32, [2, 3], name="x")
        m = tb.placeholder(tb.float32, [3, 4], name="m")
        i = tb.placeholder(tb.int32, [], name="i")
        outs = [x + 1.0, 1.0 - x, x * x, x / 2.0, x // 2.0, x % 2.0, x ** 2.0, x @ m, -x,
                abs(x), x < 1.0, x >= 1.0, i / 2, (x > 0.0) & (x < 1.0)]
    types = [t.op.type for t in outs]
    assert types == ["AddV2", "Sub", "Mul", "RealDiv", "FloorDiv", "FloorMod", "Pow",
                     "MatMul", "Neg", "Abs", "Less", "GreaterEqual", "RealDiv", "LogicalAnd"]
    assert outs[1].op.node.inputs == ("sub/x", "x")
    assert outs[7].shape == (2, 4)
    assert outs[12].dtype == tb.float64  # int32 / int32 -> float64 through two Casts
    assert ops_of(g)["Cast"] == 2
    with pytest.raises(TypeError):
        bool(outs[10])
    with g, pytest.raises(TfgInputError, match="different dtypes"):
        x + i


def test_slicing_builds_strided_slice_masks():
    g = tb.Graph()
    with g:
        y = tb.placeholder(tb.float32, [None, 3], name="y")
        a, b, c = y[1:, ::2], y[0], y[..., None, 1]
    attrs = lambda t: {k: t.op.node.get_attr(k) for k in (  # noqa: E731
        "begin_mask", "end_mask", "ellipsis_mask", "new_axis_mask", "shrink_axis_mask")}
    assert attrs(a) == dict(begin_mask=2, end_mask=3, ellipsis_mask=0, new_axis_mask=0,
                            shrink_axis_mask=0)
    assert attrs(b)["shrink_axis_mask"] == 1
    assert attrs(c) == dict(begin_mask=0, end_mask=0, ellipsis_mask=1, new_axis_mask=2,
                            shrink_axis_mask=4)
    assert a.op.node.inputs == ("y", "strided_slice/stack", "strided_slice/stack_1",
                                "strided_slice/stack_2")


def test_nn_and_array_ops_shapes_and_attrs():
    g = tb.Graph()
    with g:
        x = tb.placeholder(tb.float32, [2, 8, 8, 3], name="x")
        k = tb.constant(np.zeros((3, 3, 3, 4), np.float32))
        c = tb.conv2d(x, k, strides=2, padding="SAME")
        p = tb.max_pool(c, 2, 2, "VALID")
        r = tb.reshape(p, [2, -1])
        s = tb.reduce_sum(r, axis=1, keepdims=True)
        oh = tb.one_hot(tb.placeholder(tb.int32, [5], name="l"), 7)
        am = tb.argmax(r, 1)
        parts = tb.split(r, 2, axis=1)
    assert c.shape == (2, 4, 4, 4) and p.shape == (2, 2, 2, 4) and r.shape == (2, 16)
    assert s.shape == (2, 1) and oh.shape == (5, 7) and am.dtype == tb.int64
    node = g.graph[c.op.name]
    assert node.get_attr("strides") == [1, 2, 2, 1] and node.get_attr("padding") == b"SAME"
    assert node.get_attr("explicit_paddings") == [] and node.get_attr("data_format") == b"NHWC"
    assert len(parts) == 2 and parts[1].name == "split:1"


def test_variables_and_initializer():
    g = tb.Graph()
    with g:
        w = tb.Variable(np.ones((3, 1), np.float32), name="w")
        b = tb.Variable(0.5, name="b")
        y = w * 2.0
        init = tb.global_variables_initializer()
    assert [n.name for n in g.graph][:4] == ["w/initial_value", "w", "w/Assign", "w/read"]
    assert g.graph["w"].op == "VariableV2" and g.graph["w"].get_attr("shape") == (3, 1)
    assert w.ref.dtype == tb.DType.FLOAT_REF and y.op.node.inputs == ("w/read", "mul/y")
    assert init.name == "init" and g.graph["init"].inputs == ("^b/Assign", "^w/Assign")
    assert g.graph["w/Assign"].get_attr("use_locking") is True and b.shape == ()


# --- control flow structure ------------------------------------------------------------------
def test_cond_structure():
    g = tb.Graph()
    with g:
        x = tb.placeholder(tb.float32, [], name="x")
        y = tb.placeholder(tb.float32, [], name="y")
        r = tb.cond(x < y, lambda: x + x * y, lambda: tb.constant(2.0))
    n = g.graph
    assert n["cond/Switch"].inputs == ("Less", "Less")
    assert n["cond/switch_t"].inputs == ("cond/Switch:1",)
    assert n["cond/switch_f"].inputs == ("cond/Switch",)
    assert n["cond/pred_id"].inputs == ("Less",)
    # One Switch per outside tensor the true branch reads (x once, although read twice).
    captures = [m for m in n if m.op == "Switch" and m.name != "cond/Switch"]
    assert sorted(m.inputs[0] for m in captures) == ["x", "y"]
    assert all(m.inputs[1] == "cond/pred_id" for m in captures)
    assert n["cond/Const"].inputs == ("^cond/switch_f",)  # a branch constant hangs off its pivot
    assert n["cond/Merge"].inputs == ("cond/Const", "cond/add") and r.op.name == "cond/Merge"
    assert ops_of(g)["Merge"] == 1


def test_while_loop_structure():
    g = tb.Graph()
    with g:
        n = tb.placeholder(tb.int32, [], name="n")
        x = tb.placeholder(tb.float32, [], name="x")
        i, a, c = tb.while_loop(lambda i, a, c: i < n,
                                lambda i, a, c: (i + 1, a * x + x, c),
                                [0, 1.0, tb.constant(3)], parallel_iterations=4)
    counts = ops_of(g)
    assert counts["Merge"] == counts["Switch"] == counts["NextIteration"] == counts["Exit"] == 3
    assert counts["LoopCond"] == 1
    enters = [m for m in g.graph if m.op == "Enter"]
    assert frames(g) == {"while/while_context"}
    assert all(m.get_attr("parallel_iterations") == 4 for m in enters)
    consts = [m for m in enters if m.get_attr("is_constant")]
    # n and x are loop invariants: each enters exactly once with is_constant=true.
    assert sorted(m.inputs[0] for m in consts) == ["n", "x"]
    G = g.graph
    assert G["while/Merge"].inputs == ("while/Enter", "while/NextIteration")
    assert G["while/Switch"].inputs == ("while/Merge", "while/LoopCond")
    assert G["while/Identity"].inputs == ("while/Switch:1",)
    assert G["while/Exit_2"].inputs == ("while/Switch_2",)
    assert G["while/NextIteration_2"].inputs == ("while/Identity_2",)
    assert G["while/add/y"].inputs == ("^while/Identity",)  # body constants on the pivot
    assert (i.op.name, a.op.name, c.op.name) == ("while/Exit", "while/Exit_1", "while/Exit_2")
    G.topo_order()  # acyclic once the NextIteration back edges are set aside


def test_nested_loops_and_conds_frames():
    g = tb.Graph()
    with g:
        x = tb.placeholder(tb.float32, [], name="x")

        def obody(i, acc):
            def ibody(j, a):
                return j + 1, tb.cond(a > 5.0, lambda: a, lambda: a + x)
            return i + 1, tb.while_loop(lambda j, a: j < i, ibody, [0, acc], name="inner")[1]

        tb.while_loop(lambda i, a: i < 3, obody, [0, 0.0], name="outer")
    assert frames(g) == {"outer/while_context", "outer/inner/while_context"}
    # x enters the outer frame, then the inner frame from there, then is switched by the cond.
    ex = [m for m in g.graph if m.op == "Enter" and m.get_attr("is_constant")]
    chain = {m.get_attr("frame_name").decode(): m.inputs[0] for m in ex
             if m.inputs[0] == "x" or g.graph[m.inputs[0]].op == "Enter"}
    assert chain["outer/while_context"] == "x"
    assert g.graph[chain["outer/inner/while_context"]].get_attr("frame_name") == \
        b"outer/while_context"
    sw = [m for m in g.graph if m.op == "Switch" and g.graph[m.inputs[0]].op == "Enter"]
    assert sw and all(m.inputs[1].endswith("pred_id") for m in sw)


def test_control_flow_errors():
    g = tb.Graph()
    with g:
        x = tb.placeholder(tb.float32, [], name="x")
        leaked = []

        def branch():
            leaked.append(x * 2.0)
            return leaked[-1]
        tb.cond(x > 0.0, branch, lambda: x)
        with pytest.raises(TfgInputError, match="branch"):
            tb.identity(leaked[0])
        with pytest.raises(TfgInputError, match="loop variables"):
            tb.while_loop(lambda i: i < 3, lambda i: (i + 1, i), [0])
        with pytest.raises(TfgInputError, match="shape"):
            tb.while_loop(lambda v: tb.reduce_sum(v) < 3.0, lambda v: tb.concat([v, v], 0),
                          [tb.constant([1.0])])
        with pytest.raises(TfgInputError, match="float32"):
            tb.cond(x > 0.0, lambda: x, lambda: tb.constant(1))


@pytest.mark.parametrize("name", sorted(_tool().PROGRAMS))
def test_structure_matches_tensorflow(name):
    """The same program built with TensorFlow's own v1 control flow gives the same nodes."""
    tool = _tool()
    g = tb.Graph()
    with g:
        tool.PROGRAMS[name](tb)
    tf_graph = io.load(str(BUILDER_FIXTURES / name / "tf_graph.pbtxt"))
    ours = {n.name: n for n in g.graph}
    assert set(ours) == set(tf_graph.node_names())
    for n in tf_graph:
        mine = ours[n.name]
        assert (mine.op, mine.inputs, mine.device) == (n.op, n.inputs, n.device), n.name
        for key in mine.attr:
            a, b = mine.get_attr(key), n.get_attr(key)
            if isinstance(a, np.ndarray):
                np.testing.assert_array_equal(a, b)
                assert a.dtype == b.dtype
            else:
                assert a == b, (n.name, key)


@pytest.mark.parametrize("name", CASES)
def test_fixture_graph_is_what_the_builder_writes(name):
    g, _ = _tool().build_case(name)
    stored = io.load(str(BUILDER_FIXTURES / name / "graph.pb"))
    assert [(n.name, n.op, n.inputs) for n in g.graph] == \
        [(n.name, n.op, n.inputs) for n in stored]


# --- values against TensorFlow ---------------------------------------------------------------
def _session_class():
    from tfg.executor.session import Session
    return Session


@pytest.mark.parametrize("name", CASES)
def test_fixture_values_match_tensorflow(name):
    Session = _session_class()
    d = BUILDER_FIXTURES / name
    meta = json.loads((d / "case.json").read_text())
    feeds = dict(np.load(d / "feeds.npz"))
    expected = np.load(d / "expected.npz")
    sess = Session(tfg.load(str(d / "graph.pb")))
    if meta["init"]:
        sess.run([], targets=meta["init"])
    for _ in range(meta["steps"]):
        got = sess.run(meta["fetches"], feeds=feeds, targets=meta["targets"] or None)
    for f, value in zip(meta["fetches"], got):
        want = expected[f]
        assert np.shape(value) == want.shape, f
        np.testing.assert_allclose(value, want, rtol=meta["rtol"], atol=meta["atol"], err_msg=f)
