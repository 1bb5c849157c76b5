#!/usr/bin/env python3
"""Input projections hoisted out of loop bodies (tfg/executor/loop_projection.py), on and off
in one process: two Sessions of each graph, one prepared with TFG_LOOP_PROJECT=0, stepped in
turn (A B, then B A), process CPU time and wall time per step.

    python3 benchmarks/bench_loops.py --tf-python /work/tfvenv/bin/python \\
        --cases lstm,gru,bilstm --save DIR
    python3 benchmarks/bench_rnn.py --tf-python /work/tfvenv/bin/python --save RNN_DIR
    python3 benchmarks/bench_loop_projection.py --loops DIR --rnn RNN_DIR [--pairs 40]

Prints per graph the median and minimum CPU ms a step of each, their ratio (on / off) and the
largest difference between the two Sessions' outputs relative to the largest output.
One BLAS thread (OPENBLAS_NUM_THREADS=1 unless set): the CPU times then measure the work.
"""
import argparse
import json
import os
import statistics
import sys
import time

os.environ.setdefault("OPENBLAS_NUM_THREADS", "1")
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import numpy as np  # noqa: E402


def _sessions(make):
    """(projected, unprojected) Sessions, each prepared under its setting."""
    out = []
    for flag in ("1", "0"):
        os.environ["TFG_LOOP_PROJECT"] = flag
        sess, fetches, feeds = make()
        sess.run(fetches, feeds)  # (prepared, loops compiled under this setting)
        out.append((sess, fetches, feeds))
    os.environ.pop("TFG_LOOP_PROJECT")
    return out


def _loop_case(folder, name):
    import tfg
    from tfg.executor import Session

    meta = json.load(open(os.path.join(folder, name + ".json")))
    with np.load(os.path.join(folder, name + "_feeds.npz")) as f:
        feeds = {k: f[k] for k in f.files}

    def make():
        return Session(tfg.load(os.path.join(folder, name + ".pb"))), meta["fetches"], feeds
    return make


def _rnn_case(folder):
    from bench_rnn import FETCHES, load_case

    def make():
        sess, feeds, _, _, _ = load_case(folder)
        return sess, FETCHES, feeds
    return make


def measure(name, make, pairs):
    (a, fa, xa), (b, fb, xb) = _sessions(make)
    err = max(float(np.max(np.abs(np.asarray(p) - np.asarray(q))) / max(
        float(np.max(np.abs(q))), 1e-30)) for p, q in zip(a.run(fa, xa), b.run(fb, xb)))
    res = {0: [], 1: []}
    for r in range(pairs):
        for k in ((0, 1) if r % 2 == 0 else (1, 0)):
            sess, fetches, feeds = (a, fa, xa) if k == 0 else (b, fb, xb)
            c, t = time.process_time(), time.perf_counter()
            sess.run(fetches, feeds)
            res[k].append(((time.process_time() - c) * 1e3, (time.perf_counter() - t) * 1e3))
    on, off = ([c for c, _ in res[k]] for k in (0, 1))
    won, woff = (statistics.median(w for _, w in res[k]) for k in (0, 1))
    print(f"{name:8} cpu on {statistics.median(on):7.3f} (min {min(on):7.3f}) "
          f"off {statistics.median(off):7.3f} (min {min(off):7.3f}) ms  "
          f"on/off {statistics.median(on) / statistics.median(off):.3f} "
          f"(min {min(on) / min(off):.3f})  wall on/off {won:.3f}/{woff:.3f} ms  "
          f"rel diff {err:.1e}", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--loops", help="a folder `bench_loops.py --save` wrote")
    ap.add_argument("--cases", default="lstm,gru,bilstm")
    ap.add_argument("--rnn", help="a folder `bench_rnn.py --save` wrote")
    ap.add_argument("--pairs", type=int, default=40)
    a = ap.parse_args()
    if not a.loops and not a.rnn:
        ap.error("give --loops DIR and/or --rnn DIR")
    for name in (a.cases.split(",") if a.loops else []):
        if not os.path.exists(os.path.join(a.loops, name + ".pb")):
            print(f"bench_loop_projection: no {name}.pb in {a.loops}", file=sys.stderr)
            sys.exit(2)
        measure(name, _loop_case(a.loops, name), a.pairs)
    if a.rnn:
        measure("rnn", _rnn_case(a.rnn), a.pairs)


if __name__ == "__main__":
    main()
