"""TensorFlow's string-hashing ops (string_to_hash_bucket_op.cc, fingerprint_op.cc), CPU only
as in TensorFlow, bit for bit:

    StringToHashBucketFast:   FarmHash's Fingerprint64 of each string's bytes % num_buckets.
    StringToHashBucketStrong: SipHash-2-4 keyed by the `key` attr's two uint64s % num_buckets.
    StringToHashBucket:       TensorFlow's Hash64 (a MurmurHash64A, seed 0xDECAFCAFFE) of each
                              string % num_buckets (the deprecated op).
    Fingerprint:              "farmhash64" per row of the input (its first dimension the batch):
                              for numbers Fingerprint64 of the row's bytes; for strings each
                              string's Fingerprint64, and where a row holds more than one string,
                              Fingerprint64 of those 8-byte fingerprints laid end to end; written
                              as 8 little-endian bytes per row (uint8 [batch, 8]).

The algorithms are the published ones (FarmHash's farmhashna::Hash64, which its Fingerprint64
is; SipHash-2-4; TensorFlow's core/platform/hash.cc), on Python ints masked to 64 bits, one
string at a time. The remainder is that of the unsigned 64-bit hash, as TensorFlow's `%`.
"""
import numpy as np

from tfg.kernels._util import fail
from tfg.kernels.registry import kernel
from tfg.schemas.dtypes import DType

MASK = (1 << 64) - 1

# --- FarmHash Fingerprint64 (farmhashna::Hash64) ----------------------------------------------
K0 = 0xc3a5c85c97cb3127
K1 = 0xb492b66fbe98f273
K2 = 0x9ae16a3b2f90404f


def _fetch64(s, i):
    return int.from_bytes(s[i:i + 8], "little")


def _fetch32(s, i):
    return int.from_bytes(s[i:i + 4], "little")


def _rotate(v, shift):
    """64-bit rotate right (FarmHash's Rotate); shift is never 0 here."""
    return ((v >> shift) | (v << (64 - shift))) & MASK


def _shift_mix(v):
    return v ^ (v >> 47)


def _hash_len16(u, v, mul):
    """FarmHash's HashLen16 with a multiplier: a Murmur-inspired mix of two words."""
    a = ((u ^ v) * mul) & MASK
    a ^= a >> 47
    b = ((v ^ a) * mul) & MASK
    b ^= b >> 47
    return (b * mul) & MASK


def _hash_len0_to16(s):
    n = len(s)
    if n >= 8:
        mul = K2 + n * 2
        a = (_fetch64(s, 0) + K2) & MASK
        b = _fetch64(s, n - 8)
        c = (_rotate(b, 37) * mul + a) & MASK
        d = ((_rotate(a, 25) + b) * mul) & MASK
        return _hash_len16(c, d, mul)
    if n >= 4:
        mul = K2 + n * 2
        a = _fetch32(s, 0)
        return _hash_len16((n + (a << 3)) & MASK, _fetch32(s, n - 4), mul)
    if n > 0:
        # the first, middle and last bytes, combined in 32-bit arithmetic
        y = (s[0] + (s[n >> 1] << 8)) & 0xFFFFFFFF
        z = (n + (s[n - 1] << 2)) & 0xFFFFFFFF
        return (_shift_mix(((y * K2) ^ (z * K0)) & MASK) * K2) & MASK
    return K2


def _hash_len17_to32(s):
    n = len(s)
    mul = K2 + n * 2
    a = (_fetch64(s, 0) * K1) & MASK
    b = _fetch64(s, 8)
    c = (_fetch64(s, n - 8) * mul) & MASK
    d = (_fetch64(s, n - 16) * K2) & MASK
    return _hash_len16((_rotate((a + b) & MASK, 43) + _rotate(c, 30) + d) & MASK,
                       (a + _rotate((b + K2) & MASK, 18) + c) & MASK, mul)


def _hash_len33_to64(s):
    n = len(s)
    mul = K2 + n * 2
    a = (_fetch64(s, 0) * K2) & MASK
    b = _fetch64(s, 8)
    c = (_fetch64(s, n - 8) * mul) & MASK
    d = (_fetch64(s, n - 16) * K2) & MASK
    y = (_rotate((a + b) & MASK, 43) + _rotate(c, 30) + d) & MASK
    z = _hash_len16(y, (a + _rotate((b + K2) & MASK, 18) + c) & MASK, mul)
    e = (_fetch64(s, 16) * mul) & MASK
    f = _fetch64(s, 24)
    g = ((y + _fetch64(s, n - 32)) * mul) & MASK
    h = ((z + _fetch64(s, n - 24)) * mul) & MASK
    return _hash_len16((_rotate((e + f) & MASK, 43) + _rotate(g, 30) + h) & MASK,
                       (e + _rotate((f + a) & MASK, 18) + g) & MASK, mul)


def _weak_hash_len32(s, i, a, b):
    """FarmHash's WeakHashLen32WithSeeds over the 32 bytes at s[i:] -> a pair of words."""
    w, x, y, z = (_fetch64(s, i + 8 * k) for k in range(4))
    a = (a + w) & MASK
    b = _rotate((b + a + z) & MASK, 21)
    c = a
    a = (a + x + y) & MASK
    b = (b + _rotate(a, 44)) & MASK
    return (a + z) & MASK, (b + c) & MASK


def _hash_long(s):
    """farmhashna::Hash64 of more than 64 bytes: 64-byte blocks through a 56-byte state, then
    the last 64 bytes (overlapping the last block) with a state-dependent multiplier."""
    n = len(s)
    seed = 81
    x = seed
    y = (seed * K1 + 113) & MASK
    z = (_shift_mix((y * K2 + 113) & MASK) * K2) & MASK
    v0 = v1 = w0 = w1 = 0
    x = (x * K2 + _fetch64(s, 0)) & MASK
    end = ((n - 1) // 64) * 64
    last64 = end + ((n - 1) & 63) - 63
    for i in range(0, end, 64):
        x = (_rotate((x + y + v0 + _fetch64(s, i + 8)) & MASK, 37) * K1) & MASK
        y = (_rotate((y + v1 + _fetch64(s, i + 48)) & MASK, 42) * K1) & MASK
        x ^= w1
        y = (y + v0 + _fetch64(s, i + 40)) & MASK
        z = (_rotate((z + w0) & MASK, 33) * K1) & MASK
        v0, v1 = _weak_hash_len32(s, i, (v1 * K1) & MASK, (x + w0) & MASK)
        w0, w1 = _weak_hash_len32(s, i + 32, (z + w1) & MASK, (y + _fetch64(s, i + 16)) & MASK)
        z, x = x, z
    mul = K1 + ((z & 0xff) << 1)
    i = last64
    w0 = (w0 + ((n - 1) & 63)) & MASK
    v0 = (v0 + w0) & MASK
    w0 = (w0 + v0) & MASK
    x = (_rotate((x + y + v0 + _fetch64(s, i + 8)) & MASK, 37) * mul) & MASK
    y = (_rotate((y + v1 + _fetch64(s, i + 48)) & MASK, 42) * mul) & MASK
    x ^= (w1 * 9) & MASK
    y = (y + v0 * 9 + _fetch64(s, i + 40)) & MASK
    z = (_rotate((z + w0) & MASK, 33) * mul) & MASK
    v0, v1 = _weak_hash_len32(s, i, (v1 * mul) & MASK, (x + w0) & MASK)
    w0, w1 = _weak_hash_len32(s, i + 32, (z + w1) & MASK, (y + _fetch64(s, i + 16)) & MASK)
    z, x = x, z
    return _hash_len16((_hash_len16(v0, w0, mul) + _shift_mix(y) * K0 + z) & MASK,
                       (_hash_len16(v1, w1, mul) + x) & MASK, mul)


def fingerprint64(s):
    """FarmHash's Fingerprint64 of the bytes s (TensorFlow's tensorflow::Fingerprint64)."""
    n = len(s)
    if n <= 16:
        return _hash_len0_to16(s)
    if n <= 32:
        return _hash_len17_to32(s)
    if n <= 64:
        return _hash_len33_to64(s)
    return _hash_long(s)


# --- SipHash-2-4 ------------------------------------------------------------------------------
def _rotl(v, shift):
    return ((v << shift) | (v >> (64 - shift))) & MASK


def _sip_rounds(v0, v1, v2, v3, count):
    for _ in range(count):
        v0 = (v0 + v1) & MASK
        v1 = _rotl(v1, 13) ^ v0
        v0 = _rotl(v0, 32)
        v2 = (v2 + v3) & MASK
        v3 = _rotl(v3, 16) ^ v2
        v0 = (v0 + v3) & MASK
        v3 = _rotl(v3, 21) ^ v0
        v2 = (v2 + v1) & MASK
        v1 = _rotl(v1, 17) ^ v2
        v2 = _rotl(v2, 32)
    return v0, v1, v2, v3


def siphash24(k0, k1, s):
    """SipHash-2-4 of the bytes s under the 128-bit key (k0, k1) (TensorFlow's
    StrongKeyedHash): 8-byte little-endian words, the last padded and tagged with len % 256."""
    v0, v1 = k0 ^ 0x736f6d6570736575, k1 ^ 0x646f72616e646f6d
    v2, v3 = k0 ^ 0x6c7967656e657261, k1 ^ 0x7465646279746573
    n = len(s)
    full = n - n % 8
    words = [_fetch64(s, i) for i in range(0, full, 8)]
    words.append(int.from_bytes(s[full:], "little") | ((n & 0xff) << 56))
    for m in words:
        v3 ^= m
        v0, v1, v2, v3 = _sip_rounds(v0, v1, v2, v3, 2)
        v0 ^= m
    v2 ^= 0xff
    v0, v1, v2, v3 = _sip_rounds(v0, v1, v2, v3, 4)
    return v0 ^ v1 ^ v2 ^ v3


# --- TensorFlow's Hash64 (core/platform/hash.cc) -----------------------------------------------
_MURMUR_MUL = 0xc6a4a7935bd1e995
TF_HASH64_SEED = 0xDECAFCAFFE


def tf_hash64(s, seed=TF_HASH64_SEED):
    """TensorFlow's Hash64: MurmurHash64A over 8-byte little-endian words, the 1-7 byte tail
    mixed in as one little-endian word."""
    m = _MURMUR_MUL
    n = len(s)
    h = (seed ^ (n * m)) & MASK
    full = n - n % 8
    for i in range(0, full, 8):
        k = (_fetch64(s, i) * m) & MASK
        k = ((k ^ (k >> 47)) * m) & MASK
        h = ((h ^ k) * m) & MASK
    if n % 8:
        h = ((h ^ int.from_bytes(s[full:], "little")) * m) & MASK
    h = ((h ^ (h >> 47)) * m) & MASK
    return h ^ (h >> 47)


# --- the kernels ------------------------------------------------------------------------------
def _buckets(strings, hash_fn, num_buckets):
    """hash_fn of each string % num_buckets as int64, the shape of `strings`."""
    if num_buckets < 1:
        fail(f"num_buckets must be >= 1, got {num_buckets}")  # (the OpDef's minimum)
    arr = np.asarray(strings, dtype=object)
    out = np.fromiter((hash_fn(_as_bytes(s)) % num_buckets for s in arr.reshape(-1)),
                      dtype=np.int64, count=arr.size)
    return out.reshape(arr.shape)


def _as_bytes(s):
    """A string element as bytes (a str, which a hand-built Const may hold, as UTF-8)."""
    return s.encode() if isinstance(s, str) else bytes(s)


@kernel("StringToHashBucketFast")
def string_to_hash_bucket_fast(ctx, strings):
    return _buckets(strings, fingerprint64, int(ctx.attrs["num_buckets"]))


@kernel("StringToHashBucket")
def string_to_hash_bucket(ctx, strings):
    return _buckets(strings, tf_hash64, int(ctx.attrs["num_buckets"]))


@kernel("StringToHashBucketStrong")
def string_to_hash_bucket_strong(ctx, strings):
    key = [int(k) for k in ctx.attrs["key"]]
    if len(key) != 2:
        fail("Key must have 2 elements")
    k0, k1 = key[0] & MASK, key[1] & MASK  # the int64 attrs, read as uint64
    return _buckets(strings, lambda s: siphash24(k0, k1, s), int(ctx.attrs["num_buckets"]))


def _fingerprint_rows(rows):
    """uint8 [len(rows), 8]: each row's Fingerprint64, little-endian."""
    out = np.array([fingerprint64(r) for r in rows], dtype="<u8").reshape(len(rows))
    return out.view(np.uint8).reshape(len(rows), 8)


@kernel("Fingerprint", host_inputs=(1,))
def fingerprint(ctx, data, method):
    """TensorFlow's FingerprintOp: per row of `data` (its first dimension) 8 bytes."""
    m = np.asarray(method, dtype=object)
    if m.ndim != 0:
        fail(f"`method` should be a scalar string: {list(m.shape)}")
    name = _as_bytes(m.reshape(-1)[0])
    if name != b"farmhash64":
        fail(f"Unsupported fingerprint method: {name.decode('utf-8', 'replace')}")
    dtype = ctx.attrs.get("T")
    if dtype in (DType.VARIANT, DType.RESOURCE):  # (no bytes to fingerprint)
        fail(f"Data type not supported: {dtype.tf_name}")
    x = np.asarray(data)
    if x.ndim < 1:
        fail(f"`data` should have at least one dimension: {list(x.shape)}")
    dim0 = x.shape[0]
    dim1 = x.size // dim0 if dim0 else 0
    if dim0 == 0:
        return np.zeros((0, 8), np.uint8)
    if x.dtype.kind in "OSU":
        strings = [_as_bytes(s) for s in x.reshape(-1)]
        if dim1 == 0:
            # TensorFlow leaves these rows unwritten (uninitialized); zeros are as good
            return np.zeros((dim0, 8), np.uint8)
        each = _fingerprint_rows(strings)
        if dim1 == 1:
            return each
        return _fingerprint_rows([r.tobytes() for r in each.reshape(dim0, dim1 * 8)])
    flat = np.ascontiguousarray(x).reshape(dim0, -1)
    return _fingerprint_rows([r.tobytes() for r in flat])
