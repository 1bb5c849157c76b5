"""Conds inside a compiled loop body (tfg/executor/loops.py) as blocks: where every node's
condition is known statically (loop_graph.sides: the cond branches it is after), a node runs
exactly when the predicates of its branches have their branch's value, so the body needs no
dead values at all. A cond's Switch then forwards its data (its outputs share the data's
slot), its Merge picks the input of the branch its predicate took, and the nodes of a branch
run as one block behind one test of the predicate.

    Before (a cond `even ? acc * x : acc + tanh(acc)` in the body, 11 calls an iteration):
      Switch, Switch, Switch, guarded Tanh, guarded AddV2, guarded Mul, Merge, ...
    After (2 calls):
      block(pred, true: [Mul], false: [Tanh, AddV2]), Merge by pred

    >>> as_blocks(program, order, cond, sources, loop_switches, slot, aliased)
    >>> program.body            # [(call, item)]: a block's item is its cond's first Switch

Why this is exact: a node's condition is the union of its inputs' (a Switch's output adds
its (predicate, branch)), a Merge of both branches of one cond drops that literal, and a
node is live iff all its inputs are; so by induction a node is live iff each (predicate,
branch) of its condition holds, and every predicate of a condition is itself live when the
literals before it in the path hold (its own condition is part of the Switch's). Nothing
reads a dead node's slot then: its readers are dead too, or a Merge that reads the other
branch. A frame with a node of unknown condition (a Merge of inputs not of one cond) keeps
the dead values and guards (loop_calls.guarded): `static_conds` says which applies.
"""
import numpy as np

from tfg.executor import loop_graph as G
from tfg.executor import plan as P
from tfg.executor.devices import to_host
from tfg.executor.loop_calls import INDEX, LoopNodeError
from tfg.kernels.resources import Ref
from tfg.schemas.ops import get_op, has_op


def static_conds(order, cond):
    """Whether every node of the frame has a condition known statically (none is None)."""
    return all(cond[it.id] is not None for it in order)


def edge_cond(src, port, sources, cond, loop_switches):
    """The condition of the value on (src, port): the node's, plus the branch of a cond's
    Switch output."""
    c = cond.get(src.id, G.EMPTY)
    if src.kind == P.SWITCH and src.id not in loop_switches and port >= 0:
        return c | {(switch_key(src, sources), port)}
    return c


def switch_key(switch, sources):
    """A cond Switch's predicate, as (source item id, port): the key of its literals."""
    return next((s.id, p) for s, p, i in sources[switch.id] if i == 1 and p >= 0)


def path(c, position):
    """A condition as an ordered path of literals: each predicate after the literals its
    own value depends on (the position of its source in the iteration's order)."""
    return tuple(sorted(c, key=lambda lit: (position.get(lit[0][0], -1), lit[0], lit[1])))


def _truth(p):
    if type(p) is Ref:
        p = p.get()
    if not isinstance(p, (np.ndarray, np.generic, bool)):
        p = to_host(p)  # a predicate computed on a GPU
    return bool(p)


def static_merge(ins, outs, pick, deref):
    """A cond's Merge: `pick` None when its inputs are live together (the first one is
    forwarded), else (predicate slot, the branch of input 0): the input of the branch
    taken. Two inputs in that case."""
    out, idx = outs
    if pick is None:
        s0 = ins[0]

        def first(vals, step):
            v = vals[s0]
            vals[out] = v.get() if deref and type(v) is Ref else v
            vals[idx] = INDEX[0]
        return first
    pslot, branch0 = pick
    s0, s1 = ins
    i0, i1 = INDEX[0], INDEX[1]
    bool_ = np.bool_

    def by_pred(vals, step):
        p = vals[pslot]
        if type(p) is not bool_:
            p = _truth(p)
        if bool(p) == branch0:
            v, vals[idx] = vals[s0], i0
        else:
            v, vals[idx] = vals[s1], i1
        vals[out] = v.get() if deref and type(v) is Ref else v
    return by_pred


def block_call(pslot, on_true, on_false):
    """The calls of a cond's branches: `on_true` when the predicate in `pslot` is true,
    else `on_false` (either may be empty)."""
    on_true, on_false = tuple(on_true), tuple(on_false)
    bool_ = np.bool_

    def block(vals, step):
        p = vals[pslot]
        if type(p) is not bool_:
            p = _truth(p)
        item = None
        try:
            for call, item in (on_true if p else on_false):
                call(vals, step)
        except LoopNodeError:
            raise  # a nested block's node, named already
        except Exception as e:  # noqa: BLE001 - the executor names the node
            raise LoopNodeError(item, e) from e
    block.calls = on_true + on_false
    block.pslot, block.on_true, block.on_false = pslot, on_true, on_false
    return block


def _paired(calls):
    """Adjacent blocks of one predicate's two branches as one block (one test of it)."""
    out = []
    for call, it in calls:
        if out and hasattr(call, "pslot") and getattr(out[-1][0], "pslot", None) == call.pslot:
            # (adjacent: running both in one is running them one after the other)
            prev = out[-1][0]
            out[-1] = (block_call(call.pslot, prev.on_true + call.on_true,
                                  prev.on_false + call.on_false), out[-1][1])
            continue
        out.append((call, it))
    return out


def grouped(calls, path_of, sources, aliased, stateful, same=None):
    """`calls` reordered so that the calls of one branch run together where dependencies
    allow (fewer, longer blocks): the next call is the first ready one of the current
    branch itself, else of a branch inside it, else the first ready one of the branch that
    shares the most with it. Stateful kernels keep their order among themselves.
    `aliased`: ids of the nodes without a call, whose readers read their inputs; `same`:
    {id: the nodes whose outputs are its outputs} (common subexpressions, read in its slots)."""
    n = len(calls)
    if n > 2000:
        return calls
    index = {}
    for i, (call, it) in enumerate(calls):
        for m in getattr(call, "members", (it,)):
            index[m.id] = i
    for first, dups in (same or {}).items():
        if first in index:
            for d in dups:
                index[d.id] = index[first]
    memo = {}

    def deps(iid):
        if iid in memo:
            return memo[iid]
        memo[iid] = got = set()
        for src, _, _ in sources[iid]:
            if src.id in index:
                got.add(index[src.id])
            elif src.id in aliased:
                got |= deps(src.id)
        return got

    succ = [[] for _ in calls]
    indeg = [0] * n
    last_stateful = None
    for i, (call, it) in enumerate(calls):
        need = set()
        for m in getattr(call, "members", (it,)):
            need |= deps(m.id)
        if it.id in stateful:
            if last_stateful is not None:
                need.add(last_stateful)
            last_stateful = i
        need.discard(i)
        for j in need:
            succ[j].append(i)
        indeg[i] = len(need)
    paths = [path_of.get(it.id, ()) for _, it in calls]
    ready = [i for i in range(n) if indeg[i] == 0]
    out, current = [], ()

    def rank(i):
        p = paths[i]
        if p == current:
            return 0, 0, i
        if p[:len(current)] == current:
            return 1, 0, i
        common = 0
        while common < min(len(p), len(current)) and p[common] == current[common]:
            common += 1
        return 2, -common, i

    while ready:
        pick = min(ready, key=rank)
        ready.remove(pick)
        out.append(calls[pick])
        current = paths[pick]
        for j in succ[pick]:
            indeg[j] -= 1
            if indeg[j] == 0:
                ready.append(j)
    return out if len(out) == n else calls


def blocks(calls, path_of, pred_slot, head_of):
    """[(call, item)] in order, with the runs of calls under one literal as one block each
    (nested by path). `path_of`: item id -> path (absent: no condition); `pred_slot`: key ->
    slot of the predicate; `head_of`: key -> a Switch of it (the block's item, which errors
    of the predicate name)."""
    top, open_ = [], []  # open_: [(literal, its calls)], outermost first

    def close():
        lit, body = open_.pop()
        key, branch = lit
        body = _paired(body)
        call = (block_call(pred_slot[key], body, ()) if branch
                else block_call(pred_slot[key], (), body))
        (open_[-1][1] if open_ else top).append((call, head_of[key]))

    for call, it in calls:
        p = path_of.get(it.id, ())
        n = 0
        while n < len(open_) and n < len(p) and open_[n][0] == p[n]:
            n += 1
        while len(open_) > n:
            close()
        for lit in p[n:]:
            open_.append((lit, []))
        (open_[-1][1] if open_ else top).append((call, it))
    while open_:
        close()
    return _paired(top)


def cond_merge_call(it, ins, outs, sources, cond, loop_switches, slot, deref):
    """The call of a cond's Merge `it` in a frame of static conditions: the branch its
    predicate took (static_merge)."""
    conds = [edge_cond(src, port, sources, cond, loop_switches)
             for src, port in G.data_sources(it, sources)]
    pick = None
    if len(set(conds)) > 1:  # two inputs, one literal apart (loop_graph._merge_cond)
        ((key, branch0),) = conds[0] - conds[1]
        pick = (slot[key], branch0)
    return static_merge(ins, outs, pick, deref)


def as_blocks(program, order, cond, sources, loop_switches, slot, aliased, same):
    """A LoopProgram's lists with each cond's calls as blocks, in place (nothing to do for a
    body without a cond). `slot`: (item id, port) -> slot; `aliased`, `same`: see grouped."""
    position = {it.id: i for i, it in enumerate(order)}
    path_of = {it.id: path(cond[it.id], position) for it in order if cond[it.id]}
    pred_slot, head_of = {}, {}
    for it in order:
        if it.kind == P.SWITCH and it.id not in loop_switches:
            key = switch_key(it, sources)
            pred_slot[key] = slot[key]
            head_of.setdefault(key, it)
    if not pred_slot:
        return
    # (and kernels reading a Ref or the step: their order against the stateful ones)
    stateful = {it.id for it in order if it.kind == P.KERNEL
                and (not has_op(it.op) or get_op(it.op).has_effects or it.deref is not None
                     or it.needs_step)}
    for attr in ("header", "body", "tail", "header_rest", "body_rest"):
        calls = grouped(getattr(program, attr), path_of, sources, aliased, stateful, same)
        setattr(program, attr, blocks(calls, path_of, pred_slot, head_of))
