"""Squeeze-excite and swish in tfg's Session (EfficientNet, MobileNetV3): the Sigmoid gate fused
after its convolution, Reshape(Mean) as a keep_dims Mean (tfg/passes/remap_squeeze.py), and the
swish written in place (tfg/kernels/fused.py). Each is checked against the graph run as given,
bit for bit, and for what it must leave alone."""
import collections

import numpy as np
import pytest

from test_pass_manager import G
from tfg.executor import Session
from tfg.kernels import fused
from tfg.passes.manager import optimize
from tfg.schemas.dtypes import DType

RNG = np.random.default_rng(5)
CONV = {"strides": [1, 1, 1, 1], "padding": b"SAME"}
I32 = DType.INT32


def _se_block(target=(2, 1, 1, 6), keep_dims=False, bias=True, fetch_mean=False):
    """x -> conv + Relu -> Mean over H, W -> Reshape(target) -> 1x1 conv + bias -> Sigmoid ->
    x * gate: Keras's EfficientNet squeeze-excite as its frozen graph writes it (a Relu for
    its swish: the swish fusion rounds differently from Mul(x, Sigmoid(x)))."""
    b = G().ph("x", [2, 5, 5, 3]).const("w", RNG.standard_normal((3, 3, 3, 6)))
    b.op("conv", "Conv2D", "x", "w", **CONV).const("b0", RNG.standard_normal(6))
    b.op("biased", "BiasAdd", "conv", "b0").op("act", "Relu", "biased")
    b.const("axes", np.array([1, 2], np.int32), I32)
    b.op("mean", "Mean", "act", "axes", keep_dims=keep_dims, Tidx=I32)
    b.const("shape", np.array(target, np.int32), I32)
    b.op("reshaped", "Reshape", "mean", "shape", Tshape=I32)
    b.const("w2", RNG.standard_normal((1, 1, 6, 6)) * 20)  # gates from ~0 to ~1, some < -80
    b.op("expand", "Conv2D", "reshaped", "w2", **CONV)
    top = "expand"
    if bias:
        b.const("b2", RNG.standard_normal(6)).op("expand_b", "BiasAdd", "expand", "b2")
        top = "expand_b"
    b.op("gate", "Sigmoid", top).op("out", "Mul", "act", "gate")
    fetches = ["out", "mean"] if fetch_mean else ["out"]
    return b, fetches


def _feeds(scale=1.0):
    return {"x": (RNG.standard_normal((2, 5, 5, 3)) * scale).astype(np.float32)}


def _run_both(b, fetches, feeds):
    sess = Session(b.g)
    got = sess.run(fetches, feeds)
    want = Session(b.g, graph_rewrites=False).run(fetches, feeds)
    return sess, got, want


@pytest.mark.parametrize("scale", [1.0, 40.0])  # 40: gate inputs far below -80 (two-sided form)
def test_squeeze_excite_block_is_fewer_nodes_same_bits(scale):
    b, fetches = _se_block()
    sess, got, want = _run_both(b, fetches, _feeds(scale))
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    ops = collections.Counter(n.op for n in sess.rewrites[0].graph)
    assert ops["Sigmoid"] == 0 and ops["Reshape"] == 0, ops
    gate = sess.rewrites[0].graph["gate"]
    assert gate.op == "_FusedConv2D"
    assert gate.get_attr("fused_ops") == [b"BiasAdd", b"Sigmoid"]
    squeeze = sess.rewrites[0].graph["reshaped"]  # the Reshape's name, now the Mean
    assert squeeze.op == "Mean" and squeeze.get_attr("keep_dims") is True
    assert "mean" not in sess.rewrites[0].graph


def test_fetched_mean_and_its_reshape_both_kept():
    """A fetched Mean is kept (and so is the Reshape that reads it)."""
    b, fetches = _se_block(fetch_mean=True)
    sess, got, want = _run_both(b, fetches + ["reshaped"], _feeds())
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    graph = sess.rewrites[0].graph
    assert graph["mean"].op == "Mean" and graph["reshaped"].op == "Reshape"


@pytest.mark.parametrize("target", [(-1, 1, 1, 6), (2, 1, 1, 6)])
def test_a_minus_one_in_the_target_still_folds(target):
    b, fetches = _se_block(target=target)
    sess, got, want = _run_both(b, fetches, _feeds())
    np.testing.assert_array_equal(got[0], want[0])
    assert sess.rewrites[0].graph["reshaped"].op == "Mean"


def test_other_reshapes_of_a_mean_stay():
    """A Reshape that is not the keep_dims shape ([2, 6] -> [2, 6, 1, 1]) stays as it is."""
    b = G().ph("x", [2, 4, 4, 6]).const("axes", np.array([1, 2], np.int32), I32)
    b.op("mean", "Mean", "x", "axes", keep_dims=False, Tidx=I32)
    b.const("shape", np.array([2, 6, 1, 1], np.int32), I32)
    b.op("r", "Reshape", "mean", "shape", Tshape=I32).op("out", "Neg", "r")
    feeds = {"x": RNG.standard_normal((2, 4, 4, 6)).astype(np.float32)}
    sess, got, want = _run_both(b, ["out"], feeds)
    np.testing.assert_array_equal(got[0], want[0])
    assert sess.rewrites[0].graph["r"].op == "Reshape"


def test_optimize_for_tensorflow_leaves_both_alone():
    """`tfg optimize` (no tfg_kernels): TensorFlow's fused convolutions take no Sigmoid here,
    and the Reshape stays."""
    b, fetches = _se_block()
    out = optimize(b.g, passes=["remap"], keep=fetches, verify=True)
    assert out["gate"].op == "Sigmoid" and out["reshaped"].op == "Reshape"
    assert out["mean"].op == "Mean"


def test_sigmoid_after_a_bare_convolution_stays():
    """Only a [BiasAdd] fused node takes the Sigmoid (no zero bias invented for a gate)."""
    b, fetches = _se_block(bias=False)
    sess, got, want = _run_both(b, fetches, _feeds())
    np.testing.assert_array_equal(got[0], want[0])
    assert sess.rewrites[0].graph["gate"].op == "Sigmoid"


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.float16])
def test_swish_in_place_is_the_swish_bit_for_bit(dtype):
    """_MklSwish after a fused convolution runs in the convolution's output (one temporary):
    the same bits as the two-temporary form, NaN, infinities and exp overflow included."""
    x = (RNG.standard_normal(4000) * 30).astype(dtype)
    x[:6] = [np.nan, np.inf, -np.inf, -0.0, 0.0, -200]
    with np.errstate(all="ignore"):  # exp overflows and inf / inf, as in a step
        want = fused._swish(np, x)
        y = x.copy()
        got = fused._INPLACE_ACTIVATIONS["_MklSwish"](y, None)
    assert got is y
    np.testing.assert_array_equal(got, want)


def test_sigmoid_in_place_is_the_sigmoid_kernels():
    """The fused Sigmoid in place: the Sigmoid kernel's values, one-sided and two-sided."""
    x = (RNG.standard_normal(3000) * 50).astype(np.float32)
    gate = G().ph("x", [3000]).op("s", "Sigmoid", "x")
    want = Session(gate.g, graph_rewrites=False).run("s", {"x": x})
    for part in (x, np.abs(x) + 1):  # both forms: with values below -80, and without
        want = Session(gate.g, graph_rewrites=False).run("s", {"x": part})
        got = fused._INPLACE_ACTIVATIONS["Sigmoid"](part.copy(), None)
        np.testing.assert_array_equal(got, want)


def _hard_gate_block(sixth=1 / 6):
    """MobileNetV3's squeeze-excite gate as its frozen graph reads after constant folding:
    x * (Relu6(conv(mean) + bias') * 1/6), the + 3 already in the bias."""
    b = G().ph("x", [2, 4, 4, 5]).const("axes", np.array([1, 2], np.int32), I32)
    b.op("mean", "Mean", "x", "axes", keep_dims=True, Tidx=I32)
    b.const("w", RNG.standard_normal((1, 1, 5, 5)) * 4).op("conv", "Conv2D", "mean", "w", **CONV)
    b.const("bias", RNG.standard_normal(5) + 3).op("biased", "BiasAdd", "conv", "bias")
    b.op("r6", "Relu6", "biased").const("sixth", np.float32(sixth)).op("gate", "Mul", "r6", "sixth")
    b.op("out", "Mul", "x", "gate")
    return b


def test_hard_sigmoid_gate_fused_same_bits():
    b = _hard_gate_block()
    feeds = {"x": (RNG.standard_normal((2, 4, 4, 5)) * 3).astype(np.float32)}
    sess, got, want = _run_both(b, ["out", "gate"], feeds)
    for g, w in zip(got, want):
        np.testing.assert_array_equal(g, w)
    assert got[1].min() >= 0 and got[1].max() <= 1
    gate = sess.rewrites[0].graph["gate"]
    assert gate.op == "_FusedConv2D" and gate.get_attr("fused_ops") == [b"BiasAdd",
                                                                        b"_TfgHardSigmoid"]
    assert "r6" not in sess.rewrites[0].graph
    plain = optimize(b.g, passes=["remap"], keep=["out"], verify=True)
    assert plain["gate"].op == "Mul"  # not for TensorFlow


def test_a_mul_by_another_constant_stays():
    b = _hard_gate_block(sixth=0.2)
    feeds = {"x": RNG.standard_normal((2, 4, 4, 5)).astype(np.float32)}
    sess, got, want = _run_both(b, ["out"], feeds)
    np.testing.assert_array_equal(got[0], want[0])
    assert sess.rewrites[0].graph["gate"].op == "Mul"
