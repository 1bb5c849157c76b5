"""Signatures of the elementwise math ops and matrix products (TensorFlow's math_ops.cc): unary
functions, binary ops with broadcasting, comparisons and logic, AddN, Cast, Select, the
gradients of unary ops, MatMul and BatchMatMul (reductions: reduction_ops.py).

    >>> get_op("AddV2").is_commutative, get_op("Sub").is_commutative
    (True, False)
"""
from tfg.schemas.ops.array_shapes import select, select_v2
from tfg.schemas.ops.registry import op
from tfg.schemas.ops.shape_fns import (
    ShapeError, broadcast, broadcast_binary, merge_dim, merge_inputs, unchanged, with_rank,
    with_rank_at_least)


def matmul(ctx):
    a = with_rank(ctx.shape(0), 2, "MatMul a")
    b = with_rank(ctx.shape(1), 2, "MatMul b")
    if ctx.attr("transpose_a"):
        a = a[::-1]
    if ctx.attr("transpose_b"):
        b = b[::-1]
    try:
        merge_dim(a[1], b[0])
    except ShapeError:
        raise ShapeError(f"MatMul inner dimensions differ: {a[1]} vs {b[0]}") from None
    return [(a[0], b[1])]


def batch_matmul(ctx):
    a, b = ctx.shape(0), ctx.shape(1)
    if a is None or b is None:
        return [None]
    with_rank_at_least(a, 2, "BatchMatMul x")
    with_rank_at_least(b, 2, "BatchMatMul y")
    ar, ac = (a[-1], a[-2]) if ctx.attr("adj_x") else (a[-2], a[-1])
    br, bc = (b[-1], b[-2]) if ctx.attr("adj_y") else (b[-2], b[-1])
    merge_dim(ac, br)
    if ctx.node.op == "BatchMatMul":  # v1: batch dims must match exactly, no broadcasting
        batch = tuple(merge_dim(x, y) for x, y in zip(with_rank(a[:-2], len(b) - 2), b[:-2]))
    else:
        batch = broadcast(a[:-2], b[:-2])
    return [batch + (ar, bc)]


# --- unary
op("Neg",
   inputs=["x: T"],
   outputs=["y: T"],
   attrs=["T: {bfloat16, half, float, double, int8, int16, int32, int64, complex64, complex128}"],
   shape_fn=unchanged,
   traits=["elementwise", "layout_agnostic"])
op("Abs",
   inputs=["x: T"],
   outputs=["y: T"],
   attrs=["T: {bfloat16, half, float, double, int8, int16, int32, int64}"],
   shape_fn=unchanged,
   traits=["elementwise", "layout_agnostic"])
op("Sign",
   inputs=["x: T"],
   outputs=["y: T"],
   attrs=["T: {bfloat16, half, float, double, int8, int16, int32, int64, complex64, complex128}"],
   shape_fn=unchanged,
   traits=["elementwise", "layout_agnostic"])
op("Square",
   inputs=["x: T"],
   outputs=["y: T"],
   attrs=["T: {bfloat16, half, float, double, int8, int16, int32, int64, uint8, uint16, uint32, "
          "uint64, complex64, complex128}"],
   shape_fn=unchanged,
   traits=["elementwise", "layout_agnostic"])
op("Sqrt",
   inputs=["x: T"],
   outputs=["y: T"],
   attrs=["T: {bfloat16, half, float, double, complex64, complex128}"],
   shape_fn=unchanged,
   traits=["elementwise", "layout_agnostic"])
op("Rsqrt",
   inputs=["x: T"],
   outputs=["y: T"],
   attrs=["T: {bfloat16, half, float, double, complex64, complex128}"],
   shape_fn=unchanged,
   traits=["elementwise", "layout_agnostic"])
op("Reciprocal",
   inputs=["x: T"],
   outputs=["y: T"],
   attrs=["T: {bfloat16, half, float, double, int8, int16, int32, int64, complex64, complex128}"],
   shape_fn=unchanged,
   traits=["elementwise", "layout_agnostic"])
op("Inv",
   inputs=["x: T"],
   outputs=["y: T"],
   attrs=["T: {bfloat16, half, float, double, int8, int16, int32, int64, complex64, complex128}"],
   shape_fn=unchanged,
   traits=["elementwise"])
op("Exp",
   inputs=["x: T"],
   outputs=["y: T"],
   attrs=["T: {bfloat16, half, float, double, complex64, complex128}"],
   shape_fn=unchanged,
   traits=["elementwise", "layout_agnostic"])
op("Expm1",
   inputs=["x: T"],
   outputs=["y: T"],
   attrs=["T: {bfloat16, half, float, double, complex64, complex128}"],
   shape_fn=unchanged,
   traits=["elementwise", "layout_agnostic"])
op("Log",
   inputs=["x: T"],
   outputs=["y: T"],
   attrs=["T: {bfloat16, half, float, double, complex64, complex128}"],
   shape_fn=unchanged,
   traits=["elementwise", "layout_agnostic"])
op("Log1p",
   inputs=["x: T"],
   outputs=["y: T"],
   attrs=["T: {bfloat16, half, float, double, complex64, complex128}"],
   shape_fn=unchanged,
   traits=["elementwise", "layout_agnostic"])
op("Sin",
   inputs=["x: T"],
   outputs=["y: T"],
   attrs=["T: {bfloat16, half, float, double, complex64, complex128}"],
   shape_fn=unchanged,
   traits=["elementwise", "layout_agnostic"])
op("Cos",
   inputs=["x: T"],
   outputs=["y: T"],
   attrs=["T: {bfloat16, half, float, double, complex64, complex128}"],
   shape_fn=unchanged,
   traits=["elementwise", "layout_agnostic"])
op("Tan",
   inputs=["x: T"],
   outputs=["y: T"],
   attrs=["T: {bfloat16, half, float, double, complex64, complex128}"],
   shape_fn=unchanged,
   traits=["elementwise"])
op("Tanh",
   inputs=["x: T"],
   outputs=["y: T"],
   attrs=["T: {bfloat16, half, float, double, complex64, complex128}"],
   shape_fn=unchanged,
   traits=["elementwise", "layout_agnostic"])
op("Sigmoid",
   inputs=["x: T"],
   outputs=["y: T"],
   attrs=["T: {bfloat16, half, float, double, complex64, complex128}"],
   shape_fn=unchanged,
   traits=["elementwise", "layout_agnostic"])
op("Erf",
   inputs=["x: T"],
   outputs=["y: T"],
   attrs=["T: floattype"],
   shape_fn=unchanged,
   traits=["elementwise"])
op("Erfc",
   inputs=["x: T"],
   outputs=["y: T"],
   attrs=["T: floattype"],
   shape_fn=unchanged,
   traits=["elementwise"])
op("Floor",
   inputs=["x: T"],
   outputs=["y: T"],
   attrs=["T: floattype"],
   shape_fn=unchanged,
   traits=["elementwise", "layout_agnostic"])
op("Ceil",
   inputs=["x: T"],
   outputs=["y: T"],
   attrs=["T: floattype"],
   shape_fn=unchanged,
   traits=["elementwise", "layout_agnostic"])
op("Round",
   inputs=["x: T"],
   outputs=["y: T"],
   attrs=["T: {bfloat16, half, float, double, int8, int16, int32, int64, complex64, complex128}"],
   shape_fn=unchanged,
   traits=["elementwise"])
op("Rint",
   inputs=["x: T"],
   outputs=["y: T"],
   attrs=["T: floattype"],
   shape_fn=unchanged,
   traits=["elementwise"])
op("IsFinite",
   inputs=["x: T"],
   outputs=["y: bool"],
   attrs=["T: floattype"],
   shape_fn=unchanged,
   traits=["elementwise", "layout_agnostic"])
op("IsNan",
   inputs=["x: T"],
   outputs=["y: bool"],
   attrs=["T: floattype"],
   shape_fn=unchanged,
   traits=["elementwise", "layout_agnostic"])
op("IsInf",
   inputs=["x: T"],
   outputs=["y: bool"],
   attrs=["T: floattype"],
   shape_fn=unchanged,
   traits=["elementwise"])
op("LogicalNot",
   inputs=["x: bool"],
   outputs=["y: bool"],
   shape_fn=unchanged,
   traits=["elementwise", "layout_agnostic"])
op("Asin",
   inputs=["x: T"],
   outputs=["y: T"],
   attrs=["T: {bfloat16, half, float, double, complex64, complex128}"],
   shape_fn=unchanged,
   traits=["elementwise"])
op("Acos",
   inputs=["x: T"],
   outputs=["y: T"],
   attrs=["T: {bfloat16, half, float, double, complex64, complex128}"],
   shape_fn=unchanged,
   traits=["elementwise"])
op("Atan",
   inputs=["x: T"],
   outputs=["y: T"],
   attrs=["T: {bfloat16, half, float, double, complex64, complex128}"],
   shape_fn=unchanged,
   traits=["elementwise"])
op("Sinh",
   inputs=["x: T"],
   outputs=["y: T"],
   attrs=["T: {bfloat16, half, float, double, complex64, complex128}"],
   shape_fn=unchanged,
   traits=["elementwise"])
op("Cosh",
   inputs=["x: T"],
   outputs=["y: T"],
   attrs=["T: {bfloat16, half, float, double, complex64, complex128}"],
   shape_fn=unchanged,
   traits=["elementwise"])
op("Cast",
   inputs=["x: SrcT"],
   outputs=["y: DstT"],
   attrs=["SrcT: type", "DstT: type", "Truncate: bool = false"],
   shape_fn=unchanged,
   traits=["elementwise", "layout_agnostic"])

# --- binary, broadcasting
op("AddV2",
   inputs=["x: T", "y: T"],
   outputs=["z: T"],
   attrs=["T: {bfloat16, half, float, double, uint8, uint16, uint32, uint64, int8, int16, int32, "
          "int64, complex64, complex128}"],
   is_commutative=True, is_aggregate=True, shape_fn=broadcast_binary,
   traits=["elementwise", "layout_agnostic"])
op("Add",
   inputs=["x: T", "y: T"],
   outputs=["z: T"],
   attrs=["T: {bfloat16, half, float, double, uint8, int8, int16, int32, int64, complex64, "
          "complex128, string}"],
   shape_fn=broadcast_binary,
   traits=["elementwise", "layout_agnostic"])
op("Sub",
   inputs=["x: T", "y: T"],
   outputs=["z: T"],
   attrs=["T: {bfloat16, half, float, double, uint8, int8, uint16, int16, int32, int64, "
          "complex64, complex128, uint32, uint64}"],
   shape_fn=broadcast_binary,
   traits=["elementwise", "layout_agnostic"])
op("Mul",
   inputs=["x: T", "y: T"],
   outputs=["z: T"],
   attrs=["T: {bfloat16, half, float, double, uint8, int8, uint16, int16, int32, uint32, uint64, "
          "int64, complex64, complex128}"],
   is_commutative=True, shape_fn=broadcast_binary,
   traits=["elementwise", "layout_agnostic"])
op("RealDiv",
   inputs=["x: T", "y: T"],
   outputs=["z: T"],
   attrs=["T: {bfloat16, half, float, double, uint8, int8, uint16, int16, int32, uint32, uint64, "
          "int64, complex64, complex128}"],
   shape_fn=broadcast_binary,
   traits=["elementwise", "layout_agnostic"])
op("Div",
   inputs=["x: T", "y: T"],
   outputs=["z: T"],
   attrs=["T: {bfloat16, half, float, double, uint8, int8, uint16, int16, int32, uint32, uint64, "
          "int64, complex64, complex128}"],
   shape_fn=broadcast_binary,
   traits=["elementwise", "layout_agnostic"])
op("DivNoNan",
   inputs=["x: T", "y: T"],
   outputs=["z: T"],
   attrs=["T: {half, float, bfloat16, double, complex64, complex128}"],
   shape_fn=broadcast_binary,
   traits=["elementwise"])
op("FloorDiv",
   inputs=["x: T", "y: T"],
   outputs=["z: T"],
   attrs=["T: {bfloat16, half, float, double, uint8, int8, uint16, int16, int32, uint32, uint64, "
          "int64, complex64, complex128}"],
   shape_fn=broadcast_binary,
   traits=["elementwise"])
op("FloorMod",
   inputs=["x: T", "y: T"],
   outputs=["z: T"],
   attrs=["T: realnumbertype"],
   shape_fn=broadcast_binary,
   traits=["elementwise"])
op("TruncateDiv",
   inputs=["x: T", "y: T"],
   outputs=["z: T"],
   attrs=["T: {bfloat16, half, float, double, uint8, int8, uint16, int16, int32, uint32, uint64, "
          "int64, complex64, complex128}"],
   shape_fn=broadcast_binary,
   traits=["elementwise"])
op("TruncateMod",
   inputs=["x: T", "y: T"],
   outputs=["z: T"],
   attrs=["T: {int32, int64, bfloat16, half, float, double}"],
   shape_fn=broadcast_binary,
   traits=["elementwise"])
op("Pow",
   inputs=["x: T", "y: T"],
   outputs=["z: T"],
   attrs=["T: {bfloat16, float, half, double, int8, int16, int32, int64, complex64, complex128}"],
   shape_fn=broadcast_binary,
   traits=["elementwise", "layout_agnostic"])
op("Maximum",
   inputs=["x: T", "y: T"],
   outputs=["z: T"],
   attrs=["T: realnumbertype"],
   shape_fn=broadcast_binary,
   traits=["elementwise", "layout_agnostic"])
op("Minimum",
   inputs=["x: T", "y: T"],
   outputs=["z: T"],
   attrs=["T: realnumbertype"],
   shape_fn=broadcast_binary,
   traits=["elementwise", "layout_agnostic"])
op("SquaredDifference",
   inputs=["x: T", "y: T"],
   outputs=["z: T"],
   attrs=["T: {bfloat16, half, float, double, int32, int64, complex64, complex128}"],
   is_commutative=True, shape_fn=broadcast_binary,
   traits=["elementwise", "layout_agnostic"])
op("Equal",
   inputs=["x: T", "y: T"],
   outputs=["z: bool"],
   attrs=["T: type", "incompatible_shape_error: bool = true"],
   is_commutative=True, shape_fn=broadcast_binary,
   traits=["elementwise", "layout_agnostic"])
op("NotEqual",
   inputs=["x: T", "y: T"],
   outputs=["z: bool"],
   attrs=["T: type", "incompatible_shape_error: bool = true"],
   is_commutative=True, shape_fn=broadcast_binary,
   traits=["elementwise", "layout_agnostic"])
op("Less",
   inputs=["x: T", "y: T"],
   outputs=["z: bool"],
   attrs=["T: realnumbertype"],
   shape_fn=broadcast_binary,
   traits=["elementwise", "layout_agnostic"])
op("LessEqual",
   inputs=["x: T", "y: T"],
   outputs=["z: bool"],
   attrs=["T: realnumbertype"],
   shape_fn=broadcast_binary,
   traits=["elementwise", "layout_agnostic"])
op("Greater",
   inputs=["x: T", "y: T"],
   outputs=["z: bool"],
   attrs=["T: realnumbertype"],
   shape_fn=broadcast_binary,
   traits=["elementwise", "layout_agnostic"])
op("GreaterEqual",
   inputs=["x: T", "y: T"],
   outputs=["z: bool"],
   attrs=["T: realnumbertype"],
   shape_fn=broadcast_binary,
   traits=["elementwise", "layout_agnostic"])
op("LogicalAnd",
   inputs=["x: bool", "y: bool"],
   outputs=["z: bool"],
   is_commutative=True, shape_fn=broadcast_binary,
   traits=["elementwise", "layout_agnostic"])
op("LogicalOr",
   inputs=["x: bool", "y: bool"],
   outputs=["z: bool"],
   is_commutative=True, shape_fn=broadcast_binary,
   traits=["elementwise", "layout_agnostic"])
op("AddN",
   inputs=["inputs: N * T"],
   outputs=["sum: T"],
   attrs=["N: int >= 1",
          "T: {float, double, int32, uint8, int16, int8, complex64, int64, qint8, quint8, qint32, "
          "bfloat16, qint16, quint16, uint16, complex128, half, uint32, uint64, variant}"],
   is_commutative=True, is_aggregate=True, shape_fn=merge_inputs,
   traits=["elementwise", "layout_agnostic"])


def accumulate_n(ctx):
    """AddN's shape merged with the `shape` attr (tf.math.accumulate_n's AccumulateNV2)."""
    out, shape = merge_inputs(ctx)[0], ctx.attr("shape")
    if out is None or shape is None:
        return [shape if out is None else out]
    if len(out) != len(shape):
        raise ShapeError(f"AccumulateNV2 inputs of rank {len(out)}, shape attr of rank "
                         f"{len(shape)}")
    return [tuple(merge_dim(a, b) for a, b in zip(out, shape))]


op("AccumulateNV2",
   inputs=["inputs: N * T"],
   outputs=["sum: T"],
   attrs=["N: int >= 1", "T: numbertype", "shape: shape"],
   is_commutative=True, is_aggregate=True, shape_fn=accumulate_n)
op("Select",
   inputs=["condition: bool", "t: T", "e: T"],
   outputs=["output: T"],
   attrs=["T: type"],
   shape_fn=select,
   traits=["layout_agnostic"])
op("SelectV2",
   inputs=["condition: bool", "t: T", "e: T"],
   outputs=["output: T"],
   attrs=["T: type"],
   shape_fn=select_v2,
   traits=["elementwise", "layout_agnostic"])

op("Atan2",
   inputs=["y: T", "x: T"],
   outputs=["z: T"],
   attrs=["T: floattype"],
   shape_fn=broadcast_binary,
   traits=["elementwise"])
# ApproximateEqual: |x - y| < tolerance of same-shaped x, y; NextAfter: numpy.nextafter
op("ApproximateEqual",
   inputs=["x: T", "y: T"],
   outputs=["z: bool"],
   attrs=["T: numbertype", "tolerance: float = 1e-05"],
   is_commutative=True, shape_fn=merge_inputs,
   traits=["elementwise"])
op("NextAfter",
   inputs=["x1: T", "x2: T"],
   outputs=["output: T"],
   attrs=["T: {double, float} = DT_FLOAT"],
   shape_fn=broadcast_binary,
   traits=["elementwise"])
op("Xdivy",
   inputs=["x: T", "y: T"],
   outputs=["z: T"],
   attrs=["T: {half, bfloat16, float, double, complex64, complex128}"],
   shape_fn=broadcast_binary,
   traits=["elementwise"])

# --- more elementwise maths: inverse hyperbolics, NaN-safe products, fmod, clipping
for _name in ("Asinh", "Acosh", "Atanh"):
    op(_name,
       inputs=["x: T"],
       outputs=["y: T"],
       attrs=["T: {bfloat16, half, float, double, complex64, complex128}"],
       shape_fn=unchanged,
       traits=["elementwise"])
op("Mod",
   inputs=["x: T", "y: T"],
   outputs=["z: T"],
   attrs=["T: {int32, int64, half, bfloat16, float, double}"],
   shape_fn=broadcast_binary,
   traits=["elementwise"])
op("MulNoNan",
   inputs=["x: T", "y: T"],
   outputs=["z: T"],
   attrs=["T: {bfloat16, half, float, double, complex64, complex128}"],
   shape_fn=broadcast_binary,
   traits=["elementwise"])
for _name in ("Xlogy", "Xlog1py"):
    op(_name,
       inputs=["x: T", "y: T"],
       outputs=["z: T"],
       attrs=["T: {half, bfloat16, float, double, complex64, complex128}"],
       shape_fn=broadcast_binary,
       traits=["elementwise"])
# min and max are scalars or t's shape (the kernel checks): the output is t's shape
op("ClipByValue",
   inputs=["t: T", "clip_value_min: T", "clip_value_max: T"],
   outputs=["output: T"],
   attrs=["T: {float, double, int32, uint8, int16, int8, complex64, int64, qint8, quint8, "
          "qint32, bfloat16, qint16, quint16, uint16, complex128, half, uint32, uint64}"],
   shape_fn=unchanged,
   traits=["elementwise"])

# --- bitwise (TensorFlow's bitwise_ops.cc)
_INTS = "T: {int8, int16, int32, int64, uint8, uint16, uint32, uint64}"
op("Invert",
   inputs=["x: T"],
   outputs=["y: T"],
   attrs=[_INTS],
   shape_fn=unchanged,
   traits=["elementwise"])
op("PopulationCount",
   inputs=["x: T"],
   outputs=["y: uint8"],
   attrs=[_INTS],
   shape_fn=unchanged,
   traits=["elementwise"])
for _name in ("BitwiseAnd", "BitwiseOr", "BitwiseXor"):
    op(_name,
       inputs=["x: T", "y: T"],
       outputs=["z: T"],
       attrs=[_INTS],
       is_commutative=True, shape_fn=broadcast_binary,
       traits=["elementwise"])
for _name in ("LeftShift", "RightShift"):
    op(_name,
       inputs=["x: T", "y: T"],
       outputs=["z: T"],
       attrs=[_INTS],
       shape_fn=broadcast_binary,
       traits=["elementwise"])

# --- gradients of unary ops (y, dy) -> dx
op("TanhGrad",
   inputs=["y: T", "dy: T"],
   outputs=["z: T"],
   attrs=["T: {bfloat16, half, float, double, complex64, complex128}"],
   shape_fn=merge_inputs,
   traits=["elementwise", "layout_agnostic"])
op("SigmoidGrad",
   inputs=["y: T", "dy: T"],
   outputs=["z: T"],
   attrs=["T: {bfloat16, half, float, double, complex64, complex128}"],
   shape_fn=merge_inputs,
   traits=["elementwise", "layout_agnostic"])
op("SqrtGrad",
   inputs=["y: T", "dy: T"],
   outputs=["z: T"],
   attrs=["T: {bfloat16, half, float, double, complex64, complex128}"],
   shape_fn=merge_inputs,
   traits=["elementwise"])
op("RsqrtGrad",
   inputs=["y: T", "dy: T"],
   outputs=["z: T"],
   attrs=["T: {bfloat16, half, float, double, complex64, complex128}"],
   shape_fn=merge_inputs,
   traits=["elementwise"])
op("ReciprocalGrad",
   inputs=["y: T", "dy: T"],
   outputs=["z: T"],
   attrs=["T: {bfloat16, half, float, double, complex64, complex128}"],
   shape_fn=merge_inputs,
   traits=["elementwise"])
op("InvGrad",
   inputs=["y: T", "dy: T"],
   outputs=["z: T"],
   attrs=["T: {bfloat16, half, float, double, complex64, complex128}"],
   shape_fn=merge_inputs,
   traits=["elementwise"])

# --- matrix products
op("MatMul",
   inputs=["a: T", "b: T"],
   outputs=["product: T"],
   attrs=["transpose_a: bool = false", "transpose_b: bool = false",
          "T: {bfloat16, half, float, double, int32, int64, uint8, uint16, uint32, uint64, "
          "complex64, complex128}", "grad_a: bool = false", "grad_b: bool = false"],
   shape_fn=matmul,
   traits=["blas", "fresh_output"])
op("BatchMatMul",
   inputs=["x: T", "y: T"],
   outputs=["output: T"],
   attrs=["T: {bfloat16, half, float, double, int32, int64, complex64, complex128}",
          "adj_x: bool = false", "adj_y: bool = false", "grad_x: bool = false",
          "grad_y: bool = false"],
   shape_fn=batch_matmul,
   traits=["blas"])
op("BatchMatMulV2",
   inputs=["x: T", "y: T"],
   outputs=["output: T"],
   attrs=["T: {bfloat16, half, float, double, int16, int32, int64, uint8, uint16, uint32, uint64, "
          "complex64, complex128}", "adj_x: bool = false", "adj_y: bool = false",
          "grad_x: bool = false", "grad_y: bool = false"],
   shape_fn=batch_matmul,
   traits=["blas"])
op("BatchMatMulV3",
   inputs=["x: Ta", "y: Tb"],
   outputs=["output: Tout"],
   attrs=["Ta: {bfloat16, half, float, double, uint8, int8, int16, int32, int64, complex64, "
          "complex128}",
          "Tb: {bfloat16, half, float, double, uint8, int8, int16, int32, int64, complex64, "
          "complex128}",
          "Tout: {bfloat16, half, float, double, int16, int32, int64, complex64, complex128}",
          "adj_x: bool = false", "adj_y: bool = false", "grad_x: bool = false",
          "grad_y: bool = false"],
   shape_fn=batch_matmul,
   traits=["blas"])
