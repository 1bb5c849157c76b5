#!/usr/bin/env python3
"""The fast program against the plain one (tfg/executor/program.py), in one process.

    python3 benchmarks/bench_program.py --graphs /tmp/g [--keras DIR] [--cases chain,mlp]

Two Sessions of each graph, one built with TFG_FAST_PROGRAM=0 (a prepared call per node) and
one with the default fast program (Consts set once, Identities sharing slots, elementwise
chains fused), run alternately (A B B A ...) with BLAS at one thread; prints the medians of
process CPU time and wall time per step and their ratios fast / plain, and checks that both
give the same bytes. --graphs: bench_run's graphs (made by benchmarks/bench_step_cpu.py
--graphs DIR --tf-python ...); --keras: a folder bench_keras.py wrote (`tfgkeras*` under the
temp dir: <model>.pb, <model>.json, <model>_x.npy), whose models join the cases.
"""
import argparse
import json
import os
import statistics
import sys
import time

sys.path.insert(0, os.getcwd())  # the checkout being measured

import numpy as np  # noqa: E402


def load_case(name, graphs, keras):
    import tfg
    if keras and os.path.exists(os.path.join(keras, name + ".pb")):
        meta = json.load(open(os.path.join(keras, name + ".json")))
        feeds = {meta["input"]: np.load(os.path.join(keras, name + "_x.npy"))}
        return tfg.load(os.path.join(keras, name + ".pb")), meta["output"], feeds, None, None
    meta = json.load(open(os.path.join(graphs, name + ".json")))
    with np.load(os.path.join(graphs, name + "_feeds.npz")) as f:
        feeds = {k: f[k] for k in f.files}
    return (tfg.load(os.path.join(graphs, name + ".pb")), meta["fetches"], feeds,
            meta["targets"], meta["init"])


def compare(name, graphs, keras, reps):
    from tfg.executor import Session
    graph, fetches, feeds, targets, init = load_case(name, graphs, keras)
    sessions, outs = {}, {}
    for mode in ("plain", "fast"):
        os.environ["TFG_FAST_PROGRAM"] = "0" if mode == "plain" else "1"
        s = sessions[mode] = Session(graph, blas_threads=1)
        if init:
            s.run(None, targets=init)
        for _ in range(3):
            outs[mode] = s.run(fetches, feeds, targets=targets)
    os.environ.pop("TFG_FAST_PROGRAM")
    listed = {m: o if isinstance(o, list) else [o] for m, o in outs.items()}
    # (a training step changes its variables every step: its two runs differ by design)
    same = None if init else all(np.asarray(a).tobytes() == np.asarray(b).tobytes()
                                 for a, b in zip(listed["plain"], listed["fast"]))
    cpu, wall = {"plain": [], "fast": []}, {"plain": [], "fast": []}
    for r in range(reps):
        for mode in (("plain", "fast") if r % 2 == 0 else ("fast", "plain")):
            c, t = time.process_time(), time.perf_counter()
            sessions[mode].run(fetches, feeds, targets=targets)
            cpu[mode].append(time.process_time() - c)
            wall[mode].append(time.perf_counter() - t)
    med = {k: {m: statistics.median(v[m]) * 1e3 for m in v} for k, v in
           (("cpu", cpu), ("wall", wall))}
    return {"case": name, "plain_cpu_ms": med["cpu"]["plain"], "fast_cpu_ms": med["cpu"]["fast"],
            "plain_wall_ms": med["wall"]["plain"], "fast_wall_ms": med["wall"]["fast"],
            "cpu_ratio": med["cpu"]["fast"] / med["cpu"]["plain"],
            "wall_ratio": med["wall"]["fast"] / med["wall"]["plain"], "same_values": same}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--graphs", required=True, help="bench_run's graphs (bench_step_cpu.py)")
    ap.add_argument("--keras", default=None, help="a folder bench_keras.py wrote")
    ap.add_argument("--cases", default=None,
                    help="comma-separated (default: chain,mlp,cnn and every model in --keras)")
    ap.add_argument("--reps", type=int, default=20)
    a = ap.parse_args()
    if a.cases:
        cases = a.cases.split(",")
    else:
        cases = ["chain", "mlp", "cnn"] + (sorted(f[:-3] for f in os.listdir(a.keras)
                                                   if f.endswith(".pb")) if a.keras else [])
    print(f"{'case':18} {'plain cpu':>10} {'fast cpu':>10} {'ratio':>6} {'plain wall':>11} "
          f"{'fast wall':>10} {'ratio':>6}  same")
    for name in cases:
        r = compare(name, a.graphs, a.keras, a.reps)
        print(f"{name:18} {r['plain_cpu_ms']:8.2f}ms {r['fast_cpu_ms']:8.2f}ms "
              f"{r['cpu_ratio']:6.2f} {r['plain_wall_ms']:9.2f}ms {r['fast_wall_ms']:8.2f}ms "
              f"{r['wall_ratio']:6.2f}  {r['same_values']}", flush=True)
    print(f"load average {os.getloadavg()[0]:.1f}")


if __name__ == "__main__":
    main()
