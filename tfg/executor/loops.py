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
from tfg.executor.devices import to_host
from tfg.kernels.resources import Ref

_ALWAYS, _TRUE, _FALSE = 0, 1, 2  # which side of the loop predicate a node depends on


class LoopProgram:
    """One frame's compiled iteration (see the module docstring)."""

    def __init__(self, frame_name, nslots, enter_slots, merges, header, pred_slot, body, tail,
                 exits):
        self.frame_name = frame_name
        self.nslots = nslots
        self.enter_slots = enter_slots  # Enter item id -> slot of its value
        # (out slot, index slot, Enter slot, Enter's input index, NextIteration slot, its
        # input index, keeps_ref) per Merge
        self.merges = merges
        self.header = header  # (call, item): what the predicate needs, in order
        self.pred_slot = pred_slot
        self.body = body  # (call, item): the rest when the predicate is true
        self.tail = tail  # (call, item): the rest when it is false (the Exits among them)
        self.exits = exits  # (Exit item, slot of its value)

    def run(self, enter_values, step, group):
        """Run the loop from {Enter item id: value}; -> [(Exit item, value)], or None when
        the step failed elsewhere meanwhile. A kernel's error propagates as (item, error)."""
        vals = [None] * self.nslots
        for iid, slot in self.enter_slots.items():
            vals[slot] = enter_values[iid]
        merges = [(m[0], m[1], m[4], _INDEX[m[5]], m[6]) for m in self.merges]
        for out, idx, enter_slot, enter_index, _, _, keeps_ref in self.merges:
            v = vals[enter_slot]
            vals[out] = v.get() if type(v) is Ref and not keeps_ref else v
            vals[idx] = _INDEX[enter_index]
        header, body, pred_slot = self.header, self.body, self.pred_slot
        item = None
        try:
            while True:
                for call, item in header:
                    call(vals, step)
                pred = vals[pred_slot]
                if type(pred) is Ref:
                    pred = pred.get()
                if not isinstance(pred, (np.ndarray, np.generic, bool)):
                    pred = to_host(pred)  # a predicate computed on a GPU
                if not pred:
                    break
                for call, item in body:
                    call(vals, step)
                for out, idx, next_slot, index, keeps_ref in merges:
                    v = vals[next_slot]
                    vals[out] = v.get() if type(v) is Ref and not keeps_ref else v
                    vals[idx] = index
                if group.error is not None:
                    return None
            for call, item in self.tail:
                call(vals, step)
        except Exception as e:  # noqa: BLE001 - the executor names the node
            raise LoopNodeError(item, e) from e
        return [(exit_item, vals[slot]) for exit_item, slot in self.exits]


class LoopNodeError(Exception):
    """A node of a compiled loop failed: `item` and the original `error`."""

    def __init__(self, item, error):
        super().__init__(str(error))
        self.item, self.error = item, error


_INDEX = tuple(np.int32(i) for i in range(8))


class _Unsupported(Exception):
    """A frame this module does not compile (the dataflow executor runs it)."""


def compile_loops(plan):
    """{frame name: LoopProgram} for the frames of `plan` that qualify."""
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
            program = _compile_frame(name, frame_enters, items, sources)
        except _Unsupported:
            program = None
        if program is not None:
            out[name] = program
    return out


def _compile_frame(name, frame_enters, items, sources):
    members, exits = _members(name, frame_enters, items)
    if members is None:
        return None
    member_ids = {it.id for it in members}
    enter_ids = {it.id for it in frame_enters}
    for it in members:
        if it.kind in (P.SEND, P.RECV, P.FEED) or it.blocking:
            return None
        if it.fetch_ports and it.kind != P.EXIT:
            return None
        for src, _, _ in sources[it.id]:
            if src.id not in member_ids and src.id not in enter_ids:
                return None
    if _enter_depends_on_exit(frame_enters, exits, sources):
        return None
    # Merges: one non-constant Enter and one NextIteration each; nothing else joins values.
    merge_inputs = {}
    for it in members:
        if it.kind != P.MERGE:
            continue
        data = sorted((idx, src) for src, port, idx in sources[it.id] if port >= 0)
        controls = [src for src, port, _ in sources[it.id] if port < 0]
        kinds = sorted(src.kind for _, src in data)
        if controls or kinds != sorted([P.ENTER, P.NEXT]):
            return None
        enter = next((idx, src) for idx, src in data if src.kind == P.ENTER)
        if enter[1].is_constant:
            return None
        merge_inputs[it.id] = data
    for enter in frame_enters:
        if not enter.is_constant and any(items[d].kind != P.MERGE for d, _, _ in enter.out_edges):
            return None
    loop_conds = [it for it in members if it.kind == P.IDENT]
    if len(loop_conds) != 1:
        return None
    pred = loop_conds[0]
    # Which side of the predicate each node depends on, in a topological order of one
    # iteration (NextIteration -> Merge edges are the next iteration's).
    order = _iteration_order(members, member_ids, sources)
    if order is None:
        return None
    side = {}
    for it in order:
        s = _ALWAYS
        for src, port, idx in sources[it.id]:
            if src.id in enter_ids or (it.kind == P.MERGE and src.kind == P.NEXT):
                continue
            s2 = side[src.id]
            if src.kind == P.SWITCH and port >= 0:
                if s2 != _ALWAYS:
                    return None
                s2 = _TRUE if port == 1 else _FALSE
            elif src.kind == P.SWITCH:  # a control edge from a Switch: which side is unknown
                return None
            if s2 != _ALWAYS:
                if s not in (_ALWAYS, s2):
                    return None  # depends on both sides: always dead
                s = s2
        if it.kind == P.TRIGGER:
            s = _ALWAYS  # never dead: it runs once its inputs arrived, dead or not
        if it.kind == P.SWITCH:
            data = dict((idx, (src, port)) for src, port, idx in sources[it.id] if port >= 0)
            if len(data) != 2 or data[1] != (pred, 0):
                return None
        side[it.id] = s
        if (it.kind == P.NEXT and s != _TRUE) or (it.kind == P.EXIT and s != _FALSE):
            return None
        if it.kind in (P.MERGE, P.IDENT, P.SWITCH) and s != _ALWAYS:
            return None
    # Slots: one per output of every member and Enter.
    slot = {}
    for it in list(frame_enters) + members:
        for port in range(it.num_outputs):
            slot[(it.id, port)] = len(slot)
    enter_slots = {e.id: slot[(e.id, 0)] for e in frame_enters}
    merges = []
    for mid, data in merge_inputs.items():
        (i0, s0), (i1, s1) = data
        (ei, enter), (ni, nxt) = ((i0, s0), (i1, s1)) if s0.kind == P.ENTER else ((i1, s1),
                                                                                 (i0, s0))
        if max(ei, ni) >= len(_INDEX):
            return None
        merges.append((slot[(mid, 0)], slot[(mid, 1)], slot[(enter.id, 0)], ei,
                       slot[(nxt.id, 0)], ni, items[mid].keeps_ref))
    # The header computes the predicate; then one pass over the rest runs the nodes of no
    # side and those of the live side, in dependency order (a node of no side may follow one
    # of a side: a ControlTrigger after the body's pivot, the stack pops after it).
    header_ids = _ancestors(pred, member_ids, sources)
    header, true_pass, false_pass = [], [], []
    for it in order:
        if it.kind == P.MERGE:
            continue
        call = _call(it, sources, slot)
        if call is None:
            continue
        if it.id in header_ids:
            header.append((call, it))
            continue
        if side[it.id] != _FALSE:
            true_pass.append((call, it))
        if side[it.id] != _TRUE:
            false_pass.append((call, it))
    return LoopProgram(name, len(slot), enter_slots, merges, header, slot[(pred.id, 0)],
                       true_pass, false_pass, [(e, slot[(e.id, 0)]) for e in exits])


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


def _enter_depends_on_exit(frame_enters, exits, sources):
    """Whether an Enter may wait for an Exit of its own frame: through this partition's
    nodes, or through a _Recv (what another device sends is not visible here)."""
    exit_ids = {e.id for e in exits}
    seen, stack = set(), [e.id for e in frame_enters]
    while stack:
        iid = stack.pop()
        for src, _, _ in sources[iid]:
            if src.id in exit_ids or src.kind == P.RECV:
                return True
            if src.id not in seen:
                seen.add(src.id)
                stack.append(src.id)
    return False


def _iteration_order(members, member_ids, sources):
    """Members in dependency order within one iteration (None: a cycle)."""
    indeg = {}
    succ = {it.id: [] for it in members}
    for it in members:
        n = 0
        for src, _, _ in sources[it.id]:
            if src.id in member_ids and not (it.kind == P.MERGE and src.kind == P.NEXT):
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


def _call(it, sources, slot):
    """The prepared call of one member (None: nothing to run, a NoOp)."""
    ins = [None] * it.num_inputs
    for src, port, idx in sources[it.id]:
        if port >= 0:
            ins[idx] = slot[(src.id, port)]
    outs = [slot[(it.id, p)] for p in range(it.num_outputs)]
    if it.kind == P.KERNEL:
        return slot_call(it, ins, outs)
    if it.kind in (P.NOOP, P.TRIGGER):
        return None
    if not ins or None in ins:
        raise _Unsupported  # a malformed node: the dataflow executor reports it when it runs
    # Exit, NextIteration, LoopCond; a Switch's two outputs both carry the data, and only the
    # live side reads one.
    return _forward(ins[0], outs, it.keeps_ref)


def _forward(src, outs, keeps_ref):
    def call(vals, step):
        v = vals[src]
        if type(v) is Ref and not keeps_ref:
            v = v.get()
        for o in outs:
            vals[o] = v
    return call
