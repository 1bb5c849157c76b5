"""The slots and calls of a straight-line schedule (tfg/executor/fastpath.py), in two forms.

    >>> prog = build_program(plan, order, fast=True)
    >>> prog.calls        # [(call(vals, step), ctx)], prog.consts: [(slot, item)]

`fast=False`, the plain form: one prepared call per kernel node, as the graph is written
(traced steps use it: `tfg run --profile` times and counts every node). `fast=True`, what
untraced steps on a CPU run; the same values, fewer calls:

    before: Const w; x -> Identity -> Mul(., w) -> AddV2(., b) -> Relu -> y     5 calls
    after:  w's slot filled once per step from a template (no call); the Identity's output
            is its input's slot (no call); Mul, AddV2, Relu one call (chains.py)  1 call

Slots are integers into one list per step; a slot is cleared by the call that reads it for
the last time (fetched slots and constants are kept), and a call may write over an input that
no other reader, fetch or later step can see (inplace.py, chains.py).
"""
import os

from tfg.executor import chains
from tfg.executor import plan as P
from tfg.executor.calls import slot_call
from tfg.executor.inplace import fresh_producer, inplace_kernel
from tfg.kernels import basic


class Program:
    __slots__ = ("items", "entries", "out_slots", "calls", "nslots", "feed_slots",
                 "fetch_slots", "consts", "sources")

    def __init__(self, items, entries, out_slots, nslots, feed_slots, fetch_slots, consts,
                 sources=None):
        self.items = items  # the kernel items that run, in schedule order
        self.entries = entries  # (fn, ctx, in_slots, out, needs_step, deref, free)
        self.out_slots = out_slots  # per entry: the slots of its outputs
        # Per entry: its prepared call, which also frees the slots read for the last time.
        self.calls = [(slot_call(item, ins, outs, free or (), deref, fn), ctx)
                      for item, (fn, ctx, ins, _, _, deref, free), outs
                      in zip(items, entries, out_slots)]
        self.nslots = nslots
        self.feed_slots = feed_slots  # (slot, feed index)
        self.fetch_slots = fetch_slots  # slot per fetch
        self.consts = consts  # (slot, Const item): values set before the calls run
        # per entry: the (item id, port) each input slot holds (static_guards.py reads it)
        self.sources = sources


def build_program(plan, order, fast, fuse_gpu=None):
    """The program of `plan`'s kernel items in `order` (topological). `fuse_gpu(runnable,
    ins)`: the GPU's elementwise fusion (rewires `ins`, returns {id: fused fn or None})."""
    items = plan.items
    ins = {it.id: [None] * it.num_inputs for it in items}
    control_out = set()  # items some node waits on by control edge
    for it in items:
        for dst, port, idx in it.out_edges:
            if port >= 0:
                ins[dst][idx] = (it.id, port)
            else:
                control_out.add(it.id)
    fetches = [None] * len(plan.fetches)
    for it in items:
        for port, fi in it.fetch_ports:
            fetches[fi] = (it.id, port)
    kernels = [it for it in order if it.kind == P.KERNEL]
    alias, consts = {}, []  # (id, port) -> the output it forwards; hoisted Const items
    if fast:
        for it in kernels:  # in order: an Identity of an Identity resolves to the source
            if _forwards(it):
                for port in range(it.num_outputs):
                    src = ins[it.id][port]
                    alias[(it.id, port)] = alias.get(src, src)
            elif _unwrapped(it.fn) is basic.const and not it.num_inputs:
                consts.append(it)
        hoisted = {it.id for it in consts}
        kernels = [it for it in kernels if (it.id, 0) not in alias and it.id not in hoisted]
        for it in kernels:
            ins[it.id] = [alias.get(s, s) for s in ins[it.id]]
        fetches = [alias.get(s, s) for s in fetches]
    slot_of = {}  # (item id, port) -> slot
    for it in order:
        for port in range(it.num_outputs):
            if (it.id, port) not in alias:
                slot_of[(it.id, port)] = len(slot_of)
    nslots = len(slot_of)
    for key, src in alias.items():
        slot_of[key] = slot_of[src]
    fetch_slots = [slot_of[s] for s in fetches]
    const_slots = {slot_of[(it.id, 0)] for it in consts}
    keep = set(fetch_slots) | const_slots
    fused = fuse_gpu(kernels, ins) if fuse_gpu else {}
    groups = {}
    if fast:
        groups = chains.find(kernels, ins, set(fetches), control_out)
        for root, chain in groups.items():
            for it in chain.members[:-1]:
                fused[it.id] = None
            ins[root] = chains.external_inputs(chain, ins)
    runnable = [it for it in kernels if it.id not in fused or fused[it.id]
                or it.id in groups]
    last_use, uses = {}, {}  # slot -> position of its last reader, number of input edges
    for pos, it in enumerate(runnable):
        for src in ins[it.id]:
            last_use[slot_of[src]] = pos
            uses[slot_of[src]] = uses.get(slot_of[src], 0) + 1
    frees = [[] for _ in runnable]
    for slot, pos in last_use.items():
        if slot not in keep:
            frees[pos].append(slot)
    entries, out_slots, sources = [], [], []
    for pos, it in enumerate(runnable):
        srcs = ins[it.id]
        sources.append(tuple(srcs))
        in_slots = tuple(slot_of[src] for src in srcs)

        def writable(src):
            # Overwriting an input is safe only when this is its one reader, it is not
            # fetched, and its producer's kernel returns a fresh array (inplace.py).
            slot = slot_of[src]
            return (src[1] == 0 and uses[slot] == 1 and slot not in keep
                    and fresh_producer(items[src[0]]))
        chain = groups.get(it.id)
        if chain is not None and (len(chain.members) > 1 or writable(srcs[0])
                                  or (len(srcs) > 1 and writable(srcs[1]))):
            fn = chains.fused_kernel(chain, [writable(s) for s in srcs],
                                     [slot_of[s] in const_slots for s in srcs])
        else:
            fn = fused.get(it.id) or it.fn
            for idx, src in enumerate(() if it.id in fused else srcs):
                alt = inplace_kernel(it, items[src[0]], idx) if writable(src) else None
                if alt is not None:
                    fn = alt
                    break
        outs = tuple(slot_of[(it.id, p)] for p in range(it.num_outputs))
        free = list(frees[pos])
        free += [s for s in outs if s not in last_use and s not in keep]
        deref = tuple(i for i, src in enumerate(srcs)
                      if i not in it.ref_inputs and may_be_ref(items[src[0]], src[1]))
        out = outs[0] if len(outs) == 1 else (outs if outs else None)
        entries.append((fn, it.ctx, in_slots, out, it.needs_step, deref or None,
                        tuple(free) or None))
        out_slots.append(outs)
    feed_slots = [(slot_of[(it.id, 0)], it.feed_index) for it in items if it.kind == P.FEED]
    return Program(runnable, entries, out_slots, nslots, feed_slots,
                   fetch_slots, [(slot_of[(it.id, 0)], it) for it in consts], sources)


def chains_enabled():
    """False when TFG_FAST_PROGRAM=0: every step runs the plain program (for comparisons)."""
    return os.environ.get("TFG_FAST_PROGRAM", "1") != "0"


def _forwards(it):
    """An Identity (StopGradient, IdentityN, ...) whose outputs may share its inputs' slots:
    the kernel returns its inputs unchanged and none of them is a Ref it must read first."""
    fn = _unwrapped(it.fn)
    return ((fn is basic.identity or fn is basic.identity_n) and not it.deref
            and not it.ref_inputs and not it.needs_step and it.num_outputs == it.num_inputs)


def may_be_ref(item, port):
    if item.kind != P.KERNEL:
        return False
    dtypes = item.ctx.output_dtypes
    return port >= len(dtypes) or dtypes[port].is_ref


def _unwrapped(fn):
    return getattr(fn, "__wrapped__", fn)
