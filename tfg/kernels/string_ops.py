"""The string ops (TensorFlow's string_ops kernels), CPU only as in TensorFlow. Strings are
numpy object arrays of Python bytes.

    StringLower/StringUpper   encoding '' maps ASCII letters only; 'utf-8' Unicode's full
                              case mapping (invalid UTF-8 becomes U+FFFD, as ICU's decoder).
    StaticRegexReplace/RegexReplace, StaticRegexFullMatch/RegexFullMatch
                              RE2 patterns run by Python's `re` (tfg/kernels/re2_syntax.py
                              translates them and refuses what it cannot run as RE2 does);
                              RE2's global replace, rewrites \\0..\\9 and \\\\.
    StringSplitV2, StringSplit
                              a SparseTensor of each vector entry's pieces, row-major.
    StringJoin, ReduceJoin, Substr, StringLength, StringStrip, AsString, StringToNumber,
    StringNGrams, EncodeBase64, DecodeBase64.

The memory guard sizes outputs from shape functions before a kernel runs; a string's bytes
and the number of pieces, n-grams or characters depend on the values, so every kernel whose
output can outgrow its inputs (joins, n-grams, splits, AsString's width and precision) works
out its output's size first and refuses more than MAX_TEXT_BYTES. A regex's work is bounded
the same way (MAX_REGEX_STEPS).
"""
import base64
import binascii
import re

import numpy as np

from tfg.kernels._util import fail, tf_dims
from tfg.kernels.re2_syntax import Re2Error, Regex
from tfg.kernels.registry import kernel
from tfg.schemas.dtypes import DType

# The most bytes one op's string output may take (its text plus a Python bytes object, about
# 33 bytes, and an 8-byte pointer per string). A batch of text is megabytes; a hostile
# StringNGrams width or AsString width asks for terabytes, and is refused before it starts.
MAX_TEXT_BYTES = 1 << 30
_PER_STRING = 41
# The most steps (about 10 ns each) one regex op may let Python's backtracking engine take,
# as Regex.work estimates them: RE2 is linear, and a graph must never hang.
MAX_REGEX_STEPS = 10 ** 9

_WHITESPACE = b" \t\n\v\f\r"
_TOKEN = re.compile(rb"[^ \t\n\v\f\r]+")


def _strings(x):
    """x as an object array of bytes (a scalar stays 0-d)."""
    return np.asarray(x, dtype=object)


def _map(fn, x, otype=object):
    """fn over every string of x, in x's shape."""
    x = _strings(x)
    out = np.empty(x.shape, dtype=otype)
    flat = out.reshape(-1)
    for i, v in enumerate(x.reshape(-1)):
        flat[i] = fn(v)
    return out


def _text_array(values, shape):
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out.reshape(shape)


def check_text_size(what, nbytes, count=0):
    """Refuse an output of `count` strings holding `nbytes` bytes over MAX_TEXT_BYTES."""
    total = int(nbytes) + int(count) * _PER_STRING
    if total > MAX_TEXT_BYTES:
        fail(f"{what} would make about {total:.3g} bytes of strings; tfg allows at most "
             f"{MAX_TEXT_BYTES} (MAX_TEXT_BYTES) in one op's output")


def _attr_bytes(ctx, name):
    v = ctx.attrs.get(name, b"")
    return v if isinstance(v, bytes) else str(v).encode()


def _scalar_string(x, message):
    x = _strings(x)
    if x.ndim != 0:
        fail(f"{message}{tf_dims(x.shape)}")
    return x[()]


# --- case -------------------------------------------------------------------------------------
def _case_kernel(ctx, x, ascii_fn, text_fn):
    encoding = _attr_bytes(ctx, "encoding")
    if encoding not in (b"", b"utf-8"):
        fail(f"only utf-8 or '' (no encoding) is supported, received {encoding.decode()}")
    if not encoding:
        return _map(ascii_fn, x)
    return _map(lambda v: text_fn(v.decode("utf-8", "replace")).encode("utf-8"), x)


@kernel("StringLower")
def string_lower(ctx, x):
    return _case_kernel(ctx, x, bytes.lower, str.lower)


@kernel("StringUpper")
def string_upper(ctx, x):
    return _case_kernel(ctx, x, bytes.upper, str.upper)


# --- regular expressions ----------------------------------------------------------------------
def compile_pattern(pattern):
    """A Regex, or TensorFlow's error for a pattern RE2 refuses (tfg's refusals raise
    re2_syntax.Unsupported, an input error)."""
    try:
        return Regex(pattern)
    except Re2Error as e:
        fail(f"Invalid pattern: {pattern.decode('utf-8', 'replace')}, error: {e}")


def _compiled(ctx, pattern):
    """The node's pattern, compiled once per distinct pattern value."""
    cache = ctx.cache.setdefault("patterns", {})
    if pattern not in cache:
        if len(cache) > 16:
            cache.clear()
        cache[pattern] = compile_pattern(pattern)
    return cache[pattern]


def _decoded(x):
    """Every string of x as text, bytes that are not UTF-8 as lone surrogates."""
    return [v.decode("utf-8", "surrogateescape") for v in _strings(x).reshape(-1)]


def _check_work(rx, pattern, texts, search):
    steps = sum(rx.work(t, search) for t in texts)
    if steps > MAX_REGEX_STEPS:
        fail(f"pattern {pattern.decode('utf-8', 'replace')!r} could take about {steps:.3g} "
             f"steps of Python's backtracking regex engine on these strings (RE2 takes "
             f"linear time); tfg refuses over {MAX_REGEX_STEPS:.0e} (MAX_REGEX_STEPS)")


class Rewrite:
    """An RE2 rewrite string: literal text and \\0..\\9 group references, `\\\\` a
    backslash. RE2 stops at any other escape (`ok` False, `pieces` what came before it), and
    refuses outright a reference past the pattern's groups (`max_group`)."""

    def __init__(self, rewrite):
        text = rewrite.decode("utf-8", "surrogateescape")
        self.pieces, self.ok, self.max_group = [], True, 0
        literal, i = [], 0
        while i < len(text):
            c = text[i]
            if c != "\\":
                literal.append(c)
                i += 1
                continue
            nxt = text[i + 1] if i + 1 < len(text) else None
            i += 2
            if nxt is not None and nxt.isdigit() and nxt.isascii():
                self.max_group = max(self.max_group, int(nxt))
                if self.ok:
                    self.pieces += ["".join(literal), int(nxt)]
                    literal = []
            elif nxt == "\\":
                literal.append("\\")
            elif self.ok:
                self.ok = False
                self.pieces.append("".join(literal))
        if self.ok:
            self.pieces.append("".join(literal))

    def most_bytes(self, n, glob):
        """A bound on the bytes of a replaced string of n characters: at most n + 1 matches
        (one when not global), each adding the literal text; a group lies inside its match
        and matches do not overlap, so each reference adds at most n characters in all.
        (4 bytes a character at most.)"""
        literal = sum(len(p) for p in self.pieces if isinstance(p, str))
        refs = sum(1 for p in self.pieces if not isinstance(p, str))
        return 4 * (n + (n + 1 if glob else 1) * literal + refs * n)

    def expand(self, m):
        return "".join(p if isinstance(p, str) else (m.group(p) or "") for p in self.pieces)


def _global_replace(regex, text, rewrite):
    """RE2::GlobalReplace: every leftmost-first match, none empty right where the last
    ended (a character is copied past it instead)."""
    out, pos, last_end, count, n = [], 0, -1, 0, len(text)
    while pos <= n:
        m = regex.search(text, pos)
        if m is None:
            break
        start, end = m.span()
        out.append(text[pos:start])
        if start == end and start == last_end:
            out.append(text[pos:pos + 1])
            pos += 1
            continue
        out.append(rewrite.expand(m))
        pos = last_end = end
        count += 1
    if count == 0:
        return text
    out.append(text[pos:])
    return "".join(out)


def _replace_first(regex, text, rewrite):
    m = regex.search(text)
    if m is None:
        return text
    return text[:m.start()] + rewrite.expand(m) + text[m.end():]


def regex_replace(ctx, x, pattern, rewrite_text):
    rx = _compiled(ctx, pattern)
    rewrite = Rewrite(rewrite_text)
    x = _strings(x)
    texts = _decoded(x)
    if rewrite.max_group > rx.groups or (not rewrite.ok and not ctx.attrs["replace_global"]):
        return x.copy()  # RE2 leaves the text as it was
    _check_work(rx, pattern, texts, search=True)
    glob = bool(ctx.attrs["replace_global"])
    check_text_size("RegexReplace", sum(rewrite.most_bytes(len(t), glob) for t in texts),
                    len(texts))
    replace = _global_replace if glob else _replace_first
    out = [replace(rx.regex, t, rewrite).encode("utf-8", "surrogateescape") for t in texts]
    return _text_array(out, x.shape)


def regex_full_match(ctx, x, pattern):
    rx = _compiled(ctx, pattern)
    x = _strings(x)
    texts = _decoded(x)
    _check_work(rx, pattern, texts, search=False)
    return np.array([rx.regex.fullmatch(t) is not None for t in texts],
                    dtype=bool).reshape(x.shape)


@kernel("StaticRegexReplace")
def static_regex_replace(ctx, x):
    return regex_replace(ctx, x, _attr_bytes(ctx, "pattern"), _attr_bytes(ctx, "rewrite"))


@kernel("RegexReplace")
def regex_replace_kernel(ctx, x, pattern, rewrite):
    pattern = _scalar_string(pattern, "Pattern must be scalar, but received ")
    rewrite = _scalar_string(rewrite, "Rewrite must be scalar, but received ")
    return regex_replace(ctx, x, pattern, rewrite)


@kernel("StaticRegexFullMatch")
def static_regex_full_match(ctx, x):
    return regex_full_match(ctx, x, _attr_bytes(ctx, "pattern"))


@kernel("RegexFullMatch")
def regex_full_match_kernel(ctx, x, pattern):
    return regex_full_match(ctx, x, _scalar_string(pattern, "Pattern must be scalar, but "
                                                            "received "))


# --- splitting --------------------------------------------------------------------------------
def _split_whitespace(s, maxsplit):
    """TensorFlow's SplitV2 with no separator: runs of ASCII whitespace separate; after
    maxsplit tokens the rest (its leading whitespace removed) is one more piece, even empty."""
    pieces = []
    for m in _TOKEN.finditer(s):
        pieces.append(m.group())
        if maxsplit > 0 and len(pieces) == maxsplit:
            pieces.append(s[m.end():].lstrip(_WHITESPACE))
            break
    return pieces


def _split_v2(s, sep, maxsplit):
    if maxsplit == 0:
        return [s]
    if not sep:
        return _split_whitespace(s, maxsplit)
    return s.split(sep, maxsplit if maxsplit > 0 else -1)


def _sparse_pieces(rows):
    """A SparseTensor (indices [n, 2], values [n], dense_shape [2]) of lists of pieces."""
    counts = np.array([len(r) for r in rows], dtype=np.int64)
    n = int(counts.sum())
    values = _text_array([p for r in rows for p in r], (n,))
    row_ids = np.repeat(np.arange(len(rows), dtype=np.int64), counts)
    starts = np.repeat(np.cumsum(counts) - counts, counts)
    cols = np.arange(n, dtype=np.int64) - starts
    shape = np.array([len(rows), int(counts.max()) if len(rows) else 0], dtype=np.int64)
    return np.stack([row_ids, cols], axis=1).reshape(n, 2), values, shape


def _split_input(x):
    x = _strings(x)
    if x.ndim != 1:
        fail(f"input must be a vector, got shape: {tf_dims(x.shape)}")
    return x


def _check_pieces(what, x, most_pieces):
    check_text_size(what, sum(len(v) for v in x), most_pieces)


@kernel("StringSplitV2")
def string_split_v2(ctx, x, sep):
    x = _split_input(x)
    sep = _scalar_string(sep, "sep must be a scalar, got shape: ")
    maxsplit = int(ctx.attrs["maxsplit"])
    # a piece is at least a byte and a separator, but for one per string
    most = sum(len(v) // (len(sep) or 2) + 2 for v in x)
    _check_pieces("StringSplitV2", x, most)
    return _sparse_pieces([_split_v2(v, sep, maxsplit) for v in x])


@kernel("StringSplit")
def string_split(ctx, x, delimiter):
    x = _split_input(x)
    delimiter = _scalar_string(delimiter, "delimiter must be a scalar, got shape: ")
    skip = bool(ctx.attrs.get("skip_empty", True))
    _check_pieces("StringSplit", x, sum(len(v) + 1 for v in x))
    if not delimiter:
        return _sparse_pieces([[bytes([b]) for b in v] for v in x])
    splitter = re.compile(b"[" + re.escape(delimiter) + b"]")
    rows = [splitter.split(v) if v else [] for v in x]  # an empty string has no pieces
    if skip:
        rows = [[p for p in r if p] for r in rows]
    return _sparse_pieces(rows)


# --- joining ----------------------------------------------------------------------------------
@kernel("StringJoin")
def string_join(ctx, *inputs):
    sep = _attr_bytes(ctx, "separator")
    arrays = [_strings(a) for a in inputs]
    shape = ()
    for a in arrays:
        if a.ndim:
            if shape and a.shape != shape:
                fail(f"Input shapes do not match: {tf_dims(shape)} vs. {tf_dims(a.shape)}")
            shape = a.shape
    n = int(np.prod(shape, dtype=np.int64))
    nbytes = sum(sum(len(v) for v in a.reshape(-1)) * (1 if a.ndim else n) for a in arrays)
    check_text_size("StringJoin", nbytes + n * max(len(arrays) - 1, 0) * len(sep), n)
    columns = [a.reshape(-1) if a.ndim else [a[()]] * n for a in arrays]
    return _text_array([sep.join(parts) for parts in zip(*columns)] if columns else
                       [b""] * n, shape)


def _reduction_axes(axes, ndim):
    """ReduceJoin's axes, checked as TensorFlow does, in their given order."""
    out = []
    for a in np.asarray(axes).reshape(-1).tolist():
        if not -ndim <= a < ndim:
            fail(f"Invalid reduction dimension {a} for input with {ndim} dimension(s)")
        norm = a + ndim if a < 0 else a
        if norm in out:
            fail(f"Duplicate reduction dimension {a}")
        out.append(norm)
    return out


@kernel("ReduceJoin")
def reduce_join(ctx, x, axes):
    """Joins over the axes: the first axis given varies fastest in each joined string."""
    x = _strings(x)
    sep = _attr_bytes(ctx, "separator")
    reduced = _reduction_axes(axes, x.ndim)
    if not reduced:
        return x.copy()
    kept = [d for d in range(x.ndim) if d not in reduced]
    out_shape = tuple(1 if d in reduced else x.shape[d] for d in range(x.ndim)) \
        if ctx.attrs["keep_dims"] else tuple(x.shape[d] for d in kept)
    group = int(np.prod([x.shape[d] for d in reduced], dtype=np.int64))
    n = int(np.prod([x.shape[d] for d in kept], dtype=np.int64))
    nbytes = sum(len(v) for v in x.reshape(-1))
    check_text_size("ReduceJoin", nbytes + n * max(group - 1, 0) * len(sep), n)
    rows = np.transpose(x, kept + reduced[::-1]).reshape(n, group)
    return _text_array([sep.join(r) for r in rows], out_shape)


# --- substrings and lengths -------------------------------------------------------------------
def _char_starts(s):
    """Byte offsets of s's UTF-8 characters (a byte that is not a continuation byte starts
    one, as TensorFlow counts)."""
    return [i for i, b in enumerate(s) if b & 0xC0 != 0x80]


def _substr(s, pos, length, utf8, where):
    """One substring, or TensorFlow's error for a pos past either end."""
    if utf8:
        starts = _char_starts(s)
        size = len(starts)
    else:
        size = len(s)
    if abs(pos) > size:
        shown = "" if utf8 else f" b'{s.decode('utf-8', 'replace')}'"
        fail(f"pos {pos} out of range for string{shown} at index {where}")
    begin = pos + size if pos < 0 else pos
    end = size if length < 0 else min(size, begin + length)
    if not utf8:
        return s[begin:end]
    offsets = starts + [len(s)]
    return s[offsets[begin]:offsets[end]]


@kernel("Substr")
def substr(ctx, x, pos, length):
    x, pos, length = _strings(x), np.asarray(pos), np.asarray(length)
    utf8 = _attr_bytes(ctx, "unit") == b"UTF8_CHAR"
    if pos.shape != length.shape:
        fail(f"pos and len should have the same shape, got: {tf_dims(pos.shape)} vs. "
             f"{tf_dims(length.shape)}")
    if pos.ndim == 0 or pos.shape == x.shape:
        p = np.broadcast_to(pos, x.shape).reshape(-1)
        n = np.broadcast_to(length, x.shape).reshape(-1)
        out = [_substr(s, int(a), int(b), utf8, i)
               for i, (s, a, b) in enumerate(zip(x.reshape(-1), p, n))]
        return _text_array(out, x.shape)
    try:
        shape = np.broadcast_shapes(x.shape, pos.shape)
    except ValueError:
        fail(f"Incompatible shapes: {tf_dims(x.shape)} vs. {tf_dims(pos.shape)}")
    if len(shape) > 2:
        fail(f"Substr broadcast not implemented for {len(shape)} dimensions")
    xs, ps, ns = (np.broadcast_to(a, shape) for a in (x, pos, length))
    out = [_substr(xs[idx], int(ps[idx]), int(ns[idx]), utf8,
                   idx[0] if len(idx) == 1 else f"({idx[0]}, {idx[1]})")
           for idx in np.ndindex(*shape)]
    return _text_array(out, shape)


@kernel("StringLength")
def string_length(ctx, x):
    if _attr_bytes(ctx, "unit") == b"UTF8_CHAR":
        return _map(lambda v: sum(1 for b in v if b & 0xC0 != 0x80), x, np.int32)
    return _map(len, x, np.int32)


@kernel("StringStrip")
def string_strip(ctx, x):
    return _map(lambda v: v.strip(_WHITESPACE), x)


# --- numbers and text -------------------------------------------------------------------------
_FILLS = b" +-#0"


def _as_string_format(ctx, dtype):
    """The printf format TensorFlow's AsString builds, after its attr checks."""
    a = ctx.attrs
    precision, width = int(a["precision"]), int(a["width"])
    scientific, shortest = bool(a["scientific"]), bool(a["shortest"])
    fill = _attr_bytes(ctx, "fill")
    name = dtype.tf_name
    floating = dtype.np.kind in "fc" or dtype in (DType.HALF, DType.BFLOAT16)
    if not floating and dtype != DType.STRING:
        if precision > -1:
            fail(f"precision not supported for datatype {name}")
        if scientific or shortest:
            fail(f"scientific and shortest format not supported for datatype {name}")
    if scientific and shortest:
        fail("Cannot select both scientific and shortest notation")
    if len(fill) > 1:
        fail("Fill string must be one or fewer characters")
    if fill and fill not in [bytes([c]) for c in _FILLS]:
        fail(f'Fill argument not supported: "{fill.decode("utf-8", "replace")}"')
    spec = "%" + fill.decode() + (str(width) if width > -1 else "") + \
        (f".{precision}" if precision > -1 else "")
    if floating:
        return spec + ("g" if shortest else "e" if scientific else "f"), precision, width
    return spec + ("s" if dtype == DType.STRING else "d"), precision, width


def _format_float(fmt, v):
    """printf's text of v: C pads inf and nan with spaces even under the '0' flag."""
    v = float(v)
    if fmt[1] == "0" and not np.isfinite(v):
        fmt = "%" + fmt[2:]
    return fmt % v


@kernel("AsString")
def as_string(ctx, x):
    dtype = ctx.attrs["T"]
    if dtype == DType.VARIANT:
        fail("AsString of a variant tensor is not supported by tfg")
    fmt, precision, width = _as_string_format(ctx, dtype)
    x = np.asarray(x)
    # a number is at most ~330 characters (a double's %f) before precision and width
    per_item = max(width, 0) + max(precision, 0) + 330
    check_text_size("AsString", x.size * per_item * (2 if x.dtype.kind == "c" else 1),
                    x.size)
    if dtype == DType.BOOL:
        return _map(lambda v: b"true" if v else b"false", x)
    if dtype == DType.STRING:
        return _map(lambda v: (fmt.encode() % v), x)
    if x.dtype.kind == "c":
        return _map(lambda v: ("(" + _format_float(fmt, v.real) + ","
                               + _format_float(fmt, v.imag) + ")").encode(), x)
    if x.dtype.kind == "f" or dtype == DType.BFLOAT16:
        return _map(lambda v: _format_float(fmt, float(v)).encode(), x)
    return _map(lambda v: (fmt % int(v)).encode(), x)


_FLOAT_TEXT = re.compile(
    rb"[ \t\n\v\f\r]*([+-]?(?:(?:[0-9]+\.?[0-9]*|\.[0-9]+)(?:[eE][+-]?[0-9]+)?|"
    rb"0[xX][0-9a-fA-F]+|inf(?:inity)?|nan(?:\([0-9A-Za-z_]*\))?))[ \t\n\v\f\r]*", re.I)
_INT_TEXT = re.compile(rb"[ \t\n\v\f\r]*([+-]?[0-9]+)[ \t\n\v\f\r]*")


def _parse_float(v):
    m = _FLOAT_TEXT.fullmatch(v)
    if m is None:
        return None
    text = m.group(1).decode().lower()
    sign = -1.0 if text.startswith("-") else 1.0
    body = text.lstrip("+-")
    if body.startswith("0x"):
        return sign * float(int(body, 16))
    if body.startswith("nan"):
        return float("nan")
    return float(text)


@kernel("StringToNumber")
def string_to_number(ctx, x):
    dtype = ctx.attrs["out_type"]
    target = dtype.np
    x = _strings(x)
    out = np.empty(x.shape, dtype=target)
    flat = out.reshape(-1)
    info = np.iinfo(target) if target.kind in "iu" else None
    for i, v in enumerate(x.reshape(-1)):
        if info is not None:
            m = _INT_TEXT.fullmatch(v)
            value = int(m.group(1)) if m else None
            ok = value is not None and info.min <= value <= info.max
        else:
            value = _parse_float(v)
            ok = value is not None
        if not ok:
            fail("StringToNumberOp could not correctly convert string: "
                 + v.decode("utf-8", "replace"))
        with np.errstate(over="ignore"):  # 1e40 as a float is inf, as TensorFlow's
            flat[i] = value
    return out


# --- n-grams ----------------------------------------------------------------------------------
def _check_splits(splits, size):
    """TensorFlow's checks of data_splits against data's size."""
    if splits.size == 0:
        return
    if splits[0] != 0:
        fail(f"First split value must be 0, got {splits[0]}")
    for prev, cur in zip(splits[:-1], splits[1:]):
        if not prev <= cur <= size:
            fail(f"Invalid split value {cur}, must be in [{prev}, {size}]")
    if splits[-1] != size:
        fail(f"Last split value must be data size. Expected {size}, got {splits[-1]}")


class NGrams:
    """StringNGrams' attrs and TensorFlow's counting and building of one row's n-grams."""

    def __init__(self, ctx):
        a = ctx.attrs
        self.sep, self.left, self.right = (_attr_bytes(ctx, k) for k in
                                           ("separator", "left_pad", "right_pad"))
        self.widths = [int(w) for w in a["ngram_widths"]]
        self.pad_width = int(a["pad_width"])
        self.preserve = bool(a["preserve_short_sequences"])
        if any(w <= 0 for w in self.widths):
            fail("ngram_widths must contain positive values")

    def pad(self, width):
        return min(self.pad_width if self.pad_width >= 0 else width - 1, width - 1)

    def count(self, length, width):
        return max(0, length + 2 * self.pad(width) - width + 1)

    def row_counts(self, lengths):
        """[(width, ngrams per row)], and the short rows preserve_short_sequences keeps; as
        floats, so that a hostile width cannot overflow the estimate."""
        lengths = lengths.astype(np.float64)
        per = [(w, np.maximum(0.0, lengths + 2.0 * self.pad(w) - w + 1)) for w in self.widths]
        total = sum((c for _, c in per), np.zeros_like(lengths))
        short = (total == 0) & (lengths > 0) if self.preserve else np.zeros_like(lengths, bool)
        return per, short

    def check_size(self, lengths, row_bytes):
        """Refuse n-grams over MAX_TEXT_BYTES before building any: each holds at most
        `width` items, each item in at most `width` n-grams of a row."""
        per, short = self.row_counts(lengths)
        longest_pad = max(len(self.left), len(self.right))
        count, nbytes = 0.0, 0.0
        for w, c in per:
            count += c.sum()
            nbytes += (c * ((w - 1) * len(self.sep) + w * longest_pad)).sum() \
                + w * row_bytes[c > 0].sum()
        width = lengths + 2.0 * max(self.pad_width, 0)
        nbytes += (short * (row_bytes + width * (len(self.sep) + longest_pad))).sum()
        check_text_size("StringNGrams", nbytes, count + short.sum())

    def ngram(self, row, index, num, width):
        """TensorFlow's CreateNgrams for the index'th of num n-grams of a row."""
        pad = self.pad(width)
        left = max(0, pad - index)
        right = max(0, pad - (num - (index + 1)))
        tokens = width - (left + right)
        start = 0 if left > 0 else index - pad
        parts = [self.left] * left + list(row[start:start + max(tokens, 0)])
        if tokens > 0:
            parts += [self.right] * right
            return self.sep.join(parts)
        pieces = [self.left + self.sep] * left + [self.right + self.sep] * max(right - 1, 0)
        return b"".join(pieces) + self.right

    def row(self, row):
        out = []
        for w in self.widths:
            num = self.count(len(row), w)
            out += [self.ngram(row, i, num, w) for i in range(num)]
        if self.preserve and not out and len(row):
            out.append(self.ngram(row, 0, 1, len(row) + 2 * self.pad_width))
        return out


@kernel("StringNGrams")
def string_ngrams(ctx, data, splits):
    data, splits = _strings(data), np.asarray(splits)
    grams = NGrams(ctx)
    if data.ndim != 1 or splits.ndim != 1:
        fail(f"data and data_splits must be vectors, got {tf_dims(data.shape)} and "
             f"{tf_dims(splits.shape)}")
    _check_splits(splits, data.shape[0])
    if splits.size == 0 or data.size == 0:  # no data: no n-grams, even of padding
        return _text_array([], (0,)), np.zeros_like(splits)
    lengths = np.diff(splits).astype(np.int64)
    ends = np.concatenate([[0.0], np.cumsum([float(len(v)) for v in data])])
    row_bytes = ends[splits[1:]] - ends[splits[:-1]]
    grams.check_size(lengths, row_bytes)
    rows = [grams.row(list(data[splits[i]:splits[i + 1]])) for i in range(len(lengths))]
    counts = np.array([len(r) for r in rows], dtype=splits.dtype)
    out_splits = np.concatenate([[0], np.cumsum(counts)]).astype(splits.dtype)
    values = [g for r in rows for g in r]
    return _text_array(values, (len(values),)), out_splits


# --- base64 -----------------------------------------------------------------------------------
_BASE64_CHARS = re.compile(rb"[A-Za-z0-9_-]*")


@kernel("EncodeBase64")
def encode_base64(ctx, x):
    pad = bool(ctx.attrs["pad"])
    return _map(lambda v: base64.urlsafe_b64encode(v) if pad else
                base64.urlsafe_b64encode(v).rstrip(b"="), x)


def _decode_base64(v):
    """Web-safe base64, padded or not, refused as TensorFlow refuses it."""
    body = v
    if body.endswith(b"="):
        if len(body) % 4:
            fail("Invalid character found in base64.")
        body = body[:-2] if body.endswith(b"==") else body[:-1]
    if not _BASE64_CHARS.fullmatch(body):
        fail("Invalid character found in base64.")
    if len(body) % 4 == 1:
        fail("Base64 string length cannot be 1 modulo 4.")
    try:
        return base64.urlsafe_b64decode(body + b"=" * (-len(body) % 4))
    except binascii.Error:
        fail("Invalid character found in base64.")


@kernel("DecodeBase64")
def decode_base64(ctx, x):
    return _map(_decode_base64, x)
