"""Calls that may take long (registering a large graph, moving gigabytes of variables) watched
for a hung task: no fixed deadline on the call, but a GetStatus ping every second, so a task
that stops answering (SIGSTOP, a frozen machine) ends the call within the cluster's timeout,
naming the task, as a dead one does.

    >>> call_all_watched({t: (client, "GetVariables", req)}, timeout=10)
    {('worker', 0): <GetVariablesResponse>, ...}
    # task 1 stopped with SIGSTOP: TaskUnreachable("task /job:worker/task:1 (...) did not
    # answer in time (GetStatus: Deadline Exceeded)") after about timeout / 2 seconds

The call left behind on a hung task ends when the session closes its channels.
"""
import threading
import time

from tfg.schemas.proto import worker_pb2 as pb


def call_all_watched(calls, timeout):
    """Like rpc.call_all(strict=True), watched by pings with deadline timeout / 2."""
    cond = threading.Condition()
    results, pings = {}, {}

    def post(table, key):
        def done(result):
            with cond:
                table[key] = result
                cond.notify_all()
        return done

    for key, (client, method, request) in calls.items():
        client.call_async(method, request, None, post(results, key))
    interval = min(1.0, timeout / 5)
    next_ping = time.monotonic() + interval
    while True:
        with cond:
            cond.wait_for(lambda: len(results) == len(calls), timeout=interval / 2)
            done, answered = dict(results), dict(pings)
        for key, (client, method, _) in calls.items():  # the first failure, in key order
            r = done.get(key)
            if isinstance(r, BaseException):
                raise client.error(method, r) if hasattr(r, "code") else r
        if len(done) == len(calls):
            return done
        for key, r in answered.items():
            if isinstance(r, BaseException) and key not in done:
                client = calls[key][0]
                raise client.error("GetStatus", r) if hasattr(r, "code") else r
        now = time.monotonic()
        if now >= next_ping:
            next_ping = now + interval
            for key, (client, _, _) in calls.items():
                if key not in done and pings.get(key, 0) is not None:
                    with cond:
                        pings[key] = None  # in flight
                    client.call_async("GetStatus", pb.GetStatusRequest(), timeout / 2,
                                      post(pings, key))
