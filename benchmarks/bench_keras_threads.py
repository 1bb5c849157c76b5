#!/usr/bin/env python3
"""keras.applications steps under several thread settings in one process, alternating round
after round: the default (adaptive), intra-op threads for split and chunked kernels with two
BLAS threads elsewhere (`blas_threads=2`), the same with the kernels serial and BLAS's two
threads inside each GEMM ($TFG_CONV_THREADS=0), and one thread.

    python3 benchmarks/bench_keras_threads.py DIR [--models mobilenetv2] [--rounds 30]
        [--evict-mb 48]

DIR is a folder bench_keras.py wrote (NAME.pb, NAME.json, NAME_x.npy). --evict-mb writes that
many MB between steps, as TensorFlow's step does between tfg's in bench_keras.py's A B
rounds (weights and activations out of the caches). Prints per setting the minimum and
median wall and the median process CPU of a step, in ms: on a loaded machine the minimum
is the closest to a quiet machine's figure, the CPU time what the setting costs.
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

SETTINGS = ("default", "threads2", "blas2", "one")


def _busy_s():
    """CPU seconds all cores spent busy so far (/proc/stat), or None off Linux."""
    try:
        with open("/proc/stat") as f:
            v = [int(t) for t in f.readline().split()[1:]]
    except OSError:
        return None
    return (sum(v) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK")


def _own_s():
    t = os.times()
    return t.user + t.system


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("dir")
    ap.add_argument("--models", default="mobilenetv2")
    ap.add_argument("--rounds", type=int, default=30)
    ap.add_argument("--settings", default=",".join(SETTINGS))
    ap.add_argument("--evict-mb", type=int, default=48)
    ap.add_argument("--quiet-cores", type=float, default=0.25,
                    help="a round counts as quiet when other processes used under this "
                         "many cores during it (/proc/stat less this process's CPU)")
    a = ap.parse_args()
    wanted = [s for s in a.settings.split(",") if s]
    bad = sorted(set(wanted) - set(SETTINGS))
    if bad:
        print(f"bench_keras_threads: unknown settings {bad}; choose from {SETTINGS}",
              file=sys.stderr)
        return 2
    junk = np.ones(max(1, a.evict_mb) << 18, np.float32)
    for name in a.models.split(","):
        meta = json.load(open(os.path.join(a.dir, name + ".json")))
        graph = tfg.load(os.path.join(a.dir, name + ".pb"))
        x = np.load(os.path.join(a.dir, name + "_x.npy"))
        y = np.load(os.path.join(a.dir, name + "_y.npy"))
        feeds, out = {meta["input"]: x}, meta["output"]
        sessions = {"default": Session(graph), "threads2": Session(graph, blas_threads=2),
                    "blas2": Session(graph, blas_threads=2),
                    "one": Session(graph, blas_threads=1)}

        def step(k):
            if k == "blas2":
                os.environ[ENV_VAR] = "0"
            else:
                os.environ.pop(ENV_VAR, None)
            try:
                return sessions[k].run(out, feeds)
            finally:
                os.environ.pop(ENV_VAR, None)

        errs = {}
        for k in wanted:
            for _ in range(2):
                got = step(k)
            errs[k] = float(np.abs(got - y).max() / max(1e-12, float(np.abs(y).max())))
        wall = {k: [] for k in wanted}
        cpu = {k: [] for k in wanted}
        quiet = []  # per round: whether other processes used under --quiet-cores
        for _ in range(a.rounds):
            b0, o0, t0 = _busy_s(), _own_s(), time.perf_counter()
            for k in wanted:
                if a.evict_mb:
                    junk += 1.0
                t, c = time.perf_counter(), time.process_time()
                step(k)
                wall[k].append(time.perf_counter() - t)
                cpu[k].append(time.process_time() - c)
            others = (None if b0 is None else
                      (_busy_s() - b0 - (_own_s() - o0)) / (time.perf_counter() - t0))
            quiet.append(others is not None and others < a.quiet_cores)
        print(f"== {name} (load average {os.getloadavg()[0]:.1f}; {sum(quiet)} of "
              f"{a.rounds} rounds with other processes under {a.quiet_cores} cores)")
        for k in wanted:
            qw = [v for v, q in zip(wall[k], quiet) if q]
            print(f"{k:9} wall min {1e3 * min(wall[k]):6.1f}  median "
                  f"{1e3 * statistics.median(wall[k]):6.1f}  cpu median "
                  f"{1e3 * statistics.median(cpu[k]):6.1f} ms  err {errs[k]:.1e}"
                  + (f"  quiet rounds: wall median {1e3 * statistics.median(qw):6.1f}"
                     if qw else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
