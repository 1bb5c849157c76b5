#!/usr/bin/env python3
"""Autoregressive decoding: keras_hub's GPT2CausalLM greedy `generate_step` (a functional
While over `call_with_cache`, its KV cache updated by XlaDynamicUpdateSlice), tfg against
TensorFlow on the same frozen GraphDef, A B A B.

    python3 benchmarks/bench_decode.py --tf-python /work/tfvenv/bin/python [--reps 7]
        [--sizes small,medium]

The TensorFlow environment needs keras-hub (`pip install keras-hub` there; never in tfg's).
Sizes (vocabulary, layers, hidden, heads, MLP, sequence, batch, prompt):

| size | config | what it shows |
| --- | --- | --- |
| tiny | 16, 2, 8, 2, 16, 10, 2, 3 | the fixtures' size (tests/fixtures/real_loops/hub_gpt2_generate_functional): per-node costs only |
| small | 500, 2, 64, 2, 256, 32, 2, 4 | a small model: per-node costs still most of the step |
| medium | 1000, 4, 256, 4, 1024, 64, 4, 8 | 56 decode steps of a 4-layer, 256-wide model: the kernels' own speed |

TensorFlow (a subprocess, 2 intra- and inter-op threads) builds each model with random
weights (seeded), freezes `generate_step` with its While kept, runs it once and answers each
request with one step's wall and CPU time. tfg loads the GraphDef, checks its token ids
against TensorFlow's (they must be equal) and times the same step. Prints the medians and
ratios; writes benchmarks/results/decode.json.
"""
import argparse
import json
import os
import statistics
import sys
import tempfile
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.dirname(HERE))

SIZES = {"tiny": (16, 2, 8, 2, 16, 10, 2, 3), "small": (500, 2, 64, 2, 256, 32, 2, 4),
         "medium": (1000, 4, 256, 4, 1024, 64, 4, 8)}

TF_WORKER = r'''
import json, os, sys, time
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np
import tensorflow as tf
try:
    import keras
    import keras_hub
except ImportError:
    print("no keras_hub", flush=True)
    sys.exit(0)
sys.path.insert(0, sys.argv[2])
from gen_real_models import freeze
out, sizes = sys.argv[1], json.loads(sys.argv[3])
runs = {}
for name, (v, layers, d, heads, mlp, seq, batch, prompt) in sizes.items():
    keras.utils.set_random_seed(1)
    backbone = keras_hub.models.GPT2Backbone(
        vocabulary_size=v, num_layers=layers, num_heads=heads, hidden_dim=d,
        intermediate_dim=mlp, max_sequence_length=seq, dropout=0.0)
    lm = keras_hub.models.GPT2CausalLM(backbone=backbone, preprocessor=None)
    lm.compile(sampler="greedy")
    rng = np.random.default_rng(0)
    ids = np.zeros((batch, seq), np.int32)
    mask = np.zeros((batch, seq), bool)
    ids[:, :prompt] = rng.integers(1, v, (batch, prompt))
    mask[:, :prompt] = True

    def fn(token_ids, padding_mask):
        o = lm.generate_step({"token_ids": token_ids, "padding_mask": padding_mask},
                             stop_token_ids=None)
        return o["token_ids"], o["padding_mask"]
    specs = [tf.TensorSpec([batch, seq], tf.int32, name="token_ids"),
             tf.TensorSpec([batch, seq], tf.bool, name="padding_mask")]
    gd, ins, outs = freeze(fn, specs, lower=False)
    with open(os.path.join(out, name + ".pb"), "wb") as f:
        f.write(gd.SerializeToString())
    g = tf.Graph()
    with g.as_default():
        tf.import_graph_def(gd, name="")
    sess = tf.compat.v1.Session(graph=g, config=tf.compat.v1.ConfigProto(
        intra_op_parallelism_threads=2, inter_op_parallelism_threads=2))
    feeds = {g.get_tensor_by_name(ins[0]): ids, g.get_tensor_by_name(ins[1]): mask}
    fetches = [g.get_tensor_by_name(o) for o in outs]
    got = sess.run(fetches, feeds)
    np.savez(os.path.join(out, name + ".npz"), ids=ids, mask=mask, want=got[0])
    with open(os.path.join(out, name + ".json"), "w") as f:
        json.dump({"feeds": ins, "fetches": outs, "nodes": len(gd.node)}, f)
    runs[name] = (sess, fetches, feeds)
print("ready", flush=True)
for line in sys.stdin:
    name = line.strip()
    if not name:
        break
    sess, fetches, feeds = runs[name]
    t, c = time.perf_counter(), time.process_time()
    sess.run(fetches, feeds)
    print(time.perf_counter() - t, time.process_time() - c, flush=True)
'''


def run(tf_python, sizes=("small", "medium"), reps=7, log=print):
    """One row per size: TF's and tfg's median step (wall and process CPU) and the ratios."""
    import subprocess

    import tfg
    from abtime import start_tf_worker
    from tfg.executor import Session
    tools = os.path.join(os.path.dirname(HERE), "tools")
    rows = []
    with tempfile.TemporaryDirectory(prefix="tfgdecode") as tmp:
        path = os.path.join(tmp, "worker.py")
        with open(path, "w") as f:
            f.write(TF_WORKER)
        probe = subprocess.run([tf_python, "-c", "import keras_hub"], capture_output=True)
        if probe.returncode:
            log("bench_decode: the TensorFlow environment has no keras_hub "
                "(pip install keras-hub there); nothing to time")
            return rows
        worker, tf_time = start_tf_worker(
            [tf_python, path, tmp, tools, json.dumps({s: SIZES[s] for s in sizes})],
            "TensorFlow decode worker")
        try:
            for name in sizes:
                meta = json.load(open(os.path.join(tmp, name + ".json")))
                data = np.load(os.path.join(tmp, name + ".npz"))
                feeds = dict(zip(meta["feeds"], (data["ids"], data["mask"])))
                c0 = time.process_time()
                sess = Session(tfg.load(os.path.join(tmp, name + ".pb")))
                got = sess.run(meta["fetches"], feeds)
                first = time.process_time() - c0
                if not np.array_equal(got[0], data["want"]):
                    raise SystemExit(f"{name}: tfg's token ids differ from TensorFlow's")
                tf_s, tfg_s, tfg_c = [], [], []
                for _ in range(max(3, reps)):
                    tf_s.append(tf_time(name))
                    t, c = time.perf_counter(), time.process_time()
                    sess.run(meta["fetches"], feeds)
                    tfg_s.append(time.perf_counter() - t)
                    tfg_c.append(time.process_time() - c)
                m = statistics.median
                row = {"size": name, "config": SIZES[name], "nodes": meta["nodes"],
                       "tf_s": m(tf_s), "tfg_s": m(tfg_s), "ratio": m(tfg_s) / m(tf_s),
                       "tf_cpu_s": m(tf_time.cpu), "tfg_cpu_s": m(tfg_c),
                       "cpu_ratio": m(tfg_c) / m(tf_time.cpu), "first_step_cpu_s": first}
                tf_time.cpu.clear()
                rows.append(row)
                log(f"gpt2 generate {name:7} TF {row['tf_s'] * 1e3:8.1f} ms  tfg "
                    f"{row['tfg_s'] * 1e3:8.1f} ms  {row['ratio']:.2f}x  (cpu "
                    f"{row['cpu_ratio']:.2f}x)  ids equal")
        finally:
            worker.stdin.close()
            worker.wait(timeout=60)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tf-python", default="/work/tfvenv/bin/python")
    ap.add_argument("--sizes", default="small,medium")
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--out", default=os.path.join(HERE, "results", "decode.json"))
    a = ap.parse_args()
    sizes = [s for s in a.sizes.split(",") if s]
    bad = set(sizes) - set(SIZES)
    if bad:
        raise SystemExit(f"unknown sizes {sorted(bad)}; choose from {sorted(SIZES)}")
    rows = run(a.tf_python, sizes, a.reps)
    with open(a.out, "w") as f:
        json.dump({"rows": rows, "load": os.getloadavg()}, f, indent=1)
    return 0 if rows else 1


if __name__ == "__main__":
    sys.exit(main())
