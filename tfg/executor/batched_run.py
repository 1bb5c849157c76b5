"""Running a batched chain (the steps tfg/executor/batched_chain.py chose): stack the two
loops' operands, run the stacked steps, hand each loop the rows of the values it reads.

    Before (one iteration, loop A then loop B): chain_a(vals_a); chain_b(vals_b)
    After: run(vals_a, vals_b, last):
      operands:  U2 = stack(U_a, U_b) once a run (kept), H = the stack the last call made
                 (its rows are this call's states: no copy), XW = row i of one [T, 2, B, N]
                 copy of both projections (a view), the mask: one concatenate
      steps:     each stacked step once (batched_steps.py, batched_selects.py)
      outputs:   vals_a[h] = H'[0], vals_b[h] = H'[1] (views of the new stacks)

It returns False having written nothing into either loop's slots where an operand is not
what the steps take (another shape or dtype, a non-float value, a step's Fallback): the
caller (tfg/executor/loop_lockstep.py) then runs the two chains one after the other.
"""
import numpy as np

from tfg.executor.batched_steps import Fallback

ndarray = np.ndarray


def runner(n, external, steps, escaping, mask_uses=()):
    """run(va, vb, last) -> bool for a plan of `n` stacked values: `external` ((index, slot
    of A, slot of B, role), ...) the operands read from the loops' slots, `steps` the stacked
    steps in order, `escaping` ((index, slot of A, slot of B), ...) the values the loops read
    after the chain, `mask_uses` ((mask's index, its Selects' x indices), ...) the masks
    that may be expanded to their Selects' shape. run.kept, run.rows and run.masks are the
    caller's to clear and fill (loop_lockstep.py)."""
    empty, concatenate = np.empty, np.concatenate
    kept = {}  # external index -> (value of A, value of B, their stack): the same objects
    rows = {}  # external index -> projection slots (loop_lockstep.py sets them: _row)
    masks = {}  # external index -> list slots (loop_lockstep.py sets them: _mask_row)
    shapes = {}  # mask's index -> the shape of its Selects' x's, seen in an earlier call

    def run(va, vb, last, lazy=False):
        """The stacked steps on va's and vb's values; the escaping values set in both as
        the rows of their stacks. `last`: {id(row of A): (row of A, row of B, stack)} of
        the previous call (its rows are this call's states), replaced. `lazy`: the calls
        that set the row operands' slots did not run (False where a row is not at hand).
        False: nothing done."""
        bv = [None] * n
        dt = None
        for k, sa, sb, role in external:
            if role == "axis":
                a, b = va[sa], vb[sb]
                if type(a) is not int:
                    if getattr(a, "ndim", 1) != 0 or a.dtype.kind not in "iu":
                        return False
                    a = int(a)
                if type(b) is not int:
                    if getattr(b, "ndim", 1) != 0 or b.dtype.kind not in "iu":
                        return False
                    b = int(b)
                if a != b:
                    return False
                bv[k] = a
                continue
            # the rows of a per-run stack first (where the calls that set the slots were
            # deferred, the slots hold an earlier iteration's values: lockstep_deferral.py);
            # then the states, the rows of the stacks the last call made (no copy); the
            # weights, the same two objects as before (their stack kept); else a new stack
            if k in rows and (st := _row(rows[k], k, va, vb, kept)) is not None:
                pass
            elif k in masks and (st := _mask_row(masks[k], k, va, vb, kept, shapes.get(k),
                                                 lazy)) is not None:
                pass
            elif lazy and (k in rows or k in masks):
                return False
            else:
                a, b = va[sa], vb[sb]
                m = last.get(id(a))
                if m is not None and m[0] is a and m[1] is b:
                    st = m[2]
                else:
                    c = kept.get(k)
                    if c is not None and c[0] is a and c[1] is b:
                        st = c[2]
                    else:
                        if (type(a) is not ndarray or type(b) is not ndarray
                                or a.shape != b.shape or a.dtype is not b.dtype):
                            return False
                        if a.ndim:  # (one call: the two rows, then a view of them)
                            st = concatenate((a, b)).reshape((2,) + a.shape)
                        else:
                            st = empty((2,) + a.shape, a.dtype)
                            st[0] = a
                            st[1] = b
                        kept[k] = (a, b, st)
            if role == "float":
                if dt is None:
                    dt = st.dtype
                    if dt.kind != "f":
                        return False
                elif st.dtype is not dt:
                    return False
            bv[k] = st
        try:
            for f in steps:
                f(bv)
        except Fallback:
            if shapes:  # (an expanded mask may be what the Select declined: not again)
                shapes.clear()
                for k in masks:
                    kept.pop(("masks", k), None)
            return False
        for k, xs in mask_uses:
            if k not in shapes:
                shape = bv[xs[0]].shape
                if all(bv[x].shape == shape for x in xs):
                    shapes[k] = shape
        last.clear()
        for k, sa, sb in escaping:
            st = bv[k]
            ra, rb = st[0], st[1]
            va[sa], vb[sb] = ra, rb
            last[id(ra)] = (ra, rb, st)
        return True
    run.kept = kept
    run.rows = rows
    run.masks = masks
    run.external = external
    return run


def _row(slots, k, va, vb, kept):
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


def _mask_row(slots, k, va, vb, kept, shape, lazy=False):
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
