"""The stacked Selects of a batched chain (tfg/executor/batched_chain.py picks them): where(m,
x, y) on [2, ...] stacks of the two loops' operands, as a copy of y, then x copied where the
mask is set (the chain's own Select does the same on each row: the same bytes).

    Before (a masked LSTM's new output and new state, each loop in turn):
      h = where(m, h_new, h_old); c = where(m, c_new, c_old)       4 copies, 4 masked copies
    After (`selects`, one mask and one x for both Selects, y's the last call's stack rows):
      r = last_stack.copy(); copyto(r, x, where=m); h, c = r[0], r[1]    1 copy, 1 masked

Operands the steps do not take (a mask of another dtype, shapes that differ) raise Fallback.
"""
import numpy as np

from tfg.executor.batched_steps import Fallback


def _mask_fits(mshape, shape, broadcast):
    """Whether a Select's mask of `mshape` (another shape than its x's) broadcasts over all
    but the first axis, as the chain's verdict said it may."""
    return broadcast and all(d == 1 or d == e for d, e in zip(mshape[1:], shape[1:]))


def select(c, a, b, o, broadcast):
    copyto, bool_ = np.copyto, np.bool_

    def step(bv):
        m, x, y = bv[c], bv[a], bv[b]
        shape = x.shape
        if m.dtype != bool_ or shape != y.shape or m.ndim != x.ndim:
            raise Fallback
        if m.shape != shape and not _mask_fits(m.shape, shape, broadcast):
            raise Fallback
        r = y.copy()
        copyto(r, x, where=m)
        bv[o] = r
    return step


def selects(c, a, ys, outs, broadcast):
    """Selects of one mask and one x: where(m, x, y) for each y, as the rows of one stack
    (the y's copied in, then x where the mask is set: one masked copy for all). Where the
    y's are the rows the last call made (an RNN's states), one copy of that stack."""
    copyto, empty, bool_ = np.copyto, np.empty, np.bool_
    k = len(ys)
    made = [(None, ())]  # (the last stack made, its rows)

    def step(bv):
        m, x = bv[c], bv[a]
        shape = x.shape
        if m.dtype != bool_ or m.ndim != x.ndim:
            raise Fallback
        if m.shape != shape and not _mask_fits(m.shape, shape, broadcast):
            raise Fallback
        yv = [bv[y] for y in ys]
        last, rows = made[0]
        if last is not None and all(y is r for y, r in zip(yv, rows)):
            r = last.copy()
        else:
            r = empty((k,) + shape, x.dtype)
            for j, y in enumerate(yv):
                if y.shape != shape:
                    raise Fallback
                copyto(r[j], y)
        copyto(r, x, where=m)
        rows = tuple(r[j] for j in range(k))
        made[0] = (r, rows)
        for o, v in zip(outs, rows):
            bv[o] = v
    return step
