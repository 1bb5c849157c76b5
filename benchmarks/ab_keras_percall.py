#!/usr/bin/env python3
"""Stop 30's (31's, 32's) per-call changes off and on in one process, steps interleaved (A B B A).

    python3 benchmarks/ab_keras_percall.py DIR --models nasnetmobile,mobilenetv3small \
        --pairs 40
    python3 benchmarks/ab_keras_percall.py DIR --stop 31 --models densenet121,efficientnetb0

`--stop 32`: A without stop 32's change (Conv2D's filter taps that meet only padding
dropped, conv_crop.py; InceptionV3's layers on 1x1 maps).
`--stop 31`: A without stop 31's change (Conv2D's kn2row path, conv_kn2row.py, chosen when a
node is prepared); its values differ from A's in the last bits (other sums), so the printed
difference is not 0 on models that take it (DenseNet121).

DIR is a folder bench_keras.py wrote (--keep). Two Sessions per model on the same graph, one
BLAS thread: A with the changes off (pools padding into a fresh array per call, Relu/Relu6
of small arrays flattened against the block), B as the code is. (Not switched off:
W phases filled straight from the input, one copy where there were two, and the depthwise
strategies prepared per node: bit for bit the same values, tests/test_conv_strategies.py.)
Both are asked in turn in one process, so a load that comes and goes lands on both alike
(two checkouts in two processes, ab_checkouts.py, could not resolve a few percent on a
machine whose step time moves 1.6x from one run to the next). Prints per model the median
process CPU ms per step of A and B, the median of the per-pair ratios B / A and the largest
difference between their outputs (0: bit for bit).
"""
import argparse
import contextlib
import json
import os
import statistics
import sys
import time
from unittest import mock

import numpy as np

sys.path.insert(0, os.getcwd())


def changes_off_31():
    from tfg.kernels import conv_kn2row
    return mock.patch.object(conv_kn2row, "wanted", lambda *a, **k: False)


def changes_off_32():
    from tfg.kernels import conv_crop
    return mock.patch.object(conv_crop, "cropped", lambda *a, **k: None)


@contextlib.contextmanager
def changes_off():
    from tfg.kernels import clamp, pool_fast
    saved = (pool_fast.kept_padder, clamp._SHAPED_UPTO)
    pool_fast.kept_padder, clamp._SHAPED_UPTO = (lambda *a, **k: None), 0
    try:
        yield
    finally:
        pool_fast.kept_padder, clamp._SHAPED_UPTO = saved


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder")
    ap.add_argument("--models", default="nasnetmobile,mobilenetv3small")
    ap.add_argument("--pairs", type=int, default=40)
    ap.add_argument("--stop", type=int, choices=(30, 31, 32), default=30,
                    help="whose changes A runs without")
    a = ap.parse_args()
    off_ctx = {31: changes_off_31, 32: changes_off_32}.get(a.stop, changes_off)
    import tfg
    from tfg.executor import Session
    for name in a.models.split(","):
        meta = json.load(open(os.path.join(a.folder, name + ".json")))
        feed = {meta["input"]: np.load(os.path.join(a.folder, name + "_x.npy"))}
        graph = tfg.load(os.path.join(a.folder, name + ".pb"))
        old, new = Session(graph, blas_threads=1), Session(graph, blas_threads=1)

        def step(sess, off):
            with off_ctx() if off else contextlib.nullcontext():
                c = time.process_time()
                out = sess.run(meta["output"], feed)
                return time.process_time() - c, out
        for _ in range(4):  # prepared kernels made (with the changes off for A)
            ya, yb = step(old, True)[1], step(new, False)[1]
        diff = float(np.max(np.abs(ya - yb)) / max(np.max(np.abs(ya)), 1e-30))
        ta, tb = [], []
        for i in range(a.pairs):
            order = ((old, True, ta), (new, False, tb))
            for sess, off, times in (order if i % 2 == 0 else order[::-1]):
                times.append(step(sess, off)[0])
        ratio = statistics.median(b / a for a, b in zip(ta, tb))
        print(f"{name:18} off {statistics.median(ta) * 1e3:7.2f} ms  on "
              f"{statistics.median(tb) * 1e3:7.2f} ms  (min {min(ta) * 1e3:.2f} -> "
              f"{min(tb) * 1e3:.2f})  on/off {ratio:.3f}  max |on - off| / max |off| "
              f"{diff:.2g}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
