#!/usr/bin/env python3
"""oneDNN's convolutions (tfg/kernels/onednn.py: the onednn-cpu-gomp wheel, the perf extra)
against tfg's numpy paths they replace, in one process: the layers alone, and whole
keras.applications steps.

    python3 benchmarks/bench_onednn.py layers [--reps 40] [--threads 1,2]
    python3 benchmarks/bench_onednn.py models DIR [--models resnet50,...] [--pairs 16]

`layers`: Conv2D shapes of ResNet50 and depthwise shapes of the MobileNets/EfficientNet/
NASNet at batch 2, 96x96 (filters are constants, hot), on 1 and 2 threads (OpenBLAS's for the
numpy path, OpenMP's for oneDNN): median microseconds per call, GFLOP/s, the ratio, and the
largest difference. `models`: DIR is a folder `bench_keras.py --keep` wrote. Two Sessions
per model, one prepared with TFG_ONEDNN=0 (numpy kernels, and numba's loops where installed)
and one with oneDNN, both on `--threads` BLAS threads, steps alternating in both orders;
prints each median, their ratio, and both outputs' error against TensorFlow's.
"""
import argparse
import os
import statistics
import sys
import time

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CONV = [  # x (NHWC), filter, stride: ResNet50's layers at batch 2, 96x96
    ((2, 96, 96, 3), (7, 7, 3, 64), 2), ((2, 24, 24, 64), (1, 1, 64, 64), 1),
    ((2, 24, 24, 64), (3, 3, 64, 64), 1), ((2, 24, 24, 64), (1, 1, 64, 256), 1),
    ((2, 12, 12, 128), (3, 3, 128, 128), 1), ((2, 24, 24, 256), (1, 1, 256, 512), 2),
    ((2, 6, 6, 256), (3, 3, 256, 256), 1), ((2, 3, 3, 512), (3, 3, 512, 512), 1),
    ((2, 3, 3, 512), (1, 1, 512, 2048), 1), ((2, 3, 3, 2048), (1, 1, 2048, 512), 1)]
DEPTHWISE = [((2, 48, 48, 32), 3, 1), ((2, 48, 48, 96), 3, 2), ((2, 24, 24, 144), 3, 1),
             ((2, 12, 12, 192), 3, 1), ((2, 6, 6, 576), 3, 1), ((2, 3, 3, 960), 3, 1),
             ((2, 24, 24, 144), 5, 2), ((2, 12, 12, 240), 5, 1), ((2, 22, 22, 44), 5, 2),
             ((2, 11, 11, 88), 7, 1), ((2, 3, 3, 176), 5, 1)]


def _median_us(f, reps):
    f()
    times = []
    for _ in range(reps):
        t = time.perf_counter()
        f()
        times.append(time.perf_counter() - t)
    return statistics.median(times) * 1e6


def _layer(label, x, w, flops, numpy_run, onednn_run, reps):
    numpy_y, onednn_y = numpy_run(), onednn_run()
    diff = float(np.abs(numpy_y - onednn_y).max())
    t_np, t_dnn = _median_us(numpy_run, reps), _median_us(onednn_run, reps)
    print(f"{label:36}  numpy {t_np:8.1f} us ({flops / t_np / 1e3:5.1f} GF/s)  oneDNN "
          f"{t_dnn:8.1f} us ({flops / t_dnn / 1e3:5.1f} GF/s)  {t_dnn / t_np:.2f}x  "
          f"|diff| {diff:.1e}")


def layers(reps, thread_counts):
    from tfg.executor.blas import blas_limit
    from tfg.kernels import conv_depthwise, conv_gemm, onednn
    from tfg.kernels.conv_geom import Geom
    rng = np.random.default_rng(0)
    for n in thread_counts:
        with blas_limit(n):  # OpenBLAS's count, and oneDNN's (blas.py sets both)
            print(f"-- {n} thread(s)")
            for shape, ws, s in CONV:
                x = rng.standard_normal(shape).astype(np.float32)
                w = rng.standard_normal(ws).astype(np.float32)
                w.flags.writeable = False
                g = Geom({"padding": b"SAME", "strides": [1, s, s, 1]}, shape[1], shape[2],
                         ws[0], ws[1])
                numpy_run = conv_gemm.prepared(shape, ws, g)
                conv = onednn.convolution(shape, ws, g)
                flops = 2 * shape[0] * g.oh * g.ow * ws[3] * ws[0] * ws[1] * ws[2]
                _layer(f"conv {'x'.join(map(str, shape))} {ws[0]}x{ws[1]}x{ws[3]}/{s}", x, w,
                       flops, lambda: numpy_run(x, w), lambda: conv(x, w), reps)
            for shape, k, s in DEPTHWISE:
                x = rng.standard_normal(shape).astype(np.float32)
                w = rng.standard_normal((k, k, shape[3], 1)).astype(np.float32)
                w.flags.writeable = False
                g = Geom({"padding": b"SAME", "strides": [1, s, s, 1]}, shape[1], shape[2], k, k)
                numpy_run, cache = conv_depthwise.prepared(shape, w.shape, g), {}
                conv = onednn.convolution(shape, w.shape, g, depthwise=True)
                flops = 2 * shape[0] * g.oh * g.ow * shape[3] * k * k
                _layer(f"depthwise {'x'.join(map(str, shape))} {k}x{k}/{s}", x, w, flops,
                       lambda: numpy_run(x, w, cache), lambda: conv(x, w), reps)


def models(folder, names, pairs, threads):
    from abtime import switch_ab
    from tfg.executor import Session
    for name in names:
        med, errs = switch_ab(folder, name, "TFG_ONEDNN",
                              lambda g: Session(g, blas_threads=threads), pairs)
        print(f"{name:18} numpy {med['0']:7.2f} ms  oneDNN {med['1']:7.2f} ms  "
              f"ratio {med['1'] / med['0']:.3f}  err vs TF {errs['0']:.1e} / {errs['1']:.1e}  "
              f"({threads} thread(s), load {os.getloadavg()[0]:.2f})")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = ap.add_subparsers(dest="what", required=True)
    m = sub.add_parser("models")
    m.add_argument("folder")
    m.add_argument("--models", default="resnet50,densenet121,inceptionv3,nasnetmobile,"
                                       "mobilenetv2,mobilenetv3small,efficientnetb0")
    m.add_argument("--pairs", type=int, default=16)
    m.add_argument("--threads", type=int, default=2)
    lay = sub.add_parser("layers")
    lay.add_argument("--reps", type=int, default=40)
    lay.add_argument("--threads", default="1,2")
    a = ap.parse_args()
    from tfg.kernels import onednn
    if not onednn.wanted():
        raise SystemExit("oneDNN is not installed (pip install 'tfg[perf]'), or TFG_ONEDNN=0")
    if a.what == "layers":
        layers(a.reps, [int(n) for n in a.threads.split(",")])
    else:
        models(a.folder, [m for m in a.models.split(",") if m], a.pairs, a.threads)
    return 0


if __name__ == "__main__":
    sys.exit(main())
