"""A fused chain's elementwise members run as one compiled program (tfg/kernels/program_loops.py)
instead of one numpy call each: the cells of Keras LSTM, GRU and BiLSTM loops.

    Before (a Keras LSTM cell of 8x64, an iteration, tfg/executor/fused_steps.py):
      h @ U; + xW; + b; Split (a copy into blocks); Sigmoid over the blocks; Tanh; Mul; Mul;
      Add; Tanh; Mul                                      11 numpy calls, about 25 us
    After:
      h @ U                                               the MatMul, as before
      run_program(code, (h@U, xW, b, c), (), regs, outs)  one call: loads, 15 register ops,
                                                          2 stores, about 8 us
      c, h = views of outs                                what the loop reads after the chain

`program(members, escaping, pre)` plans once per chain (which members are elementwise, which
slots are read from outside them); the first call with a new signature (the inputs' shapes,
a Split's axis, a slice's bounds) lays the values out in registers: each value is an array
of leading shape L and a last axis of k*C elements, held as k registers of the G*R*C
elements of one column block (C: the narrowest value's last axis). A Split or a column slice
is then a choice of registers, not a copy; an input that broadcasts (a bias, a [B, 1] mask,
a scalar 1) is read with stride 0. A signature that does not fit the layout (another
broadcast, a slice of rows, a dtype other than float32) keeps the chain's numpy steps.

Members taken: float ufuncs Add, Sub, Mul, RealDiv and Neg, Sigmoid, Tanh, TanhGrad,
SigmoidGrad, AddN (its operands of one shape, summed in the kernel's order), BiasAdd,
Split along the last axis, StridedSlice of a column block, Select/SelectV2 (Select's vector
condition picks rows, as its kernel does); before them, the chain's MatMuls as their own steps
(`pre`), when no MatMul reads an elementwise member; after them, any other StridedSlice that
no member reads, as the step's view of its stored source (an attention decoder's output).
Values are the numpy steps' bit for bit (program_loops.py), and the program runs where the
steps would use compiled Sigmoid and Tanh loops: float32, compiled loops wanted and warm
(tfg/kernels/vector_math.py). `TFG_CHAIN_PROGRAMS=0` turns programs off.

Only the values read after the chain (`escaping`) are written back, as views of one fresh
array a call; the rest live in the call's registers.
"""
import math
import os

import numpy as np

from tfg.kernels import jit, math_ops, nn_ops, vector_math
from tfg.kernels import program_codes as PC
from tfg.kernels.indexing_ops import strided_slice_index

ENV_VAR = "TFG_CHAIN_PROGRAMS"
# The program's input tuples, padded to one of few lengths (a compiled signature each):
# float inputs to INPUT_TIERS' first that holds them (a TF1 LSTMCell's gradient reads 9),
# masks to MAX_MASKS.
INPUT_TIERS, MAX_MASKS = (8, 16), 2
MAX_INPUTS = INPUT_TIERS[-1]
_GIVE_UP = 8  # calls in a row whose signature does not fit: the steps from then on
# Fewer elementwise members (Split and slices counted): the numpy steps cost less than a
# program, whose call pays about 4 us before its first instruction. Measured hot on 8x64
# float32 (a TF1 GRUCell's training step): 3-4 members 4.0-10.0 us as steps, 5.7-12.7 as
# programs; its 5-member gate 20.7 against 19.3; a 12-17 member LSTM or GRU cell 39-63
# against 17-34.
MIN_MEMBERS = 5
MAX_REGISTER_FLOATS = 1 << 22  # registers of a call at most (16 MB): else the numpy steps
_CACHE = 16  # signatures kept per chain

_F32, _BOOL = np.dtype(np.float32), np.dtype(np.bool_)
_ndarray = np.ndarray
_state = {}  # "loops": the program_loops module once loaded, or None where it cannot load

# kind -> the members' roles of their inputs ("f" float operand, "m" mask, "a" axis, "b"
# a slice bound)
_ROLES = {"split": "af", "select": "mff", "slice": "fbbb"}


# the ufuncs a program computes as their kernels do, and their instructions
_UFUNCS = {np.add: PC.ADD, np.subtract: PC.SUB, np.multiply: PC.MUL, np.true_divide: PC.DIV,
           np.negative: PC.NEG, math_ops.tanh_into: PC.TANH,
           nn_ops.tanh_grad_into: PC.TANH_GRAD, nn_ops.sigmoid_grad_into: PC.SIGMOID_GRAD}


def wanted():
    return os.environ.get(ENV_VAR, "1") != "0"


def _loops():
    """program_loops, where vector_math's Sigmoid and Tanh loops run now (compiled loops
    wanted and warm), else None: the program's values are theirs."""
    vl = vector_math._loaded[0] if vector_math._loaded else vector_math._loops()
    if vl is None:
        return None  # (not warm yet, numba absent, or its loops held off)
    hit = _state.get("loops", False)
    if hit is not False:
        return hit
    try:
        from tfg.kernels import program_loops  # lazy: imports numba
    except Exception as e:  # noqa: BLE001 - a numba without what the loop uses
        jit.turn_off(f"the chain program loop could not load ({type(e).__name__}: {e})")
        _state["loops"] = None
        return None
    _state["loops"] = program_loops
    return program_loops


class _Unfit(Exception):
    """This signature does not fit a program: the numpy steps run."""


def program(members, escaping, pre=(), batched=False):
    """run(vals) -> bool for the chain `members` [(kind, fn, input slots, output slots)] in a
    dependency order (loop_fusion.py's kinds), `escaping` the slots read after the chain,
    `pre` the steps of its MatMul members (run first). `batched`: the values are two loops'
    stacked (tfg/executor/batched_chain.py): a Split's axis counts from the second axis, a
    BiasAdd's bias is one row per loop ([2, C] on [2, B, C]). None where the
    chain has a member not taken here, or too few elementwise ones. run(vals) False: nothing
    of the chain's values written but what `pre` wrote (the caller runs its steps)."""
    if not wanted():
        return None
    region = [m for m in members if m[0] not in ("matmul", "fmatmul")]
    if len(region) < MIN_MEMBERS or len(region) + len(pre) != len(members):
        return None
    made = set()
    for kind, fn, ins, outs in region:
        if kind == "ufunc" and fn not in _UFUNCS:
            return None
        if kind not in ("ufunc", "sigmoid", "bias", "split", "select", "slice", "addn"):
            return None
        made.update(outs)
    for kind, _, ins, _ in members:
        if kind in ("matmul", "fmatmul") and any(s in made for s in ins):
            return None  # a MatMul of an elementwise value: not before the program
    floats, masks, consts = [], [], []  # input slots by role, in order of first use
    uses = {}
    for kind, fn, ins, outs in region:
        for s in ins:
            uses[s] = uses.get(s, 0) + 1
    for kind, fn, ins, outs in region:
        if kind == "bias" and batched and uses[ins[1]] > 1:
            return None  # (its [G, C] read as [G, 1, C]: not numpy's broadcast elsewhere)
        roles = _ROLES.get(kind, "f" * len(ins))
        if len(roles) != len(ins):
            return None
        for role, s in zip(roles, ins):
            if s in made:
                if role != "f":
                    return None  # an axis, bound or mask computed in the chain
                continue
            group = floats if role == "f" else masks if role == "m" else consts
            if s not in group:
                group.append(s)
    if len(floats) > MAX_INPUTS or len(masks) > MAX_MASKS or set(floats) & set(masks):
        return None
    out_slots = tuple(s for s in dict.fromkeys(escaping) if s in made)
    return _runner(tuple(region), tuple(pre), tuple(floats), tuple(masks), tuple(consts),
                   out_slots, batched)


def _runner(region, pre, floats, masks, consts, out_slots, batched):
    """run(vals) of program(). A call checks its inputs against the signature of the last
    call (each input's shape and dtype, the consts' identity) and runs; another signature
    looks up or makes its plan. A signature the layout does not take runs the steps, and
    after _GIVE_UP such calls in a row the program is no longer tried (its MatMuls would
    run twice a call)."""
    plans = {}  # signature -> _Plan, or None where the layout does not take it
    slots = floats + masks
    nf = len(floats)
    pad_x = (np.zeros((1, 1), _F32),) * (next(t for t in INPUT_TIERS if t >= nf) - nf)
    pad_m = (np.zeros((1, 1), np.bool_),) * (MAX_MASKS - len(masks))
    last = [None]  # the last call's plan: checked first
    held = [None] * len(slots)  # (read-only input, its C-contiguous copy): a Const's bias
    unfit = [0]  # calls in a row whose signature the layout did not take
    lookups = [0]  # calls that did not match the last call's signature (for the tests)
    empty, ndarray = np.empty, _ndarray

    def plan_for(vals):
        """The plan of these values' signature (made at its first call), or None."""
        lookups[0] += 1
        values = [vals[s] for s in slots]
        for i, x in enumerate(values):
            if type(x) is not ndarray:
                if not isinstance(x, np.generic):
                    return None
                values[i] = np.asarray(x)  # (a scalar Const: 0-d)
        cv = tuple(vals[s] for s in consts)
        if any(x.dtype != (_F32 if i < nf else _BOOL) for i, x in enumerate(values)):
            return None
        key = tuple(x.shape for x in values) + tuple(
            v if type(v) is int else id(v) for v in cv)
        plan = plans.get(key, False)
        if plan is False or (plan is not None and not all(
                _same(a, b) for a, b in zip(plan.consts, cv))):
            if len(plans) >= _CACHE:
                plans.clear()
            try:
                plan = _Plan(region, floats, masks, consts, out_slots,
                             [x.shape for x in values[:nf]], [m.shape for m in values[nf:]],
                             cv, batched)
            except _Unfit:
                plan = None
            plans[key] = plan
        return plan

    def run(vals):
        loaded = vector_math._loaded  # (read each call: a test may hold its loops off)
        loops = _state.get("loops") if loaded and loaded[0] is not None else None
        if loops is None:
            loops = _loops()  # (vector_math's loops held off, or not loaded yet)
            if loops is None:
                return False
        if unfit[0] >= _GIVE_UP:
            return False
        for f in pre:
            f(vals)  # (its Fallback is the caller's)
        plan = last[0]
        arrs = []
        if plan is not None:
            for s, shape, shape2, dt in plan.inputs:
                x = vals[s]
                if type(x) is not ndarray:
                    if not isinstance(x, np.generic):
                        break
                    x = np.asarray(x)  # (a scalar Const: 0-d)
                if x.shape != shape or x.dtype is not dt:
                    break
                arrs.append(x if shape == shape2 else x.reshape(shape2))
            else:
                for s, c in zip(consts, plan.consts):
                    v = vals[s]
                    if v is not c and not _same(v, c):
                        plan = None
                        break
            if len(arrs) != len(slots):
                plan = None
        if plan is None:
            plan = last[0] = plan_for(vals)
            if plan is None:
                unfit[0] += 1
                return False
            arrs = [np.asarray(vals[s]).reshape(shape2) for s, _, shape2, _ in plan.inputs]
        unfit[0] = 0
        for i, x in enumerate(arrs):
            if not x.flags.carray:  # (C order, aligned, writable: what numba is given)
                src = vals[slots[i]]
                h = held[i]
                if h is not None and h[0] is src:
                    arrs[i] = h[1]
                else:
                    c = arrs[i] = np.array(x, order="C")
                    if not x.flags.writeable:
                        held[i] = (src, c)
        outs = empty(plan.out_shape, _F32)
        try:
            loops.run_program(plan.code, tuple(arrs[:nf]) + pad_x, tuple(arrs[nf:]) + pad_m,
                              outs.reshape(-1), plan.nregs, plan.G, plan.R, plan.C)
        except Exception as e:  # noqa: BLE001 - numba's (typing, lowering): see jit.call
            jit.turn_off(f"{type(e).__name__} compiling run_program")
            _state["loops"] = None
            return False
        if plan.out_views is None:
            for slot, at, size, shape in plan.outs:
                vals[slot] = outs[at:at + size].reshape(shape)
        else:
            for slot, k in plan.out_views:
                vals[slot] = outs[k]
        for slot, src, index in plan.post:
            vals[slot] = vals[src][index]
        return True
    run.plans, run.lookups = plans, lookups
    return run


def _same(a, b):
    """Whether a const operand (a Split's axis, a slice's bounds) is the one a plan was made
    for: the same object (a Const's array), or an int of the same value (a batched axis)."""
    return a is b or (type(a) is int and type(b) is int and a == b)


def _broadcast(a, b):
    try:
        return tuple(np.broadcast_shapes(a, b))
    except ValueError:
        raise _Unfit from None


class _Plan:
    """The register layout and code of one signature (see the module docstring)."""

    def __init__(self, region, floats, masks, consts, out_slots, fshapes, mshapes, cvals,
                 batched):
        shape = {}  # slot -> its shape, as numpy broadcasts it (a batched bias: [G, 1, C])
        for s, sh in zip(floats, fshapes):
            shape[s] = tuple(sh)
        for s, sh in zip(masks, mshapes):
            shape[s] = tuple(sh)
        const = dict(zip(consts, cvals))
        made = {}  # computed slot -> its shape
        read = {t for _, _, ins, _ in region for t in ins}
        self.post = []  # (slot, source slot, index): slices taken after the program
        rows_of = set()  # vector masks of Selects that pick rows (read as [B, 1, ...])
        views = {}  # split piece / slice slot -> (source slot, first column, width)
        for kind, fn, ins, outs in region:
            if kind == "split":
                axis = const[ins[0]]
                if type(axis) is not int:
                    if getattr(axis, "ndim", 1) != 0 or axis.dtype.kind not in "iu":
                        raise _Unfit
                    axis = int(axis)
                src = shape.get(ins[1])
                n = len(outs)
                rank = len(src) - 1 if batched else len(src)  # (the stack's axis 0 apart)
                if not rank or axis not in (-1, rank - 1) or src[-1] % n:
                    raise _Unfit
                w = src[-1] // n
                for p, o in enumerate(outs):
                    made[o] = shape[o] = src[:-1] + (w,)
                    views[o] = (ins[1], p * w, w)
            elif kind == "slice":
                src = shape.get(ins[0])
                attrs, limit = fn
                if not src or (limit is not None and 4 * math.prod(src) > limit):
                    raise _Unfit
                bounds = [const[s] for s in ins[1:]]
                try:
                    first, w = _column_block(src, bounds, attrs)
                except _Unfit:
                    if outs[0] in read:
                        raise
                    # read by no member: sliced from its source after the program, as
                    # the step slices it (a decoder's output taken apart for its attention)
                    self.post.append((outs[0], ins[0], _slice_index(src, bounds, attrs)))
                    shape[outs[0]] = None
                    continue
                made[outs[0]] = shape[outs[0]] = src[:-1] + (w,)
                views[outs[0]] = (ins[0], first, w)
            elif kind == "select":
                m = ins[0]
                ms, xs, ys = (shape[s] for s in ins)
                if (not fn and not batched and len(ms) == 1 and len(xs) > 1
                        and ms[0] == xs[0]):
                    # Select's vector condition picks whole rows (a TF1 dynamic_rnn's
                    # sequence_length mask): as a [B, 1, ...] mask would
                    ms = shape[m] = (ms[0],) + (1,) * (len(xs) - 1)
                    rows_of.add(m)
                elif m in rows_of and (fn or len(ms) != len(xs)):
                    raise _Unfit  # (read as rows above, another broadcast here)
                if xs != ys or not (ms == xs or (len(ms) <= len(xs)
                                                 and _broadcast(ms, xs) == xs
                                                 and (fn or m in rows_of))):
                    raise _Unfit
                made[outs[0]] = shape[outs[0]] = xs
            elif kind == "bias":
                xs, bs = shape[ins[0]], shape[ins[1]]
                if batched:  # [G, C] on [G, B, C]
                    if len(xs) != 3 or len(bs) != 2 or bs[1] != xs[2] or bs[0] not in (1, xs[0]):
                        raise _Unfit
                    shape[ins[1]] = (bs[0], 1, bs[1])
                elif len(xs) < 2 or len(bs) != 1 or bs[0] != xs[-1]:
                    raise _Unfit
                made[outs[0]] = shape[outs[0]] = xs
            elif kind == "addn":  # (operands of one shape, as TensorFlow's AddN takes)
                sh = shape[ins[0]]
                if any(shape[s] != sh for s in ins[1:]):
                    raise _Unfit
                made[outs[0]] = shape[outs[0]] = sh
            else:  # ufunc, sigmoid
                sh = shape[ins[0]]
                for s in ins[1:]:
                    t = _broadcast(sh, shape[s])
                    if t != sh and t != shape[s]:
                        raise _Unfit  # larger than every operand: the memory guard's case
                    sh = t
                made[outs[0]] = shape[outs[0]] = sh
        # the layout: every computed value of one leading shape L and a last axis of k*C
        lead = {sh[:-1] for sh in made.values()}
        if len(lead) != 1 or not all(sh and sh[-1] for sh in made.values()):
            raise _Unfit
        L = lead.pop()
        C = min(sh[-1] for sh in made.values())
        if any(sh[-1] % C for sh in made.values()):
            raise _Unfit
        operands = [shape[s] for s in floats] + [shape[s] for s in masks]
        s = _split_point(L, operands)
        G, R = math.prod(L[:s]), math.prod(L[s:])
        self.G, self.R, self.C, self.n = G, R, C, G * R * C
        forms = {x: _form(shape[x], L, s, G, R) for x in list(floats) + list(masks)}
        index = {x: i for i, x in enumerate(floats)}
        index.update((m, i) for i, m in enumerate(masks))
        code = []
        regs = {}  # slot -> its registers, one per column block of C
        loaded = {}  # (input slot, column, column step) -> register
        count = [0]

        def fresh():
            count[0] += 1
            return count[0] - 1

        def operand(slot, k):
            """The k registers of `slot` as an operand of a value of k blocks."""
            if slot in regs:
                r = regs[slot]
                if len(r) != k:
                    raise _Unfit
                return r
            if slot in views:
                src, first, w = views[slot]
                if first % C or w != k * C:
                    raise _Unfit
                whole = operand(src, shape[src][-1] // C)
                r = regs[slot] = whole[first // C:first // C + k]
                return r
            width = shape[slot][-1] if shape[slot] else 1
            gs, rs = forms[slot][1:]
            op = PC.LOADM if slot in masks else PC.LOAD
            out = []
            for p in range(k):
                col, cstep = (0, 0) if width == 1 else (p * C, 1)
                if width not in (1, k * C):
                    raise _Unfit
                key = (slot, col, cstep)
                if key not in loaded:
                    loaded[key] = fresh()
                    code.append((op, loaded[key], index[slot], col, cstep, gs, rs, 0))
                out.append(loaded[key])
            return out

        for kind, fn, ins, outs in region:
            if kind in ("split", "slice"):
                continue  # views: their registers are their source's (operand())
            o = outs[0]
            k = made[o][-1] // C
            if kind == "select":
                m, x, y = (operand(t, k) for t in ins)
                regs[o] = [fresh() for _ in range(k)]
                code.extend((PC.SELECT, d, a, b, c, 0, 0, 0)
                            for d, a, b, c in zip(regs[o], m, x, y))
                continue
            args = [operand(t, k) for t in ins]
            if kind == "addn":  # the kernel's order: the first two, then each next one
                regs[o] = [fresh() for _ in range(k)]
                for p, d in enumerate(regs[o]):
                    acc = args[0][p]
                    for j in range(1, len(args)):
                        dst = d if j == len(args) - 1 else fresh()
                        code.append((PC.ADD, dst, acc, args[j][p], 0, 0, 0, 0))
                        acc = dst
                continue
            op = (PC.SIGMOID if kind == "sigmoid" else PC.ADD if kind == "bias"
                  else _UFUNCS[fn])
            regs[o] = [fresh() for _ in range(k)]
            for p, d in enumerate(regs[o]):
                code.append((op, d) + tuple(a[p] for a in args) + (0,) * (6 - len(args)))
        self.outs = []
        at = 0
        post_outs = {o for o, _, _ in self.post}
        stored = [t for t in out_slots if t not in post_outs]
        stored += [src for _, src, _ in self.post if src in made and src not in stored]
        for slot in stored:
            sh = made[slot]
            r = operand(slot, sh[-1] // C)
            size = math.prod(sh)
            for p, reg in enumerate(r):
                code.append((PC.STORE, reg, at, sh[-1], p * C, 0, 0, 0))
            self.outs.append((slot, at, size, sh))
            at += size
        # outputs of one shape (an LSTM's h and c): one [n, ...] array, each a row of it
        shapes = {o[3] for o in self.outs}
        if len(shapes) == 1:
            self.out_shape = (len(self.outs),) + shapes.pop()
            self.out_views = tuple((o[0], k) for k, o in enumerate(self.outs))
        else:
            self.out_shape, self.out_views = (at,), None
        # (slot, its shape, its 2D form, its dtype) of each input, floats then masks
        self.inputs = tuple((x, tuple(sh), forms[x][0], _F32 if i < len(floats) else _BOOL)
                            for i, (x, sh) in enumerate(zip(list(floats) + list(masks),
                                                            list(fshapes) + list(mshapes))))
        self.consts = tuple(cvals)
        self.nregs = max(count[0], 1)
        if self.nregs * self.n > MAX_REGISTER_FLOATS:
            raise _Unfit
        self.code = np.array(code, np.int64).reshape(-1, PC.WIDTH)


def _status(sh, L):
    """Per leading axis of L: 'f' (the operand has it), 'b' (broadcast), '-' (L's is 1)."""
    lead = sh[:-1] if sh else ()
    if len(lead) > len(L):
        raise _Unfit
    lead = (1,) * (len(L) - len(lead)) + tuple(lead)
    out = []
    for d, e in zip(lead, L):
        if e == 1:
            out.append("-")
        elif d == e:
            out.append("f")
        elif d == 1:
            out.append("b")
        else:
            raise _Unfit
    return out


def _uniform(marks):
    m = set(marks) - {"-"}
    return len(m) <= 1


def _split_point(L, shapes):
    """The s for which every operand has all or none of L[:s], and all or none of L[s:]."""
    st = [_status(sh, L) for sh in shapes]
    for s in range(len(L) + 1):
        if all(_uniform(m[:s]) and _uniform(m[s:]) for m in st):
            return s
    raise _Unfit


def _form(sh, L, s, G, R):
    """(its 2D shape, group stride, row stride) of an operand of shape `sh` (numpy's
    broadcast view) read over the leading groups G = prod(L[:s]) and rows R = prod(L[s:])."""
    st = _status(sh, L)
    gfull, rfull = "f" in st[:s], "f" in st[s:]
    rows = (G if gfull else 1) * (R if rfull else 1)
    cols = sh[-1] if sh else 1
    gs = (R if rfull else 1) if gfull else 0
    return (rows, cols), gs, (1 if rfull else 0)


def _slice_index(shape, bounds, attrs):
    """The numpy index of a StridedSlice of these Const bounds (the step's), or _Unfit."""
    if len(bounds) != 3 or not shape:
        raise _Unfit
    try:
        return strided_slice_index(shape, *bounds, attrs)
    except Exception:  # noqa: BLE001 - the kernel's error to word, by the steps
        raise _Unfit from None


def _column_block(shape, bounds, attrs):
    """(first column, width) where a StridedSlice of these Const bounds takes, of an array of
    `shape`, whole leading axes and one run of columns of the last axis; else _Unfit."""
    index = _slice_index(shape, bounds, attrs)
    cells = np.arange(math.prod(shape)).reshape(shape)
    try:
        got = cells[index]
    except Exception:  # noqa: BLE001 - the kernel's error to word, by the steps
        raise _Unfit from None
    if got.shape[:-1] != tuple(shape[:-1]) or got.ndim != len(shape) or not got.shape[-1]:
        raise _Unfit
    first = int(got.reshape(-1)[0]) % shape[-1]
    w = got.shape[-1]
    if not np.array_equal(got, cells[..., first:first + w]):
        raise _Unfit
    return first, w
