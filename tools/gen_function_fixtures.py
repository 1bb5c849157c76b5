"""Make the fixture of tests/test_function_graph.py (needs TensorFlow; never imports tfg).

    /tmp/tfenv/bin/python tools/gen_function_fixtures.py

Writes tests/fixtures/functions/:
- fn_graph.pb: the GraphDef of a tf.function's concrete function, as TF2 writes it (a
  PartitionedCall of a nested tf.function and a StatelessIf, bodies in the graph's library);
- expected.npz: for each feed "x_<k>", TensorFlow's output "y_<k>" (both branches taken).
"""
import os

import numpy as np
import tensorflow as tf

OUT = os.path.join(os.path.dirname(__file__), os.pardir, "tests", "fixtures", "functions")


@tf.function
def inner(x):
    return tf.nn.relu(x) * 2.0


@tf.function
def model(x):
    y = inner(x) + 1.0
    return tf.cond(tf.reduce_sum(y) > 10.0, lambda: y * 3.0, lambda: y - 1.0)


def main():
    os.makedirs(OUT, exist_ok=True)
    concrete = model.get_concrete_function(tf.TensorSpec([2, 3], tf.float32, name="x"))
    with open(os.path.join(OUT, "fn_graph.pb"), "wb") as f:
        f.write(concrete.graph.as_graph_def().SerializeToString())
    inputs = [np.arange(6, dtype=np.float32).reshape(2, 3) - 2,  # sum > 10: then branch
              np.full((2, 3), -1.0, np.float32)]                  # sum <= 10: else branch
    arrays = {}
    for k, x in enumerate(inputs):
        arrays[f"x_{k}"] = x
        arrays[f"y_{k}"] = model(x).numpy()
    np.savez(os.path.join(OUT, "expected.npz"), **arrays)
    print("output tensor:", concrete.outputs[0].name)


if __name__ == "__main__":
    main()
