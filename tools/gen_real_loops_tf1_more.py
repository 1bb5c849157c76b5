"""TF1 decoder, scan/fold and nested-control-flow cases of tools/gen_real_loops.py (imported
by gen_real_loops_tf1.py in its `--tf1` child), NEEDS TENSORFLOW.

- tf1_beam_search_lstm: beam search over an LSTMCell state tuple as TF1 NMT code wrote it
  (tf.contrib.seq2seq is gone): gather_nd of the parents' states, tf.where (SelectV2) of the
  finished masks, GNMT length penalty, early stop and maximum_iterations, TensorArrays of
  ids / parents, a backtracking loop.
- tf1_greedy_attention_grad: GRU encoder with sequence lengths, Bahdanau attention with a
  memory mask, an LSTM decoder fed its own argmax through an embedding, stopping when every
  row has emitted the end token (maximum_iterations bounds it); TensorArrays of logits and
  alignments.
- tf1_scan_fold_grad: tf.scan with a tuple state, tf.map_fn with a tf.cond per row and two
  outputs, tf.foldl and tf.foldr.
- tf1_loop_in_cond_grad: a while loop inside a tf.cond branch inside a while loop, tf.case in
  a body, maximum_iterations, stop_gradient.
- tf1_cfv2_tfgrad: the same kind of graph with control flow v2 (functional While / If), and
  the gradient While TensorFlow builds for it (TensorList accumulators), run as written.
- tf1_raw_rnn_swap_grad (and _tfgrad): tf.nn.raw_rnn's loop_fn protocol with a GRUCell,
  swap_memory, parallel_iterations=1.
- tf1_ctc_dense_grad (and _tfgrad): tf.nn.ctc_loss with dense labels, whose forward-backward
  recursions are functional While loops (TensorScatterUpdate / Add, Empty; the cond a
  wrapper function calling another by name).
- tf1_segment_sort_loop_grad (and _tfgrad): unsorted_segment_max, sort / argsort, reverse
  cumsum, cumprod, l2_normalize, softmax in a while body.
- tf1_train_loop_resource / _ref: SGD steps in a while loop updating variables (resource /
  TF1 reference variables), tf.gradients taken inside the body.
"""
import numpy as np
import tensorflow as tf
from tensorflow.python.ops import control_flow_util, rnn, rnn_cell_impl as rc

from gen_real_loops_tf1 import session_case

tf1 = tf.compat.v1


def dense(name, n_in, n_out, bias=True):
    """tf1.layers.Dense (not in Keras 3) as TF1 code wrote it: kernel and bias variables."""
    with tf1.variable_scope(name):
        kernel = tf1.get_variable("kernel", (n_in, n_out))
        b = tf1.get_variable("bias", (n_out,), initializer=tf1.random_normal_initializer(
            stddev=0.1)) if bias else None
    return lambda x: (tf.tensordot(x, kernel, 1) if b is None
                      else tf.nn.bias_add(tf.tensordot(x, kernel, 1), b))


def beam_search_lstm(out, name, batch=2, width=3, vocab=11, units=8, end=1, max_len=7):
    g = tf.Graph()
    with g.as_default():
        tf1.set_random_seed(121)
        rng = np.random.RandomState(122)
        enc = tf1.placeholder(tf.float32, (batch, units), name="encoder_state")
        # read outside the loop: a ResourceGather in the loop freezes into a GatherV2 whose
        # new axis Const is outside the frame (TensorFlow then refuses its own graph)
        emb = tf.convert_to_tensor(tf1.get_variable("embedding", (vocab, units)))
        cell = rc.LSTMCell(units)
        proj = dense("output_projection", units, vocab)
        tile = lambda t: tf.reshape(tf.tile(t[:, None], [1, width, 1]), [batch * width, -1])
        state = rc.LSTMStateTuple(tile(tf.tanh(enc)), tile(enc))
        scores = tf.tile(tf.constant([[0.0] + [-np.inf] * (width - 1)]), [batch, 1])
        lengths = tf.zeros([batch, width], tf.int32)
        finished = tf.zeros([batch, width], tf.bool)
        tokens = tf.zeros([batch * width], tf.int32)
        ids_ta = tf1.TensorArray(tf.int32, size=0, dynamic_size=True, name="ids")
        par_ta = tf1.TensorArray(tf.int32, size=0, dynamic_size=True, name="parents")

        def body(t, c, h, tokens, scores, lengths, finished, ids_ta, par_ta):
            out_, (c, h) = cell(tf.gather(emb, tokens), rc.LSTMStateTuple(c, h))
            logp = tf.reshape(tf.nn.log_softmax(proj(out_)), [batch, width, vocab])
            eos_only = tf.where(tf.equal(tf.range(vocab), end), 0.0, -np.inf)
            logp = tf.where(finished[:, :, None], eos_only[None, None], logp)
            total = tf.reshape(scores[:, :, None] + logp, [batch, width * vocab])
            new_len = lengths + tf.cast(tf.logical_not(finished), tf.int32)
            penalty = tf.pow((5.0 + tf.cast(new_len + 1, tf.float32)) / 6.0, 0.6)
            norm = total / tf.reshape(tf.tile(penalty[:, :, None], [1, 1, vocab]),
                                      [batch, -1])
            _, flat = tf.nn.top_k(norm, k=width)
            parent, token = flat // vocab, flat % vocab
            where = tf.stack([tf.tile(tf.range(batch)[:, None], [1, width]), parent], 2)
            pick = lambda s: tf.reshape(tf.gather_nd(tf.reshape(s, [batch, width, -1]), where),
                                        [batch * width, -1])
            scores = tf.gather(total, flat, batch_dims=1)
            finished = tf.logical_or(tf.gather_nd(finished, where), tf.equal(token, end))
            return (t + 1, pick(c), pick(h), tf.reshape(token, [-1]), scores,
                    tf.gather_nd(new_len, where), finished, ids_ta.write(t, token),
                    par_ta.write(t, parent))

        loop = tf1.while_loop(
            lambda t, *a: tf.logical_not(tf.reduce_all(a[5])), body,
            (tf.constant(0), state.c, state.h, tokens, scores, lengths, finished, ids_ta,
             par_ta), maximum_iterations=max_len)
        n, scores, lengths, finished, ids_ta, par_ta = [loop[i] for i in (0, 4, 5, 6, 7, 8)]
        out_ta = tf1.TensorArray(tf.int32, size=n, name="decoded")

        def back(t, beams, out_ta):
            ids = tf.gather(ids_ta.read(t), beams, batch_dims=1)
            return t - 1, tf.gather(par_ta.read(t), beams, batch_dims=1), out_ta.write(t, ids)

        _, _, out_ta = tf1.while_loop(lambda t, *_: t >= 0, back,
                                      [n - 1, tf.tile(tf.range(width)[None], [batch, 1]),
                                       out_ta])
        fetches = [tf.transpose(out_ta.stack(), [1, 2, 0], name="decoded_ids"),
                   tf.identity(scores, name="scores"), tf.identity(lengths, name="lengths"),
                   tf.identity(finished, name="finished"), tf.identity(n, name="steps")]
    feeds = {"encoder_state:0": (rng.randn(batch, units) * 1.5).astype(np.float32)}
    session_case(out, name, g, feeds, "TF1 beam search (LSTMCell, gather_nd, length penalty)",
                 fetches=fetches)


def greedy_attention(out, name, b=3, src=6, f=5, units=8, vocab=7, end=2, max_len=6):
    g = tf.Graph()
    with g.as_default():
        tf1.set_random_seed(131)
        rng = np.random.RandomState(132)
        source = tf1.placeholder(tf.float32, (b, src, f), name="source")
        src_len = tf1.placeholder(tf.int32, (b,), name="source_lengths")
        memory, enc_state = rnn.dynamic_rnn(rc.GRUCell(units), source, src_len,
                                            dtype=tf.float32, scope="encoder")
        mask = tf.sequence_mask(src_len, src)
        keys = dense("memory_layer", units, units, bias=False)(memory)
        w_q = tf1.get_variable("attention/query", (units, units))
        v = tf1.get_variable("attention/v", (units,))
        emb = tf.convert_to_tensor(tf1.get_variable("embedding", (vocab, units)))
        cell = rc.LSTMCell(units, name="decoder_cell")
        proj = dense("output_projection", 2 * units, vocab)
        logits_ta = tf1.TensorArray(tf.float32, size=0, dynamic_size=True, name="logits")
        align_ta = tf1.TensorArray(tf.float32, size=0, dynamic_size=True, name="alignments")

        def body(t, c, h, token, done, logits_ta, align_ta):
            score = tf.reduce_sum(v * tf.tanh(keys + tf.matmul(h, w_q)[:, None]), 2)
            alpha = tf.nn.softmax(tf.where(mask, score, tf.fill(tf.shape(score), -1e9)))
            context = tf.reduce_sum(alpha[:, :, None] * memory, 1)
            x = tf.concat([tf.gather(emb, token), context], 1)
            o, (c, h) = cell(x, rc.LSTMStateTuple(c, h))
            logits = proj(tf.concat([o, context], 1))
            token = tf.argmax(logits, 1, output_type=tf.int32)
            done = tf.logical_or(done, tf.equal(token, end))
            return t + 1, c, h, token, done, logits_ta.write(t, logits), align_ta.write(t, alpha)

        loop = tf1.while_loop(
            lambda t, c, h, token, done, *_: tf.logical_not(tf.reduce_all(done)), body,
            (tf.constant(0), enc_state, enc_state, tf.zeros([b], tf.int32),
             tf.zeros([b], tf.bool), logits_ta, align_ta), maximum_iterations=max_len)
        logits, align = loop[5].stack(), loop[6].stack()
        loss = tf.add(tf.reduce_mean(tf.reduce_logsumexp(logits, 2)),
                      tf.reduce_sum(align * align), name="loss")
        xs = [v for v in tf1.trainable_variables() if "bias" not in v.name] + [source]
    feeds = {"source:0": rng.randn(b, src, f).astype(np.float32),
             "source_lengths:0": np.array([6, 3, 4], np.int32)}
    session_case(out, name, g, feeds, "TF1 greedy attention decoder (early stop)", loss, xs)


def scan_fold(out, name, b=3, t=5, f=4):
    g = tf.Graph()
    with g.as_default():
        rng = np.random.RandomState(142)
        x = tf1.placeholder(tf.float32, (b, t, f), name="x")
        W = tf.constant((rng.randn(f, f) * 0.5).astype(np.float32), name="W")
        U = tf.constant((rng.randn(f, f) * 0.5).astype(np.float32), name="U")
        elems = tf.transpose(x, [1, 0, 2])
        hs, sums = tf1.scan(
            lambda acc, e: (tf.tanh(tf.matmul(e, W) + tf.matmul(acc[0], U)),
                            acc[1] + tf.reduce_sum(acc[0], 1)),
            elems, initializer=(tf.zeros([b, f]), tf.zeros([b])))
        rows, norms = tf1.map_fn(
            lambda r: (tf1.cond(tf.reduce_sum(r) > 0.0, lambda: tf.matmul(r, W),
                                lambda: tf.nn.softplus(r)), tf.norm(r)),
            x, dtype=(tf.float32, tf.float32))
        fl = tf1.foldl(lambda a, e: a * 0.9 + tf.matmul(e, U), elems, initializer=tf.zeros([b, f]))
        fr = tf1.foldr(lambda a, e: tf.maximum(a, tf.matmul(e, W)), elems)
        loss = tf.add(tf.reduce_sum(hs * hs) + tf.reduce_sum(sums) + tf.reduce_sum(rows ** 2),
                      tf.reduce_sum(norms) + tf.reduce_sum(fl * fr), name="loss")
    feeds = {"x:0": rng.randn(b, t, f).astype(np.float32)}
    session_case(out, name, g, feeds, "TF1 scan / map_fn / foldl / foldr", loss,
                 [W, U, x])


def loop_in_cond(out, name, b=2, f=3):
    g = tf.Graph()
    with g.as_default():
        rng = np.random.RandomState(152)
        x = tf1.placeholder(tf.float32, (b, f), name="x")
        n = tf1.placeholder(tf.int32, (), name="n")
        W = tf.constant((rng.randn(f, f) * 0.7).astype(np.float32), name="W")
        V = tf.constant((rng.randn(f, f) * 0.7).astype(np.float32), name="V")

        def body(i, h):
            def looped():  # a while loop inside a cond branch inside the outer loop
                return tf1.while_loop(lambda j, a: j < i, lambda j, a: (j + 1, tf.tanh(
                    tf.matmul(a, W))), [0, h])[1]
            h = tf1.cond(tf.equal(i % 2, 0), looped, lambda: tf.matmul(h, V))
            h = tf1.case([(tf.equal(i % 3, 0), lambda: tf.sigmoid(h) + h),
                          (tf.equal(i % 3, 1), lambda: h * tf.stop_gradient(h))],
                         default=lambda: tf.sin(h))
            return i + 1, h

        _, h = tf1.while_loop(lambda i, h: tf.reduce_max(tf.abs(h)) < 1e4, body, (0, x),
                              maximum_iterations=n)
        loss = tf.identity(tf.reduce_sum(h * h) + tf.reduce_sum(h), name="loss")
    feeds = {"x:0": rng.randn(b, f).astype(np.float32), "n:0": np.array(5, np.int32)}
    session_case(out, name, g, feeds, "TF1 while in cond in while, tf.case", loss, [W, V, x])


def cfv2(out, name, b=2, f=3):
    control_flow_util.ENABLE_CONTROL_FLOW_V2 = True
    try:
        g = tf.Graph()
        with g.as_default():
            rng = np.random.RandomState(162)
            x = tf1.placeholder(tf.float32, (b, f), name="x")
            W = tf.constant((rng.randn(f, f) * 0.7).astype(np.float32), name="W")
            ta = tf.TensorArray(tf.float32, size=4)

            def body(i, h, ta):
                h = tf.cond(tf.equal(i % 2, 0), lambda: tf.tanh(tf.matmul(h, W)),
                            lambda: tf.sin(h) * 2.0)
                return i + 1, h, ta.write(i, h)

            _, h, ta = tf.while_loop(lambda i, *_: i < 4, body, [0, x, ta])
            loss = tf.identity(tf.reduce_sum(ta.stack() ** 2) + tf.reduce_sum(h), name="loss")
            gw, gx = tf1.gradients(loss, [W, x])
            fetches = [loss, tf.identity(gw, name="grad_W"), tf.identity(gx, name="grad_x")]
        feeds = {"x:0": rng.randn(b, f).astype(np.float32)}
        session_case(out, name, g, feeds, "TF1 graph, control flow v2 (While/If) and its "
                     "TensorFlow gradient", fetches=fetches)
    finally:
        control_flow_util.ENABLE_CONTROL_FLOW_V2 = False


CASES = {"tf1_beam_search_lstm": beam_search_lstm,
         "tf1_greedy_attention_grad": greedy_attention,
         "tf1_scan_fold_grad": scan_fold,
         "tf1_loop_in_cond_grad": loop_in_cond,
         "tf1_cfv2_tfgrad": cfv2}


def raw_rnn_case(out, name, b=3, t=5, f=4, units=6):
    """tf.nn.raw_rnn (loop_fn reading a TensorArray, per-row finished flags from sequence
    lengths) with a GRUCell, swap_memory and parallel_iterations=1."""
    g = tf.Graph()
    with g.as_default():
        tf1.set_random_seed(191)
        rng = np.random.RandomState(192)
        x = tf1.placeholder(tf.float32, (t, b, f), name="inputs")
        lengths = tf1.placeholder(tf.int32, (b,), name="lengths")
        inputs_ta = tf1.TensorArray(tf.float32, size=t).unstack(x)
        cell = rc.GRUCell(units)

        def loop_fn(time, cell_output, cell_state, loop_state):
            emit = cell_output
            state = cell.zero_state(b, tf.float32) if cell_output is None else cell_state
            finished = time >= lengths
            nxt = tf1.cond(tf.reduce_all(finished), lambda: tf.zeros([b, f]),
                           lambda: inputs_ta.read(tf.minimum(time, t - 1)))
            return finished, nxt, state, emit, None

        out_ta, final, _ = tf1.nn.raw_rnn(cell, loop_fn, parallel_iterations=1,
                                          swap_memory=True)
        loss = tf.add(tf.reduce_sum(tf.tanh(out_ta.stack()) ** 2), tf.reduce_sum(final),
                      name="loss")
        xs = tf1.trainable_variables() + [x]
    feeds = {"inputs:0": rng.randn(t, b, f).astype(np.float32),
             "lengths:0": np.array([5, 2, 4], np.int32)}
    session_case(out, name, g, feeds, "TF1 raw_rnn GRU (swap_memory)", loss, xs, tfgrad=True)


def ctc_case(out, name, b=2, t=7, classes=5):
    """tf.nn.ctc_loss with dense labels (ctc_loss_dense: forward-backward in tf.scan loops
    over log-probabilities) and its gradient w.r.t. the logits and a projection."""
    g = tf.Graph()
    with g.as_default():
        rng = np.random.RandomState(202)
        feats = tf1.placeholder(tf.float32, (b, t, 4), name="features")
        labels = tf1.placeholder(tf.int32, (b, 3), name="labels")
        label_len = tf1.placeholder(tf.int32, (b,), name="label_length")
        logit_len = tf1.placeholder(tf.int32, (b,), name="logit_length")
        W = tf.constant(rng.randn(4, classes).astype(np.float32), name="W")
        logits = tf.tensordot(feats, W, 1)
        loss = tf.reduce_sum(tf.nn.ctc_loss(labels, logits, label_len, logit_len,
                                            logits_time_major=False, blank_index=0),
                             name="loss")
    feeds = {"features:0": rng.randn(b, t, 4).astype(np.float32),
             "labels:0": np.array([[1, 2, 2], [3, 4, 0]], np.int32),
             "label_length:0": np.array([3, 2], np.int32),
             "logit_length:0": np.array([7, 5], np.int32)}
    session_case(out, name, g, feeds, "TF1 CTC loss (dense labels: scan loops)", loss,
                 [W, g.get_tensor_by_name("features:0")], tfgrad=True)


CASES.update({"tf1_raw_rnn_swap_grad": raw_rnn_case, "tf1_ctc_dense_grad": ctc_case})


def segment_sort_loop(out, name):
    """A while loop whose body reduces rows by unsorted segment max, sorts and argsorts them,
    and takes reverse cumsum / cumprod / l2_normalize / softmax."""
    g = tf.Graph()
    with g.as_default():
        rng = np.random.RandomState(212)
        x = tf1.placeholder(tf.float32, (6, 4), name="x")
        ids = tf.constant([0, 0, 1, 2, 2, 2])

        def body(i, v):
            m = tf.math.unsorted_segment_max(v, ids, 3)
            v = v + tf.gather(m, ids) * 0.1 + tf.math.cumsum(v, axis=0, reverse=True) * 0.05
            v = tf.sort(v, axis=1, direction="DESCENDING") * 0.9 + tf.cast(
                tf.argsort(v, axis=1), tf.float32) * 0.01
            v = tf.nn.l2_normalize(v, axis=1) + tf.nn.softmax(v) \
                + tf.math.cumprod(v * 0.3 + 1.0, axis=1) * 0.1
            return i + 1, v

        _, y = tf1.while_loop(lambda i, v: i < 3, body, [0, x])
        loss = tf.reduce_sum(tf.sin(y) * y, name="loss")
    feeds = {"x:0": rng.randn(6, 4).astype(np.float32)}
    session_case(out, name, g, feeds, "TF1 loop of segment max, sort, cumprod", loss, [x],
                 tfgrad=True)


CASES["tf1_segment_sort_loop_grad"] = segment_sort_loop


def train_loop(out, name, ref):
    """Five SGD steps inside a while loop (parallel_iterations=1): the body reads the weight
    variable, takes tf.gradients of the loss inside the loop and assign_subs it, counting in
    a second variable; the variables stay (not frozen: `init` runs the initializer). `ref`:
    TF1 reference variables (the body reads w through w/read, which aliases the variable's
    buffer in TensorFlow, so each iteration sees the previous update), else resource
    variables (ReadVariableOp in the body)."""
    from gen_real_models import write_case  # noqa: PLC0415
    g = tf.Graph()
    with g.as_default():
        rng = np.random.RandomState(222)
        x = tf1.placeholder(tf.float32, (4, 3), name="x")
        t = tf1.placeholder(tf.float32, (4, 2), name="t")
        w = tf1.get_variable("w", initializer=(rng.randn(3, 2) * 0.5).astype(np.float32),
                             use_resource=not ref)
        steps = tf1.get_variable("steps", initializer=np.int32(0), use_resource=not ref)

        def read(v):
            return tf.identity(v) if ref else v.read_value()

        def body(i, losses):
            wv = read(w)
            loss = tf.reduce_mean(tf.square(tf.tanh(x @ wv) - t))
            with tf.control_dependencies([tf1.assign_sub(w, 0.5 * tf.gradients(loss, wv)[0]),
                                          tf1.assign_add(steps, 1)]):
                return i + 1, losses.write(i, loss)

        _, ta = tf1.while_loop(lambda i, _: i < 5, body, [0, tf1.TensorArray(tf.float32, 5)],
                               parallel_iterations=1)
        losses = tf.identity(ta.stack(), name="losses")
        with tf.control_dependencies([losses]):
            tf.identity(read(w), name="final_w")
            tf.identity(read(steps), name="count")
        tf.group(tf1.global_variables_initializer(), name="init")
    feeds = {"x:0": rng.randn(4, 3).astype(np.float32),
             "t:0": (rng.randn(4, 2) * 0.5).astype(np.float32)}
    write_case(out, name, g.as_graph_def(), feeds, "TF1 SGD steps in a while loop ("
               + ("reference" if ref else "resource") + " variables)",
               fetches=["losses:0", "final_w:0", "count:0"], init=["init"])


CASES["tf1_train_loop_resource"] = lambda o, n: train_loop(o, n, False)
CASES["tf1_train_loop_ref"] = lambda o, n: train_loop(o, n, True)
