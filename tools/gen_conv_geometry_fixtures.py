#!/usr/bin/env python3
"""What TensorFlow's own kernels do with impossible or degenerate convolution and pooling
geometry (a VALID window larger than its input, zero-size dims, strides or dilations below 1,
mismatched channels, negative explicit paddings), for tests/test_conv_geometry.py.
NEEDS TENSORFLOW; never imports tfg:

    TF_ENABLE_ONEDNN_OPTS=0 /work/tfvenv/bin/python tools/gen_conv_geometry_fixtures.py

Each case is a tf.compat.v1 graph of placeholders of unknown shape (so nothing is refused
while the graph is built) and the op as node `y`, built with valid attrs and then given the
case's attrs in the GraphDef, as a hostile file would carry them. The GraphDef is imported
into a fresh graph and run in a Session on the CPU: a refusal at import (TensorFlow's shape
function) or at run time (the kernel) is the case's error, anything else its result.

Writes tests/fixtures/conv_geometry/: `<case>.pb`, `<case>.npz` (the feeds, keyed by tensor
name as `tfg run --feeds` takes them), expected.npz (`<case>` -> TensorFlow's output where it
returned one) and cases.json (per case: op, fetch, "error" with TensorFlow's message and the
phrase from it that tfg's error must name, or "ok").
"""
import json
import os
import pathlib
import signal
import subprocess
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

tf1 = tf.compat.v1
R = tf.raw_ops
OUT = pathlib.Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "conv_geometry"
RNG = np.random.default_rng(7)

NEGATIVE = "Computed output size would be negative"


def rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


class Case:
    """One op on fed placeholders: `build(p)` makes node y from placeholders p; `attrs`
    (name -> value) replace y's attrs in the GraphDef afterwards; `phrase` is what TF's
    error must contain (None: TF must return a result)."""

    def __init__(self, feeds, build, attrs=None, phrase=None, crashes=False):
        self.feeds, self.build, self.attrs, self.phrase = feeds, build, attrs or {}, phrase
        self.crashes = crashes  # TF's process dies (a signal): run it in a child process


def conv2d(fmt="NHWC", padding="VALID", **kw):
    return lambda p: R.Conv2D(input=p["x"], filter=p["w"], strides=[1, 1, 1, 1],
                              padding=padding, data_format=fmt, name="y", **kw)


def depthwise(padding="VALID"):
    return lambda p: R.DepthwiseConv2dNative(input=p["x"], filter=p["w"], strides=[1, 1, 1, 1],
                                             padding=padding, name="y")


def conv3d(padding="VALID"):
    return lambda p: R.Conv3D(input=p["x"], filter=p["w"], strides=[1] * 5, padding=padding,
                              name="y")


def pool(op, padding="VALID", k=2):
    fn, arg = getattr(R, op), "value" if op == "AvgPool" else "input"
    return lambda p: fn(**{arg: p["x"]}, ksize=[1, k, k, 1], strides=[1, 1, 1, 1],
                        padding=padding, name="y")


def pool3d(op, k=2):
    fn = getattr(R, op)
    return lambda p: fn(input=p["x"], ksize=[1, k, k, k, 1], strides=[1] * 5, padding="VALID",
                        name="y")


def argmax_pool(k=2):
    return lambda p: R.MaxPoolWithArgmax(input=p["x"], ksize=[1, k, k, 1],
                                         strides=[1, 1, 1, 1], padding="VALID", name="y")


def patches(k=2, rate=1):
    return lambda p: R.ExtractImagePatches(images=p["x"], ksizes=[1, k, k, 1],
                                           strides=[1, 1, 1, 1], rates=[1, rate, rate, 1],
                                           padding="VALID", name="y")


def conv2d_bpi(sizes):
    return lambda p: R.Conv2DBackpropInput(
        input_sizes=tf.constant(sizes, tf.int32), filter=p["w"], out_backprop=p["g"],
        strides=[1, 1, 1, 1], padding="VALID", name="y")


def conv2d_bpf(sizes):
    return lambda p: R.Conv2DBackpropFilter(
        input=p["x"], filter_sizes=tf.constant(sizes, tf.int32), out_backprop=p["g"],
        strides=[1, 1, 1, 1], padding="VALID", name="y")


def conv3d_bpi(sizes):
    return lambda p: R.Conv3DBackpropInputV2(
        input_sizes=tf.constant(sizes, tf.int32), filter=p["w"], out_backprop=p["g"],
        strides=[1] * 5, padding="VALID", name="y")


def max_pool_v2(p):
    """ksize and strides fed as `k` and `s`: values no shape function sees before the run."""
    return R.MaxPoolV2(input=p["x"], ksize=p["k"], strides=p["s"], padding="VALID", name="y")


def avg_pool_grad(sizes, k=2):
    return lambda p: R.AvgPoolGrad(orig_input_shape=tf.constant(sizes, tf.int32),
                                   grad=p["g"], ksize=[1, k, k, 1], strides=[1, 1, 1, 1],
                                   padding="VALID", name="y")


def case_table():
    x4, w22 = rand(1, 4, 4, 2), rand(2, 2, 2, 3)
    c = {}
    # --- Conv2D ---
    c["conv2d_filter_too_big"] = Case({"x": rand(1, 3, 3, 2), "w": rand(5, 5, 2, 3)},
                                      conv2d(), phrase=NEGATIVE)
    c["conv2d_filter_one_too_big"] = Case({"x": rand(1, 3, 3, 2), "w": rand(4, 4, 2, 3)},
                                          conv2d())
    c["conv2d_dilation_too_big"] = Case({"x": x4, "w": w22}, conv2d(),
                                        {"dilations": [1, 5, 5, 1]}, NEGATIVE)
    c["conv2d_nchw_filter_too_big"] = Case({"x": rand(1, 2, 3, 3), "w": rand(5, 5, 2, 3)},
                                           conv2d("NCHW"), phrase=NEGATIVE)
    c["conv2d_explicit_too_big"] = Case(
        {"x": rand(1, 3, 3, 2), "w": rand(6, 6, 2, 3)},
        conv2d(padding="EXPLICIT", explicit_paddings=[0, 0, 0, 1, 0, 1, 0, 0]),
        phrase=NEGATIVE)
    c["conv2d_explicit_negative"] = Case(
        {"x": x4, "w": w22},
        conv2d(padding="EXPLICIT", explicit_paddings=[0, 0, 1, 1, 1, 1, 0, 0]),
        {"explicit_paddings": [0, 0, -1, 0, 0, 0, 0, 0]}, "must be nonnegative")
    c["conv2d_zero_out_channels"] = Case({"x": x4, "w": rand(2, 2, 2, 0)}, conv2d())
    c["conv2d_batch0"] = Case({"x": rand(0, 4, 4, 2), "w": w22}, conv2d())
    c["conv2d_in_channels0"] = Case({"x": rand(1, 4, 4, 0), "w": rand(2, 2, 0, 3)}, conv2d(),
                                    phrase="filter depth must be")
    c["conv2d_filter_spatial0"] = Case({"x": x4, "w": rand(0, 0, 2, 3)}, conv2d(),
                                       phrase="filter must not have zero elements")
    c["conv2d_channels_mismatch"] = Case({"x": rand(1, 4, 4, 3), "w": w22}, conv2d(),
                                         phrase="input depth must be evenly divisible")
    c["conv2d_stride0"] = Case({"x": x4, "w": w22}, conv2d(), {"strides": [1, 0, 0, 1]},
                               "must be > 0")
    c["conv2d_stride_negative"] = Case({"x": x4, "w": w22}, conv2d(),
                                       {"strides": [1, -1, -1, 1]}, "must be > 0")
    c["conv2d_dilation0"] = Case({"x": x4, "w": w22}, conv2d(), {"dilations": [1, 0, 0, 1]},
                                 "must be >= 1")
    # --- DepthwiseConv2dNative ---
    c["depthwise_filter_too_big"] = Case({"x": rand(1, 3, 3, 2), "w": rand(5, 5, 2, 2)},
                                         depthwise(), phrase=NEGATIVE)
    c["depthwise_batch0"] = Case({"x": rand(0, 4, 4, 2), "w": rand(2, 2, 2, 2)}, depthwise())
    c["depthwise_multiplier0"] = Case({"x": x4, "w": rand(2, 2, 2, 0)}, depthwise())
    c["depthwise_channels_mismatch"] = Case({"x": rand(1, 4, 4, 3), "w": rand(2, 2, 2, 2)},
                                            depthwise(), phrase="must have the same depth")
    c["depthwise_stride0"] = Case({"x": x4, "w": rand(2, 2, 2, 2)}, depthwise(),
                                  {"strides": [1, 0, 0, 1]}, "must be > 0")
    # --- Conv3D ---
    c["conv3d_filter_too_big"] = Case({"x": rand(1, 3, 3, 3, 2), "w": rand(5, 5, 5, 2, 3)},
                                      conv3d(), phrase=NEGATIVE)
    c["conv3d_batch0"] = Case({"x": rand(0, 3, 3, 3, 2), "w": rand(2, 2, 2, 2, 3)}, conv3d())
    c["conv3d_channels_mismatch"] = Case({"x": rand(1, 3, 3, 3, 3),
                                          "w": rand(2, 2, 2, 2, 3)}, conv3d(),
                                         phrase="evenly divisible by filter depth")
    c["conv3d_stride0"] = Case({"x": rand(1, 3, 3, 3, 2), "w": rand(2, 2, 2, 2, 3)}, conv3d(),
                               {"strides": [1, 0, 1, 1, 1]}, "must be > 0")
    c["conv3d_zero_out_channels"] = Case({"x": rand(1, 3, 3, 3, 2),
                                          "w": rand(2, 2, 2, 2, 0)}, conv3d(),
                                         phrase="filter must not have zero elements")
    # --- backprops ---
    c["conv2d_bpi_filter_too_big"] = Case({"w": rand(5, 5, 2, 3), "g": rand(1, 1, 1, 3)},
                                          conv2d_bpi([1, 3, 3, 2]), phrase=NEGATIVE)
    c["conv2d_bpi_stride0"] = Case({"w": w22, "g": rand(1, 3, 3, 3)},
                                   conv2d_bpi([1, 4, 4, 2]), {"strides": [1, 0, 0, 1]},
                                   "must be > 0", crashes=True)
    c["conv2d_bpi_batch0"] = Case({"w": w22, "g": rand(0, 3, 3, 3)}, conv2d_bpi([0, 4, 4, 2]))
    c["conv2d_bpf_filter_too_big"] = Case({"x": rand(1, 3, 3, 2), "g": rand(1, 1, 1, 3)},
                                          conv2d_bpf([5, 5, 2, 3]), phrase=NEGATIVE)
    c["conv2d_bpf_batch0"] = Case({"x": rand(0, 4, 4, 2), "g": rand(0, 3, 3, 3)},
                                  conv2d_bpf([2, 2, 2, 3]))
    c["conv3d_bpi_filter_too_big"] = Case({"w": rand(5, 5, 5, 2, 3),
                                           "g": rand(1, 1, 1, 1, 3)},
                                          conv3d_bpi([1, 3, 3, 3, 2]), phrase=NEGATIVE)
    # --- 2-D pooling ---
    for op in ("MaxPool", "AvgPool"):
        low = op.lower()
        c[f"{low}_ksize_too_big"] = Case({"x": rand(1, 2, 2, 3)}, pool(op, k=5),
                                         phrase=NEGATIVE)
        c[f"{low}_ksize_one_too_big"] = Case({"x": rand(1, 2, 2, 3)}, pool(op, k=3))
        c[f"{low}_batch0"] = Case({"x": rand(0, 4, 4, 3)}, pool(op))
        c[f"{low}_channels0"] = Case({"x": rand(1, 4, 4, 0)}, pool(op))
        c[f"{low}_stride0"] = Case({"x": x4}, pool(op), {"strides": [1, 0, 0, 1]},
                                   "must be > 0")
        c[f"{low}_ksize0"] = Case({"x": x4}, pool(op), {"ksize": [1, 0, 0, 1]},
                                  "ksize must be positive" if op == "MaxPool" else
                                  "ksize must be a positive")
    k, s = (lambda *v: np.array(v, np.int32)), (lambda *v: np.array(v, np.int32))
    c["maxpool_v2_ksize_too_big"] = Case({"x": rand(1, 2, 2, 3), "k": k(1, 5, 5, 1),
                                          "s": s(1, 1, 1, 1)}, max_pool_v2, phrase=NEGATIVE)
    c["maxpool_v2_stride0"] = Case({"x": x4, "k": k(1, 2, 2, 1), "s": s(1, 0, 0, 1)},
                                   max_pool_v2, phrase="must be > 0")
    c["avgpool_grad_ksize_too_big"] = Case({"g": rand(1, 1, 1, 3)},
                                           avg_pool_grad([1, 2, 2, 3], k=5), phrase=NEGATIVE)
    # --- 3-D pooling, argmax pooling, patches ---
    for op in ("MaxPool3D", "AvgPool3D"):
        low = op.lower()
        c[f"{low}_ksize_too_big"] = Case({"x": rand(1, 2, 2, 2, 3)}, pool3d(op, k=5),
                                         phrase=NEGATIVE)
        c[f"{low}_batch0"] = Case({"x": rand(0, 3, 3, 3, 2)}, pool3d(op))
        c[f"{low}_stride0"] = Case({"x": rand(1, 3, 3, 3, 2)}, pool3d(op),
                                   {"strides": [1, 0, 1, 1, 1]}, "must be > 0")
    c["argmax_ksize_too_big"] = Case({"x": rand(1, 2, 2, 3)}, argmax_pool(k=5),
                                     phrase=NEGATIVE)
    c["argmax_batch0"] = Case({"x": rand(0, 4, 4, 3)}, argmax_pool(),
                              phrase="tensor_in must not be empty")
    c["patches_too_big"] = Case({"x": rand(1, 3, 3, 2)}, patches(k=5), phrase=NEGATIVE)
    c["patches_rate_too_big"] = Case({"x": rand(1, 4, 4, 2)}, patches(k=2, rate=5),
                                     phrase=NEGATIVE)
    c["patches_rate0"] = Case({"x": x4}, patches(), {"rates": [1, 0, 0, 1]},
                           "rates is out of range")
    c["patches_batch0"] = Case({"x": rand(0, 4, 4, 2)}, patches())
    return c


def build_graph(case):
    """The case's GraphDef: placeholders of unknown shape, node y, then the case's attrs."""
    g = tf1.Graph()
    with g.as_default():
        p = {k: tf1.placeholder(tf.as_dtype(v.dtype), None, name=k)
             for k, v in case.feeds.items()}
        case.build(p)
    gd = g.as_graph_def()
    node = next(n for n in gd.node if n.name == "y")
    for name, value in case.attrs.items():
        node.attr[name].list.Clear()
        node.attr[name].list.i.extend(value)
    return gd


def run_tf(gd, feeds, fetch):
    """TensorFlow's ("ok", value) or ("error", message) for this GraphDef."""
    g = tf1.Graph()
    try:
        with g.as_default():
            tf1.import_graph_def(gd, name="")
        with tf1.Session(graph=g) as sess:
            return "ok", sess.run(fetch, {f"{k}:0": v for k, v in feeds.items()})
    except (ValueError, tf.errors.OpError) as e:
        msg = e.message if isinstance(e, tf.errors.OpError) else str(e)
        return "error", " ".join(msg.split())[:400]


def run_in_child(name):
    """("crash", message) when running case `name` kills a child process, as for the cases
    whose TensorFlow kernel divides by a zero stride."""
    proc = subprocess.run([sys.executable, __file__, "--one", name], capture_output=True)
    if proc.returncode >= 0:
        raise SystemExit(f"{name}: expected TensorFlow to crash, exit {proc.returncode}: "
                         f"{proc.stdout.decode()[-300:]}")
    return "crash", f"TensorFlow's process died of {signal.Signals(-proc.returncode).name}"


def main():
    if sys.argv[1:2] == ["--one"]:  # the child of run_in_child
        case = case_table()[sys.argv[2]]
        print(run_tf(build_graph(case), case.feeds, "y:0"))
        return
    OUT.mkdir(parents=True, exist_ok=True)
    manifest, expected, wrong = {}, {}, []
    for name, case in case_table().items():
        gd = build_graph(case)
        op = next(n.op for n in gd.node if n.name == "y")
        kind, value = run_in_child(name) if case.crashes else run_tf(gd, case.feeds, "y:0")
        entry = {"op": op, "fetch": "y:0"}
        if kind == "crash":  # no message to follow: tfg refuses with the phrase TF's
            entry.update(error=case.phrase, tf_message=value)  # shape checks use elsewhere
        elif kind == "error":
            if case.phrase is None or case.phrase not in value:
                wrong.append(f"{name}: TensorFlow said {value!r}, expected {case.phrase!r}")
            entry.update(error=case.phrase, tf_message=value)
        else:
            if case.phrase is not None:
                wrong.append(f"{name}: TensorFlow returned {value.shape}, expected an "
                             f"error naming {case.phrase!r}")
            expected[name] = value
            entry.update(ok=list(value.shape))
        manifest[name] = entry
        (OUT / f"{name}.pb").write_bytes(gd.SerializeToString())
        np.savez(OUT / f"{name}.npz", **{f"{k}:0": v for k, v in case.feeds.items()})
        print(f"{name:32s} {op:24s} {kind}: {entry.get('tf_message', entry.get('ok'))}")
    if wrong:  # the table's expectations are part of the fixture: refuse to write a stale one
        raise SystemExit("\n".join(wrong))
    np.savez(OUT / "expected.npz", **expected)
    (OUT / "cases.json").write_text(json.dumps(manifest, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
