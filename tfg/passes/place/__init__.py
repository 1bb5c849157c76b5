"""Placement: give every node a full device name.

    >>> g2 = place(g, "cpu:2,gpu:1")
    >>> g.get("mm").device, g2.get("mm").device
    ('', '/job:localhost/replica:0/task:0/device:GPU:0')

Requested devices are kept (partial specs narrow the choice), `_class: loc:@x` and ref/resource
edges colocate (colocation.py), and among the remaining choices a greedy simulation with the
cost model picks the device where each group finishes first (simulate.py).
"""
from tfg.graphdef.canonical import canonicalize
from tfg.graphdef.infer import infer
from tfg.passes.cluster_spec import device_names, host_only_names
from tfg.passes.cost_model import CostModel
from tfg.passes.place.colocation import (  # noqa: F401
    EXECUTOR_OPS, PlacementError, build_groups, default_warn)
from tfg.passes.place.simulate import simulate
from tfg.schemas.ops import ops_with, ref_variable_ops

# Ops whose `shape` attr is their output's shape (a VarHandleOp's output is a scalar handle).
_SHAPE_ATTR_OPS = ops_with("placeholder") | ref_variable_ops()


def place(graph, devices=None, cost_model=None, soft=True, cluster=None, warn=default_warn,
          spread_loops=False):
    """A copy of `graph` where every node's device is a full device name.

    devices: a SPEC (`cpu:3`, `cpu:2,gpu:1`, full names), a list of names or a DeviceSet;
    cluster: a cluster SPEC (one CPU device per task); cost_model: a CostModel, a path to a
    cost-model file, or None for static estimates; soft: fall back (with `warn`) when a
    requested device is missing or has no kernel, instead of raising PlacementError. A local
    set of GPUs alone (`gpu:1`) also holds the host's CPU:0, for the ops no GPU runs.
    spread_loops: place a while loop's nodes one by one (default: each loop nest on one
    device, simulate.py).

    Before: `mm` (MatMul) with device "", `c` with device "/device:CPU:1".
    After:  `mm` on "/job:localhost/replica:0/task:0/device:CPU:0", `c` on ".../CPU:1".
    """
    graph = canonicalize(graph)  # calls inlined, functional control flow lowered
    names = device_names(devices, cluster)
    if cost_model is None:
        cost_model = CostModel()
    elif isinstance(cost_model, str):
        cost_model = CostModel.load(cost_model)
    out = graph.copy()
    groups = build_groups(out, names, soft=soft, warn=warn or (lambda msg: None),
                          host_only=host_only_names(devices, cluster))
    where = simulate(out, groups, cost_model, tensor_shapes(out), keep_loops=not spread_loops)
    for node in out:
        node.device = where[node.name]
    return out


def tensor_shapes(graph):
    """{(node, port): shape tuple or None} from shape inference, for the cost model.

    Uses tfg.graphdef.infer when present; otherwise what the graph records itself
    (`_output_shapes`, Placeholder/Variable `shape`, Const values).
    """
    shapes = _raw_tensor_shapes(graph)
    # A malformed graph may record anything as a shape (a string attr read as bytes, 10,000
    # dims): such shapes become unknown, so the cost model guesses instead of overflowing.
    return {key: _sane_shape(shape) for key, shape in shapes.items()}


# Larger tensors cannot exist; estimates from such shapes would overflow a float.
_MAX_ELEMENTS = 1 << 62


def _sane_shape(shape):
    """`shape` as a tuple of dims (int >= 0 or None), or None when it is not a usable shape."""
    if not isinstance(shape, (tuple, list)):
        return None
    elements = 1
    for d in shape:
        if d is None:
            continue
        if type(d) is not int or d < 0:
            return None
        elements *= d
        if elements > _MAX_ELEMENTS:
            return None
    return tuple(shape)


def _raw_tensor_shapes(graph):
    shapes = {}
    try:
        result = infer(graph)
    except Exception:  # a graph inference rejects still gets placed, with guesses
        result = None
    if result is not None:
        shapes.update(_normalize(result))
        if shapes:
            return shapes
    for node in graph:
        recorded = node.get_attr("_output_shapes", None) if node.has_attr(
            "_output_shapes") else None
        if recorded:
            for port, shape in enumerate(recorded):
                shapes[(node.name, port)] = shape
        elif node.op in _SHAPE_ATTR_OPS and node.has_attr("shape"):
            shapes[(node.name, 0)] = node.get_attr("shape")
        elif node.op == "Const" and node.has_attr("value"):
            try:
                shapes[(node.name, 0)] = tuple(node.get_attr("value").shape)
            except Exception:  # an undecodable constant: size unknown
                pass
    return shapes


def _normalize(result):
    """Accept the shapes infer returns as {TensorRef|(node, port)|'node:port': shape}."""
    out = {}
    items = result.items() if hasattr(result, "items") else []
    for key, value in items:
        shape = getattr(value, "shape", value)
        if isinstance(key, str):
            node, _, port = key.rpartition(":")
            if not port.isdigit():
                node, port = key, "0"
            key = (node, int(port))
        elif isinstance(key, tuple) and len(key) == 2:
            key = (key[0], int(key[1]))
        else:
            continue
        if shape is None or isinstance(shape, (tuple, list)):
            out[key] = None if shape is None else tuple(shape)
    return out


__all__ = ["place", "tensor_shapes", "PlacementError", "build_groups", "simulate"]
