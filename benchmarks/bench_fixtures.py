#!/usr/bin/env python3
"""The real-model fixtures as a speed survey: every TensorFlow-made case under
tests/fixtures/real_loops, real_models and real_models_hub (tools/gen_real_*.py), one step of
tfg against TensorFlow on the same GraphDef, A B A B.

    python3 benchmarks/bench_fixtures.py --tf-python /work/tfvenv/bin/python [--reps 9]
        [--suites real_loops,real_models] [--cases tf1_beam_search_lstm,...] [--over 2.0]

The rows of benchmarks/run.py time a few graphs at benchmark sizes; these are the project's
whole sweep of real graphs (beam search, seq2seq, Keras RNNs, ConvLSTM, transformers, CNNs)
at their fixtures' small sizes, where per-node costs dominate: the survey finds the graphs
where tfg is far off TensorFlow's pace. A `run` case fetches its fetches; a `grad` case is
the training step a user runs: tfg times `tfg.grad(graph, ys, xs)` (its own gradient graph),
TensorFlow `tf.gradients(ys, xs)` on the imported graph, each fetching the gradients (mode
`grad`); where TensorFlow cannot differentiate the imported graph (a v1 loop imported without
its WhileContext) both time the forward step's ys (mode `forward`). Both
sides run each case's `init` targets once. TensorFlow (a subprocess, 2 intra- and inter-op
threads) answers each case name with its step time; tfg runs in this process with its
default settings. Prints per case the two medians, the ratio and tfg's process-CPU ratio,
then the ratios' geometric mean; cases over `--over` are listed again at the end. Writes
benchmarks/results/fixtures.json.
"""
import argparse
import json
import math
import os
import statistics
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
sys.path.insert(0, ROOT)
FIXTURES = os.path.join(ROOT, "tests", "fixtures")
SUITES = ["real_loops", "real_models", "real_models_hub"]

TF_WORKER = r'''
import json, os, sys, time
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np
import tensorflow as tf
tf.compat.v1.disable_eager_execution()
cases = json.loads(sys.argv[1])
sessions, modes = {}, {}
for name, case_dir in cases.items():
    meta = json.load(open(os.path.join(case_dir, "case.json")))
    gd = tf.compat.v1.GraphDef()
    gd.ParseFromString(open(os.path.join(case_dir, "graph.pb"), "rb").read())
    g = tf.Graph()
    with g.as_default():
        tf.import_graph_def(gd, name="")
        ys = [g.get_tensor_by_name(y) for y in meta.get("ys", [])]
        fetches = [g.get_tensor_by_name(f) for f in meta.get("fetches", [])] or ys
        modes[name] = "run" if meta["kind"] == "run" else "forward"
        if meta["kind"] == "grad":
            try:  # (an imported v1 loop has no WhileContext: tf.gradients cannot go through)
                fetches = tf.gradients([tf.reduce_sum(y) for y in ys],
                                       [g.get_tensor_by_name(x) for x in meta["xs"]])
                modes[name] = "grad"
            except Exception:
                pass
    sess = tf.compat.v1.Session(graph=g, config=tf.compat.v1.ConfigProto(
        intra_op_parallelism_threads=2, inter_op_parallelism_threads=2))
    with np.load(os.path.join(case_dir, "feeds.npz")) as f:
        feeds = {g.get_tensor_by_name(k if ":" in k else k + ":0"): f[k] for k in f.files}
    for t in meta.get("init", []):
        sess.run(g.get_operation_by_name(t))
    sess.run(fetches, feeds)
    sessions[name] = (sess, fetches, feeds)
json.dump(modes, open(sys.argv[2], "w"))
print("ready", flush=True)
for line in sys.stdin:
    name = line.strip()
    if not name:
        break
    sess, fetches, feeds = sessions[name]
    t = time.perf_counter()
    c = time.process_time()
    sess.run(fetches, feeds)
    print(time.perf_counter() - t, time.process_time() - c, flush=True)
'''


def case_dirs(suites, only=None):
    """{suite/case: folder} of every case folder (with a case.json) in the suites."""
    out = {}
    for suite in suites:
        root = os.path.join(FIXTURES, suite)
        for name in sorted(os.listdir(root)) if os.path.isdir(root) else ():
            if os.path.exists(os.path.join(root, name, "case.json")) and (
                    not only or name in only):
                out[f"{suite}/{name}"] = os.path.join(root, name)
    return out


def tfg_step(case_dir, mode):
    """A tfg Session ready for the case's step (`mode` as TensorFlow's: run, grad, or forward:
    a grad case's ys only) -> the step function."""
    import tfg
    from tfg.executor import Session
    meta = json.load(open(os.path.join(case_dir, "case.json")))
    graph = tfg.load(os.path.join(case_dir, "graph.pb"))
    if mode == "grad":
        graph = tfg.grad(graph, ys=meta["ys"], xs=meta["xs"])
        fetches = [_grad_name(x) for x in meta["xs"]]
    else:
        fetches = meta.get("fetches") or meta["ys"]
    with np.load(os.path.join(case_dir, "feeds.npz")) as f:
        feeds = {k: f[k] for k in f.files}
    sess = Session(graph)
    for t in meta.get("init", []):
        sess.run(None, targets=[t])
    sess.run(fetches, feeds)

    def step():
        return sess.run(fetches, feeds)
    step.session = sess  # (for profilers: benchmarks/bench_loops.py's time_loop_calls)
    return step


def _grad_name(x):
    node, _, port = x.partition(":")
    return f"grad/{node}:0" if port in ("", "0") else f"grad/{node}_{port}:0"


def run(tf_python, suites=SUITES, only=None, reps=9, log=print):
    from abtime import start_tf_worker
    cases = case_dirs(suites, only)
    with tempfile.TemporaryDirectory(prefix="tfgfix") as tmp:
        path = os.path.join(tmp, "worker.py")
        with open(path, "w") as f:
            f.write(TF_WORKER)
        modes_path = os.path.join(tmp, "modes.json")
        worker, tf_time = start_tf_worker([tf_python, path, json.dumps(cases), modes_path],
                                          "TensorFlow fixtures worker")
        with open(modes_path) as f:
            modes = json.load(f)
        rows = []
        try:
            for name, case_dir in cases.items():
                rows.append(_time_case(name, case_dir, modes[name], tf_time, reps))
                r = rows[-1]
                log(f"{name:46} {r['mode']:7} TF {r['tf_s'] * 1e3:8.2f} ms  tfg "
                    f"{r['tfg_s'] * 1e3:8.2f} ms  {r['ratio']:5.2f}x  (cpu {r['cpu_ratio']:.2f}x)")
        finally:
            worker.stdin.close()
            worker.wait(timeout=60)
    return rows


def _time_case(name, case_dir, mode, tf_time, reps):
    step = tfg_step(case_dir, mode)
    step()
    tf_time.cpu.clear()
    tf_s, tfg_s, tfg_cpu = [], [], []
    for _ in range(max(3, reps)):
        tf_s.append(tf_time(name))
        t, c = time.perf_counter(), time.process_time()
        step()
        tfg_s.append(time.perf_counter() - t)
        tfg_cpu.append(time.process_time() - c)
    tf_med, tfg_med = statistics.median(tf_s), statistics.median(tfg_s)
    tf_cpu = statistics.median(tf_time.cpu) if tf_time.cpu else float("nan")
    return {"case": name, "mode": mode, "tf_s": tf_med, "tfg_s": tfg_med, "ratio": tfg_med / tf_med,
            "tf_cpu_s": tf_cpu, "tfg_cpu_s": statistics.median(tfg_cpu),
            "cpu_ratio": statistics.median(tfg_cpu) / tf_cpu}


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tf-python", default="/work/tfvenv/bin/python")
    ap.add_argument("--suites", default=",".join(SUITES))
    ap.add_argument("--cases", default=None, help="comma list of case names")
    ap.add_argument("--reps", type=int, default=9)
    ap.add_argument("--over", type=float, default=2.0, help="list the cases over this ratio")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "fixtures.json"))
    a = ap.parse_args()
    only = set(a.cases.split(",")) if a.cases else None
    rows = run(a.tf_python, a.suites.split(","), only, a.reps)
    if not rows:
        return 1
    geo = math.exp(sum(math.log(r["ratio"]) for r in rows) / len(rows))
    print(f"{len(rows)} cases; geometric mean of tfg / TF: {geo:.2f}x")
    slow = sorted((r for r in rows if r["ratio"] > a.over), key=lambda r: -r["ratio"])
    for r in slow:
        print(f"over {a.over}x: {r['case']} {r['ratio']:.2f}x (cpu {r['cpu_ratio']:.2f}x)")
    with open(a.out, "w") as f:
        json.dump({"rows": rows, "geomean": geo, "load": os.getloadavg()}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
