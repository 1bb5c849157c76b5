
import json, os, sys, time
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np
import tensorflow as tf
cases = json.load(open(sys.argv[1]))
threads = int(sys.argv[2])
built = {}

def build(i, k):
    c = cases[i]
    rng = np.random.default_rng(i)
    g = tf.Graph()
    with g.as_default():
        x = tf.compat.v1.placeholder(tf.float32, c["x"], name="x")
        ops = []
        for j in range(k):
            if c["op"] in ("MaxPool", "AvgPool"):
                fn = tf.nn.max_pool2d if c["op"] == "MaxPool" else tf.nn.avg_pool2d
                ops.append(fn(x, c["ksize"][1:3], c["strides"][1:3], c["padding"]))
                continue
            w = tf.constant(rng.standard_normal(c["w"]).astype(np.float32))
            if c["op"] == "Conv2D":
                y = tf.raw_ops.Conv2D(input=x, filter=w, strides=c["strides"],
                                      padding=c["padding"],
                                      dilations=c.get("dilations", [1, 1, 1, 1]))
            else:
                y = tf.raw_ops.DepthwiseConv2dNative(
                    input=x, filter=w, strides=c["strides"], padding=c["padding"],
                    dilations=c.get("dilations", [1, 1, 1, 1]))
            ops.append(y)
        target = tf.group(*ops)
    config = tf.compat.v1.ConfigProto(intra_op_parallelism_threads=threads,
                                      inter_op_parallelism_threads=threads)
    # No Grappler and no graph-level CSE: the K identical pools must stay K ops.
    config.graph_options.rewrite_options.disable_meta_optimizer = True
    config.graph_options.optimizer_options.opt_level = tf.compat.v1.OptimizerOptions.L0
    sess = tf.compat.v1.Session(graph=g, config=config)
    feed = {x: np.random.default_rng(0).standard_normal(c["x"]).astype(np.float32)}
    sess.run(target, feed)
    return sess, target, feed

print("ready", flush=True)
for line in sys.stdin:
    if not line.strip():
        break
    i, k = map(int, line.split())
    if (i, k) not in built:
        built[(i, k)] = build(i, k)
    sess, target, feed = built[(i, k)]
    c0, t0 = time.process_time(), time.perf_counter()
    sess.run(target, feed)
    print(time.perf_counter() - t0, time.process_time() - c0, flush=True)
