"""The operands a batched chain (tfg/executor/batched_run.py) reads as row i of a stack made
once a run, instead of stacking the two loops' values every iteration.

    Before, each pair-iteration:  XW = concatenate(P_a[i], P_b[i]); M = concatenate(m_a, m_b)
    After:  XW = PP[i], M = MM[i], views, with (made at the run's first use)
            PP = stack((P_a, P_b), axis=1)            [T, 2, B, 4N]: both input projections
            MM = both mask lists' items, expanded     [T, 2, B, N]: to the Selects' shape

Each function returns None (the caller then stacks the values themselves, or declines) unless
the row holds the values the loops' own calls set this iteration (loop_projection.py's
projected call, TensorListGetItem): the conditions under which those calls return row i are
tested here.
"""
import numpy as np

ndarray = np.ndarray


def projection_row(slots, k, va, vb, kept):
    """The stack of the two projection rows P_a[i] and P_b[i] the loops' projected calls
    (tfg/executor/loop_projection.py) set this iteration, as a view of one [T, 2, B, N] copy
    of both projections made once a run (kept[('rows', k)]; `kept` is cleared each run), or
    None. `slots`: (state, index) slots of A's call, then of B's. The call sets its output to
    P[i] exactly when its kept tuple's P is an array and its index an int32 or int64 scalar
    in range: those conditions are tested here, so the view holds the rows' own values."""
    state_a, index_a, state_b, index_b = slots
    ha, hb = va[state_a], vb[state_b]
    if ha is None or hb is None:
        return None
    pa, pb = ha[4], hb[4]
    i, j = va[index_a], vb[index_b]
    t = type(i)
    if (pa is None or pb is None or (t is not np.int32 and t is not np.int64)
            or (i is not j and (type(j) is not t or i != j)) or not 0 <= i < pa.shape[0]):
        return None
    c = kept.get(("rows", k))
    if c is None or c[0] is not ha or c[1] is not hb:
        if pa.shape != pb.shape or pa.dtype is not pb.dtype:
            return None
        c = kept[("rows", k)] = (ha, hb, np.stack((pa, pb), axis=1))
    return c[2][i]


def mask_row(slots, k, va, vb, kept, shape, lazy=False):
    """The stack of the two masks m_a and m_b the loops' TensorListGetItem calls read this
    iteration, as row i of one [T, 2, ...] copy of both lists' items made once a run
    (kept[('masks', k)]), or None. `slots`: (list, index, output) slots of A's call, then of
    B's. The row holds the masks' own values: each call's output is checked to be its
    list's item i (`lazy`: the calls did not run; lockstep_deferral.py says why the row is
    what they return). `shape`: the Selects' operand shape, to which the copy expands the masks
    (a SelectV2 broadcasts them so: the same elements taken, and numpy's masked copy runs
    its contiguous loop instead of a broadcast one); None: the masks' own shape."""
    list_a, index_a, out_a, list_b, index_b, out_b = slots
    la, lb = va[list_a], vb[list_b]
    i, j = va[index_a], vb[index_b]
    t = type(i)
    if (t is not np.int32 and t is not np.int64) or (i is not j and (
            type(j) is not t or i != j)):
        return None
    c = kept.get(("masks", k))
    if c is None or c[0] is not la or c[1] is not lb:
        c = kept[("masks", k)] = (la, lb, _mask_stack(la, lb, shape))
    st = c[2]
    if st is None or not 0 <= i < st.shape[0] or not lazy and (
            va[out_a] is not la.items[i] or vb[out_b] is not lb.items[i]):
        return None
    return st[i]


def _mask_stack(la, lb, shape):
    """[T, 2, ...] of the two lists' items (bool arrays of one shape, all set), expanded to
    `shape` where they broadcast to it; None where the items are not such."""
    ia, ib = getattr(la, "items", None), getattr(lb, "items", None)
    if type(ia) is not list or type(ib) is not list or len(ia) != len(ib) or not ia:
        return None
    first = ia[0]
    if type(first) is not ndarray or first.dtype != np.bool_:
        return None
    for a in ia + ib:
        if type(a) is not ndarray or a.shape != first.shape or a.dtype != first.dtype:
            return None
    if shape is None or len(shape) != first.ndim + 1 or not all(
            d == 1 or d == e for d, e in zip(first.shape, shape[1:])):
        shape = (2,) + first.shape
    st = np.empty((len(ia),) + shape, np.bool_)
    np.copyto(st[:, 0], np.stack(ia))
    np.copyto(st[:, 1], np.stack(ib))
    return st
