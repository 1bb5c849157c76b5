#!/usr/bin/env python3
"""Make the fixtures of tests/test_partition.py (needs TensorFlow; never imports tfg).

    /tmp/tfenv/bin/python tools/gen_partition_fixtures.py

Each case is a graph TensorFlow built (v1 control flow, reference variables) and ran:
tests/fixtures/partition/<case>/graph.pb, feeds.npz (keys `x:0`), expected.npz (the fetches)
and case.json (fetches, targets, init, steps). The tests place every node round-robin over three
CPU devices, partition, run with tfg.Session and compare with expected.npz.
"""
import json
import os

import numpy as np
import tensorflow.compat.v1 as tf

tf.disable_eager_execution()
tf.disable_control_flow_v2()
tf.disable_resource_variables()

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures",
                   "partition")
RNG = np.random.RandomState(7)


def nested_while_invariant():
    """An outer loop whose inner loop reads a loop invariant of both frames."""
    n = tf.placeholder(tf.int32, [], name="n")
    x = tf.placeholder(tf.float32, [3], name="x")
    w = tf.placeholder(tf.float32, [3], name="w")

    def outer(i, v):
        def inner(j, u):
            return j + 1, u * 0.5 + w
        _, v = tf.while_loop(lambda j, u: j < i, inner, [tf.constant(0), v])
        return i + 1, v + x

    _, v = tf.while_loop(lambda i, v: i < n, outer, [tf.constant(0), x])
    out = tf.identity(v * 2.0, name="out")
    feeds = {"n:0": np.int32(4), "x:0": RNG.randn(3).astype(np.float32),
             "w:0": RNG.randn(3).astype(np.float32)}
    return feeds, [out], [], []


def cond_in_while():
    n = tf.placeholder(tf.int32, [], name="n")
    x = tf.placeholder(tf.float32, [2, 2], name="x")

    def body(i, acc):
        even = tf.equal(tf.math.floormod(i, 2), 0)
        acc = tf.cond(even, lambda: tf.matmul(acc, x), lambda: acc + x)
        return i + 1, acc

    _, acc = tf.while_loop(lambda i, a: i < n, body, [tf.constant(0), tf.constant(np.eye(2, dtype=np.float32))])
    out = tf.identity(acc, name="out")
    side = tf.reduce_sum(x, name="side")
    feeds = {"n:0": np.int32(5), "x:0": (RNG.randn(2, 2) * 0.5).astype(np.float32)}
    return feeds, [out, side], [], []


def while_zero_iter():
    n = tf.placeholder(tf.int32, [], name="n")
    x = tf.placeholder(tf.float32, [], name="x")
    _, v = tf.while_loop(lambda i, v: i < n, lambda i, v: (i + 1, v * 3.0),
                         [tf.constant(0), x])
    out = tf.identity(v, name="out")
    return {"n:0": np.int32(0), "x:0": np.float32(2.5)}, [out], [], []


def train_variables():
    """Reference variables updated by Assign ops: colocation must keep them together."""
    x = tf.placeholder(tf.float32, [4, 3], name="x")
    y = tf.placeholder(tf.float32, [4, 1], name="y")
    w = tf.Variable(RNG.randn(3, 1).astype(np.float32), name="w")
    b = tf.Variable(np.zeros([1], np.float32), name="b")
    pred = tf.matmul(x, w) + b
    loss = tf.reduce_mean(tf.square(pred - y), name="loss")
    gw, gb = tf.gradients(loss, [w, b])
    train = tf.group(tf.assign_sub(w, 0.1 * gw), tf.assign_sub(b, 0.1 * gb), name="train")
    init = tf.global_variables_initializer()
    feeds = {"x:0": RNG.randn(4, 3).astype(np.float32), "y:0": RNG.randn(4, 1).astype(np.float32)}
    return feeds, [loss], [train], [init], 3


CASES = {
    "nested_while_invariant": nested_while_invariant,
    "cond_in_while": cond_in_while,
    "while_zero_iter": while_zero_iter,
    "train_variables": train_variables,
}


def main():
    for name, fn in CASES.items():
        g = tf.Graph()
        with g.as_default():
            made = fn()
            feeds, fetches, targets, init = made[:4]
            steps = made[4] if len(made) > 4 else 1
            with tf.Session() as sess:
                for op in init:
                    sess.run(op)
                for _ in range(steps):
                    vals = sess.run([t.name for t in fetches] + [t.name for t in targets],
                                    feed_dict=feeds)
        d = os.path.join(OUT, name)
        os.makedirs(d, exist_ok=True)
        with open(os.path.join(d, "graph.pb"), "wb") as f:
            f.write(g.as_graph_def().SerializeToString())
        np.savez(os.path.join(d, "feeds.npz"), **feeds)
        np.savez(os.path.join(d, "expected.npz"),
                 **{t.name: np.asarray(v) for t, v in zip(fetches, vals)})
        meta = {"fetches": [t.name for t in fetches], "targets": [t.name for t in targets],
                "init": [op.name for op in init], "steps": steps}
        with open(os.path.join(d, "case.json"), "w") as f:
            json.dump(meta, f, indent=1)
        print(name, len(g.as_graph_def().node), "nodes")


if __name__ == "__main__":
    main()
