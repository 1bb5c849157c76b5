"""The fast path for partitions without control flow or Recv: a schedule computed once.

    >>> sched = Schedule.build(plan)        # None when the plan needs the dataflow executor
    >>> results = sched.run(step, feed_values)

Each node is a prepared call (tfg/executor/calls.py) bound to the integer slots of its inputs
and outputs, so a step is one loop over calls: no per-node dicts, pending counts, or tests of
what the plan already knew. A slot is cleared right after its last consumer ran (by that
consumer's call), so memory follows the live set; fetched slots are kept. Dead values cannot
occur here (nothing produces them).

Two programs of one plan (tfg/executor/program.py): the plain one, a call per kernel node, for
traced steps and GPU partitions; the fast one for the other steps on a CPU: Consts set once,
Identities sharing their input's slot, elementwise chains fused (chains.py).
`TFG_FAST_PROGRAM=0` runs the plain one everywhere.

A plan whose control flow is all in compiled loops gets a schedule too: its root frame, each
loop one call (tfg/executor/outer.py); only for untraced steps (`outer`: traced ones time
every node of every iteration on the dataflow executor). `TFG_OUTER_SCHEDULE=0` leaves such
plans to the dataflow executor, for comparisons.
"""
import os
import time
import threading

from tfg.errors import GraphValidationError
from tfg.executor import conv_chains
from tfg.executor import plan as P
from tfg.executor.calls import single, slot_call
from tfg.executor.executor import node_error
from tfg.executor.outer import outer_view
from tfg.executor.static_guards import SignatureGuards
from tfg.executor.program import build_program, chains_enabled, may_be_ref
from tfg.executor.trace import MemoryMeter
from tfg.kernels.gpu import fusion

FAST_KINDS = frozenset({P.KERNEL, P.FEED, P.NOOP})


class Schedule:
    def __init__(self, plain, fast, device_name, outer=False, guards=None):
        # The plain program: one call per kernel node, for traced steps (every node timed
        # and counted) and devices other than the CPU; `fast`: the same values in fewer
        # calls (program.py), for the other steps.
        self.plain = plain
        self.fast = fast
        self.items = plain.items  # the kernel items, in schedule order
        self.entries = plain.entries  # (fn, ctx, in_slots, out, needs_step, deref, free)
        self.out_slots = plain.out_slots
        self.calls = plain.calls  # (call, ctx) per kernel node, as the graph is written
        self.traced_calls = None  # built on the first traced step
        self.device_name = device_name
        # True: the root frame of a plan with compiled loops (outer.py), for untraced steps
        self.outer = outer
        # the fast program's memory checks decided once per feed signature
        # (static_guards.py), or None
        self.guards = guards
        self._template = None  # the fast program's slots with its constants set
        # the fast program's calls, consecutive convolutions joined (conv_chains.py)
        self._joined = conv_chains.merge(fast.calls)

    @staticmethod
    def build(plan):
        """The schedule of `plan`, or None when it has control flow outside compiled loops,
        Recv or Send nodes."""
        items = plan.items
        if any(it.kind not in FAST_KINDS for it in items):
            return _outer(plan)
        order = _topo(items)
        gpu = plan.device.device_type == "GPU"
        plain = build_program(plan, order, fast=False,
                              fuse_gpu=(lambda r, ins: _fuse(plan, r, ins)) if gpu else None)
        fast = plain if gpu or not chains_enabled() else build_program(plan, order, fast=True)
        guards = None if gpu else SignatureGuards.build(fast, items, order)
        return Schedule(plain, fast, plan.device.name, guards=guards)

    def run(self, step, feed_values, trace=None, memory=None):
        """Run one step; returns the fetched values in fetch order.

        With `trace` (a list), appends (name, op, device, start_ns, dur_ns, thread,
        output bytes) per node;
        with `memory` (a one-element list), stores the peak of live tensor bytes in it.
        """
        prog = self.plain if trace is not None or memory is not None else self.fast
        if prog.consts:
            vals = (self._template or self._constants()).copy()
        else:
            vals = [None] * prog.nslots
        for slot, fi in prog.feed_slots:
            vals[slot] = feed_values[fi]
        if trace is not None or memory is not None:
            self._run_traced(vals, step, trace, memory)
        else:
            calls = self._joined if self.guards is None else self.guards.calls(feed_values)
            ctx = None
            try:
                if calls is None:  # this feed signature's second step (static_guards.py)
                    self.guards.verify_run(vals, step, feed_values)
                else:
                    for call, ctx in calls:  # each a prepared call (calls.py)
                        call(vals, step)
            except Exception as e:  # noqa: BLE001 - name the node that failed
                raise node_error(ctx, e) from e  # (a NodeError passes as it is)
        return [vals[s] for s in prog.fetch_slots]

    def _constants(self):
        """The fast program's slots with each Const's value set: Consts run once, not once
        per step (a Const's kernel returns the same read-only array every time)."""
        prog = self.fast
        vals = [None] * prog.nslots
        for slot, item in prog.consts:
            try:
                vals[slot] = single(item.fn(item.ctx))
            except Exception as e:  # noqa: BLE001 - name the node that failed
                raise node_error(item.ctx, e) from e
        self._template = vals
        return vals

    def _run_traced(self, vals, step, trace, memory):
        """The same calls, timed and with live tensor bytes counted: the calls here leave the
        freeing of slots to this loop, which counts each value out as it goes."""
        if self.traced_calls is None:
            self.traced_calls = [
                (slot_call(item, ins, outs, (), deref, fn), ctx, outs, free or ())
                for item, (fn, ctx, ins, out, _, deref, free), outs
                in zip(self.items, self.entries, self.out_slots)]
        ident = threading.get_ident()
        meter = MemoryMeter()
        clock = time.perf_counter_ns
        ctx = None
        try:
            for call, ctx, outs, free in self.traced_calls:
                start = clock()
                call(vals, step)
                dur = clock() - start
                if trace is not None:  # output bytes for `tfg run --profile`
                    trace.append((ctx.name, ctx.op, self.device_name, start, dur, ident,
                                  tuple(getattr(vals[s], "nbytes", 0) for s in outs)))
                for s in outs:
                    meter.hold(vals[s])
                for i in free:
                    meter.release(vals[i])
                    vals[i] = None
        except Exception as e:  # noqa: BLE001
            raise node_error(ctx, e) from e
        if memory is not None:
            memory[0] = max(memory[0], meter.peak)


def _outer(plan):
    """The schedule of the root frame of a plan whose loops are all compiled (outer.py),
    its loops one call each; None when it does not qualify."""
    if os.environ.get("TFG_OUTER_SCHEDULE", "1") == "0":
        return None
    view = outer_view(plan)
    if view is None:
        return None
    try:
        order = _topo(view.items)
    except GraphValidationError:  # loops waiting for each other: the dataflow executor's
        return None
    prog = build_program(view, order, fast=chains_enabled())
    return Schedule(prog, prog, plan.device.name, outer=True,
                    guards=SignatureGuards.build(prog, view.items, order))


def _fuse(plan, runnable, ins):
    """On a GPU device (unless TFG_GPU_FUSE=0): fuse elementwise groups (tfg/kernels/gpu/
    fusion.py). Returns {item id: fused kernel for a group's root, None for its other
    members} and rewires each root's entry of `ins` to the group's external inputs."""
    if plan.device.device_type != "GPU" or not fusion.enabled():
        return {}
    fetched = {it.id for it in runnable if it.fetch_ports}
    by_id = {it.id: it for it in plan.items}
    out = {}
    for group in fusion.fuse_groups(runnable, ins, fetched):
        fn, external = fusion.fused_kernel(group, ins, plan.device.xp)
        if any(may_be_ref(by_id[i], port) for i, port in external):
            continue  # a Ref input is read by the executor first: leave the group unfused
        for it in group[:-1]:
            out[it.id] = None
        out[group[-1].id] = fn
        ins[group[-1].id] = list(external)
    return out


def _topo(items):
    """Items in an order where every producer precedes its consumers (file order kept)."""
    indeg = [0] * len(items)
    for it in items:
        for dst, _, _ in it.out_edges:
            indeg[dst] += 1
    order = []
    stack = [it.id for it in reversed(items) if indeg[it.id] == 0]
    while stack:
        iid = stack.pop()
        it = items[iid]
        order.append(it)
        for dst, _, _ in reversed(it.out_edges):
            indeg[dst] -= 1
            if indeg[dst] == 0:
                stack.append(dst)
    if len(order) != len(items):
        stuck = sorted(it.name for it in items if indeg[it.id] > 0)
        raise GraphValidationError(f"the graph has a cycle among nodes {stuck[:5]}")
    return order
