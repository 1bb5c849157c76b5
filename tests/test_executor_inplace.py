"""The fast path's in-place BiasAdd/Relu (tfg/executor/inplace.py): used only where the input
is a fresh kernel output read once and not fetched; results equal the ordinary kernels' and no
other value (fetched, fed, constant, read twice) is ever written over."""
import numpy as np
import pytest

from tfg.executor import Session as _Session
from tfg.executor.fastpath import Schedule
from tfg.graphdef.attrs import Shape
from tfg.graphdef.graph import Graph
from tfg.schemas.dtypes import DType

F = DType.FLOAT


def Session(graph, **kw):
    # The unfused chain is what the in-place entries are for: without the Session's own
    # rewrites (which fuse Conv2D + BiasAdd + Relu into one _FusedConv2D).
    return _Session(graph, graph_rewrites=False, **kw)
RNG = np.random.default_rng(3)
X = RNG.standard_normal((2, 5, 5, 3)).astype(np.float32)
W = RNG.standard_normal((3, 3, 3, 4)).astype(np.float32)
B = RNG.standard_normal(4).astype(np.float32)


def _conv_block(fmt=b"NHWC", extra_reader=None):
    """y = Relu(BiasAdd(Conv2D(x, W), b)), optionally with a second reader of the conv output."""
    g = Graph()
    g.add_node("x", "Placeholder", [], {"dtype": F, "shape": Shape((2, 5, 5, 3))})
    g.add_node("w", "Const", [], {"dtype": F, "value": W})
    g.add_node("b", "Const", [], {"dtype": F, "value": B})
    src = "x"
    if fmt == b"NCHW":
        g.add_node("perm", "Const", [], {"dtype": DType.INT32,
                                         "value": np.array([0, 3, 1, 2], np.int32)})
        g.add_node("xt", "Transpose", ["x", "perm"], {"T": F, "Tperm": DType.INT32})
        src = "xt"
    strides = [1, 1, 1, 1]
    g.add_node("conv", "Conv2D", [src, "w"], {"T": F, "strides": strides, "padding": b"SAME",
                                              "data_format": fmt})
    g.add_node("bias", "BiasAdd", ["conv", "b"], {"T": F, "data_format": fmt})
    g.add_node("relu", "Relu", ["bias"], {"T": F})
    if extra_reader:
        g.add_node("other", extra_reader, ["conv"], {"T": F})
    return g


def _expected(fmt=b"NHWC"):
    from numpy.lib.stride_tricks import sliding_window_view
    xp = np.pad(X, ((0, 0), (1, 1), (1, 1), (0, 0)))
    win = sliding_window_view(xp, (3, 3), axis=(1, 2))  # n, h, w, c, kh, kw
    conv = np.einsum("nhwcij,ijco->nhwo", win.astype(np.float64), W).astype(np.float32)
    y = np.maximum(conv + B, 0)
    if fmt == b"NCHW":
        conv, y = conv.transpose(0, 3, 1, 2), y.transpose(0, 3, 1, 2)
    return conv, y


def _entry_fns(sess, fetches, feeds=None):
    sess.run(fetches, {"x": X} if feeds is None else feeds)
    scheds = [p for p in _schedules(sess)]
    return {fn.__name__ for s in scheds for fn, *_ in s.entries}


def _schedules(sess):
    seen = []

    def walk(o, depth=0):
        if isinstance(o, Schedule):
            seen.append(o)
        elif depth < 4 and isinstance(o, (dict, list, tuple)):
            for v in (o.values() if isinstance(o, dict) else o):
                walk(v, depth + 1)
        elif depth < 4 and hasattr(o, "__dict__"):
            walk(vars(o), depth + 1)
    walk(sess._cache)
    return seen


@pytest.mark.parametrize("fmt", [b"NHWC", b"NCHW"])
def test_conv_bias_relu_in_place_equals_the_kernels(fmt):
    sess = Session(_conv_block(fmt))
    _, want = _expected(fmt)
    for _ in range(2):  # a second step reuses the schedule: constants must be untouched
        np.testing.assert_allclose(sess.run("relu", {"x": X}), want, rtol=1e-5, atol=1e-5)
    fns = _entry_fns(sess, "relu")
    assert {"bias_add_inplace", "relu_inplace"} <= fns
    slow = Session(_conv_block(fmt), fast_path=False)
    np.testing.assert_array_equal(slow.run("relu", {"x": X}), sess.run("relu", {"x": X}))


def test_fetched_conv_output_is_not_overwritten():
    conv_want, y_want = _expected()
    sess = Session(_conv_block())
    conv, y = sess.run(["conv", "relu"], {"x": X})
    np.testing.assert_allclose(conv, conv_want, rtol=1e-5, atol=1e-5)
    assert (conv < 0).any()  # a Relu written into it would have zeroed these
    np.testing.assert_allclose(y, y_want, rtol=1e-5, atol=1e-5)
    assert "bias_add_inplace" not in _entry_fns(sess, ["conv", "relu"])


@pytest.mark.parametrize("reader", ["Identity", "Neg"])
def test_conv_output_read_twice_is_not_overwritten(reader):
    conv_want, y_want = _expected()
    sess = Session(_conv_block(extra_reader=reader))
    other, y = sess.run(["other", "relu"], {"x": X})
    want_other = conv_want if reader == "Identity" else -conv_want
    np.testing.assert_allclose(other, want_other, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(y, y_want, rtol=1e-5, atol=1e-5)


def test_fed_and_constant_inputs_are_not_overwritten():
    g = Graph()
    g.add_node("v", "Placeholder", [], {"dtype": F, "shape": Shape((3,))})
    g.add_node("c", "Const", [], {"dtype": F, "value": np.array([[-1, 2, -3]], np.float32)})
    g.add_node("b", "Const", [], {"dtype": F, "value": np.array([1, 1, 1], np.float32)})
    g.add_node("r1", "Relu", ["v"], {"T": F})
    g.add_node("ba", "BiasAdd", ["c", "b"], {"T": F})
    sess = Session(g)
    fed = np.array([-5, 4, -1], np.float32)
    for _ in range(3):
        r1, ba = sess.run(["r1", "ba"], {"v": fed})
        np.testing.assert_array_equal(r1, [0, 4, 0])
        np.testing.assert_array_equal(ba, [[0, 3, -2]])
    np.testing.assert_array_equal(fed, [-5, 4, -1])
    assert not {"bias_add_inplace", "relu_inplace"} & _entry_fns(sess, ["r1", "ba"], {"v": fed})
