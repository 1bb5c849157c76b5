"""TensorBoard event files: the graph (and per-step run metadata) as TensorBoard reads them.

    >>> path = write_graph_events(load("mlp.pb"), "logs/mlp")
    >>> path
    'logs/mlp/events.out.tfevents.1700000000.myhost.tfg'
    >>> [e.WhichOneof("what") for e in read_events(path)]
    ['file_version', 'graph_def']

`tensorboard --logdir logs` then shows the graph in its Graphs tab. A file is a TFRecord
stream (records.py) of `tensorflow.Event` messages: first `file_version: "brain.Event:2"`,
then one event holding the serialized GraphDef, then optionally `tagged_run_metadata` events
whose RunMetadata carries step stats (per-device node timings, from a `tfg run --trace`), which
TensorBoard's graph tab offers as "Session runs" to colour nodes by compute time.
"""
import json
import os
import socket
import time

from tfg.errors import TfgInputError
from tfg.graphdef import io
from tfg.graphdef.chrome_trace import event_args, event_times
from tfg.schemas.proto import event_pb2
from tfg.tensorboard.records import encode_record, iter_records

FILE_VERSION = "brain.Event:2"


def events_filename(wall_time=None):
    """TensorBoard's naming: `events.out.tfevents.<seconds>.<host>` (+ `.tfg`)."""
    seconds = int(time.time() if wall_time is None else wall_time)
    return f"events.out.tfevents.{seconds:010d}.{socket.gethostname()}.tfg"


def encode_events(graph, run_metadata=(), wall_time=None):
    """Bytes of an events file: file_version, the graph, then each (tag, step, RunMetadata)."""
    now = time.time() if wall_time is None else wall_time
    out = [encode_record(event_pb2.Event(wall_time=now, file_version=FILE_VERSION)
                         .SerializeToString())]
    if graph is not None:
        gd = io.dumps(graph, "binary")
        out.append(encode_record(event_pb2.Event(wall_time=now, step=0, graph_def=gd)
                                 .SerializeToString()))
    for tag, step, md in run_metadata:
        ev = event_pb2.Event(wall_time=now, step=int(step))
        ev.tagged_run_metadata.tag = tag
        ev.tagged_run_metadata.run_metadata = md.SerializeToString()
        out.append(encode_record(ev.SerializeToString()))
    return b"".join(out)


def write_graph_events(graph, logdir, run_metadata=(), wall_time=None):
    """Write a new events file for `graph` into `logdir` (created if needed); returns its path.

    Before: a Graph and `logs/run1`.  After: `logs/run1/events.out.tfevents.<t>.<host>.tfg`.
    The file is written atomically, so TensorBoard never reads a half-written record.
    """
    logdir = os.fspath(logdir)
    if os.path.exists(logdir) and not os.path.isdir(logdir):
        raise TfgInputError(f"LOGDIR {logdir} exists and is not a directory")
    data = encode_events(graph, run_metadata, wall_time)
    path = os.path.join(logdir, events_filename(wall_time))
    try:
        os.makedirs(logdir, exist_ok=True)
        io.write_bytes_atomic(path, data)
    except OSError as e:  # (a LOGDIR under a file, or where the user cannot write)
        raise TfgInputError(f"LOGDIR {logdir}: cannot write ({e.strerror or e})") from None
    return path


def read_events(path):
    """The Event messages of an events file, with every record's CRCs checked."""
    try:
        with open(path, "rb") as f:
            blob = f.read()
    except OSError as e:
        raise TfgInputError(f"cannot read {path}: {e.strerror}") from None
    events = []
    for i, data in enumerate(iter_records(blob, str(path))):
        ev = event_pb2.Event()
        try:
            ev.ParseFromString(data)
        except Exception:  # protobuf's DecodeError and friends
            raise TfgInputError(f"{path}: record {i} is not an Event") from None
        events.append(ev)
    return events


def graph_from_events(path):
    """The last Graph stored in an events file (None when it has none)."""
    graph = None
    for ev in read_events(path):
        if ev.WhichOneof("what") == "graph_def":
            graph = io.loads(ev.graph_def, f"{path} (graph_def event)")
    return graph


def run_metadata_from_chrome_trace(doc):
    """A RunMetadata (step stats) from the Chrome trace `tfg run --trace` writes.

    Before: {"traceEvents": [{"name": "dense/MatMul", "ph": "X", "ts": 3.0, "dur": 41.2,
             "pid": 0, "tid": 0, ...}, {"name": "process_name", "ph": "M", "pid": 0,
             "args": {"name": "/job:localhost/replica:0/task:0/device:CPU:0"}}]}
    After:  RunMetadata(step_stats.dev_stats=[DeviceStepStats(device=".../CPU:0",
             node_stats=[NodeExecStats(node_name="dense/MatMul", all_start_micros=3, ...)])])
    """
    if not isinstance(doc, dict) or not isinstance(doc.get("traceEvents"), list):
        raise TfgInputError("not a Chrome trace: expected an object with traceEvents")
    devices, threads, stats = {}, {}, {}
    for i, e in enumerate(doc["traceEvents"]):
        if not isinstance(e, dict):
            continue
        if e.get("ph") == "M" and e.get("name") == "process_name":
            devices[e.get("pid")] = str(event_args(e, i).get("name", e.get("pid")))
        elif e.get("ph") == "M" and e.get("name") == "thread_name":
            threads[(e.get("pid"), e.get("tid"))] = str(event_args(e, i).get("name", ""))
        elif e.get("ph") == "X":
            stats.setdefault(e.get("pid"), []).append((event_times(e, i), e, i))
    md = event_pb2.RunMetadata()
    for pid, events in sorted(stats.items(), key=lambda kv: str(kv[0])):
        dev = md.step_stats.dev_stats.add(device=devices.get(pid, f"/device:UNKNOWN:{pid}"))
        for (start_us, dur_us, tid), e, i in sorted(events, key=lambda t: (t[0][0], t[2])):
            op = event_args(e, i).get("op", e.get("cat", ""))
            dev.node_stats.add(
                node_name=str(e.get("name", "")), all_start_micros=int(start_us),
                op_start_rel_micros=0, op_end_rel_micros=int(round(dur_us)),
                all_end_rel_micros=int(round(dur_us)), thread_id=tid,
                all_start_nanos=int(start_us * 1000), op_end_rel_nanos=int(dur_us * 1000),
                all_end_rel_nanos=int(dur_us * 1000),
                timeline_label=f"{e.get('name', '')} = {op}()")
            if (pid, e.get("tid")) in threads:
                dev.thread_names[tid] = threads[(pid, e.get("tid"))]
    return md


def read_chrome_trace(path):
    """Load a Chrome trace JSON file and convert it (see `run_metadata_from_chrome_trace`)."""
    try:
        with open(path, "rb") as f:
            doc = json.loads(f.read())
    except OSError as e:
        raise TfgInputError(f"cannot read trace {path}: {e.strerror}") from None
    except (ValueError, RecursionError) as e:
        raise TfgInputError(f"trace {path} is not JSON: {' '.join(str(e).split())}") from None
    return run_metadata_from_chrome_trace(doc)
