"""Signatures of the elementwise math ops (TensorFlow's math_ops.cc): unary functions, binary
ops with broadcasting, comparisons and logic, AddN, Cast, Select, and the gradients of unary ops.

    >>> get_op("AddV2").is_commutative, get_op("Sub").is_commutative
    (True, False)
"""
from tfg.schemas.ops.array_shapes import select, select_v2
from tfg.schemas.ops.registry import op
from tfg.schemas.ops.shape_fns import broadcast_binary, merge_inputs, unchanged

# --- unary
op("Neg",
   inputs=["x: T"],
   outputs=["y: T"],
   attrs=["T: {bfloat16, half, float, double, int8, int16, int32, int64, complex64, complex128}"],
   shape_fn=unchanged)
op("Abs",
   inputs=["x: T"],
   outputs=["y: T"],
   attrs=["T: {bfloat16, half, float, double, int8, int16, int32, int64}"],
   shape_fn=unchanged)
op("Sign",
   inputs=["x: T"],
   outputs=["y: T"],
   attrs=["T: {bfloat16, half, float, double, int8, int16, int32, int64, complex64, complex128}"],
   shape_fn=unchanged)
op("Square",
   inputs=["x: T"],
   outputs=["y: T"],
   attrs=["T: {bfloat16, half, float, double, int8, int16, int32, int64, uint8, uint16, uint32, "
          "uint64, complex64, complex128}"],
   shape_fn=unchanged)
op("Sqrt",
   inputs=["x: T"],
   outputs=["y: T"],
   attrs=["T: {bfloat16, half, float, double, complex64, complex128}"],
   shape_fn=unchanged)
op("Rsqrt",
   inputs=["x: T"],
   outputs=["y: T"],
   attrs=["T: {bfloat16, half, float, double, complex64, complex128}"],
   shape_fn=unchanged)
op("Reciprocal",
   inputs=["x: T"],
   outputs=["y: T"],
   attrs=["T: {bfloat16, half, float, double, int8, int16, int32, int64, complex64, complex128}"],
   shape_fn=unchanged)
op("Inv",
   inputs=["x: T"],
   outputs=["y: T"],
   attrs=["T: {bfloat16, half, float, double, int8, int16, int32, int64, complex64, complex128}"],
   shape_fn=unchanged)
op("Exp",
   inputs=["x: T"],
   outputs=["y: T"],
   attrs=["T: {bfloat16, half, float, double, complex64, complex128}"],
   shape_fn=unchanged)
op("Expm1",
   inputs=["x: T"],
   outputs=["y: T"],
   attrs=["T: {bfloat16, half, float, double, complex64, complex128}"],
   shape_fn=unchanged)
op("Log",
   inputs=["x: T"],
   outputs=["y: T"],
   attrs=["T: {bfloat16, half, float, double, complex64, complex128}"],
   shape_fn=unchanged)
op("Log1p",
   inputs=["x: T"],
   outputs=["y: T"],
   attrs=["T: {bfloat16, half, float, double, complex64, complex128}"],
   shape_fn=unchanged)
op("Sin",
   inputs=["x: T"],
   outputs=["y: T"],
   attrs=["T: {bfloat16, half, float, double, complex64, complex128}"],
   shape_fn=unchanged)
op("Cos",
   inputs=["x: T"],
   outputs=["y: T"],
   attrs=["T: {bfloat16, half, float, double, complex64, complex128}"],
   shape_fn=unchanged)
op("Tan",
   inputs=["x: T"],
   outputs=["y: T"],
   attrs=["T: {bfloat16, half, float, double, complex64, complex128}"],
   shape_fn=unchanged)
op("Tanh",
   inputs=["x: T"],
   outputs=["y: T"],
   attrs=["T: {bfloat16, half, float, double, complex64, complex128}"],
   shape_fn=unchanged)
op("Sigmoid",
   inputs=["x: T"],
   outputs=["y: T"],
   attrs=["T: {bfloat16, half, float, double, complex64, complex128}"],
   shape_fn=unchanged)
op("Erf",
   inputs=["x: T"],
   outputs=["y: T"],
   attrs=["T: floattype"],
   shape_fn=unchanged)
op("Erfc",
   inputs=["x: T"],
   outputs=["y: T"],
   attrs=["T: floattype"],
   shape_fn=unchanged)
op("Floor",
   inputs=["x: T"],
   outputs=["y: T"],
   attrs=["T: floattype"],
   shape_fn=unchanged)
op("Ceil",
   inputs=["x: T"],
   outputs=["y: T"],
   attrs=["T: floattype"],
   shape_fn=unchanged)
op("Round",
   inputs=["x: T"],
   outputs=["y: T"],
   attrs=["T: {bfloat16, half, float, double, int8, int16, int32, int64, complex64, complex128}"],
   shape_fn=unchanged)
op("Rint",
   inputs=["x: T"],
   outputs=["y: T"],
   attrs=["T: floattype"],
   shape_fn=unchanged)
op("IsFinite",
   inputs=["x: T"],
   outputs=["y: bool"],
   attrs=["T: floattype"],
   shape_fn=unchanged)
op("IsNan",
   inputs=["x: T"],
   outputs=["y: bool"],
   attrs=["T: floattype"],
   shape_fn=unchanged)
op("IsInf",
   inputs=["x: T"],
   outputs=["y: bool"],
   attrs=["T: floattype"],
   shape_fn=unchanged)
op("LogicalNot",
   inputs=["x: bool"],
   outputs=["y: bool"],
   shape_fn=unchanged)
op("Cast",
   inputs=["x: SrcT"],
   outputs=["y: DstT"],
   attrs=["SrcT: type", "DstT: type", "Truncate: bool = false"],
   shape_fn=unchanged)

# --- binary, broadcasting
op("AddV2",
   inputs=["x: T", "y: T"],
   outputs=["z: T"],
   attrs=["T: {bfloat16, half, float, double, uint8, uint16, uint32, uint64, int8, int16, int32, "
          "int64, complex64, complex128}"],
   is_commutative=True, is_aggregate=True, shape_fn=broadcast_binary)
op("Add",
   inputs=["x: T", "y: T"],
   outputs=["z: T"],
   attrs=["T: {bfloat16, half, float, double, uint8, int8, int16, int32, int64, complex64, "
          "complex128, string}"],
   shape_fn=broadcast_binary)
op("Sub",
   inputs=["x: T", "y: T"],
   outputs=["z: T"],
   attrs=["T: {bfloat16, half, float, double, uint8, int8, uint16, int16, int32, int64, "
          "complex64, complex128, uint32, uint64}"],
   shape_fn=broadcast_binary)
op("Mul",
   inputs=["x: T", "y: T"],
   outputs=["z: T"],
   attrs=["T: {bfloat16, half, float, double, uint8, int8, uint16, int16, int32, uint32, uint64, "
          "int64, complex64, complex128}"],
   is_commutative=True, shape_fn=broadcast_binary)
op("RealDiv",
   inputs=["x: T", "y: T"],
   outputs=["z: T"],
   attrs=["T: {bfloat16, half, float, double, uint8, int8, uint16, int16, int32, uint32, uint64, "
          "int64, complex64, complex128}"],
   shape_fn=broadcast_binary)
op("Div",
   inputs=["x: T", "y: T"],
   outputs=["z: T"],
   attrs=["T: {bfloat16, half, float, double, uint8, int8, uint16, int16, int32, uint32, uint64, "
          "int64, complex64, complex128}"],
   shape_fn=broadcast_binary)
op("DivNoNan",
   inputs=["x: T", "y: T"],
   outputs=["z: T"],
   attrs=["T: {half, float, bfloat16, double, complex64, complex128}"],
   shape_fn=broadcast_binary)
op("FloorDiv",
   inputs=["x: T", "y: T"],
   outputs=["z: T"],
   attrs=["T: {bfloat16, half, float, double, uint8, int8, uint16, int16, int32, uint32, uint64, "
          "int64, complex64, complex128}"],
   shape_fn=broadcast_binary)
op("FloorMod",
   inputs=["x: T", "y: T"],
   outputs=["z: T"],
   attrs=["T: realnumbertype"],
   shape_fn=broadcast_binary)
op("TruncateDiv",
   inputs=["x: T", "y: T"],
   outputs=["z: T"],
   attrs=["T: {bfloat16, half, float, double, uint8, int8, uint16, int16, int32, uint32, uint64, "
          "int64, complex64, complex128}"],
   shape_fn=broadcast_binary)
op("TruncateMod",
   inputs=["x: T", "y: T"],
   outputs=["z: T"],
   attrs=["T: {int32, int64, bfloat16, half, float, double}"],
   shape_fn=broadcast_binary)
op("Pow",
   inputs=["x: T", "y: T"],
   outputs=["z: T"],
   attrs=["T: {bfloat16, float, half, double, int8, int16, int32, int64, complex64, complex128}"],
   shape_fn=broadcast_binary)
op("Maximum",
   inputs=["x: T", "y: T"],
   outputs=["z: T"],
   attrs=["T: realnumbertype"],
   shape_fn=broadcast_binary)
op("Minimum",
   inputs=["x: T", "y: T"],
   outputs=["z: T"],
   attrs=["T: realnumbertype"],
   shape_fn=broadcast_binary)
op("SquaredDifference",
   inputs=["x: T", "y: T"],
   outputs=["z: T"],
   attrs=["T: {bfloat16, half, float, double, int32, int64, complex64, complex128}"],
   is_commutative=True, shape_fn=broadcast_binary)
op("Equal",
   inputs=["x: T", "y: T"],
   outputs=["z: bool"],
   attrs=["T: type", "incompatible_shape_error: bool = true"],
   is_commutative=True, shape_fn=broadcast_binary)
op("NotEqual",
   inputs=["x: T", "y: T"],
   outputs=["z: bool"],
   attrs=["T: type", "incompatible_shape_error: bool = true"],
   is_commutative=True, shape_fn=broadcast_binary)
op("Less",
   inputs=["x: T", "y: T"],
   outputs=["z: bool"],
   attrs=["T: realnumbertype"],
   shape_fn=broadcast_binary)
op("LessEqual",
   inputs=["x: T", "y: T"],
   outputs=["z: bool"],
   attrs=["T: realnumbertype"],
   shape_fn=broadcast_binary)
op("Greater",
   inputs=["x: T", "y: T"],
   outputs=["z: bool"],
   attrs=["T: realnumbertype"],
   shape_fn=broadcast_binary)
op("GreaterEqual",
   inputs=["x: T", "y: T"],
   outputs=["z: bool"],
   attrs=["T: realnumbertype"],
   shape_fn=broadcast_binary)
op("LogicalAnd",
   inputs=["x: bool", "y: bool"],
   outputs=["z: bool"],
   is_commutative=True, shape_fn=broadcast_binary)
op("LogicalOr",
   inputs=["x: bool", "y: bool"],
   outputs=["z: bool"],
   is_commutative=True, shape_fn=broadcast_binary)
op("AddN",
   inputs=["inputs: N * T"],
   outputs=["sum: T"],
   attrs=["N: int >= 1",
          "T: {float, double, int32, uint8, int16, int8, complex64, int64, qint8, quint8, qint32, "
          "bfloat16, qint16, quint16, uint16, complex128, half, uint32, uint64, variant}"],
   is_commutative=True, is_aggregate=True, shape_fn=merge_inputs)
op("Select",
   inputs=["condition: bool", "t: T", "e: T"],
   outputs=["output: T"],
   attrs=["T: type"],
   shape_fn=select)
op("SelectV2",
   inputs=["condition: bool", "t: T", "e: T"],
   outputs=["output: T"],
   attrs=["T: type"],
   shape_fn=select_v2)

# --- gradients of unary ops (y, dy) -> dx
op("TanhGrad",
   inputs=["y: T", "dy: T"],
   outputs=["z: T"],
   attrs=["T: {bfloat16, half, float, double, complex64, complex128}"],
   shape_fn=merge_inputs)
op("SigmoidGrad",
   inputs=["y: T", "dy: T"],
   outputs=["z: T"],
   attrs=["T: {bfloat16, half, float, double, complex64, complex128}"],
   shape_fn=merge_inputs)
op("SqrtGrad",
   inputs=["y: T", "dy: T"],
   outputs=["z: T"],
   attrs=["T: {bfloat16, half, float, double, complex64, complex128}"],
   shape_fn=merge_inputs)
op("RsqrtGrad",
   inputs=["y: T", "dy: T"],
   outputs=["z: T"],
   attrs=["T: {bfloat16, half, float, double, complex64, complex128}"],
   shape_fn=merge_inputs)
op("ReciprocalGrad",
   inputs=["y: T", "dy: T"],
   outputs=["z: T"],
   attrs=["T: {bfloat16, half, float, double, complex64, complex128}"],
   shape_fn=merge_inputs)
op("InvGrad",
   inputs=["y: T", "dy: T"],
   outputs=["z: T"],
   attrs=["T: {bfloat16, half, float, double, complex64, complex128}"],
   shape_fn=merge_inputs)
