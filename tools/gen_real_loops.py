#!/usr/bin/env python3
"""Make the real-loop sweep (tests/test_real_loops.py): loop graphs TensorFlow built, in the
case layout of tools/gen_real_models.py (graph.pb, feeds.npz, expected.npz, case.json), under
tests/fixtures/real_loops/. NEEDS TENSORFLOW; never imports tfg:

    /work/tfvenv/bin/python tools/gen_real_loops.py [--only a,b] [--out DIR]

What tests/fixtures/real_models/ did not have yet:
- TF1 (tools/gen_real_loops_tf1*.py, a `--tf1` child: v1 control flow is process-wide):
  TensorFlow's own cells (MultiRNNCell of GRUCell and a peephole/projection/clipped
  LSTMCell, time-major, fed initial states; bidirectional GRU/BasicRNNCell with a zero-length
  sequence), a beam search over LSTM states with gather_nd / SelectV2 / length penalty /
  maximum_iterations, a greedy Bahdanau-attention decoder that stops early, tf.scan / map_fn /
  foldl / foldr, a while loop in a cond in a while loop with tf.case, and graphs with
  TensorFlow's own gradients (the v1 stacks of a MultiRNNCell's gradient; control flow v2's
  gradient While).
- TF2 (here): Keras ConvLSTM1D/2D, Keras RNN variants (Masking, go_backwards,
  return_state, stacked), tf.function loops
  (scan, map_fn with cond, foldl, nested while with cond, maximum_iterations) and a beam search
  in tf.function; frozen with convert_variables_to_constants_v2 keeping the functional While
  / If with TensorList ops (`_functional`), and differentiated by `tfg grad` against a
  GradientTape (`_grad`: lowered to v1 control flow by TensorFlow, except the RNN variants'
  whose While tfg lowers itself); tools/gen_real_loops_tf2_more.py: a tape gradient inside a
  tf.function, Keras StackedRNNCells, a loop whose tensors change shape.
- Autoregressive decoding (tools/gen_real_loops_decode.py): a GPT-style decoder's greedy
  loop with a KV cache grown by concat or preallocated and scattered into, its
  teacher-forced loss differentiated, keras_hub's GPT2CausalLM generate_step, and a TF1
  greedy cross-attention decoder.
"""
import argparse
import os
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import gen_real_loops_decode  # noqa: E402  (decoding loops)
import gen_real_loops_tf2_more  # noqa: E402  (more TF2 cases)
from gen_real_models import freeze, write_case  # noqa: E402
from gen_real_models_more import _start  # noqa: E402  (seeded Keras, layers, rng)

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures",
                   "real_loops")


def tape_case(out, name, fn, feeds, family, weights=(), grad=False, lower=True):
    """fn(*tensors) -> one tensor. Not grad: frozen with the functional loops kept, a run
    case. grad: frozen (lowered to v1 control flow unless `lower` is False), loss =
    sum(y * y), and TensorFlow's GradientTape values w.r.t. `weights` (tf.Variables fn
    captures) and the inputs."""
    specs = [tf.TensorSpec(v.shape, v.dtype, name=f"in{i}") for i, v in enumerate(feeds)]
    if not grad:
        gd, ins, outs = freeze(fn, specs, lower=False)
        write_case(out, name, gd, dict(zip(ins, feeds)), family, fetches=outs, atol_scale=1e-4)
        return
    from tensorflow.python.framework.convert_to_constants import (  # noqa: PLC0415
        convert_variables_to_constants_v2)

    def loss(*args):
        y = fn(*args)
        return tf.reduce_sum(y * y)

    concrete = tf.function(loss).get_concrete_function(*specs)
    captured = {id(ext): internal.op.name for ext, internal in concrete.graph.captures}
    frozen = convert_variables_to_constants_v2(concrete, lower_control_flow=lower)
    gd = frozen.graph.as_graph_def()
    consts = {n.name for n in gd.node if n.op == "Const"}
    weights = [v for v in weights if captured.get(id(v.handle)) in consts]
    args = [tf.constant(f) for f in feeds]
    floats = [a for a in args if a.dtype.is_floating]
    with tf.GradientTape() as tape:
        tape.watch(floats)
        value = loss(*args)
    grads = tape.gradient(value, list(weights) + floats)
    xs = [captured[id(v.handle)] + ":0" for v in weights]
    xs += [t.name for t, a in zip(frozen.inputs, args) if a.dtype.is_floating]
    write_case(out, name, gd, {t.name: f for t, f in zip(frozen.inputs, feeds)}, family,
               ys=[frozen.outputs[0].name], xs=xs, atol_scale=1e-4,
               values=[tf.convert_to_tensor(g).numpy() for g in grads])


def convlstm(out, name, grad):
    """A strided go_backwards ConvLSTM2D and a dilated ConvLSTM1D; the gradient case one
    ConvLSTM2D (kept small: Keras' loop graphs are ~50 KB a layer)."""
    keras, L, rng = _start(name)
    if grad:
        a = keras.Input((4, 5, 5, 2))
        y = L.ConvLSTM2D(2, 3, padding="same", go_backwards=True, return_sequences=True)(a)
        model = keras.Model(a, y)
        feed = rng.standard_normal((2, 4, 5, 5, 2)).astype(np.float32)
        tape_case(out, name, lambda x: model(x, training=False), [feed],
                  "Keras ConvLSTM2D (go_backwards)", model.trainable_variables, grad)
        return
    a, b = keras.Input((4, 6, 6, 2)), keras.Input((5, 7, 2))
    y2 = L.ConvLSTM2D(2, 3, strides=2, go_backwards=True)(a)
    y1 = L.ConvLSTM1D(3, 2, padding="valid", dilation_rate=2, return_sequences=False)(b)
    model = keras.Model([a, b], L.Concatenate()([L.Flatten()(y2), L.Flatten()(y1)]))
    feeds = [rng.standard_normal((2, 4, 6, 6, 2)).astype(np.float32),
             rng.standard_normal((2, 5, 7, 2)).astype(np.float32)]
    tape_case(out, name, lambda x, z: model([x, z], training=False), feeds,
              "Keras ConvLSTM2D / ConvLSTM1D")


def rnn_variants(out, name):
    """Masking over float steps, GRU go_backwards (reset_after=False), LSTM return_state; the
    functional Whiles kept, differentiated by tfg grad. (A Bidirectional layer would double
    the fixture: Keras' loop graphs are ~50 KB a layer; keras_bilstm_masked has one.)"""
    keras, L, rng = _start(name)
    inp = keras.Input((6, 4))
    x = L.Masking(0.0)(inp)
    s = L.GRU(5, go_backwards=True, return_sequences=True, reset_after=False)(x)
    seq, h, c = L.LSTM(4, return_sequences=True, return_state=True)(s)
    model = keras.Model(inp, L.Concatenate()([h, c, L.Flatten()(seq)]))
    feed = rng.standard_normal((3, 6, 4)).astype(np.float32)
    feed[1, 4:] = 0.0  # masked (all-zero) steps: padding at the end and one in the middle
    feed[2, 2] = 0.0
    tape_case(out, name, lambda v: model(v, training=False), [feed],
              "Keras RNN variants (Masking, go_backwards, return_state, Bidirectional)",
              model.trainable_variables[::2], grad=True, lower=False)


def tf_loops(out, name, grad, b=3, t=5, f=4):
    rng = np.random.default_rng(171)
    W = tf.Variable((rng.standard_normal((f, f)) * 0.5).astype(np.float32))
    U = tf.Variable((rng.standard_normal((f, f)) * 0.5).astype(np.float32))

    def fn(x):
        elems = tf.transpose(x, [1, 0, 2])
        hs = tf.scan(lambda h, e: tf.tanh(e @ W + h @ U), elems, initializer=tf.zeros([b, f]))
        rows = tf.map_fn(lambda r: tf.cond(tf.reduce_sum(r) > 0.0, lambda: r @ W,
                                           lambda: tf.nn.softplus(r)), x)
        fl = tf.foldl(lambda a, e: a * 0.9 + e @ U, elems, initializer=tf.zeros([b, f]))

        def outer(i, h):
            h = tf.while_loop(lambda j, a: j < i, lambda j, a: (j + 1, tf.cond(
                tf.reduce_mean(a) > 0.0, lambda: tf.tanh(a @ W), lambda: a * 1.5)), [0, h])[1]
            return (i + 1, h)
        _, nested = tf.while_loop(lambda i, h: tf.reduce_max(tf.abs(h)) < 50.0, outer,
                                  (0, x[:, 0]), maximum_iterations=4)
        return tf.concat([tf.reshape(hs, [b, -1]), tf.reshape(rows, [b, -1]), fl, nested], 1)

    feed = rng.standard_normal((b, t, f)).astype(np.float32)
    tape_case(out, name, fn, [feed], "tf.function scan / map_fn / foldl / nested while",
              [W, U], grad)


def beam_search_tf2(out, name, batch=2, width=3, vocab=9, units=6, end=1, max_len=6):
    rng = np.random.default_rng(181)
    emb = tf.constant(rng.standard_normal((vocab, units)).astype(np.float32))
    w_h = tf.constant((rng.standard_normal((units, units)) * 0.4).astype(np.float32))
    w_out = tf.constant(rng.standard_normal((units, vocab)).astype(np.float32))

    def fn(enc):
        h = tf.repeat(enc, width, axis=0)
        scores = tf.tile(tf.constant([[0.0] + [-1e9] * (width - 1)]), [batch, 1])
        fin = tf.zeros([batch, width], tf.bool)
        tok = tf.zeros([batch * width], tf.int32)
        ids, par = tf.TensorArray(tf.int32, 0, dynamic_size=True), tf.TensorArray(tf.int32, max_len)
        t = tf.constant(0)
        while not tf.reduce_all(fin) and t < max_len:
            h = tf.tanh(h @ w_h + tf.gather(emb, tok))
            logp = tf.reshape(tf.nn.log_softmax(h @ w_out), [batch, width, vocab])
            logp = tf.where(fin[:, :, None], tf.where(tf.range(vocab) == end, 0.0, -1e9), logp)
            scores, flat = tf.math.top_k(tf.reshape(scores[:, :, None] + logp, [batch, -1]), width)
            parent, tok2 = flat // vocab, flat % vocab
            idx = tf.stack([tf.repeat(tf.range(batch)[:, None], width, 1), parent], 2)
            h = tf.reshape(tf.gather_nd(tf.reshape(h, [batch, width, units]), idx), [-1, units])
            fin = tf.gather_nd(fin, idx) | (tok2 == end)
            ids, par = ids.write(t, tok2), par.write(t, parent)
            tok, t = tf.reshape(tok2, [-1]), t + 1
        beams = tf.tile(tf.range(width)[None], [batch, 1])
        out_ta = tf.TensorArray(tf.int32, t)
        for s in tf.range(t - 1, -1, -1):
            out_ta = out_ta.write(s, tf.gather(ids.read(s), beams, batch_dims=1))
            beams = tf.gather(par.read(s), beams, batch_dims=1)
        return tf.transpose(out_ta.stack(), [1, 2, 0]), scores, fin

    enc = (rng.standard_normal((batch, units)) * 1.5).astype(np.float32)
    gd, ins, outs = freeze(fn, [tf.TensorSpec(enc.shape, tf.float32, name="enc")], lower=False)
    write_case(out, name, gd, {ins[0]: enc}, "tf.function beam search (While, TensorLists)",
               fetches=outs)


CASES = {"keras_convlstm_functional": lambda o, n: convlstm(o, n, False),
         "keras_convlstm_grad": lambda o, n: convlstm(o, n, True),
         "keras_rnn_variants_grad": rnn_variants,
         "tf2_loops_functional": lambda o, n: tf_loops(o, n, False),
         "tf2_loops_grad": lambda o, n: tf_loops(o, n, True),
         "tf2_beam_search_functional": beam_search_tf2}
CASES.update(gen_real_loops_tf2_more.CASES)
CASES.update(gen_real_loops_decode.CASES)
TF1 = ["tf1_multirnn_timemajor_grad", "tf1_multirnn_timemajor_grad_tfgrad",
       "tf1_bidir_zero_length_grad", "tf1_beam_search_lstm", "tf1_greedy_attention_grad",
       "tf1_scan_fold_grad", "tf1_loop_in_cond_grad", "tf1_cfv2_tfgrad",
       "tf1_raw_rnn_swap_grad", "tf1_raw_rnn_swap_grad_tfgrad", "tf1_ctc_dense_grad",
       "tf1_ctc_dense_grad_tfgrad", "tf1_segment_sort_loop_grad",
       "tf1_segment_sort_loop_grad_tfgrad", "tf1_train_loop_resource", "tf1_train_loop_ref"]
TF1 += list(gen_real_loops_decode.TF1_CASES)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default=OUT)
    ap.add_argument("--only", default="", help="comma-separated case names")
    ap.add_argument("--tf1", action="store_true", help=argparse.SUPPRESS)
    a = ap.parse_args()
    names = [n for n in a.only.split(",") if n] or list(CASES) + TF1
    unknown = set(names) - set(CASES) - set(TF1)
    if unknown:
        raise SystemExit(f"unknown case(s): {sorted(unknown)}")
    os.makedirs(a.out, exist_ok=True)
    if a.tf1:
        import gen_real_loops_tf1  # noqa: PLC0415  (v1 control flow: this process only)
        gen_real_loops_tf1.main(a.out, names)
        return
    for n in names:
        if n in CASES:
            CASES[n](a.out, n)
    tf1_names = [n for n in names if n in TF1]
    if tf1_names:
        subprocess.run([sys.executable, os.path.abspath(__file__), "--tf1", "--out", a.out,
                        "--only", ",".join(tf1_names)], check=True)


if __name__ == "__main__":
    main()
