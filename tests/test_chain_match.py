"""Two fused chains' members matched one to one (tfg/executor/chain_match.py): the same
computation listed in another order is matched, look-alike members by a search that
backtracks, and chains that differ are not (a search that cannot succeed ends within its
budget)."""
import time
from types import SimpleNamespace

from tfg.executor.chain_match import aligned

SELECT, TANH, ADD = ("select", True), ("ufunc", "tanh"), ("ufunc", "add")


def _m(op, kind, ins, outs):
    return (SimpleNamespace(op=op), kind, tuple(ins), tuple(outs))


def _names(io):
    return [it.op + str(outs) for it, _, _, outs in io]


def test_another_order_is_matched_member_by_member():
    # A: t = tanh(x); s = x + y; r = s + t      B: s = x + y first, then t = tanh(x)
    ia = (_m("Tanh", TANH, [1], [10]), _m("AddV2", ADD, [1, 2], [11]),
          _m("AddV2", ADD, [11, 10], [12]))
    ib = (_m("AddV2", ADD, [5, 6], [21]), _m("Tanh", TANH, [5], [20]),
          _m("AddV2", ADD, [21, 20], [22]))
    got = aligned(ia, ib, (12,), (22,))
    assert _names(got) == ["Tanh(20,)", "AddV2(21,)", "AddV2(22,)"]


def test_look_alike_members_are_matched_by_what_reads_them():
    # two Selects of one mask and one x, apart only in their outside y: in A the first one's
    # value goes to a Tanh, in B the second's; the first guess (by position) is undone
    ia = (_m("SelectV2", SELECT, [1, 2, 3], [10]), _m("SelectV2", SELECT, [1, 2, 4], [11]),
          _m("Tanh", TANH, [10], [12]))
    ib = (_m("SelectV2", SELECT, [5, 6, 7], [20]), _m("SelectV2", SELECT, [5, 6, 8], [21]),
          _m("Tanh", TANH, [21], [22]))
    got = aligned(ia, ib, (11, 12), (20, 22))
    assert _names(got) == ["SelectV2(21,)", "SelectV2(20,)", "Tanh(22,)"]


def test_chains_that_differ_are_not_matched():
    ia = (_m("Tanh", TANH, [1], [10]), _m("AddV2", ADD, [10, 2], [11]))
    other_op = (_m("Sigmoid", ("sigmoid", None), [5], [20]), _m("AddV2", ADD, [20, 6], [21]))
    other_wiring = (_m("Tanh", TANH, [5], [20]), _m("AddV2", ADD, [5, 6], [21]))
    for ib in (other_op, other_wiring, ia[:1]):
        assert aligned(ia, ib, (11,), (21,)) is None
    # the same members, but B's value read after the chain is another member's
    assert aligned(ia, (_m("Tanh", TANH, [5], [20]), _m("AddV2", ADD, [20, 6], [21])),
                   (11,), (20,)) is None


def test_a_search_that_cannot_succeed_gives_up():
    """Ten look-alike Tanhs, then an Add of two of them in A and of one twice in B: no match
    exists, and trying the 10! orders of the Tanhs would take hours; the budget ends it."""
    k = 10
    ia = tuple(_m("Tanh", TANH, [j], [100 + j]) for j in range(k)) + (
        _m("AddV2", ADD, [100, 101], [200]),)
    ib = tuple(_m("Tanh", TANH, [50 + j], [300 + j]) for j in range(k)) + (
        _m("AddV2", ADD, [300, 300], [400]),)
    start = time.perf_counter()
    assert aligned(ia, ib, (200,), (400,)) is None
    assert time.perf_counter() - start < 5  # (about 0.1 s)
