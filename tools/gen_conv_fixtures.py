#!/usr/bin/env python3
"""Make tests/fixtures/conv/ (tests/test_conv_grouped.py): grouped and dilated convolutions,
their backprops and their gradients, as TensorFlow computes them.

NEEDS TENSORFLOW; never imports tfg:

    /work/tfvenv/bin/python tools/gen_conv_fixtures.py

TensorFlow's CPU kernels refuse most of these (grouped backprops: "Gradients for grouped
convolutions are not supported on CPU"; dilated Conv2DBackprop*, dilated depthwise: "does not
support dilations"), so every value comes from XLA (`tf.function(jit_compile=True)`), which
implements them all; where the CPU kernel runs a case too its value is checked against XLA's.

    kernels.pb, kernels.npz, kernels.json   one op node per case fed by Const nodes, as in
                                            tests/fixtures/kernels (`case:0` -> output)
    grad.pb, grad.npz, grad.json            one forward graph of placeholders; per case
                                            loss = sum(op(x, w) * r) and TensorFlow's
                                            gradients of it w.r.t. the op's float inputs, as in
                                            tests/fixtures/grad (`feed/<t>`, `<case>/<x>`)
"""
import json
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

tf.get_logger().setLevel("ERROR")  # one tf.function per case: retracing warnings are expected

tf1 = tf.compat.v1
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "conv")
rng = np.random.default_rng(22)


def f32(*shape):
    return rng.uniform(-1, 1, shape).astype(np.float32)


def attrs(strides=1, dil=1, padding="SAME", fmt="NHWC", explicit=None):
    s = [1, strides, strides, 1] if fmt == "NHWC" else [1, 1, strides, strides]
    d = [1, dil, dil, 1] if fmt == "NHWC" else [1, 1, dil, dil]
    out = {"strides": s, "dilations": d, "padding": padding, "data_format": fmt}
    if explicit:
        out["explicit_paddings"] = explicit
    return out


def out_shape(op, x_shape, w_shape, a):
    """The forward output shape of a case (by running the forward op under XLA)."""
    fwd = "DepthwiseConv2dNative" if op.startswith("Depthwise") else "Conv2D"
    fn = tf.function(lambda x, w: getattr(tf.raw_ops, fwd)(input=x, filter=w, **a),
                     jit_compile=True)
    return tuple(fn(np.zeros(x_shape, np.float32), np.zeros(w_shape, np.float32)).shape)


# (name, op, input shape, filter shape, attrs): each op's tensors are made from these shapes.
CASES = [
    ("conv_grouped3_same_s2", "Conv2D", (2, 7, 8, 6), (3, 3, 2, 9), attrs(2)),
    ("conv_grouped2_dil2_valid", "Conv2D", (2, 9, 9, 4), (3, 3, 2, 6), attrs(1, 2, "VALID")),
    ("conv_grouped_depthlike", "Conv2D", (1, 6, 6, 4), (3, 3, 1, 8), attrs(1)),
    ("conv_grouped2_nchw", "Conv2D", (2, 4, 6, 5), (3, 3, 2, 4), attrs(1, 1, "SAME", "NCHW")),
    ("conv_dil2_same", "Conv2D", (2, 9, 8, 3), (3, 3, 3, 4), attrs(1, 2)),
    ("conv_dil3_explicit", "Conv2D", (1, 10, 9, 2), (2, 3, 2, 3),
     attrs(1, 3, "EXPLICIT", explicit=[0, 0, 1, 2, 2, 1, 0, 0])),
    ("bpi_grouped3_same_s2", "Conv2DBackpropInput", (2, 7, 8, 6), (3, 3, 2, 9), attrs(2)),
    ("bpi_grouped2_dil2_valid", "Conv2DBackpropInput", (2, 9, 9, 4), (3, 3, 2, 6),
     attrs(1, 2, "VALID")),
    ("bpi_dil2_same", "Conv2DBackpropInput", (2, 9, 8, 3), (3, 3, 3, 4), attrs(1, 2)),
    ("bpi_dil2_s2_same", "Conv2DBackpropInput", (1, 9, 8, 3), (3, 3, 3, 2), attrs(2, 2)),
    ("bpf_grouped3_same_s2", "Conv2DBackpropFilter", (2, 7, 8, 6), (3, 3, 2, 9), attrs(2)),
    ("bpf_grouped2_dil2_valid", "Conv2DBackpropFilter", (2, 9, 9, 4), (3, 3, 2, 6),
     attrs(1, 2, "VALID")),
    ("bpf_dil2_same", "Conv2DBackpropFilter", (2, 9, 8, 3), (3, 3, 3, 4), attrs(1, 2)),
    ("bpf_grouped2_nchw", "Conv2DBackpropFilter", (2, 4, 6, 5), (3, 3, 2, 4),
     attrs(1, 1, "SAME", "NCHW")),
    ("dw_dil2_same", "DepthwiseConv2dNative", (2, 9, 9, 3), (3, 3, 3, 2), attrs(1, 2)),
    ("dw_dil2_valid", "DepthwiseConv2dNative", (1, 10, 8, 4), (3, 3, 4, 1),
     attrs(1, 2, "VALID")),
    ("dwbpi_dil2_same", "DepthwiseConv2dNativeBackpropInput", (2, 9, 9, 3), (3, 3, 3, 2),
     attrs(1, 2)),
    ("dwbpf_dil2_same", "DepthwiseConv2dNativeBackpropFilter", (2, 9, 9, 3), (3, 3, 3, 2),
     attrs(1, 2)),
    ("dwbpf_dil2_valid", "DepthwiseConv2dNativeBackpropFilter", (1, 10, 8, 4), (3, 3, 4, 1),
     attrs(1, 2, "VALID")),
]


def tensors(op, xs, ws, a):
    """The op's inputs (keyword -> value): arrays for data, int32 vectors for sizes."""
    if op in ("Conv2D", "DepthwiseConv2dNative"):
        return {"input": f32(*xs), "filter": f32(*ws)}
    dy = f32(*out_shape(op, xs, ws, a))
    if op.endswith("BackpropInput"):
        return {"input_sizes": np.array(xs, np.int32), "filter": f32(*ws), "out_backprop": dy}
    return {"input": f32(*xs), "filter_sizes": np.array(ws, np.int32), "out_backprop": dy}


def call(op, a, kw):
    tf_attrs = {k: v for k, v in a.items()}
    if op.startswith("Depthwise"):
        tf_attrs.pop("explicit_paddings", None)
    return getattr(tf.raw_ops, op)(**kw, **tf_attrs)


def _with_sizes(kw, floats, v):
    """The op's inputs: the float tensors `v` as passed, the size vectors as constants (XLA
    needs them at compile time)."""
    values = {k: tf.constant(x) for k, x in kw.items() if k not in floats}
    values.update(zip(floats, v))
    return values


def xla_value(op, a, kw, floats):
    fn = tf.function(lambda *v: call(op, a, _with_sizes(kw, floats, v)), jit_compile=True)
    return fn(*[kw[k] for k in floats]).numpy()


def xla_grads(op, a, kw, r, floats):
    def loss_and_grads(*v):
        with tf.GradientTape() as tape:
            for t in v:
                tape.watch(t)
            loss = tf.reduce_sum(call(op, a, _with_sizes(kw, floats, v)) * r)
        return tape.gradient(loss, list(v))

    fn = tf.function(loss_and_grads, jit_compile=True)
    return [g.numpy() for g in fn(*[tf.constant(kw[k]) for k in floats])]


def cpu_check(op, a, kw, expected, name):
    try:
        got = call(op, a, {k: tf.constant(v) for k, v in kw.items()}).numpy()
    except Exception:  # noqa: BLE001 - the CPU kernel refuses this case: XLA's value stands
        return "xla only"
    if op.startswith("Depthwise") and max(a["dilations"]) > 1:
        if not np.allclose(got, expected, rtol=1e-4, atol=1e-4):
            # TensorFlow's CPU depthwise backprops accept the dilations attr and ignore it.
            return "xla only (the CPU kernel ignores dilations)"
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-4, err_msg=name)
    return "cpu agrees"


def main():
    os.makedirs(OUT, exist_ok=True)
    kgraph, ggraph = tf.Graph(), tf.Graph()
    kexp, kmeta, garrays, gmeta = {}, [], {}, []
    for name, op, xs, ws, a in CASES:
        kw = tensors(op, xs, ws, a)
        floats = [k for k, v in kw.items() if v.dtype == np.float32]
        value = xla_value(op, a, kw, floats)
        note = cpu_check(op, a, kw, value, name)
        with kgraph.as_default():
            inputs = {k: tf.constant(v, name=f"{name}/{k}") for k, v in kw.items()}
            call(op, a, dict(inputs, name=name))
        kexp[f"{name}:0"] = value
        kmeta.append({"name": name, "op": op, "outputs": 1, "rtol": 1e-4, "atol": 1e-4,
                      "source": note})
        r = f32(*value.shape)
        grads = xla_grads(op, a, kw, r, floats)
        with ggraph.as_default():
            inputs = {}
            for k, v in kw.items():
                if k in floats:
                    inputs[k] = tf1.placeholder(tf.float32, v.shape, name=f"{name}/{k}")
                    garrays[f"feed/{inputs[k].name}"] = v
                else:
                    inputs[k] = tf.constant(v, name=f"{name}/{k}")
            y = call(op, a, dict(inputs, name=name))
            loss = tf.reduce_sum(y * tf.constant(r, name=f"{name}/r"), name=f"{name}/loss")
        for k, g in zip(floats, grads):
            garrays[f"{name}/{inputs[k].name}"] = g
        gmeta.append({"name": name, "ys": [loss.name], "xs": [inputs[k].name for k in floats],
                      "overrides": [], "rtol": 1e-4, "atol": 1e-4})
        print(f"{name}: {op} {note}", file=sys.stderr)
    with open(os.path.join(OUT, "kernels.pb"), "wb") as f:
        f.write(kgraph.as_graph_def().SerializeToString())
    np.savez_compressed(os.path.join(OUT, "kernels.npz"), **kexp)
    with open(os.path.join(OUT, "grad.pb"), "wb") as f:
        f.write(ggraph.as_graph_def().SerializeToString())
    np.savez_compressed(os.path.join(OUT, "grad.npz"), **garrays)
    with open(os.path.join(OUT, "cases.json"), "w") as f:
        json.dump({"tensorflow": tf.__version__, "kernels": kmeta, "grad": gmeta}, f, indent=1)


if __name__ == "__main__":
    main()
