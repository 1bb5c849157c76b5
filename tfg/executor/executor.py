"""The dataflow executor of one partition: pending counts, a ready queue, frames and
iterations, dead values; TensorFlow's v1 executor semantics, as an interpreter.

    >>> group = StepGroup(step)
    >>> run = DataflowRun(plan, group, rendezvous, feed_values)
    >>> run.execute()          # returns when nothing is pending; raises the first error
    >>> run.results            # fetched values, in fetch order

A value is an array (or a `Ref`), or NOVAL for a dead output; a ready node is (item, frame,
iteration, is_dead). One scheduler thread owns all the state; a kernel worth it runs on the
shared thread pool while the scheduler goes on, and posts its outputs back through a queue,
as does a `_Recv` whose value arrives. Nothing blocks the scheduler, so partitions that wait
for each other never deadlock, and a real deadlock (every executor idle with work pending) is
detected and reported instead of hanging.
"""
import collections
import os
import queue
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from tfg.errors import GraphValidationError, TfgError, TfgRuntimeError
from tfg.executor import plan as P
from tfg.executor.devices import to_host
from tfg.executor.frames import Frame, Iteration
from tfg.kernels.resources import Ref


class _NoValue:
    __slots__ = ()

    def __repr__(self):
        return "NOVAL"


NOVAL = _NoValue()  # a dead output


class NodeError(TfgRuntimeError):
    """A kernel failed; the message names the node and its op."""


def node_error(item, exc):
    """Wrap an exception raised while running `item` into one that names the node."""
    if isinstance(exc, NodeError):
        return exc
    msg = " ".join(str(exc).split())
    if not isinstance(exc, TfgError):
        msg = f"{type(exc).__name__}: {msg}" if msg else type(exc).__name__
    err = NodeError(f"node {item.name!r} ({item.op}) failed: {msg}")
    err.node_name, err.op = item.name, item.op
    return err


_POOL = None
_POOL_LOCK = threading.Lock()
# With one core, a hand-off can only add latency.
_POOL_PAYS = (os.cpu_count() or 1) > 1


def _large(args):
    for a in args:
        if getattr(a, "nbytes", 0) >= P.POOL_MIN_BYTES:
            return True
    return False


def thread_pool():
    """The process-wide pool for inter-op parallelism, sized to the machine."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2),
                                       thread_name_prefix="tfg-op")
        return _POOL


def call_kernel(item, step, args):
    """Run `item`'s kernel on `args` (a list, refs already resolved) -> list of outputs."""
    out = item.fn(item.ctx, step, *args) if item.needs_step else item.fn(item.ctx, *args)
    n = item.num_outputs
    if n == 1:
        if type(out) is tuple or type(out) is list:
            if len(out) != 1:
                raise TfgRuntimeError(f"kernel returned {len(out)} outputs, the op has 1")
            out = out[0]
        return [out]
    if n == 0:
        return []
    if type(out) is not tuple and type(out) is not list:
        raise TfgRuntimeError(f"kernel returned one value, the op has {n} outputs")
    if len(out) != n:
        raise TfgRuntimeError(f"kernel returned {len(out)} outputs, the op has {n}")
    return list(out)


def resolve_refs(item, args):
    """Read Ref inputs the kernel takes by value (at the time it runs, as TensorFlow does)."""
    keep = item.ref_inputs
    for i, a in enumerate(args):
        if type(a) is Ref and i not in keep:
            args[i] = a.get()
    return args


class StepGroup:
    """What the executors of one step share: the step context, tracing, and idle detection."""

    def __init__(self, step, trace=False):
        self.step = step
        self.trace = [] if trace else None  # (name, op, device, start_ns, dur_ns, thread)
        self.lock = threading.Lock()
        self.runs = []
        self.error = None
        self.rendezvous = None
        self.peak_bytes = 0

    def fail(self, error):
        """Record the first error and cancel the step everywhere."""
        with self.lock:
            if self.error is None:
                self.error = error
        self.step.cancelled.set()
        if self.rendezvous is not None:
            self.rendezvous.abort(self.error)
        for run in list(self.runs):
            run.post(None)  # wake idle schedulers

    def check_deadlock(self):
        """Called under self.lock by a run about to wait: all idle with nothing in flight."""
        for run in self.runs:
            if not (run.finished or (run.idle and run.pool_inflight == 0)):
                return None
        waiting = [k for run in self.runs for k in run.recv_waiting.values()]
        if not waiting:
            return None
        return TfgRuntimeError(
            f"deadlock: _Recv waits for rendezvous key {sorted(waiting)[0]} that no executor "
            f"will send")


class DataflowRun:
    """One step of one partition (see module docstring)."""

    def __init__(self, plan, group, rendezvous=None, feed_values=()):
        self.plan = plan
        self.items = plan.items
        self.group = group
        self.step = group.step
        self.rendezvous = rendezvous
        self.feed_values = feed_values
        self.results = [NOVAL] * len(plan.fetches)
        self.ready = collections.deque()
        self.queue = queue.SimpleQueue()
        self.idle = False
        self.finished = False
        self.pool_inflight = 0
        self.inflight = 0
        self.recv_waiting = {}  # id -> key, for deadlock reports
        self.frames = {}
        self.trace = group.trace
        self.device_name = plan.device.name
        self.live_bytes = 0
        self.live = {}  # id(array) -> [array, consumers yet to take it]
        group.runs.append(self)

    # --- driving --------------------------------------------------------------------------
    def post(self, msg):
        """Hand a completion to the scheduler thread (from a pool thread or a Recv callback)."""
        with self.group.lock:
            self.idle = False
            self.queue.put(msg)

    def execute(self):
        try:
            self._execute()
        finally:
            with self.group.lock:
                self.finished = True
                deadlock = self.group.check_deadlock()
            if deadlock is not None:
                self.group.fail(deadlock)
        if self.group.error is not None:
            raise self.group.error

    def _execute(self):
        root = Frame.root()
        self.frames[""] = root
        it0 = root.iterations[0]
        for iid in self.plan.roots:
            self.ready.append((self.items[iid], root, 0, False))
            it0.outstanding_ops += 1
        ready, group = self.ready, self.group
        while True:
            while ready and group.error is None:
                self._dispatch(ready.popleft())
                if not self.queue.empty():
                    self._drain(block=False)
            if group.error is not None or self.inflight == 0:
                break
            self._drain(block=True)
        # After an error, wait for what is in flight (pool kernels, aborted Recvs) to report.
        while self.inflight:
            self._drain(block=True, after_error=True)

    def _drain(self, block, after_error=False):
        while True:
            if block:
                with self.group.lock:
                    if self.queue.empty():
                        self.idle = True
                        deadlock = None if after_error else self.group.check_deadlock()
                    else:
                        deadlock = None
                if deadlock is not None:
                    self.group.fail(deadlock)
                msg = self.queue.get()
                block = False
            else:
                try:
                    msg = self.queue.get_nowait()
                except queue.Empty:
                    return
            if msg is None:
                continue  # a wake-up after an error elsewhere
            self.inflight -= 1
            tn, outputs, error, was_pool, rid = msg
            if was_pool:
                self.pool_inflight -= 1
            if rid is not None:
                self.recv_waiting.pop(rid, None)
            if error is not None:
                self.group.fail(error)
            elif self.group.error is None:
                self._propagate(tn, outputs)

    def _dispatch(self, tn):
        item, frame, it, dead = tn
        kind = item.kind
        if kind == P.RECV:
            return self._start_recv(tn)
        args = self._take_inputs(item, frame, it)
        if kind == P.KERNEL and not dead and (item.blocking or (
                item.poolable and _POOL_PAYS and (self.ready or self.pool_inflight)
                and _large(args))):
            self.inflight += 1
            self.pool_inflight += 1
            thread_pool().submit(self._pool_task, tn, args)
            return
        try:
            outputs = self._compute(tn, args)
        except Exception as e:  # noqa: BLE001 - every kernel failure ends the step
            self.group.fail(node_error(item, e))
            return
        self._propagate(tn, outputs)

    def _pool_task(self, tn, args):
        try:
            outputs = self._run_kernel(tn[0], args)
            self.post((tn, outputs, None, True, None))
        except BaseException as e:  # noqa: BLE001
            self.post((tn, None, node_error(tn[0], e), True, None))

    def _start_recv(self, tn):
        item, frame, it, _ = tn
        key = f"{item.key_prefix}{frame.frame_id}:{it}"
        rid = id(tn)
        self.recv_waiting[rid] = key
        self.inflight += 1
        start = time.perf_counter_ns() if self.trace is not None else 0
        on_cpu = getattr(self.plan.device, "device_type", "CPU") != "GPU"

        def arrived(value, is_dead, error):
            if error is not None:
                self.post((tn, None, error, False, rid))
                return
            if self.trace is not None:
                self._record(item, start)
            if on_cpu:
                value = to_host(value)  # GPU -> CPU at a partition border
            self.post((tn, [NOVAL if is_dead else value], None, False, rid))

        self.rendezvous.recv_async(key, arrived)

    # --- running one node -----------------------------------------------------------------
    def _take_inputs(self, item, frame, it):
        if not item.num_inputs:
            return []
        args = frame.iterations[it].inputs.pop(item.id, None)
        if args is None:  # every input was dead (or arrived by control edge only)
            return [NOVAL] * item.num_inputs
        if self.trace is not None:
            self._release(args)
        return args

    def _run_kernel(self, item, args):
        start = time.perf_counter_ns() if self.trace is not None else 0
        outputs = call_kernel(item, self.step, resolve_refs(item, args))
        if self.trace is not None:
            self._record(item, start)
        return outputs

    def _record(self, item, start):
        end = time.perf_counter_ns()
        self.trace.append((item.name, item.op, self.device_name, start, end - start,
                           threading.get_ident()))

    def _compute(self, tn, args):
        item, frame, it, dead = tn
        kind = item.kind
        if kind == P.SEND:
            value = NOVAL if dead else args[0]
            if type(value) is Ref:
                value = value.get()
            key = f"{item.key_prefix}{frame.frame_id}:{it}"
            self.rendezvous.send(key, None if value is NOVAL else value, value is NOVAL)
            return []
        if dead:
            return [NOVAL] * item.num_outputs
        if kind == P.KERNEL:
            return self._run_kernel(item, args)
        if kind == P.FEED:
            return [self.feed_values[item.feed_index]]
        if kind == P.MERGE:
            for i, a in enumerate(args):
                if a is not NOVAL:
                    return [self._forward(item, a), np.int32(i)]
            return [NOVAL, NOVAL]
        if kind == P.SWITCH:
            data, pred = args
            if type(pred) is Ref:
                pred = pred.get()
            data = self._forward(item, data)
            if not isinstance(pred, (np.ndarray, np.generic, bool)):
                pred = to_host(pred)  # a predicate computed on a GPU
            return [NOVAL, data] if bool(np.asarray(pred)) else [data, NOVAL]
        if kind in (P.ENTER, P.EXIT, P.NEXT, P.IDENT):
            return [self._forward(item, args[0])]
        return []  # NoOp, ControlTrigger

    @staticmethod
    def _forward(item, value):
        if type(value) is Ref and not item.keeps_ref:
            return value.get()
        return value

    # --- propagation (TensorFlow's PropagateOutputs) -----------------------------------
    def _propagate(self, tn, outputs):
        item, frame, it, dead = tn
        if item.fetch_ports:
            for port, fi in item.fetch_ports:
                self.results[fi] = outputs[port]
        kind = item.kind
        if kind == P.ENTER:
            child = self._child_frame(frame, it, item)
            if item.is_constant:
                child.inv_values.append((item, outputs[0]))
                for i in range(child.iteration_count + 1):
                    self._activate(child, i, item, outputs[0] is NOVAL, outputs)
            else:
                self._activate(child, 0, item, dead, outputs)
            child.pending_inputs -= 1
        elif kind in (P.EXIT, P.NEXT) and frame.parent is None:
            # No Enter leads here (a malformed loop): an input error, not a scheduler crash.
            self.group.fail(GraphValidationError(
                f"node {item.name!r} ({item.op}) is not inside a while loop: no Enter node "
                "leads to it"))
            return
        elif kind == P.EXIT:
            if dead:
                if it == frame.iteration_count:
                    frame.dead_exits.append(item)
            else:
                self._activate(frame.parent, frame.parent_iter, item, False, outputs)
        elif kind == P.NEXT:
            if not dead:
                if (it == frame.iteration_count
                        and frame.outstanding_iterations == frame.max_parallel):
                    frame.next_iter_roots.append((item, outputs[0]))
                else:
                    if it == frame.iteration_count:
                        self._increment_iteration(frame)
                    self._activate(frame, it + 1, item, False, outputs)
        else:
            self._activate(frame, it, item, dead, outputs)
        self._decrement_outstanding(frame, it)

    def _activate(self, frame, it, item, is_dead, outputs):
        """Deliver `item`'s outputs along its out edges in (frame, it); queue ready nodes."""
        state = frame.iterations[it]
        pend, deadc, inputs = state.pending, state.dead, state.inputs
        items, ready = self.items, self.ready
        track = self.trace is not None
        for dst, port, idx in item.out_edges:
            d = items[dst]
            p = pend.get(dst)
            if p is None:
                p = d.pending_init
            need_input = False
            if d.is_merge:
                if port < 0:
                    p -= 2
                    pend[dst] = p
                    dst_dead = deadc.get(dst, 0) == d.num_inputs
                    is_ready = p == 0 or (p == 1 and dst_dead)
                elif outputs[port] is not NOVAL:
                    is_ready = p == 1
                    need_input = bool(p & 1)
                    if p & 1:
                        pend[dst] = p - 1
                    dst_dead = False
                else:
                    dc = deadc.get(dst, 0) + 1
                    deadc[dst] = dc
                    # A dead Enter kills the Merge at once: a loop inside an untaken cond
                    # branch must end instead of waiting for a NextIteration.
                    dst_dead = dc == d.num_inputs or item.kind == P.ENTER
                    is_ready = p == 1 and dst_dead
            else:
                p -= 1
                pend[dst] = p
                if is_dead or (port >= 0 and outputs[port] is NOVAL):
                    deadc[dst] = deadc.get(dst, 0) + 1
                need_input = port >= 0
                is_ready = p == 0
                dst_dead = is_ready and deadc.get(dst, 0) > 0
            if need_input:
                slots = inputs.get(dst)
                if slots is None:
                    slots = inputs[dst] = [NOVAL] * d.num_inputs
                slots[idx] = outputs[port]
                if track:
                    self._hold(outputs[port])
            if is_ready:
                if d.kind == P.TRIGGER:
                    dst_dead = False
                ready.append((d, frame, it, dst_dead))
                state.outstanding_ops += 1

    def _child_frame(self, frame, it, item):
        path = frame.child_path(it, item.frame_name)
        child = self.frames.get(path)
        if child is None:
            child = Frame(path, frame, it, item.parallel_iterations,
                          self.plan.frame_inputs.get(item.frame_name, 0))
            self.frames[path] = child
            frame.iterations[it].outstanding_frames += 1
        return child

    def _increment_iteration(self, frame):
        frame.iteration_count += 1
        n = frame.iteration_count
        frame.iterations[n] = Iteration()
        frame.outstanding_iterations += 1
        frame.dead_exits = []
        roots, frame.next_iter_roots = frame.next_iter_roots, []
        for item, value in roots:
            self._activate(frame, n, item, value is NOVAL, [value])
        for item, value in frame.inv_values:
            self._activate(frame, n, item, value is NOVAL, [value])

    def _decrement_outstanding(self, frame, it):
        state = frame.iterations[it]
        state.outstanding_ops -= 1
        if state.outstanding_ops == 0 and self._cleanup_iterations(frame, it):
            self._frame_done(frame)

    def _cleanup_iterations(self, frame, it):
        while it <= frame.iteration_count and frame.is_iteration_done(it):
            del frame.iterations[it]
            frame.outstanding_iterations -= 1
            it += 1
            if frame.next_iter_roots:
                self._increment_iteration(frame)
        return frame.is_done

    def _frame_done(self, frame):
        """Deliver the frame's dead Exits to its parent, then clean the parent up in turn."""
        while frame is not None:
            parent, pit = frame.parent, frame.parent_iter
            del self.frames[frame.path]
            if parent is None:
                return
            for item in frame.dead_exits:
                self._activate(parent, pit, item, True, [NOVAL])
            parent.iterations[pit].outstanding_frames -= 1
            frame = parent if self._cleanup_iterations(parent, pit) else None

    # --- memory accounting (only when tracing) ----------------------------------------
    # Live bytes = distinct arrays waiting in some input slot; an array read by two consumers
    # counts once, and is released when the last of them has taken it.
    def _hold(self, value):
        nbytes = getattr(value, "nbytes", 0)
        if not nbytes:
            return
        entry = self.live.get(id(value))
        if entry is None:
            self.live[id(value)] = [value, 1]
            self.live_bytes += nbytes
            if self.live_bytes > self.group.peak_bytes:
                self.group.peak_bytes = self.live_bytes
        else:
            entry[1] += 1

    def _release(self, args):
        for value in args:
            entry = self.live.get(id(value))
            if entry is not None:
                entry[1] -= 1
                if entry[1] == 0:
                    del self.live[id(value)]
                    self.live_bytes -= value.nbytes
