#!/usr/bin/env python3
"""Loop cells as compiled programs (tfg/executor/chain_programs.py) against the numpy steps:
whole steps of the Keras loop graphs, one process, the two Sessions alternating.

    python3 benchmarks/bench_loops.py --tf-python ... --cases lstm,gru,bilstm --save DIR
    python3 benchmarks/bench_chain_programs.py DIR [--cases lstm,gru,bilstm] [--rounds 15]

Each case gets two Sessions of the same GraphDef, one planned with TFG_CHAIN_PROGRAMS=0 (the
numpy steps), one without; after three warm-up steps each, rounds alternate which goes first
and time `--steps` steps of each by the process's CPU clock (steadier than the wall clock on
a shared machine; BLAS at one thread, so CPU is the step's own work). Prints the medians and
their ratio, and checks that both Sessions' outputs are the same bytes.
"""
import argparse
import os
import statistics
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))


def sessions(folder, name):
    import bench_loops
    made = {}
    for flag in ("0", "1"):
        os.environ["TFG_CHAIN_PROGRAMS"] = flag  # (read when a Session plans its loops)
        sess, feeds, fetches, _, _ = bench_loops.load_case(folder, name, blas_threads=1)
        outs = [sess.run(fetches, feeds) for _ in range(3)]
        made[flag] = (sess, outs[-1])
    os.environ.pop("TFG_CHAIN_PROGRAMS")
    return made, feeds, fetches


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder")
    ap.add_argument("--cases", default="lstm,gru,bilstm")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--steps", type=int, default=100)
    a = ap.parse_args()
    for name in a.cases.split(","):
        made, feeds, fetches = sessions(a.folder, name)
        same = all(x.tobytes() == y.tobytes() for x, y in zip(made["0"][1], made["1"][1]))
        times = {"0": [], "1": []}
        for r in range(a.rounds):
            for flag in ("0", "1") if r % 2 else ("1", "0"):
                sess = made[flag][0]
                t = time.process_time()
                for _ in range(a.steps):
                    sess.run(fetches, feeds)
                times[flag].append((time.process_time() - t) / a.steps * 1e3)
        steps, prog = statistics.median(times["0"]), statistics.median(times["1"])
        print(f"{name:8s} numpy steps {steps:6.2f} ms  programs {prog:6.2f} ms  "
              f"ratio {prog / steps:.3f}  same bytes: {same}")
    return 0


if __name__ == "__main__":
    np.seterr(all="ignore")
    sys.exit(main())
