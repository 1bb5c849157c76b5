"""CSE and the arithmetic optimizer: TensorFlow's test scenarios as structure tests, and values
before/after through the Session."""
import numpy as np
import pytest

from test_pass_manager import G, assert_same, ops_of
from tfg.passes.manager import optimize
from tfg.schemas.dtypes import DType

B = DType.BOOL
X = {"x": np.array([[0.5, 2.0], [1.5, 3.0]], np.float32)}


def ar(graph, keep, passes=("arith",)):
    return optimize(graph, passes=list(passes), keep=keep, verify=True)


def test_mul_x_x_becomes_square():
    b = G().ph("x", [2, 2]).op("m", "Mul", "x", "x")
    out = ar(b.g, ["m"])
    assert out["m"].op == "Square" and out["m"].inputs == ("x",)
    assert_same(b.g, out, ["m"], X)


def test_adjacent_involutions_removed():
    b = (G().ph("c", [1, 2]).op("neg1", "Neg", "c").op("neg2", "Neg", "neg1")
         .op("recip1", "Reciprocal", "neg2").op("recip2", "Reciprocal", "recip1")
         .op("id", "Identity", "recip2"))
    out = ar(b.g, ["id"])
    assert set(ops_of(out)) == {"c", "id"} and out["id"].inputs == ("c",)


def test_involution_not_removed_across_control_edge():
    b = (G().ph("c", [1, 2]).ph("k", [1]).op("neg1", "Neg", "c").op("neg2", "Neg", "neg1")
         .op("id", "Identity", "neg2"))
    b.g["neg1"].inputs = ["c", "^k"]
    out = ar(b.g, ["id"])
    assert out["neg2"].op == "Neg" and out["neg1"].op == "Neg"


def test_add_x_x_becomes_mul_2():
    b = G().ph("x", [2, 2]).op("a", "AddV2", "x", "x")
    out = ar(b.g, ["a"])
    assert out["a"].op == "Mul"
    c = out[out["a"].data_inputs[0].node]
    assert c.op == "Const" and float(c.get_attr("value")) == 2.0
    assert_same(b.g, out, ["a"], X)


def test_cse_merges_asserts_not_checknumerics():
    b = (G().ph("x", [2, 2]).op("cn1", "CheckNumerics", "x", message=b"a")
         .op("cn2", "CheckNumerics", "x", message=b"a").op("s", "AddV2", "cn1", "cn2")
         .ph("p", [], B).const("msg", np.array([b"bad"], dtype=object), DType.STRING)
         .op("as1", "Assert", "p", "msg", T=[DType.STRING]).op("as2", "Assert", "p", "msg",
                                                                T=[DType.STRING]))
    b.g["s"].inputs = ["cn1", "cn2", "^as1", "^as2"]
    out = optimize(b.g, passes=["cse"], keep=["s"], verify=True)
    assert {"cn1", "cn2"} <= set(ops_of(out))
    assert len([n for n in out if n.op == "Assert"]) == 1


def test_cse_commutative_inputs():
    b = (G().ph("x", [2, 2]).ph("y", [2, 2]).op("a", "Mul", "x", "y").op("b", "Mul", "y", "x")
         .op("s", "Sub", "a", "b"))
    out = optimize(b.g, passes=["cse"], keep=["s"], verify=True)
    assert len([n for n in out if n.op == "Mul"]) == 1


def test_add_tree_to_addn_and_hoist_common_factor():
    b = (G().ph("x", [2, 2]).ph("y", [2, 2]).ph("z", [2, 2])
         .op("a1", "AddV2", "x", "y").op("a2", "AddV2", "a1", "z").op("tree", "Neg", "a2")
         .op("m1", "Mul", "x", "y").op("m2", "Mul", "z", "x").op("h", "AddN", "m1", "m2", N=2))
    out = ar(b.g, ["tree", "h"])
    assert out["a2"].op == "AddN" and out["a2"].get_attr("N") == 3 and "a1" not in out
    assert out["h"].op == "Mul" and "x" in {r.node for r in out["h"].data_inputs}
    feeds = {k: np.random.default_rng(i).standard_normal((2, 2)).astype(np.float32)
             for i, k in enumerate("xyz")}
    assert_same(b.g, out, ["tree", "h"], feeds)


def test_scalar_and_matrix_leaves_grouped():
    b = (G().ph("m1", [2, 2]).ph("s1", []).ph("m2", [2, 2]).ph("s2", [])
         .op("l", "AddV2", "m1", "s1").op("r", "AddV2", "m2", "s2").op("t", "AddV2", "l", "r"))
    out = ar(b.g, ["t"])
    feeds = {"m1": np.ones((2, 2), np.float32), "m2": 2 * np.ones((2, 2), np.float32),
             "s1": np.float32(3), "s2": np.float32(4)}
    assert_same(b.g, out, ["t"], feeds)
    assert "l" not in out and "r" not in out


def test_misc_rewrites_keep_values():
    f32 = np.float32
    b = (G().ph("x", [2, 2]).ph("y", [2, 2]).const("one", 1.0).const("two", 2.0)
         .const("half", 0.5)
         .op("ng", "Neg", "y").op("sub", "AddV2", "x", "ng")
         .op("sq", "Sqrt", "y").op("dv", "RealDiv", "x", "sq")
         .op("p2", "Pow", "x", "two").op("ph", "Pow", "x", "half")
         .op("xp1", "AddV2", "x", "one").op("l1p", "Log", "xp1")
         .op("ex", "Exp", "x").op("em1", "Sub", "ex", "one")
         .op("sm", "Softmax", "x").op("lsm", "Log", "sm")
         .op("eq", "Equal", "x", "y").op("ne", "LogicalNot", "eq", T=None)
         .op("cast", "Cast", "x", SrcT=DType.FLOAT, DstT=DType.FLOAT, T=None)
         .const("perm", np.array([1, 0], np.int32)).op("tr", "Transpose", "x", "perm",
                                                        Tperm=DType.INT32)
         .op("mm", "MatMul", "tr", "y"))
    b.g["eq"].set_attr("incompatible_shape_error", True)
    fetches = ["sub", "dv", "p2", "ph", "l1p", "em1", "lsm", "ne", "cast", "mm"]
    out = ar(b.g, fetches)
    ops = ops_of(out)
    assert ops["sub"] == "Sub" and ops["dv"] == "Mul" and ops["p2"] == "Square"
    assert ops["ph"] == "Sqrt" and ops["l1p"] == "Log1p" and ops["em1"] == "Expm1"
    assert ops["lsm"] == "LogSoftmax" and ops["ne"] == "NotEqual" and ops["cast"] == "Identity"
    assert out["mm"].get_attr("transpose_a") is True and "tr" not in out
    feeds = {"x": np.array([[0.5, 2.0], [1.5, 3.0]], f32),
             "y": np.array([[0.5, 1.0], [4.0, 3.0]], f32)}
    assert_same(b.g, out, fetches, feeds, rtol=1e-5, atol=1e-6)


def test_logical_not_of_float_less_is_kept_for_nan():
    b = (G().ph("x", [2]).ph("y", [2]).op("lt", "Less", "x", "y")
         .op("n", "LogicalNot", "lt", T=None))
    out = ar(b.g, ["n"])
    assert out["n"].op == "LogicalNot"


def test_reshape_of_reshape():
    i32 = DType.INT32
    b = (G().ph("x", [2, 3]).const("s1", np.array([3, 2], np.int32)).const(
        "s2", np.array([6], np.int32)).op("r1", "Reshape", "x", "s1", Tshape=i32)
         .op("r2", "Reshape", "r1", "s2", Tshape=i32))
    out = ar(b.g, ["r2"])
    assert "r1" not in out and out["r2"].data_inputs[0].node == "x"
    assert_same(b.g, out, ["r2"], {"x": np.arange(6, dtype=np.float32).reshape(2, 3)})


def _reduce_reshape(op, x_shape, axes, target, keep_dims=True, extra_consumer=False):
    i32 = DType.INT32
    b = (G().ph("x", x_shape).const("axes", np.array(axes, np.int32))
         .const("s", np.array(target, np.int32))
         .op("red", op, "x", "axes", Tidx=i32, keep_dims=keep_dims)
         .op("r", "Reshape", "red", "s", Tshape=i32))
    if extra_consumer:
        b.op("other", "Neg", "red")
    return b


@pytest.mark.parametrize("op", ["Sum", "Mean", "Max", "Min", "Prod"])
@pytest.mark.parametrize("x_shape,axes,target", [
    ([4, 1], [0], []),          # TF's bias gradient of a scalar: Sum over 0, then drop the 1
    ([4, 3], [0], [3]),         # plain keep_dims=False
    ([2, 1, 3], [2], [2]),      # a size-1 dim dropped on top
    ([2, 3, 1], [0, 1], [1]),   # keeps the last size-1 dim
])
def test_keep_dims_reduction_then_squeezing_reshape_is_one_reduction(op, x_shape, axes, target):
    """   x --red(keep_dims)--> [.., 1, ..] --Reshape(s)--> target
       => x --red(axes + dropped size-1 axes, keep_dims=False)--> target   (named r)"""
    b = _reduce_reshape(op, x_shape, axes, target)
    out = ar(b.g, ["r"])
    assert out["r"].op == op and not out["r"].get_attr("keep_dims")
    assert "red" not in out and out["r"].data_inputs[0].node == "x"
    rng = np.random.default_rng(0)
    assert_same(b.g, out, ["r"], {"x": rng.uniform(0.5, 2, x_shape).astype(np.float32)})


@pytest.mark.parametrize("case", [
    dict(x_shape=[4, 3], axes=[0], target=[3, 1]),      # the Reshape adds a dim
    dict(x_shape=[4, 3], axes=[0], target=[3], keep_dims=False),  # nothing to fold
    dict(x_shape=[4, 3], axes=[0], target=[3], extra_consumer=True),  # red read twice
    dict(x_shape=[2, 6], axes=[1], target=[1, 2]),      # a real reshape (transposing dims)
])
def test_reduction_then_reshape_not_rewritten(case):
    b = _reduce_reshape("Sum", **case)
    keep = ["r", "other"] if case.get("extra_consumer") else ["r"]
    out = ar(b.g, keep)
    assert out["r"].op == "Reshape" or not case.get("keep_dims", True), ops_of(out)
    assert "red" in out
