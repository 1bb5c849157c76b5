#!/usr/bin/env python3
"""A long elementwise chain on tiny arrays with and without numexpr (tfg/executor/
numexpr_chains.py), run by run: what the tier-up costs and when it is done. No TensorFlow.

    python3 benchmarks/bench_chain_tierup.py [--ops 5000] [--runs 80] [--random]

Two Sessions of one graph, x: float32[4] -> 5,000 nodes -> y (sin, neg, abs, tanh in turn as
in run.py's chain row; --random: each node drawn from sin, cos, neg, abs, tanh, so no two
segments share a compiled program), one built with TFG_NUMEXPR=0 and one with the default,
stepped alternately. Prints each run's process CPU time for the first 40 runs of each, the
median of the last 10, the total, and the largest difference between the two results.
"""
import argparse
import os
import statistics
import sys
import time

sys.path.insert(0, os.getcwd())  # the checkout being measured

import numpy as np  # noqa: E402


def chain_graph(ops):
    from tfg.graphdef.attrs import Shape
    from tfg.graphdef.graph import Graph
    from tfg.schemas.dtypes import DType
    g = Graph()
    g.add_node("x", "Placeholder", [], {"dtype": DType.FLOAT, "shape": Shape((4,))})
    src = "x"
    for i, op in enumerate(ops):
        g.add_node(f"n{i}", op, [src], {"T": DType.FLOAT})
        src = f"n{i}"
    return g, src


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--ops", type=int, default=5000)
    ap.add_argument("--runs", type=int, default=80)
    ap.add_argument("--random", action="store_true")
    a = ap.parse_args()
    from tfg.executor import Session
    rng = np.random.default_rng(1)
    if a.random:
        ops = list(rng.choice(["Sin", "Neg", "Abs", "Tanh", "Cos"], a.ops))
    else:
        ops = [["Sin", "Neg", "Abs", "Tanh"][i % 4] for i in range(a.ops)]
    g, out = chain_graph(ops)
    x = rng.standard_normal(4).astype(np.float32)
    sessions, times, values = {}, {}, {}
    for mode in ("0", "1"):
        # read when a step is first prepared: the first run
        os.environ["TFG_NUMEXPR"] = mode
        sessions[mode] = sess = Session(g, graph_rewrites=False)
        c = time.process_time()
        values[mode] = sess.run(out, {"x": x})
        times[mode] = [time.process_time() - c]
    for _ in range(a.runs - 1):
        for mode, sess in sessions.items():
            c = time.process_time()
            values[mode] = sess.run(out, {"x": x})
            times[mode].append(time.process_time() - c)
    for mode, ts in times.items():
        label = "numpy  " if mode == "0" else "numexpr"
        print(f"{label} CPU ms per run: " + " ".join(f"{t * 1e3:.1f}" for t in ts[:40]))
        print(f"{label} last 10 median {statistics.median(ts[-10:]) * 1e3:.2f} ms, "
              f"total {sum(ts):.2f} s")
    print("max |numexpr - numpy|:", float(np.max(np.abs(values["1"] - values["0"]))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
