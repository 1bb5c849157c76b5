#!/usr/bin/env python3
"""Where two BLAS threads start to pay: GEMMs of growing size, one thread against two.

    python3 benchmarks/bench_gemm_floor.py [--gap-us 20] [--rounds 5]

Each size runs its product repeatedly with `--gap-us` of Python busy work between calls (as a
loop body's other calls sit between its GEMMs, during which OpenBLAS's second thread spins),
alternating one BLAS thread and two, `--rounds` times; prints per call (gap subtracted) the
median wall and process CPU time of each and the wall ratio two/one. The crossover is what
tfg/executor/blas_floor.py's FLOOR_MACS (multiply-adds, M*K*N) is set from.
"""
import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from tfg.executor.blas import _get_backend  # noqa: E402 - after the path

SIZES = [(32, 128, 128), (64, 128, 128), (32, 256, 256), (128, 128, 128), (64, 256, 256),
         (128, 256, 256), (256, 256, 256), (128, 512, 512), (128, 784, 1024)]


def _busy(us):
    end = time.perf_counter_ns() + int(us * 1000)
    while time.perf_counter_ns() < end:
        pass


def _timed(a, b, o, n, gap):
    w, c = time.perf_counter(), time.process_time()
    for _ in range(n):
        np.matmul(a, b, o)
        _busy(gap)
    return (time.perf_counter() - w) / n * 1e6 - gap, (time.process_time() - c) / n * 1e6 - gap


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--gap-us", type=float, default=20.0)
    ap.add_argument("--rounds", type=int, default=5)
    a = ap.parse_args()
    backend = _get_backend()
    if backend is None:
        raise SystemExit("no controllable BLAS in this process")
    before = backend.get()
    rng = np.random.default_rng(0)
    print(f"gap {a.gap_us} us; per call: wall 1, wall 2, cpu 1, cpu 2 (us); wall 2/1")
    try:
        for m, k, n in SIZES:
            x = rng.standard_normal((m, k)).astype(np.float32)
            y = rng.standard_normal((k, n)).astype(np.float32)
            o = np.empty((m, n), np.float32)
            reps = max(20, int(2e8 / (m * k * n)))
            res = {1: [], 2: []}
            for _ in range(a.rounds):
                for t in (1, 2):
                    backend.set(t)
                    _timed(x, y, o, 5, a.gap_us)
                    res[t].append(_timed(x, y, o, reps, a.gap_us))
            w1, w2 = (statistics.median(r[0] for r in res[t]) for t in (1, 2))
            c1, c2 = (statistics.median(r[1] for r in res[t]) for t in (1, 2))
            print(f"{m}x{k}x{n} ({m * k * n / 1e6:.2f}M): {w1:8.1f} {w2:8.1f} {c1:8.1f} "
                  f"{c2:8.1f}  {w2 / w1:.2f}")
    finally:
        backend.set(before)


if __name__ == "__main__":
    main()
