#!/usr/bin/env python3
"""Bound convolution calls (tfg/kernels/bound.py; `bound_call` in tfg/executor/calls.py)
against the plain prepared calls, whole keras.applications steps in one process.

    python3 benchmarks/bench_bound_calls.py DIR [--models nasnetmobile,...] [--pairs 40]

DIR is a folder `bench_keras.py --keep` wrote. Two Sessions per model, one prepared with
TFG_BOUND_CALLS=0 (each convolution through its kernel's layers) and one with bound calls,
one BLAS thread each unless --threads, steps alternating in both orders (abtime.switch_ab);
prints each median, their ratio, and both outputs' error against TensorFlow's. Needs oneDNN
(the `perf` extra): only oneDNN convolutions are bound.
"""
import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder")
    ap.add_argument("--models", default="nasnetmobile,mobilenetv3small,mobilenetv2,"
                                        "efficientnetb0,resnet50,inceptionv3,densenet121")
    ap.add_argument("--pairs", type=int, default=40)
    ap.add_argument("--threads", type=int, default=1)
    a = ap.parse_args()
    from abtime import switch_ab
    from tfg.executor import Session
    from tfg.kernels import onednn
    if not onednn.wanted():
        raise SystemExit("oneDNN is not installed (pip install 'tfg[perf]'), or TFG_ONEDNN=0")
    for name in a.models.split(","):
        if not os.path.exists(os.path.join(a.folder, name + ".pb")):
            print(f"{name:18} not in {a.folder}")
            continue
        med, errs = switch_ab(a.folder, name, "TFG_BOUND_CALLS",
                              lambda g: Session(g, blas_threads=a.threads), a.pairs)
        print(f"{name:18} plain {med['0']:7.2f} ms  bound {med['1']:7.2f} ms  "
              f"ratio {med['1'] / med['0']:.3f}  err vs TF {errs['0']:.1e} / {errs['1']:.1e}  "
              f"({a.threads} thread(s), load {os.getloadavg()[0]:.2f})")


if __name__ == "__main__":
    main()
