"""Steps of a fused chain (tfg/executor/fused_steps.py) that keep a matrix's column blocks
contiguous, so that the elementwise ops after them run numpy's contiguous loops, and that
run two such ops as one numpy call (planned by tfg/executor/loop_blocks.py).

    Before (a Keras GRU cell, `reset_after`: the recurrent product plus its bias, sliced
    into the three gates' columns, two of them added to the input projection's pieces):
      hu = add(h @ U, b)              -> hz, hr, hh = hu[:, :64], hu[:, 64:128], hu[:, 128:]
      z_in = add(xz, hz); r_in = add(xr, hr)     (strided column views: NpyIter set-up)
    After:
      add(h @ U reshaped (8, 3, 64), b reshaped (3, 64), out=blocks (3, 8, 64) transposed)
      hz, hr, hh = blocks[0], blocks[1], blocks[2]        (contiguous blocks)
      add(xblocks[0:2], blocks[0:2], out=stack[0:2])      (both gates' inputs, one call)

And a masked RNN's two Selects of one mask and one new value (its new output and state):
    Before: out2 = where(m, h, out); h2 = where(m, h, h_prev)
    After:  r = stack(out, h_prev) (last iteration's result: no copy); copyto(r, h, where=m)
            out2, h2 = r[0], r[1]

Elementwise ops on the same pairs of elements: the values are bit for bit the kernels'.
What does not match the form (another shape, slices that are not whole column blocks of one
width, a source that did not produce blocks this iteration) runs the plain steps instead.
"""
import numpy as np

from tfg.executor.fused_steps import Fallback, fits, tiled
from tfg.kernels.indexing_ops import strided_slice_index

ndarray = np.ndarray


def bias_in_place(a, b):
    """_FusedMatMul's bias Add, in the product's memory as its kernel does it (the plain
    step of a column-block write after the product's own step)."""
    add = np.add
    last = [(None, None, None)]  # (a read-only bias, a shape, the bias tiled to it)

    def step_bias_in_place(vals):
        y, v = vals[a], vals[b]
        if type(v) is not ndarray or v.ndim != 1 or v.shape[0] != y.shape[-1]:
            raise Fallback  # the kernel's to decide and word
        add(y, tiled(v, y.shape, last), y)
    return step_bias_in_place


def column_blocks(fn, a, b, o, slices, slot, ports_slot, reuse, plain, vector=False):
    """A binary ufunc whose only readers are StridedSlices of Const bounds (`slices`: (out
    slot, (begin, end, strides) slots, attrs, limit) each): where the slices are whole-row,
    unit-stride column blocks of one width k of the [rows, n*k] result, it is written into
    a (n, rows, k) buffer (`slot`; kept from the last iteration when `reuse`) and each slice
    is a block of it; `ports_slot` gets ({slice's out slot: its block}, the buffer, its
    transposed view, the blocks), so a reused buffer's views are made once. `plain`: the add's
    and the slices' own steps, for anything else. The form is decided per operand shape.
    `vector`: `b` must be a vector (a _FusedMatMul's bias, added to its product `a`)."""
    cache = {}
    empty = np.empty
    # (x, its (rows, n, k) view, y, its view, the form, the held buffer) of the last call:
    # the same operand arrays as then have the same form and views (an ndarray's shape and
    # dtype do not change); one tuple, thread-safe
    last = [(None,) * 6]
    tile = [(None, None, None)]

    def step_blocks(vals):
        x, y = vals[a], vals[b]
        lv = last[0]
        if x is lv[0] and y is lv[2]:
            xv, yv, form = lv[1], lv[3], lv[4]
        else:
            if type(x) is not ndarray or type(y) is not ndarray or (vector and y.ndim != 1):
                raise Fallback
            key = (x.shape, y.shape, x.dtype, y.dtype)
            form = cache.get(key)
            if form is None:
                if len(cache) > 16:
                    cache.clear()
                form = cache[key] = _form(vals, x, y, slices)
            if form is False:
                for f in plain:
                    f(vals)
                return
            xv = x.reshape(form[1])
            # (a read-only y, the bias, tiled to x's shape: numpy's plain loop, same values)
            yv = y.reshape(form[2])
            if y.shape != x.shape:
                yv = tiled(yv, form[1], tile)
            lv = (x, xv, y, yv, form, None)
        shape, outs = form[0], form[4]
        # (the buffer, its transposed view and its blocks, kept in the run's own slots)
        held = vals[ports_slot] if reuse else None
        if held is not lv[5] or held is None:
            if held is None or held[1].shape != shape or held[1].dtype is not x.dtype:
                buf = empty(shape, x.dtype)
                held = (form[3], buf, buf.transpose(1, 0, 2),
                        tuple(buf[j] for j in form[3].values()))
            if reuse:
                lv = lv[:5] + (held,)
        last[0] = lv
        fn(xv, yv, held[2])
        vals[slot] = held[1]
        vals[ports_slot] = held
        for out, v in zip(outs, held[3]):
            vals[out] = v
    return step_blocks


def _form(vals, x, y, slices):
    """((n, rows, k), x's and y's shapes for the write, {out slot: block}, the out slots)
    or False."""
    if x.ndim != 2 or x.dtype != y.dtype or not x.flags.c_contiguous:
        return False
    rows, cols = x.shape
    width, ports = None, {}
    for out, spec, attrs, limit in slices:
        if limit is not None and x.nbytes > limit:
            return False  # (the slice's own step refuses it: the kernels decide)
        try:
            index = strided_slice_index(x.shape, *(vals[s] for s in spec), attrs)
        except Exception:  # noqa: BLE001 - the kernel's error to word, by the plain steps
            return False
        if len(index) != 2 or not all(type(i) is slice for i in index):
            return False
        if index[0].indices(rows) != (0, rows, 1):
            return False
        start, stop, step = index[1].indices(cols)
        if step != 1 or stop <= start or (width is not None and stop - start != width):
            return False
        width = stop - start
        if start % width:
            return False
        ports[out] = start // width
    if not ports or cols % width:
        return False
    n = cols // width
    if y.shape == (cols,):
        yshape = (n, width)
    elif y.shape == x.shape:
        yshape = (rows, n, width)
    else:
        return False
    return (n, rows, width), (rows, n, width), yshape, ports, tuple(ports)


def paired(fn, first, second, sources, stack, row, plain):
    """Two binary ufunc steps of one fn (`first`, `second`: (a, b, out) slots) whose outputs
    are consecutive rows `row`, `row + 1` of a stacked Sigmoid's stack (fused_steps.
    stacked_sigmoid, its held (stack, rows) in slot `stack`) and whose operands are blocks
    of two block buffers (`sources`: for operand 0 and 1, (buffer slot, {operand slot:
    block} or the slot of column_blocks' tuple whose first item is such a dict)): where this iteration's operands are consecutive
    blocks of those buffers and the outputs are the stack's rows, one call over two blocks
    of each writes both rows (a GRU's update and reset gates' Adds). Else `plain`."""
    a1, b1, o1 = first
    a2, b2, o2 = second
    (sa, pa), (sb, pb) = sources
    r2 = row + 2
    # (xa, xb, stack, i, j, their views, and the operands u1, u2, v1, v2 then): one tuple,
    # thread-safe
    last = [(None,) * 12]

    def step_pair(vals):
        held, xa, xb = vals[stack], vals[sa], vals[sb]
        u1, u2, v1, v2 = vals[a1], vals[a2], vals[b1], vals[b2]
        lv = last[0]
        if (u1 is lv[8] and u2 is lv[9] and v1 is lv[10] and v2 is lv[11] and xa is lv[0]
                and xb is lv[1] and held is not None and held[0] is lv[2]
                and vals[o1] is held[1][row] and vals[o2] is held[1][row + 1]):
            # the same operand views of the same buffers as when the form was checked
            # (block views kept across iterations): the same blocks
            fn(lv[5], lv[6], lv[7])
            return
        if held is not None and type(xa) is ndarray and type(xb) is ndarray:
            rows = held[1]
            if (u1.base is xa and u2.base is xa and v1.base is xb and v2.base is xb
                    and vals[o1] is rows[row] and vals[o2] is rows[row + 1]):
                ma = pa if type(pa) is dict else vals[pa][0]
                mb = pb if type(pb) is dict else vals[pb][0]
                i, j = ma[a1], mb[b1]
                whole = held[0]
                if (ma[a2] == i + 1 and mb[b2] == j + 1 and whole.dtype is xa.dtype
                        and whole.shape[1:] == xa.shape[1:] == xb.shape[1:]):
                    if (lv[0] is xa and lv[1] is xb and lv[2] is whole and lv[3] == i
                            and lv[4] == j):
                        last[0] = lv[:8] + (u1, u2, v1, v2)
                        fn(lv[5], lv[6], lv[7])
                        return
                    va, vb, vw = xa[i:i + 2], xb[j:j + 2], whole[row:r2]
                    last[0] = (xa, xb, whole, i, j, va, vb, vw, u1, u2, v1, v2)
                    fn(va, vb, vw)
                    return
        for f in plain:
            f(vals)
    return step_pair


def shared_select(mask, x, ys, outs, held_slot, broadcast, plain):
    """Select/SelectV2s of one mask and one `x` against `ys` (a masked RNN's new output and
    new state, both where(mask, h, previous)) as one select over a stack of the ys: a copy
    of the stack, then x (broadcast along it) copied in where the mask is set, so each row
    is its select's value; `outs` get the rows of that fresh result (they outlive the
    iteration). When the ys are the rows of the previous iteration's result (the loop
    variables it produced), that result is the stack as it is; else they are copied into
    one. `held_slot` keeps (result, its rows). Anything
    the select steps would not take (another shape or dtype, a mask that does not fit):
    the `plain` steps."""
    n = len(ys)
    copyto = np.copyto
    fit = [None]  # the last (mask shape, shape) that mask_fits accepted

    def step_selects(vals):
        m, v = vals[mask], vals[x]
        if (type(m) is ndarray and type(v) is ndarray and m.dtype.kind == "b" and m.ndim
                and ((ms := m.shape) == (shape := v.shape)
                     or (broadcast and fits(m, ms, shape, fit)))):
            held = vals[held_slot]
            stack = held[0] if held is not None else None
            if stack is not None:
                for y, row in zip(ys, held[1]):
                    if vals[y] is not row:
                        stack = None
                        break
            if stack is None or stack.shape[1:] != shape or stack.dtype is not v.dtype:
                stack = _copied(vals, ys, v)
            if stack is not None:
                # (the previous values copied, then the new ones where the mask is set: the
                # same bits as np.where, in about half its instructions at these sizes)
                r = stack.copy()
                copyto(r, v, where=m)  # (v broadcasts along the stack)
                rows = (r[0], r[1]) if n == 2 else tuple(r[k] for k in range(n))
                vals[held_slot] = (r, rows)
                for o, row in zip(outs, rows):
                    vals[o] = row
                return
        for f in plain:
            f(vals)
    return step_selects


def _copied(vals, ys, v):
    """The ys copied into one stack, if each is an array of v's shape and dtype; else None."""
    stack = np.empty((len(ys),) + v.shape, v.dtype)
    for k, y in enumerate(ys):
        w = vals[y]
        if type(w) is not ndarray or w.shape != v.shape or w.dtype is not v.dtype:
            return None
        np.copyto(stack[k], w)
    return stack
