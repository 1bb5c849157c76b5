"""A partitioned graph as one GraphDef file per device, plus an `index.json` (`tfg partition
--split DIR`), for handing each device's part to its own process or worker.

    >>> index = write_split(partition(g, "cpu:2"), "parts")
    >>> index["devices"]["/job:localhost/replica:0/task:0/device:CPU:1"]
    {'file': 'job_localhost_replica_0_task_0_device_CPU_1.pb', 'nodes': 7, 'sends': 1,
     'recvs': 2}
    >>> sorted(os.listdir("parts"))
    ['index.json', 'job_localhost_replica_0_task_0_device_CPU_0.pb',
     'job_localhost_replica_0_task_0_device_CPU_1.pb']

Each file holds that device's nodes (its `_Send`s and `_Recv`s included) with the graph's
versions and function library, so it loads and validates on its own. All files are written
next to their final names first and renamed into place together, so a failure leaves DIR as it
was (no partial files). Files that an earlier `index.json` in DIR listed and this split does not
produce are removed; nothing else in DIR is touched.
"""
import hashlib
import json
import os
import re

from tfg.errors import TfgInputError
from tfg.graphdef import io
from tfg.passes.partition import split_by_device
from tfg.schemas.ops import control_flow_names

INDEX = "index.json"
_UNSAFE = re.compile(r"[^A-Za-z0-9_.-]+")
_SEND_OPS = control_flow_names("send")
_RECV_OPS = control_flow_names("recv")


def device_file_name(device, ext="pb"):
    """A file name for a device string, with only [A-Za-z0-9_.-] in it.

    Before: '/job:localhost/replica:0/task:0/device:CPU:0'.
    After:  'job_localhost_replica_0_task_0_device_CPU_0.pb'.
    """
    stem = _UNSAFE.sub("_", device).strip("_.") or "device"
    return f"{stem[:200]}.{ext}"


def file_names(devices, ext="pb"):
    """{device: file name}, unique even where two device strings sanitize alike (a short hash
    of the device string tells them apart) and never `index.json`."""
    names, taken = {}, {INDEX}
    for device in devices:
        name = stem = device_file_name(device, ext)[:-len(ext) - 1]
        digest = hashlib.sha1(device.encode("utf-8", "surrogateescape")).hexdigest()
        width = 8
        while f"{name}.{ext}" in taken:  # longer digests until unique (in practice: once)
            name, width = f"{stem}_{digest[:width]}", width + 8
        name = f"{name}.{ext}"
        taken.add(name)
        names[device] = name
    return names


def split_files(graph, fmt="pb"):
    """(index dict, {file name: bytes}) for a partitioned graph, nothing written yet.

    Raises GraphValidationError when `graph` is not partitioned (an edge between devices).
    """
    ext = "pbtxt" if fmt in ("pbtxt", "text") else "pb"
    parts = split_by_device(graph)
    names = file_names(parts, ext)
    devices, data = {}, {}
    for device, part in parts.items():
        data[names[device]] = io.dumps(part, ext)
        devices[device] = {
            "file": names[device],
            "nodes": len(part),
            "sends": sum(1 for n in part if n.op in _SEND_OPS),
            "recvs": sum(1 for n in part if n.op in _RECV_OPS),
        }
    index = {"format": ext, "nodes": len(graph), "devices": devices}
    return index, data


def check_split_dir(folder):
    """Refuse a DIR that exists but is not a folder (before any work is done)."""
    if os.path.exists(folder) and not os.path.isdir(folder):
        raise TfgInputError(f"--split {folder}: exists and is not a directory")


class StagedSplit:
    """Files written under temporary names in DIR; `commit` renames them into place, `discard`
    removes them (and DIR, when this created it and it is still empty)."""

    def __init__(self, folder, index, data):
        self.folder = folder
        self.index = index
        self.temps = {}  # final name -> temporary path
        self.created = False
        check_split_dir(folder)
        try:
            if not os.path.isdir(folder):
                os.makedirs(folder)
                self.created = True
            files = dict(data)
            files[INDEX] = (json.dumps(index, indent=2) + "\n").encode()
            for name, blob in files.items():
                self.temps[name] = io.write_temp(folder, blob, prefix=".tfg-split-")
        except OSError as e:
            self.discard()
            raise TfgInputError(f"--split {folder}: cannot write: {e.strerror or e}") from None
        except BaseException:
            self.discard()
            raise

    def commit(self):
        stale = _previous_files(self.folder) - set(self.temps)
        try:
            # index.json last: whoever reads it finds every file it names.
            for name in sorted(self.temps, key=lambda n: n == INDEX):
                os.replace(self.temps.pop(name), os.path.join(self.folder, name))
        except OSError as e:
            self.discard()
            raise TfgInputError(
                f"--split {self.folder}: cannot write: {e.strerror or e}") from None
        for name in stale:
            try:
                os.unlink(os.path.join(self.folder, name))
            except OSError:
                pass  # already gone, or not ours to remove after all

    def discard(self):
        for path in self.temps.values():
            try:
                os.unlink(path)
            except OSError:
                pass
        self.temps = {}
        if self.created:
            try:
                os.rmdir(self.folder)
            except OSError:
                pass


def _previous_files(folder):
    """Device files an earlier index.json in `folder` named (plain names only: an index is
    data from disk, so a path in it never leads a removal outside DIR)."""
    try:
        with open(os.path.join(folder, INDEX), "rb") as f:
            old = json.loads(f.read())
        listed = [d.get("file") for d in old.get("devices", {}).values()]
    except (OSError, ValueError, AttributeError, TypeError, RecursionError):
        return set()
    return {n for n in listed if isinstance(n, str) and n == os.path.basename(n)
            and n not in ("", ".", "..", INDEX) and re.fullmatch(r"[A-Za-z0-9_.-]+\.pb(txt)?", n)}


def write_split(graph, folder, fmt="pb"):
    """Write one file per device of the partitioned `graph` and `index.json` into `folder`
    (created if missing); returns the index. See the module docstring."""
    index, data = split_files(graph, fmt)
    StagedSplit(folder, index, data).commit()
    return index


__all__ = ["write_split", "split_files", "device_file_name", "file_names", "check_split_dir",
           "StagedSplit", "INDEX"]
