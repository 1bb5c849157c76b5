#!/usr/bin/env python3
"""An RNN over a 50-step v1 while loop with its gradient: tfg against TensorFlow.

    python3 benchmarks/bench_rnn.py --tf-python /tmp/tfenv/bin/python [--reps 7] [--steps 50]
    python3 benchmarks/bench_rnn.py --tf-python ... --save DIR    # keep the GraphDef and data
    python3 benchmarks/bench_rnn.py --profile DIR [--op-profile]  # tfg alone, no TensorFlow

TensorFlow (in a subprocess: it must never share a process with tfg) builds the forward loop
with v1 control flow (Enter/Merge/Switch/NextIteration/Exit, tf.disable_control_flow_v2):
h_t = tanh(h_{t-1} W + x_t U), loss = sum(h_T), and writes the forward GraphDef only. It then
adds tf.gradients(loss, [W, U]) in its own graph and times loss + both gradients per step.
tfg loads the forward GraphDef, differentiates it with tfg.grad (which must build the loop's
backward frame itself) and runs the same fetches with tfg.Session. Steps alternate A B A B
(TensorFlow, tfg); the median of --reps each is reported, of wall time and of process CPU time
(all threads: steadier on a loaded machine). The gradients are also compared, so a fast wrong
answer cannot pass. `--profile DIR` runs cProfile on tfg's steps of a case kept by `--save`;
with `--op-profile`, the time per op inside the compiled loops instead. `run(...)` is what benchmarks/run.py calls; the script writes
benchmarks/results/rnn.json.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

TF_WORKER = r'''
import os, sys, time, json
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np
import tensorflow.compat.v1 as tf
tf.disable_eager_execution()
tf.disable_control_flow_v2()
out_dir, steps, batch, hidden = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
rng = np.random.default_rng(0)
xs = rng.standard_normal((steps, batch, hidden)).astype(np.float32)
g = tf.Graph()
with g.as_default():
    x = tf.placeholder(tf.float32, [steps, batch, hidden], name="x")
    w = tf.constant(rng.standard_normal((hidden, hidden)).astype(np.float32) * 0.1, name="W")
    u = tf.constant(rng.standard_normal((hidden, hidden)).astype(np.float32) * 0.1, name="U")
    h0 = tf.zeros([batch, hidden], name="h0")
    def body(i, h):
        xt = tf.gather(x, i)
        return i + 1, tf.tanh(tf.matmul(h, w) + tf.matmul(xt, u))
    _, h = tf.while_loop(lambda i, h: i < steps, body, [tf.constant(0), h0], name="rnn")
    loss = tf.reduce_sum(h, name="loss")
    fwd = g.as_graph_def()
    gw, gu = tf.gradients(loss, [w, u])
with open(os.path.join(out_dir, "rnn.pb"), "wb") as f:
    f.write(fwd.SerializeToString())
sess = tf.Session(graph=g)
fetch = [loss, gw, gu]
vals = sess.run(fetch, {x: xs})
np.savez(os.path.join(out_dir, "rnn_io.npz"), x=xs, loss=vals[0], dW=vals[1], dU=vals[2])
with open(os.path.join(out_dir, "rnn.json"), "w") as f:
    json.dump({"nodes": len(fwd.node), "nodes_with_grad": len(g.as_graph_def().node)}, f)
print("ready", flush=True)
for line in sys.stdin:
    if not line.strip():
        break
    t, c = time.perf_counter(), time.process_time()
    sess.run(fetch, {x: xs})
    print(time.perf_counter() - t, time.process_time() - c, flush=True)
'''


FETCHES = ["loss:0", "grad/W:0", "grad/U:0"]


def load_case(folder, blas_threads=None):
    """(Session, feeds, reference values, seconds `tfg grad` took, graph) of a kept case."""
    import tfg
    from tfg.executor import Session

    ref = dict(np.load(os.path.join(folder, "rnn_io.npz")))
    t0 = time.perf_counter()
    g = tfg.grad(tfg.load(os.path.join(folder, "rnn.pb")), "loss", "W,U")
    grad_build_s = time.perf_counter() - t0
    return Session(g, blas_threads=blas_threads), {"x:0": ref["x"]}, ref, grad_build_s, g


def run(tf_python, reps=7, warmup=2, steps=50, batch=32, hidden=128, blas_threads=None,
        save=None):
    """Time the RNN row; returns a dict (graph, nodes, tf/tfg medians, ratio, max_abs_err).

    Before: nothing.  After: {"graph": "rnn50+grad", "tf_median_s": ..., "ratio": ...}.
    """
    tmp = save or tempfile.mkdtemp(prefix="tfgrnn")
    os.makedirs(tmp, exist_ok=True)
    path = os.path.join(tmp, "w.py")
    with open(path, "w") as f:
        f.write(TF_WORKER)
    from tfg.executor import contention

    worker = subprocess.Popen([tf_python, path, tmp, str(steps), str(batch), str(hidden)],
                              stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True,
                              env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    if worker.stdout.readline().strip() != "ready":
        raise SystemExit("the TensorFlow RNN worker failed to start")
    try:
        meta = json.load(open(os.path.join(tmp, "rnn.json")))
        sess, feeds, ref, grad_build_s, g = load_case(tmp, blas_threads)
        fetches = FETCHES
        out = sess.run(fetches, feeds)
        err = max(float(np.max(np.abs(np.asarray(o) - ref[k]) / (1 + np.abs(ref[k]))))
                  for o, k in zip(out, ["loss", "dW", "dU"]))

        def tf_time():
            worker.stdin.write("go\n")
            worker.stdin.flush()
            return tuple(float(v) for v in worker.stdout.readline().split())

        def tfg_time():
            t, c = time.perf_counter(), time.process_time()
            sess.run(fetches, feeds)
            return time.perf_counter() - t, time.process_time() - c

        for _ in range(warmup):
            tf_time(), tfg_time()
        contention.choices.clear()
        tf_t, tfg_t = [], []
        for _ in range(max(5, reps)):  # A B A B
            tf_t.append(tf_time())
            tfg_t.append(tfg_time())
    finally:
        worker.stdin.close()
        worker.wait(timeout=30)
    med = lambda ts, k: statistics.median(t[k] for t in ts)  # noqa: E731
    row = {"graph": f"rnn{steps}+grad", "nodes": meta["nodes"], "nodes_after_grad": len(g),
           "tf_median_s": med(tf_t, 0), "tfg_median_s": med(tfg_t, 0),
           "tf_cpu_median_s": med(tf_t, 1), "tfg_cpu_median_s": med(tfg_t, 1),
           "tfg_grad_build_s": grad_build_s, "max_rel_err_vs_tf": err,
           "tfg_blas_threads": sess.blas_threads,
           # BLAS threads per step ('1 (gemm floor)': all its GEMMs small, blas_floor.py)
           "adaptive_choices": {str(k): v for k, v in contention.choices.items()}}
    row["ratio"] = row["tfg_median_s"] / row["tf_median_s"]
    row["cpu_ratio"] = row["tfg_cpu_median_s"] / row["tf_cpu_median_s"]
    return row


def profile(folder, steps=20, top=25, blas_threads=None):
    """cProfile of tfg alone on a case kept by --save."""
    import cProfile
    import pstats

    sess, feeds, _, _, _ = load_case(folder, blas_threads)
    sess.run(FETCHES, feeds)
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(steps):
        sess.run(FETCHES, feeds)
    prof.disable()
    pstats.Stats(prof).sort_stats("tottime").print_stats(top)


def op_profile(folder, steps=20, blas_threads=1):
    """Per op inside the compiled loops of a kept case: the median duration of one call
    (perf_counter around each prepared call) times the calls per step, against the step's
    thread CPU time and the thread CPU time spent inside the loops (bench_loops.py's table)."""
    from bench_loops import print_op_table, time_loop_calls
    from tfg.executor.loops import LoopProgram

    sess, feeds, _, _, _ = load_case(folder, blas_threads)
    sess.run(FETCHES, feeds)
    cpu, inside = [], [0]
    run_loop = LoopProgram.run

    def timed_run(self, *args):
        t = time.thread_time_ns()
        try:
            return run_loop(self, *args)
        finally:
            inside[0] += time.thread_time_ns() - t

    LoopProgram.run = timed_run
    try:
        loops = []
        for _ in range(steps):
            inside[0] = 0
            t = time.thread_time_ns()
            sess.run(FETCHES, feeds)
            cpu.append(time.thread_time_ns() - t)
            loops.append(inside[0])
    finally:
        LoopProgram.run = run_loop
    per = time_loop_calls(sess, lambda: sess.run(FETCHES, feeds), steps)
    step = statistics.median(cpu) / 1e3
    total = sum(m * n for m, n in per.values()) / 1e3
    print(f"rnn: step CPU {step:.0f} us, inside the compiled loops "
          f"{statistics.median(loops) / 1e3:.0f} us (medians of {steps}); "
          f"sum of the loops' calls {total:.0f} us")
    print_op_table(per, step)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tf-python", default="/tmp/tfenv/bin/python")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--steps", type=int, default=50)
    ap.add_argument("--blas-threads", type=int, default=None,
                    help="BLAS threads for tfg's steps (default: the Session's; 0: leave alone)")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "rnn.json"))
    ap.add_argument("--save", default=None, metavar="DIR",
                    help="keep the GraphDef and data in this folder (for --profile)")
    ap.add_argument("--profile", default=None, metavar="DIR",
                    help="no TensorFlow: cProfile tfg's steps on the case kept in DIR")
    ap.add_argument("--op-profile", action="store_true",
                    help="with --profile: time per op inside the compiled loops instead")
    a = ap.parse_args()
    if a.profile:
        if a.op_profile:
            op_profile(a.profile, max(a.reps, 20),
                       1 if a.blas_threads is None else a.blas_threads)
        else:
            profile(a.profile, max(a.reps, 20), blas_threads=a.blas_threads)
        return
    load_before = os.getloadavg()[0]
    row = run(a.tf_python, a.reps, steps=a.steps, blas_threads=a.blas_threads, save=a.save)
    row["loadavg_before_after"] = [load_before, os.getloadavg()[0]]
    text = json.dumps(row, indent=1)
    print(text)
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w") as f:
        f.write(text + "\n")


if __name__ == "__main__":
    main()
