#!/usr/bin/env python3
"""Make the fixtures of tests/test_savedmodel.py and tests/test_tensorboard.py (needs
TensorFlow; never imports tfg).

    /tmp/tfenv/bin/python tools/gen_savedmodel_fixtures.py

Writes tests/fixtures/savedmodel/:
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
"""
import glob
import os
import shutil

import numpy as np
import tensorflow.compat.v1 as tf

tf.disable_eager_execution()
tf.disable_control_flow_v2()
tf.disable_resource_variables()

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


def main():
    if os.path.isdir(OUT):
        shutil.rmtree(OUT)
    os.makedirs(OUT)
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
    print("wrote", OUT)


if __name__ == "__main__":
    main()
