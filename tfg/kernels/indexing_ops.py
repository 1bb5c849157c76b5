"""Indexing: StridedSlice (every mask) and its gradient, the Gather family, ScatterNd,
UnsortedSegmentSum, DynamicStitch and ParallelDynamicStitch, DynamicPartition, SparseToDense.

    StridedSlice(x[5,6], begin=[2,1], end=[3,5], strides=[1,1], shrink_axis_mask=1) -> x[2, 1:5]
    GatherV2(p[2,4,3], [[0,3],[2,1]], axis=1, batch_dims=1) -> shape [2,2,3]
    UnsortedSegmentSum(d[5,3], ids=[0,2,0,3,2], 4) -> row i sums the rows with id i

Out-of-range indices are errors naming the index, as TensorFlow's CPU kernels do (numpy would
wrap negative indices silently).
"""
import math

import numpy as np

from tfg.kernels._util import fail, norm_axis, scatter_add, shape_vector, tf_dims
from tfg.kernels.registry import ALL_DEVICES, kernel


def strided_slice_index(shape, begin, end, strides, attrs):
    """The numpy index tuple equal to a StridedSlice spec on a tensor of `shape`.

        >>> strided_slice_index((5, 6), [1, 0], [4, 6], [1, 2], {})
        (slice(1, 4, 1), slice(0, 6, 2))
    """
    begin, end, strides = (shape_vector(v, w) for v, w in
                           ((begin, "begin"), (end, "end"), (strides, "strides")))
    if not len(begin) == len(end) == len(strides):
        fail(f"begin, end and strides must have the same length, got {len(begin)}, "
             f"{len(end)}, {len(strides)}")
    if len(begin) > len(shape) + 255:  # past the rank, every entry but an ellipsis adds a dim
        fail(f"a slice spec of {len(begin)} entries on {len(shape)} dims would make more than "
             "254 dims")
    bm, em = int(attrs.get("begin_mask", 0)), int(attrs.get("end_mask", 0))
    ellipsis, new_axis = int(attrs.get("ellipsis_mask", 0)), int(attrs.get("new_axis_mask", 0))
    shrink = int(attrs.get("shrink_axis_mask", 0))
    if bin(ellipsis & ((1 << len(begin)) - 1)).count("1") > 1:
        fail("Multiple ellipses in slice spec not allowed")
    idx, seen_ellipsis = [], False
    for i, (b, e, st) in enumerate(zip(begin, end, strides)):
        bit = 1 << i
        if ellipsis & bit:
            if not seen_ellipsis:
                idx.append(Ellipsis)
                seen_ellipsis = True
            continue
        if new_axis & bit:
            idx.append(None)
            continue
        if st == 0:
            fail(f"strides[{i}] must be non-zero")
        if shrink & bit:
            idx.append(("shrink", b))
            continue
        idx.append(slice(None if bm & bit else b, None if em & bit else e, st))
    # Resolve shrink indices against the dimension they land on, checking bounds.
    ndim = len(shape)
    dims_before = 0
    out = []
    n_real = sum(1 for v in idx if v is not None and v is not Ellipsis)
    for k, v in enumerate(idx):
        if v is Ellipsis:
            dims_before += ndim - n_real
            out.append(v)
            continue
        if v is None:
            out.append(v)
            continue
        if isinstance(v, tuple):
            if dims_before >= ndim:
                fail(f"Index out of range using input dim {dims_before}")
            size = shape[dims_before]
            b = v[1]
            if not -size <= b < size:
                fail(f"slice index {b} of dimension {dims_before} out of bounds.")
            out.append(b if b >= 0 else b + size)
        else:
            out.append(v)
        dims_before += 1
    if dims_before > ndim:
        fail(f"Index out of range using input dim {ndim}; input has only {ndim} dims")
    return tuple(out)


def _slice(x, begin, end, strides, attrs):
    return strided_slice_index(x.shape, begin, end, strides, attrs)


@kernel("StridedSlice", device_types=ALL_DEVICES, host_inputs=(1, 2, 3))
def strided_slice(ctx, x, begin, end, strides):
    x = ctx.xp.asarray(x)
    # The index tuple depends on the shape and the spec only: a loop slices the same way
    # every step (a GRU's gate weights: 30 -> 3 us), so it is kept per node.
    try:
        key = (x.shape, begin.tobytes(), end.tobytes(), strides.tobytes(), begin.dtype,
               end.dtype, strides.dtype)
    except AttributeError:  # not arrays: no key
        return x[_slice(x, begin, end, strides, ctx.attrs)]
    cache = ctx.cache.get("strided_slice")
    if cache is None:
        cache = ctx.cache["strided_slice"] = {}
    index = cache.get(key)
    if index is None:
        index = _slice(x, begin, end, strides, ctx.attrs)
        if len(cache) >= 64:
            cache.clear()
        cache[key] = index
    return x[index]


@kernel("StridedSliceGrad", device_types=ALL_DEVICES, host_inputs=(0, 1, 2, 3))
def strided_slice_grad(ctx, shape, begin, end, strides, dy):
    xp = ctx.xp
    dy = xp.asarray(dy)
    out = xp.zeros(shape_vector(shape), dtype=dy.dtype)
    view_idx = _slice(out, begin, end, strides, ctx.attrs)
    target = out[view_idx]
    if target.size != dy.size:
        fail(f"dy has {dy.size} elements, the slice has {target.size}")
    out[view_idx] = dy.reshape(target.shape)
    return out


def _check_indices(xp, indices, limit, what="indices"):
    idx = xp.asarray(indices)
    if idx.dtype.kind not in "iu":
        fail(f"{what} must be int32 or int64")
    if idx.size:
        lo, hi = int(idx.min()), int(idx.max())
        if lo < 0 or hi >= limit:
            bad = lo if lo < 0 else hi
            pos = xp.argwhere(idx == bad)[0].tolist()
            fail(f"{what}[{','.join(map(str, pos))}] = {bad} is not in [0, {limit})")
    return idx


def _gather(xp, params, indices, axis, batch_dims):
    params = xp.asarray(params)
    idx = xp.asarray(indices)
    if batch_dims < 0:
        batch_dims += idx.ndim
    axis = norm_axis(axis, params.ndim)
    if batch_dims > axis or batch_dims > idx.ndim:
        fail(f"batch_dims ({batch_dims}) must be <= axis ({axis}) and <= rank(indices)")
    if batch_dims == 0 and idx.ndim == 0 and idx.dtype.kind in "iu":
        # One index (a loop's time step): a copied slice, without min/max reductions.
        i = int(idx)
        if 0 <= i < params.shape[axis]:
            return params[(slice(None),) * axis + (i,)].copy()
    _check_indices(xp, idx, params.shape[axis])
    if batch_dims == 0:
        return xp.take(params, idx, axis=axis)
    if params.shape[:batch_dims] != idx.shape[:batch_dims]:
        fail(f"params.shape[:{batch_dims}] {list(params.shape[:batch_dims])} must equal "
             f"indices.shape[:{batch_dims}] {list(idx.shape[:batch_dims])}")
    # One advanced index over [batch, outer, index, inner] views: out[b, o, m, i] =
    # params[b, o, idx[b, m], i] (a beam search's batch_dims=1 gathers: one numpy call, not
    # a take and a stack per batch row).
    bshape = params.shape[:batch_dims]
    nb = math.prod(bshape)
    outer = params.shape[batch_dims:axis]
    no = math.prod(outer)
    p = params.reshape((nb, no, params.shape[axis], math.prod(params.shape[axis + 1:])))
    ix = idx.reshape((nb, 1, math.prod(idx.shape[batch_dims:])))
    rows = xp.arange(nb).reshape((nb, 1, 1))
    cols = xp.arange(no).reshape((1, no, 1))
    out = p[rows, cols, ix]  # [nb, no, m, inner]
    return out.reshape(bshape + outer + idx.shape[batch_dims:] + params.shape[axis + 1:])


@kernel("GatherV2", device_types=ALL_DEVICES, host_inputs=(2,))
def gather_v2(ctx, params, indices, axis):
    return _gather(ctx.xp, params, indices, int(np.asarray(axis).reshape(())),
                   int(ctx.attrs.get("batch_dims", 0)))


@kernel("Gather", device_types=ALL_DEVICES)
def gather(ctx, params, indices):
    return _gather(ctx.xp, params, indices, 0, 0)


def _nd_index(xp, indices, shape, what):
    idx = xp.asarray(indices)
    k = idx.shape[-1] if idx.ndim else 0
    if idx.ndim == 0 or k > len(shape):
        fail(f"{what}: index innermost dimension {k} must be <= rank {len(shape)}")
    for d in range(k):
        col = idx[..., d]
        if col.size and (col.min() < 0 or col.max() >= shape[d]):
            bad = xp.argwhere((col < 0) | (col >= shape[d]))[0].tolist()
            fail(f"{what}: indices{bad} = {idx[tuple(bad)].tolist()} does not index into "
                 f"shape {list(shape)}")
    return tuple(xp.moveaxis(idx, -1, 0)) if k else None


@kernel("GatherNd", device_types=ALL_DEVICES)
def gather_nd(ctx, params, indices):
    xp = ctx.xp
    params = xp.asarray(params)
    idx = xp.asarray(indices)
    if xp is np and 0 < idx.ndim and 0 < idx.shape[-1] <= params.ndim \
            and idx.dtype.kind in "iu" and idx.size and params.size:
        # One flat index into the first k dims: numpy checks the bounds in C (a beam
        # search's [batch, beam, 2] gathers: 33 us -> 8 us); out of bounds, the check below
        # names the index.
        k = idx.shape[-1]
        try:
            flat = np.ravel_multi_index(idx.reshape(-1, k).T, params.shape[:k])
        except ValueError:
            pass
        else:
            rows = params.reshape((math.prod(params.shape[:k]),) + params.shape[k:])
            return rows[flat].reshape(idx.shape[:-1] + params.shape[k:])
    key = _nd_index(xp, idx, params.shape, "GatherNd")
    if key is None:  # k == 0: every index selects the whole of params
        return xp.broadcast_to(params, idx.shape[:-1] + params.shape).copy()
    return params[key]


@kernel("ScatterNd", device_types=ALL_DEVICES, host_inputs=(2,))
def scatter_nd(ctx, indices, updates, shape):
    xp = ctx.xp
    updates = xp.asarray(updates)
    out = xp.zeros(shape_vector(shape), dtype=updates.dtype)
    key = _nd_index(xp, indices, out.shape, "ScatterNd")
    scatter_add(xp, out, key if key is not None else Ellipsis, updates)
    return out


@kernel("UnsortedSegmentSum", device_types=ALL_DEVICES, host_inputs=(2,))
def unsorted_segment_sum(ctx, data, segment_ids, num_segments):
    xp = ctx.xp
    data, ids = xp.asarray(data), xp.asarray(segment_ids)
    n = int(np.asarray(num_segments).reshape(()))
    if data.shape[:ids.ndim] != ids.shape:
        fail(f"segment_ids.shape {list(ids.shape)} must be a prefix of data.shape "
             f"{list(data.shape)}")
    rest = data.shape[ids.ndim:]
    out = xp.zeros((n,) + rest, dtype=data.dtype)
    flat_ids = ids.reshape(-1)
    if flat_ids.size and flat_ids.max() >= n:
        fail(f"segment_ids[{int(xp.argmax(flat_ids >= n))}] = {int(flat_ids.max())} is out of "
             f"range [0, {n})")
    keep = flat_ids >= 0  # negative ids are dropped, as TensorFlow does
    scatter_add(xp, out, flat_ids[keep], data.reshape((-1,) + rest)[keep])
    return out


@kernel("DynamicStitch", device_types=ALL_DEVICES)
def dynamic_stitch(ctx, *args):
    xp = ctx.xp
    n = len(args) // 2
    indices, data = [xp.asarray(a) for a in args[:n]], [xp.asarray(a) for a in args[n:]]
    rest = data[0].shape[indices[0].ndim:]
    size = max((int(i.max()) + 1 for i in indices if i.size), default=0)
    out = xp.zeros((size,) + rest, dtype=data[0].dtype)
    for idx, d in zip(indices, data):
        if d.shape != idx.shape + rest:
            fail(f"data shape {list(d.shape)} must be indices shape {list(idx.shape)} + "
                 f"{list(rest)}")
        if idx.size and idx.min() < 0:
            fail(f"DynamicStitch: index {int(idx.min())} is negative")
        flat = idx.reshape(-1)
        out[flat] = d.reshape((-1,) + rest)
    return out


@kernel("ParallelDynamicStitch", device_types=ALL_DEVICES)
def parallel_dynamic_stitch(ctx, *args):
    """DynamicStitch's result (TensorFlow leaves the winner of a repeated index undefined;
    here, as in its CPU kernel, the last one)."""
    xp = ctx.xp
    for indices in args[:len(args) // 2]:
        flat = xp.asarray(indices).reshape(-1)
        if flat.size and int(flat.min()) < 0:
            fail(f"indices[{int(xp.argmax(flat < 0))}] is out of range")
    return dynamic_stitch(ctx, *args)


@kernel("DynamicPartition")
def dynamic_partition(ctx, data, partitions):
    """Output i: the slices of data (below partitions' dims) whose partition is i, in order."""
    n = int(ctx.attrs["num_partitions"])
    data, parts = np.asarray(data), np.asarray(partitions)
    if data.shape[:parts.ndim] != parts.shape:
        fail(f"data.shape must start with partitions.shape, got data.shape = "
             f"{tf_dims(data.shape)}, partitions.shape = {tf_dims(parts.shape)}")
    flat = parts.reshape(-1)
    bad = (flat < 0) | (flat >= n)
    if bad.any():
        i = int(np.argmax(bad))
        fail(f"partitions[{i}] = {int(flat[i])} is not in [0, {n})")
    rows = data.reshape((flat.size,) + data.shape[parts.ndim:])
    return [rows[flat == i] for i in range(n)]


def _sparse_index_text(row):
    return "[" + ",".join(str(int(v)) for v in row) + "]"


def _validate_sparse_indices(coords, dims):
    """TensorFlow's SparseTensor::IndicesValid: each index in bounds, and in strictly
    increasing row-major order (no repeats); the first offender is named."""
    n = coords.shape[0]
    upper = np.asarray(dims, np.int64)
    out_of_bounds = ((coords < 0) | (coords >= upper)).any(axis=1)
    first_oob = int(np.argmax(out_of_bounds)) if out_of_bounds.any() else n
    # Rows before the first out-of-bounds one compare by their row-major offset.
    k = first_oob
    strides = np.cumprod([1] + [int(d) for d in dims[:0:-1]], dtype=np.int64)[::-1]
    offsets = coords[:k] @ strides if k else np.zeros(0, np.int64)
    steps = np.diff(offsets)
    first_bad = int(np.argmax(steps <= 0)) + 1 if (steps <= 0).any() else n
    if first_bad < first_oob:
        where = f"indices[{first_bad}] = {_sparse_index_text(coords[first_bad])}"
        if steps[first_bad - 1] == 0:
            fail(f"{where} is repeated")
        fail(f"{where} is out of order. Many sparse ops require sorted indices. Use "
             f"`tf.sparse.reorder` to create a correctly ordered copy.")
    if first_oob < n:
        fail(f"indices[{first_oob}] = {_sparse_index_text(coords[first_oob])} is out of "
             f"bounds: need 0 <= index < {tf_dims(dims)}")


@kernel("SparseToDense", host_inputs=(1,))
def sparse_to_dense(ctx, sparse_indices, output_shape, sparse_values, default_value):
    """A dense tensor of output_shape filled with default_value, sparse_values written at
    sparse_indices (a scalar, a vector of single indices, or a matrix of full indices)."""
    idx, values = np.asarray(sparse_indices), np.asarray(sparse_values)
    shape, default = np.asarray(output_shape), np.asarray(default_value)
    if idx.ndim > 2:
        fail(f"sparse_indices should be a scalar, vector, or matrix, got shape "
             f"{tf_dims(idx.shape)}")
    num_elems = idx.shape[0] if idx.ndim > 0 else 1
    num_dims = idx.shape[1] if idx.ndim > 1 else 1
    if shape.ndim != 1:
        fail(f"output_shape should be a vector, got shape {tf_dims(shape.shape)}")
    if not (values.ndim == 0 or (values.ndim == 1 and values.shape[0] == num_elems)):
        fail(f"sparse_values has incorrect shape {tf_dims(values.shape)}, should be [] or "
             f"[{num_elems}]")
    if default.ndim != 0:
        fail("default_value should be a scalar.")
    if shape.size != num_dims:
        fail(f"output_shape has incorrect number of elements: {shape.size} should be: "
             f"{num_dims}")
    dims = tuple(int(d) for d in shape.tolist())
    for d in dims:
        if d < 0:
            fail(f"Dimension {d} must be >= 0")
    coords = idx.reshape(num_elems, num_dims).astype(np.int64)
    values = np.broadcast_to(values, (num_elems,))
    if ctx.attrs.get("validate_indices", True):
        _validate_sparse_indices(coords, dims)
    elif ((coords < 0) | (coords >= np.asarray(dims, np.int64))).any():
        fail(f"Indices are not valid (out of bounds).  Shape: {tf_dims(dims)}")
    elif num_elems > 1:
        # Unvalidated indices may repeat: the last write wins, as in TensorFlow's loop.
        _, last = np.unique(np.ascontiguousarray(coords[::-1]), axis=0, return_index=True)
        keep = np.sort(num_elems - 1 - last)
        coords, values = coords[keep], values[keep]
    out = np.full(dims, default, dtype=values.dtype)
    if coords.shape[0]:
        out[tuple(coords.T)] = values
    return out
