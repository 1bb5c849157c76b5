"""TensorBoard event files: tfg's writer read back by an independent reader (its own bitwise
CRC-32C and framing), tfg's reader on a file TensorFlow's FileWriter wrote, corruption, the
`tfg export tensorboard` CLI, and TensorBoard's own loader when it is installed."""
import json
import os
import struct

import numpy as np
import pytest

from conftest import FIXTURES
from helpers import tfg_cli
from tfg.errors import TfgInputError
from tfg.graphdef import io
from tfg.schemas.proto import event_pb2
from tfg.schemas import crc32c as crcmod
from tfg.tensorboard import (encode_record, graph_from_events, iter_records, read_events,
                             run_metadata_from_chrome_trace, write_graph_events)

SAVED = FIXTURES / "savedmodel"


# --- an independent reader: bit-by-bit CRC-32C and the TFRecord layout, nothing from tfg ----

def _crc32c_bitwise(data):
    crc = 0xFFFFFFFF
    for byte in data:
        crc ^= byte
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def _masked(data):
    crc = _crc32c_bitwise(data)
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + 0xA282EAD8) & 0xFFFFFFFF


def independent_records(blob):
    out, pos = [], 0
    while pos < len(blob):
        header = blob[pos:pos + 8]
        (length,) = struct.unpack("<Q", header)
        (hcrc,) = struct.unpack("<I", blob[pos + 8:pos + 12])
        assert hcrc == _masked(header), "length CRC"
        data = blob[pos + 12:pos + 12 + length]
        (dcrc,) = struct.unpack("<I", blob[pos + 12 + length:pos + 16 + length])
        assert dcrc == _masked(data), "data CRC"
        out.append(data)
        pos += 16 + length
    assert pos == len(blob)
    return out


@pytest.fixture
def graph():
    return io.load(str(SAVED / "frozen.pb"))


# --- CRC ------------------------------------------------------------------------------------

def test_crc32c_known_values():
    assert crcmod.crc32c(b"123456789") == 0xE3069283
    assert crcmod.crc32c(b"") == 0
    data = bytes(range(256)) * 3
    assert _crc32c_bitwise(data) == crcmod.crc32c(data)
    assert crcmod.crc32c(memoryview(data)[5:]) == _crc32c_bitwise(data[5:])
    for v in (0, 1, 0xDEADBEEF, 0xFFFFFFFF):
        assert crcmod.unmask(crcmod.mask(v)) == v
    assert crcmod.masked_crc32c(b"abc") == _masked(b"abc")


# --- writer -> independent reader -------------------------------------------------------------

def test_events_file_read_back_independently(graph, tmp_path):
    path = write_graph_events(graph, tmp_path / "logs", wall_time=1700000000.5)
    assert os.path.basename(path).startswith("events.out.tfevents.1700000000.")
    with open(path, "rb") as f:
        records = independent_records(f.read())
    assert len(records) == 2
    first, second = event_pb2.Event(), event_pb2.Event()
    first.ParseFromString(records[0])
    second.ParseFromString(records[1])
    assert first.file_version == "brain.Event:2"
    assert first.wall_time == 1700000000.5
    assert second.WhichOneof("what") == "graph_def"
    assert second.graph_def == io.dumps(graph, "binary")
    back = graph_from_events(path)
    assert [n.name for n in back] == [n.name for n in graph]


def test_reader_on_tensorflow_written_events():
    path = SAVED / "tf_events" / "events.out.tfevents.0000000000.tf"
    events = read_events(path)
    assert events[0].file_version == "brain.Event:2"
    g = graph_from_events(path)
    frozen = io.load(str(SAVED / "frozen.pb"))
    assert sorted(n.name for n in g) == sorted(n.name for n in frozen)
    # and TensorFlow's bytes satisfy the independent reader too
    with open(path, "rb") as f:
        assert len(independent_records(f.read())) == len(events)


def test_corrupt_and_truncated_records_are_refused(graph, tmp_path):
    path = write_graph_events(graph, tmp_path, wall_time=1)
    blob = bytearray(open(path, "rb").read())
    bad = bytearray(blob)
    bad[-20] ^= 0x01  # inside the graph_def payload
    with pytest.raises(TfgInputError, match="bad data CRC"):
        list(iter_records(bytes(bad)))
    bad = bytearray(blob)
    bad[2] ^= 0x01  # the first length
    with pytest.raises(TfgInputError, match="bad length CRC"):
        list(iter_records(bytes(bad)))
    with pytest.raises(TfgInputError, match="truncated"):
        list(iter_records(bytes(blob[:-3])))
    assert list(iter_records(encode_record(b""))) == [b""]


def test_run_metadata_from_chrome_trace():
    doc = {"traceEvents": [
        {"name": "y", "cat": "Relu", "ph": "X", "ts": 10.5, "dur": 2.25, "pid": 0, "tid": 1,
         "args": {"op": "Relu"}},
        {"name": "m", "cat": "MatMul", "ph": "X", "ts": 3.0, "dur": 7.0, "pid": 0, "tid": 0,
         "args": {"op": "MatMul"}},
        {"name": "process_name", "ph": "M", "pid": 0, "args": {"name": "/device:CPU:0"}},
        {"name": "thread_name", "ph": "M", "pid": 0, "tid": 1, "args": {"name": "pool"}}]}
    md = run_metadata_from_chrome_trace(doc)
    (dev,) = md.step_stats.dev_stats
    assert dev.device == "/device:CPU:0"
    assert [s.node_name for s in dev.node_stats] == ["m", "y"]
    assert dev.node_stats[1].all_start_micros == 10
    assert dev.node_stats[1].all_end_rel_nanos == 2250
    assert dev.thread_names[1] == "pool"
    with pytest.raises(TfgInputError):
        run_metadata_from_chrome_trace({"nope": 1})


# --- CLI ------------------------------------------------------------------------------------

def test_cli_export_with_trace(tmp_path):
    frozen = str(SAVED / "frozen.pb")
    feeds = tmp_path / "x.npy"
    np.save(feeds, np.load(SAVED / "mlp_feeds.npz")["x"])
    trace = tmp_path / "trace.json"
    tfg_cli("run", frozen, "--feed", f"x=@{feeds}", "--fetch", "probs", "--trace", trace)
    out = tfg_cli("export", "tensorboard", frozen, tmp_path / "logs", "--trace", trace)
    path = out.stdout.decode().strip()
    assert os.path.dirname(path) == str(tmp_path / "logs")
    events = read_events(path)
    kinds = [e.WhichOneof("what") for e in events]
    assert kinds == ["file_version", "graph_def", "tagged_run_metadata"]
    md = event_pb2.RunMetadata()
    md.ParseFromString(events[2].tagged_run_metadata.run_metadata)
    names = {s.node_name for d in md.step_stats.dev_stats for s in d.node_stats}
    assert "probs" in names
    assert json.load(open(trace))["traceEvents"]


def test_cli_export_bad_input(tmp_path):
    (tmp_path / "file").write_text("x")
    p = tfg_cli("export", "tensorboard", str(SAVED / "frozen.pb"), tmp_path / "file",
                check=False)
    assert p.returncode == 2 and b"not a directory" in p.stderr
    p = tfg_cli("export", "tensorboard", tmp_path / "missing.pb", tmp_path / "logs",
                check=False)
    assert p.returncode == 2 and not (tmp_path / "logs").exists()


# --- TensorBoard's own loader (dev only: pip install tensorboard) ----------------------------

def test_tensorboard_loads_the_graph(graph, tmp_path):
    pytest.importorskip("tensorboard")
    from tensorboard.backend.event_processing import event_accumulator

    md = run_metadata_from_chrome_trace({"traceEvents": [
        {"name": "probs", "ph": "X", "ts": 1, "dur": 2, "pid": 0, "tid": 0},
        {"name": "process_name", "ph": "M", "pid": 0, "args": {"name": "/device:CPU:0"}}]})
    write_graph_events(graph, tmp_path, run_metadata=[("step", 0, md)])
    acc = event_accumulator.EventAccumulator(str(tmp_path))
    acc.Reload()
    gd = acc.Graph()
    assert sorted(n.name for n in gd.node) == sorted(n.name for n in graph)
    assert acc.Tags()["run_metadata"] == ["step"]
    stats = acc.RunMetadata("step").step_stats.dev_stats[0]
    assert stats.device == "/device:CPU:0" and stats.node_stats[0].node_name == "probs"
