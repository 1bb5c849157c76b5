"""The stacked steps of a batched chain (tfg/executor/batched_chain.py picks them): each takes
the list of stacked values `bv` and writes its output index, on operands of shape [2, ...]
(row 0 loop A's, row 1 loop B's).

    Before (two fused chains' MatMul steps): h_a @ U_a, then h_b @ U_b (8x32 @ 32x128 each)
    After: matmul(H, U2) on H = [2, 8, 32], U2 = [2, 32, 128]: one np.matmul, whose rows are
      the two products bit for bit (np.matmul multiplies each pair of a stack as two matrices)

Each step does what the chain's own step does on each row (the same numpy function on the
same elements), or raises Fallback having written nothing the caller keeps: the caller then
runs the two chains, whose own fallbacks decide. The Selects are in batched_selects.py.
"""
import numpy as np

from tfg.kernels.math_ops import sigmoid_into


class Fallback(Exception):
    """The stacked steps do not take these operands."""


def unary(fn, a, o):
    def step(bv):
        bv[o] = fn(bv[a])
    return step


def binary(fn, a, b, o):
    def step(bv):
        x, y = bv[a], bv[b]
        if x.shape != y.shape:
            raise Fallback
        bv[o] = fn(x, y)
    return step


def sigmoid(a, o):
    def step(bv):
        r = sigmoid_into(bv[a])
        if r is None:
            raise Fallback
        bv[o] = r
    return step


def matmul(a, b, o, limit):
    mm = np.matmul

    def step(bv):
        x, y = bv[a], bv[b]
        if x.ndim != 3 or y.ndim != 3 or x.shape[2] != y.shape[1]:
            raise Fallback
        if limit is not None and x.shape[1] * y.shape[2] * x.itemsize > limit:
            raise Fallback
        bv[o] = mm(x, y)
    return step


def bias(a, b, o):
    """x + bias along the last axis; the stacked bias tiled to x's shape once per (bias, shape)
    (numpy adds two contiguous arrays of one shape in its plain loop, a broadcast one
    through its iterator: the same float adds, as fused_steps.tiled)."""
    add = np.add
    last = [(None, None, None)]

    def step(bv):
        x, bias = bv[a], bv[b]
        if x.ndim != 3 or bias.ndim != 2 or bias.shape[1] != x.shape[2]:
            raise Fallback
        lb, ls, t = last[0]
        if lb is not bias or ls != x.shape:
            t = np.ascontiguousarray(np.broadcast_to(bias[:, None, :], x.shape))
            last[0] = (bias, x.shape, t)
        bv[o] = add(x, t)
    return step


def split(axis, a, outs, sigmoids):
    """Split into len(outs) pieces along a constant axis. Along the last axis of a
    C-contiguous stack, the pieces are copied into one (n, ...) buffer of contiguous blocks
    (the same values; the ufuncs after it then take numpy's contiguous loops, as
    fused_steps.split's blocks); else views. `sigmoids`: ((port, output index), ...) of
    the Sigmoids of the pieces, taken as one Sigmoid over the whole."""
    n = len(outs)
    copyto, empty = np.copyto, np.empty
    forms = {}  # (shape, axis) -> (blocks form or None, piece indices)

    def form(shape, ax):
        r = len(shape) - 1
        if ax < 0:
            ax += r
        if not 0 <= ax < r or shape[ax + 1] % n:
            raise Fallback
        w = shape[ax + 1] // n
        lead = (slice(None),) * (ax + 1)
        index = tuple(lead + (slice(p * w, (p + 1) * w),) for p in range(n))
        blocks = None
        if ax == r - 1:
            nd = len(shape)
            blocks = (shape[:-1] + (n, w), (nd - 1,) + tuple(range(nd - 1)) + (nd,),
                      (n,) + shape[:-1] + (w,))
        if len(forms) > 16:
            forms.clear()
        f = forms[(shape, ax)] = (blocks, index)
        return f

    def step(bv):
        x, ax = bv[a], bv[axis]
        f = forms.get((x.shape, ax)) or form(x.shape, ax)
        blocks, index = f
        if blocks is not None and x.flags.c_contiguous:
            src = empty(blocks[2], x.dtype)
            copyto(src, x.reshape(blocks[0]).transpose(blocks[1]))
            for p, o in enumerate(outs):
                bv[o] = src[p]
            if sigmoids:
                s = sigmoid_into(src)
                if s is None:
                    raise Fallback
                for p, o in sigmoids:
                    bv[o] = s[p]
            return
        for o, i in zip(outs, index):
            bv[o] = x[i]
        if sigmoids:
            s = sigmoid_into(x)
            if s is None:
                raise Fallback
            for p, o in sigmoids:
                bv[o] = s[index[p]]
    return step
