#!/usr/bin/env python3
"""Make the fixtures of tests/test_redteam_graphs.py (NEEDS TENSORFLOW; never imports tfg).

    /work/tfvenv/bin/python tools/gen_redteam_graphs.py

Real-world-style graphs the fast paths (outer schedule, static guards, GEMM floor, loop
fusion) were not written for, each run on the SAME session with several feed signatures in
a row (shape A, B, A again, ...), so the per-signature caches are exercised. Writes
tests/fixtures/redteam/<case>/:
- graph.pb: the frozen GraphDef;
- case.json: fetches, feeds, init targets, the number of runs, the gradient (ys, xs) where
  TensorFlow gives one, tolerances;
- data.npz: `<run>/feed/<name>`, `<run>/fetch/<name>`, `<run>/grad/<x>` for run 0, 1, ...:
  what TensorFlow computed, the runs in order on one Session (state carries over).

TF2 cases (tf.function, Keras 3) come first: control flow v2 is then switched off for the
TF1 cases (tf.compat.v1 while_loop, dynamic_rnn, raw_rnn, TensorArrays, ref variables).
"""
import json
import os
import shutil

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import keras  # noqa: E402
from tensorflow.python.framework.convert_to_constants import (  # noqa: E402
    convert_variables_to_constants_v2)
from tensorflow.python.ops import rnn  # noqa: E402  (dynamic_rnn, raw_rnn without Keras)

tf1 = tf.compat.v1
OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures",
                   "redteam")


def save(name, graph_def, runs, fetches, grad=None, init=(), rtol=1e-4, atol=1e-5):
    """runs: [(feeds, fetch values, grad values or None)] in the order TensorFlow ran them."""
    d = os.path.join(OUT, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    with open(os.path.join(d, "graph.pb"), "wb") as f:
        f.write(graph_def.SerializeToString(deterministic=True))
    data = {}
    for i, (feeds, values, grads) in enumerate(runs):
        for k, v in feeds.items():
            data[f"{i}/feed/{k}"] = np.asarray(v)
        for k, v in zip(fetches, values):
            data[f"{i}/fetch/{k}"] = np.asarray(v)
        for k, v in zip(grad["xs"] if grad else (), grads or ()):
            data[f"{i}/grad/{k}"] = np.asarray(v)
    np.savez_compressed(os.path.join(d, "data.npz"), **data)
    meta = {"fetches": list(fetches), "feeds": sorted(runs[0][0]), "runs": len(runs),
            "init": list(init), "grad": grad, "rtol": rtol, "atol": atol,
            "ops": sorted({n.op for n in graph_def.node}
                          | {n.op for f in graph_def.library.function for n in f.node_def})}
    with open(os.path.join(d, "case.json"), "w") as f:
        json.dump(meta, f, indent=1, sort_keys=True)
    print("wrote", name, len(runs), "runs", os.path.getsize(os.path.join(d, "graph.pb")), "B")


# ---- TF2: tf.function and Keras, frozen (functional While/If kept, or lowered) ----

def freeze(fn, specs, lower):
    cf = fn.get_concrete_function(*specs)
    frozen = convert_variables_to_constants_v2(cf, lower_control_flow=lower)
    return frozen, frozen.graph.as_graph_def()


def tf2_case(name, fn, specs, feed_sets, lower, grad_input=0, rtol=1e-4, atol=1e-5):
    """Freeze fn; expected values from the frozen function, the gradient of sum(first output)
    w.r.t. input `grad_input` from a GradientTape over fn itself."""
    frozen, gd = freeze(fn, specs, lower)
    ins = [t.name for t in frozen.inputs]
    outs = [t.name for t in frozen.outputs]
    runs = []
    for feeds in feed_sets:
        args = [tf.constant(feeds[i]) for i in range(len(ins))]
        values = [v.numpy() for v in tf.nest.flatten(frozen(*args))]
        grads = None
        if grad_input is not None:
            with tf.GradientTape() as tape:
                tape.watch(args[grad_input])
                y = tf.nest.flatten(fn(*args))[0]
                total = tf.reduce_sum(y)
            grads = [tape.gradient(total, args[grad_input]).numpy()]
        runs.append(({n: f for n, f in zip(ins, feeds)}, values, grads))
    grad = None if grad_input is None else {"ys": [outs[0]], "xs": [ins[grad_input]]}
    save(name, gd, runs, outs, grad=grad, rtol=rtol, atol=atol)


def keras_rnn_mix(lower):
    """Masking, LSTM return_sequences+return_state, GRU go_backwards, SimpleRNN unroll,
    stacked GRU->LSTM: one model, several outputs; batch 2, 5, 2, 1."""
    keras.utils.set_random_seed(3)
    inp = keras.Input((6, 3))
    masked = keras.layers.Masking(0.0)(inp)
    seq, h, c = keras.layers.LSTM(5, return_sequences=True, return_state=True)(masked)
    back = keras.layers.GRU(4, go_backwards=True)(masked)
    unrolled = keras.layers.SimpleRNN(3, unroll=True, return_sequences=True)(inp)
    stacked = keras.layers.LSTM(3)(keras.layers.GRU(4, return_sequences=True)(inp))
    simple = keras.layers.SimpleRNN(4, go_backwards=True, return_state=True)(masked)
    total = keras.layers.Concatenate()([h, c, back, stacked, simple[0]])
    model = keras.Model(inp, [total, seq, unrolled, simple[1]])
    fn = tf.function(lambda x: model(x))
    rng = np.random.RandomState(5)

    def feed(b):
        x = rng.randn(b, 6, 3).astype(np.float32)
        x[0, 4:] = 0.0  # masked trailing steps
        if b > 2:
            x[2, 0:2] = 0.0  # masked leading steps
        return [x]
    a = feed(2)
    sets = [a, feed(5), a, feed(1)]
    tf2_case("keras_rnn_mix" + ("_lowered" if lower else ""), fn,
             [tf.TensorSpec([None, 6, 3], tf.float32)], sets, lower, rtol=2e-4, atol=2e-5)


def functional_while_if(lower):
    """tf.function: a while loop (trip count fed: 0, 1, 3, 0) with a tf.cond inside and a
    matmul; the cond takes the branch by the running sum's sign."""
    w = tf.constant(np.random.RandomState(8).randn(3, 3).astype(np.float32) * 0.7)

    @tf.function
    def fn(x, n):
        def body(i, h, acc):
            h = tf.tanh(tf.matmul(h, w))
            acc = tf.cond(tf.reduce_sum(h) > 0, lambda: acc + h, lambda: acc - 2.0 * h)
            return i + 1, h, acc
        _, h, acc = tf.while_loop(lambda i, h, acc: i < n, body, [0, x, tf.zeros_like(x)])
        return acc * 1.5 + h, h
    rng = np.random.RandomState(9)
    x2, x4 = rng.randn(2, 3).astype(np.float32), rng.randn(4, 3).astype(np.float32)
    sets = [[x2, np.int32(3)], [x4, np.int32(0)], [x2, np.int32(1)], [x4, np.int32(3)],
            [x2, np.int32(3)]]
    tf2_case("functional_while_if" + ("_lowered" if lower else ""), fn,
             [tf.TensorSpec([None, 3], tf.float32), tf.TensorSpec([], tf.int32)], sets, lower)


def conv_net():
    """Conv + BN + ReLU6, depthwise, max/avg pool, global pool, dense; batch 1, 4, 1."""
    keras.utils.set_random_seed(4)
    L = keras.layers
    model = keras.Sequential([
        keras.Input((12, 12, 3)), L.Conv2D(8, 3, padding="same"), L.BatchNormalization(),
        L.ReLU(6.0), L.DepthwiseConv2D(3, strides=2, padding="same"), L.MaxPooling2D(2),
        L.Conv2D(6, 1), L.AveragePooling2D(2, strides=1, padding="same"),
        L.GlobalAveragePooling2D(), L.Dense(4)])
    # Non-trivial BN statistics, as a trained model has.
    bn = model.layers[1]
    bn.moving_mean.assign(np.linspace(-0.2, 0.3, 8).astype(np.float32))
    bn.moving_variance.assign(np.linspace(0.5, 2.0, 8).astype(np.float32))
    fn = tf.function(lambda x: model(x))
    rng = np.random.RandomState(6)
    x1, x4 = rng.randn(1, 12, 12, 3).astype(np.float32), rng.randn(4, 12, 12, 3).astype(np.float32)
    tf2_case("conv_net_batches", fn, [tf.TensorSpec([None, 12, 12, 3], tf.float32)],
             [[x1], [x4], [x1]], True, rtol=2e-4, atol=2e-5)


def conv_odd():
    """Odd sizes for the depthwise and pool strategies: 13x11 input, depthwise with a channel
    multiplier (VALID), a 5x5 depthwise of stride 2 (SAME), a separable conv,
    3x3/2 VALID max pool, 2x2/1 SAME average pool, global max; batch 1, 3, 2, 3."""
    keras.utils.set_random_seed(12)
    L = keras.layers
    model = keras.Sequential([
        keras.Input((13, 11, 5)),
        # (dilation_rate=2 here: TensorFlow writes SpaceToBatchND/BatchToSpaceND around the
        # depthwise conv, ops tfg has no kernel for: refused with a clear error, exit 2)
        L.DepthwiseConv2D(3, depth_multiplier=2, padding="valid"),
        L.DepthwiseConv2D(5, strides=2, padding="same", activation="relu"),
        L.SeparableConv2D(6, 3, padding="same"), L.MaxPooling2D(3, strides=2),
        L.AveragePooling2D(2, strides=1, padding="same"), L.GlobalMaxPooling2D(), L.Dense(3)])
    fn = tf.function(lambda x: model(x))
    rng = np.random.RandomState(13)
    xs = {b: rng.randn(b, 13, 11, 5).astype(np.float32) for b in (1, 2, 3)}
    tf2_case("conv_odd", fn, [tf.TensorSpec([None, 13, 11, 5], tf.float32)],
             [[xs[1]], [xs[3]], [xs[2]], [xs[3]]], True, rtol=2e-4, atol=2e-5)


def sampled_crops():
    """NASNet's adjust block (ZeroPadding2D, Cropping2D, 1x1 AveragePooling2D of stride 2)
    and variants the session-time `sampled_crop` rewrite must get right: uneven paddings, a
    crop larger than the padding, strides 3 and 2; fully static shapes (the rewrite needs
    them)."""
    L = keras.layers
    inp = keras.Input((9, 7, 3), batch_size=2)
    a = L.AveragePooling2D(1, strides=2)(L.Cropping2D(((1, 0), (1, 0)))(
        L.ZeroPadding2D(((0, 1), (0, 1)))(inp)))
    b = L.AveragePooling2D(1, strides=(3, 2))(L.Cropping2D(((0, 2), (1, 1)))(
        L.ZeroPadding2D(((1, 2), (0, 3)))(inp)))
    c = L.AveragePooling2D(1, strides=2)(L.Cropping2D(((3, 3), (0, 4)))(
        L.ZeroPadding2D(((2, 2), (2, 2)))(inp)))
    model = keras.Model(inp, [a * 1.0, b * 2.0, c * 3.0])
    fn = tf.function(lambda x: model(x))
    rng = np.random.RandomState(14)
    x = [rng.randn(2, 9, 7, 3).astype(np.float32) for _ in range(2)]
    tf2_case("sampled_crops", fn, [tf.TensorSpec([2, 9, 7, 3], tf.float32)], [[x[0]], [x[1]]],
             True)


# ---- TF1: v1 control flow ----

class Weights:
    def __init__(self, seed):
        self.rng = np.random.RandomState(seed)

    def __call__(self, name, shape, scale=None):
        scale = 1.0 / np.sqrt(shape[0]) if scale is None else scale
        return tf.constant((self.rng.randn(*shape) * scale).astype(np.float32), name=name)


class LSTMCell:
    def __init__(self, w, units, in_dim, scope):
        self.units = units
        self.kernel = w(f"{scope}/kernel", (in_dim + units, 4 * units))
        self.bias = w(f"{scope}/bias", (4 * units,), 0.1)

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


class GRUCell:
    def __init__(self, w, units, in_dim, scope):
        self.units = units
        self.gates = w(f"{scope}/gates/kernel", (in_dim + units, 2 * units))
        self.cand = w(f"{scope}/candidate/kernel", (in_dim + units, units))

    state_size = property(lambda self: self.units)
    output_size = property(lambda self: self.units)

    def zero_state(self, batch, dtype):
        return tf.zeros([batch, self.units], dtype)

    def __call__(self, x, h):
        r, u = tf.split(tf.sigmoid(tf.matmul(tf.concat([x, h], 1), self.gates)), 2, axis=1)
        c = tf.tanh(tf.matmul(tf.concat([x, r * h], 1), self.cand))
        h = u * h + (1 - u) * c
        return h, h


def tf1_case(name, g, fetches, feed_sets, ys=None, xs=None, init=(), rtol=1e-4, atol=1e-5):
    """Run the feed sets in order on ONE session (after init) in the graph that built the
    loops (tf.gradients needs its while contexts)."""
    with g.as_default():
        grads = None
        if ys:
            grads = [tf.convert_to_tensor(t) for t in
                     tf1.gradients([g.get_tensor_by_name(y) for y in ys],
                                   [g.get_tensor_by_name(x) for x in xs])]
        runs = []
        with tf1.Session(graph=g) as sess:
            if init:
                sess.run(list(init))
            for feeds in feed_sets:
                values = sess.run(list(fetches), feeds)
                gv = sess.run(grads, feeds) if grads else None
                runs.append((feeds, values, gv))
    # The forward graph only: tfg grad adds the gradient itself.
    gd = forward_only(g, fetches, ys, init) if grads else g.as_graph_def()
    save(name, gd, runs, fetches, grad={"ys": ys, "xs": xs} if ys else None, init=init,
         rtol=rtol, atol=atol)


def forward_only(g, fetches, ys, init):
    """The GraphDef without the gradient nodes (tf.gradients was called in g)."""
    from tensorflow.python.framework import graph_util
    keep = [t.split(":")[0] for t in list(fetches) + list(ys) + list(init)]
    return graph_util.extract_sub_graph(g.as_graph_def(), keep)


def dynamic_lstm_gru():
    """dynamic_rnn LSTM then GRU with sequence_length; batch and time both vary (3x5, 2x7,
    3x5 again, 1x1) and a row of length 0."""
    g = tf.Graph()
    with g.as_default():
        w = Weights(21)
        x = tf1.placeholder(tf.float32, (None, None, 4), name="x")
        lengths = tf1.placeholder(tf.int32, (None,), name="lengths")
        lstm = LSTMCell(w, 6, 4, "lstm")
        out1, (c, h) = rnn.dynamic_rnn(lstm, x, sequence_length=lengths, dtype=tf.float32,
                                       scope="lstm")
        gru = GRUCell(w, 5, 6, "gru")
        out2, hg = rnn.dynamic_rnn(gru, out1, sequence_length=lengths, dtype=tf.float32,
                                   scope="gru", swap_memory=True)
        out2 = tf.identity(out2, name="outputs")
        state = tf.concat([c, h, hg], 1, name="state")
        loss = tf.reduce_sum(out2 * out2, name="loss")
    rng = np.random.RandomState(22)
    a = {"x:0": rng.randn(3, 5, 4).astype(np.float32), "lengths:0": np.array([5, 0, 3], np.int32)}
    b = {"x:0": rng.randn(2, 7, 4).astype(np.float32), "lengths:0": np.array([7, 2], np.int32)}
    c1 = {"x:0": rng.randn(1, 1, 4).astype(np.float32), "lengths:0": np.array([1], np.int32)}
    tf1_case("tf1_dynamic_lstm_gru", g, ["outputs:0", "state:0", "loss:0"], [a, b, a, c1],
             ys=["loss:0"], xs=[lstm.kernel.name, gru.cand.name, "x:0"])


def raw_rnn_case():
    """raw_rnn (a while loop over TensorArrays that the loop_fn drives) with per-row ends."""
    g = tf.Graph()
    with g.as_default():
        w = Weights(23)
        x = tf1.placeholder(tf.float32, (None, None, 3), name="x")  # time major: [T, B, F]
        lengths = tf1.placeholder(tf.int32, (None,), name="lengths")
        cell = LSTMCell(w, 4, 3, "raw")
        max_t = tf.shape(x)[0]
        inputs_ta = tf1.TensorArray(tf.float32, size=max_t).unstack(x)

        def loop_fn(time, cell_output, cell_state, loop_state):
            emit = cell_output
            if cell_output is None:
                next_state = cell.zero_state(tf.shape(x)[1], tf.float32)
            else:
                next_state = cell_state
            finished = time >= lengths
            nxt = tf.cond(tf.reduce_all(finished), lambda: tf.zeros_like(x[0]),
                          lambda: inputs_ta.read(time))
            return finished, nxt, next_state, emit, None
        out_ta, (c, h), _ = rnn.raw_rnn(cell, loop_fn)
        outputs = tf.identity(out_ta.stack(), name="outputs")
        final = tf.identity(h, name="final_h")
        loss = tf.reduce_sum(tf.sin(outputs), name="loss")
    rng = np.random.RandomState(24)
    a = {"x:0": rng.randn(4, 2, 3).astype(np.float32), "lengths:0": np.array([4, 2], np.int32)}
    b = {"x:0": rng.randn(6, 3, 3).astype(np.float32),
         "lengths:0": np.array([1, 6, 3], np.int32)}
    tf1_case("tf1_raw_rnn", g, ["outputs:0", "final_h:0"], [a, b, a],
             ys=["loss:0"], xs=[cell.kernel.name, "x:0"])


def beam_steps():
    """A beam-search-like loop, steps fed (4, 2, 1): top_k over beam x vocab, gathers of the
    parents, ids into a dynamic TensorArray; the batch varies (2, 3)."""
    width, vocab, units = 3, 7, 5
    g = tf.Graph()
    with g.as_default():
        w = Weights(25)
        memory = tf1.placeholder(tf.float32, (None, units), name="memory")
        steps = tf1.placeholder(tf.int32, (), name="steps")
        batch = tf.shape(memory)[0]
        emb = w("emb", (vocab, units), 1.0)
        w_h = w("w_h", (units, units))
        w_out = w("w_out", (units, vocab), 1.5)
        h = tf.reshape(tf.tile(memory[:, None, :], [1, width, 1]), [-1, units])
        scores = tf.tile(tf.constant([[0.0] + [-1e9] * (width - 1)]), [batch, 1])
        tokens = tf.zeros([batch * width], tf.int32)
        ids_ta = tf1.TensorArray(tf.int32, size=0, dynamic_size=True, element_shape=[None, width])
        offsets = tf.range(batch)[:, None] * width

        def body(t, h, tokens, scores, ids_ta):
            h = tf.tanh(tf.matmul(h + tf.gather(emb, tokens), w_h))
            logp = tf.reshape(tf.nn.log_softmax(tf.matmul(h, w_out)), [batch, width * vocab])
            total = tf.reshape(scores[:, :, None] + tf.reshape(logp, [batch, width, vocab]),
                               [batch, width * vocab])
            top, flat = tf.nn.top_k(total, k=width)
            parent, token = flat // vocab, flat % vocab
            h = tf.gather(h, tf.reshape(parent + offsets, [-1]))
            return t + 1, h, tf.reshape(token, [-1]), top, ids_ta.write(t, token)

        n, h, _, final, ids_ta = tf1.while_loop(lambda t, *_: t < steps, body,
                                                [0, h, tokens, scores, ids_ta])
        ids = tf.identity(ids_ta.stack(), name="ids")
        final = tf.identity(final, name="scores")
        hsum = tf.reduce_sum(h, name="hsum")
    rng = np.random.RandomState(26)
    m2, m3 = rng.randn(2, units).astype(np.float32), rng.randn(3, units).astype(np.float32)
    # steps 0 is not here: TensorFlow refuses to stack a zero-size TensorArray whose element
    # shape is not fully defined (tests/test_redteam_hostile.py checks tfg refuses it too).
    sets = [{"memory:0": m2, "steps:0": np.int32(4)}, {"memory:0": m3, "steps:0": np.int32(2)},
            {"memory:0": m2, "steps:0": np.int32(1)}, {"memory:0": m3, "steps:0": np.int32(4)},
            {"memory:0": m2, "steps:0": np.int32(4)}]
    tf1_case("tf1_beam_steps", g, ["ids:0", "scores:0", "hsum:0"], sets,
             ys=["hsum:0"], xs=["memory:0", w_h.name, emb.name])


def nested_stateful():
    """Nested while loops (inner trip count depends on the outer counter), a cond inside the
    inner body, and a ref variable counted up by AssignAdd in the inner body (serial:
    parallel_iterations=1); the variable carries over from run to run."""
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.float32, (None, 2), name="x")
        n = tf1.placeholder(tf.int32, (), name="n")
        counter = tf1.Variable(0.0, name="counter", use_resource=False)
        w = tf.constant([[0.9, -0.3], [0.2, 0.8]], name="w")

        def outer(i, acc):
            def inner(j, a):
                bump = tf1.assign_add(counter, 1.0)
                with tf.control_dependencies([bump]):
                    a = tf.cond(tf.equal(j % 2, 0), lambda: tf.matmul(a, w),
                                lambda: a * 0.5 + tf.cast(j, tf.float32))
                return j + 1, a
            _, acc = tf1.while_loop(lambda j, a: j < i, inner, [0, acc], parallel_iterations=1)
            return i + 1, tf.tanh(acc)
        _, acc = tf1.while_loop(lambda i, a: i < n, outer, [0, x], parallel_iterations=1)
        out = tf.identity(acc, name="out")
        with tf.control_dependencies([out]):
            count = tf.identity(counter.read_value() if hasattr(counter, "read_value")
                                else counter, name="count")
    rng = np.random.RandomState(27)
    x1, x3 = rng.randn(1, 2).astype(np.float32), rng.randn(3, 2).astype(np.float32)
    sets = [{"x:0": x3, "n:0": np.int32(4)}, {"x:0": x1, "n:0": np.int32(0)},
            {"x:0": x3, "n:0": np.int32(1)}, {"x:0": x1, "n:0": np.int32(3)},
            {"x:0": x3, "n:0": np.int32(4)}]
    tf1_case("tf1_nested_stateful", g, ["out:0", "count:0"], sets,
             init=[counter.initializer.name])


def alloc_by_value():
    """Allocations sized by feed VALUES of a fixed signature (int32 scalar `n`, float32 scalar
    `f`), and a loop whose trip count `n` sizes a TensorArray: the static guards must not
    carry one value's verdict over to another value."""
    g = tf.Graph()
    with g.as_default():
        n = tf1.placeholder(tf.int32, (), name="n")
        f = tf1.placeholder(tf.float32, (), name="f")
        a = tf.reduce_sum(tf.ones(tf.stack([n, 256])), name="by_int")
        m = tf.cast(f * 100.0, tf.int32)
        b = tf.reduce_sum(tf.ones(tf.stack([m, 256])), name="by_float")
        ta = tf1.TensorArray(tf.float32, size=n, element_shape=[64])
        _, ta = tf1.while_loop(lambda i, ta: i < n,
                               lambda i, ta: (i + 1, ta.write(i, tf.fill([64], 1.0))), [0, ta])
        c = tf.reduce_sum(ta.stack(), name="by_loop")
    sets = [{"n:0": np.int32(3), "f:0": np.float32(0.05)},
            {"n:0": np.int32(3), "f:0": np.float32(0.05)},
            {"n:0": np.int32(3), "f:0": np.float32(0.05)},
            {"n:0": np.int32(7), "f:0": np.float32(0.2)}]
    tf1_case("alloc_by_value", g, ["by_int:0", "by_float:0", "by_loop:0"], sets)


def loop_assert():
    """A loop whose body asserts (x < limit, CheckNumerics of a log) with `limit` and the
    start fed: the good runs are recorded; tests/test_redteam_graphs.py also feeds values that
    fail in the 3rd iteration and checks the next good run is exact (no state left behind)."""
    g = tf.Graph()
    with g.as_default():
        x = tf1.placeholder(tf.float32, (None,), name="x")
        limit = tf1.placeholder(tf.float32, (), name="limit")

        def body(i, x, acc):
            x = x * 0.5 + 1.0
            check = tf1.assert_less(x, limit, name="below_limit")
            with tf.control_dependencies([check]):
                y = tf.debugging.check_numerics(tf.math.log(x), "log of x")
            return i + 1, x, acc + y
        _, x, acc = tf1.while_loop(lambda i, *_: i < 5, body, [0, x, tf.zeros_like(x)])
        tf.identity(acc, name="acc")
        tf.identity(x, name="x_out")
    sets = [{"x:0": np.array([0.5, 2.0, 3.0], np.float32), "limit:0": np.float32(10.0)},
            {"x:0": np.array([1.0], np.float32), "limit:0": np.float32(10.0)},
            {"x:0": np.array([0.5, 2.0, 3.0], np.float32), "limit:0": np.float32(10.0)}]
    tf1_case("tf1_loop_assert", g, ["acc:0", "x_out:0"], sets)


def main():
    os.makedirs(OUT, exist_ok=True)
    for lower in (False, True):
        keras_rnn_mix(lower)
        functional_while_if(lower)
    conv_net()
    conv_odd()
    sampled_crops()
    tf1.disable_control_flow_v2()
    dynamic_lstm_gru()
    raw_rnn_case()
    beam_steps()
    nested_stateful()
    alloc_by_value()
    loop_assert()
    total = sum(os.path.getsize(os.path.join(dp, f)) for dp, _, fs in os.walk(OUT) for f in fs)
    print(f"total {total} bytes")
    assert total < 2_000_000, total


if __name__ == "__main__":
    main()
