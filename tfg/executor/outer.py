"""The nodes around compiled loops as one straight-line schedule: each loop one call.

    >>> view = outer_view(plan)     # None unless every loop of the plan is compiled
    >>> [it.op for it in view.items if it.op == LOOP_OP]
    ['_CompiledLoop', '_CompiledLoop']          # a BiLSTM's two directions

A plan with while loops runs on the dataflow executor, which hands each loop to its compiled
program (tfg/executor/loops.py) once all its Enters are in; but every node outside the loops
still goes through the ready queue, pending counts and frame bookkeeping, once per step
(a Keras BiLSTM: 103 dispatches a step, 50 of them Consts, 24 Enters, 20-28% of its step).
Where that machinery decides nothing, this module rewrites the plan's root frame as a plan
without control flow that the fast path (tfg/executor/fastpath.py) runs as one list of
prepared calls:

    before: Const -> Enter -> [loop] -> Exit -> TensorListStack -> Identity    (dataflow)
    after:  Const in the constant template; `loop(enter values) -> exit values` one call;
            TensorListStack one call; the Identity shares its input's slot

A plan qualifies when every frame is compiled (then every loop is a leaf of the root frame:
loops.py does not compile an outer loop), no Enter is fetched, no node outside the loops is a
Switch, Merge, ControlTrigger, Send or Recv (nothing outside the loops can be dead: the loops'
Enter values are live, which is the condition under which the dataflow executor too runs the
compiled loop), and the only edges into a frame are into its Enters and out of it from its
Exits. A loop starts once all its Enters' inputs and control inputs are done, as in the
dataflow executor; any topological order of the root frame is one the dataflow executor may
take, so values are the same. Traced steps and multi-device steps keep the dataflow executor.
"""
import numpy as np

from tfg.executor import plan as P
from tfg.executor.executor import node_error
from tfg.executor.loop_pair_items import pair_loops
from tfg.executor.loop_pairs import PAIR_OP
from tfg.executor.loops import LoopNodeError, compile_loops
from tfg.graphdef.names import CONTROL
from tfg.kernels.resources import Ref

LOOP_OP = "_CompiledLoop"
# The root frame's kinds this rewrite runs without the dataflow executor.
_ROOT_KINDS = frozenset({P.KERNEL, P.FEED, P.NOOP})


class OuterView:
    """A plan-shaped view of the root frame (what build_program reads): items, fetches,
    device; `loops`: the loop items, each with its LoopProgram."""

    def __init__(self, device, items, fetches, loops):
        self.device = device
        self.items = items
        self.fetches = fetches
        self.loops = loops


class _NoGroup:
    """What LoopProgram.run polls for another partition's failure: a one-plan step has none."""
    error = None


_NO_GROUP = _NoGroup()


class _Dtype:
    __slots__ = ("is_ref",)

    def __init__(self, is_ref):
        self.is_ref = is_ref


class _LoopContext:
    """The loop call's context: what the fast path and node errors read of a kernel's."""

    def __init__(self, name, exits):
        self.name = name
        self.op = LOOP_OP
        self.xp = np
        # an Exit of a Ref-typed loop variable passes the Ref on (readers read it)
        self.output_dtypes = [_Dtype(e.keeps_ref) for e in exits]


def outer_view(plan):
    """The OuterView of `plan`, or None when it does not qualify (module docstring)."""
    items = plan.items
    if not plan.has_control_flow or plan.device.device_type != "CPU":
        return None
    enters = {}
    for it in items:
        if it.kind == P.ENTER:
            if it.fetch_ports:
                return None
            enters.setdefault(it.frame_name, []).append(it)
    if plan.loops is None:
        plan.loops = compile_loops(plan)
    if not enters or any(name not in plan.loops for name in enters):
        return None
    frame_of = {}  # member id -> frame name (Enters included)
    exits_of = {}
    for name, frame_enters in enters.items():
        program = plan.loops[name]
        for e in frame_enters:
            frame_of[e.id] = name
        exits_of[name] = [e for e, _ in program.exits]
    _members(items, enters, frame_of)
    for it in items:
        if it.id not in frame_of and it.kind not in _ROOT_KINDS:
            return None
    # New ids: the root items in plan order, each loop where its first Enter is.
    new_id, loops, order = {}, {}, []  # order: root items and (frame name,) per loop
    for it in items:
        name = frame_of.get(it.id)
        if name is None:
            new_id[it.id] = len(order)
            order.append(it)
        elif it.kind == P.ENTER and name not in loops:
            loops[name] = len(order)
            order.append((name,))
    enter_index = {e.id: i for name in enters for i, e in enumerate(enters[name])}
    exit_index = {e.id: i for name in exits_of for i, e in enumerate(exits_of[name])}
    edges = [[] for _ in order]  # new id -> out edges
    for it in items:
        name = frame_of.get(it.id)
        if name is None:
            src, port_of = new_id[it.id], (lambda port: port)
        elif it.id in exit_index:
            src, k = loops[name], exit_index[it.id]
            port_of = (lambda port, k=k: k if port >= 0 else CONTROL)
        else:
            for dst, _, _ in it.out_edges:  # inside the frame, or into its Exits
                if frame_of.get(dst) != name or items[dst].kind == P.ENTER:
                    return None
            continue
        for dst, port, idx in it.out_edges:
            dname = frame_of.get(dst)
            if dname is None:
                edges[src].append((new_id[dst], port_of(port), idx))
            elif items[dst].kind == P.ENTER and dname != name:
                into = loops[dname]
                edges[src].append((into, port_of(port), CONTROL if port < 0
                                   else enter_index[dst]))
            else:
                return None  # an edge into a frame past its Enters
    view_items = []
    for nid, it in enumerate(order):
        if type(it) is tuple:
            name = it[0]
            view_items.append(_loop_item(nid, name, enters[name], exits_of[name],
                                         plan.loops[name]))
        else:
            view_items.append(_copy(it, nid))
        view_items[-1].out_edges = edges[nid]
    for name, nid in loops.items():
        view_items[nid].fetch_ports = tuple(
            (k, fi) for k, e in enumerate(exits_of[name]) for _, fi in e.fetch_ports)
    # two independent loops of the same cell (a Bidirectional layer's) as one call that
    # runs them in lockstep, their cells batched (loop_pairs.py)
    loop_items = pair_loops(view_items, [view_items[nid] for nid in loops.values()],
                            _pair_item)
    return OuterView(plan.device, view_items, plan.fetches, loop_items)


def _members(items, enters, frame_of):
    """Mark each frame's members (loop_graph.frame_members: from the Enters, not past the
    Exits) in `frame_of`."""
    for name, frame_enters in enters.items():
        stack = [d for e in frame_enters for d, _, _ in e.out_edges]
        while stack:
            iid = stack.pop()
            if iid in frame_of:
                continue
            frame_of[iid] = name
            if items[iid].kind != P.EXIT:
                stack.extend(d for d, _, _ in items[iid].out_edges)


def _copy(it, nid):
    new = P.Item(nid, it.name, it.op, it.kind, it.node)
    for attr in P.Item.__slots__:
        if attr not in ("id", "out_edges", "succ"):
            setattr(new, attr, getattr(it, attr))
    return new


def _loop_item(nid, name, frame_enters, exits, program):
    """A kernel-like item whose call runs the loop: inputs the Enters' (in order), outputs
    the Exits' values."""
    label = name.decode(errors="replace") if isinstance(name, bytes) else str(name)
    item = P.Item(nid, f"while loop {label!r}", LOOP_OP, P.KERNEL)
    item.num_inputs = len(frame_enters)
    item.num_outputs = len(exits)
    item.needs_step = True
    item.ref_inputs = tuple(range(len(frame_enters)))  # Refs are read below, not by the call
    item.ctx = _LoopContext(item.name, exits)
    ids = [e.id for e in frame_enters]
    n_out = len(exits)
    # An Enter whose output is no Ref reads a Ref arriving at it (control.forward), here
    # when the loop starts, naming the Enter when that fails (an uninitialized variable).
    reads = [(k, e) for k, e in enumerate(frame_enters) if not e.keeps_ref]

    def run_loop(ctx, step, *values):
        for k, enter in reads:
            if type(values[k]) is Ref:
                try:
                    values = values[:k] + (values[k].get(),) + values[k + 1:]
                except Exception as e:  # noqa: BLE001 - named as the Enter would be
                    raise node_error(enter, e) from e
        try:
            got = program.run(dict(zip(ids, values)), step, _NO_GROUP)
        except LoopNodeError as e:
            raise node_error(e.item, e.error) from e.error
        return tuple(v for _, v in got) if n_out != 1 else got[0][1]

    run_loop.program = program
    run_loop.enter_ids, run_loop.exits = ids, exits
    item.fn = run_loop
    return item


def _pair_item(a, b, runner):
    """The call of two loop items `a` and `b` (_loop_item) run in lockstep by `runner`
    (loop_pairs.pair_runner): inputs a's then b's, outputs likewise."""
    fa, fb = a.fn, b.fn
    item = P.Item(a.id, f"{a.name} with {b.name}", PAIR_OP, P.KERNEL)
    na = a.num_inputs
    item.num_inputs = na + b.num_inputs
    item.num_outputs = a.num_outputs + b.num_outputs
    item.needs_step = True
    item.ref_inputs = tuple(range(item.num_inputs))
    item.ctx = _LoopContext(item.name, list(fa.exits) + list(fb.exits))
    ids_a, ids_b = fa.enter_ids, fb.enter_ids
    one_a, one_b = a.num_outputs == 1, b.num_outputs == 1

    def run_pair(ctx, step, *values):
        if any(type(v) is Ref for v in values):  # read as each loop item reads them, in turn
            ga, gb = fa(a.ctx, step, *values[:na]), fb(b.ctx, step, *values[na:])
            return (((ga,) if one_a else tuple(ga)) + ((gb,) if one_b else tuple(gb)))
        try:
            ga, gb = runner(dict(zip(ids_a, values[:na])), dict(zip(ids_b, values[na:])),
                            step)
        except LoopNodeError as e:
            raise node_error(e.item, e.error) from e.error
        return tuple(v for _, v in ga) + tuple(v for _, v in gb)

    run_pair.programs = (fa.program, fb.program)
    run_pair.runner = runner
    item.fn = run_pair
    return item
