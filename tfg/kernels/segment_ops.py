"""Segment reductions (sorted ids), sparse-segment reductions (rows picked by `indices`, then
reduced by sorted `segment_ids`), and Roll.

    SegmentMax(d [5, 3], ids [0, 0, 1, 3, 3]) -> [4, 3]; the empty segment 2 is 0
    SparseSegmentSqrtN(d, indices [3, 1, 1], ids [0, 0, 2]) -> row 0: (d[3] + d[1]) / sqrt(2)

Ids must be sorted and in range, as TensorFlow's CPU kernels require (errors name the id).
"""
import numpy as np

from tfg.kernels._util import fail
from tfg.kernels.registry import ALL_DEVICES, kernel


def _check_sorted(ids, what="segment_ids"):
    if ids.size and np.any(ids < 0):
        fail(f"{what} must be non-negative, got {int(ids.min())}")
    if ids.size > 1 and np.any(np.diff(ids) < 0):
        fail(f"{what} are not increasing")


def _reduce(kind, rows, ids, n):
    """Reduce rows [k, ...] into n segments by ids [k]."""
    out_shape = (n,) + rows.shape[1:]
    if kind in ("Sum", "Mean", "SqrtN"):
        out = np.zeros(out_shape, rows.dtype)
        np.add.at(out, ids, rows)
        if kind != "Sum":
            count = np.bincount(ids, minlength=n)[:n].astype(np.float64)
            div = count if kind == "Mean" else np.sqrt(count)
            div = np.where(count > 0, div, 1).reshape((n,) + (1,) * (rows.ndim - 1))
            out = (out / div).astype(rows.dtype) if rows.dtype.kind in "fc" else out // \
                div.astype(out.dtype)
        return out
    if kind == "Prod":
        out = np.ones(out_shape, rows.dtype)
        np.multiply.at(out, ids, rows)
        return out
    ufunc = np.maximum if kind == "Max" else np.minimum
    if rows.dtype.kind == "f":
        init = -np.inf if kind == "Max" else np.inf
    else:
        info = np.iinfo(rows.dtype)
        init = info.min if kind == "Max" else info.max
    out = np.full(out_shape, init, rows.dtype)
    ufunc.at(out, ids, rows)
    present = np.bincount(ids, minlength=n)[:n] > 0
    out[~present] = 0  # TensorFlow: an empty segment's max/min is 0
    return out


@kernel(["SegmentSum", "SegmentMean", "SegmentMax", "SegmentMin", "SegmentProd"])
def segment(ctx, data, segment_ids):
    data, ids = np.asarray(data), np.asarray(segment_ids).astype(np.int64)
    if ids.ndim != 1 or data.ndim < 1 or data.shape[0] != ids.shape[0]:
        fail(f"segment_ids should be a vector the size of data's first dimension, got "
             f"{list(ids.shape)} for data {list(data.shape)}")
    _check_sorted(ids)
    n = int(ids[-1]) + 1 if ids.size else 0
    return _reduce(ctx.op[len("Segment"):], data, ids, n)


_SPARSE = ["SparseSegmentSum", "SparseSegmentMean", "SparseSegmentSqrtN"]


@kernel(_SPARSE + [n + "WithNumSegments" for n in _SPARSE], host_inputs=(3,))
def sparse_segment(ctx, data, indices, segment_ids, num_segments=None):
    data = np.asarray(data)
    idx = np.asarray(indices).astype(np.int64).reshape(-1)
    ids = np.asarray(segment_ids).astype(np.int64).reshape(-1)
    if idx.shape != ids.shape:
        fail(f"segment_ids and indices should have the same size, got {ids.size} and "
             f"{idx.size}")
    if idx.size and (idx.min() < 0 or idx.max() >= data.shape[0]):
        bad = idx[(idx < 0) | (idx >= data.shape[0])][0]
        fail(f"bad index {int(bad)}: not in [0, {data.shape[0]})")
    _check_sorted(ids)  # sorted with num_segments too, as TensorFlow's CPU kernel checks
    if num_segments is None:
        n = int(ids[-1]) + 1 if ids.size else 0
    else:
        n = int(np.asarray(num_segments).reshape(()))
        if ids.size and (ids.min() < 0 or ids.max() >= n):
            fail(f"segment ids must be in [0, {n}), got {int(ids.max())}")
    kind = ctx.op[len("SparseSegment"):].replace("WithNumSegments", "")
    return _reduce(kind, data[idx], ids, n)


_SPARSE_GRADS = [f"SparseSegment{k}Grad" for k in ("Sum", "Mean", "SqrtN")]


@kernel(_SPARSE_GRADS + [n + "V2" for n in _SPARSE_GRADS], host_inputs=(3,))
def sparse_segment_grad(ctx, grad, indices, segment_ids, output_dim0):
    """output[indices[k]] += grad[segment_ids[k]] (divided by the segment's size, or its
    square root, for Mean and SqrtN); V2 keeps only the rows of the sorted unique indices."""
    g = np.asarray(grad)
    idx = np.asarray(indices).astype(np.int64).reshape(-1)
    ids = np.asarray(segment_ids).astype(np.int64).reshape(-1)
    dim0 = int(np.asarray(output_dim0).reshape(()))
    if idx.shape != ids.shape:
        fail(f"segment_ids and indices should have the same size, got {ids.size} and "
             f"{idx.size}")
    if ids.size and (ids.min() < 0 or ids.max() >= g.shape[0]):
        fail(f"segment id {int(ids.max())} out of range [0, {g.shape[0]})")
    if idx.size and (idx.min() < 0 or idx.max() >= dim0):
        fail(f"index {int(idx.max())} out of range [0, {dim0})")
    rows = g[ids].astype(g.dtype, copy=True)
    kind = ctx.op[len("SparseSegment"):].split("Grad")[0]
    if kind != "Sum":
        count = np.bincount(ids, minlength=g.shape[0]).astype(np.float64)[ids]
        scale = count if kind == "Mean" else np.sqrt(count)
        rows = (rows / scale.reshape((-1,) + (1,) * (g.ndim - 1))).astype(g.dtype)
    if not ctx.op.endswith("V2"):
        out = np.zeros((dim0,) + g.shape[1:], g.dtype)
        np.add.at(out, idx, rows)
        return out
    unique, where = np.unique(idx, return_inverse=True)
    out = np.zeros((unique.size,) + g.shape[1:], g.dtype)
    np.add.at(out, where.reshape(-1), rows)
    return out, unique.astype(np.asarray(indices).dtype)


@kernel("Roll", device_types=ALL_DEVICES, host_inputs=(1, 2))
def roll(ctx, x, shift, axis):
    xp = ctx.xp
    x = xp.asarray(x)
    shift = [int(v) for v in np.asarray(shift).reshape(-1)]
    axis = [int(v) for v in np.asarray(axis).reshape(-1)]
    if len(shift) != len(axis):
        fail(f"shift and axis must have the same size, got {len(shift)} and {len(axis)}")
    for a in axis:
        if not -x.ndim <= a < x.ndim:
            fail(f"axis {a} is out of range for a tensor of rank {x.ndim}")
    return xp.roll(x, shift, axis) if shift else x


@kernel("DenseBincount", host_inputs=(1,))
def dense_bincount(ctx, x, size, weights):
    """Counts (or sums weights) of each value in [0, size) per row; larger values are
    dropped, negative ones are an error; binary_output counts presence."""
    x = np.asarray(x)
    size = int(np.asarray(size).reshape(()))
    w = np.asarray(weights)
    dtype = np.dtype(w.dtype)
    if size < 0:
        fail(f"size ({size}) must be non-negative")
    if x.ndim not in (1, 2):
        fail(f"input must have rank 1 or 2, got shape {list(x.shape)}")
    if x.size and x.min() < 0:
        fail("Input arr must be non-negative!")
    if w.size and w.shape != x.shape:
        fail(f"weights shape {list(w.shape)} must equal input shape {list(x.shape)}, or be "
             "empty")
    rows = x.reshape(-1, x.shape[-1]) if x.ndim == 2 else x.reshape(1, -1)
    wrows = w.reshape(rows.shape) if w.size else None
    out = np.zeros((rows.shape[0], size), dtype)
    for i, row in enumerate(rows):
        keep = row < size
        if ctx.attrs.get("binary_output", False):
            out[i, row[keep]] = 1
        elif wrows is None:
            np.add.at(out[i], row[keep], 1)
        else:
            np.add.at(out[i], row[keep], wrows[i][keep])
    return out if x.ndim == 2 else out[0]
