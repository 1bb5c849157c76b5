#!/usr/bin/env python3
"""keras.applications inference (batch 2, 96x96x3), tfg against TensorFlow on the same frozen
GraphDefs, with tfg's default threading and each fixed BLAS thread count.

    python3 benchmarks/bench_keras.py --tf-python /work/tfvenv/bin/python [--models resnet50]
    python3 benchmarks/bench_keras.py --rewrites     # default against --no-graph-rewrites

TensorFlow (a subprocess: never in tfg's process) builds each model with random weights
(tools/gen_keras_apps.py's `freeze`, at batch 2 and 96x96 instead of its GPU graphs' 32 and
224), writes the frozen GraphDef and an input, and times its own tf.compat.v1.Session of the
imported graph (intra- and inter-op threads: --tf-threads, default 2) on request. tfg loads the
same file; TensorFlow's output checks tfg's values (max |diff| relative to max |y|) before
timing. Timings alternate A B A B (TensorFlow, then each tfg setting: 'default', then
blas=1 .. blas=<cores>) and report medians; benchmarks/run.py's `keras` row calls `run`.
With --rewrites the settings are the default and the Session without its graph rewrites
(`graph_rewrites=False`), and each row also gives tfg's process CPU time per step and what the
rewrites cost when the step is first prepared (CPU seconds, nodes before and after).
"""
import argparse
import json
import os
import shutil
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

# Name in the rows -> keras.applications class. InceptionV3 needs >= 75x75: 96 is fine.
MODELS = {"mobilenetv2": "MobileNetV2", "mobilenetv3small": "MobileNetV3Small",
          "resnet50": "ResNet50", "densenet121": "DenseNet121",
          "efficientnetb0": "EfficientNetB0", "inceptionv3": "InceptionV3",
          "nasnetmobile": "NASNetMobile"}
BATCH, SIZE = 2, 96

KERAS_WORKER = r'''
import json, os, sys, time
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
out_dir, tools, threads, batch, size = sys.argv[1], sys.argv[2], int(sys.argv[3]), \
    int(sys.argv[4]), int(sys.argv[5])
models = json.loads(sys.argv[6])
sys.path.insert(0, tools)
import numpy as np
import tensorflow as tf
import keras
import gen_keras_apps
sessions = {}
for name, cls in models.items():
    gd, inp, out = gen_keras_apps.freeze(getattr(keras.applications, cls), batch, size)
    with open(os.path.join(out_dir, name + ".pb"), "wb") as f:
        f.write(gd.SerializeToString())
    x = np.random.default_rng(0).standard_normal((batch, size, size, 3)).astype(np.float32)
    g = tf.Graph()
    with g.as_default():
        tf.compat.v1.import_graph_def(gd, name="")
    sess = tf.compat.v1.Session(graph=g, config=tf.compat.v1.ConfigProto(
        intra_op_parallelism_threads=threads, inter_op_parallelism_threads=threads))
    y = sess.run(out, {inp: x})
    np.save(os.path.join(out_dir, name + "_x.npy"), x)
    np.save(os.path.join(out_dir, name + "_y.npy"), y)
    with open(os.path.join(out_dir, name + ".json"), "w") as f:
        json.dump({"input": inp, "output": out, "nodes": len(gd.node)}, f)
    sessions[name] = (sess, g.get_tensor_by_name(out), {g.get_tensor_by_name(inp): x})
print("ready", flush=True)
for line in sys.stdin:
    name = line.strip()
    if not name:
        break
    sess, out, feed = sessions[name]
    t = time.perf_counter()
    sess.run(out, feed)
    print(time.perf_counter() - t, flush=True)
'''


REWRITE_SETTINGS = {"default": None, "no-rewrites": {"graph_rewrites": False}}


def _session(graph, setting):
    """A Session for one setting: a BLAS thread count (None: default) or Session kwargs."""
    from tfg.executor import Session
    if isinstance(setting, dict):
        return Session(graph, **setting)
    return Session(graph, blas_threads=setting)


def blas_settings(cores=None):
    """The settings each row times: the default, then every fixed BLAS thread count."""
    cores = cores or os.cpu_count() or 1
    return {"default": None, **{f"blas={n}": n for n in range(1, cores + 1)}}


def run(tf_python, models=tuple(MODELS), reps=5, warmup=2, settings=None, tf_threads=2,
        log=print, keep=False):
    """One row per model: TF's and tfg's medians, tfg's value error, every setting's ratio.
    The frozen graphs (about 290 MB for all models) are removed afterwards unless `keep`."""
    import tfg
    from abtime import ab_medians, settings_summary, start_tf_worker
    from tfg.executor import contention

    settings = settings or blas_settings()
    tmp = tempfile.mkdtemp(prefix="tfgkeras")
    path = os.path.join(tmp, "keras_worker.py")
    with open(path, "w") as f:
        f.write(KERAS_WORKER)
    tools = os.path.join(os.path.dirname(HERE), "tools")
    want = {m: MODELS[m] for m in models}
    worker, tf_time = start_tf_worker(
        [tf_python, path, tmp, tools, str(tf_threads), str(BATCH), str(SIZE), json.dumps(want)],
        "TensorFlow keras worker")

    rows = []
    try:
        for name in want:
            meta = json.load(open(os.path.join(tmp, name + ".json")))
            graph = tfg.load(os.path.join(tmp, name + ".pb"))
            x, y = np.load(os.path.join(tmp, name + "_x.npy")), np.load(
                os.path.join(tmp, name + "_y.npy"))
            feeds = {meta["input"]: x}
            sessions = {k: _session(graph, v) for k, v in settings.items()}
            c0 = time.process_time()
            got = sessions["default"].run(meta["output"], feeds)
            first_cpu = time.process_time() - c0
            err = float(np.abs(got - y).max() / max(1e-12, float(np.abs(y).max())))
            cpu = {k: [] for k in sessions}

            def timed_cpu(k, s):
                c = time.process_time()
                s.run(meta["output"], feeds)
                cpu[k].append(time.process_time() - c)

            steps = {k: (lambda k=k, s=s: timed_cpu(k, s)) for k, s in sessions.items()}
            contention.choices.clear()
            tf_s, tfg_s = ab_medians(lambda: tf_time(name), steps, reps, warmup)
            row = {"adaptive_choices": dict(contention.choices), "graph": f"keras/{name}", "nodes": meta["nodes"], "batch": BATCH,
                   "size": SIZE, "max_rel_error": err, **settings_summary(tf_s, tfg_s)}
            row["tfg_cpu_by_setting_s"] = {k: float(np.median(v[warmup:] or v))
                                           for k, v in cpu.items()}
            rewrites = getattr(sessions["default"], "rewrites", None)
            if rewrites:
                row["rewrite"] = {"before": rewrites[0].before, "after": rewrites[0].after,
                                  "seconds": rewrites[0].seconds, "first_step_cpu_s": first_cpu}
            rows.append(row)
            log(f"{row['graph']:24} TF {tf_s * 1e3:8.1f} ms  " + "  ".join(
                f"{k} {v * 1e3:8.1f} ms ({v / tf_s:.2f}x, cpu "
                f"{row['tfg_cpu_by_setting_s'][k] * 1e3:.1f} ms)" for k, v in tfg_s.items())
                + f"  err {err:.1e}  adaptive chose {dict(contention.choices)}"
                + (f"  rewrites {rewrites[0].before}->{rewrites[0].after} nodes, first step "
                   f"{first_cpu:.2f} s cpu" if rewrites else ""))
    finally:
        worker.stdin.close()
        worker.wait(timeout=60)
        if keep:
            log(f"graphs kept in {tmp}")
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tf-python", default="/work/tfvenv/bin/python")
    ap.add_argument("--models", default=",".join(MODELS))
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--tf-threads", type=int, default=2)
    ap.add_argument("--rewrites", action="store_true",
                    help="time the default against graph_rewrites=False instead of BLAS "
                         "thread counts")
    ap.add_argument("--keep", action="store_true",
                    help="keep the frozen graphs and inputs (the folder is printed)")
    a = ap.parse_args()
    models = [m for m in a.models.split(",") if m]
    bad = sorted(set(models) - set(MODELS))
    if bad:
        raise SystemExit(f"unknown models {bad}; choose from {sorted(MODELS)}")
    run(a.tf_python, models, a.reps, a.warmup, tf_threads=a.tf_threads,
        settings=REWRITE_SETTINGS if a.rewrites else None, keep=a.keep)
    return 0


if __name__ == "__main__":
    sys.exit(main())
