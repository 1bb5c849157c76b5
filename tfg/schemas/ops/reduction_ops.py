"""Signatures of the reductions and scans (the reduction half of TensorFlow's math_ops.cc; the
elementwise half and the matrix products are in math_ops.py).

    >>> get_op("Sum").attrs["keep_dims"].default, get_op("Sum").inputs[1].type_attr
    (False, 'Tidx')
"""
from tfg.schemas.ops.registry import op
from tfg.schemas.ops.shape_fns import canonical_axis, unchanged


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


# --- reductions over axes
op("Sum",
   inputs=["input: T", "reduction_indices: Tidx"],
   outputs=["output: T"],
   attrs=["keep_dims: bool = false", "T: numbertype", "Tidx: {int32, int64} = DT_INT32"],
   shape_fn=reduction,
   traits=["within_input"])
op("Mean",
   inputs=["input: T", "reduction_indices: Tidx"],
   outputs=["output: T"],
   attrs=["keep_dims: bool = false", "T: numbertype", "Tidx: {int32, int64} = DT_INT32"],
   shape_fn=reduction,
   traits=["within_input"])
op("Max",
   inputs=["input: T", "reduction_indices: Tidx"],
   outputs=["output: T"],
   attrs=["keep_dims: bool = false",
          "T: {float, double, int32, uint8, int16, int8, int64, bfloat16, uint16, half, uint32, "
          "uint64, qint8, quint8, qint32, qint16, quint16}", "Tidx: {int32, int64} = DT_INT32"],
   shape_fn=reduction,
   traits=["within_input"])
op("Min",
   inputs=["input: T", "reduction_indices: Tidx"],
   outputs=["output: T"],
   attrs=["keep_dims: bool = false",
          "T: {float, double, int32, uint8, int16, int8, int64, bfloat16, uint16, half, uint32, "
          "uint64, qint8, quint8, qint32, qint16, quint16}", "Tidx: {int32, int64} = DT_INT32"],
   shape_fn=reduction,
   traits=["within_input"])
op("Prod",
   inputs=["input: T", "reduction_indices: Tidx"],
   outputs=["output: T"],
   attrs=["keep_dims: bool = false", "T: numbertype", "Tidx: {int32, int64} = DT_INT32"],
   shape_fn=reduction,
   traits=["within_input"])
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
op("EuclideanNorm",
   inputs=["input: T", "reduction_indices: Tidx"],
   outputs=["output: T"],
   attrs=["keep_dims: bool = false", "T: numbertype", "Tidx: {int32, int64} = DT_INT32"],
   shape_fn=reduction,
   traits=["within_input"])
op("CumulativeLogsumexp",
   inputs=["x: T", "axis: Tidx"],
   outputs=["out: T"],
   attrs=["exclusive: bool = false", "reverse: bool = false",
          "T: {bfloat16, half, float, double}", "Tidx: {int32, int64} = DT_INT32"],
   shape_fn=unchanged)
