"""`tfg partition --split DIR` (issue #6): one GraphDef per device plus index.json, end to end.

Each per-device file must load and validate on its own, hold exactly that device's nodes of the
combined graph (its _Send/_Recv included), and the index must name every file with its counts.
Errors leave no files behind; DIR is created when missing and refused when it is a file.
"""
import json
import os

import numpy as np
import pytest

from helpers import tfg_cli
from tfg import builder as tb
from tfg.errors import TfgInputError
from tfg.graphdef import io
from tfg.graphdef.validate import validate
from tfg.passes.partition import files as split_files
from tfg.passes.partition.files import INDEX, device_file_name, file_names, write_split

CPU = "/job:localhost/replica:0/task:0/device:CPU:%d"


def loop_graph(path):
    """A while loop whose body and a cond sit on three different CPUs (control loops, Send/Recv
    inside a frame and across the root). The body asks for two devices: placement alone keeps
    a loop on one (tfg/passes/place/simulate.py)."""
    def body(i, a):
        with tb.device("/device:CPU:0"):
            step = i + 1
        with tb.device("/device:CPU:1"):
            scaled = x * w
        return step, a + scaled

    with tb.Graph() as g:
        x = tb.placeholder(tb.float32, [2], name="x")
        with tb.device("/device:CPU:1"):
            w = tb.constant(np.array([0.5, 2.0], np.float32), name="w")
        _, acc = tb.while_loop(lambda i, a: i < 3, body, [tb.constant(0), tb.zeros([2])])
        with tb.device("/device:CPU:2"):
            y = tb.cond(tb.reduce_sum(acc) > 0, lambda: acc * 2.0, lambda: acc)
        tb.identity(tb.reduce_sum(y), name="out")
    io.save(g.graph, str(path))
    return g.graph


def partition_split(tmp_path, *extra, devices="cpu:3", check=True):
    src = tmp_path / "g.pb"
    if not src.exists():
        loop_graph(src)
    flags = ["--devices", devices] if devices else []
    return tfg_cli("partition", src, *flags, *extra, check=check)


def test_split_writes_one_valid_graph_per_device_and_an_index(tmp_path):
    out, parts = tmp_path / "parts.pb", tmp_path / "parts"
    partition_split(tmp_path, "-o", out, "--split", parts)
    combined = io.load(str(out))
    index = json.loads((parts / INDEX).read_text())
    devices = {n.device for n in combined}
    assert len(devices) == 3 and set(index["devices"]) == devices
    assert index["format"] == "pb" and index["nodes"] == len(combined)
    assert sorted(os.listdir(parts)) == sorted([INDEX] + [
        d["file"] for d in index["devices"].values()])
    seen = {}
    for device, entry in index["devices"].items():
        assert entry["file"] == device_file_name(device)
        path = parts / entry["file"]
        part = io.load(str(path))
        assert validate(part) == []  # on its own: no input names a node of another file
        assert {n.device for n in part} == {device}
        assert len(part) == entry["nodes"]
        assert entry["sends"] == sum(n.op == "_Send" for n in part)
        assert entry["recvs"] == sum(n.op == "_Recv" for n in part)
        assert part.versions == combined.versions
        for node in part:
            assert node.name not in seen
            seen[node.name] = node.to_proto()
        p = tfg_cli("info", path)
        assert f"nodes: {entry['nodes']}".encode() in p.stdout
    # Together the files are exactly the combined graph, node for node.
    assert seen == {n.name: n.to_proto() for n in combined}
    assert sum(e["sends"] for e in index["devices"].values()) == sum(
        e["recvs"] for e in index["devices"].values()) > 0


def test_split_alongside_stdout_and_the_combined_graph_still_runs(tmp_path):
    p = partition_split(tmp_path, "--split", tmp_path / "d")
    assert (tmp_path / "d" / INDEX).exists()
    run = tfg_cli("run", "-", "--devices", "cpu:3", "--feed", "x=[1.0, 2.0]", "--fetch", "out",
                  input=p.stdout)
    ref = tfg_cli("run", tmp_path / "g.pb", "--feed", "x=[1.0, 2.0]", "--fetch", "out")
    assert run.stdout == ref.stdout and b"out = array(27." in ref.stdout  # 2 * 3 * (0.5 + 4)


def test_split_dir_is_created_with_its_parents(tmp_path):
    parts = tmp_path / "a" / "b" / "parts"
    partition_split(tmp_path, "-o", tmp_path / "o.pb", "--split", parts)
    assert (parts / INDEX).exists() and len(os.listdir(parts)) == 4


def test_split_text_format_writes_pbtxt_files(tmp_path):
    parts = tmp_path / "parts"
    partition_split(tmp_path, "-o", tmp_path / "o.pbtxt", "--format", "pbtxt", "--split", parts)
    index = json.loads((parts / INDEX).read_text())
    assert index["format"] == "pbtxt"
    for entry in index["devices"].values():
        assert entry["file"].endswith(".pbtxt")
        assert (parts / entry["file"]).read_text().startswith("node")


def test_split_dir_that_is_a_file_is_refused(tmp_path):
    target = tmp_path / "parts"
    target.write_text("mine")
    out = tmp_path / "o.pb"
    p = partition_split(tmp_path, "-o", out, "--split", target, check=False)
    err = p.stderr.decode()
    assert p.returncode == 2 and err.count("\n") == 1 and "--split" in err
    assert "not a directory" in err and "Traceback" not in err
    assert target.read_text() == "mine" and not out.exists()


def test_empty_split_is_a_usage_error(tmp_path):
    p = partition_split(tmp_path, "-o", tmp_path / "o.pb", "--split", "", check=False)
    assert p.returncode == 2 and b"--split" in p.stderr
    assert not (tmp_path / "o.pb").exists()


def test_a_failed_partition_leaves_no_files(tmp_path):
    parts = tmp_path / "parts"
    out = tmp_path / "o.pb"
    # CPU:2 is requested by the cond, and hard placement on 2 CPUs cannot give it.
    p = partition_split(tmp_path, "-o", out, "--split", parts, "--no-soft-placement",
                        devices="cpu:2", check=False)
    assert p.returncode == 2 and p.stderr.decode().count("\n") == 1
    assert not parts.exists() and not out.exists()


def test_a_failed_combined_write_leaves_no_split_files(tmp_path):
    parts = tmp_path / "parts"
    parts.mkdir()
    (parts / "notes.txt").write_text("mine")
    # The combined graph cannot be written (its folder does not exist): nothing in DIR either.
    p = partition_split(tmp_path, "-o", tmp_path / "missing" / "o.pb", "--split", parts,
                        check=False)
    assert p.returncode != 0 and b"Traceback" not in p.stderr
    assert os.listdir(parts) == ["notes.txt"]


def test_a_failed_file_write_removes_what_was_written(tmp_path, monkeypatch):
    src = tmp_path / "g.pb"
    loop_graph(src)
    out = tmp_path / "o.pb"
    tfg_cli("partition", src, "--devices", "cpu:3", "-o", out)
    parted = io.load(str(out))
    real, calls = split_files.io.write_temp, []

    def failing(folder, blob, **kwargs):
        calls.append(folder)
        if len(calls) == 3:
            raise OSError(28, "No space left on device")
        return real(folder, blob, **kwargs)

    monkeypatch.setattr(split_files.io, "write_temp", failing)
    parts = tmp_path / "new"
    with pytest.raises(TfgInputError, match="No space left on device"):
        write_split(parted, str(parts))
    assert not parts.exists()  # created by the call, so removed again
    existing = tmp_path / "existing"
    existing.mkdir()
    calls.clear()
    with pytest.raises(TfgInputError, match="--split"):
        write_split(parted, str(existing))
    assert os.listdir(existing) == []


def test_resplit_removes_only_the_files_the_old_index_named(tmp_path):
    parts = tmp_path / "parts"
    partition_split(tmp_path, "-o", tmp_path / "o.pb", "--split", parts)
    (parts / "notes.txt").write_text("mine")
    (tmp_path / "outside.pb").write_bytes(b"x")
    index = json.loads((parts / INDEX).read_text())
    assert device_file_name(CPU % 2) in {e["file"] for e in index["devices"].values()}
    partition_split(tmp_path, "-o", tmp_path / "o.pb", "--split", parts, devices="cpu:2")
    names = sorted(os.listdir(parts))
    assert names == sorted([INDEX, "notes.txt", device_file_name(CPU % 0),
                            device_file_name(CPU % 1)])
    # An index is data from disk: a path in it never removes anything outside DIR.
    (parts / INDEX).write_text(json.dumps(
        {"devices": {"x": {"file": "../outside.pb"}, "y": {"file": "notes.txt"}}}))
    partition_split(tmp_path, "-o", tmp_path / "o.pb", "--split", parts, devices="cpu:2")
    assert (tmp_path / "outside.pb").exists() and (parts / "notes.txt").exists()


def test_cluster_devices_get_safe_file_names(tmp_path):
    parts = tmp_path / "parts"
    partition_split(tmp_path, "-o", tmp_path / "o.pb", "--split", parts, "--cluster",
                    "worker=127.0.0.1:2222,127.0.0.1:2223", devices=None)
    index = json.loads((parts / INDEX).read_text())
    assert set(index["devices"]) <= {"/job:worker/replica:0/task:0/device:CPU:0",
                                     "/job:worker/replica:0/task:1/device:CPU:0"}
    for entry in index["devices"].values():
        assert entry["file"].startswith("job_worker_replica_0_task_")


def test_device_file_names():
    assert device_file_name(CPU % 0) == "job_localhost_replica_0_task_0_device_CPU_0.pb"
    assert device_file_name("/job:w/replica:0/task:1/device:GPU:3", "pbtxt") == \
        "job_w_replica_0_task_1_device_GPU_3.pbtxt"
    assert device_file_name("/job:../../etc/x:0") == "job_.._.._etc_x_0.pb"
    assert "/" not in device_file_name("/job:a/b\\c\x00d é")
    assert device_file_name("///") == "device.pb"
    names = file_names(["/job:a b/task:0", "/job:a_b/task:0", "/job:a-b/task:0"])
    assert len(set(names.values())) == 3
    assert all(n.endswith(".pb") and "/" not in n for n in names.values())
