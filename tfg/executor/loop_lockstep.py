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

from tfg.executor import pair_scalars as PS
from tfg.executor.lockstep_deferral import deferrable
from tfg.executor.loop_list_writes import in_place
from tfg.executor.devices import to_host
from tfg.kernels.resources import Ref


class Mismatch(Exception):
    """The two loops' predicates differ in one iteration (or their chain is no longer in
    their lists): the pair runs its loops one after the other from then on."""


class Plans:
    """The lockstep's three sequences of pair_scalars.merged (header, before the chain,
    after it) for the lists a program runs: the first iteration's (with the kept values'
    calls) and the later ones', made once per list and kept while the lists are the same
    objects (a profiler's wrappers replace them)."""

    def __init__(self, pa, pb, ca, cb, both):
        self.pa, self.pb, self.ca, self.cb, self.both = pa, pb, ca, cb, both
        self._made = {}  # ids of the four lists -> (the lists, the three sequences)
        self._resets = []  # the in-place list writers' (loop_list_writes.py)

    def reset(self):
        """At a run's start: the list writers own no list yet."""
        for r in self._resets:
            r()

    def __call__(self, header_a, header_b, body_a, body_b, lazy=False):
        """(header, before, after, deferred): `deferred` the calls before the chain that
        wait for the batched call to decline (lockstep_deferral.py; `before` then holds
        the others), None where `lazy` is False or they may not wait."""
        key = (id(header_a), id(header_b), id(body_a), id(body_b), lazy)
        p = self._made.get(key)
        if p is None or any(x is not y for x, y in zip(p[0], (header_a, header_b, body_a,
                                                             body_b))):
            pa, pb = self.pa, self.pb
            before_a, after_a = _cut(body_a, self.ca)
            before_b, after_b = _cut(body_b, self.cb)
            if body_a is pa.body_rest and body_b is pb.body_rest:
                # (the later iterations' lists: the first iteration's writes make the lists
                # the writers copy once, then change in place)
                after_a, resets_a = in_place(after_a, pa, (header_a, body_a))
                after_b, resets_b = in_place(after_b, pb, (header_b, body_b))
                self._resets.extend(resets_a + resets_b)
            rows, masks = self.both.rows, self.both.masks
            rows.clear()
            rows.update(_projected_rows(self.both.external, before_a, before_b))
            masks.clear()
            masks.update(_list_rows(self.both.external, before_a, before_b, pa, pb))
            before = PS.merged(before_a, before_b, pa, pb)
            deferred = None
            if lazy and body_a is pa.body_rest and deferrable(before_a, before_b, pa, pb,
                                                              self.both):
                before, deferred = (), before
            p = self._made[key] = ((header_a, header_b, body_a, body_b), (
                PS.merged(header_a, header_b, pa, pb), before,
                PS.merged(after_a, after_b, pa, pb), deferred))
        return p[1]


def _projected_rows(external, before_a, before_b):
    """{external index: (state, index slots of A's projected call, of B's)} for the chain
    operands that are the rows of the two loops' input projections, set by calls that run
    before the chain (batched_run._row stacks them as a view)."""
    def outs(lst):
        return {c.row_of[2]: c.row_of[:2] for c, _ in lst if hasattr(c, "row_of")}
    oa, ob = outs(before_a), outs(before_b)
    return {k: oa[sa] + ob[sb] for k, sa, sb, role in external
            if role == "float" and sa in oa and sb in ob}


def _list_rows(external, before_a, before_b, pa, pb):
    """{external index: (list, index and output slots of A's TensorListGetItem, of B's)} for
    the chain's masks that the two loops read from lists before the chain (a masked RNN's
    mask, one row a time step: batched_run._mask_row stacks them as a view)."""
    def outs(lst, p):
        got = {}
        for c, it in lst:
            s = p.call_slots.get(it.id)
            if it.op == "TensorListGetItem" and s is not None and s[2] is c and len(
                    s[0]) == 3 and len(s[1]) == 1:
                got[s[1][0]] = (s[0][0], s[0][1], s[1][0])
        return got
    oa, ob = outs(before_a, pa), outs(before_b, pb)
    return {k: oa[sa] + ob[sb] for k, sa, sb, role in external
            if role == "mask" and sa in oa and sb in ob}


def _cut(lst, chain):
    """(the calls of `lst` before `chain`, those after it)."""
    k = next((n for n, (call, _) in enumerate(lst) if call is chain), None)
    if k is None:  # (the lists were rewritten since: a profiler's wrappers)
        raise Mismatch
    return lst[:k], lst[k + 1:]


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
