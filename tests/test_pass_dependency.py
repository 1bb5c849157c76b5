"""The dependency optimizer: exact rewrites, equal outputs, and what must not change."""
import numpy as np

from tfg.schemas.dtypes import DType

from test_pass_manager import G, assert_same, ops_of
from tfg.passes.manager import optimize

X = {"x": np.arange(3, dtype=np.float32)}


def dep(graph, keep):
    return optimize(graph, passes=["dependency"], keep=keep, verify=True)


def test_node_only_waited_on_becomes_noop_then_bypassed():
    # x -> a=Neg(x) ..control..> t=NoOp ; y = Exp(x, ^t)
    b = (G().ph("x", [3]).op("a", "Neg", "x").op("t", "NoOp", "^a", T=None)
         .op("y", "Exp", "x", "^t"))
    out = dep(b.g, ["y"])
    assert set(ops_of(out)) == {"x", "y"}      # a -> NoOp(^x), both bypassed, ^x redundant
    assert list(out["y"].inputs) == ["x"]
    assert_same(b.g, out, ["y"], X)


def test_transitive_reduction():
    # a = Neg(x); b = Neg(a); n = Exp(b, ^a): ^a is implied by b
    b = G().ph("x", [3]).op("a", "Neg", "x").op("b", "Neg", "a").op("n", "Exp", "b", "^a")
    out = dep(b.g, ["n"])
    assert list(out["n"].inputs) == ["b"]
    assert_same(b.g, out, ["n"], X)


def test_identity_bypassed_and_its_control_moves():
    # i = Identity(a, ^c); n = Exp(i)  ->  n = Exp(a, ^c)
    b = (G().ph("x", [3]).op("a", "Neg", "x").op("c", "Sqrt", "x").op("i", "Identity", "a", "^c")
         .op("n", "Exp", "i"))
    out = dep(b.g, ["n", "c"])
    assert "i" not in out
    assert list(out["n"].inputs) == ["a", "^c"]
    assert_same(b.g, out, ["n"], X)


def test_must_not_rewrite_side_effects_kept_and_refs():
    # Assert only waited on stays; a kept node stays; a variable read (ref) stays an Identity
    b = (G().ph("x", [3]).op("p", "All", "cond", "ax", T=None)
         .const("cond", [True]).const("ax", [0], DType.INT32)
         .op("chk", "Assert", "p", "x", T=[1]).op("y", "Exp", "x", "^chk"))
    b.g["chk"].set_attr("T", [b.g["x"].get_attr("dtype")])
    out = dep(b.g, ["y"])
    assert out["chk"].op == "Assert" and "^chk" in out["y"].inputs
    b2 = G().ph("x", [3]).op("a", "Neg", "x").op("y", "Exp", "x", "^a")
    out2 = dep(b2.g, ["y", "a"])
    assert out2["a"].op == "Neg"


def test_stateful_writer_is_not_noop():
    from tfg.graphdef.attrs import Shape
    b = G().const("z", [0.0, 0.0])
    b.g.add_node("w", "VariableV2", [], {"dtype": DType.FLOAT, "shape": Shape([2])})
    b.op("assign", "Assign", "w", "z").op("init", "NoOp", "^assign", T=None)
    out = dep(b.g, ["init"])
    assert out["assign"].op == "Assign"
