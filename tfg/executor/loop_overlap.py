"""A loop body's side work on a second thread: the calls of a compiled loop (loops.py) whose
results only feed themselves in the next iteration and the loop's Exits (a gradient loop's
accumulations of a loop invariant's gradient) run on a worker thread, in order, while the main
thread runs the rest of the body (the chain each iteration waits for).

    Before (the rnn row's gradient loop, one thread): pops, TanhGrad, dU += x^T g,
      dW += h^T g, dh = g W^T; every iteration runs all five products and adds in turn.
    After: the main thread runs pops, TanhGrad, dh = g W^T and hands (x, h, g) to the worker,
      which runs the two accumulations of iteration t while the main thread runs t - 1's.

Both threads call OpenBLAS and numpy's ufuncs, which release the GIL, so the two GEMMs of an
iteration can run at once on two cores; TensorFlow's inter-op threads do the same for this
loop. Values are the sequential run's, bit for bit: the worker runs the same calls on the same
arrays in the same order (one queue); what it reads from the main thread is captured when it
is handed over, and nothing the main thread runs later writes into those arrays (a fused
chain reuses a buffer only where nothing outside the chain reads it, loop_fusion.py; the
other kernels return fresh arrays); the main thread never reads what the worker writes until
the loop ends and the worker has drained its queue. An error in the side work is raised when
the loop ends (naming its node); the main thread's own errors come first.

The side set is chosen at compile time (`plan_overlap`): stateless CPU kernels and fused
chains, not loop-invariant, in a frame without conds, whose every output is read only by the
side set, by a loop Merge (through its NextIteration) whose value only the side set and the
Exits read, or by an Exit. It is used when both it and the rest hold a BLAS product (else one
thread does the work as well), and decided per loop run (`enabled`): $TFG_LOOP_OVERLAP 0 or 1
forces it; by default it runs when BLAS is on one thread (the GEMM floor, blas_floor.py) and
the contention meter sees a core free (contention.py), else the side calls run inline, as
before.
"""
import collections
import os
import queue
import threading

import numpy as np

from tfg.executor import plan as P
from tfg.executor.blas import current_blas_threads
from tfg.executor.contention import meter, threads_for, usable_cores
from tfg.executor.loop_calls import LoopNodeError
from tfg.schemas.ops import get_op, has_op, has_trait

ENV_VAR = "TFG_LOOP_OVERLAP"


def enabled():
    """Whether a loop starting now hands its side work to the worker thread."""
    force = os.environ.get(ENV_VAR, "").strip()
    if force in ("0", "1"):
        return force == "1"
    cores = usable_cores()
    return (cores >= 2 and current_blas_threads() == 1
            and threads_for(cores, meter().others()) >= 2)


class _Worker:
    """One daemon thread running (fn, arg) tasks in the order they were queued."""

    def __init__(self):
        self.tasks = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._loop, name="tfg-loop-overlap", daemon=True)
        self.thread.start()

    def _loop(self):
        get = self.tasks.get
        while True:
            fn, arg = get()
            fn(arg)


_worker = None
_worker_lock = threading.Lock()


def _get_worker():
    global _worker
    with _worker_lock:
        if _worker is None:
            _worker = _Worker()
        return _worker


class _Run:
    """One loop run's side state: the worker's own slots, the first error."""

    __slots__ = ("wvals", "error", "started")

    def __init__(self, vals):
        self.wvals = list(vals)
        self.error = None
        self.started = False


class Overlap:
    """The side set of one compiled loop: `submit` stands in the body for its calls."""

    def __init__(self, calls, external, merges, state_slot, written):
        self.calls = tuple(calls)  # (call, item) in body order
        self.external = tuple(external)  # slots the side calls read from the main thread
        self.merges = tuple(merges)  # (out slot, NextIteration slot) of the side's Merges
        self.state_slot = state_slot  # vals[state_slot]: this run's _Run, or None (inline)
        self.written = tuple(written)  # slots to copy back when the loop ends

    def begin(self, vals):
        """At the loop's start: the worker takes this run's side work (or not)."""
        vals[self.state_slot] = _Run(vals) if enabled() else None

    def submit_call(self):
        """The body's call in place of the side calls."""
        calls, external, merges, slot = self.calls, self.external, self.merges, self.state_slot
        worker = _get_worker()
        put = worker.tasks.put

        def side(task):
            run, captured = task
            if run.error is not None:
                return
            w = run.wvals
            for s, v in zip(external, captured):
                w[s] = v
            item = None
            try:
                for call, item in calls:
                    call(w, None)
            except LoopNodeError as e:
                run.error = e
                return
            except Exception as e:  # noqa: BLE001 - raised on the main thread, named
                run.error = LoopNodeError(item, e)
                return
            for out, nxt in merges:
                w[out] = w[nxt]

        def submit(vals, step):
            run = vals[slot]
            if run is None:  # inline, as without overlap
                for call, _ in calls:
                    call(vals, step)
                for out, nxt in merges:
                    vals[out] = vals[nxt]
                return
            run.started = True
            put((side, (run, tuple(vals[s] for s in external))))
        return submit

    def end(self, vals, failed=False):
        """At the loop's end (or failure): wait for the worker; its slots back into vals."""
        run = vals[self.state_slot]
        if run is None or not run.started:
            return
        done = threading.Lock()
        done.acquire()
        _get_worker().tasks.put((lambda lock: lock.release(), done))
        done.acquire()  # (blocks without the GIL)
        if failed:
            return
        if run.error is not None:
            raise run.error
        w = run.wvals
        for s in self.written:
            vals[s] = w[s]

    def inline_merges(self):
        """The side Merges' slots, which the main loop's Merge update must skip."""
        return {out for out, _ in self.merges}


def _stateless(it):
    if it.kind != P.KERNEL or it.deref is not None or it.needs_step or it.blocking:
        return False
    if it.ctx is None or it.ctx.xp is not np or not has_op(it.op):
        return False
    return not get_op(it.op).stateful


def _members(call, it):
    return getattr(call, "members", None) or (it,)


class _BodyGraph:
    """What each call of a body reads and writes, and who reads each slot."""

    def __init__(self, body, ins_of, outs_of, merges, aliased):
        self.body = body
        self.reads, self.writes = [], []
        for call, it in body:
            ms = _members(call, it)
            w = set()
            for m in ms:
                w.update(outs_of(m))
            r = set()
            for m in ms:
                ins, controls = ins_of[m.id]
                r.update(s for s in ins if s is not None)
                r.update(controls)
            self.reads.append(r - w)
            self.writes.append(w)
        self.readers = {}  # slot -> ids of the nodes reading it (any node of the frame)
        for iid, (ins, controls) in ins_of.items():
            if iid in aliased:
                continue
            for s in list(ins) + list(controls):
                if s is not None:
                    self.readers.setdefault(s, set()).add(iid)
        self.loop_next = {m[4]: m for m in merges}  # NextIteration slot -> its Merge
        call_of = {}  # member id -> index of its call in body (others: -1)
        for k, (call, it) in enumerate(body):
            for m in _members(call, it):
                call_of[m.id] = k
        self.call_of = collections.defaultdict(lambda: -1, call_of)

    def closed(self, side, exit_slots, pred_slot):
        """The largest subset of `side` whose outputs only it, its own Merges and the Exits
        read, and its Merges {out slot: NextIteration slot}."""
        readers, loop_next, writes = self.readers, self.loop_next, self.writes
        side = set(side)
        while True:
            members = {m.id for k in side for m in _members(*self.body[k])}
            produced = set().union(*(writes[k] for k in side)) if side else set()
            owned = {}
            for nxt, m in loop_next.items():
                out, idx, _, _, _, _, deref = m
                if (nxt in produced and not deref and not readers.get(idx)
                        and readers.get(out, set()) <= members and out != pred_slot):
                    owned[out] = nxt
            bad = set()
            for k in side:
                # a value several side calls read (a gradient loop's g) is the main thread's
                # work: what it feeds then runs in parallel with what else reads it
                fed = {self.call_of[r] for s in writes[k] for r in readers.get(
                    loop_next[s][0] if s in loop_next else s, ())} - {k}
                if len(fed) >= 2:
                    bad.add(k)
                for s in writes[k]:
                    if s == pred_slot:
                        bad.add(k)
                    elif s in loop_next:
                        if loop_next[s][0] not in owned:
                            bad.add(k)
                    elif not readers.get(s, set()) <= members and s not in exit_slots:
                        bad.add(k)
            if not bad:
                return side, owned
            side -= bad


def plan_overlap(body, ins_of, outs_of, merges, exit_slots, pred_slot, once, aliased,
                 new_slot):
    """(new body, Overlap) when the body has side work worth a second thread, else (body,
    None). body: [(call, item)] after fusion; ins_of: item id -> (input slots, control
    slots) of every node of the frame; outs_of(item) -> its output slots; merges: the
    LoopProgram's Merge tuples; exit_slots: the Exits' slots; once: ids of loop-invariant
    nodes; aliased: ids of the nodes that share their input's slot (no call: their readers
    read that slot); new_slot(key) -> a fresh slot."""
    g = _BodyGraph(body, ins_of, outs_of, merges, aliased)
    side = {k for k, (call, it) in enumerate(body)
            if all(_stateless(m) and m.id not in once for m in _members(call, it))}
    # (a loop invariant's product runs in the first iteration only: it does not count)
    blas = [any(has_trait(m.op, "blas") and m.id not in once for m in _members(*c))
            for c in body]
    while True:
        side, owned = g.closed(side, exit_slots, pred_slot)
        if not any(blas[k] for k in side):
            return body, None
        if any(blas[k] for k in range(len(body)) if k not in side):
            break
        # every product would be the worker's: the first one (and what feeds only it)
        # stays on the main thread, the others run beside it (two independent recurrences)
        side.discard(min(k for k in side if blas[k]))
    reads, writes = g.reads, g.writes
    produced = set().union(*(writes[k] for k in side))
    external = sorted(set().union(*(reads[k] for k in side)) - produced - set(owned))
    # hand over as soon as the last external input is made
    producer = {s: k for k, w in enumerate(writes) for s in w}
    at = max([producer[s] for s in external if s in producer and producer[s] not in side],
             default=-1)
    state_slot = new_slot(("overlap", "state"))
    written = sorted(produced | set(owned))
    ov = Overlap([body[k] for k in sorted(side)], external, owned.items(), state_slot,
                 written)
    submit = ov.submit_call()
    anchor = body[min(side)][1]
    rest = [(c, it) for k, (c, it) in enumerate(body) if k not in side]
    pos = sum(1 for k in range(at + 1) if k not in side)
    rest.insert(pos, (submit, anchor))
    return rest, ov
