"""The rendezvous of one step on one worker: the local table for this task's `_Send`s, and a
pull over RecvTensor for each `_Recv` whose source device lives on another task.

    >>> rv = RemoteRendezvous(step_id=7, local_task=("worker", 1), peer=clients.get)
    >>> rv.send(key_from_task1, value)         # kept here until someone takes it
    >>> rv.recv_async(key_from_task0, cb)      # RecvTensor(7, key) to task 0, cb on arrival

This is the only part of the executor that differs between local and cluster runs: the
partition executors (`DataflowRun`) are the same. Aborting the rendezvous fails every pending
and future Recv at once (pulls still in flight are answered then, their late result dropped),
and makes RecvTensor calls from other tasks for this step fail with ABORTED, so every part of
the step ends instead of waiting.
"""
import itertools
import threading
from concurrent.futures import ThreadPoolExecutor

import grpc

from tfg.errors import TfgRuntimeError
from tfg.executor.distributed.rpc import StepAborted
from tfg.executor.distributed.spec import task_of
from tfg.executor.rendezvous import LocalRendezvous

# A pull blocks a thread until the peer's value exists; pulls must never wait for a free
# thread (a Recv queued behind pulls that wait on it would deadlock), so the pool is elastic.
_PULLS = ThreadPoolExecutor(max_workers=4096, thread_name_prefix="tfg-recv")


class RemoteRendezvous(LocalRendezvous):
    """See the module docstring. `peer(task)` returns the WorkerClient of another task."""

    def __init__(self, step_id, local_task, peer):
        super().__init__()
        self.step_id = step_id
        self.local_task = local_task
        self._peer = peer
        self._pulls = {}  # id -> callback of a pull in flight
        self._pulls_lock = threading.Lock()
        self._ids = itertools.count()
        self._src_task = {}  # source device -> task, cached
        # "bf16": pulls ask for float32 tensors truncated to 16 bits (RunGraph sets it).
        self.compress = ""

    def source_task(self, key):
        """The task of the key's source device, or None when it is this task."""
        src = key.split(";", 1)[0]
        task = self._src_task.get(src, False)
        if task is False:
            task = task_of(src)
            if task == self.local_task or task is None:
                task = None
            self._src_task[src] = task
        return task

    def is_remote(self, key):
        return self.source_task(key) is not None

    def recv_async(self, key, callback):
        task = self.source_task(key)
        if task is None:
            return super().recv_async(key, callback)
        with self._pulls_lock:
            error = self.error
            if error is None:
                pid = next(self._ids)
                self._pulls[pid] = callback
        if error is not None:
            callback(None, True, error)
            return
        _PULLS.submit(self._pull, pid, task, key)

    def _finish(self, pid, value, is_dead, error):
        """Deliver a pull's outcome once: an abort may have answered it already."""
        with self._pulls_lock:
            callback = self._pulls.pop(pid, None)
        if callback is not None:
            callback(value, is_dead, error)

    def _pull(self, pid, task, key):
        client = None
        try:
            client = self._peer(task)
            value, is_dead = client.recv_tensor(self.step_id, key, self.compress)
        except grpc.RpcError as e:
            err = client.error("RecvTensor", e)
            if not isinstance(err, StepAborted):
                err = type(err)(f"{err} while receiving {_tensor(key)}")
            self._finish(pid, None, True, err)
        except Exception as e:  # noqa: BLE001 - an unknown task, a malformed answer
            err = e if isinstance(e, TfgRuntimeError) else TfgRuntimeError(
                f"receiving {_tensor(key)} from {task}: {type(e).__name__}: {e}")
            self._finish(pid, None, True, err)
        else:
            self._finish(pid, value, is_dead, None)

    def abort(self, error):
        """Fail pending Recvs, local and remote, now: a pull still waiting on its peer
        cannot hold the executor (its late answer is dropped)."""
        super().abort(error)
        with self._pulls_lock:
            pulls, self._pulls = self._pulls, {}
        for callback in pulls.values():
            callback(None, True, self.error)

    def take(self, key, on_value, on_error):
        """For RecvTensor: hand this task's value for `key` to `on_value(value, is_dead)`
        once sent, or `on_error(error)` when the step is aborted first. Returns a function
        that withdraws the request -> True if nothing was (or will be) handed over."""
        def cb(value, is_dead, error):
            if error is not None:
                on_error(error)
            else:
                on_value(value, is_dead)

        LocalRendezvous.recv_async(self, key, cb)
        return lambda: self.withdraw(key, cb)


def _tensor(key):
    parts = key.split(";")
    return f"tensor {parts[3]!r}" if len(parts) == 5 else f"key {key!r}"


class DerivedAbort(StepAborted):
    """The error a step's parts see when it was aborted from outside (AbortStep)."""


def aborted_by(reason):
    return DerivedAbort(f"step aborted: {reason}" if reason else "step aborted")
