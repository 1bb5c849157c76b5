"""The rendezvous of one step on one worker: the local table for this task's `_Send`s, and a
pull over RecvTensor for each `_Recv` whose source device lives on another task.

    >>> rv = RemoteRendezvous(step_id=7, local_task=("worker", 1), peer=clients.get)
    >>> rv.send(key_from_task1, value)         # kept here until someone takes it
    >>> rv.recv_async(key_from_task0, cb)      # RecvTensor(7, key) to task 0, cb on arrival

This is the only part of the executor that differs between local and cluster runs: the
partition executors (`DataflowRun`) are the same. Aborting the rendezvous fails every pending
and future Recv, cancels the pulls in flight, and makes RecvTensor calls from other tasks for
this step fail with ABORTED, so every part of the step ends instead of waiting.
"""
import threading
from concurrent.futures import ThreadPoolExecutor

import grpc

from tfg.errors import TfgRuntimeError
from tfg.executor.distributed.rpc import StepAborted, assemble
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
        self._calls = set()
        self._calls_lock = threading.Lock()
        self._src_task = {}  # source device -> task, cached

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

    def recv_async(self, key, callback):
        task = self.source_task(key)
        if task is None:
            return super().recv_async(key, callback)
        if self.error is not None:
            callback(None, True, self.error)
            return
        _PULLS.submit(self._pull, task, key, callback)

    def _pull(self, task, key, callback):
        try:
            client = self._peer(task)
            call = client.recv_tensor(self.step_id, key)
        except Exception as e:  # noqa: BLE001 - an unknown task or a closed channel
            callback(None, True, e if isinstance(e, TfgRuntimeError) else TfgRuntimeError(
                f"cannot receive {_tensor(key)} from {task}: {e}"))
            return
        with self._calls_lock:
            self._calls.add(call)
        aborted = self.error
        if aborted is not None:
            call.cancel()
        try:
            value, is_dead = assemble(call)
        except grpc.RpcError as e:
            if self.error is not None:  # we cancelled it: the abort's error is the one
                callback(None, True, self.error)
                return
            err = client.error("RecvTensor", e)
            if not isinstance(err, StepAborted):
                err = type(err)(f"{err} while receiving {_tensor(key)}")
            callback(None, True, err)
            return
        except Exception as e:  # noqa: BLE001 - a malformed stream
            callback(None, True, TfgRuntimeError(f"receiving {_tensor(key)} from "
                                                 f"{client.label}: {e}"))
            return
        finally:
            with self._calls_lock:
                self._calls.discard(call)
        callback(value, is_dead, None)

    def abort(self, error):
        super().abort(error)
        with self._calls_lock:
            calls = list(self._calls)
        for call in calls:
            call.cancel()

    def take(self, key, on_value, on_error):
        """For RecvTensor: hand this task's value for `key` to `on_value(value, is_dead)`
        once sent, or `on_error(error)` when the step is aborted first."""
        def cb(value, is_dead, error):
            if error is not None:
                on_error(error)
            else:
                on_value(value, is_dead)

        LocalRendezvous.recv_async(self, key, cb)

    def is_remote(self, key):
        return self.source_task(key) is not None


def _tensor(key):
    parts = key.split(";")
    return f"tensor {parts[3]!r}" if len(parts) == 5 else f"key {key!r}"


class DerivedAbort(StepAborted):
    """The error a step's parts see when it was aborted from outside (AbortStep)."""


def aborted_by(reason):
    return DerivedAbort(f"step aborted: {reason}" if reason else "step aborted")
