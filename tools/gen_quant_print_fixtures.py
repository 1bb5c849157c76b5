#!/usr/bin/env python3
"""TensorFlow's values, gradients, printed text and errors of the quantization-aware-training
ops (FakeQuant*, QuantizeAndDequantizeV2/V3/V4/V4Grad) and the printing ops (StringFormat,
PrintV2, Print), for tests/test_quant_print_ops.py. NEEDS TENSORFLOW; never imports tfg:

    /work/tfvenv/bin/python tools/gen_quant_print_fixtures.py

Writes tests/fixtures/quant_print/graph.pb (one tf.compat.v1 graph, each case under its own
name scope: placeholders `<case>/in_<k>`, raw ops as TensorFlow's graph builder writes them)
and cases.npz:

    <case>/feed_<k>    the value fed to <case>/in_<k>
    <case>/fetch       the tensor names to run (unicode), <case>/out_<j> TensorFlow's values
    <case>/xs          for a gradient case: the inputs differentiated (sum(w * y) as the loss,
                       <case>/w the weights), <case>/grad_<k> TensorFlow's tf.gradients
    <case>/stderr      for a Print case: what TensorFlow's kernel wrote to stderr
    <case>/error       for an error case: the first line of TensorFlow's message
"""
import os
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from fixture_cases import fixture_dir  # noqa: E402

OUT = fixture_dir("quant_print")
R = tf.raw_ops
v1 = tf.compat.v1
RNG = np.random.default_rng(46)
f16, f32, f64, i32 = np.float16, np.float32, np.float64, np.int32
CASES = {}


def case(name, inputs, build, grad=None, kind="value"):
    """build(placeholders) -> output tensor(s); grad: indices of inputs to differentiate."""
    CASES[name] = (inputs, build, grad, kind)


def randn(*shape, dtype=f32, scale=2.0):
    return (RNG.standard_normal(shape) * scale).astype(dtype)


def edges():
    """Values on and around the quantization steps and the range ends of [-1, 1] / 8 bits."""
    steps = np.arange(-130, 131, dtype=f64) / 127.5
    return np.concatenate([steps, steps + 1 / 255, [-6, 6, 0.0, -0.0]]).astype(f32)


# --- FakeQuant
X = edges()
for nb, nr in [(8, False), (8, True), (4, False), (16, True), (2, False)]:
    case(f"fq_args_{nb}_{int(nr)}", [X], lambda p, nb=nb, nr=nr: R.FakeQuantWithMinMaxArgs(
        inputs=p[0], min=-1.0, max=1.0, num_bits=nb, narrow_range=nr), grad=[0])
case("fq_args_default", [randn(3, 4, scale=5)],
     lambda p: R.FakeQuantWithMinMaxArgs(inputs=p[0]), grad=[0])
case("fq_args_positive", [randn(20)], lambda p: R.FakeQuantWithMinMaxArgs(
    inputs=p[0], min=0.5, max=2.0))
case("fq_args_odd", [randn(50)], lambda p: R.FakeQuantWithMinMaxArgs(
    inputs=p[0], min=-0.37, max=1.91, num_bits=5))
case("fq_args_empty", [np.zeros([0, 3], f32)], lambda p: R.FakeQuantWithMinMaxArgs(
    inputs=p[0]))
case("fq_args_grad_op", [randn(10), randn(10)], lambda p: R.FakeQuantWithMinMaxArgsGradient(
    gradients=p[0], inputs=p[1], min=-1.0, max=1.5))
for name, lo, hi in [("neg", -1.3, 2.7), ("pos", 0.4, 2.0), ("below", -3.0, -1.0),
                     ("zero", 0.0, 0.0), ("tiny", -1e-3, 2e-3)]:
    case(f"fq_vars_{name}", [randn(4, 6), np.array(lo, f32), np.array(hi, f32)],
         lambda p: R.FakeQuantWithMinMaxVars(inputs=p[0], min=p[1], max=p[2], num_bits=6),
         grad=[0, 1, 2])
case("fq_vars_edges_narrow", [X, np.array(-1, f32), np.array(1, f32)],
     lambda p: R.FakeQuantWithMinMaxVars(inputs=p[0], min=p[1], max=p[2], narrow_range=True),
     grad=[0, 1, 2])
case("fq_vars_grad_op", [randn(7), randn(7), np.array(-1, f32), np.array(1, f32)],
     lambda p: R.FakeQuantWithMinMaxVarsGradient(gradients=p[0], inputs=p[1], min=p[2],
                                                 max=p[3]))
CH_MIN = np.array([-1.0, -0.5, 0.0, 0.3, -2.0], f32)
CH_MAX = np.array([1.0, 2.5, 0.0, 1.3, -0.5], f32)
for rank, shape in [(1, [5]), (2, [3, 5]), (4, [2, 3, 2, 5]), (3, [2, 4, 5])]:
    case(f"fq_channel_rank{rank}", [randn(*shape), CH_MIN, CH_MAX],
         lambda p: R.FakeQuantWithMinMaxVarsPerChannel(inputs=p[0], min=p[1], max=p[2],
                                                       num_bits=7), grad=[0, 1, 2])
case("fq_channel_grad_op", [randn(3, 5), randn(3, 5), CH_MIN, CH_MAX],
     lambda p: R.FakeQuantWithMinMaxVarsPerChannelGradient(gradients=p[0], inputs=p[1],
                                                           min=p[2], max=p[3]))

# --- QuantizeAndDequantize
for dt in (f32, f64):
    tag = np.dtype(dt).name
    case(f"qdq2_{tag}", [randn(30, dtype=dt), np.array(0, dt), np.array(0, dt)],
         lambda p: R.QuantizeAndDequantizeV2(input=p[0], input_min=p[1], input_max=p[2]),
         grad=[0])
    case(f"qdq2_given_{tag}", [randn(30, dtype=dt), np.array(-1.5, dt), np.array(0.7, dt)],
         lambda p: R.QuantizeAndDequantizeV2(input=p[0], input_min=p[1], input_max=p[2],
                                             range_given=True, num_bits=4),
         grad=[0])
for signed in (True, False):
    for narrow in (True, False):
        for mode in ("HALF_TO_EVEN", "HALF_UP"):
            case(f"qdq2_s{int(signed)}_n{int(narrow)}_{mode}",
                 [np.arange(-20, 21, dtype=f32) / 8, np.array(-2, f32), np.array(2, f32)],
                 lambda p, s=signed, n=narrow, m=mode: R.QuantizeAndDequantizeV2(
                     input=p[0], input_min=p[1], input_max=p[2], signed_input=s,
                     narrow_range=n, round_mode=m, range_given=True, num_bits=3))
case("qdq2_axis1", [randn(2, 4, 3), np.zeros(4, f32), np.zeros(4, f32)],
     lambda p: R.QuantizeAndDequantizeV2(input=p[0], input_min=p[1], input_max=p[2], axis=1))
case("qdq2_zeros", [np.zeros(5, f32), np.array(0, f32), np.array(0, f32)],
     lambda p: R.QuantizeAndDequantizeV2(input=p[0], input_min=p[1], input_max=p[2]))
case("qdq3", [randn(4, 5), np.array(-1, f32), np.array(1, f32), np.array(5, i32)],
     lambda p: R.QuantizeAndDequantizeV3(input=p[0], input_min=p[1], input_max=p[2],
                                         num_bits=p[3]), grad=[0])
case("qdq3_unsigned_observed", [randn(12), np.array(0, f32), np.array(0, f32),
                                np.array(6, i32)],
     lambda p: R.QuantizeAndDequantizeV3(input=p[0], input_min=p[1], input_max=p[2],
                                         num_bits=p[3], range_given=False,
                                         signed_input=False))
case("qdq4", [randn(3, 4), np.array(-1, f32), np.array(1.2, f32)],
     lambda p: R.QuantizeAndDequantizeV4(input=p[0], input_min=p[1], input_max=p[2],
                                         range_given=True), grad=[0, 1, 2])
case("qdq4_grad_op", [randn(3, 4), randn(3, 4), np.array([-1, 0, -2, -1], f32),
                      np.array([1, 1, 0.5, 2], f32)],
     lambda p: R.QuantizeAndDequantizeV4Grad(gradients=p[0], input=p[1], input_min=p[2],
                                             input_max=p[3], axis=1))

# --- StringFormat (its output carries the formatting) and the prints
SF = {
    "sf_int_matrix": ([np.arange(12, dtype=i32).reshape(3, 4)], {}),
    "sf_float": ([np.array([0.1, 1 / 3, -2.5e-8, 1e20, np.nan, -np.inf, 7], f32)],
                 {"summarize": -1}),
    "sf_double": ([np.array([0.1, 1 / 3, 123456789.125], f64)], {}),
    "sf_half": ([np.array([0.1, 1.5, 65504], f16)], {}),
    "sf_bool": ([np.array([True, False])], {}),
    "sf_string": ([np.array([b"a", b"it's \"q\"", b"x\ny"], object)], {}),
    "sf_scalar": ([np.array(3.5, f32)], {}),
    "sf_string_scalar": ([np.array(b"hi", object)], {}),
    "sf_big3d": ([np.arange(120, dtype=np.int64).reshape(4, 5, 6)], {"summarize": 2}),
    "sf_empty": ([np.zeros([0, 2], f32)], {}),
    "sf_two": ([np.arange(3, dtype=i32), np.array([1.5], f32)],
               {"template": "a={} b={}!", "placeholder": "{}"}),
    "sf_long_vector": ([np.arange(10, dtype=i32)], {}),
}
for name, (vals, attrs) in SF.items():
    case(name, vals, lambda p, a=attrs: R.StringFormat(
        inputs=list(p), **{"template": " ".join(["%s"] * len(p)), **a}))
case("print_v1", [np.arange(10, dtype=i32), np.arange(6, dtype=f32).reshape(2, 3) / 4],
     lambda p: R.Print(input=p[0], data=[p[0], p[1]], message="msg: ", summarize=4),
     kind="print")
case("print_v2", [np.arange(5, dtype=i32)], lambda p: R.PrintV2(
    input=R.StringFormat(inputs=[p[0]], template="x = %s"), end="|\n"), kind="print")

# --- errors TensorFlow's kernels raise
def error(name, inputs, build):
    case(name, inputs, build, kind="error")


error("err_qdq2_axis0_given", [randn(3, 4), np.array([-1, -2, 0], f32), np.array([1, 0.5, 3], f32)],
     lambda p: R.QuantizeAndDequantizeV2(input=p[0], input_min=p[1], input_max=p[2], axis=0,
                                         range_given=True, num_bits=5))
error("err_qdq4_axis", [randn(3, 4), np.full(4, -1, f32), np.full(4, 1, f32)],
      lambda p: R.QuantizeAndDequantizeV4(input=p[0], input_min=p[1], input_max=p[2],
                                          range_given=True, axis=1))
error("err_fq_args_min_max", [randn(3)], lambda p: R.FakeQuantWithMinMaxArgs(
    inputs=p[0], min=1.0, max=1.0))
error("err_fq_args_bits", [randn(3)], lambda p: R.FakeQuantWithMinMaxArgs(
    inputs=p[0], num_bits=17))
error("err_fq_channel_size", [randn(2, 3), np.zeros(2, f32), np.ones(2, f32)],
      lambda p: R.FakeQuantWithMinMaxVarsPerChannel(inputs=p[0], min=p[1], max=p[2]))
error("err_qdq2_range", [randn(3), np.array(1, f32), np.array(-1, f32)],
      lambda p: R.QuantizeAndDequantizeV2(input=p[0], input_min=p[1], input_max=p[2],
                                          range_given=True))
error("err_qdq2_bits", [randn(3), np.array(-1, f32), np.array(1, f32)],
      lambda p: R.QuantizeAndDequantizeV2(input=p[0], input_min=p[1], input_max=p[2],
                                          num_bits=62))
error("err_qdq3_bits", [randn(3), np.array(-1, f32), np.array(1, f32), np.array(0, i32)],
      lambda p: R.QuantizeAndDequantizeV3(input=p[0], input_min=p[1], input_max=p[2],
                                          num_bits=p[3]))
error("err_qdq2_axis", [randn(3), np.zeros(3, f32), np.zeros(3, f32)],
      lambda p: R.QuantizeAndDequantizeV2(input=p[0], input_min=p[1], input_max=p[2], axis=1))
error("err_qdq4grad_size", [randn(3), randn(4), np.array(-1, f32), np.array(1, f32)],
      lambda p: R.QuantizeAndDequantizeV4Grad(gradients=p[0], input=p[1], input_min=p[2],
                                              input_max=p[3]))
error("err_print_v2_shape", [np.array([b"a", b"b"], object)],
      lambda p: R.PrintV2(input=p[0]))


def tf_dtype(v):
    return tf.string if v.dtype == object else tf.as_dtype(v.dtype)


def kernel_message(message):
    """The kernel's own words: the line before the `[[{{node ...}}]]` trailer."""
    lines = message.splitlines()
    ends = [i for i, line in enumerate(lines) if line.strip().startswith("[[")]
    return lines[ends[0] - 1] if ends else lines[0]


def capture_stderr(fn):
    """Run fn with file descriptor 2 sent to a temporary file; returns (result, text)."""
    with tempfile.TemporaryFile() as tmp:
        saved = os.dup(2)
        os.dup2(tmp.fileno(), 2)
        try:
            result = fn()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        tmp.seek(0)
        return result, tmp.read().decode()


def main():
    graph, arrays, plan = tf.Graph(), {}, []
    with graph.as_default():
        for name, (inputs, build, grad, kind) in CASES.items():
            with tf.name_scope(name):
                known = kind != "error"
                ph = [v1.placeholder(tf_dtype(v), v.shape if known else None, name=f"in_{k}")
                      for k, v in enumerate(inputs)]
                out = build(ph)
                outs = [] if isinstance(out, tf.Operation) else (
                    list(out) if isinstance(out, (list, tuple)) else [out])
                target = out if isinstance(out, tf.Operation) else None
                grads = []
                if grad:
                    w = v1.placeholder(tf.float32 if outs[0].dtype == tf.float32 else
                                       outs[0].dtype, inputs[0].shape, name="w")
                    loss = tf.reduce_sum(w * outs[0])
                    grads = tf.gradients(loss, [ph[i] for i in grad])
                    arrays[f"{name}/w"] = randn(*inputs[0].shape,
                                                dtype=inputs[0].dtype.type, scale=1)
                    arrays[f"{name}/xs"] = np.array([ph[i].name for i in grad])
            for k, v in enumerate(inputs):
                arrays[f"{name}/feed_{k}"] = v.astype(bytes) if v.dtype == object else v
            plan.append((name, inputs, ph, outs, target, grads, kind))
    with v1.Session(graph=graph) as sess:
        for name, inputs, ph, outs, target, grads, kind in plan:
            feeds = dict(zip(ph, inputs))
            if grads:
                feeds[graph.get_tensor_by_name(f"{name}/w:0")] = arrays[f"{name}/w"]
            fetches = outs + grads + ([target] if target is not None else [])
            arrays[f"{name}/fetch"] = np.array([t.name for t in outs])
            try:
                values, text = capture_stderr(lambda: sess.run(fetches, feeds))
            except tf.errors.OpError as e:
                assert kind == "error", (name, e.message)
                arrays[f"{name}/error"] = np.array(kernel_message(e.message))
                continue
            assert kind != "error", name
            for j in range(len(outs)):
                v = np.asarray(values[j])
                arrays[f"{name}/out_{j}"] = v.astype(bytes) if v.dtype == object else v
            for j, g in enumerate(values[len(outs):len(outs) + len(grads)]):
                arrays[f"{name}/grad_{j}"] = np.asarray(g)
            if kind == "print":
                arrays[f"{name}/stderr"] = np.array(text)
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "graph.pb"), "wb") as f:
        f.write(graph.as_graph_def().SerializeToString())
    np.savez_compressed(os.path.join(OUT, "cases.npz"), **arrays)
    print(f"{len(CASES)} cases -> {OUT}")


if __name__ == "__main__":
    main()
