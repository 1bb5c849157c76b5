"""Where `_Send` leaves a tensor and `_Recv` picks it up, keyed as TensorFlow keys them.

    >>> rv = LocalRendezvous()
    >>> key = make_key("/job:localhost/replica:0/task:0/device:CPU:0", 1,
    ...                "/job:localhost/replica:0/task:0/device:CPU:1", "edge_3_x", 0, 0)
    >>> key
    '/job:localhost/replica:0/task:0/device:CPU:0;0000000000000001;/job:localhost/replica:0/task:0/device:CPU:1;edge_3_x;0:0'
    >>> rv.send(key, np.float32(2), is_dead=False)
    >>> rv.recv(key)
    (2.0, False)

One rendezvous serves one step of every executor of that step. A Recv never blocks an executor:
`recv_async` calls back when the value arrives. The first error aborts the rendezvous: every
pending and future Recv fails with it, so no executor waits for a peer that stopped.
"""
import threading

import numpy as np  # noqa: F401  (doctest)

from tfg.errors import TfgRuntimeError


class RendezvousAborted(TfgRuntimeError):
    pass


def make_key(src_device, src_incarnation, dst_device, tensor_name, frame_id=0, iter_id=0):
    """`src;hex16(incarnation);dst;name;frame_id:iter_id`, TensorFlow's rendezvous key."""
    return (f"{src_device};{int(src_incarnation) & 0xFFFFFFFFFFFFFFFF:016x};{dst_device};"
            f"{tensor_name};{frame_id}:{iter_id}")


def parse_key(key):
    """The inverse of make_key: (src, incarnation, dst, tensor_name, frame_id, iter_id)."""
    parts = key.split(";")
    if len(parts) != 5:
        raise ValueError(f"malformed rendezvous key {key!r}")
    frame, _, it = parts[4].partition(":")
    return parts[0], int(parts[1], 16), parts[2], parts[3], int(frame), int(it)


class LocalRendezvous:
    """An in-process table of sent tensors and waiting receivers, guarded by one lock."""

    def __init__(self):
        self._lock = threading.Lock()
        self._values = {}  # key -> (value, is_dead)
        self._waiters = {}  # key -> [callback(value, is_dead, error)]
        self._error = None

    @property
    def error(self):
        return self._error

    def send(self, key, value, is_dead=False):
        """Deliver a value (or a dead marker); a second send of one key is an error."""
        with self._lock:
            if self._error is not None:
                raise self._error
            waiters = self._waiters.pop(key, None)
            if waiters is None:
                if key in self._values:
                    raise TfgRuntimeError(f"rendezvous key sent twice: {key}")
                self._values[key] = (value, is_dead)
                return
        for cb in waiters:
            cb(value, is_dead, None)

    def recv_async(self, key, callback):
        """Call `callback(value, is_dead, error)` once the key's value is there (maybe now)."""
        with self._lock:
            error = self._error
            if error is None:
                item = self._values.pop(key, None)
                if item is None:
                    self._waiters.setdefault(key, []).append(callback)
                    return
        if error is not None:
            callback(None, True, error)
        else:
            callback(item[0], item[1], None)

    def withdraw(self, key, callback):
        """Take back a waiting `callback` of recv_async -> True; False when the value was
        already handed to it (or the rendezvous aborted): then it is called, or has been."""
        with self._lock:
            waiters = self._waiters.get(key)
            if waiters is None or callback not in waiters:
                return False
            waiters.remove(callback)
            if not waiters:
                del self._waiters[key]
            return True

    def recv(self, key, timeout=None):
        """Blocking receive -> (value, is_dead); raises the abort error, or on timeout."""
        done = threading.Event()
        box = []

        def cb(value, is_dead, error):
            box.append((value, is_dead, error))
            done.set()

        self.recv_async(key, cb)
        if not done.wait(timeout):
            raise TfgRuntimeError(f"timed out waiting for rendezvous key {key}")
        value, is_dead, error = box[0]
        if error is not None:
            raise error
        return value, is_dead

    def abort(self, error):
        """Fail every pending and future Recv with `error` (the first abort wins)."""
        with self._lock:
            if self._error is not None:
                return
            self._error = error if isinstance(error, BaseException) else RendezvousAborted(
                str(error))
            waiters, self._waiters = self._waiters, {}
            self._values.clear()
        for cbs in waiters.values():
            for cb in cbs:
                cb(None, True, self._error)
