"""A TensorList as a TensorProto, the way TensorFlow encodes one, so that lists travel between
tasks (RecvTensor, RunGraph feeds and fetches) like any tensor.

    >>> proto = to_proto(TensorList(DType.FLOAT, (None, 8), [h0, None, h2]))
    >>> proto.dtype == DType.VARIANT, proto.variant_val[0].type_name
    (True, 'tensorflow::TensorList')
    >>> from_proto(proto)                  # an equal list: items, dtype, shape, max length
    <TensorList float [?,8] x 3 (2 set)>

The format is TensorFlow's (TensorList::Encode / Decode in tensor_list.cc): a scalar tensor of
dtype DT_VARIANT whose one `variant_val` has type_name "tensorflow::TensorList", the set items
in order as `tensors`, and `metadata` = varint64(number of unset items), varint64(index) of
each unset item, varint64(element_dtype), varint64(max_num_elements, -1 as 2**64-1), then the
element shape's serialized TensorShapeProto. An item that is itself a list (a list of lists)
is a nested variant tensor. Bytes from the wire are checked (truncated varints, indices out of
order, item dtypes, nesting depth) and refused with a TfgRuntimeError, never trusted.
"""
import numpy as np

from tfg.errors import TfgRuntimeError
from tfg.kernels import optional_codec
from tfg.kernels.list_ops import TensorList
from tfg.kernels.optional_ops import OptionalValue
from tfg.schemas import tensors as tcodec
from tfg.schemas.dtypes import DType
from tfg.schemas.proto import tensor_pb2, tensor_shape_pb2

TYPE_NAME = "tensorflow::TensorList"
MAX_DEPTH = 32  # lists of lists nested deeper than this are a malformed (or hostile) message
_U64 = (1 << 64) - 1


def is_list(value):
    """Whether `value` is a TensorList (or a 0-d object array holding one: a nested item)."""
    return isinstance(_unwrap(value), TensorList)


def is_variant(value):
    """Whether `value` is a variant this module sends: a TensorList or an Optional."""
    return isinstance(_unwrap(value), (TensorList, OptionalValue))


def variant_to_proto(value, proto=None, _depth=0):
    """A TensorList or an Optional -> a scalar DT_VARIANT TensorProto."""
    value = _unwrap(value)
    if isinstance(value, TensorList):
        return to_proto(value, proto, _depth)
    if _depth > MAX_DEPTH:
        raise TfgRuntimeError(f"cannot send variants nested deeper than {MAX_DEPTH}")
    proto = proto if proto is not None else tensor_pb2.TensorProto()
    proto.dtype = int(DType.VARIANT)
    tcodec.shape_to_proto((), proto.tensor_shape)
    optional_codec.encode(value, proto.variant_val.add(),
                          lambda v, t: _item_to_proto(v, t, _depth + 1))
    return proto


def variant_from_proto(proto, _depth=0):
    """A scalar DT_VARIANT TensorProto -> the TensorList or Optional it holds."""
    if _depth > MAX_DEPTH:
        raise _corrupt(f"variants nested deeper than {MAX_DEPTH}")
    if tcodec.shape_from_proto(proto.tensor_shape) != ():
        raise TfgRuntimeError("cannot receive a variant tensor that is not a scalar")
    var = _variant_value(proto)
    if var.type_name == optional_codec.TYPE_NAME:
        return optional_codec.decode(var, lambda t: _item_from_proto(t, _depth + 1))
    return from_proto(proto, _depth)


def _item_to_proto(item, proto, depth):
    if is_variant(item):
        variant_to_proto(item, proto, depth)
    else:
        tcodec.from_numpy(_host(item), proto=proto)


def _item_from_proto(t, depth):
    if t.dtype == DType.VARIANT:
        return variant_from_proto(t, depth)
    item = tcodec.to_numpy(t)
    if isinstance(item, np.ndarray) and not item.flags.writeable:
        item = item.copy()
    return item


def to_proto(lst, proto=None, _depth=0):
    """A TensorList -> TensorProto of dtype DT_VARIANT (see the module docstring)."""
    lst = _unwrap(lst)
    if _depth > MAX_DEPTH:
        raise TfgRuntimeError(f"cannot send a TensorList nested deeper than {MAX_DEPTH}")
    proto = proto if proto is not None else tensor_pb2.TensorProto()
    proto.dtype = int(DType.VARIANT)
    tcodec.shape_to_proto((), proto.tensor_shape)
    var = proto.variant_val.add(type_name=TYPE_NAME)
    unset = []
    for i, item in enumerate(lst.items):
        if item is None:
            unset.append(i)
        else:
            _item_to_proto(item, var.tensors.add(), _depth + 1)
    meta = bytearray()
    _put_varint(meta, len(unset))
    for i in unset:
        _put_varint(meta, i)
    _put_varint(meta, int(lst.element_dtype))
    _put_varint(meta, lst.max_num_elements & _U64)
    meta += tcodec.shape_to_proto(lst.element_shape).SerializeToString()
    var.metadata = bytes(meta)
    return proto


def from_proto(proto, _depth=0):
    """A TensorProto of dtype DT_VARIANT holding one TensorList -> the TensorList."""
    if _depth > MAX_DEPTH:
        raise _corrupt(f"lists nested deeper than {MAX_DEPTH}")
    if tcodec.shape_from_proto(proto.tensor_shape) != ():
        raise TfgRuntimeError("cannot receive a variant tensor that is not a scalar")
    var = _variant_value(proto)
    if var.type_name != TYPE_NAME:
        raise TfgRuntimeError(f"cannot receive a variant of type {var.type_name!r} (tfg "
                              f"knows {TYPE_NAME!r} only)")
    meta, pos = var.metadata, 0
    n_unset, pos = _get_varint(meta, pos)
    total = n_unset + len(var.tensors)
    if n_unset > len(meta):  # each index takes at least one byte: a lying count
        raise _corrupt(f"{n_unset} unset items in {len(meta)} bytes of metadata")
    unset = []
    for _ in range(n_unset):
        i, pos = _get_varint(meta, pos)
        if i >= total or (unset and i <= unset[-1]):
            raise _corrupt(f"unset item index {i} out of order or range ({total} items)")
        unset.append(i)
    dtype_num, pos = _get_varint(meta, pos)
    max_num, pos = _get_varint(meta, pos)
    try:
        dtype = DType(dtype_num)
        shape_proto = tensor_shape_pb2.TensorShapeProto.FromString(meta[pos:])
    except Exception as e:  # noqa: BLE001 - a corrupt message, whatever protobuf says
        raise _corrupt(f"bad element dtype or shape ({e})") from None
    max_num &= 0xFFFFFFFF  # TensorFlow reads it back as a 32-bit int (-1: no limit)
    max_num = max_num - (1 << 32) if max_num >= 1 << 31 else max_num
    items, given, gaps = [], iter(var.tensors), set(unset)
    for i in range(total):
        if i in gaps:
            items.append(None)
            continue
        t = next(given)
        item = _item_from_proto(t, _depth + 1)
        if DType(t.dtype) != dtype:
            raise _corrupt(f"item {i} is {DType(t.dtype).tf_name}, the list holds "
                           f"{dtype.tf_name}")
        items.append(item)
    return TensorList(dtype, tcodec.shape_from_proto(shape_proto), items, max_num)


def _variant_value(proto):
    """The one VariantTensorDataProto of a scalar variant TensorProto: in variant_val (how tfg
    writes it), or in tensor_content as TensorFlow's serialize_tensor and its wire write it
    (the element's byte length as a varint, then its bytes)."""
    if proto.tensor_content:
        size, pos = _get_varint(proto.tensor_content, 0)
        if size != len(proto.tensor_content) - pos:
            raise _corrupt(f"tensor_content declares {size} bytes, holds "
                           f"{len(proto.tensor_content) - pos}")
        try:
            return tensor_pb2.VariantTensorDataProto.FromString(proto.tensor_content[pos:])
        except Exception as e:  # noqa: BLE001 - a corrupt message, whatever protobuf says
            raise _corrupt(f"unreadable variant ({e})") from None
    if len(proto.variant_val) != 1:
        raise _corrupt(f"one variant value expected, got {len(proto.variant_val)}")
    return proto.variant_val[0]


def _unwrap(value):
    if isinstance(value, np.ndarray) and value.dtype == object and value.size == 1:
        return value.reshape(-1)[0]
    return value


def _host(item):
    """An item as a numpy array (a GPU array is copied to the host)."""
    get = getattr(item, "get", None)
    return np.asarray(get() if callable(get) and not isinstance(item, np.ndarray) else item)


def _put_varint(out, n):
    while True:
        byte = n & 0x7F
        n >>= 7
        if n:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return


def _get_varint(data, pos):
    n = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise _corrupt("a truncated varint in the metadata")
        byte = data[pos]
        pos += 1
        n |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return n & _U64, pos
        shift += 7


def _corrupt(why):
    return TfgRuntimeError(f"received a corrupt TensorList: {why}")
