"""Collectives across devices and workers, built from ordinary ops: `tb.collective.all_sum`,
`all_prod`, `all_min`, `all_max`, `all_mean`, `reduce_sum` (`reduce`) and `broadcast`.

    >>> with tb.device("/job:worker/task:0"):
    ...     g0 = tb.placeholder(tb.float32, [3], name="g0")
    >>> with tb.device("/job:worker/task:1"):
    ...     g1 = tb.placeholder(tb.float32, [3], name="g1")
    >>> s0, s1 = tb.collective.all_sum([g0, g1])
    # all_sum/reduce_0_0 = AddV2(g0, g1)      on task 0 (the partitioner adds the Send/Recv)
    # all_sum/out_0 = Identity(reduce_0_0)    on task 0: s0
    # all_sum/out_1 = Identity(reduce_0_0)    on task 1: s1

Why a graph rewrite and not a collective kernel: every cross-device edge already becomes a
`_Send`/`_Recv` pair when the graph is partitioned, locally and on a cluster, dead values and
while-loop frames included. So a collective is a reduction tree (pairs reduced on the device of
the left one: log2(n) levels) followed by a broadcast tree (every device holding the result
passes it on to one more device per round), and needs no runtime support at all. The result is
computed once, so every device gets bit-identical values: replicas of a data-parallel model
stay equal.

Each member tensor's device is the device its node was built on (`tb.device(...)`), or the
`devices=` list given; a partial spec (`/job:worker/task:1`) is completed by placement.
"""
from tfg.errors import TfgInputError
from tfg.graphdef.builder.constants import convert_to_tensor
from tfg.graphdef.builder.core import Operation, Tensor, get_default_builder
from tfg.graphdef.builder.math_ops import make
from tfg.graphdef.names import DeviceSpec
from tfg.schemas.dtypes import DType
from tfg.schemas.ops import signature

# merge name -> (binary op, dtypes it refuses)
MERGE_OPS = {"sum": "AddV2", "prod": "Mul", "min": "Minimum", "max": "Maximum"}
_NUMERIC_ONLY = {DType.BOOL, DType.STRING, DType.RESOURCE, DType.VARIANT}
_UNORDERED = {DType.COMPLEX64, DType.COMPLEX128}


def all_reduce(tensors, merge="sum", mean=False, devices=None, name=None):
    """One result per member, on the member's device: merge(tensors) (divided by n if mean).

    Before: t0 on dev0, t1 on dev1, t2 on dev2.
    After:  r = merge(merge(t0, t1) on dev0, t2 on dev2) on dev0; [Identity(r) on dev0,
            Identity(r) on dev1, Identity(r) on dev2] (returned in the order of `tensors`).
    """
    b = get_default_builder()
    what = name or ("all_mean" if mean else f"all_{merge}")
    with b.name_scope(what) as scope:
        items, dt, shape = _members(tensors, devices, what, merge)
        root, root_dev = _reduce_tree(b, items, merge, dt, shape)
        if mean:
            # The control input puts the constant in the reduced value's frame: needed when a
            # graph pass (no builder context) lowers a collective inside a while loop.
            with b.device(root_dev), b.control_dependencies([root]):
                n = convert_to_tensor(float(len(items)) if dt.is_floating else len(items),
                                      dt, name="group_size")
                root = make("RealDiv", [root, n], {"T": dt}, "mean", [dt]).outputs[0]
        return _broadcast_tree(b, root, root_dev, [d for _, d in items], dt, shape)


def all_sum(tensors, devices=None, name=None):
    """Sum over the group, one copy per member's device (see all_reduce)."""
    return all_reduce(tensors, "sum", devices=devices, name=name)


def all_prod(tensors, devices=None, name=None):
    """Product over the group, one copy per member's device."""
    return all_reduce(tensors, "prod", devices=devices, name=name)


def all_min(tensors, devices=None, name=None):
    """Elementwise minimum over the group, one copy per member's device."""
    return all_reduce(tensors, "min", devices=devices, name=name)


def all_max(tensors, devices=None, name=None):
    """Elementwise maximum over the group, one copy per member's device."""
    return all_reduce(tensors, "max", devices=devices, name=name)


def all_mean(tensors, devices=None, name=None):
    """Mean over the group (TensorFlow's merge_op=Add, final_op=Div), one copy per device."""
    return all_reduce(tensors, "sum", mean=True, devices=devices, name=name)


def reduce(tensors, merge="sum", device=None, devices=None, name=None):
    """merge(tensors) as ONE tensor on `device` (default: the first member's device).

    Before: t0 on dev0, t1 on dev1.  reduce([t0, t1], device=dev1) -> AddV2(t1, t0) on dev1
    (the member already on the destination is the tree's root, so it never moves).
    """
    b = get_default_builder()
    what = name or f"reduce_{merge}"
    with b.name_scope(what):
        items, dt, shape = _members(tensors, devices, what, merge)
        dst = items[0][1] if device is None else _device_string(device)
        # Root the tree at a member that already lives on dst (one transfer fewer).
        order = sorted(range(len(items)), key=lambda i: items[i][1] != dst)
        root, root_dev = _reduce_tree(b, [items[i] for i in order], merge, dt, shape)
        if root_dev == dst and len(items) > 1:
            return root
        with b.device(dst):
            return make("Identity", [root], {"T": dt}, "out", [dt]).outputs[0]


def reduce_sum(tensors, device=None, devices=None, name=None):
    """Sum over the group as one tensor on `device` (default: the first member's device)."""
    return reduce(tensors, "sum", device=device, devices=devices, name=name)


def broadcast(tensor, devices, source=None, name=None):
    """One copy of `tensor` on each of `devices` (Identity nodes, in the order given).

    Before: t on dev0; broadcast(t, [dev0, dev1, dev2, dev3]).
    After:  out_0 on dev0 and out_1 on dev1 read t; out_2 on dev2 reads out_0 and out_3 on
            dev3 reads out_1 (a binomial tree: log2(n) rounds, no device sends twice a round).
    `source`: the device `tensor` is on, when its node has none.
    """
    b = get_default_builder()
    with b.name_scope(name or "broadcast") as scope:
        t = convert_to_tensor(tensor)
        devs = [_device_string(d) for d in devices]
        if not devs:
            raise TfgInputError(f"{scope.rstrip('/')}: no devices to broadcast to")
        src = _device_of(t, source, scope.rstrip("/"), hint="source=")
        return _broadcast_tree(b, t, src, devs, t.dtype.base, t.shape)


def from_graph(name, builder=None):
    """A Tensor handle for output `node:port` of a node already in the builder's graph
    (e.g. one that `tfg.grad` added), so builder functions can use it.

    >>> g = tb.GraphBuilder(graph=tfg.grad(graph, ys="loss", xs="w/read"))
    >>> with g: gw = tb.collective.from_graph("grad/w/read")
    """
    b = builder or get_default_builder()
    node_name, _, port = name.partition(":")
    port = int(port or 0)
    if node_name not in b.graph:
        raise TfgInputError(f"no node named {node_name!r} in the builder's graph")
    op = b._ops.get(node_name)
    if op is None:
        node = b.graph[node_name]
        dtypes = signature.output_dtypes(node)
        op = Operation(b, node_name, node.op, None)
        op.outputs = [Tensor(op, i, dt) for i, dt in enumerate(dtypes)]
        b._ops[node_name] = op
    if port >= len(op.outputs):
        raise TfgInputError(f"node {node_name!r} ({op.type}) has {len(op.outputs)} output(s)")
    return op.outputs[port]


# --- the trees --------------------------------------------------------------------------------
def _reduce_tree(b, items, merge, dt, shape):
    """Pairwise reduction, each pair on the left member's device; -> (tensor, device)."""
    op_type = MERGE_OPS[merge]
    level = 0
    while len(items) > 1:
        nxt = []
        for j in range(0, len(items) - 1, 2):
            (x, dx), (y, _) = items[j], items[j + 1]
            with b.device(dx):
                r = make(op_type, [x, y], {"T": dt}, f"reduce_{level}_{j // 2}", [dt]).outputs[0]
            nxt.append((r, dx))
        if len(items) % 2:
            nxt.append(items[-1])
        items, level = nxt, level + 1
    return items[0]


def _broadcast_tree(b, value, src_dev, devs, dt, shape):
    """Identity copies of value (on src_dev) onto each of devs. Each round, every device that
    holds the value sends it to one device that does not (so log2(n) rounds, not n - 1 sends
    from src); a member on a device that already holds it copies locally."""
    outs = [None] * len(devs)
    holders = {src_dev: value}  # device -> the copy there that later rounds send on
    pending = list(range(len(devs)))
    while pending:
        rest = []
        for k in pending:
            if devs[k] in holders:  # already there: a local copy, no transfer
                outs[k] = _copy(b, holders[devs[k]], devs[k], k, dt, shape)
            else:
                rest.append(k)
        pending, new = rest, {}
        for h in list(holders.values()):
            k = next((k for k in pending if devs[k] not in new), None)
            if k is None:
                break
            pending.remove(k)
            outs[k] = new[devs[k]] = _copy(b, h, devs[k], k, dt, shape)
        holders.update(new)
    return outs


def _copy(b, tensor, dev, k, dt, shape):
    with b.device(dev):
        return make("Identity", [tensor], {"T": dt}, f"out_{k}", [dt]).outputs[0]


# --- members ----------------------------------------------------------------------------------
def _members(tensors, devices, what, merge):
    """[(tensor, device)], the common dtype and static shape, or an error naming the tensor."""
    if merge not in MERGE_OPS:
        raise TfgInputError(f"{what}: unknown merge {merge!r} (one of "
                            f"{', '.join(MERGE_OPS)})")
    if isinstance(tensors, (Tensor, str)) or not hasattr(tensors, "__iter__"):
        raise TfgInputError(f"{what}: give a list of tensors, one per device")
    ts = [convert_to_tensor(t) for t in tensors]
    if not ts:
        raise TfgInputError(f"{what}: an empty group")
    if devices is not None and len(devices) != len(ts):
        raise TfgInputError(f"{what}: {len(ts)} tensors but {len(devices)} devices")
    dt = ts[0].dtype.base
    shape = ts[0].shape
    for t in ts:
        if t.dtype.base != dt:
            raise TfgInputError(f"{what}: tensor {t.name!r} is {t.dtype.base.tf_name} but "
                                f"{ts[0].name!r} is {dt.tf_name}; a group shares one dtype")
        if not _compatible(t.shape, shape):
            raise TfgInputError(f"{what}: tensor {t.name!r} has shape {list(t.shape)} but "
                                f"{ts[0].name!r} has {list(shape)}")
        if t.shape is not None and shape is not None:
            shape = tuple(a if a is not None else c for a, c in zip(shape, t.shape))
    if dt in _NUMERIC_ONLY or (merge in ("min", "max") and dt in _UNORDERED):
        raise TfgInputError(f"{what}: tensor {ts[0].name!r} is {dt.tf_name}; {merge} needs "
                            "numeric tensors" + (" with an order" if dt in _UNORDERED else ""))
    devs = [_device_of(t, None if devices is None else devices[i], what)
            for i, t in enumerate(ts)]
    return list(zip(ts, devs)), dt, shape


def _compatible(a, c):
    if a is None or c is None:
        return True
    return len(a) == len(c) and all(x is None or y is None or x == y for x, y in zip(a, c))


def _device_of(t, given, what, hint="devices=[...]"):
    if given is not None:
        return _device_string(given)
    dev = t.op.node.device
    if not dev:
        raise TfgInputError(f"{what}: tensor {t.name!r} has no device; build it under "
                            f"tb.device(...) or pass {hint}")
    return dev


def _device_string(d):
    if not isinstance(d, str) or not d:
        raise TfgInputError(f"not a device name: {d!r}")
    return DeviceSpec.parse(d).to_string()


__all__ = ["all_reduce", "all_sum", "all_prod", "all_min", "all_max", "all_mean", "reduce",
           "reduce_sum", "broadcast", "from_graph", "MERGE_OPS"]
