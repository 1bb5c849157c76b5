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

from tfg.executor import batched_rows as R
from tfg.executor.batched_steps import Fallback

ndarray = np.ndarray


def runner(n, external, steps, escaping, mask_uses=(), program=None):
    """run(va, vb, last) -> bool for a plan of `n` stacked values: `external` ((index, slot
    of A, slot of B, role), ...) the operands read from the loops' slots, `steps` the stacked
    steps in order, `escaping` ((index, slot of A, slot of B), ...) the values the loops read
    after the chain, `mask_uses` ((mask's index, its Selects' x indices), ...) the masks
    that may be expanded to their Selects' shape, `program` the chain as one compiled call
    (chain_programs.py; None: the steps). run.kept, run.rows and run.masks are the
    caller's to clear and fill (loop_lockstep.py, lockstep_plans.py)."""
    empty, concatenate = np.empty, np.concatenate
    kept = {}  # external index -> (value of A, value of B, their stack): the same objects
    rows = {}  # external index -> projection slots (lockstep_plans.py sets them)
    masks = {}  # external index -> list slots (lockstep_plans.py sets them)
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
            if k in rows and (st := R.projection_row(rows[k], k, va, vb, kept)) is not None:
                pass
            elif k in masks and (st := R.mask_row(masks[k], k, va, vb, kept, shapes.get(k),
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
            if program is not None and program(bv):
                # (the program reads a narrow mask as it is: expanding it is a copy for
                # nothing, and a second signature for the program, at the run's first row)
                if shapes:
                    shapes.clear()
                mask_uses_now = ()
            else:
                for f in steps:
                    f(bv)
                mask_uses_now = mask_uses
        except Fallback:
            if shapes:  # (an expanded mask may be what the Select declined: not again)
                shapes.clear()
                for k in masks:
                    kept.pop(("masks", k), None)
            return False
        for k, xs in mask_uses_now:
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
