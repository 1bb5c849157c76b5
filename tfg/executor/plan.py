"""Prepare one partition for execution: every node becomes an `Item` with its kernel bound, its
out edges as integer triples, and its initial pending count; done once per (feeds, fetches,
targets), then reused by every step.

    >>> plan = build_plan(graph, device, feeds=[TensorRef("x", 0)], fetches=[TensorRef("y", 0)])
    >>> [(it.name, it.kind, it.pending_init) for it in plan.items][:2]
    [('x:0 (feed)', 'feed', 0), ('y', 'kernel', 1)]

Ops the executor runs itself (no kernel): Switch, Merge, Enter, Exit, NextIteration (and their
Ref forms), LoopCond, ControlTrigger, NoOp, `_Send`/`_Recv` (and `_HostSend`/`_HostRecv`).
A fed tensor becomes a synthetic `feed` item whose edges replace those of the tensor it feeds.
"""
from tfg.errors import GraphValidationError, UnknownOpError
from tfg.executor.calls import args_call
from tfg.graphdef.names import CONTROL
from tfg.kernels.context import KernelContext
from tfg.kernels.registry import get_kernel
from tfg.schemas import truncate
from tfg.schemas.ops import control_flow_names, get_op, has_op, ops_with
from tfg.schemas.ops import signature

KERNEL, FEED, SWITCH, MERGE, ENTER, EXIT, NEXT, IDENT, TRIGGER, NOOP, SEND, RECV = (
    "kernel", "feed", "switch", "merge", "enter", "exit", "next", "ident", "trigger", "noop",
    "send", "recv")

# The executor's own implementation of each control-flow kind the signatures declare.
_KIND_OF_FLOW = {"switch": SWITCH, "merge": MERGE, "enter": ENTER, "exit": EXIT,
                 "next_iteration": NEXT, "loop_cond": IDENT, "control_trigger": TRIGGER,
                 "send": SEND, "recv": RECV}
BUILTIN_KINDS = {name: _KIND_OF_FLOW[get_op(name).control_flow]
                 for name in control_flow_names()}
BUILTIN_KINDS["NoOp"] = NOOP
_BUILTIN_OUTPUTS = {SWITCH: 2, MERGE: 2, ENTER: 1, EXIT: 1, NEXT: 1, IDENT: 1, TRIGGER: 0,
                    NOOP: 0, SEND: 0, RECV: 1}
CONTROL_FLOW_KINDS = frozenset({SWITCH, MERGE, ENTER, EXIT, NEXT, IDENT, TRIGGER})

# Ops whose kernels are BLAS calls (trait "blas": MatMul, convolutions): BLAS already spreads
# one call over every core, so running two at once only oversubscribes the machine (measured:
# an MLP step ran 2x slower with them on the pool on 2 cores). They run on the scheduler thread;
# other ops go to the pool when their inputs are large (numpy's elementwise loops and
# reductions are single-threaded and release the GIL) and other work is ready meanwhile.
BLAS_OPS = ops_with("blas")
# Inputs at least this large make a non-BLAS kernel worth a pool hand-off (~20-50 µs).
POOL_MIN_BYTES = 1 << 19
# Ops whose work does not grow with their inputs (trait "cheap": views, lookups, metadata):
# a large input says nothing about their cost, so they never pay for a hand-off. (Measured:
# the RNN benchmark's GatherV2 of one time step from an 800 KB input went to the pool every
# iteration, 50 thread round trips a step.)
CHEAP_OPS = ops_with("cheap")
# Ops whose kernels may wait for another step or thread (trait "blocking": queues): never on the
# scheduler thread.
BLOCKING_OPS = ops_with("blocking")


class Item:
    """One node of a prepared partition (or a synthetic feed)."""

    __slots__ = ("id", "node", "name", "op", "kind", "fn", "ctx", "needs_step", "ref_inputs",
                 "num_inputs", "num_outputs", "out_edges", "pending_init", "is_merge",
                 "frame_name", "is_constant", "parallel_iterations", "poolable", "blocking",
                 "key_prefix", "fetch_ports", "feed_index", "keeps_ref", "forwards_input",
                 "succ", "deref", "call", "compress", "exit_frames")

    def __init__(self, id_, name, op, kind, node=None):
        self.id = id_
        self.node = node
        self.name = name
        self.op = op
        self.kind = kind
        self.fn = None
        self.ctx = None
        self.needs_step = False
        self.ref_inputs = ()
        self.num_inputs = 0
        self.num_outputs = 0
        self.out_edges = []  # (dst item id, src port or CONTROL, dst input index or CONTROL)
        self.pending_init = 0
        self.is_merge = kind == MERGE
        self.frame_name = None
        self.is_constant = False
        self.parallel_iterations = 10
        self.poolable = False
        self.blocking = False
        self.key_prefix = None
        self.fetch_ports = ()  # ((port, fetch index), ...)
        self.feed_index = -1
        self.keeps_ref = False
        self.forwards_input = False
        # Filled by Plan: out_edges with the destination Item itself and what the executor reads
        # of it per edge, (item, id, port, idx, is_merge, pending_init), and
        # the input indices where a Ref may arrive that the kernel takes by value (None: none).
        self.succ = ()
        self.deref = None
        # A kernel's prepared call, `call(args, step) -> outputs` (tfg/executor/calls.py).
        self.call = None
        # A _Send/_Recv of `tfg partition --compress-transfers bf16`: float32 crosses as its
        # upper 16 bits (tfg/schemas/truncate.py).
        self.compress = False
        # A _Recv: the frames whose Exits the sent value may wait for, on any device
        # (partitions.recv_exit_frames; None: not known, so possibly any).
        self.exit_frames = None

    def __repr__(self):
        return f"<Item {self.id} {self.name} {self.kind}>"


class Plan:
    """A prepared partition: items, roots, frame Enter counts, and the fetch/feed wiring."""

    def __init__(self, device, items, feeds, fetches, frame_inputs):
        self.device = device
        self.items = items
        self.roots = [it.id for it in items if it.pending_init == 0]
        self.feeds = feeds  # tensor refs, in feed index order
        self.fetches = fetches  # tensor refs, in fetch index order
        self.frame_inputs = frame_inputs  # frame_name -> number of Enter items
        self.has_control_flow = any(it.kind in CONTROL_FLOW_KINDS for it in items)
        self.has_recv = any(it.kind == RECV for it in items)
        self.has_send = any(it.kind == SEND for it in items)
        self.schedule = None  # the fast path's precomputed schedule, built on demand
        self.loops = None  # frame name -> LoopProgram (tfg/executor/loops.py), built on demand
        # whether a kernel of the step writes a variable in place (None: of this plan;
        # tfg/executor/ref_aliases.py)
        self.variable_writes = None
        _link(items)


def _link(items):
    """Bind what the executor would otherwise look up per node and edge at run time."""
    sources = {}  # (dst id, input index) -> (src item, port)
    for it in items:
        it.succ = tuple((items[dst], dst, port, idx, items[dst].is_merge,
                         items[dst].pending_init) for dst, port, idx in it.out_edges)
        for dst, port, idx in it.out_edges:
            if port >= 0:
                sources[(dst, idx)] = (it, port)
    for it in items:
        if it.kind != KERNEL:
            continue
        deref = tuple(i for i in range(it.num_inputs) if i not in it.ref_inputs
                      and may_carry_ref(*sources.get((it.id, i), (None, 0))))
        it.deref = deref or None
        it.call = args_call(it)


def may_carry_ref(src, port):
    """Whether output `port` of `src` can be a Ref (a reference variable's handle)."""
    if src is None:
        return True
    if src.kind == KERNEL:
        dtypes = src.ctx.output_dtypes
        return port >= len(dtypes) or dtypes[port].is_ref
    if src.kind in (FEED, RECV):
        return False  # feeds are converted arrays; a _Send reads its Ref before sending
    return src.keeps_ref and not (src.kind == MERGE and port == 1)


def build_plan(graph, device, feeds=(), fetches=(), targets=()):
    """Prepare the nodes of `graph` (already pruned) to run on `device`.

    Feeds cut their tensor's edges off the producer; fetches name the (node, port) outputs to
    record. Raises UnknownOpError naming the node when an op has no kernel on the device.
    """
    feeds = list(feeds)
    items, index = [], {}
    for node in graph:
        kind = BUILTIN_KINDS.get(node.op, KERNEL)
        item = Item(len(items), node.name, node.op, kind, node)
        index[node.name] = item
        items.append(item)
        _bind(item, node, device)
    feed_items = {}
    for fi, ref in enumerate(feeds):
        item = Item(len(items), f"{ref.node}:{ref.port} (feed)", "_Feed", FEED)
        item.num_outputs = 1
        item.feed_index = fi
        items.append(item)
        feed_items[(ref.node, ref.port)] = item
    for item in items:
        if item.kind == FEED:
            continue
        node = item.node
        n_data = 0
        for ref in node.input_refs:
            feed = feed_items.get((ref.node, ref.port))
            src = feed if feed is not None else index.get(ref.node)
            if src is None and ref.port == CONTROL:
                # A control edge from a fed (pruned) node waits for the feed instead.
                src = feed_items.get((ref.node, 0))
            if src is None:
                raise GraphValidationError(f"node {node.name!r} ({node.op}) has input "
                                           f"{str(ref)!r} from a node not in the graph")
            if ref.port == CONTROL:
                src.out_edges.append((item.id, CONTROL, CONTROL))
                item.pending_init += 2 if item.is_merge else 1
                continue
            if feed is None and ref.port >= src.num_outputs:
                raise GraphValidationError(
                    f"node {node.name!r} ({node.op}) reads {str(ref)!r} but {src.name!r} "
                    f"({src.op}) has {src.num_outputs} output(s)")
            src.out_edges.append((item.id, ref.port if feed is None else 0, n_data))
            n_data += 1
            if not item.is_merge:
                item.pending_init += 1
        item.num_inputs = n_data
        if item.is_merge:
            item.pending_init += 1  # bit 0: still waiting for a live data input
    fetch_ports = {}
    for fi, ref in enumerate(fetches):
        item = feed_items.get((ref.node, ref.port))
        port = 0 if item is not None else ref.port
        if item is None:
            item = index.get(ref.node)
            if item is None:
                raise GraphValidationError(f"fetch {ref.node}:{ref.port}: no such node")
            if ref.port >= item.num_outputs:
                raise GraphValidationError(f"fetch {ref.node}:{ref.port}: {ref.node!r} "
                                           f"({item.op}) has {item.num_outputs} output(s)")
        fetch_ports.setdefault(item.id, []).append((port, fi))
    for iid, ports in fetch_ports.items():
        items[iid].fetch_ports = tuple(ports)
    frame_inputs = {}
    for item in items:
        if item.kind == ENTER:
            frame_inputs[item.frame_name] = frame_inputs.get(item.frame_name, 0) + 1
    return Plan(device, items, feeds, list(fetches), frame_inputs)


def _bind(item, node, device):
    """Attach the kernel (or the builtin's attrs) and the output count to an item."""
    kind = item.kind
    if kind != KERNEL:
        item.num_outputs = _BUILTIN_OUTPUTS[kind]
        if kind == ENTER:
            item.frame_name = node.get_attr("frame_name", b"")
            item.is_constant = node.get_attr("is_constant", False)
            pi = node.get_attr("parallel_iterations", 10)
            if (not isinstance(item.frame_name, (bytes, str)) or type(pi) is not int
                    or not isinstance(item.is_constant, bool)):  # wrong attr types
                raise GraphValidationError(
                    f"node {node.name!r} ({node.op}) needs a string frame_name, an int "
                    "parallel_iterations and a bool is_constant")
            item.parallel_iterations = max(1, pi)
        elif kind in (SEND, RECV):
            item.key_prefix = _key_prefix(node)
            item.compress = truncate.marked(node)
        if kind in (SWITCH, MERGE, ENTER, EXIT, NEXT, IDENT):
            item.keeps_ref = _output_is_ref(node)
        return
    kd = get_kernel(node.op, device.device_type, node.name)
    item.fn = kd.fn
    item.needs_step = kd.needs_step
    item.forwards_input = kd.forwards_input
    refs = set(kd.ref_inputs)
    if has_op(node.op):
        try:
            refs.update(signature.ref_input_indices(node))
        except Exception:  # a malformed attr: the kernel will say what is wrong
            pass
    item.ref_inputs = tuple(sorted(refs))
    item.ctx = _context(node, device)
    item.num_outputs = _num_outputs(node, item.ctx)
    item.poolable = node.op not in BLAS_OPS and node.op not in CHEAP_OPS
    item.blocking = node.op in BLOCKING_OPS


def _context(node, device):
    try:
        return KernelContext.for_node(node, device=device.name, xp=device.xp)
    except UnknownOpError:
        # A kernel without a signature (a private op): it still sees the node's own attrs.
        attrs = {name: node.get_attr(name) for name in node.attr}
        return KernelContext(node, attrs, device.xp, device.name, ())


def _num_outputs(node, ctx):
    if ctx.output_dtypes:
        return len(ctx.output_dtypes)
    if has_op(node.op):
        try:
            return signature.num_outputs(node)
        except Exception:
            pass
    graph = node._graph
    ports = [r.port for c, i in graph.consumers(node.name) for r in [c.input_refs[i]]]
    return max(ports) + 1 if ports else 1


def _output_is_ref(node):
    try:
        return signature.output_dtypes(node)[0].is_ref
    except Exception:
        return node.op.startswith("Ref")


def _key_prefix(node):
    """`send_device;incarnation;recv_device;tensor_name;` of a _Send/_Recv node."""
    def s(name):
        v = node.get_attr(name, b"")
        return v.decode() if isinstance(v, bytes) else str(v)

    inc = int(node.get_attr("send_device_incarnation", 1)) & 0xFFFFFFFFFFFFFFFF
    return f"{s('send_device')};{inc:016x};{s('recv_device')};{s('tensor_name')};"
