"""The fast program's call for a kernel that binds its node (tfg/kernels/bound.py): a
convolution's oneDNN call with its filter, bias and activation fixed.

    >>> call = bound_call(fused.fused_conv2d, ctx, ins=(3, 4, 5), o=6, free=(3,))
    >>> call(vals, None)    # vals[6] = the node's output; vals[3] = None

Before: a MobileNetV3 or NASNet convolution went through the prepared call's argument list,
the kernel's signature checks, its fused steps, the oneDNN Prepared wrapper and the
Convolution's own call, 20-35 us of Python around a 20-40 us convolution in a model's step;
after: one identity and shape test, then the bound run. The kernel still makes the first call
(and any call whose inputs differ from the bound ones), so the values are its own.
"""
import numpy as np

from tfg.executor.calls import single
from tfg.kernels.bound import KEY

_F32 = np.dtype(np.float32)


def bound_call(fn, ctx, ins, o, free):
    """`call(vals, step)` for a node of two or three inputs (x, w[, b]) whose kernel `fn`
    may bind it: vals[o] = its output, and the slots in `free` cleared."""
    cache = ctx.cache
    ndarray = np.ndarray
    a, wi = ins[0], ins[1]
    bi = ins[2] if len(ins) == 3 else None

    def call(vals, step):
        hit = cache.get(KEY)
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
    return call
