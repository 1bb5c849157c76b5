#!/usr/bin/env python3
"""Load/save speed of tfg on a 100,000-node GraphDef, optionally against TensorFlow.

    python3 benchmarks/bench_io.py [--nodes 100000] [--repeat 3] [--tf-python /tmp/tfenv/bin/python]

The graph is a realistic mix (Const with small tensors, MatMul, AddV2, Identity, with attrs and
name scopes, some control edges). Timed with tfg: binary load (bytes -> Graph), binary save
(Graph -> bytes), text load and text save, and load + write back. With `--tf-python` pointing at
a Python that has TensorFlow, the same bytes are timed there in a separate process (tfg and
TensorFlow must not share one: both register protobuf messages named tensorflow.GraphDef):
GraphDef parse, text parse and `import_graph_def`. Results go to benchmarks/results/io.json.
Target: tfg load + write back of 100,000 nodes in under 5 s.
"""
import argparse
import json
import os
import platform
import subprocess
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from tfg.graphdef import attrs, io  # noqa: E402
from tfg.schemas.dtypes import DType  # noqa: E402
from tfg.schemas.proto import graph_pb2  # noqa: E402

RESULTS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "results", "io.json")
TARGET_S = 5.0


def build_graphdef(n_nodes, seed=0):
    """A GraphDef of `n_nodes` nodes: blocks of Const/MatMul/AddV2/Identity under scopes."""
    rng = np.random.default_rng(seed)
    gd = graph_pb2.GraphDef()
    gd.versions.producer = 2474
    f32 = attrs.encode(DType.FLOAT)
    x = gd.node.add(name="x", op="Placeholder")
    x.attr["dtype"].CopyFrom(f32)
    x.attr["shape"].CopyFrom(attrs.encode(attrs.Shape((None, 16))))
    prev = "x"
    i = 1
    block = 0
    while i < n_nodes:
        scope = f"layer_{block // 50}/block_{block % 50}"
        w = gd.node.add(name=f"{scope}/w", op="Const")
        w.attr["dtype"].CopyFrom(f32)
        w.attr["value"].CopyFrom(attrs.encode(rng.standard_normal((16, 16)).astype(np.float32)))
        mm = gd.node.add(name=f"{scope}/MatMul", op="MatMul", input=[prev, w.name])
        mm.attr["T"].CopyFrom(f32)
        mm.attr["transpose_a"].b = False
        mm.attr["transpose_b"].b = bool(block % 2)
        b = gd.node.add(name=f"{scope}/b", op="Const")
        b.attr["dtype"].CopyFrom(f32)
        b.attr["value"].CopyFrom(attrs.encode(np.array(0.5, dtype=np.float32)))
        add = gd.node.add(name=f"{scope}/add", op="AddV2", input=[mm.name, b.name])
        add.attr["T"].CopyFrom(f32)
        out = gd.node.add(name=f"{scope}/out", op="Identity", input=[add.name])
        out.attr["T"].CopyFrom(f32)
        if block % 10 == 0:
            out.input.append("^" + w.name)
        out.device = "/job:localhost/replica:0/task:0/device:CPU:0" if block % 3 == 0 else ""
        prev = out.name
        i += 5
        block += 1
    del gd.node[n_nodes:]
    return gd


def timed(fn, repeat):
    best, result = float("inf"), None
    for _ in range(repeat):
        t = time.perf_counter()
        result = fn()
        best = min(best, time.perf_counter() - t)
    return best, result


def bench_tfg(data_pb, data_txt, repeat):
    out = {}
    out["load_binary_s"], g = timed(lambda: io.loads(data_pb), repeat)
    out["save_binary_s"], _ = timed(lambda: io.dumps(g, "binary"), repeat)
    # Text goes through protobuf's pure-Python text_format: slow, so timed once.
    out["load_text_s"], _ = timed(lambda: io.loads(data_txt), 1)
    out["save_text_s"], _ = timed(lambda: io.dumps(g, "pbtxt"), 1)
    out["load_and_write_back_binary_s"], _ = timed(
        lambda: io.dumps(io.loads(data_pb), "binary"), repeat)
    out["topo_order_s"], _ = timed(g.topo_order, repeat)
    return out


TF_SCRIPT = r"""
import json, sys, time
import tensorflow.compat.v1 as tf
from google.protobuf import text_format
tf.disable_eager_execution()
pb, txt, repeat = sys.argv[1], sys.argv[2], int(sys.argv[3])
data_pb, data_txt = open(pb, "rb").read(), open(txt).read()
def timed(fn):
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter(); r = fn(); best = min(best, time.perf_counter() - t)
    return best, r
out = {}
def parse():
    gd = tf.GraphDef(); gd.ParseFromString(data_pb); return gd
out["parse_binary_s"], gd = timed(parse)
out["serialize_binary_s"], _ = timed(gd.SerializeToString)
t = time.perf_counter(); text_format.Parse(data_txt, tf.GraphDef())
out["parse_text_s"] = time.perf_counter() - t
def imp():
    with tf.Graph().as_default() as g:
        tf.import_graph_def(gd, name="")
    return g
out["import_graph_def_s"], g = timed(imp)
out["load_and_import_binary_s"] = out["parse_binary_s"] + out["import_graph_def_s"]
out["export_graph_def_s"], _ = timed(lambda: g.as_graph_def().SerializeToString())
out["version"] = tf.__version__
print(json.dumps(out))
"""


def bench_tf(tf_python, path_pb, path_txt, repeat):
    p = subprocess.run([tf_python, "-c", TF_SCRIPT, path_pb, path_txt, str(repeat)],
                       capture_output=True, text=True, timeout=1800)
    if p.returncode != 0:
        print(f"TensorFlow run failed: {p.stderr.strip().splitlines()[-1:]}", file=sys.stderr)
        return None
    return json.loads(p.stdout.strip().splitlines()[-1])


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--nodes", type=int, default=100_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--tf-python", help="a Python with TensorFlow, e.g. /tmp/tfenv/bin/python")
    ap.add_argument("--output", default=RESULTS)
    a = ap.parse_args()

    gd = build_graphdef(a.nodes)
    data_pb = gd.SerializeToString()
    data_txt = io.dumps(gd, "pbtxt")
    print(f"graph: {len(gd.node):,} nodes, {len(data_pb) / 1e6:.1f} MB binary, "
          f"{len(data_txt) / 1e6:.1f} MB text")
    result = {"nodes": len(gd.node), "binary_bytes": len(data_pb), "text_bytes": len(data_txt),
              "repeat": a.repeat, "python": platform.python_version(),
              "machine": platform.machine(), "tfg": bench_tfg(data_pb, data_txt, a.repeat)}
    for k, v in result["tfg"].items():
        print(f"  tfg {k:32s} {v:8.3f}")
    total = result["tfg"]["load_and_write_back_binary_s"]
    result["target_s"] = TARGET_S
    result["meets_target"] = total < TARGET_S
    print(f"  load + write back: {total:.2f} s (target < {TARGET_S:.0f} s): "
          f"{'ok' if total < TARGET_S else 'MISSED'}")

    if a.tf_python:
        with tempfile.TemporaryDirectory() as tmp:
            pb, txt = os.path.join(tmp, "g.pb"), os.path.join(tmp, "g.pbtxt")
            with open(pb, "wb") as f:
                f.write(data_pb)
            with open(txt, "wb") as f:
                f.write(data_txt)
            tf_res = bench_tf(a.tf_python, pb, txt, a.repeat)
        if tf_res:
            result["tensorflow"] = tf_res
            t = result["tfg"]
            result["ratios_tfg_over_tf"] = {
                "load_binary_vs_parse": t["load_binary_s"] / tf_res["parse_binary_s"],
                "load_binary_vs_parse_and_import":
                    t["load_binary_s"] / tf_res["load_and_import_binary_s"],
                "save_binary_vs_serialize": t["save_binary_s"] / tf_res["serialize_binary_s"],
                "load_text_vs_parse_text": t["load_text_s"] / tf_res["parse_text_s"],
            }
            for k, v in tf_res.items():
                if k != "version":
                    print(f"  tf  {k:32s} {v:8.3f}")
            for k, v in result["ratios_tfg_over_tf"].items():
                print(f"  ratio tfg/tf {k:32s} {v:6.2f}x")
    os.makedirs(os.path.dirname(a.output), exist_ok=True)
    with open(a.output, "w") as f:
        json.dump(result, f, indent=2)
    print(f"wrote {a.output}")


if __name__ == "__main__":
    main()
