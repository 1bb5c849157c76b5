"""Kernel calls of a compiled loop (tfg/executor/loops.py) that skip the memory guard's
layers where its verdict is known without them, and make the prepared call where it is not.
Each is `call(vals, step)` over the loop's integer slots, like tfg/executor/calls.py's.

    >>> call = matmul_call(prepared, nn_ops.matmul, ctx, ins=(3, 4), out=5, limit=1 << 30)
    >>> call(vals, None)       # vals[5] = vals[3] @ vals[4], its size checked against limit

Before: every MatMul, SelectV2, TensorListGetItem, TensorListSetItem and StridedSlice of a
loop body paid the guard's cache key over its inputs (2-4 us of a 3-15 us call) and a kernel
frame or two; after: a few type and size tests, then the kernel (or numpy) itself. Values are
the kernels' own.
"""
import numpy as np

from tfg.kernels._util import immutable
from tfg.kernels.conv_gemm import SKINNY_ROWS
from tfg.kernels.list_ops import TensorList, compatible
from tfg.kernels.select import MIN_SIZE as _WHERE_MIN, where

np_where = np.where
# the most rows of a product numpy or the MatMul kernel computes row by row (GEMVs, whose sums
# may take another order with a transposed operand): a GEMM from one more
_GEMV_ROWS = max(SKINNY_ROWS + (1,))
# the largest right operand kept transposed (elements): a small weight's copy, not a second
# copy of a large one (where the view's cost is a smaller part of the product's anyway)
_COPY_MAX = 1 << 20


def mask_fits(m, shape):
    """Whether the bool mask `m` broadcasts to `shape` without growing it (a BiLSTM's [8, 1]
    time-step mask against its [8, 32] states): np.where then gives an array of `shape`."""
    n = m.ndim
    if n > len(shape):
        return False
    ms = m.shape
    if ms == shape:
        return True
    off = len(shape) - n
    for k in range(n):
        d = ms[k]
        if d != 1 and d != shape[off + k]:
            return False
    return True


def select_call(call, ins, out, broadcast=False):
    """SelectV2/Select of a bool condition and two arrays of one shape and dtype: the
    kernel's `where` straight (the output is the inputs' size: no memory verdict to ask);
    anything else: the prepared kernel call. `broadcast` (SelectV2): the condition may also
    broadcast to the arrays' shape (mask_fits). A BiLSTM's mask selects, 6 an iteration."""
    c, a, b = ins
    ndarray = np.ndarray

    def call3(vals, step):
        m, x, y = vals[c], vals[a], vals[b]
        if (type(m) is ndarray and type(x) is ndarray and type(y) is ndarray
                and x.shape == y.shape and m.ndim and m.dtype == np.bool_
                and x.dtype is y.dtype
                and (m.shape == x.shape or (broadcast and mask_fits(m, x.shape)))):
            # (what `where` itself does below its size for bit masks, without its checks)
            vals[out] = np_where(m, x, y) if x.size < _WHERE_MIN else where(m, x, y)
        else:
            call(vals, step)
    return call3


def matmul_call(call, fn, ctx, ins, out, limit):
    """MatMul of two float matrices whose product is within the memory guard's `limit`
    (None: no guard): the kernel unguarded (the guard's verdict, without its shape function
    and cache key: 2-3 us of a 10 us call); anything else: the prepared call. An RNN's
    gradient loop runs three a step.

    With transpose_b and the same read-only right operand as in the call before (a Const
    loop-invariant weight: an RNN's dh = g W^T), the product reads a contiguous copy of W^T made once
    instead of the transposed view: OpenBLAS packs both into the same panels, so the GEMM
    (at least 4 rows and 2 columns, not the kernel's per-row GEMVs of 2-3 rows; a weight of
    at most a million elements) gives the same bits, 3-4 us sooner on 32x128 by 128x128
    (tests/test_rnn_loop_calls.py)."""
    a, b = ins
    ta, tb = bool(ctx.attrs.get("transpose_a")), bool(ctx.attrs.get("transpose_b"))
    ndarray = np.ndarray
    matmul = np.matmul
    seen = [(None, None)]  # (the last right operand, its transpose made contiguous or None)

    def mm(vals, step):
        x, y = vals[a], vals[b]
        if (type(x) is ndarray and type(y) is ndarray and x.ndim == 2 and y.ndim == 2
                and x.dtype is y.dtype and x.dtype.kind == "f"):
            n = (x.shape[1] if ta else x.shape[0]) * (y.shape[0] if tb else y.shape[1])
            if limit is None or n * x.itemsize <= limit:
                if tb and not ta:
                    last, yt = seen[0]  # (one tuple: a concurrent run sees one or the other)
                    if (y is last and yt is not False and x.shape[0] > _GEMV_ROWS
                            and y.shape[0] > 1 and x.shape[1] == y.shape[1]
                            and y.size <= _COPY_MAX):
                        if yt is None:
                            if not immutable(y):  # (a fed or computed array: False)
                                seen[0] = (y, False)
                                vals[out] = fn(ctx, x, y)
                                return
                            yt = np.ascontiguousarray(y.T)
                            seen[0] = (y, yt)
                        vals[out] = matmul(x, yt)
                        return
                    if y is not last:
                        seen[0] = (y, None)
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


def _index(idx):
    """A list index as the kernels read it (tfg.kernels.list_ops._int): an int32/int64 scalar
    or 0-d array (a Const index: Keras writes its last output at 0); None for anything else."""
    t = type(idx)
    if t is np.int32 or t is np.int64:
        return idx
    if t is np.ndarray and idx.ndim == 0 and idx.dtype.type in _INDEX_TYPES:
        return idx[()]
    return None


def list_get_call(call, fn, ctx, ins, out):
    """TensorListGetItem of an item that was set: the kernel unguarded (it returns the stored
    array, nothing is allocated: no memory verdict to ask); an unset item (zeros of the
    element shape), another index type or a bad index: the prepared call. An LSTM reads its
    input step so every iteration."""
    h, i, e = ins
    want = [None]  # the list element dtype the kernel last accepted

    def get_item(vals, step):
        lst, idx = vals[h], _index(vals[i])
        if type(lst) is TensorList and idx is not None and 0 <= idx < len(lst.items):
            item = lst.items[idx]
            if item is not None:
                if lst.element_dtype is want[0]:
                    vals[out] = item  # what the kernel returns, without its checks
                    return
                vals[out] = fn(ctx, lst, idx, vals[e])
                want[0] = lst.element_dtype
                return
        call(vals, step)
    return get_item


def list_set_call(call, fn, ctx, ins, out):
    """TensorListSetItem of an array of the list's numpy dtype and element shape at an index
    within the list: the new list made here as the kernel makes it (a copy of the Python list
    of items, the array stored as it is; the op's output is a variant, whose size the memory
    guard never judges); anything else: the prepared call, whose kernel words the error. An
    RNN writes its output step so every iteration."""
    h, i, v = ins
    ndarray = np.ndarray
    want = [None, None]  # (array dtype, list element dtype) the kernel last accepted

    def set_item(vals, step):
        lst, idx, item = vals[h], _index(vals[i]), vals[v]
        if (type(lst) is TensorList and idx is not None and type(item) is ndarray
                and item.dtype is want[0] and lst.element_dtype is want[1]
                and 0 <= idx < len(lst.items)):
            shape = lst.element_shape
            if shape == item.shape or compatible(shape, item.shape):
                items = list(lst.items)
                items[idx] = item
                vals[out] = lst.with_items(items)
                return
        call(vals, step)
        new = vals[out]
        if type(new) is TensorList and type(item) is ndarray:
            # what the kernel accepted: this list dtype with this array dtype
            want[0], want[1] = item.dtype, new.element_dtype
    return set_item

