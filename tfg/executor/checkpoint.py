"""Save and restore a session's variables (reference and resource variables alike).

    >>> save(sess.resources, "ckpt/")        # writes ckpt/variables.tfgckpt atomically
    'ckpt/variables.tfgckpt'
    >>> restore(sess.resources, graph, "ckpt/")
    ['b', 'w']

Both VariableV2 and VarHandleOp kernels keep a `Ref` in the session's ResourceMgr under
(container, shared_name or node name); a checkpoint names each by that name (prefixed by
`container/` when the container is not empty). The file format, with its checksum, is
tfg/kernels/checkpoint_format.py; a truncated or corrupt file is refused before any variable
changes.
"""
import os

import numpy as np

from tfg.errors import TfgInputError
from tfg.kernels.checkpoint_format import read_checkpoint_with_step, write_checkpoint
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


def save(resources, directory, step=None):
    """Write every initialized variable to `directory`/variables.tfgckpt; returns the path."""
    named = collect(resources)
    if not named:
        raise TfgInputError("nothing to save: no variable is initialized (run --init first)")
    path = _path(directory)
    if not os.path.isfile(os.fspath(directory)):
        os.makedirs(os.fspath(directory), exist_ok=True)
    return write_checkpoint(path, named, step=step)


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
    named, _ = read_checkpoint_with_step(_path(directory))
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
