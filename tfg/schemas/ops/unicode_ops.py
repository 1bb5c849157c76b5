"""Signatures of TensorFlow's Unicode ops (string_ops.cc): tf.strings.unicode_decode,
unicode_split and unicode_decode_with_offsets build UnicodeDecode(WithOffsets), a text
model's way of splitting strings into characters; unicode_encode and unicode_transcode build
UnicodeEncode and UnicodeTranscode.

    >>> from tfg.schemas.ops import get_op
    >>> get_op("UnicodeDecode").attrs["replacement_char"].default
    65533

The number of characters depends on the strings' values: char_values (and
char_to_byte_starts) are vectors of unknown length, which the kernels
(tfg/kernels/unicode_ops.py) bound by the input's bytes.
"""
from tfg.schemas.ops.registry import op
from tfg.schemas.ops.shape_fns import ShapeError, num_elements, unchanged, with_rank


def decode_shape(ctx):
    """row_splits [input's elements + 1]; char_values (and the offsets) [?]."""
    n = num_elements(ctx.shape(0))
    return [(None if n is None else n + 1,)] + [(None,)] * (ctx.num_outputs - 1)


def encode_shape(ctx):
    """input_values and input_splits vectors; one string per split but the first."""
    with_rank(ctx.shape(0), 1, "input_values")
    (splits,) = with_rank(ctx.shape(1), 1, "input_splits")
    if splits == 0:
        raise ShapeError("Negative dimension size caused by subtracting 1 from 0 (the "
                         "input_splits' length)")
    return [(None if splits is None else splits - 1,)]


_DECODE_ATTRS = ["input_encoding: string", "errors: {'strict', 'replace', 'ignore'} = 'replace'",
                 "replacement_char: int = 65533", "replace_control_characters: bool = false",
                 "Tsplits: {int32, int64} = DT_INT64"]
_OUTPUT_ENCODING = "output_encoding: {'UTF-8', 'UTF-16-BE', 'UTF-32-BE'}"

op("UnicodeDecode",
   inputs=["input: string"], outputs=["row_splits: Tsplits", "char_values: int32"],
   attrs=_DECODE_ATTRS, shape_fn=decode_shape)
op("UnicodeDecodeWithOffsets",
   inputs=["input: string"],
   outputs=["row_splits: Tsplits", "char_values: int32", "char_to_byte_starts: int64"],
   attrs=_DECODE_ATTRS, shape_fn=decode_shape)
op("UnicodeEncode",
   inputs=["input_values: int32", "input_splits: Tsplits"], outputs=["output: string"],
   attrs=["errors: {'ignore', 'replace', 'strict'} = 'replace'", _OUTPUT_ENCODING,
          "replacement_char: int = 65533", "Tsplits: {int32, int64} = DT_INT64"],
   shape_fn=encode_shape)
op("UnicodeTranscode",
   inputs=["input: string"], outputs=["output: string"],
   attrs=["input_encoding: string", _OUTPUT_ENCODING,
          "errors: {'strict', 'replace', 'ignore'} = 'replace'",
          "replacement_char: int = 65533", "replace_control_characters: bool = false"],
   shape_fn=unchanged)
