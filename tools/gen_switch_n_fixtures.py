#!/usr/bin/env python3
"""TensorFlow-lowered `tf.switch_case` graphs (`_SwitchN` nodes) and TensorFlow's outputs, for
tests/test_switch_n.py (NEEDS TENSORFLOW; never imports tfg).

    /work/tfvenv/bin/python tools/gen_switch_n_fixtures.py tests/fixtures/switch_n

Each graph is a tf.function frozen with convert_variables_to_constants_v2(lower_control_flow=
True), which writes TensorFlow's own lowering of Case: `_SwitchN` per branch input. Writes
<name>.pb and <name>.npz: for run k, feeds `feed_<k>_<input>` and TensorFlow's outputs
`out_<k>_<j>`, plus `inputs` / `outputs` (tensor names, as strings of a unicode array).
"""
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
from tensorflow.python.framework.convert_to_constants import (  # noqa: E402
    convert_variables_to_constants_v2)


@tf.function(input_signature=[tf.TensorSpec([], tf.int32), tf.TensorSpec([3], tf.float32)])
def three_way(i, x):
    """A switch_case over three branches, and TensorFlow's gradient of its sum (a Case too)."""
    y = tf.switch_case(i, [lambda: x * x, lambda: tf.sin(x), lambda: x * 3.0 + 10.0])
    return y, tf.gradients(tf.reduce_sum(y), x)[0]


@tf.function(input_signature=[tf.TensorSpec([], tf.int32), tf.TensorSpec([2, 2], tf.float32),
                              tf.TensorSpec([2], tf.float32)])
def two_inputs_two_outputs(i, m, v):
    """Branches reading two inputs and returning two values, one branch ignoring an input."""
    return tf.switch_case(i, [lambda: (tf.linalg.matvec(m, v), tf.reduce_sum(m)),
                              lambda: (v * 2.0, tf.constant(-1.0))])


@tf.function(input_signature=[tf.TensorSpec([], tf.int32), tf.TensorSpec([4], tf.float32)])
def in_a_loop(n, x):
    """A switch_case on the iteration counter mod 3, inside a while loop."""
    def body(k, acc):
        acc = tf.switch_case(k % 3, [lambda: acc + 1.0, lambda: acc * 2.0, lambda: acc - x])
        return k + 1, acc
    return tf.while_loop(lambda k, acc: k < n, body, [tf.constant(0), x])[1]


CASES = {
    "three_way": (three_way, [(i, np.array([0.5, -1.0, 2.0], np.float32))
                              for i in (-1, 0, 1, 2, 3, 100)]),
    "two_inputs_two_outputs": (two_inputs_two_outputs,
                               [(i, np.array([[1, 2], [3, 4]], np.float32),
                                 np.array([0.5, -2], np.float32)) for i in (0, 1, 5)]),
    "in_a_loop": (in_a_loop, [(n, np.array([1, 2, 3, 4], np.float32)) for n in (0, 1, 5)]),
}


def main(out_dir):
    os.makedirs(out_dir, exist_ok=True)
    for name, (fn, runs) in CASES.items():
        frozen = convert_variables_to_constants_v2(fn.get_concrete_function(),
                                                   lower_control_flow=True)
        gd = frozen.graph.as_graph_def()
        assert any(n.op == "_SwitchN" for n in gd.node), name
        with open(os.path.join(out_dir, name + ".pb"), "wb") as f:
            f.write(gd.SerializeToString())
        inputs = [t.name for t in frozen.inputs]
        outputs = [t.name for t in frozen.outputs]
        arrays = {"inputs": np.array(inputs), "outputs": np.array(outputs)}
        for k, feed in enumerate(runs):
            got = frozen(*[tf.constant(v) for v in feed])
            got = got if isinstance(got, (list, tuple)) else [got]
            for t, v in zip(inputs, feed):
                arrays[f"feed_{k}_{t.split(':')[0]}"] = np.asarray(v)
            for j, v in enumerate(got):
                arrays[f"out_{k}_{j}"] = v.numpy()
        np.savez(os.path.join(out_dir, name + ".npz"), **arrays)
        print(name, len(gd.node), "nodes", len(runs), "runs")


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures/switch_n")
