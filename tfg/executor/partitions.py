"""Which nodes a step needs, and which device runs each of them.

    >>> needed_nodes(g, [TensorRef("y", 0)], targets=(), fed={TensorRef("x", 0)})
    {'y', 'mul'}                       # x's producer is cut off by the feed
    >>> [(d.short, len(ns)) for d, ns in group_by_device(g, needed, devices)]
    [('CPU:0', 7), ('CPU:1', 5)]       # a partitioned graph: one group per device

A graph is *partitioned* when it holds `_Send`/`_Recv` nodes (as `tfg partition` writes it):
every node then names its device and each device gets its own executor. Any other graph runs
on the device set's first device, unless a placement pass is available and there are several
devices, in which case it is placed and partitioned first.
"""
from tfg.errors import TfgInputError
from tfg.graphdef.names import CONTROL
from tfg.schemas.ops import has_op
from tfg.schemas.ops import signature

SEND_OPS = ("_Send", "_HostSend")
RECV_OPS = ("_Recv", "_HostRecv")
_FIXED_OUTPUTS = {"Switch": 2, "RefSwitch": 2, "Merge": 2, "RefMerge": 2, "_Send": 0,
                  "_HostSend": 0, "_Recv": 1, "_HostRecv": 1, "NoOp": 0, "ControlTrigger": 0}


def is_partitioned(graph):
    return any(n.op in SEND_OPS or n.op in RECV_OPS for n in graph)


def executable_graph(graph, devices):
    """The graph the session runs: partitioned graphs as they are; an unpartitioned graph is
    placed and partitioned when several devices are given and the passes exist."""
    if len(devices) < 2 or is_partitioned(graph):
        return graph
    try:
        from tfg.passes.partition import partition
    except ImportError:
        return graph  # no partitioner yet: everything runs on the first device
    return partition(graph, devices=devices.names)


def num_outputs(node):
    """The node's output count, or None when the op is unknown here (checked later)."""
    if node.op in _FIXED_OUTPUTS:
        return _FIXED_OUTPUTS[node.op]
    if not has_op(node.op):
        return None
    try:
        return signature.num_outputs(node)
    except Exception:  # a missing attr: the kernel binding reports it
        return None


def _transfer_key(node):
    def s(name):
        v = node.get_attr(name, b"")
        return v.decode() if isinstance(v, bytes) else str(v)
    return s("send_device"), s("recv_device"), s("tensor_name")


def needed_nodes(graph, fetch_refs, targets, fed):
    """Names of the nodes fetches and targets need: their transitive inputs (data and
    control), stopping at fed tensors; a `_Recv` needs its matching `_Send`."""
    sends = {}
    for node in graph:
        if node.op in SEND_OPS:
            sends.setdefault(_transfer_key(node), []).append(node.name)
    stack = [r.node for r in fetch_refs if r not in fed] + list(targets)
    seen = set()
    while stack:
        name = stack.pop()
        if name in seen:
            continue
        seen.add(name)
        node = graph.get(name)
        if node is None:
            continue
        for ref in node.input_refs:
            if (ref.node, ref.port) in fed:
                continue
            # As in TensorFlow's FeedInputs: feeding the only output of a node also satisfies
            # control edges from it, so a fed Placeholder never has to run.
            if ref.port == CONTROL and (ref.node, 0) in fed and _single_output(graph, ref.node):
                continue
            if ref.node not in seen:
                stack.append(ref.node)
        if node.op in RECV_OPS:
            stack.extend(sends.get(_transfer_key(node), ()))
    return seen


def _single_output(graph, name):
    node = graph.get(name)
    if node is None:
        return False
    try:
        return signature.num_outputs(node) == 1
    except Exception:  # unknown op: be conservative and run it
        return False


def group_by_device(graph, needed, devices):
    """[(Device, [nodes in file order])]: one group per device of a partitioned graph, else
    a single group on the first device."""
    nodes = [n for n in graph if n.name in needed]
    if not is_partitioned(graph):
        return [(devices.default, nodes)]
    groups = {}
    for node in nodes:
        dev = devices.default if not node.device else devices.find(node.device)
        if dev is None:
            raise TfgInputError(
                f"node {node.name!r} is placed on {node.device!r}, which is not among the "
                f"devices ({', '.join(d.short for d in devices)}); pass --devices to match the "
                f"partitioned graph")
        groups.setdefault(dev.name, (dev, []))[1].append(node)
    order = {d.name: i for i, d in enumerate(devices)}
    return sorted(groups.values(), key=lambda g: order[g[0].name])
