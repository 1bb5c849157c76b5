"""Reference-variable scatters and slices (TF1's tf.compat.v1.scatter_update / scatter_add ...,
the sparse updates of TF1 optimizers, `ref[1:3].assign(v)`, CountUpTo), their value-semantics
siblings (ScatterNdNonAliasingAdd, InplaceUpdate / Add / Sub) and AccumulateNV2.

    ScatterAdd(w, [1, 3, 1], [a, b, c])          w[1] += a; w[3] += b; w[1] += c  -> w (the ref)
    ScatterNdMax(w, [[0, 1], [2, 0]], [a, b])    w[0, 1] = max(w[0, 1], a); w[2, 0] = ...
    StridedSliceAssign(w, [1], [3], [1], v)      w[1:3] = v (v broadcast to the slice)
    CountUpTo(n, limit=5)                        n's value before n += 1; an error once n >= 5
    InplaceAdd(x, [1, 5], v) on 4 rows          a copy of x with rows 1 and 5 % 4 = 1 plus v

The ref kernels write into the variable's buffer, which reads of the ref made earlier in the
step share, as TensorFlow's do (ref_updates.py), under the variable's lock whatever
`use_locking` says. Repeated indices apply one after another in their order, as TensorFlow's
CPU loop does: Add/Sub/Mul/Div/Min/Max accumulate, Update keeps the last. Out-of-range indices
are refused before anything is written (TensorFlow's CPU kernels have applied the updates before
the bad one by then). Integer ScatterDiv by zero is refused (TensorFlow's process dies).
ScatterNd* with 1-D indices reads the first index and the first update only, as TensorFlow's
kernel does (its shape function takes such indices for one index of len(indices) axes).
"""
import numpy as np

from tfg.kernels import ref_updates
from tfg.kernels._util import fail, s, shape_of, tf_dims, tf_name
from tfg.kernels.indexing_ops import strided_slice_index
from tfg.kernels.registry import kernel
from tfg.kernels.state_ops import scatter_rows


# --------------------------------------------------------------------------- combining rows
def _trunc_divide(a, b):
    """C++'s integer division (rounds toward zero), which numpy's floor_divide is not."""
    if not np.all(b):
        fail("Integer division by zero")
    q = np.floor_divide(a, b)
    return q + ((q * b != a) & ((a < 0) != (b < 0))).astype(q.dtype)


def _rounds(idx):
    """Positions of `idx` in rounds without a repeated index: round r holds each index's
    r-th occurrence, so rounds applied in turn apply the updates in their order."""
    if idx.size == 0:
        return []
    order = np.argsort(idx, kind="stable")
    ordered = idx[order]
    first = np.r_[True, ordered[1:] != ordered[:-1]]
    start = np.maximum.accumulate(np.where(first, np.arange(idx.size), 0))
    rank = np.empty(idx.size, np.int64)
    rank[order] = np.arange(idx.size) - start
    return [np.flatnonzero(rank == r) for r in range(int(rank.max()) + 1)]


def _combine(how, table, idx, rows):
    """table[idx[j]] = how(table[idx[j]], rows[j]) for j in order (how None: replace)."""
    if how is None:
        table[idx] = rows  # numpy assigns in order: of repeated indices the last stays
    elif how == "divide" and table.dtype.kind in "iu":
        for sel in _rounds(idx):
            table[idx[sel]] = _trunc_divide(table[idx[sel]], rows[sel])
    else:
        getattr(np, how).at(table, idx, rows)  # (ufunc.at: repeated indices in order)


# --------------------------------------------------------------------------- reference variables
def _write_rows(ref, how, nrows, idx, rows):
    """Combine `rows` into the rows of ref's buffer seen as `nrows` rows, in place where the
    buffer can be written, else into a copy that becomes the variable's value."""
    old = ref.get()
    buf = old if ref_updates.writable(np, old) and old.flags.c_contiguous else old.copy()
    _combine(how, buf.reshape((nrows,) + rows.shape[1:]), idx, rows)
    if buf is not old:
        ref.assign(buf)


def _same_dtype(op, params, updates):
    if updates.dtype != params.dtype:
        fail(f"{op}: Trying to update variable with wrong dtype. Expected "
             f"{tf_name(params.dtype)} got {tf_name(updates.dtype)}")


def _register_rows(op, how):
    @kernel(op, ref_inputs=(0,))
    def scatter(ctx, ref, indices, updates):
        updates = np.asarray(updates)
        with ref.lock:
            params = ref.get()
            _same_dtype(op, params, updates)
            idx, rows = scatter_rows(np, op, params, indices, updates)
            nrows = params.shape[0]
            _write_rows(ref, how, nrows, idx, rows)
        return ref
    return scatter


def _nd_shape_error(idx, updates, shape, k, batch, d=None):
    if d is not None:
        fail(f"Dimensions [0,{batch}) of indices[shape={tf_dims(idx.shape)}] = "
             f"{idx.shape[d]} must match dimensions [0,{batch}) of "
             f"updates[shape={tf_dims(updates.shape)}] = {updates.shape[d]}")
    fail(f"Dimensions [{k},{len(shape)}) of input[shape={tf_dims(shape)}] must match "
         f"dimensions [{k},{updates.ndim}) of updates[shape={tf_dims(updates.shape)}]")


def _check_nd_updates(idx, updates, shape, k, batch):
    """updates.shape must be indices.shape[:batch] + shape[k:] (TensorFlow's
    ValidateUpdateShape, its words and its order of checks)."""
    if updates.ndim < batch:
        fail(f"Dimensions [0,{batch}) of indices[shape={tf_dims(idx.shape)}] must match "
             f"dimensions [0,{batch}) of updates[shape={tf_dims(updates.shape)}]")
    if len(shape) < k + updates.ndim - batch or updates.ndim != batch + len(shape) - k:
        _nd_shape_error(idx, updates, shape, k, batch)
    for d in range(batch):
        if updates.shape[d] != idx.shape[d]:
            _nd_shape_error(idx, updates, shape, k, batch, d)
    if updates.shape[batch:] != tuple(shape[k:]):
        _nd_shape_error(idx, updates, shape, k, batch)


def _bad_index_words(idx, k, pos, shape):
    """TensorFlow's "indices[2,0] = [7, 1] does not index into shape [3,2]"."""
    batch_shape = idx.shape[:-1] if idx.ndim > 1 else ()
    where = "" if not batch_shape else (
        f"[{pos}]" if len(batch_shape) == 1 else
        "[" + ",".join(map(str, np.unravel_index(pos, batch_shape))) + "]")
    values = ", ".join(str(int(v)) for v in idx.reshape(-1, k)[pos])
    return f"indices{where} = [{values}] does not index into shape {tf_dims(shape)}"


def nd_rows(op, shape, indices, updates, policy=""):
    """(row numbers into `shape` seen as prod(shape[:k]) rows, the updates as those rows, the
    number of rows) of a ScatterNd-style update: indices' last axis (k) indexes shape's first
    k axes (1-D indices: one axis each). Checked as TensorFlow's ScatterNdUpdateOp checks;
    policy "IGNORE" drops out-of-range indices."""
    idx = np.asarray(indices)
    policy = s(policy)
    if policy not in ("", "DEFAULT", "ERROR", "IGNORE"):
        fail(f"Unknown bad indices handling attribute: {policy}")
    if idx.dtype.kind not in "iu":
        fail("indices must be int32 or int64")
    if idx.ndim == 0:
        fail(f"{op}: indices must be at least 1-D, got shape {tf_dims(idx.shape)}")
    k, batch = (idx.shape[-1], idx.ndim - 1) if idx.ndim > 1 else (1, 1)
    _check_nd_updates(idx, updates, shape, k, batch)
    if k == 0 and updates.size:
        fail(f"Indices and updates specified for empty output. indices shape: "
             f"{tf_dims(idx.shape)}")
    # (1-D indices: TensorFlow's kernel, counting indices.shape[:-1], reads the first only)
    flat = idx.reshape(-1, k) if idx.ndim > 1 else idx[:1].reshape(-1, 1)
    rows = updates[:flat.shape[0]].reshape((flat.shape[0],) + tuple(shape[k:]))
    ok = np.all((flat >= 0) & (flat < np.asarray(shape[:k], np.int64)), axis=1)
    if not ok.all():
        if policy != "IGNORE":
            fail(_bad_index_words(idx, k, int(np.argmin(ok)), shape))
        flat, rows = flat[ok], rows[ok]
    nrows = int(np.prod(shape[:k], dtype=np.int64))
    if k == 0:
        return np.zeros(flat.shape[0], np.int64), rows, nrows
    return np.ravel_multi_index(tuple(flat.T), tuple(shape[:k])), rows, nrows


def _register_nd(op, how):
    @kernel(op, ref_inputs=(0,))
    def scatter_nd(ctx, ref, indices, updates):
        updates = np.asarray(updates)
        with ref.lock:
            params = ref.get()
            _same_dtype(op, params, updates)
            idx, rows, nrows = nd_rows(op, params.shape, indices, updates,
                                       ctx.attrs.get("bad_indices_policy", ""))
            _write_rows(ref, how, nrows, idx, rows)
        return ref
    return scatter_nd


_ROW_OPS = {"ScatterUpdate": None, "ScatterAdd": "add", "ScatterSub": "subtract",
            "ScatterMul": "multiply", "ScatterDiv": "divide", "ScatterMin": "minimum",
            "ScatterMax": "maximum"}
_ND_OPS = {"ScatterNdUpdate": None, "ScatterNdAdd": "add", "ScatterNdSub": "subtract",
           "ScatterNdMax": "maximum", "ScatterNdMin": "minimum"}
for _op, _how in _ROW_OPS.items():
    _register_rows(_op, _how)
for _op, _how in _ND_OPS.items():
    _register_nd(_op, _how)


@kernel("ScatterNdNonAliasingAdd")
def scatter_nd_non_aliasing_add(ctx, x, indices, updates):
    """A copy of x with updates added at indices (booleans: or-ed, TensorFlow's bool add)."""
    out = np.array(x, copy=True)
    updates = np.asarray(updates, dtype=out.dtype)
    idx, rows, nrows = nd_rows("ScatterNdNonAliasingAdd", out.shape, indices, updates,
                               ctx.attrs.get("bad_indices_policy", ""))
    how = "logical_or" if out.dtype == np.bool_ else "add"
    _combine(how, out.reshape((nrows,) + rows.shape[1:]), idx, rows)
    return out


@kernel("StridedSliceAssign", ref_inputs=(0,), host_inputs=(1, 2, 3))
def strided_slice_assign(ctx, ref, begin, end, strides, value):
    """ref[begin:end:strides] = value, value broadcast to the slice's shape."""
    value = np.asarray(value)
    with ref.lock:
        old = ref.get()
        index = strided_slice_index(old.shape, begin, end, strides, ctx.attrs)
        target_shape = np.empty(old.shape, np.bool_)[index].shape  # (no copy of the values)
        if 0 in target_shape:
            return ref  # an empty slice: TensorFlow checks nothing further
        try:
            np.broadcast_to(value, target_shape)
        except ValueError:
            fail(f"Cannot broadcast input shape {tf_dims(value.shape)} into final shape "
                 f"{tf_dims(target_shape)}")
        buf = old if ref_updates.writable(np, old) else old.copy()
        buf[index] = value
        if buf is not old:
            ref.assign(buf)
    return ref


@kernel("CountUpTo", ref_inputs=(0,))
def count_up_to(ctx, ref):
    """The counter's value, then counter += 1; TensorFlow's OutOfRange once it reaches
    `limit` (a TF1 input pipeline's epoch counter)."""
    limit = int(ctx.attrs["limit"])
    with ref.lock:
        old = np.asarray(ref.get())
        if old.ndim:
            fail(f"input is not a scalar: {tf_dims(old.shape)}")
        before = old.copy()
        if int(before) >= limit:
            fail(f"Reached limit of {limit}")
        ref_updates.update(np, ref, np.add, old.dtype.type(1))
    return before


ref_updates.writes_in_place(*_ROW_OPS, *_ND_OPS, "StridedSliceAssign", "CountUpTo")


# --------------------------------------------------------------------------- value row ops
def _register_inplace(op, how):
    @kernel(op)
    def inplace(ctx, x, i, v):
        """A copy of x with rows i % x.shape[0] combined with v's rows (TensorFlow's kernel
        wraps the row numbers, and writes its input's buffer; tfg copies)."""
        x, i, v = np.asarray(x), np.asarray(i), np.asarray(v)
        if i.ndim != 1:
            fail(f"i must be a vector. {tf_dims(i.shape)}")
        if x.ndim != v.ndim:
            fail(f"x and v shape doesn't match (ranks differ): {tf_dims(x.shape)} vs. "
                 f"{tf_dims(v.shape)}")
        for d in range(1, x.ndim):
            if x.shape[d] != v.shape[d]:
                fail(f"x and v shape doesn't match at index {d} : {tf_dims(x.shape)} vs. "
                     f"{tf_dims(v.shape)}")
        if x.ndim == 0 or i.shape[0] != v.shape[0]:
            fail(f"i and x shape doesn't match at index 0: {tf_dims(i.shape)} vs. "
                 f"{tf_dims(v.shape)}")
        y = x.copy()
        if i.size and x.shape[0] == 0:
            fail(f"{op}: rows {i.tolist()} of x of shape {tf_dims(x.shape)}, which has none")
        _combine(how, y, np.mod(i, x.shape[0]) if i.size else i, v)
        return y
    return inplace


for _op, _how in (("InplaceUpdate", None), ("InplaceAdd", "add"), ("InplaceSub", "subtract")):
    _register_inplace(_op, _how)


@kernel("AccumulateNV2")
def accumulate_n(ctx, *xs):
    """The sum of the inputs, in their order (TensorFlow rewrites the op into AssignAdds to a
    temporary variable; the sum is AddN's)."""
    shapes = [shape_of(x) for x in xs]
    if any(sh != shapes[0] for sh in shapes[1:]):
        fail("AccumulateNV2 inputs must all have the same shape, got "
             + ", ".join(tf_dims(sh) for sh in shapes))
    want = ctx.attrs.get("shape")
    if want is not None and (len(want) != len(shapes[0]) or any(
            w is not None and w != d for w, d in zip(want, shapes[0]))):
        fail(f"AccumulateNV2 inputs of shape {tf_dims(shapes[0])} do not match its shape attr "
             f"{tf_dims('?' if w is None else w for w in want)}")
    out = np.array(xs[0], copy=True)
    for x in xs[1:]:
        np.add(out, x, out=out)
    return out
