"""Read and write GraphDef files: binary `.pb` or text `.pbtxt`, detected from the bytes.

    >>> g = load("model.pb")          # or load("-") for stdin
    >>> save(g, "model.pbtxt")        # text because of the extension
    >>> data = dumps(g, "binary")

Writes are atomic (a temp file renamed into place), so a failure never leaves a partial file.
"""
import os
import secrets
import stat
import sys

from google.protobuf import text_format

from tfg.errors import TfgInputError
from tfg.graphdef import savedmodel
from tfg.graphdef.decode import (  # noqa: F401  (public here: tfg.loads)
    SUPPORTED_CONSUMER_VERSION, loads, parse_bytes)
from tfg.graphdef.graph import Graph


# Protobuf refuses messages of 2 GiB or more: reading past that is wasted memory.
MAX_GRAPH_BYTES = (2 << 30) - 1


def load(path="-"):
    """A Graph from a path, or from stdin for `-`/None. A SavedModel folder, its
    saved_model.pb or a `.meta` MetaGraphDef gives its (default-tagged) graph."""
    if path in (None, "-"):
        data = read_bounded(sys.stdin.buffer, "<stdin>")
        source = "<stdin>"
    else:
        source = str(path)
        if savedmodel.is_saved_model(path):
            return savedmodel.load_graph(path)
        try:
            if stat.S_ISCHR(os.stat(path).st_mode):  # /dev/zero, /dev/urandom: endless
                raise TfgInputError(f"{source} is a device, not a graph file")
            with open(path, "rb") as f:
                data = read_bounded(f, source)
        except OSError as e:
            raise TfgInputError(f"cannot read graph {source}: {e.strerror}") from None
        if os.path.isdir(path):
            raise TfgInputError(f"{source} is a directory, not a graph file")
    return loads(data, source)


def read_bounded(f, source, limit=MAX_GRAPH_BYTES):
    """All of `f`, refusing more than `limit` bytes (protobuf reads no message over 2 GiB):
    a pipe that never ends is an error after `limit` bytes, not all the memory there is."""
    try:
        regular = stat.S_ISREG(os.fstat(f.fileno()).st_mode)
    except (OSError, AttributeError, ValueError):  # an in-memory stream (tests)
        regular = False
    if regular:
        data = f.read(limit + 1)
    else:  # a pipe: in chunks, so that only what came is held (read(n) allocates n)
        chunks, size = [], 0
        while size <= limit:
            chunk = f.read(1 << 20)
            if not chunk:
                break
            chunks.append(chunk)
            size += len(chunk)
        data = b"".join(chunks)
    if len(data) > limit:
        raise TfgInputError(f"{source}: more than {limit} bytes, larger than any GraphDef "
                            "protobuf can read")
    return data


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
    except OSError as e:  # a full disk, a quota: the user's storage, not a tfg bug
        _unlink_quietly(tmp)
        raise TfgInputError(f"cannot write {target or folder}: {e.strerror}") from None
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
    """Write `data` to `path` via a temp file in the same folder, fsync, rename. A path that
    is a device, FIFO or socket (/dev/null, /dev/stdout, a pipe) is written in place: renaming
    over it replaced the device node itself (as root, `-o /dev/null` made /dev/null a file)."""
    try:
        st = os.stat(path)
    except FileNotFoundError:
        st = None
    except OSError as e:
        raise TfgInputError(f"cannot write {path}: {e.strerror}") from None
    if st is not None and stat.S_ISDIR(st.st_mode):
        raise TfgInputError(f"cannot write {path}: it is a directory")
    if st is not None and not stat.S_ISREG(st.st_mode):
        try:
            with open(path, "wb") as f:
                f.write(data)
        except OSError as e:
            raise TfgInputError(f"cannot write {path}: {e.strerror}") from None
        return
    folder = os.path.dirname(os.path.abspath(path)) or "."
    tmp = write_temp(folder, data, target=path)
    try:
        os.replace(tmp, path)
    except OSError as e:  # a directory made meanwhile, a read-only target folder entry
        _unlink_quietly(tmp)
        raise TfgInputError(f"cannot write {path}: {e.strerror}") from None
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
