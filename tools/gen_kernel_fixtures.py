#!/usr/bin/env python3
"""Generate tests/fixtures/kernels/: one GraphDef of kernel cases, TensorFlow's outputs, a list.

NEEDS TENSORFLOW (run it with the TensorFlow venv, e.g. /tmp/tfenv/bin/python); never imports
tfg. Each case is one op node fed only by Const nodes (or VariableV2 nodes for ref inputs,
initialised from Consts), built with tf.raw_ops in its own graph and run there with Grappler
off; cases TensorFlow refuses on CPU are left out. Outputs:

    kernels.pb      every case's nodes in one GraphDef (case node named like the case)
    expected.npz    TensorFlow's outputs keyed `case:port` (and `case/ref<i>` for updated refs)
    cases.json      [{"name", "op", "outputs", "rtol", "atol", "refs": {i: const}, ...}]

    /tmp/tfenv/bin/python tools/gen_kernel_fixtures.py
"""
import json
import os
import sys

import numpy as np
import tensorflow as tf

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "kernels")
rng = np.random.default_rng(1234)


def f32(*shape, lo=-2.0, hi=2.0):
    return rng.uniform(lo, hi, shape).astype(np.float32)


def f64(*shape, lo=-2.0, hi=2.0):
    return rng.uniform(lo, hi, shape).astype(np.float64)


def i32(*shape, lo=-9, hi=10):
    return rng.integers(lo, hi, shape).astype(np.int32)


def i64(*shape, lo=-9, hi=10):
    return rng.integers(lo, hi, shape).astype(np.int64)


def b(*shape):
    return rng.integers(0, 2, shape).astype(bool)


def nz_i32(*shape):
    v = i32(*shape, lo=-7, hi=8)
    v[v == 0] = 3
    return v


class Var:
    """A ref input: a VariableV2 initialised to this value."""

    def __init__(self, value):
        self.value = np.asarray(value)


CASES = []


def case(name, op, rtol=1e-5, atol=1e-5, **kw):
    CASES.append((name, op, rtol, atol, kw))


def is_tensor(v):
    return isinstance(v, (np.ndarray, np.generic, Var))


def build_and_run(name, op, rtol, atol, kw):
    g = tf.Graph()
    refs, ref_after, init_ops = {}, {}, []
    with g.as_default():
        args, idx = {}, 0
        for key, v in kw.items():
            if isinstance(v, Var):
                const = tf.constant(v.value, name=f"{name}/in{idx}")
                var = tf.raw_ops.VariableV2(shape=v.value.shape, dtype=tf.as_dtype(v.value.dtype),
                                            name=f"{name}/var{idx}")
                init_ops.append(tf.raw_ops.Assign(ref=var, value=const, name=f"{name}/init{idx}"))
                refs[idx] = const.op.name
                ref_after[idx] = var
                args[key] = var
                idx += 1
            elif is_tensor(v):
                args[key] = tf.constant(v, name=f"{name}/in{idx}")
                idx += 1
            elif isinstance(v, list) and v and all(is_tensor(x) for x in v):
                args[key] = []
                for x in v:
                    args[key].append(tf.constant(x, name=f"{name}/in{idx}"))
                    idx += 1
            else:
                args[key] = v
        getattr(tf.raw_ops, op)(name=name, **args)
        node = g.get_operation_by_name(name)
        outputs = list(node.outputs)
    config = tf.compat.v1.ConfigProto()
    config.graph_options.rewrite_options.disable_meta_optimizer = True
    config.graph_options.optimizer_options.opt_level = tf.compat.v1.OptimizerOptions.L0
    with tf.compat.v1.Session(graph=g, config=config) as sess:
        if init_ops:
            sess.run(init_ops)
        vals = sess.run(outputs) if outputs else []
        if not outputs:
            sess.run(node)
        with g.as_default():
            reads = {i: tf.raw_ops.Identity(input=v, name=f"{name}/read{i}")
                     for i, v in ref_after.items()}
        after = sess.run(reads) if reads else {}
    # The reads were added after the run; drop them from the exported graph.
    gd = g.as_graph_def()
    keep = [n for n in gd.node if "/read" not in n.name]
    del gd.node[:]
    gd.node.extend(keep)
    expected = {f"{name}:{p}": np.asarray(v) for p, v in enumerate(vals)}
    for i, v in after.items():
        expected[f"{name}/ref{i}"] = np.asarray(v)
    meta = {"name": name, "op": op, "outputs": len(outputs), "rtol": rtol, "atol": atol}
    if refs:
        meta["refs"] = {str(i): c for i, c in refs.items()}
        meta["refs_after"] = {str(i): f"{name}/ref{i}" for i in after}
    return gd, expected, meta


# --------------------------------------------------------------------------- basic
case("identity", "Identity", input=f32(2, 3))
case("identity_i64", "Identity", input=i64(4))
case("identity_n", "IdentityN", input=[f32(2), i32(3)])
case("stop_gradient", "StopGradient", input=f32(3))
case("prevent_gradient", "PreventGradient", input=f32(3), message="no")
case("snapshot", "Snapshot", input=i32(2, 2))
case("ensure_shape", "EnsureShape", input=f32(2, 3), shape=[2, 3])
case("ensure_shape_unknown", "EnsureShape", input=f32(2, 3), shape=tf.TensorShape([None, 3]))
case("check_numerics", "CheckNumerics", tensor=f32(4), message="bad")
case("placeholder_with_default", "PlaceholderWithDefault", input=f32(2, 2), shape=[2, 2])
case("const_bool", "Identity", input=b(5))
case("const_f64", "Identity", input=f64(2, 2))

# --------------------------------------------------------------------------- elementwise
BINARY = ["AddV2", "Add", "Sub", "Mul", "Maximum", "Minimum", "SquaredDifference"]
for op in BINARY:
    case(f"{op.lower()}_f32", op, x=f32(3, 4), y=f32(3, 4))
    case(f"{op.lower()}_bcast", op, x=f32(2, 1, 4), y=f32(3, 1))
    case(f"{op.lower()}_i32", op, x=i32(3, 4), y=i32(4))
    case(f"{op.lower()}_f64_scalar", op, x=f64(3), y=np.float64(1.5))
case("add_i64", "AddV2", x=i64(5), y=i64(5))
case("realdiv_f32", "RealDiv", x=f32(3, 4), y=f32(3, 4, lo=0.5, hi=2))
case("realdiv_bcast", "RealDiv", x=f32(2, 3), y=np.float32(-0.7))
case("div_f32", "Div", x=f32(3, 4), y=f32(4, lo=0.5, hi=2))
case("div_i32", "Div", x=i32(4, 5, lo=-20, hi=20), y=nz_i32(4, 5))
case("div_i64", "Div", x=i64(9, lo=-20, hi=20), y=np.int64(-4))
case("divnonan_f32", "DivNoNan", x=f32(6), y=np.array([1, 0, 2, 0, -1, 0.5], np.float32))
case("floordiv_i32", "FloorDiv", x=i32(4, 5, lo=-20, hi=20), y=nz_i32(4, 5))
case("floordiv_f32", "FloorDiv", x=f32(3, 4, lo=-5, hi=5),
     y=f32(3, 4, lo=0.5, hi=2) * np.float32(-1))
case("floormod_i32", "FloorMod", x=i32(4, 5, lo=-20, hi=20), y=nz_i32(4, 5))
case("floormod_f32", "FloorMod", x=f32(3, 4, lo=-5, hi=5), y=np.float32(-1.5))
case("truncatediv_i32", "TruncateDiv", x=i32(4, 5, lo=-20, hi=20), y=nz_i32(4, 5))
case("truncatemod_i32", "TruncateMod", x=i32(4, 5, lo=-20, hi=20), y=nz_i32(4, 5))
case("truncatemod_f32", "TruncateMod", x=f32(6, lo=-5, hi=5), y=np.float32(1.5))
case("pow_f32", "Pow", x=f32(3, 4, lo=0.1, hi=3), y=f32(3, 4))
case("pow_i32", "Pow", x=i32(6, lo=-4, hi=5), y=np.array([0, 1, 2, 3, 2, 1], np.int32))
case("addn_f32", "AddN", inputs=[f32(2, 3), f32(2, 3), f32(2, 3)])
case("addn_i32", "AddN", inputs=[i32(4), i32(4)])

UNARY = {
    "Neg": f32(3, 4), "Abs": f32(3, 4), "Sign": f32(6), "Square": f32(3, 4),
    "Sqrt": f32(3, 4, lo=0.01, hi=4), "Rsqrt": f32(3, 4, lo=0.1, hi=4),
    "Reciprocal": f32(3, 4, lo=0.5, hi=3), "Inv": f32(5, lo=0.5, hi=3), "Exp": f32(3, 4),
    "Expm1": f32(3, 4, lo=-0.01, hi=0.01), "Log": f32(3, 4, lo=0.01, hi=5),
    "Log1p": f32(3, 4, lo=-0.5, hi=1), "Sin": f32(5), "Cos": f32(5), "Tan": f32(5, lo=-1, hi=1),
    "Tanh": f32(3, 4, lo=-5, hi=5), "Sigmoid": f32(3, 4, lo=-20, hi=20), "Erf": f32(6),
    "Floor": f32(6), "Ceil": f32(6),
    "Round": np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 1.2, -3.7], np.float32),
    "Rint": np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 1.2, -3.7], np.float32),
    "IsFinite": np.array([1, np.inf, -np.inf, np.nan, 0], np.float32),
    "IsNan": np.array([1, np.inf, -np.inf, np.nan, 0], np.float32),
    "IsInf": np.array([1, np.inf, -np.inf, np.nan, 0], np.float32),
}
for op, x in UNARY.items():
    case(f"{op.lower()}_f32", op, x=x, rtol=2e-5)
for op in ["Neg", "Abs", "Sign", "Square"]:
    case(f"{op.lower()}_i32", op, x=i32(7))
for op in ["Exp", "Log1p", "Tanh", "Sigmoid", "Sqrt"]:
    case(f"{op.lower()}_f64", op, x=f64(4, lo=0.1, hi=2))
case("round_f64", "Round", x=np.array([0.5, 1.5, -2.5, 2.4], np.float64))

CASTS = [(f32(8, lo=-5, hi=5), tf.int32), (f32(6, lo=-5, hi=5), tf.int64),
         (np.array([0, 1.5, -0.2, 0], np.float32), tf.bool), (i32(5), tf.float32),
         (b(5), tf.float32), (b(5), tf.int32), (i64(5), tf.int32), (f32(4), tf.float64),
         (f64(4), tf.float32), (i32(4), tf.bool), (f32(4), tf.float16),
         (np.array([3e9, -3e9, 1.9], np.float64), tf.int64)]
for k, (x, dst) in enumerate(CASTS):
    case(f"cast_{k}", "Cast", x=x, DstT=dst)

COMPARE = ["Equal", "NotEqual", "Less", "LessEqual", "Greater", "GreaterEqual"]
for op in COMPARE:
    case(f"{op.lower()}_i32", op, x=i32(3, 4, lo=-2, hi=3), y=i32(4, lo=-2, hi=3))
    case(f"{op.lower()}_f32", op, x=f32(2, 3), y=f32(2, 1))
case("equal_bool", "Equal", x=b(6), y=b(6))
case("logical_and", "LogicalAnd", x=b(3, 4), y=b(4))
case("logical_or", "LogicalOr", x=b(3, 4), y=b(3, 4))
case("logical_not", "LogicalNot", x=b(5))
case("select_same", "Select", condition=b(3, 4), x=f32(3, 4), y=f32(3, 4))
case("select_rows", "Select", condition=b(3), x=f32(3, 4), y=f32(3, 4))
case("select_scalar", "Select", condition=np.bool_(True), x=i32(3, 2), y=i32(3, 2))
case("selectv2_bcast", "SelectV2", condition=b(3, 1), t=f32(4), e=np.float32(0.5))
for ex in (False, True):
    for rev in (False, True):
        tag = f"{int(ex)}{int(rev)}"
        case(f"cumsum_{tag}", "Cumsum", x=f32(3, 4), axis=np.int32(1), exclusive=ex, reverse=rev)
        case(f"cumprod_{tag}", "Cumprod", x=f32(3, 4), axis=np.int32(0), exclusive=ex,
             reverse=rev)
case("cumsum_i32_neg_axis", "Cumsum", x=i32(2, 3), axis=np.int32(-1))

# --------------------------------------------------------------------------- nn
case("matmul", "MatMul", a=f32(3, 4), b=f32(4, 5))
case("matmul_ta", "MatMul", a=f32(4, 3), b=f32(4, 5), transpose_a=True)
case("matmul_tb", "MatMul", a=f32(3, 4), b=f32(5, 4), transpose_b=True)
case("matmul_tab", "MatMul", a=f32(4, 3), b=f32(5, 4), transpose_a=True, transpose_b=True)
case("matmul_i32", "MatMul", a=i32(2, 3), b=i32(3, 2))
case("matmul_f64", "MatMul", a=f64(2, 3), b=f64(3, 2))
case("batchmatmul", "BatchMatMul", x=f32(2, 3, 4), y=f32(2, 4, 5))
case("batchmatmul_adj", "BatchMatMul", x=f32(2, 4, 3), y=f32(2, 5, 4), adj_x=True, adj_y=True)
case("batchmatmulv2_bcast", "BatchMatMulV2", x=f32(2, 1, 3, 4), y=f32(3, 4, 2))
case("batchmatmulv2_adjy", "BatchMatMulV2", x=f32(3, 4), y=f32(2, 5, 4), adj_y=True)
case("batchmatmulv3", "BatchMatMulV3", x=f32(2, 3, 4), y=f32(2, 4, 2), Tout=tf.float32)
case("biasadd_nhwc", "BiasAdd", value=f32(2, 3, 3, 4), bias=f32(4))
case("biasadd_nchw", "BiasAdd", value=f32(2, 4, 3, 3), bias=f32(4), data_format="NCHW")
case("biasadd_2d", "BiasAdd", value=f32(3, 5), bias=f32(5))
case("biasaddv1", "BiasAddV1", value=f32(3, 5), bias=f32(5))
case("biasaddgrad_nhwc", "BiasAddGrad", out_backprop=f32(2, 3, 3, 4))
case("biasaddgrad_nchw", "BiasAddGrad", out_backprop=f32(2, 4, 3, 3), data_format="NCHW")
case("biasaddgrad_2d", "BiasAddGrad", out_backprop=f32(6, 5))

ACT = ["Relu", "Relu6", "Elu", "Selu", "Softplus", "Softsign"]
for op in ACT:
    case(f"{op.lower()}_f32", op, features=f32(3, 5, lo=-8, hi=8))
case("relu_i32", "Relu", features=i32(6))
case("softplus_big", "Softplus", features=np.array([-100, -20, 0, 20, 100], np.float32))
case("leakyrelu", "LeakyRelu", features=f32(3, 4), alpha=0.1)
ACT_GRAD = {"ReluGrad": "features", "Relu6Grad": "features", "SoftplusGrad": "features",
            "EluGrad": "outputs", "SeluGrad": "outputs"}
for op, second in ACT_GRAD.items():
    case(f"{op.lower()}", op, gradients=f32(3, 5), **{second: f32(3, 5, lo=-8, hi=8)})
case("relu6grad_edges", "Relu6Grad", gradients=f32(5),
     features=np.array([0, 6, 3, -1, 7], np.float32))
case("leakyrelugrad", "LeakyReluGrad", gradients=f32(3, 4), features=f32(3, 4), alpha=0.2)
for op in ["TanhGrad", "SigmoidGrad", "SqrtGrad", "RsqrtGrad", "ReciprocalGrad", "InvGrad"]:
    case(op.lower(), op, y=f32(3, 4, lo=0.2, hi=2), dy=f32(3, 4))
case("softmax", "Softmax", logits=f32(3, 6, lo=-50, hi=50))
case("softmax_3d", "Softmax", logits=f32(2, 3, 4))
case("logsoftmax", "LogSoftmax", logits=f32(3, 6, lo=-50, hi=50))
lab = rng.uniform(0, 1, (4, 5)).astype(np.float32)
lab /= lab.sum(1, keepdims=True)
case("softmax_xent", "SoftmaxCrossEntropyWithLogits", features=f32(4, 5), labels=lab)
case("softmax_xent_bcast", "SoftmaxCrossEntropyWithLogits", features=f32(4, 5), labels=lab[:1])
case("sparse_softmax_xent", "SparseSoftmaxCrossEntropyWithLogits", features=f32(4, 5),
     labels=np.array([0, 4, 2, 1], np.int32))
case("sparse_softmax_xent_i64", "SparseSoftmaxCrossEntropyWithLogits", features=f32(3, 7),
     labels=np.array([6, 0, 3], np.int64))
case("l2loss", "L2Loss", t=f32(3, 4))

# --------------------------------------------------------------------------- conv / pool
for pad in ("VALID", "SAME"):
    for s in (1, 2):
        case(f"conv2d_{pad.lower()}_s{s}", "Conv2D", input=f32(2, 7, 6, 3), filter=f32(3, 2, 3, 4),
             strides=[1, s, s, 1], padding=pad, rtol=1e-4, atol=1e-4)
case("conv2d_dilated", "Conv2D", input=f32(1, 8, 8, 2), filter=f32(3, 3, 2, 3),
     strides=[1, 1, 1, 1], padding="SAME", dilations=[1, 2, 2, 1], rtol=1e-4, atol=1e-4)
case("conv2d_explicit", "Conv2D", input=f32(1, 5, 5, 2), filter=f32(3, 3, 2, 2),
     strides=[1, 2, 1, 1], padding="EXPLICIT", explicit_paddings=[0, 0, 1, 2, 0, 1, 0, 0],
     rtol=1e-4, atol=1e-4)
case("conv2d_nchw", "Conv2D", input=f32(2, 3, 6, 6), filter=f32(3, 3, 3, 4),
     strides=[1, 1, 2, 2], padding="SAME", data_format="NCHW", rtol=1e-4, atol=1e-4)
case("conv2d_1x1", "Conv2D", input=f32(2, 4, 4, 5), filter=f32(1, 1, 5, 3),
     strides=[1, 1, 1, 1], padding="VALID", rtol=1e-4, atol=1e-4)
for pad in ("VALID", "SAME"):
    for s in (1, 2):
        x, w = f32(2, 7, 6, 3), f32(3, 2, 3, 4)
        oh = (7 - 3) // s + 1 if pad == "VALID" else -(-7 // s)
        ow = (6 - 2) // s + 1 if pad == "VALID" else -(-6 // s)
        dy = f32(2, oh, ow, 4)
        case(f"conv2dbackpropinput_{pad.lower()}_s{s}", "Conv2DBackpropInput",
             input_sizes=np.array(x.shape, np.int32), filter=w, out_backprop=dy,
             strides=[1, s, s, 1], padding=pad, rtol=1e-4, atol=1e-4)
        case(f"conv2dbackpropfilter_{pad.lower()}_s{s}", "Conv2DBackpropFilter", input=x,
             filter_sizes=np.array(w.shape, np.int32), out_backprop=dy,
             strides=[1, s, s, 1], padding=pad, rtol=1e-4, atol=1e-4)
case("conv2dbackpropinput_dilated", "Conv2DBackpropInput", input_sizes=np.array([1, 8, 8, 2],
     np.int32), filter=f32(3, 3, 2, 3), out_backprop=f32(1, 8, 8, 3), strides=[1, 1, 1, 1],
     padding="SAME", dilations=[1, 2, 2, 1], rtol=1e-4, atol=1e-4)
case("conv2dbackpropfilter_dilated", "Conv2DBackpropFilter", input=f32(1, 8, 8, 2),
     filter_sizes=np.array([3, 3, 2, 3], np.int32), out_backprop=f32(1, 8, 8, 3),
     strides=[1, 1, 1, 1], padding="SAME", dilations=[1, 2, 2, 1], rtol=1e-4, atol=1e-4)
case("conv2dbackpropinput_explicit", "Conv2DBackpropInput",
     input_sizes=np.array([1, 5, 5, 2], np.int32), filter=f32(3, 3, 2, 2),
     out_backprop=f32(1, 3, 4, 2), strides=[1, 2, 1, 1], padding="EXPLICIT",
     explicit_paddings=[0, 0, 1, 2, 0, 1, 0, 0], rtol=1e-4, atol=1e-4)
case("conv2dbackpropfilter_explicit", "Conv2DBackpropFilter", input=f32(1, 5, 5, 2),
     filter_sizes=np.array([3, 3, 2, 2], np.int32), out_backprop=f32(1, 3, 4, 2),
     strides=[1, 2, 1, 1], padding="EXPLICIT", explicit_paddings=[0, 0, 1, 2, 0, 1, 0, 0],
     rtol=1e-4, atol=1e-4)
case("depthwise_same", "DepthwiseConv2dNative", input=f32(2, 6, 6, 3), filter=f32(3, 3, 3, 2),
     strides=[1, 1, 1, 1], padding="SAME", rtol=1e-4, atol=1e-4)
case("depthwise_valid_s2", "DepthwiseConv2dNative", input=f32(1, 7, 7, 2),
     filter=f32(3, 3, 2, 1), strides=[1, 2, 2, 1], padding="VALID", rtol=1e-4, atol=1e-4)
for pad in ("VALID", "SAME"):
    case(f"maxpool_{pad.lower()}", "MaxPool", input=f32(2, 7, 6, 3), ksize=[1, 3, 2, 1],
         strides=[1, 2, 2, 1], padding=pad)
    case(f"avgpool_{pad.lower()}", "AvgPool", value=f32(2, 7, 6, 3), ksize=[1, 3, 2, 1],
         strides=[1, 2, 2, 1], padding=pad)
    xp = f32(2, 7, 6, 3)
    oh = 3 if pad == "VALID" else 4
    ow = 3
    ypool = tf.nn.max_pool2d(xp, [3, 2], [2, 2], pad).numpy()
    case(f"maxpoolgrad_{pad.lower()}", "MaxPoolGrad", orig_input=xp, orig_output=ypool,
         grad=f32(*ypool.shape), ksize=[1, 3, 2, 1], strides=[1, 2, 2, 1], padding=pad)
    case(f"avgpoolgrad_{pad.lower()}", "AvgPoolGrad", orig_input_shape=np.array(xp.shape, np.int32),
         grad=f32(*ypool.shape), ksize=[1, 3, 2, 1], strides=[1, 2, 2, 1], padding=pad)
case("maxpool_nchw", "MaxPool", input=f32(1, 2, 6, 6), ksize=[1, 1, 2, 2], strides=[1, 1, 2, 2],
     padding="VALID", data_format="NCHW")
case("maxpool_s1", "MaxPool", input=f32(1, 5, 5, 2), ksize=[1, 3, 3, 1], strides=[1, 1, 1, 1],
     padding="SAME")
case("maxpoolv2", "MaxPoolV2", input=f32(2, 6, 6, 3), ksize=np.array([1, 2, 2, 1], np.int32),
     strides=np.array([1, 2, 2, 1], np.int32), padding="VALID")

x_bn = f32(4, 3, 3, 5)
sc, of = f32(5, lo=0.5, hi=1.5), f32(5)
mu, var = f32(5), f32(5, lo=0.5, hi=2)
for op in ("FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3"):
    extra = {}
    case(f"{op.lower()}_train", op, x=x_bn, scale=sc, offset=of, mean=np.zeros(0, np.float32),
         variance=np.zeros(0, np.float32), epsilon=0.001, is_training=True, rtol=1e-4,
         atol=1e-4, **extra)
    case(f"{op.lower()}_infer", op, x=x_bn, scale=sc, offset=of, mean=mu, variance=var,
         epsilon=0.01, is_training=False, rtol=1e-4, atol=1e-4, **extra)
case("fusedbatchnormv3_avg", "FusedBatchNormV3", x=x_bn, scale=sc, offset=of, mean=mu,
     variance=var, epsilon=0.001, is_training=True, exponential_avg_factor=0.3,
     rtol=1e-4, atol=1e-4)
case("fusedbatchnormv3_nchw", "FusedBatchNormV3", x=f32(2, 5, 3, 3), scale=sc, offset=of,
     mean=mu, variance=var, epsilon=0.001, is_training=True, data_format="NCHW",
     rtol=1e-4, atol=1e-4)
bm = x_bn.mean((0, 1, 2))
bv = x_bn.var((0, 1, 2))
ivar = 1 / np.sqrt(bv + 0.001)
for op in ("FusedBatchNormGrad", "FusedBatchNormGradV3"):
    extra = {"reserve_space_3": np.zeros(0, np.float32)} if op.endswith("V3") else {}
    case(f"{op.lower()}_train", op, y_backprop=f32(4, 3, 3, 5), x=x_bn, scale=sc,
         reserve_space_1=bm.astype(np.float32), reserve_space_2=bv.astype(np.float32),
         epsilon=0.001, is_training=True, rtol=1e-3, atol=1e-4, **extra)
    case(f"{op.lower()}_infer", op, y_backprop=f32(4, 3, 3, 5), x=x_bn, scale=sc,
         reserve_space_1=mu, reserve_space_2=var, epsilon=0.01, is_training=False,
         rtol=1e-3, atol=1e-4, **extra)
case("fusedbatchnormgradv3_nchw", "FusedBatchNormGradV3", y_backprop=f32(2, 5, 3, 3),
     x=f32(2, 5, 3, 3), scale=sc, reserve_space_1=mu, reserve_space_2=var,
     reserve_space_3=np.zeros(0, np.float32), epsilon=0.001, is_training=True,
     data_format="NCHW", rtol=1e-3, atol=1e-4)

# --------------------------------------------------------------------------- reductions
RED = ["Sum", "Mean", "Max", "Min", "Prod"]
for op in RED:
    case(f"{op.lower()}_axis1", op, input=f32(3, 4, 2), axis=np.int32(1))
    case(f"{op.lower()}_keep", op, input=f32(3, 4, 2), axis=np.array([0, -1], np.int32),
         keep_dims=True)
    case(f"{op.lower()}_all", op, input=f32(3, 4), axis=np.array([0, 1], np.int64))
    case(f"{op.lower()}_none", op, input=f32(3, 4), axis=np.zeros(0, np.int32))
    case(f"{op.lower()}_i32", op, input=i32(3, 5), axis=np.int32(-1))
case("mean_i32_neg", "Mean", input=np.array([[-3, -4, 2], [5, 1, 1]], np.int32), axis=np.int32(1))
case("all", "All", input=b(3, 4), axis=np.int32(1))
case("any_keep", "Any", input=b(3, 4), axis=np.int32(0), keep_dims=True)
case("all_empty", "All", input=np.zeros((0, 3), bool), axis=np.int32(0))
case("argmax", "ArgMax", input=f32(3, 5), dimension=np.int32(1))
case("argmax_i32out", "ArgMax", input=f32(3, 5), dimension=np.int32(0), output_type=tf.int32)
case("argmin", "ArgMin", input=i32(4, 3), dimension=np.int32(-1))
case("argmax_ties", "ArgMax", input=np.array([1, 3, 3, 0], np.float32), dimension=np.int32(0))

# --------------------------------------------------------------------------- array ops
case("shape", "Shape", input=f32(2, 3, 4))
case("shape_i64", "Shape", input=f32(2, 0), out_type=tf.int64)
case("shapen", "ShapeN", input=[f32(2, 3), f32(4, 1)])
case("size", "Size", input=f32(2, 3))
case("size_i64", "Size", input=f32(2, 3), out_type=tf.int64)
case("rank", "Rank", input=f32(2, 3, 1))
case("reshape", "Reshape", tensor=f32(2, 6), shape=np.array([3, -1], np.int32))
case("reshape_scalar", "Reshape", tensor=f32(1), shape=np.zeros(0, np.int32))
case("squeeze_all", "Squeeze", input=f32(1, 3, 1, 2))
case("squeeze_axis", "Squeeze", input=f32(1, 3, 1, 2), axis=[-2])
case("expanddims", "ExpandDims", input=f32(2, 3), axis=np.int32(-1))
case("expanddims0", "ExpandDims", input=f32(2, 3), axis=np.int64(0))
case("transpose", "Transpose", x=f32(2, 3, 4), perm=np.array([2, 0, 1], np.int32))
case("invertperm", "InvertPermutation", x=np.array([2, 0, 3, 1], np.int32))
case("concatv2", "ConcatV2", values=[f32(2, 3), f32(2, 1)], axis=np.int32(-1))
case("concatv2_i32", "ConcatV2", values=[i32(1, 2), i32(3, 2), i32(2, 2)], axis=np.int32(0))
case("concat", "Concat", concat_dim=np.int32(1), values=[f32(2, 3), f32(2, 2)])
case("concatoffset", "ConcatOffset", concat_dim=np.int32(1),
     shape=[np.array([2, 3, 5], np.int32), np.array([2, 7, 5], np.int32),
            np.array([2, 1, 5], np.int32)])
case("pack", "Pack", values=[f32(2, 3), f32(2, 3)], axis=1)
case("pack_neg", "Pack", values=[i32(3), i32(3), i32(3)], axis=-1)
case("unpack", "Unpack", value=f32(3, 2), num=2, axis=1)
case("unpack0", "Unpack", value=i32(3, 2), num=3)
case("splitv", "SplitV", value=f32(2, 7), size_splits=np.array([2, -1, 3], np.int32),
     axis=np.int32(1), num_split=3)
case("split", "Split", axis=np.int32(0), value=f32(6, 2), num_split=3)
case("slice", "Slice", input=f32(4, 5), begin=np.array([1, 2], np.int32),
     size=np.array([2, -1], np.int32))
SS = [
    ((5, 6), [1, 0], [4, 6], [1, 2], {}),
    ((5, 6), [-1, 0], [-4, 6], [-1, 1], {}),
    ((5, 6), [1, 2], [0, 0], [1, 1], {"begin_mask": 0, "end_mask": 3}),
    ((5, 6), [2, 1], [3, 5], [1, 1], {"shrink_axis_mask": 1}),
    ((5, 6), [0, 1], [0, 4], [1, 1], {"new_axis_mask": 1}),
    ((3, 4, 5), [1, 0], [2, 3], [1, 1], {"ellipsis_mask": 1}),
    ((3, 4, 5), [0, 1, 0], [0, 3, 1], [1, 1, 1], {"ellipsis_mask": 1, "shrink_axis_mask": 4}),
    ((5, 6), [4, 5], [0, 0], [-2, -3], {"end_mask": 0}),
    ((5, 6), [0, 3], [5, 3], [1, 1], {"begin_mask": 1, "end_mask": 1, "shrink_axis_mask": 2}),
    ((3, 4, 5), [1, 0, 2], [2, 0, 3], [1, 1, 1], {"new_axis_mask": 2, "shrink_axis_mask": 1}),
    ((5, 6), [10, -10], [20, 10], [1, 1], {}),
]
for k, (shape, be, en, st, masks) in enumerate(SS):
    x = f32(*shape)
    case(f"stridedslice_{k}", "StridedSlice", input=x, begin=np.array(be, np.int32),
         end=np.array(en, np.int32), strides=np.array(st, np.int32), **masks)
    out = tf.raw_ops.StridedSlice(input=x, begin=be, end=en, strides=st, **masks).numpy()
    case(f"stridedslicegrad_{k}", "StridedSliceGrad", shape=np.array(shape, np.int32),
         begin=np.array(be, np.int32), end=np.array(en, np.int32),
         strides=np.array(st, np.int32), dy=f32(*out.shape), **masks)
case("stridedslice_i64", "StridedSlice", input=i32(4, 4), begin=np.array([1], np.int64),
     end=np.array([3], np.int64), strides=np.array([1], np.int64))
case("gatherv2", "GatherV2", params=f32(5, 3), indices=np.array([4, 0, 2, 2], np.int32),
     axis=np.int32(0))
case("gatherv2_axis1", "GatherV2", params=f32(2, 5, 3), indices=np.array([[1, 0], [4, 4]],
     np.int64), axis=np.int32(1))
case("gatherv2_neg", "GatherV2", params=i32(3, 4), indices=np.array([3, 1], np.int32),
     axis=np.int32(-1))
case("gatherv2_batch", "GatherV2", params=f32(2, 4, 3), indices=np.array([[0, 3], [2, 1]],
     np.int32), axis=np.int32(1), batch_dims=1)
case("gather", "Gather", params=f32(5, 2), indices=np.array([[1, 3], [0, 4]], np.int32))
case("gathernd", "GatherNd", params=f32(3, 4, 2), indices=np.array([[0, 1], [2, 3]], np.int32))
case("gathernd_full", "GatherNd", params=i32(3, 4), indices=np.array([[[0, 1]], [[2, 3]]],
     np.int64))
case("scatternd", "ScatterNd", indices=np.array([[1], [3], [1]], np.int32), updates=f32(3, 2),
     shape=np.array([5, 2], np.int32))
case("unsortedsegmentsum", "UnsortedSegmentSum", data=f32(5, 3),
     segment_ids=np.array([0, 2, 0, 3, 2], np.int32), num_segments=np.int32(4))
case("unsortedsegmentsum_2d", "UnsortedSegmentSum", data=i32(2, 3, 2),
     segment_ids=np.array([[0, 1, 0], [1, 1, 2]], np.int32), num_segments=np.int64(3))
case("dynamicstitch", "DynamicStitch", indices=[np.array([0, 2], np.int32),
     np.array([[1, 4], [3, 2]], np.int32)], data=[f32(2, 3), f32(2, 2, 3)])
case("tile", "Tile", input=f32(2, 3), multiples=np.array([2, 3], np.int32))
case("pad", "Pad", input=f32(2, 3), paddings=np.array([[1, 0], [2, 1]], np.int32))
case("padv2", "PadV2", input=i32(2, 2), paddings=np.array([[0, 1], [1, 1]], np.int64),
     constant_values=np.int32(7))
case("mirrorpad_reflect", "MirrorPad", input=f32(3, 4), paddings=np.array([[1, 2], [2, 3]],
     np.int32), mode="REFLECT")
case("mirrorpad_symmetric", "MirrorPad", input=f32(3, 4), paddings=np.array([[2, 3], [0, 4]],
     np.int32), mode="SYMMETRIC")
case("reversev2", "ReverseV2", tensor=f32(3, 4), axis=np.array([-1], np.int32))
case("reversev2_2", "ReverseV2", tensor=i32(2, 3, 2), axis=np.array([0, 2], np.int64))
case("fill", "Fill", dims=np.array([2, 3], np.int32), value=np.float32(1.5))
case("fill_i64", "Fill", dims=np.array([4], np.int64), value=np.int32(-2))
case("zeroslike", "ZerosLike", x=f32(2, 3))
case("oneslike", "OnesLike", x=i32(4))
case("range_i32", "Range", start=np.int32(2), limit=np.int32(11), delta=np.int32(3))
case("range_neg", "Range", start=np.int32(5), limit=np.int32(-4), delta=np.int32(-2))
case("range_f32", "Range", start=np.float32(0.5), limit=np.float32(3.2), delta=np.float32(0.7))
case("onehot", "OneHot", indices=np.array([0, 2, -1, 1], np.int32), depth=np.int32(3),
     on_value=np.float32(5), off_value=np.float32(-1))
case("onehot_axis0", "OneHot", indices=np.array([[0, 2], [1, 3]], np.int64), depth=np.int32(4),
     on_value=np.int32(1), off_value=np.int32(0), axis=0)
case("broadcastto", "BroadcastTo", input=f32(3, 1), shape=np.array([2, 3, 4], np.int32))
case("broadcastargs", "BroadcastArgs", s0=np.array([2, 1, 4], np.int32),
     s1=np.array([3, 1], np.int32))
case("bcastgradargs", "BroadcastGradientArgs", s0=np.array([2, 1, 4], np.int32),
     s1=np.array([3, 1], np.int32))
case("bcastgradargs_same", "BroadcastGradientArgs", s0=np.array([2, 3], np.int64),
     s1=np.array([2, 3], np.int64))
case("bcastgradargs_ones", "BroadcastGradientArgs", s0=np.array([1, 1], np.int32),
     s1=np.array([5, 1, 1], np.int32))
case("listdiff", "ListDiff", x=np.array([1, 5, 2, 5, 7, 3], np.int32),
     y=np.array([5, 3, 9], np.int32))
case("where_bool", "Where", condition=b(3, 4))
case("where_f32", "Where", condition=np.array([0, 1.5, 0, -2], np.float32))
case("dfvecpermute", "DataFormatVecPermute", x=np.array([1, 2, 3, 4], np.int32))
case("dfvecpermute_back", "DataFormatVecPermute", x=np.array([1, 2, 3, 4], np.int32),
     src_format="NCHW", dst_format="NHWC")
case("dfvecpermute_2d", "DataFormatVecPermute", x=np.array([[1, 2], [3, 4], [5, 6], [7, 8]],
     np.int32))
case("dfdimmap", "DataFormatDimMap", x=np.array([0, 1, 2, 3, -1, -4], np.int32))

# --------------------------------------------------------------------------- training
case("applygd", "ApplyGradientDescent", var=Var(f32(3, 2)), alpha=np.float32(0.1),
     delta=f32(3, 2))
for nest in (False, True):
    case(f"applymomentum_{int(nest)}", "ApplyMomentum", var=Var(f32(4)), accum=Var(f32(4)),
         lr=np.float32(0.05), grad=f32(4), momentum=np.float32(0.9), use_nesterov=nest)
    case(f"applyadam_{int(nest)}", "ApplyAdam", var=Var(f32(2, 3)), m=Var(f32(2, 3)),
         v=Var(f32(2, 3, lo=0, hi=1)), beta1_power=np.float32(0.9 ** 3),
         beta2_power=np.float32(0.999 ** 3), lr=np.float32(0.01), beta1=np.float32(0.9),
         beta2=np.float32(0.999), epsilon=np.float32(1e-7), grad=f32(2, 3), use_nesterov=nest)
case("applyrmsprop", "ApplyRMSProp", var=Var(f32(5)), ms=Var(f32(5, lo=0, hi=1)),
     mom=Var(f32(5)), lr=np.float32(0.01), rho=np.float32(0.9), momentum=np.float32(0.5),
     epsilon=np.float32(1e-6), grad=f32(5))
for upd in (True, False):
    case(f"applyadagrad_{int(upd)}", "ApplyAdagrad", var=Var(f32(4)),
         accum=Var(f32(4, lo=0.1, hi=1)), lr=np.float32(0.1), grad=f32(4), update_slots=upd)
case("assign", "Assign", ref=Var(f32(3)), value=f32(3))
case("assignadd", "AssignAdd", ref=Var(f32(3)), value=f32(3))
case("assignsub", "AssignSub", ref=Var(i32(3)), value=i32(3))
# TF1 optimizers' other updates (tf1.train.RMSPropOptimizer(centered=True), Adadelta; Keras 2's
# Adagrad with epsilon, Adamax): after every earlier case so their random values stay put.
case("applycenteredrmsprop", "ApplyCenteredRMSProp", var=Var(f32(5)), mg=Var(f32(5, lo=-0.1, hi=0.1)),
     ms=Var(f32(5, lo=0.5, hi=1)), mom=Var(f32(5)), lr=np.float32(0.01), rho=np.float32(0.9),
     momentum=np.float32(0.5), epsilon=np.float32(1e-6), grad=f32(5))
case("applyadadelta", "ApplyAdadelta", var=Var(f32(4)), accum=Var(f32(4, lo=0, hi=1)),
     accum_update=Var(f32(4, lo=0, hi=1)), lr=np.float32(1.0), rho=np.float32(0.95),
     epsilon=np.float32(1e-6), grad=f32(4))
case("applyadagradv2", "ApplyAdagradV2", var=Var(f32(4)), accum=Var(f32(4, lo=0.1, hi=1)),
     lr=np.float32(0.1), epsilon=np.float32(1e-3), grad=f32(4))
case("applyadamax", "ApplyAdaMax", var=Var(f32(2, 3)), m=Var(f32(2, 3)),
     v=Var(f32(2, 3, lo=0, hi=1)), beta1_power=np.float32(0.9 ** 2), lr=np.float32(0.01),
     beta1=np.float32(0.9), beta2=np.float32(0.999), epsilon=np.float32(1e-7), grad=f32(2, 3))


def main():
    os.makedirs(OUT, exist_ok=True)
    from tensorflow.core.framework import graph_pb2

    merged = graph_pb2.GraphDef()
    expected, metas, skipped = {}, [], []
    for name, op, rtol, atol, kw in CASES:
        try:
            gd, exp, meta = build_and_run(name, op, rtol, atol, kw)
        except Exception as e:  # noqa: BLE001 - a case TensorFlow refuses on CPU is dropped
            skipped.append(f"{name}: {type(e).__name__}: {str(e).splitlines()[0][:150]}")
            continue
        if not merged.HasField("versions"):
            merged.versions.CopyFrom(gd.versions)
        merged.node.extend(gd.node)
        expected.update(exp)
        metas.append(meta)
    with open(os.path.join(OUT, "kernels.pb"), "wb") as f:
        f.write(merged.SerializeToString())
    np.savez_compressed(os.path.join(OUT, "expected.npz"), **expected)
    with open(os.path.join(OUT, "cases.json"), "w") as f:
        json.dump({"tensorflow": tf.__version__, "cases": metas, "skipped": skipped}, f,
                  indent=1)
    print(f"{len(metas)} cases, {len(skipped)} skipped", file=sys.stderr)
    for s in skipped:
        print("  skipped", s, file=sys.stderr)


if __name__ == "__main__":
    main()
