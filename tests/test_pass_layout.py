"""The layout optimizer: NHWC -> NCHW around GPU convolutions, TensorFlow's Transpose names,
agnostic ops moved, inverse pairs cancelled; CPU/preserved nodes untouched; scalar SelectV2
operands and while loops keep working (values checked with the Session on CPU)."""
import numpy as np

from test_pass_manager import G, assert_same, ops_of
from tfg.passes.manager import optimize
from tfg.schemas.dtypes import DType

RNG = np.random.default_rng(3)
CONV = {"strides": [1, 1, 1, 1], "padding": b"SAME"}
GPU = ("gpu:1",)


def lo(graph, keep, devices=GPU):
    return optimize(graph, passes=["layout"], keep=keep, devices=devices, verify=True)


def _two_convs():
    return (G().ph("x", [1, 5, 5, 2]).const("w1", RNG.standard_normal((3, 3, 2, 3)))
            .const("w2", RNG.standard_normal((3, 3, 3, 2)))
            .op("c1", "Conv2D", "x", "w1", **CONV).op("r", "Relu", "c1")
            .op("c2", "Conv2D", "r", "w2", **CONV).op("out", "Identity", "c2"))


def _x():
    return {"x": RNG.standard_normal((1, 5, 5, 2)).astype(np.float32)}


def test_convs_go_nchw_with_tensorflow_transpose_names():
    b = _two_convs()
    out = lo(b.g, ["out"])
    assert out["c1"].get_attr("data_format") == b"NCHW"
    assert out["c2"].get_attr("data_format") == b"NCHW"
    names = set(ops_of(out))
    assert "c1-0-TransposeNHWCToNCHW-LayoutOptimizer" in names
    assert "c2-0-0-TransposeNCHWToNHWC-LayoutOptimizer" in names
    # Relu moved into NCHW and the pair between the convs cancelled: two Transposes remain.
    assert sum(1 for n in out if n.op == "Transpose") == 2
    assert out["r"].data_inputs[0].node == "c1"
    assert_same(b.g, out, ["out"], _x(), rtol=1e-4, atol=1e-4)


def test_cpu_only_and_preserved_conv_untouched():
    b = _two_convs()
    out = lo(b.g, ["out"], devices=("cpu:2",))
    assert out["c1"].get_attr("data_format", b"NHWC") == b"NHWC"
    out = lo(b.g, ["out", "c2"])  # a fetched Conv2D keeps its layout
    assert out["c2"].get_attr("data_format", b"NHWC") == b"NHWC"
    assert out["c1"].get_attr("data_format") == b"NCHW"
    assert_same(b.g, out, ["out", "c2"], _x(), rtol=1e-4, atol=1e-4)


def test_strides_and_pool_attrs_permuted():
    b = (G().ph("x", [1, 6, 6, 2]).op("mp", "MaxPool", "x", ksize=[1, 2, 2, 1],
                                        strides=[1, 2, 2, 1], padding=b"VALID")
         .op("out", "Identity", "mp"))
    out = lo(b.g, ["out"])
    assert out["mp"].get_attr("ksize") == [1, 1, 2, 2]
    assert_same(b.g, out, ["out"], {"x": RNG.standard_normal((1, 6, 6, 2)).astype(np.float32)})


def test_selectv2_with_scalar_operand():
    b = (G().ph("x", [1, 5, 5, 2]).const("w1", RNG.standard_normal((3, 3, 2, 3)))
         .op("c1", "Conv2D", "x", "w1", **CONV).ph("p", [], DType.BOOL).const("zero", 0.0)
         .op("sel", "SelectV2", "p", "c1", "zero").op("out", "Identity", "sel"))
    out = lo(b.g, ["out"])
    assert out["c1"].get_attr("data_format") == b"NCHW"
    feeds = dict(_x(), p=np.bool_(True))
    assert_same(b.g, out, ["out"], feeds, rtol=1e-4, atol=1e-4)
    feeds["p"] = np.bool_(False)
    assert_same(b.g, out, ["out"], feeds, rtol=1e-4, atol=1e-4)


def test_conv_inside_while_loop():
    """i < 2: x = Relu(Conv2D(x, W)); the permutation constants must live in the loop frame."""
    w = RNG.standard_normal((3, 3, 2, 2)) * 0.3
    b = (G().ph("x", [1, 4, 4, 2]).const("i0", 0, DType.INT32)
         .op("ei", "Enter", "i0", T=DType.INT32, frame_name=b"L")
         .op("ex", "Enter", "x", frame_name=b"L")
         .op("mi", "Merge", "ei", "ni", T=DType.INT32, N=2).op("mx", "Merge", "ex", "nx", N=2)
         .const("two", 2, DType.INT32, ctrl=["mi"]).op("lt", "Less", "mi", "two", T=DType.INT32)
         .op("lc", "LoopCond", "lt", T=None)
         .op("si", "Switch", "mi", "lc", T=DType.INT32).op("sx", "Switch", "mx", "lc")
         .op("ii", "Identity", "si:1", T=DType.INT32).op("ix", "Identity", "sx:1")
         .const("w", w, ctrl=["ii"]).const("one", 1, DType.INT32, ctrl=["ii"])
         .op("conv", "Conv2D", "ix", "w", **CONV).op("relu", "Relu", "conv")
         .op("inc", "AddV2", "ii", "one", T=DType.INT32)
         .op("ni", "NextIteration", "inc", T=DType.INT32).op("nx", "NextIteration", "relu")
         .op("xi", "Exit", "si:0", T=DType.INT32).op("xx", "Exit", "sx:0")
         .op("out", "Identity", "xx"))
    out = lo(b.g, ["out", "xi"])
    assert out["conv"].get_attr("data_format") == b"NCHW"
    assert_same(b.g, out, ["out"], {"x": RNG.standard_normal((1, 4, 4, 2)).astype(np.float32)},
                rtol=1e-4, atol=1e-4)


def test_default_pipeline_with_gpu_still_computes_the_same():
    b = _two_convs()
    out = optimize(b.g, keep=["out"], devices=GPU, verify=True)
    assert_same(b.g, out, ["out"], _x(), rtol=1e-4, atol=1e-4)
