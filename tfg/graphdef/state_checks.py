"""Checks on saved state before it is trusted: SavedModel bundles and checkpoints.

A variables bundle or checkpoint is data from outside; each value must match what the graph
declares for its variable, and a bundle's files must lie inside the model folder:

    >>> check_value("w", np.zeros((2, 3), np.float32), DType.FLOAT, (2, 3), "export/1")
    >>> check_value("w", np.zeros((2, 3), np.float32), DType.INT64, (2, 3), "export/1")
    Traceback (most recent call last):
    tfg.errors.TfgInputError: export/1: variable 'w' is float32 [2,3] there, but the graph
    declares int64 [2,3]
"""
import os

import numpy as np

from tfg.errors import TfgInputError
from tfg.schemas.dtypes import DType


def shape_text(shape):
    if shape is None:
        return "[?]"
    return "[" + ",".join("?" if d is None or d < 0 else str(d) for d in shape) + "]"


def _dtype_name(dtype):
    return dtype.tf_name if isinstance(dtype, DType) else str(dtype)


def value_dtype(value):
    value = np.asarray(value)
    return DType.STRING if value.dtype == object else DType.from_numpy(value.dtype)


def check_value(name, value, dtype, shape, source):
    """Refuse `value` for variable `name` unless its dtype and shape match the declared ones
    (None, an unknown rank or -1 dims declare nothing)."""
    got_dtype, got_shape = value_dtype(value), tuple(np.shape(value))
    want_dtype = dtype.base if isinstance(dtype, DType) else dtype
    dtype_ok = want_dtype is None or want_dtype == got_dtype
    shape_ok = shape is None or (len(shape) == len(got_shape) and all(
        d is None or d < 0 or d == g for d, g in zip(shape, got_shape)))
    if not (dtype_ok and shape_ok):
        raise TfgInputError(
            f"{source}: variable {name!r} is {_dtype_name(got_dtype)} {shape_text(got_shape)} "
            f"there, but the graph declares {_dtype_name(want_dtype or got_dtype)} "
            f"{shape_text(shape if shape is not None else got_shape)}")


def check_entry_size(name, dtype, shape, size, source):
    """A bundle entry's byte size must be what its dtype and shape take (numbers only)."""
    count = 1
    for d in shape:
        count *= d
    want = count * dtype.np.itemsize
    if size != want:
        raise TfgInputError(f"{source}: variable {name!r} holds {size} bytes, but "
                            f"{dtype.tf_name} {shape_text(shape)} takes {want}")


def check_inside(folder, path, what):
    """Refuse `path` when it resolves (through symlinks) outside `folder`: a model folder may
    not make tfg read /etc/shadow or a device file as its variables."""
    root = os.path.realpath(folder)
    real = os.path.realpath(path)
    if real != root and not real.startswith(root.rstrip(os.sep) + os.sep):
        raise TfgInputError(f"{what} {path} leads outside {folder} (to {real}); refused")
    if os.path.exists(real) and not os.path.isfile(real):
        raise TfgInputError(f"{what} {path} is not a regular file")


def check_disjoint(regions, source):
    """Entries of a bundle must not share bytes: TensorFlow writes each tensor once, and
    thousands of entries over one block would decode it thousands of times.

    `regions`: (name, shard, offset, size) of every entry."""
    last = {}
    for name, shard, offset, size in sorted(regions, key=lambda r: (r[1], r[2], r[3])):
        if size == 0:
            continue
        prev = last.get(shard)
        if prev is not None and offset < prev[1]:
            raise TfgInputError(f"{source}: variables {prev[0]!r} and {name!r} share bytes of "
                                f"shard {shard}; a bundle holds each tensor once")
        last[shard] = (name, offset + size)
