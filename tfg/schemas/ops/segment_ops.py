"""Signatures of the sorted-segment reductions and the sparse-segment reductions (math_ops.cc
in TensorFlow), and of Roll (manip_ops.cc). `tf.nn.embedding_lookup_sparse` (TF1 wide & deep
models) writes SparseSegmentSum/Mean/SqrtN; tf.math.segment_* write Segment*.

    >>> get_op("SparseSegmentMean").attrs["sparse_gradient"].default
    False

SegmentSum(data [5, 3], ids [0, 0, 1, 3, 3]) is [4, 3] (ids sorted; row 2 is empty: 0);
SparseSegmentMean(data, indices, ids) averages data[indices[k]] over each id.
"""
from tfg.schemas.ops.registry import op
from tfg.schemas.ops.shape_fns import ShapeError, unchanged


def _rows(ctx, data_i, ids_i, count):
    data = ctx.shape(data_i)
    if data is None:
        return [None]
    return [(count,) + tuple(data[1:])]


def segment_shape(ctx):
    """[last id + 1] + data.shape[len(ids):] (the id count known only from a constant)."""
    ids = ctx.value(1)
    count = int(ids.reshape(-1)[-1]) + 1 if ids is not None and ids.size else None
    data, ids_shape = ctx.shape(0), ctx.shape(1)
    if data is None:
        return [None]
    k = len(ids_shape) if ids_shape is not None else 1
    return [(count,) + tuple(data[k:])]


def sparse_segment_shape(ctx):
    ids = ctx.value(2)
    count = int(ids.reshape(-1)[-1]) + 1 if ids is not None and ids.size else None
    if ctx.num_inputs == 4:
        count = ctx.scalar(3)
    return _rows(ctx, 0, 2, count)


_REAL = "T: realnumbertype"
for _name, _t in (("SegmentSum", "T: numbertype"), ("SegmentProd", "T: numbertype"),
                  ("SegmentMean", "T: numbertype"), ("SegmentMax", _REAL),
                  ("SegmentMin", _REAL)):
    op(_name,
       inputs=["data: T", "segment_ids: Tindices"],
       outputs=["output: T"],
       attrs=[_t, "Tindices: {int32, int64}"],
       shape_fn=segment_shape)

_SPARSE_T = {"SparseSegmentSum": _REAL, "SparseSegmentMean": "T: {bfloat16, half, float, double}",
             "SparseSegmentSqrtN": "T: {bfloat16, half, float, double}"}
for _name, _t in _SPARSE_T.items():
    op(_name,
       inputs=["data: T", "indices: Tidx", "segment_ids: Tsegmentids"],
       outputs=["output: T"],
       attrs=[_t, "Tidx: {int32, int64} = DT_INT32", "Tsegmentids: {int32, int64} = DT_INT32",
              "sparse_gradient: bool = false"],
       shape_fn=sparse_segment_shape)
    op(_name + "WithNumSegments",
       inputs=["data: T", "indices: Tidx", "segment_ids: Tsegmentids",
               "num_segments: Tnumsegments"],
       outputs=["output: T"],
       attrs=[_t, "Tidx: {int32, int64} = DT_INT32", "Tnumsegments: {int32, int64} = DT_INT32",
              "Tsegmentids: {int32, int64} = DT_INT32", "sparse_gradient: bool = false"],
       shape_fn=sparse_segment_shape)

op("Roll",
   inputs=["input: T", "shift: Tshift", "axis: Taxis"],
   outputs=["output: T"],
   attrs=["T: type", "Tshift: {int32, int64}", "Taxis: {int32, int64}"],
   shape_fn=unchanged)


def sparse_segment_grad(ctx):
    """[output_dim0] + grad.shape[1:] (V2: [unique indices] + grad.shape[1:], and them)."""
    g = ctx.shape(0)
    dim0 = ctx.scalar(3)
    if ctx.node.op.endswith("V2"):
        return [None if g is None else (None,) + tuple(g[1:]), (None,)]
    return [None if g is None else (dim0,) + tuple(g[1:])]


# TensorFlow's own gradients of the sparse-segment reductions (a graph that holds
# tf.gradients of embedding_lookup_sparse has them); V2 returns only the touched rows.
_GRAD_T = "T: {bfloat16, half, float, double}"
for _kind in ("Sum", "Mean", "SqrtN"):
    op(f"SparseSegment{_kind}Grad",
       inputs=["grad: T", "indices: Tidx", "segment_ids: Tsegmentids", "output_dim0: int32"],
       outputs=["output: T"],
       attrs=[_GRAD_T, "Tidx: {int32, int64} = DT_INT32",
              "Tsegmentids: {int32, int64} = DT_INT32"],
       shape_fn=sparse_segment_grad)
    op(f"SparseSegment{_kind}GradV2",
       inputs=["grad: T", "indices: Tidx", "segment_ids: Tsegmentids",
               "dense_output_dim0: int32"],
       outputs=["output: T", "sorted_unique_indices: Tidx"],
       attrs=[_GRAD_T, "Tidx: {int32, int64} = DT_INT32",
              "Tsegmentids: {int32, int64} = DT_INT32"],
       shape_fn=sparse_segment_grad)


def dense_bincount(ctx):
    """input [n] -> [size]; input [rows, n] -> [rows, size]."""
    s, size = ctx.shape(0), ctx.scalar(1)
    if s is None:
        return [None]
    if len(s) not in (1, 2):
        raise ShapeError(f"DenseBincount input must have rank 1 or 2, got {len(s)}")
    return [(size,) if len(s) == 1 else (s[0], size)]


op("DenseBincount",
   inputs=["input: Tidx", "size: Tidx", "weights: T"],
   outputs=["output: T"],
   attrs=["Tidx: {int32, int64}", "T: {int32, int64, float, double}",
          "binary_output: bool = false"],
   shape_fn=dense_bincount)
