"""CRC-32C (Castagnoli), and the masked form TFRecord files store.

    >>> crc32c(b"123456789") == 0xE3069283
    True
    >>> masked_crc32c(b"")      # what a TFRecord writes after an empty payload
    2726488792

Computed by `google_crc32c` (a dependency: its C extension runs at GB/s, and the package
falls back to its own pure-Python code on a platform without a wheel). TFRecord masks CRCs
so that a CRC of data that itself holds CRCs stays well mixed:
masked = rotate_right(crc, 15) + 0xa282ead8 (mod 2**32).
"""
import google_crc32c

_MASK_DELTA = 0xA282EAD8


def crc32c(data, crc=0):
    """CRC-32C of `data` (bytes-like), continuing from `crc`."""
    return google_crc32c.extend(crc, data if isinstance(data, bytes) else bytes(data))


def mask(crc):
    return (((crc >> 15) | (crc << 17)) + _MASK_DELTA) & 0xFFFFFFFF


def unmask(masked):
    rot = (masked - _MASK_DELTA) & 0xFFFFFFFF
    return ((rot >> 17) | (rot << 15)) & 0xFFFFFFFF


def masked_crc32c(data):
    """The masked CRC-32C TFRecord framing stores for `data`."""
    return mask(crc32c(data))
