#!/usr/bin/env python3
"""The op census of real models: which op types their graphs hold, and whether tfg supports
each (docs/ops.md has the table).

Two halves, because TensorFlow never shares a process with tfg:

    /work/tfvenv/bin/python tools/op_census.py build /tmp/census.json [--graphs DIR] \
        [--only ResNet50,Transformer,tf1_...]
    python3 tools/op_census.py check /tmp/census.json [--markdown]

`build` (NEEDS TENSORFLOW; never imports tfg) makes, with weights=None and a 96x96 batch-of-1
input, the frozen inference graph of each keras.applications model below, a Keras Transformer
encoder/decoder block (MultiHeadAttention with a causal and a padding mask, LayerNormalization,
exact and tanh gelu), Keras LSTM/GRU stacks, and TF1 graphs: `dynamic_rnn` with Luong
attention over TensorArrays, a beam search with TopKV2 and a backtracking loop (the graphs of
tests/fixtures/tensor_array plus one built here). For each it records the op types of the
forward graph (function libraries included) and of TensorFlow's own gradient graph
(`tf.gradients` / GradientTape of a loss w.r.t. the input and the weights), and optionally
writes the graphs to DIR for `tfg info` (they are not committed: tens of MB).

`check` reads that JSON and, for every op, asks tfg's registries for a signature, a CPU kernel
and a gradient (forward ops only: the ops of a gradient graph need only kernels), printing one
line per model and the ops that lack something.
"""
import json
import os
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.join(HERE, "..")
SIZE = 96
APPS = ["ResNet50", "DenseNet121", "MobileNetV2", "MobileNetV3Small", "MobileNetV3Large",
        "EfficientNetB0", "EfficientNetV2B0", "InceptionV3", "Xception", "NASNetMobile",
        "ConvNeXtTiny"]  # Keras 3's keras.applications has no RegNet


def graph_ops(graph_def):
    """Op types of a GraphDef's nodes and of every function in its library."""
    ops = {n.op for n in graph_def.node}
    for fn in graph_def.library.function:
        ops |= {n.op for n in fn.node_def}
    return ops


# --------------------------------------------------------------------------- TF2 (Keras) models
def _keras_models():
    import keras
    L = keras.layers

    def app(name):
        return lambda: getattr(keras.applications, name)(
            weights=None, input_shape=(SIZE, SIZE, 3), classifier_activation=None)

    def transformer():
        vocab, d, heads, seq = 50, 32, 4, 8
        src, tgt = keras.Input((seq,), dtype="int32"), keras.Input((seq,), dtype="int32")
        emb = L.Embedding(vocab, d, mask_zero=True)
        x = emb(src)
        a = L.MultiHeadAttention(heads, d // heads)(x, x)  # padding mask from mask_zero
        x = L.LayerNormalization()(x + a)
        f = L.Dense(d)(L.Dense(4 * d, activation=lambda t: keras.activations.gelu(
            t, approximate=False))(x))
        enc = L.LayerNormalization()(x + f)
        y = emb(tgt)
        s = L.MultiHeadAttention(heads, d // heads)(y, y, use_causal_mask=True)
        y = L.LayerNormalization()(y + s)
        c = L.MultiHeadAttention(heads, d // heads)(y, enc)
        y = L.LayerNormalization()(y + c)
        f = L.Dense(d)(L.Dense(4 * d, activation=lambda t: keras.activations.gelu(
            t, approximate=True))(y))
        y = L.LayerNormalization(epsilon=1e-6)(y + f)
        out = L.Dense(vocab)(y)
        return keras.Model([src, tgt], L.Softmax()(out))

    def rnn(layer):
        return lambda: keras.Sequential([keras.Input((5, 3)), layer(8, return_sequences=True),
                                         layer(8), L.Dense(2)])

    models = {name: app(name) for name in APPS}
    models["Transformer"] = transformer
    models["KerasLSTM"] = rnn(L.LSTM)
    models["KerasGRU"] = rnn(L.GRU)
    return models


def _freeze(fn, specs):
    from tensorflow.python.framework.convert_to_constants import (
        convert_variables_to_constants_v2)
    import tensorflow as tf
    concrete = tf.function(fn).get_concrete_function(*specs)
    return convert_variables_to_constants_v2(concrete).graph.as_graph_def()


def build_keras(graphs_dir, done, save):
    import keras
    import tensorflow as tf
    out = {}
    for name, make in _keras_models().items():
        if name in done:
            continue
        try:
            out[name] = _census_keras(name, make, graphs_dir)
        except Exception as e:  # noqa: BLE001 - recorded in the census, the others go on
            out[name] = {"error": f"{type(e).__name__}: {str(e).splitlines()[0][:200]}"}
        save(name, out[name])
    return out


def _census_keras(name, make, graphs_dir):
    import keras
    import tensorflow as tf
    keras.backend.clear_session()
    keras.utils.set_random_seed(3)
    model = make()
    specs = [tf.TensorSpec((1,) + tuple(i.shape[1:]), i.dtype) for i in model.inputs]

    def forward(*xs):
        return model(list(xs) if len(xs) > 1 else xs[0], training=False)

    def backward(*xs):
        with tf.GradientTape() as tape:
            floats = [x for x in xs if x.dtype.is_floating]
            tape.watch(floats)
            y = forward(*xs)
            loss = tf.reduce_sum(y * y)
        return tape.gradient(loss, floats + model.trainable_variables)

    fwd = _freeze(forward, specs)
    entry = {"nodes": len(fwd.node), "forward": sorted(graph_ops(fwd))}
    if graphs_dir:
        with open(os.path.join(graphs_dir, f"{name}.pb"), "wb") as f:
            f.write(fwd.SerializeToString())
    # The gradient graph is not frozen (TensorFlow fails to freeze a Keras RNN's or an XLA
    # call's gradient): its ops less the unfrozen forward graph's are the gradient's own.
    unfrozen = tf.function(forward).get_concrete_function(*specs).graph.as_graph_def()
    grads = tf.function(backward).get_concrete_function(*specs).graph.as_graph_def()
    entry["gradient"] = sorted(graph_ops(grads) - graph_ops(unfrozen))
    print(f"{name}: {len(fwd.node)} nodes, {len(entry['forward'])} op types",
          file=sys.stderr)
    return entry


# --------------------------------------------------------------------------- TF1 graphs
def build_tf1(graphs_dir):
    """In this process (run as `build-tf1`): v1 control flow needs eager execution off."""
    import numpy as np
    import tensorflow as tf
    from tensorflow.python.ops import rnn
    tf1 = tf.compat.v1
    tf1.disable_eager_execution()
    tf1.disable_control_flow_v2()
    out = {}
    fixtures = os.path.join(ROOT, "tests", "fixtures", "tensor_array")
    for name in ("lstm", "bigru", "beam", "nested"):
        fwd, full = tf1.GraphDef(), tf1.GraphDef()
        with open(os.path.join(fixtures, f"{name}.pb"), "rb") as f:
            fwd.ParseFromString(f.read())
        with open(os.path.join(fixtures, f"{name}_tfgrad.pb"), "rb") as f:
            full.ParseFromString(f.read())
        out[f"tf1_{name}"] = {"nodes": len(fwd.node), "forward": sorted(graph_ops(fwd)),
                              "gradient": sorted(graph_ops(full) - graph_ops(fwd))}

    # dynamic_rnn of a GRU-like cell with Luong attention over encoder outputs.
    batch, src_len, tgt_len, dim = 2, 6, 4, 5
    g = tf.Graph()
    with g.as_default():
        rng = np.random.RandomState(5)

        def w(name, *shape):
            return tf.constant(rng.randn(*shape).astype(np.float32) * 0.3, name=name)
        src = tf1.placeholder(tf.float32, (batch, src_len, dim), "src")
        tgt = tf1.placeholder(tf.float32, (batch, tgt_len, dim), "tgt")
        lengths = tf1.placeholder(tf.int32, (batch,), "src_lengths")
        memory, _ = rnn.dynamic_rnn(_Cell(dim, w, "enc"), src, sequence_length=lengths,
                                    dtype=tf.float32, scope="encoder")
        mask = tf.sequence_mask(lengths, src_len)
        cell = _AttentionCell(dim, w, memory, mask)
        outputs, _ = rnn.dynamic_rnn(cell, tgt, dtype=tf.float32, scope="decoder")
        logits = tf.einsum("btd,dv->btv", outputs, w("proj", dim, 7))
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=tf.zeros((batch, tgt_len), tf.int32), logits=logits))
        fwd = g.as_graph_def()
        tf1.gradients(loss, [src, tgt])
        full = g.as_graph_def()
    out["tf1_attention"] = {"nodes": len(fwd.node), "forward": sorted(graph_ops(fwd)),
                            "gradient": sorted(graph_ops(full) - graph_ops(fwd))}
    if graphs_dir:
        with open(os.path.join(graphs_dir, "tf1_attention.pb"), "wb") as f:
            f.write(fwd.SerializeToString())
    return out


class _Cell:
    """A GRU-like cell that `dynamic_rnn` accepts (Keras 3 has no tf.compat.v1 rnn_cell)."""

    def __init__(self, units, w, scope):
        self.units = units
        self.state_size = self.output_size = units
        self.kernel = w(f"{scope}/kernel", 2 * units, 2 * units)
        self.cand = w(f"{scope}/cand", 2 * units, units)

    def zero_state(self, batch, dtype):
        import tensorflow as tf
        return tf.zeros((batch, self.units), dtype)

    def __call__(self, x, h):
        import tensorflow as tf
        z, r = tf.split(tf.sigmoid(tf.matmul(tf.concat([x, h], 1), self.kernel)), 2, axis=1)
        c = tf.tanh(tf.matmul(tf.concat([x, r * h], 1), self.cand))
        h = z * h + (1 - z) * c
        return h, h


class _AttentionCell(_Cell):
    """_Cell whose output attends (Luong, masked softmax) over the encoder's outputs."""

    def __init__(self, units, w, memory, mask):
        super().__init__(units, w, "dec")
        self.memory, self.mask = memory, mask
        self.attn = w("dec/attn", 2 * units, units)

    def __call__(self, x, h):
        import tensorflow as tf
        out, h = super().__call__(x, h)
        scores = tf.squeeze(tf.matmul(self.memory, out[:, :, None]), 2)
        scores = tf.where(self.mask, scores, tf.fill(tf.shape(scores), -1e9))
        context = tf.reduce_sum(tf.nn.softmax(scores)[:, :, None] * self.memory, 1)
        return tf.tanh(tf.matmul(tf.concat([out, context], 1), self.attn)), h


def build(path, graphs_dir, only=None):
    """Fills `path` model by model (an interrupted run resumes: models already there are
    kept; delete the file to start over)."""
    if graphs_dir:
        os.makedirs(graphs_dir, exist_ok=True)
    result = {}
    if os.path.exists(path):
        with open(path) as f:
            result = json.load(f)

    def save(name, entry):
        result[name] = entry
        with open(path, "w") as f:
            json.dump(result, f, indent=1, sort_keys=True)

    skip = {k for k, v in result.items() if "error" not in v}
    if only:
        skip |= {name for name in _keras_models() if name not in only}
    build_keras(graphs_dir, skip, save)
    if only and not any(name.startswith("tf1_") for name in only):
        return
    cmd = [sys.executable, os.path.abspath(__file__), "build-tf1", path + ".tf1"]
    if graphs_dir:
        cmd += ["--graphs", graphs_dir]
    subprocess.run(cmd, check=True)
    with open(path + ".tf1") as f:
        for name, entry in json.load(f).items():
            save(name, entry)
    os.remove(path + ".tf1")


# --------------------------------------------------------------------------- check (tfg side)
def check(path, markdown):
    sys.path.insert(0, ROOT)
    from tfg.graphdef.functions import CALL_OPS, CASE_OPS, IF_OPS, WHILE_OPS
    from tfg.kernels import registry as kernels
    from tfg.passes.grad import registry as grads
    from tfg.schemas.ops import all_ops, control_flow_names
    signatures, cpu = set(all_ops()), set(kernels.registered_ops(kernels.CPU))
    # The executor runs the control-flow primitives itself; loading inlines function calls
    # and lowers functional control flow to those primitives.
    cpu |= set(control_flow_names())
    inlined = CALL_OPS | IF_OPS | WHILE_OPS | CASE_OPS
    with open(path) as f:
        census = json.load(f)
    missing = {}

    def lacks(op, forward):
        if op in inlined:
            return []
        what = [k for k, ok in (("signature", op in signatures), ("kernel", op in cpu))
                if not ok]
        if forward and not grads.has_gradient(op) and op not in grads.registered(False):
            what.append("gradient")
        return what

    if markdown:
        print("| model | nodes | op types (forward) | all supported | ops of TF's gradient "
              "all run |\n| --- | --- | --- | --- | --- |")
    for model, entry in census.items():
        if "error" in entry:
            print(f"| {model} | - | - | not built: {entry['error']} | |" if markdown else
                  f"{model:18s} not built: {entry['error']}")
            continue
        bad_f = {op: lacks(op, True) for op in entry["forward"] if lacks(op, True)}
        bad_g = {op: lacks(op, False) for op in entry.get("gradient", []) if lacks(op, False)}
        for op, what in list(bad_f.items()) + list(bad_g.items()):
            missing.setdefault(op, (what, []))[1].append(model)
        if markdown:
            ops = " ".join(op for op in entry["forward"] if op not in ("Const", "NoOp"))
            print(f"| {model} | {entry['nodes']} | {ops} | "
                  f"{'yes' if not bad_f else 'no: ' + ', '.join(sorted(bad_f))} | "
                  f"{_grad_cell(entry, bad_g)} |")
        else:
            print(f"{model:18s} {entry['nodes']:5d} nodes  {' '.join(entry['forward'])}")
    if not markdown:
        print("\nmissing:" if missing else "\nevery op has a signature, a CPU kernel and a "
              "gradient (where TensorFlow has one)")
        for op, (what, models) in sorted(missing.items()):
            print(f"  {op}: no {', '.join(what)} ({', '.join(models)})")
    return 1 if missing else 0


def _grad_cell(entry, bad):
    if "gradient" not in entry:
        return "(TensorFlow could not freeze it)"
    return "yes" if not bad else "no: " + ", ".join(sorted(bad))


def main(argv):
    graphs = argv[argv.index("--graphs") + 1] if "--graphs" in argv else None
    only = argv[argv.index("--only") + 1].split(",") if "--only" in argv else None
    if len(argv) >= 2 and argv[0] == "build":
        build(argv[1], graphs, only)
    elif len(argv) >= 2 and argv[0] == "build-tf1":
        with open(argv[1], "w") as f:
            json.dump(build_tf1(graphs), f)
    elif len(argv) >= 2 and argv[0] == "check":
        return check(argv[1], "--markdown" in argv)
    else:
        print(__doc__, file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
    os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
    sys.exit(main(sys.argv[1:]))
