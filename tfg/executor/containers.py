"""Containers (white paper 4.7): where long-lived state lives, and how long it lives.

A variable or queue is keyed by (container, shared_name or node name); `container` is the
node's attr, "" (the default container) when empty. On a worker (`tfg worker`) every
container outlives the session that created it, as on a TensorFlow worker: a second client's
graph that names the same variable sees its value, until a reset clears the container
(`Session.reset(containers)`, `tfg run --reset NAME`). A local Session owns its containers, as
TensorFlow's DirectSession does: they go with the session.

tfg's own per-session state (random streams: containers whose name starts with "_") stays
private to the session that made it and goes when the session closes or expires.

    >>> shared = ResourceMgr()                      # the worker's, for its whole life
    >>> a, b = SessionResources(shared), SessionResources(shared)
    >>> a.get_or_create("", "w", make_w) is b.get_or_create("", "w", make_w)
    True
    >>> a.clear()                                   # session a closes: "w" stays
    >>> shared.reset([""])                          # tfg run --reset '': "w" goes
    1
"""
from tfg.errors import TfgRuntimeError
from tfg.kernels.resources import ResourceMgr


def is_private(container):
    """tfg's per-session containers ("_rng"): never shared between sessions."""
    return container.startswith("_")


class SessionResources:
    """One session's view of a worker's containers: shared ones in `shared`, private ones
    (see is_private) in a manager of its own. Has ResourceMgr's interface, so kernels and
    checkpoints use it as they use a local session's manager."""

    def __init__(self, shared):
        self.shared = shared
        self.private = ResourceMgr()

    def _mgr(self, container):
        return self.private if is_private(container) else self.shared

    def get_or_create(self, container, name, factory):
        return self._mgr(container).get_or_create(container, name, factory)

    def lookup(self, container, name):
        return self._mgr(container).lookup(container, name)

    def delete(self, container, name):
        return self._mgr(container).delete(container, name)

    def items(self):
        return self.shared.items() + self.private.items()

    def clear(self):
        """The session ends: its private state goes; shared containers stay (reset them)."""
        self.private.clear()

    def reset(self, containers=None):
        return self.shared.reset(containers)


class ContainersFull(TfgRuntimeError):
    """The variables a worker's containers hold exceed its --max-memory."""


def check_bounded(shared, limit, where):
    """Refuse to go on once the state in `shared` exceeds `limit` bytes: a worker keeps its
    containers across sessions, so without a bound a stream of clients creating new variables
    would grow it until the machine runs out of memory. The message says how to free them."""
    if limit is None:
        return
    held = shared.nbytes()
    if held > limit:
        raise ContainersFull(
            f"{where}: the variables in its containers hold {held} bytes, more than its "
            f"--max-memory of {limit}; free them with `tfg run --cluster SPEC --reset NAME` "
            f"(NAME '' for the default container)")
