"""Chains of elementwise ops run as one call on one buffer (the fast path on a CPU).

    before: x -> Mul(., scale) -> AddV2(., shift) -> Relu -> y     3 calls, 3 new arrays
    after:  buf = multiply(x, scale); add(buf, shift, buf); relu(buf, out=buf)
            one prepared call, one new array (none when x is a fresh array read only here)

A chain is a run of nodes whose kernel is one numpy ufunc (Neg, Sin, Tanh, Mul, AddV2, ...;
RealDiv, Sqrt, Log on floats), or a Relu/Relu6 clamp, each reading the one before it and read by nothing else: not fetched,
no other reader, no control edge out. Binary members take their other operand ("side") from
anywhere. This is not a graph rewrite: the nodes stay, only the prepared call changes.

Per-channel Const operands (a batch norm's scale and shift) are tiled once per signature so the
in-place loop runs over rows of K*C elements, not C (chain_tiles.py): the same elements.

Exactness. The first call with a new input signature (type, dtype and shape of every input)
runs the member kernels one by one, as the unfused path does, and so gives their values and
their errors, naming the node. When every intermediate value was an array of the chain
input's dtype and shape, later calls with that signature apply the same ufuncs in place:
a ufunc's loop is chosen by its inputs' dtypes, so writing into `out` of the same dtype
computes the same elements. Otherwise (a dtype change, a broadcast, a numpy scalar) the chain
keeps running member by member.

With numexpr installed (the `perf` extra; TFG_NUMEXPR=0 turns it off), a long chain on tiny
float arrays that keeps its signature is run from its third run on as numexpr programs
(numexpr_chains.py): its values are then within float rounding of the kernels', not bit for
bit.
"""
import numpy as np

from tfg.executor import chain_tiles, numexpr_chains
from tfg.executor.calls import single
from tfg.executor.executor import node_error
from tfg.kernels import clamp, math_ops, nn_ops
from tfg.kernels.math_ops import array_kernel, quiet_float_kernel

# A later member runs as f(buf, buf), f(buf, side, out=buf) or f(side, buf, out=buf) (numpy
# deprecates a positional `out` for binary maximum/minimum).
UNARY, LEFT, RIGHT = 0, 1, 2
_ndarray = np.ndarray


def _relu_into(x, out=None):
    return clamp.relu(x, out=out)


def _relu6_into(x, out=None):
    return clamp.relu6(x, out=out)


# `base`: the function a wrapper computes (what numexpr_chains.py translates)
_relu_into.base, _relu6_into.base = clamp.relu, clamp.relu6


def _quiet(ufunc):
    """`ufunc` as RealDiv's and Log's kernels call it on floats: division by zero and invalid
    values neither warn nor raise."""
    if ufunc.nin == 1:
        def f(x, out=None):
            with np.errstate(divide="ignore", invalid="ignore"):
                return ufunc(x, out=out)
    else:
        def f(x, y, out=None):
            with np.errstate(divide="ignore", invalid="ignore"):
                return ufunc(x, y, out=out)
    f.__name__ = f"quiet_{ufunc.__name__}"
    f.base = ufunc
    return f


_QUIET = {}  # ufunc -> its _quiet form


def step_of(item):
    """(f, arity, floats only) when `item`'s kernel is `f` elementwise on numpy arrays, with
    `f(*args, out=out)` writing into `out` (floats only: `f` is the kernel on float operands
    only), else None."""
    if (item.ctx is None or item.ctx.xp is not np or item.deref or item.needs_step
            or item.ref_inputs or item.num_outputs != 1):
        return None
    fn = getattr(item.fn, "__wrapped__", item.fn)  # behind the memory check: the same kernel
    floats = False
    if fn is nn_ops.relu or fn is nn_ops.relu6:
        f, n = (_relu_into if fn is nn_ops.relu else _relu6_into), 1
    else:
        f = array_kernel(item.op, fn)
        if f is None:
            f = quiet_float_kernel(item.op, fn)
            floats = f is not None
        if f is math_ops.tanh_into:  # Tanh on floats: f(x, out=out) as a ufunc
            return (f, 1, True) if item.num_inputs == 1 else None
        if not isinstance(f, np.ufunc) or f.nout != 1:
            return None
        n = f.nin
        if floats:
            f = _QUIET.get(f) or _QUIET.setdefault(f, _quiet(f))
    return (f, n, floats) if n == item.num_inputs else None


class Chain:
    """Members in order (the last is the root, whose output leaves the chain) and, per later
    member, the input index that reads the member before it."""

    __slots__ = ("members", "links")

    def __init__(self, members, links):
        self.members, self.links = members, links


def find(kernels, ins, fetched, control_out):
    """{root id: Chain} for `kernels` (items in schedule order) with inputs `ins[id]`
    ((source id, port) each); `fetched`: the (id, port) pairs kept for the caller;
    `control_out`: ids that some node waits on by control edge."""
    by_id = {it.id: it for it in kernels}
    step = {it.id: step_of(it) for it in kernels}
    readers = {}  # (id, port) -> [(reader id, input index)]
    for it in kernels:
        for idx, src in enumerate(ins[it.id]):
            readers.setdefault(src, []).append((it.id, idx))
    nxt = {}  # member id -> (next member id, the input index of it that reads this one)
    for it in kernels:
        if step[it.id] is None or it.id in control_out or (it.id, 0) in fetched:
            continue
        r = readers.get((it.id, 0), ())
        if len(r) == 1 and step[r[0][0]] is not None:
            nxt[it.id] = r[0]
    later = {dst for dst, _ in nxt.values()}
    chains = {}
    for it in kernels:
        if step[it.id] is None or it.id in later:
            continue
        members, links = [it], []
        while members[-1].id in nxt:
            dst, idx = nxt[members[-1].id]
            members.append(by_id[dst])
            links.append(idx)
        chains[members[-1].id] = Chain(members, links)
    return chains


def external_inputs(chain, ins):
    """The chain's inputs in argument order: the first member's, then each later binary
    member's side."""
    out = list(ins[chain.members[0].id])
    for it, idx in zip(chain.members[1:], chain.links):
        out += [src for i, src in enumerate(ins[it.id]) if i != idx]
    return out


def fused_kernel(chain, writable, consts=None):
    """The chain as one kernel `fn(ctx, *inputs)` (inputs as `external_inputs` orders them);
    `writable[i]`: input i is a fresh array nothing else reads, which the chain may write;
    `consts[i]`: input i is a Const's value (the same read-only array every step), which a
    per-channel operand is tiled from once (chain_tiles.py)."""
    members = chain.members
    f0, n0, floats = step_of(members[0])
    steps = []  # (f, kind, argument index of the side, member index)
    arg = n0
    for k, (it, idx) in enumerate(zip(members[1:], chain.links), 1):
        f, n, only_floats = step_of(it)
        floats = floats or only_floats
        if n == 1:
            steps.append((f, UNARY, 0, k))
        else:
            steps.append((f, LEFT if idx == 0 else RIGHT, arg, k))
            arg += 1
    unary = [(f, k) for f, _, _, k in steps] if all(s[1] == UNARY for s in steps) else None
    state = [None]  # (x's argument index, its dtype, its shape, the other inputs' checks)
    accel = [None]  # the signature's numexpr_chains.Accelerator, if any
    tiles = [None]  # the signature's tiled per-channel operands (chain_tiles.plan), if any
    use_numexpr = numexpr_chains.wanted()

    def slow(args):
        """Member by member, as unfused; learns the signature when the chain can run in
        place."""
        it = members[0]
        try:
            v = single(it.fn(it.ctx, *args[:n0]))
            ok = type(v) is _ndarray and v.ndim > 0
            for f, kind, j, k in steps:
                it = members[k]
                a = (v,) if kind == UNARY else (v, args[j]) if kind == LEFT else (args[j], v)
                w = single(it.fn(it.ctx, *a))
                ok = ok and type(w) is _ndarray and w.dtype == v.dtype and w.shape == v.shape
                v = w
        except Exception as e:  # noqa: BLE001 - name the member that failed
            raise node_error(it.ctx, e) from e
        if ok and floats:  # a member's ufunc is its kernel on float operands only
            ok = all(getattr(a, "dtype", v.dtype).kind in "fc" for a in (v,) + tuple(args))
        if ok:
            state[0] = _signature(args, n0, v, writable)
            accel[0] = (numexpr_chains.accelerator(f0, n0, steps, args, v)
                        if use_numexpr and state[0] is not None else None)
            tiles[0] = (chain_tiles.plan(args, n0, steps, state[0][0], v, consts)
                        if consts and state[0] is not None else None)
        return v

    at = [0]  # the member chain_tiles.run is at (named if it raises)

    def run(ctx, *args):
        sig = state[0]
        if sig is None:
            return slow(args)
        xi, dtype, shape, others = sig
        x = args[xi]
        if (type(x) is not _ndarray or x.dtype is not dtype or x.shape != shape
                or (others and not _match(args, others))):
            return slow(args)
        if accel[0] is not None:
            v = accel[0](args)
            if v is not None:
                return v
        k = 0
        try:
            tp = tiles[0]
            if tp is not None:
                try:
                    v = chain_tiles.run(tp, f0, n0, steps, args, x,
                                        writable[xi] and x.flags.writeable, at)
                except Exception as e:  # noqa: BLE001 - name the member that raised
                    raise node_error(members[at[0]].ctx, e) from e
                if v is not None:
                    return v
            if writable[xi] and x.flags.writeable:
                buf = x
                f0(*args[:n0], out=buf)
            else:
                buf = f0(*args[:n0])
            if unary is not None:
                for f, k in unary:
                    f(buf, buf)
            else:
                for f, kind, j, k in steps:
                    if kind == UNARY:
                        f(buf, buf)
                    elif kind == LEFT:
                        f(buf, args[j], out=buf)
                    else:
                        f(args[j], buf, out=buf)
        except Exception as e:  # noqa: BLE001 - (np.seterr(all="raise"), memory)
            raise node_error(members[k].ctx, e) from e
        return buf

    run.__name__ = f"chain_{len(members)}"
    run.members = tuple(it.name for it in members)
    run.writable = tuple(writable)
    return run


def _signature(args, n0, v, writable):
    """What a later call must match to run in place: x (the first member's input of the
    result's dtype and shape, a writable one first) and every other input's type, dtype and
    shape; None when no input qualifies or an input is not a numpy value."""
    cands = [i for i in range(n0) if type(args[i]) is _ndarray and args[i].dtype == v.dtype
             and args[i].shape == v.shape]
    if not cands:
        return None
    xi = max(cands, key=lambda i: writable[i])
    others = []
    for i, a in enumerate(args):
        if i == xi:
            continue
        if type(a) is _ndarray:
            others.append((i, _ndarray, a.dtype, a.shape))
        elif isinstance(a, np.generic):
            others.append((i, type(a), None, None))
        else:
            return None
    return xi, args[xi].dtype, args[xi].shape, tuple(others)


def _match(args, others):
    for i, t, dtype, shape in others:
        a = args[i]
        if type(a) is not t or (t is _ndarray and (a.dtype is not dtype or a.shape != shape)):
            return False
    return True
