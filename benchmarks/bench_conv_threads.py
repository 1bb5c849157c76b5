#!/usr/bin/env python3
"""One graph's step under three settings in one process, alternating round after round:
intra-op threads for chunked convolutions (conv_threads.py, `blas_threads=2`), two BLAS
threads per chunk GEMM (`blas_threads=2`, $TFG_CONV_THREADS=0), and one thread.

    python3 benchmarks/bench_conv_threads.py DIR [--name cnn] [--rounds 40]

DIR holds <name>.pb, <name>.json ({"fetches": [...]}) and <name>_feeds.npz, as bench_run.py
leaves them in /tmp/tfgbench* (the cnn row's graph). Prints per setting the minimum and
median wall and the median process CPU of a step, in ms. On a loaded machine one thread wins
(adaptive's choice there); the comparison that matters is on a quiet one.
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
from tfg.executor import Session  # noqa: E402
from tfg.kernels.conv_threads import ENV_VAR  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--name", default="cnn")
    ap.add_argument("--rounds", type=int, default=40)
    a = ap.parse_args()
    base = os.path.join(a.dir, a.name)
    if not os.path.exists(base + ".pb"):
        print(f"bench_conv_threads: no {a.name}.pb in {a.dir} (run bench_run.py first)",
              file=sys.stderr)
        return 2
    graph = tfg.load(base + ".pb")
    fetches = json.load(open(base + ".json"))["fetches"]
    with np.load(base + "_feeds.npz") as f:
        feeds = {k: f[k] for k in f.files}
    one, two = Session(graph, blas_threads=1), Session(graph, blas_threads=2)

    def step(sess, serial):
        def run():
            if serial:
                os.environ[ENV_VAR] = "0"
            else:
                os.environ.pop(ENV_VAR, None)
            sess.run(fetches, feeds)
        return run

    settings = {"threads2": step(two, False), "blas2": step(two, True),
                "one": step(one, False)}
    for run in settings.values():
        run()
        run()
    wall = {k: [] for k in settings}
    cpu = {k: [] for k in settings}
    for _ in range(a.rounds):
        for k, run in settings.items():
            t, c = time.perf_counter(), time.process_time()
            run()
            wall[k].append(time.perf_counter() - t)
            cpu[k].append(time.process_time() - c)
    os.environ.pop(ENV_VAR, None)
    print(f"load average {os.getloadavg()[0]:.1f}")
    for k in settings:
        print(f"{k:9} wall min {1e3 * min(wall[k]):6.1f}  median "
              f"{1e3 * statistics.median(wall[k]):6.1f}  cpu median "
              f"{1e3 * statistics.median(cpu[k]):6.1f} ms")
    return 0


if __name__ == "__main__":
    sys.exit(main())
