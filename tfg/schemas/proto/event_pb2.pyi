from tfg.schemas.proto import graph_pb2 as _graph_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Event(_message.Message):
    __slots__ = ("wall_time", "step", "file_version", "graph_def", "tagged_run_metadata", "meta_graph_def")
    WALL_TIME_FIELD_NUMBER: _ClassVar[int]
    STEP_FIELD_NUMBER: _ClassVar[int]
    FILE_VERSION_FIELD_NUMBER: _ClassVar[int]
    GRAPH_DEF_FIELD_NUMBER: _ClassVar[int]
    TAGGED_RUN_METADATA_FIELD_NUMBER: _ClassVar[int]
    META_GRAPH_DEF_FIELD_NUMBER: _ClassVar[int]
    wall_time: float
    step: int
    file_version: str
    graph_def: bytes
    tagged_run_metadata: TaggedRunMetadata
    meta_graph_def: bytes
    def __init__(self, wall_time: _Optional[float] = ..., step: _Optional[int] = ..., file_version: _Optional[str] = ..., graph_def: _Optional[bytes] = ..., tagged_run_metadata: _Optional[_Union[TaggedRunMetadata, _Mapping]] = ..., meta_graph_def: _Optional[bytes] = ...) -> None: ...

class TaggedRunMetadata(_message.Message):
    __slots__ = ("tag", "run_metadata")
    TAG_FIELD_NUMBER: _ClassVar[int]
    RUN_METADATA_FIELD_NUMBER: _ClassVar[int]
    tag: str
    run_metadata: bytes
    def __init__(self, tag: _Optional[str] = ..., run_metadata: _Optional[bytes] = ...) -> None: ...

class NodeExecStats(_message.Message):
    __slots__ = ("node_name", "all_start_micros", "op_start_rel_micros", "op_end_rel_micros", "all_end_rel_micros", "timeline_label", "scheduled_micros", "thread_id", "all_start_nanos", "op_start_rel_nanos", "op_end_rel_nanos", "all_end_rel_nanos")
    NODE_NAME_FIELD_NUMBER: _ClassVar[int]
    ALL_START_MICROS_FIELD_NUMBER: _ClassVar[int]
    OP_START_REL_MICROS_FIELD_NUMBER: _ClassVar[int]
    OP_END_REL_MICROS_FIELD_NUMBER: _ClassVar[int]
    ALL_END_REL_MICROS_FIELD_NUMBER: _ClassVar[int]
    TIMELINE_LABEL_FIELD_NUMBER: _ClassVar[int]
    SCHEDULED_MICROS_FIELD_NUMBER: _ClassVar[int]
    THREAD_ID_FIELD_NUMBER: _ClassVar[int]
    ALL_START_NANOS_FIELD_NUMBER: _ClassVar[int]
    OP_START_REL_NANOS_FIELD_NUMBER: _ClassVar[int]
    OP_END_REL_NANOS_FIELD_NUMBER: _ClassVar[int]
    ALL_END_REL_NANOS_FIELD_NUMBER: _ClassVar[int]
    node_name: str
    all_start_micros: int
    op_start_rel_micros: int
    op_end_rel_micros: int
    all_end_rel_micros: int
    timeline_label: str
    scheduled_micros: int
    thread_id: int
    all_start_nanos: int
    op_start_rel_nanos: int
    op_end_rel_nanos: int
    all_end_rel_nanos: int
    def __init__(self, node_name: _Optional[str] = ..., all_start_micros: _Optional[int] = ..., op_start_rel_micros: _Optional[int] = ..., op_end_rel_micros: _Optional[int] = ..., all_end_rel_micros: _Optional[int] = ..., timeline_label: _Optional[str] = ..., scheduled_micros: _Optional[int] = ..., thread_id: _Optional[int] = ..., all_start_nanos: _Optional[int] = ..., op_start_rel_nanos: _Optional[int] = ..., op_end_rel_nanos: _Optional[int] = ..., all_end_rel_nanos: _Optional[int] = ...) -> None: ...

class DeviceStepStats(_message.Message):
    __slots__ = ("device", "node_stats", "thread_names")
    class ThreadNamesEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: int
        value: str
        def __init__(self, key: _Optional[int] = ..., value: _Optional[str] = ...) -> None: ...
    DEVICE_FIELD_NUMBER: _ClassVar[int]
    NODE_STATS_FIELD_NUMBER: _ClassVar[int]
    THREAD_NAMES_FIELD_NUMBER: _ClassVar[int]
    device: str
    node_stats: _containers.RepeatedCompositeFieldContainer[NodeExecStats]
    thread_names: _containers.ScalarMap[int, str]
    def __init__(self, device: _Optional[str] = ..., node_stats: _Optional[_Iterable[_Union[NodeExecStats, _Mapping]]] = ..., thread_names: _Optional[_Mapping[int, str]] = ...) -> None: ...

class StepStats(_message.Message):
    __slots__ = ("dev_stats",)
    DEV_STATS_FIELD_NUMBER: _ClassVar[int]
    dev_stats: _containers.RepeatedCompositeFieldContainer[DeviceStepStats]
    def __init__(self, dev_stats: _Optional[_Iterable[_Union[DeviceStepStats, _Mapping]]] = ...) -> None: ...

class RunMetadata(_message.Message):
    __slots__ = ("step_stats", "partition_graphs")
    STEP_STATS_FIELD_NUMBER: _ClassVar[int]
    PARTITION_GRAPHS_FIELD_NUMBER: _ClassVar[int]
    step_stats: StepStats
    partition_graphs: _containers.RepeatedCompositeFieldContainer[_graph_pb2.GraphDef]
    def __init__(self, step_stats: _Optional[_Union[StepStats, _Mapping]] = ..., partition_graphs: _Optional[_Iterable[_Union[_graph_pb2.GraphDef, _Mapping]]] = ...) -> None: ...
