#!/usr/bin/env python3
"""Compiled loops with and without this round's fusion (fused chains and CSE in loop bodies,
tfg/executor/loop_fusion.py), in one process, A B A B, on the cases bench_loops.py saves.

    python3 benchmarks/bench_loops.py --save /tmp/loops_cases --cases lstm,gru,bilstm
    python3 benchmarks/bench_loop_fusion.py /tmp/loops_cases [--cases lstm] [--rounds 15]
    python3 benchmarks/bench_loop_fusion.py /tmp/tfgrnnXXXX --cases rnn   # bench_rnn.py's
        # folder (it keeps rnn.pb and rnn_io.npz in a temporary folder): with `tfg grad`

Two Sessions per case on the same GraphDef, one compiled with TFG_LOOP_FUSE=0 (the loops as
before: one prepared call per node), one with the default; each round times a step of each,
alternating which goes first. Prints the medians of wall and thread CPU time per step and
their ratio (fused / unfused), and checks the outputs are identical.
"""
import argparse
import os
import statistics
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

from bench_loops import load_case  # noqa: E402


def load_rnn(folder, blas_threads):
    """bench_rnn.py's forward GraphDef, differentiated by tfg.grad, and its feed."""
    import tfg
    from tfg.executor import Session

    ref = dict(np.load(os.path.join(folder, "rnn_io.npz")))
    g = tfg.grad(tfg.load(os.path.join(folder, "rnn.pb")), "loss", "W,U")
    return (Session(g, blas_threads=blas_threads), {"x:0": ref["x"]},
            ["loss:0", "grad/W:0", "grad/U:0"], None, None)


def session(folder, name, fuse, blas_threads):
    os.environ["TFG_LOOP_FUSE"] = "1" if fuse else "0"
    try:
        sess, feeds, fetches, _, _ = (load_rnn(folder, blas_threads) if name == "rnn"
                                      else load_case(folder, name, blas_threads))
        out = sess.run(fetches, feeds)  # compiles the loops under this setting
    finally:
        os.environ.pop("TFG_LOOP_FUSE", None)
    return sess, feeds, fetches, out


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder")
    ap.add_argument("--cases", default="lstm,gru,bilstm")
    ap.add_argument("--rounds", type=int, default=15)
    ap.add_argument("--steps", type=int, default=5, help="steps per timing")
    ap.add_argument("--blas-threads", type=int, default=1)
    a = ap.parse_args()
    for name in a.cases.split(","):
        old = session(a.folder, name, False, a.blas_threads)
        new = session(a.folder, name, True, a.blas_threads)
        same = all(np.array_equal(x, y) for x, y in zip(old[3], new[3]))
        times = {False: [], True: []}
        for r in range(a.rounds):
            for fuse in ((False, True) if r % 2 else (True, False)):
                sess, feeds, fetches, _ = new if fuse else old
                t, c = time.perf_counter(), time.thread_time()
                for _ in range(a.steps):
                    sess.run(fetches, feeds)
                times[fuse].append(((time.perf_counter() - t) / a.steps,
                                    (time.thread_time() - c) / a.steps))
        med = {f: [statistics.median(t[k] for t in ts) * 1e3 for k in (0, 1)]
               for f, ts in times.items()}
        print(f"{name:8} unfused {med[False][0]:6.2f} ms (cpu {med[False][1]:6.2f})  fused "
              f"{med[True][0]:6.2f} ms (cpu {med[True][1]:6.2f})  ratio wall "
              f"{med[True][0] / med[False][0]:.3f} cpu {med[True][1] / med[False][1]:.3f}  "
              f"outputs identical: {same}")
    print(f"load average {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    return 0


if __name__ == "__main__":
    sys.exit(main())
