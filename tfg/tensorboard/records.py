"""TFRecord framing: the container of TensorBoard event files (and tf.data's TFRecordDataset).

Each record is

    uint64 length (little-endian) | uint32 masked_crc32c(length bytes) | data[length]
    | uint32 masked_crc32c(data)

    >>> blob = encode_record(b"hello")
    >>> list(iter_records(blob))
    [b'hello']

The reader checks both CRCs and the framing, and raises `TfgInputError` naming the record that
is corrupt or truncated, so a bad file never reads as a shorter good one.
"""
import struct

from tfg.errors import TfgInputError
from tfg.schemas.crc32c import masked_crc32c

_LEN = struct.Struct("<Q")
_CRC = struct.Struct("<I")
HEADER_BYTES = _LEN.size + _CRC.size


def encode_record(data):
    """One framed record (bytes) holding `data`."""
    data = bytes(data)
    length = _LEN.pack(len(data))
    return (length + _CRC.pack(masked_crc32c(length)) + data
            + _CRC.pack(masked_crc32c(data)))


def iter_records(blob, source="<records>"):
    """Yield the payload of each record in `blob` (bytes), checking the framing and CRCs.

    Before: the bytes of an events file.  After: the serialized Event messages, in order.
    """
    view = memoryview(blob)
    pos, index = 0, 0
    while pos < len(view):
        if len(view) - pos < HEADER_BYTES:
            raise TfgInputError(f"{source}: record {index} is truncated (header)")
        header = view[pos:pos + _LEN.size]
        (length,) = _LEN.unpack(header)
        (len_crc,) = _CRC.unpack(view[pos + _LEN.size:pos + HEADER_BYTES])
        if masked_crc32c(header) != len_crc:
            raise TfgInputError(f"{source}: record {index} has a bad length CRC")
        start = pos + HEADER_BYTES
        end = start + length
        if end + _CRC.size > len(view):
            raise TfgInputError(f"{source}: record {index} is truncated (needs {length} bytes)")
        data = view[start:end]
        (data_crc,) = _CRC.unpack(view[end:end + _CRC.size])
        if masked_crc32c(data) != data_crc:
            raise TfgInputError(f"{source}: record {index} has a bad data CRC")
        yield bytes(data)
        pos = end + _CRC.size
        index += 1


def read_records(path):
    """All record payloads of the file at `path` (see `iter_records`)."""
    try:
        with open(path, "rb") as f:
            blob = f.read()
    except OSError as e:
        raise TfgInputError(f"cannot read {path}: {e.strerror}") from None
    return list(iter_records(blob, str(path)))
