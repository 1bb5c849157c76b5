"""Two independent compiled loops run in lockstep, their fused cells as one batched call an
iteration (tfg/executor/batched_chain.py): the forward and backward loops of a Keras
Bidirectional layer.

    >>> view = outer_view(plan)            # tfg/executor/outer.py pairs them
    >>> [it.op for it in view.items if it.op == "_CompiledLoopPair"]
    ['_CompiledLoopPair']                  # a BiLSTM's two directions, one call

Before: the forward loop's 20 iterations, then the backward loop's, each iteration one
fused chain of ~20 numpy calls on [8, 32] states. After: iteration t of both, then t + 1:
each program's own calls (counters, predicate, list reads and writes) in its own order, its
chain's steps once on the two chains' operands stacked ([2, 8, 32] @ [2, 32, 128] as one
np.matmul), values bit for bit the chains' own; the two loops' equal counters and
predicates computed once (tfg/executor/pair_scalars.py).

Interleaving two loops is one of the orders the dataflow executor may take when neither
reads the other: the outer schedule pairs two loop items only where no path joins them,
and only programs without stateful kernels or Ref reads whose chains are the same chain
(`pair_runner`). The run is exact or it is not used: where the two predicates differ in an
iteration (two trip counts) the pair is dropped for good and both loops run again one after
the other from their Enter values (the kernels are stateless; nothing wrote into an Enter
value); any error does the same, so the error raised, and the node it names, are the
sequential run's. `TFG_LOOP_PAIR=0` turns this off (for A/B measurements).
"""
import os

import numpy as np

from tfg.executor import pair_scalars as PS
from tfg.executor import plan as P
from tfg.executor.batched_chain import batched
from tfg.executor.devices import to_host
from tfg.graphdef.names import CONTROL
from tfg.kernels.resources import Ref
from tfg.schemas.ops import get_op, has_op

PAIR_OP = "_CompiledLoopPair"


class _NoGroup:
    error = None


_NO_GROUP = _NoGroup()


class _Mismatch(Exception):
    """The two loops' predicates differ in one iteration (or their chain is no longer in
    their lists): the pair runs its loops one after the other from then on."""


def enabled():
    return os.environ.get("TFG_LOOP_PAIR", "1") != "0"


def _chain_of(program):
    """The one fused chain of the program's body (a call with `io`), or None."""
    chains = [c for c, _ in program.body_rest if hasattr(c, "io")]
    if len(chains) != 1 or not all(any(c is chains[0] for c, _ in lst)
                                   for lst in (program.body, program.body_fixed)):
        return None
    return chains[0]


def _pure(program):
    """Whether every call of the program is of a stateless kernel without Ref reads (so the
    loop may run again from its Enter values) or of control flow."""
    if program.index_read or program._deref:
        return False
    for lst in (program.hoisted, program.header, program.body, program.tail):
        for _, it in lst:
            if it.kind == P.KERNEL and (
                    it.deref is not None or it.blocking or not has_op(it.op)
                    or get_op(it.op).has_effects):
                return False
    return True


def pair_runner(pa, pb):
    """run(enter values of A, of B, step) -> (exits of A, exits of B) for two loop programs
    that may run in lockstep, or None where they may not (module docstring)."""
    if not enabled() or pa is pb or not _pure(pa) or not _pure(pb):
        return None
    ca, cb = _chain_of(pa), _chain_of(pb)
    if ca is None or cb is None:
        return None
    both = batched(ca, cb)
    if both is None:
        return None
    plans = {}  # ids of the four lists -> (the lists, header, before the chain, after it)

    def plan(header_a, header_b, body_a, body_b):
        """The lockstep's three sequences of pair_scalars.merged for these lists."""
        key = (id(header_a), id(header_b), id(body_a), id(body_b))
        p = plans.get(key)
        if p is None or any(x is not y for x, y in zip(p[0], (header_a, header_b, body_a,
                                                             body_b))):
            before_a, after_a = _cut(body_a, ca)
            before_b, after_b = _cut(body_b, cb)
            p = plans[key] = ((header_a, header_b, body_a, body_b), (
                PS.merged(header_a, header_b, pa, pb), PS.merged(before_a, before_b, pa, pb),
                PS.merged(after_a, after_b, pa, pb)))
            both.rows.clear()
            both.rows.update(_projected_rows(both.external, before_a, before_b))
        return p[1]
    state = {"off": False}

    def run(ea, eb, step):
        if not state["off"]:
            try:
                return _lockstep(pa, pb, ca, cb, both, plan, ea, eb, step)
            except _Mismatch:
                state["off"] = True
            except Exception:  # noqa: BLE001 - the sequential run below raises it, named
                pass
        return (pa.run(ea, step, _NO_GROUP), pb.run(eb, step, _NO_GROUP))
    run.state = state
    return run


def _projected_rows(external, before_a, before_b):
    """{external index: (state, index slots of A's projected call, of B's)} for the chain
    operands that are the rows of the two loops' input projections, set by calls that run
    before the chain (batched_chain._row stacks them as a view)."""
    def outs(lst):
        return {c.row_of[2]: c.row_of[:2] for c, _ in lst if hasattr(c, "row_of")}
    oa, ob = outs(before_a), outs(before_b)
    return {k: oa[sa] + ob[sb] for k, sa, sb, role in external
            if role == "float" and sa in oa and sb in ob}


def _cut(lst, chain):
    """(the calls of `lst` before `chain`, those after it)."""
    k = next((n for n, (call, _) in enumerate(lst) if call is chain), None)
    if k is None:  # (the lists were rewritten since: a profiler's wrappers)
        raise _Mismatch
    return lst[:k], lst[k + 1:]


def _each(calls, va, vb, step):
    """Run a plan's (A's call, B's call) pairs in order; a shared call (B's None) takes
    both loops' slots (pair_scalars.py)."""
    for fa, fb in calls:
        if fb is None:
            fa(va, vb, step)
        else:
            fa(va, step)
            fb(vb, step)


def _pred(v):
    if type(v) is not np.bool_:
        if type(v) is Ref:
            v = v.get()
        if not isinstance(v, (np.ndarray, np.generic, bool)):
            v = to_host(v)
    return bool(v)


def _merge(p, vals):
    outs, nexts = p._outs, p._nexts
    if len(outs) == 1:
        vals[outs[0]] = vals[nexts[0]]
    elif outs:
        for s, v in zip(outs, [vals[n] for n in nexts]):
            vals[s] = v


def _lockstep(pa, pb, ca, cb, both, plan, ea, eb, step):
    va, hoisted_a, header_a, body_a, fixed_a = pa.start(ea)
    vb, hoisted_b, header_b, body_b, fixed_b = pb.start(eb)
    for call, _ in hoisted_a:
        call(va, step)
    for call, _ in hoisted_b:
        call(vb, step)
    both.kept.clear()  # (a fed array may have been written into since the last run)
    last = {}
    first = True
    steps = plan(header_a, header_b, body_a, body_b)
    while True:
        header, before, after = steps
        _each(header, va, vb, step)
        qa, qb = _pred(va[pa.pred_slot]), _pred(vb[pb.pred_slot])
        if qa != qb:
            raise _Mismatch
        if not qa:
            break
        _each(before, va, vb, step)
        if not both(va, vb, last):
            last.clear()
            ca(va, step)
            cb(vb, step)
        _each(after, va, vb, step)
        _merge(pa, va)
        _merge(pb, vb)
        if first:
            first = False
            header_a, body_a = pa.header_rest, pa.body_rest
            header_b, body_b = pb.header_rest, pb.body_rest
            steps = plan(header_a, header_b, body_a, body_b)
            if fixed_a is None and pa.fixed_slots:
                pa.fixed = [(s, va[s]) for s in pa.fixed_slots]
            if fixed_b is None and pb.fixed_slots:
                pb.fixed = [(s, vb[s]) for s in pb.fixed_slots]
    for call, _ in pa.tail:
        call(va, step)
    for call, _ in pb.tail:
        call(vb, step)
    return ([(e, va[s]) for e, s in pa.exits], [(e, vb[s]) for e, s in pb.exits])


def pair_loops(items, loops, pair_item):
    """Merge pairs of loop items of the outer view `items` (list indexed by id; `loops`: the
    loop items in order) that pair_runner accepts and no path joins: the first becomes
    pair_item(first, second, runner) (inputs A's then B's, outputs likewise), the second a
    NoOp without edges. Returns the loop items left (merged ones included)."""
    if not enabled() or len(loops) < 2:
        return loops
    left = list(loops)
    out = []
    while left:
        a = left.pop(0)
        for b in left:
            runner = pair_runner(a.fn.program, b.fn.program)
            if runner is None or _joined(items, a.id, b.id) or _joined(items, b.id, a.id):
                continue
            left.remove(b)
            a = _merge_items(items, a, b, pair_item(a, b, runner))
            break
        out.append(a)
    return out


def _joined(items, src, dst):
    """Whether a path of out_edges leads from item `src` to item `dst`."""
    seen, stack = set(), [src]
    while stack:
        i = stack.pop()
        for d, _, _ in items[i].out_edges:
            if d == dst:
                return True
            if d not in seen:
                seen.add(d)
                stack.append(d)
    return False


def _merge_items(items, a, b, merged):
    na, outs_a = a.num_inputs, a.num_outputs
    for it in items:
        if any(d == b.id for d, _, _ in it.out_edges):
            it.out_edges = list(dict.fromkeys(
                (a.id, port, idx if idx == CONTROL else idx + na) if d == b.id
                else (d, port, idx) for d, port, idx in it.out_edges))
    edges = list(a.out_edges)
    edges.extend((d, port + outs_a if port >= 0 else port, idx) for d, port, idx in b.out_edges)
    merged.out_edges = list(dict.fromkeys(edges))
    merged.fetch_ports = tuple(a.fetch_ports) + tuple(
        (k + outs_a, fi) for k, fi in b.fetch_ports)
    noop = P.Item(b.id, b.name, "NoOp", P.NOOP)
    noop.num_inputs = noop.num_outputs = 0
    noop.out_edges = []
    noop.fetch_ports = ()
    items[a.id] = merged
    items[b.id] = noop
    return merged
