#!/usr/bin/env python3
"""Benchmark cluster execution on loopback: RecvTensor throughput for a 64 MB tensor between
two `tfg worker` processes, and an MLP training step on 2 workers vs 1 (vs a local Session).

    python3 benchmarks/bench_cluster.py [--reps 7] [--mb 64]

Transfer: task 0 fills a float32 tensor of --mb MB, task 1 sums it; the same graph with both
ops on task 0 is the baseline, so (split - baseline) is the cost of moving the tensor (one
RecvTensor answer with the first 4 MiB, then a stream of 4 MiB chunks) and MB / that time is
the throughput. MLP: 784-1024-1024-10 at batch 128 with SGD on reference variables; on 2
workers the first layer (and its update) runs on task 0, the rest on task 1 (model parallel),
so activations and their gradients cross every step. The workers share this machine, so each
gets half its cores for BLAS. Medians of --reps; results go to benchmarks/results/cluster.json.
"""
import argparse
import json
import os
import statistics
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from tfg import builder as tb  # noqa: E402
from tfg.executor.distributed.local import LocalCluster  # noqa: E402
from tfg.executor.session import Session  # noqa: E402

T0, T1 = "/job:worker/task:0", "/job:worker/task:1"


def transfer_graph(mb, split):
    g = tb.Graph()
    with g:
        with tb.device(T0):
            big = tb.fill([mb * (1 << 20) // 4], 1.0, name="big")
        with tb.device(T1 if split else T0):
            tb.reduce_sum(big, name="total")
    return g.graph


def mlp_graph(devices, batch=128, sizes=(784, 1024, 1024, 10)):
    """devices: one device per layer ('' for local)."""
    rng = np.random.RandomState(0)
    g = tb.Graph()
    with g:
        with tb.device(devices[0]):
            x = tb.placeholder(tb.float32, [batch, sizes[0]], name="x")
        h, params, acts = x, [], []
        for i in range(3):
            acts.append(h)
            with tb.device(devices[i]):
                w = tb.Variable((rng.randn(sizes[i], sizes[i + 1]) * 0.05).astype(np.float32),
                                name=f"w{i}")
                b = tb.Variable(np.zeros(sizes[i + 1], np.float32), name=f"b{i}")
                pre = tb.matmul(h, w) + b
                h = tb.relu(pre) if i < 2 else pre
                params.append((w, b, pre))
        with tb.device(devices[2]):
            y = tb.placeholder(tb.float32, [batch, sizes[-1]], name="y")
            err = h - y
            tb.reduce_mean(tb.square(err), name="loss")
            grad = err * (2.0 / (batch * sizes[-1]))
        updates = []
        for i in reversed(range(3)):
            w, b, pre = params[i]
            with tb.device(devices[i]):
                if i < 2:
                    grad = grad * tb.cast(tb.greater(pre, 0.0), tb.float32)
                g_w = tb.matmul(acts[i], grad, transpose_a=True)
                g_b = tb.reduce_sum(grad, axis=0)
                if i > 0:
                    grad_in = tb.matmul(grad, w, transpose_b=True)
                updates += [(g_w, w), (g_b, b)]
            if i > 0:
                grad = grad_in
        tb.train.gradient_descent(0.01, updates, name="train")
        tb.global_variables_initializer()
    feeds = {"x:0": rng.rand(batch, sizes[0]).astype(np.float32),
             "y:0": rng.rand(batch, sizes[-1]).astype(np.float32)}
    return g.graph, feeds


def timed(fn, reps):
    fn()  # warm: registration, first-touch allocations
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--mb", type=int, default=64)
    ap.add_argument("-o", "--output", default=os.path.join(HERE, "results", "cluster.json"))
    a = ap.parse_args()
    results = {"reps": a.reps, "cpus": os.cpu_count()}
    # Two workers on one machine: each gets half the cores for BLAS (on separate machines
    # each would have all of its own).
    threads = max(1, (os.cpu_count() or 2) // 2)
    results["blas_threads_per_worker"] = threads
    with LocalCluster(2, threads=threads) as cluster:
        times = {}
        for split in (False, True):
            with Session(transfer_graph(a.mb, split), cluster=cluster.spec) as sess:
                times[split] = timed(lambda: sess.run("total"), a.reps)
        moved = max(times[True] - times[False], 1e-9)
        results["transfer"] = {
            "mb": a.mb, "step_one_task_s": times[False], "step_two_tasks_s": times[True],
            "transfer_s": moved, "throughput_mb_s": a.mb / moved}
        print(f"RecvTensor {a.mb} MB: {moved * 1e3:.0f} ms -> {a.mb / moved:.0f} MB/s "
              f"(step {times[False] * 1e3:.0f} ms on one task, {times[True] * 1e3:.0f} ms "
              "across two)")
        mlp = {}
        for label, devices, spec in (("local", ["", "", ""], None),
                                     ("1 worker", [T0, T0, T0], cluster.spec),
                                     ("2 workers", [T0, T1, T1], cluster.spec)):
            graph, feeds = mlp_graph(devices)
            with Session(graph, cluster=spec) as sess:
                sess.run(None, targets=["init"])
                mlp[label] = timed(lambda: sess.run("loss", feeds=feeds, targets=["train"]),
                                   a.reps)
            print(f"MLP step, {label}: {mlp[label] * 1e3:.1f} ms")
        results["mlp_step_s"] = mlp
    os.makedirs(os.path.dirname(a.output), exist_ok=True)
    with open(a.output, "w") as f:
        json.dump(results, f, indent=1)
    print(f"wrote {a.output}")


if __name__ == "__main__":
    main()
