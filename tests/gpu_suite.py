"""The GPU checks, written once: tests/test_gpu.py runs them on CuPy and a real GPU,
tests/test_gpu_standin.py on the numpy-backed stand-in (tfg.kernels.gpu.standin) in CI.

A module that imports these tests provides the fixture `gpu` (the GPU array module, with the
environment set so that `gpu:1` names a device of it).

    kernels   every op with a GPU kernel: its TensorFlow fixture (tests/fixtures/kernels) run on
              the GPU kernel, or random inputs against the CPU kernel, or a graph test below
    graphs    an MLP training loop, a CNN's gradient step, resource variables and stacks in a
              while loop on `gpu:1` and `cpu:1,gpu:1`, against `cpu:1`
    cases     every shared conformance case on `gpu:1` and on `cpu:1,gpu:1`
    loops     real-model loops over TensorLists and TensorArrays on `gpu:1`, their list and
              array ops on the GPU, against TensorFlow's values; the list and array kernels
              no such graph runs, against the CPU kernels
"""
import json

import numpy as np
import pytest

import tfg
from benchmarks.bench_gpu import mlp_sgd_graph
from tests.conftest import FIXTURES, conformance_cases
from tfg import builder as tb
from tfg.executor.session import Session
from tfg.graphdef import io
from tfg.graphdef.graph import Graph
from tfg.kernels import get_kernel
from tfg.kernels.context import KernelContext
from tfg.kernels.memory import to_host
from tfg.kernels.registry import CPU, GPU, registered_ops
from tfg.kernels.resources import Ref
from tfg.schemas.dtypes import DType

GPU0 = "/job:localhost/replica:0/task:0/device:GPU:0"
KDIR = FIXTURES / "kernels"
KCASES = json.loads((KDIR / "cases.json").read_text())["cases"]
UNDEFINED = {"fusedbatchnorm_infer": (3, 4), "fusedbatchnormv2_infer": (3, 4)}


# --------------------------------------------------------------------------- kernels
@pytest.fixture(scope="module")
def kgraph():
    return io.load(str(KDIR / "kernels.pb"))


@pytest.fixture(scope="module")
def kexpected():
    with np.load(KDIR / "expected.npz") as f:
        return dict(f)


def _ctx(node, xp, device=GPU0):
    try:
        return KernelContext.for_node(node, device=device, xp=xp)
    except Exception:  # a private op without a signature
        return KernelContext(node, {k: node.get_attr(k) for k in node.attr}, xp, device)


def _gpu_call(node, xp, *inputs):
    kd = get_kernel(node.op, GPU, node.name)
    out = kd.fn(_ctx(node, xp), *inputs)
    return list(out) if isinstance(out, (list, tuple)) else [out]


def _host(value):
    return np.asarray(to_host(value.get() if isinstance(value, Ref) else value))


_GPU_FIXTURE_CASES = [c for c in KCASES]


@pytest.mark.parametrize("case", _GPU_FIXTURE_CASES, ids=[c["name"] for c in _GPU_FIXTURE_CASES])
def test_gpu_kernel_matches_tensorflow(case, kgraph, kexpected, gpu):
    node = kgraph[case["name"]]
    if (node.op, GPU) not in _gpu_ops():
        pytest.skip(f"{node.op} has no GPU kernel (placement keeps it on a CPU)")
    inputs, refs = [], {}
    for i, ref in enumerate(node.data_inputs):
        const = case.get("refs", {}).get(str(i), ref.node)
        value = np.array(kgraph[const].get_attr("value"))
        if str(i) in case.get("refs", {}):
            refs[i] = Ref(f"{case['name']}/var{i}")
            refs[i].assign(_ctx(node, gpu).xp.asarray(value) if value.dtype.kind not in "OSU"
                           else value)
            value = refs[i]
        inputs.append(value)
    out = _gpu_call(node, gpu, *inputs)
    assert len(out) == case["outputs"]
    for port, got in enumerate(out):
        if port in UNDEFINED.get(case["name"], ()):
            continue
        _compare(_host(got), kexpected[f"{case['name']}:{port}"], case, f"output {port}")
    for i, key in case.get("refs_after", {}).items():
        _compare(_host(refs[int(i)]), kexpected[key], case, f"ref input {i}")


def _compare(got, want, case, what):
    assert got.shape == want.shape, f"{what}: shape {got.shape} != TensorFlow's {want.shape}"
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != TensorFlow's {want.dtype}"
    if want.dtype.kind in "fc":
        np.testing.assert_allclose(got, want, rtol=max(case["rtol"], 1e-5),
                                   atol=max(case["atol"], 1e-6), err_msg=what, equal_nan=True)
    else:
        np.testing.assert_array_equal(got, want, err_msg=what)


def _gpu_ops():
    return {(op, GPU) for op in registered_ops(GPU)}


def _rand(shape, lo=-1.0, hi=1.0, seed=0):
    return np.random.default_rng(seed).uniform(lo, hi, shape).astype(np.float32)


F = {"T": DType.FLOAT}
NHWC = {"T": DType.FLOAT, "data_format": b"NHWC", "padding": b"SAME", "strides": [1, 1, 1, 1]}
# Ops with a GPU kernel but no TensorFlow fixture: attrs and random inputs; the GPU kernel must
# give the CPU kernel's values.
def _complex(shape):
    return (_rand(shape) + 1j * _rand(shape, seed=1)).astype(np.complex64)


RANDOM_CASES = {
    "Acos": (F, lambda: [_rand((3, 5), -0.9, 0.9)]),
    "Asin": (F, lambda: [_rand((3, 5), -0.9, 0.9)]),
    "Atan": (F, lambda: [_rand((3, 5), -3, 3)]),
    "Erfc": (F, lambda: [_rand((4, 6), -6, 9)]),  # the tail too: exact gelu reads it
    "Sinh": (F, lambda: [_rand((3, 5), -3, 3)]),
    "Cosh": (F, lambda: [_rand((3, 5), -3, 3)]),
    "Atan2": (F, lambda: [_rand((3, 5), seed=1), _rand((3, 5), seed=2)]),
    "Xdivy": (F, lambda: [np.array([0, 1, 2, 0], np.float32), _rand((4,), 0.5, 2)]),
    # elementwise maths of tools/gen_math_more_fixtures.py (I32: the bitwise ops, shifts)
    "Asinh": (F, lambda: [_rand((3, 5), -30, 30)]),
    "Acosh": (F, lambda: [_rand((3, 5), 1, 30)]),
    "Atanh": (F, lambda: [_rand((3, 5), -0.99, 0.99)]),
    **{op: (F, lambda: [_rand((4, 6), -40, 40)])
       for op in ("BesselI0", "BesselI1", "BesselI0e", "BesselI1e")},
    "Mod": (F, lambda: [_rand((3, 4), -9, 9), _rand((4,), 0.5, 3, seed=1)]),
    "MulNoNan": (F, lambda: [np.float32([np.inf, 2, -1]), np.float32([0, 3, 0])]),
    "Xlogy": (F, lambda: [np.float32([0, 1, 2, 0]), _rand((4,), 0.1, 3)]),
    "Xlog1py": (F, lambda: [np.float32([0, 1, 2, 0]), _rand((4,), -0.9, 3)]),
    "ClipByValue": (F, lambda: [_rand((3, 4), -3, 3), np.float32(-1), np.float32(2)]),
    **{op: ({"T": DType.INT32}, lambda: [np.int32([[-7], [5], [2**31 - 1]]),
                                        np.int32([-2, 0, 3, 31, 40])])
       for op in ("BitwiseAnd", "BitwiseOr", "BitwiseXor", "LeftShift", "RightShift")},
    "Invert": ({"T": DType.INT8}, lambda: [np.int8([-128, -1, 0, 5, 127])]),
    "PopulationCount": ({"T": DType.INT64}, lambda: [np.int64([[-1, 0], [7, -2**63]])]),
    "SoftsignGrad": (F, lambda: [_rand((4, 3), seed=1), _rand((4, 3), seed=2)]),
    "Bitcast": ({"T": DType.FLOAT, "type": DType.INT32}, lambda: [_rand((2, 3))]),
    "MaxPoolGradV2": (NHWC, lambda: _max_pool_grad_inputs()),
    "FusedBatchNormGradV2": ({"T": DType.FLOAT, "U": DType.FLOAT, "epsilon": 1e-3,
                              "is_training": True},
                             lambda: [_rand((2, 3, 3, 4), seed=1), _rand((2, 3, 3, 4), seed=2),
                                      _rand((4,), 0.5, 1.5), _rand((4,), seed=3),
                                      _rand((4,), 0.5, 1.5, seed=4)]),
    "DepthwiseConv2dNativeBackpropInput": (
        NHWC, lambda: [np.array([2, 5, 5, 3], np.int32), _rand((3, 3, 3, 2)),
                       _rand((2, 5, 5, 6), seed=1)]),
    "DepthwiseConv2dNativeBackpropFilter": (
        NHWC, lambda: [_rand((2, 5, 5, 3)), np.array([3, 3, 3, 2], np.int32),
                       _rand((2, 5, 5, 6), seed=1)]),
    "_FusedConv2D": ({**NHWC, "num_args": 1, "fused_ops": [b"BiasAdd", b"Relu"]},
                     lambda: [_rand((2, 6, 6, 3)), _rand((3, 3, 3, 4), seed=1),
                              _rand((4,), seed=2)]),
    "_FusedDepthwiseConv2dNative": ({**NHWC, "num_args": 1, "fused_ops": [b"BiasAdd", b"Relu6"]},
                                    lambda: [_rand((2, 6, 6, 3)), _rand((3, 3, 3, 2), seed=1),
                                             _rand((6,), seed=2)]),
    "_FusedMatMul": ({"T": DType.FLOAT, "num_args": 1, "fused_ops": [b"BiasAdd", b"LeakyRelu"],
                      "transpose_a": False, "transpose_b": False, "leakyrelu_alpha": 0.1},
                     lambda: [_rand((4, 5)), _rand((5, 3), seed=1), _rand((3,), seed=2)]),
    "Assert": ({"T": [DType.FLOAT], "summarize": 3},
               lambda: [np.array(True), _rand((3,))]),
    "Einsum": ({"T": DType.FLOAT, "N": 2, "equation": b"bij,bjk->bik"},
               lambda: [_rand((2, 3, 4)), _rand((2, 4, 5), seed=1)]),
    "MirrorPadGrad": ({"T": DType.FLOAT, "Tpaddings": DType.INT32, "mode": b"REFLECT"},
                      lambda: [_rand((4, 6)), np.array([[1, 1], [2, 1]], np.int32)]),
    "MatrixBandPart": ({"T": DType.FLOAT, "Tindex": DType.INT64},
                       lambda: [_rand((2, 4, 5)), np.int64(1), np.int64(-1)]),
    "Complex": ({"T": DType.FLOAT, "Tout": DType.COMPLEX64},
                lambda: [_rand((3, 4)), _rand((3, 4), seed=1)]),
    **{op: ({"T": DType.COMPLEX64, "Tout": DType.FLOAT}, lambda: [_complex((3, 4))])
       for op in ("Real", "Imag", "ComplexAbs", "Angle")},
    "Conj": ({"T": DType.COMPLEX64}, lambda: [_complex((3, 4))]),
    "SpaceToBatchND": ({"T": DType.FLOAT, "Tblock_shape": DType.INT32,
                        "Tpaddings": DType.INT32},
                       lambda: [_rand((2, 3, 4, 3)), np.array([2, 2], np.int32),
                                np.array([[1, 0], [0, 0]], np.int32)]),
    "BatchToSpaceND": ({"T": DType.FLOAT, "Tblock_shape": DType.INT32, "Tcrops": DType.INT32},
                       lambda: [_rand((8, 2, 2, 3)), np.array([2, 2], np.int32),
                                np.array([[1, 0], [0, 1]], np.int32)]),
    "DepthToSpace": ({"T": DType.FLOAT, "block_size": 2, "data_format": b"NHWC"},
                     lambda: [_rand((2, 2, 3, 8))]),
    "SpaceToDepth": ({"T": DType.FLOAT, "block_size": 2, "data_format": b"NHWC"},
                     lambda: [_rand((2, 4, 6, 3))]),
    "ResizeNearestNeighbor": ({"T": DType.FLOAT, "align_corners": False,
                               "half_pixel_centers": True},
                              lambda: [_rand((2, 4, 4, 3)), np.array([6, 5], np.int32)]),
    "Roll": ({"T": DType.FLOAT, "Tshift": DType.INT32, "Taxis": DType.INT32},
             lambda: [_rand((3, 4, 5)), np.array([1, -2], np.int32), np.array([0, 2], np.int32)]),
    # the array_more family (tools/gen_array_more_fixtures.py has TensorFlow's values)
    "Reverse": (F, lambda: [_rand((2, 3, 4)), np.array([True, False, True])]),
    "ConjugateTranspose": ({"T": DType.COMPLEX64, "Tperm": DType.INT32},
                           lambda: [_complex((3, 4)), np.array([1, 0], np.int32)]),
    "Cross": (F, lambda: [_rand((4, 3)), _rand((4, 3), seed=1)]),
    "EuclideanNorm": ({"T": DType.FLOAT, "Tidx": DType.INT32, "keep_dims": True},
                      lambda: [_rand((3, 4)), np.array([1], np.int32)]),
    "LinSpace": ({"T": DType.FLOAT, "Tidx": DType.INT32},
                 lambda: [np.float32(0.5), np.float32(2), np.int32(7)]),
    "ParallelDynamicStitch": ({"T": DType.FLOAT, "N": 2},
                              lambda: [np.array([0, 3], np.int32), np.array([1, 2], np.int32),
                                       _rand((2, 3)), _rand((2, 3), seed=1)]),
    # the real-loop sweep's (tf.nn.ctc_loss's scans): unique rows for Update (TensorFlow's
    # order among duplicates is unspecified), a repeated row for Add and Sub
    "TensorScatterUpdate": ({"T": DType.FLOAT, "Tindices": DType.INT32},
                            lambda: [_rand((5, 3)), np.array([[3], [0]], np.int32),
                                     _rand((2, 3), seed=1)]),
    "TensorScatterAdd": ({"T": DType.FLOAT, "Tindices": DType.INT32},
                         lambda: [_rand((5, 3)), np.array([[1], [4], [1]], np.int32),
                                  _rand((3, 3), seed=1)]),
    "TensorScatterSub": ({"T": DType.FLOAT, "Tindices": DType.INT32},
                         lambda: [_rand((4, 2, 3)), np.array([[2, 1], [0, 0], [2, 1]], np.int32),
                                  _rand((3, 3), seed=1)]),
    "Empty": ({"dtype": DType.FLOAT, "init": True}, lambda: [np.array([2, 3], np.int32)]),
    # keras-hub's Swin (keras.ops.slice_update); the column start is clamped to 5 - 3
    "XlaDynamicUpdateSlice": ({"T": DType.FLOAT, "Tindices": DType.INT32},
                              lambda: [_rand((4, 5)), _rand((2, 3), seed=1),
                                       np.array([1, 4], np.int32)]),
    # a bias's gradient (summed over the rows), as tfg's Session rewrites it
    "_TfgBroadcastGradSum": ({"T": DType.FLOAT, "Tshape": DType.INT32},
                             lambda: [_rand((4, 3)), np.array([3], np.int32),
                                      np.array([4, 3], np.int32)]),
    "_FusedBatchNormEx": ({"T": DType.FLOAT, "U": DType.FLOAT, "epsilon": 1e-3,
                           "is_training": False, "activation_mode": b"Relu", "num_side_inputs": 0},
                          lambda: [_rand((2, 3, 3, 4)), _rand((4,), 0.5, 1.5), _rand((4,)),
                                   _rand((4,), seed=3), _rand((4,), 0.5, 1.5, seed=4)]),
}


def _max_pool_grad_inputs():
    x = _rand((2, 4, 4, 3))
    y = x.reshape(2, 2, 2, 2, 2, 3).max(axis=(2, 4))
    return [x, y, _rand((2, 2, 2, 3), seed=1), np.array([1, 2, 2, 1], np.int32),
            np.array([1, 2, 2, 1], np.int32)]


# the math misc family (tools/gen_math_misc_fixtures.py has TensorFlow's values)
_POOL2 = {"T": DType.FLOAT, "ksize": [1, 2, 2, 1], "strides": [1, 2, 2, 1], "padding": b"VALID"}
RANDOM_CASES.update({
    "Diag": (F, lambda: [_rand((2, 3))]),
    "DiagPart": (F, lambda: [_rand((2, 3, 2, 3))]),
    "GuaranteeConst": (F, lambda: [_rand((3,))]),
    "CheckNumericsV2": ({"T": DType.FLOAT, "message": b"m"}, lambda: [_rand((3, 4))]),
    "ApproximateEqual": ({"T": DType.FLOAT, "tolerance": 0.5},
                         lambda: [_rand((3, 4)), _rand((3, 4), seed=1)]),
    "NextAfter": (F, lambda: [_rand((3, 4)), np.float32([0, 2, -2, np.inf])]),
    "MaxPoolGradGrad": (_POOL2, lambda: _max_pool_grad_inputs()[:2] + [_rand((2, 4, 4, 3))]),
    "MaxPoolGradGradV2": ({"T": DType.FLOAT, "padding": b"VALID"},
                          lambda: (_max_pool_grad_inputs()[:2] + [_rand((2, 4, 4, 3))]
                                   + _max_pool_grad_inputs()[3:])),
})


# Ops whose GPU kernels the graph tests below (and the conformance cases) run.
GRAPH_CHECKED = {
    "Const", "Placeholder", "NoOp", "VariableV2", "Variable", "RefIdentity", "Assign",
    "IsVariableInitialized", "VarHandleOp", "ReadVariableOp", "AssignVariableOp",
    "AssignAddVariableOp", "AssignSubVariableOp", "VarIsInitializedOp", "DestroyResourceOp",
    "ResourceApplyGradientDescent", "ResourceApplyMomentum", "ResourceApplyAdam",
    "ResourceApplyRMSProp", "ResourceApplyAdagrad", "ResourceApplyCenteredRMSProp",
    "ResourceApplyAdadelta", "ResourceApplyAdagradV2", "ResourceApplyAdaMax", "StackV2",
    "StackPushV2", "StackPopV2", "StackCloseV2", "VariableShape", "ResourceGather",
    "ResourceScatterAdd", "ResourceScatterUpdate", "DisableCopyOnRead",
}


@pytest.mark.parametrize("op", sorted(RANDOM_CASES))
def test_gpu_kernel_matches_cpu_kernel(op, gpu):
    attrs, make = RANDOM_CASES[op]
    inputs = make()
    g = Graph()
    node = g.add_node("n", op, [f"in{i}" for i in range(len(inputs))], attrs)
    want = get_kernel(op, CPU).fn(_ctx(node, np, ""), *inputs)
    got = _gpu_call(node, gpu, *inputs)
    want = list(want) if isinstance(want, (list, tuple)) else [want]
    assert len(got) == len(want)
    for a, b in zip(got, want):
        a, b = _host(a), np.asarray(b)
        assert a.shape == b.shape and a.dtype == b.dtype
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


def test_every_gpu_kernel_is_checked(kgraph):
    fixture_ops = {kgraph[c["name"]].op for c in KCASES}
    unchecked = (set(registered_ops(GPU)) - fixture_ops - set(RANDOM_CASES) - GRAPH_CHECKED
                 - LOOP_GRAPH_CHECKED - LOOP_KERNELS_CHECKED)
    assert not unchecked, f"GPU kernels no test runs: {sorted(unchecked)}"
    graphs = [_mlp_train()[0], _cnn()[0], _resource_optimizers()[0]]
    for case in CASES:
        meta = json.loads((case / "case.json").read_text())
        graph = io.load(str(case / "graph.pb"))
        graphs.append(tfg.grad(graph, ys=meta["ys"], xs=meta["xs"])
                      if meta["kind"] == "grad" else graph)
    ran = {n.op for g in graphs for n in g}
    if not CASES:
        pytest.skip("the conformance cases (which run the stack ops) are not present")
    assert GRAPH_CHECKED <= ran, f"no graph test runs {sorted(GRAPH_CHECKED - ran)}"


# --------------------------------------------------------------------------- graphs
def _mlp_train():
    return mlp_sgd_graph(16, [12, 32, 32, 5], 0.3)


def _train(devices, steps=5):
    graph, names, feeds = _mlp_train()
    s = Session(graph, devices=devices)
    s.run(targets=["init"])
    losses = [s.run("loss:0", feeds=feeds, targets=["train"]) for _ in range(steps)]
    return losses, s.run([f"{v}:0" for v in names])


@pytest.mark.parametrize("devices", ["gpu:1", "cpu:1,gpu:1"])
def test_mlp_training_matches_cpu(devices, gpu):
    want_losses, want_vars = _train("cpu:1")
    losses, variables = _train(devices)
    assert all(type(v) is np.ndarray for v in losses + variables)  # fetches come back as numpy
    np.testing.assert_allclose(losses, want_losses, rtol=1e-4, atol=1e-6)
    for a, b in zip(variables, want_vars):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    assert want_losses[-1] < want_losses[0]


def _cnn():
    rng = np.random.default_rng(1)
    with tb.Graph() as g:
        x = tb.placeholder(tb.float32, [4, 10, 10, 3], name="x")
        w1 = tb.constant((rng.standard_normal((3, 3, 3, 8)) * 0.3).astype(np.float32), name="w1")
        h = tb.relu(tb.conv2d(x, w1, [1, 1, 1, 1], "SAME"))
        h = tb.max_pool(h, [1, 2, 2, 1], [1, 2, 2, 1], "VALID")
        w2 = tb.constant((rng.standard_normal((3, 3, 8, 6)) * 0.3).astype(np.float32), name="w2")
        h = tb.conv2d(h, w2, [1, 2, 2, 1], "VALID")
        h = tb.avg_pool(h, [1, 2, 2, 1], [1, 1, 1, 1], "SAME")
        h = tb.reshape(h, [4, -1])
        w3 = tb.constant((rng.standard_normal((24, 5)) * 0.3).astype(np.float32), name="w3")
        tb.reduce_sum(tb.square(tb.softmax(tb.matmul(h, w3))), name="loss")
    graph = tfg.grad(g.graph, ys=["loss"], xs=["x", "w1", "w2", "w3"])
    feeds = {"x:0": rng.standard_normal((4, 10, 10, 3)).astype(np.float32)}
    return graph, ["loss:0", "grad/x:0", "grad/w1:0", "grad/w2:0", "grad/w3:0"], feeds


@pytest.mark.parametrize("devices", ["gpu:1", "cpu:1,gpu:1"])
def test_cnn_gradients_match_cpu(devices, gpu):
    graph, fetches, feeds = _cnn()
    want = Session(graph, devices="cpu:1").run(fetches, feeds=feeds)
    got = Session(graph, devices=devices).run(fetches, feeds=feeds)
    for name, a, b in zip(fetches, got, want):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5, err_msg=name)


def _resource_optimizers():
    g = Graph()
    f = {"dtype": DType.FLOAT}
    g.add_node("grad", "Const", [], {**f, "value": np.linspace(-1, 1, 6, dtype=np.float32)})
    g.add_node("init_value", "Const", [], {**f, "value": np.ones(6, np.float32)})
    for k, v in {"lr": 0.1, "mom": 0.9, "b1": 0.9, "b2": 0.999, "eps": 1e-7, "rho": 0.9,
                 "b1p": 0.9, "b2p": 0.999}.items():
        g.add_node(k, "Const", [], {**f, "value": np.float32(v)})
    rules = {"ResourceApplyGradientDescent": ([], ["lr", "grad"]),
             "ResourceApplyMomentum": (["acc"], ["lr", "grad", "mom"]),
             "ResourceApplyAdam": (["m", "v"], ["b1p", "b2p", "lr", "b1", "b2", "eps", "grad"]),
             "ResourceApplyRMSProp": (["ms", "mo"], ["lr", "rho", "mom", "eps", "grad"]),
             "ResourceApplyAdagrad": (["acc"], ["lr", "grad"]),
             "ResourceApplyCenteredRMSProp": (["mg", "ms", "mo"],
                                              ["lr", "rho", "mom", "eps", "grad"]),
             "ResourceApplyAdadelta": (["acc", "upd"], ["lr", "rho", "eps", "grad"]),
             "ResourceApplyAdagradV2": (["acc"], ["lr", "eps", "grad"]),
             "ResourceApplyAdaMax": (["m", "v"], ["b1p", "lr", "b1", "b2", "eps", "grad"])}
    inits, updates, reads = [], [], []
    for op, (slots, args) in rules.items():
        handles = []
        for slot in ["var"] + slots:
            h = f"{op}/{slot}"
            g.add_node(h, "VarHandleOp", [], {"dtype": DType.FLOAT, "shape": [6],
                                              "shared_name": h.encode()})
            g.add_node(f"{h}/init", "AssignVariableOp", [h, "init_value"], {"dtype": DType.FLOAT})
            inits.append(f"{h}/init")
            handles.append(h)
        g.add_node(op, op, handles + args, {"T": DType.FLOAT})
        g.add_node(f"{op}/add", "AssignAddVariableOp", [handles[0], "grad"], {"dtype": DType.FLOAT})
        g.add_node(f"{op}/sub", "AssignSubVariableOp", [handles[0], "init_value"],
                   {"dtype": DType.FLOAT})
        g.add_node(f"{op}/read", "ReadVariableOp", [handles[0], f"^{op}"], {"dtype": DType.FLOAT})
        g.add_node(f"{op}/ok", "VarIsInitializedOp", [handles[0]], {})
        g.add_node(f"{op}/shape", "VariableShape", [handles[0]], {"out_type": DType.INT32})
        updates.append(op)
        reads += [f"{op}/read:0", f"{op}/shape:0"]
    # A reference variable under its old op name, and a stack pushed, popped and closed.
    g.add_node("old", "Variable", [], {"dtype": DType.FLOAT, "shape": [6]})
    g.add_node("old/init", "Assign", ["old", "init_value"], {"T": DType.FLOAT})
    inits.append("old/init")
    g.add_node("old/ref", "RefIdentity", ["old"], {"T": DType.FLOAT})
    g.add_node("old/ok", "IsVariableInitialized", ["old"], {"dtype": DType.FLOAT})
    g.add_node("max_size", "Const", [], {"dtype": DType.INT32, "value": np.int32(-1)})
    g.add_node("stack", "StackV2", ["max_size"], {"elem_type": DType.FLOAT, "stack_name": b"s"})
    g.add_node("push", "StackPushV2", ["stack", "grad"], {"T": DType.FLOAT})
    g.add_node("pop", "StackPopV2", ["stack", "^push"], {"elem_type": DType.FLOAT})
    g.add_node("close", "StackCloseV2", ["stack", "^pop"], {})
    reads += ["old/ref:0", "old/ok:0", "pop:0"]
    # An embedding table: rows added to (one twice), one overwritten, then gathered.
    g.add_node("table", "VarHandleOp", [], {"dtype": DType.FLOAT, "shape": [3, 2],
                                            "shared_name": b"table"})
    g.add_node("table/value", "Const", [], {**f, "value": np.arange(6, dtype=np.float32)
                                            .reshape(3, 2)})
    g.add_node("table/init", "AssignVariableOp", ["table", "table/value"], f)
    inits.append("table/init")
    g.add_node("rows", "Const", [], {"dtype": DType.INT32, "value": np.int32([2, 0, 2])})
    g.add_node("row", "Const", [], {"dtype": DType.INT64, "value": np.int64([1])})
    g.add_node("table/add", "ResourceScatterAdd", ["table", "rows", "table/value"], f)
    g.add_node("table/set", "ResourceScatterUpdate", ["table", "row", "lr", "^table/add"], f)
    g.add_node("table/no_copy", "DisableCopyOnRead", ["table"], {})  # (Keras 3 saves)
    g.add_node("table/gather", "ResourceGather", ["table", "rows", "^table/set",
                                                   "^table/no_copy"], f)
    reads.append("table/gather:0")
    g.add_node("destroy", "DestroyResourceOp", ["ResourceApplyAdam/var"], {})
    g.add_node("init", "NoOp", [f"^{i}" for i in inits])
    return g, updates, reads


@pytest.mark.parametrize("devices", ["gpu:1", "cpu:1,gpu:1"])
def test_resource_variables_and_optimizers_match_cpu(devices, gpu):
    def run(devs):
        g, updates, reads = _resource_optimizers()
        s = Session(g, devices=devs)
        s.run(targets=["init"])
        for _ in range(3):
            s.run(targets=updates)
        s.run(targets=[u + "/add" for u in updates] + [u + "/sub" for u in updates])
        values = s.run(reads + [u + "/ok:0" for u in updates], targets=["close"])
        s.run(targets=["destroy"])
        return values + s.run(["ResourceApplyAdam/ok:0"])
    got, want = run(devices), run("cpu:1")
    assert not want[-1] and all(want[-6:-1])  # destroyed; initialized before
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)


# --------------------------------------------------------------------------- conformance
def run_case(case_dir, devices):
    """One shared conformance case (what check.py's `run` mode does), in this process."""
    meta = json.loads((case_dir / "case.json").read_text())
    graph = io.load(str(case_dir / "graph.pb"))
    with np.load(case_dir / "feeds.npz") as f:
        feeds = dict(f)
    if meta["kind"] == "grad":
        graph = tfg.grad(graph, ys=meta["ys"], xs=meta["xs"])
        fetches = [f"grad/{x.split(':')[0]}:0" for x in meta["xs"]]
        keys = meta["xs"]
    else:
        fetches = keys = meta["fetches"]
    s = Session(graph, devices=devices)
    if meta.get("init"):
        s.run(targets=meta["init"])
    for _ in range(meta.get("steps", 1)):
        got = s.run(fetches, feeds=feeds, targets=meta.get("targets") or None)
    with np.load(case_dir / "expected.npz") as f:
        for name, key, value in zip(fetches, keys, got):
            want = f[key]
            assert type(value) is np.ndarray, f"{name} came back as {type(value)}"
            if want.dtype.kind in "biu":
                np.testing.assert_array_equal(value, want, err_msg=name)
            else:
                np.testing.assert_allclose(value, want, rtol=meta.get("rtol", 1e-4),
                                           atol=meta.get("atol", 1e-5), err_msg=name)


CASES = conformance_cases()


@pytest.mark.parametrize("devices", ["gpu:1", "cpu:1,gpu:1"])
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_conformance_case_on_gpu(case, devices, gpu):
    run_case(case, devices)


# --------------------------------------------------------------------------- fusion
def _lstm_cell(batch=8, hidden=16, seed=3):
    """The elementwise part of an LSTM cell: c2 = c*sigmoid(f+1) + sigmoid(i)*tanh(j),
    h = tanh(c2)*sigmoid(o), plus a relu/max/min/div/exp/neg tail. `si` (sigmoid(i)) is
    fetched, so it must survive fusion."""
    rng = np.random.default_rng(seed)
    with tb.Graph() as g:
        i, j, f, o, c = (tb.placeholder(tb.float32, [batch, hidden], name=n)
                         for n in ("i", "j", "f", "o", "c"))
        one = tb.constant(np.float32(1.0), name="one")
        si = tb.sigmoid(i, name="si")
        c2 = tb.add(tb.multiply(c, tb.sigmoid(tb.add(f, one))), tb.multiply(si, tb.tanh(j)),
                    name="c2")
        h = tb.multiply(tb.tanh(c2), tb.sigmoid(o), name="h")
        tail = tb.maximum(tb.relu(tb.subtract(h, c2)), tb.negative(tb.exp(f)))
        tb.realdiv(tail, tb.add(tb.exp(tb.negative(tb.relu(c))), one), name="tail")
    feeds = {f"{n}:0": (rng.standard_normal((batch, hidden)) * 2).astype(np.float32)
             for n in ("i", "j", "f", "o", "c")}
    return g.graph, ["h:0", "c2:0", "si:0", "tail:0"], feeds


def _calls_and_values(graph, fetches, feeds, fuse, monkeypatch):
    monkeypatch.setenv("TFG_GPU_FUSE", "1" if fuse else "0")
    s = Session(graph, devices="gpu:1")
    values = s.run(fetches, feeds=feeds)
    (prepared,) = s._cache.values()
    return len(prepared.schedules[0].calls), values


def test_elementwise_chains_fuse_on_gpu(gpu, monkeypatch):
    graph, fetches, feeds = _lstm_cell()
    n_fused, fused = _calls_and_values(graph, fetches, feeds, True, monkeypatch)
    n_plain, plain = _calls_and_values(graph, fetches, feeds, False, monkeypatch)
    want = Session(graph, devices="cpu:1").run(fetches, feeds=feeds)
    # 20 elementwise nodes (+ the Const) become 4 calls: the fetched si, c2, h and tail
    # are roots of their own groups; Const stays a call of its own.
    assert n_plain == 21 and n_fused == 5, (n_plain, n_fused)
    # The stand-in composes the nodes' own kernels: bit-for-bit. CuPy's generated kernel may
    # contract a*b+c into one FMA (one rounding fewer): an ulp of the products, which is many
    # ulp of a result near zero, so an absolute bound there.
    exact = gpu.__name__.endswith("standin")
    for name, a, b, w in zip(fetches, fused, plain, want):
        assert type(a) is np.ndarray and a.shape == w.shape, name
        if exact:
            np.testing.assert_array_equal(a, b, err_msg=name)
        else:
            np.testing.assert_allclose(a, b, rtol=2e-6, atol=1e-5, err_msg=name)
        np.testing.assert_allclose(a, w, rtol=1e-5, atol=1e-5, err_msg=name)


# --------------------------------------------------------------------------- loops
# Real-model loops (tests/fixtures) whose TensorList / TensorArray ops run on the GPU, and the
# list and array ops they run between them.
LOOP_CASES = ["real_models/keras_lstm", "real_models/keras_gru_grad",
              "real_models/tf1_dynamic_lstm_grad", "real_models/tf1_beam_search",
              "real_loops/tf1_raw_rnn_swap_grad", "real_loops/tf2_lstm_tape_tfgrad"]
LOOP_GRAPH_CHECKED = {
    "EmptyTensorList", "TensorListReserve", "TensorListFromTensor", "TensorListLength",
    "TensorListElementShape", "TensorListGetItem", "TensorListSetItem", "TensorListStack",
    "TensorListPushBack", "TensorListPopBack", "TensorArrayV3", "TensorArrayGradV3",
    "TensorArrayWriteV3", "TensorArrayReadV3", "TensorArrayScatterV3", "TensorArrayGatherV3",
    "TensorArraySizeV3"}
# the list and array kernels no fixture graph runs: test_list_and_array_kernels_match_cpu
LOOP_KERNELS_CHECKED = {"TensorListGather", "TensorListResize", "TensorArraySplitV3",
                        "TensorArrayConcatV3", "TensorArrayGradWithShape", "TensorArrayCloseV3"}


def _loop_case(name):
    case = FIXTURES / name
    meta = json.loads((case / "case.json").read_text())
    graph = io.load(str(case / "graph.pb"))
    with np.load(case / "feeds.npz") as f:
        feeds = dict(f)
    with np.load(case / "expected.npz") as f:
        expected = dict(f)
    if meta["kind"] == "grad":
        graph = tfg.grad(graph, ys=meta["ys"], xs=meta["xs"])
        fetches = [f"grad/{x.rsplit(':', 1)[0]}:0" for x in meta["xs"]]
        want = [expected[x] for x in meta["xs"]]
    else:
        fetches, want = meta["fetches"], [expected[k] for k in meta["fetches"]]
    return meta, graph, feeds, fetches, want


def _is_loop_op(op):
    return op.startswith(("TensorList", "TensorArray")) or op == "EmptyTensorList"


@pytest.mark.parametrize("name", LOOP_CASES)
def test_loop_over_lists_and_arrays_on_gpu(name, gpu):
    """The loop runs on `gpu:1` with its list and array ops on the GPU (no value of theirs
    crosses to the host's CPU each iteration) and gives TensorFlow's values."""
    meta, graph, feeds, fetches, want = _loop_case(name)
    s = Session(graph, devices="gpu:1")
    got = s.run(fetches, feeds=feeds)
    for f, a, w in zip(fetches, got, want):
        a = np.asarray(a)
        assert a.shape == w.shape, f
        if w.dtype.kind in "biu":
            np.testing.assert_array_equal(a, w, err_msg=f)
        else:
            np.testing.assert_allclose(a, w, rtol=max(meta.get("rtol", 1e-4), 1e-4),
                                       atol=max(meta.get("atol", 1e-5), 1e-5), err_msg=f)
    on_host = {n.op for n in s.backend._graph() if "CPU" in n.device and _is_loop_op(n.op)}
    assert not on_host, f"list/array ops placed on the host: {sorted(on_host)}"


def test_loop_cases_run_the_list_and_array_ops():
    ran = set()
    for name in LOOP_CASES:
        graph = _loop_case(name)[1]
        ran |= {n.op for n in _canonical(graph)}
    assert LOOP_GRAPH_CHECKED <= ran, sorted(LOOP_GRAPH_CHECKED - ran)


def _canonical(graph):
    from tfg.graphdef.canonical import canonicalize  # (functional While lowered: its body ops)
    return canonicalize(graph)


def _kcall(op, xp, attrs, *inputs):
    """One kernel call: the CPU kernel (xp numpy) or the GPU kernel on `xp`."""
    node = Graph().add_node("n", op, [f"in{i}" for i in range(len(inputs))], attrs)
    if xp is not np:
        return _gpu_call(node, xp, *inputs)
    out = get_kernel(op, CPU).fn(_ctx(node, np, ""), *inputs)
    return list(out) if isinstance(out, (list, tuple)) else [out]


def test_list_and_array_kernels_match_cpu(gpu):
    from tfg.kernels.tensor_array_ops import TensorArray
    x, shape = _rand((5, 3, 2)), np.array([3, 2], np.int32)
    lists = {"element_dtype": DType.FLOAT, "shape_type": DType.INT32}
    got = {}
    for xp in (np, gpu):
        (lst,) = _kcall("TensorListFromTensor", xp, lists, x, shape)
        (gathered,) = _kcall("TensorListGather", xp, lists, lst, np.array([4, 0, 2], np.int32),
                             shape)
        (short,) = _kcall("TensorListResize", xp, {}, lst, np.int32(7))
        (stacked,) = _kcall("TensorListStack", xp, lists, short, shape)  # 2 unset: zeros
        ta = TensorArray("ta", DType.FLOAT, 3)
        flow = np.float32(0)
        _kcall("TensorArraySplitV3", xp, {"T": DType.FLOAT}, ta, x.reshape(15, 2),
               np.array([5, 4, 6], np.int64), flow)
        (g, _) = _kcall("TensorArrayGradWithShape", xp, {"source": b"grad"}, ta, flow,
                        np.array([4], np.int32))
        concat, lengths = _kcall("TensorArrayConcatV3", xp,
                                 {"dtype": DType.FLOAT}, ta, flow)
        _kcall("TensorArrayCloseV3", xp, {}, ta)
        got[xp] = [gathered, stacked, concat, lengths, np.array(g.entries[1].shape), ta.closed]
    for a, b in zip(got[gpu], got[np]):
        np.testing.assert_array_equal(_host(a), np.asarray(b))
    assert type(got[gpu][0]) is gpu.ndarray  # computed on the device
