"""Stateful objects kernels share: reference variables (`Ref`), resource handles, the
containers that hold them for a session or a step, and `StepContext`, the per-step state the
executor hands to kernels registered with `needs_step=True`.

The step interface (what the executor builds, what kernels may use):

    step = StepContext(session_resources=session_mgr)   # once per step; resources are fresh
    step.resources            # ResourceMgr for this step only (stacks of while-loop gradients)
    step.session_resources    # ResourceMgr living as long as the session (variables, queues)
    step.rng_for(node, seed, seed2)  # numpy Generator per random node, kept per session
    step.cancelled            # threading.Event: set when the step is aborted
    step.check_cancelled()    # raises StepCancelled once it is set
    step.step_id              # int, for naming and tracing

    >>> mgr = ResourceMgr()
    >>> var = mgr.get_or_create("", "w", lambda: Ref("w", DType.FLOAT))
    >>> var.assign(np.ones(3, np.float32)); var.get()
    array([1., 1., 1.], dtype=float32)
"""
import itertools
import threading

import numpy as np

from tfg.errors import TfgRuntimeError


class UninitializedError(TfgRuntimeError):
    pass


class Ref:
    """A mutable tensor slot: what a ref-typed output (VariableV2) carries.

    Consumers that take the input by value see `get()` at the time they run.
    """

    __slots__ = ("name", "dtype", "shape", "value", "lock")

    def __init__(self, name, dtype=None, shape=None):
        self.name = name
        self.dtype = dtype
        self.shape = shape
        self.value = None
        self.lock = threading.Lock()

    def get(self):
        value = self.value
        if value is None:
            raise UninitializedError(
                f"attempting to use uninitialized value {self.name}")
        return value

    def assign(self, value):
        self.value = value
        return value

    @property
    def initialized(self):
        return self.value is not None

    def __repr__(self):
        return f"<Ref {self.name} initialized={self.initialized}>"


class ResourceMgr:
    """Resources by (container, name); thread-safe creation."""

    def __init__(self):
        self._items = {}
        # Re-entrant: a factory may itself create a resource (a queue making its generator).
        self._lock = threading.RLock()

    def get_or_create(self, container, name, factory):
        key = (container, name)
        with self._lock:
            item = self._items.get(key)
            if item is None:
                item = self._items[key] = factory()
            return item

    def lookup(self, container, name):
        return self._items.get((container, name))

    def items(self):
        return list(self._items.items())

    def clear(self):
        with self._lock:
            self._items.clear()

    def delete(self, container, name):
        with self._lock:
            return self._items.pop((container, name), None)

    def reset(self, containers=None):
        """Drop every resource of `containers` (names; None or empty: the default container
        "", as TensorFlow's DeviceMgr::ClearContainers); -> how many went."""
        names = set(containers or [""])
        with self._lock:
            gone = [key for key in self._items if key[0] in names]
            for key in gone:
                del self._items[key]
        return len(gone)

    def nbytes(self):
        """Bytes of the arrays the variables here hold (what a worker accounts)."""
        total = 0
        for item in list(self._items.values()):
            if type(item) is Ref and item.value is not None:
                total += int(getattr(item.value, "nbytes", 0))
        return total


class StepCancelled(TfgRuntimeError):
    """Raised by a blocking kernel (queue dequeue, ...) when its step was cancelled."""


class ResourceHandle:
    """What a resource-typed tensor (VarHandleOp's output) carries: where the resource lives.

    Resolved at use time, so a handle outlives DestroyResourceOp and then fails cleanly.
    """

    __slots__ = ("container", "name", "dtype", "shape", "mgr")

    def __init__(self, container, name, mgr, dtype=None, shape=None):
        self.container = container
        self.name = name
        self.mgr = mgr
        self.dtype = dtype
        self.shape = shape

    def lookup(self):
        item = self.mgr.lookup(self.container, self.name)
        if item is None:
            raise UninitializedError(
                f"resource {self.container}/{self.name} does not exist (uninitialized or "
                f"destroyed variable)")
        return item

    def lookup_or_create(self, factory):
        return self.mgr.get_or_create(self.container, self.name, factory)

    def __repr__(self):
        return f"<ResourceHandle {self.container}/{self.name}>"


_step_ids = itertools.count(1)


class StepContext:
    """Per-step state for kernels registered with `needs_step=True` (see module docstring).

        >>> step = StepContext(session_resources=ResourceMgr())
        >>> g1 = step.rng_for("dropout/rand", seed=1, seed2=2)
        >>> g1 is step.rng_for("dropout/rand", seed=1, seed2=2)   # kept per session
        True
    """

    def __init__(self, session_resources=None, resources=None, cancelled=None, step_id=None):
        self.session_resources = session_resources if session_resources is not None \
            else ResourceMgr()
        self.resources = resources if resources is not None else ResourceMgr()
        self.cancelled = cancelled if cancelled is not None else threading.Event()
        self.step_id = step_id if step_id is not None else next(_step_ids)

    def rng_for(self, node_name, seed=0, seed2=0):
        """The random generator of node `node_name`, made on first use and kept per session.

        A nonzero (seed, seed2) pair makes the stream reproducible across sessions (not bit-equal
        to TensorFlow's); both zero draws a fresh seed from the OS, as TensorFlow does.
        """
        def make():
            if seed or seed2:
                return np.random.Generator(np.random.Philox(
                    key=[int(seed) & (2**64 - 1), int(seed2) & (2**64 - 1)]))
            return np.random.Generator(np.random.Philox())

        return self.session_resources.get_or_create("_rng", node_name, make)

    def check_cancelled(self):
        if self.cancelled.is_set():
            raise StepCancelled("step was cancelled")
