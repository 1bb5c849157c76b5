#!/usr/bin/env python3
"""Per call of a keras.applications step under several BLAS settings, inside real steps.

    python3 benchmarks/profile_threads.py DIR inceptionv3 --settings 1,2 --reps 25 [--cpu]
    chrt -f 10 python3 benchmarks/profile_threads.py DIR inceptionv3 --settings 1,2

DIR is a folder `bench_keras.py --keep` wrote. One Session per setting (`1`, `2`: fixed BLAS
thread counts, which also give chunked convolutions that many threads; `default`: the
adaptive default), the steps interleaved setting by setting. Unlike profile_calls.py, which
times the fast program's calls in a loop of its own under one BLAS thread, each prepared call
is wrapped in place and the steps run through `Session.run`, so the step's BLAS limit, the
GEMM floor and the chunk threads are the ones a user's step gets. Prints per setting the
step's median wall and process CPU and the sum of the calls' medians, then per (family,
output shape, filter) the calls and their median us per call under each setting. `--cpu`
times the calls in thread CPU instead of wall (one BLAS thread only: other threads' work is
not counted). On a shared machine, `chrt -f 10` (root) keeps other processes off the cores
while it runs: the nearest this VM gets to a quiet machine (caches and the hypervisor are
still shared: whole steps moved +-20% between runs that way, calls less).
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
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))


def wrap_calls(sess, x, thread_cpu):
    """Wrap each prepared call of the session's fast program (for the feed signature of
    `x`) with a timer; returns (per-call times, the calls' contexts, {call index: (input
    shapes, output shape)} filled on the first wrapped step)."""
    sched = next(iter(sess._cache.values())).schedules[0]
    prog = sched.fast
    calls = sched.guards.calls([x]) if sched.guards else prog.calls
    ins_of = {id(e[1]): e[2] for e in prog.entries}
    outs_of = {id(e[1]): o for e, o in zip(prog.entries, prog.out_slots)}
    times, shapes = collections.defaultdict(list), {}
    clock = time.thread_time if thread_cpu else time.perf_counter

    def shape(vals, slot):
        return list(getattr(vals[slot], "shape", ())) if slot is not None else None

    for i, (call, ctx) in enumerate(list(calls)):
        def timed(vals, step, call=call, i=i, ctx=ctx):
            if i not in shapes:
                ins = [shape(vals, s) for s in ins_of.get(id(ctx), ())]
                call(vals, step)
                outs = outs_of.get(id(ctx))
                shapes[i] = (ins, shape(vals, outs[0]) if outs else None)
                return
            t = clock()
            call(vals, step)
            times[i].append(clock() - t)
        calls[i] = (timed, ctx)
    return times, [ctx for _, ctx in calls], shapes


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder")
    ap.add_argument("model")
    ap.add_argument("--settings", default="1,2")
    ap.add_argument("--reps", type=int, default=25)
    ap.add_argument("--cpu", action="store_true", help="thread CPU per call instead of wall")
    a = ap.parse_args()
    import tfg
    from compare_ops_tf import shape_key
    from tfg.executor import Session
    meta = json.load(open(os.path.join(a.folder, a.model + ".json")))
    x = np.load(os.path.join(a.folder, a.model + "_x.npy"))
    feed = {meta["input"]: x}
    graph = tfg.load(os.path.join(a.folder, a.model + ".pb"))
    runs = {}
    for s in a.settings.split(","):
        sess = Session(graph, blas_threads=None if s == "default" else int(s))
        for _ in range(4):  # signatures learned, memory verdicts verified
            sess.run(meta["output"], feed)
        runs[s] = (sess, *wrap_calls(sess, x, a.cpu), [])
    for r in range(a.reps + 1):  # the first step reads the shapes, untimed
        for s, (sess, _, _, _, steps) in runs.items():
            t, c = time.perf_counter(), time.process_time()
            sess.run(meta["output"], feed)
            if r:
                steps.append((time.perf_counter() - t, time.process_time() - c))
    groups = collections.defaultdict(lambda: collections.defaultdict(list))
    for s, (sess, times, ctxs, shapes, steps) in runs.items():
        per = [statistics.median(times[i]) for i in range(len(ctxs))]
        print(f"{s}: step wall {statistics.median(v[0] for v in steps) * 1e3:.2f} ms, cpu "
              f"{statistics.median(v[1] for v in steps) * 1e3:.2f} ms, calls "
              f"{sum(per) * 1e3:.2f} ms")
        for i, (ctx, t) in enumerate(zip(ctxs, per)):
            groups[shape_key(ctx.op, *shapes[i])][s].append(t)
    names = list(runs)
    print(f"{'family':10} {'output, filter':34} {'n':>3} " + " ".join(f"{s:>9}" for s in names))
    for k, v in sorted(groups.items(), key=lambda kv: -sum(kv[1][names[0]])):
        shp = " ".join("x".join(map(str, d)) if d else "?" for d in k[1])
        n = len(v[names[0]])
        print(f"{k[0]:10} {shp:34} {n:3d} " + " ".join(
            f"{sum(v[s]) / n * 1e6:9.1f}" for s in names))
    return 0


if __name__ == "__main__":
    sys.exit(main())
