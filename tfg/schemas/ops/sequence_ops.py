"""Signatures of the sequence-model ops behind TF1 RNN and decoding code: `ReverseSequence`
(the backward half of `bidirectional_dynamic_rnn`) and `TopKV2` (beam search), TensorFlow's
array_ops.cc and nn_ops.cc.

    >>> get_op("ReverseSequence").attrs["Tlen"].default
    DType.INT64
    >>> [a.name for a in get_op("TopKV2").outputs]
    ['values', 'indices']
"""
from tfg.schemas.ops.registry import op
from tfg.schemas.ops.shape_fns import ShapeError, fmt, merge_dim, with_rank


def reverse_sequence(ctx):
    x, lengths = ctx.shape(0), ctx.shape(1)
    if lengths is not None and len(lengths) != 1:
        raise ShapeError(f"seq_lengths must be a vector, got shape {fmt(lengths)}")
    if x is None:
        return [None]
    seq_dim, batch_dim = ctx.attr("seq_dim"), ctx.attr("batch_dim")
    for name, d in (("seq_dim", seq_dim), ("batch_dim", batch_dim)):
        if not 0 <= d < len(x):
            raise ShapeError(f"{name} must be < input rank {len(x)}, got {d}")
    if seq_dim == batch_dim:
        raise ShapeError(f"seq_dim and batch_dim must differ, both are {seq_dim}")
    if lengths is not None and None not in (lengths[0], x[batch_dim]) \
            and lengths[0] != x[batch_dim]:
        raise ShapeError(f"Length of seq_lengths != input.dims({batch_dim}), "
                         f"({lengths[0]} vs. {x[batch_dim]})")
    return [x]


def top_k(ctx):
    x, k = ctx.shape(0), ctx.scalar(1)
    if ctx.shape(1) not in (None, ()):
        raise ShapeError("k must be a scalar")
    if x is None:
        return [None, None]
    if not x:
        raise ShapeError("input must be >= 1-D, got shape []")
    if k is not None and k < 0:
        raise ShapeError(f"Need k >= 0, got {k}")
    if k is not None and x[-1] is not None and x[-1] < k:
        raise ShapeError(f"input must have at least k columns. Had {x[-1]}, needed {k}")
    out = tuple(x[:-1]) + (k,)
    return [out, out]


op("ReverseSequence",
   inputs=["input: T", "seq_lengths: Tlen"],
   outputs=["output: T"],
   attrs=["seq_dim: int", "batch_dim: int = 0", "T: type",
          "Tlen: {int32, int64} = DT_INT64"],
   shape_fn=reverse_sequence)
op("TopKV2",
   inputs=["input: T", "k: Tk"],
   outputs=["values: T", "indices: index_type"],
   attrs=["sorted: bool = true",
          "T: {float, double, int32, uint8, int16, int8, int64, bfloat16, uint16, half, uint32, "
          "uint64}",
          "Tk: {int16, int32, int64} = DT_INT32", "index_type: {int16, int32, int64} = DT_INT32"],
   shape_fn=top_k)


def top_k_v1(ctx):
    """TopK (v1): TopKV2 with k an attr."""
    x, k = ctx.shape(0), ctx.attr("k")
    if x is None:
        return [None, None]
    if not x:
        raise ShapeError("input must be >= 1-D, got shape []")
    if x[-1] is not None and x[-1] < k:
        raise ShapeError(f"input must have at least k columns. Had {x[-1]}, needed {k}")
    out = tuple(x[:-1]) + (k,)
    return [out, out]


def in_top_k(ctx):
    """InTopKV2: predictions [batch, classes], targets [batch], k a scalar -> [batch]
    (InTopK: k an attr)."""
    pred = with_rank(ctx.shape(0), 2, "predictions")
    targets = with_rank(ctx.shape(1), 1, "targets")
    if ctx.num_inputs > 2:
        with_rank(ctx.shape(2), 0, "k")
    return [(merge_dim(pred[0], targets[0]),)]


op("TopK",
   inputs=["input: T"],
   outputs=["values: T", "indices: int32"],
   attrs=["k: int >= 0", "sorted: bool = true",
          "T: {float, double, int32, uint8, int16, int8, int64, bfloat16, uint16, half, uint32, "
          "uint64}"],
   shape_fn=top_k_v1)
op("InTopK",
   inputs=["predictions: float", "targets: T"],
   outputs=["precision: bool"],
   attrs=["k: int", "T: {int32, int64} = DT_INT32"],
   shape_fn=in_top_k)
op("InTopKV2",
   inputs=["predictions: float", "targets: T", "k: T"],
   outputs=["precision: bool"],
   attrs=["T: {int32, int64} = DT_INT32"],
   shape_fn=in_top_k)
