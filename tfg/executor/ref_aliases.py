"""Which values of a plan may be a reference variable's buffer that a kernel writes in place
(tfg/kernels/ref_updates.py): what a compiled loop (loops.py) must not keep as a loop
invariant, nor turn into a numpy scalar when it enters.

    w/read = Identity(w)                 # w's buffer itself (the executor reads the Ref)
    while ...: MatMul(x, Enter(w/read)); AssignSub(w, g)

The Enter is constant, but the buffer it carries changes with each AssignSub, so the MatMul
runs in every iteration on the weights the previous one left, as in TensorFlow.

A value may be such a buffer when it comes from a kernel that read a Ref by value, or from a
_Recv (another partition of this process may send one: the in-process rendezvous passes the
array itself, as TensorFlow's passes the tensor between two CPU devices), through the
forwarding nodes (Enter, Switch, Merge, ...) and the kernels that may return a view of an
input (every op without the fresh_output trait). Only where a kernel of the step writes a
variable in place: a frozen graph, one of resource variables, or a TF1 inference step (the
initializer's Assign runs in a step of its own) gives none, and its loops keep their
invariants.
"""
from tfg.executor import plan as P
from tfg.executor.inplace import FRESH_OUTPUT
from tfg.kernels.ref_updates import IN_PLACE_OPS

_FORWARDING = frozenset({P.SWITCH, P.MERGE, P.ENTER, P.EXIT, P.NEXT, P.IDENT})


def mark_variable_writes(plans):
    """Record on the plans of one step whether a kernel of any of them writes a variable in
    place (the in-process rendezvous hands a buffer read in one plan to the others)."""
    writes = any(_writes(plan) for plan in plans)
    for plan in plans:
        plan.variable_writes = writes


def _writes(plan):
    return any(it.kind == P.KERNEL and it.op in IN_PLACE_OPS for it in plan.items)


def variable_buffers(plan):
    """Ids of the items of `plan` whose outputs may be a buffer that a kernel of the step
    writes in place (empty when none does)."""
    writes = plan.variable_writes
    if not (_writes(plan) if writes is None else writes):
        return frozenset()
    items = plan.items
    found = set()
    todo = [it for it in items
            if it.kind == P.RECV or (it.kind == P.KERNEL and it.deref is not None)]
    # a control-flow node that reads a Ref by value (a Switch of T, not a RefSwitch)
    todo += [items[dst] for it in items for dst, port, _ in it.out_edges
             if port >= 0 and items[dst].kind in _FORWARDING and not items[dst].keeps_ref
             and P.may_carry_ref(it, port)]
    while todo:
        it = todo.pop()
        if it.id in found:
            continue
        found.add(it.id)
        for dst, port, _ in it.out_edges:
            succ = items[dst]
            if port >= 0 and succ.id not in found and (
                    succ.kind != P.KERNEL or succ.op not in FRESH_OUTPUT):
                todo.append(succ)
    return frozenset(found)
