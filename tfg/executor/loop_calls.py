"""The calls a compiled loop (tfg/executor/loops.py) runs besides kernels: a cond's Switch and
Merge inside the body, and the guard that makes a node inside a cond dead when one of its
inputs is. Each is `call(vals, step)` over integer slots, like a prepared kernel call
(tfg/executor/calls.py); a dead value is NOVAL in its slot, as in the dataflow executor.

    >>> call = switch_call(data=3, pred=4, outs=(5, 6), deref=False)
    >>> vals[3], vals[4] = x, np.bool_(True); call(vals, None)
    >>> vals[5], vals[6]                  # output 1 is live: the predicate was true
    (NOVAL, x)
    >>> guarded(kernel_call, guard=(6,), outs=(7,))   # dead (NOVAL) when vals[6] is

Before, a loop whose body held a cond ran every node through the dataflow executor; these
keep TensorFlow's dead-value rules (a node with a dead input is dead and does not run; a
Merge forwards its first live input) inside the compiled schedule.
"""
import operator

import numpy as np

from tfg.executor.control import NOVAL
from tfg.executor.devices import to_host
from tfg.kernels.resources import Ref

INDEX = tuple(np.int32(i) for i in range(8))  # Merge's value_index outputs


class LoopNodeError(Exception):
    """A node of a compiled loop failed: `item` and the original `error`."""

    def __init__(self, item, error):
        super().__init__(str(error))
        self.item, self.error = item, error


def run_named(calls, vals, step):
    """Run prepared (call, item) pairs in order, an error named by its own node (a fused,
    projected or deferred call's fallback: the nodes' own calls, as if not replaced)."""
    for call, item in calls:
        try:
            call(vals, step)
        except LoopNodeError:
            raise  # named already
        except Exception as e:  # noqa: BLE001 - the executor names the node
            raise LoopNodeError(item, e) from e


def forward(src, outs, deref):
    """Exit, NextIteration, LoopCond, Identity that must read a Ref (the others are aliased
    to their input's slot at compile time: no call at all)."""
    def call(vals, step):
        v = vals[src]
        if deref and type(v) is Ref:
            v = v.get()
        for o in outs:
            vals[o] = v
    return call


def switch_call(data, pred, outs, deref):
    """A Switch whose predicate is not the loop's: data on output 1 when true, else 0."""
    o0, o1 = outs

    def call(vals, step):
        d, p = vals[data], vals[pred]
        if d is NOVAL or p is NOVAL:
            vals[o0] = vals[o1] = NOVAL
            return
        if type(p) is Ref:
            p = p.get()
        if deref and type(d) is Ref:
            d = d.get()
        if not isinstance(p, (np.ndarray, np.generic, bool)):
            p = to_host(p)  # a predicate computed on a GPU
        if p:
            vals[o0], vals[o1] = NOVAL, d
        else:
            vals[o0], vals[o1] = d, NOVAL
    return call


def merge_call(ins, outs, deref):
    """A cond's Merge inside the body: the first live input and its index, else dead."""
    out, idx = outs
    pairs = tuple((s, INDEX[i] if i < len(INDEX) else np.int32(i)) for i, s in enumerate(ins))

    def call(vals, step):
        for s, index in pairs:
            v = vals[s]
            if v is not NOVAL:
                if deref and type(v) is Ref:
                    v = v.get()
                vals[out] = v
                vals[idx] = index
                return
        vals[out] = vals[idx] = NOVAL
    return call


_NUMERIC = frozenset("iuf")


_FLOATS = frozenset({np.float16, np.float32, np.float64})
INT_BOUNDS = {t: (t(np.iinfo(t).min), t(np.iinfo(t).max))  # numpy integer type -> range
         for t in (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
                   np.uint64)}
_NUMBERS = _FLOATS | frozenset(INT_BOUNDS)


def _int_add(x, y):
    lo, hi = INT_BOUNDS[type(x)]
    if y >= 0:  # hi - y and lo - y cannot overflow themselves
        return x + y if x <= hi - y else None
    return x + y if x >= lo - y else None


def _int_sub(x, y):
    lo, hi = INT_BOUNDS[type(x)]
    if y <= 0:
        return x - y if x <= hi + y else None
    return x - y if x >= lo + y else None


def _int_mod(x, y):
    return x % y if y > 0 or y < -1 else None  # 0 and -1: the kernel's cases


# op -> (types its C operator takes straight, the operator, types of a checked Python
# function, the function): the results of tfg.kernels.math_ops.scalar_kernel (which the
# tests compare with the ufuncs), in one Python frame or none. An integer sum that might
# overflow and Mul of integers go to scalar_kernel, then the ufunc.
_SCALAR_FAST = {
    "AddV2": (_FLOATS, operator.add, frozenset(INT_BOUNDS), _int_add),
    "Add": (_FLOATS, operator.add, frozenset(INT_BOUNDS), _int_add),
    "Sub": (_FLOATS, operator.sub, frozenset(INT_BOUNDS), _int_sub),
    "Mul": (_FLOATS, operator.mul, (), None),
    "Less": (_NUMBERS, operator.lt, (), None),
    "LessEqual": (_NUMBERS, operator.le, (), None),
    "Greater": (_NUMBERS, operator.gt, (), None),
    "GreaterEqual": (_NUMBERS, operator.ge, (), None),
    "Equal": (_NUMBERS | {np.bool_}, operator.eq, (), None),
    "NotEqual": (_NUMBERS | {np.bool_}, operator.ne, (), None),
    "LogicalAnd": (frozenset({np.bool_}), operator.and_, (), None),
    "LogicalOr": (frozenset({np.bool_}), operator.or_, (), None),
    "FloorMod": ((), None, frozenset(INT_BOUNDS), _int_mod),
}


def binary_call(call, array_fn, scalar_fn, ins, out, op=None):
    """An elementwise binary kernel: two arrays of one shape and numeric dtype go straight
    to its numpy function (`array_fn`: no broadcast, so no error to word and no size to
    check), two numpy scalars of one type to Python's operator (`op`'s entry in
    _SCALAR_FAST) or to `scalar_fn` (tfg.kernels.math_ops.scalar_kernel), the rest to the
    prepared kernel call. Before: five Python frames per call; after: one or two."""
    a, b = ins
    ndarray = np.ndarray
    direct_types, direct, checked_types, checked = _SCALAR_FAST.get(op, ((), None, (), None))
    if checked is _int_add or checked is _int_sub:
        return _arith_call(call, array_fn, scalar_fn, a, b, out, checked is _int_sub)

    def call2(vals, step):
        x, y = vals[a], vals[b]
        tx = type(x)
        if tx is type(y):
            if tx in direct_types:
                vals[out] = direct(x, y)
                return
            if tx in checked_types:
                r = checked(x, y)
                if r is not None:
                    vals[out] = r
                    return
            elif (tx is ndarray and x.shape == y.shape and x.ndim and x.dtype is y.dtype
                    and x.dtype.kind in _NUMERIC and array_fn is not None):
                vals[out] = array_fn(x, y)
                return
        r = scalar_fn(x, y) if scalar_fn is not None else None
        if r is None:
            call(vals, step)
        else:
            vals[out] = r
    return call2


def _arith_call(call, array_fn, scalar_fn, a, b, out, sub):
    """binary_call of AddV2/Add (sub False) or Sub, with the integer range test inline: a
    loop counter's `i + 1` every iteration."""
    ndarray = np.ndarray
    floats, ints = _FLOATS, INT_BOUNDS
    fop = operator.sub if sub else operator.add

    def arith(vals, step):
        x, y = vals[a], vals[b]
        tx = type(x)
        if tx is type(y):
            bounds = ints.get(tx)
            if bounds is not None:
                lo, hi = bounds
                if sub:
                    if (x <= hi + y) if y <= 0 else (x >= lo + y):
                        vals[out] = x - y
                        return
                elif (x <= hi - y) if y >= 0 else (x >= lo - y):
                    vals[out] = x + y
                    return
            elif tx in floats:
                vals[out] = fop(x, y)
                return
            elif (tx is ndarray and x.shape == y.shape and x.ndim and x.dtype is y.dtype
                    and x.dtype.kind in _NUMERIC and array_fn is not None):
                vals[out] = array_fn(x, y)
                return
        r = scalar_fn(x, y) if scalar_fn is not None else None
        if r is None:
            call(vals, step)
        else:
            vals[out] = r
    return arith


def unary_call(call, array_fn, src, out):
    """An elementwise unary kernel (Tanh, Sigmoid, ...) on a float array: its numpy
    function straight; anything else: the prepared kernel call."""
    ndarray = np.ndarray

    def call1(vals, step):
        x = vals[src]
        if type(x) is ndarray and x.dtype.kind == "f":
            vals[out] = array_fn(x)
        else:
            call(vals, step)
    return call1


def guarded(call, guard, outs, live=None):
    """`call` (None: a NoOp) unless a slot of `guard` holds a dead value; then every output
    is dead. `live`: a slot set to True or NOVAL, for a node without outputs that others
    wait on by control edge."""
    marks = tuple(outs) + ((live,) if live is not None else ())
    if len(guard) == 1:
        (g,) = guard

        def call1(vals, step):
            if vals[g] is NOVAL:
                for o in marks:
                    vals[o] = NOVAL
                return
            if call is not None:
                call(vals, step)
            if live is not None:
                vals[live] = True
        return call1

    def calln(vals, step):
        for s in guard:
            if vals[s] is NOVAL:
                for o in marks:
                    vals[o] = NOVAL
                return
        if call is not None:
            call(vals, step)
        if live is not None:
            vals[live] = True
    return calln
