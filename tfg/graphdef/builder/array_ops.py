"""Shape and layout ops: identity, reshape, transpose, concat, slice, strided slice (Python
indexing on Tensor handles), gather, one_hot, stack/unstack, split, tile, pad, fill, zeros.

    >>> y = x[1:, ::2]         # StridedSlice with begin_mask=2, end_mask=3, as TensorFlow
    >>> z = tb.reshape(x, [-1, 6])
    >>> h = tb.one_hot(labels, 10)

Constant operands (shapes, permutations, axes) become Consts named inside the op's scope
(`Reshape/shape`, `transpose/perm`, `concat/axis`) exactly where TensorFlow puts them.
"""
import numpy as np

from tfg.errors import TfgInputError
from tfg.graphdef.builder.core import A, get_default_builder, make
from tfg.graphdef.builder.core import is_tensorish as _is_tensorish
from tfg.graphdef.builder.constants import constant, convert_to_tensor, register_autopacking
from tfg.schemas.dtypes import DType


def _static_ints(v):
    """A Python list of ints for a constant operand, or None when it is a tensor."""
    if _is_tensorish(v):
        return None
    return [int(a) for a in np.asarray(v).reshape(-1)]


def identity(x, name=None):
    """Identity (reads a reference as a value)."""
    b = get_default_builder()
    with b.name_scope(name or "Identity") as scope:
        x = convert_to_tensor(x, name="input")
        return make("Identity", [x], {"T": x.dtype.base}, scope, [x.dtype.base]).outputs[0]


def stop_gradient(x, name=None):
    b = get_default_builder()
    with b.name_scope(name or "StopGradient") as scope:
        x = convert_to_tensor(x, name="input")
        return make("StopGradient", [x], {"T": x.dtype.base}, scope, [x.dtype.base]).outputs[0]


def reshape(x, shape, name=None):
    """Reshape to `shape` (a list with at most one -1, or an int32 tensor)."""
    b = get_default_builder()
    with b.name_scope(name or "Reshape") as scope:
        x = convert_to_tensor(x, name="tensor")
        s = convert_to_tensor(shape, DType.INT32 if not _is_tensorish(shape) else None,
                              name="shape")
        return make("Reshape", [x, s], {"T": x.dtype.base, "Tshape": s.dtype.base}, scope,
                    [x.dtype.base]).outputs[0]


def transpose(x, perm=None, name=None):
    """Permute axes (reverse them when `perm` is None)."""
    b = get_default_builder()
    with b.name_scope(name or "transpose") as scope:
        x = convert_to_tensor(x, name="a")
        if perm is None:
            if x.ndim is None:
                raise TfgInputError(f"transpose of {x.name!r}: rank unknown, give perm")
            perm = list(range(x.ndim))[::-1]
        p = convert_to_tensor(perm, DType.INT32 if not _is_tensorish(perm) else None,
                              name="perm")
        return make("Transpose", [x, p], {"T": x.dtype.base, "Tperm": p.dtype.base}, scope,
                    [x.dtype.base]).outputs[0]


def concat(values, axis, name="concat"):
    """Concatenate along `axis` (ConcatV2)."""
    b = get_default_builder()
    if len(values) == 1:
        return identity(values[0], name=name)
    with b.name_scope(name) as scope:
        ts = [convert_to_tensor(v) for v in values]
        ax = convert_to_tensor(axis, DType.INT32 if not _is_tensorish(axis) else None,
                               name="axis")
        return make("ConcatV2", ts + [ax], {"N": len(ts), "T": ts[0].dtype.base,
                                            "Tidx": ax.dtype.base},
                    scope, [ts[0].dtype.base]).outputs[0]


def slice_(x, begin, size, name=None):
    """Slice(x, begin, size); size -1 means to the end."""
    b = get_default_builder()
    with b.name_scope(name or "Slice") as scope:
        x = convert_to_tensor(x, name="input")
        bt = convert_to_tensor(begin, DType.INT32 if not _is_tensorish(begin) else None,
                               name="begin")
        st = convert_to_tensor(size, bt.dtype.base if not _is_tensorish(size) else None,
                               name="size")
        return make("Slice", [x, bt, st], {"T": x.dtype.base, "Index": bt.dtype.base}, scope,
                    [x.dtype.base]).outputs[0]


def gather(params, indices, axis=0, batch_dims=0, name=None):
    """Rows (or slices along `axis`) of `params` picked by `indices` (GatherV2)."""
    b = get_default_builder()
    with b.name_scope(name or "GatherV2") as scope:
        p = convert_to_tensor(params, name="params")
        i = convert_to_tensor(indices, name="indices")
        a = convert_to_tensor(axis, DType.INT32 if not _is_tensorish(axis) else None,
                              name="axis")
        return make("GatherV2", [p, i, a], {"batch_dims": int(batch_dims), "Tparams": p.dtype.base,
                                           "Tindices": i.dtype.base, "Taxis": a.dtype.base},
                    scope, [p.dtype.base]).outputs[0]


def one_hot(indices, depth, on_value=1.0, off_value=0.0, axis=-1, dtype=DType.FLOAT,
            name=None):
    """One-hot rows of `depth` (float32 by default)."""
    b = get_default_builder()
    dt = DType.parse(dtype) if not isinstance(dtype, DType) else dtype
    with b.name_scope(name or "one_hot") as scope:
        i = convert_to_tensor(indices, name="indices")
        on = convert_to_tensor(on_value, dt, name="on_value")
        off = convert_to_tensor(off_value, dt, name="off_value")
        d = convert_to_tensor(depth, DType.INT32, name="depth")
        return make("OneHot", [i, d, on, off], {"axis": int(axis), "T": dt,
                                                "TI": i.dtype.base},
                    scope, [dt]).outputs[0]


def _shape_op(op_type, x, out_type, name):
    b = get_default_builder()
    with b.name_scope(name or op_type) as scope:
        x = convert_to_tensor(x, name="input")
        attrs = {"T": x.dtype.base}
        if out_type is not None:
            attrs["out_type"] = out_type
        return make(op_type, [x], attrs, scope, [out_type or DType.INT32]).outputs[0]


def shape(x, out_type=DType.INT32, name=None):
    return _shape_op("Shape", x, out_type, name)


def size(x, out_type=DType.INT32, name=None):
    return _shape_op("Size", x, out_type, name)


def rank(x, name=None):
    return _shape_op("Rank", x, None, name)


def expand_dims(x, axis, name=None):
    b = get_default_builder()
    with b.name_scope(name or "ExpandDims") as scope:
        x = convert_to_tensor(x, name="input")
        a = convert_to_tensor(axis, DType.INT32, name="dim")
        return make("ExpandDims", [x, a], {"T": x.dtype.base, "Tdim": DType.INT32}, scope,
                    [x.dtype.base]).outputs[0]


def squeeze(x, axis=None, name=None):
    b = get_default_builder()
    with b.name_scope(name or "Squeeze") as scope:
        x = convert_to_tensor(x, name="input")
        dims = [] if axis is None else [int(a) for a in np.asarray(axis).reshape(-1)]
        return make("Squeeze", [x], {"T": x.dtype.base, "squeeze_dims": A(dims, "list(i)")},
                    scope, [x.dtype.base]).outputs[0]


def stack(values, axis=0, name="stack"):
    """Pack tensors of one shape along a new `axis`."""
    b = get_default_builder()
    with b.name_scope(name) as scope:
        ts = [convert_to_tensor(v) for v in values]
        dt = ts[0].dtype.base
        ts = [convert_to_tensor(t, dt) for t in ts]
        return make("Pack", ts, {"N": len(ts), "T": dt, "axis": int(axis)}, scope, [dt]).outputs[0]


register_autopacking(stack)


def unstack(x, num=None, axis=0, name="unstack"):
    """Split along `axis` into `num` tensors (Unpack)."""
    b = get_default_builder()
    with b.name_scope(name) as scope:
        x = convert_to_tensor(x, name="value")
        if num is None:
            if x.shape is None or x.shape[axis] is None:
                raise TfgInputError(f"unstack of {x.name!r}: give num (dimension unknown)")
            num = x.shape[axis]
        op = make("Unpack", [x], {"num": int(num), "T": x.dtype.base, "axis": int(axis)}, scope,
                  [x.dtype.base] * num)
        return list(op.outputs)


def split(x, num_or_size_splits, axis=0, name="split"):
    """Split into equal parts (Split) or given sizes (SplitV)."""
    b = get_default_builder()
    with b.name_scope(name) as scope:
        x = convert_to_tensor(x, name="value")
        a = convert_to_tensor(axis, DType.INT32, name="split_dim")
        if isinstance(num_or_size_splits, (int, np.integer)):
            n = int(num_or_size_splits)
            op = make("Split", [a, x], {"num_split": n, "T": x.dtype.base}, scope,
                      [x.dtype.base] * n)
        else:
            sizes = convert_to_tensor(num_or_size_splits, DType.INT32, name="Const")
            n = len(num_or_size_splits)
            op = make("SplitV", [x, sizes, a], {"num_split": n, "T": x.dtype.base,
                                                "Tlen": DType.INT32}, scope, [x.dtype.base] * n)
        return list(op.outputs)


def tile(x, multiples, name=None):
    b = get_default_builder()
    with b.name_scope(name or "Tile") as scope:
        x = convert_to_tensor(x, name="input")
        m = convert_to_tensor(multiples, DType.INT32 if not _is_tensorish(multiples) else None,
                              name="multiples")
        return make("Tile", [x, m], {"T": x.dtype.base, "Tmultiples": m.dtype.base}, scope,
                    [x.dtype.base]).outputs[0]


def pad(x, paddings, name=None):
    """Zero padding; `paddings` is [[before, after], ...] per dimension."""
    b = get_default_builder()
    with b.name_scope(name or "Pad") as scope:
        x = convert_to_tensor(x, name="input")
        p = convert_to_tensor(paddings, DType.INT32, name="paddings")
        return make("Pad", [x, p], {"T": x.dtype.base, "Tpaddings": DType.INT32}, scope,
                    [x.dtype.base]).outputs[0]


def fill(dims, value, name=None):
    b = get_default_builder()
    with b.name_scope(name or "Fill") as scope:
        d = convert_to_tensor(dims, DType.INT32 if not _is_tensorish(dims) else None,
                              name="dims")
        v = convert_to_tensor(value, name="value")
        return make("Fill", [d, v], {"T": v.dtype.base, "index_type": d.dtype.base}, scope,
                    [v.dtype.base]).outputs[0]


def _filled(value, shape, dtype, name):
    dt = DType.parse(dtype) if not isinstance(dtype, DType) else dtype
    if _is_tensorish(shape):
        b = get_default_builder()
        with b.name_scope(name) as scope:
            return fill(shape, constant(value, dt, name="Const"), name=scope)
    dims = tuple(int(d) for d in np.asarray(shape, dtype=np.int64).reshape(-1))
    if int(np.prod(dims)) <= 1000:
        return constant(value, dt, shape=dims, name=name)
    b = get_default_builder()
    with b.name_scope(name) as scope:
        return fill(constant(np.asarray(dims, np.int32), name="shape_as_tensor"),
                    constant(value, dt, name="Const"), name=scope)


def zeros(shape, dtype=DType.FLOAT, name="zeros"):
    """A tensor of zeros (a Const; a Fill above 1000 elements, as TensorFlow)."""
    return _filled(0, shape, dtype, name)


def ones(shape, dtype=DType.FLOAT, name="ones"):
    return _filled(1, shape, dtype, name)


def zeros_like(x, name=None):
    b = get_default_builder()
    with b.name_scope(name or "ZerosLike") as scope:
        x = convert_to_tensor(x)
        return make("ZerosLike", [x], {"T": x.dtype.base}, scope, [x.dtype.base]).outputs[0]


def ones_like(x, name=None):
    b = get_default_builder()
    with b.name_scope(name or "OnesLike") as scope:
        x = convert_to_tensor(x)
        return make("OnesLike", [x], {"T": x.dtype.base}, scope, [x.dtype.base]).outputs[0]


def range_(start, limit=None, delta=1, dtype=None, name="range"):
    """Range(start, limit, delta) like tf.range (int32 unless a float is given)."""
    if limit is None:
        start, limit = 0, start
    b = get_default_builder()
    with b.name_scope(name) as scope:
        vals = [start, limit, delta]
        dt = dtype
        if dt is None:
            dt = next((v.dtype.base for v in vals if _is_tensorish(v) and
                       hasattr(v, "dtype")), None)
            if dt is None:
                dt = DType.FLOAT if any(isinstance(v, float) for v in vals) else DType.INT32
        s = convert_to_tensor(start, dt, name="start")
        lim = convert_to_tensor(limit, dt, name="limit")
        d = convert_to_tensor(delta, dt, name="delta")
        return make("Range", [s, lim, d], {"Tidx": dt}, scope, [dt]).outputs[0]


def reverse(x, axis, name=None):
    b = get_default_builder()
    with b.name_scope(name or "ReverseV2") as scope:
        x = convert_to_tensor(x, name="tensor")
        a = convert_to_tensor(axis, DType.INT32, name="axis")
        return make("ReverseV2", [x, a], {"T": x.dtype.base, "Tidx": DType.INT32}, scope,
                    [x.dtype.base]).outputs[0]


def broadcast_to(x, shape, name=None):
    b = get_default_builder()
    with b.name_scope(name or "BroadcastTo") as scope:
        x = convert_to_tensor(x, name="input")
        s = convert_to_tensor(shape, DType.INT32 if not _is_tensorish(shape) else None,
                              name="shape")
        return make("BroadcastTo", [x, s], {"T": x.dtype.base, "Tidx": s.dtype.base}, scope,
                    [x.dtype.base]).outputs[0]


__all__ = ["identity", "stop_gradient", "reshape", "transpose", "concat", "slice_",
           "gather", "one_hot", "shape", "size", "rank", "expand_dims",
           "squeeze", "stack", "unstack", "split", "tile", "pad", "fill", "zeros", "ones",
           "zeros_like", "ones_like", "range_", "reverse", "broadcast_to"]
