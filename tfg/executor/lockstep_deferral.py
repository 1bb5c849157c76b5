"""The calls a lockstep pair-iteration runs before the batched chain only to make operands
the batched call reads as rows of its own stacks (tfg/executor/batched_rows.py: the
projection rows, the masks): deferred, run only where the batched call declines.

    Before (each later pair-iteration of a masked BiLSTM):
      project_a (xW_a = P_a[i]), GetItem_b (m_b), GetItem_a (m_a), project_b | batched chain
    After:
      batched chain (it reads XW = rows[i], M = masks[i], views of its per-run stacks)
      where it declines: project_a, GetItem_b, GetItem_a, project_b, then the two chains

Deferring is right where nothing else reads what the calls write (their outputs are read by
the chain alone: not by another call, a Merge, an Exit or the predicate) and what they read
cannot change after the first iteration (their inputs other than the counter are written by
no call of the later iterations and are no loop variable's Merge). Then the batched call's
rows are the values the calls would have set: the first iteration ran them on the same
inputs (the projection made, the list read with its dtype checked), and the rows' own tests
(an int32 or int64 counter in range, equal in the two loops, an item that is set) are those
under which the calls return row i. An iteration whose batched call declines runs the
deferred calls in their order, then the chains, and the run's remaining iterations go eager.
"""


def deferrable(before_a, before_b, pa, pb, both):
    """Whether every call of `before_a` and `before_b` (the later iterations' calls before
    the chains of programs pa and pb) makes one of the operands `both` (the batched chain's
    run) reads as rows, and may wait (module docstring)."""
    if not before_a or len(before_a) != len(before_b):
        return False
    served_a, served_b, unserved_a, unserved_b = set(), set(), set(), set()
    for k, sa, sb, _ in both.external:
        if k in both.rows or k in both.masks:
            served_a.add(sa)
            served_b.add(sb)
        else:  # (a slot the batched call also reads as another operand: not served)
            unserved_a.add(sa)
            unserved_b.add(sb)
    return (_waits(before_a, pa, served_a - unserved_a)
            and _waits(before_b, pb, served_b - unserved_b))


def _waits(before, p, served):
    deferred = set()
    writes = {}  # slot -> the calls that write it in a later iteration
    reads = []  # (slot, call) of every call but the deferred ones and the chain
    for call, it in p.header_rest + p.body_rest:
        ins, outs = _slots(call, it, p)
        if ins is None:
            return False
        for s in outs:
            writes.setdefault(s, []).append(call)
        if any(call is c for c, _ in before):
            deferred.add(id(call))
            continue
        if not hasattr(call, "io"):
            reads.extend((s, call) for s in ins)
    others = {s for s, _ in reads}
    moving = set(p._outs)
    outside = set(p._nexts) | {s for _, s in p.exits} | {p.pred_slot}
    for call, it in before:
        ins, outs = _slots(call, it, p)
        if hasattr(call, "row_of"):  # (its state slot is its own: read by no other call)
            _, index, out = call.row_of
        elif len(outs) == 1:
            index, out = ins[1], outs[0]
        else:
            return False
        if out not in served or any(s in others or s in outside for s in outs):
            return False
        for s in ins:
            if s == index:
                continue
            if s in moving or any(id(c) not in deferred for c in writes.get(s, ())):
                return False
    return True


def _slots(call, it, p):
    """(input slots, output slots) of a call of the program's lists, or (None, None)."""
    if hasattr(call, "row_of"):  # an input projection (loop_projection.py)
        state, index, out = call.row_of
        return (state, index) + call.reads, (state, out)
    io = getattr(call, "io", None)
    if io is not None:  # a fused chain (loop_fusion.py)
        return ([s for _, _, ins, _ in io for s in ins],
                [s for _, _, _, outs in io for s in outs])
    s = p.call_slots.get(it.id)
    if s is None or s[2] is not call:
        return None, None
    if it.op == "TensorListGetItem" and len(s[0]) != 3:
        return None, None
    return s[0], s[1]
