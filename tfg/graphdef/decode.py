"""GraphDef bytes (binary or text, told apart by the bytes) -> a checked GraphDef message or Graph.

    >>> loads(b'node { name: "x" op: "Placeholder" }').get("x").op
    'Placeholder'
    >>> parse_bytes(b"\\x01junk", "junk.pb")   # GraphFormatError: junk.pb: not a binary GraphDef

The bottom of reading graphs: `tfg.graphdef.io` (files, stdin, SavedModel folders) and
`tfg.graphdef.savedmodel` (the GraphDef inside a MetaGraphDef) both decode through here.
"""
from google.protobuf import message as pb_message
from google.protobuf import text_format

from tfg.errors import GraphFormatError
from tfg.graphdef.graph import Graph
from tfg.graphdef.nesting import check_text_depth
from tfg.schemas.proto import graph_pb2

# The newest GraphDef producer version whose graphs tfg understands (TensorFlow 2.21's is
# ~2474). A graph that says it needs a newer consumer is refused up front.
SUPPORTED_CONSUMER_VERSION = 3000


def parse_bytes(data, source="<input>"):
    """Bytes of a binary or text GraphDef -> GraphDef message."""
    if not data:
        raise GraphFormatError(f"{source}: empty input, expected a GraphDef")
    gd = graph_pb2.GraphDef()
    if _looks_like_text(data):
        check_text_depth(data, source)
        try:
            text_format.Parse(data.decode("utf-8"), gd)
        except (text_format.ParseError, UnicodeDecodeError) as e:
            raise GraphFormatError(f"{source}: not a text GraphDef: {_one_line(e)}") from None
    else:
        try:
            gd.ParseFromString(data)
        except (pb_message.DecodeError, RuntimeError, ValueError) as e:
            raise GraphFormatError(f"{source}: not a binary GraphDef: {_one_line(e)}") from None
    # Random bytes can parse as a GraphDef of unknown fields only, and blank text or comments as
    # an empty one; refuse both (a graph tfg writes always has versions or nodes).
    if not gd.node and not gd.HasField("versions") and not _named_library(gd.library):
        raise GraphFormatError(f"{source}: not a GraphDef (no nodes, versions or library)")
    _check_versions(gd, source)
    _check_nodes(gd, source)
    return gd


def _named_library(lib):
    """Whether a function library names a function or gradient: another message's field 2
    (a TensorProto's shape) parses as an empty library, which is no graph."""
    return any(f.signature.name for f in lib.function) or any(
        g.function_name for g in lib.gradient)


def _looks_like_text(data):
    head = data[:4096].lstrip()
    if not head:
        return True
    # A binary GraphDef starts with tag 0x0a (a newline) and a length byte that may be a
    # letter; text never holds control characters other than whitespace.
    if any(b < 0x20 and b not in b"\t\n\r" for b in data[:4096]):
        return False
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return text[:1].isalpha() or text.startswith("#")


def _check_versions(gd, source):
    v = gd.versions
    if v.min_consumer > SUPPORTED_CONSUMER_VERSION:
        raise GraphFormatError(
            f"{source}: GraphDef needs a consumer of version {v.min_consumer}; tfg supports up "
            f"to {SUPPORTED_CONSUMER_VERSION}")


def _check_nodes(gd, source):
    for nd in gd.node:
        if not nd.name:
            raise GraphFormatError(f"{source}: a node has an empty name (op {nd.op!r})")
        if not nd.op:
            raise GraphFormatError(f"{source}: node {nd.name!r} has no op")
        for key, value in nd.attr.items():
            kind = value.WhichOneof("value")
            if kind == "shape":
                _check_shape(value.shape, nd.name, key, source)
            elif kind == "list" and value.list.shape:
                for shape in value.list.shape:
                    _check_shape(shape, nd.name, key, source)


def _check_shape(shape, node, key, source):
    """A shape attr as TensorFlow accepts it on import: dims >= -1 (-1: unknown), and no dims
    when the rank is unknown. Before, a Placeholder of shape [-5, 3] took any feed."""
    if shape.unknown_rank and shape.dim:
        raise GraphFormatError(f"{source}: node {node!r}: attr {key!r} has an unknown rank "
                               f"and {len(shape.dim)} dims")
    for d in shape.dim:
        if d.size < -1:
            raise GraphFormatError(
                f"{source}: node {node!r}: attr {key!r} has dimension {d.size} (below -1, "
                "where -1 means unknown)")


def _one_line(e):
    return " ".join(str(e).split())[:200]


def loads(data, source="<input>"):
    return Graph.from_proto(parse_bytes(data, source))
