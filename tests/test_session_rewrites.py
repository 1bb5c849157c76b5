"""Session-time graph rewrites (tfg/passes/step_rewrite.py) and the affine folds
(tfg/passes/affine.py): the structure a Session runs, values against the graph run as given
and against TensorFlow's fixtures, and what the rewrites must keep exactly (feeds, fetches,
targets, variables)."""
import collections
import json

import numpy as np
import pytest

from conftest import FIXTURES
from test_pass_manager import G, assert_same
import tfg
from tfg.errors import TfgInputError
from tfg.executor import Session
from tfg.passes.manager import optimize
from tfg.schemas.dtypes import DType

RNG = np.random.default_rng(11)
CONV = {"strides": [1, 1, 1, 1], "padding": b"SAME"}
PIPE = ["constfold", "affine", "remap"]


def _vec(n, lo=0.5, hi=1.5):
    return RNG.uniform(lo, hi, n).astype(np.float32)


def _bn_chain(base="Conv2D", act="Relu", shift_op="AddV2", bias=False):
    """x -> base -> [BiasAdd] -> Mul(scale) -> shift_op(shift) -> act, as Keras writes an
    inference batch norm (scale, shift with a [1, 1, 1, C] and a [C] shape)."""
    if base == "MatMul":
        b = G().ph("x", [2, 5]).const("w", RNG.standard_normal((5, 4)))
        b.op("base", "MatMul", "x", "w", transpose_a=False, transpose_b=False)
        channels, scale_shape = 4, (1, 4)
    elif base == "DepthwiseConv2dNative":
        b = G().ph("x", [2, 6, 6, 3]).const("w", RNG.standard_normal((3, 3, 3, 2)))
        b.op("base", base, "x", "w", **CONV)
        channels, scale_shape = 6, (1, 1, 1, 6)
    else:
        b = G().ph("x", [2, 6, 6, 3]).const("w", RNG.standard_normal((3, 3, 3, 4)))
        b.op("base", base, "x", "w", **CONV)
        channels, scale_shape = 4, (1, 1, 1, 4)
    top = "base"
    if bias:
        b.const("b", RNG.standard_normal(channels)).op("biased", "BiasAdd", "base", "b")
        top = "biased"
    b.const("scale", _vec(channels).reshape(scale_shape)).op("mul", "Mul", top, "scale")
    b.const("t", RNG.standard_normal(channels)).op("shift", shift_op, "mul", "t")
    if act:
        b.op("act", act, "shift")
    return b, ("act" if act else "shift")


def _feeds(b):
    shape = b.g["x"].get_attr("shape")
    return {"x": RNG.standard_normal(shape).astype(np.float32)}


@pytest.mark.parametrize("base,act,shift_op,bias", [
    ("Conv2D", "Relu", "AddV2", False),
    ("Conv2D", "Relu6", "Sub", True),
    ("DepthwiseConv2dNative", "Relu6", "AddV2", False),
    ("DepthwiseConv2dNative", None, "Sub", True),
    ("MatMul", "Relu", "Add", True),
])
def test_batch_norm_folds_into_one_fused_op(base, act, shift_op, bias):
    b, out_name = _bn_chain(base, act, shift_op, bias)
    out = optimize(b.g, passes=PIPE, keep=[out_name], verify=True, extra={"tfg_kernels": True})
    node = out[out_name]
    assert node.op == "_Fused" + base
    assert node.get_attr("fused_ops") == [b"BiasAdd"] + ([act.encode()] if act else [])
    assert collections.Counter(n.op for n in out) == {
        "Placeholder": 1, "Const": 2, "_Fused" + base: 1}
    assert_same(b.g, out, [out_name], _feeds(b), rtol=1e-4, atol=1e-5)


def test_affine_refuses_what_is_not_per_channel():
    b = G().ph("x", [1, 4, 4, 3]).const("w", RNG.standard_normal((1, 1, 3, 4)))
    b.op("conv", "Conv2D", "x", "w", **CONV)
    b.const("s", _vec(4 * 4).reshape(1, 4, 1, 4)).op("mul", "Mul", "conv", "s")  # varies on W
    b.const("t", _vec(4)).op("sub", "Sub", "t", "mul")  # t - y is not a bias
    out = optimize(b.g, passes=["affine"], keep=["sub"], verify=True)
    assert out["mul"].op == "Mul" and out["sub"].op == "Sub"
    # A filter another node also reads is not rescaled for one of them.
    b2 = G().ph("x", [1, 4, 4, 3]).const("w", RNG.standard_normal((1, 1, 3, 4)))
    b2.op("conv", "Conv2D", "x", "w", **CONV).op("conv2", "Conv2D", "x", "w", **CONV)
    b2.const("s", _vec(4)).op("mul", "Mul", "conv", "s").op("sum", "AddV2", "mul", "conv2")
    out2 = optimize(b2.g, passes=["affine"], keep=["sum"], verify=True)
    assert out2["conv"].data_inputs[1].node != "w" and out2["conv2"].data_inputs[1].node == "w"
    assert_same(b2.g, out2, ["sum"], {"x": np.ones((1, 4, 4, 3), np.float32)})


def test_bare_activation_gets_a_zero_bias():
    b = G().ph("x", [1, 5, 5, 3]).const("w", RNG.standard_normal((3, 3, 3, 2)))
    b.op("conv", "DepthwiseConv2dNative", "x", "w", **CONV).op("act", "Relu6", "conv")
    out = optimize(b.g, passes=["remap"], keep=["act"], verify=True,
                   extra={"tfg_kernels": True})
    assert out["act"].op == "_FusedDepthwiseConv2dNative"
    assert out["act"].get_attr("fused_ops") == [b"BiasAdd", b"Relu6"]
    assert_same(b.g, out, ["act"], _feeds(b))
    # What `tfg optimize` writes for TensorFlow: its CPU build has no fused depthwise kernel.
    out2 = optimize(b.g, passes=["remap"], keep=["act"], verify=True)
    assert out2["act"].op == "Relu6" and out2["conv"].op == "DepthwiseConv2dNative"


def test_session_runs_the_rewritten_subgraph():
    b, out_name = _bn_chain("Conv2D", "Relu", "AddV2", True)
    b.op("unused", "Exp", "x")
    feeds = _feeds(b)
    on, off = Session(b.g), Session(b.g, graph_rewrites=False)
    np.testing.assert_allclose(on.run(out_name, feeds), off.run(out_name, feeds), rtol=1e-4,
                               atol=1e-5)
    (rw,) = on.rewrites
    assert rw.skipped == "" and rw.before == 9 and rw.after == 4
    assert {n.op for n in rw.graph} == {"Placeholder", "Const", "_FusedConv2D"}
    assert "unused" not in rw.graph  # the fetched subgraph only
    assert "graph rewrites: 9 -> 4 nodes" in rw.summary()
    assert off.rewrites == []


def test_fetched_and_fed_nodes_are_kept_exactly():
    b, _ = _bn_chain("Conv2D", "Relu", "AddV2")
    feeds = _feeds(b)
    off = Session(b.g, graph_rewrites=False)
    on = Session(b.g)
    # An intermediate fetched beside the output: it keeps its value, so no fusion through it.
    want = off.run(["mul", "act"], feeds)
    got = on.run(["mul", "act"], feeds)
    for w, g in zip(want, got):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
    assert on.rewrites[-1].graph["mul"].op in ("Mul", "Conv2D")
    # A Const fed over: the fed value is used, not the folded constant.
    scale = np.full((1, 1, 1, 4), 2.0, np.float32)
    got = on.run("act", {**feeds, "scale": scale})
    np.testing.assert_allclose(got, off.run("act", {**feeds, "scale": scale}), rtol=1e-5)
    assert on.rewrites[-1].graph["scale"].op == "Placeholder"
    # An interior tensor fed: what produces it is not run, what reads it is rewritten.
    got = on.run("act", {"base": np.ones((2, 6, 6, 4), np.float32)})
    np.testing.assert_allclose(got, off.run("act", {"base": np.ones((2, 6, 6, 4), np.float32)}),
                               rtol=1e-5)
    assert "x" not in on.rewrites[-1].graph


def test_variables_and_targets_are_untouched():
    # v += c * 2 each step (c a constant chain the rewrite folds); fetch v's value.
    g = G().const("c", np.float32(1.5)).const("two", np.float32(2.0)).g
    g.add_node("v", "VariableV2", [], {"dtype": DType.FLOAT, "shape": tfg.graphdef.attrs.Shape(
        ()), "container": b"", "shared_name": b""})
    g.add_node("init", "Assign", ["v", "c"], {"T": DType.FLOAT})
    g.add_node("inc", "Mul", ["c", "two"], {"T": DType.FLOAT})
    g.add_node("step", "AssignAdd", ["v", "inc"], {"T": DType.FLOAT})
    g.add_node("read", "Identity", ["v", "^step"], {"T": DType.FLOAT})
    sess = Session(g)
    sess.run(None, targets=["init"])
    sess.run(None, targets=["step"])
    sess.run(None, targets=["step"])
    assert float(sess.run("v")) == pytest.approx(1.5 + 2 * 3.0)
    assert float(sess.run("read")) == pytest.approx(1.5 + 3 * 3.0)
    assert all(r.graph is None or "step" not in r.graph or r.graph["step"].op == "AssignAdd"
               for r in sess.rewrites)


def test_switch_off_by_option_and_environment(monkeypatch):
    b, out_name = _bn_chain()
    sess = Session(b.g, graph_rewrites=False)
    sess.run(out_name, _feeds(b))
    assert sess.rewrites == []
    monkeypatch.setenv("TFG_GRAPH_REWRITES", "0")
    assert Session(b.g).graph_rewrites is False
    monkeypatch.setenv("TFG_GRAPH_REWRITES", "maybe")
    with pytest.raises(TfgInputError, match="TFG_GRAPH_REWRITES"):
        Session(b.g)
    monkeypatch.delenv("TFG_GRAPH_REWRITES")
    with pytest.raises(TfgInputError, match="graph_rewrites"):
        Session(b.g, graph_rewrites="yes")


def test_large_subgraph_is_run_as_given(monkeypatch):
    from tfg.passes import step_rewrite
    monkeypatch.setattr(step_rewrite, "MAX_NODES", 3)
    b, out_name = _bn_chain()
    sess = Session(b.g)
    sess.run(out_name, _feeds(b))
    assert sess.rewrites[0].graph is None
    assert "above the limit of 3" in sess.rewrites[0].summary()


@pytest.mark.parametrize("case", ["mobilenetv2", "resnet_small", "efficientnet_small"])
def test_real_models_fused_and_equal_to_tensorflow(case):
    """TensorFlow's frozen Keras CNNs (trained-like batch norms): every convolution is fused
    with its batch norm and activation, and the values are TensorFlow's."""
    d = FIXTURES / "real_models" / case
    meta = json.loads((d / "case.json").read_text())
    feeds = dict(np.load(d / "feeds.npz"))
    expected = np.load(d / "expected.npz")
    sess = Session(tfg.load(str(d / "graph.pb")))
    got = sess.run(meta["fetches"], feeds)
    for name, value in zip(meta["fetches"], got):
        np.testing.assert_allclose(value, expected[name], rtol=meta["rtol"], atol=meta["atol"])
    ops = collections.Counter(n.op for n in sess.rewrites[0].graph)
    assert ops["Conv2D"] == ops["DepthwiseConv2dNative"] == ops["Rsqrt"] == 0, ops
    assert ops["_FusedConv2D"] > 0
    assert sess.rewrites[0].after < sess.rewrites[0].before / 3


@pytest.mark.parametrize("bias", [False, True])
def test_swish_fused_for_tfg_only(bias):
    """EfficientNet's x * sigmoid(x) after a convolution: one fused node in tfg's Session
    (TensorFlow's Eigen kernels have no swish), the same values."""
    b = G().ph("x", [2, 5, 5, 3]).const("w", RNG.standard_normal((3, 3, 3, 4)))
    b.op("conv", "Conv2D", "x", "w", **CONV)
    top = "conv"
    if bias:
        b.const("b", RNG.standard_normal(4)).op("biased", "BiasAdd", "conv", "b")
        top = "biased"
    b.op("sig", "Sigmoid", top).op("swish", "Mul", top, "sig")
    out = optimize(b.g, passes=["remap"], keep=["swish"], verify=True,
                   extra={"tfg_kernels": True})
    assert out["swish"].op == "_FusedConv2D"
    assert out["swish"].get_attr("fused_ops") == [b"BiasAdd", b"_MklSwish"]
    assert {n.op for n in out} == {"Placeholder", "Const", "_FusedConv2D"}
    assert_same(b.g, out, ["swish"], _feeds(b), rtol=1e-4, atol=1e-5)
    plain = optimize(b.g, passes=["remap"], keep=["swish"], verify=True)
    assert plain["swish"].op == "Mul"


def test_duplicate_branches_merged():
    """NASNet's cells apply the same Relu and pooling to one tensor in several branches: the
    Session runs each once (CSE last in SESSION_PASSES), with the values of the graph as given."""
    b = G().ph("x", [2, 6, 6, 3])
    pool = {"ksize": [1, 3, 3, 1], "strides": [1, 1, 1, 1], "padding": b"SAME"}
    b.op("r1", "Relu", "x").op("r2", "Relu", "x")
    b.op("p1", "AvgPool", "r1", **pool).op("p2", "AvgPool", "r2", **pool)
    b.op("s", "AddV2", "p1", "p2").op("n", "Neg", "r2").op("out", "AddV2", "s", "n")
    feeds = _feeds(b)
    sess = Session(b.g)
    got = sess.run("out", feeds)
    ops = collections.Counter(n.op for n in sess.rewrites[0].graph)
    assert ops["Relu"] == 1 and ops["AvgPool"] == 1, ops
    np.testing.assert_array_equal(got, Session(b.g, graph_rewrites=False).run("out", feeds))


@pytest.mark.parametrize("op,explicit", [("DepthwiseConv2dNative", False), ("Conv2D", False),
                                         ("Conv2D", True)])
def test_zero_padding_folds_into_the_convolution(op, explicit):
    """Keras's ZeroPadding2D + a strided VALID convolution: one convolution with EXPLICIT
    padding in tfg's Session, the values of the graph as given; a Pad of the channels or with
    a second reader stays."""
    b = G().ph("x", [2, 7, 8, 3]).const("w", RNG.standard_normal((3, 3, 3, 2)))
    b.const("p", np.array([[0, 0], [0, 1], [1, 2], [0, 0]], np.int32))
    b.op("pad", "Pad", "x", "p", Tpaddings=DType.INT32)
    attrs = {"strides": [1, 2, 2, 1], "padding": b"VALID"}
    if explicit:
        attrs = {"strides": [1, 2, 2, 1], "padding": b"EXPLICIT",
                 "explicit_paddings": [0, 0, 1, 0, 0, 1, 0, 0]}
    b.op("conv", op, "pad", "w", **attrs).op("out", "Relu", "conv")
    feeds = _feeds(b)
    sess = Session(b.g)
    got = sess.run("out", feeds)
    ops = collections.Counter(n.op for n in sess.rewrites[0].graph)
    assert ops["Pad"] == 0, ops
    fused = [n for n in sess.rewrites[0].graph if n.op.endswith(op)][0]
    assert fused.get_attr("explicit_paddings") == ([0, 0, 1, 1, 1, 3, 0, 0] if explicit else
                                                   [0, 0, 0, 1, 1, 2, 0, 0])
    np.testing.assert_allclose(got, Session(b.g, graph_rewrites=False).run("out", feeds),
                               rtol=1e-6, atol=1e-6)
    b.op("other", "Neg", "pad")  # a second reader: the Pad stays
    sess = Session(b.g)
    sess.run(["out", "other"], feeds)
    assert collections.Counter(n.op for n in sess.rewrites[0].graph)["Pad"] == 1
    b2 = G().ph("x", [2, 7, 8, 3]).const("w", RNG.standard_normal((3, 3, 4, 2)))
    b2.const("p", np.array([[0, 0], [0, 1], [1, 2], [0, 1]], np.int32))  # channels padded
    b2.op("pad", "Pad", "x", "p", Tpaddings=DType.INT32)
    b2.op("conv", "Conv2D", "pad", "w", strides=[1, 2, 2, 1], padding=b"VALID")
    sess = Session(b2.g)
    sess.run("conv", _feeds(b2))
    assert collections.Counter(n.op for n in sess.rewrites[0].graph)["Pad"] == 1


@pytest.mark.parametrize("base,bias", [("Conv2D", False), ("Conv2D", True),
                                       ("DepthwiseConv2dNative", False)])
def test_hard_swish_fused_for_tfg_only(base, bias):
    """MobileNetV3's x * relu6(x + 3) / 6 after a convolution (the division already a Mul by
    1/6, as constant folding leaves it): one fused node in tfg's Session, the same values
    bit for bit; another constant than 3 is left alone."""
    for three, fused in ((3.0, True), (2.0, False)):
        b = G().ph("x", [2, 5, 5, 3]).const("w", RNG.standard_normal((3, 3, 3, 2)))
        b.op("conv", base, "x", "w", **CONV)
        top = "conv"
        if bias:
            b.const("b", RNG.standard_normal(6 if base != "Conv2D" else 2))
            b.op("biased", "BiasAdd", "conv", "b")
            top = "biased"
        b.const("three", np.float32(three)).const("sixth", np.float32(1) / np.float32(6))
        b.op("add", "AddV2", top, "three").op("r6", "Relu6", "add")
        b.op("scaled", "Mul", "sixth", "r6").op("hswish", "Mul", "scaled", top)
        feeds = _feeds(b)
        sess = Session(b.g)
        got = sess.run("hswish", feeds)
        out = {n.name: n for n in sess.rewrites[0].graph}
        if fused:
            assert out["hswish"].get_attr("fused_ops") == [b"BiasAdd", b"_TfgHardSwish"]
            assert not {"add", "r6", "scaled", "conv"} & set(out)
        else:
            assert out["hswish"].op == "Mul"
        np.testing.assert_array_equal(
            got, Session(b.g, graph_rewrites=False).run("hswish", feeds))
        plain = optimize(b.g, passes=["remap"], keep=["hswish"], verify=True)
        assert plain["hswish"].op == "Mul"  # TensorFlow has no such kernel: not for optimize


@pytest.mark.parametrize("shape,pads,begin,end,bmask,emask,strides,padded", [
    ((2, 47, 47, 3), [[0, 1], [0, 1]], [0, 1, 1, 0], [0, 0, 0, 0], 9, 15, (2, 2), 1),  # NASNet
    # even sizes: no sampled pixel is padding, so no Pad is left (NASNet's 24x24 -> 12x12)
    ((2, 12, 12, 3), [[0, 1], [0, 1]], [0, 1, 1, 0], [0, 0, 0, 0], 9, 15, (2, 2), 0),
    ((1, 9, 10, 2), [[2, 1], [1, 3]], [0, 1, 0, 0], [0, -1, 12, 0], 9, 9, (3, 2), 1),
    ((1, 8, 7, 2), [[3, 0], [0, 2]], [0, 0, 2, 0], [0, 9, -1, 0], 9, 9, (2, 3), 1),
])
def test_sampled_crop_of_a_zero_pad(shape, pads, begin, end, bmask, emask, strides, padded):
    """NASNet's adjust blocks: a 1x1 VALID AvgPool of stride s over a crop of a zero Pad ->
    Pad(StridedSlice(x)) of the sampled pixels in tfg's Session (the StridedSlice alone when
    none of them is padding), the values bit for bit (a 1x1 average is the pixel), a NaN and
    an inf carried through; not for `tfg optimize`."""
    b = G().ph("x", list(shape))
    b.const("p", np.array([[0, 0], *pads, [0, 0]], np.int32))
    b.op("pad", "Pad", "x", "p", Tpaddings=DType.INT32)
    for name, v in (("b", begin), ("e", end), ("s", [1, 1, 1, 1])):
        b.const(name, np.array(v, np.int32))
    b.op("crop", "StridedSlice", "pad", "b", "e", "s", Index=DType.INT32, begin_mask=bmask,
         end_mask=emask, ellipsis_mask=0, new_axis_mask=0, shrink_axis_mask=0)
    b.op("out", "AvgPool", "crop", ksize=[1, 1, 1, 1], strides=[1, *strides, 1],
         padding=b"VALID")
    x = RNG.standard_normal(shape).astype(np.float32)
    x.reshape(-1)[::7] = np.nan
    x.reshape(-1)[3::11] = -np.inf
    sess = Session(b.g)
    got = sess.run("out", {"x:0": x})
    ops = collections.Counter(n.op for n in sess.rewrites[0].graph)
    assert ops["AvgPool"] == 0 and ops["Pad"] == padded and ops["StridedSlice"] == 1, ops
    want = Session(b.g, graph_rewrites=False).run("out", {"x:0": x})
    assert got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    plain = optimize(b.g, passes=["remap"], keep=["out"], verify=True)
    assert plain["out"].op == "AvgPool"  # only tfg's Session: optimize leaves the graph alone


def test_sampled_crop_left_alone_when_it_does_not_apply():
    """A 2x2 pool, a cropped channel and a Pad with a second reader keep the graph as is."""
    def graph(ksize=1, crop_c=False, second=False):
        b = G().ph("x", [1, 6, 6, 3])
        b.const("p", np.array([[0, 0], [0, 1], [0, 1], [0, 0]], np.int32))
        b.op("pad", "Pad", "x", "p", Tpaddings=DType.INT32)
        b.const("b", np.array([0, 1, 1, 1 if crop_c else 0], np.int32))
        b.const("e", np.array([0, 0, 0, 0], np.int32)).const("s", np.array([1] * 4, np.int32))
        b.op("crop", "StridedSlice", "pad", "b", "e", "s", Index=DType.INT32,
             begin_mask=1 if crop_c else 9, end_mask=15, ellipsis_mask=0, new_axis_mask=0,
             shrink_axis_mask=0)
        b.op("out", "AvgPool", "crop", ksize=[1, ksize, ksize, 1], strides=[1, 2, 2, 1],
             padding=b"VALID")
        if second:
            b.op("other", "Neg", "pad")
        return b
    for kw in ({"ksize": 2}, {"crop_c": True}, {"second": True}):
        b = graph(**kw)
        fetch = ["out", "other"] if kw.get("second") else "out"
        sess = Session(b.g)
        sess.run(fetch, _feeds(b))
        assert collections.Counter(n.op for n in sess.rewrites[0].graph)["AvgPool"] == 1, kw
