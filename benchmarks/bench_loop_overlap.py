#!/usr/bin/env python3
"""Two threads for a gradient loop's independent GEMMs: measured slower, not used by tfg.

    python3 benchmarks/bench_loop_overlap.py [--reps 60] [--batch 5]

The rnn row's gradient loop in plain numpy (50 iterations of g = (1 - y^2) dh, dU += x^T g,
dW += h^T g, dh = g W^T at 32x128, one BLAS thread): `seq` runs it on one thread; `par` hands
each iteration's two accumulations to a worker thread (a queue, in order: the values are the
sequential run's, bit for bit, checked) while the main thread runs the dh chain; `par-batch`
hands them over `--batch` iterations at a time (fewer wake-ups). numpy's matmul and ufuncs
release the GIL, so the two GEMMs could run on two cores; each hand-off of the GIL between
the threads costs a wake-up on the other core, a few per iteration, against GEMMs of 16 us.
Prints the median wall and process CPU time of each (docs/performance.md, "rnn row, this
round": the same idea inside tfg's compiled loops, commit 'loop_overlap' in this branch's
history, measured 1.1-1.4 ms slower per rnn step, and was dropped).
"""
import argparse
import os
import queue
import statistics
import sys
import threading
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tfg.executor.blas import _get_backend  # noqa: E402 - after the path

T, B, H = 50, 32, 128


def _data():
    rng = np.random.default_rng(0)
    f = np.float32
    hs = [np.tanh(rng.standard_normal((B, H))).astype(f) for _ in range(T)]
    xs = [rng.standard_normal((B, H)).astype(f) for _ in range(T)]
    ys = [np.tanh(rng.standard_normal((B, H))).astype(f) for _ in range(T)]
    w = (rng.standard_normal((H, H)) * 0.1).astype(f)
    return hs, xs, ys, w, np.ones((B, H), f)


def _acc(a, g, acc, buf):
    np.matmul(a.T, g, buf)
    return np.add(acc, buf)


def seq(d):
    hs, xs, ys, w, dh = d
    dw, du = np.zeros((H, H), np.float32), np.zeros((H, H), np.float32)
    b1, b2 = np.empty((H, H), np.float32), np.empty((H, H), np.float32)
    for t in range(T - 1, -1, -1):
        g = (1 - ys[t] * ys[t]) * dh
        du = _acc(xs[t], g, du, b1)
        dw = _acc(hs[t], g, dw, b2)
        dh = np.matmul(g, w.T)
    return dh, dw, du


class Worker:
    """Accumulates (x, h, g) tasks in order; None: report the sums."""

    def __init__(self):
        self.tasks, self.done = queue.SimpleQueue(), queue.SimpleQueue()
        threading.Thread(target=self._loop, daemon=True).start()

    def _loop(self):
        b1, b2 = np.empty((H, H), np.float32), np.empty((H, H), np.float32)
        while True:
            batch = self.tasks.get()
            if batch is None:
                self.done.put((self.dw, self.du))
                continue
            for x, h, g in batch:
                self.du = _acc(x, g, self.du, b1)
                self.dw = _acc(h, g, self.dw, b2)


def par(d, worker, every=1):
    hs, xs, ys, w, dh = d
    worker.dw, worker.du = np.zeros((H, H), np.float32), np.zeros((H, H), np.float32)
    pending = []
    for t in range(T - 1, -1, -1):
        g = (1 - ys[t] * ys[t]) * dh
        pending.append((xs[t], hs[t], g))
        if len(pending) >= every:
            worker.tasks.put(pending)
            pending = []
        dh = np.matmul(g, w.T)
    if pending:
        worker.tasks.put(pending)
    worker.tasks.put(None)
    dw, du = worker.done.get()
    return dh, dw, du


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--reps", type=int, default=60)
    ap.add_argument("--batch", type=int, default=5)
    a = ap.parse_args()
    backend = _get_backend()
    if backend is not None:
        backend.set(1)
    d, worker = _data(), Worker()
    ways = {"seq": lambda: seq(d), "par": lambda: par(d, worker),
            "par-batch": lambda: par(d, worker, a.batch)}
    want = seq(d)
    for f in ways.values():
        assert all(np.array_equal(x, y) for x, y in zip(want, f()))  # the same bits
    res = {k: [] for k in ways}
    for _ in range(a.reps):  # A B C A B C
        for k, f in ways.items():
            w, c = time.perf_counter(), time.process_time()
            f()
            res[k].append((time.perf_counter() - w, time.process_time() - c))
    for k, v in res.items():
        print(f"{k:10} wall {statistics.median(x[0] for x in v) * 1e6:7.0f} us  "
              f"cpu {statistics.median(x[1] for x in v) * 1e6:7.0f} us")


if __name__ == "__main__":
    main()
