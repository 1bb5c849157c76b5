"""Evaluation of small constant values during shape inference, so that shapes computed in the
graph (`Reshape(x, Pack([Shape(x)[0], -1]))`, `Fill(Shape(y), 0)`) resolve.

    >>> evaluate(ctx)  # Pack of Const 2 and Const 3 -> [array([2, 3], dtype=int32)]

Values may be partial: an object array whose unknown elements are None (the batch dimension in
`Shape` of a `[?, 7]` tensor gives `[None, 7]`). Structural ops (Pack, ConcatV2, StridedSlice,
Slice, GatherV2, Reshape, ...) move elements, known or not; arithmetic yields None where an
operand is None. These are not kernels: only what shape inference needs, on small tensors.
"""
import operator

import numpy as np

from tfg.schemas.dtypes import DType
from tfg.schemas.ops.array_shapes import broadcast_gradient_axes, strided_slice_index
from tfg.schemas.ops.registry import control_flow_names, ops_with
from tfg.schemas.ops.shape_fns import is_fully_defined, num_elements

MAX_ELEMENTS = 1024

# Ops whose output i is input i (values, partial values and resource handles pass through).
FORWARDING = ops_with("identity") | control_flow_names("enter", "exit", "switch",
                                                      "next_iteration")


def partial_value(ctx, i):
    """Input i as a numeric array (fully known), an object array with None, or None."""
    v = ctx.input_values[i]
    if v is not None:
        return v
    elems = ctx.input_elems[i]
    if elems is None:
        return None
    arr = np.empty(len(elems), dtype=object)
    arr[:] = list(elems)
    s = ctx.input_shapes[i]
    if is_fully_defined(s) and num_elements(s) == len(elems):
        arr = arr.reshape(s)
    return arr


def _ints(arr):
    return [int(x) for x in np.asarray(arr).reshape(-1)]


def _const(ctx):
    av = ctx.node.attr["value"]
    shape = tuple(d.size for d in av.tensor.tensor_shape.dim)
    if len(shape) > 8 or (num_elements(shape) or 0) > MAX_ELEMENTS:
        return [None]
    value = ctx.node.get_attr("value")
    return [None if value.dtype == object else value]  # strings are never shape material


def _shape(ctx):
    return [_shape_elems(ctx.shape(0))]


def _shape_n(ctx):
    return [_shape_elems(s) for s in ctx.input_shapes]


def _shape_elems(s):
    if s is None:
        return None
    arr = np.empty(len(s), dtype=object)
    arr[:] = list(s)
    return arr


def _size(ctx):
    n = num_elements(ctx.shape(0))
    return [None if n is None else np.array(n)]


def _rank(ctx):
    r = ctx.rank(0)
    return [None if r is None else np.array(r)]


def _pack(ctx, vals):
    axis = ctx.attr("axis")
    return [np.stack(vals, axis=axis)]


def _concat_v2(ctx, vals):
    return [np.concatenate(vals[:-1], axis=int(vals[-1]))]


def _concat(ctx, vals):
    return [np.concatenate(vals[1:], axis=int(vals[0]))]


def _strided_slice(ctx, vals):
    attrs = {k: ctx.attr(k) for k in ("begin_mask", "end_mask", "ellipsis_mask",
                                      "new_axis_mask", "shrink_axis_mask")}
    idx = strided_slice_index(_ints(vals[1]), _ints(vals[2]), _ints(vals[3]), attrs)
    return [np.asarray(vals[0][idx])]


def _slice(ctx, vals):
    x, begin, size = vals[0], _ints(vals[1]), _ints(vals[2])
    idx = tuple(slice(b, None if z == -1 else b + z) for b, z in zip(begin, size))
    return [x[idx]]


def _gather_v2(ctx, vals):
    if ctx.attr("batch_dims"):
        return [None]
    return [np.take(vals[0], np.asarray(vals[1], dtype=np.int64), axis=int(vals[2]))]


def _reshape(ctx, vals):
    return [vals[0].reshape(_ints(vals[1]))]


def _expand_dims(ctx, vals):
    return [np.expand_dims(vals[0], int(vals[1]))]


def _squeeze(ctx, vals):
    dims = ctx.attr("squeeze_dims")
    return [np.squeeze(vals[0], axis=tuple(dims) if dims else None)]


def _fill(ctx, vals):
    shape = _ints(vals[0])
    if (num_elements(tuple(shape)) or 0) > MAX_ELEMENTS:
        return [None]
    return [np.full(shape, vals[1])]


def _range(ctx, vals):
    start, limit, delta = (np.asarray(v).reshape(-1)[0] for v in vals)
    if delta == 0 or abs((limit - start) / delta) > MAX_ELEMENTS:
        return [None]
    return [np.arange(start, limit, delta)]


def _cast(ctx, vals):
    return [vals[0]]  # the dtype is applied by evaluate()


def _transpose(ctx, vals):
    return [np.transpose(vals[0], _ints(vals[1]))]


def _broadcast_args(ctx, vals):
    return [np.array(np.broadcast_shapes(tuple(_ints(vals[0])), tuple(_ints(vals[1]))))]


def _broadcast_gradient_args(ctx, vals):
    """Axes along which each operand was broadcast (its gradient is summed over them)."""
    a, b = _ints(vals[0]), _ints(vals[1])
    np.broadcast_shapes(tuple(a), tuple(b))  # raises if incompatible
    return [np.array(r, np.int64) for r in broadcast_gradient_axes(a, b)]


def _reduction(fn):
    def run(ctx, vals):
        axes = tuple(_ints(vals[1]))
        return [fn(vals[0], axis=axes, keepdims=ctx.attr("keep_dims"))]
    run.reduction = True  # no input may be partial (see _partial_ok)
    return run


def _elementwise(pyfn, npfn, nargs):
    """A broadcasting numpy op; on object arrays (partial values) None is contagious."""
    def apply(*xs):
        return None if any(x is None for x in xs) else pyfn(*xs)

    vec = np.frompyfunc(apply, nargs, 1)

    def run(ctx, vals):
        if any(v.dtype == object for v in vals):
            return [vec(*vals)]
        return [np.asarray(npfn(*vals))]
    run.elementwise = True  # every input may be partial (see _partial_ok)
    return run


# Ops evaluated from their inputs' (partial) values; all inputs must be at least partly known.
_STRUCTURAL = {
    "Pack": _pack, "ConcatV2": _concat_v2, "Concat": _concat, "StridedSlice": _strided_slice,
    "Slice": _slice, "GatherV2": _gather_v2, "Reshape": _reshape, "ExpandDims": _expand_dims,
    "Squeeze": _squeeze, "Fill": _fill, "Range": _range, "Cast": _cast, "Transpose": _transpose,
    "BroadcastArgs": _broadcast_args, "BroadcastGradientArgs": _broadcast_gradient_args,
    "Add": _elementwise(operator.add, np.add, 2), "AddV2": _elementwise(operator.add, np.add, 2),
    "Sub": _elementwise(operator.sub, np.subtract, 2),
    "Mul": _elementwise(operator.mul, np.multiply, 2),
    "FloorDiv": _elementwise(operator.floordiv, np.floor_divide, 2),
    "RealDiv": _elementwise(operator.truediv, np.true_divide, 2),
    "Maximum": _elementwise(max, np.maximum, 2), "Minimum": _elementwise(min, np.minimum, 2),
    "Neg": _elementwise(operator.neg, np.negative, 1), "Abs": _elementwise(abs, np.abs, 1),
    "Sum": _reduction(np.sum), "Prod": _reduction(np.prod), "Max": _reduction(np.max),
    "Min": _reduction(np.min),
}
# Ops whose values follow from input shapes alone.
_FROM_SHAPES = {"Const": _const, "Shape": _shape, "ShapeN": _shape_n, "Size": _size,
                "Rank": _rank}
# Every input of an elementwise evaluation may be partial (None where unknown).
_ELEMENTWISE = frozenset(op for op, fn in _STRUCTURAL.items()
                         if getattr(fn, "elementwise", False))
_REDUCTIONS = frozenset(op for op, fn in _STRUCTURAL.items() if getattr(fn, "reduction", False))


def _partial_ok(op, n):
    """Input positions that may hold partial values (the rest are axes, indices, shapes)."""
    if op in _ELEMENTWISE or op in ("Pack", "Cast"):
        return range(n)
    if op == "ConcatV2":
        return range(n - 1)
    if op == "Concat":
        return range(1, n)
    if op in _REDUCTIONS or op in ("Range", "BroadcastArgs", "BroadcastGradientArgs"):
        return ()
    if op == "Fill":
        return (1,)
    return (0,)


SHAPE_VALUE_OPS = frozenset(_FROM_SHAPES)
EVALUATED_OPS = frozenset(_STRUCTURAL) | SHAPE_VALUE_OPS


def can_evaluate(op):
    return op in _STRUCTURAL or op in _FROM_SHAPES


def evaluate(ctx):
    """Per output: a numeric array (known), an object array with None (partial), or None."""
    op = ctx.node.op
    fn = _FROM_SHAPES.get(op)
    if fn is not None:
        outs = fn(ctx)
    else:
        fn = _STRUCTURAL.get(op)
        if fn is None:
            return None
        vals = [partial_value(ctx, i) for i in range(ctx.num_inputs)]
        if any(v is None for v in vals):
            return None
        if any(v.size > MAX_ELEMENTS for v in vals):
            return None
        ok = _partial_ok(op, len(vals))
        if any(v.dtype == object and i not in ok for i, v in enumerate(vals)):
            return None
        # Computed values are shape material: integers only, so no float rounding can differ
        # from what a kernel would give.
        if not all(t is not None and (t.is_integer or t.base == DType.BOOL)
                   for t in ctx.output_dtypes):
            return None
        outs = fn(ctx, vals)
    return [_finish(v, ctx.output_dtypes[i] if i < len(ctx.output_dtypes) else None)
            for i, v in enumerate(outs)]


def _finish(v, dtype):
    if v is None:
        return None
    v = np.asarray(v)
    if v.size > MAX_ELEMENTS:
        return None
    if v.dtype == object:
        if any(x is None for x in v.reshape(-1)):
            return v
        v = np.array(v.tolist())
    if dtype is not None:
        try:
            v = v.astype(dtype.base.np)
        except Exception:  # resource/variant/strings: nothing to carry
            return None
    return v
