"""Two isomorphic fused chains (tfg/executor/loop_fusion.py) run as one: each step once on
the two chains' operands stacked along a new leading axis (tfg/executor/loop_pairs.py runs
the two directions of a Keras Bidirectional layer in lockstep and calls this once an
iteration instead of each direction's chain).

    Before (an iteration of a masked BiLSTM, each direction's chain in turn):
      fwd: h @ U (8x32 @ 32x128), + xW, + b, Split, Sigmoid, Tanh, ..., 3 Selects
      bwd: the same on its own operands: ~40 numpy calls
    After: H @ U2 (2x8x32 @ 2x32x128, one np.matmul), + XW2, + B2, ...: ~22 numpy calls on
      the stacked operands; the values read outside the chain are views of the rows

Values are the chains' own, bit for bit: the same elementwise numpy functions on the same
elements (np.matmul on a stack multiplies each pair as it multiplies two matrices), a Split's
pieces as views, a Select as a copy then a masked copy. Where the operands are not what the
steps take (two shapes or dtypes, a broadcast other than a Select's mask, a Sigmoid input
below its overflow floor), `run` returns False having written nothing: the caller runs the
two chains, whose own fallbacks decide. Stacks of the same two objects as last time (the
weights, the states the last iteration made) are not copied again.
"""
import numpy as np

from tfg.kernels.math_ops import sigmoid_into

ndarray = np.ndarray


class Fallback(Exception):
    """The stacked steps do not take these operands."""


def batched(ca, cb):
    """run(va, vb) -> bool for the fused chains `ca` (of one loop's slots va) and `cb` (of
    the other's), or None where they are not the same chain or hold a step not done here."""
    ia, ib = getattr(ca, "io", None), getattr(cb, "io", None)
    if ia is None or ib is None or len(ia) != len(ib):
        return None
    index = {}  # (slot of A, slot of B) -> index in the stacked values
    external = []  # (index, slot of A, slot of B, role)
    roles = {}
    made = [{}, {}]  # slot -> index, for A and B: what a member produced
    plan = []
    for (ita, ka, ins_a, outs_a), (itb, kb, ins_b, outs_b) in zip(ia, ib):
        if ita.op != itb.op or ka != kb or len(ins_a) != len(ins_b) or len(outs_a) != len(
                outs_b):
            return None
        kind, fn = ka
        ins = []
        for pos, (sa, sb) in enumerate(zip(ins_a, ins_b)):
            pa, pb = made[0].get(sa), made[1].get(sb)
            if pa is not None or pb is not None:
                if pa != pb:
                    return None
                ins.append(pa)
                continue
            role = ("axis" if kind == "split" and pos == 0 else
                    "mask" if kind == "select" and pos == 0 else "float")
            k = index.get((sa, sb))
            if k is None:
                k = index[(sa, sb)] = len(index)
                external.append((k, sa, sb, role))
                roles[k] = role
            elif roles[k] != role:
                return None
            ins.append(k)
        outs = []
        for sa, sb in zip(outs_a, outs_b):
            k = index[("out", sa, sb)] = len(index)
            made[0][sa] = made[1][sb] = k
            outs.append(k)
        plan.append((kind, fn, ins, outs))
    escaping = []
    if len(ca.escaping) != len(cb.escaping):
        return None
    for sa, sb in zip(ca.escaping, cb.escaping):
        if made[0].get(sa) != made[1].get(sb):
            return None
        escaping.append((made[0][sa], sa, sb))
    steps = _steps(plan)
    if steps is None:
        return None
    return _runner(len(index), tuple(external), tuple(steps), tuple(escaping))


def _steps(plan):
    """The stacked steps of `plan` [(kind, fn, input indices, output indices)]; None where
    one is not done here. A Split whose pieces feed two or more Sigmoids takes one Sigmoid
    over its whole input (as fused_steps.split does), the Sigmoids then views of it."""
    piece_of = {}
    for n, (kind, _, ins, outs) in enumerate(plan):
        if kind == "split":
            piece_of.update((o, (n, p)) for p, o in enumerate(outs))
    whole = {}  # split member -> [(port, Sigmoid's output index)]
    for kind, _, ins, outs in plan:
        if kind == "sigmoid" and ins[0] in piece_of:
            n, p = piece_of[ins[0]]
            whole.setdefault(n, []).append((p, outs[0]))
    whole = {n: v for n, v in whole.items() if len(v) >= 2}
    skipped = {o for v in whole.values() for _, o in v}
    # Selects of one mask and one x (a masked RNN's new output and new state): one step at
    # the last of them, over a stack of their y's
    shared = {}
    for n, (kind, fn, ins, outs) in enumerate(plan):
        if kind == "select":
            shared.setdefault((ins[0], ins[1], fn), []).append(n)
    at = {}  # member -> the members of its shared select, at the last one
    for group in shared.values():
        if len(group) >= 2:
            at.update((n, None) for n in group)
            at[group[-1]] = group
    steps = []
    for n, (kind, fn, ins, outs) in enumerate(plan):
        if n in at:
            group = at[n]
            if group is not None:
                steps.append(_selects(ins[0], ins[1], tuple(plan[g][2][2] for g in group),
                                      tuple(plan[g][3][0] for g in group), fn))
            continue
        if kind == "ufunc":
            steps.append(_unary(fn, ins[0], outs[0]) if len(ins) == 1
                         else _binary(fn, ins[0], ins[1], outs[0]))
        elif kind == "sigmoid":
            if outs[0] not in skipped:
                steps.append(_sigmoid(ins[0], outs[0]))
        elif kind == "matmul" and not fn[0] and not fn[1]:
            steps.append(_matmul(ins[0], ins[1], outs[0], fn[2]))
        elif kind == "bias":
            steps.append(_bias(ins[0], ins[1], outs[0]))
        elif kind == "split":
            steps.append(_split(ins[0], ins[1], tuple(outs), tuple(whole.get(n, ()))))
        elif kind == "select":
            steps.append(_select(ins[0], ins[1], ins[2], outs[0], fn))
        else:
            return None
    return steps


def _runner(n, external, steps, escaping):
    empty, concatenate = np.empty, np.concatenate
    kept = {}  # external index -> (value of A, value of B, their stack): the same objects
    rows = {}  # external index -> projection slots (loop_pairs.py sets them: _row)

    def run(va, vb, last):
        """The stacked steps on va's and vb's values; the escaping values set in both as
        the rows of their stacks. `last`: {id(row of A): (row of A, row of B, stack)} of
        the previous call (its rows are this call's states), replaced. False: nothing done."""
        bv = [None] * n
        dt = None
        for k, sa, sb, role in external:
            a, b = va[sa], vb[sb]
            if role == "axis":
                if type(a) is not int:
                    if getattr(a, "ndim", 1) != 0 or a.dtype.kind not in "iu":
                        return False
                    a = int(a)
                if type(b) is not int:
                    if getattr(b, "ndim", 1) != 0 or b.dtype.kind not in "iu":
                        return False
                    b = int(b)
                if a != b:
                    return False
                bv[k] = a
                continue
            m = last.get(id(a))
            if m is not None and m[0] is a and m[1] is b:
                st = m[2]
            else:
                c = kept.get(k)
                if c is not None and c[0] is a and c[1] is b:
                    st = c[2]
                elif k in rows and (st := _row(rows[k], k, va, vb, kept)) is not None:
                    pass
                else:
                    if (type(a) is not ndarray or type(b) is not ndarray or a.shape != b.shape
                            or a.dtype is not b.dtype):
                        return False
                    if a.ndim:  # (one call: the two rows, then a view of them)
                        st = concatenate((a, b)).reshape((2,) + a.shape)
                    else:
                        st = empty((2,) + a.shape, a.dtype)
                        st[0] = a
                        st[1] = b
                    kept[k] = (a, b, st)
            if role == "float":
                if dt is None:
                    dt = st.dtype
                    if dt.kind != "f":
                        return False
                elif st.dtype is not dt:
                    return False
            bv[k] = st
        try:
            for f in steps:
                f(bv)
        except Fallback:
            return False
        last.clear()
        for k, sa, sb in escaping:
            st = bv[k]
            ra, rb = st[0], st[1]
            va[sa], vb[sb] = ra, rb
            last[id(ra)] = (ra, rb, st)
        return True
    run.kept = kept
    run.rows = rows
    run.external = external
    return run


def _row(slots, k, va, vb, kept):
    """The stack of the two projection rows P_a[i] and P_b[i] the loops' projected calls
    (tfg/executor/loop_projection.py) set this iteration, as a view of one [T, 2, B, N] copy
    of both projections made once a run (kept[('rows', k)]; `kept` is cleared each run), or
    None. `slots`: (state, index) slots of A's call, then of B's. The call sets its output to
    P[i] exactly when its kept tuple's P is an array and its index an int32 or int64 scalar
    in range: those conditions are tested here, so the view holds the rows' own values."""
    state_a, index_a, state_b, index_b = slots
    ha, hb = va[state_a], vb[state_b]
    if ha is None or hb is None:
        return None
    pa, pb = ha[4], hb[4]
    i, j = va[index_a], vb[index_b]
    t = type(i)
    if (pa is None or pb is None or (t is not np.int32 and t is not np.int64)
            or (i is not j and (type(j) is not t or i != j)) or not 0 <= i < pa.shape[0]):
        return None
    c = kept.get(("rows", k))
    if c is None or c[0] is not ha or c[1] is not hb:
        if pa.shape != pb.shape or pa.dtype is not pb.dtype:
            return None
        c = kept[("rows", k)] = (ha, hb, np.stack((pa, pb), axis=1))
    return c[2][i]


def _unary(fn, a, o):
    def step(bv):
        bv[o] = fn(bv[a])
    return step


def _binary(fn, a, b, o):
    def step(bv):
        x, y = bv[a], bv[b]
        if x.shape != y.shape:
            raise Fallback
        bv[o] = fn(x, y)
    return step


def _sigmoid(a, o):
    def step(bv):
        r = sigmoid_into(bv[a])
        if r is None:
            raise Fallback
        bv[o] = r
    return step


def _matmul(a, b, o, limit):
    mm = np.matmul

    def step(bv):
        x, y = bv[a], bv[b]
        if x.ndim != 3 or y.ndim != 3 or x.shape[2] != y.shape[1]:
            raise Fallback
        if limit is not None and x.shape[1] * y.shape[2] * x.itemsize > limit:
            raise Fallback
        bv[o] = mm(x, y)
    return step


def _bias(a, b, o):
    """x + bias along the last axis; the stacked bias tiled to x's shape once per (bias, shape)
    (numpy adds two contiguous arrays of one shape in its plain loop, a broadcast one
    through its iterator: the same float adds, as fused_steps.tiled)."""
    add = np.add
    last = [(None, None, None)]

    def step(bv):
        x, bias = bv[a], bv[b]
        if x.ndim != 3 or bias.ndim != 2 or bias.shape[1] != x.shape[2]:
            raise Fallback
        lb, ls, t = last[0]
        if lb is not bias or ls != x.shape:
            t = np.ascontiguousarray(np.broadcast_to(bias[:, None, :], x.shape))
            last[0] = (bias, x.shape, t)
        bv[o] = add(x, t)
    return step


def _split(axis, a, outs, sigmoids):
    """Split into len(outs) pieces along a constant axis. Along the last axis of a
    C-contiguous stack, the pieces are copied into one (n, ...) buffer of contiguous blocks
    (the same values; the ufuncs after it then take numpy's contiguous loops, as
    fused_steps.split's blocks); else views. `sigmoids`: ((port, output index), ...) of
    the Sigmoids of the pieces, taken as one Sigmoid over the whole."""
    n = len(outs)
    copyto, empty = np.copyto, np.empty
    forms = {}  # (shape, axis) -> (blocks form or None, piece indices)

    def form(shape, ax):
        r = len(shape) - 1
        if ax < 0:
            ax += r
        if not 0 <= ax < r or shape[ax + 1] % n:
            raise Fallback
        w = shape[ax + 1] // n
        lead = (slice(None),) * (ax + 1)
        index = tuple(lead + (slice(p * w, (p + 1) * w),) for p in range(n))
        blocks = None
        if ax == r - 1:
            nd = len(shape)
            blocks = (shape[:-1] + (n, w), (nd - 1,) + tuple(range(nd - 1)) + (nd,),
                      (n,) + shape[:-1] + (w,))
        if len(forms) > 16:
            forms.clear()
        f = forms[(shape, ax)] = (blocks, index)
        return f

    def step(bv):
        x, ax = bv[a], bv[axis]
        f = forms.get((x.shape, ax)) or form(x.shape, ax)
        blocks, index = f
        if blocks is not None and x.flags.c_contiguous:
            src = empty(blocks[2], x.dtype)
            copyto(src, x.reshape(blocks[0]).transpose(blocks[1]))
            for p, o in enumerate(outs):
                bv[o] = src[p]
            if sigmoids:
                s = sigmoid_into(src)
                if s is None:
                    raise Fallback
                for p, o in sigmoids:
                    bv[o] = s[p]
            return
        for o, i in zip(outs, index):
            bv[o] = x[i]
        if sigmoids:
            s = sigmoid_into(x)
            if s is None:
                raise Fallback
            for p, o in sigmoids:
                bv[o] = s[index[p]]
    return step


def _mask_fits(mshape, shape, broadcast):
    """Whether a Select's mask of `mshape` (another shape than its x's) broadcasts over all
    but the first axis, as the chain's verdict said it may."""
    return broadcast and all(d == 1 or d == e for d, e in zip(mshape[1:], shape[1:]))


def _select(c, a, b, o, broadcast):
    copyto, bool_ = np.copyto, np.bool_

    def step(bv):
        m, x, y = bv[c], bv[a], bv[b]
        shape = x.shape
        if m.dtype != bool_ or shape != y.shape or m.ndim != x.ndim:
            raise Fallback
        if m.shape != shape and not _mask_fits(m.shape, shape, broadcast):
            raise Fallback
        r = y.copy()
        copyto(r, x, where=m)
        bv[o] = r
    return step


def _selects(c, a, ys, outs, broadcast):
    """Selects of one mask and one x: where(m, x, y) for each y, as the rows of one stack
    (the y's copied in, then x where the mask is set: one masked copy for all). Where the
    y's are the rows the last call made (an RNN's states), one copy of that stack."""
    copyto, empty, bool_ = np.copyto, np.empty, np.bool_
    k = len(ys)
    made = [(None, ())]  # (the last stack made, its rows)

    def step(bv):
        m, x = bv[c], bv[a]
        shape = x.shape
        if m.dtype != bool_ or m.ndim != x.ndim:
            raise Fallback
        if m.shape != shape and not _mask_fits(m.shape, shape, broadcast):
            raise Fallback
        yv = [bv[y] for y in ys]
        last, rows = made[0]
        if last is not None and all(y is r for y, r in zip(yv, rows)):
            r = last.copy()
        else:
            r = empty((k,) + shape, x.dtype)
            for j, y in enumerate(yv):
                if y.shape != shape:
                    raise Fallback
                copyto(r[j], y)
        copyto(r, x, where=m)
        rows = tuple(r[j] for j in range(k))
        made[0] = (r, rows)
        for o, v in zip(outs, rows):
            bv[o] = v
    return step
