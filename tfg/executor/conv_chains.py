"""Consecutive bound convolution calls of a fast program joined into one call
(tfg/kernels/onednn_chain.py runs them).

    calls = merge(calls)     # a list of (call, ctx), as the fast program runs it

Before, NASNetMobile's separable branch, four calls, each allocating its output:

    dw = DepthwiseConv2dNative(relu_x, w1)      # bound call (tfg/executor/calls.py)
    pw = _FusedConv2D(dw, w2, b2) + Relu        # bound call; dw's last reader
    dw2 = DepthwiseConv2dNative(pw, w3)         # bound call; pw's last reader
    y = Conv2D(dw2, w4)                         # bound call; dw2's last reader

After: one call, `y = Chain([dw, pw, dw2, y's stages])(relu_x)`, the inner results in two
buffers of the thread's own (onednn_chain.py). Two calls are joined where both are bound
calls (calls.bound_call: a oneDNN convolution with graph-constant filter and bias), the
first one's output is the second one's input `x`, and the second one is its last reader (it
frees the slot): nothing else can see the inner values, so keeping them in reused buffers
changes nothing a user or a later node reads.

Per call, the joined call checks what each node's own bound call checks (the bound form is
there, the filter and bias are the bound arrays, the input's shape, dtype and layout); where
any differs, or the Chain declines (onednn_chain.py says when), it runs the nodes' own calls
in order, so values and errors are theirs. `TFG_CONV_CHAINS=0` leaves the calls apart.
"""
import os

import numpy as np

from tfg.executor.executor import node_error
from tfg.kernels import bound
from tfg.kernels.onednn_chain import Chain

ENV_VAR = "TFG_CONV_CHAINS"
_F32 = np.dtype(np.float32)


def enabled():
    return os.environ.get(ENV_VAR, "1") != "0" and bound.enabled()


def merge(calls):
    """`calls` with each run of joinable bound calls replaced by one call (its first node's
    ctx names it); the list itself where there is none."""
    if not enabled():
        return calls
    out, i, n = [], 0, len(calls)
    while i < n:
        j = i
        while j + 1 < n and _joins(calls[j][0], calls[j + 1][0]):
            j += 1
        out.append((chain_call(calls[i:j + 1]), calls[i][1]) if j > i else calls[i])
        i = j + 1
    return out if len(out) < n else calls


def _joins(first, second):
    """Whether `second` reads `first`'s output as its input x, for the last time, and only
    there."""
    a, b = getattr(first, "chain_link", None), getattr(second, "chain_link", None)
    if a is None or b is None:
        return False
    o = a[2]
    ins, free = b[1], b[3]
    return ins[0] == o and o in free and o not in ins[1:]


def chain_call(calls):
    """One `call(vals, step)` for the joined bound calls `calls` [(call, ctx)]."""
    links = [c.chain_link for c, _ in calls]
    caches = [link[0] for link in links]
    operands = [(link[1][1], link[1][2] if len(link[1]) == 3 else None) for link in links]
    a, o = links[0][1][0], links[-1][2]
    inner = {link[2] for link in links[:-1]}
    free = tuple(sorted({f for link in links for f in link[3]} - inner))
    made = [None, None]  # the stages the Chain was made for, and the Chain
    ndarray, key = np.ndarray, bound.KEY

    def run_chain(vals, x):
        stages = []
        for cache, (wi, bi) in zip(caches, operands):
            hit = cache.get(key)
            if (hit is None or hit[4] is None or vals[wi] is not hit[1]
                    or (bi is not None and vals[bi] is not hit[2])):
                return None
            stages.append(hit[4])
        if x.shape != caches[0][key][0]:
            return None
        if made[0] != stages:
            made[0], made[1] = stages, Chain(stages)
        return made[1](x)

    def call(vals, step):
        x = vals[a]
        y = None
        if type(x) is ndarray and x.dtype is _F32 and x.flags.c_contiguous:
            y = run_chain(vals, x)
        if y is None:  # the nodes' own calls, each error named by its node
            for c, ctx in calls:
                try:
                    c(vals, step)
                except Exception as e:  # noqa: BLE001 - name the node that failed
                    raise node_error(ctx, e) from e
            return
        vals[o] = y
        for f in free:
            vals[f] = None
    call.joined = tuple(calls)  # (what tests and profiles look into)
    return call
