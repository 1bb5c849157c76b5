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
import os
import struct
import tempfile
import zlib

import numpy as np

from tfg.errors import TfgInputError
from tfg.schemas import tensors as tcodec
from tfg.schemas.proto import checkpoint_pb2

MAGIC = b"TFGCKPT\0"
VERSION = 1
_HEADER = struct.Struct("<8sIQI")


def encode_checkpoint(named, step=None, producer="tfg"):
    """{name: array} (+ step) -> file bytes (header and payload)."""
    msg = checkpoint_pb2.Checkpoint(producer=producer)
    for name in sorted(named):
        nt = msg.tensors.add(name=str(name))
        tcodec.from_numpy(np.asarray(named[name]), proto=nt.tensor)
    if step is not None:
        msg.step, msg.has_step = int(step), True
    payload = msg.SerializeToString()
    return _HEADER.pack(MAGIC, VERSION, len(payload), zlib.crc32(payload)) + payload


def decode_checkpoint(data, source="<checkpoint>"):
    """File bytes -> ({name: array}, step or None); TfgInputError when corrupt or truncated."""
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
        out = {nt.name: tcodec.to_numpy(nt.tensor) for nt in msg.tensors}
    except Exception as e:  # noqa: BLE001 - any decode failure is a corrupt file
        raise TfgInputError(f"{source}: corrupt checkpoint ({type(e).__name__})") from None
    return out, (msg.step if msg.has_step else None)


def write_checkpoint(path, named, step=None):
    """Write {name: array} (and the global step) to `path` atomically; returns the path."""
    data = encode_checkpoint(named, step)
    path = os.fspath(path)
    directory = os.path.dirname(os.path.abspath(path))
    os.makedirs(directory, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=directory)
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


def read_checkpoint_with_step(path):
    """({name: array}, step or None) from a checkpoint file."""
    path = os.fspath(path)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        raise TfgInputError(f"no checkpoint at {path}") from None
    except IsADirectoryError:
        raise TfgInputError(f"{path} is a directory, not a checkpoint file") from None
    return decode_checkpoint(data, path)


def read_checkpoint(path):
    """{name: array} from a checkpoint file (see read_checkpoint_with_step for the step)."""
    return read_checkpoint_with_step(path)[0]
