"""Input projections hoisted out of compiled loop bodies (tfg/executor/loops.py): an RNN's
`x_t W` for every time step as one GEMM, and each iteration a view of its row block.

    Before (a Keras LSTM's body, 20 iterations):
      x_t = TensorListGetItem(xs, t)      # xs, W: loop invariants; t: the loop's counter
      a = MatMul(x_t, W)                   # [8, 16] x [16, 256], once an iteration
    After: at the first iteration, P = stack(xs.items) reshaped [20*8, 16] @ W (one GEMM,
    [20, 8, 256], a _FusedMatMul's bias added to it as its kernel adds it); each iteration
    a = P[t], a view, and the GetItem runs no more where nothing else reads x_t.

The same for a TF1 loop's `x_t = GatherV2(x, t, 0)` of an invariant [T, B, F] tensor (the
`rnn` benchmark's row; there x_t is also pushed on a stack for the gradient, so the Gather
stays and only its MatMul goes).

Exact in TensorFlow's semantics, row for row: P[t] is the product of item t, whatever t is,
so the counter analysis (the index is a loop variable whose next value is itself + 1: each
value once a run) only decides where it pays. The call still runs the nodes' own prepared
calls (their errors, their kernels' results) where the projection does not apply: an index
out of range or not an integer scalar, an unset item, items of different shapes or dtypes,
a list whose dtype is not the op's, operands not float32/float64 matrices of one dtype, a
projection (or the stacked input) over the memory guard's per-tensor limit
(tfg/executor/limits.py), or inputs that are not the objects the projection was made from
(so a list written inside the loop is never read stale). It is made at the first iteration
that reaches it, so a zero-iteration loop computes nothing, and kept in the run's own slots.
Its arrays are reused from one run to the next where nothing refers to them any more
(tfg/executor/loop_buffers.py: a fresh 800 KB array a run cost more page faults than the
GEMM saved). A projection of 4M multiply-adds or more and 8 time steps or more is made in
blocks of time steps (tfg/executor/loop_side.py: the first two steps here, the later blocks on
a worker thread where a core is free, while the first iterations run; the same blocks on one
thread otherwise, so the same bits either way); an iteration waits only for its own block.
The one GEMM blocks the sums differently from the small ones: values agree within float
rounding (tests/test_loop_projection.py: rtol 1e-6 against TFG_LOOP_PROJECT=0, which turns
this off, and against TensorFlow's fixtures).
"""
import os

import numpy as np

from tfg.executor import plan as P
from tfg.executor.direct_calls import _index
from tfg.executor.loop_buffers import BufferPool
from tfg.executor.loop_calls import run_named
from tfg.executor.loop_side import CHUNKED_MACS, MIN_STEPS, Blocks, blocked_product
from tfg.executor.loop_fusion import node_kind
from tfg.kernels.indexing_ops import gather_v2
from tfg.kernels.list_ops import TensorList, tensor_list_get_item
from tfg.schemas.dtypes import DType

_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
_COUNTER_ADDS = frozenset({"Add", "AddV2"})


def enabled():
    return os.environ.get("TFG_LOOP_PROJECT", "1") != "0"


def hoist_projections(body, order, slot, aliased, ins_of, invariant, merges, outside, plain,
                      new_slot):
    """(body, ids of the projected MatMuls): `body` [(call, item)] with the call of each
    MatMul/_FusedMatMul of an invariant list's item (or an invariant tensor's Gather) at the
    loop counter, by an invariant matrix, replaced by a projected one, and the reads only
    such calls needed dropped; ins_of updated with what the new calls read.
    slot: (item id, port) -> slot; aliased: ids sharing their input's slot; ins_of: id ->
    (input slots, control slots); invariant: ids of the loop invariants; merges:
    LoopProgram.merges; outside: slots read after the body; plain(item): live whenever the
    body runs and not invariant; new_slot(key) -> a fresh slot."""
    if not enabled():
        return body, set()
    producer = {}
    for it in order:
        if it.id not in aliased:
            for p in range(it.num_outputs):
                producer.setdefault(slot[(it.id, p)], it)
    fixed = {slot[(i, 0)] for i in invariant if (i, 0) in slot}
    calls = {it.id: call for call, it in body}
    readers = {}
    for iid, (ins, controls) in ins_of.items():
        for s in list(ins) + list(controls):
            readers.setdefault(s, set()).add(iid)
    found = []  # (MatMul item, its kind, read item, its slots)
    for _, it in body:
        kind = node_kind(it) if plain(it) else None
        if kind is None or kind[0] not in ("matmul", "fmatmul") or kind[1][0]:
            continue  # (transpose_a: x_t^T is no row block of a product)
        ins = ins_of[it.id][0]
        read = producer.get(ins[0])
        if read is None or read.id not in calls or not all(s in fixed for s in ins[1:]):
            continue
        spec = _read_spec(read, ins_of[read.id][0], fixed)
        if spec is not None and _is_counter(spec[1], merges, producer, ins_of):
            found.append((it, kind, read, spec))
    if not found:
        return body, set()
    projected = {it.id for it, _, _, _ in found}
    # A read goes where only projected MatMuls read its value and no call of the body makes
    # its inputs (which then hold before the body runs: no reordering of the calls can put
    # the projected call before them, tfg/executor/loop_conds.py's included).
    dropped = {read.id for _, _, read, _ in found
               if slot[(read.id, 0)] not in outside
               and readers.get(slot[(read.id, 0)], set()) <= projected
               and not any(producer.get(s) is not None and producer[s].id in calls
                           for s in ins_of[read.id][0])}
    replaced = {}
    for it, kind, read, (source, index, axis, dtype) in found:
        ins, controls = ins_of[it.id]
        # what the call reads now, for the chains' order and buffers (loop_fusion.py)
        ins_of[it.id] = (list(ins) + list(ins_of[read.id][0]), controls)
        fallback = (((calls[read.id], read),) if read.id in dropped else ()) + (
            (calls[it.id], it),)
        replaced[it.id] = projected_call(
            fallback, source, index, axis, dtype, ins[1], ins[2] if kind[0] == "fmatmul"
            else None, kind[1][1], kind[1][2], slot[(it.id, 0)], new_slot((it.id, "proj")))
    out = [(replaced.get(it.id, call), it) for call, it in body if it.id not in dropped]
    return out, projected


def _read_spec(read, ins, fixed):
    """(source slot, index slot, axis slot or None, list dtype or None) of a TensorListGetItem
    of an invariant list or a GatherV2 (batch_dims 0) of an invariant tensor; else None."""
    if read.kind != P.KERNEL or read.deref is not None or read.ctx is None \
            or read.ctx.xp is not np or ins[0] not in fixed:
        return None
    fn = getattr(read.fn, "__wrapped__", read.fn)
    if fn is tensor_list_get_item and len(ins) == 3:
        want = read.ctx.attrs.get("element_dtype")
        try:
            want = want if isinstance(want, DType) else DType.parse(want)
        except Exception:  # noqa: BLE001 - the kernel's error to word
            return None
        return ins[0], ins[1], None, want
    if fn is gather_v2 and len(ins) == 3 and not read.ctx.attrs.get("batch_dims", 0) \
            and ins[2] in fixed:
        return ins[0], ins[1], ins[2], None
    return None


def _is_counter(s, merges, producer, ins_of):
    """Whether slot `s` is a loop variable whose next value is itself + 1 (a Const 1)."""
    nxt = next((m[4] for m in merges if m[0] == s), None)
    add = producer.get(nxt)
    if add is None or add.kind != P.KERNEL or add.op not in _COUNTER_ADDS:
        return False
    a, b = ins_of[add.id][0]
    one = producer.get(b if a == s else a if b == s else None)
    if one is None or one.op != "Const" or one.ctx is None:
        return False
    v = np.asarray(one.ctx.attrs.get("value"))
    return v.size == 1 and v.dtype.kind in "iu" and int(v.reshape(())) == 1


def projected_call(fallback, source, index, axis, dtype, w, bias, tb, limit, out, state):
    """The call that sets vals[out] = P[t] (see the module docstring); `fallback`: the
    (prepared call, item) to run instead, in order (the read where it was dropped, the
    MatMul), each error named by its own node."""
    int32, int64 = np.int32, np.int64
    pool = BufferPool(keep=3)  # (the stacked items and the projection, reused across runs)

    def project(vals, step):
        held = vals[state]
        if (held is None or held[0] is not vals[source] or held[1] is not vals[w]
                or (bias is not None and held[2] is not vals[bias])
                or (axis is not None and held[3] is not vals[axis])):
            # (the first iteration, or inputs that are not those it was made from)
            src, wv = vals[source], vals[w]
            bv = None if bias is None else vals[bias]
            av = None if axis is None else vals[axis]
            p = _project(src, wv, bv, av, dtype, tb, limit, pool)
            held = vals[state] = ((src, wv, bv, av, None, p) if type(p) is Blocks
                                  else (src, wv, bv, av, p))
        p = held[4]
        if p is not None:
            i = vals[index]
            t = type(i)
            if t is not int32 and t is not int64:
                i = _index(i)
            if i is not None and 0 <= i < p.shape[0]:
                vals[out] = p[i]
                return
        elif len(held) > 5:  # blocks the worker is still making (loop_side.py)
            blocks = held[5]
            i = _index(vals[index])
            if i is not None and 0 <= i < blocks.p.shape[0]:
                if i >= blocks.ready:
                    blocks.wait(i)
                if blocks.ready >= blocks.p.shape[0]:  # all made: as one from now on
                    vals[state] = held[:4] + (blocks.p,)
                vals[out] = blocks.p[i]
                return
        run_named(fallback, vals, step)
    project.row_of = (state, index, out)  # (loop_lockstep.py: the pair's stacked rows)
    # (lockstep_deferral.py: the invariants it reads, which a deferred call must find as
    # they were)
    project.reads = tuple(s for s in (source, w, bias, axis) if s is not None)
    return project


def _project(src, w, bias, axis, dtype, tb, limit, pool):
    """[T, B, N]: every row block's product (plus the bias), or None where it does not apply."""
    if type(w) is not np.ndarray or w.ndim != 2 or w.dtype not in _FLOATS:
        return None
    if axis is None:  # TensorListGetItem
        if type(src) is not TensorList or not src.items or src.element_dtype != dtype:
            return None
        x0 = src.items[0]
        if type(x0) is not np.ndarray or x0.ndim != 2 or x0.dtype != w.dtype or any(
                type(a) is not np.ndarray or a.shape != x0.shape or a.dtype != x0.dtype
                for a in src.items):
            return None
        t, (b, f) = len(src.items), x0.shape
    else:  # GatherV2 along axis 0
        a = _index(axis)
        if a is None or a != 0 or type(src) is not np.ndarray or src.ndim != 3 \
                or src.dtype != w.dtype:
            return None
        t, b, f = src.shape
    k, n = (w.shape[1], w.shape[0]) if tb else w.shape
    if k != f or t * b == 0:
        return None  # (the kernels word a mismatch)
    if bias is not None and (type(bias) is not np.ndarray or bias.shape != (n,)
                             or bias.dtype != w.dtype):
        return None
    if limit is not None and max(t * b * n, t * b * f) * w.itemsize > limit:
        return None  # over the per-tensor limit: each iteration's product is its own
    if axis is None:
        x = np.stack(src.items, out=pool.take((t, b, f), w.dtype))
    else:
        x = src if src.flags.c_contiguous else np.ascontiguousarray(src)
    p = pool.take((t, b, n), w.dtype)
    if t >= MIN_STEPS and t * b * f * n >= CHUNKED_MACS:
        # in blocks of time steps, the later ones on a second core where one is free
        return blocked_product(x.reshape(t * b, f), w.T if tb else w, bias, p, b) or p
    flat = np.matmul(x.reshape(t * b, f), w.T if tb else w, out=p.reshape(t * b, n))
    if bias is not None:
        np.add(flat, bias, flat)  # (as the _FusedMatMul kernel adds it to its product)
    return p
