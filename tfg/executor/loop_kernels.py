"""Direct calls of kernels inside a compiled loop (tfg/executor/loops.py): stack push and pop,
a gather of one index, AddN of two arrays and elementwise kernels on arrays of one shape, called
without the memory guard's layers where its verdict is known without them (the prepared kernel
call otherwise, which words every error). Each is `call(vals, step)` over the loop's slots.

    >>> push = kernel_call(item, stack_push_v2, prepared, ins=(3, 4), outs=(5,))
    >>> push(vals, None)          # vals[3].items[-1] is vals[4]; vals[5] = vals[4]

Before, a gradient loop's StackPushV2 and StackPopV2 cost 2.3-2.7 us a call (the guard's cache
key, the kernel's frames, the stack's methods); after, about 0.8. Values are the kernels' own.
"""
import numpy as np

from tfg.executor.calls import single
from tfg.executor.loop_calls import INT_BOUNDS
from tfg.kernels.indexing_ops import gather_v2
from tfg.kernels.math_ops import add_n
from tfg.kernels.stack_ops import Stack, stack_pop_v2, stack_push_v2
from tfg.kernels.stack_swap import Swapped, swap_in
from tfg.schemas.ops import get_op, has_op


def kernel_call(it, fn, call, ins, outs):
    """A direct call for the kernels below (stack push and pop, a gather of one index), or
    None for other kernels."""
    if fn is gather_v2 and len(ins) == 3 and it.ctx.xp is np:
        return gather_call(call, ins, outs[0], getattr(it.fn, "limit", None),
                           it.ctx.attrs.get("batch_dims", 0))
    if fn is add_n and len(ins) == 2 and it.ctx.xp is np:
        return add2_call(call, ins, outs[0])
    if (len(ins) in (1, 2) and len(outs) == 1 and it.ctx.xp is np and has_op(it.op)
            and get_op(it.op).has("elementwise")):
        return elementwise_call(call, fn, it.ctx, ins, outs[0], getattr(it.fn, "limit", None))
    return stack_call(it, fn, call, ins, outs)


def add2_call(call, ins, out):
    """AddN of two arrays of one shape (rank >= 1): numpy's add, as the kernel computes it
    (the output is an input's size: no memory verdict to ask); else the kernel call."""
    a, b = ins
    ndarray = np.ndarray
    add = np.add

    def addn2(vals, step):
        x, y = vals[a], vals[b]
        if type(x) is ndarray and type(y) is ndarray and x.shape == y.shape and x.ndim:
            vals[out] = add(x, y)
        else:
            call(vals, step)
    return addn2


def elementwise_call(call, fn, ctx, ins, out, limit):
    """An elementwise kernel (TanhGrad, AddN, ...) on arrays of one shape: the kernel itself,
    without the memory guard when no output can exceed its limit (as many elements as an
    input, at most 16 bytes each); else the prepared kernel call."""
    ndarray = np.ndarray
    cap = None if limit is None else limit // 16
    if len(ins) == 1:
        (a,) = ins

        def ew1(vals, step):
            x = vals[a]
            if type(x) is ndarray and (cap is None or x.size <= cap):
                r = fn(ctx, x)
                vals[out] = single(r) if type(r) is tuple or type(r) is list else r
            else:
                call(vals, step)
        return ew1
    a, b = ins

    def ew2(vals, step):
        x, y = vals[a], vals[b]
        if (type(x) is ndarray and type(y) is ndarray and x.shape == y.shape
                and (cap is None or x.size <= cap)):
            r = fn(ctx, x, y)
            vals[out] = single(r) if type(r) is tuple or type(r) is list else r
        else:
            call(vals, step)
    return ew2


def gather_call(call, ins, out, limit, batch_dims):
    """GatherV2 of one integer index (an RNN's `x[t]`): along axis 0 of a C-contiguous array
    the row as a view, along another axis the kernel's own copied slice
    (tfg.kernels.indexing_ops._gather); with the memory guard's verdict (the slice's size
    against `limit`) tested here; anything else: the prepared kernel call."""
    p_slot, i_slot, a_slot = ins
    ndarray = np.ndarray
    ints = INT_BOUNDS
    if batch_dims != 0:
        return call

    def gather(vals, step):
        params, idx, axis = vals[p_slot], vals[i_slot], vals[a_slot]
        if type(params) is ndarray and (type(idx) in ints or (
                type(idx) is ndarray and idx.ndim == 0 and idx.dtype.kind in "iu")):
            if type(axis) in ints or (type(axis) is ndarray and axis.ndim == 0
                                      and axis.dtype.kind in "iu"):
                a, n, i = int(axis), params.ndim, int(idx)
                if a < 0:
                    a += n
                if 0 <= a < n and 0 <= i < params.shape[a] and (
                        limit is None or params.nbytes // params.shape[a] <= limit):
                    if a == 0 and params.flags.c_contiguous:
                        # a view (rows of a C-contiguous array are contiguous): nothing in
                        # tfg writes into its inputs' memory, and a loop-invariant array
                        # stays as it is while views of it are alive (the RNN's x_t, which
                        # the gradient's stack keeps: a 16 KB copy an iteration saved)
                        vals[out] = params[i]
                    else:
                        vals[out] = params[(slice(None),) * a + (i,)].copy()
                    return
        call(vals, step)
    return gather


_NONE = object()  # nothing popped


def stack_call(it, fn, call, ins, outs):
    """StackPushV2 / StackPopV2 on a Stack (the prepared kernel call otherwise), without the
    memory guard (a push returns its input, a pop a value that exists already) and the
    kernel's frames; None for other kernels. A gradient loop pushes (forward) and pops
    (backward) each value it keeps: 2.3-2.7 us a call before, about 1 after."""
    if fn is stack_push_v2 and not it.ctx.attrs.get("swap_memory") and len(ins) == 2:
        handle, elem = ins
        (out,) = outs

        def push(vals, step):
            s = vals[handle]
            if type(s) is Stack and s.max_size < 0:
                v = vals[elem]
                with s.lock:  # (Stack.push, inline)
                    if not s.closed:
                        s.items.append(v)
                        vals[out] = v
                        return
            call(vals, step)  # closed, bounded or no stack: the kernel pushes or words it
        push.stack_push = (handle, elem, out)  # (loop_stack_groups.py groups these)
        return push
    if fn is stack_pop_v2 and len(ins) == 1:
        (handle,), (out,) = ins, outs

        def pop(vals, step):
            s = vals[handle]
            if type(s) is Stack:
                items = s.items
                with s.lock:  # (Stack.pop, inline)
                    v = items.pop() if items and not s.closed else _NONE
                if v is not _NONE:
                    if type(v) is Swapped or (items and type(items[-1]) is Swapped):
                        v = swap_in(s, v)  # a value a GPU loop pushed with swap_memory
                    vals[out] = v
                    return
            call(vals, step)  # empty, closed or no stack: the kernel words it
        pop.stack_pop = (handle, out)
        return pop
    return None
