"""`prune` (minimal subgraph) and the model-pruner pass."""
import numpy as np
import pytest

from test_pass_manager import G, assert_same, ops_of
from tfg.errors import TfgInputError
from tfg.passes.manager import optimize
from tfg.passes.prune import prune
from tfg.schemas.dtypes import DType


def _chain():
    # TensorFlow's pruner test: a -> Sqrt b -> Identity c -> Identity d, fetch c.
    return G().ph("a", [2]).op("b", "Sqrt", "a").op("c", "Identity", "b").op("d", "Identity", "c")


def test_prune_keeps_fanin_of_fetch():
    out = prune(_chain().g, fetches=["c"])
    assert set(ops_of(out)) == {"a", "b", "c"}


def test_model_pruner_with_fetch_keeps_abc():
    out = optimize(_chain().g, passes=["prune"], keep=["c"], verify=True)
    assert set(ops_of(out)) == {"a", "b", "c"}


def test_feed_cuts_producers_and_becomes_placeholder():
    out = prune(_chain().g, fetches=["d"], feeds=["b:0"])
    assert set(ops_of(out)) == {"b", "c", "d"}
    assert out["b"].op == "Placeholder" and out["b"].get_attr("dtype") == DType.FLOAT
    assert out["b"].get_attr("shape") == (2,)


def test_control_deps_kept_and_targets():
    b = G().ph("x", [1]).op("side", "Neg", "x").op("y", "Exp", "x").op("z", "Neg", "x")
    b.g["y"].inputs = ["x", "^side"]
    out = prune(b.g, fetches=["y"])
    assert set(ops_of(out)) == {"x", "side", "y"}
    out = prune(b.g, targets=["z"])
    assert set(ops_of(out)) == {"x", "z"}


def test_prune_errors():
    with pytest.raises(TfgInputError):
        prune(_chain().g, fetches=["nope"])
    with pytest.raises(TfgInputError):
        prune(_chain().g)


def test_bypasses_identity_stopgradient_addn_noop():
    b = (G().ph("x", [2]).op("i", "Identity", "x").op("s", "StopGradient", "i")
         .op("n", "AddN", "s", N=1).op("out", "Neg", "n").op("noop", "NoOp"))
    b.g["out"].inputs = ["n", "^noop"]
    out = optimize(b.g, passes=["prune"], keep=["out"], verify=True)
    assert set(ops_of(out)) == {"x", "out"} and out["out"].inputs == ("x",)
    assert_same(b.g, out, ["out"], {"x": np.array([1.0, -2.0], np.float32)})


def test_identity_kept_when_fed_by_switch_feeding_merge_or_crossing_devices():
    b = (G().ph("x", [2]).ph("p", [], DType.BOOL).op("sw", "Switch", "x", "p")
         .op("i_sw", "Identity", "sw:1").op("t", "Neg", "i_sw")
         .op("f", "Identity", "sw:0").op("m", "Merge", "f", "t", N=2)
         .op("cross", "Identity", "x", device="/device:CPU:1").op("o2", "Neg", "cross"))
    out = optimize(b.g, passes=["prune"], keep=["m", "o2"], verify=True)
    assert {"i_sw", "f", "cross"} <= set(ops_of(out))


def test_identity_of_ref_is_kept():
    b = G()
    b.g.add_node("v", "VariableV2", [], {"dtype": DType.FLOAT, "shape": (2,)})
    b.op("read", "Identity", "v").op("o", "Neg", "read")
    out = optimize(b.g, passes=["prune"], keep=["o"], verify=True)
    assert "read" in out
