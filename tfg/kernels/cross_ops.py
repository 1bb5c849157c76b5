"""TensorFlow's feature-crossing ops (sparse_cross_op.cc), CPU only as in TensorFlow, bit for bit.
Per batch row, every combination of one feature from each input, the inputs in order (sparse
ones first, then dense ones, as the op lists them), the last input varying fastest; the output
is a SparseTensor [batch, most crosses in a row] with the crosses at [row, 0..count).

    SparseCross, out_type string:  the features joined by "_X_" (int64s in decimal).
    SparseCross, out_type int64:   h = hash_key, then h = FingerprintCat64(h, f) for each
                                   feature f: a string's Fingerprint64, an int64 itself; then
                                   h % num_buckets (h % (2**63 - 1) when num_buckets is 0).
                                   (out_type decides, whatever hashed_output says, as in TF.)
    SparseCrossV2:                 as SparseCross's strings, joined by the `sep` input.
    SparseCrossHashed:             h = the first feature's hash, then FingerprintCat64 with
                                   each next one's; % num_buckets when positive, else
                                   % (2**63 - 1). A feature's hash: strong_hash: SipHash-2-4
                                   keyed by `salt`; else a string's Fingerprint64, a dense
                                   int64 itself. An int64 of a SPARSE input is hashed over its
                                   first 4 bytes (TF reads sizeof(DataType) bytes of it), as is
                                   a strong hash's; a strong hash of an int64 DENSE input
                                   crashes TensorFlow 2.21 and is refused here.

Features are hashed once per input element (Python ints, the published algorithms in
hash_ops); the crosses are built on whole arrays, in chunks of CHUNK, and refused past
MAX_CROSSES (a hostile cross: ten inputs of 1000 features in a row would be 1e30).
"""
import numpy as np

from tfg.kernels._util import fail, tf_dims
from tfg.kernels.hash_ops import MASK, fingerprint64, siphash24
from tfg.kernels.registry import kernel
from tfg.schemas.dtypes import DType
from tfg.schemas.ops.cross_ops import cross_layout

# More crosses than this in one call are refused: TensorFlow has no limit, but beyond it the
# outputs take gigabytes and building them minutes (1 GiB of output indices at the limit).
MAX_CROSSES = 1 << 26
CHUNK = 1 << 20
INT64_MAX = (1 << 63) - 1
_K_MUL = np.uint64(0xc6a4a7935bd1e995)
_SHIFT = np.uint64(47)
_DT_STRING, _DT_INT64 = 7, 9  # (the DataType numbers TensorFlow's messages print)


def _is_string(x):
    return x.dtype.kind in "OSU"


def _as_bytes(s):
    """A string element as bytes (a str, which a hand-built Const may hold, as UTF-8)."""
    return s.encode() if isinstance(s, str) else bytes(s)


# --- inputs -----------------------------------------------------------------------------------
def _split(ctx, args):
    """(indices, values, shapes, dense, the op's own inputs after them) as numpy arrays."""
    n = int(ctx.attrs["N"])
    ns, nd = len(ctx.attrs["sparse_types"]), len(ctx.attrs["dense_types"])
    arrs = [np.asarray(a) for a in args]
    return (arrs[:n], arrs[n:n + ns], arrs[n + ns:2 * n + ns],
            arrs[2 * n + ns:2 * n + ns + nd], arrs[2 * n + ns + nd:])


def _check_internal_type(x, internal_string, what):
    """SparseCross with internal_type string takes no int64 input."""
    if internal_string and not _is_string(x):
        fail(f"{what} should be of internal type {_DT_STRING} but received {_DT_INT64} "
             f"(internal_type string, an int64 input)")


def _validate(indices, values, shapes, dense, internal_string=False):
    """TensorFlow's ValidateInput, its checks in its order; -> the batch size."""
    n = len(indices)
    for i, x in enumerate(indices):
        if x.ndim != 2:
            fail(f"Input indices should be a matrix but received shape {tf_dims(x.shape)} "
                 f"at position {i}")
        if x.shape[1] != 2:
            fail(f"Expected D2 of index to be 2 got {x.shape[1]} at position {i}")
    if len(values) != n:
        fail(f"Expected {n} input values, got {len(values)}")
    for i, x in enumerate(values):
        _check_internal_type(x, internal_string, "Input values")
        if x.ndim != 1:
            fail(f"Input values should be a vector but received shape {tf_dims(x.shape)} at "
                 f"position {i}")
        if indices[i].shape[0] != x.shape[0]:
            fail(f"Expected size of values to be {indices[i].shape[0]} got {x.shape[0]} at "
                 f"position {i}")
    for i, x in enumerate(shapes):
        if x.ndim != 1:
            fail(f"Input shapes should be a vector but received shape {tf_dims(x.shape)} at "
                 f"position {i}")
        if x.size != 2:
            fail(f"shape should imply a 2D tensor, but got {tf_dims(x.shape)} at position {i}")
    for i, x in enumerate(dense):
        _check_internal_type(x, internal_string, "Dense inputs")
        if x.ndim != 2:
            fail(f"Dense inputs should be a matrix but received shape {tf_dims(x.shape)} at "
                 f"position {i}")
    batch = int(shapes[0][0]) if shapes else (dense[0].shape[0] if dense else 0)
    for i, x in enumerate(shapes):
        if int(x[0]) != batch:
            fail(f"Expected batch size {batch} got {int(x[0])} at position {i}")
    for i, x in enumerate(dense):
        if x.shape[0] != batch:
            fail(f"Expected batch size {batch} got {x.shape[0]} at dense tensor {i}")
    if batch < 0:  # (TensorFlow sizes a vector by it and aborts)
        fail(f"Expected a non-negative batch size, got {batch}")
    return batch


def _scalar(x, what, dtype):
    if x.size != 1 or x.ndim != 0:
        fail(f"{what} must be a scalar, got shape {tf_dims(x.shape)}")
    return dtype(x.reshape(()))


# --- features ---------------------------------------------------------------------------------
def _decimal(x):
    """Each element as bytes: strings as they are, int64s in decimal (std::to_string)."""
    out = np.empty(x.size, object)
    if _is_string(x):
        out[:] = [_as_bytes(s) for s in x.reshape(-1)]
    else:
        out[:] = [str(int(v)).encode() for v in x.reshape(-1)]
    return out


def _fingerprints(x):
    """uint64 per element: a string's Fingerprint64, an int64 itself."""
    if _is_string(x):
        return np.fromiter((fingerprint64(_as_bytes(s)) for s in x.reshape(-1)), np.uint64,
                           count=x.size)
    return x.reshape(-1).astype(np.int64).view(np.uint64)


def _low4(v):
    """An int64's first 4 bytes in memory (little-endian), what TF hashes of it."""
    return (int(v) & 0xffffffff).to_bytes(4, "little")


def _keyed_hashes(x, dense, strong, key):
    """SparseCrossHashed's per-element uint64 hashes (the module docstring's rules)."""
    flat = x.reshape(-1)
    if strong:
        if not _is_string(x) and dense:
            fail("SparseCrossHashed with strong_hash=True on an int64 dense input is not "
                 "supported (TensorFlow crashes on it)")
        data = (_as_bytes(s) for s in flat) if _is_string(x) else (_low4(v) for v in flat)
        return np.fromiter((siphash24(key[0], key[1], d) for d in data), np.uint64,
                           count=flat.size)
    if _is_string(x) or dense:
        return _fingerprints(x)
    return np.fromiter((fingerprint64(_low4(v)) for v in flat), np.uint64, count=flat.size)


# --- the crosses ------------------------------------------------------------------------------
def _fingerprint_cat(fp1, fp2):
    """TensorFlow's FingerprintCat64 on uint64 arrays (wrapping multiplies)."""
    r = fp1 ^ _K_MUL
    m = fp2 * _K_MUL
    r ^= (m ^ (m >> _SHIFT)) * _K_MUL
    r *= _K_MUL
    r = (r ^ (r >> _SHIFT)) * _K_MUL
    return r ^ (r >> _SHIFT)


def _layout(indices, dense, batch, op):
    layout = cross_layout([x[:, 0] for x in indices], [x.shape[1] for x in dense], batch)
    if layout.total > MAX_CROSSES:
        fail(f"{op} would make {layout.total} crosses (up to {layout.widest} in a row), more "
             f"than tfg's limit of {MAX_CROSSES}")
    return layout


def _chunks(layout):
    """(row, position in row, [element of each column]) per chunk of the output, in order:
    the position decomposed in mixed radix over the columns' counts, the last fastest; an
    element indexes its column's flattened input (a dense one's row * width + feature)."""
    ends = np.cumsum(layout.per_row.astype(np.int64))
    begins = ends - layout.per_row.astype(np.int64)
    for a in range(0, layout.total, CHUNK):
        pos = np.arange(a, min(a + CHUNK, layout.total), dtype=np.int64)
        at = np.searchsorted(ends, pos, side="right")
        k = pos - begins[at]
        elems = [None] * len(layout.counts)
        rest = k
        for i in range(len(layout.counts) - 1, -1, -1):
            count = layout.counts[i][at]
            feature = rest % count
            rest = rest // count
            elems[i] = layout.starts[i][at] + feature
        yield layout.rows[at], k, elems


def _dense_elems(elems, rows, widths):
    """Dense columns' (row, feature) as flat indices; widths None for a sparse column."""
    return [e if w is None else rows * w + e for e, w in zip(elems, widths)]


def _cross(layout, features, widths, combine, out_dtype):
    """The output SparseTensor: combine([per column, the features of each cross]) per chunk."""
    indices = np.empty((layout.total, 2), np.int64)
    values = np.empty(layout.total, out_dtype)
    done = 0
    for rows, k, elems in _chunks(layout):
        cols = [f[e] for f, e in zip(features, _dense_elems(elems, rows, widths))]
        m = rows.size
        indices[done:done + m, 0], indices[done:done + m, 1] = rows, k
        values[done:done + m] = combine(cols)
        done += m
    return indices, values, np.array([layout.batch, layout.widest], np.int64)


def _joined(sep):
    def combine(cols):
        out = cols[0]
        for c in cols[1:]:
            out = out + sep + c
        return out
    return combine


def _hashed(start, num_buckets):
    """FingerprintCat64 from `start` (None: the first feature) -> % num_buckets or INT64_MAX."""
    modulus = np.uint64(num_buckets if num_buckets > 0 else INT64_MAX)

    def combine(cols):
        h = cols[0] if start is None else _fingerprint_cat(np.full(cols[0].size, start,
                                                                   np.uint64), cols[0])
        for c in cols[1:]:
            h = _fingerprint_cat(h, c)
        return (h % modulus).astype(np.int64)
    return combine


def _widths(indices, dense):
    return [None] * len(indices) + [x.shape[1] for x in dense]


@kernel("SparseCross")
def sparse_cross(ctx, *args):
    indices, values, shapes, dense, _ = _split(ctx, args)
    internal_string = ctx.attrs["internal_type"] == DType.STRING
    batch = _validate(indices, values, shapes, dense, internal_string)
    layout = _layout(indices, dense, batch, "SparseCross")
    inputs = values + dense
    if ctx.attrs["out_type"] == DType.STRING:
        return _cross(layout, [_decimal(x) for x in inputs], _widths(indices, dense),
                      _joined(b"_X_"), object)
    key = int(ctx.attrs["hash_key"]) & MASK  # (the int64 attr, read as uint64)
    return _cross(layout, [_fingerprints(x) for x in inputs], _widths(indices, dense),
                  _hashed(key, int(ctx.attrs["num_buckets"])), np.int64)


@kernel("SparseCrossV2")
def sparse_cross_v2(ctx, *args):
    indices, values, shapes, dense, (sep,) = _split(ctx, args)
    batch = _validate(indices, values, shapes, dense)
    if sep.ndim != 0:
        fail(f"Input separator should be a scalar. Received: a string tensor of shape "
             f"{tf_dims(sep.shape)}")
    layout = _layout(indices, dense, batch, "SparseCrossV2")
    return _cross(layout, [_decimal(x) for x in values + dense], _widths(indices, dense),
                  _joined(_as_bytes(sep.reshape(())[()])), object)


@kernel("SparseCrossHashed")
def sparse_cross_hashed(ctx, *args):
    indices, values, shapes, dense, (num_buckets, strong_hash, salt) = _split(ctx, args)
    batch = _validate(indices, values, shapes, dense)
    buckets = _scalar(num_buckets, "num_buckets", int)
    strong = _scalar(strong_hash, "strong_hash", bool)
    if salt.size != 2:
        fail(f'Input "salt" must have length 2 but has length {salt.size}')
    key = [int(v) & MASK for v in salt.reshape(-1)]
    layout = _layout(indices, dense, batch, "SparseCrossHashed")
    features = ([_keyed_hashes(x, False, strong, key) for x in values]
                + [_keyed_hashes(x, True, strong, key) for x in dense])
    return _cross(layout, features, _widths(indices, dense), _hashed(None, buckets), np.int64)
