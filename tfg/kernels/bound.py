"""Kernels that leave a bound form of their node after a call: the work of one input with
the node's other inputs fixed, for the fast program's call to run without the kernel's
layers (`bound_call` in tfg/executor/calls.py).

    @bound.binds
    @kernel("Conv2D")
    def conv2d(ctx, x, w): ...          # after preparing oneDNN for these shapes:
        bound.remember(ctx, x.shape, w, None, conv.bound(w))

    hit = ctx.cache.get(bound.KEY)      # (x shape, w, b, run, stage): run(x) -> y, or None

`run(x)` is only called with a C-contiguous float32 `x` of that shape while the node's
other inputs are those very arrays (`w`, and `b` where the node has a third input), and it
returns what the kernel returns for them, or None where the kernel must run after all
(oneDNN turned off, say). Only immutable operands (graph constants) are bound.
`stage` (onednn_chain.Stage, or None) says what `run` is made of where it is one oneDNN
convolution and in-place steps after it: the fast program runs consecutive such nodes as one
call (tfg/executor/conv_chains.py).
`TFG_BOUND_CALLS=0` gives these nodes the plain prepared call (for comparisons).
"""
import os

KEY = "bound"
KERNELS = set()  # the kernel functions that may leave a bound form


def enabled():
    """False when TFG_BOUND_CALLS=0 (read when a node's call is prepared)."""
    return os.environ.get("TFG_BOUND_CALLS", "1") != "0"


def binds(fn):
    """Register the kernel function `fn` (above its @kernel decorator)."""
    KERNELS.add(fn)
    return fn


def remember(ctx, x_shape, w, b, run, stage=None):
    """Keep `run` as the node's bound form for inputs (x of `x_shape`, w, b), and the
    `stage` it runs; a None `run` (nothing to bind) keeps nothing."""
    if run is not None:
        ctx.cache[KEY] = (tuple(x_shape), w, b, run, stage)
