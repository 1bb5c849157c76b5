"""The fast path for partitions without control flow or Recv: a schedule computed once.

    >>> sched = Schedule.build(plan)        # None when the plan needs the dataflow executor
    >>> results = sched.run(step, feed_values)

Each entry binds a kernel, its context and the integer slots of its inputs and outputs, so a
step is one loop over tuples: no per-node dicts, pending counts or Python objects beyond the
argument list. A slot is cleared right after its last consumer ran, so memory follows the live
set; fetched slots are kept. Dead values cannot occur here (nothing produces them).
"""
import time
import threading

from tfg.executor import plan as P
from tfg.executor.inplace import inplace_kernel
from tfg.executor.executor import node_error
from tfg.kernels.resources import Ref

FAST_KINDS = frozenset({P.KERNEL, P.FEED, P.NOOP})


class Schedule:
    def __init__(self, entries, nslots, feed_slots, fetch_slots, device_name):
        self.entries = entries  # (fn, ctx, in_slots, out, needs_step, deref, free)
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
        entries = []
        for pos, it in enumerate(runnable):
            in_slots = tuple(slot_of[src] for src in ins[it.id])
            fn = it.fn
            for idx, src in enumerate(ins[it.id]):
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
        feed_slots = [(slot_of[(it.id, 0)], it.feed_index) for it in items if it.kind == P.FEED]
        return Schedule(entries, nslots, feed_slots, fetch_slots, plan.device.name)

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
                for fn, ctx, ins, out, st, deref, free in self.entries:
                    if deref is None and not st:
                        # Unpacked by arity: a list per call costs as much as a tiny kernel.
                        n = len(ins)
                        if n == 1:
                            r = fn(ctx, vals[ins[0]])
                        elif n == 2:
                            r = fn(ctx, vals[ins[0]], vals[ins[1]])
                        elif n == 0:
                            r = fn(ctx)
                        else:
                            r = fn(ctx, *[vals[i] for i in ins])
                    elif deref is None:
                        r = fn(ctx, step, *[vals[i] for i in ins])
                    else:
                        args = [vals[i] for i in ins]
                        for p in deref:
                            a = args[p]
                            if type(a) is Ref:
                                args[p] = a.get()
                        r = fn(ctx, step, *args) if st else fn(ctx, *args)
                    if type(out) is int:
                        if type(r) is tuple or type(r) is list:
                            r = _single(r)
                        vals[out] = r
                    elif out is not None:
                        _store_many(vals, out, r)
                    if free is not None:
                        for i in free:
                            vals[i] = None
            except Exception as e:  # noqa: BLE001 - name the node that failed
                raise node_error(ctx, e) from e
        return [vals[s] for s in self.fetch_slots]

    def _run_traced(self, vals, step, trace, memory):
        ident = threading.get_ident()
        live = peak = 0
        held = {}  # slot -> nbytes
        ctx = None
        try:
            for fn, ctx, ins, out, st, deref, free in self.entries:
                args = [vals[i] for i in ins]
                for p in deref or ():
                    if type(args[p]) is Ref:
                        args[p] = args[p].get()
                start = time.perf_counter_ns()
                r = fn(ctx, step, *args) if st else fn(ctx, *args)
                dur = time.perf_counter_ns() - start
                if type(out) is int:
                    vals[out] = _single(r) if type(r) in (tuple, list) else r
                    outs = (out,)
                elif out is not None:
                    _store_many(vals, out, r)
                    outs = out
                else:
                    outs = ()
                for s in outs:
                    held[s] = getattr(vals[s], "nbytes", 0)
                    live += held[s]
                if trace is not None:  # output bytes for `tfg run --profile`
                    trace.append((ctx.name, ctx.op, self.device_name, start, dur, ident,
                                  tuple(held[s] for s in outs)))
                peak = max(peak, live)
                for i in free or ():
                    vals[i] = None
                    live -= held.pop(i, 0)
        except Exception as e:  # noqa: BLE001
            raise node_error(ctx, e) from e
        if memory is not None:
            memory[0] = max(memory[0], peak)


def _single(r):
    if len(r) != 1:
        raise ValueError(f"kernel returned {len(r)} outputs, the op has 1")
    return r[0]


def _store_many(vals, outs, r):
    if type(r) is not tuple and type(r) is not list:
        raise ValueError(f"kernel returned one value, the op has {len(outs)} outputs")
    if len(r) != len(outs):
        raise ValueError(f"kernel returned {len(r)} outputs, the op has {len(outs)}")
    for s, v in zip(outs, r):
        vals[s] = v


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
        from tfg.errors import GraphValidationError
        stuck = sorted(it.name for it in items if indeg[it.id] > 0)
        raise GraphValidationError(f"the graph has a cycle among nodes {stuck[:5]}")
    return order
