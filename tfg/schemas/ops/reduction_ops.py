"""Signatures of the reductions, scans and matrix products (TensorFlow's math_ops.cc).

    >>> get_op("Sum").attrs["keep_dims"].default, get_op("Sum").inputs[1].type_attr
    (False, 'Tidx')
"""
from tfg.schemas.ops.registry import op
from tfg.schemas.ops.shape_fns import (
    ShapeError, broadcast, canonical_axis, merge_dim, unchanged, with_rank, with_rank_at_least)


def reduction(ctx):
    """Sum/Mean/...: drop (or keep as 1) the dims named by the constant `axis` input."""
    s, axes, keep = ctx.shape(0), ctx.elems(1), ctx.attr("keep_dims")
    if s is None:
        return [None]
    if axes is None or None in axes:
        if keep:
            return [(None,) * len(s)]
        ax = ctx.shape(1)
        # A scalar axis removes exactly one dim; an empty axis list removes none.
        if ax == ():
            return [(None,) * (len(s) - 1)] if s else [None]
        if ax == (0,):
            return [s]
        return [None]
    axes = {canonical_axis(a, len(s), "reduction axis") for a in axes}
    if keep:
        return [tuple(1 if i in axes else d for i, d in enumerate(s))]
    return [tuple(d for i, d in enumerate(s) if i not in axes)]


def arg_reduction(ctx):
    s, axis = ctx.shape(0), ctx.scalar(1)
    if s is None:
        return [None]
    if axis is None:
        return [(None,) * (len(s) - 1)] if s else [None]
    axis = canonical_axis(axis, len(s), "ArgMax axis")
    return [s[:axis] + s[axis + 1:]]


def matmul(ctx):
    a = with_rank(ctx.shape(0), 2, "MatMul a")
    b = with_rank(ctx.shape(1), 2, "MatMul b")
    if ctx.attr("transpose_a"):
        a = a[::-1]
    if ctx.attr("transpose_b"):
        b = b[::-1]
    try:
        merge_dim(a[1], b[0])
    except ShapeError:
        raise ShapeError(f"MatMul inner dimensions differ: {a[1]} vs {b[0]}") from None
    return [(a[0], b[1])]


def batch_matmul(ctx):
    a, b = ctx.shape(0), ctx.shape(1)
    if a is None or b is None:
        return [None]
    with_rank_at_least(a, 2, "BatchMatMul x")
    with_rank_at_least(b, 2, "BatchMatMul y")
    ar, ac = (a[-1], a[-2]) if ctx.attr("adj_x") else (a[-2], a[-1])
    br, bc = (b[-1], b[-2]) if ctx.attr("adj_y") else (b[-2], b[-1])
    merge_dim(ac, br)
    if ctx.node.op == "BatchMatMul":  # v1: batch dims must match exactly, no broadcasting
        batch = tuple(merge_dim(x, y) for x, y in zip(with_rank(a[:-2], len(b) - 2), b[:-2]))
    else:
        batch = broadcast(a[:-2], b[:-2])
    return [batch + (ar, bc)]


# --- reductions over axes
op("Sum",
   inputs=["input: T", "reduction_indices: Tidx"],
   outputs=["output: T"],
   attrs=["keep_dims: bool = false", "T: numbertype", "Tidx: {int32, int64} = DT_INT32"],
   shape_fn=reduction)
op("Mean",
   inputs=["input: T", "reduction_indices: Tidx"],
   outputs=["output: T"],
   attrs=["keep_dims: bool = false", "T: numbertype", "Tidx: {int32, int64} = DT_INT32"],
   shape_fn=reduction)
op("Max",
   inputs=["input: T", "reduction_indices: Tidx"],
   outputs=["output: T"],
   attrs=["keep_dims: bool = false",
          "T: {float, double, int32, uint8, int16, int8, int64, bfloat16, uint16, half, uint32, "
          "uint64, qint8, quint8, qint32, qint16, quint16}", "Tidx: {int32, int64} = DT_INT32"],
   shape_fn=reduction)
op("Min",
   inputs=["input: T", "reduction_indices: Tidx"],
   outputs=["output: T"],
   attrs=["keep_dims: bool = false",
          "T: {float, double, int32, uint8, int16, int8, int64, bfloat16, uint16, half, uint32, "
          "uint64, qint8, quint8, qint32, qint16, quint16}", "Tidx: {int32, int64} = DT_INT32"],
   shape_fn=reduction)
op("Prod",
   inputs=["input: T", "reduction_indices: Tidx"],
   outputs=["output: T"],
   attrs=["keep_dims: bool = false", "T: numbertype", "Tidx: {int32, int64} = DT_INT32"],
   shape_fn=reduction)
op("All",
   inputs=["input: bool", "reduction_indices: Tidx"],
   outputs=["output: bool"],
   attrs=["keep_dims: bool = false", "Tidx: {int32, int64} = DT_INT32"],
   shape_fn=reduction)
op("Any",
   inputs=["input: bool", "reduction_indices: Tidx"],
   outputs=["output: bool"],
   attrs=["keep_dims: bool = false", "Tidx: {int32, int64} = DT_INT32"],
   shape_fn=reduction)
op("ArgMax",
   inputs=["input: T", "dimension: Tidx"],
   outputs=["output: output_type"],
   attrs=["T: {float, double, int32, uint8, int16, int8, int64, bfloat16, uint16, half, uint32, "
          "uint64, qint8, quint8, qint32, qint16, quint16, bool}",
          "Tidx: {int16, int32, int64} = DT_INT32",
          "output_type: {int16, uint16, int32, int64} = DT_INT64"],
   shape_fn=arg_reduction)
op("ArgMin",
   inputs=["input: T", "dimension: Tidx"],
   outputs=["output: output_type"],
   attrs=["T: {float, double, int32, uint8, int16, int8, int64, bfloat16, uint16, half, uint32, "
          "uint64, qint8, quint8, qint32, qint16, quint16, bool}",
          "Tidx: {int32, int64} = DT_INT32", "output_type: {int32, int64} = DT_INT64"],
   shape_fn=arg_reduction)

# --- scans
op("Cumsum",
   inputs=["x: T", "axis: Tidx"],
   outputs=["out: T"],
   attrs=["exclusive: bool = false", "reverse: bool = false", "T: numbertype",
          "Tidx: {int32, int64} = DT_INT32"],
   shape_fn=unchanged)
op("Cumprod",
   inputs=["x: T", "axis: Tidx"],
   outputs=["out: T"],
   attrs=["exclusive: bool = false", "reverse: bool = false", "T: numbertype",
          "Tidx: {int32, int64} = DT_INT32"],
   shape_fn=unchanged)

# --- matrix products
op("MatMul",
   inputs=["a: T", "b: T"],
   outputs=["product: T"],
   attrs=["transpose_a: bool = false", "transpose_b: bool = false",
          "T: {bfloat16, half, float, double, int32, int64, uint8, uint16, uint32, uint64, "
          "complex64, complex128}", "grad_a: bool = false", "grad_b: bool = false"],
   shape_fn=matmul)
op("BatchMatMul",
   inputs=["x: T", "y: T"],
   outputs=["output: T"],
   attrs=["T: {bfloat16, half, float, double, int32, int64, complex64, complex128}",
          "adj_x: bool = false", "adj_y: bool = false", "grad_x: bool = false",
          "grad_y: bool = false"],
   shape_fn=batch_matmul)
op("BatchMatMulV2",
   inputs=["x: T", "y: T"],
   outputs=["output: T"],
   attrs=["T: {bfloat16, half, float, double, int16, int32, int64, uint8, uint16, uint32, uint64, "
          "complex64, complex128}", "adj_x: bool = false", "adj_y: bool = false",
          "grad_x: bool = false", "grad_y: bool = false"],
   shape_fn=batch_matmul)
op("BatchMatMulV3",
   inputs=["x: Ta", "y: Tb"],
   outputs=["output: Tout"],
   attrs=["Ta: {bfloat16, half, float, double, uint8, int8, int16, int32, int64, complex64, "
          "complex128}",
          "Tb: {bfloat16, half, float, double, uint8, int8, int16, int32, int64, complex64, "
          "complex128}",
          "Tout: {bfloat16, half, float, double, int16, int32, int64, complex64, complex128}",
          "adj_x: bool = false", "adj_y: bool = false", "grad_x: bool = false",
          "grad_y: bool = false"],
   shape_fn=batch_matmul)
