from tfg.schemas.proto import tensor_pb2 as _tensor_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class NamedTensor(_message.Message):
    __slots__ = ("name", "tensor")
    NAME_FIELD_NUMBER: _ClassVar[int]
    TENSOR_FIELD_NUMBER: _ClassVar[int]
    name: str
    tensor: _tensor_pb2.TensorProto
    def __init__(self, name: _Optional[str] = ..., tensor: _Optional[_Union[_tensor_pb2.TensorProto, _Mapping]] = ...) -> None: ...

class Checkpoint(_message.Message):
    __slots__ = ("tensors", "step", "has_step", "producer", "graph_variables", "graph_fingerprint")
    TENSORS_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    HAS_STEP_FIELD_NUMBER: _ClassVar[int]
    PRODUCER_FIELD_NUMBER: _ClassVar[int]
    GRAPH_VARIABLES_FIELD_NUMBER: _ClassVar[int]
    GRAPH_FINGERPRINT_FIELD_NUMBER: _ClassVar[int]
    tensors: _containers.RepeatedCompositeFieldContainer[NamedTensor]
    step: int
    has_step: bool
    producer: str
    graph_variables: str
    graph_fingerprint: str
    def __init__(self, tensors: _Optional[_Iterable[_Union[NamedTensor, _Mapping]]] = ..., step: _Optional[int] = ..., has_step: _Optional[bool] = ..., producer: _Optional[str] = ..., graph_variables: _Optional[str] = ..., graph_fingerprint: _Optional[str] = ...) -> None: ...
