"""The members of two fused chains matched one to one, for batching them
(tfg/executor/batched_chain.py): the same computation need not list its members in the same
order in both.

    A (forward loop):  ..., add_1, Tanh_1, mul_2, SelectV2,   SelectV2_1, SelectV2_2
    B (backward loop): ..., add_1, SelectV2_2, Tanh_1, mul_2, SelectV2_1, SelectV2
    aligned(A.io, B.io) -> B's members in the order of their partners in A

A fused chain lists its members in a topological order of the loop body (loop_fusion.py),
which follows the GraphDef's node order: TensorFlow's freezing of a Keras Bidirectional
layer orders the two directions' nodes differently from one export to the next (the
benchmark's BiLSTM from TF 2.21 / Keras 3.15: three orders in four exports, none A's), so
comparing the lists position by position found no pair.

Two members match where they are the same op and step kind with the same arity, and each
input is, in both, the output of matched members at the same port, or, in both, a value
from outside the chain. Any such one-to-one match is exact: the batched call computes each
loop's members on that loop's own operands, so which of two look-alike members pairs with
which changes only which rows share a stack. Outside values are preferred in pairs already
made (fewer stacks); a short search backtracks where a guess leaves a member unmatched.
"""

# Where look-alike members make the search branch, it gives up after this many member
# comparisons (a chain has tens of members; the BiLSTM's search never backtracks): a bound
# on the time a plan spends on two loops that do not pair.
_BUDGET = 20_000
# (the search recurses once a member)
_LONGEST = 400


def aligned(ia, ib, escaping_a=(), escaping_b=()):
    """The entries of `ib` (a chain's `io`: (item, kind, input slots, output slots) per
    member, in a dependency order) reordered so that entry n matches `ia`'s entry n, with
    the slots `escaping_a` (read after the chain) the outputs of members whose partners'
    outputs are `escaping_b`; None where no such order exists (or the search gives up)."""
    if len(ia) != len(ib) or len(escaping_a) != len(escaping_b):
        return None
    if len(ia) > _LONGEST:
        return None
    # B's members by what any partner must share: two chains of other ops stop here
    group_of = {}
    for j, (it, _, ins, outs) in enumerate(ib):
        group_of.setdefault((it.op, len(ins), len(outs)), []).append(j)
    need = {}
    for it, _, ins, outs in ia:
        key = (it.op, len(ins), len(outs))
        need[key] = need.get(key, 0) + 1
    if any(len(group_of.get(key, ())) != k for key, k in need.items()):
        return None
    made_by_a = {s for _, _, _, outs in ia for s in outs}
    made_by_b = {s for _, _, _, outs in ib for s in outs}
    esc_b = frozenset(escaping_b)
    order = []
    budget = [_BUDGET]

    def fits(a, b, slots, outside):
        """(fits, exact): b (a member of a's group) is a's kind of step and its inputs
        correspond to a's under `slots` (A's produced slot -> B's); exact where the
        outside values pair as they already did."""
        (_, ka, ins_a, _), (_, kb, ins_b, _) = a, b
        budget[0] -= 1
        if ka != kb:
            return False, False
        exact = True
        for sa, sb in zip(ins_a, ins_b):
            got = slots.get(sa)
            if got is not None:
                if got != sb:
                    return False, False
            elif (sa in made_by_a) != (sb in made_by_b):  # (one read before its write)
                return False, False
            elif outside.get(sa, sb) != sb:
                exact = False
        return True, exact

    def search(n, free, slots, outside):
        if n == len(ia):
            return all(slots.get(s) in esc_b for s in escaping_a)
        if budget[0] < 0:
            return False
        a = ia[n]
        tries = []
        for j in group_of[(a[0].op, len(a[2]), len(a[3]))]:
            if j not in free:
                continue
            ok, exact = fits(a, ib[j], slots, outside)
            if ok:
                tries.append((not exact, j))
        for _, j in sorted(tries):
            b = ib[j]
            s2 = dict(slots)
            s2.update(zip(a[3], b[3]))
            o2 = dict(outside)
            for sa, sb in zip(a[2], b[2]):
                if sa not in slots:
                    o2.setdefault(sa, sb)
            order.append(b)
            if search(n + 1, free - {j}, s2, o2):
                return True
            order.pop()
        return False

    if not search(0, frozenset(range(len(ib))), {}, {}):
        return None
    return tuple(order)
