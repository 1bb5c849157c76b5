"""Stateless random ops: TensorFlow's exact bits from (shape, seed) or (shape, key, counter, alg).

    StatelessRandomUniform(shape=[2, 3], seed=[1, 2]) -> the same floats TensorFlow gives
    StatelessRandomGetKeyCounter(seed=[1, 2]) -> key [1] uint64, counter [2] uint64

Every op is a Philox4x32-10 stream (tfg/kernels/philox.py) turned into values the way
TensorFlow's CPU kernels do (lib/random/random_distributions.h, core/kernels/random_op_cpu.h):

- The V1 ops scramble their [2] seed into a key and counter (GenerateKey); the V2 ops take
  the key ([1] uint64) and counter ([2] uint64) as given, with alg 1 (Philox) or 3 (auto
  select: Philox on a CPU). ThreeFry (alg 2) runs only under XLA in TensorFlow: refused.
- Output element i takes 32-bit word i of the stream (4 words per Philox block); 64-bit values
  (double, int64) take words 2i and 2i+1, the first as the low half. half and bfloat16 take
  the low 16 bits of word i.
- Uniform floats put random mantissa bits under the exponent of 1.0 and subtract 1.
- Normals are Box-Muller on pairs: float (and half, bfloat16) from words (2j, 2j+1), double
  from one whole block. They use the C library's log/sin/cos as TensorFlow does (glibc's
  logf/sinf/cosf for float), through ctypes and Python's math module: numpy's own
  transcendentals round differently in about one value in a hundred.
- Truncated normals draw Box-Muller pairs from a sequential stream that starts at block
  256 * g for the g-th group of 4 floats (128 * g for groups of 2 doubles), keeping values
  inside two standard deviations in order until the group is full.
- Bounded ints are lo + bits % (hi - lo) (32 or 64 bits, unsigned), full-range ints the bits.
- StatelessMultinomial draws one double (two words) per sample, rows one after another from
  the start of the stream, as TensorFlow's CPU kernel does when it runs the batch as one
  shard. TensorFlow splits a costly batch (about batch x 50 x (num_samples x log2(classes)
  + classes) above 2e5 cycles) across its intra-op threads and starts each shard's rows at
  block first_row * (num_samples + 3) / 4, so there its bits depend on its thread count:
  tfg's rows after the first shard differ from TensorFlow's.

Not differentiable (TensorFlow's NotDifferentiable; tfg/passes/grad/random_grads.py).
"""
import math

import numpy as np

from tfg.kernels import philox
from tfg.kernels._util import fail, np_dtype, shape_vector, tf_dims
from tfg.errors import TfgInputError
from tfg.kernels.registry import kernel

PHILOX, THREEFRY, AUTO_SELECT = 1, 2, 3
_TRUNCATE = 2.0  # truncated normals keep |x| < 2 (standard deviations)
_BLOCKS_RESERVED_PER_FLOAT = 256 // 4  # TF's kReservedSamplesPerOutput / words per block
_BOX_MULLER_EPS32 = np.float32(1.0e-7)  # u1 is raised to this before its log
_BOX_MULLER_EPS64 = 1.0e-7
_CHUNK_BLOCKS = 1 << 18  # Philox blocks made at once (its temporaries stay ~10 MB)


# --- generators --------------------------------------------------------------------------
def _v1_generator(seed):
    """(key, counter) from a V1 op's seed, or the error TensorFlow gives for its shape."""
    s = np.asarray(seed)
    if s.shape != (2,):
        fail(f"seed must have shape [2], not {tf_dims(s.shape)}")
    return philox.key_counter_from_seed(*s.tolist())


def _alg(alg):
    a = np.asarray(alg)
    if a.ndim:
        fail(f"alg must be a scalar, got shape {tf_dims(a.shape)}")
    a = int(a)
    return PHILOX if a == AUTO_SELECT else a


def _check_key_counter(alg, key, counter):
    """TensorFlow's CheckKeyCounterShape: key [1], counter at least the algorithm's size."""
    key, counter = np.asarray(key), np.asarray(counter)
    if key.shape != (1,):
        fail(f"key must have shape [1], not {tf_dims(key.shape)}. (Note that batched keys "
             "are not supported yet.)")
    size = 1 if alg == THREEFRY else 2
    if counter.ndim != 1 or counter.shape[0] < size:
        fail(f"counter must be a vector with length at least {size}; got shape: "
             f"{tf_dims(counter.shape)}. (Note that batched counters are not supported yet.)")
    return key, counter


def _v2_generator(alg, key, counter):
    """(key, counter) of a V2 op's Philox stream; any other algorithm is refused."""
    if alg != PHILOX:
        why = " (ThreeFry runs only under XLA in TensorFlow)" if alg == THREEFRY else ""
        fail(f"Unsupported algorithm id: {alg}{why}")
    return philox.key_counter_from_uint64(key, counter)


def _dims(shape):
    dims = shape_vector(shape, "shape")
    if any(d < 0 for d in dims):
        fail(f"shape must be non-negative, got {list(dims)}")
    return dims


def _words(gen, n):
    """The first n 32-bit words of the stream (uint32), made in bounded chunks."""
    key, counter = gen
    out = np.empty(-(-n // 4) * 4, np.uint32)
    blocks = out.reshape(-1, 4)
    for start in range(0, blocks.shape[0], _CHUNK_BLOCKS):
        stop = min(start + _CHUNK_BLOCKS, blocks.shape[0])
        blocks[start:stop] = philox.blocks(key, counter, start, stop - start)
    return out[:n]


def _pairs64(lo, hi):
    """uint64 values whose low 32 bits are `lo` and high 32 bits `hi`."""
    return lo.astype(np.uint64) | (hi.astype(np.uint64) << np.uint64(32))


# --- uniform floats in [0, 1) --------------------------------------------------------------
def _float32_of(words):
    """Uint32ToFloat: 23 random mantissa bits under 1.0's exponent, minus 1."""
    bits = (words & np.uint32(0x7FFFFF)) | np.uint32(127 << 23)
    return bits.view(np.float32) - np.float32(1.0)


def _float64_of(x0, x1):
    """Uint64ToDouble(x0, x1): 20 mantissa bits from x0 above 32 from x1, minus 1."""
    man = _pairs64(x1, x0 & np.uint32(0xFFFFF))
    return (man | np.uint64(1023 << 52)).view(np.float64) - 1.0


def _half_of(words):
    """Uint16ToHalf: the word's low 10 bits as half's mantissa, minus 1."""
    bits = ((words & np.uint32(0x3FF)) | np.uint32(15 << 10)).astype(np.uint16)
    return bits.view(np.float16) - np.float16(1.0)


def _bfloat16_bits_of(words):
    """Uint16ToGfloat16 as bfloat16 bit patterns (uint16): 7 mantissa bits, minus 1 (exact in
    float32, so the float32 result's top half)."""
    f = (((words & np.uint32(0x7F)) | np.uint32(127 << 7)) << np.uint32(16)).view(np.float32)
    return bfloat16_bits(f - np.float32(1.0))


def bfloat16_bits(f32):
    """float32 -> bfloat16 bit patterns (uint16), rounded to nearest even as Eigen does."""
    bits = np.ascontiguousarray(f32, np.float32).view(np.uint32)
    rounded = (bits + np.uint32(0x7FFF) + ((bits >> np.uint32(16)) & np.uint32(1)))
    out = (rounded >> np.uint32(16)).astype(np.uint16)
    nan = np.isnan(f32)
    out[nan] = (bits[nan] >> np.uint32(16)).astype(np.uint16) | np.uint16(0x40)
    return out


def _uniform(gen, n, dt):
    if dt == np.float64:
        w = _words(gen, 2 * n)
        return _float64_of(w[0::2], w[1::2])
    w = _words(gen, n)
    if dt == np.float32:
        return _float32_of(w)
    if dt == np.float16:
        return _half_of(w)
    return _bfloat16_bits_of(w).view(dt)  # (dt: ml_dtypes' bfloat16)


# --- the C library's log, sin and cos -------------------------------------------------------
_LIBM = {}
# glibc's largest errors of logf (0.818 units in the last place) and sinf/cosf (0.561): its
# float result can differ from the double-precision value rounded to float only where that
# value lies more than 1 - error (0.182, 0.439) units from the rounded float. Below these
# margins (a little lower) the two agree; only values beyond them go through the library:
# about 70% of logs, 20% of sines and cosines.
_F32_MARGIN_ULPS = {"logf": 0.15, "sinf": 0.40, "cosf": 0.40}
_F32_APPROX = {"logf": np.log, "sinf": np.sin, "cosf": np.cos}


def _libm():
    """The C library's maths (glibc's libm.so.6, else what find_library names), or None."""
    import ctypes  # lazy: only float normals need it
    try:
        return ctypes.CDLL("libm.so.6")
    except OSError:
        import ctypes.util  # lazy: imports subprocess (17 ms); only without glibc
        path = ctypes.util.find_library("m")
        try:
            return ctypes.CDLL(path) if path else None
        except OSError:
            return None


def _libm_function(name):
    """The C library's float function `name` through ctypes (None where there is no libm)."""
    if name not in _LIBM:
        import ctypes  # lazy: only float normals need it
        fn = getattr(_libm(), name, None)
        if fn is not None:
            fn.restype, fn.argtypes = ctypes.c_float, [ctypes.c_float]
        _LIBM[name] = fn
    return _LIBM[name]


def _libm_float32(name, x):
    """The C library's `name` (logf, sinf, cosf) of each float32 in x: the double-precision
    value rounded to float, recomputed through the library where they could differ."""
    shape, x = x.shape, x.reshape(-1)
    exact = _F32_APPROX[name](x.astype(np.float64))
    y = exact.astype(np.float32)
    fn = _libm_function(name)
    if fn is None:  # no C library to ask: within one unit in the last place of TF's
        return y.reshape(shape)
    gap = np.spacing(np.nextafter(np.abs(y), np.float32(0)))  # the smaller ulp at 2**k
    with np.errstate(invalid="ignore", divide="ignore"):
        off = np.abs(exact - y.astype(np.float64)) / gap.astype(np.float64)
    redo = np.flatnonzero(~(off <= _F32_MARGIN_ULPS[name]))
    if redo.size:
        y[redo] = np.fromiter(map(fn, x[redo].tolist()), np.float32, redo.size)
    return y.reshape(shape)


def _libm_float64(fn, x):
    """math.log/sin/cos (the C library's double functions) of each value in x."""
    return np.fromiter(map(fn, x.reshape(-1).tolist()), np.float64, x.size).reshape(x.shape)


# --- normals ----------------------------------------------------------------------------------
def _box_muller32(x0, x1):
    """BoxMullerFloat on word arrays: (sin(v) * r, cos(v) * r) in float32, as TF computes it
    (v rounded to float from the double 2 * pi * u, sincosf, float products)."""
    u1 = np.maximum(_float32_of(x0), _BOX_MULLER_EPS32)
    v1 = ((2.0 * math.pi) * _float32_of(x1).astype(np.float64)).astype(np.float32)
    radius = np.sqrt(np.float32(-2.0) * _libm_float32("logf", u1))
    return _libm_float32("sinf", v1) * radius, _libm_float32("cosf", v1) * radius


def _box_muller64(x0, x1, x2, x3):
    """BoxMullerDouble: u1 from words (x0, x1), the angle from (x2, x3), libm's log/sincos."""
    u1 = np.maximum(_float64_of(x0, x1), _BOX_MULLER_EPS64)
    v1 = (2.0 * math.pi) * _float64_of(x2, x3)
    radius = np.sqrt(-2.0 * _libm_float64(math.log, u1))
    return _libm_float64(math.sin, v1) * radius, _libm_float64(math.cos, v1) * radius


def _normal_candidates(words, wide):
    """Box-Muller values of a (..., 4k) word array in stream order: two per pair of words
    (float) or two per block of four (double)."""
    if wide:
        d0, d1 = _box_muller64(*(words[..., i::4] for i in range(4)))
    else:
        d0, d1 = _box_muller32(words[..., 0::2], words[..., 1::2])
    out = np.empty(d0.shape[:-1] + (2 * d0.shape[-1],), d0.dtype)
    out[..., 0::2], out[..., 1::2] = d0, d1
    return out


def _narrow(f32, dt):
    """float32 values as the op's dtype (float16 or bfloat16: rounded to nearest even)."""
    if dt == np.float32:
        return f32
    if dt == np.float16:
        return f32.astype(np.float16)
    return bfloat16_bits(f32).view(dt)


def _normal(gen, n, dt):
    wide = dt == np.float64
    values = _normal_candidates(_words(gen, -(-n // 2) * (4 if wide else 2)), wide)[:n]
    return values if wide else _narrow(values, dt)


def _truncated_normal(gen, n, dt):
    """TruncatedNormalDistribution: group g (4 floats, 2 doubles) reads a sequential stream
    from block g * 256 / (values per block); candidates outside (-2, 2) are skipped."""
    wide = dt == np.float64
    per_group = 2 if wide else 4
    skip = _BLOCKS_RESERVED_PER_FLOAT * per_group
    groups = -(-n // per_group)
    out = np.empty((groups, per_group), np.float64 if wide else np.float32)
    pending, nblocks = np.arange(groups, dtype=np.uint64), 1
    while pending.size:
        starts = pending[:, None] * np.uint64(skip) + np.arange(nblocks, dtype=np.uint64)
        words = philox.blocks_at(*gen, starts.reshape(-1)).reshape(pending.size, -1)
        cand = _normal_candidates(words, wide)
        keep = np.abs(cand) < _TRUNCATE
        keep &= np.cumsum(keep, axis=1) <= per_group
        full = keep.sum(axis=1) == per_group
        out[pending[full]] = cand[full][keep[full]].reshape(-1, per_group)
        pending, nblocks = pending[~full], nblocks * 2
    values = out.reshape(-1)[:n]
    return values if wide else _narrow(values, dt)


# --- integers -----------------------------------------------------------------------------
def _int_bits(gen, n, dt):
    """n raw values of dt's width as unsigned ints: one word each, or two (low word first)."""
    if dt.itemsize == 8:
        w = _words(gen, 2 * n)
        return _pairs64(w[0::2], w[1::2])
    return _words(gen, n)


def _uniform_full_int(gen, n, dt):
    return _int_bits(gen, n, dt).view(dt)


def _bounded_int(lo, hi, dt):
    """The distribution of UniformDistribution<int>: lo + bits % (hi - lo), in unsigned
    arithmetic of dt's width (so the sum wraps as TensorFlow's does)."""
    lo, hi = np.asarray(lo), np.asarray(hi)
    for name, v in (("minval", lo), ("maxval", hi)):
        if v.ndim:
            fail(f"{name} must be 0-D, got shape {tf_dims(v.shape)}")
    lo, hi = int(lo), int(hi)
    if not lo < hi:
        fail(f"Need minval < maxval, got {lo} >= {hi}")
    udt = np.dtype(f"uint{dt.itemsize * 8}")
    mask = (1 << (dt.itemsize * 8)) - 1
    ulo, span = udt.type(lo & mask), udt.type((hi - lo) & mask)

    def draw(gen, n, _dt):
        return (ulo + _int_bits(gen, n, dt) % span).view(dt)
    return draw


# --- kernels --------------------------------------------------------------------------------
def _out_dtype(ctx, attr="dtype"):
    """The numpy dtype of the output attr; bfloat16 needs ml_dtypes (as tfg's other ops)."""
    try:
        return np_dtype(ctx.attrs[attr])
    except TfgInputError as e:
        fail(f"{e} (bfloat16 needs the ml_dtypes package)")


def _v1_seed_shape(seed):
    shape = np.shape(seed)
    if shape != (2,):
        fail(f"seed must have shape [2], not {tf_dims(shape)}")


def _v1(draw_for):
    """A V1 kernel (shape, seed, *bounds): TF checks the shape and seed, returns an empty
    output as it is, and only then reads the bounds and scrambles the seed."""
    def run(ctx, shape, seed, *bounds):
        dims = _dims(shape)
        _v1_seed_shape(seed)
        dt = _out_dtype(ctx)
        if not math.prod(dims):
            return np.zeros(dims, dt)
        return draw_for(dt, *bounds)(_v1_generator(seed), math.prod(dims), dt).reshape(dims)
    return run


def _v2(draw_for):
    """A V2 kernel (shape, key, counter, alg, *bounds), in TensorFlow's order of checks."""
    def run(ctx, shape, key, counter, alg, *bounds):
        alg = _alg(alg)
        dims = _dims(shape)
        key, counter = _check_key_counter(alg, key, counter)
        dt = _out_dtype(ctx)
        if not math.prod(dims):
            return np.zeros(dims, dt)
        gen = _v2_generator(alg, key, counter)
        return draw_for(dt, *bounds)(gen, math.prod(dims), dt).reshape(dims)
    return run


def _same(draw):
    """draw_for of the distributions that take no bounds."""
    return lambda dt: draw


def _bounded(dt, minval, maxval):
    """draw_for of the bounded int ops."""
    if dt.kind == "u":  # TensorFlow's XLA kernels take them, with other bits than these
        fail(f"bounded random {dt.name} has no CPU kernel in TensorFlow (int32, int64 only)")
    return _bounded_int(minval, maxval, dt)


kernel("StatelessRandomUniform")(_v1(_same(_uniform)))
kernel("StatelessRandomNormal")(_v1(_same(_normal)))
kernel("StatelessTruncatedNormal")(_v1(_same(_truncated_normal)))
kernel("StatelessRandomUniformInt")(_v1(_bounded))
kernel("StatelessRandomUniformV2")(_v2(_same(_uniform)))
kernel("StatelessRandomNormalV2")(_v2(_same(_normal)))
kernel("StatelessTruncatedNormalV2")(_v2(_same(_truncated_normal)))
kernel("StatelessRandomUniformIntV2")(_v2(_bounded))
kernel("StatelessRandomUniformFullIntV2")(_v2(_same(_uniform_full_int)))


@kernel("StatelessRandomGetKeyCounter")
def stateless_random_get_key_counter(ctx, seed):
    return list(philox.key_counter_to_uint64(*_v1_generator(seed)))


@kernel("StatelessRandomGetKeyCounterAlg")
def stateless_random_get_key_counter_alg(ctx, seed):
    key, counter = philox.key_counter_to_uint64(*_v1_generator(seed))
    return [key, counter, np.array(PHILOX, np.int32)]


@kernel("StatelessRandomGetAlg")
def stateless_random_get_alg(ctx):
    """The algorithm TensorFlow picks on a CPU: Philox."""
    return np.array(PHILOX, np.int32)


def multinomial_sizes(op, logits, num_samples):
    """(batch, num_samples) of a Multinomial or StatelessMultinomial call, refusing what
    TensorFlow's MultinomialOp refuses, in its words (both ops share its checks)."""
    if logits.dtype.kind != "f" and logits.dtype.name != "bfloat16":
        fail(f"{op} of {logits.dtype.name} logits has no CPU kernel in TensorFlow (half, "
             "bfloat16, float, double only)")
    if logits.ndim != 2:
        fail(f"logits should be a matrix, got shape {tf_dims(logits.shape)}")
    if num_samples.ndim:
        fail(f"num_samples should be a scalar, got shape {tf_dims(num_samples.shape)}")
    ns = int(num_samples)
    if ns < 0:
        fail(f"num_samples should be non-negative, got {ns}")
    batch, classes = logits.shape
    if classes <= 0:
        fail(f"num_classes should be positive, got {classes}")
    return batch, ns


@kernel("StatelessMultinomial")
def stateless_multinomial(ctx, logits, num_samples, seed):
    logits, ns = np.asarray(logits), np.asarray(num_samples)
    batch, ns = multinomial_sizes("StatelessMultinomial", logits, ns)
    _v1_seed_shape(seed)
    out = np.zeros((batch, ns), _out_dtype(ctx, "output_dtype"))
    if out.size:
        w = _words(_v1_generator(seed), 2 * batch * ns)
        draws = _float64_of(w[0::2], w[1::2]).reshape(batch, ns)
        for b in range(batch):
            out[b] = _sample_row(logits[b], draws[b])
    return out


def _sample_row(row, uniforms):
    """Class indices for one row: the uniforms scaled by the unnormalised CDF of exp(logit -
    max) over finite logits, each found by upper bound (TF's MultinomialFunctor on a CPU)."""
    row = row.astype(np.float64)
    finite = np.isfinite(row)
    top = row[finite].max() if finite.any() else 0.0  # (no finite logit: every weight 0)
    with np.errstate(over="ignore", invalid="ignore"):
        weights = np.where(finite, np.exp(row - top), 0.0)
    cdf = np.cumsum(weights)
    return np.searchsorted(cdf, uniforms * cdf[-1], side="right")
