"""Prepared kernel calls: at plan time every kernel node gets one closure that reads its inputs,
reads the Refs its kernel takes by value, calls the kernel and normalises what it returns to
the op's outputs. The dataflow executor and the fast path both run these; nothing else calls a
kernel (tracing and memory accounting wrap them, chosen once per step, not tested per node).

    >>> call = args_call(item)                  # the dataflow executor's form
    >>> call([x, y], step)                      # -> the op's outputs, as a list
    [array([4., 6.], dtype=float32)]
    >>> call = slot_call(item, (3, 4), (5,), free=(3,))  # the fast path's form
    >>> call(vals, step)                        # vals[5] = Add(vals[3], vals[4]); vals[3] = None

The closure is picked by what the plan knows: most nodes (no Ref input, no step argument, one
output, up to three inputs) get one that indexes their slots directly, with nothing tested
per call but the shape of the kernel's result; the rest get the general form. A convolution
whose kernel binds its node (tfg/kernels/bound.py) gets `bound_call`. The package
generates no code (tests/test_security.py), so these are written out per arity.
"""
import numpy as np

from tfg.errors import TfgRuntimeError
from tfg.kernels import bound
from tfg.kernels.resources import Ref


def args_call(item):
    """`call(args, step) -> outputs`: `args` is the node's input list (it may be changed)."""
    fn, ctx, n_out = item.fn, item.ctx, item.num_outputs
    deref, needs_step = item.deref or (), item.needs_step
    if not deref and not needs_step and n_out == 1:
        def call(args, step):
            r = fn(ctx, *args)
            if type(r) is tuple or type(r) is list:
                return _one(r)
            return [r]
        return call

    def call_general(args, step):
        for k in deref:  # Refs are read when the kernel runs, as TensorFlow does
            a = args[k]
            if type(a) is Ref:
                args[k] = a.get()
        r = fn(ctx, step, *args) if needs_step else fn(ctx, *args)
        return _outputs(r, n_out)
    return call_general


def slot_call(item, in_slots, out_slots, free=(), deref=None, fn=None):
    """`call(vals, step)`: reads `vals[in_slots]`, stores the outputs at `out_slots` and
    clears the slots in `free` (inputs read for the last time, outputs nobody reads). `deref`:
    the input indices that may carry a Ref (default: the item's); `fn`: a replacement kernel
    with the same contract (an in-place variant, tfg/executor/inplace.py)."""
    fn = fn or item.fn
    ctx = item.ctx
    ins, outs, free = tuple(in_slots), tuple(out_slots), tuple(free)
    if deref is None:
        deref = item.deref or ()
    if not deref and not item.needs_step and len(outs) == 1:
        return _direct(fn, ctx, ins, outs[0], free)
    needs_step, n_out = item.needs_step, len(outs)

    def call_general(vals, step):
        args = [vals[i] for i in ins]
        for k in deref:
            a = args[k]
            if type(a) is Ref:
                args[k] = a.get()
        r = fn(ctx, step, *args) if needs_step else fn(ctx, *args)
        if n_out == 1:
            vals[outs[0]] = _outputs(r, 1)[0]
        elif n_out:
            for s, v in zip(outs, _outputs(r, n_out)):
                vals[s] = v
        for f in free:
            vals[f] = None
    return call_general


def _direct(fn, ctx, ins, o, free):
    """A one-output kernel without Refs or step, its inputs read straight from the slots; the
    commonest shapes (one or two inputs, freeing none or one slot) written out, as each test
    or loop avoided here is paid once per node per step."""
    n = len(ins)
    if fn in bound.KERNELS and n in (2, 3) and bound.enabled():
        return bound_call(fn, ctx, ins, o, free)
    if n == 1 and len(free) <= 1:
        (a,) = ins
        if not free:
            def call1(vals, step):
                r = fn(ctx, vals[a])
                vals[o] = _one(r)[0] if type(r) is tuple or type(r) is list else r
            return call1
        (f,) = free

        def call1_free(vals, step):
            r = fn(ctx, vals[a])
            vals[o] = _one(r)[0] if type(r) is tuple or type(r) is list else r
            vals[f] = None
        return call1_free
    if n == 2 and len(free) <= 1:
        a, b = ins
        if not free:
            def call2(vals, step):
                r = fn(ctx, vals[a], vals[b])
                vals[o] = _one(r)[0] if type(r) is tuple or type(r) is list else r
            return call2
        (f,) = free

        def call2_free(vals, step):
            r = fn(ctx, vals[a], vals[b])
            vals[o] = _one(r)[0] if type(r) is tuple or type(r) is list else r
            vals[f] = None
        return call2_free

    def calln(vals, step):
        r = fn(ctx, *[vals[i] for i in ins])
        vals[o] = _one(r)[0] if type(r) is tuple or type(r) is list else r
        for f in free:
            vals[f] = None
    return calln


def single(r):
    """A one-output kernel's return value as that output (a one-element tuple or list is
    unpacked; any other length is an error)."""
    return _one(r)[0] if type(r) is tuple or type(r) is list else r


def _one(r):
    if len(r) != 1:
        raise TfgRuntimeError(f"kernel returned {len(r)} outputs, the op has 1")
    return [r[0]]


def _outputs(r, n):
    """A kernel's return value as the list of the op's `n` outputs (checked)."""
    if n == 1:
        return _one(r) if type(r) is tuple or type(r) is list else [r]
    if n == 0:
        return []
    if type(r) is not tuple and type(r) is not list:
        raise TfgRuntimeError(f"kernel returned one value, the op has {n} outputs")
    if len(r) != n:
        raise TfgRuntimeError(f"kernel returned {len(r)} outputs, the op has {n}")
    return list(r)


# The fast program's call for a kernel that binds its node (tfg/kernels/bound.py): a
# convolution's oneDNN call with its filter, bias and activation fixed. Before: a MobileNetV3 or
# NASNet convolution went through the argument list above, the kernel's signature checks, its
# fused steps, the oneDNN Prepared wrapper and the Convolution's own call, 20-35 us of Python
# around a 20-40 us convolution in a model's step; after: one identity and shape test, then
# the bound run. The kernel still makes the first call (and any call whose inputs differ from
# the bound ones), so the values are its own.
_F32 = np.dtype(np.float32)


def bound_call(fn, ctx, ins, o, free):
    """`call(vals, step)` for a node of two or three inputs (x, w[, b]) whose kernel `fn`
    may bind it: vals[o] = its output, and the slots in `free` cleared."""
    cache = ctx.cache
    ndarray = np.ndarray
    a, wi = ins[0], ins[1]
    bi = ins[2] if len(ins) == 3 else None

    def call(vals, step):
        hit = cache.get(bound.KEY)
        x = vals[a]
        y = None
        if (hit is not None and type(x) is ndarray and x.shape == hit[0]
                and vals[wi] is hit[1] and (bi is None or vals[bi] is hit[2])
                and x.dtype is _F32 and x.flags.c_contiguous):
            y = hit[3](x)
        if y is None:
            y = single(fn(ctx, *[vals[i] for i in ins]))
        vals[o] = y
        for f in free:
            vals[f] = None
    call.chain_link = (cache, ins, o, free)  # what conv_chains.py reads to join such calls
    return call
