"""CRC-32C (Castagnoli), and the masked form TFRecord files store.

    >>> crc32c(b"123456789") == 0xE3069283
    True
    >>> masked_crc32c(b"")      # what a TFRecord writes after an empty payload
    2726488792

Pure Python (table-driven, ~10 MB/s), or the C implementation of `google_crc32c` when it is
installed. TFRecord masks CRCs so that a CRC of data that itself holds CRCs stays well mixed:
masked = rotate_right(crc, 15) + 0xa282ead8 (mod 2**32).
"""
_POLY = 0x82F63B78  # CRC-32C, reflected
_MASK_DELTA = 0xA282EAD8


def _make_table():
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ _POLY if c & 1 else c >> 1
        table.append(c)
    return tuple(table)


_TABLE = _make_table()


def _crc32c_py(data, crc=0):
    table = _TABLE
    crc ^= 0xFFFFFFFF
    for b in memoryview(data).cast("B"):
        crc = table[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


try:  # optional C acceleration; the result is the same
    import google_crc32c as _gcrc

    def crc32c(data, crc=0):
        """CRC-32C of `data` (bytes-like), continuing from `crc`."""
        return _gcrc.extend(crc, bytes(data))
except ImportError:  # pragma: no cover - depends on the environment
    crc32c = _crc32c_py


def mask(crc):
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


def unmask(masked):
    rot = (masked - _MASK_DELTA) & 0xFFFFFFFF
    return ((rot >> 17) | (rot << 15)) & 0xFFFFFFFF


def masked_crc32c(data):
    """The masked CRC-32C TFRecord framing stores for `data`."""
    return mask(crc32c(data))
