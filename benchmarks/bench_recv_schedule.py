#!/usr/bin/env python3
"""Benchmark late Recv scheduling (`tfg partition --schedule-recv alap`, issue 19): peak live
tensor memory of the busiest receiving device (tfg's memory accounting, `run(trace=True)`:
`last_trace.device_peaks`, every device but the parameter device CPU:0) and step time of
partitioned models, with and without the control edges.

    python3 benchmarks/bench_recv_schedule.py [--reps 5]

Models, parameter-server style (the variables on CPU:0, the compute on the other devices, so
every weight crosses devices each step):
- mlp: 8 dense layers of 1024 units (4 MiB of weights each) at batch 64, layers alternating
  between CPU:1 and CPU:2; an inference step (fetch the output) and a training step (SGD).
- cnn: 4 3x3 convolutions (64-128-128-256 channels) + ReLU + a dense head at batch 8 on
  32x32 images, compute on CPU:1.
Medians of --reps; results go to benchmarks/results/recv_schedule.json.
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

import tfg  # noqa: E402
from tfg import builder as tb  # noqa: E402
from tfg.executor.session import Session  # noqa: E402
from tfg.passes.partition import partition  # noqa: E402

PS = "/device:CPU:0"


def mlp(layers=8, width=1024, batch=64, devices=("/device:CPU:1", "/device:CPU:2")):
    rng = np.random.RandomState(0)
    g = tb.Graph()
    with g:
        with tb.device(devices[0]):
            h = tb.placeholder(tb.float32, [batch, width], name="x")
        weights = []
        for i in range(layers):
            with tb.device(PS):
                w = tb.Variable((rng.randn(width, width) / np.sqrt(width)).astype(np.float32),
                                name=f"w{i}")
            weights.append(w)
            with tb.device(devices[i % len(devices)]):
                h = tb.nn.relu(tb.matmul(h, w), name=f"layer{i}")
        with tb.device(devices[(layers - 1) % len(devices)]):
            loss = tb.reduce_mean(tb.square(h), name="loss")
        tb.global_variables_initializer()
    graph = tfg.grad(g.graph, ys="loss", xs=[f"w{i}/read" for i in range(layers)])
    return _with_sgd(graph, [f"w{i}" for i in range(layers)]), {"x": rng.randn(
        batch, width).astype(np.float32)}, "layer%d" % (layers - 1)


def cnn(batch=8, device="/device:CPU:1"):
    rng = np.random.RandomState(0)
    chans = [3, 64, 128, 128, 256]
    g = tb.Graph()
    with g:
        with tb.device(device):
            h = tb.placeholder(tb.float32, [batch, 32, 32, 3], name="x")
        names = []
        for i in range(4):
            with tb.device(PS):
                k = tb.Variable((rng.randn(3, 3, chans[i], chans[i + 1]) /
                                 np.sqrt(9 * chans[i])).astype(np.float32), name=f"k{i}")
            names.append(f"k{i}")
            with tb.device(device):
                h = tb.nn.relu(tb.nn.conv2d(h, k, padding="SAME"), name=f"conv{i}")
                if i % 2 == 1:
                    h = tb.nn.max_pool(h, 2, 2, name=f"pool{i}")
        with tb.device(PS):
            dense = tb.Variable((rng.randn(8 * 8 * 256, 10) / 128).astype(np.float32),
                                name="dense")
        names.append("dense")
        with tb.device(device):
            logits = tb.matmul(tb.reshape(h, [batch, -1]), dense, name="logits")
            tb.reduce_mean(tb.square(logits), name="loss")
        tb.global_variables_initializer()
    graph = tfg.grad(g.graph, ys="loss", xs=[f"{n}/read" for n in names])
    return _with_sgd(graph, names), {"x": rng.randn(batch, 32, 32, 3).astype(np.float32)}, \
        "logits"


def _with_sgd(graph, names):
    b = tb.GraphBuilder(graph=graph)
    with b:
        pairs = [(tb.collective.from_graph(f"grad/{n}/read"), tb.collective.from_graph(n))
                 for n in names]
        with tb.device(PS):
            tb.train.gradient_descent(0.01, pairs, name="train")
    return b.graph


def measure(graph, devices, feeds, fetch, targets, reps):
    sess = Session(graph, devices=devices)
    sess.run(None, targets=["init"])
    sess.run(fetch, feeds=feeds, targets=targets)  # warm-up: prepared once
    times, peaks = [], []
    for _ in range(reps):
        t0 = time.perf_counter()
        sess.run(fetch, feeds=feeds, targets=targets)
        times.append(time.perf_counter() - t0)
        sess.run(fetch, feeds=feeds, targets=targets, trace=True)
        # The receiving devices' peak: the parameter device holds every variable anyway.
        peaks.append(max(v for d, v in sess.last_trace.device_peaks.items()
                         if not d.endswith("CPU:0")))
    sess.close()
    return statistics.median(times) * 1e3, max(peaks)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args(argv)
    rows = []
    for name, (graph, feeds, out), devices in (("mlp", mlp(), "cpu:3"), ("cnn", cnn(), "cpu:2")):
        for step, fetch, targets in (("inference", out, None), ("training", "loss", ["train"])):
            row = {"model": name, "step": step, "devices": devices}
            for mode in ("none", "alap"):
                parted = partition(graph, devices, schedule_recv=mode)
                ms, peak = measure(parted, devices, feeds, fetch, targets, args.reps)
                row[mode] = {"step_ms": round(ms, 2), "peak_mb": round(peak / 2**20, 1)}
            rows.append(row)
            print(f"{name:4} {step:9} on {devices}: peak {row['none']['peak_mb']:7.1f} MB -> "
                  f"{row['alap']['peak_mb']:7.1f} MB with alap; step {row['none']['step_ms']:7.1f}"
                  f" ms -> {row['alap']['step_ms']:7.1f} ms")
    os.makedirs(os.path.join(HERE, "results"), exist_ok=True)
    with open(os.path.join(HERE, "results", "recv_schedule.json"), "w") as f:
        json.dump({"reps": args.reps, "rows": rows}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
