"""Two things keras-hub's backbones (tests/test_real_models_hub.py) found, checked against
TensorFlow 2.21's own values:

- XlaDynamicUpdateSlice (keras.ops.slice_update; Swin's shifted-window mask): XLA's
  semantics, each start clamped so the update fits, and TensorFlow's errors. TensorFlow
  registers no gradient for it, and neither does tfg.
- BroadcastGradientArgs of two identical shapes reduces nothing (TensorFlow's BCast returns
  early), though an axis that is 1 in both is reduced for both when the shapes differ. The
  kernel reduced [2, 1] vs [2, 1] along axis 1 while shape inference (rightly) did not, and
  a BatchMatMulV2 gradient in MiT's and Gemma3's attention came out one rank short.
"""
import subprocess
import sys

import numpy as np
import pytest

from tfg import builder as tb
from tfg.errors import TfgRuntimeError
from tfg.executor.session import Session
from tfg.schemas.dtypes import DType

X = np.arange(20, dtype=np.float32).reshape(4, 5)
U = -np.ones((2, 3), np.float32)


def _dus_graph(x_shape, u_shape, indices):
    with tb.Graph() as b:
        x = tb.placeholder(tb.float32, list(x_shape), name="x")
        u = tb.placeholder(tb.float32, list(u_shape), name="u")
        b.make_op("XlaDynamicUpdateSlice", [x, u, tb.constant(np.array(indices, np.int32))],
                  {"T": DType.FLOAT, "Tindices": DType.INT32}, "y", out_dtypes=[DType.FLOAT])
    return b.graph


# (start indices, rows and columns TensorFlow overwrote with U)
@pytest.mark.parametrize("indices,rows,cols", [
    ([1, 1], slice(1, 3), slice(1, 4)),
    ([3, 4], slice(2, 4), slice(2, 5)),   # both starts clamped down
    ([-2, 1], slice(0, 2), slice(1, 4)),  # a negative start is 0
    ([0, 9], slice(0, 2), slice(2, 5)),
])
def test_dynamic_update_slice_clamps_like_xla(indices, rows, cols):
    want = X.copy()
    want[rows, cols] = -1
    got = Session(_dus_graph(X.shape, U.shape, indices)).run("y", {"x": X, "u": U})
    np.testing.assert_array_equal(got, want)
    assert X[0, 0] == 0  # the input is not written


@pytest.mark.parametrize("u_shape,indices,message", [
    ((3,), [0, 0], "input and update must have the same rank, input shape is [4,5]; update "
                   "shape is [3]"),
    ((2, 3), [0], "index must be a vector with length equal to the number of input dimensions"),
    ((5, 3), [0, 0], "Update dim size 5 greater than dynamic slice dimension: 4."),
])
def test_dynamic_update_slice_errors(u_shape, indices, message):
    with pytest.raises(TfgRuntimeError, match=message.replace("[", r"\[").replace("]", r"\]")):
        Session(_dus_graph(X.shape, u_shape, indices)).run(
            "y", {"x": X, "u": np.ones(u_shape, np.float32)})


def test_no_gradient_through_dynamic_update_slice(tmp_path):
    """TensorFlow has no gradient for it: `tfg grad` says so in one line, exit 2."""
    with tb.Graph() as b:
        x = tb.placeholder(tb.float32, [4, 5], name="x")
        u = tb.placeholder(tb.float32, [2, 3], name="u")
        y = b.make_op("XlaDynamicUpdateSlice", [x, u, tb.constant(np.array([0, 0], np.int32))],
                      {"T": DType.FLOAT, "Tindices": DType.INT32}, "y",
                      out_dtypes=[DType.FLOAT]).outputs[0]
        tb.reduce_sum(y, name="loss")
    path = tmp_path / "g.pb"
    path.write_bytes(b.graph.to_proto().SerializeToString())
    p = subprocess.run([sys.executable, "-m", "tfg", "grad", str(path), "--ys", "loss",
                        "--xs", "u"], capture_output=True, text=True)
    assert p.returncode == 2 and "XlaDynamicUpdateSlice" in p.stderr, p.stderr
    assert len(p.stderr.strip().splitlines()) == 1, p.stderr


# (s0, s1, r0, r1) as TensorFlow 2.21's BroadcastGradientArgs returns them
BCAST = [
    ([2, 1, 3], [1, 1, 3], [1], [0, 1]),
    ([1, 1], [1, 1], [], []),
    ([2, 1], [2, 1], [], []),
    ([2, 1, 1], [2, 1, 1], [], []),
    ([1, 2, 1], [3, 2, 1], [0, 2], [2]),
    ([5, 1, 1], [1, 1, 1], [1, 2], [0, 1, 2]),
    ([1, 1], [2, 1], [0, 1], [1]),
    ([], [1, 1], [0, 1], [0, 1]),
]


@pytest.mark.parametrize("s0,s1,r0,r1", BCAST)
def test_broadcast_gradient_args_as_tensorflow(s0, s1, r0, r1):
    with tb.Graph() as b:
        a = tb.placeholder(tb.int32, [len(s0)], name="a")
        c = tb.placeholder(tb.int32, [len(s1)], name="c")
        b.make_op("BroadcastGradientArgs", [a, c], {"T": DType.INT32}, "r",
                  out_dtypes=[DType.INT32, DType.INT32])
        # the same computed from Consts, which shape inference evaluates
        b.make_op("BroadcastGradientArgs", [tb.constant(np.array(s0, np.int32)),
                                            tb.constant(np.array(s1, np.int32))],
                  {"T": DType.INT32}, "k", out_dtypes=[DType.INT32, DType.INT32])
    feeds = {"a": np.array(s0, np.int32), "c": np.array(s1, np.int32)}
    got = Session(b.graph).run(["r:0", "r:1", "k:0", "k:1"], feeds)
    for value, want in zip(got, [r0, r1, r0, r1]):
        assert list(value) == want
