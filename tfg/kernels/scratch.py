"""Scratch memory of kernels beyond their outputs: what a kernel allocates that no shape
function describes, sized from its inputs and attrs before it runs.

    >>> scratch_shape("MaxPool", {"ksize": [1, 2**30, 2**30, 1], "strides": [1, 1, 1, 1],
    ...                           "padding": b"SAME"}, [np.zeros((1, 4, 4, 1), np.float32)])
    ((1, 1073741827, 1073741827, 1), dtype('float32'))

A pool of a 4x4 image with a 2**30 window and SAME padding has a 4x4 output, but the kernel
pads its input to the window first (4 EiB) and loops over the window's rows: `tfg run` and
`tfg optimize` (which folds it) used all memory and never answered. The memory guard
(tfg/executor/limits.py) and constant folding (tfg/passes/constfold/fold.py) ask here first.
"""
import numpy as np

from tfg.kernels._util import spatial_attr, to_nhwc
from tfg.kernels.conv_geom import Geom


def _attr(attrs, name, default=None):
    value = attrs.get(name, default)
    return list(value) if value is not None and not isinstance(value, (bytes, str)) else value


def _padded_input(attrs, x, ksize=None, strides=None):
    """(shape, dtype) of the padded NHWC copy of pool input `x`; None when not known."""
    x = np.asarray(x) if not hasattr(x, "shape") else x
    if len(x.shape) != 4:
        return None
    fmt = attrs.get("data_format", b"NHWC")
    ksize = ksize if ksize is not None else _attr(attrs, "ksize")
    if ksize is None:
        return None
    _, kh, kw, _ = spatial_attr([int(k) for k in ksize], fmt, "ksize")
    if kh < 1 or kw < 1:
        return None
    n, h, w, c = to_nhwc(_Shape(x.shape), fmt).shape
    g = Geom(attrs, h, w, kh, kw, strides=strides, dilations=[1, 1, 1, 1])
    return (n, h + g.pt + g.pb, w + g.pl + g.pr, c), np.dtype(getattr(x, "dtype", np.float32))


class _Shape:
    """A shape that to_nhwc can transpose without an array."""

    def __init__(self, shape):
        self.shape = tuple(int(d) for d in shape)

    def transpose(self, *axes):
        return _Shape(tuple(self.shape[a] for a in axes))


def _pool(attrs, inputs):
    return _padded_input(attrs, inputs[0])


def _pool_v2(attrs, inputs):  # MaxPoolV2(x, ksize, strides); MaxPoolGradV2(x, y, dy, k, s)
    ksize, strides = inputs[-2], inputs[-1]
    return _padded_input(attrs, inputs[0], [int(k) for k in np.ravel(ksize)],
                         [int(s) for s in np.ravel(strides)])


def _avg_pool_grad(attrs, inputs):  # AvgPoolGrad(orig_input_shape, dy)
    shape = [int(d) for d in np.ravel(inputs[0])]
    if len(shape) != 4 or min(shape) < 0:
        return None
    return _padded_input(attrs, _Array(shape, np.asarray(inputs[1]).dtype))


class _Array:
    def __init__(self, shape, dtype):
        self.shape, self.dtype = tuple(shape), dtype


SCRATCH = {"MaxPool": _pool, "AvgPool": _pool, "MaxPoolGrad": _pool, "MaxPoolV2": _pool_v2,
           "MaxPoolGradV2": _pool_v2, "AvgPoolGrad": _avg_pool_grad}


def scratch_shape(op, attrs, inputs):
    """(shape, numpy dtype) of the largest scratch array `op` allocates for `inputs`, or None
    (unknown, or the kernel will refuse the inputs itself and say why)."""
    fn = SCRATCH.get(op)
    if fn is None:
        return None
    try:
        return fn(attrs, inputs)
    except Exception:  # noqa: BLE001 - malformed attrs or inputs: the kernel names them
        return None
