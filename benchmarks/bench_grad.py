#!/usr/bin/env python3
"""Time `tfg grad` on a 10,000-node graph (time only; values are checked elsewhere).

    python3 benchmarks/bench_grad.py [--nodes 10000] [--repeat 3] [--cli]

The graph is a deep residual MLP built without TensorFlow: blocks of
Const w, Const b, MatMul, BiasAdd, Tanh, AddV2 (h + tanh(h w + b)), ending in Sum. Gradients
are taken of the Sum w.r.t. the input and every 10th weight, so the backward pass covers the
whole depth. Reports the best of --repeat in-process `tfg.grad` calls and, with --cli, the wall
time of the `tfg grad` command (process start, load, grad, save). `run(...)` is what
benchmarks/run.py calls.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from tfg.graphdef import io  # noqa: E402
from tfg.graphdef.attrs import Shape  # noqa: E402
from tfg.graphdef.graph import Graph  # noqa: E402
from tfg.schemas.dtypes import DType  # noqa: E402

F = DType.FLOAT
BLOCK = 6  # nodes per residual block


def build(n_nodes, width=8):
    """A residual MLP of about `n_nodes` nodes; returns (graph, ys, xs).

    Before: nothing.  After: x -> [h + tanh(h w_i + b_i)] * k -> Sum "loss".
    """
    g = Graph()
    g.add_node("x", "Placeholder", [], {"dtype": F, "shape": Shape((4, width))})
    rng = np.random.default_rng(0)
    h, xs = "x", ["x"]
    for i in range(max(1, (n_nodes - 3) // BLOCK)):
        p = f"l{i}/"
        g.add_node(p + "w", "Const", [], {"dtype": F, "value": (
            rng.standard_normal((width, width)) * 0.1).astype(np.float32)})
        g.add_node(p + "b", "Const", [], {"dtype": F, "value": np.zeros(width, np.float32)})
        g.add_node(p + "mm", "MatMul", [h, p + "w"], {"T": F})
        g.add_node(p + "ba", "BiasAdd", [p + "mm", p + "b"], {"T": F})
        g.add_node(p + "t", "Tanh", [p + "ba"], {"T": F})
        g.add_node(p + "h", "AddV2", [h, p + "t"], {"T": F})
        h = p + "h"
        if i % 10 == 0:
            xs.append(p + "w")
    g.add_node("axes", "Const", [], {"dtype": DType.INT32, "value": np.array([0, 1], np.int32)})
    g.add_node("loss", "Sum", [h, "axes"], {"T": F, "Tidx": DType.INT32})
    return g, "loss", xs


def run(nodes=10_000, repeat=3, cli=True):
    """Time tfg.grad (and the CLI); returns a dict row for benchmarks/run.py.

    Before: nothing.  After: {"graph": "grad", "nodes": 10000, "tfg_median_s": ...}.
    """
    import statistics

    import tfg
    g, ys, xs = build(nodes)
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        out = tfg.grad(g, ys, xs)
        times.append(time.perf_counter() - t)
    row = {"graph": "grad", "nodes": len(g), "nodes_after_grad": len(out),
           "tfg_median_s": statistics.median(times), "tfg_best_s": min(times)}
    if cli:
        with tempfile.TemporaryDirectory() as tmp:
            src, dst = os.path.join(tmp, "g.pb"), os.path.join(tmp, "o.pb")
            io.save(g, src)
            t = time.perf_counter()
            subprocess.run([sys.executable, "-m", "tfg", "grad", src, "--ys", ys,
                            "--xs", ",".join(xs), "-o", dst], check=True)
            row["tfg_cli_wall_s"] = time.perf_counter() - t
    return row


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--nodes", type=int, default=10_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--cli", action="store_true", help="also time the `tfg grad` command")
    a = ap.parse_args()
    print(json.dumps(run(a.nodes, a.repeat, a.cli), indent=1))


if __name__ == "__main__":
    main()
