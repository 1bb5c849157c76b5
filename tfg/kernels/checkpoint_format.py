"""tfg's checkpoint file: named tensors and a global step, in one file with a checked header.

    write_checkpoint("ckpt/model", {"w": np.ones(3, np.float32)}, step=100)
    read_checkpoint("ckpt/model")   -> {"w": array([1., 1., 1.], dtype=float32)}
    read_checkpoint_with_step(...)  -> ({...}, 100)

Layout (little-endian): magic b"TFGCKPT\\0" (8 bytes) | format version u32 | payload length
u64 | CRC32 of the payload u32 | payload = a `tfg.Checkpoint` message
(tfg/schemas/proto/checkpoint.proto: NamedTensor{name, tensorflow.TensorProto}, step).
Writes are atomic (temp file in the same directory, fsync, rename), so a crash never leaves a
half-written checkpoint under the real name. The reader checks magic, version, length and
checksum and raises TfgInputError naming the file on any mismatch.
"""
import hashlib
import os
import re
import secrets
import struct
import zlib

import numpy as np

from tfg.errors import TfgInputError
from tfg.schemas import tensors as tcodec
from tfg.schemas.proto import checkpoint_pb2

MAGIC = b"TFGCKPT\0"
VERSION = 1
_HEADER = struct.Struct("<8sIQI")
# tfg writes every value in full (tensor_content or one string per element); a tensor that
# would decode to more than this beyond its stored bytes is a forged splat, refused unread.
SPLAT_ALLOWANCE_BYTES = 1 << 16
# Temp files carry the writer's pid, so a later writer can remove those of a killed one.
TMP_PREFIX = ".tmp-tfgckpt-"
_TMP_NAME = re.compile(re.escape(TMP_PREFIX) + r"(\d+)-[0-9a-f]+$")


def encode_checkpoint(named, step=None, producer="tfg", graph_variables=None):
    """{name: array} (+ step, + the text describing the graph's variables, see
    tfg.executor.checkpoint.describe_variables) -> file bytes (header and payload)."""
    msg = checkpoint_pb2.Checkpoint(producer=producer)
    if graph_variables is not None:
        msg.graph_variables = graph_variables
        msg.graph_fingerprint = fingerprint(graph_variables)
    for name in sorted(named):
        nt = msg.tensors.add(name=str(name))
        tcodec.from_numpy(np.asarray(named[name]), proto=nt.tensor)
    if step is not None:
        msg.step, msg.has_step = int(step), True
    payload = msg.SerializeToString()
    return _HEADER.pack(MAGIC, VERSION, len(payload), zlib.crc32(payload)) + payload


def fingerprint(graph_variables):
    return hashlib.sha256(graph_variables.encode("utf-8")).hexdigest()


def decode_checkpoint(data, source="<checkpoint>"):
    """File bytes -> ({name: array}, step or None); TfgInputError when corrupt or truncated."""
    msg = parse_checkpoint(data, source)
    return decode_tensors(msg, source), (msg.step if msg.has_step else None)


def parse_checkpoint(data, source="<checkpoint>"):
    """File bytes -> the checked `tfg.Checkpoint` message, its tensors not decoded yet."""
    if len(data) < _HEADER.size:
        if not data.startswith(MAGIC[:len(data)]) or not data:
            raise TfgInputError(f"{source}: not a tfg checkpoint (bad magic)")
        raise TfgInputError(f"{source}: truncated checkpoint ({len(data)} bytes, header needs "
                            f"{_HEADER.size})")
    magic, version, length, crc = _HEADER.unpack_from(data)
    if magic != MAGIC:
        raise TfgInputError(f"{source}: not a tfg checkpoint (bad magic)")
    if version != VERSION:
        raise TfgInputError(f"{source}: checkpoint format version {version} is not supported "
                            f"(this tfg reads version {VERSION})")
    payload = data[_HEADER.size:]
    if len(payload) != length:
        raise TfgInputError(f"{source}: truncated or padded checkpoint (payload is "
                            f"{len(payload)} bytes, header says {length})")
    if zlib.crc32(payload) != crc:
        raise TfgInputError(f"{source}: corrupt checkpoint (checksum mismatch)")
    msg = checkpoint_pb2.Checkpoint()
    try:
        msg.ParseFromString(payload)
    except Exception as e:  # noqa: BLE001 - any decode failure is a corrupt file
        raise TfgInputError(f"{source}: corrupt checkpoint ({type(e).__name__})") from None
    if msg.has_step and msg.step < 0:
        raise TfgInputError(f"{source}: checkpoint step {msg.step} is negative")
    for nt in msg.tensors:  # before any value is decoded
        if tcodec.expands(nt.tensor, SPLAT_ALLOWANCE_BYTES):
            raise TfgInputError(
                f"{source}: tensor {nt.name!r} declares {tcodec.declared_nbytes(nt.tensor)} "
                f"bytes from {nt.tensor.ByteSize()} stored; a tfg checkpoint holds every value")
    return msg


def decode_tensors(msg, source):
    try:
        return {nt.name: tcodec.to_numpy(nt.tensor) for nt in msg.tensors}
    except Exception as e:  # noqa: BLE001 - any decode failure is a corrupt file
        raise TfgInputError(f"{source}: corrupt checkpoint ({type(e).__name__})") from None


def write_checkpoint(path, named, step=None, graph_variables=None):
    """Write {name: array} (and the global step) to `path` atomically; returns the path.

    A file already at `path` is replaced only when it is a tfg checkpoint: `--save notes.txt`
    must not destroy notes.txt (TensorFlow's Saver likewise rewrites only its own files)."""
    data = encode_checkpoint(named, step, graph_variables=graph_variables)
    path = os.fspath(path)
    _refuse_foreign(path)
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    remove_stale_temps(directory)
    fd, tmp = _create_temp(directory)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise
    try:  # make the rename itself durable
        dfd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(dfd)
        finally:
            os.close(dfd)
    except OSError:
        pass
    return path


def _refuse_foreign(path):
    if not os.path.lexists(path):
        return
    if not os.path.isfile(path) or os.path.islink(path):
        raise TfgInputError(f"{path} exists and is not a checkpoint file; refusing to replace it")
    with open(path, "rb") as f:
        head = f.read(len(MAGIC))
    if head != MAGIC and os.path.getsize(path) > 0:
        raise TfgInputError(f"{path} exists and is not a tfg checkpoint; refusing to overwrite "
                            "it (remove it or save elsewhere)")


def _create_temp(directory):
    """A new temp file named after this process, with the mode a plain open() gives (the
    kernel applies the umask: nothing process-wide is changed)."""
    for _ in range(100):
        tmp = os.path.join(directory, f"{TMP_PREFIX}{os.getpid()}-{secrets.token_hex(6)}")
        try:
            return os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), tmp
        except FileExistsError:
            continue
    raise TfgInputError(f"cannot create a temp file in {directory}")


def remove_stale_temps(directory):
    """Delete temp files left by checkpoint writers that no longer run (kill -9, power loss);
    returns how many. A file whose writer still runs is kept."""
    removed = 0
    try:
        names = os.listdir(directory)
    except OSError:
        return 0
    for name in names:
        m = _TMP_NAME.match(name)
        if not m or _alive(int(m.group(1))):
            continue
        try:
            os.unlink(os.path.join(directory, name))
            removed += 1
        except OSError:
            pass
    return removed


def _alive(pid):
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        return True
    return True


def read_checkpoint_with_step(path):
    """({name: array}, step or None) from a checkpoint file."""
    msg = read_checkpoint_message(path)
    return decode_tensors(msg, os.fspath(path)), (msg.step if msg.has_step else None)


def read_checkpoint_message(path):
    """The checked `tfg.Checkpoint` message of a file (tensors not decoded)."""
    path = os.fspath(path)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        raise TfgInputError(f"no checkpoint at {path}") from None
    except IsADirectoryError:
        raise TfgInputError(f"{path} is a directory, not a checkpoint file") from None
    return parse_checkpoint(data, path)


def read_checkpoint(path):
    """{name: array} from a checkpoint file (see read_checkpoint_with_step for the step)."""
    return read_checkpoint_with_step(path)[0]
