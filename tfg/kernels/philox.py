"""Philox4x32-10, the counter-based generator behind TensorFlow's stateless random ops
(TensorFlow's lib/random/philox_random.h), vectorised over blocks with numpy.

A generator is a key (two uint32) and a 128-bit counter (four uint32, little end first). Each
call gives one block of four uint32 and advances the counter by one; `Skip(n)` advances it by
n blocks. Here `blocks(key, counter, start, n)` gives the n blocks a generator would give after
skipping `start` blocks, as an (n, 4) uint32 array, all at once.

    >>> blocks((0, 0), (0, 0, 0, 0), 0, 1)      # Random123's known-answer vector
    array([[1713891541, 3781805453, 3159862348, 2600524760]], dtype=uint32)
    >>> key, counter = key_counter_from_seed(1, 2)
"""
import numpy as np

_M0, _M1 = np.uint64(0xD2511F53), np.uint64(0xCD9E8D57)  # round multipliers
_W0, _W1 = 0x9E3779B9, 0xBB67AE85                          # key increments (Weyl sequence)
_LOW32 = np.uint64(0xFFFFFFFF)
_SHIFT32 = np.uint64(32)
_ROUNDS = 10

# GenerateKey (stateless_random_ops.cc) runs the seed through Philox under this fixed key.
_SEED_KEY = (0x3EC8F720, 0x02461E29)


def _mul_hi_lo(m, x):
    """The high and low 32 bits of the 64-bit product of uint32 values (x held in uint64)."""
    prod = m * x
    return prod >> _SHIFT32, prod & _LOW32


def _rounds(c0, c1, c2, c3, k0, k1):
    """Ten Philox rounds over counter words held as uint64 arrays (values below 2**32)."""
    for r in range(_ROUNDS):
        hi0, lo0 = _mul_hi_lo(_M0, c0)
        hi1, lo1 = _mul_hi_lo(_M1, c2)
        c0, c1, c2, c3 = hi1 ^ c1 ^ np.uint64(k0), lo1, hi0 ^ c3 ^ np.uint64(k1), lo0
        if r + 1 < _ROUNDS:
            k0, k1 = (k0 + _W0) & 0xFFFFFFFF, (k1 + _W1) & 0xFFFFFFFF
    return c0, c1, c2, c3


def _counters(counter, start, n):
    """The four counter words (uint64 arrays) of blocks start .. start+n-1: a 128-bit add of
    the block index to `counter`, carrying from the low 64 bits into the high 64."""
    base_lo = np.uint64(int(counter[0]) | (int(counter[1]) << 32))
    base_hi = np.uint64(int(counter[2]) | (int(counter[3]) << 32))
    steps = np.arange(n, dtype=np.uint64)
    start = int(start)
    lo = steps + np.uint64(start & 0xFFFFFFFFFFFFFFFF)  # wraps modulo 2**64
    carry = (lo < steps).astype(np.uint64)  # overflow of start + step itself
    lo = lo + base_lo
    carry += (lo < base_lo).astype(np.uint64)
    hi = base_hi + np.uint64(start >> 64) + carry
    return lo & _LOW32, lo >> _SHIFT32, hi & _LOW32, hi >> _SHIFT32


def blocks(key, counter, start, n):
    """The n Philox blocks (an (n, 4) uint32 array) after skipping `start` blocks."""
    out = np.empty((n, 4), np.uint32)
    if n:
        words = _rounds(*_counters(counter, start, n), int(key[0]), int(key[1]))
        for i, w in enumerate(words):
            out[:, i] = w
    return out


def blocks_at(key, counter, starts):
    """One Philox block per entry of `starts` (an int array of block offsets): (len, 4)."""
    starts = np.asarray(starts, np.uint64)
    out = np.empty((starts.size, 4), np.uint32)
    if starts.size:
        c0, c1, c2, c3 = _counters(counter, 0, 1)
        lo = (c0 | (c1 << _SHIFT32)) + starts
        hi = (c2 | (c3 << _SHIFT32)) + (lo < starts).astype(np.uint64)
        words = _rounds(lo & _LOW32, lo >> _SHIFT32, hi & _LOW32, hi >> _SHIFT32,
                        int(key[0]), int(key[1]))
        for i, w in enumerate(words):
            out[:, i] = w
    return out


def key_counter_from_seed(seed0, seed1):
    """TensorFlow's GenerateKey: a [2] seed (each value taken as uint64, so a negative int32
    sign-extends) -> (key, counter). One Philox block of the seed under a fixed key gives the
    key (words 0, 1) and the high half of the counter (words 2, 3); the low half is zero."""
    s0, s1 = int(seed0) & 0xFFFFFFFFFFFFFFFF, int(seed1) & 0xFFFFFFFFFFFFFFFF
    mix = blocks(_SEED_KEY, (s0 & 0xFFFFFFFF, s0 >> 32, s1 & 0xFFFFFFFF, s1 >> 32), 0, 1)[0]
    return (int(mix[0]), int(mix[1])), (0, 0, int(mix[2]), int(mix[3]))


def key_counter_from_uint64(key, counter):
    """A V2 op's key ([1] uint64) and counter ([2] uint64, Philox) as Philox words."""
    k = int(key[0])
    c0, c1 = int(counter[0]), int(counter[1])
    return ((k & 0xFFFFFFFF, k >> 32),
            (c0 & 0xFFFFFFFF, c0 >> 32, c1 & 0xFFFFFFFF, c1 >> 32))


def key_counter_to_uint64(key, counter):
    """Philox words -> the [1] uint64 key and [2] uint64 counter StatelessRandomGetKeyCounter
    outputs."""
    k = np.array([key[0] | (key[1] << 32)], np.uint64)
    c = np.array([counter[0] | (counter[1] << 32), counter[2] | (counter[3] << 32)], np.uint64)
    return k, c
