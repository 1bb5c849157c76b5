#!/usr/bin/env python3
"""Where a keras.applications step goes, call by call: the fast program's prepared calls of
one model, each timed in place (wall, one BLAS thread), summed per op.

    python3 benchmarks/profile_calls.py /tmp/tfgkerasXXXX nasnetmobile [--reps 10]

DIR is a folder bench_keras.py wrote (<model>.pb, .json, _x.npy). Prints the calls per step,
each step's total and, per op, calls, ms per step and us per call (medians over the steps
after the first). A chain (chains.py) counts under its last member's op, so a batch norm's
Mul -> AddV2 -> Relu shows as Relu. Compare two checkouts by running it from each root.
"""
import argparse
import collections
import json
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.getcwd())


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder")
    ap.add_argument("model")
    ap.add_argument("--reps", type=int, default=10)
    a = ap.parse_args()
    import tfg
    from tfg.executor import Session, blas
    meta = json.load(open(os.path.join(a.folder, a.model + ".json")))
    x = np.load(os.path.join(a.folder, a.model + "_x.npy"))
    sess = Session(tfg.load(os.path.join(a.folder, a.model + ".pb")), blas_threads=1)
    for _ in range(4):  # the first steps learn signatures and verify the memory verdicts
        sess.run(meta["output"], {meta["input"]: x})
    sched = next(iter(sess._cache.values())).schedules[0]
    prog = sched.fast
    calls = sched.guards.calls([x]) if sched.guards else prog.calls
    per_op, steps = collections.defaultdict(list), []
    with blas.blas_limit(1):
        for r in range(a.reps + 1):
            vals = (sched._template or sched._constants()).copy()
            for slot, fi in prog.feed_slots:
                vals[slot] = x
            spent = collections.defaultdict(float)
            count = collections.Counter()
            t0 = time.perf_counter()
            for call, ctx in calls:
                c = time.perf_counter()
                call(vals, None)
                spent[ctx.op] += time.perf_counter() - c
                count[ctx.op] += 1
            steps.append(time.perf_counter() - t0)
            if r:
                for op, t in spent.items():
                    per_op[op].append((t, count[op]))
    print(f"{a.model}: {len(calls)} calls a step; steps (ms) "
          + " ".join(f"{s * 1e3:.1f}" for s in steps[1:]))
    rows = sorted(((statistics.median(t for t, _ in v), v[0][1], op)
                   for op, v in per_op.items()), reverse=True)
    for t, n, op in rows:
        print(f"{op:28} {n:5d} calls {t * 1e3:8.2f} ms  {t / n * 1e6:7.1f} us/call")
    return 0


if __name__ == "__main__":
    sys.exit(main())
