"""Bounded nesting for the text formats tfg reads: protobuf text and `--feed` literals.

Python's text-format parser, `json` and `ast` all recurse once per level, so a few kilobytes of
brackets end in RecursionError; and protobuf's binary parser stops at 100 message levels, so a
text graph deeper than that converts to a `.pb` that no reader (tfg or TensorFlow) accepts.
Both are refused here, before parsing, by counting brackets outside strings and comments:

    >>> check_text_depth('node { attr { key: "a" value { i: 1 } } }', "g.pbtxt")   # depth 3: fine
    >>> check_text_depth("a {" * 200 + "}" * 200, "g.pbtxt")
    Traceback (most recent call last):
    tfg.errors.GraphFormatError: g.pbtxt: messages nested 200 deep; at most 99 levels ...
"""
import re

from tfg.errors import GraphFormatError, TfgInputError

# upb (protobuf's binary parser) refuses more than 100 nested messages counting the root, so
# text may open at most 99 braces inside the GraphDef for its binary form to be readable.
MAX_MESSAGE_DEPTH = 99
# numpy arrays have at most 64 dimensions; a deeper literal cannot be a tensor.
MAX_LITERAL_DEPTH = 64

# Strings (either quote, backslash escapes) and comments are skipped; brackets are counted.
_PROTO_TOKENS = re.compile(rb"""\"(?:[^"\\\n]|\\.)*\"|'(?:[^'\\\n]|\\.)*'|\#[^\n]*|[{}<>]""")
_LITERAL_TOKENS = re.compile(r"""\"(?:[^"\\]|\\.)*\"|'(?:[^'\\]|\\.)*'|[\[\](){}]""")


def _max_depth(tokens, opens):
    depth = deepest = 0
    for m in tokens:
        tok = m.group(0)
        if tok in opens:
            depth += 1
            deepest = max(deepest, depth)
        elif len(tok) == 1:
            depth = max(depth - 1, 0)
    return deepest


def text_depth(data):
    """How deep messages nest in protobuf text (bytes or str)."""
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogatepass")
    return _max_depth(_PROTO_TOKENS.finditer(data), (b"{", b"<"))


def check_text_depth(data, source, limit=MAX_MESSAGE_DEPTH):
    depth = text_depth(data)
    if depth > limit:
        raise GraphFormatError(
            f"{source}: messages nested {depth} deep; at most {limit} levels can be read "
            "(and written as a binary graph)")


def check_literal_depth(text, what, limit=MAX_LITERAL_DEPTH):
    """Refuse a JSON/Python literal nested deeper than any tensor can be."""
    depth = _max_depth(_LITERAL_TOKENS.finditer(text), ("[", "(", "{"))
    if depth > limit:
        raise TfgInputError(f"{what}: value nested {depth} deep; a tensor has at most {limit} "
                            "dimensions")
