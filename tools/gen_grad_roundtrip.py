#!/usr/bin/env python3
"""Generate tests/fixtures/grad_roundtrip/: tfg's gradient graphs, and TensorFlow running them.

Two processes, because tfg and TensorFlow never share one (both register tensorflow.GraphDef):

    python3 tools/gen_grad_roundtrip.py            # tfg side: writes <case>.pb (tfg grad of
                                                   # the conformance forward graph) and
                                                   # <case>.feeds.npz, then runs the TF side:
    /tmp/tfenv/bin/python tools/gen_grad_roundtrip.py --tf   # NEEDS TENSORFLOW: imports each
                                                   # <case>.pb with import_graph_def, runs the
                                                   # grad/... Identities, writes <case>.tf.npz

Cases: the conformance forward graphs grad_mlp, grad_cond_0, grad_cond_1 and grad_while
(../shared/conformance); cases.json lists each case's ys, xs and fetched gradient names.
"""
import json
import os
import subprocess
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
OUT = os.path.join(HERE, "..", "tests", "fixtures", "grad_roundtrip")
CONFORMANCE = os.path.join(HERE, "..", "..", "shared", "conformance")
CASES = ["grad_mlp", "grad_cond_0", "grad_cond_1", "grad_while"]
TF_PYTHON = "/tmp/tfenv/bin/python"


def grad_name(x):
    node, _, port = x.partition(":")
    return f"grad/{node}:0" if port in ("", "0") else f"grad/{node}_{port}:0"


def tfg_side():
    sys.path.insert(0, os.path.join(HERE, ".."))
    from tfg.graphdef import io
    from tfg.passes.grad import grad

    os.makedirs(OUT, exist_ok=True)
    index = {}
    for name in CASES:
        src = os.path.join(CONFORMANCE, name)
        with open(os.path.join(src, "case.json")) as f:
            case = json.load(f)
        g = grad(io.load(os.path.join(src, "graph.pb")), case["ys"], case["xs"])
        io.save(g, os.path.join(OUT, f"{name}.pb"), "pb")
        feeds = dict(np.load(os.path.join(src, "feeds.npz")))
        np.savez(os.path.join(OUT, f"{name}.feeds.npz"), **feeds)
        index[name] = {"ys": case["ys"], "xs": case["xs"],
                       "fetches": [grad_name(x) for x in case["xs"]],
                       "rtol": case["rtol"], "atol": case["atol"]}
    with open(os.path.join(OUT, "cases.json"), "w") as f:
        json.dump(index, f, indent=1, sort_keys=True)
    subprocess.run([TF_PYTHON, os.path.abspath(__file__), "--tf"], check=True)


def tf_side():
    import tensorflow as tf

    tf1 = tf.compat.v1
    tf1.disable_eager_execution()
    with open(os.path.join(OUT, "cases.json")) as f:
        index = json.load(f)
    for name, case in index.items():
        gd = tf1.GraphDef()
        with open(os.path.join(OUT, f"{name}.pb"), "rb") as f:
            gd.ParseFromString(f.read())
        g = tf.Graph()
        with g.as_default():
            tf.import_graph_def(gd, name="")
        feeds = dict(np.load(os.path.join(OUT, f"{name}.feeds.npz")))
        with tf1.Session(graph=g) as s:
            values = s.run(case["fetches"], feeds)
        np.savez(os.path.join(OUT, f"{name}.tf.npz"), **dict(zip(case["fetches"], values)))
        print(name, "ran in TensorFlow:", len(gd.node), "nodes")


if __name__ == "__main__":
    tf_side() if "--tf" in sys.argv[1:] else tfg_side()
