#!/usr/bin/env python3
"""Two (or more) tfg checkouts A B B A on the same keras.applications or loop graphs: one
persistent worker process per checkout, asked in turn, process CPU time and wall time per step.

    python3 benchmarks/ab_checkouts.py --keras DIR --models nasnetmobile,mobilenetv3small \
        --pairs 30 /work/main /work/wt-nasnet
    python3 benchmarks/ab_checkouts.py --loops DIR --models lstm,gru,bilstm OLD NEW

With --loops, DIR is a folder `bench_loops.py --save DIR` wrote (<case>.pb, <case>.json with
the fetches, <case>_feeds.npz, <case>_expected.npz).

DIR is a folder bench_keras.py wrote (`tfgkeras*` under the temp dir: <model>.pb,
<model>.json, <model>_x.npy, <model>_y.npy). Each worker runs in its checkout's root, so it
imports that checkout's tfg, builds `Session(graph, blas_threads=1)` per model
(`--blas-threads` sets another count, or `default`), checks its output against
TensorFlow's (`err`: max |diff| / max |y|) and then times one step per request. The
checkouts answer in alternating order (A B, then B A) so that a load that comes and goes
lands on both alike. Prints, per model and checkout: the minimum, first
quartile and median of process CPU ms per step, the median wall ms, and the median CPU
and wall relative to the first checkout. On a shared machine, compare the CPU columns.
"""
import argparse
import os
import statistics
import subprocess
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(1, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import machine  # noqa: E402

WORKER = r'''
import json, os, sys, time
sys.path.insert(0, os.getcwd())
import numpy as np
import tfg
from tfg.executor import Session
folder, names, kind = sys.argv[1], sys.argv[2].split(","), sys.argv[3]
blas_threads = None if sys.argv[4] == "default" else int(sys.argv[4])
runs = {}
for name in names:
    meta = json.load(open(os.path.join(folder, name + ".json")))
    sess = Session(tfg.load(os.path.join(folder, name + ".pb")), blas_threads=blas_threads)
    if kind == "keras":
        feeds, fetch = {meta["input"]: np.load(os.path.join(folder, name + "_x.npy"))}, \
            meta["output"]
        ys = [np.load(os.path.join(folder, name + "_y.npy"))]
    else:  # bench_loops.py --save
        with np.load(os.path.join(folder, name + "_feeds.npz")) as f:
            feeds = {k: f[k] for k in f.files}
        with np.load(os.path.join(folder, name + "_expected.npz")) as f:
            ys = [f[k] for k in sorted(f.files, key=lambda k: int(k.split("_")[1]))]
        fetch = meta["fetches"]
    out = sess.run(fetch, feeds)
    outs = [out] if kind == "keras" else out
    err = max(float(np.max(np.abs(o - y)) / max(np.max(np.abs(y)), 1e-30))
              for o, y in zip(outs, ys))
    for _ in range(3):
        sess.run(fetch, feeds)
    runs[name] = (sess, fetch, feeds, err)
print("ready", flush=True)
for line in sys.stdin:
    sess, fetch, feeds, err = runs[line.strip()]
    c, t = time.process_time(), time.perf_counter()
    sess.run(fetch, feeds)
    print(time.process_time() - c, time.perf_counter() - t, err, flush=True)
'''


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("checkouts", nargs="+", help="checkout roots; the first is the baseline")
    where = ap.add_mutually_exclusive_group(required=True)
    where.add_argument("--keras", help="a folder bench_keras.py wrote")
    where.add_argument("--loops", help="a folder `bench_loops.py --save` wrote")
    ap.add_argument("--models", default=None,
                    help="models or loop cases (default: nasnetmobile,mobilenetv3small / "
                         "lstm,gru,bilstm)")
    ap.add_argument("--pairs", type=int, default=20)
    ap.add_argument("--blas-threads", default="1",
                    help="the Sessions' blas_threads: a count (default 1), or 'default' "
                         "(the Session's default, 'adaptive', with OpenBLAS's threads left "
                         "to it; compare wall only on a quiet machine)")
    a = ap.parse_args()
    kind, folder = ("keras", a.keras) if a.keras else ("loops", a.loops)
    a.models = a.models or ("nasnetmobile,mobilenetv3small" if a.keras else "lstm,gru,bilstm")
    models = a.models.split(",")
    for m in models:
        if not os.path.exists(os.path.join(folder, m + ".pb")):
            print(f"ab_checkouts: no {m}.pb in {folder} (run bench_{kind}.py first)",
                  file=sys.stderr)
            sys.exit(2)
    env = dict(os.environ)
    if a.blas_threads == "1":
        env["OPENBLAS_NUM_THREADS"] = "1"
    workers = {d: subprocess.Popen([sys.executable, "-c", WORKER, folder, a.models, kind,
                                    a.blas_threads],
                                   cwd=d,
                                   env=env, text=True, stdin=subprocess.PIPE,
                                   stdout=subprocess.PIPE)
               for d in a.checkouts}
    for d, w in workers.items():
        if w.stdout.readline().strip() != "ready":
            print(f"ab_checkouts: the worker in {d} failed to start", file=sys.stderr)
            sys.exit(2)
    res = {(d, m): [] for d in a.checkouts for m in models}
    err = {}
    for r in range(a.pairs):
        for m in models:
            for d in (a.checkouts if r % 2 == 0 else a.checkouts[::-1]):
                workers[d].stdin.write(m + "\n")
                workers[d].stdin.flush()
                cpu, wall, err[(d, m)] = map(float, workers[d].stdout.readline().split())
                res[(d, m)].append((cpu * 1e3, wall * 1e3))
    for w in workers.values():
        w.stdin.close()
        w.wait()
    for m in models:
        base = None
        for d in a.checkouts:
            cpu = sorted(c for c, _ in res[(d, m)])
            med, wall = statistics.median(cpu), statistics.median(t for _, t in res[(d, m)])
            base = base or (med, wall)
            print(f"{m:18} {d:24} cpu min {cpu[0]:6.2f} q1 {cpu[len(cpu) // 4]:6.2f} "
                  f"median {med:6.2f} ms  wall {wall:6.2f} ms  cpu/A {med / base[0]:.3f} "
                  f"wall/A {wall / base[1]:.3f}  err {err[(d, m)]:.1e}")
    print(f"load average {os.getloadavg()[0]:.1f}; machine: {machine.summary(machine.describe())}")


if __name__ == "__main__":
    main()
