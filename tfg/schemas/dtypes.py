"""TensorFlow's DataType enum, and its mapping to numpy dtypes.

    >>> DType.from_numpy(np.float32)
    DType.FLOAT
    >>> DType.FLOAT.as_ref, DType.FLOAT_REF.base
    (DType.FLOAT_REF, DType.FLOAT)
"""
import enum

import numpy as np
from tfg.errors import TfgInputError

try:  # bfloat16 has no numpy dtype of its own; ml_dtypes provides one when installed.
    import ml_dtypes

    _BFLOAT16 = np.dtype(ml_dtypes.bfloat16)
except ImportError:  # pragma: no cover - depends on the environment
    _BFLOAT16 = None


class DType(enum.IntEnum):
    """TensorFlow DataType numbers (types.proto). `*_REF` is the base value plus 100."""

    INVALID = 0
    FLOAT = 1
    DOUBLE = 2
    INT32 = 3
    UINT8 = 4
    INT16 = 5
    INT8 = 6
    STRING = 7
    COMPLEX64 = 8
    INT64 = 9
    BOOL = 10
    QINT8 = 11
    QUINT8 = 12
    QINT32 = 13
    BFLOAT16 = 14
    QINT16 = 15
    QUINT16 = 16
    UINT16 = 17
    COMPLEX128 = 18
    HALF = 19
    RESOURCE = 20
    VARIANT = 21
    UINT32 = 22
    UINT64 = 23
    FLOAT_REF = 101
    DOUBLE_REF = 102
    INT32_REF = 103
    UINT8_REF = 104
    INT16_REF = 105
    INT8_REF = 106
    STRING_REF = 107
    COMPLEX64_REF = 108
    INT64_REF = 109
    BOOL_REF = 110
    QINT8_REF = 111
    QUINT8_REF = 112
    QINT32_REF = 113
    BFLOAT16_REF = 114
    QINT16_REF = 115
    QUINT16_REF = 116
    UINT16_REF = 117
    COMPLEX128_REF = 118
    HALF_REF = 119
    RESOURCE_REF = 120
    VARIANT_REF = 121
    UINT32_REF = 122
    UINT64_REF = 123

    def __repr__(self):
        return f"DType.{self.name}"

    @property
    def is_ref(self):
        return self.value > 100

    @property
    def base(self):
        return DType(self.value - 100) if self.is_ref else self

    @property
    def as_ref(self):
        return self if self.is_ref else DType(self.value + 100)

    @property
    def tf_name(self):
        """The name TensorFlow prints: `float32`, `int64`, `bool`, ..."""
        return _TF_NAMES.get(self.base, self.base.name.lower()) + ("_ref" if self.is_ref else "")

    @property
    def np(self):
        """The numpy dtype holding values of this type (raises for resource/variant)."""
        dt = _TO_NUMPY.get(self.base)
        if dt is None:
            raise TfgInputError(f"dtype {self.tf_name} has no numpy representation in tfg")
        return dt

    @property
    def is_floating(self):
        return self.base in (DType.FLOAT, DType.DOUBLE, DType.HALF, DType.BFLOAT16)

    @property
    def is_complex(self):
        return self.base in (DType.COMPLEX64, DType.COMPLEX128)

    @property
    def is_integer(self):
        return self.base in _INTEGERS

    @property
    def is_differentiable(self):
        """Whether gradients flow through values of this type (floats and complex only)."""
        return self.is_floating or self.is_complex

    @staticmethod
    def from_numpy(dtype):
        dtype = np.dtype(dtype)
        if dtype.kind in "SUO":
            return DType.STRING
        try:
            return _FROM_NUMPY[dtype]
        except KeyError:
            raise TfgInputError(f"numpy dtype {dtype} has no TensorFlow DataType") from None

    @staticmethod
    def parse(name):
        """`float32`, `float`, `DT_FLOAT`, `tf.float32`, 1 -> DType.FLOAT."""
        if isinstance(name, (int, np.integer)):
            return DType(int(name))
        key = str(name).strip()
        for prefix in ("tf.", "DT_"):
            if key.startswith(prefix):
                key = key[len(prefix):]
        key = key.lower()
        for dt, tf_name in _TF_NAMES.items():
            if key == tf_name:
                return dt
        for suffix, ref in (("_ref", True), ("", False)):
            if key.endswith(suffix):
                base = key[: len(key) - len(suffix)] if suffix else key
                if base.upper() in DType.__members__:
                    dt = DType[base.upper()]
                    return dt.as_ref if ref else dt

        raise TfgInputError(f"unknown dtype {name!r}")


_TF_NAMES = {
    DType.FLOAT: "float32", DType.DOUBLE: "float64", DType.HALF: "float16",
    DType.INT32: "int32", DType.INT64: "int64", DType.INT16: "int16", DType.INT8: "int8",
    DType.UINT8: "uint8", DType.UINT16: "uint16", DType.UINT32: "uint32", DType.UINT64: "uint64",
    DType.BOOL: "bool", DType.STRING: "string", DType.COMPLEX64: "complex64",
    DType.COMPLEX128: "complex128", DType.BFLOAT16: "bfloat16", DType.RESOURCE: "resource",
    DType.VARIANT: "variant",
}

_INTEGERS = {DType.INT8, DType.INT16, DType.INT32, DType.INT64, DType.UINT8, DType.UINT16,
             DType.UINT32, DType.UINT64, DType.QINT8, DType.QUINT8, DType.QINT16, DType.QUINT16,
             DType.QINT32}

_TO_NUMPY = {
    DType.FLOAT: np.dtype(np.float32), DType.DOUBLE: np.dtype(np.float64),
    DType.HALF: np.dtype(np.float16), DType.INT32: np.dtype(np.int32),
    DType.INT64: np.dtype(np.int64), DType.INT16: np.dtype(np.int16),
    DType.INT8: np.dtype(np.int8), DType.UINT8: np.dtype(np.uint8),
    DType.UINT16: np.dtype(np.uint16), DType.UINT32: np.dtype(np.uint32),
    DType.UINT64: np.dtype(np.uint64), DType.BOOL: np.dtype(np.bool_),
    DType.COMPLEX64: np.dtype(np.complex64), DType.COMPLEX128: np.dtype(np.complex128),
    DType.STRING: np.dtype(object),
    # Quantized types share the storage of their integer type.
    DType.QINT8: np.dtype(np.int8), DType.QUINT8: np.dtype(np.uint8),
    DType.QINT16: np.dtype(np.int16), DType.QUINT16: np.dtype(np.uint16),
    DType.QINT32: np.dtype(np.int32),
}
if _BFLOAT16 is not None:
    _TO_NUMPY[DType.BFLOAT16] = _BFLOAT16

_FROM_NUMPY = {}
for _dt, _np in _TO_NUMPY.items():
    if _dt.name.startswith("Q") or _dt == DType.STRING:
        continue
    _FROM_NUMPY.setdefault(_np, _dt)
