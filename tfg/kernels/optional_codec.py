"""An Optional (tfg/kernels/optional_ops.py) as the VariantTensorDataProto TensorFlow writes
for one (OptionalVariant::Encode), so optionals travel between tasks like TensorLists do
(tfg/kernels/list_codec.py dispatches on the type name): type_name
"tensorflow::data::Optional", metadata one byte (1: has a value, 0: none) and the components
as `tensors`. Bytes from the wire are checked, never trusted.

    >>> var = tensor_pb2.VariantTensorDataProto()
    >>> encode(OptionalValue(None), var, encode_item=None); var.metadata
    b'\\x00'
"""
from tfg.errors import TfgRuntimeError
from tfg.kernels.optional_ops import OptionalValue
from tfg.schemas.proto import tensor_pb2  # noqa: F401  (doctest)

TYPE_NAME = "tensorflow::data::Optional"


def encode(opt, var, encode_item):
    """Fill VariantTensorDataProto `var`; encode_item(value, tensor_proto) writes one
    component (a tensor, or a nested variant)."""
    var.type_name = TYPE_NAME
    var.metadata = b"\x01" if opt.values is not None else b"\x00"
    for v in opt.values or ():
        encode_item(v, var.tensors.add())


def decode(var, decode_item):
    """VariantTensorDataProto -> OptionalValue; decode_item(tensor_proto) reads a component."""
    if var.metadata not in (b"\x00", b"\x01"):
        raise TfgRuntimeError(f"received a corrupt Optional: metadata {var.metadata[:8]!r} "
                              f"(one byte, 0 or 1, expected)")
    if var.metadata == b"\x00":
        if var.tensors:
            raise TfgRuntimeError("received a corrupt Optional: no value, but components")
        return OptionalValue(None)
    if not var.tensors:
        raise TfgRuntimeError("received a corrupt Optional: a value of no components")
    return OptionalValue(tuple(decode_item(t) for t in var.tensors))
