#!/usr/bin/env python3
"""Make the fixtures of tests/test_canonical.py (needs TensorFlow; never imports tfg).

    /work/tfvenv/bin/python tools/gen_functional_fixtures.py

Frozen GraphDefs that keep TF2's functional control flow (convert_variables_to_constants_v2
with lower_control_flow=False, so the calls and loops stay as TensorFlow's runtime sees them):

- lstm_while.pb: a Keras Sequential (Input (5, 3), LSTM(8, return_sequences=True), LSTM(8),
  Dense(2)); each recurrent loop is a `While` node whose cond/body live in the library, the
  body reading a TensorListFromTensor and writing a TensorListReserve (TensorLists cross the
  loop boundary). Input `x` (float32 [?, 5, 3]), output `Identity`.
- jit_conv.pb: a tf.function calling a `jit_compile=True` tf.function (conv 3x3 + relu + a
  dense layer): the call is a `StatefulPartitionedCall` with `_XlaMustCompile`. Input `x`
  (float32 [?, 6, 6, 4]), output `Identity`.
- jit_grouped_conv.pb: the same with a grouped convolution (filter in-channels 2 of 4).
- expected.npz: `<fixture>/x` the feed, `<fixture>/y` what TensorFlow computed.
- tensor_lists.npz: TensorLists as TensorFlow serializes them (`tf.io.serialize_tensor` of the
  variant: a DT_VARIANT TensorProto, the list's VariantTensorDataProto in tensor_content), for
  tfg's variant codec (tests/test_list_codec.py): `reserved` (float [?,2] x 3, items 0 and 2
  set), `pushed` (int32 [3], max_num_elements 5, one item pushed), `nested` (a list of two
  lists), each `<name>/bytes` with `<name>/stacked` (TensorListStack of it; for `nested` the
  stack of its item 1).
"""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import keras  # noqa: E402
from tensorflow.python.framework.convert_to_constants import (  # noqa: E402
    convert_variables_to_constants_v2)

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures",
                   "functional")


def frozen_graph(fn, spec):
    """The GraphDef of fn's concrete function with variables as constants, calls kept."""
    cf = fn.get_concrete_function(spec)
    frozen = convert_variables_to_constants_v2(cf, lower_control_flow=False)
    assert [t.name for t in frozen.inputs] == ["x:0"], frozen.inputs
    assert [t.name for t in frozen.outputs] == ["Identity:0"], frozen.outputs
    return frozen.graph.as_graph_def()


def lstm():
    keras.utils.set_random_seed(7)
    model = keras.Sequential([keras.Input((5, 3)), keras.layers.LSTM(8, return_sequences=True),
                              keras.layers.LSTM(8), keras.layers.Dense(2)])
    fn = tf.function(lambda x: model(x))
    x = np.random.RandomState(11).randn(2, 5, 3).astype(np.float32)
    gd = frozen_graph(fn, tf.TensorSpec([None, 5, 3], tf.float32, name="x"))
    assert sum(n.op == "While" for n in gd.node) == 2
    return gd, x, fn(x).numpy()


def jit_conv(groups):
    rs = np.random.RandomState(3 + groups)
    w = tf.Variable(rs.randn(3, 3, 4 // groups, 6).astype(np.float32) * 0.4)
    d = tf.Variable(rs.randn(6, 5).astype(np.float32) * 0.5)

    @tf.function(jit_compile=True)
    def block(x):
        y = tf.nn.relu(tf.nn.conv2d(x, w, 1, "SAME") - 0.1)
        return tf.matmul(tf.reduce_mean(y, axis=[1, 2]), d)

    @tf.function
    def model(x):
        return tf.tanh(block(x * 2.0))

    x = rs.randn(2, 6, 6, 4).astype(np.float32)
    gd = frozen_graph(model, tf.TensorSpec([None, 6, 6, 4], tf.float32, name="x"))
    assert [n.op for n in gd.node].count("StatefulPartitionedCall") == 1
    return gd, x, model(x).numpy()


def tensor_lists():
    """{name/bytes, name/stacked}: TensorFlow's serialization of a few TensorLists."""
    raw = tf.raw_ops
    f32 = raw.TensorListReserve(element_shape=tf.constant([-1, 2]), num_elements=3,
                                element_dtype=tf.float32)
    f32 = raw.TensorListSetItem(input_handle=f32, index=0, item=tf.ones([4, 2]) * 1.5)
    f32 = raw.TensorListSetItem(input_handle=f32, index=2,
                                item=tf.constant([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0], [7, 8]]))
    i32 = raw.EmptyTensorList(element_shape=tf.constant([3], tf.int64), max_num_elements=5,
                              element_dtype=tf.int32)
    i32 = raw.TensorListPushBack(input_handle=i32, tensor=tf.constant([1, 2, 3]))
    inner = raw.TensorListFromTensor(tensor=tf.constant([[9.0, 8.0]]), element_shape=[2])
    outer = raw.EmptyTensorList(element_shape=tf.constant(-1), max_num_elements=-1,
                                element_dtype=tf.variant)
    outer = raw.TensorListPushBack(input_handle=outer, tensor=f32)
    outer = raw.TensorListPushBack(input_handle=outer, tensor=inner)
    out = {}
    for name, lst, dtype in (("reserved", f32, tf.float32), ("pushed", i32, tf.int32),
                             ("nested", outer, None)):
        out[f"{name}/bytes"] = np.frombuffer(tf.io.serialize_tensor(lst).numpy(), np.uint8)
        if dtype is None:
            item = raw.TensorListGetItem(input_handle=lst, index=1, element_shape=-1,
                                         element_dtype=tf.variant)
            lst, dtype = item, tf.float32
        out[f"{name}/stacked"] = raw.TensorListStack(input_handle=lst, element_shape=-1,
                                                     element_dtype=dtype).numpy()
    return out


def main():
    os.makedirs(OUT, exist_ok=True)
    np.savez(os.path.join(OUT, "tensor_lists.npz"), **tensor_lists())
    expected = {}
    for name, make in (("lstm_while", lstm), ("jit_conv", lambda: jit_conv(1)),
                       ("jit_grouped_conv", lambda: jit_conv(2))):
        gd, x, y = make()
        assert np.abs(y).max() > 0.05, (name, y)  # a near-zero output would prove nothing
        with open(os.path.join(OUT, f"{name}.pb"), "wb") as f:
            f.write(gd.SerializeToString(deterministic=True))
        expected[f"{name}/x"], expected[f"{name}/y"] = x, y
    np.savez(os.path.join(OUT, "expected.npz"), **expected)
    print("wrote", OUT, sorted(expected))


if __name__ == "__main__":
    main()
