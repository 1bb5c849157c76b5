"""Lossy transfer compression (white paper 5.5): a float32 crosses devices or tasks as its
upper 16 bits (sign, exponent, 7 mantissa bits: the bfloat16 layout), and the receiver fills
the lost 16 mantissa bits with zeros. Truncation, not rounding: TensorFlow's bfloat16 Cast
rounds to nearest even, which is why tfg does not write a Cast pair for this.

    >>> words = truncate(np.float32([1.0, 3.14159274, -2.5e-3]))
    >>> words                                  # the upper halves, as uint16
    array([16256, 16457, 47907], dtype=uint16)
    >>> widen(words)                           # low 16 bits zero
    array([ 1.0000000e+00,  3.1406250e+00, -2.4871826e-03], dtype=float32)

Where it applies: `_Send`/`_Recv` pairs that carry the attr COMPRESS_ATTR ("bf16"), written
by `tfg partition --compress-transfers bf16`, and RecvTensor pulls of `tfg run --cluster
--compress-transfers bf16`. Only float32 tensors are compressed; others travel whole.
"""
import numpy as np

COMPRESS_ATTR = "_tfg_compress"
WORD = np.dtype(np.uint16)  # what a compressed float32 crosses as
MODES = ("none", "bf16")


def truncate(arr, xp=np):
    """float32 array -> uint16 array of each element's upper 16 bits, same shape (NaN stays
    NaN unless its payload lived only in the low bits, where it becomes an infinity: as the
    paper's scheme, tfg keeps the rule exact rather than special-casing it). `xp`: numpy or
    CuPy, for a value on a GPU."""
    a = xp.asarray(arr, dtype=np.float32)
    # (ascontiguousarray makes a scalar 1-d: the shape is put back)
    words = (xp.ascontiguousarray(a).view(np.uint32) >> 16).astype(np.uint16)
    return words.reshape(a.shape)


def widen(words, shape=None, xp=np):
    """uint16 words -> float32 with the low 16 bits zero (the receiver's side)."""
    w = xp.asarray(words, dtype=np.uint16)
    out = (xp.ascontiguousarray(w).astype(np.uint32) << 16).view(np.float32)
    return out.reshape(w.shape if shape is None else shape)


def roundtrip(arr):
    """What the receiver gets for a float32 `arr` sent compressed."""
    return widen(truncate(arr), np.shape(arr))


def applies(value):
    """Whether a value is compressed in transfer (float32 arrays only)."""
    return getattr(value, "dtype", None) == np.float32


def marked(node):
    """Whether a _Send/_Recv node carries COMPRESS_ATTR "bf16" (tfg partition wrote it)."""
    mode = node.get_attr(COMPRESS_ATTR, b"") if node.has_attr(COMPRESS_ATTR) else b""
    return (mode.decode() if isinstance(mode, bytes) else mode) == "bf16"
