"""TensorScatterUpdate / Add / Sub / Min / Max (values against numpy, TensorFlow's errors,
gradients against finite differences) and Empty: the ops tf.nn.ctc_loss's scan loops write
(tests/fixtures/real_loops/tf1_ctc_dense_grad runs them in TensorFlow's own graph)."""
import numpy as np
import pytest

from helpers import numeric_gradient
from tfg import builder as tb
from tfg.errors import TfgRuntimeError
from tfg.executor.session import Session
from tfg.passes.grad import grad
from tfg.schemas.dtypes import DType

F64 = DType.DOUBLE
OPS = ["TensorScatterUpdate", "TensorScatterAdd", "TensorScatterSub", "TensorScatterMin",
       "TensorScatterMax"]


def _graph(op, indices, t_shape=(4, 3), u_shape=(3, 3)):
    with tb.Graph() as b:
        t = tb.placeholder(tb.float64, list(t_shape), name="t")
        u = tb.placeholder(tb.float64, list(u_shape), name="u")
        y = b.make_op(op, [t, tb.constant(np.array(indices, np.int32)), u],
                      {"T": F64, "Tindices": DType.INT32},
                      "y", out_dtypes=[F64]).outputs[0]
        w = tb.constant(np.random.RandomState(3).randn(*t_shape))
        tb.reduce_sum(y * w, name="loss")
    return b.graph


def _numpy(op, t, idx, u):
    out = t.copy()
    fn = {"TensorScatterAdd": np.add, "TensorScatterSub": np.subtract,
          "TensorScatterMin": np.minimum, "TensorScatterMax": np.maximum}
    for i, row in zip(idx, u):
        out[tuple(i)] = row if op == "TensorScatterUpdate" else fn[op](out[tuple(i)], row)
    return out


@pytest.mark.parametrize("op", OPS)
def test_values_and_gradients(op):
    # Repeated indices where TensorFlow defines the result (not for Update: order undefined)
    idx = [[0], [2], [3]] if op == "TensorScatterUpdate" else [[0], [2], [0]]
    rng = np.random.RandomState(0)
    t0, u0 = rng.randn(4, 3), rng.randn(3, 3)
    g = _graph(op, idx)
    np.testing.assert_allclose(Session(g).run("y", {"t": t0, "u": u0}), _numpy(op, t0, idx, u0))
    got = Session(grad(g, "loss", "t,u")).run(["grad/t", "grad/u"], {"t": t0, "u": u0})
    sess = Session(g)
    for i, (name, x0) in enumerate((("t", t0), ("u", u0))):
        other = {"u": u0} if name == "t" else {"t": t0}
        want = numeric_gradient(lambda v: sess.run("loss", dict(other, **{name: v})), x0,
                                eps=1e-6)
        np.testing.assert_allclose(got[i], want, rtol=1e-6, atol=1e-8, err_msg=name)


@pytest.mark.parametrize("indices,u_shape,message", [
    ([[0], [5], [1]], (3, 3), "indices[1] = [5] does not index into shape [4, 3]"),
    ([[0], [1], [2]], (3, 2), "The inner 1 dimensions of output.shape=[4,3] must match the "
                              "inner 1 dimensions of updates.shape=[3,2]"),
    ([[0], [1]], (3, 3), "The outer 1 dimensions of updates.shape=[3,3] must match the outer 1 "
                         "dimensions of indices.shape=[2,1]"),
])
def test_bad_indices_and_updates_are_tensorflows_errors(indices, u_shape, message):
    g = _graph("TensorScatterAdd", indices, u_shape=u_shape)
    with pytest.raises(TfgRuntimeError) as e:
        Session(g).run("y", {"t": np.zeros((4, 3)), "u": np.zeros(u_shape)})
    assert message in str(e.value)


def test_empty_is_zeros_of_its_shape_and_dtype():
    with tb.Graph() as b:
        b.make_op("Empty", [tb.constant(np.array([2, 3], np.int32))], {"dtype": DType.INT64},
                  "e", out_dtypes=[DType.INT64])
    out = Session(b.graph).run("e")
    assert out.dtype == np.int64 and out.shape == (2, 3) and not out.any()
