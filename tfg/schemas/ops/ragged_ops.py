"""Signatures of TensorFlow's string-hashing ops (string_ops.cc, array_ops.cc's Fingerprint) and
the ragged and bincount ops text models carry (ragged_conversion_ops.cc, ragged_math_ops.cc,
ragged_array_ops.cc, math_ops.cc): Keras TextVectorization pads with RaggedTensorToTensor and
counts with RaggedBincount; Keras Hashing and feature columns hash with StringToHashBucket*.

    >>> get_op("RaggedRange").attrs["Tsplits"].default
    <DType.INT64: 9>

Outputs whose size comes from input VALUES read them here, so that the memory guard sizes them
before the kernel allocates: RaggedTensorToTensor's shape from its `shape` input and, where
that says -1, from the row partitions (number of rows, longest row per level); RaggedRange's
values from starts/limits/deltas; the bincounts' from `size`.
"""
import numpy as np

from tfg.schemas.ops.registry import op
from tfg.schemas.ops.shape_fns import ShapeError, unchanged, with_rank, with_rank_at_least

_SPLITS = "Tsplits: {int32, int64} = DT_INT64"


# --- hashing --------------------------------------------------------------------------------
def fingerprint_shape(ctx):
    """[batch, 8]: data has at least one dimension, method is a scalar."""
    data = with_rank_at_least(ctx.shape(0), 1, "data")
    with_rank(ctx.shape(1), 0, "method")
    return [(None if data is None else data[0], 8)]


for _name, _input in (("StringToHashBucketFast", "input"), ("StringToHashBucket",
                                                             "string_tensor")):
    op(_name,
       inputs=[f"{_input}: string"],
       outputs=["output: int64"],
       attrs=["num_buckets: int >= 1"],
       shape_fn=unchanged)
op("StringToHashBucketStrong",
   inputs=["input: string"],
   outputs=["output: int64"],
   attrs=["num_buckets: int >= 1", "key: list(int)"],
   shape_fn=unchanged)
op("Fingerprint",
   inputs=["data: T", "method: string"],
   outputs=["fingerprint: uint8"],
   attrs=["T: type"],
   shape_fn=fingerprint_shape)


# --- RaggedTensorToTensor -------------------------------------------------------------------
def _partition_types(ctx):
    return [t.decode() if isinstance(t, bytes) else str(t)
            for t in ctx.attr("row_partition_types")]


def _known_partition_dims(ctx, types):
    """[nrows, width per ragged level] from the partitions' values where every one is known
    and well formed; None otherwise (the kernel then names what is wrong)."""
    values = [ctx.value(3 + i) for i in range(len(types))]
    if any(v is None for v in values):
        return None
    try:
        if types[0] == "FIRST_DIM_SIZE":
            dims, levels = [int(np.asarray(values[0]).reshape(()))], zip(types[1:], values[1:])
        else:
            dims, levels = [], zip(types, values)
        for kind, v in levels:
            v = np.asarray(v).reshape(-1).astype(np.int64)
            if kind == "ROW_SPLITS":
                if not dims:
                    dims.append(v.size - 1)
                dims.append(int(np.diff(v).max()) if v.size > 1 else 0)
            elif kind == "VALUE_ROWIDS" and dims:
                dims.append(_longest_run(v))
            else:
                return None
    except (ValueError, TypeError):
        return None
    return dims if all(d >= 0 for d in dims) else None


def _longest_run(ids):
    """The longest run of equal consecutive ids (a row's length, as TensorFlow counts it)."""
    if ids.size == 0:
        return 0
    starts = np.flatnonzero(np.diff(ids)) + 1
    edges = np.concatenate([[0], starts, [ids.size]])
    return int(np.diff(edges).max())


def ragged_tensor_to_tensor_shape(ctx):
    """[rows, widths of the ragged levels..., values' inner dims]: each from the `shape` input
    where it names one, else from the partitions' values where known."""
    types = _partition_types(ctx)
    for t in types:
        if t not in ("ROW_SPLITS", "VALUE_ROWIDS", "FIRST_DIM_SIZE", "ROW_LENGTHS"):
            raise ShapeError(f"Unknown string for partition info type: {t}")
    if types and types[0] == "VALUE_ROWIDS":
        raise ShapeError("VALUE_ROWIDS cannot be first")
    ragged_rank = len(types) - (1 if types and types[0] == "FIRST_DIM_SIZE" else 0)
    values = ctx.shape(1)
    if values is None:
        return [None]
    values = with_rank_at_least(values, 1, "values")
    out = [None] * (1 + ragged_rank) + list(values[1:])
    requested = ctx.shape_tensor(0)
    if requested is not None:
        if len(requested) != len(out):
            raise ShapeError(f"rt_input.shape and shape={list(requested)} are incompatible: "
                             f"rt_input.rank = {len(out)} but shape.rank = {len(requested)}")
        for i, d in enumerate(requested):
            if d is None or d == -1:
                continue
            if d < -1:
                raise ShapeError(f"Dimension {d} must be >= -1")
            if i > ragged_rank and out[i] is not None and out[i] != d:
                raise ShapeError(f"rt_input.shape and shape={list(requested)} are "
                                 f"incompatible: rt_input.shape[{i}] = {out[i]} but "
                                 f"shape[{i}] = {d}")
            out[i] = d
    # The partitions decide a dim only where `shape` is known to leave it to them (-1, or a
    # scalar -1 for every dim): a `shape` not known here may crop the rows (a gradient's
    # Shape(dy)), so a dim it might set stays unknown.
    requested_value = ctx.value(0)
    if requested_value is not None and any(d is None for d in out[:1 + ragged_rank]):
        requested_value = np.asarray(requested_value).reshape(-1)
        free = [requested_value.size == 1 and requested_value[0] == -1
                or (i < requested_value.size and requested_value[i] == -1)
                for i in range(1 + ragged_rank)]
        known = _known_partition_dims(ctx, types)
        if known is not None and len(known) == 1 + ragged_rank:
            out[:1 + ragged_rank] = [k if d is None and f else d
                                     for d, k, f in zip(out[:1 + ragged_rank], known, free)]
    return [tuple(out)]


op("RaggedTensorToTensor",
   inputs=["shape: Tshape", "values: T", "default_value: T",
           "row_partition_tensors: num_row_partition_tensors * Tindex"],
   outputs=["result: T"],
   attrs=["T: type", "Tindex: {int64, int32}", "Tshape: {int64, int32}",
          "num_row_partition_tensors: int >= 1", "row_partition_types: list(string)"],
   shape_fn=ragged_tensor_to_tensor_shape)


# --- RaggedTensorToSparse, RaggedRange, RaggedGather ----------------------------------------
def ragged_to_sparse_shape(ctx):
    """indices [nvals, ragged_rank + values' rank], values [nvals, ...]... flattened to the
    values' element count, dense_shape [ragged_rank + values' rank]."""
    k = ctx.attr("RAGGED_RANK")
    values = ctx.shape(k)
    if values is None:
        return [(None, None), (None,), (None,)]
    values = with_rank_at_least(values, 1, "rt_dense_values")
    rank = k + len(values)
    inner = 1
    for d in values[1:]:
        inner = None if d is None or inner is None else inner * d
    count = None if values[0] is None or inner is None else values[0] * inner
    return [(count, rank), (count,), (rank,)]


op("RaggedTensorToSparse",
   inputs=["rt_nested_splits: RAGGED_RANK * Tsplits", "rt_dense_values: T"],
   outputs=["sparse_indices: int64", "sparse_values: T", "sparse_dense_shape: int64"],
   attrs=["RAGGED_RANK: int >= 1", "T: type", _SPLITS],
   shape_fn=ragged_to_sparse_shape)


def ragged_range_rows(starts, limits, deltas):
    """The (start, limit, delta) of each output row, the scalar inputs broadcast, as three
    1-D arrays; ValueError when the vector inputs' lengths differ."""
    arrs = [np.asarray(v) for v in (starts, limits, deltas)]
    lengths = {a.size for a in arrs if a.ndim == 1}
    if len(lengths) > 1:
        raise ValueError("starts, limits, and deltas must have the same shape")
    n = lengths.pop() if lengths else 1
    return [np.broadcast_to(a.reshape(-1), (n,)) if a.ndim == 1 else np.full(n, a.reshape(()))
            for a in arrs]


def ragged_range_sizes(start, limit, delta):
    """Each row's length as TensorFlow's RangeSize counts it: 0 where the range runs the wrong
    way, else ceil(|limit - start| / |delta|), integers exactly (as Python ints), floats in
    their own precision; deltas must be non-zero. Returns int64 sizes, or an object array of
    Python ints where an int64 would overflow."""
    wrong_way = ((delta > 0) & (limit < start)) | ((delta < 0) & (limit > start))
    if start.dtype.kind in "iu":
        span = np.abs(limit.astype(np.float64) - start.astype(np.float64))
        if span.size and span.max() >= 2.0 ** 62:  # int64 differences would overflow
            size = np.array([(abs(int(lo) - int(s)) + abs(int(d)) - 1) // abs(int(d))
                             for s, lo, d in zip(start, limit, delta)], dtype=object)
        else:
            d = np.abs(delta.astype(np.int64))
            size = (np.abs(limit.astype(np.int64) - start.astype(np.int64)) + d - 1) // d
    else:
        with np.errstate(all="ignore"):
            ratio = np.ceil(np.abs((limit - start) / delta)).astype(np.float64)
        size = np.where(np.isfinite(ratio), ratio, np.inf)
        if size.size and size.max() > 2.0 ** 62:
            return np.where(wrong_way, 0, size)  # float: only to be refused by its size
        size = size.astype(np.int64)
    return np.where(wrong_way, 0, size)


def ragged_range_shape(ctx):
    """splits [nrows + 1], values [total]: nrows from the vector inputs, the total from the
    inputs' values where known (what the memory guard sizes before the kernel runs)."""
    nrows = 1
    for i, what in enumerate(("starts", "limits", "deltas")):
        s = ctx.shape(i)
        if s is not None and len(s) > 1:
            raise ShapeError(f"{what} must be a scalar or vector")
        if s is None or (len(s) == 1 and s[0] is None):
            nrows = None if nrows == 1 else nrows
        elif len(s) == 1:
            if nrows not in (1, None) and nrows != s[0]:
                raise ShapeError("starts, limits, and deltas must have the same shape")
            nrows = s[0]
    vals = [ctx.value(i) for i in range(3)]
    total = None
    if all(v is not None for v in vals):
        try:
            rows = ragged_range_rows(*vals)
        except ValueError:
            rows = None
        if rows is not None and not (rows[2] == 0).any():
            total = int(sum(ragged_range_sizes(*rows)))
    return [(None if nrows is None else nrows + 1,), (total,)]


op("RaggedRange",
   inputs=["starts: T", "limits: T", "deltas: T"],
   outputs=["rt_nested_splits: Tsplits", "rt_dense_values: T"],
   attrs=["T: {bfloat16, float, double, int32, int64} = DT_INT32", _SPLITS],
   shape_fn=ragged_range_shape)


def ragged_gather_shape(ctx):
    """OUTPUT_RAGGED_RANK splits of unknown length and values [?, params' inner dims]."""
    k = ctx.attr("PARAMS_RAGGED_RANK")
    out_k = ctx.attr("OUTPUT_RAGGED_RANK")
    indices = ctx.shape(k + 1)
    if indices is not None and len(indices) + k - 1 != out_k:
        raise ShapeError(f"OUTPUT_RAGGED_RANK must be indices.rank + PARAMS_RAGGED_RANK - 1 "
                         f"= {len(indices) + k - 1}, got {out_k}")
    values = ctx.shape(k)
    dense = None if values is None else (None,) + tuple(
        with_rank_at_least(values, 1, "params_dense_values")[1:])
    return [(None,)] * out_k + [dense]


op("RaggedGather",
   inputs=["params_nested_splits: PARAMS_RAGGED_RANK * Tsplits", "params_dense_values: Tvalues",
           "indices: Tindices"],
   outputs=["output_nested_splits: OUTPUT_RAGGED_RANK * Tsplits",
            "output_dense_values: Tvalues"],
   attrs=["Tvalues: type", "Tindices: {int32, int64}", _SPLITS, "PARAMS_RAGGED_RANK: int >= 1",
          "OUTPUT_RAGGED_RANK: int >= 0"],
   shape_fn=ragged_gather_shape)


# --- RaggedBincount, SparseBincount ---------------------------------------------------------
def _size(ctx, i):
    with_rank(ctx.shape(i), 0, "size")
    n = ctx.scalar(i)
    if n is not None and n < 0:
        raise ShapeError(f"size ({n}) must be non-negative")
    return n


def ragged_bincount_shape(ctx):
    """[rows, size], rows = len(splits) - 1."""
    splits = with_rank(ctx.shape(0), 1, "splits")
    rows = None if splits[0] is None else max(splits[0] - 1, 0)
    return [(rows, _size(ctx, 2))]


def sparse_bincount_shape(ctx):
    """[size] for a 1-D sparse input, else [dense_shape[0], size]."""
    size = _size(ctx, 3)
    shape = with_rank(ctx.shape(2), 1, "dense_shape")
    if shape[0] == 1:
        return [(size,)]
    if shape[0] is None:
        return [None]
    elems = ctx.elems(2)  # (a higher rank counts by its first index, as TensorFlow's kernel)
    return [(elems[0] if elems is not None else None, size)]


op("RaggedBincount",
   inputs=["splits: int64", "values: Tidx", "size: Tidx", "weights: T"],
   outputs=["output: T"],
   attrs=["Tidx: {int32, int64}", "T: {int32, int64, float, double}",
          "binary_output: bool = false"],
   shape_fn=ragged_bincount_shape)
op("SparseBincount",
   inputs=["indices: int64", "values: Tidx", "dense_shape: int64", "size: Tidx", "weights: T"],
   outputs=["output: T"],
   attrs=["Tidx: {int32, int64}", "T: {int32, int64, float, double}",
          "binary_output: bool = false"],
   shape_fn=sparse_bincount_shape)
