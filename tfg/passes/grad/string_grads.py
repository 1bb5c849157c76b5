"""The string ops carry no gradient: TensorFlow marks them NotDifferentiable (string_ops.py,
ragged_string_ops.py), and no float flows through them but AsString's input and
StringToNumber's output, which a gradient stops at as in TensorFlow."""
from tfg.passes.grad.registry import no_gradient

no_gradient("StringLower", "StringUpper", "StaticRegexReplace", "RegexReplace",
            "StaticRegexFullMatch", "RegexFullMatch", "StringSplitV2", "StringSplit",
            "StringJoin", "ReduceJoin", "Substr", "StringLength", "StringStrip", "AsString",
            "StringToNumber", "StringNGrams", "EncodeBase64", "DecodeBase64")
# (TensorFlow registers none for these: their inputs and outputs are strings and int32)
no_gradient("UnicodeDecode", "UnicodeDecodeWithOffsets", "UnicodeEncode", "UnicodeTranscode")
