"""Printing kernels: StringFormat (the string tf.print builds, TensorFlow's
Tensor::SummarizeValue with print_v2), PrintV2 (writes it) and v1 Print (passes input 0 through
and logs `message` and the data tensors).

Where the text goes: always stderr, flushed. output_stream "stderr" and "log(info)",
"log(warning)", "log(error)" are stderr in TensorFlow too; "stdout" is written to stderr as well,
because stdout is where `tfg run` writes its results (text, json or npz) and a print there would
corrupt them. "file://..." is refused: tfg never writes a file a graph names.

    StringFormat([[1, 2], [3, 4]], template="x: %s") -> b"x: [[1 2]\n [3 4]]"
    Print(x, [x], message="x=")                      -> x, stderr "x=[1 2 3...]"
"""
import math
import sys

import numpy as np

from tfg.kernels._util import fail
from tfg.kernels.registry import kernel

_STREAMS = (b"stdout", b"stderr", b"log(info)", b"log(warning)", b"log(error)")


def format_float(v, digits, more_digits, cast):
    """TensorFlow's FloatToBuffer/DoubleToBuffer: the shorter %g that reads back the same."""
    if np.isnan(v):
        return "nan"
    if np.isinf(v):
        return "inf" if v > 0 else "-inf"
    text = "%.*g" % (digits, v)
    return text if cast(float(text)) == cast(v) else "%.*g" % (more_digits, v)


def element_text(v, dtype, quote):
    """One element as strings::StrCat writes it (PrintOneElement); strings quoted in v2."""
    if dtype.kind in "SUO":
        raw = v if isinstance(v, bytes) else str(v).encode()
        text = c_escape(raw)
        return f'"{text}"' if quote else text
    if dtype == np.float64:
        return format_float(float(v), 15, 17, float)
    if dtype.kind == "f":  # float32, and half printed as a float
        return format_float(float(v), 6, 9, np.float32)
    if dtype.kind == "c":
        return f"({element_text(v.real, v.real.dtype, quote)},"\
               f"{element_text(v.imag, v.imag.dtype, quote)})"
    if dtype == np.bool_:
        return "1" if v else "0"
    return str(int(v))


_ESCAPES = {ord("\n"): "\\n", ord("\r"): "\\r", ord("\t"): "\\t", ord('"'): '\\"',
            ord("'"): "\\'", ord("\\"): "\\\\"}


def c_escape(raw):
    """absl::Utf8SafeCEscape: C escapes and octal for control bytes; UTF-8 bytes kept."""
    out = bytearray()
    for byte in raw:
        if byte in _ESCAPES:
            out += _ESCAPES[byte].encode()
        elif byte < 0x20 or byte == 0x7F:
            out += b"\\%03o" % byte
        else:
            out.append(byte)
    return out.decode("utf-8", errors="replace")


def dim_spacing(dim, ndims):
    """PrintDimSpacing: a space inside the last dim, else newlines and an indent."""
    if dim == ndims - 1:
        return " "
    return "\n" * (ndims - dim - 1) + " " * (dim + 1)


def summarize_v2(x, at_ends):
    """PrintOneDimV2: each dim shows its first and last `at_ends` entries around '...'."""
    parts = []

    def walk(dim, index):
        if dim == x.ndim:
            parts.append(element_text(x[index], x.dtype, quote=True))
            return
        n = x.shape[dim]
        parts.append("[")
        for i in range(min(at_ends, n)):
            if i > 0:
                parts.append(dim_spacing(dim, x.ndim))
            walk(dim + 1, index + (i,))
        if n > 2 * at_ends:
            parts.append(dim_spacing(dim, x.ndim))
            parts.append("...")
        for i in range(max(at_ends, n - at_ends), n):
            parts.append(dim_spacing(dim, x.ndim))
            walk(dim + 1, index + (i,))
        parts.append("]")

    walk(0, ())
    return "".join(parts)


def summarize_v1(x, limit):
    """PrintOneDim: the first `limit` elements in row-major order, nested brackets, '...'."""
    flat = x.reshape(-1)
    parts, taken = [], [0]

    def walk(dim):
        if taken[0] >= limit:
            return
        if dim == x.ndim - 1:
            for i in range(x.shape[dim]):
                if taken[0] >= limit:
                    if dim != 0:
                        parts.append("...")
                    return
                if i > 0:
                    parts.append(" ")
                parts.append(element_text(flat[taken[0]], x.dtype, quote=False))
                taken[0] += 1
            return
        for _ in range(x.shape[dim]):
            opened = taken[0] < limit
            if opened:
                parts.append("[")
            walk(dim + 1)
            if taken[0] < limit or opened:
                parts.append("]")

    walk(0)
    return "".join(parts)


# The most elements one summary prints. Each costs a Python call and 10-25 bytes of text:
# `summarize=-1` over a hostile 100M-element tensor would take minutes and gigabytes (TensorFlow
# prints them all; tfg refuses, naming the sizes).
MAX_PRINTED = 1 << 22  # (6**8: a rank-8 tensor at the default summarize of 3 prints 1.7M)


def summarize(x, max_entries, print_v2):
    """Tensor::SummarizeValue(max_entries, print_v2)."""
    x = np.asarray(x)
    limit = x.size if max_entries < 0 else min(max_entries, x.size)
    printed = (math.prod(min(n, 2 * limit) for n in x.shape) if print_v2 and x.ndim
               else limit)
    if printed > MAX_PRINTED:
        fail(f"summarizing {printed} elements of a {list(x.shape)} tensor (summarize "
             f"{max_entries}): tfg prints at most {MAX_PRINTED} elements a tensor")
    if x.ndim == 0:
        text = element_text(x[()], x.dtype, quote=print_v2) if limit > 0 else ""
        return text + ("..." if x.size > limit else "")
    if print_v2:
        return summarize_v2(x, limit)
    return summarize_v1(x, limit) + ("..." if x.size > limit else "")


def attr_text(ctx, name, default):
    v = ctx.attrs.get(name, default)
    return v.decode("utf-8", errors="replace") if isinstance(v, bytes) else str(v)


@kernel("StringFormat")
def string_format(ctx, *inputs):
    template, placeholder = attr_text(ctx, "template", "%s"), attr_text(ctx, "placeholder", "%s")
    pieces = template.split(placeholder) if placeholder else [template]
    if len(pieces) - 1 != len(inputs):
        fail(f"num placeholders in template and num inputs must match: {len(pieces) - 1} vs. "
             f"{len(inputs)}")
    n = int(ctx.attrs.get("summarize", 3))
    out = [pieces[0]]
    for x, piece in zip(inputs, pieces[1:]):
        out.append(summarize(x, n, print_v2=True))
        out.append(piece)
    return np.array("".join(out).encode(), dtype=object)


def write_stderr(text):
    sys.stderr.write(text)
    sys.stderr.flush()


@kernel("PrintV2", host_only=True)
def print_v2(ctx, text):
    stream = ctx.attrs.get("output_stream", b"stderr")
    stream = stream if isinstance(stream, bytes) else str(stream).encode()
    if stream.startswith(b"file://"):
        fail(f"PrintV2 output_stream {stream.decode(errors='replace')!r} is not supported: "
             "tfg does not write files a graph names")
    if stream not in _STREAMS:
        fail(f"Unknown output stream: {stream.decode(errors='replace')}, Valid streams are: "
             + ", ".join(s.decode() for s in _STREAMS) + ".")
    text = np.asarray(text)
    if text.ndim != 0:
        fail(f"Input is expected to be scalar, but got {list(text.shape)}")
    value = text[()]
    value = value.decode("utf-8", errors="replace") if isinstance(value, bytes) else str(value)
    write_stderr(value + attr_text(ctx, "end", "\n"))
    return ()


@kernel("Print", host_only=True, forwards_input=True)
def print_v1(ctx, x, *data):
    """Passes x through; the first `first_n` runs of this node (all when negative) log."""
    first_n = int(ctx.attrs.get("first_n", -1))
    if first_n >= 0:
        count = ctx.cache.get("count", 0)
        if count >= first_n:
            return x
        ctx.cache["count"] = count + 1
    n = int(ctx.attrs.get("summarize", 3))
    text = attr_text(ctx, "message", "") + "".join(
        f"[{summarize(d, n, print_v2=False)}]" for d in data)
    write_stderr(text + "\n")
    return x
