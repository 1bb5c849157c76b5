#!/usr/bin/env python3
"""Loop graphs: tfg against TensorFlow on the same GraphDefs, A B A B.

    python3 benchmarks/bench_loops.py --tf-python /work/tfvenv/bin/python [--reps 7]
        [--cases lstm,gru,bilstm,tf2_lstm_train,while_cond_grad,bare_while,tf1_gru_train,
                 tf1_lstm_train]
        [--save DIR]
    python3 benchmarks/bench_loops.py --profile DIR | --op-profile DIR [--cases lstm]

TensorFlow (in a subprocess: it never shares a process with tfg) builds the graphs, imports
each GraphDef into a `tf.compat.v1.Session` and times one step on request:

| case | what |
| --- | --- |
| lstm, gru | Keras `LSTM(64)` / `GRU(64)` then `Dense(4)`, batch 8, 20 steps of 16 features, frozen by `convert_variables_to_constants_v2(lower_control_flow=True)`: a v1 while loop over TensorLists |
| bilstm | `Masking` then `Bidirectional(LSTM(32))` then `Dense(4)`, the same shapes, the last 5 steps of half the batch masked: two loops whose bodies select by the mask |
| tf2_lstm_train | an LSTM(64) loop written with `tf.range` over TensorArrays, the same shapes, loss `sum(y**2)` and its `tf.GradientTape` gradients for the weight and bias in one `tf.function`, frozen with the functional Whiles kept: TensorFlow's gradient While popping the TensorLists its forward loop pushed (a TF2 training step) |
| while_cond_grad | a TF1 `tf.while_loop` of 100 iterations with a `tf.cond` inside (even: `acc * x`, odd: `acc + tanh(acc)`), acc of 64 floats, and `tf.gradients` of its sum: the forward loop, its stacks and the backward loop |
| bare_while | 10,000 iterations of `i + 1`, `x * c`, `i < n` on scalars: the per-iteration cost |
| tf1_gru_train, tf1_lstm_train | TF1 `dynamic_rnn` of a `GRUCell(64)` / `LSTMCell(64)`, the same shapes, loss `sum(y**2)` and TensorFlow's own `tf.gradients` for every weight, frozen: the forward loop over TensorArrays, its stacks and the gradient loop (a training step) |

tfg loads each GraphDef and runs the same fetches with `tfg.Session`; the first step's outputs
are compared with TensorFlow's (a fast wrong answer cannot pass). Steps alternate A B A B
(TensorFlow, tfg), the median of --reps each, and the ratio tfg / TF is printed, of wall time
(the target) and of process CPU time (all threads; steadier on a loaded machine). `run(...)` is
what benchmarks/run.py calls (rows "loops"); the script writes benchmarks/results/loops.json.
The 50-step RNN with `tfg grad` is bench_rnn.py's row. `--save DIR` keeps the GraphDefs and
feeds, for profiling tfg alone without TensorFlow: `--profile DIR` (cProfile) and
`--op-profile DIR` (time per op inside the compiled loops, BLAS at one thread).
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

# (the TF2 case before the TF1 ones: those turn control flow v2 off in the worker)
CASES = ["lstm", "gru", "bilstm", "tf2_lstm_train", "while_cond_grad", "bare_while",
         "tf1_gru_train", "tf1_lstm_train"]
TARGETS = {"lstm": 1.5, "gru": 1.5, "bilstm": 1.5, "tf2_lstm_train": 1.5,
           "while_cond_grad": 1.5, "bare_while": 2.5, "tf1_gru_train": 1.5,
           "tf1_lstm_train": 1.5}
BARE_ITERS = 10_000

TF_WORKER = r'''
import os, sys, time, json
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np
import tensorflow as tf
import keras
from tensorflow.python.framework.convert_to_constants import (
    convert_variables_to_constants_v2)
tf1 = tf.compat.v1
out_dir, cases, bare_iters = sys.argv[1], sys.argv[2].split(","), int(sys.argv[3])
rng = np.random.default_rng(0)
B, T, F = 8, 20, 16


def frozen_keras(layers):
    keras.utils.set_random_seed(7)
    model = keras.Sequential([keras.Input((T, F))] + layers)
    fn = tf.function(lambda x: model(x)).get_concrete_function(
        tf.TensorSpec([B, T, F], tf.float32))
    frozen = convert_variables_to_constants_v2(fn, lower_control_flow=True)
    gd = frozen.graph.as_graph_def()
    x = rng.standard_normal((B, T, F)).astype(np.float32)
    return gd, {frozen.inputs[0].name: x}, [frozen.outputs[0].name]


def lstm():
    return frozen_keras([keras.layers.LSTM(64), keras.layers.Dense(4)])


def gru():
    return frozen_keras([keras.layers.GRU(64), keras.layers.Dense(4)])


def bilstm():
    gd, feeds, fetches = frozen_keras([keras.layers.Masking(0.0),
                                       keras.layers.Bidirectional(keras.layers.LSTM(32)),
                                       keras.layers.Dense(4)])
    x = next(iter(feeds.values()))
    x[: B // 2, T - 5:] = 0.0  # padded tails: the mask selects the carried state there
    return gd, feeds, fetches


def tf2_lstm_train():
    """An LSTM loop written with tf.range over TensorArrays and its tf.GradientTape
    gradients for the weight and bias, in one tf.function, frozen with its functional Whiles
    kept (TensorFlow's gradient While popping the TensorLists its forward loop pushed: what
    a TF2 training step exports; Keras' own layers' tape gradients read their resource
    variables' shapes inside the loop, which freezing cannot turn into constants)."""
    w0 = (rng.standard_normal((F + 64, 256)) * 0.2).astype(np.float32)
    b0 = np.zeros(256, np.float32)

    def step(x):
        w, b = tf.constant(w0), tf.constant(b0)
        with tf.GradientTape() as tape:
            tape.watch([w, b])
            xs = tf.TensorArray(tf.float32, size=T).unstack(tf.transpose(x, [1, 0, 2]))
            ys = tf.TensorArray(tf.float32, size=T)
            c = h = tf.zeros([B, 64])
            for t in tf.range(T):
                i, j, f, o = tf.split(tf.concat([xs.read(t), h], 1) @ w + b, 4, 1)
                c = tf.sigmoid(f + 1.0) * c + tf.sigmoid(i) * tf.tanh(j)
                h = tf.sigmoid(o) * tf.tanh(c)
                ys = ys.write(t, h)
            loss = tf.reduce_sum(ys.stack() ** 2)
        return [loss] + tape.gradient(loss, [w, b])

    fn = tf.function(step).get_concrete_function(tf.TensorSpec([B, T, F], tf.float32))
    frozen = convert_variables_to_constants_v2(fn, lower_control_flow=False)
    x = rng.standard_normal((B, T, F)).astype(np.float32)
    return (frozen.graph.as_graph_def(), {frozen.inputs[0].name: x},
            [t.name for t in frozen.outputs])


def v1_graph(build):
    tf1.disable_control_flow_v2()
    g = tf.Graph()
    with g.as_default():
        feeds, fetches = build()
    return g.as_graph_def(), feeds, fetches


def while_cond_grad():
    def build():
        x = tf1.placeholder(tf.float32, [64], name="x")

        def body(i, acc):
            even = tf.equal(tf.math.floormod(i, 2), 0)
            acc = tf1.cond(even, lambda: acc * x, lambda: acc + tf.tanh(acc))
            return i + 1, acc

        _, acc = tf1.while_loop(lambda i, a: i < 100, body,
                                [tf.constant(0), tf.ones([64])], name="loop")
        y = tf.reduce_sum(acc, name="y")
        tf.identity(tf.gradients(y, [x])[0], name="gx")
        return ({"x:0": (1.0 + 0.01 * rng.standard_normal(64)).astype(np.float32)},
                ["y:0", "gx:0"])
    return v1_graph(build)


def bare_while():
    def build():
        n = tf1.placeholder(tf.int32, [], name="n")
        c = tf.constant(1.0001, name="c")
        _, x = tf1.while_loop(lambda i, x: i < n, lambda i, x: (i + 1, x * c),
                              [tf.constant(0), tf.constant(1.0)], name="loop")
        tf.identity(x, name="out")
        return {"n:0": np.array(bare_iters, np.int32)}, ["out:0"]
    return v1_graph(build)


def v1_training(make_cell):
    """A TF1 dynamic_rnn of `make_cell()`, sum(y**2) and tf.gradients for every weight,
    frozen (the weights become Consts; the loops and TensorArrays stay)."""
    from tensorflow.python.ops import rnn
    tf1.disable_control_flow_v2()
    g = tf.Graph()
    with g.as_default():
        tf1.set_random_seed(7)
        x = tf1.placeholder(tf.float32, [B, T, F], name="x")
        y, _ = rnn.dynamic_rnn(make_cell(), x, dtype=tf.float32)
        loss = tf.reduce_sum(tf.square(y), name="loss")
        grads = tf.gradients(loss, tf1.trainable_variables())
        names = [tf.identity(gr, name=f"grad_{i}").op.name for i, gr in enumerate(grads)]
        with tf1.Session(graph=g) as s:
            s.run(tf1.global_variables_initializer())
            gd = tf1.graph_util.convert_variables_to_constants(s, g.as_graph_def(),
                                                              names + ["loss"])
    feeds = {"x:0": rng.standard_normal((B, T, F)).astype(np.float32)}
    return gd, feeds, ["loss:0"] + [n + ":0" for n in names]


def tf1_gru_train():
    from tensorflow.python.ops import rnn_cell_impl
    return v1_training(lambda: rnn_cell_impl.GRUCell(64))


def tf1_lstm_train():
    from tensorflow.python.ops import rnn_cell_impl
    return v1_training(lambda: rnn_cell_impl.LSTMCell(64))


sessions = {}
for name in cases:
    gd, feeds, fetches = globals()[name]()
    with open(os.path.join(out_dir, name + ".pb"), "wb") as f:
        f.write(gd.SerializeToString())
    g2 = tf.Graph()
    with g2.as_default():
        tf1.import_graph_def(gd, name="")
    sess = tf1.Session(graph=g2)
    fd = {g2.get_tensor_by_name(k): v for k, v in feeds.items()}
    run = [g2.get_tensor_by_name(t) for t in fetches]
    out = sess.run(run, fd)
    np.savez(os.path.join(out_dir, name + "_feeds.npz"), **feeds)
    np.savez(os.path.join(out_dir, name + "_expected.npz"), *out)
    with open(os.path.join(out_dir, name + ".json"), "w") as f:
        json.dump({"fetches": fetches, "nodes": len(gd.node)}, f)
    sessions[name] = (sess, run, fd)
print("ready", flush=True)
for line in sys.stdin:
    name = line.strip()
    if not name:
        break
    sess, run, fd = sessions[name]
    t, c = time.perf_counter(), time.process_time()
    sess.run(run, fd)
    print(time.perf_counter() - t, time.process_time() - c, flush=True)
'''


class TfWorker:
    """The TensorFlow subprocess: builds the cases into `folder`, then times one on request."""

    def __init__(self, tf_python, folder, cases):
        path = os.path.join(folder, "tf_loops_worker.py")
        with open(path, "w") as f:
            f.write(TF_WORKER)
        self.proc = subprocess.Popen(
            [tf_python, path, folder, ",".join(cases), str(BARE_ITERS)], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", CUDA_VISIBLE_DEVICES=""))
        if self.proc.stdout.readline().strip() != "ready":
            err = self.proc.stderr.read()[-2000:]
            raise SystemExit("the TensorFlow loops worker failed to start:\n" + err)

    def time(self, name):
        """(wall, process CPU) seconds of one step."""
        self.proc.stdin.write(name + "\n")
        self.proc.stdin.flush()
        wall, cpu = self.proc.stdout.readline().split()
        return float(wall), float(cpu)

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


def load_case(folder, name, blas_threads=None):
    """(Session, feeds, fetches, expected outputs, node count) of one saved case."""
    import tfg
    from tfg.executor import Session

    meta = json.load(open(os.path.join(folder, name + ".json")))
    with np.load(os.path.join(folder, name + "_feeds.npz")) as f:
        feeds = {k: f[k] for k in f.files}
    with np.load(os.path.join(folder, name + "_expected.npz")) as f:
        expected = [f[k] for k in sorted(f.files, key=lambda k: int(k.split("_")[1]))]
    sess = Session(tfg.load(os.path.join(folder, name + ".pb")), blas_threads=blas_threads)
    return sess, feeds, meta["fetches"], expected, meta["nodes"]


def run(tf_python, reps=7, warmup=2, cases=CASES, save=None, blas_threads=None):
    """Time each case A B A B; returns one row per case (graph, ratio, max_rel_err_vs_tf,
    per-iteration µs for bare_while)."""
    folder = save or tempfile.mkdtemp(prefix="tfgloops")
    os.makedirs(folder, exist_ok=True)
    worker = TfWorker(tf_python, folder, cases)
    rows = []
    try:
        for name in cases:
            sess, feeds, fetches, expected, nodes = load_case(folder, name, blas_threads)
            out = sess.run(fetches, feeds)
            err = max(float(np.max(np.abs(np.asarray(o) - e) / (1 + np.abs(e))))
                      for o, e in zip(out, expected))

            def tfg_time():
                t, c = time.perf_counter(), time.process_time()
                sess.run(fetches, feeds)
                return time.perf_counter() - t, time.process_time() - c

            for _ in range(warmup):
                worker.time(name), tfg_time()
            tf_t, tfg_t = [], []
            for _ in range(max(5, reps)):  # A B A B
                tf_t.append(worker.time(name))
                tfg_t.append(tfg_time())
            med = lambda ts, k: statistics.median(t[k] for t in ts)  # noqa: E731
            row = {"graph": name, "nodes": nodes, "tf_median_s": med(tf_t, 0),
                   "tfg_median_s": med(tfg_t, 0), "tf_cpu_median_s": med(tf_t, 1),
                   "tfg_cpu_median_s": med(tfg_t, 1), "max_rel_err_vs_tf": err}
            row["ratio"] = row["tfg_median_s"] / row["tf_median_s"]
            # CPU time (every thread of the process): what a loaded machine distorts least,
            # though TensorFlow's idle pool threads spin into its figure
            row["cpu_ratio"] = row["tfg_cpu_median_s"] / row["tf_cpu_median_s"]
            if name == "bare_while":
                row["tf_us_per_iter"] = row["tf_median_s"] / BARE_ITERS * 1e6
                row["tfg_us_per_iter"] = row["tfg_median_s"] / BARE_ITERS * 1e6
            row["tfg_blas_threads"] = sess.blas_threads
            if name == "bilstm":  # (its two directions in lockstep, or not: loop_pairs.py)
                row["paired_loops"] = paired_loops(sess)
            row["target_ratio"] = TARGETS[name]
            row["meets_target"] = row["ratio"] <= TARGETS[name] and err < 1e-4
            rows.append(row)
    finally:
        worker.close()
    return rows


def paired_loops(sess):
    """How many pairs of loops the Session's prepared steps run in lockstep (each a
    _CompiledLoopPair item of a fast-path schedule: tfg/executor/loop_pairs.py). A Keras
    Bidirectional layer's two loops pair only where their cells match member by member, so
    the row says whether the export at hand did."""
    from tfg.executor.loop_pairs import PAIR_OP
    return sum(it.op == PAIR_OP for prepared in sess._cache.values()
               for sched in getattr(prepared, "schedules", None) or ()
               for it in getattr(sched, "items", None) or ())


def fmt(row):
    extra = ""
    if "paired_loops" in row:
        extra = f" paired {row['paired_loops']}"
    if "tfg_us_per_iter" in row:
        extra = f" {row['tf_us_per_iter']:.2f} / {row['tfg_us_per_iter']:.2f} µs/iter"
    return (f"{row['graph']:16} {row['nodes']:6d} {row['tf_median_s'] * 1e3:10.2f}ms "
            f"{row['tfg_median_s'] * 1e3:10.2f}ms {row['ratio']:6.2f}x "
            f"(cpu {row['tf_cpu_median_s'] * 1e3:.2f} / {row['tfg_cpu_median_s'] * 1e3:.2f}ms "
            f"{row['cpu_ratio']:.2f}x) err {row['max_rel_err_vs_tf']:.1e} "
            f"[<= {row['target_ratio']}x: {'ok' if row['meets_target'] else 'MISSED'}]{extra}")


def profile(folder, name, steps, top):
    """cProfile of tfg alone on a case saved with --save."""
    import cProfile
    import pstats

    sess, feeds, fetches, _, _ = load_case(folder, name)
    sess.run(fetches, feeds)
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(steps):
        sess.run(fetches, feeds)
    prof.disable()
    pstats.Stats(prof).sort_stats("tottime").print_stats(top)


def time_loop_calls(sess, run_step, steps):
    """Wrap every prepared call of `sess`'s compiled loops in a perf_counter timer, run
    `run_step` `steps` times -> {op: (median ns of one call, calls per step)}; a fused chain
    (tfg/executor/loop_fusion.py) is one call for its nodes, named fused[N]."""
    durations = {}
    clock = time.perf_counter_ns

    def timed(calls):
        def wrap(call, op):
            def timed_call(vals, step):
                t = clock()
                call(vals, step)
                durations.setdefault(op, []).append(clock() - t)
            return timed_call
        return [(wrap(call, f"fused[{len(call.members)}]" if hasattr(call, "members")
                      else it.op), it) for call, it in calls]

    for prep in sess.backend._cache.values():
        for plan in prep.plans:
            for prog in (plan.loops or {}).values():
                for attr in ("hoisted", "header", "body", "tail", "header_rest", "body_rest",
                             "header_fixed", "body_fixed"):
                    setattr(prog, attr, timed(getattr(prog, attr)))
    for _ in range(steps):
        run_step()
    return {op: (statistics.median(ts), len(ts) // steps) for op, ts in durations.items()}


def print_op_table(per, step_us):
    """One line per op of time_loop_calls' result, the costliest first, as a share of a step
    of `step_us` microseconds."""
    for op, (m, n) in sorted(per.items(), key=lambda kv: -kv[1][0] * kv[1][1]):
        print(f"  {op:20} {m * n / 1e3:7.0f} us/step {n:4d} calls {m / 1e3:6.1f} us/call "
              f"{100 * m * n / 1e3 / step_us:5.1f}%")


def op_profile(folder, name, steps, blas_threads=1):
    """Per op kind inside the compiled loops of a case saved with --save: the median duration
    of one call (perf_counter around each prepared call) times the calls per step, against
    the step's thread CPU time. Prints a table."""
    sess, feeds, fetches, _, _ = load_case(folder, name, blas_threads)
    sess.run(fetches, feeds)
    cpu = []
    for _ in range(steps):
        t = time.thread_time_ns()
        sess.run(fetches, feeds)
        cpu.append(time.thread_time_ns() - t)
    per = time_loop_calls(sess, lambda: sess.run(fetches, feeds), steps)
    step = statistics.median(cpu) / 1e3
    total = sum(m * n for m, n in per.values()) / 1e3
    print(f"{name}: step CPU {step:.0f} us (median of {steps}); compiled-loop calls {total:.0f} us")
    print_op_table(per, step)


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tf-python", default="/work/tfvenv/bin/python")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--cases", default=",".join(CASES))
    ap.add_argument("--save", default=None, help="keep the GraphDefs and feeds in this folder")
    ap.add_argument("--profile", default=None, metavar="DIR",
                    help="no TensorFlow: cProfile tfg on the cases saved in DIR by --save")
    ap.add_argument("--blas-threads", type=int, default=None,
                    help="BLAS threads for tfg's steps (default: the Session's)")
    ap.add_argument("--op-profile", default=None, metavar="DIR",
                    help="no TensorFlow: time per op inside the compiled loops of DIR's cases")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "loops.json"))
    a = ap.parse_args()
    cases = [c for c in a.cases.split(",") if c]
    bad = set(cases) - set(CASES)
    if bad:
        raise SystemExit(f"unknown cases {sorted(bad)}; choose from {CASES}")
    if a.profile:
        for name in cases:
            print(f"--- {name}")
            profile(a.profile, name, a.reps, 25)
        return 0
    if a.op_profile:
        for name in cases:
            op_profile(a.op_profile, name, a.reps)
        return 0
    load = os.getloadavg()[0]
    rows = run(a.tf_python, a.reps, a.warmup, cases, a.save, a.blas_threads)
    print(f"{'graph':16} {'nodes':>6} {'TF median':>12} {'tfg median':>12} {'ratio':>7}  "
          "(process CPU: TF / tfg, ratio)")
    for r in rows:
        print(fmt(r))
    print(f"load average {load:.2f} -> {os.getloadavg()[0]:.2f} on {os.cpu_count()} cores")
    os.makedirs(os.path.dirname(a.out), exist_ok=True)
    with open(a.out, "w") as f:
        json.dump({"cpu_count": os.cpu_count(), "reps": max(5, a.reps),
                   "loadavg_before_after": [load, os.getloadavg()[0]], "rows": rows}, f,
                  indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
