#!/usr/bin/env python3
"""Benchmark `tfg.Session` against TensorFlow's own runtime on the same GraphDefs.

    python3 benchmarks/bench_run.py --tf-python /tmp/tfenv/bin/python [--reps 7]

TensorFlow runs in a subprocess (it must never share a process with tfg): it builds the
GraphDefs (a 5,000-op chain of tiny elementwise ops, an MLP training step 784-1024-1024-10 at
batch 128 with SGD on reference variables, a small CNN inference of 3 conv blocks at batch 32
on 32x32x3), imports each into a tf.compat.v1.Session and times one step on request. Timings
alternate A B A B (TensorFlow, tfg) and the median of --reps each is reported, with the ratio
and, for the chain, tfg's µs per node. Results go to benchmarks/results/run.json.
Without TensorFlow (no --tf-python and `python3` cannot import it) there is nothing to build
the graphs with, so the script says so and exits.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

from abtime import start_tf_worker  # benchmarks/ is on sys.path: run as a script or from run.py

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

TF_WORKER = r'''
import os, sys, time, json
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np
import tensorflow.compat.v1 as tf
tf.disable_eager_execution()
tf.disable_control_flow_v2()
out_dir = sys.argv[1]
rng = np.random.default_rng(0)

def chain():
    x = tf.placeholder(tf.float32, [4], name="x")
    y = x
    ops = [tf.sin, tf.negative, tf.abs, tf.tanh]
    for i in range(5000):
        y = ops[i % 4](y)
    tf.identity(y, name="out")
    return {"x:0": rng.standard_normal(4).astype(np.float32)}, ["out:0"], [], []

def mlp():
    x = tf.placeholder(tf.float32, [128, 784], name="x")
    labels = tf.placeholder(tf.float32, [128, 10], name="labels")
    def dense(h, n_in, n_out, name, act=True):
        w = tf.Variable(tf.random.normal([n_in, n_out], stddev=0.05, seed=1), name=name + "_w",
                        use_resource=False)
        b = tf.Variable(tf.zeros([n_out]), name=name + "_b", use_resource=False)
        z = tf.nn.bias_add(tf.matmul(h, w), b)
        return tf.nn.relu(z) if act else z
    h = dense(x, 784, 1024, "l1")
    h = dense(h, 1024, 1024, "l2")
    logits = dense(h, 1024, 10, "l3", act=False)
    loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits_v2(labels=labels,
                                                                     logits=logits), name="loss")
    tf.train.GradientDescentOptimizer(0.01).minimize(loss, name="train")
    tf.global_variables_initializer().name  # noqa
    init = tf.group(tf.global_variables_initializer(), name="init")
    lab = np.eye(10, dtype=np.float32)[rng.integers(0, 10, 128)]
    return ({"x:0": rng.standard_normal((128, 784)).astype(np.float32), "labels:0": lab},
            ["loss:0"], ["train"], ["init"])

def cnn():
    x = tf.placeholder(tf.float32, [32, 32, 32, 3], name="x")
    h = x
    c_in = 3
    for i, c_out in enumerate([32, 64, 64]):
        w = tf.constant(rng.standard_normal((3, 3, c_in, c_out)).astype(np.float32) * 0.1)
        b = tf.constant(rng.standard_normal(c_out).astype(np.float32) * 0.1)
        h = tf.nn.relu(tf.nn.bias_add(tf.nn.conv2d(h, w, [1, 1, 1, 1], "SAME"), b))
        h = tf.nn.max_pool2d(h, 2, 2, "VALID")
        c_in = c_out
    h = tf.reshape(h, [32, -1])
    w = tf.constant(rng.standard_normal((4 * 4 * 64, 10)).astype(np.float32) * 0.05)
    tf.identity(tf.matmul(h, w), name="out")
    return {"x:0": rng.standard_normal((32, 32, 32, 3)).astype(np.float32)}, ["out:0"], [], []

sessions = {}
for name, build in [("chain", chain), ("mlp", mlp), ("cnn", cnn)]:
    g = tf.Graph()
    with g.as_default():
        feeds, fetches, targets, init = build()
    gd = g.as_graph_def()
    with open(os.path.join(out_dir, name + ".pb"), "wb") as f:
        f.write(gd.SerializeToString())
    np.savez(os.path.join(out_dir, name + "_feeds.npz"), **feeds)
    with open(os.path.join(out_dir, name + ".json"), "w") as f:
        json.dump({"fetches": fetches, "targets": targets, "init": init,
                   "nodes": len(gd.node)}, f)
    # Time the imported GraphDef, as tfg sees it.
    g2 = tf.Graph()
    with g2.as_default():
        tf.import_graph_def(gd, name="")
    sess = tf.Session(graph=g2, config=tf.ConfigProto(
        graph_options=tf.GraphOptions(rewrite_options=None)))
    for t in init:
        sess.run(g2.get_operation_by_name(t))
    fd = {g2.get_tensor_by_name(k): v for k, v in feeds.items()}
    run = [[g2.get_tensor_by_name(t) for t in fetches],
           [g2.get_operation_by_name(t) for t in targets]]
    sessions[name] = (sess, run, fd)
    if not targets and not init:  # stateless: TensorFlow's outputs are the reference values
        np.savez(os.path.join(out_dir, name + "_expected.npz"), *sess.run(run[0], fd))
print("ready", flush=True)
for line in sys.stdin:
    name = line.strip()
    if not name:
        break
    sess, run, fd = sessions[name]
    t, c = time.perf_counter(), time.process_time()
    sess.run(run, fd)
    print(time.perf_counter() - t, time.process_time() - c, flush=True)
'''


def max_rel_err(path, got):
    """max |tfg - TF| / (1 + |TF|) over the fetches, against the reference values TensorFlow's
    worker saved at `path` (stateless graphs only); None without them."""
    if not os.path.exists(path):
        return None
    with np.load(path) as f:
        want = [f[f"arr_{i}"] for i in range(len(f.files))]
    return max(float(np.max(np.abs(np.asarray(g, np.float64) - w) / (1 + np.abs(w))))
               for g, w in zip(got, want))


def find_tf_python(arg):
    """The first of `arg`, /tmp/tfenv/bin/python (where this project's docs install it) and
    python3 that can import tensorflow, or None."""
    for cand in ([arg] if arg else []) + ["/tmp/tfenv/bin/python", "python3"]:
        if not cand or (os.sep in cand and not os.path.exists(cand)):
            continue
        p = subprocess.run([cand, "-c", "import tensorflow"], capture_output=True)
        if p.returncode == 0:
            return cand
    return None


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tf-python", default=None, help="a Python that can import tensorflow")
    ap.add_argument("--reps", type=int, default=7, help="timed steps per side (>= 5)")
    ap.add_argument("--warmup", type=int, default=3)
    ap.add_argument("--cases", default="chain,mlp,cnn")
    ap.add_argument("--dataflow", action="store_true",
                    help="force tfg's dataflow executor (no precomputed fast-path schedule)")
    ap.add_argument("--blas-threads", type=int, default=None,
                    help="BLAS threads for tfg's steps (default: the Session's, BLAS left alone; "
                         "0: leave BLAS alone)")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "run.json"))
    a = ap.parse_args()
    tf_python = find_tf_python(a.tf_python)
    if tf_python is None:
        print("TensorFlow is not importable (pass --tf-python): it builds the benchmark graphs; "
              "skipping.")
        return 0
    import tfg
    from tfg.executor import Session

    tmp = tempfile.mkdtemp(prefix="tfgbench")
    worker_path = os.path.join(tmp, "tf_worker.py")
    with open(worker_path, "w") as f:
        f.write(TF_WORKER)
    worker, tf_time = start_tf_worker([tf_python, worker_path, tmp])

    rows = []
    try:
        for name in a.cases.split(","):
            meta = json.load(open(os.path.join(tmp, name + ".json")))
            graph = tfg.load(os.path.join(tmp, name + ".pb"))
            with np.load(os.path.join(tmp, name + "_feeds.npz")) as f:
                feeds = {k: f[k] for k in f.files}
            sess = Session(graph, fast_path=not a.dataflow, blas_threads=a.blas_threads)
            if meta["init"]:
                sess.run(None, targets=meta["init"])

            tfg_cpu = []

            def tfg_time():
                t, c = time.perf_counter(), time.process_time()
                sess.run(meta["fetches"], feeds, targets=meta["targets"])
                tfg_cpu.append(time.process_time() - c)
                return time.perf_counter() - t

            for _ in range(a.warmup):
                tf_time(name)
                tfg_time()
            tf_t, tfg_t = [], []
            del tf_time.cpu[:], tfg_cpu[:]
            for _ in range(max(5, a.reps)):  # A B A B
                tf_t.append(tf_time(name))
                tfg_t.append(tfg_time())
            row = {"graph": name, "nodes": meta["nodes"], "tf_median_s": statistics.median(tf_t),
                   "tfg_median_s": statistics.median(tfg_t),
                   # process CPU time (every thread): steadier than wall on a shared machine
                   "tf_cpu_median_s": statistics.median(tf_time.cpu),
                   "tfg_cpu_median_s": statistics.median(tfg_cpu)}
            row["ratio"] = row["tfg_median_s"] / row["tf_median_s"]
            row["cpu_ratio"] = row["tfg_cpu_median_s"] / row["tf_cpu_median_s"]
            err = max_rel_err(os.path.join(tmp, name + "_expected.npz"),
                              sess.run(meta["fetches"], feeds, targets=meta["targets"]))
            if err is not None:
                row["max_rel_err_vs_tf"] = err
            if name == "chain":
                row["tfg_us_per_node"] = row["tfg_median_s"] / meta["nodes"] * 1e6
                row["tf_us_per_node"] = row["tf_median_s"] / meta["nodes"] * 1e6
            rows.append(row)
    finally:
        worker.stdin.close()
        worker.wait(timeout=30)
    print(f"{'graph':8} {'nodes':>6} {'TF median':>12} {'tfg median':>12} {'ratio':>7} "
          f"{'cpu ratio':>9} {'µs/node':>8} {'err vs TF':>9}")
    for r in rows:
        per = f"{r['tfg_us_per_node']:8.2f}" if "tfg_us_per_node" in r else f"{'':8}"
        print(f"{r['graph']:8} {r['nodes']:6d} {r['tf_median_s'] * 1e3:10.2f}ms "
              f"{r['tfg_median_s'] * 1e3:10.2f}ms {r['ratio']:7.2f} {r['cpu_ratio']:9.2f} {per}"
              f" {r['max_rel_err_vs_tf'] if 'max_rel_err_vs_tf' in r else '-':>9.2}")
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump({"cpu_count": os.cpu_count(), "executor": "dataflow" if a.dataflow else "auto",
                   "blas_threads": sess.blas_threads, "reps": max(5, a.reps),
                   "loadavg_after": os.getloadavg()[0], "rows": rows}, f,
                  indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
