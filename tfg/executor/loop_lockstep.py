"""The iterations of two paired loop programs in lockstep (tfg/executor/loop_pairs.py decides
the pairing): both headers, one predicate test, each program's calls before its fused chain,
one batched chain call (tfg/executor/batched_chain.py), each program's calls after it.

    Before (loop A's iterations, then loop B's):
      A: Less, Less, LogicalAnd | project, GetItem, chain_a, SetItem, AddV2, AddV2   x 20
      B: Less, Less, LogicalAnd | GetItem, project, chain_b, SetItem, AddV2, AddV2   x 20
    After (one pair-iteration, x 20):
      shared Less, Less, LogicalAnd | project_a, GetItem_b, GetItem_a, project_b |
      batched chain (or chain_a, chain_b where it declines) | SetItem_a, SetItem_b,
      shared AddV2, AddV2                             (pair_scalars.py: the shared calls)

Each program keeps its own order of calls; the two interleave, an order the dataflow
executor may take as neither reads the other. Two predicates that differ raise Mismatch:
the caller drops the pair and runs the loops one after the other.
"""
import numpy as np

from tfg.executor.devices import to_host
from tfg.executor.lockstep_plans import Mismatch
from tfg.kernels.resources import Ref


def _each(calls, va, vb, step):
    """Run a plan's (A's call, B's call) pairs in order; a shared call (B's None) takes
    both loops' slots (pair_scalars.py)."""
    for fa, fb in calls:
        if fb is None:
            fa(va, vb, step)
        else:
            fa(va, step)
            fb(vb, step)


def _pred(v):
    if type(v) is not np.bool_:
        if type(v) is Ref:
            v = v.get()
        if not isinstance(v, (np.ndarray, np.generic, bool)):
            v = to_host(v)
    return bool(v)


def _merge(p, vals):
    """The program's Merges: each loop variable takes its NextIteration's value."""
    outs, nexts = p._outs, p._nexts
    if len(outs) == 1:
        vals[outs[0]] = vals[nexts[0]]
    elif outs:
        for s, v in zip(outs, [vals[n] for n in nexts]):
            vals[s] = v


def lockstep(plan, ea, eb, step):
    """(exits of A, exits of B) of the two programs of `plan` (a Plans) run from their Enter
    values `ea` and `eb`; raises Mismatch where their trip counts differ."""
    pa, pb, ca, cb, both = plan.pa, plan.pb, plan.ca, plan.cb, plan.both
    va, hoisted_a, header_a, body_a, fixed_a = pa.start(ea)
    vb, hoisted_b, header_b, body_b, fixed_b = pb.start(eb)
    for call, _ in hoisted_a:
        call(va, step)
    for call, _ in hoisted_b:
        call(vb, step)
    both.kept.clear()  # (a fed array may have been written into since the last run)
    plan.reset()
    last = {}
    first = True
    steps = plan(header_a, header_b, body_a, body_b)
    while True:
        header, before, after, deferred = steps
        _each(header, va, vb, step)
        qa, qb = _pred(va[pa.pred_slot]), _pred(vb[pb.pred_slot])
        if qa != qb:
            raise Mismatch
        if not qa:
            break
        _each(before, va, vb, step)
        if not both(va, vb, last, deferred is not None):
            last.clear()
            if deferred is not None:  # (then eager for the rest of the run)
                _each(deferred, va, vb, step)
                steps = plan(header_a, header_b, body_a, body_b)
            ca(va, step)
            cb(vb, step)
        _each(after, va, vb, step)
        _merge(pa, va)
        _merge(pb, vb)
        if first:
            # from the second iteration each program runs its lists without the calls of
            # the values kept from one run to the next (loops.py, _fixed_values)
            first = False
            header_a, body_a = pa.header_rest, pa.body_rest
            header_b, body_b = pb.header_rest, pb.body_rest
            steps = plan(header_a, header_b, body_a, body_b, True)
            if fixed_a is None and pa.fixed_slots:
                pa.fixed = [(s, va[s]) for s in pa.fixed_slots]
            if fixed_b is None and pb.fixed_slots:
                pb.fixed = [(s, vb[s]) for s in pb.fixed_slots]
    for call, _ in pa.tail:
        call(va, step)
    for call, _ in pb.tail:
        call(vb, step)
    return ([(e, va[s]) for e, s in pa.exits], [(e, vb[s]) for e, s in pb.exits])
