"""Element-wise maths: unary and binary ops with broadcasting, comparisons, logic, the
bitwise ops and shifts, Select, Cast, AddN, ClipByValue and the cumulative ops.

    AddV2([1, 2], 10)        -> [11, 12]
    FloorDiv(-7, 2)          -> -4        TruncateDiv(-7, 2) -> -3    Div(-7, 2) -> -3 (ints)
    FloorMod(-7, 3)          -> 2         TruncateMod(-7, 3) -> -1
    Cast([1.9, -1.9], int32) -> [1, -1]
    Mod(-7, 3)               -> -1        MulNoNan(inf, 0) -> 0       Xlogy(0, 0) -> 0
    LeftShift(int8 1, 9)     -> -128 (the shift clamped to 7)    PopulationCount(int8 -1) -> 8
    Cumsum([1, 2, 3], exclusive=True, reverse=True) -> [5, 3, 0]

Outputs keep the inputs' dtype (float32 stays float32): numpy's rules agree with
TensorFlow's once both operands have the same dtype, which TensorFlow's signatures require.
"""
import math
import operator

import numpy as np

from tfg.kernels import vector_math
from tfg.kernels._util import errstate, fail, norm_axis, np_dtype, shape_of, tf_name
from tfg.kernels.list_bulk_ops import add_lists
from tfg.kernels.list_ops import TensorList
from tfg.kernels.registry import ALL_DEVICES, kernel
from tfg.kernels.select import where


def _bcast_error(x, y):
    fail(f"Incompatible shapes: {list(shape_of(x))} vs. {list(shape_of(y))}")


# Two numpy scalars of one type (loop counters, predicates, scalar maths): Python's operators
# on them give the ufunc's result without its overhead (about 0.1 us against 1.5-4 us).
# numpy's scalar operators warn on integer overflow where the ufunc wraps silently, so
# integer arithmetic takes the operator only when the operands' range rules overflow out
# (comparisons of scalars of the same type, cheap), else the ufunc.
_SCALAR_FLOATS = frozenset({np.float16, np.float32, np.float64})
_SCALAR_INTS = {}  # type -> (min, max, isqrt(max), -isqrt(max) or 0), of that type
for _t in (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64):
    _i = np.iinfo(_t)
    _m = math.isqrt(int(_i.max))
    _SCALAR_INTS[_t] = (_t(_i.min), _t(_i.max), _t(_m), _t(-_m if _i.min < 0 else 0))
_SCALAR_NUMBERS = _SCALAR_FLOATS | frozenset(_SCALAR_INTS)
_SCALAR_EQ = _SCALAR_NUMBERS | {np.bool_}
_COMPARE = {"less": operator.lt, "less_equal": operator.le, "greater": operator.gt,
            "greater_equal": operator.ge}
_LOGIC = {"logical_and": operator.and_, "logical_or": operator.or_}


def _int_add(x, y, lo, hi, m, neg_m):
    if y >= 0:  # hi - y and lo - y below cannot overflow themselves
        return x + y if x <= hi - y else None
    return x + y if x >= lo - y else None


def _int_sub(x, y, lo, hi, m, neg_m):
    if y <= 0:
        return x - y if x <= hi + y else None
    return x - y if x >= lo + y else None


def _int_mul(x, y, lo, hi, m, neg_m):
    return x * y if neg_m <= x <= m and neg_m <= y <= m else None


_ARITH = {"add": (operator.add, _int_add), "subtract": (operator.sub, _int_sub),
          "multiply": (operator.mul, _int_mul)}


def _scalar_op(name):
    """`f(x, y)` -> the result for two numpy scalars of one type, or None when the ufunc
    must decide (other types, an integer overflow)."""
    if name in _ARITH:
        op, int_op = _ARITH[name]

        def arith(x, y):
            t = type(x)
            if t in _SCALAR_FLOATS:
                return op(x, y)
            bounds = _SCALAR_INTS.get(t)
            return int_op(x, y, *bounds) if bounds is not None else None
        return arith
    if name in _COMPARE:
        op = _COMPARE[name]
        return lambda x, y: op(x, y) if type(x) in _SCALAR_NUMBERS else None
    if name in _LOGIC:
        op = _LOGIC[name]
        return lambda x, y: op(x, y) if type(x) is np.bool_ else None
    if name in ("equal", "not_equal"):
        op = operator.eq if name == "equal" else operator.ne
        return lambda x, y: op(x, y) if type(x) in _SCALAR_EQ else None
    if name == "floor_mod":  # numpy's scalar % is np.mod: integers only (floats warn on
        # inf where the kernel's errstate is quiet), a zero or -1 divisor left to the kernel
        return lambda x, y: x % y if type(x) in _SCALAR_INTS and (y > 0 or y < -1) else None
    return None


_SCALAR_UFUNC = {
    "AddV2": "add", "Add": "add", "Sub": "subtract", "Mul": "multiply", "Less": "less",
    "LessEqual": "less_equal", "Greater": "greater", "GreaterEqual": "greater_equal",
    "LogicalAnd": "logical_and", "LogicalOr": "logical_or", "Equal": "equal",
    "NotEqual": "not_equal", "FloorMod": "floor_mod"}
SCALAR_OPS = frozenset(_SCALAR_UFUNC)


# op -> (its CPU kernel, the numpy function it is on plain arrays): for the kernels that are
# exactly one numpy call on arrays of one numeric dtype (the string-named ufuncs, Sigmoid),
# which a compiled loop may call straight (tfg/executor/loop_calls.py)
_PLAIN = {}


# op -> (its CPU kernel, the ufunc it is on float arrays, warnings for division by zero and
# invalid values silenced): RealDiv, Sqrt, Log, ... (an elementwise chain's members,
# tfg/executor/chains.py)
_QUIET_FLOAT = {}


def array_kernel(op, fn):
    """The numpy function `op`'s kernel `fn` is on numeric arrays (arity 1 or 2: same shape,
    same dtype), or None when `fn` is not that kernel (another registration, a wrapper)."""
    entry = _PLAIN.get(op)
    return entry[1] if entry is not None and entry[0] is fn else None


def quiet_float_kernel(op, fn):
    """The ufunc `op`'s kernel `fn` is on float arrays inside
    `np.errstate(divide="ignore", invalid="ignore")` (other dtypes: other code), or None."""
    entry = _QUIET_FLOAT.get(op)
    return entry[1] if entry is not None and entry[0] is fn else None


def scalar_kernel(op):
    """`f(x, y)` for op in SCALAR_OPS: its result on two numpy scalars of one type, None
    where the kernel itself must run (what a compiled loop calls first, skipping the
    kernel's layers; tfg/executor/loop_calls.py)."""
    fn = _scalar_op(_SCALAR_UFUNC[op])

    def scalar(x, y):
        # 0-d arrays (a constant, a loop variable carried unchanged) count as scalars
        if type(x) is np.ndarray:
            if x.ndim:
                return None
            x = x[()]
        if type(y) is np.ndarray:
            if y.ndim:
                return None
            y = y[()]
        return fn(x, y) if type(x) is type(y) else None
    return scalar


def _binary(op, fn):
    # fn is a ufunc name (resolved on ctx.xp) or a function (xp, x, y).
    name = fn if isinstance(fn, str) else None
    np_fn = getattr(np, name) if name else None
    scalar = _scalar_op(_SCALAR_UFUNC[op]) if op in SCALAR_OPS else None

    @kernel(op, device_types=ALL_DEVICES)
    def run(ctx, x, y):
        xp = ctx.xp
        if scalar is not None and type(x) is type(y) and xp is np:
            r = scalar(x, y)
            if r is not None:
                return r
        try:
            if name:
                return np_fn(x, y) if xp is np else getattr(xp, name)(x, y)
            return fn(xp, x, y)
        except ValueError:
            if _broadcastable(x, y):
                raise
            _bcast_error(x, y)
        except TypeError:  # numpy has no loop for this dtype (strings, bools in arithmetic)
            fail(f"{op} does not support dtype {tf_name(x)}")
    run.__name__ = op
    if np_fn is not None:
        _PLAIN[op] = (run, np_fn)
    elif fn is _real_div:
        _QUIET_FLOAT[op] = (run, np.true_divide)
    return run


def _broadcastable(x, y):
    try:
        np.broadcast_shapes(shape_of(x), shape_of(y))
        return True
    except ValueError:
        return False


def _is_int(x):
    return x.dtype.kind in "iu"


def _check_int_divisor(xp, y, x=None):
    """TensorFlow's refusal of an integer zero divisor, where the result has elements: an
    empty result divides nothing (a reduction over no axes of a scalar takes
    FloorMod([], 0) in TensorFlow's own gradient graph)."""
    # (the shapes' own zeros, not np.broadcast_shapes': 3 us of Python a call; the two
    # differ only for shapes that do not broadcast, which the division then refuses)
    if x is not None and (0 in getattr(x, "shape", ()) or 0 in getattr(y, "shape", ())):
        return
    # y.all(), not xp.all(y): 1 us against 6.5 for a numpy scalar divisor
    if not bool(y.all() if hasattr(y, "all") else xp.all(y)):
        fail("Integer division by zero")


def _truncate_div_int(xp, x, y):
    _check_int_divisor(xp, y, x)
    q = xp.floor_divide(x, y)
    # Floor and truncation differ when the signs differ and the division is inexact.
    fix = (xp.remainder(x, y) != 0) & ((x < 0) != (y < 0))
    return q + fix.astype(q.dtype)


def _floor_div(xp, x, y):
    if _is_int(x):
        _check_int_divisor(xp, y, x)
        return xp.floor_divide(x, y)
    with errstate(xp, divide="ignore", invalid="ignore"):
        return xp.floor(xp.true_divide(x, y))


def _floor_mod(xp, x, y):
    if _is_int(x):
        _check_int_divisor(xp, y, x)
        return xp.mod(x, y)  # (no zero divisor: nothing for errstate to silence)
    with errstate(xp, divide="ignore", invalid="ignore"):
        return xp.mod(x, y)


def _real_div(xp, x, y):
    if _is_int(x):  # integer RealDiv/Div truncate, as C++ does
        return _truncate_div_int(xp, x, y)
    with errstate(xp, divide="ignore", invalid="ignore"):
        return xp.true_divide(x, y)


def _truncate_div(xp, x, y):
    if _is_int(x):
        return _truncate_div_int(xp, x, y)
    with errstate(xp, divide="ignore", invalid="ignore"):
        return xp.trunc(xp.true_divide(x, y))


def _truncate_mod(xp, x, y):
    if _is_int(x):
        _check_int_divisor(xp, y, x)
    with errstate(xp, divide="ignore", invalid="ignore"):
        return xp.fmod(x, y)


def _div_no_nan(xp, x, y):
    with errstate(xp, divide="ignore", invalid="ignore"):
        q = xp.true_divide(x, y) if not _is_int(x) else _safe_int_div(xp, x, y)
    return xp.where(y == 0, xp.zeros((), q.dtype), q)


def _safe_int_div(xp, x, y):
    return _truncate_div_int(xp, x, xp.where(y == 0, 1, y).astype(y.dtype))


def _pow(xp, x, y):
    if _is_int(x) and bool(xp.any(y < 0)):
        fail("Integers to negative integer powers are not allowed")
    with errstate(xp, divide="ignore", invalid="ignore", over="ignore"):
        if y.ndim == 0 and x.dtype.kind == "f" and x.ndim and y == 3:
            # tanh-approximate GELU's x ** 3 (BERT, GPT-2): numpy's power has a fast path for
            # 2 but not 3 (4x slower than two multiplies); within 1 ulp of pow, as TF's is
            return x * x * x
        return xp.power(x, y)


def _squared_difference(xp, x, y):
    d = xp.subtract(x, y)
    return d * d


def _xdivy(xp, x, y):
    with errstate(xp, divide="ignore", invalid="ignore"):
        return xp.where(x == 0, xp.zeros((), x.dtype), x / y).astype(x.dtype)


def _mul_no_nan(xp, x, y):
    """x * y, but 0 wherever y is 0, even where x is inf or NaN."""
    with errstate(xp, invalid="ignore", over="ignore"):
        p = xp.multiply(x, y)
    return xp.where(y == 0, xp.zeros((), p.dtype), p)


def _x_times(name):
    """Xlogy (log) and Xlog1py (log1p): x * f(y), but 0 wherever x is 0, even where f(y) is
    -inf or NaN."""
    def run(xp, x, y):
        with errstate(xp, divide="ignore", invalid="ignore", over="ignore"):
            p = x * getattr(xp, name)(y)
        return xp.where(x == 0, xp.zeros((), p.dtype), p)
    return run


def _shift(name):
    """LeftShift (left_shift) and RightShift (right_shift), as TensorFlow's kernels: the
    shift amount clamped to [0, bits - 1]; a left shift wraps, a right shift of a signed
    integer is arithmetic (numpy's and CuPy's shifts are both)."""
    def run(xp, x, y):
        if not _is_int(x):
            raise TypeError(name)  # (_binary words it: the op does not support the dtype)
        amount = xp.clip(y, 0, x.dtype.itemsize * 8 - 1).astype(x.dtype)
        return getattr(xp, name)(x, amount)
    return run


BINARY = {
    "AddV2": "add", "Add": "add", "Sub": "subtract", "Mul": "multiply",
    "RealDiv": _real_div, "Div": _real_div, "DivNoNan": _div_no_nan, "FloorDiv": _floor_div,
    "FloorMod": _floor_mod, "TruncateDiv": _truncate_div, "TruncateMod": _truncate_mod,
    "Pow": _pow, "Maximum": "maximum", "Minimum": "minimum",
    "SquaredDifference": _squared_difference,
    "Less": "less", "LessEqual": "less_equal", "Greater": "greater",
    "GreaterEqual": "greater_equal", "LogicalAnd": "logical_and", "LogicalOr": "logical_or",
    "Atan2": "arctan2", "Xdivy": _xdivy,
    # Mod is C's remainder, as TruncateMod: the dividend's sign (fmod for floats)
    "Mod": _truncate_mod, "MulNoNan": _mul_no_nan,
    "Xlogy": _x_times("log"), "Xlog1py": _x_times("log1p"),
    "BitwiseAnd": "bitwise_and", "BitwiseOr": "bitwise_or", "BitwiseXor": "bitwise_xor",
    "LeftShift": _shift("left_shift"), "RightShift": _shift("right_shift"),
}
for _op, _fn in BINARY.items():
    _binary(_op, _fn)


def _equality(op, name):
    scalar = _scalar_op(name)

    @kernel(op, device_types=ALL_DEVICES)
    def run(ctx, x, y):
        if type(x) is type(y) and ctx.xp is np:
            r = scalar(x, y)
            if r is not None:
                return r
        if not _broadcastable(x, y):
            if not ctx.attrs.get("incompatible_shape_error", True):
                return ctx.xp.asarray(op == "NotEqual")
            _bcast_error(x, y)
        return getattr(ctx.xp, name)(x, y)
    return run


_equality("Equal", "equal")
_equality("NotEqual", "not_equal")


# --------------------------------------------------------------------------- unary
# Below these, exp(-x) overflows: the two-sided form is needed.
_SIGMOID_FLOOR = {np.dtype(np.float16): -10.0, np.dtype(np.float32): -80.0,
                  np.dtype(np.float64): -700.0}


_min = np.minimum.reduce
# 1 as a 0-d array of each float dtype: numpy resolves it faster than the Python int
# (2.8 -> 1.3 us an add on 8x64 here), same value, same result
_ONE = {dt: np.ones((), dt) for dt in _SIGMOID_FLOOR}


def sigmoid_into(x, out=None):
    """Sigmoid of a numpy float array as 1 / (1 + exp(-x)), into `out` (same shape and dtype,
    not `x`'s memory) or a fresh array; None where that form does not apply (exp(-x) could
    overflow, NaN, empty, another dtype): then the two-sided form of the Sigmoid kernel is
    needed. What the kernel computes on such arrays, bit for bit (a compiled loop's fused
    chains call it with a buffer they reuse, tfg/executor/fused_steps.py). float32 goes to
    the compiled loop where vector_math says so (all values: NaN, overflow and empty too)."""
    r = vector_math.sigmoid(x, out)
    if r is not None:
        return r
    floor = _SIGMOID_FLOOR.get(x.dtype)
    if floor is None or not x.size or not _smallest(x) > floor:  # (NaN fails the test)
        return None
    # 1 / (1 + exp(-x)) in one buffer: 5 numpy calls instead of 10 (an LSTM cell's three
    # gates every step: 12 -> 6 us each at 8x64). The buffer goes positionally (numpy
    # parses no keyword; out=None is a fresh array either way).
    one = _ONE[x.dtype]
    t = np.negative(x, out)
    np.exp(t, t)
    np.add(t, one, t)
    return np.divide(one, t, t)


def _smallest(x):
    """min(x), NaN if x has one (the first NaN: argmin stops there, as minimum propagates
    it). On a contiguous array by argmin, numpy's SIMD scan without the ufunc reduction's
    set-up: 3.1 -> 0.6 us on a GRU's 2x8x64 gate stack."""
    if x.flags.c_contiguous:
        v = x.reshape(-1)
        return v[v.argmin()]
    return _min(x, axis=None)


def _sigmoid(xp, x):
    if xp is np and type(x) is np.ndarray:
        r = sigmoid_into(x)
        if r is not None:
            return r
    if x.dtype.kind == "c":  # Eigen's complex logistic (|x| and x >= 0 mean nothing here)
        return (1 / (1 + xp.exp(-x))).astype(x.dtype, copy=False)
    # exp of a non-positive number only: no overflow for large |x|.
    e = xp.exp(-xp.abs(x))
    return xp.where(x >= 0, 1 / (1 + e), e / (1 + e)).astype(x.dtype, copy=False)


# The Sigmoid kernel's values, for the activations fused after a convolution (kernels/fused.py).
sigmoid = _sigmoid


def tanh_into(x, out=None):
    """tanh of a numpy float array, into `out` (same shape and dtype; x's own memory allowed)
    or a fresh array: the Tanh kernel's values, whichever path calls it (straight-line and
    loop chains, fused activations). float32 goes to the compiled loop where vector_math
    says so, the rest to numpy's tanh."""
    r = vector_math.tanh(x, out)
    return np.tanh(x, out) if r is None else r


# What the fused chains ask of a ufunc step (tfg/executor/loop_fusion.py, loop_blocks.py).
tanh_into.nin = tanh_into.nout = 1


def _tanh(xp, x):
    if xp is np and type(x) is np.ndarray and x.dtype.kind == "f":
        return tanh_into(x)
    return xp.tanh(x)


# The Tanh kernel's values (kernels/fused.py's activations).
tanh = _tanh


# Abramowitz & Stegun 7.1.26 is only good to ~1e-7, fine for float32 but not float64.
_erf64 = np.vectorize(math.erf, otypes=[np.float64])


def _erf(xp, x):
    if x.dtype == np.float64:
        if xp is np:
            return _erf64(x)
        from cupyx.scipy.special import erf  # lazy: only float64 Erf on a GPU needs SciPy's
        return erf(x)
    t32 = x.astype(np.float64)
    a = xp.abs(t32)
    t = 1.0 / (1.0 + 0.3275911 * a)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027
                                                                          + t * 1.061405429))))
    r = 1.0 - poly * xp.exp(-a * a)
    return (xp.sign(t32) * r).astype(x.dtype)


_erfc64 = np.vectorize(math.erfc, otypes=[np.float64])


def _erfc(xp, x):
    # Not as 1 - erf: exact gelu reads erfc(-x/sqrt(2)) far into the tail, where 1 - erf has
    # no correct digits left.
    if x.dtype == np.float64:
        if xp is np:  # (math.erfc per element: exact, ~0.1 us an element)
            return _erfc64(x)
        from cupyx.scipy.special import erfc  # lazy: only float64 Erfc on a GPU needs it
        return erfc(x)
    # Below float64, the Chebyshev fit of Numerical Recipes' erfcc (relative error < 1.2e-7
    # everywhere, tail included) in float64 is exact to float32's precision.
    z = xp.abs(x.astype(np.float64))
    t = 1.0 / (1.0 + 0.5 * z)
    poly = -1.26551223 + t * (1.00002368 + t * (0.37409196 + t * (0.09678418 + t * (
        -0.18628806 + t * (0.27886807 + t * (-1.13520398 + t * (1.48851587 + t * (
            -0.82215223 + t * 0.17087277))))))))
    tail = t * xp.exp(-z * z + poly)
    return xp.where(x >= 0, tail, 2.0 - tail).astype(x.dtype)


def _reciprocal(xp, x):
    if _is_int(x):
        _check_int_divisor(xp, x)
        return _truncate_div_int(xp, xp.ones_like(x), x)
    with errstate(xp, divide="ignore"):
        return xp.reciprocal(x)


def _rsqrt(xp, x):
    with errstate(xp, divide="ignore", invalid="ignore"):
        return 1 / xp.sqrt(x)


def _quiet(name):
    """The ufunc `name` with division by zero and invalid values silenced (NaN, +-inf out of
    its domain, as TensorFlow gives them): Sqrt, Log, Log1p, the inverse hyperbolics."""
    def run(xp, x):
        with errstate(xp, divide="ignore", invalid="ignore"):
            return getattr(xp, name)(x)
    run.ufunc = getattr(np, name)
    return run


# a count of set bits per byte value: PopulationCount sums it over an element's bytes
_BYTE_BITS = np.array([bin(b).count("1") for b in range(256)], np.uint8)


def _population_count(xp, x):
    """The number of set bits of each element (any integer dtype), as uint8: the byte table
    looked up on the elements' bytes (plain indexing, the same on numpy and CuPy)."""
    if not _is_int(x):
        raise TypeError("population_count")  # (_unary words it)
    shape, width = x.shape, x.dtype.itemsize
    data = xp.ascontiguousarray(x).view(np.uint8).reshape(shape + (width,))
    table = _BYTE_BITS if xp is np else xp.asarray(_BYTE_BITS)
    return table[data].sum(axis=-1, dtype=np.uint8)


UNARY = {
    "Neg": "negative", "Abs": "abs", "Sign": "sign", "Square": "square",
    "Sqrt": _quiet("sqrt"), "Rsqrt": _rsqrt, "Reciprocal": _reciprocal, "Inv": _reciprocal,
    "Exp": "exp", "Expm1": "expm1", "Log": _quiet("log"), "Log1p": _quiet("log1p"),
    "Sin": "sin", "Cos": "cos", "Tan": "tan", "Tanh": _tanh, "Sigmoid": _sigmoid,
    "Erf": _erf, "Erfc": _erfc, "Floor": "floor", "Ceil": "ceil", "Rint": "rint",
    "IsFinite": "isfinite", "IsNan": "isnan", "IsInf": "isinf",
    "LogicalNot": "logical_not", "Asin": "arcsin", "Acos": "arccos", "Atan": "arctan",
    "Sinh": "sinh", "Cosh": "cosh",
    "Asinh": _quiet("arcsinh"), "Acosh": _quiet("arccosh"), "Atanh": _quiet("arctanh"),
    "Invert": "invert", "PopulationCount": _population_count,
}


def _unary(op, fn):
    name = fn if isinstance(fn, str) else None
    np_fn = getattr(np, name) if name else None

    @kernel(op, device_types=ALL_DEVICES)
    def run(ctx, x):
        xp = ctx.xp
        try:
            if name:
                return np_fn(x) if xp is np else getattr(xp, name)(x)
            return fn(xp, x)
        except TypeError:  # numpy has no loop for this dtype
            fail(f"{op} does not support dtype {tf_name(x)}")
    run.__name__ = op
    if np_fn is not None or fn is _sigmoid:
        _PLAIN[op] = (run, np_fn if np_fn is not None else lambda x: _sigmoid(np, x))
    elif fn is _tanh:  # on float arrays (the callers of array_kernel check): tanh_into
        _PLAIN[op] = (run, tanh_into)
    elif getattr(fn, "ufunc", None) is not None:  # Sqrt, Log, Log1p, Asinh, ... (_quiet)
        _QUIET_FLOAT[op] = (run, fn.ufunc)
    return run


for _op, _fn in UNARY.items():
    _unary(_op, _fn)


@kernel("ApproximateEqual", device_types=ALL_DEVICES)
def approximate_equal(ctx, x, y):
    """|x - y| <= tolerance in x's dtype, as TensorFlow's kernel compares (its docs say <: a
    difference of exactly the tolerance counts as equal there); NaN and inf - inf: False;
    no broadcasting."""
    xp = ctx.xp
    if x.dtype.kind not in "iufc":
        fail(f"ApproximateEqual does not support dtype {tf_name(x)}")
    if shape_of(x) != shape_of(y):
        fail(f"x and y must be of the same shape. x shape: {_dims(shape_of(x))}. y shape: "
             f"{_dims(shape_of(y))}")
    tolerance = ctx.attrs.get("tolerance", 1e-5)
    with errstate(xp, invalid="ignore", over="ignore"):
        return xp.abs(x - y) <= xp.asarray(tolerance).astype(xp.abs(x).dtype)


@kernel("NextAfter", device_types=ALL_DEVICES)
def next_after(ctx, x1, x2):
    """The next representable value after x1 towards x2 (numpy.nextafter; subnormals kept)."""
    if x1.dtype.kind != "f":
        fail(f"NextAfter does not support dtype {tf_name(x1)}")
    if not _broadcastable(x1, x2):
        _bcast_error(x1, x2)
    with errstate(ctx.xp, over="ignore"):  # (max towards inf: inf, as TensorFlow)
        return ctx.xp.nextafter(x1, x2)


@kernel("ClipByValue", device_types=ALL_DEVICES)
def clip_by_value(ctx, t, lo, hi):
    """min(t, hi), then max with lo, in TensorFlow's order: where lo > hi every element is lo;
    NaN stays NaN. The bounds are scalars or of t's shape (TensorFlow broadcasts no other)."""
    # complex refused: TensorFlow's CPU kernel runs it, but on real parts only (imaginary
    # parts dropped: 0.5-3j clipped to [0, 1] is 0.5+0j), which is no clipping of complexes
    if t.dtype.kind not in "iuf":
        fail(f"ClipByValue does not support dtype {tf_name(t)}")
    shape = shape_of(t)
    if any(shape_of(b) not in (shape, ()) for b in (lo, hi)):
        fail("clip_value_min and clip_value_max must be either of the same shape as input, or"
             f" a scalar. input shape: {_dims(shape)} clip_value_min shape: "
             f"{_dims(shape_of(lo))} clip_value_max shape: {_dims(shape_of(hi))}")
    xp = ctx.xp
    return xp.maximum(xp.minimum(t, hi), lo)


def _dims(shape):
    """A shape as TensorFlow's TensorShape::DebugString writes it: [2,3]."""
    return "[" + ",".join(str(d) for d in shape) + "]"


@kernel("Round", device_types=ALL_DEVICES)
def round_(ctx, x):
    # numpy rounds half to even, as TensorFlow's Round does; integers are unchanged.
    return x if _is_int(x) else ctx.xp.round(x)


@kernel("AddN", device_types=ALL_DEVICES)
def add_n(ctx, *xs):
    if len(xs) == 1:
        return xs[0]
    if isinstance(xs[0], TensorList):  # T=variant: gradients of TensorLists summed
        return add_lists(xs)
    xp = ctx.xp
    try:
        # asarray: the sum of two 0-d arrays is a numpy scalar, which cannot be an `out=`.
        out = xp.asarray(xp.add(xs[0], xs[1]))
        for x in xs[2:]:
            xp.add(out, x, out=out)
    except ValueError:
        fail("AddN inputs must all have the same shape, got "
             + ", ".join(str(list(shape_of(x))) for x in xs))
    return out


@kernel("Cast", device_types=ALL_DEVICES)
def cast(ctx, x):
    dst = np_dtype(ctx.attrs["DstT"])
    xp = ctx.xp
    if xp is np:
        x = np.asarray(x)
    if x.dtype == dst:
        return x
    if dst == np.bool_:
        return x != 0
    if x.dtype.kind == "O" or dst.kind == "O":
        fail(f"Cast between {tf_name(x)} and {tf_name(dst)} is not supported")
    if x.dtype.kind in "biu" and dst.itemsize >= 4:  # (no overflow to warn of: no errstate)
        return x.astype(dst)
    with errstate(xp, invalid="ignore", over="ignore"):
        if x.dtype.kind == "f" and dst.kind in "iu":
            # Out-of-range floats and NaN are undefined in C++; saturate like TensorFlow 2.x.
            info = np.iinfo(dst)
            x = xp.nan_to_num(xp.trunc(x), nan=0, posinf=info.max, neginf=info.min)
            x = xp.clip(x, info.min, info.max)
        return x.astype(dst)


@kernel("Select", device_types=ALL_DEVICES)
def select(ctx, cond, x, y):
    if x.shape != y.shape:
        fail(f"'then' and 'else' must have the same size, got {list(x.shape)} and "
             f"{list(y.shape)}")
    if cond.ndim == 0:
        return x if bool(cond) else y
    xs = x.shape
    if cond.shape != xs:
        if cond.ndim == 1 and len(xs) >= 1 and cond.shape[0] == xs[0]:
            cond = cond.reshape(cond.shape + (1,) * (len(xs) - 1))
        else:
            fail(f"condition must be a scalar, a vector of size {xs[0] if xs else 0} or of shape"
                 f" {list(xs)}, got {list(cond.shape)}")
    return where(cond, x, y, ctx.xp)


@kernel("SelectV2", device_types=ALL_DEVICES)
def select_v2(ctx, cond, x, y):
    try:
        return where(cond, x, y, ctx.xp)
    except ValueError:
        fail(f"condition, then and else cannot broadcast: {list(cond.shape)}, "
             f"{list(x.shape)}, {list(y.shape)}")


def _cumulative(op, name, identity):
    @kernel(op, device_types=ALL_DEVICES, host_inputs=(1,))
    def run(ctx, x, axis):
        xp = ctx.xp
        if x.ndim == 0:
            fail(f"{op} needs an input of rank >= 1")
        ax = norm_axis(np.asarray(axis).reshape(()), x.ndim)
        rev, excl = ctx.attrs.get("reverse", False), ctx.attrs.get("exclusive", False)
        if rev:
            x = xp.flip(x, ax)
        out = getattr(xp, name)(x, axis=ax, dtype=x.dtype)
        if excl:  # shifted one along the axis, the identity first (np.roll's Python: 15 us)
            lead = (slice(None),) * ax
            shifted = xp.empty_like(out)
            shifted[lead + (slice(0, 1),)] = identity
            shifted[lead + (slice(1, None),)] = out[lead + (slice(0, -1),)]
            out = shifted
        if rev:
            out = xp.flip(out, ax)
        return out
    return run


_cumulative("Cumsum", "cumsum", 0)
_cumulative("Cumprod", "cumprod", 1)
