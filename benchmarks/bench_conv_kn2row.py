#!/usr/bin/env python3
"""kn2row (tfg/kernels/conv_kn2row.py) against im2col (conv_gemm / conv_chunks) per layer:
the stride-1 convolutions of DenseNet121 and InceptionV3 at batch 2, 96x96 input.

    python3 benchmarks/bench_conv_kn2row.py [--rounds 15] [--all]

One BLAS thread. Each round times every layer both ways, interleaved (A B per layer), each way
cycling through 16 read-only copies of the filter (so the filter comes from L3 as in a model's
step, not from L1), process CPU time of `--calls` calls. Prints per layer the median per-call
time of each way over the rounds, the ratio kn2row / im2col, whether conv_kn2row.wanted()
picks kn2row, and the max relative difference between the two outputs. `--all` also runs the
layers the rule leaves to im2col.
"""
import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.getcwd())

# (input shape, filter shape): stride 1, SAME
LAYERS = [((2, 24, 24, 128), (3, 3, 128, 32)), ((2, 12, 12, 128), (3, 3, 128, 32)),
          ((2, 6, 6, 128), (3, 3, 128, 32)), ((2, 3, 3, 128), (3, 3, 128, 32)),
          ((2, 4, 4, 192), (7, 1, 192, 192)), ((2, 4, 4, 192), (1, 7, 192, 192)),
          ((2, 4, 4, 160), (7, 1, 160, 160)), ((2, 4, 4, 160), (1, 7, 160, 160)),
          ((2, 4, 4, 160), (7, 1, 160, 192)), ((2, 4, 4, 160), (1, 7, 160, 192)),
          ((2, 4, 4, 128), (7, 1, 128, 128)), ((2, 4, 4, 128), (1, 7, 128, 192)),
          ((2, 9, 9, 64), (3, 3, 64, 96)), ((2, 9, 9, 96), (3, 3, 96, 96)),
          ((2, 9, 9, 48), (5, 5, 48, 64)), ((2, 4, 4, 448), (3, 3, 448, 384)),
          ((2, 4, 4, 384), (1, 3, 384, 384)), ((2, 4, 4, 384), (3, 1, 384, 384)),
          ((2, 24, 24, 64), (3, 3, 64, 64))]


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--calls", type=int, default=0, help="per timing (0: by size)")
    ap.add_argument("--all", action="store_true")
    a = ap.parse_args()
    from tfg.executor import blas
    from tfg.kernels import conv_gemm, conv_kn2row
    from tfg.kernels.conv_geom import Geom
    rng = np.random.default_rng(0)
    rows = []
    for xs, ws in LAYERS:
        g = Geom({"strides": [1, 1, 1, 1], "padding": b"SAME"}, xs[1], xs[2], ws[0], ws[1])
        want = conv_kn2row.wanted(xs, ws, g, np.float32)
        if not (want or a.all):
            continue
        old = conv_gemm.prepared(xs, ws, g, False, np.float32, kn2row=False)
        # one prepared run per filter, as 16 nodes each keep their own transposed filter
        news = [conv_kn2row.prepared(xs, ws, g, old) for _ in range(16)]
        x = rng.standard_normal(xs).astype(np.float32)
        wl = []
        for _ in range(16):
            w = rng.standard_normal(ws).astype(np.float32)
            w.flags.writeable = False
            wl.append(w)
        ya, yb = old(x, wl[0]), news[0](x, wl[0])
        for nw, w in zip(news, wl):
            nw(x, w)  # the transposed filters kept
        err = float(np.abs(ya - yb).max() / np.abs(ya).max())
        calls = a.calls or max(8, int(4e7 / (np.prod(xs) * ws[0] * ws[1] * ws[3])))
        olds = [old] * 16
        rows.append([xs, ws, want, err, calls, olds, news, x, wl, [], []])
    with blas.blas_limit(1):
        for _ in range(a.rounds):
            for r in rows:
                for run, acc in ((r[5], r[9]), (r[6], r[10])):
                    x, wl, calls = r[7], r[8], r[4]
                    t = time.process_time()
                    for i in range(calls):
                        run[i % 16](x, wl[i % 16])
                    acc.append((time.process_time() - t) / calls)
    print(f"{'input':18} {'filter':16} {'im2col us':>10} {'kn2row us':>10} {'ratio':>6} "
          f"{'rule':>5} {'err':>8}")
    for xs, ws, want, err, _, _, _, _, _, ta, tb in rows:
        ma, mb = statistics.median(ta) * 1e6, statistics.median(tb) * 1e6
        print(f"{'x'.join(map(str, xs)):18} {'x'.join(map(str, ws)):16} {ma:10.1f} {mb:10.1f} "
              f"{mb / ma:6.2f} {'kn2row' if want else 'im2col':>6} {err:8.1e}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
