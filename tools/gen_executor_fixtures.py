#!/usr/bin/env python3
"""Make the executor fixtures of tests/test_executor*.py (needs TensorFlow; never imports tfg).

    /tmp/tfenv/bin/python tools/gen_executor_fixtures.py [CASE ...]

Each case is built in tf.compat.v1 graph mode with v1 control flow, run by TensorFlow, and
written to tests/fixtures/executor/<case>/: graph.pb, feeds.npz (keys are tensor names),
expected.npz (what TensorFlow computed, keyed by fetch name) and case.json (fetches, targets,
init, steps; `error` instead of expected values when TensorFlow's run fails).
"""
import json
import os
import shutil

import numpy as np
import tensorflow.compat.v1 as tf

tf.disable_eager_execution()
tf.disable_control_flow_v2()

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures",
                   "executor")


def cond_in_while(pi=10):
    n = tf.placeholder(tf.int32, [], name="n")
    x = tf.placeholder(tf.float32, [3], name="x")

    def body(i, acc):
        even = tf.equal(tf.math.floormod(i, 2), 0)
        acc = tf.cond(even, lambda: acc * x, lambda: acc + x)
        return i + 1, acc

    i, acc = tf.while_loop(lambda i, a: i < n, body, [tf.constant(0), tf.ones([3])],
                           parallel_iterations=pi)
    tf.identity(acc, name="y")
    tf.identity(i, name="count")
    return ["y:0", "count:0"], {"n:0": np.int32(7), "x:0": np.array([1.5, -2.0, 0.5], np.float32)}


def while_in_cond(p):
    def build():
        n = tf.placeholder(tf.int32, [], name="n")
        x = tf.placeholder(tf.float32, [], name="x")
        pred = tf.placeholder(tf.bool, [], name="p")

        def loop():
            _, v = tf.while_loop(lambda i, v: i < n, lambda i, v: (i + 1, v * x),
                                 [tf.constant(0), x])
            return v

        y = tf.cond(pred, loop, lambda: x * 3.0)
        tf.identity(y, name="y")
        return ["y:0"], {"n:0": np.int32(4), "x:0": np.float32(1.5), "p:0": np.bool_(p)}
    return build


def nested_while_invariants(pi=10):
    n = tf.placeholder(tf.int32, [], name="n")
    m = tf.placeholder(tf.int32, [], name="m")
    w = tf.placeholder(tf.float32, [2, 2], name="w")
    scale = tf.constant(0.5, name="scale")

    def outer(i, acc):
        def inner(j, a):
            # w, scale and i are loop invariants of the inner loop: constant Enters.
            return j + 1, tf.matmul(a, w) * scale + tf.cast(i, tf.float32)
        _, a = tf.while_loop(lambda j, a: j < m, inner, [tf.constant(0), acc],
                             parallel_iterations=pi)
        return i + 1, a

    _, acc = tf.while_loop(lambda i, a: i < n, outer, [tf.constant(0), tf.constant([[1.0, 0.0], [0.0, 1.0]])],
                           parallel_iterations=pi)
    tf.identity(acc, name="y")
    return ["y:0"], {"n:0": np.int32(3), "m:0": np.int32(4),
                     "w:0": np.array([[1.0, 0.5], [-0.25, 1.0]], np.float32)}


def parallel(pi):
    def build():
        n = tf.placeholder(tf.int32, [], name="n")
        x = tf.placeholder(tf.float32, [4], name="x")

        def body(i, a, b):
            # Two independent chains per iteration: iterations can overlap.
            return i + 1, tf.sin(a) + x, b * 0.9 + tf.cast(i, tf.float32)

        _, a, b = tf.while_loop(lambda i, a, b: i < n, body,
                                [tf.constant(0), tf.zeros([4]), tf.zeros([4])],
                                parallel_iterations=pi)
        tf.identity(a, name="a")
        tf.identity(b, name="b")
        return ["a:0", "b:0"], {"n:0": np.int32(25),
                                "x:0": np.array([0.1, 0.2, -0.3, 1.0], np.float32)}
    return build


def zero_iter():
    n = tf.placeholder(tf.int32, [], name="n")
    x = tf.placeholder(tf.float32, [2], name="x")
    i, v = tf.while_loop(lambda i, v: i < n, lambda i, v: (i + 1, v * 2.0), [tf.constant(0), x])
    tf.identity(v, name="y")
    tf.identity(i, name="count")
    return ["y:0", "count:0"], {"n:0": np.int32(0), "x:0": np.array([3.0, 4.0], np.float32)}


def dead_cond():
    x = tf.placeholder(tf.float32, [], name="x")
    p = tf.placeholder(tf.bool, [], name="p")
    # A chain on the untaken branch must stay dead through several ops and a nested cond.
    y = tf.cond(p, lambda: tf.exp(tf.sqrt(x)) * 2.0,
                lambda: tf.cond(x > 0, lambda: x - 1.0, lambda: -x))
    tf.identity(y, name="y")
    return ["y:0"], {"x:0": np.float32(4.0), "p:0": np.bool_(False)}


def stack_loop():
    n = tf.placeholder(tf.int32, [], name="n")
    x = tf.placeholder(tf.float32, [], name="x")
    from tensorflow.python.ops import gen_data_flow_ops
    stack = gen_data_flow_ops.stack_v2(max_size=-1, elem_type=tf.float32, stack_name="s")

    def push(i, v):
        with tf.control_dependencies([gen_data_flow_ops.stack_push_v2(stack, v)]):
            return i + 1, v * x

    i, _ = tf.while_loop(lambda i, v: i < n, push, [tf.constant(0), tf.constant(1.0)])

    def pop(j, acc):
        popped = tf.reshape(gen_data_flow_ops.stack_pop_v2(stack, tf.float32), [])
        return j - 1, acc * 10.0 + popped

    _, acc = tf.while_loop(lambda j, a: j > 0, pop, [i, tf.constant(0.0)])
    tf.identity(acc, name="y")
    return ["y:0"], {"n:0": np.int32(4), "x:0": np.float32(2.0)}


def loop_error():
    n = tf.placeholder(tf.int32, [], name="n")

    def body(i, v):
        check = tf.Assert(i < 3, [i], name="check")
        with tf.control_dependencies([check]):
            return i + 1, v + 1.0

    _, v = tf.while_loop(lambda i, v: i < n, body, [tf.constant(0), tf.constant(0.0)])
    tf.identity(v, name="y")
    return ["y:0"], {"n:0": np.int32(10)}


def control_trigger():
    x = tf.placeholder(tf.float32, [], name="x")
    p = tf.placeholder(tf.bool, [], name="p")
    from tensorflow.python.ops import control_flow_ops, gen_control_flow_ops
    sw_f, _ = control_flow_ops.switch(x, p)
    dead = tf.identity(sw_f, name="dead_when_true")
    # ControlTrigger is never dead: z runs although its (indirect) control input is dead.
    with tf.control_dependencies([dead.op]):
        trig = gen_control_flow_ops.control_trigger(name="trigger")
    with tf.control_dependencies([trig]):
        z = tf.identity(x + 1.0, name="z")
    y = tf.cond(p, lambda: x * 2.0, lambda: x * 3.0)
    tf.identity(y, name="y")
    return ["y:0", "z:0"], {"x:0": np.float32(2.0), "p:0": np.bool_(True)}


def variables(use_resource=False):
    def build():
        x = tf.placeholder(tf.float32, [4, 3], name="x")
        w = tf.Variable(tf.constant([[0.5], [-1.0], [0.25]]), name="w", use_resource=use_resource)
        b = tf.Variable(tf.zeros([1]), name="b", use_resource=use_resource)
        y = tf.matmul(x, w) + b
        loss = tf.reduce_mean(tf.square(y - 1.0), name="loss")
        tf.train.GradientDescentOptimizer(0.1).minimize(loss, name="train")
        tf.variables_initializer([w, b], name="init")
        tf.identity(w.read_value() if use_resource else w, name="w_value")
        return ["loss:0", "w_value:0"], {"x:0": np.arange(12, dtype=np.float32).reshape(4, 3) / 10}
    return build


def ref_aliasing():
    """Reads of reference variables alias the buffer the ref kernels write in place: a read
    used after an AssignAdd, an Assign of as many elements (reshaped) or ApplyGradientDescent
    sees the update; an Assign of another size gives a new buffer (the read keeps the old);
    a loop reading w/read through a constant Enter sees each iteration's AssignAdd."""
    from tensorflow.python.ops import gen_array_ops
    cd = tf.control_dependencies
    w = tf.Variable([1.0, 2.0, 3.0], name="w", use_resource=False)
    r = w.value()  # w/read
    pre = tf.multiply(r, 1.0, name="pre")
    with cd([pre]):
        inc = tf.assign_add(w, [10.0, 10.0, 10.0])
    with cd([inc]):
        tf.identity(r, name="after")
        tf.multiply(r, 2.0, name="doubled")
    v = tf.Variable([1.0, 2.0], name="v", use_resource=False)
    rv = v.value()
    with cd([rv]):
        grow = tf.assign(v, [5.0, 6.0, 7.0], validate_shape=False)
    with cd([grow]):
        tf.identity(rv, name="v_old")
        tf.identity(gen_array_ops.identity(v._variable), name="v_new")
    u = tf.Variable([[1.0, 2.0], [3.0, 4.0]], name="u", use_resource=False)
    ru = u.value()
    with cd([ru]):
        flat = tf.assign(u, [9.0, 8.0, 7.0, 6.0], validate_shape=False)
    with cd([flat]):
        tf.identity(ru, name="u_old")
    g = tf.Variable([1.0, 1.0], name="g", use_resource=False)
    rg = g.value()
    with cd([rg]):
        step = tf.train.GradientDescentOptimizer(0.5).apply_gradients(
            [(tf.constant([2.0, 4.0]), g)])
    with cd([step]):
        tf.identity(rg, name="g_after")
    c = tf.Variable([1.0, -1.0], name="c", use_resource=False)
    x = tf.placeholder(tf.float32, [2], name="x")
    rc = c.value()

    def body(i, acc):
        y = tf.reduce_sum(rc * x)  # rc, x: constant Enters
        with cd([y]):
            add = tf.assign_add(c, [1.0, 2.0])
        with cd([add]):
            return i + 1, acc + y

    _, acc = tf.while_loop(lambda i, a: i < 4, body, [tf.constant(0), tf.constant(0.0)],
                           parallel_iterations=1)
    tf.identity(acc, name="loop_sum")
    with cd([acc]):
        tf.identity(rc, name="c_after")
    tf.group(tf.global_variables_initializer(), name="init")
    fetches = ["pre:0", "after:0", "doubled:0", "v_old:0", "v_new:0", "u_old:0", "g_after:0",
               "loop_sum:0", "c_after:0"]
    return fetches, {"x:0": np.array([0.5, 2.0], np.float32)}


CASES = {
    "cond_in_while": (cond_in_while, {}),
    "while_in_cond_taken": (while_in_cond(True), {}),
    "while_in_cond_untaken": (while_in_cond(False), {}),
    "nested_invariants": (nested_while_invariants, {}),
    "nested_invariants_pi1": (lambda: nested_while_invariants(1), {}),
    "parallel_1": (parallel(1), {}),
    "parallel_10": (parallel(10), {}),
    "zero_iter": (zero_iter, {}),
    "dead_cond": (dead_cond, {}),
    "stack_loop": (stack_loop, {}),
    "loop_error": (loop_error, {}),
    "control_trigger": (control_trigger, {}),
    "variables": (variables(False), {"init": ["init"], "targets": ["train"], "steps": 5}),
    "resource_variables": (variables(True), {"init": ["init"], "targets": ["train"],
                                             "steps": 5}),
    "ref_aliasing": (ref_aliasing, {"init": ["init"]}),
}


def make(name, build, extra):
    graph = tf.Graph()
    with graph.as_default():
        fetches, feeds = build()
    d = os.path.join(OUT, name)
    shutil.rmtree(d, ignore_errors=True)
    os.makedirs(d)
    gd = graph.as_graph_def()
    with open(os.path.join(d, "graph.pb"), "wb") as f:
        f.write(gd.SerializeToString())
    np.savez(os.path.join(d, "feeds.npz"), **feeds)
    meta = {"fetches": fetches, "targets": extra.get("targets", []),
            "init": extra.get("init", []), "steps": extra.get("steps", 1)}
    # Run the imported GraphDef, as tfg will see it.
    g2 = tf.Graph()
    with g2.as_default():
        tf.import_graph_def(gd, name="")
    with tf.Session(graph=g2) as sess:
        feed = {g2.get_tensor_by_name(k): v for k, v in feeds.items()}
        if meta["init"]:
            sess.run([g2.get_operation_by_name(t) for t in meta["init"]], feed)
        fetch_t = [g2.get_tensor_by_name(t) for t in fetches]
        targets = [g2.get_operation_by_name(t) for t in meta["targets"]]
        try:
            for _ in range(meta["steps"]):
                values = sess.run([fetch_t, targets], feed)[0]
            np.savez(os.path.join(d, "expected.npz"), **dict(zip(fetches, values)))
        except tf.errors.OpError as e:
            meta["error"] = e.message.splitlines()[0]
            np.savez(os.path.join(d, "expected.npz"))
    with open(os.path.join(d, "case.json"), "w") as f:
        json.dump(meta, f, indent=1, sort_keys=True)
    print(name, len(gd.node), "nodes", "error" if "error" in meta else "ok")


if __name__ == "__main__":
    import sys
    for case, (fn, extra) in CASES.items():
        if len(sys.argv) < 2 or case in sys.argv[1:]:  # (names: only those cases)
            make(case, fn, extra)
