"""Gradient accumulations deferred to a loop's end (tfg/executor/loops.py): a backward loop's
`acc += A_t^T G_t` for all iterations as one GEMM when the loop exits.

    Before (the `rnn` benchmark's gradient loop, 50 iterations, twice: dW and dU):
      acc = Merge(zeros, NextIteration(acc'))
      acc' = AddV2(acc, MatMul(A_t, G_t, transpose_a=True))   # [128, 32] x [32, 128]
    After: each iteration copies A_t and G_t into the next rows of buffers and passes acc
    through unchanged; when the loop exits, acc = acc0 + A^T G ([128, 1600] x [1600, 128],
    one GEMM), which the Exit then reads. Accumulations of the same G (dW = sum h^T g and
    dU = sum x^T g) are collected by one call, which copies G once. So are the bias's:
    acc' = AddV2(acc, BiasAddGrad(G_t)) becomes acc0 + the column sums of all the G rows (a
    TF1 GRUCell's gradient loop: two BiasAddGrads and two AddV2s fewer an iteration).

Only where nothing else sees the accumulator during the loop: its Merge's value is read by
the AddV2 alone (its Switch, Exit and Identities share its slot), the product by the AddV2
alone, and the sum only by the NextIteration; both live whenever the body runs. Exact in
TensorFlow's semantics up to the order of the sum: TensorFlow adds the products one by one,
the GEMM sums the same terms in its own blocks (values within float rounding;
tests/test_loop_projection.py). An iteration whose operands the GEMM does not take (not
float32/float64 matrices of the accumulator's dtype and shape, a Ref) first makes the sum so
far, then runs the nodes' own calls (their errors); the buffers stay within the memory
guard's per-tensor limit (past it, the sums so far are made and new rows start; an
iteration whose rows alone exceed it runs its nodes) and are reused from one run to the
next (loop_buffers.py). A zero-iteration loop leaves the accumulator as it came. TFG_LOOP_PROJECT=0 turns this off
with the input projections (loop_projection.py).
"""
import numpy as np

from tfg.executor import plan as P
from tfg.executor.loop_buffers import BufferPool
from tfg.executor.loop_calls import run_named
from tfg.executor.loop_fusion import node_kind
from tfg.executor.loop_projection import enabled
from tfg.executor.loop_side import CHUNKED_MACS, side_free, submit
from tfg.kernels.nn_ops import bias_add_grad

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


def defer_accumulations(body, tail, order, slot, aliased, ins_of, merges, pred_slot, plain,
                        new_slot):
    """(body, tail, ids of the deferred nodes): each accumulation of the module docstring's
    form with its MatMul and AddV2 calls replaced by one that keeps the operands, and a call
    that makes the sum put first in `tail` (run when the loop exits); ins_of updated with
    what the new calls read. Arguments as loop_projection.hoist_projections'; pred_slot:
    the loop predicate's slot."""
    if not enabled():
        return body, tail, set()
    producer = {}
    for it in order:
        if it.id not in aliased:
            for p in range(it.num_outputs):
                producer.setdefault(slot[(it.id, p)], it)
    readers = {}
    for iid, (ins, controls) in ins_of.items():
        if iid not in aliased:
            for s in list(ins) + list(controls):
                readers.setdefault(s, set()).add(iid)
    calls = {it.id: call for call, it in body}
    nexts = {m[4] for m in merges}
    found = []  # (AddV2, MatMul, acc slot, next slot, A slot, G slot, limit)
    for out, _, _, _, nxt, _, deref in merges:
        add = producer.get(nxt)
        if deref or out == nxt or out in nexts or out == pred_slot or add is None \
                or add.id not in calls or not plain(add) \
                or node_kind(add) != ("ufunc", np.add) or readers.get(out) != {add.id} \
                or readers.get(nxt):
            continue
        a, b = ins_of[add.id][0]
        prod = b if a == out else a if b == out else None
        term = producer.get(prod)
        if term is None or term.id not in calls or not plain(term) or prod in nexts \
                or readers.get(prod) != {add.id}:
            continue
        if _is_bias_grad(term):  # acc += BiasAddGrad(G_t): the column sums of G
            found.append((add, term, out, nxt, None, ins_of[term.id][0][0],
                          getattr(term.fn, "limit", None)))
            continue
        kind = node_kind(term)
        if kind is None or kind[0] != "matmul" or kind[1][:2] != (True, False):
            continue
        lhs, rhs = ins_of[term.id][0]
        found.append((add, term, out, nxt, lhs, rhs, kind[1][2]))
    if not found:
        return body, tail, set()
    # Accumulations of one G (dW and dU: both h^T g and x^T g) share its buffer and one
    # call, made where the last of them was (one GEMM of the joined A's measured the same
    # as one each, so each keeps its own).
    groups = {}
    for acc in found:
        groups.setdefault(acc[5], []).append(acc)
    position = {it.id: i for i, (_, it) in enumerate(body)}
    replaced, finals, deferred = {}, [], set()
    for rhs, members in groups.items():
        last = max(members, key=lambda m: position[m[0].id])[0]
        # (what the call reads now, for the chains' order and buffers: loop_fusion.py)
        ins_of[last.id] = ([s for m in members for s in (m[2], m[4]) if s is not None]
                           + [rhs],
                           [s for m in members
                            for s in ins_of[m[0].id][1] + ins_of[m[1].id][1]])
        state = new_slot((last.id, "deferred"))
        products = tuple(m for m in members if m[4] is not None)
        sums = tuple(m for m in members if m[4] is None)
        finish = _finish(tuple(m[2] for m in products), tuple(m[2] for m in sums), state)
        fallback = [pair for m in members
                    for pair in ((calls[m[1].id], m[1]), (calls[m[0].id], m[0]))]
        limit = min((m[6] for m in members if m[6] is not None), default=None)
        replaced[last.id] = _collect(tuple((m[4], m[2], m[3]) for m in products),
                                     tuple((m[2], m[3]) for m in sums), rhs, state, limit,
                                     finish, fallback)
        finals.append((finish, last))
        deferred.update(i for m in members for i in (m[0].id, m[1].id))
    body = [(replaced.get(it.id, call), it) for call, it in body if it.id not in deferred
            or it.id in replaced]
    return body, finals + list(tail), deferred


def _finish(outs, sum_outs, state):
    """The call that makes the sums: acc_i = acc0_i + A_i^T G over the rows kept, and
    acc_j = acc0_j + the column sums of G (the BiasAddGrad accumulations)."""
    def finish(vals, step=None):
        held = vals[state]
        if held is None:
            return
        vals[state] = None
        accs, abufs, gbuf, rows, _ = held
        g = gbuf[:rows]
        for out, acc in zip(sum_outs, accs[len(outs):]):
            vals[out] = _column_sum(acc, g)
        if len(outs) > 1 and rows * g.shape[1] * abufs[1].shape[1] >= CHUNKED_MACS \
                and side_free():
            # (the sums do not depend on each other: all but the first on the worker,
            # loop_side.py; the same calls on the same operands, the same bits; small ones
            # stay here, where a wake-up would cost more than the product)
            jobs = [submit(_sum, acc, a[:rows], g) for acc, a in zip(accs[1:], abufs[1:])]
            vals[outs[0]] = _sum(accs[0], abufs[0][:rows], g)
            for out, job in zip(outs[1:], jobs):
                vals[out] = job.wait()
            return
        for out, acc, a in zip(outs, accs, abufs):
            vals[out] = _sum(acc, a[:rows], g)
    return finish


def _sum(acc, a, g):
    """acc + a^T g."""
    return np.add(acc, np.matmul(a.T, g))


def _column_sum(acc, g):
    """acc + BiasAddGrad(g) of a matrix g: its columns' sums (the kernel's reduction)."""
    return np.add(acc, np.add.reduce(g, axis=0, dtype=g.dtype))


def _is_bias_grad(it):
    """A BiasAddGrad the deferral may take: its plain numpy kernel (on a matrix, both data
    formats sum the rows, as the collected G is)."""
    return (it.kind == P.KERNEL and it.op == "BiasAddGrad" and it.deref is None
            and not it.needs_step and it.ctx is not None and it.ctx.xp is np
            and getattr(it.fn, "__wrapped__", it.fn) is bias_add_grad)


def _collect(members, sums, rhs, state, limit, finish, fallback):
    """The call that copies each A_t and G_t into the next rows of a buffer each, G_t once
    for all the members (so that none stays alive: less memory than keeping them, no heap
    grown and trimmed each run, and no stack to concatenate at the end), or makes the sums
    so far and runs `fallback`, the (prepared call, item) of each member's MatMul (or
    BiasAddGrad) and AddV2, each error named by its node. Buffers stay within the memory
    guard's per-tensor `limit` (None: none): past it, the sums so far are made first.
    `members`: (A slot, accumulator slot, next slot) of each accumulation of A^T G; `sums`:
    (accumulator slot, next slot) of each accumulation of G's column sums."""
    ndarray = np.ndarray
    # (next slot, accumulator slot), products first (the order of `held`'s accumulators)
    pairs = tuple((m[2], m[1]) for m in members) + tuple((nxt, out) for out, nxt in sums)
    pool = BufferPool(keep=2 * (len(members) + 1))  # (reused across runs; grown ones)
    hint = [0]  # rows the last run kept: the buffers' first size

    def collect(vals, step):
        g = vals[rhs]
        if type(g) is ndarray and g.ndim == 2 and g.dtype in _FLOATS:
            dtype = g.dtype
            n, gw = g.shape
            parts, widths = [], []
            for a_slot, out, _ in members:
                acc, a = vals[out], vals[a_slot]
                if not (type(a) is ndarray and type(acc) is ndarray and a.ndim == 2
                        and a.dtype is dtype and acc.dtype is dtype):
                    break
                r, c = a.shape
                if r != n or acc.shape != (c, gw):
                    break
                parts.append(a)
                widths.append(c)
            else:
                for out, _ in sums:
                    acc = vals[out]
                    if not (type(acc) is ndarray and acc.dtype is dtype
                            and acc.shape == (gw,)):
                        break
                else:
                    # held: [accumulators, A buffers, G buffer, rows kept, A widths]
                    held = vals[state]
                    if held is not None and held[4] == widths and held[2].shape[1] == gw:
                        rows = held[3]
                        need = rows + n
                        if need <= held[2].shape[0]:  # (the usual iteration)
                            for buf, a in zip(held[1], parts):
                                buf[rows:need] = a
                            held[2][rows:need] = g
                            held[3] = need
                            if need > hint[0]:
                                hint[0] = need
                            for nxt, out in pairs:
                                vals[nxt] = vals[out]  # (the sum comes at the end)
                            return
                    if _take(vals, held, parts, widths, g):
                        return
        finish(vals)  # the sums so far, then this iteration as the nodes compute it
        run_named(fallback, vals, step)

    def _take(vals, held, parts, widths, g):
        """Buffers for this iteration's rows: larger ones (the rows so far copied over),
        or new ones after the sums so far (other widths, or past the limit); then the
        rows copied. False where one iteration's rows exceed the limit."""
        n, gw = g.shape
        row_bytes = max(widths + [gw]) * g.itemsize
        if held is not None and (held[4] != widths or held[2].shape[1] != gw):
            finish(vals)  # (other widths: the sums so far, then anew)
            held = None
        rows = 0 if held is None else held[3]
        need = rows + n
        cap = max(need, 2 * rows, hint[0])
        if limit is not None and cap * row_bytes > limit:
            cap = max(need, limit // row_bytes)
            if cap * row_bytes > limit:  # the sums so far: the next rows start anew
                if held is not None:
                    finish(vals)
                held, rows, need = None, 0, n
                cap = max(n, limit // row_bytes)
                if cap * row_bytes > limit:
                    return False
        accs = [vals[out] for _, out in pairs] if held is None else held[0]
        new = [accs, [pool.take((cap, c), g.dtype) for c in widths],
               pool.take((cap, gw), g.dtype), need, widths]
        if rows:
            for buf, prev in zip(new[1] + [new[2]], held[1] + [held[2]]):
                buf[:rows] = prev[:rows]
        for buf, a in zip(new[1], parts):
            buf[rows:need] = a
        new[2][rows:need] = g
        vals[state] = new
        hint[0] = max(hint[0], need)
        for nxt, out in pairs:
            vals[nxt] = vals[out]
        return True
    return collect
