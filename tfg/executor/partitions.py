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
from tfg.schemas.ops import control_flow_names, get_op, has_op
from tfg.schemas.ops import signature

SEND_OPS = control_flow_names("send")
RECV_OPS = control_flow_names("recv")
EXIT_OPS = control_flow_names("exit")


def is_partitioned(graph):
    return any(n.op in SEND_OPS or n.op in RECV_OPS for n in graph)


def executable_graph(graph, devices):
    """(graph the session runs, {node: why it cannot run}): partitioned graphs as they are; an
    unpartitioned graph is placed and partitioned when several devices are given.

    The nodes `without_unrunnable` leaves out are returned with the reason, for the step that
    needs one (`check_runnable`).
    """
    if len(devices) < 2 or is_partitioned(graph) or _gpu_alone_runs_it(graph, devices):
        return graph, {}
    from tfg.passes.partition import partition  # lazy: the passes are heavy to import
    graph, unrunnable = without_unrunnable(graph, {d.device_type for d in devices})
    return partition(graph, devices=devices), unrunnable


def _gpu_alone_runs_it(graph, devices):
    """Whether a set of one GPU and its host CPU (`gpu:1`) runs `graph` on the GPU alone:
    every op has a GPU kernel, so nothing needs the host and the graph stays unpartitioned,
    on the set's first device, as a one-device set runs it."""
    host_only = getattr(devices, "host_only", ())
    runners = {d.device_type for d in devices if d.name not in host_only}
    return bool(host_only) and len(devices) - len(host_only) == 1 and not _unrunnable(
        graph, sorted(runners))


def without_unrunnable(graph, device_types):
    """(graph, {node: why}) without the nodes that no type of `device_types` has a kernel
    for, and without everything downstream of them, which could not run either.

    Placement needs a device for every node it is given, but a step that does not need these
    (a SavedModel's signature next to a save function that could not be inlined) must not fail
    because of them: they are left out, as TensorFlow's place_pruned_graph would not place
    them, and a step that needs one fails with the reason (`check_runnable`).
    Before: sig (MatMul) ; save (StatefulPartitionedCall, no kernel) -> save_id (Identity).
    After:  sig ; {'save': "no kernel for op ...", 'save_id': "no kernel for op ..."}.
    """
    # lazy: the passes are heavy to import, and a one-device run never gets here
    from tfg.passes.collective import has_collectives, lower_collectives

    if has_collectives(graph):  # no kernels: partitioning lowers them to ordinary ops first
        graph = lower_collectives(graph)
    why = _unrunnable(graph, sorted(device_types))
    if why:
        graph = graph.copy()
        graph.remove_nodes(list(why))
    return graph, why


def check_runnable(graph, unrunnable, fetch_refs, targets, fed):
    """Raise the reason if the step (on the graph before `without_unrunnable`) needs a node
    that was left out."""
    if unrunnable:
        for name in needed_nodes(graph, fetch_refs, targets, fed):
            if name in unrunnable:
                raise TfgInputError(unrunnable[name])


def _unrunnable(graph, device_types):
    """{name: reason} of nodes without a kernel on any of `device_types` and of their
    transitive consumers (data and control)."""
    from tfg.passes.place.colocation import feasible_types  # lazy: as above, passes are heavy

    why = {}
    for node in graph:
        if not feasible_types(node, device_types):
            why[node.name] = (f"no kernel for op {node.op!r} (node {node.name!r}) on any "
                              f"device type of {', '.join(device_types)}")
    stack = list(why)
    while stack:
        name = stack.pop()
        for consumer, _ in graph.consumers(name, include_control=True):
            if consumer.name not in why:
                why[consumer.name] = why[name]
                stack.append(consumer.name)
    return why


def num_outputs(node):
    """The node's output count, or None when the op is unknown here (checked later)."""
    if not has_op(node.op):
        return None
    sig = get_op(node.op)
    if sig.num_outputs_fixed:  # one tensor per output argument: no attr needed to count them
        return len(sig.outputs)
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


def recv_exit_frames(graph):
    """{_Recv name: names of the frames whose Exits its value may wait for}, on every device
    of a partitioned graph (each _Recv reads through its _Send, matched by tensor name and
    devices); an Exit counts for its frame and every frame around it. Back edges
    (NextIteration) are not followed: an enclosing loop's previous iteration has ended.
    {} where the frames do not validate (callers then assume any frame)."""
    from tfg.graphdef.frames_loops import NEXT_ITERATION_OPS, assign_frames  # lazy: as above

    try:
        _, frame_of = assign_frames(graph, graph.topo_order())
    except TfgInputError:
        return {}
    sends = {}
    for node in graph:
        if node.op in SEND_OPS:
            sends[_transfer_key(node)] = node.name
    memo = {}
    for start in graph:
        if start.op not in RECV_OPS or start.name in memo:
            continue
        stack = [(start.name, False)]
        while stack:
            name, expanded = stack.pop()
            if name in memo:
                continue
            node = graph.get(name)
            if node is None:
                memo[name] = frozenset()
                continue
            if node.op in RECV_OPS:
                ins = [sends[k] for k in (_transfer_key(node),) if k in sends]
            elif node.op in NEXT_ITERATION_OPS:
                ins = []
            else:
                ins = [r.node for r in node.input_refs]
            if not expanded:
                stack.append((name, True))
                stack.extend((i, False) for i in ins if i not in memo)
                continue
            frames = set()
            for i in ins:
                frames |= memo.get(i, frozenset())
            if node.op in EXIT_OPS and frame_of.get(name) is not None:
                frame = frame_of[name]
                while frame is not None:
                    frames.add(frame.name)
                    frame = frame.parent
            memo[name] = frozenset(frames)
    return {n.name: memo[n.name] for n in graph if n.op in RECV_OPS and n.name in memo}


def _transfer_key(node):
    def text(attr):
        value = node.get_attr(attr) if node.has_attr(attr) else b""
        return value if isinstance(value, (bytes, str)) else repr(value)
    return (text("tensor_name"), text("send_device"), text("recv_device"))
