"""The sparse tensor ops: a SparseTensor is indices [N, rank] int64, values [N] and
dense_shape [rank] int64 (TensorFlow's sparse_*_op.cc CPU kernels, CPU only here).

    SparseReorder([[1, 0], [0, 2]], [a, b], [2, 3]) -> [[0, 2], [1, 0]], [b, a]
    SparseTensorDenseMatMul([[0, 1]], [2.], [3, 4], b [4, 5]) -> 2 * b[1] in row 0 of [3, 5]
    SparseAdd(a, b, thresh): a merge of a's and b's entries; a sum of two is kept only where
        thresh <= |sum| (a lone entry is always kept)

Where TensorFlow's kernel relies on sorted indices (SparseAdd's merge) this one walks them the
same way, so unsorted inputs give TensorFlow's results too (sorted ones take a vectorized
path with the same result); what TensorFlow does not check
(SparseReorder's bounds) is not checked here either.
"""
import numpy as np

from tfg.kernels._util import check_rank, fail, tf_dims
from tfg.kernels.registry import kernel


# --- shared helpers ---------------------------------------------------------------------------
def _sparse(indices, values, shape, what=("indices", "values", "shape")):
    """The three parts as arrays, checked to form a SparseTensor: indices [N, rank] int64,
    values [N], shape [rank]."""
    idx, vals, dims = np.asarray(indices), np.asarray(values), np.asarray(shape)
    check_rank(idx, 2, f"Input {what[0]} should be a matrix but received shape")
    check_rank(vals, 1, f"Input {what[1]} should be a vector but received shape")
    check_rank(dims, 1, f"Input {what[2]} should be a vector but received shape")
    if idx.shape[0] != vals.shape[0]:
        fail(f"Number of entries in {what[0]} ({idx.shape[0]}) must match the number of "
             f"{what[1]} ({vals.shape[0]})")
    if idx.shape[1] != dims.shape[0]:
        fail(f"{what[0]} has {idx.shape[1]} columns but {what[2]} has rank {dims.shape[0]}")
    return idx.astype(np.int64, copy=False), vals, [int(d) for d in dims.tolist()]


def _row_major_order(coords):
    """The stable permutation sorting coords' rows lexicographically (row-major order)."""
    if coords.shape[1] == 0:
        return np.arange(coords.shape[0])
    return np.lexsort(coords.T[::-1])


def _group_starts(keys):
    """Start positions of the runs of equal consecutive rows of keys [N, k] (N > 0)."""
    if keys.shape[1] == 0:
        return np.zeros(1, np.intp)
    change = np.any(keys[1:] != keys[:-1], axis=1)
    return np.concatenate([[0], np.flatnonzero(change) + 1])


# --- SparseTensorDenseMatMul ------------------------------------------------------------------
def _check_matmul_inputs(idx, vals, shape, b):
    check_rank(shape, 1, "Tensor 'a_shape' is not a vector, got shape")
    if shape.size != 2:
        fail(f"Tensor 'a_shape' must have 2 elements, got {shape.size}")
    check_rank(vals, 1, "Tensor 'a_values' is not a vector, got shape")
    check_rank(idx, 2, "Tensor 'a_indices' is not a matrix, got shape")
    if idx.shape[0] != vals.shape[0]:
        fail("Number of rows of a_indices does not match number of entries in a_values")
    if idx.shape[1] != 2:
        fail("Number of columns of a_indices does not match number of entries in a_shape")
    check_rank(b, 2, "Tensor 'b' is not a matrix, got shape")


def _check_matmul_bounds(m, k, outer, inner, adj_a):
    """TensorFlow checks entry i's k (the inner index) before its m (the output row)."""
    bad_k = (k < 0) | (k >= inner)
    bad = bad_k | (m < 0) | (m >= outer)
    if not bad.any():
        return
    i = int(np.argmax(bad))
    if bad_k[i]:
        fail(f"k ({int(k[i])}) from index[{i},{0 if adj_a else 1}] out of bounds (>={inner})")
    fail(f"m ({int(m[i])}) from index[{i},{1 if adj_a else 0}] out of bounds (>={outer})")


@kernel("SparseTensorDenseMatMul", host_inputs=(2,))
def sparse_tensor_dense_mat_mul(ctx, a_indices, a_values, a_shape, b):
    """op(A) @ op(B) for a sparse [2-D] A; repeated entries of A add up."""
    idx, vals, shape, b = (np.asarray(a_indices), np.asarray(a_values), np.asarray(a_shape),
                           np.asarray(b))
    _check_matmul_inputs(idx, vals, shape, b)
    adj_a, adj_b = bool(ctx.attrs.get("adjoint_a")), bool(ctx.attrs.get("adjoint_b"))
    rows, cols = (int(d) for d in shape.tolist())
    outer, inner = (cols, rows) if adj_a else (rows, cols)
    bmat = b.conj().T if adj_b else b
    if inner != bmat.shape[0]:
        fail(f"Cannot multiply A and B because inner dimension does not match: {inner} vs. "
             f"{bmat.shape[0]}.  Did you forget a transpose?  Dimensions of A: [{rows}, {cols}"
             f").  Dimensions of B: {tf_dims(b.shape)}")
    if outer < 0:
        fail(f"Dimension {outer} must be >= 0")
    idx = idx.astype(np.int64, copy=False)
    m, k = (idx[:, 1], idx[:, 0]) if adj_a else (idx[:, 0], idx[:, 1])
    _check_matmul_bounds(m, k, outer, inner, adj_a)
    out = np.zeros((outer, bmat.shape[1]), vals.dtype)
    a = vals.conj() if adj_a else vals
    # entries in order, each row of B scaled into its output row: TensorFlow's summation order
    np.add.at(out, m, (a[:, None] * bmat[k]).astype(vals.dtype, copy=False))
    return out


# --- SparseReorder ----------------------------------------------------------------------------
@kernel("SparseReorder", host_inputs=(2,))
def sparse_reorder(ctx, input_indices, input_values, input_shape):
    """The entries in row-major order (a stable sort: repeated indices keep their order)."""
    idx, vals, _ = _sparse(input_indices, input_values, input_shape,
                           ("input_indices", "input_values", "input_shape"))
    order = _row_major_order(idx)
    return idx[order], vals[order]


# --- SparseReduceSum, SparseReduceSumSparse ---------------------------------------------------
def _reduction_groups(indices, values, shape, axes):
    """(dense dims, group dims, reduced dims, each group's coords, each group's sum) of a
    sparse reduction, the groups in row-major order."""
    idx, vals, dims = _sparse(indices, values, shape,
                              ("input_indices", "input_values", "input_shape"))
    r = len(dims)
    reduced = set()
    for a in np.asarray(axes).reshape(-1).tolist():
        if not -r <= a < r:
            fail(f"Invalid reduction dimension {a}, for input with {r} dimensions.")
        reduced.add(a % r)
    group = [d for d in range(r) if d not in reduced]
    keys = idx[:, group + sorted(reduced)]
    order = _row_major_order(keys)
    gcoords, svals = idx[order][:, group], vals[order]
    if not len(svals):
        return dims, group, reduced, gcoords, svals
    starts = _group_starts(gcoords)
    sums = np.add.reduceat(svals, starts).astype(vals.dtype, copy=False)
    return dims, group, reduced, gcoords[starts], sums


def _reduced_shape(dims, reduced, keep):
    if keep:
        return [1 if d in reduced else n for d, n in enumerate(dims)]
    return [n for d, n in enumerate(dims) if d not in reduced]


@kernel("SparseReduceSum", host_inputs=(2, 3))
def sparse_reduce_sum(ctx, input_indices, input_values, input_shape, reduction_axes):
    """A dense sum over reduction_axes (0 where no entry falls)."""
    dims, group, reduced, coords, sums = _reduction_groups(
        input_indices, input_values, input_shape, reduction_axes)
    out = np.zeros(_reduced_shape(dims, reduced, ctx.attrs.get("keep_dims", False)),
                   np.asarray(input_values).dtype)
    sizes = [dims[d] for d in group]
    strides = np.cumprod([1] + sizes[:0:-1], dtype=np.int64)[::-1]
    flat = coords @ strides if group else np.zeros(len(sums), np.int64)
    bad = (flat < 0) | (flat >= out.size)
    if bad.any():
        fail(f"Obtained a write index of {int(flat[np.argmax(bad)])} which is outside of "
             f"bounds of [0, {out.size})")
    out.reshape(-1)[flat] = sums
    return out


@kernel("SparseReduceSumSparse", host_inputs=(2, 3))
def sparse_reduce_sum_sparse(ctx, input_indices, input_values, input_shape, reduction_axes):
    """The sums as a SparseTensor: one entry per group of entries, in row-major order."""
    dims, group, reduced, coords, sums = _reduction_groups(
        input_indices, input_values, input_shape, reduction_axes)
    keep = ctx.attrs.get("keep_dims", False)
    out_shape = np.asarray(_reduced_shape(dims, reduced, keep), np.int64)
    if keep:
        full = np.zeros((len(sums), len(dims)), np.int64)
        full[:, group] = coords
        coords = full
    return coords.astype(np.int64, copy=False), sums, out_shape


# --- SparseSoftmax ----------------------------------------------------------------------------
@kernel("SparseSoftmax", host_inputs=(2,))
def sparse_softmax(ctx, sp_indices, sp_values, sp_shape):
    """Softmax over the entries sharing all but the last index; the output in row-major
    order of the indices, as TensorFlow writes it (whatever the input order)."""
    shape = np.asarray(sp_shape)
    if shape.ndim == 1 and shape.size < 2:
        fail(f"Input should have rank >= 2, but received shape: "
             f"{' '.join(str(int(d)) for d in shape.tolist())}")
    idx, vals, _ = _sparse(sp_indices, sp_values, sp_shape,
                           ("sp_indices", "sp_values", "sp_shape"))
    if not len(vals):
        return vals.copy()
    order = _row_major_order(idx)
    v = vals[order]
    starts = _group_starts(idx[order][:, :-1])
    group_of = np.repeat(np.arange(len(starts)), np.diff(np.append(starts, len(v))))
    shifted = v - np.maximum.reduceat(v, starts)[group_of]
    e = np.exp(shifted)
    return (e / np.add.reduceat(e, starts)[group_of]).astype(vals.dtype, copy=False)


# --- SparseAdd, SparseAddGrad -----------------------------------------------------------------
def _check_add_inputs(a_idx, a_vals, a_shape, b_idx, b_vals, b_shape, thresh):
    if a_idx.ndim != 2 or b_idx.ndim != 2:
        fail(f"Input indices should be matrices but received shapes: {tf_dims(a_idx.shape)} "
             f"and {tf_dims(b_idx.shape)}")
    if a_vals.ndim != 1 or b_vals.ndim != 1:
        fail(f"Input values should be vectors but received shapes: {tf_dims(a_vals.shape)} "
             f"and {tf_dims(b_vals.shape)}")
    for ix, vs in ((a_idx, a_vals), (b_idx, b_vals)):
        if ix.shape[0] != vs.shape[0]:
            fail(f"Expected {ix.shape[0]} non-empty input values, got {vs.shape[0]}")
    if a_shape.ndim != 1 or b_shape.ndim != 1:
        fail(f"Input shapes should be a vector but received shapes {tf_dims(a_shape.shape)} "
             f"and {tf_dims(b_shape.shape)}")
    if a_shape.size != b_shape.size:
        fail(f"Operands do not have the same ranks; got shapes: {tf_dims(a_shape.tolist())} "
             f"and {tf_dims(b_shape.tolist())}")
    for d, (x, y) in enumerate(zip(a_shape.tolist(), b_shape.tolist())):
        if x != y:
            fail(f"Operands' shapes do not match: got {x} and {y} for dimension {d}")
    for ix in (a_idx, b_idx):
        if ix.shape[1] != a_shape.size:
            fail(f"Indices have {ix.shape[1]} columns but the shapes have rank {a_shape.size}")
    check_rank(thresh, 0, "The magnitude threshold must be a scalar: got shape")


def _merge_plan(a_rows, b_rows, a_vals, b_vals, thresh):
    """TensorFlow's merge walk: (source, position, value) per output entry; a row in both
    is summed and kept only where thresh <= |sum|."""
    plan, i, j = [], 0, 0
    while i < len(a_rows) and j < len(b_rows):
        if a_rows[i] < b_rows[j]:
            plan.append((0, i, a_vals[i]))
            i += 1
        elif a_rows[i] > b_rows[j]:
            plan.append((1, j, b_vals[j]))
            j += 1
        else:
            s = a_vals[i] + b_vals[j]
            if thresh <= abs(s):
                plan.append((0, i, s))
            i, j = i + 1, j + 1
    plan += [(0, k, a_vals[k]) for k in range(i, len(a_rows))]
    plan += [(1, k, b_vals[k]) for k in range(j, len(b_rows))]
    return plan


def _strictly_increasing(idx):
    """Whether idx's rows are in strictly increasing row-major order (no repeats)."""
    if idx.shape[0] < 2:
        return True
    x, y = idx[:-1], idx[1:]
    differ = x != y
    first = np.argmax(differ, axis=1)
    rows = np.arange(len(first))
    return bool(np.all(differ.any(axis=1) & (x[rows, first] < y[rows, first])))


def _merge_sorted(a_idx, a_vals, b_idx, b_vals, thresh):
    """_merge_plan's result for strictly increasing a and b, without a Python loop: a row in
    both sorts as an (a, b) pair, summed into the a entry and dropped where |sum| < thresh."""
    coords = np.concatenate([a_idx, b_idx]).astype(np.int64, copy=False)
    vals = np.concatenate([a_vals, b_vals])
    from_b = np.repeat([False, True], [len(a_idx), len(b_idx)])
    order = np.lexsort([from_b] + [coords[:, d] for d in range(coords.shape[1] - 1, -1, -1)])
    coords, vals, from_b = coords[order], vals[order], from_b[order]
    pair = np.zeros(len(vals), bool)  # the a entry of a row in both
    if len(vals) > 1:
        pair[:-1] = np.all(coords[:-1] == coords[1:], axis=1) & ~from_b[:-1] & from_b[1:]
    firsts = np.flatnonzero(pair)
    sums = vals[firsts] + vals[firsts + 1]
    vals[firsts] = sums
    keep = np.ones(len(vals), bool)
    keep[firsts + 1] = False
    keep[firsts[np.abs(sums) < thresh]] = False
    return coords[keep], vals[keep]


@kernel("SparseAdd", host_inputs=(2, 5))
def sparse_add(ctx, a_indices, a_values, a_shape, b_indices, b_values, b_shape, thresh):
    """a + b as a SparseTensor (see the module docstring for thresh)."""
    a_idx, b_idx = np.asarray(a_indices), np.asarray(b_indices)
    a_vals, b_vals = np.asarray(a_values), np.asarray(b_values)
    a_shape, thresh = np.asarray(a_shape), np.asarray(thresh)
    _check_add_inputs(a_idx, a_vals, a_shape, b_idx, b_vals, np.asarray(b_shape), thresh)
    if _strictly_increasing(a_idx) and _strictly_increasing(b_idx):
        out_idx, out_vals = _merge_sorted(a_idx, a_vals, b_idx, b_vals, thresh[()])
        return out_idx, out_vals, a_shape.astype(np.int64, copy=True)
    plan = _merge_plan(a_idx.tolist(), b_idx.tolist(), a_vals, b_vals, thresh[()])
    out_idx = np.zeros((len(plan), a_shape.size), np.int64)
    out_vals = np.zeros(len(plan), a_vals.dtype)
    for n, (src, k, v) in enumerate(plan):
        out_idx[n] = (a_idx if src == 0 else b_idx)[k]
        out_vals[n] = v
    return out_idx, out_vals, a_shape.astype(np.int64, copy=True)


def _route_grad(rows, sum_rows, k, pos, grad, out):
    """One COMPARE step of TensorFlow's SparseAddGrad walk: (new position, whether this
    operand's entry was not behind sum entry k)."""
    if rows[pos] == sum_rows[k]:
        out[pos] = grad[k]
        return pos + 1, True
    if rows[pos] < sum_rows[k]:
        return pos + 1, False
    return pos, True


def _route_grads(a_rows, b_rows, s_rows, grad, da, db):
    """TensorFlow's walk: sum entry k moves on once neither operand's entry is behind it."""
    i = j = k = 0
    while i < len(a_rows) and j < len(b_rows) and k < len(s_rows):
        i, a_ok = _route_grad(a_rows, s_rows, k, i, grad, da)
        j, b_ok = _route_grad(b_rows, s_rows, k, j, grad, db)
        k += a_ok and b_ok
    while i < len(a_rows) and k < len(s_rows):
        i, a_ok = _route_grad(a_rows, s_rows, k, i, grad, da)
        k += a_ok
    while j < len(b_rows) and k < len(s_rows):
        j, b_ok = _route_grad(b_rows, s_rows, k, j, grad, db)
        k += b_ok


@kernel("SparseAddGrad")
def sparse_add_grad(ctx, backprop_val_grad, a_indices, b_indices, sum_indices):
    """The sum's value gradients routed back to a's and b's entries at the same index."""
    grad = np.asarray(backprop_val_grad)
    a_idx, b_idx, s_idx = (np.asarray(t) for t in (a_indices, b_indices, sum_indices))
    check_rank(grad, 1, "backprop_val_grad should be a vector but received shape")
    for name, t in (("a_indices", a_idx), ("b_indices", b_idx), ("sum_indices", s_idx)):
        if t.ndim != 2 or t.shape[1] != a_idx.shape[-1]:
            fail(f"{name} should be a matrix with {a_idx.shape[-1]} columns but received "
                 f"shape {tf_dims(t.shape)}")
    if s_idx.shape[0] != grad.shape[0]:
        fail(f"sum_indices has {s_idx.shape[0]} rows but backprop_val_grad has "
             f"{grad.shape[0]} values")
    a_rows, b_rows, s_rows = a_idx.tolist(), b_idx.tolist(), s_idx.tolist()
    da, db = np.zeros(len(a_rows), grad.dtype), np.zeros(len(b_rows), grad.dtype)
    _route_grads(a_rows, b_rows, s_rows, grad, da, db)
    return da, db


# --- SparseReshape ----------------------------------------------------------------------------
def _target_shape(new, dense_size, in_dims):
    """new_shape with its one -1 resolved (TensorFlow's reshape_util checks and messages)."""
    out, product, unknown = [], 1, -1
    for d, size in enumerate(new):
        if size == -1:
            if unknown != -1:
                fail(f"only one output dimension may be -1, not both {unknown} and {d}")
            unknown = d
            out.append(1)
        else:
            if size < 0:
                fail(f"size {d} must be non-negative, not {size}")
            product *= size
            out.append(size)
    if unknown != -1:
        if product <= 0:
            fail("reshape cannot infer the missing input size for an empty tensor unless all "
                 "specified input sizes are non-zero")
        missing = dense_size // product
        if product * missing != dense_size:
            fail(f"Input to reshape is a SparseTensor with {dense_size} dense values, but the "
                 f"requested shape requires a multiple of {product}. input_shape="
                 f"{tf_dims(in_dims)} output_shape={tf_dims(out)}")
        out[unknown] = missing
    total = int(np.prod(out, dtype=object)) if out else 1
    if total != dense_size:
        fail(f"Input to reshape is a tensor with {dense_size} dense values, but the requested "
             f"shape has {total}. input_shape={tf_dims(in_dims)} output_shape={tf_dims(out)}")
    return out


def _row_major_strides(dims):
    return np.cumprod([1] + list(dims[:0:-1]), dtype=np.int64)[::-1]


@kernel("SparseReshape", host_inputs=(1, 2))
def sparse_reshape(ctx, input_indices, input_shape, new_shape):
    """The indices of the same dense positions in new_shape (one -1 inferred)."""
    idx, dims, new = (np.asarray(t) for t in (input_indices, input_shape, new_shape))
    check_rank(idx, 2, "Input indices should be a matrix but received shape")
    check_rank(dims, 1, "Input shape should be a vector but received shape")
    check_rank(new, 1, "Target shape should be a vector but received shape")
    if idx.shape[1] != dims.size:
        fail(f"Input tensor rank must match input shape length: {idx.shape[1]} vs. "
             f"{dims.size}")
    in_dims = [int(d) for d in dims.tolist()]
    if any(d < 0 for d in in_dims):
        fail(f"Dimension {min(in_dims)} must be >= 0")
    dense_size = int(np.prod(in_dims, dtype=object)) if in_dims else 1
    out_dims = _target_shape([int(d) for d in new.tolist()], dense_size, in_dims)
    out_shape = np.asarray(out_dims, np.int64).reshape(len(out_dims))
    if in_dims == out_dims:
        return idx.astype(np.int64, copy=True), out_shape
    linear = idx.astype(np.int64) @ _row_major_strides(in_dims) if in_dims else \
        np.zeros(idx.shape[0], np.int64)
    out = np.zeros((idx.shape[0], len(out_dims)), np.int64)
    for d, stride in enumerate(_row_major_strides(out_dims) if out_dims else []):
        out[:, d], linear = np.divmod(linear, stride)
    return out, out_shape


# --- SparseFillEmptyRows, SparseFillEmptyRowsGrad ---------------------------------------------
def _check_fill_inputs(idx, vals, dims, default):
    check_rank(dims, 1, "dense_shape must be a vector, saw:")
    check_rank(idx, 2, "indices must be a matrix, saw:")
    check_rank(vals, 1, "values must be a vector, saw:")
    if vals.shape[0] != idx.shape[0]:
        fail(f"The length of `values` ({vals.shape[0]}) must match the first dimension of "
             f"`indices` ({idx.shape[0]}).")
    check_rank(default, 0, "default_value must be a scalar, saw:")
    if dims.size == 0:
        fail("Dense shape cannot be empty.")
    if idx.shape[1] != dims.size:
        fail(f"indices has {idx.shape[1]} columns but dense_shape has {dims.size} elements")


@kernel("SparseFillEmptyRows", host_inputs=(2,))
def sparse_fill_empty_rows(ctx, indices, values, dense_shape, default_value):
    """Every row of the dense shape gets an entry: the empty ones (row, 0, ...) =
    default_value. The entries come grouped by row, rows ascending, each row's in input
    order; reverse_index_map[i] is where input entry i went."""
    idx, vals, dims, default = (np.asarray(t) for t in (indices, values, dense_shape,
                                                        default_value))
    _check_fill_inputs(idx, vals, dims, default)
    n_rows = int(dims[0])
    rows = idx[:, 0].astype(np.int64)
    bad = (rows < 0) | (rows >= n_rows)
    if bad.any():
        i = int(np.argmax(bad))
        fail(f"indices({i}, 0) is invalid: {int(rows[i])} "
             + (f">= {n_rows}" if rows[i] >= n_rows else "< 0"))
    counts = np.bincount(rows, minlength=n_rows)
    slots = np.maximum(counts, 1)
    row_start = np.cumsum(slots) - slots
    order = np.argsort(rows, kind="stable")
    first_of_row = np.cumsum(counts) - counts
    placed = np.empty(len(rows), np.int64)
    placed[order] = row_start[rows[order]] + np.arange(len(rows)) - first_of_row[rows[order]]
    empty = counts == 0
    total = int(slots.sum())
    out_idx = np.zeros((total, idx.shape[1]), np.int64)
    out_vals = np.empty(total, vals.dtype)
    out_idx[placed] = idx
    out_vals[placed] = vals
    out_idx[row_start[empty], 0] = np.flatnonzero(empty)
    out_vals[row_start[empty]] = default
    return out_idx, out_vals, empty, placed


@kernel("SparseFillEmptyRowsGrad")
def sparse_fill_empty_rows_grad(ctx, reverse_index_map, grad_values):
    """d_values: the gradients at reverse_index_map; d_default_value: the sum of the others
    (the filled-in entries)."""
    rim, grad = np.asarray(reverse_index_map), np.asarray(grad_values)
    check_rank(rim, 1, "reverse_index_map must be a vector, saw:")
    check_rank(grad, 1, "grad_values must be a vector, saw:")
    bad = (rim < 0) | (rim >= grad.shape[0])
    if bad.any():
        fail(f"Elements in reverse index must be in [0, {grad.shape[0]}) but got "
             f"{int(rim[np.argmax(bad)])}")
    filled = np.ones(grad.shape[0], bool)
    filled[rim] = False
    return grad[rim], np.asarray(np.sum(grad[filled], dtype=grad.dtype), grad.dtype)


# --- SparseDenseCwiseMul / Add / Div ----------------------------------------------------------
def _dense_at_entries(idx, dims, dense):
    """dense broadcast to the sparse shape (dense to sparse only), read at the entries."""
    r, dshape = len(dims), dense.shape
    fits = len(dshape) <= r and all(d in (1, n) for d, n in zip(dshape[::-1], dims[::-1]))
    if not fits:
        fail(f"SparseDenseBinaryOpShared broadcasts dense to sparse only; got incompatible "
             f"shapes: {tf_dims(dims)} vs. {tf_dims(dshape)}")
    if ((idx < 0) | (idx >= np.asarray(dims, np.int64))).any():
        fail("Provided indices are out-of-bounds w.r.t. dense side with broadcasted shape")
    wide = np.broadcast_to(dense, dims)  # a view: nothing of the sparse shape's size is made
    return wide[tuple(idx.T)] if idx.shape[0] else np.zeros(0, dense.dtype)


def _divide(x, y):
    """x / y, truncating for integers as C++ does; an integer zero divisor is an error."""
    if x.dtype.kind in "iu":
        if (y == 0).any():
            fail("Integer division by zero")
        q = np.abs(x) // np.abs(y)
        return np.where((x < 0) != (y < 0), -q, q).astype(x.dtype)
    return x / y


def _cwise(fn, sp_indices, sp_values, sp_shape, dense):
    """values fn dense broadcast to the sparse shape, at the sparse entries only."""
    idx, vals, dims = _sparse(sp_indices, sp_values, sp_shape,
                              ("sp_indices", "sp_values", "sp_shape"))
    at = _dense_at_entries(idx, dims, np.asarray(dense))
    return np.asarray(fn(vals, at)).astype(vals.dtype, copy=False)


@kernel("SparseDenseCwiseMul", host_inputs=(2,))
def sparse_dense_cwise_mul(ctx, *inputs):
    return _cwise(np.multiply, *inputs)


@kernel("SparseDenseCwiseAdd", host_inputs=(2,))
def sparse_dense_cwise_add(ctx, *inputs):
    return _cwise(np.add, *inputs)


@kernel("SparseDenseCwiseDiv", host_inputs=(2,))
def sparse_dense_cwise_div(ctx, *inputs):
    return _cwise(_divide, *inputs)
