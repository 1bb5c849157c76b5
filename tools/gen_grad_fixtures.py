#!/usr/bin/env python3
"""Generate tests/fixtures/grad/: forward graphs, feeds, and TensorFlow's gradients of them.

NEEDS TENSORFLOW (run it with the TensorFlow venv: /tmp/tfenv/bin/python); never imports tfg.
Graphs are built in TF1 graph mode with v1 control flow (Enter/Exit/Switch/Merge), so that
TensorFlow still has its while/cond contexts and `tf.gradients` works; the GraphDef is exported
*before* tf.gradients is called, so the saved graph is the forward pass only, and tfg must
rebuild the gradient from the bare primitives. Outputs per group:

    <group>.pb       the forward GraphDef
    <group>.npz      feeds (keys `feed/<tensor>`) and expected gradients (`<case>/<x tensor>`)
    cases.json       {group: [{"name", "ys", "xs", "feeds", "rtol", "atol"}]}

    /tmp/tfenv/bin/python tools/gen_grad_fixtures.py
"""
import json
import os

import numpy as np
import tensorflow as tf

tf1 = tf.compat.v1
tf1.disable_eager_execution()
tf1.disable_control_flow_v2()

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "grad")
rng = np.random.default_rng(2024)


def rnd(*shape, lo=-1.0, hi=1.0, dtype=np.float32):
    return rng.uniform(lo, hi, shape).astype(dtype)


class Group:
    """One forward graph with several gradient cases over it."""

    def __init__(self, name):
        self.name = name
        self.graph = tf.Graph()
        self.feeds = {}
        self.cases = []  # (name, [y tensors], [x tensors], feed overrides, rtol, atol)

    def ph(self, name, value, dtype=None):
        value = np.asarray(value)
        dt = dtype or tf.as_dtype(value.dtype)
        t = tf1.placeholder(dt, shape=value.shape, name=name)
        self.feeds[t.name] = value
        return t

    def case(self, name, ys, xs, feeds=None, rtol=1e-4, atol=1e-5):
        self.cases.append((name, list(ys), list(xs), dict(feeds or {}), rtol, atol))

    def write(self, index):
        graph_def = self.graph.as_graph_def()  # forward only: before any tf.gradients
        arrays = {f"feed/{k}": v for k, v in self.feeds.items()}
        entries = []
        with self.graph.as_default():
            grads = [[tf.convert_to_tensor(g) for g in
                      tf.gradients(ys, xs, unconnected_gradients="zero")]
                     for _, ys, xs, _, _, _ in self.cases]
            config = tf1.ConfigProto()
            config.graph_options.rewrite_options.disable_meta_optimizer = True
            with tf1.Session(config=config) as sess:
                for (name, ys, xs, over, rtol, atol), gs in zip(self.cases, grads):
                    feeds = dict(self.feeds)
                    feeds.update(over)
                    values = sess.run(gs, {self.graph.get_tensor_by_name(k): v
                                           for k, v in feeds.items()})
                    for x, v in zip(xs, values):
                        arrays[f"{name}/{x.name}"] = np.asarray(v)
                    for k, v in over.items():
                        arrays[f"{name}/feed/{k}"] = np.asarray(v)
                    entries.append({"name": name, "ys": [y.name for y in ys],
                                    "xs": [x.name for x in xs], "overrides": sorted(over),
                                    "rtol": rtol, "atol": atol})
        with open(os.path.join(OUT, f"{self.name}.pb"), "wb") as f:
            f.write(graph_def.SerializeToString())
        np.savez(os.path.join(OUT, f"{self.name}.npz"), **arrays)
        index[self.name] = entries


# --- control flow ---------------------------------------------------------------------------
def nested_while(gr):
    x = gr.ph("x", rnd(3))
    a0 = gr.ph("a0", rnd(3))
    n = gr.ph("n", np.int32(3))

    def outer(i, a):
        def inner(j, c):
            return j + 1, c * x + tf.sin(c)

        _, c = tf1.while_loop(lambda j, c: j < 2, inner, [0, a], name="inner")
        return i + 1, c * 0.5 + a * x

    _, a = tf1.while_loop(lambda i, a: i < n, outer, [0, a0], name="outer")
    y = tf.reduce_sum(a, name="y")
    gr.case("nested_while", [y], [x, a0])
    gr.case("nested_while_zero_iter", [y], [x, a0], {n.name: np.int32(0)})


def nested_varying(gr):
    """An inner loop whose trip count depends on the outer iteration, with a cond inside."""
    x = gr.ph("xv", rnd(2))
    n = gr.ph("nv", np.int32(3))

    def outer(i, a):
        def inner(j, c):
            c2 = tf1.cond(tf.equal(j % 2, 0), lambda: c * x, lambda: c + tf.cos(c) * x)
            return j + 1, c2

        _, c = tf1.while_loop(lambda j, c: j < i + 1, inner, [0, a], name="inner")
        return i + 1, c

    _, a = tf1.while_loop(lambda i, a: i < n, outer, [0, x * 1.5], name="outer",
                          parallel_iterations=1)
    y = tf.reduce_sum(a, name="yv")
    gr.case("nested_varying", [y], [x])
    gr.case("nested_varying_1", [y], [x], {n.name: np.int32(1)})


def cond_in_while(gr):
    x = gr.ph("x", rnd(4))
    a0 = gr.ph("a0", rnd(4))
    n = gr.ph("n", np.int32(4))

    def body(i, a):
        a2 = tf1.cond(tf.equal(i % 2, 0), lambda: a * x, lambda: tf.tanh(a) + x * x)
        return i + 1, a2

    _, a = tf1.while_loop(lambda i, a: i < n, body, [0, a0], name="loop")
    y = tf.reduce_sum(a * a, name="y")
    gr.case("cond_in_while", [y], [x, a0])
    gr.case("cond_in_while_3", [y], [x, a0], {n.name: np.int32(3)})


def while_in_cond(gr):
    x = gr.ph("x", rnd(3))
    p = gr.ph("p", np.bool_(True))

    def looped():
        _, v = tf1.while_loop(lambda i, v: i < 3, lambda i, v: (i + 1, v * x + 1.0),
                              [0, x], name="loop")
        return v

    r = tf1.cond(p, looped, lambda: tf.exp(x), name="c")
    y = tf.reduce_sum(r, name="y")
    gr.case("while_in_cond_true", [y], [x])
    gr.case("while_in_cond_false", [y], [x], {p.name: np.bool_(False)})


def nested_cond(gr):
    x = gr.ph("x", rnd(3))
    p = gr.ph("p", np.bool_(True))
    q = gr.ph("q", np.bool_(False))
    r = tf1.cond(p, lambda: tf1.cond(q, lambda: x * x, lambda: tf.sin(x)), lambda: x * 3.0)
    y = tf.reduce_sum(r * x, name="y")
    for pv in (True, False):
        for qv in (True, False):
            gr.case(f"nested_cond_{int(pv)}{int(qv)}", [y], [x],
                    {p.name: np.bool_(pv), q.name: np.bool_(qv)})


def rnn(gr):
    seq = gr.ph("seq", rnd(5, 2, 3))
    w = gr.ph("w", rnd(4, 4, lo=-0.5, hi=0.5))
    u = gr.ph("u", rnd(3, 4))
    bias = gr.ph("bias", rnd(4))
    h0 = gr.ph("h0", rnd(2, 4))

    def body(t, h):
        xt = tf.gather(seq, t)
        return t + 1, tf.tanh(tf.matmul(h, w) + tf.matmul(xt, u) + bias)

    _, h = tf1.while_loop(lambda t, h: t < 5, body, [0, h0], name="rnn")
    loss = tf.reduce_mean(tf.square(h), name="loss")
    gr.case("rnn", [loss], [w, u, bias, h0, seq])


def invariant(gr):
    w = gr.ph("w", rnd(2, 3))
    v0 = gr.ph("v0", rnd(2, 3))
    n = gr.ph("n", np.int32(4))

    def body(i, acc, v):
        fi = tf.cast(i, tf.float32)
        return i + 1, acc + w * fi + tf.sigmoid(v), v * w

    _, acc, v = tf1.while_loop(lambda i, acc, v: i < n, body, [0, tf.zeros([2, 3]), v0],
                               name="loop")
    y = tf.identity(tf.reduce_sum(acc) + tf.reduce_sum(v), name="y")
    only_acc = tf.reduce_sum(acc, name="only_acc")
    gr.case("invariant", [y], [w, v0])
    gr.case("invariant_unused_exit", [only_acc], [w, v0])
    gr.case("invariant_zero_iter", [y], [w, v0], {n.name: np.int32(0)})


# --- op families (straight-line) ------------------------------------------------------------
def convnet(gr):
    x = gr.ph("x", rnd(2, 8, 8, 3))
    labels = gr.ph("labels", np.eye(5, dtype=np.float32)[[1, 3]])
    w1 = gr.ph("w1", rnd(3, 3, 3, 4, lo=-0.5, hi=0.5))
    b1 = gr.ph("b1", rnd(4))
    scale = gr.ph("scale", rnd(4, lo=0.5, hi=1.5))
    offset = gr.ph("offset", rnd(4))
    w2 = gr.ph("w2", rnd(16, 5))
    h = tf.nn.conv2d(x, w1, strides=[1, 1, 1, 1], padding="SAME")
    h = tf.nn.relu(tf.nn.bias_add(h, b1))
    h = tf.nn.max_pool2d(h, 2, 2, "VALID")
    h, _, _ = tf1.nn.fused_batch_norm(h, scale, offset, is_training=True)
    h = tf.nn.avg_pool2d(h, 2, 1, "SAME")
    h = tf.nn.avg_pool2d(h, 2, 2, "VALID")
    logits = tf.matmul(tf.reshape(h, [2, 16]), w2)
    loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits(labels=labels, logits=logits),
                          name="loss")
    gr.case("convnet", [loss], [x, w1, b1, scale, offset, w2], rtol=1e-3, atol=1e-4)
    conv = tf.nn.conv2d(x, w1, strides=[1, 2, 2, 1], padding="VALID", name="conv_strided")
    gr.case("conv_strided", [tf.reduce_sum(tf.sin(conv))], [x, w1], rtol=1e-3, atol=1e-4)


def math_ops(gr):
    d = np.float64
    x = gr.ph("x", rnd(3, 4, dtype=d))
    y = gr.ph("y", rnd(4, dtype=d))
    pos = gr.ph("pos", rnd(3, 4, lo=0.5, hi=2.0, dtype=d))
    m = gr.ph("m", rnd(4, 5, dtype=d))
    bx = gr.ph("bx", rnd(2, 3, 4, dtype=d))
    by = gr.ph("by", rnd(1, 4, 2, dtype=d))
    terms = {
        "add": (x + y, [x, y]), "sub": (x - y, [x, y]), "mul": (x * y, [x, y]),
        "div": (x / (y + 3.0), [x, y]), "neg": (-x, [x]), "abs": (tf.abs(x), [x]),
        "square": (tf.square(x), [x]), "sqrt": (tf.sqrt(pos), [pos]),
        "rsqrt": (tf.math.rsqrt(pos), [pos]), "reciprocal": (tf.math.reciprocal(pos), [pos]),
        "exp": (tf.exp(x), [x]), "expm1": (tf.math.expm1(x), [x]), "log": (tf.math.log(pos), [pos]),
        "log1p": (tf.math.log1p(pos), [pos]), "sin": (tf.sin(x), [x]), "cos": (tf.cos(x), [x]),
        "tan": (tf.tan(x), [x]), "tanh": (tf.tanh(x), [x]), "sigmoid": (tf.sigmoid(x), [x]),
        "erf": (tf.math.erf(x), [x]), "pow": (tf.pow(pos, y + 2.0), [pos, y]),
        "maximum": (tf.maximum(x, y), [x, y]), "minimum": (tf.minimum(x, y), [x, y]),
        "squared_difference": (tf.math.squared_difference(x, y), [x, y]),
        "add_n": (tf.add_n([x, pos, x * pos]), [x, pos]),
        "cast": (tf.cast(tf.cast(x, tf.float32), tf.float64) * x, [x]),
        "select": (tf1.where(x > 0.0, x * 2.0, pos), [x, pos]),
        "select_v2": (tf.where(x > 0.0, x, y), [x, y]),
        "cumsum": (tf.cumsum(x, axis=1, exclusive=True, reverse=True), [x]),
        "cumprod": (tf.math.cumprod(pos, axis=0), [pos]),
        "matmul": (tf.matmul(x, m), [x, m]), "matmul_t": (tf.matmul(m, x, True, True), [x, m]),
        "batch_matmul": (tf.matmul(bx, by), [bx, by]),
        "l2loss": (tf.nn.l2_loss(x), [x]),
        "sum": (tf.reduce_sum(x, axis=1), [x]), "sum_keep": (tf.reduce_sum(bx, [0, 2], True), [bx]),
        "mean": (tf.reduce_mean(bx, axis=-1), [bx]), "max": (tf.reduce_max(x, axis=0), [x]),
        "min": (tf.reduce_min(bx, axis=[1]), [bx]), "prod": (tf.reduce_prod(pos, axis=1), [pos]),
        "prod_all": (tf.reduce_prod(pos), [pos]),
    }
    for name, (t, xs) in terms.items():
        gr.case(name, [tf.identity(t, name=f"t_{name}")], xs, rtol=1e-6, atol=1e-8)
    # A tensor used twice and a y that does not reach x through floats.
    shared = tf.sin(x)
    gr.case("fan_out", [tf.identity(shared * shared + shared, name="t_fan_out")], [x],
            rtol=1e-6, atol=1e-8)


def nn_ops(gr):
    x = gr.ph("x", rnd(3, 5))
    labels = gr.ph("labels", np.eye(5, dtype=np.float32)[[0, 2, 4]])
    sparse = gr.ph("sparse", np.array([1, 0, 3], np.int32))
    img = gr.ph("img", rnd(1, 5, 5, 2))
    terms = {
        "relu": (tf.nn.relu(x), [x]), "relu6": (tf.nn.relu6(x * 8.0), [x]),
        "elu": (tf.nn.elu(x), [x]), "leaky_relu": (tf.nn.leaky_relu(x, 0.3), [x]),
        "softplus": (tf.nn.softplus(x), [x]), "softmax": (tf.nn.softmax(x) * x, [x]),
        "log_softmax": (tf.nn.log_softmax(x) * x, [x]),
        "xent": (tf.nn.softmax_cross_entropy_with_logits(labels=labels, logits=x), [x, labels]),
        "sparse_xent": (tf.nn.sparse_softmax_cross_entropy_with_logits(
            labels=sparse, logits=x), [x]),
        "max_pool": (tf.nn.max_pool2d(img, 3, 2, "SAME") ** 2, [img]),
        "avg_pool": (tf.nn.avg_pool2d(img, 2, 1, "VALID") ** 2, [img]),
    }
    for name, (t, xs) in terms.items():
        gr.case(name, [tf.identity(t, name=f"t_{name}")], xs)
    # Second order: gradients of first-order gradients (ReluGrad, TanhGrad, SigmoidGrad).
    for name, fn in (("relu", tf.nn.relu), ("tanh", tf.tanh), ("sigmoid", tf.sigmoid)):
        first = tf.identity(tf.gradients(tf.reduce_sum(fn(x) * x), x)[0], name=f"d_{name}")
        gr.case(f"second_{name}", [tf.identity(first * first, name=f"t2_{name}")], [x])


def array_ops(gr):
    x = gr.ph("x", rnd(2, 3, 4))
    y = gr.ph("y", rnd(2, 2, 4))
    v = gr.ph("v", rnd(6))
    idx = gr.ph("idx", np.array([2, 0, 2, 1], np.int32))
    terms = {
        "reshape": (tf.reshape(x, [6, 4]), [x]), "squeeze": (tf.squeeze(x[:1]), [x]),
        "expand_dims": (tf.expand_dims(x, 1), [x]), "transpose": (tf.transpose(x, [2, 0, 1]), [x]),
        "concat": (tf.concat([x, y], axis=1), [x, y]),
        "concat_neg": (tf.concat([x, y], axis=-2), [x, y]),
        "pack": (tf.stack([v, v * 2.0], axis=1), [v]),
        "unpack": (tf.unstack(x, axis=1)[2] * 3.0 + tf.unstack(x, axis=1)[0], [x]),
        "split": (tf.split(x, 2, axis=2)[1] * 2.0, [x]),
        "splitv": (tf.split(x, [1, 3], axis=2)[1], [x]),
        "slice": (tf.slice(x, [0, 1, 1], [2, 2, 2]), [x]),
        "strided_slice": (x[:, ::2, 1:3], [x]), "strided_shrink": (x[1, :, -1], [x]),
        "gather": (tf.gather(v, idx), [v]), "gather_axis1": (tf.gather(x, idx[:2], axis=1), [x]),
        "tile": (tf.tile(y, [2, 1, 3]), [y]),
        "pad": (tf.pad(x, [[1, 0], [0, 2], [1, 1]]), [x]),
        "pad_v2": (tf.pad(x, [[0, 1], [1, 0], [0, 0]], constant_values=2.0), [x]),
        "reverse": (tf.reverse(x, [1]), [x]),
        "broadcast_to": (tf.broadcast_to(v[:4], [3, 4]), [v]),
        "identity_n": (tf.identity_n([x, y])[1], [y]),
        "stop_gradient": (tf.stop_gradient(x) * x, [x]),
    }
    for name, (t, xs) in terms.items():
        w = tf.constant(rnd(*[d for d in t.shape]), name=f"w_{name}")
        gr.case(name, [tf.identity(tf.reduce_sum(t * w), name=f"t_{name}")], xs)


GROUPS = [("control_flow", [nested_while, nested_varying, cond_in_while, while_in_cond,
                            nested_cond, rnn, invariant]),
          ("convnet", [convnet]), ("math", [math_ops]), ("nn", [nn_ops]), ("array", [array_ops])]


def main():
    os.makedirs(OUT, exist_ok=True)
    index = {}
    for name, builders in GROUPS:
        gr = Group(name)
        with gr.graph.as_default():
            for build in builders:
                build(gr)
        gr.write(index)
    with open(os.path.join(OUT, "cases.json"), "w") as f:
        json.dump(index, f, indent=1, sort_keys=True)
    print(f"wrote {sum(len(v) for v in index.values())} cases in {len(index)} graphs to {OUT}")


if __name__ == "__main__":
    main()
