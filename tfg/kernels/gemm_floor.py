"""Small GEMMs on one BLAS thread inside steps that give BLAS more.

    run = serial_below_floor(run, macs)   # a prepared GEMM of `macs` multiply-adds
    run(x, w)                             # BLAS at 1 thread around it when the step has 2

Why: a step that gives BLAS two threads (the 'adaptive' default on a quiet machine) gives
them to every GEMM above OpenBLAS's own threshold of 262,144 multiply-adds, and up to about
4M the second thread costs more than it brings (tfg/executor/blas_floor.py's measurements:
32x128x128 19.5 us on one thread against 34.5 on two, with 20 us of Python between calls).
blas_floor.py decides for whole steps whose GEMMs are all small; a keras model mixes small
and large ones (NASNetMobile: 175 of its 196 convolutions a step between OpenBLAS's own
threshold and 4M multiply-adds, 4 above, up to 6.7M), so each convolution's GEMM prepared
once per node and signature (conv_gemm.prepared) is sized there, and one under the floor
runs with BLAS at one thread while the large ones keep the step's count. NASNetMobile with two BLAS threads
(benchmarks/ab_checkouts.py --blas-threads 2, load average 3, a moment when both threads
ran: wall below CPU): CPU 53.7 -> 29.8 ms a step, wall 38.7 -> 28.4 (MobileNetV3Small 8.8
-> 6.0 and 6.9 -> 6.0). Where a core is partly busy the second thread's waits are worse,
and so is the difference (the other order, minutes later: 168 -> 56 ms CPU, 271 -> 82 wall).

OpenBLAS's two-thread result can differ from its one-thread result in the last bits
(NASNetMobile's output against TensorFlow: 9.0e-07 on two threads, 8.3e-07 on one): below
the floor a convolution now gives its one-thread values whatever the step's count.
$TFG_GEMM_FLOOR sets the floor (0: none, for comparisons); blas_floor.py takes its
step-wide floor from here.
"""
import os

from tfg.kernels.conv_threads import with_one_blas_thread

SMALL_GEMM_MACS = 4 << 20
ENV_VAR = "TFG_GEMM_FLOOR"
# OpenBLAS runs a GEMM of at most 4 x 65,536 multiply-adds on one thread by itself (its
# GEMM_MULTITHREAD_THRESHOLD): setting the count around those would only cost the two sets
# (~2.3 us a pair here, ~5 us a call with the bookkeeping).
OPENBLAS_SERIAL_MACS = 4 * 65536


def gemm_floor():
    """The floor in multiply-adds: $TFG_GEMM_FLOOR, else SMALL_GEMM_MACS (0: none)."""
    text = os.environ.get(ENV_VAR)
    try:
        return max(0, int(text)) if text else SMALL_GEMM_MACS
    except ValueError:
        return SMALL_GEMM_MACS


def serial_below_floor(run, macs):
    """`run` itself for a GEMM of at least the floor's multiply-adds, or of so few that
    OpenBLAS keeps it on one thread anyway; else `run` wrapped to run with BLAS at one
    thread while a step gives BLAS more (conv_threads.configure)."""
    if macs >= gemm_floor() or macs <= OPENBLAS_SERIAL_MACS:
        return run
    return lambda *args: with_one_blas_thread(run, *args)
