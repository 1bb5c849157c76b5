"""The loop optimizer: stack pushes without pops, zero-iteration loops, constant switches."""
import numpy as np

from test_pass_manager import G, assert_same
from tfg.passes.manager import optimize
from tfg.schemas.dtypes import DType

X = {"x": np.arange(3, dtype=np.float32)}


def lo(graph, keep):
    return optimize(graph, passes=["loop"], keep=keep, verify=True)


def _stack(b, pop=False):
    # h = StackV2(10); p = StackPushV2(h, x); y = Neg(p) [; q = StackPopV2(h)]
    b.const("n", 10, DType.INT32)
    b.g.add_node("h", "StackV2", ["n"], {"elem_type": DType.FLOAT})
    b.op("p", "StackPushV2", "h", "x").op("y", "Neg", "p")
    if pop:
        b.g.add_node("q", "StackPopV2", ["h", "^y"], {"elem_type": DType.FLOAT})
    return b


def test_push_without_pop_becomes_identity():
    b = _stack(G().ph("x", [3]))
    out = lo(b.g, ["y"])
    assert out["p"].op == "Identity" and list(out["p"].inputs) == ["x", "^h"]
    assert_same(b.g, out, ["y"], X)


def test_push_with_pop_is_kept():
    b = _stack(G().ph("x", [3]), pop=True)
    out = lo(b.g, ["y", "q"])
    assert out["p"].op == "StackPushV2"


def _loop(limit_a, limit_b, stateful=False):
    # i0 = Const 0 ; e = Enter(x); ei = Enter(i0)
    # mi = Merge(ei, ni); m = Merge(e, nx); c = LoopCond(Less(Enter(a), Enter(b)))
    # si = Switch(mi, c); s = Switch(m, c); out = Exit(s:0); outi = Exit(si:0)
    # body: bx = Neg(Identity(s:1)) -> nx ; bi = AddV2(Identity(si:1), 1) -> ni
    fr = {"frame_name": b"L", "T": DType.FLOAT}
    b = G().ph("x", [3]).const("a", limit_a).const("b", limit_b)
    b.op("e", "Enter", "x", **fr).op("ea", "Enter", "a", is_constant=True, **fr)
    b.op("eb", "Enter", "b", is_constant=True, **fr)
    b.op("m", "Merge", "e", "nx", N=2).op("lt", "Less", "ea", "eb")
    if stateful:
        b.g["lt"].inputs = ["m", "eb"]  # condition depends on the (fed) loop variable
    b.op("c", "LoopCond", "lt", T=None).op("s", "Switch", "m", "c")
    b.op("out", "Exit", "s").op("id", "Identity", "s:1").op("bx", "Neg", "id")
    b.op("nx", "NextIteration", "bx").op("y", "Exp", "out")
    return b


def test_zero_iteration_loop_removed():
    b = _loop(5.0, 3.0)
    out = lo(b.g, ["y"])
    assert out["out"].op == "Identity" and list(out["out"].inputs) == ["x"]
    assert not any(n.op in ("Enter", "Merge", "Switch", "NextIteration") for n in out)
    assert_same(b.g, out, ["y"], X)


def test_loop_that_may_run_is_kept():
    b = _loop(1.0, 3.0)           # 1 < 3: it runs (forever here; never executed)
    out = lo(b.g, ["y"])
    assert out["out"].op == "Exit" and out["m"].op == "Merge"
    b2 = _loop(5.0, 3.0, stateful=True)   # depends on x: not provable
    out2 = lo(b2.g, ["y"])
    assert out2["out"].op == "Exit"


def test_constant_switch_branch_removed_merge_becomes_identity():
    # s = Switch(x, true); a = Neg(s:0); t = Exp(s:1); m = Merge(a, t)
    b = (G().ph("x", [3]).const("p", True).op("s", "Switch", "x", "p")
         .op("a", "Neg", "s:0").op("t", "Exp", "s:1").op("m", "Merge", "a", "t", N=2))
    out = lo(b.g, ["m"])
    assert "a" not in out and out["m"].op == "Identity"
    assert list(out["t"].inputs) == ["x"]
    assert_same(b.g, out, ["m"], X)
