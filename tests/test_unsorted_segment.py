"""UnsortedSegmentMax / Min / Prod: TensorFlow's values (empty segments hold the lowest /
largest value / 1; negative ids dropped), its errors, and gradients against finite
differences (Prod with one and with two zeros in a segment)."""
import numpy as np
import pytest

from helpers import numeric_gradient
from tfg import builder as tb
from tfg.errors import TfgRuntimeError
from tfg.executor.session import Session
from tfg.passes.grad import grad
from tfg.schemas.dtypes import DType

LOWEST = -3.4028234663852886e+38


def _graph(op, ids, n=3, shape=(3, 2), dtype=np.float64):
    dt = DType.from_numpy(dtype)
    with tb.Graph() as b:
        d = tb.placeholder(tb.float64 if dtype == np.float64 else tb.float32, list(shape),
                           name="d")
        y = b.make_op(op, [d, tb.constant(np.array(ids, np.int32)), tb.constant(np.int32(n))],
                      {"T": dt, "Tindices": DType.INT32, "Tnumsegments": DType.INT32},
                      "y", out_dtypes=[dt]).outputs[0]
        w = tb.constant(np.random.RandomState(4).randn(n, *shape[1:]).astype(dtype))
        tb.reduce_sum(tb.sin(y) * w, name="loss")
    return b.graph


@pytest.mark.parametrize("op,ids,want", [
    ("UnsortedSegmentMax", [0, 0, -1], [[3, 4], [LOWEST, LOWEST], [LOWEST, LOWEST]]),
    ("UnsortedSegmentMin", [0, 0, 2], [[1, 2], [-LOWEST, -LOWEST], [5, 6]]),
    ("UnsortedSegmentProd", [0, 0, 2], [[3, 8], [1, 1], [5, 6]]),
])
def test_values_are_tensorflows(op, ids, want):
    d = np.array([[1, 2], [3, 4], [5, 6]], np.float32)
    g = _graph(op, ids, dtype=np.float32)
    np.testing.assert_array_equal(Session(g).run("y", {"d": d}), np.array(want, np.float32))


def test_errors_are_tensorflows():
    d = np.zeros((3, 2))
    with pytest.raises(TfgRuntimeError, match=r"segment_ids\[1\] = 5 is out of range \[0, 3\)"):
        Session(_graph("UnsortedSegmentMax", [0, 5, 1])).run("y", {"d": d})
    with pytest.raises(TfgRuntimeError, match=r"data.shape = \[3,2\] does not start with "
                                              r"segment_ids.shape = \[2\]"):
        Session(_graph("UnsortedSegmentMin", [0, 1])).run("y", {"d": d})


@pytest.mark.parametrize("op,ids,data", [
    ("UnsortedSegmentMax", [2, 0, 2, -1], [[1.0, -2.0], [0.5, 3.0], [-1.0, 4.0], [9.0, 9.0]]),
    ("UnsortedSegmentMin", [1, 1, 0, 1], [[1.0, -2.0], [0.5, 3.0], [-1.0, 4.0], [2.0, 0.2]]),
    ("UnsortedSegmentProd", [0, 0, 1, 2], [[1.5, 0.0], [0.5, 3.0], [0.0, 0.0], [2.0, 0.7]]),
    ("UnsortedSegmentProd", [1, 1, 1, -1], [[0.0, 2.0], [0.0, 3.0], [1.5, -0.5], [2.0, 0.7]]),
])
def test_gradients_equal_finite_differences(op, ids, data):
    d0 = np.array(data)
    g = _graph(op, ids, shape=d0.shape)
    got = Session(grad(g, "loss", "d")).run("grad/d", {"d": d0})
    sess = Session(g)
    want = numeric_gradient(lambda v: sess.run("loss", {"d": v}), d0, eps=1e-6)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-8)
