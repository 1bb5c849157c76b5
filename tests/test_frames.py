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
    g.add_node("x", "Const", attrs={"dtype": F, "value": np.float32(1)})
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
