#!/usr/bin/env python3
"""Generate tests/fixtures/train/: a forward MLP and TensorFlow's own training losses on it.

NEEDS TENSORFLOW (run it with the TensorFlow venv: /tmp/tfenv/bin/python); never imports tfg.
The forward graph (ref variables w1, b1, w2, b2 with their initializers, the `init` NoOp and
`loss`) is exported before any optimizer exists; it is then imported into fresh TF graphs and
trained there with tf.compat.v1.train's GradientDescent, Momentum, Adam and RMSProp optimizers
for 100 steps. Outputs:

    mlp.pb     the forward GraphDef (no gradient, no optimizer)
    mlp.npz    `loss/<optimizer>`: the loss before each of the 100 steps and after the last
    cases.json {optimizer: tfg --optimizer spec}

    /tmp/tfenv/bin/python tools/gen_train_fixtures.py
"""
import json
import os

import numpy as np
import tensorflow as tf

tf1 = tf.compat.v1
tf1.disable_eager_execution()

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures", "train")
STEPS = 100
SPECS = {
    "sgd": ("sgd:0.5", lambda: tf1.train.GradientDescentOptimizer(0.5)),
    "momentum": ("momentum:0.1,0.9", lambda: tf1.train.MomentumOptimizer(0.1, 0.9)),
    "adam": ("adam:0.01", lambda: tf1.train.AdamOptimizer(0.01)),
    "rmsprop": ("rmsprop:0.01", lambda: tf1.train.RMSPropOptimizer(0.01)),
}


def forward():
    rng = np.random.RandomState(0)
    n, d, h, c = 16, 4, 8, 3
    xv = rng.randn(n, d).astype(np.float32)
    labels = np.argmax(xv[:, :c] + 0.1 * rng.randn(n, c), axis=1).astype(np.int32)
    g = tf.Graph()
    with g.as_default():
        x = tf.constant(xv, name="x")
        onehot = tf.one_hot(tf.constant(labels, name="labels"), c)

        def var(name, value):
            return tf1.Variable(value.astype(np.float32), name=name, use_resource=False)

        w1 = var("w1", 0.5 * rng.randn(d, h))
        b1 = var("b1", np.zeros(h))
        w2 = var("w2", 0.5 * rng.randn(h, c))
        b2 = var("b2", np.zeros(c))
        hid = tf.nn.relu(tf.matmul(x, w1) + b1)
        logits = tf.matmul(hid, w2) + b2
        xent = tf.nn.softmax_cross_entropy_with_logits(labels=onehot, logits=logits)
        tf.reduce_mean(xent, name="loss")
        tf1.global_variables_initializer()  # the NoOp `init`
    return g.as_graph_def()


def train(graph_def, make_opt):
    g = tf.Graph()
    with g.as_default():
        tf.import_graph_def(graph_def, name="")
        loss = g.get_tensor_by_name("loss:0")
        var_list = [g.get_tensor_by_name(f"{v}:0") for v in ("w1", "b1", "w2", "b2")]
        # Imported ref variables are not tf.Variable objects: wrap the read tensors'
        # gradients by hand, exactly as minimize() would.
        grads = tf.gradients(loss, [g.get_tensor_by_name(f"{v}/read:0")
                                    for v in ("w1", "b1", "w2", "b2")])
        # GATE_GRAPH: every gradient is computed before any variable changes (without it,
        # TF's in-place updates race with backward reads of the same buffers).
        grads = tf.tuple(grads)
        opt = make_opt()
        variables = [_RefVar(t) for t in var_list]
        step = opt.apply_gradients(list(zip(grads, variables)))
        init_slots = tf1.variables_initializer(opt.variables())
        with tf1.Session(graph=g) as s:
            s.run(["init", init_slots])
            losses = []
            for _ in range(STEPS):
                losses.append(s.run(loss))
                s.run(step)
            losses.append(s.run(loss))
    return np.array(losses, np.float32)


def _RefVar(t):
    """A tf.Variable view of an imported VariableV2 tensor (for apply_gradients)."""
    from tensorflow.python.ops import ref_variable

    return ref_variable.RefVariable(
        variable_def=_variable_def(t), import_scope=None)


def _variable_def(t):
    from tensorflow.core.framework import variable_pb2

    name = t.op.name
    return variable_pb2.VariableDef(variable_name=f"{name}:0",
                                    initializer_name=f"{name}/Assign",
                                    snapshot_name=f"{name}/read:0")


def main():
    os.makedirs(OUT, exist_ok=True)
    gd = forward()
    with open(os.path.join(OUT, "mlp.pb"), "wb") as f:
        f.write(gd.SerializeToString())
    arrays = {f"loss/{k}": train(gd, make) for k, (_, make) in SPECS.items()}
    np.savez(os.path.join(OUT, "mlp.npz"), **arrays)
    with open(os.path.join(OUT, "cases.json"), "w") as f:
        json.dump({k: spec for k, (spec, _) in SPECS.items()}, f, indent=1, sort_keys=True)
    for k, v in arrays.items():
        print(k, v[0], v[-1])


if __name__ == "__main__":
    main()
