"""More TF2 cases of tools/gen_real_loops.py (imported by it), NEEDS TENSORFLOW.

- tf2_lstm_tape_tfgrad: a tf.function that takes an LSTM loop's GradientTape gradients
  itself, frozen with its functional Whiles kept: TensorFlow's forward loop with TensorList
  accumulators and the gradient While that pops them, run as written.
- keras_stacked_cells: keras.layers.RNN over StackedRNNCells (an LSTMCell and a GRUCell in
  one loop), return_sequences, masked by a Masking layer.
- tf2_dynamic_shapes_functional: a while loop whose carried tensor changes size (boolean_mask
  / concat under shape_invariants) and a TensorArray of ragged-length items
  (infer_shape=False) concatenated at the end.
"""
import numpy as np
import tensorflow as tf

from gen_real_models import freeze, keras_mods, write_case  # noqa: F401


def _start(name):
    keras = keras_mods()
    keras.backend.clear_session()
    keras.utils.set_random_seed(sum(map(ord, name)))
    return keras, keras.layers, np.random.default_rng(sum(map(ord, name)))


def lstm_tape(out, name, units=4):
    """An LSTM written with tf.while_loop over a TensorArray (Keras' own loops capture
    resource variables, whose tape gradient convert_variables_to_constants_v2 cannot freeze:
    VariableShape of a loop input), its GradientTape gradients taken inside the tf.function."""
    rng = np.random.default_rng(sum(map(ord, name)))
    w0 = (rng.standard_normal((3 + units, 4 * units)) * 0.5).astype(np.float32)

    def fn(x):
        w = tf.constant(w0)
        with tf.GradientTape() as tape:
            tape.watch([x, w])
            xs = tf.TensorArray(tf.float32, size=5).unstack(tf.transpose(x, [1, 0, 2]))
            out = tf.TensorArray(tf.float32, size=5)
            c = h = tf.zeros([2, units])
            for t in tf.range(5):
                i, j, f, o = tf.split(tf.concat([xs.read(t), h], 1) @ w, 4, 1)
                c = tf.sigmoid(f + 1.0) * c + tf.sigmoid(i) * tf.tanh(j)
                h = tf.sigmoid(o) * tf.tanh(c)
                out = out.write(t, h)
            loss = tf.reduce_sum(out.stack() ** 2) + tf.reduce_sum(c)
        return [loss] + tape.gradient(loss, [x, w])

    feed = rng.standard_normal((2, 5, 3)).astype(np.float32)
    gd, ins, outs = freeze(fn, [tf.TensorSpec(feed.shape, tf.float32, name="x")], lower=False)
    write_case(out, name, gd, {ins[0]: feed}, "LSTM loop with its GradientTape in a "
               "tf.function (TensorFlow's gradient While)", fetches=outs, atol_scale=1e-4)


def stacked_cells(out, name):
    keras, L, rng = _start(name)
    inp = keras.Input((6, 3))
    cells = L.StackedRNNCells([L.LSTMCell(4), L.GRUCell(3)])
    y = L.RNN(cells, return_sequences=True)(L.Masking(0.0)(inp))
    model = keras.Model(inp, y)
    feed = rng.standard_normal((2, 6, 3)).astype(np.float32)
    feed[1, 3:] = 0.0
    gd, ins, outs = freeze(lambda v: model(v, training=False),
                           [tf.TensorSpec(feed.shape, tf.float32, name="x")], lower=False)
    write_case(out, name, gd, {ins[0]: feed}, "Keras RNN(StackedRNNCells[LSTM, GRU])",
               fetches=outs, atol_scale=1e-4)


def dynamic_shapes(out, name):
    def fn(x):
        ta = tf.TensorArray(tf.float32, size=0, dynamic_size=True, infer_shape=False)
        i, v = tf.constant(0), x
        while i < 4:
            tf.autograph.experimental.set_loop_options(
                shape_invariants=[(v, tf.TensorShape([None]))])
            keep = tf.boolean_mask(v, tf.sin(v * tf.cast(i + 1, tf.float32)) > -0.3)
            ta = ta.write(i, keep * 2.0)
            v = tf.concat([keep, tf.reduce_sum(keep, keepdims=True)], 0)
            i += 1
        return ta.concat(), v

    x = np.random.default_rng(5).standard_normal(9).astype(np.float32)
    gd, ins, outs = freeze(fn, [tf.TensorSpec([9], tf.float32, name="x")], lower=False)
    write_case(out, name, gd, {ins[0]: x}, "tf.function loop with changing shapes",
               fetches=outs)


CASES = {"tf2_lstm_tape_tfgrad": lstm_tape, "keras_stacked_cells": stacked_cells,
         "tf2_dynamic_shapes_functional": dynamic_shapes}
