"""Signatures of the sparse tensor ops (sparse_ops.cc in TensorFlow), which `tf.sparse.*` and
`tf.nn.embedding_lookup_sparse` write. A SparseTensor travels as three tensors: indices
[N, rank] int64, values [N] and dense_shape [rank] int64.

    >>> get_op("SparseTensorDenseMatMul").attrs["adjoint_a"].default
    False

SparseTensorDenseMatMul(indices [[0, 1]], values [2.], shape [3, 4], b [4, 5]) is [3, 5];
SparseReduceSum(..., shape [2, 4, 3], axes [1]) is dense [2, 3]. Where an output's size comes
from a dense_shape VALUE, the shape function computes it, so the memory guard sizes it.
"""
from tfg.schemas.ops.registry import op
from tfg.schemas.ops.shape_fns import ShapeError, fmt, with_rank

_NUMBER = "T: numbertype"


def _rows(shape):
    return None if shape is None else shape[0]


def _dims(ctx, i, what):
    """The dense shape that int64 vector input i holds (a tuple, None where unknown)."""
    with_rank(ctx.shape(i), 1, what)
    return ctx.shape_tensor(i)


def _rank_of(ctx, i):
    """The number of elements of vector input i (the sparse rank), or None."""
    s = ctx.shape(i)
    return None if s is None or len(s) != 1 else s[0]


def matmul_shape(ctx):
    """[outer(a), outer(b)]: a's dims from a_shape's value, swapped by adjoint_a."""
    b = with_rank(ctx.shape(3), 2, "b")
    a = _dims(ctx, 2, "a_shape")
    if a is not None and len(a) != 2:
        raise ShapeError(f"a_shape must have 2 elements, got {len(a)}")
    a = a or (None, None)
    adj_a, adj_b = ctx.attr("adjoint_a"), ctx.attr("adjoint_b")
    b = b or (None, None)
    outer_left, inner_left = (a[1], a[0]) if adj_a else a
    inner_right, outer_right = (b[1], b[0]) if adj_b else b
    if None not in (inner_left, inner_right) and inner_left != inner_right:
        raise ShapeError(f"Cannot multiply A and B because inner dimension does not match: "
                         f"{inner_left} vs. {inner_right}")
    return [(outer_left, outer_right)]


def reorder_shape(ctx):
    idx = with_rank(ctx.shape(0), 2, "input_indices")
    n = None if idx is None else idx[0]
    return [(n, None if idx is None else idx[1]), (n,)]


def _reduced_dims(ctx):
    """SparseReduceSum's dense output shape, from input_shape's and reduction_axes' values."""
    dims = _dims(ctx, 2, "input_shape")
    axes = ctx.elems(3)
    keep = ctx.attr("keep_dims")
    if dims is None or axes is None or None in axes:
        return None if dims is None or not keep else (None,) * len(dims)
    r = len(dims)
    for a in axes:
        if not -r <= a < r:
            raise ShapeError(f"Invalid reduction dimension {a}, for input with {r} dimensions.")
    reduced = {a % r for a in axes}
    if keep:
        return tuple(1 if i in reduced else d for i, d in enumerate(dims))
    return tuple(d for i, d in enumerate(dims) if i not in reduced)


def reduce_sum_shape(ctx):
    return [_reduced_dims(ctx)]


def reduce_sum_sparse_shape(ctx):
    out = _reduced_dims(ctx)
    rank = None if out is None else len(out)
    return [(None, rank), (None,), (rank,)]


def values_shape(ctx):
    """[N]: one output value per input value (SparseSoftmax, SparseDenseCwise*)."""
    return [with_rank(ctx.shape(1), 1, "values")]


def add_shape(ctx):
    rank = _rank_of(ctx, 2)
    return [(None, rank), (None,), (rank,)]


def add_grad_shape(ctx):
    return [(_rows(ctx.shape(1)),), (_rows(ctx.shape(2)),)]


def reshape_shape(ctx):
    with_rank(ctx.shape(0), 2, "input_indices")
    with_rank(ctx.shape(2), 1, "new_shape")
    rank = _rank_of(ctx, 2)
    return [(_rows(ctx.shape(0)), rank), (rank,)]


def fill_empty_rows_shape(ctx):
    """empty_row_indicator has dense_shape[0] elements (sized from the value)."""
    idx = with_rank(ctx.shape(0), 2, "indices")
    with_rank(ctx.shape(3), 0, "default_value")
    dims = _dims(ctx, 2, "dense_shape")
    if dims is not None and not dims:
        raise ShapeError("Dense shape cannot be empty.")
    rows = None if dims is None else dims[0]
    if rows is not None and rows < 0:
        raise ShapeError(f"Dense shape has a negative first dimension: {fmt(dims)}")
    rank = None if idx is None else idx[1]
    return [(None, rank), (None,), (rows,), (_rows(idx),)]


def fill_empty_rows_grad_shape(ctx):
    return [(_rows(ctx.shape(0)),), ()]


op("SparseTensorDenseMatMul",
   inputs=["a_indices: Tindices", "a_values: T", "a_shape: int64", "b: T"],
   outputs=["product: T"],
   attrs=["T: type", "Tindices: {int32, int64} = DT_INT64", "adjoint_a: bool = false",
          "adjoint_b: bool = false"],
   shape_fn=matmul_shape)
op("SparseReorder",
   inputs=["input_indices: int64", "input_values: T", "input_shape: int64"],
   outputs=["output_indices: int64", "output_values: T"],
   attrs=["T: type"],
   shape_fn=reorder_shape)
op("SparseReduceSum",
   inputs=["input_indices: int64", "input_values: T", "input_shape: int64",
           "reduction_axes: int32"],
   outputs=["output: T"],
   attrs=["keep_dims: bool = false", _NUMBER],
   shape_fn=reduce_sum_shape)
op("SparseReduceSumSparse",
   inputs=["input_indices: int64", "input_values: T", "input_shape: int64",
           "reduction_axes: int32"],
   outputs=["output_indices: int64", "output_values: T", "output_shape: int64"],
   attrs=["keep_dims: bool = false", _NUMBER],
   shape_fn=reduce_sum_sparse_shape)
op("SparseSoftmax",
   inputs=["sp_indices: int64", "sp_values: T", "sp_shape: int64"],
   outputs=["output: T"],
   attrs=["T: {half, float, double}"],
   shape_fn=values_shape)
op("SparseAdd",
   inputs=["a_indices: int64", "a_values: T", "a_shape: int64", "b_indices: int64",
           "b_values: T", "b_shape: int64", "thresh: Treal"],
   outputs=["sum_indices: int64", "sum_values: T", "sum_shape: int64"],
   attrs=[_NUMBER, "Treal: realnumbertype"],
   shape_fn=add_shape)
op("SparseAddGrad",
   inputs=["backprop_val_grad: T", "a_indices: int64", "b_indices: int64",
           "sum_indices: int64"],
   outputs=["a_val_grad: T", "b_val_grad: T"],
   attrs=[_NUMBER],
   shape_fn=add_grad_shape)
op("SparseReshape",
   inputs=["input_indices: int64", "input_shape: int64", "new_shape: int64"],
   outputs=["output_indices: int64", "output_shape: int64"],
   attrs=[],
   shape_fn=reshape_shape)
op("SparseFillEmptyRows",
   inputs=["indices: int64", "values: T", "dense_shape: int64", "default_value: T"],
   outputs=["output_indices: int64", "output_values: T", "empty_row_indicator: bool",
            "reverse_index_map: int64"],
   attrs=["T: type"],
   shape_fn=fill_empty_rows_shape)
op("SparseFillEmptyRowsGrad",
   inputs=["reverse_index_map: int64", "grad_values: T"],
   outputs=["d_values: T", "d_default_value: T"],
   attrs=["T: type"],
   shape_fn=fill_empty_rows_grad_shape)
for _kind in ("Mul", "Div", "Add"):
    op(f"SparseDenseCwise{_kind}",
       inputs=["sp_indices: int64", "sp_values: T", "sp_shape: int64", "dense: T"],
       outputs=["output: T"],
       attrs=[_NUMBER],
       shape_fn=values_shape)
