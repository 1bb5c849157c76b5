"""The shape of a while loop's frame, for tfg/executor/loops.py: its members and Exits, its
Merges (the loop's, a cond's), an order of one iteration, and which side of the loop predicate
and which cond branches each node depends on. Raises Unsupported (with the reason) where the
frame is not one a fixed schedule can run exactly.

    >>> members, exits = frame_members(enters, items)
    >>> order = iteration_order(members, {m.id for m in members}, sources, loop_merges)
    >>> side, cond, loop_switches = sides(order, sources, enter_ids, loop_merges, pred)
    >>> side[mul.id], cond[mul.id]        # after the loop Switch's output 1, in no cond
    (1, frozenset())
"""
import numpy as np

from tfg.executor import plan as P
from tfg.executor.loop_calls import INDEX
from tfg.schemas.dtypes import DType
from tfg.schemas.ops import get_op, has_op

ALWAYS, TRUE, FALSE = 0, 1, 2  # which side of the loop predicate a node depends on


class Unsupported(Exception):
    """A frame this module does not compile (the dataflow executor runs it)."""

def loop_and_cond_merges(members, sources):
    """{id: sorted data inputs} of the loop's Merges (an Enter and a NextIteration) and the
    set of ids of the others (a cond's, inside the body)."""
    loop_merges, inner = {}, set()
    for it in members:
        if it.kind != P.MERGE:
            continue
        data = sorted((idx, src) for src, port, idx in sources[it.id] if port >= 0)
        controlled = any(port < 0 for _, port, _ in sources[it.id])
        kinds = sorted(src.kind for _, src in data)
        if kinds == sorted([P.ENTER, P.NEXT]):
            if controlled:
                raise Unsupported(f"Merge {it.name!r} has a control input")
            enter = next(src for _, src in data if src.kind == P.ENTER)
            if enter.is_constant:
                raise Unsupported(f"Merge {it.name!r} of a constant Enter")
            if max(idx for idx, _ in data) >= len(INDEX):
                raise Unsupported(f"Merge {it.name!r}: input index too large")
            loop_merges[it.id] = data
        elif P.ENTER in kinds or P.NEXT in kinds or not data:
            raise Unsupported(f"Merge {it.name!r} joins {kinds}")
        else:
            inner.add(it.id)
    return loop_merges, inner

EMPTY = frozenset()

def sides(order, sources, enter_ids, loop_merges, pred):
    """Per node: the side of the loop predicate it depends on, and its condition within
    the iteration: the set of (predicate source, branch) of the cond Switches it is after
    (empty: live whenever its side is; None: not known statically, checked when it runs)."""
    side, cond, loop_switches = {}, {}, set()
    for it in order:
        if it.kind == P.SWITCH:
            data = dict((idx, (src, port)) for src, port, idx in sources[it.id] if port >= 0)
            if len(data) != 2:
                raise Unsupported(f"Switch {it.name!r} without two inputs")
            if data[1] == (pred, 0):
                loop_switches.add(it.id)
        if it.id in loop_merges:
            side[it.id], cond[it.id] = ALWAYS, EMPTY
            continue
        s, conds = ALWAYS, []
        for src, port, idx in sources[it.id]:
            if src.id in enter_ids:
                continue
            if port < 0 and it.kind == P.MERGE:
                # A Merge waits for its control inputs but is never dead by them (a lowered
                # If's `branch_executed`, after both branches' nodes): its data decide.
                continue
            s2, c2 = side[src.id], cond[src.id]
            if src.id in loop_switches and port >= 0:
                if s2 != ALWAYS:
                    raise Unsupported(f"{src.name!r}: a loop Switch after another")
                s2 = TRUE if port == 1 else FALSE
            elif src.kind == P.SWITCH and port >= 0 and c2 is not None:
                key = next((s.id, p) for s, p, i in sources[src.id] if i == 1 and p >= 0)
                c2 = c2 | {(key, port)}
            # (a control edge from a Switch fires when the Switch ran, whichever side it took)
            if s2 != ALWAYS:
                if s not in (ALWAYS, s2):
                    raise Unsupported(f"{it.name!r} depends on both sides: always dead")
                s = s2
            conds.append(c2)
        if it.kind == P.MERGE:
            c = _merge_cond(conds)
        elif it.kind == P.TRIGGER:
            s, c = ALWAYS, EMPTY  # never dead: it runs once its inputs arrived, dead or not
        elif any(c2 is None for c2 in conds):
            c = None
        else:
            c = EMPTY.union(*conds)
        side[it.id], cond[it.id] = s, c
        if it.kind in (P.NEXT, P.EXIT, P.IDENT) or it.id in loop_switches:
            want = {P.NEXT: TRUE, P.EXIT: FALSE}.get(it.kind, ALWAYS)
            if s != want or c != EMPTY:
                raise Unsupported(f"{it.name!r} ({it.op}) is not on its side of the loop")
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

def ancestors(item, member_ids, sources):
    """`item` and the members it depends on within one iteration."""
    seen, stack = {item.id}, [item.id]
    while stack:
        iid = stack.pop()
        for src, _, _ in sources[iid]:
            if src.id in member_ids and src.id not in seen and src.kind != P.NEXT:
                seen.add(src.id)
                stack.append(src.id)
    return seen

def frame_members(name, frame_enters, items):
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

def enter_depends_on_exit(frame_enters, exits, sources, member_ids, frame=None):
    """Whether an Enter may wait for an Exit of its own frame: through this partition's
    nodes, or through a _Recv whose sender may wait for an Exit of this frame or of a frame
    inside it on another device (its `exit_frames`, read off the whole partitioned graph;
    unknown: it may). Not through an enclosing loop's NextIteration: that is the enclosing
    loop's previous iteration, whose instance of this frame has ended (a nested loop, whose
    Enters read the outer loop's variables that its Exits fed back)."""
    exit_ids = {e.id for e in exits}
    seen, stack = set(), [e.id for e in frame_enters]
    while stack:
        iid = stack.pop()
        for src, _, _ in sources[iid]:
            if src.id in exit_ids:
                return True
            if src.kind == P.RECV:
                if src.exit_frames is None or frame is None or frame in src.exit_frames:
                    return True
                continue  # (what it waits for is on another device: exit_frames said)
            if src.kind == P.NEXT and src.id not in member_ids:
                continue
            if src.id not in seen:
                seen.add(src.id)
                stack.append(src.id)
    return False

def iteration_order(members, member_ids, sources, loop_merges):
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

def data_sources(it, sources):
    srcs = [None] * it.num_inputs
    for src, port, idx in sources[it.id]:
        if port >= 0:
            srcs[idx] = (src, port)
    return srcs


_PLAIN_ATTR = (bool, int, float, str, bytes, DType)


def cse_key(it, ins, sources):
    """A key two nodes of one iteration share when they compute the same values: a stateless
    kernel, the same op, input slots, control inputs and attrs (plain values, and small
    tensors: a Const's value). None: the node runs on its own."""
    if (it.kind != P.KERNEL or it.deref is not None or it.needs_step or it.blocking
            or it.ctx is None or not has_op(it.op) or get_op(it.op).has_effects):
        return None
    controls = tuple(sorted(src.id for src, port, _ in sources[it.id] if port < 0))
    if not ins and not controls:
        return None  # a Const outside any frame's control: not a member
    key = [it.op, tuple(ins), controls, it.num_outputs, it.ctx.device]
    for name in sorted(it.ctx.attrs):
        v = it.ctx.attrs[name]
        if isinstance(v, list):
            v = tuple(v)
        elif isinstance(v, np.ndarray) and v.size <= 64 and v.dtype.kind in "biuf":
            key.append((name, v.dtype.str, v.shape, v.tobytes()))
            continue
        if not (isinstance(v, _PLAIN_ATTR)
                or (isinstance(v, tuple) and all(isinstance(x, _PLAIN_ATTR) for x in v))):
            return None
        key.append((name, v))
    return tuple(key)
