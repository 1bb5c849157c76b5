#!/usr/bin/env python3
"""Make the control-flow fixtures of tests/test_frames.py (needs TensorFlow; never imports tfg).

    /tmp/tfenv/bin/python tools/gen_frames_fixtures.py

Each case is built with v1 control flow in graph mode and written to
tests/fixtures/frames/<case>/graph.pb (and graph.pbtxt, TensorFlow's text form), with
contexts.json: for every op, the chain of
control-flow contexts TensorFlow's Python builder recorded (outermost first):
["while", frame_name] or ["cond", pred_tensor, branch]. An imported GraphDef loses these;
tfg.graphdef.frames must rebuild them from the graph alone.
"""
import json
import os
import sys

import tensorflow.compat.v1 as tf
from google.protobuf import text_format

tf.disable_eager_execution()
tf.disable_control_flow_v2()

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures",
                   "frames")


def nested_cond():
    x = tf.placeholder(tf.float32, [], name="x")
    p = tf.placeholder(tf.bool, [], name="p")
    q = tf.placeholder(tf.bool, [], name="q")
    inner = lambda: tf.cond(q, lambda: x * 2.0, lambda: x + 1.0)  # noqa: E731
    y = tf.cond(p, inner, lambda: tf.negative(x))
    return tf.identity(y, name="y"), [x]


def cond_in_while():
    n = tf.placeholder(tf.int32, [], name="n")
    x = tf.placeholder(tf.float32, [], name="x")

    def body(i, acc):
        even = tf.equal(tf.math.floormod(i, 2), 0)
        acc = tf.cond(even, lambda: acc * x, lambda: acc + x)
        return i + 1, acc

    _, acc = tf.while_loop(lambda i, a: i < n, body, [tf.constant(0), tf.constant(1.0)])
    return tf.identity(acc, name="y"), [x]


def while_in_cond():
    n = tf.placeholder(tf.int32, [], name="n")
    x = tf.placeholder(tf.float32, [], name="x")
    p = tf.placeholder(tf.bool, [], name="p")

    def loop():
        _, v = tf.while_loop(lambda i, v: i < n, lambda i, v: (i + 1, v * x),
                             [tf.constant(0), x])
        return v

    y = tf.cond(p, loop, lambda: x * 3.0)
    return tf.identity(y, name="y"), [x]


def nested_while_cond():
    n = tf.placeholder(tf.int32, [], name="n")
    x = tf.placeholder(tf.float32, [], name="x")

    def outer_body(i, v):
        def inner_body(j, w):
            w = tf.cond(j < 1, lambda: w * x, lambda: w + x)
            return j + 1, w
        _, v = tf.while_loop(lambda j, w: j < i, inner_body, [tf.constant(0), v])
        return i + 1, v

    _, v = tf.while_loop(lambda i, v: i < n, outer_body, [tf.constant(0), x])
    return tf.identity(v, name="y"), [x]


CASES = {
    "nested_cond": nested_cond,
    "cond_in_while": cond_in_while,
    "while_in_cond": while_in_cond,
    "nested_while_cond": nested_while_cond,
}


def contexts(graph):
    out = {}
    for op in graph.get_operations():
        chain = []
        ctx = op._get_control_flow_context()
        while ctx is not None:
            if type(ctx).__name__ == "WhileContext":
                chain.append(["while", ctx.name])
            elif type(ctx).__name__ == "CondContext":
                chain.append(["cond", ctx.pred.name, int(ctx.branch)])
            ctx = ctx.outer_context
        out[op.name] = chain[::-1]
    return out


def main():
    for name, build in CASES.items():
        for with_grad in (False, True):
            case = name + ("_grad" if with_grad else "")
            g = tf.Graph()
            with g.as_default():
                y, xs = build()
                if with_grad:
                    tf.identity(tf.gradients(y, xs)[0], name="gx")
            folder = os.path.join(OUT, case)
            os.makedirs(folder, exist_ok=True)
            gd = g.as_graph_def()
            with open(os.path.join(folder, "graph.pb"), "wb") as f:
                f.write(gd.SerializeToString())
            with open(os.path.join(folder, "graph.pbtxt"), "w") as f:
                f.write(text_format.MessageToString(gd))
            with open(os.path.join(folder, "contexts.json"), "w") as f:
                json.dump(contexts(g), f, indent=1, sort_keys=True)
            print(case, len(g.get_operations()), "ops", file=sys.stderr)


if __name__ == "__main__":
    main()
