"""Signatures of the array ops (TensorFlow's array_ops.cc and friends): constants, feeds,
identities, reshaping, joining/splitting, slicing, gathering, padding and filling.

    >>> get_op("ConcatV2").inputs[0].number_attr
    'N'
"""
from tfg.schemas.ops.array_shapes import (
    bitcast,
    broadcast_args, broadcast_grad_sum, broadcast_gradient_args, concat_offset, concat_v1,
    concat_v2, const_shape,
    dynamic_stitch, ensure_shape, expand_dims, gather, gather_nd, gather_v2, list_diff,
    mirror_pad_grad, one_hot, pack, pad, placeholder_with_default, range_shape, reshape, shape_n,
    shape_of, slice_shape, split, split_v, squeeze, strided_slice, tile, transpose, unpack,
    unsorted_segment_sum, where)
from tfg.schemas.ops.array_shapes import (
    bincount, dynamic_partition, histogram_fixed_width, lin_space, reverse, search_sorted,
    sparse_to_dense, unique, unique_v2)
from tfg.schemas.ops.array_shapes import diag, diag_part, unique_with_counts_v2
from tfg.schemas.ops.registry import op
from tfg.schemas.ops.shape_fns import (
    from_shape_attr, from_shape_input, scalar, unchanged, unchanged_all)

# --- constants and feeds
op("Const",
   outputs=["output: dtype"],
   attrs=["value: tensor", "dtype: type"],
   shape_fn=const_shape,
   traits=["cheap"])
op("Placeholder",
   outputs=["output: dtype"],
   attrs=["dtype: type", "shape: shape = unknown"],
   shape_fn=from_shape_attr(),
   traits=["placeholder"])
op("PlaceholderV2",
   outputs=["output: dtype"],
   attrs=["dtype: type", "shape: shape"],
   shape_fn=from_shape_attr(),
   traits=["placeholder"])
op("PlaceholderWithDefault",
   inputs=["input: dtype"],
   outputs=["output: dtype"],
   attrs=["dtype: type", "shape: shape"],
   shape_fn=placeholder_with_default,
   traits=["placeholder"])

# --- identities
op("Identity",
   inputs=["input: T"],
   outputs=["output: T"],
   attrs=["T: type"],
   shape_fn=unchanged,
   traits=["identity", "cheap", "layout_agnostic"])
op("RefIdentity",
   inputs=["input: Ref(T)"],
   outputs=["output: Ref(T)"],
   attrs=["T: type"],
   shape_fn=unchanged,
   traits=["identity"])
op("IdentityN",
   inputs=["input: T"],
   outputs=["output: T"],
   attrs=["T: list(type) >= 1"],
   shape_fn=unchanged_all,
   traits=["identity", "cheap"])
op("Snapshot",
   inputs=["input: T"],
   outputs=["output: T"],
   attrs=["T: type"],
   shape_fn=unchanged,
   traits=["identity", "cheap"])
op("StopGradient",
   inputs=["input: T"],
   outputs=["output: T"],
   attrs=["T: type"],
   shape_fn=unchanged,
   traits=["identity", "cheap"])
op("PreventGradient",
   inputs=["input: T"],
   outputs=["output: T"],
   attrs=["T: type", "message: string = ''"],
   shape_fn=unchanged,
   traits=["identity", "cheap"])
op("CheckNumerics",
   inputs=["tensor: T"],
   outputs=["output: T"],
   attrs=["T: floattype", "message: string"],
   stateful=True, shape_fn=unchanged,
   traits=["identity"])
op("EnsureShape",
   inputs=["input: T"],
   outputs=["output: T"],
   attrs=["shape: shape", "T: type"],
   shape_fn=ensure_shape,
   traits=["identity"])

# --- shapes of tensors
op("Shape",
   inputs=["input: T"],
   outputs=["output: out_type"],
   attrs=["T: type", "out_type: {int32, int64} = DT_INT32"],
   shape_fn=shape_of,
   traits=["shape_metadata", "cheap"])
op("ShapeN",
   inputs=["input: N * T"],
   outputs=["output: N * out_type"],
   attrs=["N: int >= 1", "T: type", "out_type: {int32, int64} = DT_INT32"],
   shape_fn=shape_n,
   traits=["shape_metadata", "cheap"])
op("Size",
   inputs=["input: T"],
   outputs=["output: out_type"],
   attrs=["T: type", "out_type: {int32, int64} = DT_INT32"],
   shape_fn=scalar,
   traits=["shape_metadata", "cheap"])
op("Rank",
   inputs=["input: T"],
   outputs=["output: int32"],
   attrs=["T: type"],
   shape_fn=scalar,
   traits=["shape_metadata", "cheap"])

# --- reshaping
op("Bitcast",
   inputs=["input: T"],
   outputs=["output: type"],
   attrs=["T: {bfloat16, half, float, double, int64, int32, uint8, uint16, uint32, uint64, "
          "int8, int16, complex64, complex128, qint8, quint8, qint16, quint16, qint32}",
          "type: {bfloat16, half, float, double, int64, int32, uint8, uint16, uint32, uint64, "
          "int8, int16, complex64, complex128, qint8, quint8, qint16, quint16, qint32}"],
   shape_fn=bitcast)
op("Reshape",
   inputs=["tensor: T", "shape: Tshape"],
   outputs=["output: T"],
   attrs=["T: type", "Tshape: {int32, int64} = DT_INT32"],
   shape_fn=reshape,
   traits=["view", "cheap"])
op("Squeeze",
   inputs=["input: T"],
   outputs=["output: T"],
   attrs=["T: type", "squeeze_dims: list(int) >= 0 = []"],
   shape_fn=squeeze,
   traits=["view", "cheap"])
op("ExpandDims",
   inputs=["input: T", "dim: Tdim"],
   outputs=["output: T"],
   attrs=["T: type", "Tdim: {int32, int64} = DT_INT32"],
   shape_fn=expand_dims,
   traits=["view", "cheap"])
op("Transpose",
   inputs=["x: T", "perm: Tperm"],
   outputs=["y: T"],
   attrs=["T: type", "Tperm: {int32, int64} = DT_INT32"],
   shape_fn=transpose,
   traits=["within_input"])
op("InvertPermutation",
   inputs=["x: T"],
   outputs=["y: T"],
   attrs=["T: {int32, int64} = DT_INT32"],
   shape_fn=unchanged)
op("BroadcastTo",
   inputs=["input: T", "shape: Tidx"],
   outputs=["output: T"],
   attrs=["T: type", "Tidx: {int32, int64} = DT_INT32"],
   shape_fn=from_shape_input(1))
op("BroadcastArgs",
   inputs=["s0: T", "s1: T"],
   outputs=["r0: T"],
   attrs=["T: {int32, int64} = DT_INT32"],
   shape_fn=broadcast_args)
op("BroadcastGradientArgs",
   inputs=["s0: T", "s1: T"],
   outputs=["r0: T", "r1: T"],
   attrs=["T: {int32, int64} = DT_INT32"],
   shape_fn=broadcast_gradient_args)
# tfg's own (no TensorFlow OpDef; only tfg's Session makes it, from the remap rule of
# tfg/passes/remap_broadcast_grad.py, and it is never written to a graph file):
# Reshape(Sum(grad, BroadcastGradientArgs(shape, other_shape)[0]), shape) as one node.
op("_TfgBroadcastGradSum",
   inputs=["grad: T", "shape: Tshape", "other_shape: Tshape"],
   outputs=["output: T"],
   attrs=["T: type", "Tshape: {int32, int64} = DT_INT32"],
   shape_fn=broadcast_grad_sum,
   traits=["view"])

# --- joining and splitting
op("ConcatV2",
   inputs=["values: N * T", "axis: Tidx"],
   outputs=["output: T"],
   attrs=["N: int >= 2", "T: type", "Tidx: {int32, int64} = DT_INT32"],
   shape_fn=concat_v2)
op("Concat",
   inputs=["concat_dim: int32", "values: N * T"],
   outputs=["output: T"],
   attrs=["N: int >= 2", "T: type"],
   shape_fn=concat_v1)
op("ConcatOffset",
   inputs=["concat_dim: int32", "shape: N * shape_type"],
   outputs=["offset: N * shape_type"],
   attrs=["N: int >= 2", "shape_type: {int32, int64} = DT_INT32"],
   shape_fn=concat_offset)
op("Pack",
   inputs=["values: N * T"],
   outputs=["output: T"],
   attrs=["N: int >= 1", "T: type", "axis: int = 0"],
   shape_fn=pack)
op("Unpack",
   inputs=["value: T"],
   outputs=["output: num * T"],
   attrs=["num: int >= 0", "T: type", "axis: int = 0"],
   shape_fn=unpack,
   traits=["within_input"])
op("Split",
   inputs=["split_dim: int32", "value: T"],
   outputs=["output: num_split * T"],
   attrs=["num_split: int >= 1", "T: type"],
   shape_fn=split,
   traits=["within_input"])
op("SplitV",
   inputs=["value: T", "size_splits: Tlen", "split_dim: int32"],
   outputs=["output: num_split * T"],
   attrs=["num_split: int >= 1", "T: type", "Tlen: {int8, int32, int64} = DT_INT64"],
   shape_fn=split_v,
   traits=["within_input"])
op("Tile",
   inputs=["input: T", "multiples: Tmultiples"],
   outputs=["output: T"],
   attrs=["T: type", "Tmultiples: {int32, int64} = DT_INT32"],
   shape_fn=tile)

# --- slicing and gathering
op("Slice",
   inputs=["input: T", "begin: Index", "size: Index"],
   outputs=["output: T"],
   attrs=["T: type", "Index: {int32, int64}"],
   shape_fn=slice_shape,
   traits=["within_input", "cheap"])
op("StridedSlice",
   inputs=["input: T", "begin: Index", "end: Index", "strides: Index"],
   outputs=["output: T"],
   attrs=["T: type", "Index: {int16, int32, int64}", "begin_mask: int = 0", "end_mask: int = 0",
          "ellipsis_mask: int = 0", "new_axis_mask: int = 0", "shrink_axis_mask: int = 0"],
   shape_fn=strided_slice,
   traits=["within_input", "cheap"])
op("StridedSliceGrad",
   inputs=["shape: Index", "begin: Index", "end: Index", "strides: Index", "dy: T"],
   outputs=["output: T"],
   attrs=["T: type", "Index: {int32, int64}", "begin_mask: int = 0", "end_mask: int = 0",
          "ellipsis_mask: int = 0", "new_axis_mask: int = 0", "shrink_axis_mask: int = 0"],
   shape_fn=from_shape_input(0))
op("GatherV2",
   inputs=["params: Tparams", "indices: Tindices", "axis: Taxis"],
   outputs=["output: Tparams"],
   attrs=["batch_dims: int = 0", "Tparams: type", "Tindices: {int16, int32, int64}",
          "Taxis: {int32, int64}"],
   shape_fn=gather_v2,
   traits=["cheap"])
op("Gather",
   inputs=["params: Tparams", "indices: Tindices"],
   outputs=["output: Tparams"],
   attrs=["validate_indices: bool = true", "Tparams: type", "Tindices: {int32, int64}"],
   shape_fn=gather,
   traits=["cheap"])
op("GatherNd",
   inputs=["params: Tparams", "indices: Tindices"],
   outputs=["output: Tparams"],
   attrs=["Tparams: type", "Tindices: {int16, int32, int64}", "bad_indices_policy: string = ''"],
   shape_fn=gather_nd)
op("ScatterNd",
   inputs=["indices: Tindices", "updates: T", "shape: Tindices"],
   outputs=["output: T"],
   attrs=["T: type", "Tindices: {int16, int32, int64}", "bad_indices_policy: string = ''"],
   shape_fn=from_shape_input(2))
# TensorScatterUpdate / Add / Sub / Min / Max: `tensor` with the slices at `indices` (GatherNd
# addressing) replaced or combined with `updates`; the output has the tensor's shape.
# (Update takes int16/uint16 indices too; the others int32/int64 only, as in TensorFlow.)
for _name, _tindices in (("TensorScatterUpdate", "{int16, int32, int64, uint16}"),
                         ("TensorScatterAdd", "{int32, int64}"),
                         ("TensorScatterSub", "{int32, int64}"),
                         ("TensorScatterMin", "{int32, int64}"),
                         ("TensorScatterMax", "{int32, int64}")):
    op(_name,
       inputs=["tensor: T", "indices: Tindices", "updates: T"],
       outputs=["output: T"],
       attrs=["T: type", f"Tindices: {_tindices}", "bad_indices_policy: string = ''"],
       shape_fn=unchanged)
# XLA's DynamicUpdateSlice (keras.ops.slice_update): `input` with `update` written at the
# clamped start `indices`; the output has the input's shape.
op("XlaDynamicUpdateSlice",
   inputs=["input: T", "update: T", "indices: Tindices"],
   outputs=["output: T"],
   attrs=["T: type", "Tindices: {int32, int64}"],
   shape_fn=unchanged)  # TensorFlow's shape function: UnchangedShape
# InplaceUpdate / Add / Sub: a copy of x with rows i (taken modulo x.shape[0], as TensorFlow's
# kernel does) replaced by, plus or minus the rows of v.
for _name in ("InplaceUpdate", "InplaceAdd", "InplaceSub"):
    op(_name,
       inputs=["x: T", "i: int32", "v: T"],
       outputs=["y: T"],
       attrs=["T: type"],
       shape_fn=unchanged)
# (Sum takes int16 segment ids too; Prod/Max/Min int32/int64 only, as in TensorFlow.)
for _name, _t, _tindices in (
        ("UnsortedSegmentSum", "T: numbertype", "{int16, int32, int64}"),
        ("UnsortedSegmentProd", "T: numbertype", "{int32, int64}"),
        ("UnsortedSegmentMax", "T: realnumbertype", "{int32, int64}"),
        ("UnsortedSegmentMin", "T: realnumbertype", "{int32, int64}")):
    op(_name,
       inputs=["data: T", "segment_ids: Tindices", "num_segments: Tnumsegments"],
       outputs=["output: T"],
       attrs=[_t, f"Tindices: {_tindices}", "Tnumsegments: {int32, int64} = DT_INT32"],
       shape_fn=unsorted_segment_sum)
op("DynamicStitch",
   inputs=["indices: N * int32", "data: N * T"],
   outputs=["merged: T"],
   attrs=["N: int >= 1", "T: type"],
   shape_fn=dynamic_stitch)
op("ReverseV2",
   inputs=["tensor: T", "axis: Tidx"],
   outputs=["output: T"],
   attrs=["Tidx: {int32, int64} = DT_INT32",
          "T: {uint8, int8, uint16, int16, int32, uint32, int64, uint64, bool, bfloat16, half, "
          "float, double, complex64, complex128, string}"],
   shape_fn=unchanged)
op("Pad",
   inputs=["input: T", "paddings: Tpaddings"],
   outputs=["output: T"],
   attrs=["T: type", "Tpaddings: {int32, int64} = DT_INT32"],
   shape_fn=pad)
op("PadV2",
   inputs=["input: T", "paddings: Tpaddings", "constant_values: T"],
   outputs=["output: T"],
   attrs=["T: type", "Tpaddings: {int32, int64} = DT_INT32"],
   shape_fn=pad)
op("MirrorPad",
   inputs=["input: T", "paddings: Tpaddings"],
   outputs=["output: T"],
   attrs=["T: type", "Tpaddings: {int32, int64} = DT_INT32", "mode: {'REFLECT', 'SYMMETRIC'}"],
   shape_fn=pad)
op("MirrorPadGrad",
   inputs=["input: T", "paddings: Tpaddings"],
   outputs=["output: T"],
   attrs=["T: type", "Tpaddings: {int32, int64} = DT_INT32", "mode: {'REFLECT', 'SYMMETRIC'}"],
   shape_fn=mirror_pad_grad)

# --- filling
op("Fill",
   inputs=["dims: index_type", "value: T"],
   outputs=["output: T"],
   attrs=["T: type", "index_type: {int32, int64} = DT_INT32"],
   shape_fn=from_shape_input(0))
# Empty: a tensor of the given shape whose contents are undefined (tfg gives zeros, which
# `init=true` asks for), e.g. tf.nn.ctc_loss's scan accumulators.
op("Empty",
   inputs=["shape: int32"],
   outputs=["output: dtype"],
   attrs=["dtype: type", "init: bool = false"],
   stateful=True, shape_fn=from_shape_input(0))  # stateful in TensorFlow: never folded or CSE'd
op("ZerosLike",
   inputs=["x: T"],
   outputs=["y: T"],
   attrs=["T: type"],
   shape_fn=unchanged)
op("OnesLike",
   inputs=["x: T"],
   outputs=["y: T"],
   attrs=["T: {bfloat16, half, float, double, int8, uint8, int16, uint16, int32, uint32, int64, "
          "uint64, complex64, complex128, bool}"],
   shape_fn=unchanged)
op("Range",
   inputs=["start: Tidx", "limit: Tidx", "delta: Tidx"],
   outputs=["output: Tidx"],
   attrs=["Tidx: {bfloat16, half, float, double, int8, int16, int32, int64, uint16, uint32, "
          "uint64} = DT_INT32"],
   shape_fn=range_shape)
op("OneHot",
   inputs=["indices: TI", "depth: int32", "on_value: T", "off_value: T"],
   outputs=["output: T"],
   attrs=["axis: int = -1", "T: type", "TI: {uint8, int8, int32, int64} = DT_INT64"],
   shape_fn=one_hot)

# --- index computations
op("ListDiff",
   inputs=["x: T", "y: T"],
   outputs=["out: T", "idx: out_idx"],
   attrs=["T: type", "out_idx: {int32, int64} = DT_INT32"],
   shape_fn=list_diff)
op("Where",
   inputs=["input: T"],
   outputs=["index: int64"],
   attrs=["T: {float, double, int32, uint8, int16, int8, complex64, int64, qint8, quint8, qint32, "
          "bfloat16, qint16, quint16, uint16, complex128, half, uint32, uint64, bool} = DT_BOOL"],
   shape_fn=where)
op("DataFormatVecPermute",
   inputs=["x: T"],
   outputs=["y: T"],
   attrs=["T: {int32, int64} = DT_INT32", "src_format: string = 'NHWC'",
          "dst_format: string = 'NCHW'"],
   shape_fn=unchanged)
op("DataFormatDimMap",
   inputs=["x: T"],
   outputs=["y: T"],
   attrs=["T: {int32, int64} = DT_INT32", "src_format: string = 'NHWC'",
          "dst_format: string = 'NCHW'"],
   shape_fn=unchanged)


# --- sets and partitions (array_ops.cc, data_flow_ops.cc)
op("Unique",
   inputs=["x: T"],
   outputs=["y: T", "idx: out_idx"],
   attrs=["T: type", "out_idx: {int32, int64} = DT_INT32"],
   shape_fn=unique)
op("UniqueV2",
   inputs=["x: T", "axis: Taxis"],
   outputs=["y: T", "idx: out_idx"],
   attrs=["T: type", "Taxis: {int32, int64} = DT_INT64", "out_idx: {int32, int64} = DT_INT32"],
   shape_fn=unique_v2)
op("UniqueWithCounts",
   inputs=["x: T"],
   outputs=["y: T", "idx: out_idx", "count: out_idx"],
   attrs=["T: type", "out_idx: {int32, int64} = DT_INT32"],
   shape_fn=unique)
op("UniqueWithCountsV2",
   inputs=["x: T", "axis: Taxis"],
   outputs=["y: T", "idx: out_idx", "count: out_idx"],
   attrs=["T: type", "Taxis: {int32, int64} = DT_INT64", "out_idx: {int32, int64} = DT_INT32"],
   shape_fn=unique_with_counts_v2)

# --- the old diagonal ops (tf.diag, tf.diag_part), the math misc identities and checks
op("Diag",
   inputs=["diagonal: T"],
   outputs=["output: T"],
   attrs=["T: {bfloat16, half, float, double, int32, int64, complex64, complex128}"],
   shape_fn=diag)
op("DiagPart",
   inputs=["input: T"],
   outputs=["diagonal: T"],
   attrs=["T: {bfloat16, half, float, double, int32, int64, complex64, complex128}"],
   shape_fn=diag_part)
# GuaranteeConst (frozen graphs, XLA's hint that the value is constant): stateful in TF
op("GuaranteeConst",
   inputs=["input: T"],
   outputs=["output: T"],
   attrs=["T: type"],
   stateful=True, shape_fn=unchanged,
   traits=["identity"])
op("CheckNumericsV2",
   inputs=["tensor: T"],
   outputs=["output: T"],
   attrs=["T: {bfloat16, half, float, double}", "message: string"],
   stateful=True, shape_fn=unchanged,
   traits=["identity"])
# ToBool (functional_ops.cc): a scalar's truth, a non-scalar's non-emptiness
op("ToBool",
   inputs=["input: T"],
   outputs=["output: bool"],
   attrs=["T: type"],
   shape_fn=scalar)
op("DynamicPartition",
   inputs=["data: T", "partitions: int32"],
   outputs=["outputs: num_partitions * T"],
   attrs=["num_partitions: int >= 1", "T: type"],
   shape_fn=dynamic_partition)
op("ParallelDynamicStitch",
   inputs=["indices: N * int32", "data: N * T"],
   outputs=["merged: T"],
   attrs=["N: int >= 1", "T: type"],
   shape_fn=dynamic_stitch)
op("SparseToDense",
   inputs=["sparse_indices: Tindices", "output_shape: Tindices", "sparse_values: T",
           "default_value: T"],
   outputs=["dense: T"],
   attrs=["validate_indices: bool = true", "T: type", "Tindices: {int32, int64}"],
   shape_fn=sparse_to_dense)

# --- searches and counts (array_ops.cc, math_ops.cc)
for _name in ("LowerBound", "UpperBound"):
    op(_name,
       inputs=["sorted_inputs: T", "values: T"],
       outputs=["output: out_type"],
       attrs=["T: type", "out_type: {int32, int64} = DT_INT32"],
       shape_fn=search_sorted)
op("Bucketize",
   inputs=["input: T"],
   outputs=["output: int32"],
   attrs=["T: {int32, int64, float, double}", "boundaries: list(float)"],
   shape_fn=unchanged)
op("HistogramFixedWidth",
   inputs=["values: T", "value_range: T", "nbins: int32"],
   outputs=["out: dtype"],
   attrs=["T: {int32, int64, float, double}", "dtype: {int32, int64} = DT_INT32"],
   shape_fn=histogram_fixed_width)
op("Bincount",
   inputs=["arr: int32", "size: int32", "weights: T"],
   outputs=["bins: T"],
   attrs=["T: {int32, int64, float, double}"],
   shape_fn=bincount)
op("LinSpace",
   inputs=["start: T", "stop: T", "num: Tidx"],
   outputs=["output: T"],
   attrs=["T: {bfloat16, half, float, double}", "Tidx: {int32, int64} = DT_INT32"],
   shape_fn=lin_space)

# --- reversing and transposing
op("Reverse",
   inputs=["tensor: T", "dims: bool"],
   outputs=["output: T"],
   attrs=["T: {uint8, int8, uint16, int16, uint32, int32, uint64, int64, bool, bfloat16, half, "
          "float, double, complex64, complex128, string}"],
   shape_fn=reverse)
op("ConjugateTranspose",
   inputs=["x: T", "perm: Tperm"],
   outputs=["y: T"],
   attrs=["T: type", "Tperm: {int32, int64} = DT_INT32"],
   shape_fn=transpose,
   traits=["within_input"])


# --- UnravelIndex (unravel_index_op.cc), EditDistance (edit_distance_op.cc) ------------------
from tfg.schemas.ops.shape_fns import ShapeError, num_elements, with_rank  # noqa: E402


def unravel_index_shape(ctx):
    """indices (a scalar or vector), dims [r] -> [r] or [r, indices' size]."""
    x = ctx.shape(0)
    dims = with_rank(ctx.shape(1), 1, "dims")
    if x is None:
        return [None]
    return [(dims[0],) if not x else (dims[0], num_elements(x))]


def _sparse_parts(ctx, first):
    """ValidateSparseTensor: indices [n, rank], values [n], shape [rank]."""
    indices = with_rank(ctx.shape(first), 2, "indices")
    values = with_rank(ctx.shape(first + 1), 1, "values")
    shape = with_rank(ctx.shape(first + 2), 1, "shape")
    if None not in (indices[0], values[0]) and indices[0] != values[0]:
        raise ShapeError(f"Number of elements in index ({indices[0]}) and values "
                         f"({values[0]}) do not match.")
    if None not in (indices[1], shape[0]) and indices[1] != shape[0]:
        raise ShapeError(f"Index rank ({indices[1]}) and shape rank ({shape[0]}) do not match.")


def edit_distance_shape(ctx):
    """The elementwise max of the two dense shapes' values, less their last dim (the
    sequences'): what the kernel allocates, so sized from the values."""
    _sparse_parts(ctx, 0)
    _sparse_parts(ctx, 3)
    h, t = ctx.elems(2), ctx.elems(5)
    if h is None or t is None:
        return [None]
    if len(h) != len(t):
        raise ShapeError(f"Num elements of hypothesis_shape does not match truth_shape: "
                         f"{len(h)} vs. {len(t)}")
    dims = [None if None in (a, b) else max(a, b) for a, b in zip(h[:-1], t[:-1])]
    return [tuple(None if d is None or d < 0 else d for d in dims)]


op("UnravelIndex",
   inputs=["indices: Tidx", "dims: Tidx"],
   outputs=["output: Tidx"],
   attrs=["Tidx: {int32, int64} = DT_INT32"],
   shape_fn=unravel_index_shape)
op("EditDistance",
   inputs=["hypothesis_indices: int64", "hypothesis_values: T", "hypothesis_shape: int64",
           "truth_indices: int64", "truth_values: T", "truth_shape: int64"],
   outputs=["output: float"],
   attrs=["normalize: bool = true", "T: type"],
   shape_fn=edit_distance_shape)
