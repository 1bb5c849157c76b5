"""Benchmark `tfg optimize` on a large graph (default 100,000 nodes).

    python3 benchmarks/bench_optimize.py [--nodes 100000] [--cli]
    python3 benchmarks/bench_optimize.py --sizes 25000,50000,100000 [--reps 3]

The graph is many independent blocks, each with what the default pipeline removes: constant
subexpressions, a duplicate (CSE), forwarding Identities, x*1, Neg(Neg(x)), and a
MatMul+BiasAdd+Relu to fuse. Prints nodes before/after and the time per pass (in-process), or
the wall time of the `tfg optimize` command with --cli. With --sizes, each size in turn (the
command's wall time, median of --reps, and an in-process run with CPU time) and the results in
benchmarks/results/optimize.json.
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


def time_cli(g, reps):
    """Wall seconds of `tfg optimize` (a new process: load, passes, write) per repetition."""
    walls = []
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = os.path.join(tmp, "g.pb"), os.path.join(tmp, "o.pb")
        io.save(g, src)
        for _ in range(reps):
            t0 = time.perf_counter()
            subprocess.run([sys.executable, "-m", "tfg", "optimize", src, "-o", dst], check=True)
            walls.append(time.perf_counter() - t0)
        after = len(io.load(dst))
    return walls, after


def time_in_process(g):
    """(rows per pass, wall seconds, CPU seconds, optimized graph) of one optimize()."""
    from tfg.passes.manager import optimize
    rows = []
    t0, c0 = time.perf_counter(), time.process_time()
    out = optimize(g, report=rows)
    return rows, time.perf_counter() - t0, time.process_time() - c0, out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--nodes", type=int, default=100_000)
    ap.add_argument("--cli", action="store_true", help="time the `tfg optimize` command")
    ap.add_argument("--sizes", default=None, metavar="N,N,...",
                    help="graph sizes to time in turn (CLI wall time, median of --reps, and "
                         "one in-process run each); writes benchmarks/results/optimize.json")
    ap.add_argument("--reps", type=int, default=3)
    ap.add_argument("--out", default=os.path.join(os.path.dirname(os.path.abspath(__file__)),
                                                  "results", "optimize.json"))
    a = ap.parse_args()
    if a.sizes:
        return sweep([int(n) for n in a.sizes.split(",")], a.reps, a.out)
    t0 = time.perf_counter()
    g = build(a.nodes)
    print(f"built {len(g)} nodes in {time.perf_counter() - t0:.1f}s")
    if a.cli:
        walls, after = time_cli(g, 1)
        print(f"tfg optimize: {len(g)} -> {after} nodes in {walls[0]:.1f}s")
        return
    rows, total, cpu, out = time_in_process(g)
    for r in rows:
        print(f"  {r['pass']:10s} round {r['round']}  {r['before']:7d} -> {r['after']:7d}  "
              f"{r['seconds']:6.2f}s" + (f"  ERROR {r['error']}" if r["error"] else ""))
    print(f"optimize: {len(g)} -> {len(out)} nodes in {total:.1f}s (CPU {cpu:.1f}s)")


def sweep(sizes, reps, out_path):
    """Each size: CLI wall times and one in-process run; prints a table, writes JSON."""
    import json
    import statistics
    results = []
    for n in sizes:
        g = build(n)
        walls, after = time_cli(g, reps)
        rows, total, cpu, out = time_in_process(g)
        per_pass = {}
        for r in rows:
            per_pass[r["pass"]] = per_pass.get(r["pass"], 0.0) + r["seconds"]
        results.append({"nodes": len(g), "nodes_after": after,
                        "cli_wall_s": [round(w, 3) for w in walls],
                        "cli_wall_median_s": round(statistics.median(walls), 3),
                        "optimize_wall_s": round(total, 3), "optimize_cpu_s": round(cpu, 3),
                        "per_pass_s": {k: round(v, 3) for k, v in per_pass.items()}})
        print(f"{len(g):7d} nodes -> {after:6d}: tfg optimize {statistics.median(walls):6.1f}s "
              f"(median of {reps}), optimize() {total:5.1f}s wall {cpu:5.1f}s CPU", flush=True)
    for r in results:  # linear scaling keeps the time per node flat
        r["cli_per_node_us"] = round(r["cli_wall_median_s"] / r["nodes"] * 1e6, 1)
        r["cpu_per_node_us"] = round(r["optimize_cpu_s"] / r["nodes"] * 1e6, 1)
        r["cpu_per_node_vs_smallest"] = round(
            r["cpu_per_node_us"] / results[0]["cpu_per_node_us"], 2)
    doc = {"cpu_count": os.cpu_count(), "python": sys.version.split()[0], "reps": reps,
           "target": "100,000 nodes under 30 s, about linear", "rows": results}
    with open(out_path, "w") as f:
        json.dump(doc, f, indent=1)
    print(f"wrote {out_path}")


if __name__ == "__main__":
    main()
