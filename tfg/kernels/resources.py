"""Stateful objects kernels share: reference variables (`Ref`), resource handles, and the
containers that hold them for a session or a step.

    >>> mgr = ResourceMgr()
    >>> var = mgr.get_or_create("", "w", lambda: Ref("w", DType.FLOAT))
    >>> var.assign(np.ones(3, np.float32)); var.get()
    array([1., 1., 1.], dtype=float32)
"""
import threading

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
        self._lock = threading.Lock()

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
