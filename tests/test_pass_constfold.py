"""Constant folding: TensorFlow's own test scenarios as structure tests, plus values compared
before/after with the Session."""
import numpy as np

from test_pass_manager import G, assert_same, ops_of, run
from tfg.passes.manager import optimize
from tfg.schemas.dtypes import DType

I32 = DType.INT32


def cf(graph, keep, passes=("constfold",)):
    return optimize(graph, passes=list(passes), keep=keep, verify=True)


def test_addn_chain_folds_to_one_const():
    b = (G().const("a", 1.0).const("b", 2.0).op("c", "AddN", "a", "b", N=2)
         .op("d", "AddN", "b", "c", N=2))
    out = cf(b.g, ["d"])
    assert ops_of(out) == {"d": "Const"}
    assert float(out["d"].get_attr("value")) == 5.0


def test_size_rank_shape_materialized_with_control_deps():
    b = (G().ph("v3", [11, 13]).ph("v1", [3]).ph("v2", [5, 7])
         .op("s", "Size", "v3", out_type=I32).op("r", "Rank", "v1").op("sh", "Shape", "v2",
                                                                        out_type=I32)
         .op("p", "Mul", "s", "r", T=I32).op("out", "Mul", "p", "sh", T=I32))
    out = cf(b.g, ["out"])
    node = out["out"]
    assert node.op == "Const"
    assert node.get_attr("value").tolist() == [715, 1001]
    assert set(node.control_inputs) == {"v3", "v1", "v2"}


def test_div_by_float_const_becomes_mul_but_int_div_stays():
    b = (G().ph("xf", [2]).const("two", 2.0).op("df", "Div", "xf", "two")
         .ph("xi", [2], I32).const("twoi", 2, I32).op("di", "Div", "xi", "twoi", T=I32))
    out = cf(b.g, ["df", "di"])
    assert out["df"].op == "Mul" and out["di"].op == "Div"
    mul_const = out[out["df"].data_inputs[1].node]
    assert float(mul_const.get_attr("value")) == 0.5
    feeds = {"xf": np.array([3.0, -1.0], np.float32), "xi": np.array([7, -3], np.int32)}
    assert_same(b.g, out, ["df", "di"], feeds)


def test_constant_push_down():
    b = (G().ph("x", [2, 2]).const("c1", 1.0).const("c2", 2.0).op("inner", "AddV2", "c2", "x")
         .op("add", "AddV2", "c1", "inner")
         .const("c4", 4.0).const("c5", 5.0).op("m_in", "Mul", "x", "c4").op("mul", "Mul", "c5",
                                                                          "m_in")
         .const("c4b", 4.0).const("c5b", 5.0).op("a_in", "AddV2", "c4b", "x")
         .op("mixed", "Mul", "c5b", "a_in"))
    out = cf(b.g, ["add", "mul", "mixed"])
    add = out["add"]
    assert add.data_inputs[0].node == "x" and "inner" not in out
    assert float(out[add.data_inputs[1].node].get_attr("value")) == 3.0
    assert float(out[out["mul"].data_inputs[1].node].get_attr("value")) == 20.0
    assert out["mixed"].op == "Mul" and "a_in" in out  # 5 * (4 + x) is left alone
    assert_same(b.g, out, ["add", "mul", "mixed"], {"x": np.arange(4, dtype=np.float32).reshape(2, 2)})


def test_neutral_elements_and_times_zero():
    b = (G().ph("x", [2, 3]).const("one", 1.0).const("zero", 0.0).const("zrow", np.zeros(3))
         .op("m1", "Mul", "x", "one").op("a0", "AddV2", "zero", "m1").op("o1", "Neg", "a0")
         .op("n", "Neg", "x").op("z", "Mul", "n", "zrow").op("s0", "Sub", "zero", "x").op("rc", "RealDiv", "one", "x"))
    out = cf(b.g, ["o1", "z", "s0", "rc"])
    assert out["o1"].inputs == ("x",)
    assert out["z"].op == "Const" and out["z"].get_attr("value").shape == (2, 3)
    assert out["z"].control_inputs == ["n"]  # x * 0 still waits for x
    assert out["s0"].op == "Neg" and out["rc"].op == "Reciprocal"
    assert_same(b.g, out, ["o1", "z", "s0", "rc"], {"x": np.arange(1, 7, dtype=np.float32).reshape(2, 3)})


def test_mul_one_is_a_snapshot_where_a_node_writes_a_variable():
    # TensorFlow's constant folding: Snapshot (a copy) instead of forwarding x when the graph
    # has a node writing an input in place (w's read is w's buffer, AssignAdd writes it).
    g = G()
    g.g.add_node("w", "VariableV2", [], {"dtype": DType.FLOAT, "shape": (2,)})
    g.const("one", 1.0).const("ones", np.ones(2)).op("read", "Identity", "w")
    g.op("m", "Mul", "read", "one").op("add", "AssignAdd", "w", "ones", "^m")
    out = cf(g.g, ["m", "add"])
    assert out["m"].op == "Snapshot" and out["m"].inputs[0] == "read"
    plain = G().ph("x", [2]).const("one", 1.0).op("m", "Mul", "x", "one").op("n", "Neg", "m")
    assert cf(plain.g, ["n"])["n"].inputs == ("x",)  # no writer: forwarded, as before


def test_mul_one_that_widens_becomes_broadcast_to():
    b = G().ph("x", [3]).const("ones", np.ones((2, 3))).op("m", "Mul", "x", "ones")
    out = cf(b.g, ["m"])
    assert out["m"].op == "BroadcastTo"
    assert_same(b.g, out, ["m"], {"x": np.array([1.0, 2.0, 3.0], np.float32)})


def test_identity_shape_ops_and_pack_one():
    b = (G().ph("x", [2, 3]).const("perm", [0, 1], I32).op("t", "Transpose", "x", "perm",
                                                           Tperm=I32)
         .const("mult", [1, 1], I32).op("tile", "Tile", "t", "mult", Tmultiples=I32)
         .const("ax", np.zeros(0, np.int32)).op("sum", "Sum", "tile", "ax", Tidx=I32)
         .op("pk", "Pack", "sum", N=1, axis=0))
    out = cf(b.g, ["pk"])
    assert out["pk"].op == "ExpandDims" and out["pk"].data_inputs[0].node == "x"
    assert not {"t", "tile", "sum"} & set(ops_of(out))
    assert_same(b.g, out, ["pk"], {"x": np.arange(6, dtype=np.float32).reshape(2, 3)})


def test_concat_of_adjacent_constants():
    b = (G().ph("x", [1]).const("a", [1.0]).const("b", [2.0]).const("axis", 0, I32)
         .op("cat", "ConcatV2", "x", "a", "b", "axis", N=3, Tidx=I32))
    out = cf(b.g, ["cat"])
    assert out["cat"].get_attr("N") == 2
    assert_same(b.g, out, ["cat"], {"x": np.array([5.0], np.float32)})


def test_never_folds_placeholder_with_default_or_stateful():
    b = (G().const("d", [1.0, 2.0]).op("pwd", "PlaceholderWithDefault", "d", dtype=DType.FLOAT,
                                        shape=[2]).op("y", "Neg", "pwd")
         .const("shape", [2], I32).op("r", "RandomUniform", "shape", T=I32, dtype=DType.FLOAT)
         .op("rn", "Neg", "r"))
    out = cf(b.g, ["y", "rn"])
    assert out["pwd"].op == "PlaceholderWithDefault" and out["y"].op == "Neg"
    assert out["r"].op == "RandomUniform"


def test_size_limit_refuses_large_outputs():
    b = (G().const("dims", [300, 300], I32).const("v", 1.0)
         .op("big", "Fill", "dims", "v", index_type=I32).op("o", "Neg", "big"))
    out = cf(b.g, ["o"])
    assert out["big"].op == "Fill"  # 360 KB from 12 bytes of inputs


def test_fold_keeps_control_inputs_and_switch_dependency_goes_through_identity():
    b = (G().ph("x", [2, 2]).ph("p", [], DType.BOOL).op("sw", "Switch", "x", "p")
         .op("shp", "Shape", "sw:1", out_type=I32).op("o", "Neg", "shp", T=I32))
    out = cf(b.g, ["o"])
    assert out["o"].op == "Const"
    assert out["o"].control_inputs == ["ConstantFoldingCtrl/sw_1"]
    assert out["ConstantFoldingCtrl/sw_1"].inputs == ("sw:1",)


def test_switch_with_constant_predicate_drops_dead_branch():
    b = (G().ph("x", [2]).const("p", True).op("sw", "Switch", "x", "p")
         .op("f", "Neg", "sw:0").op("t", "Exp", "sw:1").op("m", "Merge", "f", "t", N=2)
         .op("out", "Identity", "m"))
    out = cf(b.g, ["out"])
    assert "f" not in out and "sw" not in out
    assert out["t"].inputs == ("x",)
    assert_same(b.g, out, ["out"], {"x": np.array([0.5, 1.0], np.float32)})


def test_mul_of_conv_by_constant_folds_into_filter():
    rng = np.random.default_rng(0)
    b = (G().ph("x", [1, 5, 5, 2]).const("w", rng.standard_normal((3, 3, 2, 4)))
         .op("conv", "Conv2D", "x", "w", strides=[1, 1, 1, 1], padding=b"SAME")
         .const("c", np.array([1.0, 2.0, 3.0, 4.0])).op("m", "Mul", "conv", "c"))
    out = cf(b.g, ["m"])
    assert out["m"].op == "Conv2D" and "conv" not in out
    assert_same(b.g, out, ["m"], {"x": rng.standard_normal((1, 5, 5, 2)).astype(np.float32)},
                rtol=1e-4, atol=1e-4)


def test_fed_const_is_not_folded():
    b = G().const("c", 2.0).op("y", "Neg", "c")
    out = optimize(b.g, passes=["constfold"], keep=["y"], feeds=["c"], verify=True)
    assert out["y"].op == "Neg"
    assert run(out, ["y"], {"c": np.float32(3.0)})[0] == -3.0


def test_large_output_is_refused_before_it_is_evaluated(monkeypatch):
    # 16 MiB from 12 bytes of inputs: the size comes from shape inference, the kernel never
    # runs (it would allocate the whole tensor to find out).
    from tfg.passes.constfold import fold

    evaluated = []
    real = fold.evaluate
    monkeypatch.setattr(fold, "evaluate", lambda node, ins: evaluated.append(node.op)
                        or real(node, ins))
    b = (G().const("dims", [1 << 12, 1 << 10], I32).const("v", 1.0)
         .op("big", "Fill", "dims", "v", index_type=I32).op("o", "Neg", "big")
         .const("two", [2], I32).op("small", "Fill", "two", "v", index_type=I32)
         .op("o2", "Neg", "small"))
    out = cf(b.g, ["o", "o2"])
    assert out["big"].op == "Fill" and "Fill" in evaluated  # only the small one ran
    assert evaluated.count("Fill") == 1 and out["o2"].op == "Const"


def test_output_nbytes_from_shapes_without_running():
    from tfg.passes.constfold.fold import output_nbytes

    b = (G().const("dims", [1 << 14, 1 << 13], I32).const("v", 1.0)
         .op("big", "Fill", "dims", "v", index_type=I32)
         .const("m", [[1.0, 2.0]]).const("mult", [3, 1000], I32).op("t", "Tile", "m", "mult"))
    dims, v = np.array([1 << 14, 1 << 13], np.int32), np.float32(1.0)
    assert output_nbytes(b.g["big"], [dims, v]) == (1 << 27) * 4
    m, mult = np.ones((1, 2), np.float32), np.array([3, 1000], np.int32)
    assert output_nbytes(b.g["t"], [m, mult]) == 3 * 2000 * 4
