"""What a worker forgets on its own: sessions no master has used for a while, and step state no
RunGraph claimed. A master that dies (kill -9) never sends CloseSession or CleanupGraph, and a
RecvTensor for a step id that never runs here creates a rendezvous nobody collects; without
this sweep each leaves memory behind for as long as the worker runs.

    >>> sweeper = Sweeper(service, idle_s=3600)   # a daemon thread, every few seconds
    >>> sweep(service, idle_s=3600)               # or once, from any RPC
    (1, 4)                                        # sessions expired, steps collected

A session is idle when no RPC touched it (or ended a step of it) for `idle_s` seconds and none
of its steps is running; expiring it drops its registered graphs and private state (a later
RunGraph of that session answers NOT_FOUND, and the master says the worker lost it). Its
variables and queues stay in the worker's containers, which outlive sessions as on a TensorFlow
worker (tfg/executor/containers.py): the same variable of a rerun is reused, not added; a reset
(CleanupAll) frees them and --max-memory bounds them. A step is collected
STEP_TTL_S after its RunGraph ended (the master's CleanupGraph usually comes first), or
ORPHAN_TTL_S after it was created when no RunGraph ever ran it here.
"""
import gc
import threading
import time

DEFAULT_IDLE_S = 3600.0
STEP_TTL_S = 600.0
ORPHAN_TTL_S = 60.0
SWEEP_EVERY_S = 5.0


def sweep(service, idle_s=DEFAULT_IDLE_S, now=None):
    """Expire idle sessions and collect finished or orphaned steps of a WorkerService;
    returns (sessions expired, steps collected)."""
    now = time.monotonic() if now is None else now
    expired = []
    with service.lock:
        steps = service.steps
        gone = [sid for sid, st in steps.items() if collectable(st, now)]
        for sid in gone:
            del steps[sid]
        running = {st.session for st in steps.values()
                   if st.group is not None and st.ended is None}
        for handle, sess in list(service.sessions.items()):
            if handle not in running and not getattr(sess, "busy", 0) and \
                    now - sess.last_used > idle_s:
                expired.append(service.sessions.pop(handle))
                for sid in [k for k, st in steps.items() if st.session == handle]:
                    del steps[sid]
    for sess in expired:  # outside the lock: freeing large variables takes a while
        release(sess)
    if gone and not expired:
        gc.collect()
    return len(expired), len(gone)


def release(sess):
    """Free a dropped session now. Its registered graphs and finished steps form reference
    cycles (executors, closures of the RPCs that ran them) that keep their tensors alive until
    a full garbage collection, which a worker allocating few objects seldom runs: without
    this, each closed session of a 200 MB variable left 400 MB behind."""
    sess.resources.clear()
    sess.graphs.clear()
    gc.collect()


def collectable(step, now):
    """Whether a step's state may go: ended long enough ago, or never run and orphaned."""
    if step.ended is not None:
        return now - step.ended > STEP_TTL_S
    created = getattr(step, "created", None)
    return step.group is None and created is not None and now - created > ORPHAN_TTL_S


class Sweeper:
    """Runs `sweep` every SWEEP_EVERY_S seconds on a daemon thread until `stop()`."""

    def __init__(self, service, idle_s=DEFAULT_IDLE_S, every_s=SWEEP_EVERY_S):
        self.service, self.idle_s, self.every_s = service, idle_s, every_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True, name="tfg-sweeper")
        self._thread.start()

    def _loop(self):
        while not self._stop.wait(self.every_s):
            sweep(self.service, self.idle_s)

    def stop(self):
        self._stop.set()
