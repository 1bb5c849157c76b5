"""Helpers shared by the numpy kernels: errors, attr decoding, axes, data formats, padding.

    >>> norm_axes(np.array([0, -1]), 3)
    (0, 2)
    >>> conv_out_and_pads(7, 3, 2, 1, b"SAME")
    (4, 1, 1)
"""
import contextlib
import importlib

import numpy as np

from tfg.errors import TfgInputError, TfgRuntimeError
from tfg.schemas.dtypes import DType


def immutable(a):
    """Whether nothing can write into `a`'s memory: it and every array it views are
    read-only, down to memory it owns or an immutable bytes object (a Const's value). What a
    kernel may key a kept copy on (a filter's transpose or tiling): a fed array can be written
    in place by its caller between runs (a numpy training loop's `W -= lr * g`), and a
    read-only view of a variable's buffer by an assignment, both staying the same object, so
    a copy made of them once would go stale. A numpy scalar (np.int32(3)) is immutable."""
    if isinstance(a, np.generic):
        return True
    while isinstance(a, np.ndarray):
        if a.flags.writeable:
            return False
        a = a.base
    return a is None or isinstance(a, bytes)


def fail(msg):
    """Raise the error a kernel reports for bad values at run time (TensorFlow's
    InvalidArgument): one line, the executor prefixes the node name and op."""
    raise TfgRuntimeError(msg)


def check_rank(x, rank, message):
    """fail with `message` and x's shape unless x has `rank` dims, as TensorFlow's kernels
    check their inputs first: check_rank(np.zeros(3), 2, "indices must be a matrix, saw:")
    fails with "indices must be a matrix, saw: [3]"."""
    if x.ndim != rank:
        fail(f"{message} {tf_dims(x.shape)}")


def errstate(xp, **kwargs):
    """numpy's errstate on the CPU; a no-op for a GPU array module (CuPy has no float traps)."""
    return np.errstate(**kwargs) if xp is np else contextlib.nullcontext()


def scatter_add(xp, out, index, values):
    """out[index] += values with repeated indices accumulating: numpy's add.at on the CPU,
    cupyx.scatter_add on a GPU (the stand-in module has its own)."""
    if xp is np:
        np.add.at(out, index, values)
        return
    fn = getattr(xp, "scatter_add", None)  # the stand-in's
    if fn is None:
        at = getattr(getattr(xp, "add", None), "at", None)  # CuPy >= 13: cupy.add.at
        fn = at if at is not None else importlib.import_module("cupyx").scatter_add  # lazy
    fn(out, index, values)


def s(value):
    """A string attr (bytes) as str."""
    return value.decode() if isinstance(value, bytes) else str(value)


def tf_dims(shape):
    """A shape as TensorFlow's error messages print it: [4,5]."""
    return "[" + ",".join(str(d) for d in shape) + "]"


def np_dtype(dt):
    """numpy dtype of a DType attr value (accepts a DType or anything DType.parse takes)."""
    if not isinstance(dt, DType):
        dt = DType.parse(dt)
    return dt.np


def shape_of(value):
    """A value's shape, read from `.shape` (a device array's shape without touching its
    memory; numpy's np.shape would convert it); Python scalars have shape ()."""
    shape = getattr(value, "shape", None)
    return np.shape(value) if shape is None else tuple(shape)


def tf_name(arr_or_dtype):
    dt = getattr(arr_or_dtype, "dtype", arr_or_dtype)
    try:
        return DType.from_numpy(dt).tf_name
    except TfgInputError:
        return str(dt)


def unsupported_dtype(op, x):
    fail(f"{op} does not support dtype {tf_name(x)}")


def require_float(op, x):
    if x.dtype.kind not in "fc" and x.dtype.name != "bfloat16":
        unsupported_dtype(op, x)


def norm_axis(axis, ndim, what="axis"):
    a = int(axis)
    if not -ndim <= a < ndim:
        fail(f"{what} {a} is out of range for a tensor of rank {ndim} (expected [{-ndim}, {ndim}))")
    return a + ndim if a < 0 else a


def norm_axes(axes, ndim, what="reduction dimension"):
    """Axes tensor (scalar or vector, may be negative) -> sorted tuple of unique axes."""
    flat = np.asarray(axes).reshape(-1)
    if flat.dtype.kind not in "iu":
        fail(f"{what}s must be int32 or int64, got {tf_name(flat)}")
    return tuple(sorted({norm_axis(a, ndim, what) for a in flat.tolist()}))


def shape_vector(value, what="shape"):
    """A 1-D int tensor holding a shape -> tuple of ints."""
    if type(value) is np.ndarray and value.ndim == 1 and value.dtype.kind in "iu":
        return tuple(value.tolist())  # (Python ints: a Slice's begin and size, 0.4 us)
    v = np.asarray(value)
    if v.ndim > 1 or v.dtype.kind not in "iu":
        fail(f"{what} must be a vector of int32/int64, got {tf_name(v)} of shape {v.shape}")
    return tuple(int(d) for d in v.reshape(-1).tolist())


def is_nchw(fmt):
    return s(fmt).startswith("NC")


def conv_out_and_pads(size, k, stride, dilation, padding, explicit=(0, 0)):
    """Output size and (before, after) padding of one spatial dim, as TensorFlow computes them.

    VALID: ceil((in - eff_k + 1) / stride); SAME: ceil(in / stride), padding split with the
    extra row after; EXPLICIT: the given pads.
    """
    eff = (k - 1) * dilation + 1
    padding = s(padding)
    if padding == "VALID":
        out = (size - eff) // stride + 1 if size >= eff else 0
        return max(out, 0), 0, 0
    if padding == "SAME":
        out = -(-size // stride)
        total = max((out - 1) * stride + eff - size, 0)
        return out, total // 2, total - total // 2
    if padding == "EXPLICIT":
        before, after = explicit
        padded = size + before + after
        out = (padded - eff) // stride + 1 if padded >= eff else 0
        return out, before, after
    fail(f"unknown padding {padding!r}")


def spatial_attr(values, fmt, what):
    """Pick the H and W entries of a 4-element attr (strides, dilations, ksize) by format."""
    v = list(values)
    if len(v) != 4:
        fail(f"{what} must have 4 elements, got {len(v)}")
    if is_nchw(fmt):
        n, c, h, w = v
    else:
        n, h, w, c = v
    return n, h, w, c


def to_nhwc(x, fmt):
    return x.transpose(0, 2, 3, 1) if is_nchw(fmt) else x


def from_nhwc(x, fmt):
    return x.transpose(0, 3, 1, 2) if is_nchw(fmt) else x


def as_result(x, dtype):
    """Cast to `dtype` only when needed (numpy may widen, e.g. bincount -> float64)."""
    x = np.asarray(x)
    return x if x.dtype == dtype else x.astype(dtype)
