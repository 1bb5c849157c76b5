#!/usr/bin/env python3
"""TensorFlow's outputs of the stateless random ops, for tests/test_stateless_random_ops.py.
NEEDS TENSORFLOW (and Keras 3); never imports tfg:

    /work/tfvenv/bin/python tools/gen_stateless_random_fixtures.py

Writes tests/fixtures/stateless_random/:
- cases.json + cases.npz: one raw-op call per case (`op`, its non-type `attrs`, its input
  names); `<case>/in<i>` its inputs, `<case>/out<j>` TensorFlow's outputs (bfloat16 as its
  uint16 bit patterns, listed in `bits`). `errors` lists calls TensorFlow refuses, with its
  message.
- api.pb, api_feeds.npz, api_expected.npz: a tf.function graph of tf.random.stateless_*
  calls on a fed seed (the V2 ops behind StatelessRandomGetKeyCounter), fetches y1..y6.
- dropout.pb, dropout_feeds.npz, dropout_expected.npz: a Keras 3 Dropout(0.5) called with
  training=True in a tf.function, its seed-generator variable read turned into a Const of its
  first value and the variable's update dropped (what one step of it computes); TensorFlow's
  output of that graph equals the tf.function's first call's.
"""
import json
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from fixture_cases import fixture_dir  # noqa: E402

OUT = fixture_dir("stateless_random")
R = tf.raw_ops
I32, I64, U64 = np.int32, np.int64, np.uint64
FLOATS = ("float16", "bfloat16", "float32", "float64")
V1_FLOAT = ("StatelessRandomUniform", "StatelessRandomNormal", "StatelessTruncatedNormal")
V2_FLOAT = tuple(op + "V2" for op in V1_FLOAT)
SHAPES = ([0], [1], [3], [4], [5], [3, 5, 7])
KEY, COUNTER = U64([5]), U64([3, 4])
# the low half of this counter overflows after one block: the 128-bit carry
WRAP_KEY, WRAP_COUNTER = U64([2**64 - 1]), U64([2**64 - 1, 7])

INPUTS = {
    **{op: ["shape", "seed"] for op in V1_FLOAT},
    **{op: ["shape", "key", "counter", "alg"] for op in V2_FLOAT},
    "StatelessRandomUniformInt": ["shape", "seed", "minval", "maxval"],
    "StatelessRandomUniformIntV2": ["shape", "key", "counter", "alg", "minval", "maxval"],
    "StatelessRandomUniformFullIntV2": ["shape", "key", "counter", "alg"],
    "StatelessRandomGetKeyCounter": ["seed"],
    "StatelessRandomGetKeyCounterAlg": ["seed"],
    "StatelessRandomGetAlg": [],
    "StatelessMultinomial": ["logits", "num_samples", "seed"],
}


class Cases:
    """Collects raw-op calls: their inputs, attrs and TensorFlow's outputs (or error)."""

    def __init__(self):
        self.meta, self.errors, self.arrays = [], [], {}

    def _call(self, op, inputs, attrs):
        kwargs = dict(zip(INPUTS[op], inputs))
        kwargs.update({k: tf.dtypes.as_dtype(v) for k, v in attrs.items()})
        if "minval" in kwargs:  # the bounded int ops take dtype from minval
            del kwargs["dtype"]
        return getattr(R, op)(**kwargs)

    def add(self, name, op, inputs, **attrs):
        inputs = [np.asarray(v) for v in inputs]
        outs = self._call(op, inputs, attrs)
        outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
        bits, in_bits = [], []
        for i, v in enumerate(inputs):
            if v.dtype == tf.bfloat16.as_numpy_dtype:
                v, in_bits = v.view(np.uint16), in_bits + [i]
            self.arrays[f"{name}/in{i}"] = v
        for j, t in enumerate(outs):
            v = t.numpy()
            if t.dtype == tf.bfloat16:
                v, bits = v.view(np.uint16), bits + [j]
            self.arrays[f"{name}/out{j}"] = v
        self.meta.append({"name": name, "op": op, "attrs": attrs, "bits": bits,
                          "in_bits": in_bits})

    def error(self, name, op, inputs, **attrs):
        inputs = [np.asarray(v) for v in inputs]
        try:
            self._call(op, inputs, attrs)
        except tf.errors.InvalidArgumentError as e:
            msg = e.message.split(" [Op:")[0]
        else:
            raise AssertionError(f"{name}: TensorFlow accepted it")
        for i, v in enumerate(inputs):
            self.arrays[f"{name}/in{i}"] = v
        self.errors.append({"name": name, "op": op, "attrs": attrs, "tf_message": msg})


def float_cases(c):
    for op in V1_FLOAT:
        for dt in FLOATS:
            for shape in SHAPES:
                c.add(f"{op}-{dt}-{'x'.join(map(str, shape))}", op, [I32(shape), I64([1, 2])],
                      dtype=dt)
        for dt in ("float32", "float64"):
            c.add(f"{op}-{dt}-1000", op, [I32([1000]), I64([1, 2])], dtype=dt)
            c.add(f"{op}-{dt}-seed32neg", op, [I64([1000]), I32([-1, -7])], dtype=dt)
            c.add(f"{op}-{dt}-seedbig", op, [I32([5, 7]), I64([2**62 + 5, -2**63 + 3])],
                  dtype=dt)
        c.add(f"{op}-float16-1000", op, [I32([1000]), I32([4, 4])], dtype="float16")
    for op in V2_FLOAT:
        for dt in FLOATS:
            for shape in ([0], [5], [3, 5, 7]):
                c.add(f"{op}-{dt}-{'x'.join(map(str, shape))}", op,
                      [I32(shape), KEY, COUNTER, I32(1)], dtype=dt)
        for dt in ("float32", "float64"):
            c.add(f"{op}-{dt}-wrap-auto", op, [I64([999]), WRAP_KEY, WRAP_COUNTER, I32(3)],
                  dtype=dt)
        # a counter longer than Philox's 2 words: the rest is ignored
        c.add(f"{op}-float32-longcounter", op, [I32([6]), KEY, U64([3, 4, 99]), I32(1)],
              dtype="float32")


def int_cases(c):
    op = "StatelessRandomUniformInt"
    for dt, lo, hi in ((I32, -5, 7), (I32, -2**31, 2**31 - 1), (I32, 0, 1), (I64, -5, 7),
                       (I64, -2**62, 2**62), (I64, -2**63, 2**63 - 1)):
        for shape in ([0], [5], [1000], [3, 5, 7]):
            c.add(f"{op}-{dt.__name__}-{lo}-{hi}-{'x'.join(map(str, shape))}", op,
                  [I32(shape), I32([-3, 11]), dt(lo), dt(hi)], dtype=dt.__name__)
    op = "StatelessRandomUniformIntV2"
    # (TensorFlow's CPU kernels take int32 and int64 only; unsigned bounds run under XLA)
    for dt, lo, hi in ((I32, -5, 7), (I32, -2**31, 2**31 - 1), (I64, -2**63, 2**63 - 1),
                       (I64, 10, 2**40)):
        for shape in ([0], [5], [1000]):
            c.add(f"{op}-{dt.__name__}-{lo}-{hi}-{'x'.join(map(str, shape))}", op,
                  [I32(shape), KEY, COUNTER, I32(3), dt(lo), dt(hi)], dtype=dt.__name__)
    op = "StatelessRandomUniformFullIntV2"
    for dt in ("int32", "int64", "uint32", "uint64"):
        for shape in ([0], [5], [3, 5, 7]):
            c.add(f"{op}-{dt}-{'x'.join(map(str, shape))}", op,
                  [I32(shape), KEY, COUNTER, I32(1)], dtype=dt)
        c.add(f"{op}-{dt}-wrap", op, [I32([9]), WRAP_KEY, WRAP_COUNTER, I32(1)], dtype=dt)


def key_counter_cases(c):
    for seed in (I64([1, 2]), I32([-1, 7]), I64([2**63 - 1, -2**63]), I32([0, 0])):
        tag = f"{seed.dtype.name}-{'_'.join(map(str, seed))}"
        c.add(f"StatelessRandomGetKeyCounter-{tag}", "StatelessRandomGetKeyCounter", [seed])
        c.add(f"StatelessRandomGetKeyCounterAlg-{tag}", "StatelessRandomGetKeyCounterAlg",
              [seed])
    c.add("StatelessRandomGetAlg", "StatelessRandomGetAlg", [])


def multinomial_cases(c):
    rng = np.random.default_rng(3)
    op = "StatelessMultinomial"
    logits = rng.standard_normal((20, 7)) * 2
    with_inf = logits[:4].copy()
    with_inf[:, 1] = -np.inf
    with_inf[2, :] = -np.inf  # no finite logit: every draw is num_classes
    for name, lg, ns, out in (
            ("float32", logits[:3, :5].astype(np.float32), 10, "int64"),
            ("float64", logits[:4, :6], 7, "int32"),
            ("float16", logits[:2, :3].astype(np.float16), 5, "int64"),
            ("bfloat16", tf.cast(logits[:2, :4], tf.bfloat16).numpy(), 6, "int64"),
            ("neginf", with_inf.astype(np.float32), 20, "int64"),
            ("nosamples", logits[:3, :5].astype(np.float32), 0, "int64"),
            ("nobatch", logits[:0, :5].astype(np.float32), 4, "int64"),
            ("onesample", logits[:5, :7].astype(np.float32), 1, "int64"),
            ("batch20", logits.astype(np.float32), 50, "int64")):
        c.add(f"{op}-{name}", op, [lg, I32(ns), I64([7, -2])], output_dtype=out)


def error_cases(c):
    c.error("v1-seed-3", "StatelessRandomUniform", [I32([2]), I64([1, 2, 3])],
            dtype="float32")
    c.error("v1-int-empty-range", "StatelessRandomUniformInt",
            [I32([2]), I64([1, 2]), I32(5), I32(5)], dtype="int32")
    c.error("v2-threefry", "StatelessRandomUniformV2", [I32([2]), KEY, COUNTER, I32(2)],
            dtype="float32")
    c.error("v2-key-2", "StatelessRandomNormalV2", [I32([2]), U64([1, 2]), COUNTER, I32(1)],
            dtype="float32")
    # (TensorFlow 2.21 takes a [1] counter for Philox and reads a second word past its end;
    # tfg refuses it, as it refuses this empty one)
    c.error("v2-counter-0", "StatelessRandomNormalV2", [I32([2]), KEY, U64([]), I32(1)],
            dtype="float32")
    c.error("v2-int-range", "StatelessRandomUniformIntV2",
            [I32([2]), KEY, COUNTER, I32(1), I64(9), I64(-9)], dtype="int64")
    c.error("keycounter-seed-1", "StatelessRandomGetKeyCounter", [I64([1])])
    c.error("multinomial-negative", "StatelessMultinomial",
            [np.zeros((2, 3), np.float32), I32(-1), I64([1, 2])], output_dtype="int64")
    c.error("multinomial-noclasses", "StatelessMultinomial",
            [np.zeros((2, 0), np.float32), I32(3), I64([1, 2])], output_dtype="int64")
    c.error("multinomial-rank", "StatelessMultinomial",
            [np.zeros((3,), np.float32), I32(3), I64([1, 2])], output_dtype="int64")


def api_graph():
    """tf.random.stateless_* on a fed seed, as user code calls them."""
    @tf.function(input_signature=[tf.TensorSpec([3, 4], tf.float32),
                                  tf.TensorSpec([2], tf.int64)])
    def f(x, seed):
        return {
            "y1": x + tf.random.stateless_uniform([3, 4], seed=seed),
            "y2": tf.random.stateless_normal([2, 3], seed=seed, dtype=tf.float64),
            "y3": tf.random.stateless_truncated_normal([5], seed=seed, mean=1.0, stddev=2.0),
            "y4": tf.random.stateless_uniform([6], seed=seed, minval=-3, maxval=10,
                                              dtype=tf.int32),
            "y5": tf.random.stateless_uniform([4], seed=seed, minval=None, maxval=None,
                                              dtype=tf.int64),
            "y6": tf.random.stateless_categorical(x, 5, seed=seed),
        }

    cf = f.get_concrete_function()
    gd = cf.graph.as_graph_def()
    feeds = {"x": np.linspace(-1, 1, 12, dtype=np.float32).reshape(3, 4),
             "seed": I64([123, -456])}
    got = f(**feeds)
    outs = {o.name.split(":")[0]: k for k, o in zip(sorted(got), [cf.structured_outputs[k]
                                                                 for k in sorted(got)])}
    # name the fetches y1..y6 with Identity nodes on the function's outputs
    for node_name, key in outs.items():
        n = gd.node.add()
        n.name, n.op = key, "Identity"
        n.input.append(node_name)
        n.attr["T"].type = cf.structured_outputs[key].dtype.as_datatype_enum
    expected = {f"{k}:0": v.numpy() for k, v in got.items()}
    return gd, feeds, expected


def dropout_graph():
    """Keras 3 Dropout in training: its seed state read becomes a Const; no update."""
    import keras  # lazy: only this fixture needs Keras

    layer = keras.layers.Dropout(0.5, seed=3)
    spec = tf.TensorSpec([4, 6], tf.float32)
    f = tf.function(lambda x: layer(x, training=True), input_signature=[spec])
    cf = f.get_concrete_function()
    state = layer.variables[0].numpy()
    x = np.arange(1, 25, dtype=np.float32).reshape(4, 6)
    first = f(x).numpy()
    src = cf.graph.as_graph_def()
    gd = tf.compat.v1.GraphDef()
    reads = {n.name for n in src.node if n.op == "ReadVariableOp"}
    for n in src.node:
        if n.op in ("AssignVariableOp", "NoOp") or (n.op == "Placeholder"
                                                    and n.attr["dtype"].type == tf.resource):
            continue
        m = gd.node.add()
        if n.name in reads:
            m.name, m.op = n.name, "Const"
            m.attr["dtype"].type = tf.int64.as_datatype_enum
            m.attr["value"].tensor.CopyFrom(tf.make_tensor_proto(state))
            continue
        m.CopyFrom(n)
        del m.input[:]
        m.input.extend(i for i in n.input if not i.startswith("^"))
    ops = sorted({n.op for n in gd.node})
    assert "StatelessRandomUniformV2" in ops and "StatelessRandomGetKeyCounter" in ops, ops
    with tf.compat.v1.Session(graph=tf.Graph()) as s:
        tf.graph_util.import_graph_def(gd, name="")
        y = s.run("Identity:0", {"x:0": x})
    assert np.array_equal(y, first), "the frozen step differs from the tf.function's"
    return gd, {"x": x}, {"Identity:0": y}


def write_graph(name, graph_feeds_expected):
    gd, feeds, expected = graph_feeds_expected
    with open(os.path.join(OUT, f"{name}.pb"), "wb") as fh:
        fh.write(gd.SerializeToString())
    np.savez(os.path.join(OUT, f"{name}_feeds.npz"), **feeds)
    np.savez(os.path.join(OUT, f"{name}_expected.npz"), **expected)


def main():
    os.makedirs(OUT, exist_ok=True)
    c = Cases()
    float_cases(c)
    int_cases(c)
    key_counter_cases(c)
    multinomial_cases(c)
    error_cases(c)
    with open(os.path.join(OUT, "cases.json"), "w") as fh:
        json.dump({"cases": c.meta, "errors": c.errors}, fh, indent=1)
    np.savez_compressed(os.path.join(OUT, "cases.npz"), **c.arrays)
    write_graph("api", api_graph())
    write_graph("dropout", dropout_graph())
    print(f"{len(c.meta)} cases, {len(c.errors)} errors")


if __name__ == "__main__":
    main()
