"""Kernel calls of a compiled loop (tfg/executor/loops.py) that skip the memory guard's
layers where its verdict is known without them, and make the prepared call where it is not.
Each is `call(vals, step)` over the loop's integer slots, like tfg/executor/calls.py's.

    >>> call = matmul_call(prepared, nn_ops.matmul, ctx, ins=(3, 4), out=5, limit=1 << 30)
    >>> call(vals, None)       # vals[5] = vals[3] @ vals[4], its size checked against limit

Before: every MatMul, SelectV2, TensorListGetItem and StridedSlice of a loop body paid the
guard's cache key over its inputs (2-4 us of a 3-15 us call) and a kernel frame or two; after:
a few type and size tests, then the kernel (or numpy) itself. Values are the kernels' own.
"""
import numpy as np

from tfg.kernels.list_ops import TensorList
from tfg.kernels.select import MIN_SIZE as _WHERE_MIN, where

np_where = np.where


def select_call(call, ins, out):
    """SelectV2/Select of a bool condition and two arrays of one shape and dtype: the
    kernel's `where` straight (the output is the inputs' size: no memory verdict to ask);
    anything else: the prepared kernel call. A BiLSTM's mask selects, 6 an iteration."""
    c, a, b = ins
    ndarray = np.ndarray

    def call3(vals, step):
        m, x, y = vals[c], vals[a], vals[b]
        if (type(m) is ndarray and type(x) is ndarray and type(y) is ndarray
                and m.shape == x.shape == y.shape and m.ndim and m.dtype == np.bool_
                and x.dtype is y.dtype):
            # (what `where` itself does below its size for bit masks, without its checks)
            vals[out] = np_where(m, x, y) if x.size < _WHERE_MIN else where(m, x, y)
        else:
            call(vals, step)
    return call3


def matmul_call(call, fn, ctx, ins, out, limit):
    """MatMul of two float matrices whose product is within the memory guard's `limit`
    (None: no guard): the kernel unguarded (the guard's verdict, without its shape function
    and cache key: 2-3 us of a 10 us call); anything else: the prepared call. An RNN's
    gradient loop runs three a step."""
    a, b = ins
    ta, tb = bool(ctx.attrs.get("transpose_a")), bool(ctx.attrs.get("transpose_b"))
    ndarray = np.ndarray

    def mm(vals, step):
        x, y = vals[a], vals[b]
        if (type(x) is ndarray and type(y) is ndarray and x.ndim == 2 and y.ndim == 2
                and x.dtype is y.dtype and x.dtype.kind == "f"):
            n = (x.shape[1] if ta else x.shape[0]) * (y.shape[0] if tb else y.shape[1])
            if limit is None or n * x.itemsize <= limit:
                vals[out] = fn(ctx, x, y)
                return
        call(vals, step)
    return mm


def slice_call(call, fn, ctx, ins, out, limit):
    """StridedSlice of a numpy array: its output is never larger than its input, so when the
    input is within the memory guard's `limit` (None: no guard) so is the output (the guard's
    verdict, without its key over four inputs: a GRU slices its gates three times a step);
    anything else: the prepared call."""
    ndarray = np.ndarray

    def sliced(vals, step):
        x = vals[ins[0]]
        if type(x) is ndarray and (limit is None or x.nbytes <= limit):
            vals[out] = fn(ctx, *[vals[i] for i in ins])
        else:
            call(vals, step)
    return sliced


_INDEX_TYPES = (np.int32, np.int64)


def list_get_call(call, fn, ctx, ins, out):
    """TensorListGetItem of an item that was set: the kernel unguarded (it returns the stored
    array, nothing is allocated: no memory verdict to ask); an unset item (zeros of the
    element shape), another index type or a bad index: the prepared call. An LSTM reads its
    input step so every iteration."""
    h, i, e = ins

    def get_item(vals, step):
        lst, idx = vals[h], vals[i]
        if (type(lst) is TensorList and type(idx) in _INDEX_TYPES
                and 0 <= idx < len(lst.items) and lst.items[idx] is not None):
            vals[out] = fn(ctx, lst, idx, vals[e])
        else:
            call(vals, step)
    return get_item
