"""Loop bodies compiled once: a while loop's frame as a fixed schedule of prepared calls over
integer slots, so that an iteration is a tight loop instead of the dataflow executor's per-node
bookkeeping (pending counts, dead counts, tags, ready queue).

    >>> programs = compile_loops(plan)          # frame name -> LoopProgram, where one applies
    >>> exits = programs[b"rnn/while_context"].run(enter_values, step, group)
    >>> exits                                   # (Exit item, its value) once the loop ended
    [(<Item 41 rnn/Exit_1 exit>, array(...))]

Before: every iteration of `while i < n: i, x = i + 1, x * c` dispatches 9 nodes through the
ready queue, each with its frame and iteration state. After: the same 9 prepared calls run in
a precomputed order per iteration, the predicate read once.

A frame is compiled when the executor's exact semantics reduce to this order, that is when,
as in every loop `tf.while_loop` or tfg's builder writes:
- its nodes are reached from its Enters without crossing its Exits, and take every input from
  inside the frame (or an Enter); none is a nested frame's Enter, a Send/Recv, a kernel that
  may block (queues) or a fetched tensor (an Exit may be fetched);
- each non-constant Enter feeds only Merges; each Merge joins one such Enter and one
  NextIteration; all Switches take the one LoopCond's output as predicate (a cond inside the
  body has other Switches: not compiled);
- with the predicate true, the nodes after a Switch's output 1 are live and those after
  output 0 dead, and the other way round when it is false: each node depends on one side at
  most, every NextIteration on output 1 and every Exit on output 0;
- no Enter depends on an Exit of the same frame (the loop could not start before it ends),
  nor on a _Recv (another device's dependencies are not visible here).
Then an iteration runs what the predicate needs, reads it, and runs in dependency order the
other nodes of no side (a ControlTrigger is of none: it is never dead) and those of the live
side; iterations run one after the other,
which is a valid schedule for every `parallel_iterations` (stack pushes and pops keep their
order). A zero-iteration loop runs the false side at once. Dead Enter values (a loop in an
untaken cond branch) and traced steps go through the dataflow executor, as do frames that do
not qualify. Nothing here changes values: the same kernels run on the same inputs.
"""
import numpy as np

from tfg.executor import plan as P
from tfg.executor.calls import slot_call
from tfg.executor.loop_calls import (INDEX, forward, guarded, merge_call, scalar_call,
                                     switch_call)
from tfg.executor.devices import to_host
from tfg.kernels.math_ops import SCALAR_OPS, scalar_kernel
from tfg.schemas.ops import get_op, has_op
from tfg.kernels.resources import Ref

_ALWAYS, _TRUE, _FALSE = 0, 1, 2  # which side of the loop predicate a node depends on


class LoopProgram:
    """One frame's compiled iteration (see the module docstring)."""

    def __init__(self, frame_name, nslots, enter_slots, merges, hoisted, header, pred_slot,
                 body, tail, exits, index_read, scalar_enters=()):
        self.frame_name = frame_name
        self.nslots = nslots
        self.enter_slots = enter_slots  # Enter item id -> slot of its value
        # (out slot, index slot, Enter slot, Enter's input index, NextIteration slot, its
        # input index, deref) per Merge
        self.merges = merges
        self.hoisted = hoisted  # (call, item): constants, run once before the first iteration
        self.header = header  # (call, item): what the predicate needs, in order
        self.pred_slot = pred_slot
        self.body = body  # (call, item): the rest when the predicate is true
        self.tail = tail  # (call, item): the rest when it is false (the Exits among them)
        self.exits = exits  # (Exit item, slot of its value)
        self.index_read = index_read  # whether a node reads a loop Merge's value_index
        self.scalar_enters = scalar_enters  # slots of 0-d invariants to keep as numpy scalars
        self.header_rest, self.body_rest = header, body  # without the loop invariants
        # the Merges whose value changes: a passed-through one keeps its slot as it is
        moving = [m for m in merges if m[0] != m[4]]
        self._outs = tuple(m[0] for m in moving)
        self._nexts = tuple(m[4] for m in moving)
        self._deref = any(m[6] for m in merges)

    def run(self, enter_values, step, group):
        """Run the loop from {Enter item id: value}; -> [(Exit item, value)], or None when
        the step failed elsewhere meanwhile. A kernel's error propagates as (item, error)."""
        vals = [None] * self.nslots
        for iid, slot in self.enter_slots.items():
            vals[slot] = enter_values[iid]
        for slot in self.scalar_enters:
            v = vals[slot]
            if type(v) is np.ndarray and v.ndim == 0 and v.dtype.kind in "biuf":
                vals[slot] = v[()]
        for out, idx, enter_slot, enter_index, _, _, deref in self.merges:
            v = vals[enter_slot]
            vals[out] = v.get() if deref and type(v) is Ref else v
            vals[idx] = INDEX[enter_index]
        header, body, pred_slot = self.header, self.body, self.pred_slot
        outs, nexts = self._outs, self._nexts
        single = len(outs) == 1
        item = None
        try:
            for call, item in self.hoisted:
                call(vals, step)
            first = True
            while True:
                for call, item in header:
                    call(vals, step)
                pred = vals[pred_slot]
                if type(pred) is not np.bool_:
                    if type(pred) is Ref:
                        pred = pred.get()
                    if not isinstance(pred, (np.ndarray, np.generic, bool)):
                        pred = to_host(pred)  # a predicate computed on a GPU
                if not pred:
                    break
                for call, item in body:
                    call(vals, step)
                # The Merges take the NextIterations' values all at once (a body may swap
                # two loop variables).
                if single:
                    vals[outs[0]] = vals[nexts[0]]
                elif not outs:
                    pass
                else:
                    new = [vals[s] for s in nexts]
                    for s, v in zip(outs, new):
                        vals[s] = v
                if first:
                    first = False
                    header, body = self.header_rest, self.body_rest
                    if self.index_read or self._deref:
                        self._after_first(vals)
                elif self._deref:
                    self._after_first(vals)
                if group.error is not None:
                    return None
            for call, item in self.tail:
                call(vals, step)
        except Exception as e:  # noqa: BLE001 - the executor names the node
            raise LoopNodeError(item, e) from e
        return [(exit_item, vals[slot]) for exit_item, slot in self.exits]

    def _after_first(self, vals):
        """value_index of the Merges from the second iteration on; Refs read."""
        for out, idx, _, _, _, next_index, deref in self.merges:
            vals[idx] = INDEX[next_index]
            if deref and type(vals[out]) is Ref:
                vals[out] = vals[out].get()


class LoopNodeError(Exception):
    """A node of a compiled loop failed: `item` and the original `error`."""

    def __init__(self, item, error):
        super().__init__(str(error))
        self.item, self.error = item, error


class _Unsupported(Exception):
    """A frame this module does not compile (the dataflow executor runs it)."""


def compile_loops(plan, why=None):
    """{frame name: LoopProgram} for the frames of `plan` that qualify; `why` (a dict), if
    given, gets {frame name: reason} for the others."""
    items = plan.items
    sources = [[] for _ in items]  # item id -> [(src item, port, input index)]
    for it in items:
        for dst, port, idx in it.out_edges:
            sources[dst].append((it, port, idx))
    enters = {}
    for it in items:
        if it.kind == P.ENTER:
            enters.setdefault(it.frame_name, []).append(it)
    out = {}
    for name, frame_enters in enters.items():
        try:
            out[name] = _compile_frame(name, frame_enters, items, sources)
        except _Unsupported as e:
            if why is not None:
                why[name] = str(e)
    return out


def _compile_frame(name, frame_enters, items, sources):
    members, exits = _members(name, frame_enters, items)
    if members is None:
        raise _Unsupported("a nested frame")
    member_ids = {it.id for it in members}
    enter_ids = {it.id for it in frame_enters}
    for it in members:
        if it.kind in (P.SEND, P.RECV, P.FEED) or it.blocking:
            raise _Unsupported(f"{it.name!r} ({it.op}) communicates or may block")
        if it.fetch_ports and it.kind != P.EXIT:
            raise _Unsupported(f"{it.name!r} is fetched")
        for src, _, _ in sources[it.id]:
            if src.id not in member_ids and src.id not in enter_ids:
                raise _Unsupported(f"{it.name!r} reads {src.name!r} from outside the frame")
    if _enter_depends_on_exit(frame_enters, exits, sources, member_ids):
        raise _Unsupported("an Enter may wait for an Exit of its own frame")
    loop_merges, inner_merges = _merges(members, sources)
    for enter in frame_enters:
        if not enter.is_constant and any(d not in loop_merges for d, _, _ in enter.out_edges):
            raise _Unsupported(f"Enter {enter.name!r} feeds something else than a Merge")
    loop_conds = [it for it in members if it.kind == P.IDENT]
    if len(loop_conds) != 1:
        raise _Unsupported(f"{len(loop_conds)} LoopConds")
    pred = loop_conds[0]
    # Which side of the predicate each node depends on, in a topological order of one
    # iteration (NextIteration -> Merge edges are the next iteration's).
    order = _iteration_order(members, member_ids, sources, loop_merges)
    if order is None:
        raise _Unsupported("a cycle within one iteration")
    side, cond, loop_switches = _sides(order, sources, enter_ids, loop_merges, pred)
    return _build(name, frame_enters, items, sources, order, side, cond, loop_merges,
                  loop_switches, pred, exits)


def _merges(members, sources):
    """{id: sorted data inputs} of the loop's Merges (an Enter and a NextIteration) and the
    set of ids of the others (a cond's, inside the body)."""
    loop_merges, inner = {}, set()
    for it in members:
        if it.kind != P.MERGE:
            continue
        data = sorted((idx, src) for src, port, idx in sources[it.id] if port >= 0)
        if any(port < 0 for _, port, _ in sources[it.id]):
            raise _Unsupported(f"Merge {it.name!r} has a control input")
        kinds = sorted(src.kind for _, src in data)
        if kinds == sorted([P.ENTER, P.NEXT]):
            enter = next(src for _, src in data if src.kind == P.ENTER)
            if enter.is_constant:
                raise _Unsupported(f"Merge {it.name!r} of a constant Enter")
            if max(idx for idx, _ in data) >= len(INDEX):
                raise _Unsupported(f"Merge {it.name!r}: input index too large")
            loop_merges[it.id] = data
        elif P.ENTER in kinds or P.NEXT in kinds or not data:
            raise _Unsupported(f"Merge {it.name!r} joins {kinds}")
        else:
            inner.add(it.id)
    return loop_merges, inner


_EMPTY = frozenset()


def _sides(order, sources, enter_ids, loop_merges, pred):
    """Per node: the side of the loop predicate it depends on, and its condition within
    the iteration: the set of (predicate source, branch) of the cond Switches it is after
    (empty: live whenever its side is; None: not known statically, checked when it runs)."""
    side, cond, loop_switches = {}, {}, set()
    for it in order:
        if it.kind == P.SWITCH:
            data = dict((idx, (src, port)) for src, port, idx in sources[it.id] if port >= 0)
            if len(data) != 2:
                raise _Unsupported(f"Switch {it.name!r} without two inputs")
            if data[1] == (pred, 0):
                loop_switches.add(it.id)
        if it.id in loop_merges:
            side[it.id], cond[it.id] = _ALWAYS, _EMPTY
            continue
        s, conds = _ALWAYS, []
        for src, port, idx in sources[it.id]:
            if src.id in enter_ids:
                continue
            s2, c2 = side[src.id], cond[src.id]
            if src.id in loop_switches and port >= 0:
                if s2 != _ALWAYS:
                    raise _Unsupported(f"{src.name!r}: a loop Switch after another")
                s2 = _TRUE if port == 1 else _FALSE
            elif src.kind == P.SWITCH and port >= 0 and c2 is not None:
                key = next((s.id, p) for s, p, i in sources[src.id] if i == 1 and p >= 0)
                c2 = c2 | {(key, port)}
            # (a control edge from a Switch fires when the Switch ran, whichever side it took)
            if s2 != _ALWAYS:
                if s not in (_ALWAYS, s2):
                    raise _Unsupported(f"{it.name!r} depends on both sides: always dead")
                s = s2
            conds.append(c2)
        if it.kind == P.MERGE:
            c = _merge_cond(conds)
        elif it.kind == P.TRIGGER:
            s, c = _ALWAYS, _EMPTY  # never dead: it runs once its inputs arrived, dead or not
        elif any(c2 is None for c2 in conds):
            c = None
        else:
            c = _EMPTY.union(*conds)
        side[it.id], cond[it.id] = s, c
        if it.kind in (P.NEXT, P.EXIT, P.IDENT) or it.id in loop_switches:
            want = {P.NEXT: _TRUE, P.EXIT: _FALSE}.get(it.kind, _ALWAYS)
            if s != want or c != _EMPTY:
                raise _Unsupported(f"{it.name!r} ({it.op}) is not on its side of the loop")
    return side, cond, loop_switches


def _merge_cond(conds):
    """A cond's Merge is as live as its branches together: {p: 0} and {p: 1} on top of
    the same condition give that condition; anything else is checked when it runs."""
    if any(c is None for c in conds):
        return None
    if len(set(conds)) == 1:
        return conds[0]
    if len(conds) == 2:
        a, b = conds
        da, db = a - b, b - a
        if len(da) == 1 and len(db) == 1:
            (ka, pa), = da
            (kb, pb), = db
            if ka == kb and {pa, pb} == {0, 1}:
                return a & b
    return None


def _build(name, frame_enters, items, sources, order, side, cond, loop_merges, loop_switches,
           pred, exits):
    """Slots, aliases and calls from the analysis of _compile_frame."""
    slot = {}  # (item id, port) -> slot; an alias shares its input's slot

    def new(key):
        slot[key] = n = len(slot_count)
        slot_count.append(key)
        return n
    slot_count = []
    for e in frame_enters:
        new((e.id, 0))
    aliased = set()
    live = {}  # item id -> slots that hold a dead value when the node was dead
    ins_of = {}
    for it in order:
        ins = [None] * it.num_inputs
        controls = []
        for src, port, idx in sources[it.id]:
            if port >= 0:
                if it.id in loop_merges:
                    continue
                ins[idx] = slot[(src.id, port)]
            elif cond.get(src.id, _EMPTY) != _EMPTY:
                controls.extend(live[src.id])
        if it.id not in loop_merges and None in ins:
            raise _Unsupported(f"{it.name!r} ({it.op}) misses an input")
        ins_of[it.id] = (ins, controls)
        if _aliased(it, ins, controls, sources, loop_switches):
            aliased.add(it.id)
            for p in range(it.num_outputs):
                slot[(it.id, p)] = ins[0]
            live[it.id] = (ins[0],)
            continue
        for p in range(it.num_outputs):
            new((it.id, p))
        if it.num_outputs and it.kind != P.SWITCH:
            live[it.id] = (slot[(it.id, 0)],)
        elif it.kind == P.SWITCH:
            live[it.id] = tuple(ins)
        else:
            live[it.id] = (new((it.id, "live")),) if cond[it.id] != _EMPTY else ()
    merges = []
    index_read = False
    for mid, data in loop_merges.items():
        (i0, s0), (i1, s1) = data
        (ei, enter), (ni, nxt) = ((i0, s0), (i1, s1)) if s0.kind == P.ENTER else ((i1, s1),
                                                                                 (i0, s0))
        deref = _deref(items[mid], enter, 0) or _deref(items[mid], nxt, 0)
        merges.append((slot[(mid, 0)], slot[(mid, 1)], slot[(enter.id, 0)], ei,
                       slot[(nxt.id, 0)], ni, deref))
        index_read = index_read or any(port == 1 for _, port, _ in items[mid].out_edges)
    # The header computes the predicate; then one pass over the rest runs the nodes of no
    # side and those of the live side, in dependency order (a node of no side may follow one
    # of a side: a ControlTrigger after the body's pivot, the stack pops after it).
    header_ids = _ancestors(pred, {it.id for it in order}, sources)
    hoisted, header, true_pass, false_pass = [], [], [], []
    invariant = {e.id for e in frame_enters if e.is_constant}
    # a loop variable passed through unchanged (a lowered While carries its captures so):
    # its NextIteration shares the Merge's slot
    invariant.update(mid for mid, data in loop_merges.items()
                     if any(src.kind == P.NEXT and slot[(src.id, 0)] == slot[(mid, 0)]
                            for _, src in data))
    once = set()  # ids of nodes computed in the first iteration only (loop-invariant)
    for it in order:
        if _invariant(it, sources, invariant, cond, aliased):
            invariant.add(it.id)
            if it.kind == P.KERNEL and it.num_inputs:
                once.add(it.id)
        if it.id in loop_merges or it.id in aliased:
            continue
        ins, controls = ins_of[it.id]
        outs = [slot[(it.id, p)] for p in range(it.num_outputs)]
        call = _call(it, ins, outs, sources)
        if cond[it.id] != _EMPTY and it.kind not in (P.SWITCH, P.MERGE):
            # the inputs that may be dead: after a cond's Switch, or inside a cond
            guard = tuple(dict.fromkeys(
                [s for s, (src, port) in zip(ins, _data_sources(it, sources))
                 if cond.get(src.id, _EMPTY) != _EMPTY
                 or (src.kind == P.SWITCH and src.id not in loop_switches)] + controls))
            own = live[it.id][0] if not outs and live[it.id] else None
            if guard:
                call = guarded(call, guard, outs, own)
        if call is None:
            continue
        if it.op == "Const" and not it.num_inputs and cond[it.id] == _EMPTY:
            # The same value every iteration: computed once. A number read only by kernels
            # with a scalar fast path is kept as a numpy scalar for them (`i + 1`, `x * c`).
            if all(items[d].op in SCALAR_OPS for d, port, _ in it.out_edges if port >= 0):
                call = _as_scalar(call, outs[0])
            hoisted.append((call, it))
        elif it.id in header_ids:
            header.append((call, it))
        else:
            if side[it.id] != _FALSE:
                true_pass.append((call, it))
            if side[it.id] != _TRUE:
                false_pass.append((call, it))
    # Loop-invariant numbers read only by kernels with a scalar fast path: as numpy scalars.
    scalar_enters = tuple(slot[(e.id, 0)] for e in frame_enters if e.is_constant and all(
        items[d].op in SCALAR_OPS for d, port, _ in e.out_edges if port >= 0))
    program = LoopProgram(name, len(slot_count), {e.id: slot[(e.id, 0)] for e in frame_enters},
                          merges, hoisted, header, slot[(pred.id, 0)], true_pass, false_pass,
                          [(e, slot[(e.id, 0)]) for e in exits], index_read, scalar_enters)
    # From the second iteration on, the invariant nodes keep their first values in their
    # slots (nothing else writes them): the lists without them.
    program.header_rest = [(c, it) for c, it in header if it.id not in once]
    program.body_rest = [(c, it) for c, it in true_pass if it.id not in once]
    return program


def _invariant(it, sources, invariant, cond, aliased):
    """Whether `it` computes the same value in every iteration: a Const, or a stateless
    kernel (or an aliased Identity) of loop invariants only, never dead. Computed in the
    first iteration where it would run (a zero-iteration loop runs none of the body's), then
    kept: a GRU's weight slices and splits, 6 of its 26 body nodes."""
    if cond.get(it.id) != _EMPTY:
        return False
    if it.kind == P.KERNEL:
        if it.deref is not None or it.needs_step or it.blocking or not has_op(it.op):
            return False
        if get_op(it.op).stateful:
            return False
    elif it.id not in aliased:
        return False
    return all(src.id in invariant for src, port, _ in sources[it.id] if port >= 0)


def _as_scalar(call, out):
    def scalar_const(vals, step):
        call(vals, step)
        v = vals[out]
        if type(v) is np.ndarray and v.ndim == 0 and v.dtype.kind in "biuf":
            vals[out] = v[()]
    return scalar_const


def _data_sources(it, sources):
    srcs = [None] * it.num_inputs
    for src, port, idx in sources[it.id]:
        if port >= 0:
            srcs[idx] = (src, port)
    return srcs


def _deref(item, src, port):
    """Whether `item` must read a Ref arriving from (src, port) (its output is no Ref)."""
    return not item.keeps_ref and P.may_carry_ref(src, port)


_IDENTITY_OPS = frozenset({"Identity", "StopGradient", "PreventGradient", "Snapshot"})


def _aliased(it, ins, controls, sources, loop_switches):
    """Whether the node's outputs can share its input's slot: it forwards its input (Exit,
    NextIteration, LoopCond, the loop's Switches, Identity), no Ref is read on the way and no
    control input can make it dead where its input is live."""
    if controls or not ins:
        return False
    kind = it.kind
    if kind == P.KERNEL:
        return it.op in _IDENTITY_OPS and it.deref is None and it.forwards_input
    if kind in (P.EXIT, P.NEXT, P.IDENT) or it.id in loop_switches:
        src, port = _data_sources(it, sources)[0]
        return not _deref(it, src, port)
    return False


def _call(it, ins, outs, sources):
    """The prepared call of one member (None: nothing to run, a NoOp)."""
    if it.kind == P.KERNEL:
        call = slot_call(it, ins, outs)
        if it.op in SCALAR_OPS and len(ins) == 2 and len(outs) == 1 and it.deref is None:
            call = scalar_call(call, scalar_kernel(it.op), ins, outs[0])
        return call
    if it.kind in (P.NOOP, P.TRIGGER):
        return None
    srcs = _data_sources(it, sources)
    if it.kind == P.SWITCH:
        return switch_call(ins[0], ins[1], outs, _deref(it, *srcs[0]))
    if it.kind == P.MERGE:
        return merge_call(ins, outs, any(_deref(it, s, p) for s, p in srcs))
    # Exit, NextIteration, LoopCond or a loop Switch that must read a Ref
    return forward(ins[0], outs, _deref(it, *srcs[0]))


def _ancestors(item, member_ids, sources):
    """`item` and the members it depends on within one iteration."""
    seen, stack = {item.id}, [item.id]
    while stack:
        iid = stack.pop()
        for src, _, _ in sources[iid]:
            if src.id in member_ids and src.id not in seen and src.kind != P.NEXT:
                seen.add(src.id)
                stack.append(src.id)
    return seen


def _members(name, frame_enters, items):
    """The nodes of the frame (reached from its Enters, not past its Exits) and its Exits;
    (None, None) when a nested frame's Enter is reached."""
    seen, exits, stack = set(), [], []
    for enter in frame_enters:
        stack.extend(d for d, _, _ in enter.out_edges)
    members = []
    while stack:
        iid = stack.pop()
        if iid in seen:
            continue
        seen.add(iid)
        it = items[iid]
        if it.kind == P.ENTER:
            return None, None  # a nested loop (or an Enter chained to this frame's Enter)
        members.append(it)
        if it.kind == P.EXIT:
            exits.append(it)
            continue
        stack.extend(d for d, _, _ in it.out_edges)
    members.sort(key=lambda it: it.id)
    exits.sort(key=lambda it: it.id)
    return members, exits


def _enter_depends_on_exit(frame_enters, exits, sources, member_ids):
    """Whether an Enter may wait for an Exit of its own frame: through this partition's
    nodes, or through a _Recv (what another device sends is not visible here). Not through
    an enclosing loop's NextIteration: that is the enclosing loop's previous iteration, whose
    instance of this frame has ended (a nested loop, whose Enters read the outer loop's
    variables that its Exits fed back)."""
    exit_ids = {e.id for e in exits}
    seen, stack = set(), [e.id for e in frame_enters]
    while stack:
        iid = stack.pop()
        for src, _, _ in sources[iid]:
            if src.id in exit_ids or src.kind == P.RECV:
                return True
            if src.kind == P.NEXT and src.id not in member_ids:
                continue
            if src.id not in seen:
                seen.add(src.id)
                stack.append(src.id)
    return False


def _iteration_order(members, member_ids, sources, loop_merges):
    """Members in dependency order within one iteration (None: a cycle)."""
    indeg = {}
    succ = {it.id: [] for it in members}
    for it in members:
        n = 0
        for src, _, _ in sources[it.id]:
            if src.id in member_ids and not (it.id in loop_merges and src.kind == P.NEXT):
                succ[src.id].append(it)
                n += 1
        indeg[it.id] = n
    ready = [it for it in members if indeg[it.id] == 0]
    order = []
    while ready:
        it = ready.pop()
        order.append(it)
        for d in succ[it.id]:
            indeg[d.id] -= 1
            if indeg[d.id] == 0:
                ready.append(d)
    return order if len(order) == len(members) else None
