"""One step on TensorFlow servers: RunGraph on every task at once, watched until all end.

    >>> watch = StepWatch(clients, status, timeout=10)
    >>> responses = watch.run({task: run_graph_request, ...})    # {task: RunGraphResponse}

TensorFlow's own master waits on RunGraph and nothing else: a step that waits for a tensor
from a dead server hangs until an operation timeout. tfg bounds it like its own cluster
(master.py): while the calls run, every task still running is pinged (GetStatus, deadline
timeout / 2); a task that does not answer, or answers with other device incarnations (it was
restarted and lost its variables), ends the step within `timeout` with an error naming it.
Ending a step cancels every RunGraph call still running, which makes each TensorFlow worker
cancel its part; CleanupGraph then drops the step's rendezvous state everywhere.
"""
import threading
import time

from tfg.executor.distributed import rpc
from tfg.schemas.proto import tf_worker_pb2 as tfpb


def incarnations_of(status):
    return sorted(d.incarnation for d in status.device_attributes)


class StepWatch:
    """See the module docstring. `status` is {task: GetStatusResponse} from setup."""

    def __init__(self, clients, status, timeout):
        self.clients = clients
        self.status = status
        self.timeout = timeout
        self.cond = threading.Condition()
        self.done = {}   # task -> RunGraphResponse or exception
        self.pings = {}  # task -> None while in flight, then the response or exception
        self.futures = {}

    def _post(self, table, task):
        def done(result):
            with self.cond:
                table[task] = result
                self.cond.notify_all()
        return done

    def run(self, requests):
        for task, req in requests.items():
            self.futures[task] = self.clients[task].start("RunGraph", req,
                                                          self._post(self.done, task))
        try:
            return self._wait(list(requests))
        except BaseException:
            self.cancel()
            raise

    def cancel(self):
        for future in self.futures.values():
            future.cancel()

    def _wait(self, tasks):
        interval = min(1.0, self.timeout / 5)
        next_ping = time.monotonic() + interval
        while True:
            with self.cond:
                self.cond.wait_for(lambda: len(self.done) == len(tasks), timeout=interval / 2)
                done, pings = dict(self.done), dict(self.pings)
            failed = {t: r for t, r in done.items() if isinstance(r, BaseException)}
            if failed:
                raise self._primary(failed, tasks)
            if len(done) == len(tasks):
                return done
            for task, result in pings.items():
                if result is None:
                    continue
                with self.cond:
                    del self.pings[task]
                err = self._ping_error(task, result)
                if err is not None and task not in done:
                    raise err
            now = time.monotonic()
            if now >= next_ping:
                next_ping = now + interval
                for task in tasks:
                    if task not in done and task not in pings:
                        with self.cond:
                            self.pings[task] = None
                        self.clients[task].call_async("GetStatus", tfpb.GetStatusRequest(),
                                                      self.timeout / 2,
                                                      self._post(self.pings, task))

    def _primary(self, failed, tasks):
        """The error to report: a task that is gone is the cause of the others' failures
        (their RecvTensor from it failed), so it is looked for first, with one quick ping."""
        suspects = [t for t in tasks if not isinstance(self.done.get(t), tfpb.RunGraphResponse)]
        pings = rpc.call_all({t: (self.clients[t], "GetStatus", tfpb.GetStatusRequest())
                              for t in suspects}, timeout=min(2.0, self.timeout / 2),
                             strict=False)
        for task in suspects:
            err = self._ping_error(task, pings[task])
            if err is not None:
                return err
        task, result = next(iter(failed.items()))
        client = self.clients[task]
        return client.error("RunGraph", result) if hasattr(result, "code") else result

    def _ping_error(self, task, result):
        client = self.clients[task]
        if isinstance(result, BaseException):
            err = client.error("GetStatus", result) if hasattr(result, "code") else result
            return rpc.TaskUnreachable(str(err)) if not isinstance(err, rpc.TaskUnreachable) \
                else err
        if incarnations_of(result) != incarnations_of(self.status[task]):
            return rpc.TaskUnreachable(f"{client.label} was restarted during the step (its "
                                       "variables are gone); rerun to start again")
        return None
