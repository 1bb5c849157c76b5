#!/usr/bin/env python3
"""Make the keras.applications graphs of benchmarks/bench_gpu.py (needs TensorFlow).

    /work/tfvenv/bin/python tools/gen_keras_apps.py

For ResNet50 and MobileNetV2 (weights=None, batch 32, 224x224x3, inference) writes
benchmarks/models/:
- <model>.pb: the frozen GraphDef (variables folded into Const nodes), where every float
  constant of 256 elements or more is stored as a splat: a TensorProto holding one value and
  the full shape (ResNet50's 100 MB of weights would not fit the 64 MiB the GPU machine takes;
  a splat is what TensorFlow itself writes for a filled tensor). Small constants (shapes,
  epsilons, biases of a few channels) stay as they are.
- <model>.json: the input and output tensor names, and per splatted constant its original
  mean and standard deviation, in graph order.
- <model>_expected.npz: TensorFlow's output (the logits) for the refilled graph (see `refill`) on the input
  `np.random.default_rng(0).standard_normal((32, 224, 224, 3))`, so the benchmark checks
  tfg's values on the GPU, not only its speed.

`refill` (the same code in benchmarks/bench_gpu.py) gives each splatted constant seeded normal
values with its recorded mean and deviation: the weights are not the trained ones, but every
activation keeps the scale Keras' initializers gave it, so the timing is of real work.
"""
import json
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import keras  # noqa: E402
from tensorflow.python.framework.convert_to_constants import (  # noqa: E402
    convert_variables_to_constants_v2)

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "benchmarks", "models")
BATCH, SIZE, SPLAT_MIN = 32, 224, 256
MODELS = {"resnet50": keras.applications.ResNet50,
          "mobilenetv2": keras.applications.MobileNetV2}


def refill(shape, mean, std, index):
    """The values a splatted constant gets back: seeded by its index in graph order."""
    rng = np.random.default_rng(1000 + index)
    return (mean + std * rng.standard_normal(shape)).astype(np.float32)


def freeze(make, batch=BATCH, size=SIZE):
    """(GraphDef, input name, output name) of `make`'s model, random weights folded in.

    benchmarks/bench_keras.py calls it too (batch 2, 96x96, weights kept: no splat)."""
    keras.backend.clear_session()
    keras.utils.set_random_seed(3)
    # Logits (no softmax): a value check that an all-equal softmax could not fail.
    model = make(weights=None, input_shape=(size, size, 3), classifier_activation=None)
    fn = tf.function(lambda x: model(x, training=False)).get_concrete_function(
        tf.TensorSpec([batch, size, size, 3], tf.float32, name="x"))
    frozen = convert_variables_to_constants_v2(fn)
    return frozen.graph.as_graph_def(), frozen.inputs[0].name, frozen.outputs[0].name


def splat(graph_def):
    stats = []
    for node in graph_def.node:
        if node.op != "Const" or node.attr["dtype"].type != tf.float32.as_datatype_enum:
            continue
        value = tf.make_ndarray(node.attr["value"].tensor)
        if value.size < SPLAT_MIN:
            continue
        mean, std = float(value.mean()), float(value.std())
        stats.append([node.name, mean, std])
        proto = node.attr["value"].tensor
        proto.ClearField("tensor_content")
        proto.ClearField("float_val")
        proto.float_val.append(mean)
    return stats


def run_tf(graph_def, inp, out, x):
    graph = tf.Graph()
    with graph.as_default():
        tf.compat.v1.import_graph_def(graph_def, name="")
    with tf.compat.v1.Session(graph=graph) as sess:
        return sess.run(out, {inp: x})


def refilled(graph_def, stats):
    filled = tf.compat.v1.GraphDef()
    filled.CopyFrom(graph_def)
    by_name = {node.name: node for node in filled.node}
    for index, (name, mean, std) in enumerate(stats):
        node = by_name[name]
        shape = [d.size for d in node.attr["value"].tensor.tensor_shape.dim]
        node.attr["value"].tensor.CopyFrom(tf.make_tensor_proto(refill(shape, mean, std,
                                                                       index)))
    return filled


def main():
    os.makedirs(OUT, exist_ok=True)
    x = np.random.default_rng(0).standard_normal((BATCH, SIZE, SIZE, 3)).astype(np.float32)
    for name, make in MODELS.items():
        graph_def, inp, out = freeze(make)
        stats = splat(graph_def)
        with open(os.path.join(OUT, f"{name}.pb"), "wb") as f:
            f.write(graph_def.SerializeToString())
        meta = {"input": inp, "output": out, "batch": BATCH, "size": SIZE, "splats": stats}
        with open(os.path.join(OUT, f"{name}.json"), "w") as f:
            json.dump(meta, f, indent=0)
        y = run_tf(refilled(graph_def, stats), inp, out, x)
        np.savez_compressed(os.path.join(OUT, f"{name}_expected.npz"), y=y)
        print(name, len(graph_def.node), "nodes,", len(stats), "splats,",
              os.path.getsize(os.path.join(OUT, f"{name}.pb")), "bytes; output", y.shape)


if __name__ == "__main__":
    main()
