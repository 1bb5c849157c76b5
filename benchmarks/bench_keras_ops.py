#!/usr/bin/env python3
"""Where a keras.applications step's time goes, per op and per node, on the fast path: each
prepared call of the step timed in place (wall and process CPU time, so CPU > wall says a
call used the second core).

    python3 benchmarks/bench_keras_ops.py DIR --models mobilenetv2 [--blas-threads 2]
        [--evict-mb 48]

DIR is a folder bench_keras.py (or its TensorFlow worker) wrote: NAME.pb, NAME.json,
NAME_x.npy. Prints, per model, the op table (calls a step, wall and CPU ms a step, CPU/wall)
and the --top heaviest nodes with their output shapes. The timing adds ~2 us a call (two
clocks), so sums run a little over an untimed step (printed beside them).
"""
import argparse
import collections
import json
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

import tfg  # noqa: E402
from tfg.executor import Session  # noqa: E402
from tfg.executor import static_guards  # noqa: E402
from tfg.executor.fastpath import Schedule  # noqa: E402
from tfg.kernels import registry  # noqa: E402

SIGNED_OPS = ("Conv2D", "_FusedConv2D", "DepthwiseConv2dNative", "_FusedDepthwiseConv2dNative",
              "MatMul", "_FusedMatMul", "MaxPool", "AvgPool")


def record_signatures(sigs):
    """Wrap the CPU kernels of SIGNED_OPS (before Sessions are made) to keep, per node, its
    inputs' shapes, strides, padding and fused ops."""
    registry.get_kernel("Conv2D")  # loads every kernel module
    for op in SIGNED_OPS:
        kd = registry._KERNELS.get((op, "CPU"))
        if kd is None:
            continue

        def fn(ctx, *args, _fn=kd.fn):
            if ctx.name not in sigs:
                a = ctx.attrs
                fused = [f.decode() if isinstance(f, bytes) else f
                         for f in a.get("fused_ops", [])]
                strides = list(a.get("strides", a.get("ksize", [])))
                pad = a.get("padding", b"")
                shapes = ["x".join(str(d) for d in getattr(v, "shape", ())) for v in args[:2]]
                sigs[ctx.name] = (
                    " * ".join(shapes)
                    + f" s{strides[1:3]} {pad.decode() if isinstance(pad, bytes) else pad}"
                    + (f" {'+'.join(fused)}" if fused else ""))
            return _fn(ctx, *args)
        registry._KERNELS[(op, "CPU")] = registry.KernelDef(
            kd.op, kd.device_type, fn, kd.needs_step, kd.ref_inputs, kd.forwards_input,
            kd.host_inputs, kd.host_only)


def _timed_calls(calls, stats):
    """The calls, each wrapped to add (wall, cpu) to stats[(op, name)]."""
    out = []
    for call, ctx in calls:
        key = (ctx.op, ctx.name)

        def timed(vals, step, call=call, key=key, ctx=ctx):
            w, c = time.perf_counter(), time.process_time()
            call(vals, step)
            s = stats[key]
            s[0] += time.perf_counter() - w
            s[1] += time.process_time() - c
            s[2] += 1
        out.append((timed, ctx))
    return out


def profile(graph, output, feeds, steps, blas_threads, stats, evict_mb=0):
    """Run `steps` untimed steps, then `steps` timed ones; returns the median untimed step.
    `evict_mb`: MB written before each step (TensorFlow's step in bench_keras.py's rounds
    leaves tfg's weights and activations out of the caches)."""
    sess = Session(graph, blas_threads=blas_threads)
    junk = np.ones(max(1, evict_mb) << 18, np.float32)
    plain = []
    for _ in range(max(3, steps)):
        if evict_mb:
            junk += 1
        t = time.perf_counter()
        sess.run(output, feeds)
        plain.append(time.perf_counter() - t)
    orig_calls = static_guards.SignatureGuards.calls
    orig_run = Schedule.run
    wrapped = {}

    def calls(self, feed_values):
        got = orig_calls(self, feed_values)
        if got is None:
            return None
        key = id(got)
        if key not in wrapped:
            wrapped[key] = _timed_calls(got, stats)
        return wrapped[key]

    def run(self, step, feed_values, trace=None, memory=None):
        if self.guards is None and trace is None and memory is None:
            key = id(self.fast.calls)
            if key not in wrapped:
                wrapped[key] = _timed_calls(self.fast.calls, stats)
            saved, self.fast.calls = self.fast.calls, wrapped[key]
            try:
                return orig_run(self, step, feed_values)
            finally:
                self.fast.calls = saved
        return orig_run(self, step, feed_values, trace, memory)

    static_guards.SignatureGuards.calls, Schedule.run = calls, run
    try:
        for _ in range(steps):
            if evict_mb:
                junk += 1
            sess.run(output, feeds)
    finally:
        static_guards.SignatureGuards.calls, Schedule.run = orig_calls, orig_run
    return float(np.median(plain))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir")
    ap.add_argument("--models", default="mobilenetv2")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--blas-threads", default=None,
                    help="Session(blas_threads=...): a count or 'adaptive' (default)")
    ap.add_argument("--top", type=int, default=15)
    ap.add_argument("--evict-mb", type=int, default=0,
                    help="MB written before each step: cold caches, as after TensorFlow's "
                         "step in bench_keras.py")
    a = ap.parse_args()
    sigs = {}
    record_signatures(sigs)
    bt = a.blas_threads
    if bt is not None and bt.isdigit():
        bt = int(bt)
    for name in a.models.split(","):
        meta = json.load(open(os.path.join(a.dir, name + ".json")))
        graph = tfg.load(os.path.join(a.dir, name + ".pb"))
        feeds = {meta["input"]: np.load(os.path.join(a.dir, name + "_x.npy"))}
        stats = collections.defaultdict(lambda: [0.0, 0.0, 0])
        step = profile(graph, meta["output"], feeds, a.steps, bt, stats, a.evict_mb)
        by_op = collections.defaultdict(lambda: [0.0, 0.0, 0])
        for (op, _), (w, c, n) in stats.items():
            o = by_op[op]
            o[0] += w
            o[1] += c
            o[2] += n
        tw = sum(v[0] for v in by_op.values()) / a.steps
        tc = sum(v[1] for v in by_op.values()) / a.steps
        print(f"== {name}: untimed step median {step * 1e3:.2f} ms; timed calls sum "
              f"wall {tw * 1e3:.2f} ms, cpu {tc * 1e3:.2f} ms a step")
        print(f"{'op':32} {'calls':>6} {'wall ms':>8} {'cpu ms':>8} {'cpu/wall':>8}")
        for op, (w, c, n) in sorted(by_op.items(), key=lambda kv: -kv[1][0]):
            print(f"{op:32} {n / a.steps:6.0f} {w / a.steps * 1e3:8.3f} "
                  f"{c / a.steps * 1e3:8.3f} {c / max(w, 1e-12):8.2f}")
        print(f"-- top {a.top} nodes (us a call: wall / cpu)")
        for (op, node), (w, c, n) in sorted(stats.items(), key=lambda kv: -kv[1][0])[:a.top]:
            print(f"  {op:28} {w / n * 1e6:8.1f} {c / n * 1e6:8.1f}  {sigs.get(node, '')}"
                  f"  {node[-40:]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
