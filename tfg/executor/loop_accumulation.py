"""Gradient accumulations deferred to a loop's end (tfg/executor/loops.py): a backward loop's
`acc += A_t^T G_t` for all iterations as one GEMM when the loop exits.

    Before (the `rnn` benchmark's gradient loop, 50 iterations, twice: dW and dU):
      acc = Merge(zeros, NextIteration(acc'))
      acc' = AddV2(acc, MatMul(A_t, G_t, transpose_a=True))   # [128, 32] x [32, 128]
    After: each iteration copies A_t and G_t into the next rows of two buffers and passes
    acc through unchanged; when the loop exits, acc = acc0 + A^T G ([128, 1600] x
    [1600, 128], one GEMM), which the Exit then reads.

Only where nothing else sees the accumulator during the loop: its Merge's value is read by
the AddV2 alone (its Switch, Exit and Identities share its slot), the product by the AddV2
alone, and the sum only by the NextIteration; both live whenever the body runs. Exact in
TensorFlow's semantics up to the order of the sum: TensorFlow adds the products one by one,
the GEMM sums the same terms in its own blocks (values within float rounding;
tests/test_loop_projection.py). An iteration whose operands the GEMM does not take (not
float32/float64 matrices of the accumulator's dtype and shape, a Ref) first makes the sum so
far, then runs the nodes' own calls (their errors); the buffers stay within the memory
guard's per-tensor limit (past it, the sum so far is made and the iteration runs its nodes)
and are reused from one run to the next (loop_buffers.py). A
zero-iteration loop leaves the accumulator as it came. TFG_LOOP_PROJECT=0 turns this off
with the input projections (loop_projection.py).
"""
import numpy as np

from tfg.executor.loop_buffers import BufferPool
from tfg.executor.loop_calls import run_named
from tfg.executor.loop_fusion import node_kind
from tfg.executor.loop_projection import enabled

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
    replaced, finals, deferred = {}, [], set()
    for out, _, _, _, nxt, _, deref in merges:
        add = producer.get(nxt)
        if deref or out == nxt or out in nexts or out == pred_slot or add is None \
                or add.id not in calls or not plain(add) \
                or node_kind(add) != ("ufunc", np.add) or readers.get(out) != {add.id} \
                or readers.get(nxt):
            continue
        a, b = ins_of[add.id][0]
        prod = b if a == out else a if b == out else None
        mm = producer.get(prod)
        if mm is None or mm.id not in calls or not plain(mm) or prod in nexts \
                or readers.get(prod) != {add.id}:
            continue
        kind = node_kind(mm)
        if kind is None or kind[0] != "matmul" or kind[1][:2] != (True, False):
            continue
        lhs, rhs = ins_of[mm.id][0]
        # what the call reads now, for the chains' order and buffers (loop_fusion.py)
        ins_of[add.id] = ([a, b, lhs, rhs], ins_of[add.id][1] + ins_of[mm.id][1])
        state = new_slot((add.id, "deferred"))
        finish = _finish(out, state)
        replaced[add.id] = _collect(lhs, rhs, out, nxt, state, kind[1][2], finish,
                                    ((calls[mm.id], mm), (calls[add.id], add)))
        finals.append((finish, add))
        deferred.update((mm.id, add.id))
    if not deferred:
        return body, tail, deferred
    body = [(replaced.get(it.id, call), it) for call, it in body if it.id not in deferred
            or it.id in replaced]
    return body, finals + list(tail), deferred


def _finish(out, state):
    """The call that makes the sum: vals[out] = acc0 + A^T G over the rows kept."""
    def finish(vals, step=None):
        held = vals[state]
        if held is None:
            return
        vals[state] = None
        acc, a, g, rows = held
        vals[out] = np.add(acc, np.matmul(a[:rows].T, g[:rows]))
    return finish


def _collect(lhs, rhs, out, nxt, state, limit, finish, fallback):
    """The call that copies A_t and G_t into the rows of two buffers (so that neither stays
    alive: less memory than keeping them, and no stack to concatenate at the end), or makes
    the sum so far and runs `fallback`, the (prepared call, item) of the MatMul and the
    AddV2, each error named by its node."""
    ndarray = np.ndarray
    pool = BufferPool(keep=4)  # (the two buffers, reused across runs; grown ones)
    hint = [0]  # rows the last run kept: the buffers' first size

    def collect(vals, step):
        acc, a, g = vals[out], vals[lhs], vals[rhs]
        held = vals[state]
        if (type(a) is ndarray and type(g) is ndarray and type(acc) is ndarray
                and a.ndim == 2 and g.ndim == 2 and a.dtype is g.dtype
                and a.dtype is acc.dtype and a.shape[0] == g.shape[0]
                and acc.shape == (a.shape[1], g.shape[1]) and a.dtype in _FLOATS):
            if held is None:
                rows, cap, abuf, gbuf = 0, 0, None, None
            else:
                _, abuf, gbuf, rows = held
                cap = abuf.shape[0]
            need = rows + a.shape[0]
            if need > cap:  # a first or larger buffer (the rows so far copied over)
                cap = max(need, 2 * cap, hint[0])
                if limit is not None and cap * max(acc.shape) * a.itemsize > limit:
                    cap = need
                if limit is None or cap * max(acc.shape) * a.itemsize <= limit:
                    new_a = pool.take((cap, a.shape[1]), a.dtype)
                    new_g = pool.take((cap, g.shape[1]), g.dtype)
                    if rows:
                        new_a[:rows] = abuf[:rows]
                        new_g[:rows] = gbuf[:rows]
                    abuf, gbuf = new_a, new_g
            if abuf is not None and need <= abuf.shape[0]:
                abuf[rows:need] = a
                gbuf[rows:need] = g
                vals[state] = (acc, abuf, gbuf, need)
                hint[0] = max(hint[0], need)
                vals[nxt] = acc  # (the accumulator passes through; the sum comes at the end)
                return
        finish(vals)  # the sum so far, then this iteration as the nodes compute it
        run_named(fallback, vals, step)
    return collect
