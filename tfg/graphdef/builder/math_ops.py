"""Elementwise math, comparisons, matmul, reductions and casts, plus the Python operators on
Tensor handles (+ - * / // % ** @, unary -, abs, ~, &, |, < <= > >=).

    >>> y = x * 2.0 + b        # nodes mul/y (Const), mul (Mul), add (AddV2)
    >>> m = tb.reduce_mean(tb.square(y - t))
    >>> p = x < 3.0            # Less; == and != stay Python identity: use tb.equal

Each function follows TensorFlow's op wrappers: it opens a name scope named after the op (or
`name`), converts Python values to Consts inside it (`mul/y`) with the other operand's dtype,
and names the node after the scope, so node names match what TensorFlow writes.
"""
import numpy as np

from tfg.errors import TfgInputError
from tfg.graphdef.builder.core import Tensor, get_default_builder, make
from tfg.graphdef.builder.core import is_tensorish as _is_tensorish
from tfg.graphdef.builder.array_ops import range_, rank
from tfg.graphdef.builder.constants import constant, convert_to_tensor
from tfg.schemas.dtypes import DType


def _pair(x, y):
    """Convert two operands, Python values taking the tensor operand's dtype."""
    if _is_tensorish(x) or not _is_tensorish(y):
        x = convert_to_tensor(x, name="x")
        y = convert_to_tensor(y, dtype=None if _is_tensorish(y) else x.dtype.base, name="y")
    else:
        y = convert_to_tensor(y, name="y")
        x = convert_to_tensor(x, dtype=y.dtype.base, name="x")
    if x.dtype.base != y.dtype.base:
        raise TfgInputError(f"operands {x.name!r} ({x.dtype.tf_name}) and {y.name!r} "
                            f"({y.dtype.tf_name}) have different dtypes; use tb.cast")
    return x, y


def unary(op_type, x, name=None, out_dtype=None, typed=True):
    b = get_default_builder()
    with b.name_scope(name or op_type) as scope:
        x = convert_to_tensor(x, name="x")
        attrs = {"T": x.dtype.base} if typed else {}
        return make(op_type, [x], attrs, scope, [out_dtype or x.dtype.base]).outputs[0]


def binary(op_type, x, y, name=None, out_dtype=None, typed=True, extra=None):
    b = get_default_builder()
    with b.name_scope(name or op_type) as scope:
        x, y = _pair(x, y)
        attrs = {"T": x.dtype.base} if typed else {}
        attrs.update(extra or {})
        return make(op_type, [x, y], attrs, scope, [out_dtype or x.dtype.base]).outputs[0]


# --- elementwise, generated from tables (function name, op type) ---------------------------
_UNARY = [
    ("abs", "Abs"), ("negative", "Neg"), ("sign", "Sign"), ("square", "Square"),
    ("sqrt", "Sqrt"), ("rsqrt", "Rsqrt"), ("exp", "Exp"), ("expm1", "Expm1"), ("log", "Log"),
    ("log1p", "Log1p"), ("sin", "Sin"), ("cos", "Cos"), ("tan", "Tan"), ("asin", "Asin"),
    ("acos", "Acos"), ("atan", "Atan"), ("sinh", "Sinh"), ("cosh", "Cosh"), ("tanh", "Tanh"),
    ("sigmoid", "Sigmoid"), ("reciprocal", "Reciprocal"), ("floor", "Floor"), ("ceil", "Ceil"),
    ("round", "Round"), ("rint", "Rint"), ("erf", "Erf"), ("softplus", "Softplus"),
    ("softsign", "Softsign"),
]
_PREDICATES = [("is_nan", "IsNan"), ("is_inf", "IsInf"), ("is_finite", "IsFinite")]
_BINARY = [
    ("add", "AddV2"), ("subtract", "Sub"), ("multiply", "Mul"), ("realdiv", "RealDiv"),
    ("div", "Div"), ("div_no_nan", "DivNoNan"), ("floordiv", "FloorDiv"),
    ("floormod", "FloorMod"), ("truncatediv", "TruncateDiv"), ("truncatemod", "TruncateMod"),
    ("pow", "Pow"), ("maximum", "Maximum"), ("minimum", "Minimum"),
    ("squared_difference", "SquaredDifference"), ("atan2", "Atan2"), ("xdivy", "Xdivy"),
]
_COMPARE = [("less", "Less"), ("less_equal", "LessEqual"), ("greater", "Greater"),
            ("greater_equal", "GreaterEqual")]


def _make_unary(fname, op_type):
    def fn(x, name=None):
        return unary(op_type, x, name)
    fn.__name__ = fname
    fn.__doc__ = f"Elementwise {op_type}.  tb.{fname}(x) -> node `{op_type}`."
    return fn


def _make_predicate(fname, op_type):
    def fn(x, name=None):
        return unary(op_type, x, name, out_dtype=DType.BOOL)
    fn.__name__ = fname
    fn.__doc__ = f"Elementwise {op_type} (bool result)."
    return fn


def _make_binary(fname, op_type, out_dtype=None):
    def fn(x, y, name=None):
        return binary(op_type, x, y, name, out_dtype=out_dtype)
    fn.__name__ = fname
    fn.__doc__ = f"Elementwise {op_type} with broadcasting.  tb.{fname}(x, y)."
    return fn


for _f, _op in _UNARY:
    globals()[_f] = _make_unary(_f, _op)
for _f, _op in _PREDICATES:
    globals()[_f] = _make_predicate(_f, _op)
for _f, _op in _BINARY:
    globals()[_f] = _make_binary(_f, _op)
for _f, _op in _COMPARE:
    globals()[_f] = _make_binary(_f, _op, out_dtype=DType.BOOL)
neg = globals()["negative"]
sub = globals()["subtract"]
mul = globals()["multiply"]
mod = globals()["floormod"]


def equal(x, y, name=None):
    """Elementwise ==, as TensorFlow writes it (incompatible_shape_error=true)."""
    return binary("Equal", x, y, name, out_dtype=DType.BOOL,
                  extra={"incompatible_shape_error": True})


def not_equal(x, y, name=None):
    return binary("NotEqual", x, y, name, out_dtype=DType.BOOL,
                  extra={"incompatible_shape_error": True})


def logical_and(x, y, name=None):
    return binary("LogicalAnd", x, y, name, out_dtype=DType.BOOL, typed=False)


def logical_or(x, y, name=None):
    return binary("LogicalOr", x, y, name, out_dtype=DType.BOOL, typed=False)


def logical_not(x, name=None):
    return unary("LogicalNot", x, name, out_dtype=DType.BOOL, typed=False)


_TRUEDIV_TO = {DType.INT8: DType.FLOAT, DType.UINT8: DType.FLOAT, DType.INT16: DType.FLOAT,
               DType.UINT16: DType.FLOAT, DType.INT32: DType.DOUBLE, DType.INT64: DType.DOUBLE}


def truediv(x, y, name=None):
    """x / y; integers are cast to float first (int32 -> float64), as in Python 3 and TF."""
    b = get_default_builder()
    with b.name_scope(name or "truediv") as scope:
        x, y = _pair(x, y)
        to = _TRUEDIV_TO.get(x.dtype.base)
        if to is not None:
            x, y = cast(x, to), cast(y, to)
        return make("RealDiv", [x, y], {"T": x.dtype.base}, scope, [x.dtype.base]).outputs[0]


divide = truediv


def cast(x, dtype, name=None):
    """Cast (a no-op Identity-free pass-through when the dtype already matches)."""
    b = get_default_builder()
    dt = DType.parse(dtype) if not isinstance(dtype, DType) else dtype
    with b.name_scope(name or "Cast") as scope:
        x = convert_to_tensor(x, name="x")
        if x.dtype.base == dt:
            return x
        return make("Cast", [x], {"SrcT": x.dtype.base, "DstT": dt, "Truncate": False}, scope,
                    [dt]).outputs[0]


def add_n(inputs, name=None):
    """Sum of a list of same-shaped tensors (AddN)."""
    b = get_default_builder()
    with b.name_scope(name or "AddN") as scope:
        ts = [convert_to_tensor(t) for t in inputs]
        if not ts:
            raise TfgInputError("add_n of an empty list")
        if len(ts) == 1:
            return ts[0]
        return make("AddN", ts, {"N": len(ts), "T": ts[0].dtype.base}, scope,
                    [ts[0].dtype.base]).outputs[0]


def matmul(a, b_, transpose_a=False, transpose_b=False, name=None):
    """Matrix product: MatMul for matrices, BatchMatMulV2 (adj_x/adj_y) for rank > 2."""
    b = get_default_builder()
    with b.name_scope(name or "MatMul") as scope:
        a, b_ = _pair(a, b_)
        dt = a.dtype.base
        if (a.ndim or 2) > 2 or (b_.ndim or 2) > 2:
            return make("BatchMatMulV2", [a, b_], {"T": dt, "adj_x": bool(transpose_a),
                                                   "adj_y": bool(transpose_b)},
                        scope, [dt]).outputs[0]
        return make("MatMul", [a, b_], {"T": dt, "transpose_a": bool(transpose_a),
                                        "transpose_b": bool(transpose_b)},
                    scope, [dt]).outputs[0]


def select(condition, x, y, name=None):
    """Elementwise choice by a bool tensor (SelectV2, broadcasting)."""
    b = get_default_builder()
    with b.name_scope(name or "SelectV2") as scope:
        c = convert_to_tensor(condition, DType.BOOL, name="condition")
        x, y = _pair(x, y)
        return make("SelectV2", [c, x, y], {"T": x.dtype.base}, scope, [x.dtype.base]).outputs[0]


where = select


# --- reductions -----------------------------------------------------------------------------
def _reduce(op_type, x, axis, keepdims, name, typed=True):
    b = get_default_builder()
    x = convert_to_tensor(x)
    if axis is None:
        if x.ndim is not None:
            idx = constant(np.arange(x.ndim, dtype=np.int32))
        else:
            idx = range_(0, rank(x), 1)
    with b.name_scope(name or op_type) as scope:
        if axis is not None:
            idx = convert_to_tensor(axis, DType.INT32 if not _is_tensorish(axis) else None,
                                    name="reduction_indices")
        attrs = {"keep_dims": bool(keepdims), "Tidx": idx.dtype.base}
        if typed:
            attrs["T"] = x.dtype.base
        return make(op_type, [x, idx], attrs, scope, [x.dtype.base]).outputs[0]


def reduce_sum(x, axis=None, keepdims=False, name=None):
    """Sum over `axis` (all axes when None)."""
    return _reduce("Sum", x, axis, keepdims, name)


def reduce_mean(x, axis=None, keepdims=False, name=None):
    return _reduce("Mean", x, axis, keepdims, name)


def reduce_max(x, axis=None, keepdims=False, name=None):
    return _reduce("Max", x, axis, keepdims, name)


def reduce_min(x, axis=None, keepdims=False, name=None):
    return _reduce("Min", x, axis, keepdims, name)


def reduce_prod(x, axis=None, keepdims=False, name=None):
    return _reduce("Prod", x, axis, keepdims, name)


def reduce_all(x, axis=None, keepdims=False, name=None):
    return _reduce("All", x, axis, keepdims, name, typed=False)


def reduce_any(x, axis=None, keepdims=False, name=None):
    return _reduce("Any", x, axis, keepdims, name, typed=False)


def _arg(op_type, x, axis, output_type, name):
    b = get_default_builder()
    with b.name_scope(name or op_type) as scope:
        x = convert_to_tensor(x, name="input")
        dim = convert_to_tensor(axis, DType.INT32 if not _is_tensorish(axis) else None,
                                name="dimension")
        out = DType.parse(output_type) if not isinstance(output_type, DType) else output_type
        return make(op_type, [x, dim], {"T": x.dtype.base, "Tidx": dim.dtype.base,
                                        "output_type": out}, scope, [out]).outputs[0]


def argmax(x, axis=0, output_type=DType.INT64, name=None):
    """Index of the largest value along `axis` (int64 by default, as TensorFlow)."""
    return _arg("ArgMax", x, axis, output_type, name)


def argmin(x, axis=0, output_type=DType.INT64, name=None):
    return _arg("ArgMin", x, axis, output_type, name)


# --- Python operators on Tensor handles -----------------------------------------------------
def _install_operators(cls):
    ops = {
        "__add__": lambda s, o: add(s, o, name="add"),
        "__radd__": lambda s, o: add(o, s, name="add"),
        "__sub__": lambda s, o: subtract(s, o, name="sub"),
        "__rsub__": lambda s, o: subtract(o, s, name="sub"),
        "__mul__": lambda s, o: multiply(s, o, name="mul"),
        "__rmul__": lambda s, o: multiply(o, s, name="mul"),
        "__truediv__": lambda s, o: truediv(s, o),
        "__rtruediv__": lambda s, o: truediv(o, s),
        "__floordiv__": lambda s, o: floordiv(s, o, name="floordiv"),
        "__rfloordiv__": lambda s, o: floordiv(o, s, name="floordiv"),
        "__mod__": lambda s, o: floormod(s, o, name="mod"),
        "__rmod__": lambda s, o: floormod(o, s, name="mod"),
        "__pow__": lambda s, o: pow(s, o, name="pow"),
        "__rpow__": lambda s, o: pow(o, s, name="pow"),
        "__matmul__": lambda s, o: matmul(s, o),
        "__rmatmul__": lambda s, o: matmul(o, s),
        "__neg__": lambda s: negative(s, name="Neg"),
        "__abs__": lambda s: abs(s, name="Abs"),
        "__invert__": lambda s: logical_not(s),
        "__and__": lambda s, o: logical_and(s, o),
        "__rand__": lambda s, o: logical_and(o, s),
        "__or__": lambda s, o: logical_or(s, o),
        "__ror__": lambda s, o: logical_or(o, s),
        "__lt__": lambda s, o: less(s, o),
        "__le__": lambda s, o: less_equal(s, o),
        "__gt__": lambda s, o: greater(s, o),
        "__ge__": lambda s, o: greater_equal(s, o),
    }
    for key, fn in ops.items():
        setattr(cls, key, fn)
    cls.__hash__ = object.__hash__


_install_operators(Tensor)

__all__ = ([f for f, _ in _UNARY + _PREDICATES + _BINARY + _COMPARE] +
           ["neg", "sub", "mul", "mod", "equal", "not_equal", "logical_and", "logical_or",
            "logical_not", "truediv", "divide", "cast", "add_n", "matmul", "select", "where",
            "reduce_sum", "reduce_mean", "reduce_max", "reduce_min", "reduce_prod", "reduce_all",
            "reduce_any", "argmax", "argmin"])
