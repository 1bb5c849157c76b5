#!/usr/bin/env python3
"""Would two independent loops (a BiLSTM's forward and backward frames) gain from running on
two threads? Two copies of a masked-BiLSTM-sized cell (batch 8, 32 units: x @ W + h, a sigmoid,
a tanh, the c and h updates; 20 iterations each) run one after the other, then on two threads.

    OPENBLAS_NUM_THREADS=1 python3 benchmarks/bench_loop_threads.py [--rounds 3]

Prints the median wall and process CPU time per pair of loops, sequential against threaded,
in alternating rounds. numpy holds the GIL through ufuncs on arrays this small, so the threads
mostly take turns (and pay the GIL's hand-offs); see docs/performance.md, "Loops, this round".
"""
import argparse
import threading
import time

import numpy as np


def loop(n=20, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((8, 32)).astype(np.float32)
    w = rng.standard_normal((32, 128)).astype(np.float32)
    h = rng.standard_normal((8, 128)).astype(np.float32)

    def run():
        for _ in range(n):
            g = x @ w + h
            s = 1 / (1 + np.exp(-g))
            t = np.tanh(g)
            c = s * t + s * h
            s * np.tanh(c)
    return run


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=51)
    a = ap.parse_args()
    fwd, bwd = loop(seed=0), loop(seed=1)

    def sequential():
        fwd()
        bwd()

    def threaded():
        t = threading.Thread(target=bwd)
        t.start()
        fwd()
        t.join()
    for _ in range(a.rounds):
        for f in (sequential, threaded):
            walls, cpus = [], []
            for _ in range(a.reps):
                t, c = time.perf_counter(), time.process_time()
                f()
                walls.append(time.perf_counter() - t)
                cpus.append(time.process_time() - c)
            walls.sort()
            cpus.sort()
            print(f"{f.__name__:10} wall {walls[len(walls) // 2] * 1e3:7.3f} ms  "
                  f"cpu {cpus[len(cpus) // 2] * 1e3:7.3f} ms")


if __name__ == "__main__":
    main()
