#!/usr/bin/env python3
"""Where a keras.applications step goes, call by call: the fast program's prepared calls of
one model, each timed in place (one BLAS thread), summed per op, and the step taken apart.

    python3 benchmarks/profile_calls.py /tmp/tfgkerasXXXX nasnetmobile [--reps 10] [--clock cpu]

(`PROF_BT=2` in the environment: the Session and the timed calls on two BLAS threads.)
DIR is a folder bench_keras.py wrote (<model>.pb, .json, _x.npy). Prints the calls per step,
each step's total and, per op, calls, ms per step and us per call (medians over the steps
after the first). A chain (chains.py) counts under its last member's op, so a batch norm's
Mul -> AddV2 -> Relu shows as Relu. Compare two checkouts by running it from each root.

`--clock cpu` times with the thread's CPU time instead of the wall clock (a call that the
scheduler puts aside for another process's time slice is not charged for it: on a loaded
machine the wall sums are mostly other processes). The "step" lines take a step apart
(steps alternating with the per-call loop): whole `Session.run` steps; the same calls in a
plain loop (what the executor's own handling costs is the difference); the calls' sum as
the median of each step's sum, as the sum of each call's median, and as the sum of each
call's minimum -- the last is what per-op comparisons that take every op's best step
(`compare_ops_tf.py --stat min`) add up to, and no step ever takes that little.
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
    ap.add_argument("--clock", choices=("wall", "cpu"), default="wall",
                    help="time calls by the wall clock or by this thread's CPU time")
    a = ap.parse_args()
    import tfg
    from tfg.executor import Session, blas
    clock = time.perf_counter if a.clock == "wall" else time.thread_time
    meta = json.load(open(os.path.join(a.folder, a.model + ".json")))
    x = np.load(os.path.join(a.folder, a.model + "_x.npy"))
    sess = Session(tfg.load(os.path.join(a.folder, a.model + ".pb")), blas_threads=int(os.environ.get("PROF_BT", "1")))
    feeds = {meta["input"]: x}
    for _ in range(4):  # the first steps learn signatures and verify the memory verdicts
        sess.run(meta["output"], feeds)
    sched = next(iter(sess._cache.values())).schedules[0]
    prog = sched.fast
    calls = sched.guards.calls([x]) if sched.guards else prog.calls
    times = np.zeros((a.reps + 1, len(calls)))
    loops, runs = [], []
    with blas.blas_limit(int(os.environ.get("PROF_BT", "1"))):
        for r in range(a.reps + 1):
            t0 = clock()
            sess.run(meta["output"], feeds)
            runs.append(clock() - t0)
            vals = (sched._template or sched._constants()).copy()
            for slot, fi in prog.feed_slots:
                vals[slot] = x
            row = times[r]
            t0 = clock()
            for i, (call, ctx) in enumerate(calls):
                c = clock()
                call(vals, None)
                row[i] = clock() - c
            loops.append(clock() - t0)
    times, loops, runs = times[1:], loops[1:], runs[1:]
    print(f"{a.model}: {len(calls)} calls a step ({a.clock} clock); steps (ms) "
          + " ".join(f"{s * 1e3:.1f}" for s in loops))
    ms = lambda v: f"{v * 1e3:7.2f}"  # noqa: E731
    print(f"step: Session.run median {ms(statistics.median(runs))} min {ms(min(runs))} | "
          f"calls' loop median {ms(statistics.median(loops))} min {ms(min(loops))}")
    print(f"sum of calls: median of the steps' sums {ms(np.median(times.sum(1)))}, sum of "
          f"the calls' medians {ms(np.median(times, 0).sum())}, sum of the calls' minima "
          f"{ms(times.min(0).sum())}")
    per_op, count = collections.defaultdict(float), collections.Counter()
    medians = np.median(times, 0)
    for (call, ctx), t in zip(calls, medians):
        per_op[ctx.op] += t
        count[ctx.op] += 1
    for op, t in sorted(per_op.items(), key=lambda kv: -kv[1]):
        n = count[op]
        print(f"{op:28} {n:5d} calls {t * 1e3:8.2f} ms  {t / n * 1e6:7.1f} us/call")
    return 0


if __name__ == "__main__":
    sys.exit(main())
