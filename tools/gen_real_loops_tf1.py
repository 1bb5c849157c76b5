"""The TF1 half of tools/gen_real_loops.py (run by it as a child: `--tf1`), NEEDS TENSORFLOW.

tf.compat.v1 graph mode, v1 control flow unless a case says otherwise, with TensorFlow's own
RNN cells (tensorflow.python.ops.rnn_cell_impl: GRUCell, LSTMCell with peepholes, projection
and cell clipping, BasicRNNCell, MultiRNNCell) in variables initialized from a fixed seed,
then frozen by tf1.graph_util.convert_variables_to_constants (each variable becomes the Const
of its name). Gradient cases differentiate w.r.t. those Consts and placeholders; TensorFlow's
values are tf.gradients computed in the graph that built the loops. `_tfgrad` cases are the
frozen graph *with* TensorFlow's gradient nodes (stacks, TensorArrayGradV3, the backward
while loops; with control flow v2 the While gradient TensorFlow writes), fetched by tfg run.
"""
import numpy as np
import tensorflow as tf
from tensorflow.python.ops import rnn, rnn_cell_impl as rc

from gen_real_models import write_case

tf1 = tf.compat.v1


def _frozen(sess, g, tensors):
    names = sorted({t.op.name for t in tensors})
    return tf1.graph_util.convert_variables_to_constants(sess, g.as_graph_def(), names)


def session_case(out, name, g, feeds, family, loss=None, xs=(), fetches=(), tfgrad=False,
                 **kw):
    """Freeze g's seeded variables and write `name`: a grad case of `loss` w.r.t. `xs`
    (variables or placeholder tensors), else a run case of `fetches`. tfgrad: also write
    `<name>_tfgrad`, a run case of the frozen graph with TensorFlow's gradient nodes."""
    with g.as_default():
        if loss is not None:
            grads = [tf.convert_to_tensor(t) for t in tf1.gradients(loss, list(xs))]
        with tf1.Session(graph=g) as sess:
            sess.run(tf1.global_variables_initializer())
            if loss is None:
                write_case(out, name, _frozen(sess, g, fetches), feeds, family,
                           fetches=[t.name for t in fetches], **kw)
                return
            values = sess.run(grads, feeds)
            x_names = [x.name if isinstance(x, tf.Tensor) else x.op.name + ":0" for x in xs]
            write_case(out, name, _frozen(sess, g, [loss]), feeds, family, ys=[loss.name],
                       xs=x_names, values=values, **kw)
            if tfgrad:
                write_case(out, name + "_tfgrad", _frozen(sess, g, grads), feeds,
                           family + " (TensorFlow's gradient graph)",
                           fetches=[t.name for t in grads], **kw)


def multirnn_timemajor(out, name, t=6, b=3, f=5):
    """dynamic_rnn, time-major, of MultiRNNCell([GRUCell, LSTMCell(peepholes, num_proj,
    cell_clip)]) with sequence lengths and a fed initial GRU state."""
    g = tf.Graph()
    with g.as_default():
        tf1.set_random_seed(101)
        rng = np.random.RandomState(102)
        x = tf1.placeholder(tf.float32, (t, b, f), name="inputs")
        lengths = tf1.placeholder(tf.int32, (b,), name="lengths")
        h0 = tf1.placeholder(tf.float32, (b, 8), name="gru_state")
        lstm = rc.LSTMCell(7, use_peepholes=True, num_proj=5, cell_clip=2.0)
        cell = rc.MultiRNNCell([rc.GRUCell(8), lstm])
        outputs, (s_gru, s_lstm) = rnn.dynamic_rnn(
            cell, x, sequence_length=lengths, initial_state=(h0, lstm.zero_state(b, tf.float32)),
            time_major=True, scope="rnn")
        state = tf.reduce_sum(s_gru) * 0.5 + tf.reduce_sum(s_lstm.c) * tf.reduce_sum(s_lstm.h)
        loss = tf.add(tf.reduce_sum(tf.square(outputs)), state, name="loss")
        xs = tf1.trainable_variables() + [x, h0]
    feeds = {"inputs:0": rng.randn(t, b, f).astype(np.float32),
             "lengths:0": np.array([6, 2, 4], np.int32),
             "gru_state:0": (rng.randn(b, 8) * 0.5).astype(np.float32)}
    session_case(out, name, g, feeds, "TF1 dynamic_rnn MultiRNNCell time-major", loss, xs,
                 tfgrad=True)


def bidir_zero_length(out, name, t=5, b=3, f=4):
    """bidirectional_dynamic_rnn of a GRUCell and a relu BasicRNNCell, fed initial states,
    one sequence of length 0 (its outputs are zeros, its state the initial one)."""
    g = tf.Graph()
    with g.as_default():
        tf1.set_random_seed(111)
        rng = np.random.RandomState(112)
        x = tf1.placeholder(tf.float32, (b, t, f), name="inputs")
        lengths = tf1.placeholder(tf.int32, (b,), name="lengths")
        s_fw = tf1.placeholder(tf.float32, (b, 6), name="state_fw")
        s_bw = tf1.placeholder(tf.float32, (b, 5), name="state_bw")
        (o_fw, o_bw), (f_fw, f_bw) = rnn.bidirectional_dynamic_rnn(
            rc.GRUCell(6), rc.BasicRNNCell(5, activation=tf.nn.relu), x,
            sequence_length=lengths, initial_state_fw=s_fw, initial_state_bw=s_bw)
        y = tf.concat([o_fw, o_bw], 2)
        loss = tf.add(tf.reduce_sum(tf.sin(y) * y), tf.reduce_sum(f_fw * f_fw)
                      + tf.reduce_sum(f_bw), name="loss")
        xs = tf1.trainable_variables() + [x, s_fw, s_bw]
    feeds = {"inputs:0": rng.randn(b, t, f).astype(np.float32),
             "lengths:0": np.array([5, 0, 3], np.int32),
             "state_fw:0": (rng.randn(b, 6) * 0.5).astype(np.float32),
             "state_bw:0": np.abs(rng.randn(b, 5)).astype(np.float32)}
    session_case(out, name, g, feeds, "TF1 bidirectional_dynamic_rnn GRU/RNN, zero length",
                 loss, xs)


CASES = {"tf1_multirnn_timemajor_grad": multirnn_timemajor,
         "tf1_bidir_zero_length_grad": bidir_zero_length}


def main(out, names):
    import gen_real_loops_decode  # noqa: PLC0415  (its TF1 greedy decoder)
    import gen_real_loops_tf1_more  # noqa: PLC0415  (the decoder and scan/fold cases)
    tf1.disable_eager_execution()
    tf1.disable_control_flow_v2()
    cases = dict(CASES, **gen_real_loops_tf1_more.CASES, **gen_real_loops_decode.TF1_CASES)
    for n in names:
        if n not in cases and n.endswith("_tfgrad"):
            continue  # written with its grad case
        cases[n](out, n)
