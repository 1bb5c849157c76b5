"""Grouped and dilated convolutions (Conv2D, its backprops, DepthwiseConv2dNative with
dilations) and their gradients, against TensorFlow's values (tests/fixtures/conv, made by
tools/gen_conv_fixtures.py through XLA: TensorFlow's CPU kernels refuse most of these cases)
and against finite differences."""
import json

import numpy as np
import pytest

from conftest import FIXTURES
from test_grad_numeric import C, P, _build, _check, i32, r
from test_kernels_fixtures import _compare, as_list, run_node
from test_pass_manager import G, assert_same
from tfg.errors import TfgError
from tfg.executor.session import Session
from tfg.graphdef import io
from tfg.passes.grad import grad
from tfg.passes.manager import optimize

DIR = FIXTURES / "conv"
INDEX = json.loads((DIR / "cases.json").read_text())


@pytest.fixture(scope="module")
def kernel_graph():
    return io.load(str(DIR / "kernels.pb")), dict(np.load(DIR / "kernels.npz"))


@pytest.mark.parametrize("case", INDEX["kernels"], ids=[c["name"] for c in INDEX["kernels"]])
def test_kernel_matches_tensorflow(case, kernel_graph):
    graph, expected = kernel_graph
    out = as_list(run_node(graph, graph[case["name"]]), 1)
    _compare(np.asarray(out[0]), expected[f"{case['name']}:0"], case, "output 0")


@pytest.mark.parametrize("case", INDEX["grad"], ids=[c["name"] for c in INDEX["grad"]])
def test_gradient_matches_tensorflow(case):
    graph = io.load(str(DIR / "grad.pb"))
    arrays = dict(np.load(DIR / "grad.npz"))
    feeds = {k[len("feed/"):]: v for k, v in arrays.items()
             if k.startswith(f"feed/{case['name']}/")}
    g2 = grad(graph, case["ys"], case["xs"])
    got = Session(g2).run([f"grad/{x[:-2]}:0" for x in case["xs"]], feeds)
    for x, value in zip(case["xs"], got):
        np.testing.assert_allclose(value, arrays[f"{case['name']}/{x}"], rtol=case["rtol"],
                                   atol=case["atol"], err_msg=f"{case['name']}: d/d{x}")


def _attrs(strides=1, dil=1, padding=b"SAME"):
    return {"strides": [1, strides, strides, 1], "dilations": [1, dil, dil, 1],
            "padding": padding, "data_format": b"NHWC"}


# Second-order and float64 checks that the TensorFlow fixtures (float32) cannot make tight.
FINITE = [
    ("Conv2D", [P(r(1, 5, 5, 4)), P(r(3, 3, 2, 4))], _attrs(2)),
    ("Conv2D", [P(r(1, 7, 6, 3)), P(r(3, 2, 1, 6))], _attrs(1, 2, b"VALID")),
    ("Conv2DBackpropInput", [C([1, 5, 5, 4], i32), P(r(3, 3, 2, 4)), P(r(1, 3, 3, 4))],
     _attrs(2)),
    ("Conv2DBackpropFilter", [P(r(1, 6, 6, 4)), C([3, 3, 2, 6], i32), P(r(1, 6, 6, 6))],
     _attrs(1, 2)),
    ("DepthwiseConv2dNative", [P(r(1, 7, 7, 2)), P(r(3, 3, 2, 2))], _attrs(1, 2)),
    ("DepthwiseConv2dNativeBackpropInput",
     [C([1, 7, 7, 2], i32), P(r(3, 3, 2, 2)), P(r(1, 7, 7, 4))], _attrs(1, 2)),
    ("DepthwiseConv2dNativeBackpropFilter",
     [P(r(1, 7, 7, 2)), C([3, 3, 2, 2], i32), P(r(1, 3, 3, 4))], _attrs(1, 2, b"VALID")),
]


@pytest.mark.parametrize("spec", FINITE, ids=[f"{s[0]}-{i}" for i, s in enumerate(FINITE)])
def test_gradient_matches_finite_differences(spec):
    op, inputs, attrs = spec
    _check(op, (inputs, attrs), static=False)


def test_groups_must_divide_the_output_depth():
    # 2 groups (4 input channels, filter in-channels 2) but 3 output channels.
    g, feeds = _build("Conv2D", [P(r(1, 4, 4, 4)), P(r(1, 1, 2, 3))], _attrs())
    with pytest.raises(TfgError, match="multiple of the number of groups 2"):
        Session(g).run(["op:0"], feeds)


def test_remap_leaves_grouped_conv_unfused():
    """TensorFlow's _FusedConv2D refuses grouped convolutions: the remapper must not make one."""
    rng = np.random.default_rng(3)
    b = (G().ph("input", [1, 6, 6, 4]).const("filter", rng.standard_normal((3, 3, 2, 6)))
         .const("bias", rng.standard_normal(6))
         .op("conv", "Conv2D", "input", "filter", strides=[1, 1, 1, 1], padding=b"SAME")
         .op("bias_add", "BiasAdd", "conv", "bias").op("act", "Relu", "bias_add"))
    out = optimize(b.g, passes=["remap"], keep=["act"], verify=True)
    assert out["conv"].op == "Conv2D" and out["act"].op == "Relu"
    feeds = {"input": rng.standard_normal((1, 6, 6, 4)).astype(np.float32)}
    assert_same(b.g, out, ["act"], feeds, rtol=1e-5, atol=1e-5)
