"""Gradients of shape and indexing ops: reshapes, transposes, concat/split, pack/unpack,
slices, gathers, tiles, pads, reverses, broadcasts (TensorFlow's array_grad.py rules; gathers
give dense gradients through UnsortedSegmentSum instead of IndexedSlices).

    Before: y = Transpose(x, perm)      After: Transpose(g, InvertPermutation(perm))
    Before: y = ConcatV2(a, b, axis)    After: Slice(g, ConcatOffset(axis, ShapeN(a, b)), ...)
"""
from tfg.passes.grad.registry import error_gradient, gradient, no_gradient
from tfg.schemas.dtypes import DType

I32 = DType.INT32


def _reshape_like(b, g, x):
    return b.op("Reshape", [g, b.shape(x)])


@gradient("Reshape", "Squeeze", "ExpandDims")
def _reshape(b, op, grads):
    return [_reshape_like(b, grads[0], op.inputs[0])] + [None] * (len(op.inputs) - 1)


@gradient("Transpose")
def _transpose(b, op, grads):
    return [b.op("Transpose", [grads[0], b.op("InvertPermutation", [op.inputs[1]])]), None]


@gradient("IdentityN")
def _identity_n(b, op, grads):
    return list(grads)


@gradient("ReverseV2")
def _reverse(b, op, grads):
    return [b.op("ReverseV2", [grads[0], op.inputs[1]]), None]


def _concat_grads(b, values, axis, g):
    """Slices of g, one per concatenated value (ConcatOffset + ShapeN, as TensorFlow)."""
    if b.dtype(axis) != I32:
        axis = b.op("Cast", [axis], {"DstT": I32})
    rank = b.op("Rank", [values[0]])
    axis = b.op("FloorMod", [axis, rank])
    shapes = b.op("ShapeN", values, {"out_type": I32})
    offsets = b.op("ConcatOffset", [axis] + [b.out(shapes, i) for i in range(len(values))])
    return [b.op("Slice", [g, b.out(offsets, i), b.out(shapes, i)]) for i in range(len(values))]


@gradient("ConcatV2")
def _concat_v2(b, op, grads):
    values, axis = op.inputs[:-1], op.inputs[-1]
    return _concat_grads(b, values, axis, grads[0]) + [None]


@gradient("Concat")
def _concat(b, op, grads):
    axis, values = op.inputs[0], op.inputs[1:]
    return [None] + _concat_grads(b, values, axis, grads[0])


@gradient("Pack")
def _pack(b, op, grads):
    n = len(op.inputs)
    out = b.op("Unpack", [grads[0]], {"num": n, "axis": int(op.attr("axis", 0))})
    return [b.out(out, i) for i in range(n)]


@gradient("Unpack")
def _unpack(b, op, grads):
    return [b.op("Pack", list(grads), {"axis": int(op.attr("axis", 0))})]


@gradient("Split")
def _split(b, op, grads):
    return [None, b.op("ConcatV2", list(grads) + [op.inputs[0]])]


@gradient("SplitV")
def _split_v(b, op, grads):
    return [b.op("ConcatV2", list(grads) + [op.inputs[2]]), None, None]


@gradient("Slice")
def _slice(b, op, grads):
    x, begin = op.inputs[0], op.inputs[1]
    index = b.dtype(begin)
    rank = b.op("Rank", [x])
    if index != I32:
        rank = b.op("Cast", [rank], {"DstT": index})
    shape2 = b.op("Pack", [rank, b.const(1, index)], {"axis": 0})
    before = b.op("Reshape", [begin, shape2])
    rest = b.op("Sub", [b.op("Sub", [b.shape(x, index), b.shape(op.outputs[0], index)]), begin])
    after = b.op("Reshape", [rest, shape2])
    paddings = b.op("ConcatV2", [before, after, b.const(1, I32)])
    return [b.op("Pad", [grads[0], paddings]), None, None]


@gradient("StridedSlice")
def _strided_slice(b, op, grads):
    x, begin, end, strides = op.inputs
    attrs = {k: int(op.attr(k, 0)) for k in ("begin_mask", "end_mask", "ellipsis_mask",
                                              "new_axis_mask", "shrink_axis_mask")}
    shape = b.shape(x, b.dtype(begin))
    return [b.op("StridedSliceGrad", [shape, begin, end, strides, grads[0]], attrs),
            None, None, None]


def _pad_grad(b, op, grads):
    x, paddings = op.inputs[0], op.inputs[1]
    index = b.dtype(paddings)
    rank = b.op("Rank", [x])
    if index != I32:
        rank = b.op("Cast", [rank], {"DstT": index})
    size = b.op("Pack", [rank, b.const(1, index)], {"axis": 0})
    before = b.op("Slice", [paddings, b.const([0, 0], index), size])
    begin = b.op("Reshape", [before, b.const([-1], I32)])
    gx = b.op("Slice", [grads[0], begin, b.shape(x, index)])
    if op.type == "Pad":
        return [gx, None]
    # PadV2's constant fills everything the input does not: the rest of the gradient's sum.
    total = b.op("Sum", [grads[0], b.op("Range", [b.const(0, I32), b.op("Rank", [grads[0]]),
                                                   b.const(1, I32)])])
    inside = b.op("Sum", [gx, b.op("Range", [b.const(0, I32), b.op("Rank", [gx]),
                                             b.const(1, I32)])])
    return [gx, None, b.op("Sub", [total, inside])]


gradient("Pad", "PadV2")(_pad_grad)  # noqa: E305


@gradient("MirrorPad")
def _mirror_pad(b, op, grads):
    attrs = {"mode": op.attr("mode")}
    return [b.op("MirrorPadGrad", [grads[0], op.inputs[1]], attrs), None]


@gradient("MirrorPadGrad")
def _mirror_pad_grad(b, op, grads):
    attrs = {"mode": op.attr("mode")}
    return [b.op("MirrorPad", [grads[0], op.inputs[1]], attrs), None]


@gradient("Tile")
def _tile(b, op, grads):
    x, multiples = op.inputs
    index = b.dtype(multiples)
    shape = b.shape(x, index)
    pairs = b.op("Transpose", [b.op("Pack", [multiples, shape], {"axis": 0}),
                               b.const([1, 0], I32)])
    split_shape = b.op("Reshape", [pairs, b.const([-1], I32)])
    axes = b.op("Range", [b.const(0, I32), b.op("Size", [split_shape]), b.const(2, I32)])
    return [b.op("Sum", [b.op("Reshape", [grads[0], split_shape]), axes]), None]


@gradient("BroadcastTo")
def _broadcast_to(b, op, grads):
    x, target = op.inputs
    xshape = b.shape(x, b.dtype(target))
    axes = b.out(b.op("BroadcastGradientArgs", [target, xshape]), 1)
    summed = b.op("Sum", [grads[0], axes], {"keep_dims": True})
    return [b.op("Reshape", [summed, xshape]), None]


@gradient("Fill")
def _fill(b, op, grads):
    g = grads[0]
    axes = b.op("Range", [b.const(0, I32), b.op("Rank", [g]), b.const(1, I32)])
    return [None, b.op("Sum", [g, axes])]


@gradient("StridedSliceGrad")
def _strided_slice_grad(b, op, grads):
    _, begin, end, strides, _ = op.inputs
    attrs = {k: int(op.attr(k, 0)) for k in ("begin_mask", "end_mask", "ellipsis_mask",
                                              "new_axis_mask", "shrink_axis_mask")}
    return [None, None, None, None,
            b.op("StridedSlice", [grads[0], begin, end, strides], attrs)]


error_gradient("PreventGradient", None)


@gradient("ReadVariableOp")
def _read_variable(b, op, grads):
    return [grads[0]]


no_gradient("Shape", "ShapeN", "VariableShape", "Size", "Rank", "ZerosLike", "OnesLike",
            "Range", "OneHot", "Where", "BroadcastGradientArgs", "BroadcastArgs",
            "InvertPermutation",
            "ConcatOffset", "ListDiff", "Const", "Placeholder", "VariableV2", "Variable",
            "VarHandleOp", "RandomUniform", "RandomUniformInt", "RandomStandardNormal",
            "TruncatedNormal", "Assign", "AssignAdd", "AssignSub", "AssignVariableOp",
            "IsVariableInitialized", "DataFormatVecPermute", "DataFormatDimMap", "NoOp",
            "Assert", "StopGradient")


# --- block rearrangements: each is the other's gradient (TensorFlow's array_grad.py)
@gradient("SpaceToBatchND")
def _space_to_batch_nd(b, op, grads):
    return [b.op("BatchToSpaceND", [grads[0], op.inputs[1], op.inputs[2]]), None, None]


@gradient("BatchToSpaceND")
def _batch_to_space_nd(b, op, grads):
    return [b.op("SpaceToBatchND", [grads[0], op.inputs[1], op.inputs[2]]), None, None]


@gradient("DepthToSpace")
def _depth_to_space(b, op, grads):
    attrs = {"block_size": op.attr("block_size"), "data_format": op.attr("data_format")}
    return [b.op("SpaceToDepth", [grads[0]], attrs)]


@gradient("SpaceToDepth")
def _space_to_depth(b, op, grads):
    attrs = {"block_size": op.attr("block_size"), "data_format": op.attr("data_format")}
    return [b.op("DepthToSpace", [grads[0]], attrs)]


# --- partitions, stitches, sparse-to-dense (TensorFlow's data_flow_grad.py, sparse_grad.py)
@gradient("DynamicPartition")
def _dynamic_partition(b, op, grads):
    """Partition the positions 0..n-1 the same way, then stitch the gradients back there."""
    data, partitions = op.inputs
    n = int(op.attr("num_partitions"))
    prefix = b.shape(partitions)
    count = b.op("Prod", [prefix, b.const([0], I32)])
    positions = b.op("Reshape", [b.op("Range", [b.const(0, I32), count, b.const(1, I32)]),
                                 prefix])
    parts = b.op("DynamicPartition", [positions, partitions], {"num_partitions": n})
    stitched = b.op("ParallelDynamicStitch", [b.out(parts, i) for i in range(n)] + list(grads),
                    {"N": n})
    return [b.op("Reshape", [stitched, b.shape(data)]), None]


@gradient("DynamicStitch", "ParallelDynamicStitch")
def _dynamic_stitch(b, op, grads):
    """Each data input's rows gathered from the gradient at its indices (a repeated index
    gives every occurrence the gradient, as TensorFlow's rule does)."""
    n = len(op.inputs) // 2
    axis = b.const(0, I32)
    return [None] * n + [b.op("GatherV2", [grads[0], op.inputs[i], axis]) for i in range(n)]


def _sum_all(b, x):
    return b.op("Sum", [x, b.op("Range", [b.const(0, I32), b.op("Rank", [x]), b.const(1, I32)])])


@gradient("SparseToDense")
def _sparse_to_dense(b, op, grads):
    """The values get the gradient at their indices, the default value everything else."""
    values_grad = b.op("GatherNd", [grads[0], op.inputs[0]])
    default_grad = b.op("Sub", [_sum_all(b, grads[0]), _sum_all(b, values_grad)])
    return [None, None, values_grad, default_grad]


@gradient("Reverse")
def _reverse_v1(b, op, grads):
    return [b.op("Reverse", [grads[0], op.inputs[1]]), None]


@gradient("ConjugateTranspose")
def _conjugate_transpose(b, op, grads):
    """conj(unshuffle(g)): TensorFlow's transpose(conjugate=True), a plain Transpose for a
    real type."""
    kind = "ConjugateTranspose" if op.input_dtype(0).is_complex else "Transpose"
    return [b.op(kind, [grads[0], b.op("InvertPermutation", [op.inputs[1]])]), None]


# Sets, searches, counts and LinSpace: integer or boolean outputs, or (LinSpace) declared not
# differentiable by TensorFlow.
no_gradient("Unique", "UniqueV2", "UniqueWithCounts", "LowerBound", "UpperBound", "Bucketize",
            "HistogramFixedWidth", "Bincount", "InTopKV2", "LinSpace")
# (the math misc family: boolean or integer outputs, or declared not differentiable)
no_gradient("UniqueWithCountsV2", "InTopK", "ApproximateEqual", "ToBool")


@gradient("Diag")
def _diag(b, op, grads):
    return [b.op("DiagPart", [grads[0]])]


@gradient("DiagPart")
def _diag_part(b, op, grads):
    return [b.op("Diag", [grads[0]])]


@gradient("CheckNumericsV2")
def _check_numerics_v2(b, op, grads):
    """The gradient checked too, as TensorFlow's array_grad.py does."""
    msg = op.attr("message", b"")
    msg = msg.decode(errors="replace") if isinstance(msg, bytes) else str(msg)
    text = f"Not a number (NaN) or infinity (Inf) values detected in gradient. {msg}"
    return [b.op("CheckNumericsV2", [grads[0]], {"message": text.encode()})]
