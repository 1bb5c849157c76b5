"""TensorFlow's ragged ops and the bincounts of ragged and sparse inputs, CPU only as in
TensorFlow (ragged_tensor_to_tensor_op.cc, ragged_tensor_to_sparse_kernel.cc,
ragged_range_op.cc, ragged_gather_op.cc, bincount_op.cc):

    RaggedTensorToTensor: the ragged tensor (values + row partitions, ROW_SPLITS or
        FIRST_DIM_SIZE + VALUE_ROWIDS per level) padded with default_value into a dense tensor,
        cut or padded to the `shape` input where it gives a dim (-1: the longest row).
    RaggedTensorToSparse: every value's index (row, column per level, inner dims) -> a
        SparseTensor.
    RaggedRange: per row range(start, limit, delta), its values accumulated by `+= delta` in T.
    RaggedGather: rows of a ragged tensor picked by (possibly multi-dimensional) indices.
    RaggedBincount / SparseBincount: per row counts (or weight sums, or presence) of values in
        [0, size), values >= size dropped.

Splits are checked as TensorFlow checks them (first 0, non-decreasing, last the values'
count); where TensorFlow's kernel reads past its values instead of refusing, these refuse.
"""
import numpy as np

from tfg.kernels._util import fail, np_dtype, tf_dims
from tfg.kernels.registry import kernel
from tfg.schemas.ops.ragged_ops import ragged_range_rows, ragged_range_sizes


def _types(ctx):
    return [t.decode() if isinstance(t, bytes) else str(t)
            for t in ctx.attrs["row_partition_types"]]


# --- RaggedTensorToTensor -------------------------------------------------------------------
def _rows_of_splits(splits, parent_count):
    """(row, column) of each child of a ROW_SPLITS level, checked as TensorFlow checks it."""
    if splits.ndim != 1:
        fail(f"row_partition_tensors must be vectors, got shape {tf_dims(splits.shape)}")
    nrows = splits.size - 1
    if nrows > parent_count:
        fail(f"Row partition size is greater than output size: {nrows} > {parent_count}")
    if splits.size and (splits[0] != 0 or (np.diff(splits) < 0).any()):
        fail("Invalid row split size.")
    lengths = np.diff(splits)
    rows = np.repeat(np.arange(nrows, dtype=np.int64), lengths)
    starts = np.repeat(splits[:-1], lengths)
    return rows, np.arange(rows.size, dtype=np.int64) - starts


def _rows_of_rowids(ids, parent_count):
    """(row, column) of each child of a VALUE_ROWIDS level: a column counts along each run of
    equal ids; ids must lie in [0, parent_count) and be sorted."""
    if ids.ndim != 1:
        fail(f"row_partition_tensors must be vectors, got shape {tf_dims(ids.shape)}")
    if ids.size == 0:
        return ids.astype(np.int64), ids.astype(np.int64)
    if not 0 <= ids[0] < parent_count:
        fail(f"Got current_value_rowid={ids[0]} which is not less than {parent_count}")
    step = np.diff(ids)
    if (step < 0).any():
        k = int(np.flatnonzero(step < 0)[0])
        fail(f"value_rowids must be sorted: got {ids[k]} followed by {ids[k + 1]}")
    if ids[-1] >= parent_count:
        fail(f"Got next_value_rowid={ids[-1]} which is not less than {parent_count}")
    run_start = np.concatenate([[0], np.flatnonzero(step) + 1])
    run_id = np.cumsum(np.concatenate([[0], step != 0]))
    return ids.astype(np.int64), np.arange(ids.size, dtype=np.int64) - run_start[run_id]


def _width(cols):
    """The longest row of a level (0 when it has no children)."""
    return int(cols.max()) + 1 if cols.size else 0


def _levels(types, partitions, nvals):
    """[(row, column) per ragged level] and the number of rows, the first level's row count
    from its splits or FIRST_DIM_SIZE."""
    for t in types:
        if t not in ("ROW_SPLITS", "VALUE_ROWIDS", "FIRST_DIM_SIZE"):
            if t == "ROW_LENGTHS":
                fail(f"Cannot handle type {t}")
            fail(f"Unknown string for partition info type: {t}")
    if types[0] == "FIRST_DIM_SIZE":
        nrows = int(np.asarray(partitions[0]).reshape(-1)[0])
        if nrows < 0:
            fail(f"Dimension {nrows} must be >= 0")
        types, partitions = types[1:], partitions[1:]
    elif types[0] == "ROW_SPLITS":
        first = np.asarray(partitions[0])
        if first.size == 0:
            fail("Invalid first partition input. Tensor requires at least one element.")
        nrows = first.shape[0] - 1
    else:
        fail(f"Cannot handle {types[0]} in first dimension.")
    if not types:
        fail("row_partition_types has no ragged level after FIRST_DIM_SIZE")
    levels, count = [], nrows
    for t, p in zip(types, partitions):
        p = np.asarray(p).astype(np.int64)
        if t == "ROW_SPLITS":
            rows, cols = _rows_of_splits(p, count)
        elif t == "VALUE_ROWIDS":
            rows, cols = _rows_of_rowids(p, count)
        else:
            fail("FIRST_DIM_SIZE must be the first row partition type")
        levels.append((rows, cols))
        count = rows.size
    if count > nvals:
        fail(f"the row partitions describe {count} values, but values has only {nvals} "
             "(its first dimension)")
    return nrows, levels


def _output_shape(requested, computed, ragged_rank):
    """The `shape` input's dims where it gives them (>= 0), the computed ones where -1."""
    req = np.asarray(requested).astype(np.int64)
    if req.ndim == 0 or (req.ndim == 1 and req.size == 0 and len(computed) == 0):
        return list(computed)
    req = req.reshape(-1)
    if req.size != len(computed):
        fail(f"rt_input.shape and shape={tf_dims(req)} are incompatible: rt_input.rank = "
             f"{len(computed)} but shape.rank = {req.size}")
    out = []
    for i, (d, c) in enumerate(zip(req.tolist(), computed)):
        if d < -1:
            fail(f"Dimension {d} must be >= -1")
        if i > ragged_rank and d != -1 and d != c:
            fail(f"rt_input.shape and shape={tf_dims(req)} are incompatible: "
                 f"rt_input.shape[{i}] = {c} but shape[{i}] = {d}")
        out.append(c if d == -1 else d)
    return out


def _check_default(default, values):
    """default_value broadcasts to one value's shape (values.shape[1:]), as TensorFlow
    checks it."""
    d, v = default.shape, values.shape
    message = (f"default_value.shape={tf_dims(d)} and rt_input.flat_values.shape="
               f"{tf_dims(v)} are incompatible: ")
    if len(d) >= len(v):
        fail(f"{message}default_value.rank = {len(d)} must be less than "
             f"rt_input.flat_values.rank = {len(v)}")
    for k in range(1, len(d) + 1):
        if d[-k] not in (1, v[-k]):
            fail(f"{message}default_value.shape[{-k}] = {d[-k]} but "
                 f"rt_input.flat_values.shape[{-k}] = {v[-k]}")


def value_positions(nrows, levels, nvals, out_dims):
    """Each value's flat index among the output's ragged positions (prod of out_dims), or -1
    where the output cuts it off; values past the last level's children are -1 too."""
    index = np.where(np.arange(nrows) < out_dims[0], np.arange(nrows, dtype=np.int64), -1)
    for k, (rows, cols) in enumerate(levels):
        width = out_dims[k + 1]
        parent = index[rows] if rows.size else rows
        index = np.where((parent >= 0) & (cols < width), parent * width + cols, -1)
    return np.concatenate([index, np.full(nvals - index.size, -1, np.int64)])


@kernel("RaggedTensorToTensor", host_inputs=(0,))
def ragged_tensor_to_tensor(ctx, shape, values, default_value, *partitions):
    """The ragged tensor padded with default_value into the requested (or tightest) shape."""
    types = _types(ctx)
    values, default = np.asarray(values), np.asarray(default_value)
    if values.ndim == 0:
        fail("values must have rank at least 1")
    ragged_rank = len(types) - (1 if types[0] == "FIRST_DIM_SIZE" else 0)
    inner = list(values.shape[1:])
    nrows, levels = _levels(types, partitions, values.shape[0])
    dims = [nrows] + [_width(cols) for _, cols in levels] + inner
    dims = _output_shape(shape, dims, ragged_rank)
    _check_default(default, values)
    positions = value_positions(nrows, levels, values.shape[0], dims)
    out = np.empty(dims, values.dtype)
    out[...] = default  # (broadcast over every position, then the values written over it)
    flat = out.reshape((-1,) + tuple(inner))
    keep = positions >= 0
    flat[positions[keep]] = values[keep]
    return out


# --- RaggedTensorToSparse -------------------------------------------------------------------
def check_splits(splits, nvals, what="ragged splits"):
    """TensorFlow's checks of one level's splits against the count of its children."""
    if splits.ndim != 1:
        fail(f"{what} must be a vector, got shape {tf_dims(splits.shape)}")
    if splits.size == 0:
        fail(f"{what} may not be empty.")
    if splits[0] != 0:
        fail(f"First value of {what} must be 0.")
    step = np.diff(splits)
    if (step < 0).any():
        k = int(np.flatnonzero(step < 0)[0])
        fail(f"Ragged splits should be non decreasing, but we got {splits[k]} followed by "
             f"{splits[k + 1]}")
    if splits[-1] != nvals:
        fail(f"Final value of {what} must match the length the corresponding ragged values.")


@kernel("RaggedTensorToSparse")
def ragged_tensor_to_sparse(ctx, *args):
    """Each value's full index: its row and column per ragged level, then its inner index."""
    *nested, values = args
    values = np.asarray(values)
    if values.ndim == 0:
        fail("rt_dense_values must have rank at least 1")
    nested = [np.asarray(s).astype(np.int64) for s in nested]
    for k, s in enumerate(nested):
        children = nested[k + 1].size - 1 if k + 1 < len(nested) else values.shape[0]
        check_splits(s, children)
    # per value of the innermost level, the (row, column) it sits at in each level
    index = np.arange(values.shape[0], dtype=np.int64)
    columns = []
    for s in reversed(nested):
        rows = np.searchsorted(s, index, side="right") - 1
        columns.append(index - s[rows])
        index = rows
    columns.append(index)
    ragged = np.stack(columns[::-1], axis=1)  # [nvals, ragged_rank + 1]
    inner = values.shape[1:]
    count = int(np.prod(inner, dtype=np.int64))
    dense_idx = np.indices(inner).reshape(len(inner), -1).T if inner else np.zeros((1, 0), np.int64)
    indices = np.concatenate([np.repeat(ragged, count, axis=0),
                              np.tile(dense_idx, (values.shape[0], 1))], axis=1)
    widths = [int(np.diff(s).max()) if s.size > 1 else 0 for s in nested]
    dense_shape = [nested[0].size - 1] + widths + list(inner)
    return (indices.astype(np.int64).reshape(-1, len(dense_shape)), values.reshape(-1),
            np.array(dense_shape, np.int64))


# --- RaggedRange ----------------------------------------------------------------------------
@kernel("RaggedRange")
def ragged_range(ctx, starts, limits, deltas):
    """Per row range(start, limit, delta): values start, start + delta, ... accumulated in T
    as TensorFlow's loop adds them."""
    arrs = [np.asarray(v) for v in (starts, limits, deltas)]
    for a, what in zip(arrs, ("starts", "limits", "deltas")):
        if a.ndim > 1:
            fail(f"{what} must be a scalar or vector")
    try:
        start, limit, delta = ragged_range_rows(*arrs)
    except ValueError as e:
        fail(str(e))
    if (delta == 0).any():
        fail("Requires delta != 0")
    splits_dtype = np_dtype(ctx.attrs.get("Tsplits", "int64"))
    sizes = ragged_range_sizes(start, limit, delta)
    biggest = np.iinfo(splits_dtype).max
    if sizes.size and (max(sizes) > biggest or sum(sizes) > biggest):
        fail(f"Requires ((limit - start) / delta) <= {biggest}")
    sizes = np.asarray(sizes, dtype=np.int64)
    splits = np.concatenate([[0], np.cumsum(sizes)]).astype(splits_dtype)
    dtype = arrs[0].dtype
    out = np.empty(int(splits[-1]), dtype)
    for row in np.flatnonzero(sizes):
        steps = np.full(int(sizes[row]), delta[row], dtype)
        steps[0] = start[row]
        with np.errstate(over="ignore"):  # integers wrap as TensorFlow's += does
            out[splits[row]:splits[row + 1]] = np.cumsum(steps, dtype=dtype)
    return splits, out


# --- RaggedGather ---------------------------------------------------------------------------
def _check_gather_splits(splits, nvals):
    """RaggedGather's own checks: sorted splits, none past the values."""
    if splits.ndim != 1 or splits.size == 0:
        fail("Ragged splits must be a non-empty vector")
    if (np.diff(splits) < 0).any() or splits[0] < 0:
        fail("Ragged splits must be sorted")
    if splits[-1] > nvals:
        fail("Ragged splits must not point past values")


@kernel("RaggedGather")
def ragged_gather(ctx, *args):
    """output rows = params rows at `indices` (the indices' own dims become outer ragged
    levels of uniform length)."""
    *nested, values, indices = args
    values, idx = np.asarray(values), np.asarray(indices).astype(np.int64)
    nested = [np.asarray(s).astype(np.int64) for s in nested]
    for k, s in enumerate(nested):
        _check_gather_splits(s, nested[k + 1].size - 1 if k + 1 < len(nested)
                             else values.shape[0])
    nrows = nested[0].size - 1
    flat = idx.reshape(-1)
    bad = np.flatnonzero((flat < 0) | (flat >= nrows))
    if bad.size:
        k = int(bad[0])
        fail(f"indices[{k}] = {flat[k]} is not in [0, {nrows})")
    out_rank = ctx.attrs["OUTPUT_RAGGED_RANK"]
    if out_rank != idx.ndim + len(nested) - 1:
        fail(f"OUTPUT_RAGGED_RANK must be {idx.ndim + len(nested) - 1} for indices of rank "
             f"{idx.ndim} and PARAMS_RAGGED_RANK {len(nested)}, got {out_rank}")
    splits_dtype = np_dtype(ctx.attrs.get("Tsplits", "int64"))
    # the indices' outer dims: uniform rows of the inner dims' sizes
    outer = []
    for d in range(1, idx.ndim):
        count = int(np.prod(idx.shape[:d], dtype=np.int64))
        outer.append(np.arange(count + 1, dtype=np.int64) * idx.shape[d])
    # each params level: the picked rows' children, in order
    picked, splits_out = flat, []
    for s in nested:
        lengths = s[picked + 1] - s[picked]
        splits_out.append(np.concatenate([[0], np.cumsum(lengths)]))
        starts = np.repeat(s[picked], lengths)
        offsets = np.arange(int(lengths.sum()), dtype=np.int64) - np.repeat(
            splits_out[-1][:-1], lengths)
        picked = starts + offsets
    if idx.ndim == 0:  # one row: its own levels, without the row's [0, length]
        splits_out = splits_out[1:]
    out_splits = [o.astype(splits_dtype) for o in outer + splits_out]
    return (*out_splits, values[picked])


# --- RaggedBincount, SparseBincount ---------------------------------------------------------
def _bincount_size(size):
    n = int(np.asarray(size).reshape(-1)[0]) if np.asarray(size).size == 1 else None
    if n is None or np.asarray(size).ndim != 0:
        fail(f"size must be a scalar, got shape {tf_dims(np.asarray(size).shape)}")
    if n < 0:
        fail(f"size ({n}) must be non-negative")
    return n


def bincount_rows(rows, values, weights, nrows, size, binary, dtype):
    """[nrows, size] counts of values per row (values >= size dropped): the weights' sums in
    order when weights are given, ones with binary_output (weights then ignored)."""
    out = np.zeros((nrows, size), dtype)
    keep = values < size
    flat = rows[keep] * size + values[keep]
    if binary:
        out.reshape(-1)[flat] = 1
    elif weights is None:
        np.add.at(out.reshape(-1), flat, 1)
    else:
        np.add.at(out.reshape(-1), flat, weights[keep])  # in order, as TensorFlow's loop adds
    return out


def _weights(weights, count, binary):
    """The weights per value, None for none (empty weights or binary_output)."""
    w = np.asarray(weights).reshape(-1)
    if w.size == 0 or binary:
        return None
    if w.size != count:
        fail(f"weights must be empty or have one weight per value: {w.size} weights for "
             f"{count} values")
    return w


@kernel("RaggedBincount", host_inputs=(2,))
def ragged_bincount(ctx, splits, values, size, weights):
    """Per row of the ragged values (splits), its bincount."""
    n = _bincount_size(size)
    s, v = np.asarray(splits).astype(np.int64).reshape(-1), np.asarray(values).reshape(-1)
    if s.size == 0:
        fail("Splits must be non-empty")
    if s[0] != 0:
        fail(f"Splits must start with 0, not with {s[0]}")
    if s[-1] != v.size:
        fail(f"Splits must end with the number of values, got {s[-1]} instead of {v.size}")
    if v.size and v.min() < 0:
        fail("Input must be non-negative")
    binary = bool(ctx.attrs.get("binary_output", False))
    w = _weights(weights, v.size, binary)
    # each value's row as TensorFlow's forward scan finds it: the first split past the value's
    # position, which for splits that decrease somewhere is the running maximum's
    rows = np.searchsorted(np.maximum.accumulate(s), np.arange(v.size), side="right") - 1
    return bincount_rows(rows, v.astype(np.int64), w, s.size - 1, n, binary,
                         np.asarray(weights).dtype)


@kernel("SparseBincount", host_inputs=(2, 3))
def sparse_bincount(ctx, indices, values, dense_shape, size, weights):
    """Bincount of a SparseTensor's values: [size] for a vector, else per row (the first
    index)."""
    n = _bincount_size(size)
    idx, v = np.asarray(indices).astype(np.int64), np.asarray(values).reshape(-1)
    shape = np.asarray(dense_shape).astype(np.int64).reshape(-1)
    if idx.ndim != 2 or idx.shape[1] != shape.size:
        fail(f"indices must be a matrix of {shape.size} columns, got shape "
             f"{tf_dims(idx.shape)}")
    if idx.shape[0] != v.size:
        fail(f"Number of elements in indices ({idx.shape[0]}) and values ({v.size}) do not "
             "match")
    bad = np.flatnonzero(((idx < 0) | (idx >= shape)).any(axis=1))
    if bad.size:
        k = int(bad[0])
        fail(f"Sparse index tuple indices[{k}, :] = [{', '.join(map(str, idx[k]))}] is out of "
             "bounds")
    binary = bool(ctx.attrs.get("binary_output", False))
    w = np.asarray(weights).reshape(-1)
    if w.size and w.size != v.size:
        fail("Input indices and weights must have the same size.")
    if v.size and v.min() < 0:
        fail("Input arr must be non-negative!")
    w = None if (w.size == 0 or binary) else w
    dtype = np.asarray(weights).dtype
    if shape.size == 1:
        rows = np.zeros(v.size, np.int64)
        return bincount_rows(rows, v.astype(np.int64), w, 1, n, binary, dtype)[0]
    return bincount_rows(idx[:, 0], v.astype(np.int64), w, int(shape[0]), n, binary, dtype)
