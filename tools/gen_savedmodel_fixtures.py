#!/usr/bin/env python3
"""Make the fixtures of tests/test_savedmodel.py and tests/test_tensorboard.py (needs
TensorFlow; never imports tfg).

    /tmp/tfenv/bin/python tools/gen_savedmodel_fixtures.py [v1|tf2|train]   (default: all)

Writes tests/fixtures/savedmodel/ (v1):
- mlp/: a v1 SavedModel (tf.compat.v1.saved_model.Builder, tag "serve") of a small classifier
  with reference variables and two signatures: `serving_default` (inputs {x}, outputs {probs,
  classes}) and `logits` (inputs {x}, outputs {logits}); variables/ is TensorFlow's tensor
  bundle (variables.index + variables.data-00000-of-00001).
- mlp_feeds.npz (signature input keys), mlp_expected.npz (`<signature>/<output key>` ->
  what TensorFlow computed through that signature).
- frozen.pb: the same model frozen (variables -> Const) by convert_variables_to_constants,
  and frozen_expected.npz keyed by tensor name (probs:0).
- tf_events/: an events file TensorFlow's own FileWriter wrote for the frozen graph, so tfg's
  reader is checked against TensorFlow's writer (CRCs, Event layout).

and (tf2, in a separate process: TF2 saving needs eager mode, the v1 part disables it):
- tf2_mlp/: tf.saved_model.save of a tf.Module MLP (two Dense modules whose __call__ is a
  tf.function of their own, so the signature function nests calls; tf.Variables, i.e. resource
  variables), signatures `serving_default` ({x} -> {logits, probs}) and `classify` ({x} ->
  {classes}); the variables are changed after creation, so only variables/ has their values.
- tf2_keras/: a Keras Sequential (Dense relu, Dense softmax) exported by Keras'
  `model.export(format="tf_saved_model")` (signatures `serve` and `serving_default`).
- tf2_cond/: a tf.Module whose signature uses tf.cond (a StatelessIf/If in the function, i.e.
  control flow v2) on the sign of sum(x); the true branch also increments a counter variable,
  and the signature returns the counter read after the cond (so the untaken branch must not
  run, and the read must wait for the taken one).
- tf2_while/: a tf.Module whose signature runs a data-dependent while loop (a While in the
  function, control flow v2) that reads a variable and increments a step counter each
  iteration; outputs the final state, the iteration count and the counter.
- tf2_case/: a tf.Module whose signature ({x, i}) runs tf.switch_case(i, 3 branches) (a Case
  in the function), each branch bumping its own slot of a hit-counter variable; keys ending in
  `:iN` were computed with i=N (i=7 is out of range: the last branch is the default).
- v1_resource/: a v1 SavedModel (Builder, graph mode) mixing a resource variable (w,
  VarHandleOp) and a reference variable (v), both changed before saving; its saver's restore
  op (save/restore_all) restores both.
- tf2_feeds.npz (x), tf2_expected.npz (`<model>/<signature>/<output key>` -> what TensorFlow
  computed through the loaded SavedModel's signature, freshly loaded for each call; keys ending
  in `:neg` were computed with -x).

and (train, its own process too):
- tf2_train/: a Keras 3 train step (Dense without bias, BatchNormalization, Dense; Adam) as a
  tf.Module's tf.function saved with signature `train` ({x, y} -> {loss, kernel, moving_mean,
  velocity}).
  One step ran before saving, so the Adam slots and iteration counter are not zero. Keras 3
  exports each variable twice: the functions capture one copy, the saver's restore function
  assigns another (`Variable_N`), so only the object graph says which checkpoint key the
  captured handles hold.
- tf2_train_feeds.npz (x, y), tf2_train_expected.npz (`step<N>/<output key>`: what the
  signature returned on its Nth call after a fresh tf.saved_model.load).
"""
import glob
import os
import shutil
import subprocess
import sys

import numpy as np
import tensorflow.compat.v1 as tf

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures",
                   "savedmodel")


def build():
    rng = np.random.RandomState(3)
    x = tf.placeholder(tf.float32, [None, 4], name="x")
    w1 = tf.Variable(rng.randn(4, 8).astype(np.float32), name="w1")
    b1 = tf.Variable(0.1 * rng.randn(8).astype(np.float32), name="b1")
    w2 = tf.Variable(rng.randn(8, 3).astype(np.float32), name="w2")
    b2 = tf.Variable(np.zeros(3, np.float32), name="b2")
    h = tf.nn.relu(tf.matmul(x, w1) + b1, name="hidden")
    logits = tf.add(tf.matmul(h, w2), b2, name="logits")
    probs = tf.nn.softmax(logits, name="probs")
    classes = tf.argmax(probs, 1, name="classes")
    # A training step that changes the variables, run once before saving: the SavedModel's
    # variables then differ from the initial values in the graph, so a reader that ignored
    # variables/ (and ran the initializers) would get different outputs.
    loss = tf.reduce_mean(tf.square(logits))
    train = tf.train.GradientDescentOptimizer(0.05).minimize(loss, name="train")
    return x, logits, probs, classes, train


V1_OUTPUTS = ("mlp", "tf_events", "mlp_feeds.npz", "mlp_expected.npz", "frozen.pb",
              "frozen_expected.npz")


def main_v1():
    tf.disable_eager_execution()
    tf.disable_control_flow_v2()
    tf.disable_resource_variables()
    os.makedirs(OUT, exist_ok=True)
    for name in V1_OUTPUTS:
        path = os.path.join(OUT, name)
        if os.path.isdir(path):
            shutil.rmtree(path)
        elif os.path.exists(path):
            os.remove(path)
    feeds = {"x": np.random.RandomState(7).randn(5, 4).astype(np.float32)}
    g = tf.Graph()
    with g.as_default():
        x, logits, probs, classes, train = build()
        info = tf.saved_model.utils.build_tensor_info
        sigs = {
            "serving_default": tf.saved_model.signature_def_utils.build_signature_def(
                inputs={"x": info(x)},
                outputs={"probs": info(probs), "classes": info(classes)},
                method_name="tensorflow/serving/predict"),
            "logits": tf.saved_model.signature_def_utils.build_signature_def(
                inputs={"x": info(x)}, outputs={"logits": info(logits)},
                method_name="tensorflow/serving/predict"),
        }
        with tf.Session(graph=g) as sess:
            sess.run(tf.global_variables_initializer())
            sess.run(train, {x: feeds["x"]})
            expected = {}
            for sig_name, sig in sigs.items():
                for key, ti in sig.outputs.items():
                    expected[f"{sig_name}/{key}"] = sess.run(ti.name, {x: feeds["x"]})
            builder = tf.saved_model.Builder(os.path.join(OUT, "mlp"))
            builder.add_meta_graph_and_variables(sess, [tf.saved_model.tag_constants.SERVING],
                                                 signature_def_map=sigs)
            builder.save()
            frozen = tf.graph_util.convert_variables_to_constants(
                sess, g.as_graph_def(), ["probs", "classes", "logits"])
            frozen = tf.graph_util.extract_sub_graph(frozen, ["probs", "classes", "logits"])
    np.savez(os.path.join(OUT, "mlp_feeds.npz"), **feeds)
    np.savez(os.path.join(OUT, "mlp_expected.npz"), **expected)
    with open(os.path.join(OUT, "frozen.pb"), "wb") as f:
        f.write(frozen.SerializeToString())
    np.savez(os.path.join(OUT, "frozen_expected.npz"),
             **{"probs:0": expected["serving_default/probs"]})

    events_dir = os.path.join(OUT, "tf_events")
    fg = tf.Graph()
    with fg.as_default():
        tf.import_graph_def(frozen, name="")
        writer = tf.summary.FileWriter(events_dir, graph=fg)
        writer.flush()
        writer.close()
    path = glob.glob(os.path.join(events_dir, "events.out.tfevents.*"))[0]
    os.rename(path, os.path.join(events_dir, "events.out.tfevents.0000000000.tf"))
    print("wrote", OUT, "(v1)")


def main_tf2():
    import tensorflow as tf2

    for name in ("tf2_mlp", "tf2_keras", "tf2_cond", "tf2_while", "tf2_case", "v1_resource",
                 "tf2_feeds.npz", "tf2_expected.npz"):
        path = os.path.join(OUT, name)
        if os.path.isdir(path):
            shutil.rmtree(path)
        elif os.path.exists(path):
            os.remove(path)
    x = np.random.RandomState(7).randn(5, 4).astype(np.float32)
    expected = {}

    class Dense(tf2.Module):
        def __init__(self, n_in, n_out, rng, name=None):
            super().__init__(name=name)
            self.w = tf2.Variable(rng.randn(n_in, n_out).astype(np.float32), name="w")
            self.b = tf2.Variable(np.zeros(n_out, np.float32), name="b")

        @tf2.function
        def __call__(self, x):
            return tf2.matmul(x, self.w) + self.b

    class MLP(tf2.Module):
        def __init__(self):
            super().__init__()
            rng = np.random.RandomState(3)
            self.l1 = Dense(4, 8, rng)
            self.l2 = Dense(8, 3, rng)

        @tf2.function(input_signature=[tf2.TensorSpec([None, 4], tf2.float32)])
        def __call__(self, x):
            logits = self.l2(tf2.nn.relu(self.l1(x)))
            return {"logits": logits, "probs": tf2.nn.softmax(logits)}

        @tf2.function(input_signature=[tf2.TensorSpec([None, 4], tf2.float32)])
        def classify(self, x):
            return {"classes": tf2.argmax(self(x)["probs"], axis=1)}

    mlp = MLP()
    # Values that differ from the ones the variables were created with: a loader that did not
    # restore variables/ would compute something else.
    for var in mlp.trainable_variables:
        var.assign_add(0.1 * np.random.RandomState(11).randn(*var.shape).astype(np.float32))
    path = os.path.join(OUT, "tf2_mlp")
    tf2.saved_model.save(mlp, path, signatures={"serving_default": mlp.__call__,
                                                "classify": mlp.classify})

    import keras

    keras.utils.set_random_seed(5)
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(8, activation="relu"),
                              keras.layers.Dense(3, activation="softmax")])
    model.export(os.path.join(OUT, "tf2_keras"), format="tf_saved_model", verbose=False)

    class Cond(tf2.Module):
        def __init__(self):
            super().__init__()
            self.w = tf2.Variable(np.random.RandomState(5).randn(4, 3).astype(np.float32),
                                  name="w")
            self.calls = tf2.Variable(0, dtype=tf2.int64, name="calls")

        @tf2.function(input_signature=[tf2.TensorSpec([None, 4], tf2.float32)])
        def __call__(self, x):
            def positive():
                self.calls.assign_add(1)
                return tf2.nn.relu(tf2.matmul(x, self.w))

            y = tf2.cond(tf2.reduce_sum(x) > 0, positive,
                         lambda: -2.0 * tf2.matmul(x, self.w))
            return {"y": y, "calls": self.calls.read_value()}

    cond = Cond()
    cond.calls.assign(5)
    tf2.saved_model.save(cond, os.path.join(OUT, "tf2_cond"),
                         signatures={"serving_default": cond.__call__})

    class Loop(tf2.Module):
        def __init__(self):
            super().__init__()
            self.w = tf2.Variable(np.random.RandomState(3).randn(4, 4).astype(np.float32),
                                  name="w")
            self.steps = tf2.Variable(0, dtype=tf2.int64, name="steps")

        @tf2.function(input_signature=[tf2.TensorSpec([None, 4], tf2.float32)])
        def __call__(self, x):
            i, h = tf2.constant(0), x
            while tf2.reduce_max(tf2.abs(h)) > 0.5:  # |h| shrinks towards 1/3: it ends
                h = 0.7 * h + 0.1 * tf2.tanh(tf2.matmul(h, self.w))
                i += 1
                self.steps.assign_add(1)
            return {"h": h, "iterations": i, "steps": self.steps.read_value()}

    loop = Loop()
    loop.steps.assign(10)
    tf2.saved_model.save(loop, os.path.join(OUT, "tf2_while"),
                         signatures={"serving_default": loop.__call__})

    class Case(tf2.Module):
        def __init__(self):
            super().__init__()
            self.w = tf2.Variable(np.random.RandomState(3).randn(4, 3).astype(np.float32),
                                  name="w")
            self.hits = tf2.Variable([0, 0, 0], dtype=tf2.int64, name="hits")

        @tf2.function(input_signature=[tf2.TensorSpec([None, 4], tf2.float32),
                                       tf2.TensorSpec([], tf2.int32)])
        def __call__(self, x, i):
            def branch(k, fn):
                def run():
                    self.hits.assign_add(tf2.one_hot(k, 3, dtype=tf2.int64))
                    return fn(tf2.matmul(x, self.w))
                return run

            y = tf2.switch_case(i, [branch(0, tf2.nn.relu), branch(1, tf2.tanh),
                                    branch(2, lambda v: -v)])
            return {"y": y, "hits": self.hits.read_value()}

    case = Case()
    case.hits.assign([10, 20, 30])
    tf2.saved_model.save(case, os.path.join(OUT, "tf2_case"),
                         signatures={"serving_default": case.__call__})

    runs = [("tf2_mlp", x, {}, ""), ("tf2_keras", x, {}, ""), ("tf2_cond", x, {}, ""),
            ("tf2_cond", -x, {}, ":neg"), ("tf2_while", x, {}, "")]
    runs += [("tf2_case", x, {"i": np.int32(i)}, f":i{i}") for i in (0, 1, 2, 7)]
    for name, value, extra, suffix in runs:  # what TF computes through the saved signatures
        for sig_name in tf2.saved_model.load(os.path.join(OUT, name)).signatures:
            fn = tf2.saved_model.load(os.path.join(OUT, name)).signatures[sig_name]  # fresh
            key = next(k for k in fn.structured_input_signature[1] if k not in extra)
            feeds = {key: tf2.constant(value), **{k: tf2.constant(v) for k, v in extra.items()}}
            for out_key, out in fn(**feeds).items():
                expected[f"{name}/{sig_name}/{out_key}{suffix}"] = out.numpy()
    expected.update(v1_resource_variables(x))
    for stray in glob.glob(os.path.join(OUT, "tf2_*", "fingerprint.pb")):
        os.remove(stray)  # changes on every save; tfg does not read it
    np.savez(os.path.join(OUT, "tf2_feeds.npz"), x=x)
    np.savez(os.path.join(OUT, "tf2_expected.npz"), **expected)
    print("wrote", OUT, "(tf2)", sorted(expected))


def v1_resource_variables(x):
    """v1_resource/ (see the module docstring); returns its expected outputs."""
    g = tf.Graph()
    with g.as_default():
        xp = tf.placeholder(tf.float32, [None, 4], name="x")
        w = tf.get_variable("w", initializer=np.random.RandomState(3).randn(4, 3).astype(
            np.float32), use_resource=True)
        v = tf.get_variable("v", initializer=np.ones(3, np.float32), use_resource=False)
        y = tf.add(tf.matmul(xp, w), v, name="y")
        with tf.Session(graph=g) as sess:
            sess.run(tf.global_variables_initializer())
            sess.run([w.assign(w * 2), v.assign(v * 3)])
            info = tf.saved_model.utils.build_tensor_info
            builder = tf.saved_model.Builder(os.path.join(OUT, "v1_resource"))
            builder.add_meta_graph_and_variables(sess, ["serve"], signature_def_map={
                "serving_default": tf.saved_model.signature_def_utils.build_signature_def(
                    inputs={"x": info(xp)}, outputs={"y": info(y)},
                    method_name="tensorflow/serving/predict")})
            builder.save()
            return {"v1_resource/serving_default/y": sess.run(y, {xp: x})}


def main_train():
    import keras
    import tensorflow as tf2

    for name in ("tf2_train", "tf2_train_feeds.npz", "tf2_train_expected.npz"):
        path = os.path.join(OUT, name)
        if os.path.isdir(path):
            shutil.rmtree(path)
        elif os.path.exists(path):
            os.remove(path)
    keras.utils.set_random_seed(3)
    # No bias before the BatchNormalization: its gradient would be rounding noise, which Adam
    # scales up to steps of about the learning rate, so TF's and tfg's values would part ways.
    model = keras.Sequential([keras.Input((4,)), keras.layers.Dense(6, use_bias=False),
                              keras.layers.BatchNormalization(), keras.layers.ReLU(),
                              keras.layers.Dense(3)])
    opt = keras.optimizers.Adam(0.05)
    opt.build(model.trainable_variables)

    class Train(tf2.Module):
        def __init__(self):
            super().__init__()
            self.model, self.opt = model, opt

        @tf2.function(input_signature=[tf2.TensorSpec((4, 4), tf2.float32),
                                       tf2.TensorSpec((4,), tf2.int32)])
        def train(self, x, y):
            variables = self.model.trainable_variables
            with tf2.GradientTape() as tape:
                logits = self.model(x, training=True)
                loss = tf2.reduce_mean(
                    tf2.nn.sparse_softmax_cross_entropy_with_logits(y, logits))
            self.opt.apply_gradients(zip(tape.gradient(loss, variables), variables))
            bn = self.model.layers[1]
            return {"loss": loss, "kernel": tf2.identity(variables[0]),
                    "moving_mean": tf2.identity(bn.moving_mean),
                    "velocity": tf2.identity(self.opt.variables[-1])}

    module = Train()
    rng = np.random.RandomState(5)
    x = rng.randn(4, 4).astype(np.float32)
    y = np.array([0, 2, 1, 2], np.int32)
    module.train(x, y)  # slots, iteration and moving statistics away from their initial values
    path = os.path.join(OUT, "tf2_train")
    tf2.saved_model.save(module, path, signatures={"train": module.train})
    os.remove(os.path.join(path, "fingerprint.pb"))
    fn = tf2.saved_model.load(path).signatures["train"]
    expected = {}
    for step in (1, 2):
        for key, value in fn(x=tf2.constant(x), y=tf2.constant(y)).items():
            expected[f"step{step}/{key}"] = value.numpy()
    np.savez(os.path.join(OUT, "tf2_train_feeds.npz"), x=x, y=y)
    np.savez(os.path.join(OUT, "tf2_train_expected.npz"), **expected)
    print("wrote", OUT, "(train)", sorted(expected))


if __name__ == "__main__":
    which = sys.argv[1] if len(sys.argv) > 1 else "all"
    if which == "v1":
        main_v1()
    elif which == "tf2":
        main_tf2()
    elif which == "train":
        main_train()
    else:  # each in its own process: v1 graph mode and TF2 eager mode do not mix
        for part in ("v1", "tf2", "train"):
            subprocess.run([sys.executable, os.path.abspath(__file__), part], check=True)
