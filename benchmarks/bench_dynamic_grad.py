#!/usr/bin/env python3
"""An LSTM's 20-step v1 while loop with an unknown batch dimension, and its gradient: tfg
against TensorFlow, and against the same loop with a static batch.

    python3 benchmarks/bench_dynamic_grad.py --tf-python /work/tfvenv/bin/python [--reps 25]

TensorFlow (in a subprocess) builds the loop with v1 control flow from placeholders of shape
[None, F] and [None, H] (and, as a second graph, [B, F] and [B, H]), writes each forward
GraphDef, adds tf.gradients(acc, [x, h0]) and times the two gradients per step (Grappler on,
as DirectSession runs it). tfg loads each forward GraphDef, differentiates it with tfg.grad
and runs the same fetches with a Session. With an unknown batch, both gradients reduce each
broadcasting op's gradient to its operand's shape at run time (Shape, BroadcastGradientArgs,
Sum, Reshape): Grappler folds them from its symbolic shapes, tfg's Session runs one
_TfgBroadcastGradSum each (tfg/passes/remap_broadcast_grad.py). Steps alternate A B A B;
medians of --reps. Prints, per graph, TensorFlow's and tfg's wall medians and their ratio,
and the gradients' largest difference from TensorFlow's.
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

B, F, H, STEPS = 16, 32, 64, 20

TF_WORKER = r'''
import os, sys, time
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np
import tensorflow.compat.v1 as tf
tf.disable_eager_execution()
tf.disable_control_flow_v2()
out_dir, batch, B, F, H, steps = sys.argv[1], sys.argv[2], *map(int, sys.argv[3:7])
known = None if batch == "none" else B
rng = np.random.default_rng(0)
w = (rng.standard_normal((F, 4 * H)) * 0.2).astype(np.float32)
u = (rng.standard_normal((H, 4 * H)) * 0.2).astype(np.float32)
g = tf.Graph()
with g.as_default():
    x = tf.placeholder(tf.float32, [known, F], name="x")
    h0 = tf.placeholder(tf.float32, [known, H], name="h0")
    def body(i, h, c, acc):
        z = tf.matmul(x, tf.constant(w)) + tf.matmul(h, tf.constant(u))
        gi, gf, gg, go = tf.split(z, 4, axis=1)
        c2 = tf.sigmoid(gf) * c + tf.sigmoid(gi) * tf.tanh(gg)
        h2 = tf.sigmoid(go) * tf.tanh(c2)
        return i + 1, h2, c2, acc + h2
    _, h, c, acc = tf.while_loop(lambda i, h, c, acc: i < steps, body,
                                 [tf.constant(0), h0, tf.zeros_like(h0), tf.zeros_like(h0)],
                                 name="loop")
    acc = tf.identity(acc, name="acc")
    fwd = g.as_graph_def()
    gx, gh = tf.gradients(acc, [x, h0])
with open(os.path.join(out_dir, "lstm.pb"), "wb") as f:
    f.write(fwd.SerializeToString())
feeds = {x: rng.standard_normal((B, F)).astype(np.float32),
         h0: rng.standard_normal((B, H)).astype(np.float32)}
sess = tf.Session(graph=g)
vals = sess.run([gx, gh], feeds)
np.savez(os.path.join(out_dir, "io.npz"), x=feeds[x], h0=feeds[h0], gx=vals[0], gh=vals[1])
print("ready", flush=True)
for line in sys.stdin:
    if not line.strip():
        break
    t = time.perf_counter()
    sess.run([gx, gh], feeds)
    print(time.perf_counter() - t, flush=True)
'''


def run(tf_python, batch, reps):
    """{'graph', 'tf_median_s', 'tfg_median_s', 'ratio', 'max_abs_err', 'nodes'} for one
    batch setting ('none' or 'static')."""
    import tfg
    from tfg.executor import Session

    tmp = tempfile.mkdtemp(prefix="tfgdyn")
    path = os.path.join(tmp, "w.py")
    with open(path, "w") as f:
        f.write(TF_WORKER)
    worker = subprocess.Popen([tf_python, path, tmp, batch, str(B), str(F), str(H),
                               str(STEPS)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True)
    if worker.stdout.readline().strip() != "ready":
        raise SystemExit("the TensorFlow worker failed to start")
    try:
        io = dict(np.load(os.path.join(tmp, "io.npz")))
        graph = tfg.grad(tfg.load(os.path.join(tmp, "lstm.pb")), "acc", "x,h0")
        sess = Session(graph)
        feeds = {"x:0": io["x"], "h0:0": io["h0"]}
        fetches = ["grad/x:0", "grad/h0:0"]
        out = sess.run(fetches, feeds)
        err = max(float(np.max(np.abs(o - io[k]))) for o, k in zip(out, ["gx", "gh"]))

        def tf_time():
            worker.stdin.write("go\n")
            worker.stdin.flush()
            return float(worker.stdout.readline())

        def tfg_time():
            t = time.perf_counter()
            sess.run(fetches, feeds)
            return time.perf_counter() - t
        for _ in range(3):
            tf_time(), tfg_time()
        tf_t, tfg_t = [], []
        for _ in range(reps):
            tf_t.append(tf_time())
            tfg_t.append(tfg_time())
    finally:
        worker.stdin.close()
        worker.wait(timeout=30)
    row = {"graph": f"lstm{STEPS}+grad, batch {'None' if batch == 'none' else B}",
           "nodes": len(graph), "tf_median_s": statistics.median(tf_t),
           "tfg_median_s": statistics.median(tfg_t), "max_abs_err": err}
    row["ratio"] = row["tfg_median_s"] / row["tf_median_s"]
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tf-python", required=True, help="a Python with TensorFlow installed")
    ap.add_argument("--reps", type=int, default=25)
    a = ap.parse_args()
    for batch in ("none", "static"):
        r = run(a.tf_python, batch, a.reps)
        print(f"{r['graph']:28} {r['nodes']:4} nodes  TF {r['tf_median_s'] * 1e3:6.2f} ms  "
              f"tfg {r['tfg_median_s'] * 1e3:6.2f} ms  {r['ratio']:.2f}x  "
              f"max |diff| {r['max_abs_err']:.1e}")


if __name__ == "__main__":
    main()
