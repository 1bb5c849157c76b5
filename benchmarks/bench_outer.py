#!/usr/bin/env python3
"""Process CPU per step with a switch off and on, in one process (A B alternating): the
outer schedule around compiled loops (TFG_OUTER_SCHEDULE) on bench_loops.py's saved cases,
the per-signature memory guard (TFG_STATIC_GUARDS) on bench_keras-style frozen graphs.

    python3 benchmarks/bench_loops.py --tf-python /work/tfvenv/bin/python --save /tmp/loops
    python3 benchmarks/bench_outer.py --loops /tmp/loops --cases lstm,gru,bilstm
    python3 benchmarks/bench_outer.py --keras DIR --models nasnetmobile   # DIR: NAME.pb,
    #   NAME.json ({"input", "output"}) and NAME_x.npy, as bench_keras.py writes them

Both sessions are built in the same process (the switch is read when a step is prepared),
each runs `--steps` steps per round, `--rounds` rounds alternating which goes first; prints
the median CPU ms per step of each and whether their outputs are identical.
"""
import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.getcwd())  # the checkout being measured
sys.path.insert(1, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402


def _loop_case(folder, name, switch):
    import bench_loops
    os.environ[switch] = "0"
    off = bench_loops.load_case(folder, name, blas_threads=1)
    os.environ[switch] = "1"
    on = bench_loops.load_case(folder, name, blas_threads=1)
    return [(s, f, fe) for s, f, fe, _, _ in (off, on)]


def _keras_case(folder, name, switch):
    import tfg
    from tfg.executor import Session
    with open(os.path.join(folder, name + ".json")) as f:
        meta = json.load(f)
    graph = tfg.load(os.path.join(folder, name + ".pb"))
    feeds = {meta["input"]: np.load(os.path.join(folder, name + "_x.npy"))}
    out = []
    for flag in ("0", "1"):
        os.environ[switch] = flag
        out.append((Session(graph, blas_threads=1), feeds, meta["output"]))
    return out


def measure(pair, rounds, steps):
    """-> (median CPU ms off, on, identical outputs)."""
    results = [s.run(fe, f) for s, f, fe in pair]
    same = all(np.array_equal(a, b) for a, b in zip(np.atleast_1d(results[0]),
                                                    np.atleast_1d(results[1])))
    times = ([], [])
    for r in range(rounds):
        for k in ((0, 1) if r % 2 == 0 else (1, 0)):
            sess, feeds, fetches = pair[k]
            start = time.process_time()
            for _ in range(steps):
                sess.run(fetches, feeds)
            times[k].append((time.process_time() - start) / steps * 1e3)
    return statistics.median(times[0]), statistics.median(times[1]), same


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--loops", help="a folder of bench_loops.py --save")
    ap.add_argument("--cases", default="lstm,gru,bilstm")
    ap.add_argument("--keras", help="a folder of frozen keras.applications graphs")
    ap.add_argument("--models", default="nasnetmobile,mobilenetv3small")
    ap.add_argument("--rounds", type=int, default=11)
    ap.add_argument("--steps", type=int, default=20)
    a = ap.parse_args()
    if not a.loops and not a.keras:
        ap.error("give --loops or --keras")
    jobs = []
    if a.loops:
        jobs += [(n, _loop_case(a.loops, n, "TFG_OUTER_SCHEDULE"), "TFG_OUTER_SCHEDULE")
                 for n in a.cases.split(",")]
    if a.keras:
        jobs += [(n, _keras_case(a.keras, n, "TFG_STATIC_GUARDS"), "TFG_STATIC_GUARDS")
                 for n in a.models.split(",")]
    for name, pair, switch in jobs:
        off, on, same = measure(pair, a.rounds, a.steps)
        print(f"{name:18s} {switch}=0 {off:8.3f} ms  =1 {on:8.3f} ms  ({on / off:.3f}x)  "
              f"identical: {same}")


if __name__ == "__main__":
    main()
