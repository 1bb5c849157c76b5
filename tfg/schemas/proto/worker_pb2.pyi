from tfg.schemas.proto import graph_pb2 as _graph_pb2
from tfg.schemas.proto import tensor_pb2 as _tensor_pb2
from tfg.schemas.proto import checkpoint_pb2 as _checkpoint_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class DeviceAttributes(_message.Message):
    __slots__ = ("name", "device_type")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DEVICE_TYPE_FIELD_NUMBER: _ClassVar[int]
    name: str
    device_type: str
    def __init__(self, name: _Optional[str] = ..., device_type: _Optional[str] = ...) -> None: ...

class GetStatusRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetStatusResponse(_message.Message):
    __slots__ = ("devices", "job", "task", "incarnation", "sessions", "active_steps", "container_bytes", "container_items", "tensor_bytes_sent")
    DEVICES_FIELD_NUMBER: _ClassVar[int]
    JOB_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    INCARNATION_FIELD_NUMBER: _ClassVar[int]
    SESSIONS_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_STEPS_FIELD_NUMBER: _ClassVar[int]
    CONTAINER_BYTES_FIELD_NUMBER: _ClassVar[int]
    CONTAINER_ITEMS_FIELD_NUMBER: _ClassVar[int]
    TENSOR_BYTES_SENT_FIELD_NUMBER: _ClassVar[int]
    devices: _containers.RepeatedCompositeFieldContainer[DeviceAttributes]
    job: str
    task: int
    incarnation: int
    sessions: int
    active_steps: int
    container_bytes: int
    container_items: int
    tensor_bytes_sent: int
    def __init__(self, devices: _Optional[_Iterable[_Union[DeviceAttributes, _Mapping]]] = ..., job: _Optional[str] = ..., task: _Optional[int] = ..., incarnation: _Optional[int] = ..., sessions: _Optional[int] = ..., active_steps: _Optional[int] = ..., container_bytes: _Optional[int] = ..., container_items: _Optional[int] = ..., tensor_bytes_sent: _Optional[int] = ...) -> None: ...

class RegisterGraphRequest(_message.Message):
    __slots__ = ("session_handle", "graph_def", "feeds", "fetches")
    SESSION_HANDLE_FIELD_NUMBER: _ClassVar[int]
    GRAPH_DEF_FIELD_NUMBER: _ClassVar[int]
    FEEDS_FIELD_NUMBER: _ClassVar[int]
    FETCHES_FIELD_NUMBER: _ClassVar[int]
    session_handle: str
    graph_def: _graph_pb2.GraphDef
    feeds: _containers.RepeatedScalarFieldContainer[str]
    fetches: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, session_handle: _Optional[str] = ..., graph_def: _Optional[_Union[_graph_pb2.GraphDef, _Mapping]] = ..., feeds: _Optional[_Iterable[str]] = ..., fetches: _Optional[_Iterable[str]] = ...) -> None: ...

class RegisterGraphResponse(_message.Message):
    __slots__ = ("graph_handle",)
    GRAPH_HANDLE_FIELD_NUMBER: _ClassVar[int]
    graph_handle: str
    def __init__(self, graph_handle: _Optional[str] = ...) -> None: ...

class StepError(_message.Message):
    __slots__ = ("code", "message", "derived")
    class Code(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        OK: _ClassVar[StepError.Code]
        RUNTIME: _ClassVar[StepError.Code]
        INPUT: _ClassVar[StepError.Code]
    OK: StepError.Code
    RUNTIME: StepError.Code
    INPUT: StepError.Code
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    DERIVED_FIELD_NUMBER: _ClassVar[int]
    code: StepError.Code
    message: str
    derived: bool
    def __init__(self, code: _Optional[_Union[StepError.Code, str]] = ..., message: _Optional[str] = ..., derived: _Optional[bool] = ...) -> None: ...

class RunGraphRequest(_message.Message):
    __slots__ = ("session_handle", "graph_handle", "step_id", "send", "recv_key", "trace", "cleanup_step_ids", "compress_transfers")
    SESSION_HANDLE_FIELD_NUMBER: _ClassVar[int]
    GRAPH_HANDLE_FIELD_NUMBER: _ClassVar[int]
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    SEND_FIELD_NUMBER: _ClassVar[int]
    RECV_KEY_FIELD_NUMBER: _ClassVar[int]
    TRACE_FIELD_NUMBER: _ClassVar[int]
    CLEANUP_STEP_IDS_FIELD_NUMBER: _ClassVar[int]
    COMPRESS_TRANSFERS_FIELD_NUMBER: _ClassVar[int]
    session_handle: str
    graph_handle: str
    step_id: int
    send: _containers.RepeatedCompositeFieldContainer[_checkpoint_pb2.NamedTensor]
    recv_key: _containers.RepeatedScalarFieldContainer[str]
    trace: bool
    cleanup_step_ids: _containers.RepeatedScalarFieldContainer[int]
    compress_transfers: str
    def __init__(self, session_handle: _Optional[str] = ..., graph_handle: _Optional[str] = ..., step_id: _Optional[int] = ..., send: _Optional[_Iterable[_Union[_checkpoint_pb2.NamedTensor, _Mapping]]] = ..., recv_key: _Optional[_Iterable[str]] = ..., trace: _Optional[bool] = ..., cleanup_step_ids: _Optional[_Iterable[int]] = ..., compress_transfers: _Optional[str] = ...) -> None: ...

class TraceEvent(_message.Message):
    __slots__ = ("name", "op", "device", "start_ns", "dur_ns", "thread")
    NAME_FIELD_NUMBER: _ClassVar[int]
    OP_FIELD_NUMBER: _ClassVar[int]
    DEVICE_FIELD_NUMBER: _ClassVar[int]
    START_NS_FIELD_NUMBER: _ClassVar[int]
    DUR_NS_FIELD_NUMBER: _ClassVar[int]
    THREAD_FIELD_NUMBER: _ClassVar[int]
    name: str
    op: str
    device: str
    start_ns: int
    dur_ns: int
    thread: int
    def __init__(self, name: _Optional[str] = ..., op: _Optional[str] = ..., device: _Optional[str] = ..., start_ns: _Optional[int] = ..., dur_ns: _Optional[int] = ..., thread: _Optional[int] = ...) -> None: ...

class RunGraphResponse(_message.Message):
    __slots__ = ("recv", "error", "trace", "peak_bytes")
    RECV_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    TRACE_FIELD_NUMBER: _ClassVar[int]
    PEAK_BYTES_FIELD_NUMBER: _ClassVar[int]
    recv: _containers.RepeatedCompositeFieldContainer[_checkpoint_pb2.NamedTensor]
    error: StepError
    trace: _containers.RepeatedCompositeFieldContainer[TraceEvent]
    peak_bytes: int
    def __init__(self, recv: _Optional[_Iterable[_Union[_checkpoint_pb2.NamedTensor, _Mapping]]] = ..., error: _Optional[_Union[StepError, _Mapping]] = ..., trace: _Optional[_Iterable[_Union[TraceEvent, _Mapping]]] = ..., peak_bytes: _Optional[int] = ...) -> None: ...

class RecvTensorRequest(_message.Message):
    __slots__ = ("step_id", "rendezvous_key", "compress")
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    RENDEZVOUS_KEY_FIELD_NUMBER: _ClassVar[int]
    COMPRESS_FIELD_NUMBER: _ClassVar[int]
    step_id: int
    rendezvous_key: str
    compress: str
    def __init__(self, step_id: _Optional[int] = ..., rendezvous_key: _Optional[str] = ..., compress: _Optional[str] = ...) -> None: ...

class RecvTensorResponse(_message.Message):
    __slots__ = ("tensor", "is_dead", "total_bytes", "truncated")
    TENSOR_FIELD_NUMBER: _ClassVar[int]
    IS_DEAD_FIELD_NUMBER: _ClassVar[int]
    TOTAL_BYTES_FIELD_NUMBER: _ClassVar[int]
    TRUNCATED_FIELD_NUMBER: _ClassVar[int]
    tensor: _tensor_pb2.TensorProto
    is_dead: bool
    total_bytes: int
    truncated: bool
    def __init__(self, tensor: _Optional[_Union[_tensor_pb2.TensorProto, _Mapping]] = ..., is_dead: _Optional[bool] = ..., total_bytes: _Optional[int] = ..., truncated: _Optional[bool] = ...) -> None: ...

class CleanupGraphRequest(_message.Message):
    __slots__ = ("step_id",)
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    step_id: int
    def __init__(self, step_id: _Optional[int] = ...) -> None: ...

class CleanupGraphResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class AbortStepRequest(_message.Message):
    __slots__ = ("step_id", "reason")
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    step_id: int
    reason: str
    def __init__(self, step_id: _Optional[int] = ..., reason: _Optional[str] = ...) -> None: ...

class AbortStepResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class CloseSessionRequest(_message.Message):
    __slots__ = ("session_handle",)
    SESSION_HANDLE_FIELD_NUMBER: _ClassVar[int]
    session_handle: str
    def __init__(self, session_handle: _Optional[str] = ...) -> None: ...

class CloseSessionResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class CleanupAllRequest(_message.Message):
    __slots__ = ("container",)
    CONTAINER_FIELD_NUMBER: _ClassVar[int]
    container: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, container: _Optional[_Iterable[str]] = ...) -> None: ...

class CleanupAllResponse(_message.Message):
    __slots__ = ("removed",)
    REMOVED_FIELD_NUMBER: _ClassVar[int]
    removed: int
    def __init__(self, removed: _Optional[int] = ...) -> None: ...

class Variable(_message.Message):
    __slots__ = ("container", "name", "tensor")
    CONTAINER_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    TENSOR_FIELD_NUMBER: _ClassVar[int]
    container: str
    name: str
    tensor: _tensor_pb2.TensorProto
    def __init__(self, container: _Optional[str] = ..., name: _Optional[str] = ..., tensor: _Optional[_Union[_tensor_pb2.TensorProto, _Mapping]] = ...) -> None: ...

class GetVariablesRequest(_message.Message):
    __slots__ = ("session_handle",)
    SESSION_HANDLE_FIELD_NUMBER: _ClassVar[int]
    session_handle: str
    def __init__(self, session_handle: _Optional[str] = ...) -> None: ...

class GetVariablesResponse(_message.Message):
    __slots__ = ("variables",)
    VARIABLES_FIELD_NUMBER: _ClassVar[int]
    variables: _containers.RepeatedCompositeFieldContainer[Variable]
    def __init__(self, variables: _Optional[_Iterable[_Union[Variable, _Mapping]]] = ...) -> None: ...

class SetVariablesRequest(_message.Message):
    __slots__ = ("session_handle", "variables")
    SESSION_HANDLE_FIELD_NUMBER: _ClassVar[int]
    VARIABLES_FIELD_NUMBER: _ClassVar[int]
    session_handle: str
    variables: _containers.RepeatedCompositeFieldContainer[Variable]
    def __init__(self, session_handle: _Optional[str] = ..., variables: _Optional[_Iterable[_Union[Variable, _Mapping]]] = ...) -> None: ...

class SetVariablesResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class HealthCheckRequest(_message.Message):
    __slots__ = ("service",)
    SERVICE_FIELD_NUMBER: _ClassVar[int]
    service: str
    def __init__(self, service: _Optional[str] = ...) -> None: ...

class HealthCheckResponse(_message.Message):
    __slots__ = ("status",)
    class ServingStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        UNKNOWN: _ClassVar[HealthCheckResponse.ServingStatus]
        SERVING: _ClassVar[HealthCheckResponse.ServingStatus]
        NOT_SERVING: _ClassVar[HealthCheckResponse.ServingStatus]
        SERVICE_UNKNOWN: _ClassVar[HealthCheckResponse.ServingStatus]
    UNKNOWN: HealthCheckResponse.ServingStatus
    SERVING: HealthCheckResponse.ServingStatus
    NOT_SERVING: HealthCheckResponse.ServingStatus
    SERVICE_UNKNOWN: HealthCheckResponse.ServingStatus
    STATUS_FIELD_NUMBER: _ClassVar[int]
    status: HealthCheckResponse.ServingStatus
    def __init__(self, status: _Optional[_Union[HealthCheckResponse.ServingStatus, str]] = ...) -> None: ...
