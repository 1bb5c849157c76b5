#!/usr/bin/env python3
"""Make tests/fixtures/builder/<case>/: graphs written by tfg's builder, run by TensorFlow.

NEEDS TensorFlow for the second half: the tfg part runs under plain python3 (build each
graph with `tfg.builder`, write graph.pb, feeds.npz, case.json), then this same file runs under
TensorFlow's interpreter (default /tmp/tfenv/bin/python, or $TF_PYTHON) in a subprocess to
  1. import graph.pb with tf.compat.v1.import_graph_def and run it (init once, then fetches
     and targets together `steps` times): expected.npz holds TensorFlow's values;
  2. for the control-flow programs below, build the same program with TensorFlow's own v1
     control flow and write tf_graph.pbtxt, so tests compare node structure with TensorFlow's.
tfg and TensorFlow never share a process (both register protobuf messages named
tensorflow.GraphDef); the TF side imports nothing from tfg.

    python3 tools/gen_builder_fixtures.py [CASE...]

case.json follows ../shared/conformance's format (kind run|train, feeds, fetches, init,
targets, steps, rtol, atol, tf_node_count), so its check.py can run these cases too.
"""
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "tests" / "fixtures" / "builder"
EXAMPLES = ["linear_regression", "mlp", "cnn", "cond", "nested_while"]


# --- control-flow programs, written once against an API namespace T (tfg.builder or a
# --- TensorFlow shim with the same names) ------------------------------------------------
def prog_while_loop(T):
    """A counter loop with a vector loop variable and a loop invariant (x)."""
    n = T.placeholder(T.int32, [], name="n")
    x = T.placeholder(T.float32, [3], name="x")
    i, v = T.while_loop(lambda i, v: i < n, lambda i, v: (i + 1, v * 0.5 + x),
                        [T.constant(0), T.constant(np.zeros(3, np.float32))])
    T.identity(i, name="iters")
    T.identity(v, name="v")
    return {"n:0": np.int32(6), "x:0": np.array([1.0, -2.0, 4.0], np.float32)}, \
        ["iters:0", "v:0"]


def prog_nested_cond(T):
    """cond inside both branches of a cond; the inner conds read tensors from the root."""
    x = T.placeholder(T.float32, [], name="x")
    y = T.placeholder(T.float32, [], name="y")

    def outer_true():
        return T.cond(y > 0.0, lambda: x * y, lambda: x - y) + 1.0

    def outer_false():
        return T.cond(y > x, lambda: T.square(y), lambda: T.constant(7.0))

    a = T.cond(x > 0.0, outer_true, outer_false, name="outer")
    b = T.cond(x < 0.0, outer_true, outer_false, name="outer2")
    T.identity(a, name="a")
    T.identity(b, name="b")
    return {"x:0": np.float32(1.5), "y:0": np.float32(-2.0)}, ["a:0", "b:0"]


def prog_nested_while(T):
    """An inner loop bounded by the outer counter; x enters both frames."""
    n = T.placeholder(T.int32, [], name="n")
    x = T.placeholder(T.float32, [], name="x")

    def obody(i, acc):
        def ibody(j, a):
            return j + 1, a + x * T.cast(i, T.float32)
        _, a2 = T.while_loop(lambda j, a: j < i, ibody, [T.constant(0), acc])
        return i + 1, a2

    _, r = T.while_loop(lambda i, a: i < n, obody, [T.constant(0), T.constant(0.0)])
    T.identity(r, name="out")
    return {"n:0": np.int32(5), "x:0": np.float32(0.25)}, ["out:0"]


def prog_cond_in_while(T):
    """A cond in a loop body reading a loop variable and an outside tensor."""
    x = T.placeholder(T.float32, [], name="x")

    def body(i, a):
        b = T.cond(a > 10.0, lambda: a - 3.0, lambda: a * x)
        return i + 1, b

    _, r = T.while_loop(lambda i, a: i < 8, body, [T.constant(0), T.constant(1.0)])
    T.identity(r, name="out")
    return {"x:0": np.float32(2.5)}, ["out:0"]


def prog_while_in_cond(T):
    """A while loop in a cond branch; the second cond takes the other branch, so a whole
    loop sits in an untaken branch (its Enters are dead)."""
    x = T.placeholder(T.float32, [], name="x")
    n = T.placeholder(T.int32, [], name="n")

    def with_loop():
        return T.while_loop(lambda k, v: k < n, lambda k, v: (k + 1, v * x),
                            [T.constant(0), T.constant(1.0)])[1]

    p = T.cond(x > 0.5, with_loop, lambda: x + 1.0, name="taken")
    q = T.cond(x < 0.5, with_loop, lambda: x + 1.0, name="untaken")
    T.identity(p, name="p")
    T.identity(q, name="q")
    return {"x:0": np.float32(1.5), "n:0": np.int32(4)}, ["p:0", "q:0"]


PROGRAMS = {"while_loop": prog_while_loop, "nested_cond": prog_nested_cond,
            "nested_while_loop": prog_nested_while, "cond_in_while": prog_cond_in_while,
            "while_in_cond": prog_while_in_cond}


# --- the tfg side -------------------------------------------------------------------------
def load_example(name):
    spec = importlib.util.spec_from_file_location(f"example_{name}",
                                                  ROOT / "examples" / name / "build.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def build_case(name):
    """(GraphBuilder, run dict) for a case name, with tfg's builder."""
    from tfg import builder as tb

    if name in PROGRAMS:
        g = tb.Graph()
        with g:
            feeds, fetches = PROGRAMS[name](tb)
        return g, dict(feeds=feeds, fetches=fetches, init=[], targets=[], steps=1)
    ex = name[len("example_"):] if name.startswith("example_") else None
    if ex in EXAMPLES:
        return load_example(ex).build()
    raise SystemExit(f"unknown case {name!r}")


def all_cases():
    return [f"example_{e}" for e in EXAMPLES] + list(PROGRAMS)


def write_case(name, tf_python):
    g, run = build_case(name)
    d = OUT / name
    d.mkdir(parents=True, exist_ok=True)
    g.save(str(d / "graph.pb"))
    feeds = {k: np.asarray(v) for k, v in run["feeds"].items()}
    np.savez(d / "feeds.npz", **feeds)
    meta = {"kind": "train" if run["targets"] else "run", "feeds": sorted(feeds),
            "fetches": run["fetches"], "init": run["init"], "targets": run["targets"],
            "steps": run["steps"], "rtol": 1e-4, "atol": 1e-5,
            "tf_node_count": len(g.graph)}
    (d / "case.json").write_text(json.dumps(meta, indent=1, sort_keys=True) + "\n")
    cmd = [tf_python, __file__, "--tf-side", name, str(d)]
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"TensorFlow failed on {name}:\n{p.stderr[-3000:]}")
    print(f"{name}: {len(g.graph)} nodes; TensorFlow: {p.stdout.strip()}")


def main(argv):
    if argv[:1] == ["--tf-side"]:
        return tf_side(argv[1], Path(argv[2]))
    tf_python = os.environ.get("TF_PYTHON", "/tmp/tfenv/bin/python")
    for name in argv or all_cases():
        write_case(name, tf_python)


# --- the TensorFlow side (run under TensorFlow's interpreter; imports no tfg) --------------
def tf_side(name, d):
    import tensorflow as tf

    tf1 = tf.compat.v1
    tf1.disable_eager_execution()
    tf1.disable_control_flow_v2()
    tf1.disable_resource_variables()
    meta = json.loads((d / "case.json").read_text())
    gd = tf1.GraphDef()
    gd.ParseFromString((d / "graph.pb").read_bytes())
    g = tf1.Graph()
    with g.as_default():
        tf1.import_graph_def(gd, name="")
    feeds = dict(np.load(d / "feeds.npz"))
    with tf1.Session(graph=g) as sess:
        for op in meta["init"]:
            sess.run(g.get_operation_by_name(op))
        fetch = [g.get_tensor_by_name(f) for f in meta["fetches"]]
        targets = [g.get_operation_by_name(t) for t in meta["targets"]]
        for _ in range(meta["steps"]):
            values = sess.run(fetch + targets, feed_dict=feeds)[:len(fetch)]
    np.savez(d / "expected.npz", **{f: np.asarray(v) for f, v in zip(meta["fetches"], values)})
    if name in PROGRAMS:
        native = tf1.Graph()
        with native.as_default():
            PROGRAMS[name](_TFShim(tf))
        (d / "tf_graph.pbtxt").write_text(str(native.as_graph_def()))
    print(", ".join(f"{f}={np.asarray(v).ravel()[:4]}" for f, v in zip(meta["fetches"], values)))


class _TFShim:
    """The subset of tfg.builder's names that the programs use, mapped to TensorFlow 1."""

    def __init__(self, tf):
        tf1 = tf.compat.v1
        self.float32, self.int32 = tf.float32, tf.int32
        for n in ("placeholder", "constant", "cond", "while_loop", "identity", "cast",
                  "square"):
            setattr(self, n, getattr(tf1, n))


if __name__ == "__main__":
    main(sys.argv[1:])
