#!/usr/bin/env python3
"""tfg's convolution and pooling kernels against TensorFlow's, one op at a time, on the shapes
of the keras.applications models of bench_keras.py (batch 2, 96x96).

    python3 benchmarks/bench_conv.py --tf-python /work/tfvenv/bin/python [--top 30]
        [--models nasnetmobile] [--ops DepthwiseConv2dNative] [--all] [--reps 5]
        [--tf-threads 2] [--blas-threads adaptive]

benchmarks/conv_shapes.json lists every Conv2D, DepthwiseConv2dNative, MaxPool and AvgPool of
those models (input shape, filter, strides, padding) and how many nodes of each model have it;
it was recorded by running the frozen GraphDefs with a timing wrapper around each kernel.

Each case is timed as K copies of the op on one input (K different filters; K from the op's
size, so one timing is a few ms; Grappler and graph CSE off, so the K pools stay K ops): in TensorFlow a
tf.compat.v1.Session running a group of the K ops (2 intra-/inter-op threads, the input fed
once), in tfg the registered CPU kernel called K times, without an executor. Both measure the
kernel and what TensorFlow's executor adds per op, not a Session step's fixed cost. The two
alternate A B A B (TensorFlow in its own process, a short sleep between sides), medians of
--reps (--stat min: the fastest, the uncontended cost on a loaded machine); `cpu` is the
ratio of process CPU times summed over the reps (what a loaded machine disturbs least). The default table shows the --top
cases by count-weighted tfg time; the per-model lines sum every case of the model (weighted
by how many nodes have it) so they say how much of a model step the kernels cost on each
side. Results: benchmarks/results/conv.json.
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

from abtime import start_tf_worker  # noqa: E402
from tfg.executor.blas import blas_limit, resolve_blas_threads  # noqa: E402
from tfg.graphdef.graph import Graph  # noqa: E402
from tfg.kernels import get_kernel  # noqa: E402
from tfg.kernels.context import KernelContext  # noqa: E402

SHAPES = os.path.join(HERE, "conv_shapes.json")

TF_WORKER = r'''
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
'''


def macs(c):
    """Multiply-adds (or window reads, for pools) of one case: what sets its copy count."""
    n, h, w, ch = c["x"]
    oh, ow = -(-h // c["strides"][1]), -(-w // c["strides"][2])
    if c["op"] == "Conv2D":
        return n * oh * ow * c["w"][0] * c["w"][1] * c["w"][2] * c["w"][3]
    if c["op"] == "DepthwiseConv2dNative":
        return n * oh * ow * c["w"][0] * c["w"][1] * c["w"][2] * c["w"][3]
    return n * oh * ow * ch * c["ksize"][1] * c["ksize"][2]


def copies(c):
    return int(min(64, max(1, 4e7 // max(1, macs(c)))))


def label(c):
    if c["op"] in ("MaxPool", "AvgPool"):
        k = f"k{c['ksize'][1]}x{c['ksize'][2]}"
    else:
        k = "w" + "x".join(map(str, c["w"]))
    return (f"{c['op'].replace('DepthwiseConv2dNative', 'Depthwise')} "
            f"x{'x'.join(map(str, c['x']))} {k} s{c['strides'][1]} {c['padding']}")


def tfg_timer(c, k, blas=None):
    """A callable running tfg's kernel of case `c` K times -> (wall s, cpu s) of the K, with
    BLAS threads limited as a Session would (`blas`: resolve_blas_threads' value)."""
    rng = np.random.default_rng(0)
    node = Graph().add_node("n", c["op"])
    attrs = dict(strides=c["strides"], padding=c["padding"].encode(), data_format=b"NHWC")
    if c["op"] in ("MaxPool", "AvgPool"):
        attrs["ksize"] = c["ksize"]
        extra = [()] * k
    else:
        attrs["dilations"] = c.get("dilations", [1, 1, 1, 1])
        extra = [(rng.standard_normal(c["w"]).astype(np.float32),) for _ in range(k)]
    fn = get_kernel(c["op"]).fn
    ctx = KernelContext(node, attrs)
    x = np.random.default_rng(0).standard_normal(c["x"]).astype(np.float32)

    def run():
        with blas_limit(blas):
            c0, t0 = time.process_time(), time.perf_counter()
            for e in extra:
                fn(ctx, x, *e)
            return time.perf_counter() - t0, time.process_time() - c0
    run()
    return run


def select(cases, models, ops):
    out = []
    for i, c in enumerate(cases):
        if models and not set(c["models"]) & set(models):
            continue
        if ops and c["op"] not in ops:
            continue
        out.append(i)
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tf-python", default="/work/tfvenv/bin/python")
    ap.add_argument("--models", default="", help="comma list (default: every model)")
    ap.add_argument("--ops", default="", help="comma list of op names (default: all four)")
    ap.add_argument("--top", type=int, default=30,
                    help="cases in the table, by count-weighted tfg time (default 30)")
    ap.add_argument("--all", action="store_true",
                    help="time every case of the selection (needed for the per-model sums)")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--tf-threads", type=int, default=2)
    ap.add_argument("--blas-threads", default=None,
                    help="tfg's BLAS threads, as Session(blas_threads=...) takes them "
                         "(default: $TFG_BLAS_THREADS, else adaptive)")
    ap.add_argument("--stat", choices=("median", "min"), default="median",
                    help="per-op time of the --reps timings: median (default), or min (the "
                         "uncontended cost, on a machine other processes load)")
    ap.add_argument("--gap", type=float, default=0.02,
                    help="seconds of sleep between the two sides' timings: the other side's "
                         "threads (Eigen's pool, OpenBLAS) spin for a while after a run")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "conv.json"))
    a = ap.parse_args()
    blas = resolve_blas_threads(a.blas_threads, "--blas-threads")
    cases = json.load(open(SHAPES))
    models = [m for m in a.models.split(",") if m]
    idx = select(cases, models, [o for o in a.ops.split(",") if o])
    weight = {i: sum(n for m, n in cases[i]["models"].items() if not models or m in models)
              for i in idx}
    if not a.all:
        # Rank by a quick tfg-only timing, then compare the heaviest against TensorFlow.
        quick = {}
        for i in idx:
            k = copies(cases[i])
            quick[i] = tfg_timer(cases[i], k, blas)()[0] / k * weight[i]
        idx = sorted(idx, key=lambda i: -quick[i])[:a.top]
    path = os.path.join(tempfile.mkdtemp(prefix="tfgconv"), "conv_worker.py")
    with open(path, "w") as f:
        f.write(TF_WORKER)
    with open(path + ".json", "w") as f:
        json.dump(cases, f)
    worker, _ = start_tf_worker([a.tf_python, path, path + ".json", str(a.tf_threads)],
                                "TensorFlow conv worker")

    def tf_run(i, k):
        worker.stdin.write(f"{i} {k}\n")
        worker.stdin.flush()
        return tuple(map(float, worker.stdout.readline().split()))

    rows = []
    try:
        print(f"{'case':58} {'n':>3} {'TF us':>8} {'tfg us':>8} {'ratio':>6} {'cpu':>6}")
        for i in idx:
            c, k = cases[i], copies(cases[i])
            tfg_run = tfg_timer(c, k, blas)
            tf_run(i, k)
            tf_t, tfg_t = [], []
            for _ in range(max(3, a.reps)):
                tf_t.append(tf_run(i, k))
                time.sleep(a.gap)
                tfg_t.append(tfg_run())
                time.sleep(a.gap)
            stat = statistics.median if a.stat == "median" else min
            tw = stat([t[0] for t in tf_t]) / k
            gw = stat([t[0] for t in tfg_t]) / k
            tc = sum(t[1] for t in tf_t)
            gc = sum(t[1] for t in tfg_t)
            row = dict(case=label(c), index=i, copies=k, nodes=weight[i], tf_us=tw * 1e6,
                       tfg_us=gw * 1e6, ratio=gw / tw, cpu_ratio=gc / max(tc, 1e-9),
                       models=c["models"])
            rows.append(row)
            print(f"{row['case']:58} {weight[i]:3d} {tw * 1e6:8.1f} {gw * 1e6:8.1f} "
                  f"{gw / tw:6.2f} {row['cpu_ratio']:6.2f}", flush=True)
    finally:
        worker.stdin.close()
        worker.wait(timeout=60)
    tf_sum = sum(r["tf_us"] * r["nodes"] for r in rows)
    tfg_sum = sum(r["tfg_us"] * r["nodes"] for r in rows)
    print(f"{'all timed cases, weighted by node count':58} {'':3} {tf_sum / 1e3:7.2f}ms "
          f"{tfg_sum / 1e3:7.2f}ms {tfg_sum / max(tf_sum, 1e-9):6.2f}")
    per_model = {}
    if a.all:
        for m in sorted({m for r in rows for m in r["models"] if not models or m in models}):
            tf_m = sum(r["tf_us"] * r["models"].get(m, 0) for r in rows)
            tfg_m = sum(r["tfg_us"] * r["models"].get(m, 0) for r in rows)
            per_model[m] = dict(tf_ms=tf_m / 1e3, tfg_ms=tfg_m / 1e3, ratio=tfg_m / tf_m)
            print(f"  model {m:20} TF {tf_m / 1e3:7.2f} ms  tfg {tfg_m / 1e3:7.2f} ms  "
                  f"{tfg_m / tf_m:5.2f}x")
    with open(a.out, "w") as f:
        # One line per row: the file stays small and diffs line by line.
        head = dict(per_model=per_model, reps=a.reps, stat=a.stat, tf_threads=a.tf_threads,
                    blas_threads=a.blas_threads)
        f.write(json.dumps(head)[:-1] + ',\n "rows": [\n'
                + ",\n".join(json.dumps(r) for r in rows) + "\n]}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
