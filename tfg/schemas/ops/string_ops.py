"""Signatures of TensorFlow's string ops (string_ops.cc) that text models carry: a Keras
TextVectorization layer lowers case (StringLower), strips punctuation (StaticRegexReplace),
splits on whitespace (StringSplitV2) and builds n-grams (StringNGrams); its SavedModel
functions join (StringJoin) and test (StaticRegexFullMatch) strings. StringFormat, which
tf.print builds, is in logging_ops.py.

    >>> get_op("StringSplitV2").attrs["maxsplit"].default, get_op("Substr").attrs["unit"].default
    (-1, b'BYTE')

The splits' and n-grams' sizes depend on the strings' values: their shape functions leave
them unknown, and the kernels (tfg/kernels/string_ops.py) bound them before building them.
"""
from tfg.schemas.ops.reduction_ops import reduction
from tfg.schemas.ops.registry import op
from tfg.schemas.ops.shape_fns import ShapeError, broadcast, fmt, merge, merge_dim, \
    unchanged, with_rank


def _scalar_args(*names):
    """Output 0 is input 0's shape; inputs 1.. (a pattern, a rewrite) must be scalars."""
    def fn(ctx):
        for i, name in enumerate(names, start=1):
            with_rank(ctx.shape(i), 0, name)
        return [ctx.shape(0)]
    fn.__doc__ = f"Input 0's shape; {', '.join(names)} scalar."
    return fn


def split_shape(ctx):
    """A SparseTensor of the vector's pieces: indices [?, 2], values [?], dense_shape [2]."""
    with_rank(ctx.shape(0), 1, "input")
    with_rank(ctx.shape(1), 0, "separator")
    return [(None, 2), (None,), (2,)]


def join_shape(ctx):
    """Every non-scalar input has one shape, the output's; all scalars: a scalar."""
    out = ()
    for s in ctx.input_shapes:
        if s is None or len(s) > 0:
            try:
                out = s if out == () else merge(out, s)
            except ShapeError:
                raise ShapeError(f"Input shapes do not match: {fmt(out)} vs. {fmt(s)}") \
                    from None
    return [out]


def substr_shape(ctx):
    """pos and len share one shape; the output is the broadcast of input and pos."""
    pos, length = ctx.shape(1), ctx.shape(2)
    if pos is not None and length is not None:
        with_rank(pos, len(length), "pos")
        for a, b in zip(pos, length):
            merge_dim(a, b)
    return [broadcast(ctx.shape(0), pos)]


def ngrams_shape(ctx):
    """ngrams [?] (their number depends on the splits' values), ngrams_splits like
    data_splits."""
    with_rank(ctx.shape(0), 1, "data")
    return [(None,), with_rank(ctx.shape(1), 1, "data_splits")]


_UNIT = "unit: {'BYTE', 'UTF8_CHAR'} = 'BYTE'"

for _name in ("StringLower", "StringUpper"):
    op(_name, inputs=["input: string"], outputs=["output: string"],
       attrs=["encoding: string = ''"], shape_fn=unchanged)
op("StaticRegexReplace",
   inputs=["input: string"], outputs=["output: string"],
   attrs=["pattern: string", "rewrite: string", "replace_global: bool = true"],
   shape_fn=unchanged)
op("RegexReplace",
   inputs=["input: string", "pattern: string", "rewrite: string"], outputs=["output: string"],
   attrs=["replace_global: bool = true"],
   shape_fn=_scalar_args("pattern", "rewrite"))
op("StaticRegexFullMatch",
   inputs=["input: string"], outputs=["output: bool"], attrs=["pattern: string"],
   shape_fn=unchanged)
op("RegexFullMatch",
   inputs=["input: string", "pattern: string"], outputs=["output: bool"],
   shape_fn=_scalar_args("pattern"))
op("StringSplitV2",
   inputs=["input: string", "sep: string"],
   outputs=["indices: int64", "values: string", "shape: int64"],
   attrs=["maxsplit: int = -1"], shape_fn=split_shape)
op("StringSplit",
   inputs=["input: string", "delimiter: string"],
   outputs=["indices: int64", "values: string", "shape: int64"],
   attrs=["skip_empty: bool = true"], shape_fn=split_shape)
op("StringJoin",
   inputs=["inputs: N * string"], outputs=["output: string"],
   attrs=["N: int >= 0", "separator: string = ''"], shape_fn=join_shape)
op("ReduceJoin",
   inputs=["inputs: string", "reduction_indices: int32"], outputs=["output: string"],
   attrs=["keep_dims: bool = false", "separator: string = ''"], shape_fn=reduction)
op("Substr",
   inputs=["input: string", "pos: T", "len: T"], outputs=["output: string"],
   attrs=["T: {int32, int64}", _UNIT], shape_fn=substr_shape)
op("StringLength",
   inputs=["input: string"], outputs=["output: int32"], attrs=[_UNIT], shape_fn=unchanged)
op("StringStrip", inputs=["input: string"], outputs=["output: string"], shape_fn=unchanged)
op("AsString",
   inputs=["input: T"], outputs=["output: string"],
   attrs=["T: {float, double, int32, uint8, int16, int8, int64, bfloat16, uint16, half, "
          "uint32, uint64, complex64, complex128, bool, variant, string}",
          "precision: int = -1", "scientific: bool = false", "shortest: bool = false",
          "width: int = -1", "fill: string = ''"],
   shape_fn=unchanged)
op("StringToNumber",
   inputs=["string_tensor: string"], outputs=["output: out_type"],
   attrs=["out_type: {float, double, int32, int64, uint32, uint64} = DT_FLOAT"],
   shape_fn=unchanged)
op("StringNGrams",
   inputs=["data: string", "data_splits: Tsplits"],
   outputs=["ngrams: string", "ngrams_splits: Tsplits"],
   attrs=["separator: string", "ngram_widths: list(int) >= 0", "left_pad: string",
          "right_pad: string", "pad_width: int", "preserve_short_sequences: bool",
          "Tsplits: {int32, int64} = DT_INT64"],
   shape_fn=ngrams_shape)
op("EncodeBase64", inputs=["input: string"], outputs=["output: string"],
   attrs=["pad: bool = false"], shape_fn=unchanged)
op("DecodeBase64", inputs=["input: string"], outputs=["output: string"], shape_fn=unchanged)
