"""Shape functions of the array ops: reshaping, joining, splitting, slicing, gathering, padding.

    >>> reshape(ctx)        # x: [2, 3, 4], shape = [-1, 4]     -> [(6, 4)]
    >>> strided_slice(ctx)  # x: [5, ?, 3], x[1:, :, 0]          -> [(4, None)]
"""
import numpy as np

from tfg.schemas.tensors import shape_from_proto
from tfg.schemas.ops.shape_fns import (
    ShapeError, broadcast, canonical_axis, fmt, merge, merge_dim, num_elements, rank,
    with_rank, with_rank_at_least)


def const_shape(ctx):
    # Read the shape from the TensorProto header: decoding a large constant is not needed.
    attr = ctx.node.attr
    if "value" not in attr or not attr["value"].HasField("tensor"):
        raise ShapeError("Const has no tensor value")
    return [shape_from_proto(attr["value"].tensor.tensor_shape)]


def bitcast(ctx):
    """Same bytes, another dtype: a wider type eats the last dim, a narrower one adds one."""
    s = ctx.shape(0)
    into, out = np.dtype(ctx.attr("T").np).itemsize, np.dtype(ctx.attr("type").np).itemsize
    if s is None or into == out:
        return [s]
    if into > out:
        return [tuple(s) + (into // out,)]
    if not s:
        raise ShapeError(f"cannot bitcast a scalar of {into} bytes to a {out}-byte type")
    if s[-1] is not None and s[-1] != out // into:
        raise ShapeError(f"cannot bitcast: the last dimension must be {out // into}, got {s[-1]}")
    return [tuple(s[:-1])]


def placeholder_with_default(ctx):
    declared = ctx.attr("shape")
    merge(ctx.shape(0), declared)  # the default value must fit the declared shape
    return [declared]


def ensure_shape(ctx):
    return [merge(ctx.shape(0), ctx.attr("shape"))]


def shape_of(ctx):
    return [(ctx.rank(0),)]


def shape_n(ctx):
    return [(rank(s),) for s in ctx.input_shapes]


def reshape(ctx):
    target = ctx.shape_tensor(1)
    if target is None:
        return [None]
    elems = ctx.elems(1)
    minus = [i for i, e in enumerate(elems or ()) if e == -1]
    if len(minus) > 1:
        raise ShapeError("Reshape's shape has more than one -1")
    n_in = num_elements(ctx.shape(0))
    if not minus:
        n_out = num_elements(target)
        if n_in is not None and n_out is not None and n_in != n_out:
            raise ShapeError(f"cannot reshape {n_in} values to {fmt(target)}")
        return [target]
    known = [d for i, d in enumerate(target) if i != minus[0]]
    if n_in is None or any(d is None for d in known):
        return [target]
    k = 1
    for d in known:
        k *= d
    if k == 0 or n_in % k:
        if k == 0 and n_in == 0:
            return [target]
        raise ShapeError(f"cannot reshape {n_in} values to {fmt(target)} (with -1)")
    return [target[:minus[0]] + (n_in // k,) + target[minus[0] + 1:]]


def squeeze(ctx):
    s = ctx.shape(0)
    dims = list(ctx.attr("squeeze_dims"))
    if s is None:
        return [None]
    r = len(s)
    wanted = {canonical_axis(d, r, "squeeze dim") for d in dims}
    out = []
    for i, d in enumerate(s):
        if wanted:
            if i in wanted:
                if d is not None and d != 1:
                    raise ShapeError(f"cannot squeeze dim {i} of size {d}")
                continue
            out.append(d)
        elif d is None:
            return [None]  # without explicit dims an unknown dim may or may not go
        elif d != 1:
            out.append(d)
    return [tuple(out)]


def expand_dims(ctx):
    s, axis = ctx.shape(0), ctx.scalar(1)
    if s is None or axis is None:
        return [None]
    axis = canonical_axis(axis, len(s) + 1)
    return [s[:axis] + (1,) + s[axis:]]


def _rank_by_vector(ctx, what):
    """The rank of input 0 when input 1 (a perm, multiples or paddings of unknown values) has
    one entry (row) per dimension: from either, which must agree (TensorFlow's shape functions
    refuse a perm of 3 entries for a matrix), and at most 254 (a vector of 2**31 entries)."""
    r, vs = ctx.rank(0), ctx.shape(1)
    n = vs[0] if vs is not None and len(vs) >= 1 else None
    if r is not None and n is not None and n != r:
        raise ShapeError(f"Dimension must be {r} but is {n} ({what} of a rank-{r} input)")
    r = n if r is None else r
    return None if r is None else with_rank(None, r, f"{what}'s input")


def transpose(ctx):
    s, perm = ctx.shape(0), ctx.elems(1)
    if perm is None or any(p is None for p in perm):
        return [_rank_by_vector(ctx, "Transpose perm")]
    s = with_rank(s, len(perm))
    if sorted(perm) != list(range(len(perm))):
        raise ShapeError(f"{list(perm)} is not a permutation")
    return [tuple(s[p] for p in perm)]


def broadcast_args(ctx):
    a, b = ctx.shape(0), ctx.shape(1)
    if a is None or b is None or a[0] is None or b[0] is None:
        return [(None,)]
    return [(max(a[0], b[0]),)]


def broadcast_gradient_axes(a, b):
    """TensorFlow's BroadcastGradientArgs on two known shapes: per operand, the axes of the
    broadcast shape its gradient is summed over. Identical shapes give none (TensorFlow's BCast
    returns before it looks at the dims); otherwise an axis that is 1 in both is listed for
    both (summing a size-1 axis is free), so [2, 1] vs [2, 1] -> ([], []) while
    [2, 1, 3] vs [1, 1, 3] -> ([1], [0, 1]). Compatibility is the caller's check."""
    a, b = tuple(a), tuple(b)
    if a == b:
        return [], []
    n = max(len(a), len(b))
    pa, pb = (1,) * (n - len(a)) + a, (1,) * (n - len(b)) + b
    return [i for i in range(n) if pa[i] == 1], [i for i in range(n) if pb[i] == 1]


def broadcast_gradient_args(ctx):
    vals = [ctx.value(0), ctx.value(1)]
    if all(v is not None for v in vals):
        r0, r1 = broadcast_gradient_axes(*(tuple(int(x) for x in v.reshape(-1)) for v in vals))
        return [(len(r0),), (len(r1),)]
    return [(None,), (None,)]


def broadcast_grad_sum(ctx):
    """_TfgBroadcastGradSum(grad, shape, other_shape): the shape its `shape` operand holds."""
    return [ctx.shape_tensor(1)]


def _concat(shapes, axis):
    r = None
    for s in shapes:
        if s is not None:
            r = len(s)
            break
    if r is None or axis is None:
        return None if r is None else (None,) * r
    axis = canonical_axis(axis, r, "concat axis")
    out = [None] * r
    total = 0
    for s in shapes:
        s = with_rank(s, r, "concat input")
        for i, d in enumerate(s):
            if i == axis:
                total = None if total is None or d is None else total + d
            else:
                out[i] = merge_dim(out[i], d)
    out[axis] = total
    return tuple(out)


def concat_v2(ctx):
    n = ctx.num_inputs - 1
    return [_concat(ctx.input_shapes[:n], ctx.scalar(n))]


def concat_v1(ctx):
    return [_concat(ctx.input_shapes[1:], ctx.scalar(0))]


def concat_offset(ctx):
    return [ctx.shape(1)] * (ctx.num_inputs - 1)


def pack(ctx):
    s = None
    for x in ctx.input_shapes:
        s = merge(s, x)
    if s is None:
        return [None]
    axis = canonical_axis(ctx.attr("axis"), len(s) + 1, "pack axis")
    return [s[:axis] + (ctx.num_inputs,) + s[axis:]]


def unpack(ctx):
    s, num = ctx.shape(0), ctx.attr("num")
    if s is None:
        return [None] * num
    axis = canonical_axis(ctx.attr("axis"), len(s), "unpack axis")
    merge_dim(s[axis], num)
    return [s[:axis] + s[axis + 1:]] * num


def split(ctx):
    s, n, axis = ctx.shape(1), ctx.attr("num_split"), ctx.scalar(0)
    if s is None:
        return [None] * n
    if axis is None:
        return [(None,) * len(s)] * n
    axis = canonical_axis(axis, len(s), "split dim")
    d = s[axis]
    if d is not None and d % n:
        raise ShapeError(f"dimension {axis} of size {d} does not split into {n} parts")
    out = s[:axis] + (None if d is None else d // n,) + s[axis + 1:]
    return [out] * n


def split_v(ctx):
    s, n, axis = ctx.shape(0), ctx.attr("num_split"), ctx.scalar(2)
    sizes = ctx.elems(1)
    if s is None:
        return [None] * n
    if axis is None:
        return [(None,) * len(s)] * n
    axis = canonical_axis(axis, len(s), "split dim")
    if sizes is None or len(sizes) != n:
        return [s[:axis] + (None,) + s[axis + 1:]] * n
    sizes = list(sizes)
    if sizes.count(-1) == 1 and s[axis] is not None and None not in sizes:
        sizes[sizes.index(-1)] = s[axis] - (sum(sizes) + 1)
    return [s[:axis] + (None if z is None or z < 0 else z,) + s[axis + 1:] for z in sizes]


def tile(ctx):
    s, mult = ctx.shape(0), ctx.elems(1)
    if mult is None:
        return [_rank_by_vector(ctx, "Tile multiples")]
    s = with_rank(s, len(mult), "Tile input")
    return [tuple(None if d is None or m is None else d * m for d, m in zip(s, mult))]


def slice_shape(ctx):
    s, begin, size = ctx.shape(0), ctx.elems(1), ctx.elems(2)
    n = len(size) if size is not None else (len(begin) if begin is not None else None)
    if n is None:
        return [None if s is None else (None,) * len(s)]
    s = with_rank(s, n, "Slice input")
    out = []
    for i in range(n):
        z = size[i] if size is not None else None
        b = begin[i] if begin is not None else None
        if z is not None and z >= 0:
            out.append(z)
        elif z == -1 and b is not None and s[i] is not None:
            out.append(s[i] - b)
        else:
            out.append(None)
    return [tuple(out)]


def strided_slice_index(begin, end, strides, attrs):
    """The numpy index equal to TensorFlow's strided slice spec (masks included)."""
    idx = []
    for i in range(len(begin)):
        bit = 1 << i
        if attrs["ellipsis_mask"] & bit:
            idx.append(Ellipsis)
        elif attrs["new_axis_mask"] & bit:
            idx.append(np.newaxis)
        elif attrs["shrink_axis_mask"] & bit:
            idx.append(int(begin[i]))
        else:
            if strides[i] == 0:
                raise ShapeError("strided slice stride is 0")
            b = None if attrs["begin_mask"] & bit else int(begin[i])
            e = None if attrs["end_mask"] & bit else int(end[i])
            idx.append(slice(b, e, int(strides[i])))
    if idx.count(Ellipsis) > 1:
        raise ShapeError("strided slice has more than one ellipsis")
    return tuple(idx)


def strided_slice(ctx):
    s = ctx.shape(0)
    begin, end, strides = ctx.elems(1), ctx.elems(2), ctx.elems(3)
    attrs = {k: ctx.attr(k) for k in ("begin_mask", "end_mask", "ellipsis_mask",
                                      "new_axis_mask", "shrink_axis_mask")}
    n = None
    for i in (1, 2, 3):
        ss = ctx.shape(i)
        if ss is not None and len(ss) == 1 and ss[0] is not None:
            n = ss[0]
    if n is None or s is None:
        return [None]
    if n > len(s) + 255:  # past the input's rank, every entry but an ellipsis adds a dim
        raise ShapeError(f"strided slice of {n} dims on a tensor of shape {fmt(s)}: the "
                         "result would have more than 254 dims")  # TensorFlow's most
    if strides is not None and any(x == 0 for x in strides):
        raise ShapeError("strided slice stride is 0")
    # Expand the spec to one entry per input dimension (ellipsis and the implicit trailing
    # ellipsis fill the rest), then size each kept dimension.
    ell = [i for i in range(n) if attrs["ellipsis_mask"] >> i & 1]
    if len(ell) > 1:
        raise ShapeError("strided slice has more than one ellipsis")
    consuming = sum(1 for i in range(n) if not (attrs["new_axis_mask"] >> i & 1)
                    and not (attrs["ellipsis_mask"] >> i & 1))
    if consuming > len(s):
        raise ShapeError(f"strided slice of {n} dims on a tensor of shape {fmt(s)}")
    fill = len(s) - consuming
    spec = list(range(n)) if ell else list(range(n)) + ["..."]
    out, dim = [], 0
    for i in spec:
        if i == "..." or attrs["ellipsis_mask"] >> i & 1:
            out.extend(s[dim:dim + fill])
            dim += fill
            continue
        if attrs["new_axis_mask"] >> i & 1:
            out.append(1)
            continue
        d = s[dim]
        dim += 1
        if attrs["shrink_axis_mask"] >> i & 1:
            b = begin[i] if begin is not None else None
            if d is not None and b is not None and not -d <= b < d:
                raise ShapeError(f"strided slice index {b} out of range for dim of size {d}")
            continue
        b = None if attrs["begin_mask"] >> i & 1 else (begin[i] if begin else None)
        e = None if attrs["end_mask"] >> i & 1 else (end[i] if end else None)
        st = strides[i] if strides else None
        unknown_b = b is None and not attrs["begin_mask"] >> i & 1
        unknown_e = e is None and not attrs["end_mask"] >> i & 1
        if d is None or st is None or unknown_b or unknown_e:
            out.append(None)
        else:
            out.append(len(range(*slice(b, e, st).indices(d))))
    return [tuple(out)]


def gather_v2(ctx):
    params, indices = ctx.shape(0), ctx.shape(1)
    axis, batch_dims = ctx.scalar(2), ctx.attr("batch_dims")
    if params is None or indices is None or axis is None:
        return [None]
    axis = canonical_axis(axis, len(params), "gather axis")
    if batch_dims < 0:
        batch_dims += len(indices)
    return [params[:axis] + indices[batch_dims:] + params[axis + 1:]]


def gather(ctx):
    params, indices = ctx.shape(0), ctx.shape(1)
    if params is None or indices is None:
        return [None]
    with_rank_at_least(params, 1, "Gather params")
    return [indices + params[1:]]


def gather_nd(ctx):
    params, indices = ctx.shape(0), ctx.shape(1)
    if params is None or indices is None or indices[-1] is None:
        return [None]
    return [indices[:-1] + params[indices[-1]:]]


def unsorted_segment_sum(ctx):
    data, ids, n = ctx.shape(0), ctx.shape(1), ctx.scalar(2)
    if data is None or ids is None:
        return [None]
    return [(n,) + data[len(ids):]]


def dynamic_stitch(ctx):
    n = ctx.num_inputs // 2
    size = None
    vals = [ctx.value(i) for i in range(n)]
    if all(v is not None for v in vals):
        size = max((int(v.max()) for v in vals if v.size), default=-1) + 1
    rest = None
    for i in range(n):
        ind, dat = ctx.shape(i), ctx.shape(n + i)
        if ind is not None and dat is not None:
            rest = merge(rest, dat[len(ind):])
    return [None if rest is None else (size,) + rest]


def pad(ctx):
    s, paddings = ctx.shape(0), ctx.elems(1)
    if paddings is None:
        return [_rank_by_vector(ctx, "Pad paddings")]
    s = with_rank(s, len(paddings) // 2, "Pad input")
    return [tuple(None if d is None or paddings[2 * i] is None or paddings[2 * i + 1] is None
                  else d + paddings[2 * i] + paddings[2 * i + 1] for i, d in enumerate(s))]


def mirror_pad_grad(ctx):
    """The padded gradient folded back: each dim shrinks by its two paddings."""
    s, paddings = ctx.shape(0), ctx.elems(1)
    if paddings is None or s is None:
        return [None if s is None else (None,) * len(s)]
    s = with_rank(s, len(paddings) // 2, "MirrorPadGrad input")
    return [tuple(None if d is None or paddings[2 * i] is None or paddings[2 * i + 1] is None
                  else d - paddings[2 * i] - paddings[2 * i + 1] for i, d in enumerate(s))]


def range_shape(ctx):
    start, limit, delta = (ctx.value(i) for i in range(3))
    if start is None or limit is None or delta is None:
        return [(None,)]
    start, limit, delta = (np.asarray(v).reshape(-1)[0] for v in (start, limit, delta))
    if delta == 0:
        raise ShapeError("Range delta is 0")
    n = int(np.ceil((limit - start) / delta)) if (limit - start) * delta > 0 else 0
    return [(n,)]


def one_hot(ctx):
    s, depth = ctx.shape(0), ctx.scalar(1)
    if s is None:
        return [None]
    axis = ctx.attr("axis")
    axis = len(s) if axis == -1 else canonical_axis(axis, len(s) + 1, "one_hot axis")
    return [s[:axis] + (depth,) + s[axis:]]


def list_diff(ctx):
    return [(None,), (None,)]


def where(ctx):
    r = ctx.rank(0)
    return [(None, r)]


def select(ctx):
    cond, t, e = ctx.shape(0), ctx.shape(1), ctx.shape(2)
    out = merge(t, e)
    if cond == ():
        return [out]  # a scalar condition picks one of the two tensors whole
    if cond is not None and out is not None and len(cond) != len(out):
        if len(cond) != 1 or not out:
            raise ShapeError(f"Select condition {fmt(cond)} fits neither {fmt(out)} nor its "
                             f"first dimension")
        out = (merge_dim(cond[0], out[0]),) + out[1:]
    elif cond is not None and out is not None:
        out = merge(cond, out)
    return [out]


def select_v2(ctx):
    return [broadcast(ctx.shape(0), broadcast(ctx.shape(1), ctx.shape(2)))]


# --- sets, partitions, sparse-to-dense, searches, histograms (array_more) -------------------
def unique(ctx):
    """Unique / UniqueWithCounts: a vector in; the distinct values (how many is known only at
    run time), idx shaped like x (and the counts)."""
    x = with_rank(ctx.shape(0), 1, "Unique input")
    return [(None,), x] + [(None,)] * (ctx.num_outputs - 2)


def unique_v2(ctx):
    """UniqueV2(x, axis): x with the axis dim unknown (the distinct slices), idx as long as
    that dim; an empty axis means a vector x."""
    s, axis = ctx.shape(0), ctx.elems(1)
    with_rank(ctx.shape(1), 1, "UniqueV2 axis")
    if axis is not None and len(axis) > 1:
        raise ShapeError("axis does not support input tensors larger than 1 elements")
    if s is None or axis is None or None in axis:
        return [None if s is None else (None,) * len(s), (None,)]
    if not axis:
        with_rank(s, 1, "UniqueV2 input")
        return [(None,), s]
    a = canonical_axis(axis[0], len(s), "UniqueV2 axis")
    return [s[:a] + (None,) + s[a + 1:], (s[a],)]


def unique_with_counts_v2(ctx):
    """UniqueWithCountsV2(x, axis): UniqueV2's outputs and the counts (one per slice kept)."""
    return unique_v2(ctx) + [(None,)]


def diag(ctx):
    """Diag: a tensor of rank 2k from the rank-k diagonal (shape s + s)."""
    s = with_rank_at_least(ctx.shape(0), 1, "Diag input")
    return [None if s is None else tuple(s) + tuple(s)]


def diag_part(ctx):
    """DiagPart: the first half of an even-rank input's shape (which the second half equals)."""
    s = ctx.shape(0)
    if s is None:
        return [None]
    if len(s) % 2 or not s:
        raise ShapeError(f"Input must have even and non-zero rank, input rank is {len(s)}")
    half = len(s) // 2
    return [tuple(merge_dim(a, b) for a, b in zip(s[:half], s[half:]))]


def dynamic_partition(ctx):
    """Each partition: an unknown number of the rows data has below partitions' dims."""
    data, parts, n = ctx.shape(0), ctx.shape(1), ctx.attr("num_partitions")
    if data is None or parts is None:
        return [None] * n
    merge(tuple(data[:len(parts)]), parts)
    return [(None,) + tuple(data[len(parts):])] * n


def sparse_to_dense(ctx):
    """The dense shape is output_shape's value; indices of rank <= 2, default a scalar."""
    idx = ctx.shape(0)
    if idx is not None and len(idx) > 2:
        raise ShapeError(f"sparse_indices should be a scalar, vector, or matrix, got shape "
                         f"{fmt(idx)}")
    with_rank(ctx.shape(3), 0, "default_value")
    out = ctx.shape_tensor(1)
    if out is not None and ctx.value(1) is not None:
        bad = [int(d) for d in np.asarray(ctx.value(1)).reshape(-1) if int(d) < 0]
        if bad:
            raise ShapeError(f"Dimension {bad[0]} must be >= 0")
    return [out]


def search_sorted(ctx):
    """LowerBound/UpperBound: matrices [batch, n] and [batch, m] -> [batch, m]."""
    sorted_in = with_rank(ctx.shape(0), 2, "sorted_inputs")
    values = with_rank(ctx.shape(1), 2, "values")
    merge_dim(sorted_in[0], values[0])
    return [values]


def histogram_fixed_width(ctx):
    """[nbins], the value of the nbins input (which the memory guard then sizes)."""
    vr = with_rank(ctx.shape(1), 1, "value_range")
    if vr[0] is not None and vr[0] != 2:
        raise ShapeError("value_range should be a vector of 2 elements.")
    with_rank(ctx.shape(2), 0, "nbins")
    n = ctx.scalar(2)
    if n is not None and n <= 0:
        raise ShapeError(f"Requires nbins > 0: {n}")
    return [(n,)]


def bincount(ctx):
    """[size], the value of the size input."""
    with_rank(ctx.shape(1), 0, "size")
    n = ctx.scalar(1)
    if n is not None and n < 0:
        raise ShapeError(f"size ({n}) must be non-negative")
    return [(n,)]


def lin_space(ctx):
    """[num], the value of the num input; start and stop are scalars."""
    for i, what in ((0, "start"), (1, "stop"), (2, "num")):
        with_rank(ctx.shape(i), 0, what)
    n = ctx.scalar(2)
    if n is not None and n <= 0:
        raise ShapeError(f"Requires num > 0: {n}")
    return [(n,)]


def reverse(ctx):
    """Reverse (v1): one bool per input dim; TensorFlow's kernel stops at rank 8."""
    dims = with_rank(ctx.shape(1), 1, "Reverse dims")
    s = ctx.shape(0)
    if dims[0] is not None:
        s = with_rank(s, dims[0], "Reverse input")
    if s is not None and len(s) > 8:
        raise ShapeError("reverse does not work on tensors with more than 8 dimensions")
    return [s]
