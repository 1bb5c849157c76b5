"""Shape-manipulating ops: Shape/Size/Rank, Reshape, Squeeze/ExpandDims, Transpose, Concat,
Pack/Unpack, Split, Slice, Tile, Pad, Reverse, Fill, Range, OneHot, broadcasting helpers,
ListDiff, Where, and the data-format helpers; sets (Unique*), searches and counts
(LowerBound/UpperBound, Bucketize, HistogramFixedWidth, Bincount), LinSpace, Reverse (v1) and
ConjugateTranspose.

    Reshape(x[2,6], [3,-1])            -> shape [3,4]
    ConcatV2([a[2,3], b[2,1]], -1)     -> shape [2,4]
    SplitV(x[2,7], [2,-1,3], axis=1)   -> shapes [2,2], [2,2], [2,3]
    BroadcastGradientArgs([2,1,4], [3,1]) -> ([1], [0,2])
    DataFormatDimMap([0,1,2,3])        -> [0,2,3,1]  (NHWC axis -> NCHW axis)
"""
import numpy as np

from tfg.kernels._util import (fail, norm_axes, norm_axis, np_dtype, s, shape_of, shape_vector,
                               tf_dims, tf_name)
from tfg.kernels.list_bulk_ops import zeros_like_item, zeros_like_list
from tfg.kernels.list_ops import TensorList
from tfg.kernels.optional_ops import OptionalValue
from tfg.kernels.registry import ALL_DEVICES, kernel
from tfg.schemas.ops.array_shapes import broadcast_gradient_axes


def _out_type(ctx, default="int32"):
    return np_dtype(ctx.attrs.get("out_type", default))


@kernel("Shape", device_types=ALL_DEVICES, host_only=True, shape_only=True)
def shape(ctx, x):
    return np.array(shape_of(x), dtype=_out_type(ctx))


@kernel("ShapeN", device_types=ALL_DEVICES, host_only=True, shape_only=True)
def shape_n(ctx, *xs):
    t = _out_type(ctx)
    return [np.array(shape_of(x), dtype=t) for x in xs]


@kernel("Size", device_types=ALL_DEVICES, host_only=True, shape_only=True)
def size(ctx, x):
    return np.array(int(np.prod(shape_of(x))), dtype=_out_type(ctx))


@kernel("Rank", device_types=ALL_DEVICES, host_only=True, shape_only=True)
def rank(ctx, x):
    return np.array(len(shape_of(x)), dtype=np.int32)


@kernel("Reshape", device_types=ALL_DEVICES, host_inputs=(1,))
def reshape(ctx, x, new_shape):
    xp = ctx.xp
    x = xp.asarray(x)
    dims = shape_vector(new_shape)
    if sum(d == -1 for d in dims) > 1 or any(d < -1 for d in dims):
        fail(f"only one input size may be -1, and none below: {list(dims)}")
    try:
        return x.reshape(dims)
    except ValueError:
        fail(f"Input to reshape is a tensor with {x.size} values, but the requested shape "
             f"{list(dims)} does not fit")


@kernel("Squeeze", device_types=ALL_DEVICES)
def squeeze(ctx, x):
    xp = ctx.xp
    x = xp.asarray(x)
    shapes = ctx.cache.get("squeeze")  # input shape -> output shape, per node
    if shapes is None:
        shapes = ctx.cache["squeeze"] = {}
    out = shapes.get(x.shape)
    if out is None:
        out = _squeezed(ctx, x.shape)
        if len(shapes) >= 64:
            shapes.clear()
        shapes[x.shape] = out
    return x.reshape(out)


def _squeezed(ctx, shape):
    dims = ctx.attrs.get("squeeze_dims", ctx.attrs.get("axis", [])) or []
    if not dims:
        return tuple(d for d in shape if d != 1)
    axes = norm_axes(np.array(dims, np.int64), len(shape), "squeeze dimension")
    for a in axes:
        if shape[a] != 1:
            fail(f"Can not squeeze dim[{a}], expected a dimension of 1, got {shape[a]}")
    return tuple(d for i, d in enumerate(shape) if i not in axes)


@kernel("ExpandDims", device_types=ALL_DEVICES, host_inputs=(1,))
def expand_dims(ctx, x, dim):
    xp = ctx.xp
    x = xp.asarray(x)
    d = int(np.asarray(dim).reshape(-1)[0]) if np.size(dim) == 1 else fail(
        "'dim' must be a tensor with a single value")
    d = norm_axis(d, x.ndim + 1, "dim")
    return x.reshape(x.shape[:d] + (1,) + x.shape[d:])


@kernel("Transpose", device_types=ALL_DEVICES, host_inputs=(1,))
def transpose(ctx, x, perm):
    xp = ctx.xp
    x = xp.asarray(x)
    if np.size(perm) != x.ndim:  # before the values: a perm of 2**27 entries is no list
        fail(f"transpose expects a vector of size {x.ndim}. But input(1) is a vector of size "
             f"{np.size(perm)}")
    p = shape_vector(perm, "perm")
    if sorted(p) != list(range(x.ndim)):
        fail(f"transpose expects a permutation of [0..{x.ndim}), got {list(p)}")
    return xp.transpose(x, p)


@kernel("InvertPermutation", device_types=ALL_DEVICES, host_only=True)
def invert_permutation(ctx, x):
    x = np.asarray(x)
    if x.ndim != 1 or sorted(x.tolist()) != list(range(x.size)):
        fail(f"{x.tolist()} is not a permutation of 0..{x.size - 1}")
    out = np.empty_like(x)
    out[x] = np.arange(x.size, dtype=x.dtype)
    return out


def _concat(xp, values, axis):
    if xp is np and type(axis) is np.ndarray and axis.ndim == 0 and axis.dtype.kind in "iu":
        # numpy arrays and a scalar axis in range: np.concatenate straight away (a gradient
        # loop's ConcatV2, 10 us a call, 4 of them the checks below)
        ndim = getattr(values[0], "ndim", 0)
        ax = int(axis)
        if ndim and -ndim <= ax < ndim and len(values) > 1 and all(
                type(v) is np.ndarray for v in values):
            try:
                return np.concatenate(values, axis=ax)
            except ValueError:
                pass  # (the general path words the error)
    values = [xp.asarray(v) for v in values]
    ndim = values[0].ndim
    if ndim == 0:
        fail("Can't concatenate scalars (use tf.stack instead)")
    ax = norm_axis(np.asarray(axis).reshape(()), ndim, "concat axis")
    if len(values) == 1:
        return values[0]
    try:
        return xp.concatenate(values, axis=ax)
    except ValueError:
        fail("ConcatOp: dimensions of inputs should match: "
             + ", ".join(str(list(v.shape)) for v in values) + f" along axis {ax}")


@kernel("ConcatV2", device_types=ALL_DEVICES, host_inputs=(-1,))
def concat_v2(ctx, *inputs):
    xp = ctx.xp
    return _concat(xp, inputs[:-1], inputs[-1])


@kernel("Concat", device_types=ALL_DEVICES, host_inputs=(0,))
def concat(ctx, concat_dim, *values):
    xp = ctx.xp
    return _concat(xp, values, concat_dim)


@kernel("ConcatOffset", device_types=ALL_DEVICES, host_only=True)
def concat_offset(ctx, concat_dim, *shapes):
    shapes = [np.asarray(sh) for sh in shapes]
    ax = norm_axis(np.asarray(concat_dim).reshape(()), shapes[0].size, "concat_dim")
    out, offset = [], 0
    for sh in shapes:
        o = np.zeros_like(sh)
        o[ax] = offset
        offset += int(sh[ax])
        out.append(o)
    return out


@kernel("Pack", device_types=ALL_DEVICES)
def pack(ctx, *values):
    xp = ctx.xp
    values = [xp.asarray(v) for v in values]
    ax = norm_axis(ctx.attrs.get("axis", 0), values[0].ndim + 1)
    first = values[0]
    if xp is np and all(v.shape == first.shape and v.dtype == first.dtype for v in values):
        # Each value into its row of one array: np.stack's Python (expand_dims per value,
        # then concatenate) was 8 of a small Pack's 10 us.
        out = np.empty(first.shape[:ax] + (len(values),) + first.shape[ax:], first.dtype)
        lead = (slice(None),) * ax
        for i, v in enumerate(values):
            out[lead + (i,)] = v
        return out
    try:
        return xp.stack(values, axis=ax)
    except ValueError:
        fail("Shapes of all inputs must match: " + ", ".join(str(list(v.shape)) for v in values))


@kernel("Unpack", device_types=ALL_DEVICES)
def unpack(ctx, value):
    xp = ctx.xp
    x = xp.asarray(value)
    ax = norm_axis(ctx.attrs.get("axis", 0), x.ndim)
    num = ctx.attrs.get("num", x.shape[ax])
    if x.shape[ax] != num:
        fail(f"Input shape axis {ax} must equal {num}, got shape {list(x.shape)}")
    return [xp.take(x, i, axis=ax) for i in range(num)]


def _split_at(xp, x, ax, sizes):
    edges = np.cumsum(sizes)[:-1].tolist()
    return xp.split(x, edges, axis=ax)


_INT_SCALARS = frozenset({np.int32, np.int64})


@kernel("Split", device_types=ALL_DEVICES, host_inputs=(0,))
def split(ctx, axis, value):
    xp = ctx.xp
    x = xp.asarray(value)
    # Views by basic slicing: what xp.split returns, without its Python machinery; the index
    # tuples kept per (shape, axis) (an LSTM cell splits its gates every step: 12 -> 2 us).
    a = axis[()] if type(axis) is np.ndarray and axis.ndim == 0 else axis
    key = (x.shape, int(a) if type(a) in _INT_SCALARS else None)
    cached = ctx.cache.get("split")
    if cached is not None and cached[0] == key and key[1] is not None:
        return [x[index] for index in cached[1]]
    ax = norm_axis(np.asarray(axis).reshape(()), x.ndim)
    n = int(ctx.attrs["num_split"])
    if x.shape[ax] % n:
        fail(f"Number of ways to split should evenly divide the split dimension, but got "
             f"split_dim {ax} (size = {x.shape[ax]}) and num_split {n}")
    k = x.shape[ax] // n
    lead = (slice(None),) * ax
    indices = [lead + (slice(i * k, (i + 1) * k),) for i in range(n)]
    ctx.cache["split"] = (key, indices)
    return [x[index] for index in indices]


@kernel("SplitV", device_types=ALL_DEVICES, host_inputs=(1, 2))
def split_v(ctx, value, size_splits, axis):
    xp = ctx.xp
    x = xp.asarray(value)
    ax = norm_axis(np.asarray(axis).reshape(()), x.ndim)
    sizes = list(shape_vector(size_splits, "size_splits"))
    if sizes.count(-1) > 1:
        fail("There can only be one -1 in size_splits")
    if -1 in sizes:
        sizes[sizes.index(-1)] = x.shape[ax] - (sum(sizes) + 1)
    if sum(sizes) != x.shape[ax] or any(v < 0 for v in sizes):
        fail(f"Determined shape must either match input shape along split_dim exactly if fully "
             f"specified, or be less than the size of the input along split_dim if not fully "
             f"specified: size_splits {list(shape_vector(size_splits))}, dim {x.shape[ax]}")
    return _split_at(xp, x, ax, sizes)


@kernel("Slice", device_types=ALL_DEVICES, host_inputs=(1, 2))
def slice_(ctx, x, begin, size_):
    xp = ctx.xp
    x = xp.asarray(x)
    b, sz = shape_vector(begin, "begin"), shape_vector(size_, "size")
    if len(b) != x.ndim or len(sz) != x.ndim:
        fail(f"Expected begin and size of length {x.ndim}, got {len(b)} and {len(sz)}")
    idx = []
    for d, (bb, ss) in enumerate(zip(b, sz)):
        ss = x.shape[d] - bb if ss == -1 else ss
        if bb < 0 or ss < 0 or bb + ss > x.shape[d]:
            fail(f"Expected begin[{d}] in [0, {x.shape[d]}] and size[{d}] in [0, "
                 f"{x.shape[d] - bb}], got {bb} and {ss}")
        idx.append(slice(bb, bb + ss))
    return x[tuple(idx)]


@kernel("Tile", device_types=ALL_DEVICES, host_inputs=(1,))
def tile(ctx, x, multiples):
    xp = ctx.xp
    x = xp.asarray(x)
    if np.size(multiples) != x.ndim:  # before the values: 2**27 multiples are no list
        fail(f"Expected multiples argument to be a vector of length {x.ndim} but got length "
             f"{np.size(multiples)}")
    m = shape_vector(multiples, "multiples")
    if len(m) != x.ndim or any(v < 0 for v in m):
        fail(f"Expected multiples of length {x.ndim} and >= 0, got {list(m)}")
    if xp is np and x.ndim:
        # np.tile's result in one assignment: a fresh (m0, d0, m1, d1, ...) array takes x
        # viewed as (1, d0, 1, d1, ...) by broadcasting (np.tile's Python-level repeats and
        # np.broadcast_to cost 7-8 us on a mask of 8x1, this 2 us)
        out = np.empty([v for pair in zip(m, x.shape) for v in pair], x.dtype)
        out[...] = x.reshape([v for d in x.shape for v in (1, d)])
        return out.reshape([a * d for a, d in zip(m, x.shape)])
    return xp.tile(x, m)


def _paddings(x, paddings):
    p = np.asarray(paddings)
    if p.shape != (x.ndim, 2):  # the shape alone: paddings of [2**26, 2] are no list
        fail(f"paddings must be a matrix of shape [{x.ndim}, 2], got shape {list(p.shape)}")
    if (p < 0).any():
        fail(f"paddings must be non-negative, got {p.tolist()}")
    return [(int(a), int(b)) for a, b in p.tolist()]


def _constant_pad(x, pads, value):
    """np.pad(x, pads, constant_values=value) as one np.empty, the interior assigned and each
    padded slab filled: np.pad's Python costs ~30 us a call, and np.zeros' fresh pages cost
    page faults where np.empty reuses freed memory (keras ZeroPadding2D before each strided
    convolution: 0.9 ms -> 0.3 ms at 2x48x48x96)."""
    out = np.empty([d + a + b for d, (a, b) in zip(x.shape, pads)], x.dtype)
    out[tuple(slice(a, a + d) for d, (a, _) in zip(x.shape, pads))] = x
    for axis, (a, b) in enumerate(pads):
        # Slabs of this axis over the whole extent of the earlier axes (already padded) and
        # the interior of the later ones (their slabs come next): each element set once.
        head = (slice(None),) * axis
        tail = tuple(slice(pa, pa + d) for d, (pa, _) in zip(x.shape[axis + 1:],
                                                            pads[axis + 1:]))
        if a:
            out[head + (slice(0, a),) + tail] = value
        if b:
            out[head + (slice(out.shape[axis] - b, None),) + tail] = value
    return out


# Below this many output bytes a zero pad is np.zeros and the interior (two numpy calls, the
# memset reusing freed memory) rather than np.empty, the interior and a fill per padded slab
# (NASNet's 58-206 KB pads: 14-26 us -> 3-10 us alone); above, zeroing pages costs more.
_ZEROS_MAX = 256 << 10


def _prepared_pad(x, pads):
    """`run(x)`: the zero pad of arrays of x's shape and dtype by `pads`, made once per node
    and signature (the paddings' parsing and checks were half of a small pad's time)."""
    shape = tuple(d + a + b for d, (a, b) in zip(x.shape, pads))
    inner = tuple(slice(a, a + d) for d, (a, _) in zip(x.shape, pads))
    dtype = x.dtype
    if int(np.prod(shape)) * dtype.itemsize > _ZEROS_MAX or dtype.kind not in "biufc":
        return lambda v: _constant_pad(v, pads, 0)

    def run(v):
        out = np.zeros(shape, dtype)
        out[inner] = v
        return out
    return run


@kernel("Pad", device_types=ALL_DEVICES, host_inputs=(1,))
def pad(ctx, x, paddings):
    if type(x) is np.ndarray and type(paddings) is np.ndarray and x.ndim and ctx.xp is np:
        key = (x.shape, x.dtype, paddings.shape, paddings.dtype, paddings.tobytes())
        hit = ctx.cache.get("pad")
        if hit is None or hit[0] != key:
            hit = ctx.cache["pad"] = (key, _prepared_pad(x, _paddings(x, paddings)))
        return hit[1](x)
    xp = ctx.xp
    x = xp.asarray(x)
    if xp is np and x.ndim:
        return _constant_pad(x, _paddings(x, paddings), 0)
    return xp.pad(x, _paddings(x, paddings))


@kernel("PadV2", device_types=ALL_DEVICES, host_inputs=(1,))
def pad_v2(ctx, x, paddings, constant_values):
    xp = ctx.xp
    x = xp.asarray(x)
    value = xp.asarray(constant_values).item()
    if xp is np and x.ndim:
        return _constant_pad(x, _paddings(x, paddings), value)
    return xp.pad(x, _paddings(x, paddings), constant_values=value)


@kernel("MirrorPad", device_types=ALL_DEVICES, host_inputs=(1,))
def mirror_pad(ctx, x, paddings):
    xp = ctx.xp
    x = xp.asarray(x)
    mode = s(ctx.attrs.get("mode", b"REFLECT")).upper()
    pads = _paddings(x, paddings)
    limit = 0 if mode == "REFLECT" else 1
    for d, (a, b) in enumerate(pads):
        if max(a, b) > x.shape[d] - 1 + limit:
            fail(f"paddings must be less than{' or equal to' if limit else ''} the dimension "
                 f"size: {a}, {b} for dimension {d} of size {x.shape[d]}")
    return xp.pad(x, pads, mode="reflect" if mode == "REFLECT" else "symmetric")


@kernel("MirrorPadGrad", device_types=ALL_DEVICES, host_inputs=(1,))
def mirror_pad_grad(ctx, dy, paddings):
    """MirrorPad's gradient: every padded element's gradient added to the element it copies.

    Per dim with paddings (a, b) and input size n, REFLECT copies x[1..a] to the left and
    x[n-1-b..n-2] to the right, SYMMETRIC x[0..a-1] and x[n-b..n-1] (each mirrored)."""
    xp = ctx.xp
    dy = xp.asarray(dy)
    reflect = s(ctx.attrs.get("mode", b"REFLECT")).upper() == "REFLECT"
    shift = 1 if reflect else 0
    for d, (a, b) in enumerate(_paddings(dy, paddings)):
        n = dy.shape[d] - a - b
        if n <= 0 or max(a, b) > n - shift:
            fail(f"MirrorPadGrad: paddings {a}, {b} too large for dimension {d} of the "
                 f"gradient (size {dy.shape[d]})")
        if not (a or b):
            continue
        dy = xp.moveaxis(dy, d, 0)
        out = dy[a:a + n].copy()
        if a:
            out[shift:shift + a] += dy[a - 1::-1]
        if b:
            out[n - shift - b:n - shift] += dy[a + n:][::-1]
        dy = xp.moveaxis(out, 0, d)
    return xp.ascontiguousarray(dy)


@kernel("ReverseV2", device_types=ALL_DEVICES, host_inputs=(1,))
def reverse_v2(ctx, x, axis):
    xp = ctx.xp
    x = xp.asarray(x)
    axes = norm_axes(axis, x.ndim, "axis")
    if len(axes) < np.size(axis):  # TensorFlow refuses [0, 0] (norm_axes merged them)
        fail(f"axis {np.asarray(axis).tolist()}: a dimension is specified more than once")
    return xp.flip(x, axes) if axes else x


@kernel("Empty", device_types=ALL_DEVICES, host_inputs=(0,))
def empty(ctx, shape):
    # TensorFlow leaves the contents undefined unless init; zeros are a defined choice that
    # keeps runs reproducible.
    d = shape_vector(shape, "shape")
    if any(v < 0 for v in d):
        fail(f"Shape must be non-negative, got {list(d)}")
    return ctx.xp.zeros(d, dtype=np_dtype(ctx.attrs["dtype"]))


@kernel("Fill", device_types=ALL_DEVICES, host_inputs=(0,))
def fill(ctx, dims, value):
    xp = ctx.xp
    value = xp.asarray(value)
    if value.ndim != 0:
        fail(f"value must be a scalar, got shape {list(value.shape)}")
    d = shape_vector(dims, "dims")
    if any(v < 0 for v in d):
        fail(f"dims must be non-negative, got {list(d)}")
    out = xp.empty(d, dtype=value.dtype)
    out[...] = value
    return out


@kernel("ZerosLike", device_types=ALL_DEVICES)
def zeros_like(ctx, x):
    if isinstance(x, TensorList):  # T=variant: the zero gradient of a list
        return zeros_like_list(x, ctx.xp)
    if isinstance(x, OptionalValue):  # TensorFlow's OptionalZerosLike: zeros of each value
        return zeros_like_item(x, ctx.xp)
    return ctx.xp.zeros_like(x)


@kernel("OnesLike", device_types=ALL_DEVICES)
def ones_like(ctx, x):
    xp = ctx.xp
    return xp.ones_like(x)


@kernel("Range", device_types=ALL_DEVICES, host_only=True)
def range_(ctx, start, limit, delta):
    dtype = np.asarray(start).dtype
    st, li, de = (np.asarray(v).item() for v in (start, limit, delta))
    if de == 0:
        fail("Requires delta != 0")
    if (de > 0 and st > li) or (de < 0 and st < li):
        fail(f"Requires start <= limit when delta > 0 (or >= when delta < 0): {st}/{li}")
    if dtype.kind in "iu":
        n = (abs(li - st) + abs(de) - 1) // abs(de)
    else:
        n = int(np.ceil(abs((li - st) / de)))
    return (st + np.arange(n, dtype=np.float64 if dtype.kind == "f" else dtype) * de).astype(dtype)


@kernel("OneHot", device_types=ALL_DEVICES, host_inputs=(1,))
def one_hot(ctx, indices, depth, on_value, off_value):
    xp = ctx.xp
    idx = xp.asarray(indices)
    depth = int(np.asarray(depth))
    if depth < 0:
        fail(f"depth must be non-negative, got {depth}")
    axis = int(ctx.attrs.get("axis", -1))
    if axis < -1 or axis > idx.ndim:
        fail(f"Expected axis to be -1 or between [0, {idx.ndim}], got {axis}")
    on, off = xp.asarray(on_value), xp.asarray(off_value)
    hot = idx[..., None] == xp.arange(depth, dtype=idx.dtype)
    out = xp.where(hot, on, off).astype(on.dtype, copy=False)
    return out if axis == -1 else xp.moveaxis(out, -1, axis)


@kernel("BroadcastTo", device_types=ALL_DEVICES, host_inputs=(1,))
def broadcast_to(ctx, x, shape_):
    xp = ctx.xp
    x = xp.asarray(x)
    target = shape_vector(shape_)
    try:
        return xp.broadcast_to(x, target)
    except ValueError:
        fail(f"Unable to broadcast tensor of shape {list(x.shape)} to tensor of shape "
             f"{list(target)}")


def _bcast_shape(s0, s1):
    try:
        return np.broadcast_shapes(tuple(s0), tuple(s1))
    except ValueError:
        fail(f"Incompatible shapes: {list(s0)} vs. {list(s1)}")


@kernel("BroadcastArgs", device_types=ALL_DEVICES, host_only=True)
def broadcast_args(ctx, s0, s1):
    out = _bcast_shape(shape_vector(s0), shape_vector(s1))
    return np.array(out, dtype=np.asarray(s0).dtype)


@kernel("BroadcastGradientArgs", device_types=ALL_DEVICES, host_only=True)
def broadcast_gradient_args(ctx, s0, s1):
    a, b = shape_vector(s0), shape_vector(s1)
    _bcast_shape(a, b)
    dtype = np.asarray(s0).dtype
    return tuple(np.array(r, dtype=dtype) for r in broadcast_gradient_axes(a, b))


@kernel("_TfgBroadcastGradSum", device_types=ALL_DEVICES, host_inputs=(1, 2))
def broadcast_grad_sum(ctx, grad, shape, other_shape):
    """Reshape(Sum(grad, BroadcastGradientArgs(shape, other_shape)[0]), shape) in one call
    (tfg/passes/remap_broadcast_grad.py): the axes, the Sum and the errors of the three
    kernels; equal shapes sum over no axes, so `grad` comes back as it is where it already
    has the shape."""
    a, b = shape_vector(shape), shape_vector(other_shape)
    xp = ctx.xp
    x = xp.asarray(grad)
    if a == b:
        if x.shape == a:
            return x
        axes = ()
    else:
        _bcast_shape(a, b)
        axes = tuple(broadcast_gradient_axes(a, b)[0])
    if axes:
        if x.dtype.kind not in "fciu":
            fail(f"Sum does not support dtype {tf_name(x)}")
        # (the Sum kernel's own axis check and sum, tfg/kernels/reduce_ops.py)
        x = xp.sum(x, axis=norm_axes(axes, x.ndim), dtype=x.dtype)
    return reshape(ctx, x, shape)


@kernel("ListDiff")
def list_diff(ctx, x, y):
    x, y = np.asarray(x), np.asarray(y)
    if x.ndim != 1 or y.ndim != 1:
        fail("x and y must be 1-D")
    keep = ~np.isin(x, y)
    return x[keep], np.nonzero(keep)[0].astype(np_dtype(ctx.attrs.get("out_idx", "int32")))


@kernel("Where", device_types=ALL_DEVICES)
def where(ctx, x):
    xp = ctx.xp
    return xp.argwhere(xp.asarray(x)).astype(xp.int64)


def _format(ctx):
    return s(ctx.attrs.get("src_format", b"NHWC")), s(ctx.attrs.get("dst_format", b"NCHW"))


@kernel("DataFormatVecPermute", device_types=ALL_DEVICES, host_only=True)
def data_format_vec_permute(ctx, x):
    x = np.asarray(x)
    src, dst = _format(ctx)
    if x.shape[0] == 2 and len(src) == 4:  # only the spatial dims are given
        src = "".join(c for c in src if c not in "NC")
        dst = "".join(c for c in dst if c not in "NC")
    if x.shape[0] != len(src) or x.ndim not in (1, 2):
        fail(f"input must be a vector or 2-D tensor of size {len(src)} (or 2), got shape "
             f"{list(x.shape)}")
    return x[[src.index(c) for c in dst]]


@kernel("DataFormatDimMap", device_types=ALL_DEVICES, host_only=True)
def data_format_dim_map(ctx, x):
    x = np.asarray(x)
    src, dst = _format(ctx)
    table = np.array([dst.index(c) for c in src], dtype=x.dtype)
    return table[np.mod(x, len(src))]


@kernel("Bitcast", device_types=ALL_DEVICES)
def bitcast(ctx, x):
    xp = ctx.xp
    x = xp.asarray(x)
    dst = np_dtype(ctx.attrs["type"])
    if dst.itemsize == x.dtype.itemsize:
        return x.view(dst)
    if dst.itemsize < x.dtype.itemsize:
        return x.view(dst).reshape(x.shape + (x.dtype.itemsize // dst.itemsize,))
    if x.shape[-1] * x.dtype.itemsize != dst.itemsize:
        fail(f"Cannot bitcast from {tf_name(x)} to {tf_name(dst)}: shape {list(x.shape)}")
    return xp.ascontiguousarray(x).view(dst).reshape(x.shape[:-1])


# --- sets: Unique, UniqueV2, UniqueWithCounts --------------------------------------------
def _first_occurrences(rows):
    """For the rows of a 2-D array (or the elements of a vector): the position of the first
    occurrence of each distinct one, in order of appearance, and each row's index into them
    (TensorFlow's hash-map order). Equality is TensorFlow's `==`: NaN never equals NaN,
    -0.0 equals 0.0 (the first one seen is the one kept)."""
    n = rows.shape[0]
    if rows.dtype == object:  # strings: a dict in order of appearance
        keys = [tuple(r) for r in rows.tolist()] if rows.ndim == 2 else rows.tolist()
        seen, firsts, idx = {}, [], np.empty(n, np.int64)
        for i, key in enumerate(keys):
            j = seen.setdefault(key, len(firsts))
            if j == len(firsts):
                firsts.append(i)
            idx[i] = j
        return np.array(firsts, np.int64), idx
    if rows.ndim == 2 and rows.shape[1] == 0:  # empty slices are all equal
        return np.zeros(min(n, 1), np.int64), np.zeros(n, np.int64)
    if rows.ndim == 2:
        _, first, inverse = np.unique(rows, axis=0, return_index=True, return_inverse=True)
    else:
        _, first, inverse = np.unique(rows, return_index=True, return_inverse=True,
                                      equal_nan=False)
    order = np.argsort(first, kind="stable")
    rank_of = np.empty_like(order)
    rank_of[order] = np.arange(order.size)
    return first[order], rank_of[inverse.reshape(-1)]


def _unique(ctx, x, axis=None):
    """(y, idx, counts) of x, a vector (axis None) or slices along `axis`."""
    out_idx = np_dtype(ctx.attrs.get("out_idx", "int32"))
    if axis is None:
        if x.ndim != 1:
            fail("unique expects a 1D vector.")
        firsts, idx = _first_occurrences(x)
        y = x[firsts]
    else:
        rows = np.moveaxis(x, axis, 0)
        firsts, idx = _first_occurrences(rows.reshape(rows.shape[0], -1))
        y = np.take(x, firsts, axis=axis)
    counts = np.bincount(idx, minlength=firsts.size)
    return y, idx.astype(out_idx), counts.astype(out_idx)


@kernel("Unique")
def unique(ctx, x):
    return _unique(ctx, np.asarray(x))[:2]


@kernel("UniqueWithCounts")
def unique_with_counts(ctx, x):
    return _unique(ctx, np.asarray(x))


def _unique_along(ctx, x, axis):
    """(y, idx, counts): the distinct slices of x along one axis (TensorFlow takes at most
    one); an empty axis means x is a vector."""
    x, axis = np.asarray(x), np.asarray(axis)
    if axis.ndim != 1:
        fail("axis expects a 1D vector.")
    if axis.size > 1:
        fail("axis does not support input tensors larger than 1 elements")
    if axis.size == 0:
        return _unique(ctx, x)
    a = int(axis[0])
    a = a + x.ndim if a < 0 else a
    if not 0 <= a < x.ndim:
        fail(f"axis has to be between [0, {x.ndim})")
    return _unique(ctx, x, a)


@kernel("UniqueV2", host_inputs=(1,))
def unique_v2(ctx, x, axis):
    return _unique_along(ctx, x, axis)[:2]


@kernel("UniqueWithCountsV2", host_inputs=(1,))
def unique_with_counts_v2(ctx, x, axis):
    return _unique_along(ctx, x, axis)


# --- Diag, DiagPart: tf.diag's rank-2k tensor with the rank-k diagonal ---------------------
@kernel("Diag", device_types=ALL_DEVICES)
def diag(ctx, diagonal):
    """out[i1..ik, i1..ik] = diagonal[i1..ik], zero elsewhere (shape: diagonal's twice)."""
    xp = ctx.xp
    d = xp.asarray(diagonal)
    if d.ndim < 1:
        fail(f"Input must be at least rank 1, got {d.ndim}")
    n = d.size
    out = xp.zeros((n, n), d.dtype)
    out[xp.arange(n), xp.arange(n)] = d.reshape(-1)
    return out.reshape(d.shape + d.shape)


@kernel("DiagPart", device_types=ALL_DEVICES)
def diag_part(ctx, x):
    """Diag's inverse: x[i1..ik, i1..ik] of an even-rank x whose halves' shapes agree."""
    xp = ctx.xp
    x = xp.asarray(x)
    half = x.ndim // 2
    shape = "[" + ",".join(map(str, x.shape)) + "]"
    if x.ndim % 2:
        fail(f"The rank of the tensor should be even and positive, got shape {shape}")
    for i in range(half):
        if x.shape[i] != x.shape[i + half]:
            fail(f"Invalid shape {shape}: dimensions {i} and {i + half} do not match.")
    n = int(np.prod(x.shape[:half], dtype=np.int64))
    return xp.diagonal(x.reshape(n, n)).reshape(x.shape[:half]).copy()


# --- searches and counts ---------------------------------------------------------------------
def _search_sorted(ctx, sorted_inputs, values, side):
    """Per row b: where each values[b, j] would go in the sorted row sorted_inputs[b]."""
    rows, vals = np.asarray(sorted_inputs), np.asarray(values)
    for arr, what in ((rows, "sorted_inputs"), (vals, "values")):
        if arr.ndim != 2:
            fail(f"Shape must be rank 2 but is rank {arr.ndim} for `{what}` argument")
    if rows.shape[0] != vals.shape[0]:
        fail("Leading dim_size of both tensors must match.")
    out = np.empty(vals.shape, np_dtype(ctx.attrs.get("out_type", "int32")))
    for b in range(vals.shape[0]):
        out[b] = np.searchsorted(rows[b], vals[b], side=side)
    return out


@kernel("LowerBound")
def lower_bound(ctx, sorted_inputs, values):
    return _search_sorted(ctx, sorted_inputs, values, "left")


@kernel("UpperBound")
def upper_bound(ctx, sorted_inputs, values):
    return _search_sorted(ctx, sorted_inputs, values, "right")


@kernel("Bucketize")
def bucketize(ctx, x):
    """The index of the bucket of each value: how many boundaries are <= it. The boundaries
    are floats; C++ compares an integer or float value with them as floats, a double as a
    double (so int64 values above 2**24 round as they do in TensorFlow)."""
    x = np.asarray(x)
    bounds = np.asarray(ctx.attrs["boundaries"], np.float32)
    if bounds.size > 1 and (bounds[1:] < bounds[:-1]).any():
        fail("Expected sorted boundaries")
    if x.dtype == np.float64:
        keys, bounds = x, bounds.astype(np.float64)
    else:
        keys = x.astype(np.float32)
    return np.searchsorted(bounds, keys, side="right").astype(np.int32)


def _number(v):
    return int(v) if np.asarray(v).dtype.kind in "iu" else f"{float(v):g}"


@kernel("HistogramFixedWidth", host_inputs=(2,))
def histogram_fixed_width(ctx, values, value_range, nbins):
    """Counts of values in nbins equal bins over value_range; values below the range count
    in the first bin, above it in the last. TensorFlow's arithmetic: (max(v, lo) - lo) in T,
    then divided in double by (hi - lo) / nbins, capped at nbins - 1."""
    vr, nb = np.asarray(value_range), np.asarray(nbins)
    if vr.ndim != 1:
        fail("value_range should be a vector.")
    if vr.size != 2:
        fail("value_range should be a vector of 2 elements.")
    if nb.ndim != 0:
        fail("nbins should be a scalar.")
    n = int(nb)
    if n <= 0:
        fail(f"nbins should be a positive number, but got '{n}'")
    lo, hi = vr[0], vr[1]
    if not lo < hi:
        fail(f"value_range should satisfy value_range[0] < value_range[1], but got "
             f"'[{_number(lo)}, {_number(hi)}]'")
    x = np.asarray(values).reshape(-1)
    if x.dtype.kind == "f" and np.isnan(x).any():
        fail("Histogram values must not contain NaN")
    with np.errstate(over="ignore"):  # integers wrap as in C++
        step = float(np.asarray(hi - lo, vr.dtype)) / float(n)
        offsets = (np.maximum(x, lo) - lo).astype(np.float64)
    bins = np.minimum(offsets / step, n - 1).astype(np.int64)
    return np.bincount(bins, minlength=n).astype(np_dtype(ctx.attrs.get("dtype", "int32")))


@kernel("Bincount", host_inputs=(1,))
def bincount(ctx, arr, size, weights):
    """How often each value in [0, size) occurs in arr (values >= size are ignored), or the
    sum of their weights; empty weights count ones of the weights' dtype."""
    sz = np.asarray(size)
    if sz.ndim != 0:
        fail(f"Shape must be rank 0 but is rank {sz.ndim}")
    n = int(sz)
    if n < 0:
        fail(f"size ({n}) must be non-negative")
    a, w = np.asarray(arr).reshape(-1), np.asarray(weights)
    if w.size and w.size != a.size:
        fail("Input indices and weights must have the same size.")
    if a.size and int(a.min()) < 0:
        fail("Input arr must be non-negative!")
    keep = a < n
    if not w.size:
        return np.bincount(a[keep], minlength=n).astype(w.dtype)
    out = np.zeros(n, w.dtype)
    np.add.at(out, a[keep], w.reshape(-1)[keep])  # in order, as TensorFlow's loop adds
    return out


@kernel("LinSpace", device_types=ALL_DEVICES, host_only=True)
def lin_space(ctx, start, stop, num):
    """num values from start to stop: start + i * step in T, step = (stop - start) / (num - 1)
    in T, the last one exactly stop (TensorFlow's loop)."""
    start, stop, num = np.asarray(start), np.asarray(stop), np.asarray(num)
    for v, what in ((start, "start"), (stop, "stop"), (num, "num")):
        if v.ndim != 0:
            fail(f"{what} must be a scalar, not shape {tf_dims(v.shape)}")
    n = int(num)
    if n <= 0:
        fail(f"Requires num > 0: {n}")
    dtype = start.dtype
    out = np.empty(n, dtype)
    if n > 1:
        step = (stop - start) / np.asarray(n - 1, dtype)
        out[:] = start + step * np.arange(n).astype(dtype)
        out[-1] = stop
    out[0] = start
    return out


# --- Reverse (v1) and ConjugateTranspose -----------------------------------------------------
@kernel("Reverse", device_types=ALL_DEVICES, host_inputs=(1,))
def reverse(ctx, x, dims):
    xp = ctx.xp
    x = xp.asarray(x)
    flags = np.asarray(dims)
    if flags.ndim != 1:
        fail(f"'dims' must be 1-dimension, not {flags.ndim}")
    if flags.size != x.ndim:
        fail(f"'dims' must have the same number of values as 'input' has dimensions. 'input' "
             f"has {x.ndim}'dims' has {flags.size} values")
    if x.ndim > 8:
        fail("reverse is not implemented for tensors of rank > 8.")
    axes = tuple(i for i, f in enumerate(flags.tolist()) if f)
    return xp.flip(x, axes) if axes else x


@kernel("ConjugateTranspose", device_types=ALL_DEVICES, host_inputs=(1,))
def conjugate_transpose(ctx, x, perm):
    """Transpose, then the complex conjugate (a plain transpose for real types)."""
    xp = ctx.xp
    x = xp.asarray(x)
    p = shape_vector(perm, "perm")
    if len(p) != x.ndim:
        fail(f"transpose expects a vector of size {x.ndim}. But input(1) is a vector of size "
             f"{len(p)}")
    for i in range(len(p)):
        if i not in p:
            fail(f"{i} is missing from {{{','.join(map(str, p))}}}.")
    y = xp.transpose(x, p)
    return xp.conj(y) if y.dtype.kind == "c" else y
