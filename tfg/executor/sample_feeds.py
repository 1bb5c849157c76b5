"""Inputs made up for a graph's placeholders: `--random-feeds [SEED]` of `tfg run`/`compare`.

    >>> random_feeds(graph, ["loss"], seed=0)          # x: float32 [None, 4], labels: int32 [16]
    {'x:0': array([[0.637, 0.269, 0.041, 0.017]], dtype=float32),
     'labels:0': array([1, 0, 1, ...], dtype=int32)}
    >>> random_feeds(graph, ["loss"], dims={"x": 32})["x:0"].shape
    (32, 4)

Only the placeholders that the fetches and targets depend on get a value (a SavedModel's
`saver_filename` is left alone), and never one that is fed already. Each gets its declared
dtype and shape; an unknown dimension is `dims[name]`, else `dims["*"]`, else 1. Floats are
uniform in [0, 1) (safe for Log, Sqrt, Rsqrt); integers are 0 or 1 (a valid index along any
axis of size 2 or more, a valid class for OneHot and sparse losses); bools are random. A
placeholder whose dtype or rank is unknown, or whose dtype has no sensible random value
(string, resource, variant), is an input error naming it: feed it with `--feed`.
"""
import numpy as np

from tfg.errors import TfgInputError
from tfg.graphdef.names import parse_tensor, tensor_name
from tfg.schemas.dtypes import DType
from tfg.schemas.ops import control_flow_names, fed_placeholder_ops

_PLACEHOLDERS = fed_placeholder_ops()
_SENDS, _RECVS = control_flow_names("send"), control_flow_names("recv")
# A made-up input larger than this is almost surely a mistyped --dim.
MAX_ELEMENTS = 1 << 28


def parse_dims(values):
    """`--dim NAME=N` strings -> {name: N} ('*' stands for every placeholder)."""
    dims = {}
    for text in values or ():
        name, sep, n = text.partition("=")
        name = name.strip()
        try:
            size = int(n)
        except ValueError:
            size = -1
        if not sep or not name or size < 0:
            raise TfgInputError(f"--dim {text!r}: expected NAME=N (N >= 0; NAME a placeholder "
                                "or '*' for all)")
        dims[parse_tensor(name).node if name != "*" else "*"] = size
    return dims


def needed_placeholders(graph, names):
    """Placeholders (in graph order) that computing the tensors/nodes `names` needs (across a
    partitioned graph's _Recv -> _Send pairs too)."""
    todo = [parse_tensor(n.lstrip("^")).node for n in names]
    seen = set()
    sends = None  # transfer key -> its _Send's name, made at the first _Recv
    while todo:
        name = todo.pop()
        if name in seen or name not in graph:
            continue
        seen.add(name)
        node = graph[name]
        todo.extend(ref.node for ref in node.input_refs)
        if node.op in _RECVS:
            if sends is None:
                sends = {_transfer(n): n.name for n in graph if n.op in _SENDS}
            todo.extend(n for n in [sends.get(_transfer(node))] if n is not None)
    return [n for n in graph if n.name in seen and n.op in _PLACEHOLDERS]


def _transfer(node):
    """What pairs a _Send with its _Recv: the tensor and the two devices."""
    return tuple(node.get_attr(a, b"") for a in ("tensor_name", "send_device", "recv_device"))


def random_feeds(graph, needs, seed=0, dims=None, fed=()):
    """{tensor name: array} for every placeholder `needs` depends on that is not in `fed`."""
    dims = dict(dims or {})
    unknown = set(dims) - {"*"} - {n.name for n in graph}
    if unknown:
        raise TfgInputError(f"--dim {sorted(unknown)[0]}: no placeholder of that name")
    fed_nodes = {parse_tensor(n).node for n in fed}
    rng = np.random.default_rng(seed)
    feeds = {}
    for node in needed_placeholders(graph, needs):
        if node.name in fed_nodes:
            continue
        feeds[tensor_name(node.name, 0)] = _sample(node, rng, dims)
    return feeds


def _sample(node, rng, dims):
    dtype = node.get_attr("dtype", None) if node.has_attr("dtype") else None
    shape = node.get_attr("shape", None) if node.has_attr("shape") else None
    where = f"--random-feeds: placeholder {node.name!r}"
    if not isinstance(dtype, DType):
        raise TfgInputError(f"{where} has no dtype; feed it with --feed")
    if not isinstance(shape, tuple):
        raise TfgInputError(f"{where} has an unknown rank; feed it with --feed")
    fill = dims.get(node.name, dims.get("*", 1))
    shape = tuple(fill if d is None or d < 0 else d for d in shape)
    if int(np.prod(shape, dtype=np.float64)) > MAX_ELEMENTS:
        raise TfgInputError(f"{where}: shape {list(shape)} is too large to make up")
    base = dtype.base
    if base in (DType.STRING, DType.RESOURCE, DType.VARIANT):
        raise TfgInputError(f"{where} is {base.tf_name}; feed it with --feed")
    np_dtype = base.np
    if np_dtype.kind == "b":
        return rng.integers(0, 2, size=shape).astype(bool)
    if np_dtype.kind in "iu":
        return rng.integers(0, 2, size=shape).astype(np_dtype)
    if np_dtype.kind == "c":
        return (rng.random(shape) + 1j * rng.random(shape)).astype(np_dtype)
    return rng.random(shape).astype(np_dtype)
