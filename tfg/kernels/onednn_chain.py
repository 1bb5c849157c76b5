"""Consecutive oneDNN convolutions run as one call, their intermediate results in two buffers
that every chain of a thread shares (tfg/executor/conv_chains.py finds them in a fast
program).

    stage = Stage(conv, w, b, after)    # what a bound convolution node runs (bound.py)
    chain = Chain([stage1, stage2, stage3])
    y = chain(x)                        # stage3(stage2(stage1(x))), or None: run them one by one

Why: NASNetMobile's separable convolutions are a depthwise convolution into a 1x1 one, twice
(depthwise, 1x1 + bias + Relu, depthwise, 1x1): 4 of its 562 calls a step, 80 times. Each
bound call (bound.py) allocates its output and points oneDNN's source and destination at
the new addresses (two C calls) before its own: 4-8 us of Python around 15-40 us
convolutions. Here the inner results alternate between this thread's two buffers, at
addresses that stay put, so an inner stage is its primitive's execution alone, plus its
in-place activation; only the chain's input and output are new at each call.

A stage's `after(y)` is its node's in-place steps after the convolution (a depthwise
node's bias add, an activation), written into `y`. The values are the bound calls' own:
the same primitives on the same inputs, the same steps after them.

`chain(x)` returns None, having written nothing the caller can see, where oneDNN is off, or
a stage's kernel for this team size or its filter is not in place yet (the node's own call
makes them): the caller then runs the nodes' own calls. So do chains whose largest inner
result is over MAX_INNER_BYTES (the buffers stay small).
"""
import threading

import numpy as np

from tfg.kernels import onednn

MAX_INNER_BYTES = 4 << 20
_local = threading.local()


class Stage:
    """One bound convolution node: its Convolution, the filter and bias it was bound to, and
    `after(y)` (None: nothing) applied in place to its output."""

    __slots__ = ("conv", "w", "b", "after")

    def __init__(self, conv, w, b=None, after=None):
        self.conv, self.w, self.b, self.after = conv, w, b, after


class Chain:
    """`chain(x) -> y or None` for stages where each one's output is the next one's input."""

    def __init__(self, stages):
        self.stages = list(stages)
        inner = [s.conv.out_shape for s in self.stages[:-1]]
        self.inner_shapes = inner
        self.inner_size = max(int(np.prod(s)) for s in inner)
        self.fits = self.inner_size * 4 <= MAX_INNER_BYTES
        self.matches = all(a.conv.out_shape == b.conv.x_shape
                           for a, b in zip(self.stages, self.stages[1:]))
        self._views = (None, None, None)  # (the pool they view, views, addresses)

    def __call__(self, x):
        if not (self.fits and self.matches) or onednn._state.get("lib") is None:
            return None
        pool = _pool(self.inner_size)
        seen, views, addresses = self._views
        if seen is not pool:
            views = [pool[i % 2][:int(np.prod(s))].reshape(s)
                     for i, s in enumerate(self.inner_shapes)]
            addresses = [v.ctypes.data for v in views]
            self._views = (pool, views, addresses)
        last = len(self.stages) - 1
        y = np.empty(self.stages[-1].conv.out_shape, np.float32)
        src = onednn._address(x)
        for i, stage in enumerate(self.stages):
            out = views[i] if i < last else y
            dst = addresses[i] if i < last else onednn._address(y)
            try:
                if not _execute(stage, src, dst, stage.conv.team()):
                    return None
            except onednn.OneDnnError as e:
                onednn.off(str(e))
                return None
            if stage.after is not None:
                r = stage.after(out)
                if r is not out:
                    if i == last:
                        y = r
                    else:
                        np.copyto(out, r)
            src = dst
        return y


def _pool(size):
    """This thread's two buffers of at least `size` float32 each, which every chain's inner
    results alternate between (so they stay in cache from chain to chain, as the freshly
    allocated outputs of separate calls did: one set of buffers per chain ran EfficientNetB0
    5% slower than separate calls)."""
    pool = getattr(_local, "pool", None)
    if pool is None or pool[0].size < size:
        pool = _local.pool = (np.empty(size, np.float32), np.empty(size, np.float32))
    return pool


def _execute(stage, src, dst, threads):
    """Run `stage`'s convolution with this team size from address `src` into `dst`: False
    where it is not ready for `stage` (no kernel yet, another filter or bias in place)."""
    conv = stage.conv
    with conv.call_lock:
        kernel = conv.kernels.get(threads)
        if (kernel is None or kernel.layout.kept is not stage.w
                or (stage.b is not None and stage.b is not conv._bias)):
            return False
        conv.execute_at(kernel, src, dst, threads)
    return True
