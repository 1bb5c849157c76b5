from tfg.schemas.proto import graph_pb2 as _graph_pb2
from tfg.schemas.proto import tensor_pb2 as _tensor_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class JobDef(_message.Message):
    __slots__ = ("name", "tasks")
    class TasksEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: int
        value: str
        def __init__(self, key: _Optional[int] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    TASKS_FIELD_NUMBER: _ClassVar[int]
    name: str
    tasks: _containers.ScalarMap[int, str]
    def __init__(self, name: _Optional[str] = ..., tasks: _Optional[_Mapping[int, str]] = ...) -> None: ...

class ClusterDef(_message.Message):
    __slots__ = ("job",)
    JOB_FIELD_NUMBER: _ClassVar[int]
    job: _containers.RepeatedCompositeFieldContainer[JobDef]
    def __init__(self, job: _Optional[_Iterable[_Union[JobDef, _Mapping]]] = ...) -> None: ...

class ServerDef(_message.Message):
    __slots__ = ("cluster", "job_name", "task_index", "protocol", "port", "replica")
    CLUSTER_FIELD_NUMBER: _ClassVar[int]
    JOB_NAME_FIELD_NUMBER: _ClassVar[int]
    TASK_INDEX_FIELD_NUMBER: _ClassVar[int]
    PROTOCOL_FIELD_NUMBER: _ClassVar[int]
    PORT_FIELD_NUMBER: _ClassVar[int]
    REPLICA_FIELD_NUMBER: _ClassVar[int]
    cluster: ClusterDef
    job_name: str
    task_index: int
    protocol: str
    port: int
    replica: int
    def __init__(self, cluster: _Optional[_Union[ClusterDef, _Mapping]] = ..., job_name: _Optional[str] = ..., task_index: _Optional[int] = ..., protocol: _Optional[str] = ..., port: _Optional[int] = ..., replica: _Optional[int] = ...) -> None: ...

class DeviceAttributes(_message.Message):
    __slots__ = ("name", "device_type", "memory_limit", "incarnation", "physical_device_desc")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DEVICE_TYPE_FIELD_NUMBER: _ClassVar[int]
    MEMORY_LIMIT_FIELD_NUMBER: _ClassVar[int]
    INCARNATION_FIELD_NUMBER: _ClassVar[int]
    PHYSICAL_DEVICE_DESC_FIELD_NUMBER: _ClassVar[int]
    name: str
    device_type: str
    memory_limit: int
    incarnation: int
    physical_device_desc: str
    def __init__(self, name: _Optional[str] = ..., device_type: _Optional[str] = ..., memory_limit: _Optional[int] = ..., incarnation: _Optional[int] = ..., physical_device_desc: _Optional[str] = ...) -> None: ...

class GetStatusRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetStatusResponse(_message.Message):
    __slots__ = ("device_attributes",)
    DEVICE_ATTRIBUTES_FIELD_NUMBER: _ClassVar[int]
    device_attributes: _containers.RepeatedCompositeFieldContainer[DeviceAttributes]
    def __init__(self, device_attributes: _Optional[_Iterable[_Union[DeviceAttributes, _Mapping]]] = ...) -> None: ...

class CreateWorkerSessionRequest(_message.Message):
    __slots__ = ("session_handle", "server_def", "isolate_session_state", "cluster_device_attributes")
    SESSION_HANDLE_FIELD_NUMBER: _ClassVar[int]
    SERVER_DEF_FIELD_NUMBER: _ClassVar[int]
    ISOLATE_SESSION_STATE_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_DEVICE_ATTRIBUTES_FIELD_NUMBER: _ClassVar[int]
    session_handle: str
    server_def: ServerDef
    isolate_session_state: bool
    cluster_device_attributes: _containers.RepeatedCompositeFieldContainer[DeviceAttributes]
    def __init__(self, session_handle: _Optional[str] = ..., server_def: _Optional[_Union[ServerDef, _Mapping]] = ..., isolate_session_state: _Optional[bool] = ..., cluster_device_attributes: _Optional[_Iterable[_Union[DeviceAttributes, _Mapping]]] = ...) -> None: ...

class CreateWorkerSessionResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class DeleteWorkerSessionRequest(_message.Message):
    __slots__ = ("session_handle",)
    SESSION_HANDLE_FIELD_NUMBER: _ClassVar[int]
    session_handle: str
    def __init__(self, session_handle: _Optional[str] = ...) -> None: ...

class DeleteWorkerSessionResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class RegisterGraphRequest(_message.Message):
    __slots__ = ("session_handle", "graph_def", "create_worker_session_called", "collective_graph_key")
    SESSION_HANDLE_FIELD_NUMBER: _ClassVar[int]
    GRAPH_DEF_FIELD_NUMBER: _ClassVar[int]
    CREATE_WORKER_SESSION_CALLED_FIELD_NUMBER: _ClassVar[int]
    COLLECTIVE_GRAPH_KEY_FIELD_NUMBER: _ClassVar[int]
    session_handle: str
    graph_def: _graph_pb2.GraphDef
    create_worker_session_called: bool
    collective_graph_key: int
    def __init__(self, session_handle: _Optional[str] = ..., graph_def: _Optional[_Union[_graph_pb2.GraphDef, _Mapping]] = ..., create_worker_session_called: _Optional[bool] = ..., collective_graph_key: _Optional[int] = ...) -> None: ...

class RegisterGraphResponse(_message.Message):
    __slots__ = ("graph_handle",)
    GRAPH_HANDLE_FIELD_NUMBER: _ClassVar[int]
    graph_handle: str
    def __init__(self, graph_handle: _Optional[str] = ...) -> None: ...

class DeregisterGraphRequest(_message.Message):
    __slots__ = ("graph_handle", "session_handle", "create_worker_session_called")
    GRAPH_HANDLE_FIELD_NUMBER: _ClassVar[int]
    SESSION_HANDLE_FIELD_NUMBER: _ClassVar[int]
    CREATE_WORKER_SESSION_CALLED_FIELD_NUMBER: _ClassVar[int]
    graph_handle: str
    session_handle: str
    create_worker_session_called: bool
    def __init__(self, graph_handle: _Optional[str] = ..., session_handle: _Optional[str] = ..., create_worker_session_called: _Optional[bool] = ...) -> None: ...

class DeregisterGraphResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class CleanupAllRequest(_message.Message):
    __slots__ = ("container",)
    CONTAINER_FIELD_NUMBER: _ClassVar[int]
    container: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, container: _Optional[_Iterable[str]] = ...) -> None: ...

class CleanupAllResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class NamedTensorProto(_message.Message):
    __slots__ = ("name", "tensor")
    NAME_FIELD_NUMBER: _ClassVar[int]
    TENSOR_FIELD_NUMBER: _ClassVar[int]
    name: str
    tensor: _tensor_pb2.TensorProto
    def __init__(self, name: _Optional[str] = ..., tensor: _Optional[_Union[_tensor_pb2.TensorProto, _Mapping]] = ...) -> None: ...

class ExecutorOpts(_message.Message):
    __slots__ = ("record_costs", "record_timeline", "record_partition_graphs")
    RECORD_COSTS_FIELD_NUMBER: _ClassVar[int]
    RECORD_TIMELINE_FIELD_NUMBER: _ClassVar[int]
    RECORD_PARTITION_GRAPHS_FIELD_NUMBER: _ClassVar[int]
    record_costs: bool
    record_timeline: bool
    record_partition_graphs: bool
    def __init__(self, record_costs: _Optional[bool] = ..., record_timeline: _Optional[bool] = ..., record_partition_graphs: _Optional[bool] = ...) -> None: ...

class RunGraphRequest(_message.Message):
    __slots__ = ("graph_handle", "step_id", "send", "recv_key", "exec_opts", "is_partial", "is_last_partial_run", "session_handle", "store_errors_in_response_body", "create_worker_session_called", "request_id")
    GRAPH_HANDLE_FIELD_NUMBER: _ClassVar[int]
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    SEND_FIELD_NUMBER: _ClassVar[int]
    RECV_KEY_FIELD_NUMBER: _ClassVar[int]
    EXEC_OPTS_FIELD_NUMBER: _ClassVar[int]
    IS_PARTIAL_FIELD_NUMBER: _ClassVar[int]
    IS_LAST_PARTIAL_RUN_FIELD_NUMBER: _ClassVar[int]
    SESSION_HANDLE_FIELD_NUMBER: _ClassVar[int]
    STORE_ERRORS_IN_RESPONSE_BODY_FIELD_NUMBER: _ClassVar[int]
    CREATE_WORKER_SESSION_CALLED_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    graph_handle: str
    step_id: int
    send: _containers.RepeatedCompositeFieldContainer[NamedTensorProto]
    recv_key: _containers.RepeatedScalarFieldContainer[str]
    exec_opts: ExecutorOpts
    is_partial: bool
    is_last_partial_run: bool
    session_handle: str
    store_errors_in_response_body: bool
    create_worker_session_called: bool
    request_id: int
    def __init__(self, graph_handle: _Optional[str] = ..., step_id: _Optional[int] = ..., send: _Optional[_Iterable[_Union[NamedTensorProto, _Mapping]]] = ..., recv_key: _Optional[_Iterable[str]] = ..., exec_opts: _Optional[_Union[ExecutorOpts, _Mapping]] = ..., is_partial: _Optional[bool] = ..., is_last_partial_run: _Optional[bool] = ..., session_handle: _Optional[str] = ..., store_errors_in_response_body: _Optional[bool] = ..., create_worker_session_called: _Optional[bool] = ..., request_id: _Optional[int] = ...) -> None: ...

class RunGraphResponse(_message.Message):
    __slots__ = ("recv", "status_code", "status_error_message")
    RECV_FIELD_NUMBER: _ClassVar[int]
    STATUS_CODE_FIELD_NUMBER: _ClassVar[int]
    STATUS_ERROR_MESSAGE_FIELD_NUMBER: _ClassVar[int]
    recv: _containers.RepeatedCompositeFieldContainer[NamedTensorProto]
    status_code: int
    status_error_message: str
    def __init__(self, recv: _Optional[_Iterable[_Union[NamedTensorProto, _Mapping]]] = ..., status_code: _Optional[int] = ..., status_error_message: _Optional[str] = ...) -> None: ...

class CleanupGraphRequest(_message.Message):
    __slots__ = ("step_id",)
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    step_id: int
    def __init__(self, step_id: _Optional[int] = ...) -> None: ...

class CleanupGraphResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class RecvTensorRequest(_message.Message):
    __slots__ = ("step_id", "rendezvous_key", "dma_ok", "request_id")
    STEP_ID_FIELD_NUMBER: _ClassVar[int]
    RENDEZVOUS_KEY_FIELD_NUMBER: _ClassVar[int]
    DMA_OK_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    step_id: int
    rendezvous_key: str
    dma_ok: bool
    request_id: int
    def __init__(self, step_id: _Optional[int] = ..., rendezvous_key: _Optional[str] = ..., dma_ok: _Optional[bool] = ..., request_id: _Optional[int] = ...) -> None: ...

class RecvTensorResponse(_message.Message):
    __slots__ = ("tensor", "is_dead", "send_start_micros", "require_ack")
    TENSOR_FIELD_NUMBER: _ClassVar[int]
    IS_DEAD_FIELD_NUMBER: _ClassVar[int]
    SEND_START_MICROS_FIELD_NUMBER: _ClassVar[int]
    REQUIRE_ACK_FIELD_NUMBER: _ClassVar[int]
    tensor: _tensor_pb2.TensorProto
    is_dead: bool
    send_start_micros: int
    require_ack: bool
    def __init__(self, tensor: _Optional[_Union[_tensor_pb2.TensorProto, _Mapping]] = ..., is_dead: _Optional[bool] = ..., send_start_micros: _Optional[int] = ..., require_ack: _Optional[bool] = ...) -> None: ...

class MarkRecvFinishedRequest(_message.Message):
    __slots__ = ("request_id",)
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    request_id: int
    def __init__(self, request_id: _Optional[int] = ...) -> None: ...

class MarkRecvFinishedResponse(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...
