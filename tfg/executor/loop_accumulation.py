"""Gradient accumulations deferred to a loop's end (tfg/executor/loops.py): a backward loop's
`acc += A_t^T G_t` for all iterations as one GEMM when the loop exits.

    Before (the `rnn` benchmark's gradient loop, 50 iterations, twice: dW and dU):
      acc = Merge(zeros, NextIteration(acc'))
      acc' = AddV2(acc, MatMul(A_t, G_t, transpose_a=True))   # [128, 32] x [32, 128]
    After: each iteration copies A_t and G_t into the next rows of buffers and passes acc
    through unchanged; acc = acc0 + A^T G ([128, 1600] x [1600, 128]) is made in blocks of
    rows, most of them by the side worker while the loop still runs (block_sums.py; one
    GEMM at the exit where no BLAS gemm is found for that), and the Exit reads it.
    Accumulations of the same G (dW = sum h^T g and dU = sum x^T g) are collected by one
    call, which copies G once. So are the bias's:
    acc' = AddV2(acc, BiasAddGrad(G_t)) becomes acc0 + the column sums of all the G rows (a
    TF1 GRUCell's gradient loop: two BiasAddGrads and two AddV2s fewer an iteration), as
    do TF2's AddN(acc, MatMul(A_t, G_t)) and AddN(acc, Reshape(Sum(G_t, 0), [C])).

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
next (loop_buffers.py). A zero-iteration loop leaves the accumulator as it came. Not a term
that a node waits for by a control edge (without its call, that node could run before the
term's operands are read), nor a G the body does not compute (a variable's buffer, which an
assignment in the loop may change before the collecting call reads it).
TFG_LOOP_PROJECT=0 turns this off with the input projections (loop_projection.py).
"""
import collections

import numpy as np

from tfg.executor import plan as P
from tfg.executor.block_sums import BlockSums, block_rows, gemm_for
from tfg.executor.loop_buffers import BufferPool
from tfg.executor.loop_calls import run_named
from tfg.executor.loop_fusion import node_kind
from tfg.executor.loop_projection import enabled
from tfg.executor.loop_side import CHUNKED_MACS, side_free, submit
from tfg.kernels.math_ops import add_n

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

    def taken(it, value, reader):
        """Whether `it` runs whenever the body runs and computes `value` (its slot) for
        `reader` alone, and nothing waits for it by a control edge (a TF1 loop's
        `AssignAdd(v, ..., ^Sum)`: without the term's call, the write could come before
        the term's operands are read)."""
        return (it is not None and it.id in calls and plain(it) and value not in nexts
                and readers.get(value) == {reader.id}
                and not any(port < 0 for _, port, _ in it.out_edges))

    found = []
    for out, _, _, _, nxt, _, deref in merges:
        add = producer.get(nxt)
        if deref or out == nxt or out in nexts or out == pred_slot or add is None \
                or add.id not in calls or not plain(add) or not _is_add(add) \
                or readers.get(out) != {add.id} or readers.get(nxt):
            continue
        a, b = ins_of[add.id][0]
        prod = b if a == out else a if b == out else None
        term = producer.get(prod)
        if not taken(term, prod, add):
            continue
        if _is_kernel(term, "BiasAddGrad"):  # acc += BiasAddGrad(G_t): G's column sums
            found.append(_Acc(add, (term,), out, nxt, None, ins_of[term.id][0][0],
                              getattr(term.fn, "limit", None), None))
            continue
        # acc += Reshape(Sum(G_t, 0), [C]) (TF2's bias gradient) or Sum(G_t, 0): the same
        # sums where the axis and shape say so (_rows_summed)
        if _is_kernel(term, "Reshape"):
            summed, shape_at = ins_of[term.id][0]
            total = producer.get(summed)
            if not (_is_kernel(total, "Sum") and taken(total, summed, term)):
                continue
            terms = (total, term)
        elif _is_kernel(term, "Sum") and not term.ctx.attrs.get("keep_dims", False):
            total, terms, shape_at = term, (term,), None
        else:
            total = None
        if total is not None:
            g, axis_at = ins_of[total.id][0]
            if _first_axis(_const(producer.get(axis_at))) is False:
                continue  # (a Const axis that is not 0: the other sums)
            found.append(_Acc(add, terms, out, nxt, None, g, getattr(total.fn, "limit", None),
                              _rows_summed(axis_at, shape_at)))
            continue
        kind = node_kind(term)
        if kind is None or kind[0] != "matmul" or kind[1][:2] != (True, False):
            continue
        lhs, rhs = ins_of[term.id][0]
        found.append(_Acc(add, (term,), out, nxt, lhs, rhs, kind[1][2], None))
    # G is read where the last add was: only a value the body computes (not a variable's
    # buffer from outside, which an assignment in the loop may write in place meanwhile)
    found = [acc for acc in found if producer.get(acc.g) is not None]
    if not found:
        return body, tail, set()
    # Accumulations of one G (dW and dU: both h^T g and x^T g) share its buffer and one
    # call, made where the last of them was (one GEMM of the joined A's measured the same
    # as one each, so each keeps its own).
    groups = {}
    for acc in found:
        groups.setdefault(acc.g, []).append(acc)
    position = {it.id: i for i, (_, it) in enumerate(body)}
    replaced, finals, deferred = {}, [], set()
    for rhs, members in groups.items():
        last = max(members, key=lambda m: position[m.add.id]).add
        nodes = [it for m in members for it in m.terms + (m.add,)]
        # (what the call reads now, for the chains' order and buffers: loop_fusion.py)
        ins_of[last.id] = ([s for m in members for s in (m.acc, m.a) if s is not None]
                           + [rhs] + [s for m in members if m.check is not None
                                      for s in m.check.reads],
                           [s for it in nodes for s in ins_of[it.id][1]])
        state = new_slot((last.id, "deferred"))
        products = tuple(m for m in members if m.a is not None)
        sums = tuple(m for m in members if m.a is None)
        finish = _finish(tuple(m.acc for m in products), tuple(m.acc for m in sums), state)
        fallback = [(calls[it.id], it) for it in nodes]
        limit = min((m.limit for m in members if m.limit is not None), default=None)
        replaced[last.id] = _collect(tuple((m.a, m.acc, m.nxt) for m in products),
                                     tuple((m.acc, m.nxt, m.check) for m in sums), rhs, state,
                                     limit, finish, fallback)
        finals.append((finish, last))
        deferred.update(it.id for it in nodes)
    body = [(replaced.get(it.id, call), it) for call, it in body if it.id not in deferred
            or it.id in replaced]
    return body, finals + list(tail), deferred


# One accumulation: its add, the nodes making the term (run in this order when the deferral
# does not take an iteration), the accumulator's and the NextIteration's slots, A's slot (None:
# G's column sums), G's slot, the memory limit, and check(vals, width) for a term whose
# operands decide at run time whether it is G's column sums (None: always).
_Acc = collections.namedtuple("_Acc", "add terms acc nxt a g limit check")


def _is_add(it):
    """AddV2/Add, or AddN of two (a TF2 gradient loop's accumulator): numpy's add."""
    return node_kind(it) == ("ufunc", np.add) or (
        _is_kernel(it, "AddN") and it.num_inputs == 2
        and getattr(it.fn, "__wrapped__", it.fn) is add_n)


def _is_kernel(it, op):
    """Whether `it` runs `op`'s plain numpy kernel (no Ref, no step)."""
    return (it is not None and it.kind == P.KERNEL and it.op == op and it.deref is None
            and not it.needs_step and it.ctx is not None and it.ctx.xp is np)


def _const(it):
    """The value of a Const node (None for any other node)."""
    if it is None or it.kind != P.KERNEL or it.op != "Const" or it.ctx is None:
        return None
    return it.ctx.attrs.get("value")


def _first_axis(axis):
    """Whether a Sum's `axis` operand is the first axis of a matrix alone (0 or -2, or a
    vector of it); None where it is None (not known before the run)."""
    if axis is None:
        return None
    a = np.asarray(axis)
    return a.dtype.kind in "iu" and a.size == 1 and int(a.reshape(-1)[0]) in (0, -2)


def _rows_summed(axis_at, shape_at):
    """check(vals, width): whether Reshape(Sum(G, axis), shape) (Sum(G, axis) where
    `shape_at` is None) sums G's rows into a vector of `width` (G a matrix of `width`
    columns): axis 0 (or -2), shape [width] (or [-1]). The verdict is kept for the same
    axis and shape objects (arrays are never written)."""
    memo = [None, None, None]

    def check(vals, width):
        axis = vals[axis_at]
        shape = None if shape_at is None else vals[shape_at]
        if axis is memo[0] and shape is memo[1] and width == memo[2]:
            return True
        if not _first_axis(axis):
            return False
        if shape is not None:
            sh = np.asarray(shape)
            if sh.dtype.kind not in "iu" or sh.shape != (1,) or int(sh[0]) not in (width, -1):
                return False
        memo[:] = axis, shape, width
        return True
    check.reads = (axis_at,) if shape_at is None else (axis_at, shape_at)
    return check


def _finish(outs, sum_outs, state):
    """The call that makes the sums: acc_i = acc0_i + A_i^T G over the rows kept, and
    acc_j = acc0_j + the column sums of G (the BiasAddGrad accumulations)."""
    def finish(vals, step=None):
        held = vals[state]
        if held is None:
            return
        vals[state] = None
        accs, abufs, gbuf, rows, _, blocks = held
        g = gbuf[:rows]
        for out, acc in zip(sum_outs, accs[len(outs):]):
            vals[out] = _column_sum(acc, g)
        if blocks is not None:  # (made in blocks, most of them during the loop: block_sums.py)
            for out, acc, s in zip(outs, accs, blocks.finish(rows)):
                vals[out] = np.add(acc, s)
            return
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


def _collect(members, sums, rhs, state, limit, finish, fallback):
    """The call that copies each A_t and G_t into the next rows of a buffer each, G_t once
    for all the members (so that none stays alive: less memory than keeping them, no heap
    grown and trimmed each run, and no stack to concatenate at the end), or makes the sums
    so far and runs `fallback`, the (prepared call, item) of each node the accumulations
    replaced (the terms' and the adds'), each error named by its node. Buffers stay within
    the memory guard's per-tensor `limit` (None: none): past it, the sums so far are made
    first. `members`: (A slot, accumulator slot, next slot) of each accumulation of A^T G;
    `sums`: (accumulator slot, next slot, check or None) of each accumulation of G's column
    sums (_Acc.check)."""
    ndarray = np.ndarray
    # (next slot, accumulator slot), products first (the order of `held`'s accumulators)
    pairs = tuple((m[2], m[1]) for m in members) + tuple((m[1], m[0]) for m in sums)
    pool = BufferPool(keep=3 * len(members) + 2)  # (reused across runs; grown ones, sums)
    hint = [0]  # rows the last run kept: the buffers' first size
    live = [None]  # the BlockSums of the run now collecting (its worker may run)

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
                for out, _, check in sums:
                    acc = vals[out]
                    if not (type(acc) is ndarray and acc.dtype is dtype
                            and acc.shape == (gw,)) or (check is not None
                                                        and not check(vals, gw)):
                        break
                else:
                    # held: [accumulators, A buffers, G buffer, rows kept, A widths,
                    # BlockSums or None]
                    held = vals[state]
                    if held is not None and held[4] == widths and held[2].shape[1] == gw:
                        rows = held[3]
                        need = rows + n
                        if need <= held[2].shape[0]:  # (the usual iteration)
                            for buf, a in zip(held[1], parts):
                                buf[rows:need] = a
                            held[2][rows:need] = g
                            held[3] = need
                            blocks = held[5]
                            if blocks is not None and blocks.job is not None:
                                blocks.copied(need)  # (after the copies: the worker reads)
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
        if held is None:
            accs, blocks = [vals[out] for _, out in pairs], None
            if live[0] is not None:
                live[0].stop()  # (a run that did not reach its exit: its worker stops)
                live[0] = None
        else:
            accs, blocks = held[0], held[5]
            if blocks is not None:
                blocks.stop()  # (its buffers move: the worker stops, the rest made here)
        new = [accs, [pool.take((cap, c), g.dtype) for c in widths],
               pool.take((cap, gw), g.dtype), need, widths, blocks]
        if rows:
            for buf, prev in zip(new[1] + [new[2]], held[1] + [held[2]]):
                buf[:rows] = prev[:rows]
        for buf, a in zip(new[1], parts):
            buf[rows:need] = a
        new[2][rows:need] = g
        if blocks is not None:
            blocks.abufs, blocks.gbuf = new[1], new[2]
        elif members and held is None:
            gemm = gemm_for(g.dtype)
            if gemm is not None:  # (the sums' buffers after the rows': the pool's order)
                sums_at = [pool.take((c, gw), g.dtype) for c in widths]
                new[5] = live[0] = blocks = BlockSums(gemm, block_rows(n, widths, gw), sums_at)
                blocks.start(new[1], new[2], need, cap)
        vals[state] = new
        hint[0] = max(hint[0], need)
        for nxt, out in pairs:
            vals[nxt] = vals[out]
        return True
    return collect
