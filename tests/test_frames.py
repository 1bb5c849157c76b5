"""tfg.graphdef.frames: frames, loop variables and conds rebuilt from GraphDefs TensorFlow made.

Fixtures under tests/fixtures/frames come from tools/gen_frames_fixtures.py: each holds the
control-flow contexts TensorFlow's Python builder recorded for every op, which an imported
graph no longer has; `analyze` must find the same ones from the graph alone.
"""
import json

import numpy as np
import pytest

from conftest import CONFORMANCE, FIXTURES
from tfg.errors import GraphValidationError
from tfg.graphdef import frames, io
from tfg.graphdef.graph import Graph
from tfg.graphdef.names import parse_input
from tfg.schemas.dtypes import DType

FRAME_CASES = sorted(p.name for p in (FIXTURES / "frames").iterdir() if p.is_dir())


def conformance(case):
    path = CONFORMANCE / case / "graph.pb"
    if not path.exists():
        pytest.skip("../shared/conformance is not present")
    return io.load(path)


def chain(info, name):
    f = info.frame_of(name)
    return [x.name for x in reversed(f.ancestors())] + [f.name] if f else []


# --- frames of TensorFlow-made while loops ------------------------------------------------

def test_while_simple_two_sibling_frames():
    info = frames.analyze(conformance("while_simple"))
    assert sorted(info.frames) == ["while/while_context", "while_1/while_context"]
    for f in info.frames.values():
        assert f.parent is None and f.depth == 1
        assert len(f.loop_vars) == 1 and f.loop_cond.endswith("LoopCond")
        assert f.pivot == f.loop_cond and f.parallel_iterations == 10


@pytest.mark.parametrize("case", ["while_accum", "while_zero_iter"])
def test_while_accum_loop_vars(case):
    g = conformance(case)
    info = frames.analyze(g)
    (f,) = info.frames.values()
    assert f.name == "while/while_context"
    assert len(f.loop_vars) == 3 and len(f.exits) == 3 and len(f.merges) == 3
    assert len(f.constant_enters) == 2 and len(f.enters) == 5
    for v in f.loop_vars:
        assert g[v.enter].op == "Enter" and g[v.merge].op == "Merge"
        assert g[v.switch].op == "Switch" and g[v.exit].op == "Exit"
        assert g[v.next_iteration].op == "NextIteration"
        assert g[v.identity].op == "Identity"
        assert list(g[v.merge].inputs) == [v.enter, v.next_iteration]
        assert info.loop_var_of(v.exit) is v
    # The Exit runs in the frame; its consumers in the parent (root) frame.
    assert all(info.frame_of(e) is f for e in f.exits + f.enters)
    assert info.frame_of("acc") is None


def test_nested_while_nesting():
    g = conformance("nested_while")
    info = frames.analyze(g)
    outer = info.frames["while/while_context"]
    inner = info.frames["while/while/while_context"]
    assert inner.parent is outer and outer.parent is None
    assert (outer.depth, inner.depth) == (1, 2) and outer.children == [inner]
    assert info.root_frames == [outer]
    assert chain(info, "while/while/mul") == [outer.name, inner.name]
    # The inner loop's Exit feeds the outer loop's NextIteration: back in the outer frame.
    assert info.frame_of("while/while/Exit_1") is inner
    assert info.frame_of("while/NextIteration_1") is outer
    v = outer.loop_vars[0]
    assert (v.enter, v.merge, v.switch, v.exit, v.next_iteration) == (
        "while/Enter", "while/Merge", "while/Switch", "while/Exit", "while/NextIteration")
    assert inner.constant_enters == ["while/while/Less/Enter"]
    assert "while/while/add" in inner.nodes and "while/while/add" not in outer.nodes
    assert inner.nodes <= outer.all_nodes()
    rows = frames.frame_summary(info)
    assert [(r["name"], r["parent"], r["loop_vars"]) for r in rows] == [
        (outer.name, None, 2), (inner.name, outer.name, 2)]


@pytest.mark.parametrize("case", ["grad_while", "tf_grad_graph_while", "multi_device"])
def test_frames_of_other_conformance_graphs(case):
    info = frames.analyze(conformance(case))
    assert "while/while_context" in info.frames
    if case == "tf_grad_graph_while":
        grad = info.frames["gradients/while/while_context"]
        assert grad.parent is None and len(grad.loop_vars) == 3
        # The backward loop's Switches read a LoopCond named by the gradient code.
        assert grad.loop_cond == "gradients/b_count_2"


def test_graph_without_control_flow():
    info = frames.analyze(conformance("mlp_infer"))
    assert info.frames == {} and info.conds == []
    assert info.frame_of("probs") is None and info.cond_branch_of("probs") == []


# --- conds ----------------------------------------------------------------------------------

def test_cond_simple_two_conds():
    g = conformance("cond_simple_0")
    info = frames.analyze(g)
    assert [c.pred for c in info.conds] == ["Less:0", "Greater:0"]
    c0, c1 = info.conds
    assert c0.switches == ["cond/Switch", "cond/Add/Switch", "cond/Add/Switch_1",
                           "cond/Square/Switch"]
    assert c0.merges == ["cond/Merge"] and c1.merges == ["cond_1/Merge"]
    assert c0.true_nodes == {"cond/switch_t", "cond/Add"}
    assert c0.false_nodes == {"cond/switch_f", "cond/Square"}
    assert info.cond_branch_of("cond/Add") == [(c0, 1)]
    assert info.cond_branch_of("cond_1/Add") == [(c1, 0)]
    # A Switch itself runs whatever the predicate; the Merge is after the cond.
    assert info.cond_branch_of("cond/Add/Switch") == []
    assert info.cond_branch_of("out") == [] and c0.frame is None and c0.outer == ()


def test_cond_membership_through_control_edges():
    info = frames.analyze(conformance("grad_cond_0"))
    (c,) = info.conds
    assert c.pred == "p:0"
    # `cond/add/y` is a Const whose only input is ^cond/switch_f.
    assert "cond/add/y" in c.false_nodes and "cond/mul" in c.true_nodes


def test_nested_cond_outer():
    info = frames.analyze(io.load(FIXTURES / "frames" / "nested_cond" / "graph.pb"))
    outer = next(c for c in info.conds if c.pred == "p:0")
    inner = next(c for c in info.conds if c is not outer)
    assert inner.outer == ((outer, 1),)
    assert [(c.pred, b) for c, b in info.cond_branch_of("cond/cond/add")] == [
        ("p:0", 1), (inner.pred, 0)]
    assert inner.true_nodes | inner.false_nodes <= outer.true_nodes


def test_loop_switches_are_not_conds():
    info = frames.analyze(io.load(FIXTURES / "frames" / "cond_in_while" / "graph.pb"))
    (c,) = info.conds
    assert c.frame is info.frames["while/while_context"]
    assert not set(c.switches) & set(c.frame.switches)


@pytest.mark.parametrize("case", FRAME_CASES)
def test_matches_tensorflow_contexts(case):
    """Frame chains of every op, and cond branches of every forward op, as TensorFlow had them.

    (TensorFlow's builder records no CondContext for gradient ops, although a gradient
    Switch puts them in a branch just the same; those are checked by the frames only.)
    """
    folder = FIXTURES / "frames" / case
    g = io.load(folder / "graph.pb")
    info = frames.analyze(g)
    own_cond = {s: c for c in info.conds for s in c.switches}
    contexts = json.loads((folder / "contexts.json").read_text())
    assert set(contexts) == set(g.node_names())
    for name, tf_chain in contexts.items():
        assert chain(info, name) == [c[1] for c in tf_chain if c[0] == "while"], name
        if name.startswith("gradients/"):
            continue
        want = [(str(frames._canonical_pred(g, parse_input(c[1]))), c[2])
                for c in tf_chain if c[0] == "cond"]
        want = [(p if ":" in p else p + ":0", b) for p, b in want]
        # TensorFlow creates a cond's data Switches inside its branch, its pivot Switch not.
        if name in own_cond and want and want[-1][0] == own_cond[name].pred:
            want = want[:-1]
        assert [(c.pred, b) for c, b in info.cond_branch_of(name)] == want, name


# --- malformed control flow -------------------------------------------------------------------

F = DType.FLOAT


def small_loop(g, frame=b"f", loop_cond=True, nxt_to_merge=True):
    g.add_node("x", "Const", attrs={"dtype": F, "value": np.array(1, np.float32)})
    g.add_node("e", "Enter", ["x"], {"T": F, "frame_name": frame})
    g.add_node("m", "Merge", ["e", "n"], {"T": F, "N": 2})
    g.add_node("c", "Less", ["m", "m"], {"T": F})
    g.add_node("lc", "LoopCond" if loop_cond else "Identity", ["c"])
    g.add_node("s", "Switch", ["m", "lc"], {"T": F})
    g.add_node("i", "Identity", ["s:1"], {"T": F})
    g.add_node("n", "NextIteration", ["i"], {"T": F})
    g.add_node("ex", "Exit", ["s"], {"T": F})
    if not nxt_to_merge:
        g["m"].inputs = ["e", "e"]
        g.add_node("sink", "Identity", ["n"], {"T": F})
    return g


def test_small_loop_is_valid():
    info = frames.analyze(small_loop(Graph()))
    (v,) = info.frames["f"].loop_vars
    assert (v.enter, v.merge, v.switch, v.exit, v.next_iteration, v.identity) == (
        "e", "m", "s", "ex", "n", "i")


def with_node(name, op, inputs, attrs=None):
    def build():
        g = small_loop(Graph())
        g.add_node("k", "Const", attrs={"dtype": DType.INT32, "value": np.int32(1)})
        g.add_node(name, op, inputs, attrs or {})
        return g
    return build


@pytest.mark.parametrize("build, message", [
    (with_node("bad_exit", "Exit", ["x"], {"T": F}), "not inside a while loop"),
    (lambda: small_loop(Graph(), nxt_to_merge=False), "does not feed a Merge"),
    (lambda: small_loop(Graph(), loop_cond=False), "has no LoopCond"),
    (with_node("mm", "Merge", ["x", "k"], {"T": F, "N": 2}), "joins float"),
    (with_node("sw", "Switch", ["x"], {"T": F}), "no predicate"),
    (with_node("mix", "AddV2", ["x", "i"], {"T": F}), "different frames"),
    (with_node("e2", "Enter", ["i"], {"T": F, "frame_name": b"f"}), "other Enters come from"),
    (with_node("e3", "Enter", ["x"], {"T": F}), "no frame_name"),
])
def test_malformed_control_flow(build, message):
    with pytest.raises(GraphValidationError, match=message):
        frames.analyze(build())


def test_control_trigger_leaves_the_branch():
    g = Graph()
    g.add_node("p", "Placeholder", attrs={"dtype": DType.BOOL})
    g.add_node("x", "Placeholder", attrs={"dtype": F})
    g.add_node("sw", "Switch", ["x", "p"], {"T": F})
    g.add_node("a", "Neg", ["sw:1"], {"T": F})
    g.add_node("t", "ControlTrigger", ["^a"])
    info = frames.analyze(g)
    assert [b for _, b in info.cond_branch_of("a")] == [1]
    assert info.cond_branch_of("t") == []


# --- Enter attrs of the wrong kind (issue #10) --------------------------------------------------

def _enter_attr(attr, value, kind=None):
    g = small_loop(Graph())
    g["e"].set_attr(attr, value, kind)
    return g


@pytest.mark.parametrize("attr, value, kind, message", [
    ("frame_name", np.ones(3, np.float32), None, "'frame_name' must be a string, but the "
     "AttrValue holds a tensor"),
    ("frame_name", 7, None, "'frame_name' must be a string, but the AttrValue holds an int"),
    ("frame_name", [b"f", b"g"], "list(s)", "must be a string, but the AttrValue holds a list"),
    ("frame_name", b"\xff\xfe", None, "is not UTF-8"),
    ("is_constant", np.ones(3, np.float32), None, "'is_constant' must be a bool"),
    ("is_constant", b"yes", None, "'is_constant' must be a bool, but the AttrValue holds a string"),
    ("parallel_iterations", np.ones(3, np.int32), None, "'parallel_iterations' must be an int"),
    ("parallel_iterations", 2.5, None, "'parallel_iterations' must be an int"),
    ("parallel_iterations", DType.FLOAT, None, "'parallel_iterations' must be an int"),
])
def test_enter_attr_of_the_wrong_kind_names_the_node(attr, value, kind, message):
    with pytest.raises(GraphValidationError, match=message) as e:
        frames.analyze(_enter_attr(attr, value, kind))
    assert "'e'" in str(e.value) and "\n" not in str(e.value)


def test_empty_attr_value_is_refused_not_read_as_default():
    g = small_loop(Graph())
    g["e"].attr["is_constant"].Clear()  # present, but holds nothing
    with pytest.raises(GraphValidationError, match="holds nothing"):
        frames.analyze(g)


def test_enter_attrs_of_the_right_kind_are_read():
    g = _enter_attr("parallel_iterations", 3)
    g["e"].set_attr("is_constant", False)
    f = frames.analyze(g).frames["f"]
    assert f.parallel_iterations == 3 and f.constant_enters == []
    g["e"].set_attr("is_constant", True)
    assert frames.analyze(g).frames["f"].constant_enters == ["e"]


def test_merge_input_with_a_tensor_dtype_attr_is_not_a_crash():
    g = small_loop(Graph())
    g.add_node("u", "MyUnknownOp", attrs={"T": np.ones(2, np.float32)})
    g.add_node("mu", "Merge", ["u", "x"], {"T": F, "N": 2})
    info = frames.analyze(g)  # an unknown op's T that is not a type says nothing
    assert info.frame_of("mu") is None


def test_the_cli_reports_a_malformed_enter_with_one_line(tmp_path):
    """partition refuses (exit 2, the node named); info and render describe the graph anyway,
    with the problem in the summary (they work on malformed control flow by design)."""
    from helpers import tfg_cli

    path = tmp_path / "g.pb"
    io.save(_enter_attr("frame_name", np.ones(3, np.float32)), str(path))
    out = tmp_path / "p.pb"
    p = tfg_cli("partition", path, "--devices", "cpu:2", "-o", out, check=False)
    err = p.stderr.decode()
    assert p.returncode == 2 and not out.exists(), err
    assert err.strip().count("\n") == 0 and "'e'" in err and "Traceback" not in err
    p = tfg_cli("info", path, check=False)
    assert p.returncode == 0, p.stderr
    assert b"control flow: malformed: Enter 'e': attr 'frame_name'" in p.stdout
    p = tfg_cli("render", path, "-o", tmp_path / "r.dot", check=False)
    assert p.returncode == 0, p.stderr
