"""What a lockstep pair-iteration runs (tfg/executor/loop_lockstep.py runs it): the two
programs' lists cut at their fused chains and merged call by call, made once per list.

    Before: A's lists  header [Less, Less, LogicalAnd]  body [project, GetItem, chain, ...]
            B's lists  header [Less, Less, LogicalAnd]  body [GetItem, project, chain, ...]
    After:  header ((shared Less), (shared Less), (shared LogicalAnd))
            before ((project_a, GetItem_b), (GetItem_a, project_b)), or () with those calls
              deferred (lockstep_deferral.py) from the second iteration
            after  ((SetItem_a in place, SetItem_b in place), (shared AddV2), (shared AddV2))

The merge is pair_scalars.merged (equal scalar calls computed once); the later iterations'
list writes are loop_list_writes.py's. The batched call learns here which of its operands
are the rows of the two loops' projections and mask lists (batched_rows.py reads them).
"""
from tfg.executor import pair_scalars as PS
from tfg.executor.lockstep_deferral import deferrable
from tfg.executor.loop_list_writes import in_place


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
    before the chain (batched_rows.projection_row stacks them as a view)."""
    def outs(lst):
        return {c.row_of[2]: c.row_of[:2] for c, _ in lst if hasattr(c, "row_of")}
    oa, ob = outs(before_a), outs(before_b)
    return {k: oa[sa] + ob[sb] for k, sa, sb, role in external
            if role == "float" and sa in oa and sb in ob}


def _list_rows(external, before_a, before_b, pa, pb):
    """{external index: (list, index and output slots of A's TensorListGetItem, of B's)} for
    the chain's masks that the two loops read from lists before the chain (a masked RNN's
    mask, one row a time step: batched_rows.mask_row stacks them as a view)."""
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
