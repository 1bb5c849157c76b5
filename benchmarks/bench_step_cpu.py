#!/usr/bin/env python3
"""Process CPU time per Session step on bench_run's graphs, one BLAS thread: a measure that a
loaded machine disturbs less than wall time, for A/B comparisons of two checkouts.

    python3 benchmarks/bench_step_cpu.py --tf-python /work/tfvenv/bin/python --graphs /tmp/g
    cd /tmp/old-checkout && python3 /path/to/bench_step_cpu.py --graphs /tmp/g   # same graphs

TensorFlow (in a subprocess) writes the chain, MLP and CNN GraphDefs of benchmarks/bench_run.py
into --graphs when they are not there yet; the tfg imported is the one of the current
directory, so running it in turn from two checkouts compares them (alternate A B A B). Prints
one JSON line: {case: median ms}, with `chain/dataflow` the chain on the dataflow executor.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time

sys.path.insert(0, os.getcwd())  # the checkout being measured
sys.path.insert(1, os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

CASES = (("chain", True, 40), ("chain", False, 15), ("mlp", True, 15), ("cnn", True, 15))


def write_graphs(tf_python, out_dir):
    import bench_run

    os.makedirs(out_dir, exist_ok=True)
    worker = os.path.join(out_dir, "tf_worker.py")
    with open(worker, "w") as f:
        f.write(bench_run.TF_WORKER)
    p = subprocess.Popen([tf_python, worker, out_dir], stdin=subprocess.PIPE,
                         stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                         env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
    ready = p.stdout.readline().strip()
    p.stdin.close()
    p.wait()
    if ready != "ready":
        raise SystemExit("the TensorFlow worker failed to write the graphs")


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--graphs", required=True, help="folder of the graphs (made if missing)")
    ap.add_argument("--tf-python", default=None, help="a Python with TensorFlow, to make them")
    a = ap.parse_args()
    if not os.path.exists(os.path.join(a.graphs, "chain.pb")):
        if not a.tf_python:
            raise SystemExit("--graphs has no chain.pb: pass --tf-python to make the graphs")
        write_graphs(a.tf_python, a.graphs)
    import tfg
    from tfg.executor import Session

    out = {}
    for name, fast, reps in CASES:
        meta = json.load(open(os.path.join(a.graphs, name + ".json")))
        graph = tfg.load(os.path.join(a.graphs, name + ".pb"))
        with np.load(os.path.join(a.graphs, name + "_feeds.npz")) as f:
            feeds = {k: f[k] for k in f.files}
        sess = Session(graph, fast_path=fast, blas_threads=1)
        if meta["init"]:
            sess.run(None, targets=meta["init"])
        for _ in range(3):
            sess.run(meta["fetches"], feeds, targets=meta["targets"])
        times = []
        for _ in range(reps):
            c = time.process_time()
            sess.run(meta["fetches"], feeds, targets=meta["targets"])
            times.append(time.process_time() - c)
        out[name + ("" if fast else "/dataflow")] = round(statistics.median(times) * 1e3, 2)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
