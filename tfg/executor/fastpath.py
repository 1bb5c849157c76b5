"""The fast path for partitions without control flow or Recv: a schedule computed once.

    >>> sched = Schedule.build(plan)        # None when the plan needs the dataflow executor
    >>> results = sched.run(step, feed_values)

Each node is a prepared call (tfg/executor/calls.py) bound to the integer slots of its inputs
and outputs, so a step is one loop over calls: no per-node dicts, pending counts, or tests of
what the plan already knew. A slot is cleared right after its last consumer ran (by that
consumer's call), so memory follows the live set; fetched slots are kept. Dead values cannot
occur here (nothing produces them).
"""
import time
import threading

from tfg.errors import GraphValidationError
from tfg.executor import plan as P
from tfg.executor.calls import slot_call
from tfg.executor.executor import node_error
from tfg.executor.inplace import inplace_kernel
from tfg.executor.trace import MemoryMeter
from tfg.kernels.gpu import fusion

FAST_KINDS = frozenset({P.KERNEL, P.FEED, P.NOOP})


class Schedule:
    def __init__(self, items, entries, out_slots, nslots, feed_slots, fetch_slots,
                 device_name):
        self.items = items  # the kernel items, in schedule order
        self.entries = entries  # (fn, ctx, in_slots, out, needs_step, deref, free)
        self.out_slots = out_slots  # per entry: the slots of its outputs
        # Per entry: its prepared call, which also frees the slots read for the last time.
        self.calls = [(slot_call(item, ins, outs, free or (), deref, fn), ctx)
                      for item, (fn, ctx, ins, _, _, deref, free), outs
                      in zip(items, entries, out_slots)]
        self.traced_calls = None  # built on the first traced step
        self.nslots = nslots
        self.feed_slots = feed_slots  # (slot, feed index)
        self.fetch_slots = fetch_slots  # slot per fetch
        self.device_name = device_name

    @staticmethod
    def build(plan):
        """The schedule of `plan`, or None when it has control flow, Recv or Send nodes."""
        items = plan.items
        if any(it.kind not in FAST_KINDS for it in items):
            return None
        order = _topo(items)
        slot_of = {}  # (item id, port) -> slot
        for it in order:
            for port in range(it.num_outputs):
                slot_of[(it.id, port)] = len(slot_of)
        nslots = len(slot_of)
        # Inputs of each item, by index, from the edge lists.
        ins = {it.id: [None] * it.num_inputs for it in items}
        for it in items:
            for dst, port, idx in it.out_edges:
                if port >= 0:
                    ins[dst][idx] = (it.id, port)
        fetch_slots = [None] * len(plan.fetches)
        for it in items:
            for port, fi in it.fetch_ports:
                fetch_slots[fi] = slot_of[(it.id, port)]
        keep = set(fetch_slots)
        last_use = {}
        runnable = [it for it in order if it.kind == P.KERNEL]
        fused_fn = _fuse(plan, runnable, ins)  # root id -> fused kernel; ins rewired
        runnable = [it for it in runnable if it.id not in fused_fn or fused_fn[it.id]]
        for pos, it in enumerate(runnable):
            for src in ins[it.id]:
                last_use[slot_of[src]] = pos
        frees = [[] for _ in runnable]
        for slot, pos in last_use.items():
            if slot not in keep:
                frees[pos].append(slot)
        uses = {}  # slot -> number of input edges reading it
        for it in runnable:
            for src in ins[it.id]:
                uses[slot_of[src]] = uses.get(slot_of[src], 0) + 1
        entries, out_slots = [], []
        for pos, it in enumerate(runnable):
            in_slots = tuple(slot_of[src] for src in ins[it.id])
            fn = fused_fn.get(it.id) or it.fn
            for idx, src in enumerate(() if it.id in fused_fn else ins[it.id]):
                # Overwriting an input is safe only when this is its one reader, it is not
                # fetched, and its producer's kernel returns a fresh array (inplace.py).
                slot = slot_of[src]
                if (src[1] == 0 and uses[slot] == 1 and slot not in keep
                        and items[src[0]].kind == P.KERNEL):
                    alt = inplace_kernel(it, items[src[0]], idx)
                    if alt is not None:
                        fn = alt
                        break
            outs = tuple(slot_of[(it.id, p)] for p in range(it.num_outputs))
            free = list(frees[pos])
            free += [s for s in outs if s not in last_use and s not in keep]
            deref = tuple(i for i, src in enumerate(ins[it.id])
                          if i not in it.ref_inputs and _may_be_ref(items[src[0]], src[1]))
            out = outs[0] if len(outs) == 1 else (outs if outs else None)
            entries.append((fn, it.ctx, in_slots, out, it.needs_step, deref or None,
                            tuple(free) or None))
            out_slots.append(outs)
        feed_slots = [(slot_of[(it.id, 0)], it.feed_index) for it in items if it.kind == P.FEED]
        return Schedule(runnable, entries, out_slots, nslots, feed_slots, fetch_slots,
                        plan.device.name)

    def run(self, step, feed_values, trace=None, memory=None):
        """Run one step; returns the fetched values in fetch order.

        With `trace` (a list), appends (name, op, device, start_ns, dur_ns, thread,
        output bytes) per node;
        with `memory` (a one-element list), stores the peak of live tensor bytes in it.
        """
        vals = [None] * self.nslots
        for slot, fi in self.feed_slots:
            vals[slot] = feed_values[fi]
        if trace is not None or memory is not None:
            self._run_traced(vals, step, trace, memory)
        else:
            ctx = None
            try:
                for call, ctx in self.calls:  # each a prepared call (tfg/executor/calls.py)
                    call(vals, step)
            except Exception as e:  # noqa: BLE001 - name the node that failed
                raise node_error(ctx, e) from e
        return [vals[s] for s in self.fetch_slots]

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
        if any(_may_be_ref(by_id[i], port) for i, port in external):
            continue  # a Ref input is read by the executor first: leave the group unfused
        for it in group[:-1]:
            out[it.id] = None
        out[group[-1].id] = fn
        ins[group[-1].id] = list(external)
    return out


def _may_be_ref(item, port):
    if item.kind != P.KERNEL:
        return False
    dtypes = item.ctx.output_dtypes
    return port >= len(dtypes) or dtypes[port].is_ref


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
