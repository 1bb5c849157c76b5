"""Benchmark `tfg optimize` on a large graph (default 100,000 nodes).

    python3 benchmarks/bench_optimize.py [--nodes 100000] [--cli]

The graph is many independent blocks, each with what the default pipeline removes: constant
subexpressions, a duplicate (CSE), forwarding Identities, x*1, Neg(Neg(x)), and a
MatMul+BiasAdd+Relu to fuse. Prints nodes before/after and the time per pass (in-process), or
the wall time of the `tfg optimize` command with --cli.
"""
import argparse
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
BLOCK = 16  # nodes per block


def build(n_nodes):
    g = Graph()
    g.add_node("x", "Placeholder", [], {"dtype": F, "shape": Shape((4, 8))})
    w = np.ones((8, 8), np.float32) * 0.1
    for i in range(max(1, (n_nodes - 1) // BLOCK)):
        p = f"b{i}/"
        add = lambda name, op, ins, **a: g.add_node(p + name, op, [  # noqa: E731
            s if s == "x" else p + s for s in ins], {"T": F, **a} if op != "Const" else a)
        add("c1", "Const", [], dtype=F, value=np.array(2 + i, np.float32))
        add("c2", "Const", [], dtype=F, value=np.array(3, np.float32))
        add("c12", "Mul", ["c1", "c2"])
        add("one", "Const", [], dtype=F, value=np.array(1, np.float32))
        add("w", "Const", [], dtype=F, value=w * (i + 1))
        add("bias", "Const", [], dtype=F, value=np.zeros(8, np.float32))
        add("mm", "MatMul", ["x", "w"])
        add("dup", "Relu", ["ba"])
        add("ba", "BiasAdd", ["mm", "bias"])
        add("relu", "Relu", ["ba"])
        add("id", "Identity", ["relu"])
        add("m1", "Mul", ["id", "one"])
        add("n1", "Neg", ["m1"])
        add("n2", "Neg", ["n1"])
        add("s", "AddV2", ["n2", "dup"])
        add("out", "Mul", ["s", "c12"])
    return g


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=100_000)
    ap.add_argument("--cli", action="store_true", help="time the `tfg optimize` command")
    a = ap.parse_args()
    t0 = time.perf_counter()
    g = build(a.nodes)
    print(f"built {len(g)} nodes in {time.perf_counter() - t0:.1f}s")
    if a.cli:
        with tempfile.TemporaryDirectory() as tmp:
            src, dst = os.path.join(tmp, "g.pb"), os.path.join(tmp, "o.pb")
            io.save(g, src)
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-m", "tfg", "optimize", src, "--report", "-o", dst],
                           check=True)
            wall = time.perf_counter() - t0
            print(f"tfg optimize: {len(g)} -> {len(io.load(dst))} nodes in {wall:.1f}s")
        return
    from tfg.passes.manager import optimize
    rows = []
    t0 = time.perf_counter()
    out = optimize(g, report=rows)
    total = time.perf_counter() - t0
    for r in rows:
        print(f"  {r['pass']:10s} round {r['round']}  {r['before']:7d} -> {r['after']:7d}  "
              f"{r['seconds']:6.2f}s" + (f"  ERROR {r['error']}" if r["error"] else ""))
    print(f"optimize: {len(g)} -> {len(out)} nodes in {total:.1f}s")


if __name__ == "__main__":
    main()
