"""The dataflow executor of one partition: pending counts, a ready queue, frames and
iterations, dead values; TensorFlow's v1 executor semantics, as an interpreter.

    >>> group = StepGroup(step)
    >>> run = DataflowRun(plan, group, rendezvous, feed_values)
    >>> run.execute()          # returns when nothing is pending; raises the first error
    >>> run.results            # fetched values, in fetch order

A value is an array (or a `Ref`), or NOVAL for a dead output; a ready node is (item, frame,
iteration, is_dead, args): a node with one input edge carries its argument list there, the
others find theirs in the iteration's input slots (args None). A kernel node runs its prepared
call (tfg/executor/calls.py, bound at plan time), the executor's own ops their entry of
tfg/executor/control.py; propagation to successors is inline in `_dispatch`: a loop runs it for
every iteration, and each avoided call or dict lookup shows in the RNN benchmark
(docs/performance.md). One scheduler thread owns all the state; a kernel worth it runs on the
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

from tfg.errors import GraphValidationError, TfgError, TfgRuntimeError
from tfg.executor import plan as P
from tfg.executor.control import BUILTINS, NOVAL
from tfg.executor.frames import Frame, Iteration
from tfg.executor.loops import LoopNodeError, compile_loops
from tfg.executor.trace import MemoryMeter
from tfg.kernels.memory import received
from tfg.kernels.resources import Ref
from tfg.schemas import truncate


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


def thread_pool():
    """The process-wide pool for inter-op parallelism, sized to the machine."""
    global _POOL
    with _POOL_LOCK:
        if _POOL is None:
            _POOL = ThreadPoolExecutor(max_workers=max(2, os.cpu_count() or 2),
                                       thread_name_prefix="tfg-op")
        return _POOL


_FRAME_KINDS = frozenset({P.ENTER, P.EXIT, P.NEXT})
_TRIGGER = P.TRIGGER
class StepGroup:
    """What the executors of one step share: the step context, tracing, and idle detection."""

    def __init__(self, step, trace=False):
        self.step = step
        self.trace = [] if trace else None  # (name, op, device, start_ns, dur_ns, thread,
        #                                     output bytes)
        self.lock = threading.Lock()
        self.runs = []
        self.error = None
        self.rendezvous = None
        self.peak_bytes = 0
        self.device_peaks = {}  # device -> peak live bytes of its executor this step

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

    def __init__(self, plan, group, rendezvous=None, feed_values=(), compiled_loops=True):
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
        # Live bytes when tracing: distinct arrays waiting in some input slot, released when
        # their last consumer has taken them.
        self.meter = MemoryMeter()
        # Loop frames run by a compiled schedule (tfg/executor/loops.py); not when tracing,
        # which times every node of every iteration.
        self.loops = None
        if compiled_loops and plan.has_control_flow and group.trace is None:
            if plan.loops is None:
                plan.loops = compile_loops(plan)
            self.loops = plan.loops or None
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
                self.group.peak_bytes = max(self.group.peak_bytes, self.meter.peak)
                self.group.device_peaks[self.device_name] = max(
                    self.group.device_peaks.get(self.device_name, 0), self.meter.peak)
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
            self.ready.append((self.items[iid], root, 0, False, None))
            it0.outstanding_ops += 1
        ready, group, dispatch, popleft = self.ready, self.group, self._dispatch, self.ready.popleft
        while True:
            while ready and group.error is None:
                dispatch(popleft())
                # Only pool kernels and Recvs post completions (a wake-up after an error
                # elsewhere needs no drain: the loop condition sees the error).
                if self.inflight and not self.queue.empty():
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
        item, frame, it, dead, args = tn
        kind = item.kind
        if kind is P.RECV:
            return self._start_recv(tn)
        if args is None:  # several inputs: gathered in the iteration's slots
            if item.num_inputs:
                args = frame.iterations[it].inputs.pop(item.id, None)
                if args is None:  # every input was dead (or arrived by control edge only)
                    args = [NOVAL] * item.num_inputs
                elif self.trace is not None:
                    for value in args:
                        self.meter.release(value)
            else:
                args = []
        elif self.trace is not None:
            for value in args:
                self.meter.release(value)
        if dead:
            if kind is P.SEND:
                return self._send(tn, NOVAL)
            return self._propagate(tn, [NOVAL] * item.num_outputs)
        if kind is not P.KERNEL:
            # The executor's own ops (tfg/executor/control.py); a malformed node (an Enter
            # without an input, a Switch without a predicate) fails the step naming it, as a
            # kernel would.
            try:
                if kind is P.SEND:
                    return self._send(tn, args[0])
                outputs = BUILTINS[kind](self, item, args)
            except Exception as e:  # noqa: BLE001 - every failure ends the step
                self.group.fail(node_error(item, e))
                return
            return self._propagate(tn, outputs)
        to_pool = item.blocking
        if not to_pool and item.poolable and _POOL_PAYS and (self.ready or self.pool_inflight):
            for a in args:  # worth a hand-off only for large inputs
                if getattr(a, "nbytes", 0) >= P.POOL_MIN_BYTES:
                    to_pool = True
                    break
        if to_pool:
            self.inflight += 1
            self.pool_inflight += 1
            thread_pool().submit(self._pool_task, tn, args)
            return
        try:  # the node's prepared call (tfg/executor/calls.py): most nodes come here
            if self.trace is None:
                outputs = item.call(args, self.step)
            else:
                outputs = self._run_kernel(item, args)
        except Exception as e:  # noqa: BLE001 - every kernel failure ends the step
            self.group.fail(node_error(item, e))
            return
        # _propagate for a kernel, inline: one Python call less on the path every node takes.
        if item.fetch_ports:
            for port, fi in item.fetch_ports:
                self.results[fi] = outputs[port]
        state = frame.iterations[it]
        if item.succ:
            self._activate(state, frame, it, item, False, outputs)
        state.outstanding_ops -= 1
        if state.outstanding_ops == 0 and self._cleanup_iterations(frame, it):
            self._frame_done(frame)

    def _pool_task(self, tn, args):
        try:
            outputs = self._run_kernel(tn[0], args)
            self.post((tn, outputs, None, True, None))
        except BaseException as e:  # noqa: BLE001
            self.post((tn, None, node_error(tn[0], e), True, None))

    def _start_recv(self, tn):
        item, frame, it = tn[0], tn[1], tn[2]
        key = f"{item.key_prefix}{frame.frame_id}:{it}"
        rid = id(tn)
        self.recv_waiting[rid] = key
        self.inflight += 1
        start = time.perf_counter_ns() if self.trace is not None else 0
        xp = self.plan.device.xp

        def arrived(value, is_dead, error):
            if error is not None:
                self.post((tn, None, error, False, rid))
                return
            if self.trace is not None:
                self._record(item, start, (value,))
            if not is_dead:
                value = received(xp, value)  # the only host<->device copy between partitions
                if item.compress and getattr(value, "dtype", None) == truncate.WORD:
                    value = truncate.widen(value, value.shape, xp)
            self.post((tn, [NOVAL if is_dead else value], None, False, rid))

        self.rendezvous.recv_async(key, arrived)

    # --- running one node -----------------------------------------------------------------
    def _run_kernel(self, item, args):
        """The prepared call, timed when the step is traced (a pool thread runs this)."""
        if self.trace is None:
            return item.call(args, self.step)
        start = time.perf_counter_ns()
        outputs = item.call(args, self.step)
        self._record(item, start, outputs)
        return outputs

    def _record(self, item, start, outputs):
        # Output bytes ride along for `tfg run --profile` (a measured cost model).
        end = time.perf_counter_ns()
        self.trace.append((item.name, item.op, self.device_name, start, end - start,
                           threading.get_ident(),
                           tuple(getattr(v, "nbytes", 0) for v in outputs)))

    def _send(self, tn, value):
        item, frame, it = tn[0], tn[1], tn[2]
        try:
            if type(value) is Ref:
                value = value.get()
            if item.compress and truncate.applies(value):  # lossy: half the bytes cross
                value = truncate.truncate(value, self.plan.device.xp)
            key = f"{item.key_prefix}{frame.frame_id}:{it}"
            self.rendezvous.send(key, None if value is NOVAL else value, value is NOVAL)
        except Exception as e:  # noqa: BLE001
            self.group.fail(node_error(item, e))
            return
        self._propagate(tn, [])

    # --- propagation (TensorFlow's PropagateOutputs) -----------------------------------
    def _propagate(self, tn, outputs):
        item, frame, it, dead = tn[0], tn[1], tn[2], tn[3]
        if item.fetch_ports:
            for port, fi in item.fetch_ports:
                self.results[fi] = outputs[port]
        kind = item.kind
        if kind is P.KERNEL or kind not in _FRAME_KINDS:
            state = frame.iterations[it]
            if item.succ:
                self._activate(state, frame, it, item, dead, outputs)
        else:
            if not self._propagate_frames(item, frame, it, dead, outputs):
                return
            state = frame.iterations[it]
        state.outstanding_ops -= 1
        if state.outstanding_ops == 0 and self._cleanup_iterations(frame, it):
            self._frame_done(frame)

    def _propagate_frames(self, item, frame, it, dead, outputs):
        """Enter/Exit/NextIteration: deliver into another frame or iteration (False: failed)."""
        kind = item.kind
        if kind == P.ENTER:
            child = self._child_frame(frame, it, item)
            if child.entered is not None:  # a compiled loop: it starts once all are in
                child.entered.append((item, outputs[0], dead))
                child.pending_inputs -= 1
                if child.pending_inputs == 0:
                    self._run_compiled_loop(child)
                return True
            self._enter(child, item, dead, outputs)
            child.pending_inputs -= 1
        elif frame.parent is None:
            # No Enter leads here (a malformed loop): an input error, not a scheduler crash.
            self.group.fail(GraphValidationError(
                f"node {item.name!r} ({item.op}) is not inside a while loop: no Enter node "
                "leads to it"))
            return False
        elif kind == P.EXIT:
            if dead:
                if it == frame.iteration_count:
                    frame.dead_exits.append(item)
            else:
                parent = frame.parent
                self._activate(parent.iterations[frame.parent_iter], parent, frame.parent_iter,
                               item, False, outputs)
        elif not dead:  # NextIteration
            if (it == frame.iteration_count
                    and frame.outstanding_iterations == frame.max_parallel):
                frame.next_iter_roots.append((item, outputs[0]))
            else:
                if it == frame.iteration_count:
                    self._increment_iteration(frame)
                self._activate(frame.iterations[it + 1], frame, it + 1, item, False, outputs)
        return True

    def _enter(self, child, item, dead, outputs):
        """Deliver an Enter's output into iteration 0 of `child` (every iteration if constant)."""
        if item.is_constant:
            child.inv_values.append((item, outputs[0]))
            for i in range(child.iteration_count + 1):
                self._activate(child.iterations[i], child, i, item, outputs[0] is NOVAL,
                               outputs)
        else:
            self._activate(child.iterations[0], child, 0, item, dead, outputs)

    def _run_compiled_loop(self, child):
        """Run `child`'s loop by its compiled program (all its Enters are in), deliver its
        Exits to the parent and end the frame; with a dead Enter value the frame goes to the
        dataflow executor instead (a loop in an untaken cond branch)."""
        entered, child.entered = child.entered, None
        if any(dead or value is NOVAL for _, value, dead in entered):
            for item, value, dead in entered:
                self._enter(child, item, dead, [value])
            return
        program = self.loops[entered[0][0].frame_name]
        try:
            exits = program.run({item.id: value for item, value, _ in entered}, self.step,
                                self.group)
        except LoopNodeError as e:
            self.group.fail(node_error(e.item, e.error))
            return
        if exits is None:  # the step failed elsewhere
            return
        parent, pit = child.parent, child.parent_iter
        state = parent.iterations[pit]
        for item, value in exits:
            if item.fetch_ports:
                for port, fi in item.fetch_ports:
                    self.results[fi] = value
            self._activate(state, parent, pit, item, False, [value])
        del self.frames[child.path]
        state.outstanding_frames -= 1

    def _activate(self, state, frame, it, item, is_dead, outputs):
        """Deliver `item`'s outputs along its out edges in (frame, it), whose per-iteration
        state is `state`; queue the nodes that become ready."""
        pend, deadc, inputs = state.pending, state.dead, state.inputs
        ready = self.ready
        track = self.trace is not None
        queued = 0
        for d, dst, port, idx, is_merge, pending_init in item.succ:
            if pending_init == 1 and not is_merge:
                # One input edge: it is ready now; its argument travels in the ready entry.
                if port >= 0:
                    value = outputs[port]
                    if track:
                        self.meter.hold(value)
                    # Dead-ness first: live values (the usual case) skip the kind test.
                    ready.append((d, frame, it, (is_dead or value is NOVAL)
                                  and d.kind is not _TRIGGER, [value]))
                else:  # a control edge; no data inputs
                    ready.append((d, frame, it, is_dead and d.kind is not _TRIGGER, []))
                queued += 1
                continue
            p = pend.get(dst)
            if p is None:
                p = pending_init
            if is_merge:
                need_input = False
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
                if need_input:
                    self._store(inputs, d, idx, outputs[port], track)
                if is_ready:
                    ready.append((d, frame, it, dst_dead, None))
                    queued += 1
                continue
            p -= 1
            pend[dst] = p
            if port >= 0:
                value = outputs[port]
                if is_dead or value is NOVAL:
                    deadc[dst] = deadc.get(dst, 0) + 1
                slots = inputs.get(dst)
                if slots is None:
                    slots = inputs[dst] = [NOVAL] * d.num_inputs
                slots[idx] = value
                if track:
                    self.meter.hold(value)
            elif is_dead:
                deadc[dst] = deadc.get(dst, 0) + 1
            if p == 0:
                # A ControlTrigger runs even when its inputs are dead.
                ready.append((d, frame, it, dst in deadc and d.kind is not _TRIGGER, None))
                queued += 1
        state.outstanding_ops += queued

    def _store(self, inputs, d, idx, value, track):
        slots = inputs.get(d.id)
        if slots is None:
            slots = inputs[d.id] = [NOVAL] * d.num_inputs
        slots[idx] = value
        if track:
            self.meter.hold(value)

    def _child_frame(self, frame, it, item):
        path = frame.child_path(it, item.frame_name)
        child = self.frames.get(path)
        if child is None:
            child = Frame(path, frame, it, item.parallel_iterations,
                          self.plan.frame_inputs.get(item.frame_name, 0))
            if self.loops is not None and item.frame_name in self.loops:
                child.entered = []
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
        state = frame.iterations[n]
        for item, value in roots:
            self._activate(state, frame, n, item, value is NOVAL, [value])
        for item, value in frame.inv_values:
            self._activate(state, frame, n, item, value is NOVAL, [value])

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
                self._activate(parent.iterations[pit], parent, pit, item, True, [NOVAL])
            parent.iterations[pit].outstanding_frames -= 1
            frame = parent if self._cleanup_iterations(parent, pit) else None
