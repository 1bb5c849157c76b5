"""AttrValue <-> Python values.

    >>> decode(encode(3)), decode(encode([DType.FLOAT])), decode(encode(b"SAME"))
    (3, [DType.FLOAT], b'SAME')

Decoded forms: s -> bytes, i -> int, f -> float, b -> bool, type -> DType, shape -> tuple|None,
tensor -> numpy array, func -> NameAttrList (proto), list -> Python list of those.
Encoding a Python value picks the AttrValue field from its type; `kind` forces one
("s", "i", "f", "b", "type", "shape", "tensor", "func", "list(type)", ...).
"""
import numpy as np

from tfg.errors import GraphFormatError
from tfg.schemas import tensors
from tfg.schemas.dtypes import DType
from tfg.schemas.proto import attr_value_pb2


class Shape(tuple):
    """A tuple marking a value to be encoded as a TensorShapeProto (None = unknown dim)."""


def decode(av):
    which = av.WhichOneof("value")
    if which is None:
        return []  # an empty list: TensorFlow writes `list {}` as an empty AttrValue
    if which == "s":
        return av.s
    if which == "i":
        return av.i
    if which == "f":
        return av.f
    if which == "b":
        return av.b
    if which == "type":
        return _dtype(av.type)
    if which == "shape":
        return tensors.shape_from_proto(av.shape)
    if which == "tensor":
        return tensors.to_numpy(av.tensor)
    if which == "func":
        return av.func
    if which == "placeholder":
        return av.placeholder
    lv = av.list
    for field in ("s", "i", "f", "b"):
        if len(getattr(lv, field)):
            return list(getattr(lv, field))
    if len(lv.type):
        return [_dtype(t) for t in lv.type]
    if len(lv.shape):
        return [tensors.shape_from_proto(s) for s in lv.shape]
    if len(lv.tensor):
        return [tensors.to_numpy(t) for t in lv.tensor]
    if len(lv.func):
        return list(lv.func)
    return []


_DTYPES = {d.value: d for d in DType}  # (a dict lookup: DType(n) costs ~1 us, in every attr)


def _dtype(number):
    d = _DTYPES.get(number)
    if d is None:  # a corrupt file: an input error naming the value, not a crash
        raise GraphFormatError(f"attr holds {number}, which is not a valid DType")
    return d


def kind_of(av):
    """The AttrValue field in use: 's', 'i', ..., or 'list(s)', 'list(type)', ..., 'list'."""
    which = av.WhichOneof("value")
    if which != "list":
        return which
    for field in ("s", "i", "f", "b", "type", "shape", "tensor", "func"):
        if len(getattr(av.list, field)):
            return f"list({field})"
    return "list"


def encode(value, kind=None):
    """Build an AttrValue from a Python value (see module docstring)."""
    av = attr_value_pb2.AttrValue()
    if isinstance(value, attr_value_pb2.AttrValue):
        av.CopyFrom(value)
        return av
    if kind is not None and kind.startswith("list"):
        field = kind[5:-1] if "(" in kind else None
        av.list.SetInParent()
        for v in value:
            _append_list(av.list, v, field)
        return av
    if kind == "shape" or isinstance(value, Shape):
        tensors.shape_to_proto(None if value is None else tuple(value), av.shape)
    elif kind == "tensor" or isinstance(value, np.ndarray):
        tensors.from_numpy(value, proto=av.tensor)
    elif kind == "type" or isinstance(value, DType):
        av.type = int(DType.parse(value) if not isinstance(value, DType) else value)
    elif kind == "b" or isinstance(value, (bool, np.bool_)):
        av.b = bool(value)
    elif kind == "i" or isinstance(value, (int, np.integer)):
        av.i = int(value)
    elif kind == "f" or isinstance(value, (float, np.floating)):
        av.f = float(value)
    elif kind == "s" or isinstance(value, (str, bytes)):
        av.s = value.encode() if isinstance(value, str) else value
    elif kind == "func" or isinstance(value, attr_value_pb2.NameAttrList):
        av.func.CopyFrom(value)
    elif isinstance(value, (list, tuple)):
        av.list.SetInParent()
        for v in value:
            _append_list(av.list, v, None)
    else:
        raise TypeError(f"cannot encode {type(value).__name__} as an attr value")
    return av


def _append_list(lv, v, field):
    if field == "shape" or isinstance(v, Shape):
        tensors.shape_to_proto(None if v is None else tuple(v), lv.shape.add())
    elif field == "tensor" or isinstance(v, np.ndarray):
        tensors.from_numpy(v, proto=lv.tensor.add())
    elif field == "type" or isinstance(v, DType):
        lv.type.append(int(DType.parse(v) if not isinstance(v, DType) else v))
    elif field == "b" or isinstance(v, (bool, np.bool_)):
        lv.b.append(bool(v))
    elif field == "i" or isinstance(v, (int, np.integer)):
        lv.i.append(int(v))
    elif field == "f" or isinstance(v, (float, np.floating)):
        lv.f.append(float(v))
    elif field == "s" or isinstance(v, (str, bytes)):
        lv.s.append(v.encode() if isinstance(v, str) else v)
    elif field == "func" or isinstance(v, attr_value_pb2.NameAttrList):
        lv.func.add().CopyFrom(v)
    else:
        raise TypeError(f"cannot encode {type(v).__name__} in an attr list")
