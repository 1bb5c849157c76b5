"""Fused chains in compiled loop bodies (tfg/executor/loops.py): a run of connected nodes of an
iteration that are float elementwise ufuncs, Sigmoid, TanhGrad, SigmoidGrad, AddN, BiasAdd,
Split, MatMul, _FusedMatMul (MatMul + BiasAdd), StridedSlice of Const bounds or
Select/SelectV2 becomes one call that runs them as steps (tfg/executor/fused_steps.py) and
reuses, from one iteration to the next, the arrays of the values nothing outside the chain
reads. A Keras LSTM, GRU or masked BiLSTM cell is one call an iteration; so is a TF1
LSTMCell's gradient (13 members: its AddNs, TanhGrads, SigmoidGrads and products).

    Before (a Keras LSTM cell, 12 calls an iteration; 15 numpy calls for the 3 Sigmoids):
      Add(MatMul, MatMul_1) -> BiasAdd -> Split -> Sigmoid x3, Tanh -> Mul, Mul -> AddV2
      -> Tanh -> Mul
    After: one call; one Sigmoid over the 8x256 gate matrix whose pieces are views (5 numpy
    calls), the temporaries (the sum, the gates, c*f, i*g) written into last iteration's
    arrays; the new c and h are fresh arrays (they go to the next iteration and the list).

Values are the kernels' own, bit for bit: each step is the numpy function the node's kernel
calls on such operands. Where the operands are not what the steps take (another dtype, a
broadcast, an integer, a GPU array, a Sigmoid input below its overflow floor), the call runs
the nodes' prepared calls in order instead, so errors and odd cases are the kernels' own.

Chains grow along the body's order, in which each fusable node comes as early as its inputs
allow and the others keep their own order (so a TensorListSetItem of the new h does not cut
a BiLSTM cell from its mask Selects): a fusable node joins the open chain whose values it reads
(two chains it reads become one), else it starts one; a MatMul of an elementwise member's
value (a gradient's dz W^T) closes that chain and starts the next (a chain's compiled
program runs its products before its elementwise members, tfg/executor/chain_programs.py);
a node that is not fusable closes the chains whose values it reads (each becomes one call at
that point) and runs before the others (it does not depend on them, and they are pure).
Only nodes live whenever the body runs (no cond inside the body around them) and not
loop-invariant are fused.
"""
import heapq

import numpy as np

from tfg.executor import block_steps as B
from tfg.executor import chain_programs as CP
from tfg.executor import fused_steps as S
from tfg.executor import loop_blocks as LB
from tfg.executor import plan as P
from tfg.executor.loop_calls import run_named
from tfg.kernels import array_ops, fused, indexing_ops, math_ops, nn_ops
from tfg.kernels.math_ops import array_kernel
from tfg.kernels.registry import find_kernel

# A chain whose operands the steps did not take this many times in a row (integers, a
# broadcast, a GPU array) runs its nodes' calls from then on, without trying the steps first.
_GIVE_UP = 64


def _kind(it):
    """How a node enters a chain: 'ufunc' (with its function), an op of its own, or None."""
    if (it.kind != P.KERNEL or it.deref is not None or it.needs_step or it.ctx is None
            or it.ctx.xp is not np):
        return None
    fn = getattr(it.fn, "__wrapped__", it.fn)
    plain = array_kernel(it.op, fn)
    if it.op == "Sigmoid" and plain is not None:
        return "sigmoid", None
    if plain is math_ops.tanh_into:  # called as a ufunc is: (x) or (x, out)
        return "ufunc", plain
    if isinstance(plain, np.ufunc) and plain.nout == 1 and it.num_outputs == 1:
        sig = "e->e" if plain.nin == 1 else "ee->e"
        if all(sig.replace("e", c) in plain.types for c in "efd"):
            return "ufunc", plain
        return None
    if fn is nn_ops.tanh_grad:  # (y, dy) and (y, dy, out), as a binary ufunc is called
        return "ufunc", nn_ops.tanh_grad_into
    if fn is nn_ops.sigmoid_grad:
        return "ufunc", nn_ops.sigmoid_grad_into
    if fn is math_ops.add_n and it.num_inputs >= 2:
        return "addn", None
    attrs = it.ctx.attrs
    if fn is nn_ops.matmul:
        return "matmul", (bool(attrs.get("transpose_a")), bool(attrs.get("transpose_b")),
                          getattr(it.fn, "limit", None))
    if fn is nn_ops.bias_add:
        return "bias", None
    if fn is array_ops.split:
        return "split", None
    if fn is fused.fused_matmul and _bias_only(attrs) and it.num_inputs == 3:
        return "fmatmul", (bool(attrs.get("transpose_a")), bool(attrs.get("transpose_b")),
                           getattr(it.fn, "limit", None))
    if fn is indexing_ops.strided_slice and it.num_inputs == 4:
        return "slice", (attrs, getattr(it.fn, "limit", None))
    if fn is math_ops.select_v2 or fn is math_ops.select:
        return "select", fn is math_ops.select_v2
    return None


node_kind = _kind  # (tfg/executor/loop_projection.py asks it which MatMuls it may take)


def _bias_only(attrs):
    """Whether a _FusedMatMul's fused ops are [BiasAdd] alone, over the registered MatMul
    kernel (what its kernel multiplies with)."""
    ops = [o.decode() if isinstance(o, bytes) else o for o in attrs.get("fused_ops", [])]
    kd = find_kernel("MatMul")
    return (ops == ["BiasAdd"] and int(attrs.get("num_args", 1)) == 1 and kd is not None
            and kd.fn is nn_ops.matmul)


def fuse_chains(body, ins_of, outs_of, outside, fusable, new_slot, constants=frozenset()):
    """`body` [(call, item)] with each chain of two or more nodes replaced by one fused call.
    ins_of: item id -> (input slots, control slots) of every node of the frame; outs_of(item)
    -> its output slots; outside: the slots read otherwise (the loop's NextIteration values,
    the Exits, the predicate); fusable(item): whether its conditions allow it (live with the
    body, not invariant); new_slot(key) -> a fresh slot; constants: the slots of the frame's
    Consts (a StridedSlice of Const bounds is a step)."""
    readers = {}
    for iid, (ins, controls) in ins_of.items():
        for s in ins:
            if s is not None:
                readers.setdefault(s, set()).add(iid)
        for s in controls:
            readers.setdefault(s, set()).add(iid)
    kinds = {}
    for _, it in body:
        kind = _kind(it) if fusable(it) else None
        if kind is not None and kind[0] == "slice" and not all(
                s in constants for s in ins_of[it.id][0][1:]):
            kind = None
        kinds[it.id] = kind
    out = []
    groups = []  # open chains: [members [(call, item, kind)], their output slots]

    def close(g):
        groups.remove(g)
        members = g[0]
        if len(members) >= 2:
            out.append(_fused(members, ins_of, outs_of, readers, outside, new_slot))
        else:
            out.extend((c, it) for c, it, _ in members)

    for call, it in _fusable_first(body, ins_of, outs_of, kinds):
        ins, controls = ins_of[it.id]
        read = [g for g in groups if any(s in g[1] for s in ins)
                or any(s in g[1] for s in controls)]
        kind = kinds[it.id]
        if kind is None:
            for g in read:
                close(g)
            out.append((call, it))
            continue
        if kind[0] in ("matmul", "fmatmul") and read:
            # a product of a chain's elementwise value (a gradient's dz W^T) ends that
            # chain: its elementwise members stay one compiled program (which runs a
            # chain's products first, chain_programs.py), and the product starts the next
            made = {s for g in read for _, m, k in g[0] if k[0] not in ("matmul", "fmatmul")
                    for s in outs_of(m)}
            if any(s in made for s in ins):
                for g in read:
                    close(g)
                read = []
        if not read:
            groups.append([[], set()])
            read = groups[-1:]
        # it joins the chain it reads; two chains it both reads become one (neither reads
        # the other, and what ran between them read neither)
        g = read[0]
        for other in read[1:]:
            g[0].extend(other[0])
            g[1].update(other[1])
            groups.remove(other)
        g[0].append((call, it, kind))
        g[1].update(outs_of(it))
    for g in list(groups):
        close(g)
    return out


def _fusable_first(body, ins_of, outs_of, kinds):
    """The body in a dependency order that runs each fusable node as early as its inputs
    allow, and the others in their own order (among themselves: stateful ones keep theirs):
    a node that reads a chain's value and feeds none (a BiLSTM's TensorListSetItem between
    its mask Selects) no longer splits the chain in two."""
    producer = {}
    for k, (_, it) in enumerate(body):
        for s in outs_of(it):
            producer[s] = k
    waits = [0] * len(body)
    after = [[] for _ in body]
    last = None  # the previous node that is not fusable
    for k, (_, it) in enumerate(body):
        ins, controls = ins_of[it.id]
        deps = {producer[s] for s in list(ins) + list(controls) if s in producer}
        if kinds[it.id] is None:
            if last is not None:
                deps.add(last)
            last = k
        deps.discard(k)
        waits[k] = len(deps)
        for d in deps:
            after[d].append(k)
    ready = [(kinds[it.id] is None, k) for k, (_, it) in enumerate(body) if not waits[k]]
    heapq.heapify(ready)
    order = []
    while ready:
        _, k = heapq.heappop(ready)
        order.append(body[k])
        for j in after[k]:
            waits[j] -= 1
            if not waits[j]:
                heapq.heappush(ready, (kinds[body[j][1].id] is None, j))
    if len(order) != len(body):  # (a cycle: not an iteration's order; keep the given one)
        return body
    return order


def _fused(group, ins_of, outs_of, readers, outside, new_slot):
    """(call, item) of one chain: the last member's item names it."""
    members = {it.id for _, it, _ in group}
    produced = set()
    for _, it, _ in group:
        produced.update(outs_of(it))
    views = {}  # slot -> slots of the views of its array (Split's pieces, slices)

    def escapes(s):
        return (s in outside or not readers.get(s, set()) <= members
                or any(escapes(v) for v in views.get(s, ())))
    # Sigmoids of two or more pieces of one Split in the chain: one Sigmoid over the whole
    sig_of_split = {}
    for _, it, (kind, _) in group:
        if kind == "sigmoid":
            src = ins_of[it.id][0][0]
            sig_of_split.setdefault(src, []).append(it)
    pieces = {}
    for _, it, (kind, _) in group:
        if kind == "split":
            outs = outs_of(it)
            views.setdefault(ins_of[it.id][0][1], []).extend(outs)
            pieces.update((s, (it, p)) for p, s in enumerate(outs))
        elif kind == "slice":
            views.setdefault(ins_of[it.id][0][0], []).extend(outs_of(it))
    whole = {}  # Split id -> [(port, Sigmoid item)]
    for src, sigs in sig_of_split.items():
        if src in pieces:
            split_it, port = pieces[src]
            whole.setdefault(split_it.id, []).extend((port, s) for s in sigs)
    whole = {k: v for k, v in whole.items() if len(v) >= 2}
    by_whole = {s.id for v in whole.values() for _, s in v}
    kinds_of = {it.id: fn for _, it, (_, fn) in group}  # (a slice's (attrs, limit))
    group, stacked = _stack_sigmoids(group, ins_of, outs_of, by_whole, escapes)
    stacked_ids = {it.id for it in stacked}
    stack_slot = new_slot((stacked[0].id, "stack")) if stacked else None
    # column blocks (tfg/executor/block_steps.py): the slices of a binary ufunc as blocks,
    # and two Adds of the stack's rows over blocks of the same buffers as one call
    col = LB.plan_column_blocks(group, ins_of, outs_of, readers, outside, escapes, new_slot)
    in_blocks = {s.id for slices, _, _, _ in col.values() for s in slices}
    split_blocks = {it.id: (it, new_slot((it.id, "blocks")))
                    for _, it, (kind, _) in group if kind == "split"}
    pair = (LB.plan_pair(stacked, group, ins_of, outs_of, readers,
                         LB.block_sources(col, split_blocks, ins_of, outs_of))
            if len(stacked) >= 2 else None)
    selects = LB.plan_shared_selects(group, ins_of, outs_of, produced, new_slot)
    in_selects = {s.id for sels, _ in selects.values() for s in sels[1:]}
    rows = list(stacked)  # the stack's rows, in the order of the pair's blocks
    if pair is not None and pair[3]:
        row = pair[2][3]
        rows[row], rows[row + 1] = rows[row + 1], rows[row]
    steps, floats = [], []
    for _, it, (kind, fn) in group:
        ins = ins_of[it.id][0]
        outs = outs_of(it)
        # (the operands of one float dtype: not a Split's axis, a slice's bounds, a mask)
        operands = (ins[1:] if kind in ("split", "select") else ins[:1] if kind == "slice"
                    else ins)
        floats.extend(s for s in operands if s not in produced)
        if it.id in by_whole or it.id in in_blocks or it.id in in_selects:
            continue  # a view of the whole Sigmoid or a block, written by another step
        if it.id in stacked_ids:
            if it is stacked[0]:  # (the others: views of it)
                sig_outs = tuple(outs_of(s)[0] for s in rows)
                steps.append(S.stacked_sigmoid(
                    tuple(ins_of[s.id][0][0] for s in rows), sig_outs, stack_slot,
                    new_slot((it.id, "stacked")), not any(escapes(o) for o in sig_outs)))
            continue
        if kind == "split":
            sig = None
            if it.id in whole:
                ports = [(port, outs_of(s)[0]) for port, s in whole[it.id]]
                hidden = new_slot((it.id, "sigmoid"))
                reuse = not any(escapes(o) for _, o in ports)
                sig = (hidden, reuse, tuple(ports))
            blocks = (split_blocks[it.id][1], not any(escapes(o) for o in outs))
            steps.append(S.split(ins[0], ins[1], tuple(outs), len(outs), sig, blocks))
            continue
        o = outs[0]
        reuse = not escapes(o)
        if pair is not None and it.id == pair[0]:
            continue  # run by the pair's step, at the later of its two Adds
        if pair is not None and it.id == pair[1]:
            first, second, sources, row = pair[2]
            plain = tuple(S.binary(fn, a, b, out, not escapes(out))
                          for a, b, out in (first, second))
            steps.append(B.paired(fn, first, second, sources, stack_slot, row, plain))
            continue
        if it.id in col:
            slices, slot, ports_slot, block_reuse = col[it.id]
            vector = kind == "fmatmul"
            if vector:  # the product, then its bias Add into the blocks
                steps.append(S.matmul(ins[0], ins[1], o, reuse, *fn))
                a, b, fn = o, ins[2], np.add
                first = B.bias_in_place(o, b)
            else:
                a, b = ins
                first = S.binary(fn, a, b, o, reuse)
            plain = (first,) + tuple(
                S.strided(ins_of[s.id][0][0], tuple(ins_of[s.id][0][1:]), outs_of(s)[0],
                          *kinds_of[s.id]) for s in slices)
            steps.append(B.column_blocks(
                fn, a, b, o,
                tuple((outs_of(s)[0], tuple(ins_of[s.id][0][1:]), kinds_of[s.id][0],
                       kinds_of[s.id][1]) for s in slices),
                slot, ports_slot, block_reuse, plain, vector))
            continue
        if kind == "ufunc":
            steps.append(S.unary(fn, ins[0], o, reuse) if len(ins) == 1
                         else S.binary(fn, ins[0], ins[1], o, reuse))
        elif kind == "sigmoid":
            steps.append(S.sigmoid(ins[0], o, reuse))
        elif kind == "bias":
            nchw = it.ctx.attrs.get("data_format", b"NHWC") in (b"NCHW", "NCHW")
            steps.append(S.bias_add(ins[0], ins[1], o, reuse, nchw))
        elif kind == "fmatmul":
            steps.append(S.fused_matmul(ins[0], ins[1], ins[2], o, reuse, *fn))
        elif kind == "slice":
            steps.append(S.strided(ins[0], tuple(ins[1:]), o, *fn))
        elif kind == "select" and it.id in selects:
            sels, held = selects[it.id]
            sins = [ins_of[s.id][0] for s in sels]
            souts = tuple(outs_of(s)[0] for s in sels)
            plain = tuple(S.select(i[0], i[1], i[2], so, fn) for i, so in zip(sins, souts))
            steps.append(B.shared_select(ins[0], ins[1], tuple(i[2] for i in sins), souts,
                                         held, fn, plain))
        elif kind == "select":
            steps.append(S.select(ins[0], ins[1], ins[2], o, fn))
        elif kind == "addn":
            steps.append(S.add_n(tuple(ins), o, reuse))
        else:
            steps.append(S.matmul(ins[0], ins[1], o, reuse, *fn))
    calls = tuple((c, it) for c, it, _ in group)
    program = _program(group, ins_of, outs_of, escapes)
    call = _chain_call(tuple(steps), tuple(dict.fromkeys(floats)), calls, program)
    call.members = tuple(it for _, it in calls)
    call.steps = tuple(steps)
    # what a batched twin of the chain reads (tfg/executor/loop_pairs.py): each member's
    # kind, input and output slots, in an order of the steps' dependencies, and the slots
    # read outside the chain
    call.io = tuple((it, kind, tuple(ins_of[it.id][0]), tuple(outs_of(it)))
                    for _, it, kind in group)
    call.escaping = tuple(s for s in dict.fromkeys(produced) if escapes(s))
    return call, calls[-1][1]


def _stack_sigmoids(group, ins_of, outs_of, by_whole, escapes):
    """(members reordered, [Sigmoid items]) for one Sigmoid over a stack: the Sigmoids of
    the chain (not of a Split's pieces) whose inputs ufunc steps of the chain write and
    nothing outside it reads (a GRU's update and reset gates). Each of them then waits for
    all those steps (the members in a dependency order that keeps theirs otherwise); a
    Sigmoid whose input needs another's value is left out; none when fewer than two."""
    producer = {outs_of(it)[0]: it for _, it, (kind, _) in group if kind == "ufunc"}
    cands, seen = [], set()
    for _, it, (kind, _) in group:
        src = ins_of[it.id][0][0] if kind == "sigmoid" else None
        if (src is not None and it.id not in by_whole and src in producer
                and src not in seen and not escapes(src)):
            cands.append(it)
            seen.add(src)
    if len(cands) < 2:
        return group, []
    made_by = {}
    for k, (_, it, _) in enumerate(group):
        for s in outs_of(it):
            made_by[s] = k
    index = {it.id: k for k, (_, it, _) in enumerate(group)}
    deps = []
    for k, (_, it, _) in enumerate(group):
        ins, controls = ins_of[it.id]
        d = {made_by[s] for s in list(ins) + list(controls) if s in made_by}
        d.discard(k)
        deps.append(d)

    def order_with(sigs):
        """The members in order with each of `sigs` after all their producers; None if
        that is a cycle. (A few dozen members: a plain scan is enough.)"""
        firsts = {index[producer[ins_of[s.id][0][0]].id] for s in sigs}
        wait = list(deps)
        for s in sigs:
            wait[index[s.id]] = deps[index[s.id]] | firsts
        order, done = [], set()
        while len(order) < len(group):
            k = next((k for k in range(len(group)) if k not in done and wait[k] <= done),
                     None)
            if k is None:
                return None
            done.add(k)
            order.append(k)
        return order
    sigs, order = cands[:1], None
    for s in cands[1:]:
        o = order_with(sigs + [s])
        if o is not None:
            sigs, order = sigs + [s], o
    if order is None:
        return group, []
    at = {k: n for n, k in enumerate(order)}
    sigs.sort(key=lambda s: at[index[s.id]])
    return [group[k] for k in order], sigs


def _program(group, ins_of, outs_of, escapes):
    """The chain's compiled program (tfg/executor/chain_programs.py), or None: its MatMuls
    as their steps, the rest one call."""
    members, pre = [], []
    for _, it, (kind, fn) in group:
        ins, outs = tuple(ins_of[it.id][0]), tuple(outs_of(it))
        if kind == "bias":
            if it.ctx.attrs.get("data_format", b"NHWC") in (b"NCHW", "NCHW"):
                return None
        elif kind == "matmul":
            pre.append(S.matmul(ins[0], ins[1], outs[0], not escapes(outs[0]), *fn))
        elif kind == "fmatmul":
            pre.append(S.fused_matmul(ins[0], ins[1], ins[2], outs[0], not escapes(outs[0]),
                                      *fn))
        members.append((kind, fn, ins, outs))
    escaping = [s for _, it, _ in group for s in outs_of(it) if escapes(s)]
    return CP.program(members, escaping, tuple(pre))


def _chain_call(steps, floats, calls, program=None):
    """The fused call: its float inputs checked for one float dtype, the program (where
    there is one and it takes the values) or else the steps run; on Fallback the members'
    own calls (their errors name their node)."""
    ndarray, generic = np.ndarray, np.generic
    first, rest = floats[0], floats[1:]
    misses = [0]  # fallbacks in a row: after _GIVE_UP the steps are no longer tried

    def fused(vals, step):
        v = vals[first]
        if misses[0] < _GIVE_UP and (type(v) is ndarray or isinstance(v, generic)):
            dt = v.dtype
            ok = dt.kind == "f"
            for s in rest:
                v = vals[s]
                if (type(v) is not ndarray and not isinstance(v, generic)) or v.dtype is not dt:
                    ok = False
                    break
            if ok:
                try:
                    if program is not None and program(vals):
                        misses[0] = 0
                        return
                    for f in steps:
                        f(vals)
                    misses[0] = 0
                    return
                except S.Fallback:
                    pass
            misses[0] += 1
        run_named(calls, vals, step)
    return fused
