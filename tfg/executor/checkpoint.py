"""Save and restore a session's variables (reference and resource variables alike).

    >>> save(sess.resources, "ckpt/")        # writes ckpt/variables.tfgckpt atomically
    'ckpt/variables.tfgckpt'
    >>> restore(sess.resources, graph, "ckpt/")
    ['b', 'w']

Both VariableV2 and VarHandleOp kernels keep a `Ref` in the session's ResourceMgr under
(container, shared_name or node name); a checkpoint names each by that name (prefixed by
`container/` when the container is not empty). The file format, with its checksum, is
tfg/kernels/checkpoint_format.py; a truncated or corrupt file is refused before any variable
changes. A checkpoint records which graph made it (its variables' names, dtypes and shapes,
and their SHA-256); restoring it into a graph with other variables is refused, describing both.
"""
import os

import numpy as np

from tfg.errors import TfgInputError
from tfg.graphdef.state_checks import shape_text
from tfg.kernels.checkpoint_format import decode_tensors, fingerprint, \
    read_checkpoint_message, write_checkpoint
from tfg.kernels.resources import Ref
from tfg.schemas.ops import ops_with

FILENAME = "variables.tfgckpt"
VARIABLE_OPS = ops_with("variable")


def _path(directory):
    directory = os.fspath(directory)
    if os.path.isfile(directory):
        return directory
    return os.path.join(directory, FILENAME)


def _key_name(container, name):
    return f"{container}/{name}" if container else name


def collect(resources):
    """{checkpoint name: array copy} of every initialized variable in `resources`."""
    out = {}
    for (container, name), item in resources.items():
        if type(item) is Ref and item.initialized:
            out[_key_name(container, name)] = np.array(item.get(), copy=True)
    return out


def save(resources, directory, step=None, graph=None):
    """Write every initialized variable to `directory`/variables.tfgckpt (or to `directory`
    when it is a checkpoint file); returns the path. With `graph`, the checkpoint records the
    graph's variables (see describe_variables)."""
    if step is not None and step < 0:
        raise TfgInputError(f"checkpoint step {step} is negative")
    named = collect(resources)
    if not named:
        raise TfgInputError("nothing to save: no variable is initialized (run --init first)")
    path = _path(directory)
    described = None if graph is None else describe_variables(graph)
    try:
        if not os.path.lexists(os.fspath(directory)):
            os.makedirs(os.fspath(directory), exist_ok=True)
        return write_checkpoint(path, named, step=step, graph_variables=described)
    except OSError as e:  # a path the user gave that cannot be written: their input
        raise TfgInputError(f"cannot write the checkpoint to {os.fspath(directory)!r} "
                            f"({e.strerror or e})") from None


def describe_variables(graph):
    """The graph's variables as sorted "name dtype [shape]" lines: what a checkpoint records
    of the graph that made it.

        >>> print(describe_variables(g))
        b float32 [3]
        w float32 [2,3]
    """
    lines = []
    for name, (_, _, dtype, shape) in sorted(_declared(graph).items()):
        dt = dtype.base.tf_name if hasattr(dtype, "base") else "?"
        lines.append(f"{name} {dt} {shape_text(shape)}")
    return "\n".join(lines)


def check_same_graph(msg, graph, source):
    """Refuse a checkpoint made by a graph with other variables, describing both."""
    if not msg.graph_fingerprint:  # written by an earlier tfg: values are still checked
        return
    mine = describe_variables(graph)
    if fingerprint(mine) == msg.graph_fingerprint:
        return
    theirs = set(msg.graph_variables.splitlines())
    ours = set(mine.splitlines())
    raise TfgInputError(
        f"{source} was saved from another graph: it has variables "
        f"{_listing(theirs - ours)} where this graph has {_listing(ours - theirs)} "
        f"(fingerprints {msg.graph_fingerprint[:12]} and {fingerprint(mine)[:12]})")


def _listing(lines, most=4):
    if not lines:
        return "none"
    lines = sorted(lines)
    more = f" and {len(lines) - most} more" if len(lines) > most else ""
    return ", ".join(f"'{ln}'" for ln in lines[:most]) + more


def saved_step(directory, graph=None):
    """The step a checkpoint in `directory` was saved at (0 without one), after checking it
    was made by `graph`; None when there is no checkpoint."""
    path = _path(directory)
    if not os.path.exists(path):
        return None
    msg = read_checkpoint_message(path)
    if graph is not None:
        check_same_graph(msg, graph, path)
    return int(msg.step) if msg.has_step else 0


def _declared(graph):
    """{checkpoint name: (container, name, dtype, shape)} of the graph's variable nodes."""
    out = {}
    for node in graph:
        if node.op not in VARIABLE_OPS:
            continue
        container = node.get_attr("container", b"").decode()
        name = node.get_attr("shared_name", b"").decode() or node.name
        out[_key_name(container, name)] = (container, name, node.get_attr("dtype", None),
                                           node.get_attr("shape", None))
    return out


def restore(resources, graph, directory):
    """Assign every variable saved in `directory`; returns the restored names (sorted).

    A dtype or shape that disagrees with the graph's variable is an input error, raised
    before any variable is changed.
    """
    path = _path(directory)
    msg = read_checkpoint_message(path)
    check_same_graph(msg, graph, path)
    named = decode_tensors(msg, path)
    declared = _declared(graph)
    for key, ref in resources.items():
        if type(ref) is Ref:
            declared.setdefault(_key_name(*key), (key[0], key[1], None, None))
    for name, value in named.items():
        _, _, dtype, shape = declared.get(name, ("", name, None, None))
        if dtype is not None and hasattr(dtype, "base") and dtype.base.np != value.dtype:
            raise TfgInputError(f"checkpoint variable {name!r} is {value.dtype}, the graph "
                                f"declares {dtype.base.tf_name}")
        if isinstance(shape, tuple) and (len(shape) != value.ndim or any(
                d is not None and d >= 0 and d != v for d, v in zip(shape, value.shape))):
            raise TfgInputError(f"checkpoint variable {name!r} has shape {list(value.shape)}, "
                                f"the graph declares {list(shape)}")
    for name, value in named.items():
        container, short, dtype, shape = declared.get(name, ("", name, None, None))
        ref = resources.get_or_create(container, short, lambda: Ref(short, dtype, shape))
        ref.assign(value)
    return sorted(named)
