"""Direct calls of the array-moving kernels of gradient loops (tfg/executor/loops.py):
ConcatV2, Slice, AddN of more than two, TensorArrayReadV3, TensorArrayWriteV3 and
TensorArrayGradV3 (TF1), TensorListPushBack and TensorListPopBack (TF2), each called
without the memory guard's layers and the kernel's argument checks where the operands are
the common case and nothing new is allocated beyond the inputs' size; the prepared kernel
call otherwise, which words every error. Each is `call(vals, step)` over the loop's slots.

    >>> call = array_call(item, slice_, prepared, ins=(3, 4, 5), outs=(6,))
    >>> call(vals, None)       # vals[6] = vals[3][index of begin vals[4], size vals[5]]

Before (a TF1 GRUCell's training step, per call, op profile): ConcatV2 9 us, Slice 7.4,
TensorArrayReadV3 10.3, TensorArrayWriteV3 8.3, TensorArrayGradV3 6.7, AddN of three 3.4;
the numpy work in each is 1-3 us. After: 2.5-5 us (a GRUCell's step: 16% fewer
instructions with the deferred bias sums of loop_accumulation.py). A TF2 LSTM's gradient
loop popped 8 lists an iteration at 7.3 us a call (the kernels' generic two-output call).
Values are the kernels' own: each path below is what the kernel itself computes on such
operands.
"""
import numpy as np

from tfg.executor.direct_calls import _index
from tfg.kernels.array_ops import concat_v2, slice_
from tfg.kernels.list_ops import TensorList, tensor_list_pop_back, tensor_list_push_back
from tfg.kernels.math_ops import add_n
from tfg.kernels._util import s as text
from tfg.kernels.tensor_array_ops import (TensorArray, _flow, tensor_array_grad_v3,
                                          tensor_array_read_v3, tensor_array_write_v3)


def array_call(it, fn, call, ins, outs):
    """The direct call of kernel `fn` for node `it` (a numpy kernel that reads no Ref), or
    None where `fn` is none of this module's."""
    if it.ctx is None or it.ctx.xp is not np:
        return None
    if fn is tensor_array_grad_v3 and len(ins) == 2 and len(outs) == 2:
        return array_grad_call(call, it.ctx, ins, outs)
    if fn is tensor_list_pop_back and len(ins) == 2 and len(outs) == 2:
        return list_pop_call(call, ins, outs)
    if len(outs) != 1:
        return None
    limit = getattr(it.fn, "limit", None)
    if fn is concat_v2 and len(ins) > 2:
        return concat_call(call, ins, outs[0], limit)
    if fn is slice_ and len(ins) == 3:
        return slice_call(call, ins, outs[0], limit)
    if fn is add_n and len(ins) > 2:
        return addn_call(call, ins, outs[0])
    if fn is tensor_array_read_v3 and len(ins) == 3:
        return array_read_call(call, it.ctx, ins, outs[0])
    if fn is tensor_array_write_v3 and len(ins) == 4:
        return array_write_call(call, ins, outs[0], limit)
    if fn is tensor_list_push_back and len(ins) == 2:
        return list_push_call(call, ins, outs[0])
    return None


def concat_call(call, ins, out, limit):
    """ConcatV2 of numpy arrays of one dtype and rank (>= 1) along an int scalar axis in
    range, their bytes within `limit` (the output is their sum): np.concatenate, as the
    kernel calls it; a shape mismatch or anything else: the prepared call."""
    parts_at, axis_at = ins[:-1], ins[-1]
    ndarray = np.ndarray
    concatenate = np.concatenate

    def concat(vals, step):
        ax = _index(vals[axis_at])  # (an int32/int64 scalar: ConcatV2's Tidx)
        parts = [vals[i] for i in parts_at]
        first = parts[0]
        if ax is not None and type(first) is ndarray:
            ndim, dtype, total = first.ndim, first.dtype, 0
            for p in parts:
                if type(p) is not ndarray or p.ndim != ndim or p.dtype is not dtype:
                    break
                total += p.nbytes
            else:
                if ndim and -ndim <= ax < ndim and (limit is None or total <= limit):
                    try:
                        vals[out] = concatenate(parts, axis=ax)
                        return
                    except ValueError:
                        pass  # (the kernel words the mismatch)
        call(vals, step)
    return concat


def slice_call(call, ins, out, limit):
    """Slice of a non-empty numpy array within `limit` (its output is a view of it): the
    index the kernel made for the same begin and size arrays (loop-invariant in a gradient
    loop: the offsets of a concat's pieces) and input shape; else the prepared call, whose
    index is kept. Arrays are never written once made, so the same objects hold the same
    numbers."""
    x_at, begin_at, size_at = ins
    ndarray = np.ndarray
    memo = [None, None, None, None]  # begin, size, input shape, index

    def sliced(vals, step):
        x, b, sz = vals[x_at], vals[begin_at], vals[size_at]
        if type(x) is ndarray and x.size and (limit is None or x.nbytes <= limit):
            if b is memo[0] and sz is memo[1] and x.shape == memo[2]:
                vals[out] = x[memo[3]]
                return
            call(vals, step)
            if type(b) is ndarray and type(sz) is ndarray:
                memo[:] = b, sz, x.shape, _slice_index(x.shape, b, sz)
            return
        call(vals, step)
    return sliced


def _slice_index(shape, begin, size):
    """The tuple of slices the Slice kernel indexes with (begin and size valid: the kernel
    took them)."""
    return tuple(slice(b, shape[d] if s == -1 else b + s)
                 for d, (b, s) in enumerate(zip(begin.tolist(), size.tolist())))


def addn_call(call, ins, out):
    """AddN of numpy arrays of one shape (rank >= 1) and dtype: the kernel's sum (the first
    two added, the others added into it, in order); else the prepared call."""
    first_at, rest_at = ins[:2], ins[2:]
    ndarray = np.ndarray
    add = np.add

    def addn(vals, step):
        x, y = vals[first_at[0]], vals[first_at[1]]
        if type(x) is ndarray and type(y) is ndarray and x.ndim:
            shape, dtype = x.shape, x.dtype
            rest = [vals[i] for i in rest_at]
            if y.shape == shape and y.dtype is dtype and all(
                    type(r) is ndarray and r.shape == shape and r.dtype is dtype
                    for r in rest):
                total = add(x, y)
                for r in rest:
                    add(total, r, out=total)
                vals[out] = total
                return
        call(vals, step)
    return addn


def array_read_call(call, ctx, ins, out):
    """TensorArrayReadV3 of an entry that holds a value (nothing to allocate): the array's
    own read (its bookkeeping: cleared after read, read before write), once the kernel has
    accepted the array's dtype for this node; else the prepared call."""
    handle_at, index_at, _ = ins
    accepted = [None]  # the array dtype the kernel last accepted

    def read(vals, step):
        array, i = vals[handle_at], _index(vals[index_at])
        if type(array) is TensorArray and i is not None and array.dtype == accepted[0]:
            entries = array.entries
            if 0 <= i < len(entries) and entries[i].value is not None:
                vals[out] = array.read(int(i))
                return
        call(vals, step)
        if type(array) is TensorArray:
            accepted[0] = array.dtype
    return read


def array_write_call(call, ins, out, limit):
    """TensorArrayWriteV3 of a non-empty numpy array within `limit`: the array's own write
    (its checks: dtype, shape, bounds, written twice), the float32 flow passed on; else the
    prepared call."""
    handle_at, index_at, value_at, flow_at = ins
    ndarray = np.ndarray

    def write(vals, step):
        array, i, v = vals[handle_at], _index(vals[index_at]), vals[value_at]
        if (type(array) is TensorArray and i is not None and type(v) is ndarray and v.size
                and (limit is None or v.nbytes <= limit)):
            array.write(int(i), v)
            vals[out] = _flow(vals[flow_at])
            return
        call(vals, step)
    return write


def array_grad_call(call, ctx, ins, outs):
    """TensorArrayGradV3 of a TensorArray: its gradient array for the node's `source` (made
    at the first call, the same one after), the flow passed on; else the prepared call."""
    handle_at, flow_at = ins
    grad_at, flow_out = outs
    source = text(ctx.attrs["source"])

    def grad(vals, step):
        array = vals[handle_at]
        if type(array) is TensorArray:
            vals[grad_at] = array.grad(source)
            vals[flow_out] = _flow(vals[flow_at])
            return
        call(vals, step)
    return grad


def list_push_call(call, ins, out):
    """TensorListPushBack of a numpy array onto a list without a size limit: the list with
    the item appended (a new list, as the kernel makes), once the kernel has taken an item of
    this dtype and shape onto a list of this element dtype and shape; else the prepared call.
    A TF2 gradient loop's forward pushes each value its gradient needs, 8 a step for an
    LSTM cell."""
    handle_at, value_at = ins
    accepted = [None, None, None, None]  # list dtype, list element shape, item dtype, shape
    ndarray = np.ndarray

    def push(vals, step):
        lst, v = vals[handle_at], vals[value_at]
        if (type(lst) is TensorList and type(v) is ndarray and lst.max_num_elements < 0
                and lst.element_dtype is accepted[0] and v.dtype is accepted[2]
                and v.shape == accepted[3] and lst.element_shape == accepted[1]):
            vals[out] = lst.with_items(lst.items + [v])
            return
        call(vals, step)
        if type(lst) is TensorList and type(v) is ndarray:
            accepted[:] = lst.element_dtype, lst.element_shape, v.dtype, v.shape
    return push


def list_pop_call(call, ins, outs):
    """TensorListPopBack of a set item: the list without it and the item (what the kernel
    returns), once the kernel has accepted the list's element dtype; an empty list, an unset
    item (zeros to make) or anything else: the prepared call."""
    handle_at, _ = ins
    list_out, item_out = outs
    accepted = [None]  # the list element dtype the kernel last accepted

    def pop(vals, step):
        lst = vals[handle_at]
        if type(lst) is TensorList and lst.element_dtype is accepted[0]:
            items = lst.items
            if items and items[-1] is not None:
                vals[item_out] = items[-1]
                vals[list_out] = lst.with_items(items[:-1])
                return
        call(vals, step)
        if type(lst) is TensorList:
            accepted[0] = lst.element_dtype
    return pop
