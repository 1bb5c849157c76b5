"""Gradients of the sparse tensor ops: the nodes TensorFlow's sparse_grad.py emits. Only the
values (and a dense operand) get gradients; indices and shapes get none.

    Before: y = SparseTensorDenseMatMul(idx, v, shape, B)
    After:  dB = SparseTensorDenseMatMul(idx, v, shape, g, adjoint_a=!adjoint_a),
            dv = Sum(Gather(g, idx[:, 0]) * Gather(B, idx[:, 1]), 1)      (no adjoints)
    Before: y = SparseReorder(idx, v, shape)
    After:  Gather(g, InvertPermutation(SparseReorder(idx, Range(N), shape)[1]))

SparseDenseCwiseMul/Div's dense gradient is TensorFlow's SparseTensorDenseAdd(indices, dy,
Shape(y), ZerosLike(y)), written here as TensorScatterAdd(ZerosLike(y), indices, dy): the
same sums. SparseDenseCwiseAdd has no gradient in TensorFlow (it raises NotImplementedError),
so asking for one is an error here too; SparseAddGrad is not differentiable. SparseReshape,
SparseReduceSumSparse and SparseFillEmptyRowsGrad register no gradient, as in TensorFlow.
"""
from tfg.passes.grad.reduction_grads import reduced_shape
from tfg.passes.grad.registry import conj, error_gradient, gradient, no_gradient
from tfg.schemas.dtypes import DType

I32, I64 = DType.INT32, DType.INT64


def _column(b, indices, j):
    """indices[:, j] (a vector)."""
    return b.op("StridedSlice", [indices, b.const([0, j], I32), b.const([0, j + 1], I32),
                                 b.const([1, 1], I32)],
                {"begin_mask": 1, "end_mask": 1, "shrink_axis_mask": 2})


def _gather_rows(b, params, ids):
    return b.op("GatherV2", [params, ids, b.const(0, I32)], {"batch_dims": 0})


def _transpose(b, t, conjugate=False):
    kind = "ConjugateTranspose" if conjugate and b.dtype(t).is_complex else "Transpose"
    return b.op(kind, [t, b.const([1, 0], I32)])


@gradient("SparseTensorDenseMatMul")
def _sparse_tensor_dense_mat_mul(b, op, grads):
    """dB by the same product with A's adjoint flipped; dA's values are the dot products of
    g's and B's rows at each entry (conjugated as TensorFlow's batched matmul does)."""
    indices, values, shape, dense = op.inputs
    adj_a, adj_b = bool(op.attr("adjoint_a", False)), bool(op.attr("adjoint_b", False))
    g = grads[0]
    b_grad = b.op("SparseTensorDenseMatMul", [indices, values, shape, g],
                  {"adjoint_a": not adj_a, "adjoint_b": False})
    if adj_b:
        b_grad = _transpose(b, b_grad, conjugate=True)
    rows, cols = _column(b, indices, 0), _column(b, indices, 1)
    parts_a = _gather_rows(b, g, cols if adj_a else rows)
    parts_b = _gather_rows(b, _transpose(b, dense) if adj_b else dense, rows if adj_a else cols)
    if adj_a:
        parts_a = conj(b, parts_a)
    if adj_a == adj_b:
        parts_b = conj(b, parts_b)
    values_grad = b.op("Sum", [b.op("Mul", [parts_a, parts_b]), b.const(1, I32)],
                       {"keep_dims": False})
    return [None, values_grad, None, b_grad]


@gradient("SparseReorder")
def _sparse_reorder(b, op, grads):
    """The output values' gradients put back in input order."""
    indices, _, shape = op.inputs
    count = b.op("StridedSlice", [b.shape(indices), b.const([0], I32), b.const([1], I32),
                                  b.const([1], I32)], {"shrink_axis_mask": 1})
    entries = b.op("Range", [b.const(0, I32), count, b.const(1, I32)])
    reordered = b.op("SparseReorder", [indices, entries, shape])
    inverse = b.op("InvertPermutation", [b.out(reordered, 1)])
    return [None, _gather_rows(b, grads[1], inverse), None]


@gradient("SparseReduceSum")
def _sparse_reduce_sum(b, op, grads):
    """Each entry gets the gradient of the output cell it was summed into."""
    indices, _, shape, axes = op.inputs
    kept = reduced_shape(b, b.op("Cast", [shape], {"DstT": I32}), axes)
    g = b.op("Reshape", [grads[0], kept])
    scale = b.op("FloorDiv", [shape, b.op("Cast", [kept], {"DstT": I64})])
    return [None, b.op("GatherNd", [g, b.op("FloorDiv", [indices, scale])]), None, None]


@gradient("SparseSoftmax")
def _sparse_softmax(b, op, grads):
    """(g - sum(g * y over the last dim)) * y, on the entries only."""
    indices, _, shape = op.inputs
    y, g = op.outputs[0], grads[0]
    summed = b.op("SparseReduceSum", [indices, b.op("Mul", [y, g]), shape,
                                      b.const([-1], I32)], {"keep_dims": True})
    shifted = b.op("SparseDenseCwiseAdd", [indices, g, shape, b.op("Neg", [summed])])
    return [None, b.op("Mul", [shifted, y]), None]


@gradient("SparseAdd")
def _sparse_add(b, op, grads):
    """The sum's value gradients routed back to a's and b's entries (SparseAddGrad)."""
    routed = b.op("SparseAddGrad", [grads[1], op.inputs[0], op.inputs[3], op.outputs[0]])
    return [None, routed, None, None, b.out(routed, 1), None, None]


@gradient("SparseFillEmptyRows")
def _sparse_fill_empty_rows(b, op, grads):
    routed = b.op("SparseFillEmptyRowsGrad", [op.outputs[3], grads[1]])
    return [None, routed, None, b.out(routed, 1)]


def _dense_at_entries(b, op):
    """(indices into the dense operand y, y at those indices): the sparse indices divided
    down to y's (broadcast) shape, its leading added dims sliced off."""
    indices, _, shape, dense = op.inputs
    y_shape = b.shape(dense, out_type=I64)
    added = b.op("ExpandDims", [b.op("Sub", [b.op("Size", [shape]), b.op("Size", [y_shape])]),
                                b.const(0, I32)])
    ones = b.op("Fill", [added, b.const(1, I64)])
    scaling = b.op("FloorDiv", [shape, b.op("ConcatV2", [ones, y_shape, b.const(0, I32)])])
    begin = b.op("ConcatV2", [b.const([0], I32), added, b.const(0, I32)])
    scaled = b.op("Slice", [b.op("FloorDiv", [indices, scaling]), begin,
                            b.const([-1, -1], I32)])
    return scaled, b.op("GatherNd", [dense, scaled])


def _cwise_mul_or_div(b, op, grads, is_mul):
    values, dense, g = op.inputs[1], op.inputs[3], grads[0]
    scaled, dense_vals = _dense_at_entries(b, op)
    if is_mul:
        dx = b.op("Mul", [g, dense_vals])
        dy_val = b.op("Mul", [g, values])
    else:
        dx = b.op("RealDiv", [g, dense_vals])
        dy_val = b.op("Mul", [g, b.op("RealDiv", [b.op("Neg", [values]),
                                                  b.op("Square", [dense_vals])])])
    dy = b.op("TensorScatterAdd", [b.op("ZerosLike", [dense]), scaled, dy_val])
    return [None, dx, None, dy]


@gradient("SparseDenseCwiseMul")
def _sparse_dense_cwise_mul(b, op, grads):
    return _cwise_mul_or_div(b, op, grads, True)


@gradient("SparseDenseCwiseDiv")
def _sparse_dense_cwise_div(b, op, grads):
    return _cwise_mul_or_div(b, op, grads, False)


error_gradient("SparseDenseCwiseAdd", "Gradient for SparseDenseCwiseAdd is not implemented.")
no_gradient("SparseAddGrad")
no_gradient("SparseCross", "SparseCrossHashed", "SparseCrossV2")  # (feature crosses: ids)
