"""Scalar calls two lockstep loops compute once (tfg/executor/loop_pairs.py runs the loops).

    Before, each pair-iteration of a Keras BiLSTM:   loop A: i < 20, t < n, and, i + 1, t + 1
                                                     loop B: i < 20, t < n, and, i + 1, t + 1
    After: A's five calls; B's output slots take A's results (the same numpy scalars).

The two directions count 0, 1, 2, ... against the same limits, but nothing in the graph says
so: the check is made at run time, call by call. Two calls at the same place of their lists
are merged when they are the same kernel with the same attrs (an op of math_ops.SCALAR_OPS:
binary, stateless); each iteration the merged call is computed once where its two inputs
are the same object, equal numbers of one integer or bool type (where == means the same
bits: no -0.0 == 0.0, no NaN) or, for values the graph fixes (Consts), equal 0-d arrays of
one integer or bool dtype. An equal input of B's is replaced by A's object, so later
iterations find the same object. B's output takes A's result only when it is an immutable
number (a numpy scalar, a Python int, float or bool: nothing writes into those); else, or
where an input differs, both calls run. Same kernel, attrs and inputs give the same value
and the same error: an error of A's call drops the pair, whose sequential re-run raises it,
named by its own node.
"""
import numpy as np

from tfg.kernels.math_ops import SCALAR_OPS  # (binary, stateless: the loops' scalar paths)
from tfg.kernels.registry import get_kernel

# types whose == means equal bits
_EXACT = frozenset({bool, int, np.bool_, np.int8, np.int16, np.int32, np.int64, np.uint8,
                    np.uint16, np.uint32, np.uint64})
# results nothing writes into
_IMMUTABLE = _EXACT | {float, np.float16, np.float32, np.float64}


def merged(lst_a, lst_b, pa, pb):
    """((fa, fb), ...) to run in order for the (call, item) lists of programs pa and pb: a
    shared call is (f, None), f(vals_a, vals_b, step); the others (call_a, call_b), where a
    call may be _skip. Each program's calls keep their order."""
    if len(lst_a) != len(lst_b):
        return (tuple((c, _skip) for c, _ in lst_a)
                + tuple((_skip, c) for c, _ in lst_b))
    out = []
    for (ca, ia), (cb, ib) in zip(lst_a, lst_b):
        f = _shared(ca, ia, pa, cb, ib, pb)
        out.append((ca, cb) if f is None else (f, None))
    return tuple(out)


def _skip(vals, step):
    pass


def _equal_array(x, y):
    """Whether x and y are 0-d integer or bool arrays of one dtype and value."""
    return (type(x) is np.ndarray and type(y) is np.ndarray and x.ndim == 0 and y.ndim == 0
            and x.dtype == y.dtype and x.dtype.kind in "biu" and bool(x == y))


def _kernel(it):
    ctx = it.ctx
    if it.kind != "kernel" or ctx is None or ctx.xp is not np:
        return None
    fn = getattr(it.fn, "__wrapped__", it.fn)
    return fn if fn is get_kernel(it.op, "CPU").fn else None


def _shared(ca, ia, pa, cb, ib, pb):
    """f(vals_a, vals_b, step) computing the two calls as one where their inputs agree, or
    None where the two calls are not the same kernel with the same attrs."""
    if ia.op != ib.op or ia.op not in SCALAR_OPS:
        return None
    sa, sb = pa.call_slots.get(ia.id), pb.call_slots.get(ib.id)
    if sa is None or sb is None or sa[2] is not ca or sb[2] is not cb:
        return None  # (a call a later pass replaced: its slots are not these)
    (ins_a, outs_a, _), (ins_b, outs_b, _) = sa, sb
    if len(ins_a) != 2 or len(ins_b) != 2 or len(outs_a) != 1 or len(outs_b) != 1:
        return None
    fa = _kernel(ia)
    if fa is None or fa is not _kernel(ib) or ia.needs_step or ib.needs_step:
        return None
    try:
        if not bool(ia.ctx.attrs == ib.ctx.attrs):
            return None
    except Exception:  # noqa: BLE001 - attrs that do not compare: not merged
        return None
    (a0, a1), (b0, b1), oa, ob = ins_a, ins_b, outs_a[0], outs_b[0]
    # 0-d arrays are taken only where both slots hold values the graph fixes (Consts: no
    # kernel writes into them), so B's kept values (LoopProgram.fixed) never hold a fed array
    arrays = [a in pa.fixed_slots and b in pb.fixed_slots for a, b in ((a0, b0), (a1, b1))]
    arrays0, arrays1 = arrays
    exact, immutable = _EXACT, _IMMUTABLE

    def shared(va, vb, step):
        x, y = va[a0], vb[b0]
        if x is not y:
            if not (type(x) is type(y) and type(x) in exact and x == y
                    or arrays0 and _equal_array(x, y)):
                ca(va, step)
                cb(vb, step)
                return
            vb[b0] = x  # (the same object from now on)
        x, y = va[a1], vb[b1]
        if x is not y:
            if not (type(x) is type(y) and type(x) in exact and x == y
                    or arrays1 and _equal_array(x, y)):
                ca(va, step)
                cb(vb, step)
                return
            vb[b1] = x
        ca(va, step)
        r = va[oa]
        if type(r) in immutable:
            vb[ob] = r
        else:
            cb(vb, step)
    shared.__name__ = f"shared_{ia.op}"
    return shared
