"""TensorFlow's Unicode ops (unicode_ops.cc), CPU only as in TensorFlow: tf.strings'
unicode_decode, unicode_decode_with_offsets and unicode_split (UnicodeDecode,
UnicodeDecodeWithOffsets), unicode_encode (UnicodeEncode) and unicode_transcode
(UnicodeTranscode). Strings are numpy object arrays of bytes.

TensorFlow reads its input with one of ICU's converters, by any name ICU knows; tfg reads
UTF-8, UTF-16-BE and UTF-32-BE, by any spelling ICU takes for them ("utf8", "UTF_16BE": ICU
compares names ignoring case, punctuation and a leading zero in a number), and refuses other
encodings with TensorFlow's words for a name ICU does not know plus why. It reads malformed
input as ICU does (its "maximal subpart" rule, Unicode's recommended practice): a lead byte
and the continuation bytes that can still follow it are one error, any other bad byte is one
error; a UTF-16 high surrogate is an error of its own unless a low one follows, and with
fewer than two bytes after it, it and they are one error; a partial UTF-16 or UTF-32 unit
at the end is one error. Each error is one code point: it fails the op (errors='strict'),
becomes replacement_char ('replace') or is dropped ('ignore'); replace_control_characters
treats U+0000..U+001F the same way (UnicodeTranscode fails on them under 'strict' too,
the decoders replace them as TensorFlow's kernels do).

Every op's output is bounded by its input: a decode gives at most one code point (and one
offset) per input byte, a transcode at most four bytes per input byte, an encode at most four
bytes per code point; the text a transcode or encode makes is counted first and refused over
string_ops.MAX_TEXT_BYTES like the other string ops' outputs.
"""
import codecs

import numpy as np

from tfg.kernels._util import fail, np_dtype
from tfg.kernels.registry import kernel
from tfg.kernels.string_ops import check_text_size

UTF8, UTF16BE, UTF32BE = "UTF-8", "UTF-16-BE", "UTF-32-BE"
# ICU's names of the encodings tfg reads, as ucnv_compareNames compares them (_icu_key)
_ICU_NAMES = {"utf8": UTF8, "utf16be": UTF16BE, "utf32be": UTF32BE}
_MAX_CODE_POINT = 0x10FFFF
_REPLACEMENT = 0xFFFD


# --- attrs ------------------------------------------------------------------------------------
def _icu_key(name):
    """name as ICU compares converter names: lower case, letters and digits only, and no zero
    that starts a number ("UTF-08" is "utf8")."""
    out, after_digit = [], False
    for c in name.lower():
        if c.isascii() and c.isdigit():
            if c == "0" and not after_digit:
                continue
            after_digit = True
            out.append(c)
        elif c.isascii() and c.isalpha():
            after_digit = False
            out.append(c)
        else:
            after_digit = False
    return "".join(out)


def _text_attr(ctx, name):
    v = ctx.attrs[name]
    return v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v)


def input_encoding(ctx):
    """The node's input_encoding as UTF8, UTF16BE or UTF32BE, else refused."""
    name = _text_attr(ctx, "input_encoding")
    encoding = _ICU_NAMES.get(_icu_key(name))
    if encoding is None:
        fail(f"Could not create converter for input encoding: {name} (tfg reads only "
             f"UTF-8, UTF-16-BE and UTF-32-BE; TensorFlow's ICU knows more encodings)")
    return encoding


class ErrorOptions:
    """TensorFlow's GetErrorOptions: the errors policy, replacement_char and
    replace_control_characters, refused as TensorFlow refuses them."""

    def __init__(self, ctx):
        self.policy = _text_attr(ctx, "errors")
        if self.policy not in ("strict", "replace", "ignore"):
            fail("errors policy must be one of 'strict', 'replace', or 'ignore'")
        self.subst = int(ctx.attrs["replacement_char"])
        if not 0 <= self.subst <= _MAX_CODE_POINT:
            fail("replacement_char out of unicode codepoint range")
        self.control = bool(ctx.attrs.get("replace_control_characters", False))

    def handled(self, chars, bad):
        """Which decoded chars the policy acts on: the malformed ones and, with
        replace_control_characters, U+0000..U+001F."""
        return bad | (chars <= 0x1F) if self.control else bad

    def apply(self, chars, handled):
        """chars with the handled ones replaced ('replace') or dropped ('ignore')."""
        if self.policy == "ignore":
            return chars[~handled]
        return np.where(handled, self.subst, chars)


# --- decoding ---------------------------------------------------------------------------------
# Python's UTF-8, UTF-16 and UTF-32 decoders split malformed input into errors exactly as ICU
# does (checked against TensorFlow on random malformed bytes: tests/fixtures/unicode's fuzz
# cases). This error handler marks each error in the text as a lone surrogate U+DC01..U+DC04
# that carries the error's length in bytes: stateless, so kernels may run on many threads, and
# unambiguous, since none of these decoders lets a surrogate through.
_MARK = "tfg.unicode_ops.mark"


def _mark_error(e):
    """The mark of a malformed sequence: U+DC00 + its length; go on after it."""
    if not isinstance(e, UnicodeDecodeError):
        raise e
    return chr(0xDC00 + e.end - e.start), e.end


codecs.register_error(_MARK, _mark_error)
_CODECS = {UTF8: "utf-8", UTF16BE: "utf-16-be", UTF32BE: "utf-32-be"}


def _widths(chars, encoding):
    """The bytes each well-formed code point takes in `encoding`."""
    if encoding == UTF8:
        return 1 + (chars >= 0x80) + (chars >= 0x800) + (chars >= 0x10000)
    if encoding == UTF16BE:
        return 2 + 2 * (chars >= 0x10000)
    return np.full(chars.shape, 4, np.int64)


def decode_string(b, encoding):
    """One string's (code points, bytes each took, malformed?), int64, int64 and bool arrays;
    a malformed sequence is U+FFFD."""
    text = b.decode(_CODECS[encoding], _MARK)
    chars = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), "<u4").astype(np.int64)
    bad = (chars > 0xDC00) & (chars <= 0xDC04)
    widths = np.where(bad, chars - 0xDC00, _widths(chars, encoding)).astype(np.int64)
    return np.where(bad, _REPLACEMENT, chars), widths, bad


def _strings(x):
    """x as an object array of bytes (a scalar stays 0-d)."""
    return np.asarray(x, dtype=object)


def _decode_all(ctx, x, strict_on_control):
    """Every string of x decoded under the node's attrs: [(code points, byte offsets)]."""
    encoding, options = input_encoding(ctx), ErrorOptions(ctx)
    rows = []
    for b in _strings(x).reshape(-1):
        chars, widths, bad = decode_string(b, encoding)
        handled = options.handled(chars, bad)
        if options.policy == "strict" and (handled if strict_on_control else bad).any():
            fail("Invalid formatting on input string")
        starts = np.cumsum(widths) - widths
        keep = ~handled if options.policy == "ignore" else np.ones(chars.shape, bool)
        rows.append((options.apply(chars, handled), starts[keep]))
    return rows


def _decode_outputs(ctx, x, with_offsets):
    """row_splits, char_values (and char_to_byte_starts) of every string of x, flattened."""
    rows = _decode_all(ctx, x, strict_on_control=False)
    splits_type = np_dtype(ctx.attrs["Tsplits"])
    counts = [len(chars) for chars, _ in rows]
    splits = np.concatenate([[0], np.cumsum(counts, dtype=np.int64)]).astype(splits_type)
    chars = np.concatenate([c for c, _ in rows] + [np.zeros(0, np.int64)]).astype(np.int32)
    if not with_offsets:
        return splits, chars
    return splits, chars, np.concatenate([o for _, o in rows] + [np.zeros(0, np.int64)])


@kernel("UnicodeDecode")
def unicode_decode(ctx, x):
    return _decode_outputs(ctx, x, with_offsets=False)


@kernel("UnicodeDecodeWithOffsets")
def unicode_decode_with_offsets(ctx, x):
    return _decode_outputs(ctx, x, with_offsets=True)


# --- encoding ---------------------------------------------------------------------------------
def _output_encoding(ctx):
    name = _text_attr(ctx, "output_encoding")
    if name not in (UTF8, UTF16BE, UTF32BE):  # (the OpDef allows only these)
        fail(f"Invalid encoding \"{name}\": Should be one of: UTF-8, UTF-16-BE, UTF-32-BE")
    return name


def encoded_size(chars, encoding):
    """The bytes `chars` (valid code points, or a surrogate replacement_char) take encoded."""
    # (a surrogate takes 3 bytes in UTF-8, as the U+FFFD it becomes does)
    return int(_widths(chars, encoding).sum())


def encode_chars(chars, encoding):
    """Code points as `encoding`'s bytes, the way ICU's UnicodeString writes them: a lone
    surrogate (only replacement_char can be one) is U+FFFD in UTF-8 and itself in UTF-16 and
    UTF-32."""
    if encoding == UTF32BE:
        return chars.astype(">u4").tobytes()
    if encoding == UTF8:
        chars = np.where((chars >= 0xD800) & (chars <= 0xDFFF), _REPLACEMENT, chars)
    text = chars.astype("<u4").tobytes().decode("utf-32-le", "surrogatepass")
    return text.encode("utf-8" if encoding == UTF8 else "utf-16-be", "surrogatepass")


def _encode_rows(what, rows, encoding):
    """The strings of `rows` (code point arrays), their size checked first."""
    check_text_size(what, sum(encoded_size(r, encoding) for r in rows), len(rows))
    out = np.empty(len(rows), dtype=object)
    out[:] = [encode_chars(r, encoding) for r in rows]
    return out


@kernel("UnicodeTranscode")
def unicode_transcode(ctx, x):
    encoding = _output_encoding(ctx)
    x = _strings(x)
    rows = [chars for chars, _ in _decode_all(ctx, x, strict_on_control=True)]
    return _encode_rows("UnicodeTranscode", rows, encoding).reshape(x.shape)


def _check_encode_inputs(values, splits):
    """TensorFlow's checks of input_values and input_splits."""
    if values.ndim != 1 or splits.ndim != 1:
        fail("Both the input_tensor and input_splits should be of rank 1.")
    if splits.size == 0:  # (TensorFlow's words; the count it gives is the splits')
        fail("Input_splits should contain elements, but given input_values has 0 elements")
    if splits[0] != 0:
        fail("First value in input_splits must be zero.")
    if (np.diff(splits) < 0).any():
        fail("Values in input_splits must be equal or in ascending order.")
    if splits[-1] != values.size:
        fail("Last value in input_splits must be equal to length of input_tensor.")


@kernel("UnicodeEncode")
def unicode_encode(ctx, values, splits):
    encoding = _output_encoding(ctx)
    options = ErrorOptions(ctx)
    values, splits = np.asarray(values).astype(np.int64), np.asarray(splits).astype(np.int64)
    _check_encode_inputs(values, splits)
    bad = (values < 0) | (values > _MAX_CODE_POINT) | ((values >= 0xD800) & (values <= 0xDFFF))
    if options.policy == "strict" and bad.any():
        fail("Code point is out of range for Unicode, or is a surrogate.")
    rows = [options.apply(values[a:b], bad[a:b]) for a, b in zip(splits[:-1], splits[1:])]
    return _encode_rows("UnicodeEncode", rows, encoding)
