"""The TF1 half of tools/gen_real_models.py (run by it as a child: `--tf1`), NEEDS TENSORFLOW.

tf.compat.v1 graph mode with v1 control flow, as seq2seq code of the TF1 era built it: a
`dynamic_rnn` LSTM, a `bidirectional_dynamic_rnn` LSTM with sequence lengths, a beam-search
decoder (TopKV2 over beam x vocab, gathers, a while loop over TensorArrays and a backtracking
loop; tf.contrib.seq2seq is gone, so it is written with while_loop and TensorArrays as that
code did), and an attention seq2seq (LSTM encoder, a decoder while loop with dot attention over
the encoder outputs, teacher forcing, cross-entropy loss). Weights are Consts (a frozen
graph); the gradient cases differentiate the loss w.r.t. them with tf.gradients.
"""
import numpy as np
import tensorflow as tf
from tensorflow.python.ops import rnn  # dynamic_rnn without Keras (Keras 3 has no rnn_cell)

from gen_real_models import write_case

tf1 = tf.compat.v1


class Weights:
    """Seeded Const weights of a trained network's scale (1/sqrt(fan_in))."""

    def __init__(self, seed):
        self.rng = np.random.RandomState(seed)

    def __call__(self, name, shape, scale=None):
        scale = 1.0 / np.sqrt(shape[0]) if scale is None else scale
        return tf.constant((self.rng.randn(*shape) * scale).astype(np.float32), name=name)


class LSTMCell:
    """TF1's BasicLSTMCell: [i j f o] = [x h] W + b; c' = sig(f+1) c + sig(i) tanh(j)."""

    def __init__(self, w, units, in_dim, scope):
        self.units = units
        self.kernel = w(f"{scope}/lstm_cell/kernel", (in_dim + units, 4 * units))
        self.bias = w(f"{scope}/lstm_cell/bias", (4 * units,), 0.1)

    state_size = property(lambda self: (self.units, self.units))
    output_size = property(lambda self: self.units)

    def zero_state(self, batch, dtype):
        return (tf.zeros([batch, self.units], dtype), tf.zeros([batch, self.units], dtype))

    def __call__(self, x, state):
        c, h = state
        z = tf.nn.bias_add(tf.matmul(tf.concat([x, h], 1), self.kernel), self.bias)
        i, j, f, o = tf.split(z, 4, axis=1)
        c = tf.sigmoid(f + 1.0) * c + tf.sigmoid(i) * tf.tanh(j)
        h = tf.sigmoid(o) * tf.tanh(c)
        return h, (c, h)


def write_grad_case(out, name, g, feeds, family, loss, xs):
    """The forward graph as written, with the gradients tf.gradients computes in the graph
    that built the loops (an imported graph has lost its while contexts)."""
    forward = g.as_graph_def()
    with g.as_default():
        grads = tf1.gradients([g.get_tensor_by_name(loss)], [g.get_tensor_by_name(x) for x in xs])
        with tf1.Session(graph=g) as sess:
            values = sess.run([tf.convert_to_tensor(t) for t in grads], feeds)
    write_case(out, name, forward, feeds, family, ys=[loss], xs=xs, values=values)


def dynamic_lstm(out, name, b=3, t=6, f=8, units=16):
    g = tf.Graph()
    with g.as_default():
        w = Weights(11)
        rng = np.random.RandomState(12)
        x = tf1.placeholder(tf.float32, (b, t, f), name="inputs")
        cell = LSTMCell(w, units, f, "rnn")
        outputs, (c, h) = rnn.dynamic_rnn(cell, x, dtype=tf.float32, scope="rnn")
        proj = w("proj/kernel", (units, 4))
        logits = tf.tensordot(outputs, proj, 1)
        loss = tf.add(tf.reduce_mean(tf.square(logits - 0.5)), tf.reduce_mean(c * h), name="loss")
    feeds = {"inputs:0": rng.randn(b, t, f).astype(np.float32)}
    xs = [cell.kernel.name, cell.bias.name, proj.name, "inputs:0"]
    write_grad_case(out, name, g, feeds, "TF1 dynamic_rnn LSTM", loss.name, xs)


def bidirectional_lstm(out, name, b=3, t=6, f=8, units=12):
    g = tf.Graph()
    with g.as_default():
        w = Weights(21)
        rng = np.random.RandomState(22)
        x = tf1.placeholder(tf.float32, (b, t, f), name="inputs")
        lengths = tf1.placeholder(tf.int32, (b,), name="lengths")
        fw, bw = LSTMCell(w, units, f, "fw"), LSTMCell(w, units, f, "bw")
        (out_fw, out_bw), ((c_fw, h_fw), (c_bw, h_bw)) = rnn.bidirectional_dynamic_rnn(
            fw, bw, x, sequence_length=lengths, dtype=tf.float32)
        outputs = tf.concat([out_fw, out_bw], 2, name="outputs")
        proj = w("proj/kernel", (2 * units, 3))
        labels = tf1.placeholder(tf.int32, (b, t), name="labels")
        logits = tf.tensordot(outputs, proj, 1)
        mask = tf.sequence_mask(lengths, t, dtype=tf.float32)
        ce = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits)
        loss = tf.add(tf.reduce_sum(ce * mask) / tf.reduce_sum(mask),
                      tf.reduce_mean(h_fw * h_bw), name="loss")
    feeds = {"inputs:0": rng.randn(b, t, f).astype(np.float32),
             "lengths:0": np.array([6, 3, 5], np.int32),
             "labels:0": rng.randint(0, 3, (b, t)).astype(np.int32)}
    xs = [fw.kernel.name, fw.bias.name, bw.kernel.name, proj.name, "inputs:0"]
    write_grad_case(out, name, g, feeds, "TF1 bidirectional_dynamic_rnn LSTM", loss.name, xs)


def beam_search(out, name, batch=2, width=4, steps=6, vocab=16, units=12, end_token=1):
    """Beam search over a GRU-like decoder: per step log-softmax, finished beams only extend
    with end_token at no cost, TopKV2 over each batch row's beam x vocab scores, gather of the
    parents' states; token ids and parents go to TensorArrays, and a second while loop
    backtracks from the best final beams through the parents."""
    g = tf.Graph()
    with g.as_default():
        w = Weights(31)
        rng = np.random.RandomState(32)
        memory = tf1.placeholder(tf.float32, (batch, units), name="encoder_state")
        emb = w("decoder/embedding", (vocab, units), 1.0)
        w_h = w("decoder/w_h", (units, units))
        w_x = w("decoder/w_x", (units, units))
        w_out = w("decoder/w_out", (units, vocab), 1.2)
        h = tf.reshape(tf.tile(memory[:, None, :], [1, width, 1]), [batch * width, units])
        scores = tf.tile(tf.constant([[0.0] + [-1e9] * (width - 1)]), [batch, 1])
        finished = tf.zeros([batch, width], tf.bool)
        tokens = tf.fill([batch * width], 0)
        ids_ta = tf1.TensorArray(tf.int32, size=0, dynamic_size=True, name="ids")
        parents_ta = tf1.TensorArray(tf.int32, size=0, dynamic_size=True, name="parents")
        offsets = tf.range(batch)[:, None] * width

        def body(t, h, tokens, scores, finished, ids_ta, parents_ta):
            h = tf.tanh(tf.matmul(h, w_h) + tf.matmul(tf.gather(emb, tokens), w_x))
            logp = tf.nn.log_softmax(tf.matmul(h, w_out))
            logp = tf.reshape(logp, [batch, width, vocab])
            only_end = tf.one_hot(end_token, vocab, on_value=0.0, off_value=-1e9)
            logp = tf1.where(tf.broadcast_to(finished[:, :, None], logp.shape),
                             tf.broadcast_to(only_end, logp.shape), logp)
            total = tf.reshape(scores[:, :, None] + logp, [batch, width * vocab])
            top, flat = tf.nn.top_k(total, k=width)
            parent, token = flat // vocab, flat % vocab
            index = tf.reshape(parent + offsets, [-1])
            h = tf.gather(h, index)
            finished = tf.logical_or(tf.gather(tf.reshape(finished, [-1]), index),
                                     tf.equal(tf.reshape(token, [-1]), end_token))
            return (t + 1, h, tf.reshape(token, [-1]), top,
                    tf.reshape(finished, [batch, width]),
                    ids_ta.write(t, token), parents_ta.write(t, parent))

        def cond(t, h, tokens, scores, finished, *_):
            return tf.logical_and(t < steps, tf.logical_not(tf.reduce_all(finished)))

        n, _, _, final, finished, ids_ta, parents_ta = tf1.while_loop(
            cond, body, [tf.constant(0), h, tokens, scores, finished, ids_ta, parents_ta])
        out_ta = tf1.TensorArray(tf.int32, size=n, name="decoded")

        def back(t, beams, out_ta):
            ids = tf.gather(ids_ta.read(t), beams, batch_dims=1)
            parents = tf.gather(parents_ta.read(t), beams, batch_dims=1)
            return t - 1, parents, out_ta.write(t, ids)

        _, _, out_ta = tf1.while_loop(
            lambda t, *_: t >= 0, back,
            [n - 1, tf.tile(tf.range(width)[None], [batch, 1]), out_ta])
        decoded = tf.transpose(out_ta.stack(), [1, 2, 0], name="decoded_ids")
        final = tf.identity(final, name="beam_scores")
        length = tf.identity(n, name="decoded_length")
        finished = tf.identity(finished, name="finished")
    feeds = {"encoder_state:0": (rng.randn(batch, units) * 1.5).astype(np.float32)}
    write_case(out, name, g.as_graph_def(), feeds, "TF1 beam search (TensorArrays, TopKV2)",
               fetches=[decoded.name, final.name, length.name, finished.name])


def attention_seq2seq(out, name, b=2, src=7, tgt=5, f=6, units=10, vocab=9):
    g = tf.Graph()
    with g.as_default():
        w = Weights(41)
        rng = np.random.RandomState(42)
        source = tf1.placeholder(tf.float32, (b, src, f), name="source")
        target_in = tf1.placeholder(tf.int32, (b, tgt), name="target_in")
        target_out = tf1.placeholder(tf.int32, (b, tgt), name="target_out")
        enc = LSTMCell(w, units, f, "encoder")
        memory, (c, h) = rnn.dynamic_rnn(enc, source, dtype=tf.float32, scope="encoder")
        emb = w("decoder/embedding", (vocab, units), 1.0)
        dec = LSTMCell(w, units, 2 * units, "decoder")
        w_att = w("decoder/attention/w", (units, units))
        w_out = w("decoder/output/kernel", (2 * units, vocab))
        inputs_ta = tf1.TensorArray(tf.float32, size=tgt, name="dec_inputs").unstack(
            tf.transpose(tf.gather(emb, target_in), [1, 0, 2]))
        logits_ta = tf1.TensorArray(tf.float32, size=tgt, name="logits")
        keys = tf.tensordot(memory, w_att, 1)  # (b, src, units)

        def body(t, c, h, context, logits_ta):
            x = tf.concat([inputs_ta.read(t), context], 1)
            h, (c, _) = dec(x, (c, h))
            score = tf.squeeze(tf.matmul(keys, h[:, :, None]), 2)  # Luong dot
            alpha = tf.nn.softmax(score)
            context = tf.reduce_sum(alpha[:, :, None] * memory, 1)
            logits = tf.matmul(tf.concat([h, context], 1), w_out)
            return t + 1, c, h, context, logits_ta.write(t, logits)

        _, _, _, _, logits_ta = tf1.while_loop(
            lambda t, *_: t < tgt, body,
            [tf.constant(0), c, h, tf.zeros([b, units]), logits_ta])
        logits = tf.transpose(logits_ta.stack(), [1, 0, 2], name="logits")
        loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=target_out, logits=logits), name="loss")
    feeds = {"source:0": rng.randn(b, src, f).astype(np.float32),
             "target_in:0": rng.randint(0, vocab, (b, tgt)).astype(np.int32),
             "target_out:0": rng.randint(0, vocab, (b, tgt)).astype(np.int32)}
    xs = [enc.kernel.name, emb.name, dec.kernel.name, w_att.name, w_out.name, "source:0"]
    write_grad_case(out, name, g, feeds, "TF1 attention seq2seq", loss.name, xs)


def train_step(out, name, b=4, f=5, c=3, steps=4):
    """A TF1 training step: six variables (ref and resource) each updated by another
    tf1.train optimizer (Adam, Nesterov momentum, centered RMSProp, Adagrad, SGD, RMSProp
    with momentum, Adadelta) on a sparse softmax cross-entropy; the loss after `steps`."""
    g = tf.Graph()
    with g.as_default():
        rng = np.random.RandomState(81)
        x = tf1.placeholder(tf.float32, (b, f), name="x")
        y = tf1.placeholder(tf.int32, (b,), name="labels")
        vs = [tf1.get_variable(f"w{i}", initializer=(rng.randn(f if i == 0 else c, c) * 0.5)
                               .astype(np.float32), use_resource=(i % 2 == 1))
              for i in range(7)]
        h = tf.matmul(x, vs[0])
        for v in vs[1:]:
            h = tf.nn.relu(h) + tf.matmul(h, v) * 0.5
        loss = tf.identity(tf1.losses.sparse_softmax_cross_entropy(y, h), name="loss")
        opts = [tf1.train.AdamOptimizer(0.05),
                tf1.train.MomentumOptimizer(0.1, 0.9, use_nesterov=True),
                tf1.train.RMSPropOptimizer(0.05, centered=True), tf1.train.AdagradOptimizer(0.1),
                tf1.train.GradientDescentOptimizer(0.1),
                tf1.train.RMSPropOptimizer(0.05, momentum=0.5),
                tf1.train.AdadeltaOptimizer(1.0)]
        step = tf1.train.get_or_create_global_step()
        updates = [o.minimize(loss, var_list=[v]) for o, v in zip(opts, vs)]
        tf.group(*updates, tf1.assign_add(step, 1), name="train")
        tf.group(tf1.global_variables_initializer(), name="init")
    feeds = {"x:0": rng.randn(b, f).astype(np.float32),
             "labels:0": rng.randint(0, c, b).astype(np.int32)}
    write_case(out, name, g.as_graph_def(), feeds, "TF1 training step (tf1.train optimizers)",
               fetches=["loss:0"], targets=["train"], init=["init"], steps=steps,
               rtol=1e-4)


def atrous_sparse(out, name):
    """DeepLab-era TF1: atrous_conv2d and a dilated tf.nn.convolution (SpaceToBatchND /
    BatchToSpaceND), corner-aligned resize_bilinear and resize_nearest_neighbor; plus a
    wide & deep style embedding_lookup_sparse (SparseSegmentMean / SqrtN) of sparse ids."""
    g = tf.Graph()
    with g.as_default():
        w = Weights(91)
        rng = np.random.RandomState(92)
        x = tf1.placeholder(tf.float32, (2, 12, 12, 3), name="x")
        f1 = w("f1", (3, 3, 3, 4), 0.4)
        y = tf.nn.relu(tf1.nn.atrous_conv2d(x, f1, rate=2, padding="SAME"))
        f2 = w("f2", (3, 3, 4, 4), 0.4)
        y = tf1.nn.convolution(y, f2, padding="VALID", dilation_rate=[3, 3])
        y = tf1.image.resize_bilinear(y, [9, 9], align_corners=True)
        y = tf1.image.resize_nearest_neighbor(y, [5, 7])
        feat = tf.reduce_mean(y, [1, 2])
        emb = w("emb", (10, 4), 1.0)
        ids = tf1.sparse_placeholder(tf.int64, name="ids")
        e_mean = tf.nn.embedding_lookup_sparse(emb, ids, None, combiner="mean")
        e_sqrtn = tf.nn.embedding_lookup_sparse(emb, ids, None, combiner="sqrtn")
        loss = tf.identity(tf.reduce_sum(tf.square(feat + e_mean)) + tf.reduce_sum(e_sqrtn),
                           name="loss")
    feeds = {"x:0": rng.randn(2, 12, 12, 3).astype(np.float32),
             "ids/indices:0": np.array([[0, 0], [0, 1], [1, 0], [1, 2], [1, 3]], np.int64),
             "ids/values:0": np.array([3, 7, 1, 1, 9], np.int64),
             "ids/shape:0": np.array([2, 4], np.int64)}
    write_grad_case(out, name, g, feeds, "TF1 atrous conv + sparse embeddings", loss.name,
                    [f1.name, f2.name, emb.name, "x:0"])


def nested_while(out, name, b=2, f=3):
    """A while loop whose body runs an inner while loop (its trip count set by the outer
    counter) with a tf.cond inside, writing a pair of TensorArrays (float and int)."""
    g = tf.Graph()
    with g.as_default():
        w = Weights(61)
        rng = np.random.RandomState(62)
        x = tf1.placeholder(tf.float32, (b, f), name="x")
        n = tf1.placeholder(tf.int32, (), name="n")
        W, V = w("W", (f, f)), w("V", (f, f))

        def outer(i, h, tas):
            def inner(j, h2):
                h3 = tf.tanh(tf.matmul(h2, W))
                h3 = tf1.cond(tf.reduce_mean(h3) > 0.0, lambda: h3 * 1.5,
                              lambda: tf.matmul(h3, V))
                return j + 1, h3
            _, h = tf1.while_loop(lambda j, _: j < i + 1, inner, [0, h])
            th, tc = tas
            return i + 1, h, (th.write(i, h), tc.write(i, i * 2))

        tas = (tf1.TensorArray(tf.float32, size=n), tf1.TensorArray(tf.int32, size=n))
        _, h, (ta_h, ta_c) = tf1.while_loop(lambda i, *_: i < n, outer, [0, x, tas])
        hs = ta_h.stack()
        loss = tf.identity(tf.reduce_sum(hs * hs) + tf.reduce_sum(h)
                           + tf.cast(tf.reduce_sum(ta_c.stack()), tf.float32), name="loss")
    feeds = {"x:0": rng.randn(b, f).astype(np.float32), "n:0": np.array(3, np.int32)}
    write_grad_case(out, name, g, feeds, "TF1 nested while + cond + TensorArray pair",
                    loss.name, [W.name, V.name, "x:0"])


CASES = {"tf1_dynamic_lstm_grad": dynamic_lstm,
         "tf1_bidirectional_lstm_grad": bidirectional_lstm,
         "tf1_beam_search": beam_search,
         "tf1_attention_seq2seq_grad": attention_seq2seq,
         "tf1_train_step": train_step,
         "tf1_atrous_sparse_grad": atrous_sparse,
         "tf1_nested_while_grad": nested_while}


def main(out, names):
    tf1.disable_eager_execution()
    tf1.disable_control_flow_v2()
    for n in names:
        CASES[n](out, n)
