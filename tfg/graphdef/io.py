"""Read and write GraphDef files: binary `.pb` or text `.pbtxt`, detected from the bytes.

    >>> g = load("model.pb")          # or load("-") for stdin
    >>> save(g, "model.pbtxt")        # text because of the extension
    >>> data = dumps(g, "binary")

Writes are atomic (a temp file renamed into place), so a failure never leaves a partial file.
"""
import os
import secrets
import sys

from google.protobuf import message as pb_message
from google.protobuf import text_format

from tfg.errors import GraphFormatError, TfgInputError
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
    if not gd.node and not gd.HasField("versions") and not gd.HasField("library"):
        raise GraphFormatError(f"{source}: not a GraphDef (no nodes, versions or library)")
    _check_versions(gd, source)
    _check_nodes(gd, source)
    return gd


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


def _one_line(e):
    return " ".join(str(e).split())[:200]


def loads(data, source="<input>"):
    return Graph.from_proto(parse_bytes(data, source))


def load(path="-"):
    """A Graph from a path, or from stdin for `-`/None. A SavedModel folder, its
    saved_model.pb or a `.meta` MetaGraphDef gives its (default-tagged) graph."""
    if path in (None, "-"):
        data = sys.stdin.buffer.read()
        source = "<stdin>"
    else:
        source = str(path)
        from tfg.graphdef import savedmodel  # a SavedModel folder/saved_model.pb/.meta

        if savedmodel.is_saved_model(path):
            return savedmodel.load_graph(path)
        try:
            with open(path, "rb") as f:
                data = f.read()
        except OSError as e:
            raise TfgInputError(f"cannot read graph {source}: {e.strerror}") from None
        if os.path.isdir(path):
            raise TfgInputError(f"{source} is a directory, not a graph file")
    return loads(data, source)


def dumps(graph, fmt="binary"):
    gd = graph.to_proto() if isinstance(graph, Graph) else graph
    if fmt in ("pbtxt", "text"):
        return text_format.MessageToString(gd).encode("utf-8")
    if fmt in ("pb", "binary"):
        # Deterministic: map fields (attrs) in key order, so equal graphs give equal bytes.
        return gd.SerializeToString(deterministic=True)
    raise TfgInputError(f"unknown graph format {fmt!r} (expected pb or pbtxt)")


def format_for_path(path, fmt=None):
    """The output format: explicit `fmt`, else text for `.pbtxt`/`.txt` paths, else binary."""
    if fmt:
        return "pbtxt" if fmt in ("pbtxt", "text") else "pb"
    if path and str(path).endswith((".pbtxt", ".txt", ".pbtext")):
        return "pbtxt"
    return "pb"


def write_temp(folder, data, prefix=".tfg-", target=None):
    """Write `data` to a new temp file in `folder` (fsynced, with the permissions a plain open()
    would give, not mkstemp's 0600) and return its path, for the caller to rename into place.
    Nothing is left behind on failure; `target` is the path an error names (default: folder)."""
    fd = tmp = None
    for _ in range(100):  # O_EXCL with mode 0666: the kernel applies the umask, no race
        tmp = os.path.join(folder, f"{prefix}{secrets.token_hex(8)}")
        try:
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)
            break
        except FileExistsError:
            continue
        except OSError as e:  # no such folder, not writable: the user's path, not a tfg bug
            raise TfgInputError(f"cannot write {target or folder}: {e.strerror}") from None
    if fd is None:
        raise TfgInputError(f"cannot write {target or folder}: no free temp name")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
    except BaseException:
        _unlink_quietly(tmp)
        raise
    return tmp


def _unlink_quietly(path):
    try:
        os.unlink(path)
    except OSError:
        pass


def write_bytes_atomic(path, data):
    """Write `data` to `path` via a temp file in the same folder, fsync, rename."""
    folder = os.path.dirname(os.path.abspath(path)) or "."
    tmp = write_temp(folder, data, target=path)
    try:
        os.replace(tmp, path)
    except BaseException:
        _unlink_quietly(tmp)
        raise


def save(graph, path="-", fmt=None):
    """Write a Graph to `path` (stdout for `-`); text or binary as `format_for_path` decides."""
    fmt = format_for_path(None if path in (None, "-") else path, fmt)
    data = dumps(graph, fmt)
    if path in (None, "-"):
        out = sys.stdout.buffer
        if fmt == "pb" and out.isatty():
            raise TfgInputError("refusing to write a binary graph to a terminal; use -o FILE "
                                "or --format pbtxt")
        out.write(data)
        out.flush()
    else:
        write_bytes_atomic(path, data)
