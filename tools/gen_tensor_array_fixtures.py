#!/usr/bin/env python3
"""Make tests/fixtures/tensor_array/ (tests/test_tensor_array.py): TF1 graphs whose while
loops carry TensorArrays, as `tf.compat.v1` code builds them (v1 control flow).

NEEDS TENSORFLOW; never imports tfg:

    /work/tfvenv/bin/python tools/gen_tensor_array_fixtures.py

Keras 3 has no `tf.compat.v1.nn.rnn_cell`, so the cells are small duck-typed classes that
`dynamic_rnn` accepts (state_size, output_size, zero_state, __call__); their weights are
placeholders, so the graphs are frozen (no variables) and the gradients are w.r.t. the feeds.
Cases (batch 3, time 5, fixed seeds):

- lstm: `dynamic_rnn` of an LSTM cell; loss = sum(outputs**2) + sum(c_T).
- bigru: `bidirectional_dynamic_rnn` of two GRU cells with sequence lengths [5, 3, 4]
  (ReverseSequence, Select on the finished steps); loss over both directions.
- beam: a beam search (width 3, 5 steps) in a `while_loop` over TensorArrays of token ids and
  parent beams (TopKV2 over beam x vocab scores), then a backtracking `while_loop` that reads
  them in reverse; its outputs are the decoded ids and the beam scores; gradient of the scores
  w.r.t. the output projection (through TopKV2's values).
- nested: TensorArrays through nested while loops (read by the outer loop, written by the
  inner one, one made per outer iteration).
- keras_rnn_grads.npz: TensorFlow's gradients of the Keras LSTM/GRU SavedModels'
  (tests/fixtures/savedmodel) output w.r.t. their input and variables, for `tfg grad`
  through TensorLists.
- ops: ReverseSequence, TopKV2 (ties; int64 indices run only), Erfc (exact gelu) and
  DepthwiseConv2dNative (SAME stride 2, VALID) alone, with their gradients.

Per case `<name>.pb` is the forward graph (exported before tf.gradients), `<name>_tfgrad.pb`
the graph with TensorFlow's own gradient nodes (TensorArrayGradV3 and friends, run by tfg as
TensorFlow built them), and `<name>.npz` holds `feed/<tensor>`, `out/<tensor>` and
`grad/<x tensor>` (TensorFlow's tf.gradients). cases.json lists ys, xs, fetches and the
node names of TensorFlow's gradient tensors in the _tfgrad graph.
"""
import json
import os
import subprocess
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorflow.python.ops import rnn  # noqa: E402  (dynamic_rnn without Keras)

tf1 = tf.compat.v1
KERAS = "--keras" in sys.argv  # the Keras gradients run eagerly, in a child process
if not KERAS:
    tf1.disable_eager_execution()
    tf1.disable_control_flow_v2()

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures",
                   "tensor_array")
BATCH, TIME, FEATURES, UNITS = 3, 5, 4, 6


class Case:
    def __init__(self, name):
        self.name = name
        self.graph = tf.Graph()
        self.rng = np.random.RandomState(sum(map(ord, name)))
        self.feeds = {}
        self.ys, self.xs, self.fetches = [], [], []

    def ph(self, name, shape, scale=1.0, dtype=np.float32, value=None):
        if value is None:
            value = (self.rng.randn(*shape) * scale).astype(dtype)
        t = tf1.placeholder(tf.as_dtype(value.dtype), shape=value.shape, name=name)
        self.feeds[t.name] = np.asarray(value)
        return t

    def write(self, index):
        with self.graph.as_default():
            forward = self.graph.as_graph_def()
            grads = [tf.convert_to_tensor(g) for g in tf1.gradients(self.ys, self.xs)]
            with tf1.Session() as sess:
                values = sess.run(self.fetches + grads, self.feeds)
            tfgrad = self.graph.as_graph_def()
        with open(os.path.join(OUT, f"{self.name}.pb"), "wb") as f:
            f.write(forward.SerializeToString(deterministic=True))
        if self.xs:
            with open(os.path.join(OUT, f"{self.name}_tfgrad.pb"), "wb") as f:
                f.write(tfgrad.SerializeToString(deterministic=True))
        arrays = {f"feed/{k}": v for k, v in self.feeds.items()}
        for t, v in zip(self.fetches, values):
            arrays[f"out/{t.name}"] = v
        for x, v in zip(self.xs, values[len(self.fetches):]):
            arrays[f"grad/{x.name}"] = v
        np.savez(os.path.join(OUT, f"{self.name}.npz"), **arrays)
        index[self.name] = {
            "ys": [t.name for t in self.ys], "xs": [t.name for t in self.xs],
            "fetches": [t.name for t in self.fetches],
            "tf_grads": [g.name for g in grads], "nodes": len(forward.node),
            "tfgrad_nodes": len(tfgrad.node)}


class LSTMCell:
    """c' = sig(f+1) c + sig(i) tanh(j); h' = sig(o) tanh(c'), [i j f o] = [x h] W + b."""

    def __init__(self, case, units, in_dim, scope):
        self.units = units
        self.kernel = case.ph(f"{scope}/kernel", (in_dim + units, 4 * units), 0.4)
        self.bias = case.ph(f"{scope}/bias", (4 * units,), 0.1)

    state_size = property(lambda self: (self.units, self.units))
    output_size = property(lambda self: self.units)

    def zero_state(self, batch, dtype):
        return (tf.zeros([batch, self.units], dtype), tf.zeros([batch, self.units], dtype))

    def __call__(self, x, state):
        c, h = state
        z = tf.matmul(tf.concat([x, h], 1), self.kernel) + self.bias
        i, j, f, o = tf.split(z, 4, axis=1)
        c = tf.sigmoid(f + 1.0) * c + tf.sigmoid(i) * tf.tanh(j)
        h = tf.sigmoid(o) * tf.tanh(c)
        return h, (c, h)


class GRUCell:
    """r, u = sig([x h] Wg + bg); c = tanh([x, r h] Wc + bc); h' = u h + (1 - u) c."""

    def __init__(self, case, units, in_dim, scope):
        self.units = units
        self.gate_kernel = case.ph(f"{scope}/gates/kernel", (in_dim + units, 2 * units), 0.4)
        self.gate_bias = case.ph(f"{scope}/gates/bias", (2 * units,), 0.1)
        self.kernel = case.ph(f"{scope}/candidate/kernel", (in_dim + units, units), 0.4)
        self.bias = case.ph(f"{scope}/candidate/bias", (units,), 0.1)

    state_size = property(lambda self: self.units)
    output_size = property(lambda self: self.units)

    def zero_state(self, batch, dtype):
        return tf.zeros([batch, self.units], dtype)

    def __call__(self, x, h):
        gates = tf.sigmoid(tf.matmul(tf.concat([x, h], 1), self.gate_kernel) + self.gate_bias)
        r, u = tf.split(gates, 2, axis=1)
        c = tf.tanh(tf.matmul(tf.concat([x, r * h], 1), self.kernel) + self.bias)
        h = u * h + (1 - u) * c
        return h, h


def lstm(index):
    case = Case("lstm")
    with case.graph.as_default():
        x = case.ph("x", (BATCH, TIME, FEATURES))
        cell = LSTMCell(case, UNITS, FEATURES, "lstm")
        out, (c, h) = rnn.dynamic_rnn(cell, x, dtype=tf.float32)
        loss = tf.add(tf.reduce_sum(out * out), tf.reduce_sum(c), name="loss")
        case.ys = [loss]
        case.xs = [cell.kernel, cell.bias, x]
        case.fetches = [out, h, loss]
    case.write(index)


def bigru(index):
    case = Case("bigru")
    with case.graph.as_default():
        x = case.ph("x", (BATCH, TIME, FEATURES))
        lengths = case.ph("lengths", (BATCH,), value=np.array([5, 3, 4], np.int32))
        fw = GRUCell(case, UNITS, FEATURES, "fw")
        bw = GRUCell(case, UNITS, FEATURES, "bw")
        (out_fw, out_bw), (h_fw, h_bw) = rnn.bidirectional_dynamic_rnn(
            fw, bw, x, sequence_length=lengths, dtype=tf.float32)
        out = tf.concat([out_fw, out_bw], 2, name="outputs")
        loss = tf.add(tf.reduce_sum(tf.square(out)), tf.reduce_sum(h_fw * h_bw), name="loss")
        case.ys = [loss]
        case.xs = [fw.gate_kernel, fw.kernel, bw.gate_kernel, bw.bias, x]
        case.fetches = [out, h_fw, h_bw, loss]
    case.write(index)


def beam(index, width=3, steps=5, vocab=7, units=5):
    """Greedy-free beam search: state h (beam, units) -> logits -> TopKV2 over beam x vocab."""
    case = Case("beam")
    with case.graph.as_default():
        h0 = case.ph("h0", (1, units))
        emb = case.ph("embedding", (vocab, units), 0.8)
        w_out = case.ph("w_out", (units, vocab), 0.8)
        w_rec = case.ph("w_rec", (units, units), 0.5)
        ids_ta = tf1.TensorArray(tf.int32, size=0, dynamic_size=True, name="ids")
        parents_ta = tf1.TensorArray(tf.int32, size=0, dynamic_size=True, name="parents")
        h = tf.tile(h0, [width, 1])
        # Only beam 0 is live at the start (the others are copies).
        scores = tf.constant([0.0] + [-1e9] * (width - 1))

        def body(t, h, scores, ids_ta, parents_ta):
            logp = tf.nn.log_softmax(tf.matmul(h, w_out))  # (width, vocab)
            total = tf.reshape(tf.expand_dims(scores, 1) + logp, [-1])
            top, flat = tf.nn.top_k(total, k=width)
            parent, token = flat // vocab, flat % vocab
            h = tf.tanh(tf.gather(h, parent) @ w_rec + tf.gather(emb, token))
            return (t + 1, h, top, ids_ta.write(t, token), parents_ta.write(t, parent))

        _, h_last, final, ids_ta, parents_ta = tf1.while_loop(
            lambda t, *_: t < steps, body, [tf.constant(0), h, scores, ids_ta, parents_ta])
        # Backtrack: from the last step's beams, follow parents to the first step.
        out_ta = tf1.TensorArray(tf.int32, size=steps, name="decoded")

        def back(t, beam_ids, out_ta):
            out_ta = out_ta.write(t, tf.gather(ids_ta.read(t), beam_ids))
            return t - 1, tf.gather(parents_ta.read(t), beam_ids), out_ta

        _, _, out_ta = tf1.while_loop(lambda t, *_: t >= 0, back,
                                      [tf.constant(steps - 1), tf.range(width), out_ta])
        decoded = tf.transpose(out_ta.stack(), name="decoded_ids")  # (width, steps)
        final = tf.identity(final, name="scores")
        loss = tf.reduce_sum(final * tf.constant([1.0, 0.5, 0.25]), name="loss")
        case.ys = [loss]
        case.xs = [w_out, w_rec, emb, h0]
        case.fetches = [decoded, final, loss, tf.identity(h_last, name="h_last")]
    case.write(index)


def nested(index, outer=3, inner=4, units=4):
    """TensorArrays through nested while loops: an input array read by the outer loop, an
    output array carried through both loops and written by the inner one at i * inner + j,
    and an array made inside the outer body (a new one per outer iteration), filled by the
    inner loop and stacked after it."""
    case = Case("nested")
    with case.graph.as_default():
        x = case.ph("x", (outer, 2, units))
        w = case.ph("w", (units, units), 0.5)
        x_ta = tf1.TensorArray(tf.float32, size=outer, name="inputs").unstack(x)
        out_ta = tf1.TensorArray(tf.float32, size=outer * inner, name="outputs")

        def outer_body(i, h, out_ta):
            xi = x_ta.read(i)
            step_ta = tf1.TensorArray(tf.float32, size=inner, name="steps")

            def inner_body(j, h, out_ta, step_ta):
                h = tf.tanh(tf.matmul(h, w) + xi * tf.cast(j + 1, tf.float32))
                return j + 1, h, out_ta.write(i * inner + j, h), step_ta.write(j, h * h)

            _, h, out_ta, step_ta = tf1.while_loop(
                lambda j, *_: j < inner, inner_body, [tf.constant(0), h, out_ta, step_ta])
            h = h + 0.1 * tf.reduce_mean(step_ta.stack(), axis=0)
            return i + 1, h, out_ta

        _, h, out_ta = tf1.while_loop(lambda i, *_: i < outer, outer_body,
                                      [tf.constant(0), tf.zeros([2, units]), out_ta])
        out = tf.identity(out_ta.stack(), name="outputs_stacked")
        loss = tf.add(tf.reduce_sum(out * out), tf.reduce_sum(h), name="loss")
        case.ys = [loss]
        case.xs = [x, w]
        case.fetches = [out, tf.identity(h, name="h"), loss]
    case.write(index)


def ops(index):
    """ReverseSequence (both dims orders), TopKV2 with ties and int64 indices, Erfc far into
    its tail (exact gelu), DepthwiseConv2dNative (MobileNet's), each differentiated w.r.t.
    its inputs."""
    case = Case("ops")
    with case.graph.as_default():
        x = case.ph("x", (3, 6, 2))
        lengths = case.ph("lengths", (3,), value=np.array([6, 0, 4], np.int64))
        rev = tf.reverse_sequence(x, lengths, seq_axis=1, batch_axis=0, name="reverse")
        xt = case.ph("xt", (6, 3, 2))
        rev_t = tf.reverse_sequence(xt, tf.constant([2, 6, 1]), seq_axis=0, batch_axis=1,
                                    name="reverse_t")
        scores = case.ph("scores", (2, 3, 8), value=np.round(
            case.rng.randn(2, 3, 8) * 2).astype(np.float32))  # rounded: ties
        top = tf.raw_ops.TopKV2(input=scores, k=3, name="top")
        # TensorFlow's own TopKV2 gradient fails on int64 indices: run-only.
        top64 = tf.raw_ops.TopKV2(input=scores, k=8, index_type=tf.int64, name="top64")
        z = case.ph("z", (40,), value=np.linspace(-6, 9, 40).astype(np.float32))
        erfc = tf.math.erfc(z, name="erfc")
        gelu = tf.identity(0.5 * z * tf.math.erfc(-z / np.sqrt(2.0)), name="gelu")
        image = case.ph("image", (2, 7, 6, 3))
        dw_filter = case.ph("dw_filter", (3, 3, 3, 2), 0.5)
        dw_same = tf.raw_ops.DepthwiseConv2dNative(
            input=image, filter=dw_filter, strides=[1, 2, 2, 1], padding="SAME",
            name="depthwise_same")
        dw_valid = tf.raw_ops.DepthwiseConv2dNative(
            input=image, filter=dw_filter[:2], strides=[1, 1, 1, 1], padding="VALID",
            name="depthwise_valid")
        w = tf.constant(case.rng.randn(3, 6, 2).astype(np.float32))
        loss = tf.add_n([tf.reduce_sum(rev * w), tf.reduce_sum(rev_t * tf.transpose(w, [1, 0, 2])),
                         tf.reduce_sum(top.values * tf.range(1.0, 4.0)),
                         tf.reduce_sum(erfc * z), tf.reduce_sum(gelu),
                         tf.reduce_sum(tf.square(dw_same)), tf.reduce_sum(dw_valid * 0.3)],
                        name="loss")
        case.ys = [loss]
        case.xs = [x, xt, scores, z, image, dw_filter]
        case.fetches = [rev, rev_t, top.values, top.indices, top64.values, top64.indices, erfc,
                        gelu, dw_same, dw_valid, loss]
    case.write(index)


def keras_grads():
    """tf.GradientTape of sum(output_0) of the Keras LSTM/GRU SavedModels' serving_default
    (tests/fixtures/savedmodel, tools/gen_keras_rnn_fixtures.py) w.r.t. the input and every
    variable: `<model>/x` and `<model>/<variable name>` in keras_rnn_grads.npz."""
    saved = os.path.join(OUT, "..", "savedmodel")
    x = tf.constant(np.load(os.path.join(saved, "keras_rnn_feeds.npz"))["keras_tensor"])
    out = {}
    for model in ("keras_lstm", "keras_gru"):
        loaded = tf.saved_model.load(os.path.join(saved, model))  # keeps the variables alive
        fn = loaded.signatures["serving_default"]
        with tf.GradientTape() as tape:
            tape.watch(x)
            y = fn(keras_tensor=x)["output_0"]
        grads = tape.gradient(y, [x] + list(fn.variables))
        out[f"{model}/x"] = grads[0].numpy()
        for v, g in zip(fn.variables, grads[1:]):
            out[f"{model}/{v.name.split(':')[0]}"] = tf.convert_to_tensor(g).numpy()
    np.savez(os.path.join(OUT, "keras_rnn_grads.npz"), **out)


def main():
    os.makedirs(OUT, exist_ok=True)
    subprocess.run([sys.executable, os.path.abspath(__file__), "--keras"], check=True)
    index = {}
    lstm(index)
    bigru(index)
    beam(index)
    nested(index)
    ops(index)
    with open(os.path.join(OUT, "cases.json"), "w") as f:
        json.dump(index, f, indent=1, sort_keys=True)
    for name, entry in index.items():
        print(name, entry["nodes"], "nodes,", entry["tfgrad_nodes"], "with TF's gradient")


if __name__ == "__main__":
    keras_grads() if KERAS else main()
