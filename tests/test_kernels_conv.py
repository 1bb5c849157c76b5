"""Convolution and pooling kernels beyond what TensorFlow's CPU kernels accept (NCHW, dilated
backprops, depthwise backprops): checked by adjoint identities and layout consistency."""
import numpy as np
import pytest

from tfg.graphdef.graph import Graph
from tfg.kernels import get_kernel
from tfg.kernels.context import KernelContext

rng = np.random.default_rng(7)


def run(op, *inputs, **attrs):
    g = Graph()
    node = g.add_node("n", op)
    kd = get_kernel(op)
    return kd.fn(KernelContext(node, attrs), *inputs)


def f32(*shape):
    return rng.standard_normal(shape).astype(np.float32)


CONV = [
    dict(strides=[1, 1, 1, 1], padding=b"SAME", dilations=[1, 2, 2, 1]),
    dict(strides=[1, 2, 1, 1], padding=b"VALID", dilations=[1, 1, 2, 1]),
    dict(strides=[1, 2, 2, 1], padding=b"EXPLICIT", explicit_paddings=[0, 0, 1, 2, 2, 0, 0, 0],
         dilations=[1, 1, 1, 1]),
]


@pytest.mark.parametrize("attrs", CONV)
def test_conv_backprops_are_adjoints_of_conv(attrs):
    x, w = f32(2, 9, 8, 3), f32(3, 2, 3, 4)
    y = run("Conv2D", x, w, data_format=b"NHWC", **attrs)
    dy = f32(*y.shape)
    dx = run("Conv2DBackpropInput", np.array(x.shape, np.int32), w, dy, data_format=b"NHWC",
             **attrs)
    dw = run("Conv2DBackpropFilter", x, np.array(w.shape, np.int32), dy, data_format=b"NHWC",
             **attrs)
    lhs = float(np.sum(y.astype(np.float64) * dy))
    assert np.isclose(lhs, float(np.sum(x.astype(np.float64) * dx)), rtol=1e-4)
    assert np.isclose(lhs, float(np.sum(w.astype(np.float64) * dw)), rtol=1e-4)


def test_depthwise_backprops_are_adjoints():
    attrs = dict(strides=[1, 2, 2, 1], padding=b"SAME", dilations=[1, 1, 1, 1],
                 data_format=b"NHWC")
    x, w = f32(2, 7, 7, 3), f32(3, 3, 3, 2)
    y = run("DepthwiseConv2dNative", x, w, **attrs)
    dy = f32(*y.shape)
    dx = run("DepthwiseConv2dNativeBackpropInput", np.array(x.shape, np.int32), w, dy, **attrs)
    dw = run("DepthwiseConv2dNativeBackpropFilter", x, np.array(w.shape, np.int32), dy, **attrs)
    lhs = float(np.sum(y.astype(np.float64) * dy))
    assert np.isclose(lhs, float(np.sum(x * dx.astype(np.float64))), rtol=1e-4)
    assert np.isclose(lhs, float(np.sum(w * dw.astype(np.float64))), rtol=1e-4)


def nchw(x):
    return x.transpose(0, 3, 1, 2)


def test_nchw_matches_nhwc():
    x, w = f32(2, 8, 6, 3), f32(3, 3, 3, 5)
    ref = run("Conv2D", x, w, strides=[1, 2, 1, 1], padding=b"SAME", data_format=b"NHWC")
    got = run("Conv2D", nchw(x), w, strides=[1, 1, 2, 1], padding=b"SAME", data_format=b"NCHW")
    np.testing.assert_allclose(got, nchw(ref), rtol=1e-5, atol=1e-5)
    for op in ("MaxPool", "AvgPool"):
        ref = run(op, x, ksize=[1, 3, 2, 1], strides=[1, 2, 2, 1], padding=b"SAME",
                  data_format=b"NHWC")
        got = run(op, nchw(x), ksize=[1, 1, 3, 2], strides=[1, 1, 2, 2], padding=b"SAME",
                  data_format=b"NCHW")
        np.testing.assert_allclose(got, nchw(ref), rtol=1e-6)
    dy = f32(2, 8, 3, 5)
    ref = run("Conv2DBackpropInput", np.array([2, 8, 6, 3], np.int32), w, dy,
              strides=[1, 1, 2, 1], padding=b"SAME", data_format=b"NHWC")
    got = run("Conv2DBackpropInput", np.array([2, 3, 8, 6], np.int32), w, nchw(dy),
              strides=[1, 1, 1, 2], padding=b"SAME", data_format=b"NCHW")
    np.testing.assert_allclose(got, nchw(ref), rtol=1e-5, atol=1e-5)


def test_batch_norm_nchw_matches_nhwc():
    x = f32(2, 4, 4, 3)
    sc, of = f32(3), f32(3)
    empty = np.zeros(0, np.float32)
    kw = dict(epsilon=1e-3, is_training=True)
    ref = run("FusedBatchNormV3", x, sc, of, empty, empty, data_format=b"NHWC", **kw)
    got = run("FusedBatchNormV3", nchw(x), sc, of, empty, empty, data_format=b"NCHW", **kw)
    np.testing.assert_allclose(got[0], nchw(ref[0]), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got[2], ref[2], rtol=1e-5)


def test_conv2d_1x1_and_general_paths_agree():
    x, w = f32(2, 5, 5, 4), f32(1, 1, 4, 3)
    fast = run("Conv2D", x, w, strides=[1, 1, 1, 1], padding=b"VALID", data_format=b"NHWC")
    slow = run("Conv2D", x, w, strides=[1, 1, 1, 1], padding=b"EXPLICIT",
               explicit_paddings=[0] * 8, data_format=b"NHWC")
    np.testing.assert_allclose(fast, slow, rtol=1e-6)
    assert fast.dtype == np.float32
