#!/usr/bin/env python3
"""Chunked Conv2D + bias + Relu (tfg/kernels/conv_chunks.py) against one whole im2col GEMM,
on one thread and on two (Python threads over chunks against two BLAS threads per GEMM).

    python3 benchmarks/bench_conv_chunks.py [--rounds 20] [--shapes cnn|keras|all]
        [--chunk-kb 256,1024,4096]

Variants, timed in turn round after round (A B C ... A B C ...) so that a load that comes
and goes lands on all alike; per variant the minimum wall and the minimum process CPU, in µs:
  gemm1   conv_gemm's path before this round (one patch matrix, one GEMM, bias, relu), 1 BLAS thread
  gemm2   the same with 2 BLAS threads
  chunkN  conv_chunks with chunks of N KB of patches, serial, 1 BLAS thread
  par2    conv_chunks (default chunk) on 2 threads (conv_threads), 1 BLAS thread each
Shapes: the cnn row's three layers (batch 32: 32x32x3->32, 16x16x32->64, 8x8x64->64) and
3x3 layers of the keras.applications models at batch 2 (96x96 inputs).
"""
import argparse
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))

from tfg.executor import blas  # noqa: E402
from tfg.kernels import clamp, conv_chunks, conv_gemm, conv_threads  # noqa: E402
from tfg.kernels.conv_geom import Geom  # noqa: E402

# (batch, size, in channels, out channels, stride, kernel)
SHAPES = {
    "cnn": [(32, 32, 3, 32, 1, 3), (32, 16, 32, 64, 1, 3), (32, 8, 64, 64, 1, 3)],
    "keras": [(2, 24, 64, 64, 1, 3), (2, 12, 128, 128, 1, 3), (2, 6, 256, 256, 1, 3),
              (2, 48, 32, 32, 1, 3), (2, 96, 3, 32, 2, 3), (2, 96, 3, 64, 2, 7),
              (2, 12, 128, 32, 1, 3), (2, 10, 48, 64, 1, 5)],
}


def old_path(x, w, b, g):
    """conv_gemm before chunking: one patch matrix, one GEMM, then bias and relu."""
    c, oc = x.shape[3], w.shape[3]
    if c <= conv_gemm.THIN_MAX_CHANNELS and w.shape[0] * w.shape[1] * c <= conv_gemm.THIN_MAX_K:
        y = conv_gemm.patches_t_nhwc(x, g).T @ w.reshape(-1, oc)
    else:
        y = conv_gemm.patches_nhwc(x, g) @ w.reshape(-1, oc)
    np.add(y, b, out=y)
    return clamp.relu(y, out=y).reshape(x.shape[0], g.oh, g.ow, oc)


def timed(fns, rounds):
    for f in fns.values():
        f()
    wall = {k: [] for k in fns}
    cpu = {k: [] for k in fns}
    for _ in range(rounds):
        for k, f in fns.items():
            t, c = time.perf_counter(), time.process_time()
            f()
            wall[k].append(time.perf_counter() - t)
            cpu[k].append(time.process_time() - c)
    return {k: (1e6 * min(wall[k]), 1e6 * min(cpu[k])) for k in fns}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--shapes", default="all", choices=["cnn", "keras", "all"])
    ap.add_argument("--chunk-kb", default="256,1024,4096")
    a = ap.parse_args()
    backend = blas._get_backend()
    if backend is None:
        print("BLAS threads cannot be set here (no OpenBLAS/threadpoolctl): skipping.")
        return 0
    rng = np.random.default_rng(0)
    shapes = SHAPES["cnn"] + SHAPES["keras"] if a.shapes == "all" else SHAPES[a.shapes]
    default_chunk = conv_chunks.CHUNK_BYTES
    print("wall min / cpu min, us; shape = batch x size x size x in -> out, stride, kernel")
    for n, h, c, oc, s, k in shapes:
        x = rng.standard_normal((n, h, h, c)).astype(np.float32)
        w = (rng.standard_normal((k, k, c, oc)) * 0.1).astype(np.float32)
        b = rng.standard_normal(oc).astype(np.float32)
        g = Geom({"padding": b"SAME", "strides": [1, s, s, 1]}, h, h, k, k)

        def with_blas(threads, f):
            def run():
                backend.set(threads)
                f()
            return run

        fns = {"gemm1": with_blas(1, lambda: old_path(x, w, b, g)),
               "gemm2": with_blas(2, lambda: old_path(x, w, b, g))}
        ref = old_path(x, w, b, g)
        for kb in [int(v) for v in a.chunk_kb.split(",")]:
            conv_chunks.CHUNK_BYTES = kb << 10
            run = conv_chunks.prepared(x.shape, w.shape, g, x.dtype)
            if run is not None:
                assert np.allclose(run(x, w, b, clamp.relu), ref, rtol=1e-4, atol=1e-4)
                fns[f"chunk{kb}"] = with_blas(1, lambda run=run: run(x, w, b, clamp.relu))
        conv_chunks.CHUNK_BYTES = default_chunk
        run = conv_chunks.prepared(x.shape, w.shape, g, x.dtype)
        if run is not None:
            def par():
                conv_threads.configure(2, backend.set)
                try:
                    run(x, w, b, clamp.relu)
                finally:
                    conv_threads.configure(1)
            fns["par2"] = with_blas(2, par)
        res = timed(fns, a.rounds)
        base = res["gemm1"][1]
        print(f"{n}x{h}x{h}x{c}->{oc} s{s} k{k}: " + "  ".join(
            f"{name} {wl:.0f}/{cp:.0f}" + (f" ({cp / base:.2f})" if name != "gemm1" else "")
            for name, (wl, cp) in res.items()), flush=True)
    backend.set(1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
