"""Tensors from values: constants, placeholders, `convert_to_tensor` (Python values take
TensorFlow's default dtypes).

    >>> constant([1, 2]).dtype, constant(0.5).dtype, constant(np.float64(1)).dtype
    (DType.INT32, DType.FLOAT, DType.DOUBLE)
    >>> placeholder(DType.FLOAT, [None, 3], name="x").shape
    (None, 3)
"""
import numpy as np

from tfg.errors import TfgInputError
from tfg.graphdef.builder.core import A, Operation, Tensor, get_default_builder
from tfg.schemas.dtypes import DType


def default_dtype_of(value):
    """TensorFlow's dtype for a Python/numpy value: float32, int32 (int64 if too big), ..."""
    if isinstance(value, np.ndarray) or isinstance(value, np.generic):
        return DType.from_numpy(value.dtype)
    arr = np.asarray(value)
    if arr.dtype == np.bool_:
        return DType.BOOL
    if arr.dtype.kind in "iu":
        info = np.iinfo(np.int32)
        if arr.size and (arr.min() < info.min or arr.max() > info.max):
            return DType.INT64
        return DType.INT32
    if arr.dtype.kind == "f":
        return DType.FLOAT
    if arr.dtype.kind == "c":
        return DType.COMPLEX64
    if arr.dtype.kind in "SUO":
        return DType.STRING
    raise TfgInputError(f"cannot make a constant from {type(value).__name__}")


def constant(value, dtype=None, shape=None, name="Const"):
    """A Const node.  constant([1, 2]) -> int32 [2];  constant(0.5, shape=[2, 2]) -> splat."""
    b = get_default_builder()
    dt = DType.parse(dtype) if dtype is not None and not isinstance(dtype, DType) else dtype
    if dt is None:
        dt = default_dtype_of(value)
    if dt == DType.STRING:
        arr = np.asarray(value, dtype=object)
    else:
        src = np.asarray(value)
        if dt.is_integer and src.dtype.kind in "fc" and np.any(src != np.round(src.real)):
            raise TfgInputError(f"constant {value!r} is not an integer for dtype {dt.tf_name}")
        arr = src.astype(dt.np)
    if shape is not None:
        shape = tuple(int(s) for s in shape)
        if arr.size == 1:
            arr = np.full(shape, arr.reshape(()), dtype=arr.dtype)
        elif arr.size == int(np.prod(shape)):
            arr = arr.reshape(shape)
        else:
            raise TfgInputError(f"constant with {arr.size} values does not fit shape {shape}")
    op = b.make_op("Const", [], {"value": A(arr, "tensor"), "dtype": dt}, name=name,
                   out_dtypes=[dt], out_shapes=[arr.shape])
    return op.outputs[0]


def placeholder(dtype, shape=None, name="Placeholder"):
    """A Placeholder; `shape` None = unknown rank, dims may be None."""
    dt = DType.parse(dtype) if not isinstance(dtype, DType) else dtype
    shp = None if shape is None else tuple(None if d is None else int(d) for d in shape)
    op = get_default_builder().make_op(
        "Placeholder", [], {"dtype": dt, "shape": A(shp, "shape")}, name=name,
        out_dtypes=[dt], out_shapes=[shp])
    return op.outputs[0]


def placeholder_with_default(value, shape, name="PlaceholderWithDefault"):
    """Passes `value` through unless it is fed."""
    x = convert_to_tensor(value)
    shp = None if shape is None else tuple(None if d is None else int(d) for d in shape)
    op = get_default_builder().make_op(
        "PlaceholderWithDefault", [x], {"dtype": x.dtype, "shape": A(shp, "shape")},
        name=name, out_dtypes=[x.dtype], out_shapes=[shp])
    return op.outputs[0]


# How a list holding tensors becomes one (a Pack); array_ops registers its `stack` here, as
# TensorFlow's array_ops registers its autopacking conversion, so that constants need not
# import the module built on it.
_AUTOPACK = None


def register_autopacking(pack):
    """Make `convert_to_tensor([t, 1.0])` call `pack(values, name=...)`."""
    global _AUTOPACK
    _AUTOPACK = pack


def convert_to_tensor(value, dtype=None, name="Const"):
    """A Tensor for `value`: Tensors pass (dtype checked), Variables read, else a Const."""
    if hasattr(value, "_as_tensor"):
        value = value._as_tensor()
    if isinstance(value, Tensor):
        if dtype is not None:
            want = DType.parse(dtype) if not isinstance(dtype, DType) else dtype
            if value.dtype.base != want.base:
                raise TfgInputError(f"tensor {value.name!r} has dtype {value.dtype.tf_name}, "
                                    f"expected {want.tf_name}")
        return value
    if isinstance(value, Operation):
        raise TfgInputError(f"operation {value.name!r} has no value; use it as a control "
                            "dependency or target")
    if isinstance(value, (list, tuple)) and any(hasattr(v, "_as_tensor") or
                                                isinstance(v, Tensor) for v in value):
        if _AUTOPACK is None:
            raise TfgInputError("packing a list of tensors needs tfg.graphdef.builder.array_ops")
        return _AUTOPACK(list(value), name="packed")
    return constant(value, dtype=dtype, name=name)


__all__ = ["constant", "placeholder", "placeholder_with_default", "convert_to_tensor",
           "default_dtype_of"]
