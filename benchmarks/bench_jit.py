#!/usr/bin/env python3
"""Compiled loops (tfg/kernels/jit.py: numba, the perf extra) against the numpy kernels they
replace, in one process: whole keras.applications steps, and the layers alone.

    python3 benchmarks/bench_jit.py models DIR [--models nasnetmobile,...] [--pairs 16]
    python3 benchmarks/bench_jit.py layers [--reps 40]

`models`: DIR is a folder `bench_keras.py --keep` wrote. Two Sessions per model, one prepared
with TFG_JIT=0 (numpy kernels) and one with compiled loops, one BLAS thread each (the loops
are single-threaded kernels; BLAS threading is another question), steps alternating in both
orders; prints each median and their ratio, and both outputs' error against TensorFlow's.
`layers`: the depthwise and AvgPool shapes of the keras.applications models at batch 2,
96x96 (filters hot), median microseconds per call of the numpy strategy and the loop, and
checks they agree.
"""
import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

DEPTHWISE = [((2, 24, 24, 16), 3, 1), ((2, 12, 12, 72), 3, 1), ((2, 48, 48, 16), 3, 2),
             ((2, 24, 24, 72), 5, 2), ((2, 6, 6, 240), 5, 1), ((2, 3, 3, 576), 5, 1),
             ((2, 3, 3, 176), 3, 1), ((2, 6, 6, 88), 5, 1), ((2, 12, 12, 44), 5, 1),
             ((2, 24, 24, 11), 7, 1), ((2, 24, 24, 144), 3, 1), ((2, 48, 48, 96), 3, 2),
             ((2, 12, 12, 240), 5, 1)]
AVG_POOLS = [((2, 12, 12, 44), 3, 1, "SAME"), ((2, 3, 3, 176), 3, 1, "SAME"),
             ((2, 9, 9, 192), 3, 1, "SAME"), ((2, 4, 4, 768), 3, 1, "SAME"),
             ((2, 21, 21, 192), 3, 2, "VALID"), ((2, 47, 47, 96), 3, 2, "VALID")]


def _median_us(f, reps):
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        f()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e6


def _with_jit(flag, make):
    old = os.environ.get("TFG_JIT")
    os.environ["TFG_JIT"] = flag
    try:
        return make()
    finally:
        if old is None:
            del os.environ["TFG_JIT"]
        else:
            os.environ["TFG_JIT"] = old


def layers(reps):
    from tfg.executor.blas import blas_limit
    from tfg.kernels import conv_depthwise, pool_fast
    from tfg.kernels.conv_geom import Geom
    from tfg.kernels.pool_ops import _avg_divisor
    rng = np.random.default_rng(0)
    with blas_limit(1):
        for shape, k, s in DEPTHWISE:
            x = rng.standard_normal(shape).astype(np.float32)
            w = rng.standard_normal((k, k, shape[3], 1)).astype(np.float32)
            w.flags.writeable = False
            g = Geom({"padding": b"SAME", "strides": [1, s, s, 1]}, shape[1], shape[2], k, k)
            runs = {f: _with_jit(f, lambda: conv_depthwise.prepared(shape, w.shape, g))
                    for f in ("0", "1")}
            caches = {"0": {}, "1": {}}
            outs = {f: [runs[f](x, w, caches[f]) for _ in range(2)][-1] for f in runs}
            err = float(np.abs(outs["0"] - outs["1"]).max())
            t = {f: _median_us(lambda f=f: runs[f](x, w, caches[f]), reps) for f in runs}
            print(f"depthwise {'x'.join(map(str, shape)):14} {k}x{k}/{s}  numpy {t['0']:7.1f} "
                  f"us  loop {t['1']:7.1f} us  {t['0'] / t['1']:.2f}x  |diff| {err:.1e}")
        for shape, k, s, padding in AVG_POOLS:
            x = rng.standard_normal(shape).astype(np.float32)
            g = Geom({"padding": padding.encode(), "strides": [1, s, s, 1]}, shape[1],
                     shape[2], k, k)
            div = _avg_divisor(g, shape, np.float32)
            runs = {f: _with_jit(f, lambda: pool_fast.prepared(g, shape, np.float32, np.add, 0,
                                                               div)) for f in ("0", "1")}
            compiled = [runs["1"](x) for _ in range(2)][-1]  # (the node's first call: numpy)
            same = np.array_equal(runs["0"](x), compiled)
            t = {f: _median_us(lambda f=f: runs[f](x), reps) for f in runs}
            print(f"avgpool   {'x'.join(map(str, shape)):14} {k}x{k}/{s}  numpy {t['0']:7.1f} "
                  f"us  loop {t['1']:7.1f} us  {t['0'] / t['1']:.2f}x  same bits {same}")


def models(folder, names, pairs):
    from abtime import switch_ab
    from tfg.executor import Session
    # tfg's own depthwise kernels in both Sessions: oneDNN, where installed, would run them
    # instead of either (benchmarks/bench_onednn.py compares that)
    os.environ["TFG_ONEDNN"] = "0"
    for name in names:
        med, errs = switch_ab(folder, name, "TFG_JIT", lambda g: Session(g, blas_threads=1),
                              pairs)
        print(f"{name:18} numpy {med['0']:7.2f} ms  loops {med['1']:7.2f} ms  "
              f"ratio {med['1'] / med['0']:.3f}  err vs TF {errs['0']:.1e} / {errs['1']:.1e}  "
              f"(load {os.getloadavg()[0]:.2f})")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="what", required=True)
    m = sub.add_parser("models")
    m.add_argument("folder")
    m.add_argument("--models", default="mobilenetv2,mobilenetv3small,efficientnetb0,"
                                       "nasnetmobile,inceptionv3")
    m.add_argument("--pairs", type=int, default=16)
    lay = sub.add_parser("layers")
    lay.add_argument("--reps", type=int, default=40)
    a = ap.parse_args()
    from tfg.kernels import jit
    if not jit.wanted():
        raise SystemExit("numba is not installed (pip install 'tfg[perf]'), or TFG_JIT=0")
    if a.what == "layers":
        layers(a.reps)
    else:
        models(a.folder, [n for n in a.models.split(",") if n], a.pairs)
    return 0


if __name__ == "__main__":
    sys.exit(main())
