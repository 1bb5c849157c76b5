"""The remapper and the fused kernels: structure as TensorFlow builds it, values as unfused."""
import numpy as np

from test_pass_manager import G, assert_same, ops_of
from tfg.passes.manager import optimize
from tfg.schemas.dtypes import DType

RNG = np.random.default_rng(7)
CONV = {"strides": [1, 1, 1, 1], "padding": b"SAME"}


def rm(graph, keep, devices=()):
    return optimize(graph, passes=["remap"], keep=keep, devices=devices, verify=True)


def _conv_chain(act="Relu", **act_attrs):
    b = (G().ph("input", [1, 6, 6, 3]).const("filter", RNG.standard_normal((3, 3, 3, 4)))
         .const("bias", RNG.standard_normal(4)).op("conv", "Conv2D", "input", "filter", **CONV)
         .op("bias_add", "BiasAdd", "conv", "bias"))
    if act:
        b.op("act", act, "bias_add", **act_attrs)
    return b


def _feeds():
    return {"input": RNG.standard_normal((1, 6, 6, 3)).astype(np.float32)}


def test_conv_bias_relu_fused_like_tensorflow():
    b = _conv_chain()
    out = rm(b.g, ["act"])
    node = out["act"]
    assert node.op == "_FusedConv2D"
    assert [r.node for r in node.data_inputs] == ["input", "filter", "bias"]
    assert node.get_attr("num_args") == 1
    assert node.get_attr("fused_ops") == [b"BiasAdd", b"Relu"]
    assert set(ops_of(out)) == {"input", "filter", "bias", "act"}
    assert_same(b.g, out, ["act"], _feeds(), rtol=1e-4, atol=1e-5)


def test_conv_bias_without_activation_and_leaky_relu_alpha():
    b = _conv_chain(act="LeakyRelu", alpha=0.3)
    out = rm(b.g, ["act"])
    assert out["act"].get_attr("fused_ops") == [b"BiasAdd", b"LeakyRelu"]
    assert abs(out["act"].get_attr("leakyrelu_alpha") - 0.3) < 1e-6
    assert_same(b.g, out, ["act"], _feeds(), rtol=1e-4, atol=1e-5)
    b2 = _conv_chain(act=None)
    out2 = rm(b2.g, ["bias_add"])
    assert out2["bias_add"].op == "_FusedConv2D"
    assert out2["bias_add"].get_attr("fused_ops") == [b"BiasAdd"]


def test_preserved_intermediate_or_control_edge_blocks_fusion():
    b = _conv_chain()
    out = rm(b.g, ["act", "bias_add"])
    assert out["act"].op == "Relu" and out["bias_add"].op == "_FusedConv2D"
    b2 = _conv_chain()
    b2.g["conv"].inputs = ["input", "filter", "^bias"]
    out2 = rm(b2.g, ["act"])
    assert out2["conv"].op == "Conv2D"


def test_matmul_bias_relu6():
    b = (G().ph("a", [3, 4]).const("w", RNG.standard_normal((4, 5))).const(
        "bias", RNG.standard_normal(5)).op("mm", "MatMul", "a", "w")
         .op("ba", "BiasAdd", "mm", "bias").op("r6", "Relu6", "ba"))
    out = rm(b.g, ["r6"])
    assert out["r6"].op == "_FusedMatMul"
    assert out["r6"].get_attr("fused_ops") == [b"BiasAdd", b"Relu6"]
    assert_same(b.g, out, ["r6"], {"a": 3 * RNG.standard_normal((3, 4)).astype(np.float32)},
                rtol=1e-5, atol=1e-5)


def _bn(x, name="bn", training=False):
    b = x
    for k, v in (("scale", RNG.uniform(0.5, 1.5, 4)), ("offset", RNG.standard_normal(4)),
                 ("mean", RNG.standard_normal(4)), ("var", RNG.uniform(0.5, 2, 4))):
        b.const(k, v)
    b.op(name, "FusedBatchNormV3", "conv", "scale", "offset", "mean", "var", U=DType.FLOAT,
         is_training=training, epsilon=0.001)
    return b


def test_conv_batchnorm_relu_inference():
    b = _bn(G().ph("input", [1, 6, 6, 3]).const("filter", RNG.standard_normal((3, 3, 3, 4)))
            .op("conv", "Conv2D", "input", "filter", **CONV)).op("r", "Relu", "bn")
    out = rm(b.g, ["r"])
    node = out["r"]
    assert node.op == "_FusedConv2D" and node.get_attr("num_args") == 4
    assert node.get_attr("fused_ops") == [b"FusedBatchNorm", b"Relu"]
    assert abs(node.get_attr("epsilon") - 0.001) < 1e-7
    assert_same(b.g, out, ["r"], _feeds(), rtol=1e-4, atol=1e-4)


def test_batchnorm_relu_to_fused_batch_norm_ex_on_gpu_only():
    def build():
        return _bn(G().ph("conv", [2, 3, 3, 4])).op("r", "Relu", "bn")
    cpu = rm(build().g, ["r"])
    assert cpu["r"].op == "Relu"
    b = build()
    gpu = rm(b.g, ["r"], devices=("gpu:1",))
    assert gpu["r"].op == "_FusedBatchNormEx"
    assert gpu["r"].get_attr("activation_mode") == b"Relu"
    assert_same(b.g, gpu, ["r"], {"conv": RNG.standard_normal((2, 3, 3, 4)).astype(np.float32)},
                rtol=1e-4, atol=1e-4)


def test_training_batchnorm_not_fused_into_conv():
    b = _bn(G().ph("input", [1, 6, 6, 3]).const("filter", RNG.standard_normal((3, 3, 3, 4)))
            .op("conv", "Conv2D", "input", "filter", **CONV), training=True)
    out = rm(b.g, ["bn"])
    assert out["bn"].op == "FusedBatchNormV3"


def test_fused_matmul_kernel_is_bit_for_bit_and_leaves_inputs_alone():
    # The fused kernel adds the bias and applies the activation in the matmul's output buffer;
    # the values must be exactly the unfused kernels', and no input may be written.
    from tfg.kernels.context import KernelContext
    from tfg.kernels.registry import get_kernel

    x = RNG.standard_normal((5, 7)).astype(np.float32)
    w = RNG.standard_normal((7, 3)).astype(np.float32)
    bias = RNG.standard_normal(3).astype(np.float32)
    for act in ("Relu", "Relu6", "Elu", None):
        b = (G().ph("x", [5, 7]).const("w", w).const("bias", bias)
             .op("mm", "MatMul", "x", "w").op("ba", "BiasAdd", "mm", "bias"))
        last = "ba"
        if act:
            b.op("act", act, "ba")
            last = "act"
        out = rm(b.g, [last])
        node = out[last]
        assert node.op == "_FusedMatMul"
        ins = [x.copy(), w.copy(), bias.copy()]
        got = get_kernel(node.op, "CPU", last).fn(KernelContext.for_node(node), *ins)
        y = np.matmul(x, w) + bias
        if act == "Relu":
            y = np.maximum(y, np.float32(0))
        elif act == "Relu6":
            y = np.clip(y, np.float32(0), np.float32(6))
        elif act == "Elu":
            y = np.where(y < 0, np.expm1(np.minimum(y, 0)), y).astype(np.float32)
        np.testing.assert_array_equal(got, y)
        for before, after in zip((x, w, bias), ins):
            np.testing.assert_array_equal(before, after)
