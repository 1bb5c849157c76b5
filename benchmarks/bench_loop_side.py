#!/usr/bin/env python3
"""The rnn row's step with tfg/executor/loop_side.py's worker off and on, in one process.

    python3 benchmarks/bench_rnn.py --tf-python /work/tfvenv/bin/python --save DIR
    python3 benchmarks/bench_loop_side.py DIR [--pairs 400]

One Session of the case bench_rnn.py kept, stepped with TFG_LOOP_SIDE=0 and =1 alternating
(A B, then B A), BLAS at one thread (as the GEMM floor sets it for this step); prints, per
setting, the step's wall and process CPU time (min, q1, median, q3: the process's CPU counts
the worker thread's), the two loops' wall medians, and checks that both settings give the
same bits. The worker pays only where the second core is free: on a loaded machine compare
the minimums, or run at top priority (docs/performance.md, "rnn row, this round").
"""
import argparse
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

import numpy as np  # noqa: E402

from bench_rnn import FETCHES, load_case  # noqa: E402
from tfg.executor.loops import LoopProgram  # noqa: E402


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("folder", help="a folder bench_rnn.py --save wrote")
    ap.add_argument("--pairs", type=int, default=400)
    a = ap.parse_args()
    loops = {}
    run_loop = LoopProgram.run

    def timed(self, *args):
        t = time.perf_counter()
        try:
            return run_loop(self, *args)
        finally:
            key = (self.frame_name.decode(errors="replace"), os.environ["TFG_LOOP_SIDE"])
            loops.setdefault(key, []).append(time.perf_counter() - t)
    LoopProgram.run = timed
    sess, feeds, _, _, _ = load_case(a.folder, 1)
    outs = {}
    for side in ("0", "1", "0", "1"):
        os.environ["TFG_LOOP_SIDE"] = side
        outs.setdefault(side, sess.run(FETCHES, feeds))
    if not all(np.array_equal(x, y) for x, y in zip(outs["0"], outs["1"])):
        print("bench_loop_side.py: the two settings' outputs differ", file=sys.stderr)
        return 1
    loops.clear()
    steps = {"0": [], "1": []}
    for r in range(a.pairs):
        for side in ("0", "1") if r % 2 else ("1", "0"):
            os.environ["TFG_LOOP_SIDE"] = side
            t, c = time.perf_counter(), time.process_time()
            sess.run(FETCHES, feeds)
            steps[side].append((time.perf_counter() - t, time.process_time() - c))
    for side, v in steps.items():
        w, c = sorted(x[0] for x in v), sorted(x[1] for x in v)
        n = len(w)
        q = lambda s: "min %.2f q1 %.2f median %.2f q3 %.2f ms" % (  # noqa: E731
            s[0] * 1e3, s[n // 4] * 1e3, s[n // 2] * 1e3, s[3 * n // 4] * 1e3)
        inside = ", ".join(f"{k[0]} {statistics.median(t) * 1e3:.2f}"
                           for k, t in sorted(loops.items()) if k[1] == side)
        print(f"TFG_LOOP_SIDE={side}: wall {q(w)}; cpu {q(c)}; loops (wall median, ms): "
              f"{inside}")
    print(f"load average {os.getloadavg()[0]:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
