#!/usr/bin/env python3
"""Make the fixtures of tests/test_collective_tf.py (needs TensorFlow; never imports tfg).

    /tmp/tfenv/bin/python tools/gen_collective_fixtures.py

TensorFlow builds a graph with its own collective ops over three CPU devices of one process
(CollectiveReduce with every merge_op and both final_ops, CollectiveReduceV2 with constant
group/instance keys, CollectiveBcastSend/Recv and their V2 forms, a collective that waits on a
control input) and runs it: tests/fixtures/collective/graph.pbtxt, feeds.npz (keys `x0:0`...),
expected.npz (each fetch by tensor name) and case.json (the fetches).
"""
import json
import os

import numpy as np
import tensorflow.compat.v1 as tf
from tensorflow.python.ops import collective_ops

tf.disable_eager_execution()

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures",
                   "collective")
N = 3
RNG = np.random.RandomState(11)


def build():
    devs = [f"/device:CPU:{i}" for i in range(N)]
    xs, ints, fetches = [], [], []
    for i, d in enumerate(devs):
        with tf.device(d):
            xs.append(tf.placeholder(tf.float32, [2, 3], name=f"x{i}"))
            ints.append(tf.placeholder(tf.int32, [4], name=f"k{i}"))
    instance = iter(range(1, 100))
    for merge, final in (("Add", "Id"), ("Add", "Div"), ("Mul", "Id"), ("Min", "Id"),
                         ("Max", "Id")):
        key = next(instance)
        for i, d in enumerate(devs):
            with tf.device(d):
                out = collective_ops.all_reduce(xs[i], N, 1, key, merge, final)
                fetches.append(tf.identity(out, name=f"v1_{merge}_{final}_{i}"))
    key = next(instance)
    for i, d in enumerate(devs):  # integer sums
        with tf.device(d):
            out = collective_ops.all_reduce(ints[i], N, 1, key, "Add", "Id")
            fetches.append(tf.identity(out, name=f"v1_int_sum_{i}"))
    for merge, final in (("Add", "Div"), ("Max", "Id")):
        key = next(instance)
        for i, d in enumerate(devs):
            with tf.device(d):
                out = collective_ops.all_reduce_v2(xs[i] * 2.0, N, 2, key, merge, final)
                fetches.append(tf.identity(out, name=f"v2_{merge}_{final}_{i}"))
    # A member that must wait for a control input (the lowering keeps it).
    key = next(instance)
    for i, d in enumerate(devs):
        with tf.device(d):
            gate = tf.no_op(name=f"gate{i}")
            with tf.control_dependencies([gate]):
                out = collective_ops.all_reduce(xs[i] + 1.0, N, 1, key, "Add", "Id")
            fetches.append(tf.identity(out, name=f"gated_{i}"))
    # Broadcast from device 1, V1 and V2.
    key = next(instance)
    for i, d in enumerate(devs):
        with tf.device(d):
            if i == 1:
                out = collective_ops.broadcast_send(xs[i], [2, 3], tf.float32, N, 3, key)
            else:
                out = collective_ops.broadcast_recv([2, 3], tf.float32, N, 3, key)
            fetches.append(tf.identity(out, name=f"bcast_{i}"))
    key = next(instance)
    for i, d in enumerate(devs):
        with tf.device(d):
            if i == 2:
                out = collective_ops.broadcast_send_v2(ints[i], N, 4, key)
            else:
                out = collective_ops.broadcast_recv_v2([4], tf.int32, N, 4, key)
            fetches.append(tf.identity(out, name=f"bcast_v2_{i}"))
    return fetches


def main():
    os.makedirs(OUT, exist_ok=True)
    g = tf.Graph()
    with g.as_default():
        fetches = build()
    feeds = {}
    for i in range(N):
        feeds[f"x{i}:0"] = RNG.randn(2, 3).astype(np.float32)
        feeds[f"k{i}:0"] = RNG.randint(-5, 6, size=4).astype(np.int32)
    config = tf.ConfigProto(device_count={"CPU": N})
    config.experimental.collective_group_leader = "/job:localhost/replica:0/task:0"
    with tf.Session(graph=g, config=config) as sess:
        values = sess.run(fetches, feeds)
    names = [t.name for t in fetches]
    tf.io.write_graph(g.as_graph_def(), OUT, "graph.pbtxt", as_text=True)
    np.savez(os.path.join(OUT, "feeds.npz"), **feeds)
    np.savez(os.path.join(OUT, "expected.npz"), **dict(zip(names, values)))
    with open(os.path.join(OUT, "case.json"), "w") as f:
        json.dump({"fetches": names, "devices": N, "tensorflow": tf.__version__}, f, indent=1)
    print(f"wrote {len(names)} fetches to {OUT}")


if __name__ == "__main__":
    main()
