"""The steps of a fused chain in a compiled loop body (tfg/executor/loop_fusion.py): each is
`step(vals)` over the loop's integer slots and computes one node the way its kernel does on
float arrays, the same numpy function on the same operands, but writes into the array its
slot held in the previous iteration where nothing outside the chain can still hold it
(`reuse`). A step that meets what its kernel would treat otherwise (another shape, a value
where Sigmoid's one-sided form could overflow, a size the memory guard would have to judge)
raises Fallback, and the chain runs its nodes' own prepared calls instead.

    >>> steps = [binary(np.add, 3, 4, 7, reuse=True), unary(np.tanh, 7, 8, reuse=False)]
    >>> for s in steps: s(vals)       # vals[8] = tanh(vals[3] + vals[4]); vals[7] kept

Before: one prepared call per node (type checks, a kernel frame, a fresh array each); after:
one Python frame and one numpy call per node, and no allocation for the chain's temporaries.
A ufunc's output buffer is passed positionally: numpy parses no keyword (about 15% of the
instructions of an add on 8x64).
"""
import numpy as np

from tfg.executor.direct_calls import mask_fits
from tfg.kernels.indexing_ops import strided_slice_index
from tfg.kernels.math_ops import sigmoid_into
from tfg.kernels.select import MIN_SIZE as _WHERE_MIN, where

ndarray = np.ndarray


class Fallback(Exception):
    """The fused steps do not apply to these values: run the nodes' own calls."""


def unary(fn, a, o, reuse):
    """An elementwise ufunc of one float input (Tanh, Exp, ...)."""
    if not reuse:
        def fresh1(vals):
            vals[o] = fn(vals[a])
        return fresh1

    def step1(vals):
        x, buf = vals[a], vals[o]
        if type(buf) is ndarray and buf.shape == x.shape:
            fn(x, buf)
        else:
            vals[o] = fn(x)
    return step1


def binary(fn, a, b, o, reuse):
    """An elementwise ufunc of two operands of one float dtype: the same shape, or one of them
    a scalar or a vector along the other's last axis (a GRU's recurrent bias). Other
    broadcasts could make the output larger than both inputs, a case for the memory guard."""
    def step2(vals):
        x, y = vals[a], vals[b]
        shape = x.shape
        if shape != y.shape:
            if not y.ndim or (y.ndim == 1 and x.ndim and y.shape[0] == shape[-1]):
                pass
            elif not x.ndim or (x.ndim == 1 and x.shape[0] == y.shape[-1]):
                shape = y.shape
            else:
                raise Fallback
        if reuse:
            buf = vals[o]
            if type(buf) is ndarray and buf.shape == shape:
                fn(x, y, buf)
                return
        vals[o] = fn(x, y)
    return step2


def add_n(ins, o, reuse):
    """AddN of two or more float arrays of one shape, summed in order as its kernel sums them
    (the first two, then each next one into that sum: tfg/kernels/math_ops.py's add_n)."""
    add = np.add
    first, second, rest = ins[0], ins[1], ins[2:]

    def step_addn(vals):
        x = vals[first]
        shape = x.shape
        if not shape:
            raise Fallback  # (0-d: the kernel's sum of two is a numpy scalar it wraps)
        for s in ins[1:]:
            if vals[s].shape != shape:
                raise Fallback  # (a broadcast: the kernel's case)
        buf = vals[o] if reuse else None
        if not (type(buf) is ndarray and buf.shape == shape and buf.dtype is x.dtype):
            buf = vals[o] = add(x, vals[second])
        else:
            add(x, vals[second], buf)
        for s in rest:
            add(buf, vals[s], buf)
    return step_addn


# The most elements a read-only operand is copied broadcast to (tiled) for an add.
TILE_MAX = 1 << 16


def tiled(v, shape, last):
    """`v` broadcast to `shape` as a contiguous array, the same values: numpy adds two
    contiguous arrays of one shape in its plain loop, a broadcast vector through its
    iterator (an LSTM's bias on 8x128: 11.2k -> 5.3k instructions a call). Only for a
    read-only `v` (a Const's value, a view of one: it cannot change while it is kept in
    `last`, [(v, shape, tiled)]) of at most TILE_MAX elements after the broadcast; else `v`."""
    lv = last[0]
    if v is lv[0] and shape == lv[1]:
        return lv[2]
    if v.flags.writeable:
        return v
    n = 1
    for d in shape:
        n *= d
    if n > TILE_MAX:
        return v
    t = np.empty(shape, v.dtype)
    t[...] = v
    last[0] = (v, shape, t)
    return t


def bias_add(a, b, o, reuse, nchw):
    """BiasAdd along the last axis (NHWC, or any format on a matrix)."""
    add = np.add
    last = [(None, None, None)]  # (a read-only bias, a shape, the bias tiled to it)

    def step_bias(vals):
        x, bias = vals[a], vals[b]
        if (type(x) is not ndarray or x.ndim < 2 or (nchw and x.ndim > 2)
                or type(bias) is not ndarray or bias.ndim != 1
                or bias.shape[0] != x.shape[-1]):
            raise Fallback
        shape = x.shape
        y = tiled(bias, shape, last)
        if reuse:
            buf = vals[o]
            if type(buf) is ndarray and buf.shape == shape:
                add(x, y, buf)
                return
        vals[o] = add(x, y)
    return step_bias


def matmul(a, b, o, reuse, ta, tb, limit):
    """MatMul of two float matrices (`ta`, `tb`: its transpose attrs, as the kernel applies
    them), when its output is within the memory guard's `limit` (None: no guard): the
    guard's verdict, without its shape function."""
    mm = np.matmul

    def step_mm(vals):
        x, y = vals[a], vals[b]
        if type(x) is not ndarray or type(y) is not ndarray or x.ndim != 2 or y.ndim != 2:
            raise Fallback
        if ta:
            x = x.T
        if tb:
            y = y.T
        if x.shape[1] != y.shape[0]:
            raise Fallback  # the kernel's error to word
        shape = (x.shape[0], y.shape[1])
        if limit is not None and shape[0] * shape[1] * x.itemsize > limit:
            raise Fallback
        if reuse:
            buf = vals[o]
            if type(buf) is ndarray and buf.shape == shape:
                mm(x, y, buf)
                return
        vals[o] = mm(x, y)
    return step_mm


def fused_matmul(a, b, bias, o, reuse, ta, tb, limit):
    """_FusedMatMul with fused_ops [BiasAdd] (Grappler's remap of MatMul then BiasAdd, a GRU's
    input projection): the MatMul step, then the bias added in the product's memory, as
    the kernel does it (tfg/kernels/fused.py: np.add(y, bias, out=y) on its fresh product)."""
    mm = matmul(a, b, o, reuse, ta, tb, limit)
    add = np.add
    last = [(None, None, None)]  # (a read-only bias, a shape, the bias tiled to it)

    def step_fmm(vals):
        v = vals[bias]
        if type(v) is not ndarray or v.ndim != 1:
            raise Fallback
        mm(vals)
        y = vals[o]
        if v.shape[0] != y.shape[1]:
            raise Fallback  # the kernel's error to word
        add(y, tiled(v, y.shape, last), y)
    return step_fmm


def strided(a, spec, o, attrs, limit):
    """StridedSlice by begin, end and strides of Consts (`spec`: their slots): basic slicing,
    a view of the input, as the kernel returns it (its index per input shape kept), when the
    input is within the memory guard's `limit` (so is the slice). A GRU's three gate slices."""
    cache = {}

    def step_slice(vals):
        x = vals[a]
        if type(x) is not ndarray or (limit is not None and x.nbytes > limit):
            raise Fallback
        index = cache.get(x.shape)
        if index is None:
            begin, end, strides = (vals[s] for s in spec)
            try:
                index = strided_slice_index(x.shape, begin, end, strides, attrs)
            except Exception:  # noqa: BLE001 - the kernel's error to word
                raise Fallback from None
            if len(cache) > 16:
                cache.clear()
            cache[x.shape] = index
        vals[o] = x[index]
    return step_slice


def select(c, a, b, o, broadcast):
    """Select/SelectV2 of a bool mask and two arrays of one shape: np.where, or the kernel's
    `where` from its size on (the same bits); `broadcast` (SelectV2): the mask may broadcast
    to their shape (a BiLSTM's [8, 1] step mask). A fresh array, as the kernel's."""
    bool_ = np.bool_
    np_where, copyto = np.where, np.copyto
    fit = [None]  # the last (mask shape, shape) that mask_fits accepted

    def step_select(vals):
        m, x, y = vals[c], vals[a], vals[b]
        if (type(m) is not ndarray or type(x) is not ndarray or type(y) is not ndarray
                or not m.ndim or m.dtype != bool_):
            raise Fallback
        shape, ms = x.shape, m.shape
        if shape != y.shape:
            raise Fallback
        if ms != shape and not (broadcast and fits(m, ms, shape, fit)):
            raise Fallback
        if x.size >= _WHERE_MIN:
            vals[o] = where(m, x, y)
        elif x.dtype is y.dtype:
            # y copied, then x where the mask is set: np.where's bits in about 80% of its
            # instructions on a BiLSTM's [8, 64] state with its [8, 1] mask
            r = y.copy()
            copyto(r, x, where=m)
            vals[o] = r
        else:
            vals[o] = np_where(m, x, y)
    return step_select


def fits(m, ms, shape, fit):
    """mask_fits(m, shape), remembered in `fit` ([(mask shape, shape)] it last accepted):
    a masked RNN asks it of the same shapes every iteration."""
    key = (ms, shape)
    if key == fit[0]:
        return True
    if mask_fits(m, shape):
        fit[0] = key
        return True
    return False


def sigmoid(a, o, reuse):
    """Sigmoid by tfg.kernels.math_ops.sigmoid_into (its kernel's one-sided form)."""
    def step_sig(vals):
        x = vals[a]
        if type(x) is not ndarray:
            raise Fallback
        buf = vals[o] if reuse else None
        if type(buf) is not ndarray or buf.shape != x.shape:
            buf = None
        r = sigmoid_into(x, buf)
        if r is None:
            raise Fallback
        vals[o] = r
    return step_sig


def split(axis, a, outs, n, sig=None, blocks=None):
    """Split into `n` views along a constant axis (the kernel's basic slicing). `sig`:
    (hidden slot, reuse, {port: slot}) when Sigmoids of two or more of the pieces are in the
    chain: one Sigmoid over the whole input, and each piece's Sigmoid a view of it (an LSTM
    cell's three gates: 5 numpy calls instead of 15). `blocks`: (slot, reuse) of a buffer
    for the pieces of a C-contiguous matrix split along its columns: one copy makes each
    piece a contiguous block (the same values), so that the ufuncs after it take numpy's
    contiguous loops instead of its strided iterator (an LSTM cell: 38 -> 30 us at 8x64)."""
    cache = {}
    copyto, empty = np.copyto, np.empty
    block_index = tuple(range(n))
    # the views of a buffer kept from the last iteration are the same views: made once
    # ((buffer, index, views) each, one tuple: a concurrent run reads a consistent one)
    last_pieces, last_gates = [(None, None, ())], [(None, None, ())]

    def step_split(vals):
        x, ax = vals[a], vals[axis]
        if type(x) is not ndarray:
            raise Fallback
        if type(ax) is not int:
            if getattr(ax, "ndim", 1) != 0 or ax.dtype.kind not in "iu":
                raise Fallback
            ax = int(ax)
        key = (x.shape, ax)
        index = cache.get(key)
        if index is None:
            if len(cache) > 16:
                cache.clear()
            index = cache[key] = _split_index(x.shape, ax, n)
        if blocks is not None and x.ndim == 2 and len(index[0]) == 2 and x.flags.c_contiguous:
            rows, cols = x.shape
            k = cols // n
            slot, reuse = blocks
            src = vals[slot] if reuse else None
            if type(src) is not ndarray or src.shape != (n, rows, k) or src.dtype is not x.dtype:
                src = empty((n, rows, k), x.dtype)
            copyto(src, x.reshape(rows, n, k).transpose(1, 0, 2))
            vals[slot] = src
            index = block_index
            lv = last_pieces[0]
            if lv[0] is src and lv[1] is index:
                pieces = lv[2]
            else:
                pieces = tuple(src[i] for i in index)
                if reuse:
                    last_pieces[0] = (src, index, pieces)
            for o, v in zip(outs, pieces):
                vals[o] = v
        else:
            src = x
            for o, i in zip(outs, index):
                vals[o] = src[i]
        if sig is not None:
            hidden, reuse, ports = sig
            buf = vals[hidden] if reuse else None
            if type(buf) is not ndarray or buf.shape != src.shape:
                buf = None
            whole = sigmoid_into(src, buf)
            if whole is None:
                raise Fallback
            vals[hidden] = whole
            lv = last_gates[0]
            if lv[0] is whole and lv[1] is index:
                gates = lv[2]
            else:
                gates = tuple(whole[index[port]] for port, _ in ports)
                if reuse:
                    last_gates[0] = (whole, index, gates)
            for (_, o), v in zip(ports, gates):
                vals[o] = v
    return step_split


def _split_index(shape, axis, n):
    if not -len(shape) <= axis < len(shape):
        raise Fallback
    axis %= len(shape)
    if shape[axis] % n:
        raise Fallback  # the kernel's error to word
    k = shape[axis] // n
    lead = (slice(None),) * axis
    return [lead + (slice(i * k, (i + 1) * k),) for i in range(n)]


def stacked_sigmoid(ins, outs, stack, out, reuse):
    """Sigmoids of two or more arrays of one shape and dtype that steps of the chain write
    (`ins`: their slots, each written by a ufunc step that reuses its buffer) as one Sigmoid
    over a stack of them (a GRU cell's update and reset gates: 5 numpy calls instead of 10,
    one overflow test instead of two). The stack's rows are placed in the `ins` slots, so
    the ufunc steps write into them from the next iteration on (no copy); `outs` get views
    of the stacked Sigmoid (`out`: its slot, its buffer reused when `reuse`). A row that is
    not the stack's (the first iteration, a fallback, a new shape) is copied in: the same
    values. Elementwise, so each element is what the Sigmoid kernel gives it, unless an
    element of another gate is below the overflow floor: then Fallback (each kernel decides
    its own form)."""
    n = len(ins)
    empty, copyto = np.empty, np.copyto
    # (stack, result, its row views) of the last call: a reused result's rows are the same
    # views every iteration (one tuple, so a concurrent run reads a consistent one)
    last = [(None, None, ())]

    def step_stack(vals):
        held = vals[stack]  # (stack array, its row views) from the previous iteration
        if held is not None:
            for i, v in zip(ins, held[1]):
                if vals[i] is not v:
                    held = None
                    break
        if held is None:
            xs = [vals[i] for i in ins]
            x0 = xs[0]
            for x in xs:
                if type(x) is not ndarray or x.shape != x0.shape or x.dtype is not x0.dtype:
                    raise Fallback
            whole = empty((n,) + x0.shape, x0.dtype)
            for k, x in enumerate(xs):
                copyto(whole[k], x)
            held = vals[stack] = (whole, tuple(whole[k] for k in range(n)))
            for i, v in zip(ins, held[1]):
                vals[i] = v
        src = held[0]
        lv = last[0]
        if reuse:
            buf = vals[out]
            if buf is not lv[1] or src is not lv[0]:
                if (type(buf) is not ndarray or buf.shape != src.shape
                        or buf.dtype is not src.dtype):
                    buf = None
        else:
            buf = None
        r = sigmoid_into(src, buf)
        if r is None:
            raise Fallback
        vals[out] = r
        if r is lv[1] and src is lv[0]:
            rows = lv[2]
        else:
            rows = tuple(r[k] for k in range(n))
            if reuse:
                last[0] = (src, r, rows)
        for o, v in zip(outs, rows):
            vals[o] = v
    return step_stack
