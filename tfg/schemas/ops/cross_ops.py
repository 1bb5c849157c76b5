"""Signatures of TensorFlow's feature-crossing ops (sparse_ops.cc): SparseCross (Keras
HashedCrossing, `tf.sparse.cross_hashed`, feature columns' crossed_column), SparseCrossHashed
(crossed_column) and SparseCrossV2 (`tf.sparse.cross`). Their inputs are N SparseTensors
(indices, values, shapes: a list each) and dense [batch, width] tensors; the output is a
SparseTensor [batch, most crosses in a row] holding, row by row, the cross product of every
input's features.

    >>> get_op("SparseCrossV2").inputs[-1].name
    'sep'

How many crosses a row gets is data dependent: the product of its feature counts. Where the
indices' and shapes' values are known (always so for the memory guard, which sees integer
inputs' values), `cross_layout` counts them, so output_indices [total, 2] is sized before the
kernel allocates: ten inputs of 1000 features in one row make 1e30 crosses, refused as "would
allocate ...". The kernel (tfg/kernels/cross_ops.py) uses the same layout.
"""
from dataclasses import dataclass

import numpy as np

from tfg.schemas.ops.registry import op

_LISTS = ["indices: N * int64", "values: sparse_types", "shapes: N * int64",
          "dense_inputs: dense_types"]
_LIST_ATTRS = ["N: int >= 0", "sparse_types: list({int64, string}) >= 0",
               "dense_types: list({int64, string}) >= 0"]


def sparse_rows(row_ids, batch):
    """(rows, starts, counts) of one SparseTensor's features, as TensorFlow's kernel finds them:
    it walks the indices' first column in order, taking a run of entries for row b only while
    they say b (b = 0, 1, ... batch - 1), so the walk stops for good at an entry that goes back
    (unsorted), is negative or is past the batch; the entries from there on belong to no row."""
    ids = np.asarray(row_ids, np.int64).reshape(-1)
    bad = (ids < 0) | (ids >= batch)
    bad[1:] |= ids[1:] < ids[:-1]
    stop = int(np.argmax(bad)) if bad.any() else ids.size
    rows, starts, counts = np.unique(ids[:stop], return_index=True, return_counts=True)
    return rows, starts.astype(np.int64), counts.astype(np.int64)


@dataclass
class CrossLayout:
    """Which rows get crosses and how many. `rows`: the rows with at least one (ascending);
    per input column `starts[i]`/`counts[i]` for those rows (a dense column: start 0, its
    width); `per_row`: the crosses of each (int64, or Python ints when past int64); `total`
    and `widest` (the output's dense shape [batch, widest])."""
    batch: int
    rows: np.ndarray
    starts: list
    counts: list
    per_row: np.ndarray
    total: int
    widest: int


def cross_layout(row_ids, dense_widths, batch):
    """The CrossLayout of sparse inputs whose indices' first columns are `row_ids` and dense
    inputs `dense_widths` wide, `batch` rows (at most the rows the sparse inputs name, or
    dense inputs hold: never a loop over `batch`)."""
    found = [sparse_rows(ids, batch) for ids in row_ids]
    if any(w == 0 for w in dense_widths):  # (an empty input: no crosses in any row)
        rows = np.zeros(0, np.int64)
    elif found:
        rows = found[0][0]
        for r, _, _ in found[1:]:
            rows = np.intersect1d(rows, r, assume_unique=True)
    else:
        rows = np.arange(batch if dense_widths else 0, dtype=np.int64)
    starts, counts = [], []
    for r, s, c in found:
        at = np.searchsorted(r, rows)
        starts.append(s[at])
        counts.append(c[at])
    for w in dense_widths:
        starts.append(np.zeros(rows.size, np.int64))
        counts.append(np.full(rows.size, w, np.int64))
    per_row = _products(counts, rows.size)
    total = int(per_row.sum()) if rows.size else 0
    widest = int(per_row.max()) if rows.size else 0
    return CrossLayout(batch, rows, starts, counts, per_row, total, widest)


def _products(counts, n):
    """The per-row products of the columns' counts: int64 while that cannot overflow, else
    Python ints (a hostile cross: 1000 features in each of ten columns)."""
    if not counts:
        return np.zeros(n, np.int64)
    rough = np.ones(n)
    for c in counts:
        rough = rough * c
    exact = np.ones(n, np.int64 if rough.sum() < 2.0 ** 62 else object)
    for c in counts:
        exact = exact * (c if exact.dtype != object else c.astype(object))
    return exact


def _list_lengths(ctx):
    return (int(ctx.attr("N")), len(ctx.attr("sparse_types")), len(ctx.attr("dense_types")))


def known_layout(ctx):
    """The CrossLayout from the inputs' values where they are all known and well formed (the
    kernel names what is wrong otherwise), else None."""
    n, ns, nd = _list_lengths(ctx)
    if ns != n:
        return None
    indices = [ctx.value(i) for i in range(n)]
    shapes = [ctx.value(n + ns + i) for i in range(n)]
    dense = [ctx.shape(2 * n + ns + i) for i in range(nd)]
    if any(v is None for v in indices + shapes) or any(s is None for s in dense):
        return None
    if any(np.ndim(v) != 2 or np.shape(v)[1] != 2 for v in indices):
        return None
    if any(np.ndim(s) != 1 or np.size(s) != 2 for s in shapes):
        return None
    if any(len(s) != 2 or None in s for s in dense):
        return None
    batch = int(shapes[0][0]) if n else (dense[0][0] if nd else 0)
    if batch < 0 or any(int(s[0]) != batch for s in shapes) or \
            any(s[0] != batch for s in dense):
        return None
    return cross_layout([np.asarray(v)[:, 0] for v in indices], [s[1] for s in dense], batch)


def cross_shape(ctx):
    """[total, 2], [total], [2]: the total from the values where known."""
    layout = known_layout(ctx)
    total = None if layout is None else layout.total
    return [(total, 2), (total,), (2,)]


_OUTS = ["output_indices: int64", "output_values: {out}", "output_shape: int64"]

op("SparseCross",
   inputs=_LISTS,
   outputs=[o.format(out="out_type") for o in _OUTS],
   attrs=_LIST_ATTRS[:1] + ["hashed_output: bool", "num_buckets: int >= 0", "hash_key: int"]
   + _LIST_ATTRS[1:] + ["out_type: {int64, string}", "internal_type: {int64, string}"],
   shape_fn=cross_shape)
op("SparseCrossHashed",
   inputs=_LISTS + ["num_buckets: int64", "strong_hash: bool", "salt: int64"],
   outputs=[o.format(out="int64") for o in _OUTS],
   attrs=_LIST_ATTRS,
   shape_fn=cross_shape)
op("SparseCrossV2",
   inputs=_LISTS + ["sep: string"],
   outputs=[o.format(out="string") for o in _OUTS],
   attrs=_LIST_ATTRS,
   shape_fn=cross_shape)
