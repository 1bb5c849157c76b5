#!/usr/bin/env python3
"""Benchmark the MLP training step on two workers on loopback, three ways:

    python3 benchmarks/bench_tf_cluster.py --tf-python /work/tfvenv/bin/python [--reps 20]

- tfg -> 2 TF servers: `tfg run --engine tensorflow`'s session (tfg places, partitions and
  drives two `tf.distribute.Server` tasks over tensorflow.WorkerService),
- TF client -> 2 TF servers: TensorFlow's own `tf.compat.v1.Session("grpc://task0")` on the
  same GraphDef (TensorFlow's master in task 0),
- tfg -> 2 tfg workers: tfg's own cluster (`tfg worker` processes, tfg.WorkerService).

The graph is bench_cluster.py's MLP (784-1024-1024-10, batch 128, SGD on reference variables),
first layer on task 0, the rest on task 1, so activations and gradients cross every step.
Medians of --reps after a warm-up, in --rounds rounds that take turns (A B C A B C ...), so
that a load change on a shared machine hits all three alike; the result is the median over
rounds (every round's figure is kept). Results: benchmarks/results/tf_cluster.json.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tools"))

import numpy as np  # noqa: E402

from bench_cluster import T0, T1, mlp_graph, timed  # noqa: E402
from check_tf_cluster import start_tf_servers, stop  # noqa: E402
from tfg.executor.distributed import ClusterConfig  # noqa: E402
from tfg.executor.distributed.local import LocalCluster  # noqa: E402
from tfg.executor.session import Session  # noqa: E402
from tfg.graphdef import io  # noqa: E402

TF_CLIENT = r"""
import json, statistics, sys, time
import numpy as np
import tensorflow as tf
tf.compat.v1.disable_eager_execution()
graph_path, feeds_path, target, reps = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
gd = tf.compat.v1.GraphDef()
gd.ParseFromString(open(graph_path, "rb").read())
g = tf.Graph()
with g.as_default():
    tf.compat.v1.import_graph_def(gd, name="")
feeds = dict(np.load(feeds_path))
with tf.compat.v1.Session(target, graph=g) as sess:
    sess.run("init")
    fetch = [g.get_tensor_by_name("loss:0"), g.get_operation_by_name("train")]
    sess.run(fetch, feed_dict=feeds)
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        sess.run(fetch, feed_dict=feeds)
        times.append(time.perf_counter() - t)
print(json.dumps({"median_s": statistics.median(times)}))
"""


def free_port():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tf-python", default=os.environ.get("TFG_TF_PYTHON", sys.executable))
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("-o", "--output", default=os.path.join(HERE, "results", "tf_cluster.json"))
    a = ap.parse_args()
    graph, feeds = mlp_graph([T0, T1, T1])
    results = {"reps": a.reps, "cpus": os.cpu_count(), "model": "MLP 784-1024-1024-10 b128"}

    def tfg_on(cluster):
        with Session(graph, cluster=cluster) as sess:
            sess.run(None, targets=["init"])
            return timed(lambda: sess.run("loss", feeds=feeds, targets=["train"]), a.reps)

    threads = max(1, (os.cpu_count() or 2) // 2)
    spec, procs = start_tf_servers(a.tf_python, 2, free_port)
    rounds = {k: [] for k in ("tfg -> 2 TF servers", "TF client -> 2 TF servers",
                              "tfg -> 2 tfg workers")}
    try:
        with tempfile.TemporaryDirectory() as tmp, LocalCluster(2, threads=threads) as cluster:
            gpath, fpath = os.path.join(tmp, "mlp.pb"), os.path.join(tmp, "feeds.npz")
            io.save(graph, gpath)
            np.savez(fpath, **feeds)
            target = "grpc://" + spec.split("=")[1].split(",")[0]
            for r in range(a.rounds):
                rounds["tfg -> 2 TF servers"].append(
                    tfg_on(ClusterConfig(spec, engine="tensorflow")))
                p = subprocess.run([a.tf_python, "-c", TF_CLIENT, gpath, fpath, target,
                                    str(a.reps)], capture_output=True, text=True, timeout=600)
                if p.returncode != 0:
                    raise SystemExit(f"TensorFlow's client failed: {p.stderr[-2000:]}")
                rounds["TF client -> 2 TF servers"].append(
                    json.loads(p.stdout.splitlines()[-1])["median_s"])
                rounds["tfg -> 2 tfg workers"].append(tfg_on(cluster.spec))
                print(f"round {r + 1}: " + ", ".join(f"{k} {v[-1] * 1e3:.1f} ms"
                                                     for k, v in rounds.items()), flush=True)
    finally:
        stop(procs)
    step = {k: statistics.median(v) for k, v in rounds.items()}
    results["rounds_s"] = rounds
    results["mlp_step_s"] = step
    for label, s in step.items():
        print(f"MLP step, {label}: {s * 1e3:.1f} ms")
    os.makedirs(os.path.dirname(a.output), exist_ok=True)
    with open(a.output, "w") as f:
        json.dump(results, f, indent=1)
    print(f"wrote {a.output}")


if __name__ == "__main__":
    main()
