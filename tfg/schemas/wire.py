"""Reading protobuf's wire format by hand, for messages and files tfg has no generated code for
(the tensor bundle's SSTable index, the SaverDef inside a MetaGraphDef's raw bytes).

    >>> read_varint(b"\\x96\\x01", 0)
    (150, 2)
    >>> list(message_fields(b"\\x08\\x96\\x01\\x12\\x02hi", "a message"))
    [(1, 150), (2, b'hi')]
"""
from tfg.errors import TfgInputError


def read_varint(buf, pos, what="a tensor bundle index"):
    """The base-128 varint at `buf[pos:]` and the position after it."""
    result, shift = 0, 0
    while True:
        if pos >= len(buf):
            raise TfgInputError(f"malformed varint in {what}")
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            return result, pos
        shift += 7


def message_fields(buf, what):
    """(field number, int or bytes) of each top-level field of a serialized message."""
    pos = 0
    while pos < len(buf):
        key, pos = read_varint(buf, pos, what)
        number, wire = key >> 3, key & 7
        if wire == 0:
            value, pos = read_varint(buf, pos, what)
        elif wire == 1:
            value, pos = buf[pos:pos + 8], pos + 8
        elif wire == 2:
            size, pos = read_varint(buf, pos, what)
            value, pos = buf[pos:pos + size], pos + size
        elif wire == 5:
            value, pos = buf[pos:pos + 4], pos + 4
        else:  # groups: not used by the messages read here
            raise TfgInputError(f"{what}: unsupported wire type {wire} in field {number}")
        if pos > len(buf):
            raise TfgInputError(f"{what}: truncated field")
        yield number, value
