"""Large arrays a compiled loop makes once a run (tfg/executor/loop_projection.py's
projections, loop_accumulation.py's stacked operands), reused from one run to the next.

    >>> pool = BufferPool()
    >>> p = pool.take((50, 32, 128), np.float32)   # run 1: a new array (a view of a 1-D one)
    >>> del p                                       # nothing refers to it any more
    >>> q = pool.take((50, 32, 128), np.float32)   # run 2: the same memory, not a new one

Why: an 800 KB array made fresh every run costs the kernel a page fault per 4 KB page when
it is first written (glibc gives such sizes back to the system on free): on the `rnn`
benchmark about 550 faults a step, which cost more CPU time than the one GEMM saved.
A buffer is handed out again only when no array refers to its memory any more (its
reference count: every view of it holds its base), so a row block that went into a stack,
a TensorList or an Exit in an earlier run is never overwritten, and two steps running the
same loop at once never share one. At most `keep` buffers are kept.
"""
import sys
import threading

import numpy as np

# references to a kept buffer when nothing else holds it: the pool's list, the loop
# variable and getrefcount's argument
_IDLE = 3


class BufferPool:
    """Buffers of a compiled loop's call (see the module docstring)."""

    def __init__(self, keep=2):
        self._bufs = []
        self._keep = keep
        self._lock = threading.Lock()

    def take(self, shape, dtype):
        """An uninitialized array of `shape` and `dtype` whose memory nothing else refers to."""
        n = 1
        for d in shape:
            n *= d
        dtype = np.dtype(dtype)
        with self._lock:
            for buf in self._bufs:
                if buf.dtype == dtype and buf.size >= n and sys.getrefcount(buf) <= _IDLE:
                    return buf[:n].reshape(shape)
            buf = np.empty(n, dtype)
            self._bufs.append(buf)
            if len(self._bufs) > self._keep:
                self._bufs.pop(0)
            return buf.reshape(shape)
