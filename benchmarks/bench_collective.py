#!/usr/bin/env python3
"""Benchmark collectives and data-parallel training on loopback workers.

    python3 benchmarks/bench_collective.py [--reps 7] [--mb 16]

all_sum: two workers each hold a float32 tensor of --mb MB; `tb.collective.all_sum` moves one
to task 0 and the sum back (2 transfers of --mb MB per step); the same graph with both members
on task 0 is the baseline. Data-parallel: examples/data_parallel/train.py's graph for a
784-512-10 MLP at global batch 256, one SGD step: on 1 worker (one replica, whole batch), on
2 workers (two replicas of 128, gradients all_mean'd: 2 x 1.6 MB cross per step), and in a
local Session (one replica). The workers share this machine, so each gets half its cores for
BLAS. Medians of --reps; results go to benchmarks/results/collective.json.
"""
import argparse
import importlib.util
import json
import os
import sys


HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
sys.path.insert(0, HERE)

from bench_cluster import timed  # noqa: E402  (median of reps after a warm-up call)
from tfg import builder as tb  # noqa: E402
from tfg.executor.distributed.local import LocalCluster  # noqa: E402
from tfg.executor.session import Session  # noqa: E402

T0, T1 = "/job:worker/task:0", "/job:worker/task:1"
DIMS = (784, 512, 10)


def _example():
    path = os.path.join(ROOT, "examples", "data_parallel", "train.py")
    spec = importlib.util.spec_from_file_location("data_parallel_train", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def all_sum_graph(mb, split):
    g = tb.Graph()
    n = mb * (1 << 20) // 4
    with g:
        xs = []
        for i, task in enumerate((T0, T1 if split else T0)):
            with tb.device(task):
                xs.append(tb.fill([n], float(i + 1), name=f"x{i}"))
        outs = tb.collective.all_sum(xs, devices=[T0, T1 if split else T0])
        for i, t in enumerate(outs):
            with tb.device(T0 if i == 0 or not split else T1):
                tb.reduce_sum(t, name=f"total{i}")
    return g.graph


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--mb", type=int, default=16)
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("-o", "--output", default=os.path.join(HERE, "results", "collective.json"))
    a = ap.parse_args()
    ex = _example()
    results = {"reps": a.reps, "cpus": os.cpu_count(), "dims": DIMS, "batch": a.batch}
    threads = max(1, (os.cpu_count() or 2) // 2)
    results["blas_threads_per_worker"] = threads
    with LocalCluster(2, threads=threads) as cluster:
        times = {}
        for split in (False, True):
            with Session(all_sum_graph(a.mb, split), cluster=cluster.spec) as sess:
                times[split] = timed(lambda: sess.run(["total0", "total1"]), a.reps)
        moved = max(times[True] - times[False], 1e-9)
        results["all_sum"] = {"mb": a.mb, "one_task_s": times[False], "two_tasks_s": times[True],
                              "collective_s": moved, "mb_moved_per_s": 2 * a.mb / moved}
        print(f"all_sum of {a.mb} MB on 2 workers: {times[True] * 1e3:.0f} ms per step "
              f"({times[False] * 1e3:.0f} ms with both members on one task): "
              f"{2 * a.mb / moved:.0f} MB/s moved")
        batch = ex.sample_batch(a.batch, dims=DIMS)
        step = {}
        for label, devices, spec in (("local", ["/device:CPU:0"], None),
                                     ("1 worker", [T0], cluster.spec),
                                     ("2 workers", [T0, T1], cluster.spec)):
            graph = ex.build(devices, a.batch, 0.1, dims=DIMS)
            feeds = ex.split_feeds(batch, len(devices))
            kwargs = {"cluster": spec} if spec else {"devices": "cpu:1"}
            with Session(graph, **kwargs) as sess:
                sess.run(None, targets=["init"])
                step[label] = timed(lambda: sess.run("loss", feeds=feeds, targets=["train"]),
                                    a.reps)
            print(f"data-parallel MLP step, {label}: {step[label] * 1e3:.1f} ms")
        results["dp_step_s"] = step
    os.makedirs(os.path.dirname(a.output), exist_ok=True)
    with open(a.output, "w") as f:
        json.dump(results, f, indent=1)
    print(f"wrote {a.output}")


if __name__ == "__main__":
    main()
