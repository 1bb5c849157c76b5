#!/usr/bin/env python3
"""float32 Sigmoid, swish and Tanh: numpy's functions against the compiled loops of
tfg/kernels/vector_math.py (numba: the `perf` extra), per call and in whole steps.

    python3 benchmarks/bench_vector_math.py ops                  # per call, by size
    python3 benchmarks/bench_vector_math.py models DIR [--models efficientnetb0,...] [--pairs 30]
    python3 benchmarks/bench_vector_math.py rnn DIR [--pairs 60]  # a case bench_rnn.py --save kept

`ops` times each function on float32 arrays of 16 to 442,368 values (EfficientNetB0's largest
swish), the numpy path (what the kernels run before a Session's second step, or without
numba) against the loops, best of 7 rounds. `models` runs the keras.applications graphs that
`bench_keras.py --keep DIR` wrote in one Session, steps alternating between the loops held off
and on (A B, then B A; one BLAS thread unless --blas-threads), and prints the medians and the
output's largest error against TensorFlow's with each. TensorFlow is not needed here.
"""
import argparse
import json
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import numpy as np  # noqa: E402

from tfg.kernels import fused, jit, math_ops, vector_math  # noqa: E402

SIZES = [16, 512, 4096, 20736, 147456, 442368]


def _best_us(fn, calls):
    fn()
    rounds = []
    for _ in range(7):
        t = time.perf_counter()
        for _ in range(calls):
            fn()
        rounds.append((time.perf_counter() - t) / calls * 1e6)
    return min(rounds)


def _switch(on):
    """Hold vector_math's loops off (the numpy path) or let them run."""
    vector_math._loaded[:] = [_switch.loops if on else None]


def _start():
    jit.mark_warm()
    _switch.loops = vector_math._loops()
    if _switch.loops is None:
        raise SystemExit("numba is not installed (or TFG_JIT=0): nothing to compare")


def ops():
    _start()
    cases = {
        "Sigmoid": lambda x, o: math_ops.sigmoid_into(x, o),
        "Tanh": lambda x, o: math_ops.tanh_into(x, o),
        "swish": lambda x, o: fused._swish(np, x),  # (a fresh array, as the activation's)
    }
    print(f"{'function':18} {'values':>8} {'numpy us':>10} {'loop us':>9} {'ratio':>6}")
    rng = np.random.default_rng(0)
    for name, fn in cases.items():
        for n in SIZES:
            x = (rng.standard_normal(n) * 3).astype(np.float32)
            out = x.copy()
            calls = max(20, 2_000_000 // (n + 2000))
            times = {}
            for on in (False, True):
                _switch(on)
                times[on] = _best_us(lambda: fn(x, out), calls)
            print(f"{name:18} {n:>8} {times[False]:>10.2f} {times[True]:>9.2f} "
                  f"{times[True] / times[False]:>6.2f}")


def _alternate(step, pairs):
    """{False: [s], True: [s]}: step times with the loops off and on, alternating."""
    for on in (False, True, False, True):
        _switch(on)
        step()
    times = {False: [], True: []}
    for r in range(pairs):
        for on in ((True, False) if r % 2 else (False, True)):
            _switch(on)
            t = time.perf_counter()
            step()
            times[on].append(time.perf_counter() - t)
    return times


def _report(name, times, errors=None):
    off, on = (statistics.median(times[k]) * 1e3 for k in (False, True))
    line = (f"{name:16} numpy {off:7.2f} ms  loops {on:7.2f} ms  ratio {on / off:.3f}  "
            f"(minimums {min(times[False]) * 1e3:.2f} / {min(times[True]) * 1e3:.2f})")
    if errors:
        line += f"  max error vs TF {errors[False]:.1e} / {errors[True]:.1e}"
    print(line)


def models(folder, names, pairs, blas_threads):
    import tfg
    from tfg.executor import Session

    _start()
    for name in names:
        meta = json.load(open(os.path.join(folder, name + ".json")))
        x = np.load(os.path.join(folder, name + "_x.npy"))
        y = np.load(os.path.join(folder, name + "_y.npy"))
        sess = Session(tfg.load(os.path.join(folder, name + ".pb")), blas_threads=blas_threads)
        feeds = {meta["input"]: x}
        errors = {}
        for on in (False, True):
            _switch(on)
            got = sess.run(meta["output"], feeds)
            errors[on] = float(np.abs(got - y).max() / max(1e-12, float(np.abs(y).max())))
        _report(name, _alternate(lambda: sess.run(meta["output"], feeds), pairs), errors)


def rnn(folder, pairs, blas_threads):
    from bench_rnn import FETCHES, load_case

    _start()
    sess, feeds, _, _, _ = load_case(folder, blas_threads)
    _report("rnn50+grad", _alternate(lambda: sess.run(FETCHES, feeds), pairs))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=["ops", "models", "rnn"])
    ap.add_argument("folder", nargs="?")
    ap.add_argument("--models", default="efficientnetb0,mobilenetv3small,nasnetmobile")
    ap.add_argument("--pairs", type=int, default=30)
    ap.add_argument("--blas-threads", type=int, default=1)
    a = ap.parse_args()
    if a.what == "ops":
        ops()
    elif a.folder is None:
        ap.error(f"{a.what} needs the folder of its graphs")
    elif a.what == "models":
        models(a.folder, a.models.split(","), a.pairs, a.blas_threads)
    else:
        rnn(a.folder, a.pairs, a.blas_threads)


if __name__ == "__main__":
    main()
