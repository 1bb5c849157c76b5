"""Queues: FIFOQueueV2 and RandomShuffleQueueV2, with enqueue/dequeue (one or many), close and
size.

    q = FIFOQueueV2(component_types=[float], capacity=10)
    QueueEnqueueManyV2(q, [[1., 2., 3.]]); QueueDequeueV2(q) -> [1.]; QueueSizeV2(q) -> 2
    QueueCloseV2(q); QueueDequeueManyV2(q, 5) -> error "... is closed and has insufficient
    elements (requested 5, current size 2)"

A queue lives in `step.session_resources` (keyed by container/shared_name or node name) and
its handle is the queue object. Blocking operations wait in short slices so that a cancelled
step (`step.cancelled`) or a closed queue wakes them with a clear error instead of a hang;
`timeout_ms` > 0 bounds the wait.
"""
import collections
import threading
import time

import numpy as np

from tfg.kernels._util import fail, s, tf_name
from tfg.kernels.basic import shape_compatible
from tfg.kernels.registry import kernel
from tfg.kernels.resources import StepCancelled

_POLL_S = 0.05


class Queue:
    """A bounded queue of tuples of arrays; FIFO, or random order when `shuffle_rng` is set."""

    def __init__(self, name, dtypes, shapes=(), capacity=-1, min_after_dequeue=0,
                 shuffle_rng=None):
        self.name = name
        self.dtypes = list(dtypes)
        self.shapes = list(shapes)
        self.capacity = capacity
        self.min_after_dequeue = min_after_dequeue
        self.rng = shuffle_rng
        self.items = collections.deque() if shuffle_rng is None else []
        self.closed = False
        self.cancelled = False
        self.cond = threading.Condition()

    @property
    def kind(self):
        return "FIFOQueue" if self.rng is None else "RandomShuffleQueue"

    def size(self):
        with self.cond:
            return len(self.items)

    def _check(self, components):
        if len(components) != len(self.dtypes):
            fail(f"{self.kind} '{self.name}' expects {len(self.dtypes)} components, got "
                 f"{len(components)}")
        for i, (c, dt) in enumerate(zip(components, self.dtypes)):
            if dt is not None and np.asarray(c).dtype != dt.np:
                fail(f"{self.kind} '{self.name}' component {i} should be {dt.tf_name}, got "
                     f"{tf_name(np.asarray(c))}")

    def _wait(self, ready, step, deadline, what):
        """Wait (holding self.cond) until ready(); errors on cancel or timeout."""
        while not ready():
            if step is not None and step.cancelled.is_set():
                raise StepCancelled(f"{what} on {self.kind} '{self.name}' was cancelled")
            left = _POLL_S if deadline is None else min(_POLL_S, deadline - time.monotonic())
            if left <= 0:
                fail(f"Timed out waiting for notification: {what} on {self.kind} '{self.name}'")
            self.cond.wait(left)

    def enqueue_many(self, rows, step=None, timeout_s=None):
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        with self.cond:
            for row in rows:
                if self.closed:
                    fail(f"{self.kind} '{self.name}' is closed.")
                self._wait(lambda: self.capacity < 0 or len(self.items) < self.capacity
                           or self.closed, step, deadline, "enqueue")
                if self.closed and self.cancelled:
                    fail(f"{self.kind} '{self.name}' is closed (pending enqueues cancelled).")
                self.items.append(row)
                self.cond.notify_all()

    def dequeue_many(self, n, step=None, timeout_s=None):
        deadline = None if timeout_s is None else time.monotonic() + timeout_s
        with self.cond:
            def ready():
                if self.closed:
                    return True
                return len(self.items) >= n + (self.min_after_dequeue if self.rng else 0)
            self._wait(ready, step, deadline, "dequeue")
            if len(self.items) < n:
                fail(f"{self.kind} '{self.name}' is closed and has insufficient elements "
                     f"(requested {n}, current size {len(self.items)})")
            out = [self._take() for _ in range(n)]
            self.cond.notify_all()
            return out

    def _take(self):
        if self.rng is None:
            return self.items.popleft()
        i = int(self.rng.integers(len(self.items)))
        self.items[i], self.items[-1] = self.items[-1], self.items[i]
        return self.items.pop()

    def close(self, cancel_pending_enqueues=False):
        with self.cond:
            self.closed = True
            self.cancelled = cancel_pending_enqueues
            self.cond.notify_all()


def _queue(handle):
    if not isinstance(handle, Queue):
        fail(f"expected a queue handle, got {type(handle).__name__}")
    return handle


def _make(ctx, step, shuffle):
    container = s(ctx.attrs.get("container", b""))
    name = s(ctx.attrs.get("shared_name", b"")) or ctx.name

    def create():
        rng = None
        if shuffle:
            rng = step.rng_for(ctx.name, ctx.attrs.get("seed", 0), ctx.attrs.get("seed2", 0))
        return Queue(name, ctx.attrs.get("component_types", []), ctx.attrs.get("shapes", []),
                     int(ctx.attrs.get("capacity", -1)),
                     int(ctx.attrs.get("min_after_dequeue", 0)), rng)
    return step.session_resources.get_or_create(container, name, create)


@kernel("FIFOQueueV2", needs_step=True)
def fifo_queue(ctx, step):
    return _make(ctx, step, shuffle=False)


@kernel("RandomShuffleQueueV2", needs_step=True)
def random_shuffle_queue(ctx, step):
    return _make(ctx, step, shuffle=True)


def _timeout(ctx):
    ms = int(ctx.attrs.get("timeout_ms", -1))
    return ms / 1000.0 if ms > 0 else None


def _check_shapes(q, row):
    for i, (c, shape) in enumerate(zip(row, q.shapes)):
        if not shape_compatible(np.shape(c), shape):
            fail(f"Shape mismatch in tuple component {i}. Expected {list(shape)}, got "
                 f"{list(np.shape(c))}")


@kernel("QueueEnqueueV2", needs_step=True)
def queue_enqueue(ctx, step, handle, *components):
    q = _queue(handle)
    q._check(components)
    row = tuple(np.array(c, copy=True) for c in components)
    _check_shapes(q, row)
    q.enqueue_many([row], step, _timeout(ctx))
    return ()


@kernel("QueueEnqueueManyV2", needs_step=True)
def queue_enqueue_many(ctx, step, handle, *components):
    q = _queue(handle)
    q._check(components)
    comps = [np.asarray(c) for c in components]
    if any(c.ndim == 0 for c in comps) or len({c.shape[0] for c in comps}) != 1:
        fail("QueueEnqueueMany components must share a non-empty first dimension, got "
             + ", ".join(str(list(c.shape)) for c in comps))
    rows = [tuple(np.array(c[i], copy=True) for c in comps) for i in range(comps[0].shape[0])]
    if rows:
        _check_shapes(q, rows[0])
    q.enqueue_many(rows, step, _timeout(ctx))
    return ()


@kernel("QueueDequeueV2", needs_step=True)
def queue_dequeue(ctx, step, handle):
    (row,) = _queue(handle).dequeue_many(1, step, _timeout(ctx))
    return list(row)


@kernel("QueueDequeueManyV2", needs_step=True)
def queue_dequeue_many(ctx, step, handle, n):
    q = _queue(handle)
    n = int(np.asarray(n))
    if n < 0:
        fail(f"QueueDequeueMany requested {n} < 0 elements")
    rows = q.dequeue_many(n, step, _timeout(ctx))
    if not rows:
        return [np.zeros((0,) + tuple(d or 0 for d in (q.shapes[i] if i < len(q.shapes) else ())),
                         dt.np) for i, dt in enumerate(q.dtypes)]
    return [np.stack([r[i] for r in rows]) for i in range(len(rows[0]))]


@kernel("QueueCloseV2")
def queue_close(ctx, handle):
    _queue(handle).close(bool(ctx.attrs.get("cancel_pending_enqueues", False)))
    return ()


@kernel("QueueSizeV2")
def queue_size(ctx, handle):
    return np.int32(_queue(handle).size())


@kernel("QueueIsClosedV2")
def queue_is_closed(ctx, handle):
    return np.bool_(_queue(handle).closed)
