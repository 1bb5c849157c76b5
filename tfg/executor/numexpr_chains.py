"""Elementwise chains on tiny float arrays as numexpr programs (optional: `pip install
'tfg[perf]'`; tfg/executor/chains.py calls this module, and runs unchanged without numexpr).

    before (chains.py, after the chain's signature is learned), a 5,000-op chain on float32[4]:
        buf = sin(x); negative(buf, buf); absolute(buf, buf); tanh(buf, buf); ...
        one numpy call per op (0.4-0.9 us each: the call, not the 4 elements, is the cost)
    after (from the chain's 3rd run with one signature on):
        v = sin(x); v = seg0(v); v = seg1(v); ...          seg: tanh(abs(-(sin(...(v)))))
        one numexpr call per segment of up to 48 ops (about 2.6 us for 48 ops)

Where it applies: a chain of float32/float64 values of at most _MAX_SIZE elements (numpy's
SIMD loops win on larger arrays: on float32[512] numexpr's tanh is 3.5x slower than numpy's),
whose side operands are of the chain's dtype (numexpr would otherwise convert them, or
upcast: nothing is left to its casting), and whose ops have a template below (unlisted ones,
Maximum and Minimum with their signed-zero rules among them, stay numpy steps between the
segments). Segments shorter than _MIN_OPS stay numpy steps too: a numexpr call costs about
what 2 numpy calls do.

Values are numexpr's: within float rounding of the kernels' numpy values (transcendental
functions differ by an ulp or so), no longer bit for bit. Relu and Relu6 keep numpy's exact
rules (NaN kept, -0 becomes +0). numexpr raises no floating-point errors, so while numpy's
error state asks to trap one (np.errstate(over="raise"), np.seterrcall) the numpy steps run
instead; numpy's RuntimeWarnings (an overflow in exp) are not printed on this path, as in
TensorFlow. TFG_NUMEXPR=0 turns the backend off.

Cost: compiling is lazy and bounded, as a JIT's tier-up (the ski-rental rule). Nothing
compiles before a chain's _TIER_UP-th run with one signature, so one-shot runs pay nothing.
Then a segment compiles only when what the chain's runs so far would have cost on numpy
(estimated at _STEP_S an op and run) covers what has been spent compiling plus the segment's
compile time (estimated at _OP_COMPILE_S an op; numexpr's grows faster than linearly with the
expression, hence the segments). So compiling never costs more than the numpy runs did, and a
chain's runs and compiles together take at most about twice its all-numpy time. A run
compiles for at most _BUDGET_S; segments not compiled yet run as numpy steps. Compiled
segments are shared through a cache keyed by their text and cost nothing more, so a periodic
chain (the benchmark's) compiles one segment and is done at its _TIER_UP-th run. The
expression text is built only from this module's templates and generated names (v, s0, s1,
...): nothing from a graph file reaches numexpr's parser.

Threads: numexpr runs arrays below 2 x 1024 elements on the calling thread, so its thread
pool never runs for these; tfg sets no numexpr setting (numexpr reads NUMEXPR_NUM_THREADS
itself when first imported, here: at the first compile).
"""
import importlib.util
import os
import threading
import time

import numpy as np

from tfg.kernels import clamp, math_ops

_MAX_SIZE = 32  # elements: above, numpy's SIMD loops beat numexpr's scalar ones
_SEGMENT = 48  # ops per numexpr program (compile time grows faster than linearly)
_SIDES = 16  # side operands per program (numexpr registers and NpyIter operands are few)
_MIN_OPS = 4  # shorter segments stay numpy steps
_TIER_UP = 3  # compile from a chain's 3rd run with one signature on (the 1st learns it)
_BUDGET_S = 0.01  # compile time per run (the segment that passes it finishes)
_STEP_S = 5e-7  # a numpy step on a tiny array (0.4-0.9 us measured): what an op earns a run
_OP_COMPILE_S = 1e-4  # numexpr's compile time per op in a segment (48 ops: about 4-5 ms)
_CACHE_MAX = 512

UNARY, LEFT, RIGHT = 0, 1, 2  # as chains.py: f(v), f(v, side), f(side, v)

_FUNC = {np.exp: "exp", np.expm1: "expm1", np.sin: "sin", np.cos: "cos", np.tan: "tan",
         np.tanh: "tanh", np.floor: "floor", np.ceil: "ceil", np.arcsin: "arcsin",
         np.arccos: "arccos", np.arctan: "arctan", np.sinh: "sinh", np.cosh: "cosh",
         np.sqrt: "sqrt", np.log: "log", np.log1p: "log1p", np.absolute: "abs"}
# The Tanh kernel's function (numpy's tanh, or a compiled loop once warm): numexpr's tanh is
# within float rounding of either, as its other functions are of numpy's.
_FUNC[math_ops.tanh_into] = "tanh"
_TEMPLATE = {f: name + "({a})" for f, name in _FUNC.items()}
_TEMPLATE.update({
    np.negative: "(-{a})",
    np.square: "({a}**2)",  # numexpr's optimizer makes it v*v, numpy's square exactly
    np.add: "({a} + {b})", np.subtract: "({a} - {b})", np.multiply: "({a} * {b})",
    np.divide: "({a} / {b})", np.arctan2: "arctan2({a}, {b})",
})
# Templates that name their operand twice: only at a segment's start, where it is a name
# (nested, the text would double at each one). Integer constants keep numexpr's float kind.
# numpy's maximum(x, 0): NaN stays NaN and -0 becomes +0, as `x <= 0` selects here.
_PLAIN_ONLY = {
    clamp.relu: "where({a} <= 0, 0, {a})",
    clamp.relu6: "where({a} <= 0, 0, where({a} > 6, 6, {a}))",
}
_KIND = {np.dtype(np.float32): float, np.dtype(np.float64): np.double}  # numexpr's kinds

_module = []  # [numexpr module or None] once imported
_found = []  # [whether numexpr is installed] once looked for (every chain asks)
_cache = {}  # (text, kinds) -> compiled program
_TRAPS = frozenset(("raise", "call", "log"))


def wanted():
    """Whether chains should get an accelerator: TFG_NUMEXPR is not 0 and numexpr is
    installed (found without importing it: importing costs ~20 ms, paid at the first
    compile)."""
    if os.environ.get("TFG_NUMEXPR", "1") == "0":
        return False
    if _module:
        return _module[0] is not None
    if not _found:
        try:
            _found.append(importlib.util.find_spec("numexpr") is not None)
        except (ImportError, ValueError):
            _found.append(False)
    return _found[0]


def _numexpr():
    if not _module:
        try:
            import numexpr  # lazy: optional dependency, and ~20 ms to import
        except Exception:  # noqa: BLE001 - not installed, or built for another numpy
            numexpr = None
        _module.append(numexpr)
    return _module[0]


def accelerator(f0, n0, steps, args, v):
    """An Accelerator for the chain whose first member is `f0` (its `n0` inputs first in
    `args`) and whose later members are `steps` [(f, kind, argument index of the side, ...)],
    as chains.py runs them in place; `args`, `v`: the inputs and result of the run that
    learned the signature. None where nothing would be faster."""
    if (type(v) is not np.ndarray or v.dtype not in _KIND or v.size > _MAX_SIZE
            or len(steps) < _MIN_OPS):
        return None
    for f, kind, j, *_ in steps:
        if kind != UNARY:
            a = args[j]
            if ((type(a) is not np.ndarray and not isinstance(a, np.generic))
                    or a.dtype != v.dtype):
                return None
    parts, seg = [], []

    def close():
        if len(seg) >= _MIN_OPS:
            parts.append(_Segment(seg, v.dtype))
        elif seg:
            parts.append(tuple(seg))
        seg.clear()
    for f, kind, j, *_ in steps:
        fn = getattr(f, "base", f)  # chains.py's wrappers name the function they compute
        if fn in _PLAIN_ONLY:
            close()
        elif fn not in _TEMPLATE:
            close()
            parts.append(((f, kind, j),))
            continue
        seg.append((f, kind, j))
        if len(seg) == _SEGMENT or sum(s[1] != UNARY for s in seg) == _SIDES:
            close()
    close()
    if not any(type(p) is _Segment for p in parts):
        return None
    return Accelerator(f0, n0, parts, v.dtype)


class _Segment:
    """Ops [(f, kind, j)] as one numexpr program `fn(v, *sides)`, once compiled."""

    __slots__ = ("ops", "text", "sides", "kinds", "fn")

    def __init__(self, ops, dtype):
        self.ops = tuple(ops)
        self.sides = tuple(j for _, kind, j in ops if kind != UNARY)
        text, n = "v", 0
        for f, kind, _ in ops:
            fn = getattr(f, "base", f)
            t = _PLAIN_ONLY.get(fn) or _TEMPLATE[fn]
            if kind == UNARY:
                text = t.format(a=text)
            else:
                side = f"s{n}"
                n += 1
                text = t.format(a=text, b=side) if kind == LEFT else t.format(a=side, b=text)
        self.text = text
        self.kinds = (_KIND[dtype],) * (n + 1)
        self.fn = None

    def compile(self, ne, dtype):
        """Compiles (or takes from the cache); False when numexpr's result would not keep
        `dtype` (the segment then stays numpy steps)."""
        key = (self.text, self.kinds)
        fn = _cache.get(key)
        if fn is None:
            names = ["v"] + [f"s{i}" for i in range(len(self.kinds) - 1)]
            fn = ne.NumExpr(self.text, signature=list(zip(names, self.kinds)),
                            optimization="moderate")
            probe = fn(*[np.ones(1, dtype)] * len(names))
            if probe.dtype != dtype:
                return False
            if len(_cache) >= _CACHE_MAX:
                _cache.clear()
            _cache[key] = fn
        self.fn = fn
        return True


class Accelerator:
    """`acc(args)`: the chain's value by its numexpr segments and numpy steps, or None when
    the caller should run its numpy steps (not tiered up yet, numpy's error state traps,
    nothing compiled). It never writes into `args`."""

    def __init__(self, f0, n0, parts, dtype):
        self.f0, self.n0, self.dtype = f0, n0, dtype
        self.parts = tuple(parts)  # a segment's `fn` is set once compiled
        self.runs = 1  # the run that learned the signature
        self.pending = [p for p in parts if type(p) is _Segment]
        self.credit = 0.0  # the runs' numpy time (estimated), less the compile time spent
        self.per_run = _STEP_S * (1 + sum(len(p) if type(p) is tuple else len(p.ops)
                                          for p in parts))
        self.live = False  # some segment compiled
        self.compiling = threading.Lock()  # steps of one Session may run in several threads

    def __call__(self, args):
        if self.pending:
            self.runs += 1
            self.credit += self.per_run
            if self.runs < _TIER_UP:
                return None
            if self.compiling.acquire(blocking=False):
                try:
                    self._compile_some()
                finally:
                    self.compiling.release()
        if not self.live or not _TRAPS.isdisjoint(np.geterr().values()):
            return None
        try:
            v = self.f0(*args[:self.n0])
            for p in self.parts:
                if type(p) is _Segment and p.fn is not None:
                    v = p.fn(v, *[args[j] for j in p.sides]) if p.sides else p.fn(v)
                else:
                    for f, kind, j in (p.ops if type(p) is _Segment else p):
                        if kind == UNARY:
                            f(v, v)
                        elif kind == LEFT:
                            f(v, args[j], out=v)
                        else:
                            f(args[j], v, out=v)
        except Exception:  # noqa: BLE001 - the numpy steps rerun and name the failing node
            self.live = False
            self.pending = []
            return None
        return v

    def _compile_some(self):
        ne = _numexpr()
        if ne is None:
            self.pending = []
            return
        start = now = time.perf_counter()
        while self.pending and now - start <= _BUDGET_S:
            seg = self.pending[0]
            if (seg.text, seg.kinds) not in _cache and self.credit < _OP_COMPILE_S * len(seg.ops):
                break
            self.pending.pop(0)  # (under the lock)
            try:
                ok = seg.compile(ne, self.dtype)
            except Exception:  # noqa: BLE001 - numexpr refused it: it stays numpy steps
                ok = False
            self.live = self.live or ok
            t, now = now, time.perf_counter()
            self.credit -= now - t
