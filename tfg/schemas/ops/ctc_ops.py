"""Signatures of the CTC ops (ctc_ops.cc in TensorFlow) that speech graphs carry:
`tf.nn.ctc_greedy_decoder` writes CTCGreedyDecoder, `tf.nn.ctc_beam_search_decoder`
CTCBeamSearchDecoder, and `tf.compat.v1.nn.ctc_loss` (and
`tf.nn.ctc_loss` on a CPU with sparse labels) writes CTCLoss.

    >>> get_op("CTCLoss").attrs["ctc_merge_repeated"].default
    True

CTCGreedyDecoder(inputs [T, B, C], sequence_length [B]) is a SparseTensor (indices [?, 2],
values [?], dense_shape [2]) and log_probability [B, 1]; CTCLoss(inputs [T, B, C], ...) is
loss [B] and gradient [T, B, C]. No output's size depends on an input's values beyond what the
input's own size bounds (a decoded sequence is at most T long), so the memory guard needs no
value-dependent shapes here.
"""
from tfg.schemas.ops.registry import op
from tfg.schemas.ops.shape_fns import ShapeError, merge_dim, with_rank

_REAL = "T: {float, double} = DT_FLOAT"


def _batch(ctx, inputs, sequence_length):
    """The batch size both inputs [T, B, C] and sequence_length [B] state (merged)."""
    try:
        return merge_dim(inputs[1], sequence_length[0])
    except ShapeError:
        raise ShapeError(f"Dimensions must be equal, but are {inputs[1]} and "
                         f"{sequence_length[0]} (inputs' batch and sequence_length)") from None


def greedy_decoder_shape(ctx):
    """indices [?, 2], values [?], dense_shape [2], log_probability [B, 1]."""
    inputs = with_rank(ctx.shape(0), 3, "inputs")
    batch = _batch(ctx, inputs, with_rank(ctx.shape(1), 1, "sequence_length"))
    return [(None, 2), (None,), (2,), (batch, 1)]


def beam_search_decoder_shape(ctx):
    """top_paths each of indices [?, 2], values [?], dense_shape [2]; log_probability
    [B, top_paths]."""
    inputs = with_rank(ctx.shape(0), 3, "inputs")
    batch = _batch(ctx, inputs, with_rank(ctx.shape(1), 1, "sequence_length"))
    n = ctx.attr("top_paths")
    return [(None, 2)] * n + [(None,)] * n + [(2,)] * n + [(batch, n)]


def loss_shape(ctx):
    """loss [B], gradient [T, B, C] (the inputs' shape with the merged batch)."""
    inputs = with_rank(ctx.shape(0), 3, "inputs")
    indices = with_rank(ctx.shape(1), 2, "labels_indices")
    values = with_rank(ctx.shape(2), 1, "labels_values")
    try:
        merge_dim(indices[0], values[0])
    except ShapeError:
        raise ShapeError(f"Dimensions must be equal, but are {indices[0]} and {values[0]} "
                         "(labels_indices' and labels_values' rows)") from None
    batch = _batch(ctx, inputs, with_rank(ctx.shape(3), 1, "sequence_length"))
    return [(batch,), (inputs[0], batch, inputs[2])]


op("CTCGreedyDecoder",
   inputs=["inputs: T", "sequence_length: int32"],
   outputs=["decoded_indices: int64", "decoded_values: int64", "decoded_shape: int64",
            "log_probability: T"],
   attrs=["merge_repeated: bool = false", "blank_index: int = -1", _REAL],
   shape_fn=greedy_decoder_shape)
op("CTCBeamSearchDecoder",
   inputs=["inputs: T", "sequence_length: int32"],
   outputs=["decoded_indices: top_paths * int64", "decoded_values: top_paths * int64",
            "decoded_shape: top_paths * int64", "log_probability: T"],
   attrs=["beam_width: int >= 1", "top_paths: int >= 1", "merge_repeated: bool = true",
          _REAL],
   shape_fn=beam_search_decoder_shape)
op("CTCLoss",
   inputs=["inputs: T", "labels_indices: int64", "labels_values: int32",
           "sequence_length: int32"],
   outputs=["loss: T", "gradient: T"],
   attrs=["preprocess_collapse_repeated: bool = false", "ctc_merge_repeated: bool = true",
          "ignore_longer_outputs_than_inputs: bool = false", _REAL],
   shape_fn=loss_shape)
