"""A second core for a compiled loop's large GEMMs that nothing waits on yet: one worker
thread that runs a call (a numpy function that releases the GIL for its whole work, a GEMM)
while the calling thread goes on with the next calls that do not depend on it.

    >>> job = submit(np.matmul, a.T, g)        # on the worker, where side_free() said so
    >>> dw = np.add(acc, np.matmul(h.T, g))    # meanwhile, on this thread
    >>> du = np.add(acc, job.wait())           # the product, or the worker's error raised here

Why: the `rnn` benchmark's gradient loop ends in two deferred sums (loop_accumulation.py:
dW = acc + H^T G and dU = acc + X^T G, [128, 1600] x [1600, 128] each, about 0.7 ms apiece on
one thread) that do not depend on each other; TensorFlow's inter-op threads run such products
side by side. (Where numpy's OpenBLAS gemm is found, those sums are instead made in blocks
while the loop runs, by a compiled loop that holds no GIL: block_sums.py.) One job per step, a GEMM long against the wake-up (tens of µs), unlike the
per-iteration hand-offs measured and dropped before (docs/performance.md, "rnn row, this
round"). The same function runs on the same operands on one BLAS thread either way, so the
values are the same bits.

When: `side_free()`, once per use: `TFG_LOOP_SIDE=0` never, `=1` always (A/B measurements);
by default only where this process may run on two cores or more, BLAS runs one thread now (the
GEMM floor's small-product steps; OpenBLAS's own threads would contend with the worker's call)
and the contention meter (contention.py) sees a core left free by other processes.
"""
import ctypes
import os
import queue
import threading

import numpy as np

from tfg.executor.blas import current_blas_threads
from tfg.executor.contention import meter, threads_for, usable_cores


class Job:
    """A call handed to the worker; wait() -> its result (its exception raised here)."""

    __slots__ = ("fn", "args", "result", "error", "done")

    def __init__(self, fn, args):
        self.fn, self.args = fn, args
        self.result = self.error = None
        self.done = threading.Lock()
        self.done.acquire()  # released by the worker when the call returned

    def run(self):
        try:
            self.result = self.fn(*self.args)
        except BaseException as e:  # noqa: BLE001 - raised again in the waiting thread
            self.error = e
        self.fn = self.args = None  # (its operands are not kept alive by the job)
        self.done.release()

    def wait(self):
        self.done.acquire()
        self.done.release()  # (a second wait returns at once)
        if self.error is not None:
            raise self.error
        return self.result


_PR_SET_TIMERSLACK = 29
_queue = None
_pid = None
_start_lock = threading.Lock()


def _serve(q):
    _short_sleeps()
    while True:
        q.get().run()


def _short_sleeps():
    """This thread's sleeps end within about a microsecond of their time (Linux's timer
    slack, 50 us by default, would add up to that to each of block_sum_loop's polls)."""
    try:
        ctypes.CDLL(None).prctl(_PR_SET_TIMERSLACK, 1000, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def submit(fn, *args):
    """`fn(*args)` on the worker thread (started at the first call, and again in a forked
    child, which has no threads); -> its Job."""
    global _queue, _pid
    q = _queue
    if q is None or _pid != os.getpid():
        with _start_lock:
            if _queue is None or _pid != os.getpid():
                q = queue.SimpleQueue()
                threading.Thread(target=_serve, args=(q,), name="tfg-loop-side",
                                 daemon=True).start()
                _queue, _pid = q, os.getpid()
            q = _queue
    job = Job(fn, args)
    q.put(job)
    return job


def side_free():
    """Whether a call may go to the worker now (see the module docstring)."""
    forced = os.environ.get("TFG_LOOP_SIDE", "")
    if forced in ("0", "1"):
        return forced == "1"
    cores = usable_cores()
    if cores < 2 or current_blas_threads() != 1:
        return False
    return threads_for(cores, meter().others()) >= 2


# A projection (loop_projection.py) of at least this many multiply-adds and MIN_STEPS time
# steps is made in blocks of time steps (block_cuts), on the worker but for the first block
# where side_free() says so: the loop's first iterations run meanwhile. Smaller ones (the
# Keras cells' 0.65M) stay one GEMM: a wake-up would cost more than the product. The same
# floor for a deferred sum to go to the worker (loop_accumulation.py).
CHUNKED_MACS = 4 * 2**20
MIN_STEPS = 8


def block_cuts(t):
    """Time-step boundaries of a chunked projection of `t` steps, the same whichever thread
    makes the blocks (so the same bits): the first two steps on the calling thread, then
    blocks three times as long. Before: 50. After: [0, 2, 6, 18, 50]."""
    cuts = [0, 2]
    while cuts[-1] < t:
        cuts.append(min(t, cuts[-1] * 3))
    return cuts


class Blocks:
    """A product [T, B, N] whose later blocks of time steps the worker makes: `ready` (the
    steps made so far), wait(i) until step i is (the worker's error raised here)."""

    __slots__ = ("p", "cuts", "ready", "locks", "error")

    def __init__(self, p, cuts):
        self.p, self.cuts, self.ready, self.error = p, cuts, cuts[1], None
        self.locks = []
        for _ in cuts[2:]:
            lock = threading.Lock()
            lock.acquire()  # released by the worker when its block is made
            self.locks.append(lock)

    def wait(self, i):
        for k, end in enumerate(self.cuts[2:]):
            if i < end:
                break
        lock = self.locks[k]
        lock.acquire()
        lock.release()
        if self.error is not None:
            raise self.error


def blocked_product(x, w, bias, out, batch):
    """out = x @ w (+ bias, as the _FusedMatMul kernel adds it), x [T*B, F], out [T, B, N],
    in the blocks of block_cuts(T): -> None when all are made here, else a Blocks whose later
    blocks the worker is making."""
    t = out.shape[0]
    cuts = block_cuts(t)
    flat = out.reshape(t * batch, out.shape[2])
    _block(x, w, bias, flat, 0, cuts[1] * batch)
    if side_free():
        blocks = Blocks(out, cuts)
        submit(_later_blocks, blocks, x, w, bias, flat, batch)
        return blocks
    for a, c in zip(cuts[1:], cuts[2:]):
        _block(x, w, bias, flat, a * batch, c * batch)
    return None


def _block(x, w, bias, flat, a, c):
    np.matmul(x[a:c], w, out=flat[a:c])
    if bias is not None:
        np.add(flat[a:c], bias, flat[a:c])


def _later_blocks(blocks, x, w, bias, flat, batch):
    cuts = blocks.cuts
    for k, (a, c) in enumerate(zip(cuts[1:], cuts[2:])):
        if blocks.error is None:
            try:
                _block(x, w, bias, flat, a * batch, c * batch)
                blocks.ready = c
            except BaseException as e:  # noqa: BLE001 - raised in the waiting thread
                blocks.error = e
        blocks.locks[k].release()
