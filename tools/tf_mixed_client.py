"""TensorFlow's own client driving a cluster whose task 1 may be a `tfg worker`: builds a small
training graph split over /job:worker/task:0 and /job:worker/task:1, runs it through
`tf.compat.v1.Session(TARGET)` and, for comparison, in a local session. Run with a Python that
has TensorFlow (TFG_TF_PYTHON); prints JSON {"cluster": [...], "local": [...]} (one entry per
step: the fetched values as lists).

    $TFG_TF_PYTHON tools/tf_mixed_client.py --target grpc://127.0.0.1:2222 --steps 3
"""
import argparse
import json
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")


def build(tf, np, pin):
    """x (task 0) @ w (task 0) -> relu, bias b and loss on task 1 -> summary on task 0; plain
    gradient descent on w and b. `pin` False builds the same graph without devices."""
    g = tf.Graph()
    rng = np.random.RandomState(0)

    def dev(task):
        return tf.device(f"/job:worker/task:{task}" if pin else None)

    with g.as_default():
        with dev(0):
            x = tf.compat.v1.placeholder(tf.float32, [8, 3], name="x")
            w = tf.compat.v1.Variable(rng.randn(3, 4).astype(np.float32), name="w",
                                      use_resource=False)
            h = tf.matmul(x, w)
        with dev(1):
            b = tf.compat.v1.Variable(np.full([4], 0.1, np.float32), name="b",
                                      use_resource=True)
            y = tf.nn.relu(h + b) * 2.0
            loss = tf.reduce_mean(tf.square(y - 1.0), name="loss")
            gw, gb = tf.gradients(loss, [w, b])
            step_b = tf.compat.v1.assign_sub(b, 0.1 * gb)
        with dev(0):
            step_w = tf.compat.v1.assign_sub(w, 0.1 * gw)
            summary = tf.identity(tf.reduce_sum(y, axis=0) * 3.0, name="summary")
            train = tf.group(step_w, step_b, name="train")
        init = tf.compat.v1.global_variables_initializer()
    feed = rng.randn(8, 3).astype(np.float32)
    return g, x, feed, loss, summary, train, init


def run(tf, np, target, steps, pin):
    g, x, feed, loss, summary, train, init = build(tf, np, pin)
    config = tf.compat.v1.ConfigProto(operation_timeout_in_ms=60000)
    out = []
    with tf.compat.v1.Session(target, graph=g, config=config) as sess:
        sess.run(init)
        for _ in range(steps):
            lv, sv, _ = sess.run([loss, summary, train], feed_dict={x: feed})
            out.append([float(lv), sv.tolist()])
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--target", required=True)
    ap.add_argument("--steps", type=int, default=3)
    a = ap.parse_args()
    import numpy as np
    import tensorflow as tf

    tf.compat.v1.disable_eager_execution()
    result = {"cluster": run(tf, np, a.target, a.steps, True),
              "local": run(tf, np, "", a.steps, False)}
    print(json.dumps(result))


if __name__ == "__main__":
    main()
