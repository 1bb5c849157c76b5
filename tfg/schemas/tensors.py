"""TensorProto <-> numpy, and TensorShapeProto <-> tuples.

    >>> to_numpy(from_numpy(np.arange(3, dtype=np.int32)))
    array([0, 1, 2], dtype=int32)

A typed value list shorter than the shape is filled with its last value (one value = splat),
as TensorFlow does. Shapes are tuples with None for unknown dims, or None for unknown rank.
"""
import numpy as np

from tfg.errors import GraphFormatError
from tfg.schemas.dtypes import DType
from tfg.schemas.proto import tensor_pb2, tensor_shape_pb2

# Refuse to materialize constants above this many elements: a graph file declaring a huge
# splat must fail cleanly instead of exhausting memory.
MAX_CONST_ELEMENTS = 1 << 31
# A splat (fewer values than elements) is expanded in memory: cap the bytes it may take, or a
# 2 KB file could ask for 32 GB (2**31 complex128). Full values are bounded by the file itself.
MAX_SPLAT_BYTES = 1 << 30

_VAL_FIELD = {
    DType.FLOAT: "float_val", DType.DOUBLE: "double_val", DType.INT32: "int_val",
    DType.INT16: "int_val", DType.INT8: "int_val", DType.UINT8: "int_val",
    DType.UINT16: "int_val", DType.QINT8: "int_val", DType.QUINT8: "int_val",
    DType.QINT16: "int_val", DType.QUINT16: "int_val", DType.QINT32: "int_val",
    DType.INT64: "int64_val", DType.BOOL: "bool_val", DType.UINT32: "uint32_val",
    DType.UINT64: "uint64_val", DType.HALF: "half_val", DType.BFLOAT16: "half_val",
    DType.COMPLEX64: "scomplex_val", DType.COMPLEX128: "dcomplex_val",
    DType.STRING: "string_val",
}


def shape_from_proto(proto):
    """TensorShapeProto -> tuple (None for unknown dims) or None for unknown rank."""
    if proto.unknown_rank:
        return None
    return tuple(None if d.size < 0 else int(d.size) for d in proto.dim)


def shape_to_proto(shape, proto=None):
    proto = proto if proto is not None else tensor_shape_pb2.TensorShapeProto()
    proto.SetInParent()  # a scalar shape is written as `shape {}`, as TensorFlow does
    if shape is None:
        proto.unknown_rank = True
        return proto
    for d in shape:
        proto.dim.add().size = -1 if d is None else int(d)
    return proto


def declared_shape(proto):
    """The shape a TensorProto declares (a tuple), or None when unknown or negative; read from
    the message without decoding any value."""
    shape = shape_from_proto(proto.tensor_shape)
    if shape is None or any(d is None or d < 0 for d in shape):
        return None
    return shape


def declared_nbytes(proto):
    """Bytes `to_numpy(proto)` would allocate, without decoding: a one-value splat of shape
    [2**27] float64 declares 1 GiB while its message holds 20 bytes.

        >>> declared_nbytes(from_numpy(np.zeros(4, np.float32)))
        16
    """
    shape = declared_shape(proto)
    if shape is None:
        return 0
    count = 1
    for d in shape:
        count *= d
    try:
        dtype = DType(proto.dtype).base
        # A string element is at least a pointer in the object array numpy holds.
        itemsize = 8 if dtype == DType.STRING else dtype.np.itemsize
    except (ValueError, GraphFormatError, TypeError, AttributeError):
        return 0
    return count * itemsize


def expands(proto, allowance):
    """Whether decoding `proto` would take more than `allowance` bytes beyond its own size
    (a splat; full values are bounded by the file that holds them)."""
    return declared_nbytes(proto) > proto.ByteSize() + allowance


def check(proto):
    """Validate a TensorProto as `to_numpy` would, without decoding it (a splat of 2**27
    strings is checked in microseconds, not decoded into a gigabyte); -> (DType, shape,
    element count). Raises GraphFormatError."""
    try:
        dtype = DType(proto.dtype).base if proto.dtype else DType.INVALID
    except ValueError:  # a corrupt file: an input error naming the value, not a crash
        raise GraphFormatError(f"tensor constant of dtype {int(proto.dtype)}, which is not a "
                               "valid DType") from None
    shape = shape_from_proto(proto.tensor_shape)
    if shape is None or any(d is None for d in shape):
        raise GraphFormatError("tensor constant with an unknown shape")
    if any(d < 0 for d in shape):
        raise GraphFormatError(f"tensor constant with a negative dimension {shape}")
    count = int(np.prod(shape, dtype=np.float64)) if shape else 1
    if count > MAX_CONST_ELEMENTS:
        raise GraphFormatError(f"tensor constant of shape {shape} is too large to build")
    if dtype == DType.RESOURCE or dtype == DType.VARIANT:
        raise GraphFormatError(f"tensor constants of dtype {dtype.tf_name} are not supported")
    if dtype not in _VAL_FIELD:
        raise GraphFormatError(f"tensor constant of unsupported dtype {int(proto.dtype)}")
    np_dtype = dtype.np
    if not proto.tensor_content and count * np_dtype.itemsize > MAX_SPLAT_BYTES and len(
            getattr(proto, _VAL_FIELD[dtype])) < count:
        raise GraphFormatError(f"tensor constant of shape {shape} is too large to build "
                               f"({count * np_dtype.itemsize} bytes from a few values)")
    if proto.tensor_content and dtype != DType.STRING and \
            len(proto.tensor_content) != count * np_dtype.itemsize:
        raise GraphFormatError(
            f"tensor_content holds {len(proto.tensor_content)} bytes, shape {shape} of "
            f"{dtype.tf_name} needs {count * np_dtype.itemsize}")
    if dtype != DType.STRING and not proto.tensor_content and \
            len(getattr(proto, _VAL_FIELD[dtype])) > count * (
            2 if dtype in (DType.COMPLEX64, DType.COMPLEX128) else 1):
        raise GraphFormatError(f"tensor constant has {len(getattr(proto, _VAL_FIELD[dtype]))} "
                               f"values for shape {shape}")
    return dtype, shape, count


def to_numpy(proto):
    """Decode a TensorProto into a numpy array (strings as an object array of bytes)."""
    dtype, shape, count = check(proto)
    np_dtype = dtype.np
    if dtype == DType.STRING:
        vals = list(proto.string_val)
        arr = np.empty(count, dtype=object)
        if vals:
            arr[: len(vals)] = vals[:count]
            arr[len(vals):] = vals[-1]
        elif count:
            arr[:] = b""
        return arr.reshape(shape)
    if proto.tensor_content:
        if len(proto.tensor_content) != count * np_dtype.itemsize:
            raise GraphFormatError(
                f"tensor_content holds {len(proto.tensor_content)} bytes, shape {shape} of "
                f"{dtype.tf_name} needs {count * np_dtype.itemsize}")
        return np.frombuffer(proto.tensor_content, dtype=np_dtype.newbyteorder("<")).astype(
            np_dtype).reshape(shape)
    vals = getattr(proto, _VAL_FIELD[dtype])
    if dtype in (DType.HALF, DType.BFLOAT16):
        flat = np.array(vals, dtype=np.uint16).view(np_dtype)
    elif dtype in (DType.COMPLEX64, DType.COMPLEX128):
        # Two numbers per element; an odd last one is half an element, which TensorFlow
        # ignores too (its element count is len(vals) // 2).
        pairs = np.array(vals[: len(vals) // 2 * 2],
                         dtype=np_dtype.type(0).real.dtype).reshape(-1, 2)
        flat = (pairs[:, 0] + 1j * pairs[:, 1]).astype(np_dtype)
    else:
        flat = np.array(vals, dtype=np_dtype)
    if flat.size == count:
        return flat.reshape(shape)
    if flat.size > count:
        raise GraphFormatError(f"tensor constant has {flat.size} values for shape {shape}")
    out = np.empty(count, dtype=np_dtype)
    if flat.size:
        out[: flat.size] = flat
        out[flat.size:] = flat[-1]
    else:
        out[:] = 0
    return out.reshape(shape)


def from_numpy(value, dtype=None, proto=None):
    """Encode an array (or scalar, list) as a TensorProto; numbers go in `tensor_content`."""
    proto = proto if proto is not None else tensor_pb2.TensorProto()
    if dtype is not None:
        dtype = DType.parse(dtype) if not isinstance(dtype, DType) else dtype
        arr = np.asarray(value, dtype=dtype.np) if dtype != DType.STRING else np.asarray(value, dtype=object)
    else:
        arr = np.asarray(value)
        dtype = DType.from_numpy(arr.dtype)
    proto.dtype = int(dtype.base)
    shape_to_proto(arr.shape, proto.tensor_shape)
    if dtype == DType.STRING:
        proto.string_val.extend(v if isinstance(v, bytes) else str(v).encode() for v in arr.ravel())
    elif arr.size == 1 and arr.ndim == 0 and dtype not in (DType.BFLOAT16,):
        # Scalars go in the typed field, as TensorFlow writes them (readable in .pbtxt).
        field = _VAL_FIELD[dtype]
        if dtype == DType.HALF:
            proto.half_val.append(int(arr.view(np.uint16)))
        elif dtype.is_complex:
            getattr(proto, field).extend([arr.real.item(), arr.imag.item()])
        else:
            getattr(proto, field).append(arr.item())
    else:
        proto.tensor_content = np.ascontiguousarray(arr, dtype=arr.dtype.newbyteorder("<")).tobytes()
    return proto
