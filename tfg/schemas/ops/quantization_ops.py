"""Signatures of the quantization-aware-training ops of TensorFlow's array_ops.cc: the
FakeQuant family (float32 only, 2..16 bits) and QuantizeAndDequantizeV2/V3/V4 (+ V4Grad).

    >>> get_op("FakeQuantWithMinMaxArgs").attrs["num_bits"].default
    8
"""
from tfg.schemas.ops.registry import op
from tfg.schemas.ops.shape_fns import ShapeError, unchanged

_FAKE_QUANT_ATTRS = ["num_bits: int = 8", "narrow_range: bool = false"]
_QDQ_T = "T: {bfloat16, half, float, double}"


def _vector_or_scalar_like_last_dim(ctx, i, what):
    """A per-channel min/max (input i) must be a vector as long as the data's last dim."""
    data, bound = ctx.shape(1 if ctx.num_inputs == 4 else 0), ctx.shape(i)
    if bound is not None and len(bound) != 1:
        raise ShapeError(f"{what} must be a vector, got shape {list(bound)}")
    if data is not None and len(data) == 0:
        raise ShapeError("inputs must have rank at least 1")
    if bound is not None and data is not None:
        d, b = data[-1], bound[0]
        if d is not None and b is not None and d >= 0 and b >= 0 and d != b:
            raise ShapeError(f"{what} has {b} elements, the last dimension of inputs {d}")
    return bound if bound is not None else ((data[-1],) if data else None)


def _scalar_bounds(ctx, first):
    for i in (first, first + 1):
        s = ctx.shape(i)
        if s is not None and len(s) != 0:
            raise ShapeError(f"min and max must be scalars, got shape {list(s)}")


def fake_quant_vars(ctx):
    """FakeQuantWithMinMaxVars: scalar min and max, the output shaped as the input."""
    _scalar_bounds(ctx, 1)
    return [ctx.shape(0)]


def fake_quant_vars_gradient(ctx):
    """(gradients, inputs, min, max) -> backprops shaped as inputs, scalar min/max ones."""
    _scalar_bounds(ctx, 2)
    return [ctx.shape(1) if ctx.shape(1) is not None else ctx.shape(0), (), ()]


def fake_quant_per_channel(ctx):
    """Per-channel: min and max are vectors as long as the input's last dimension."""
    _vector_or_scalar_like_last_dim(ctx, 1, "min")
    _vector_or_scalar_like_last_dim(ctx, 2, "max")
    return [ctx.shape(0)]


def fake_quant_per_channel_gradient(ctx):
    bound = _vector_or_scalar_like_last_dim(ctx, 2, "min")
    _vector_or_scalar_like_last_dim(ctx, 3, "max")
    data = ctx.shape(1) if ctx.shape(1) is not None else ctx.shape(0)
    return [data, bound, bound]


def qdq_v4_grad(ctx):
    """(gradients, input, min, max) -> input_backprop like input, min/max backprops like min."""
    data = ctx.shape(1) if ctx.shape(1) is not None else ctx.shape(0)
    return [data, ctx.shape(2), ctx.shape(3)]


# --- FakeQuant: float32, nudged so that zero is exactly representable
op("FakeQuantWithMinMaxArgs",
   inputs=["inputs: float"],
   outputs=["outputs: float"],
   attrs=["min: float = -6", "max: float = 6"] + _FAKE_QUANT_ATTRS,
   shape_fn=unchanged,
   traits=["elementwise"])
op("FakeQuantWithMinMaxArgsGradient",
   inputs=["gradients: float", "inputs: float"],
   outputs=["backprops: float"],
   attrs=["min: float = -6", "max: float = 6"] + _FAKE_QUANT_ATTRS,
   shape_fn=unchanged)
op("FakeQuantWithMinMaxVars",
   inputs=["inputs: float", "min: float", "max: float"],
   outputs=["outputs: float"],
   attrs=_FAKE_QUANT_ATTRS,
   shape_fn=fake_quant_vars)
op("FakeQuantWithMinMaxVarsGradient",
   inputs=["gradients: float", "inputs: float", "min: float", "max: float"],
   outputs=["backprops_wrt_input: float", "backprop_wrt_min: float",
            "backprop_wrt_max: float"],
   attrs=_FAKE_QUANT_ATTRS,
   shape_fn=fake_quant_vars_gradient)
op("FakeQuantWithMinMaxVarsPerChannel",
   inputs=["inputs: float", "min: float", "max: float"],
   outputs=["outputs: float"],
   attrs=_FAKE_QUANT_ATTRS,
   shape_fn=fake_quant_per_channel)
op("FakeQuantWithMinMaxVarsPerChannelGradient",
   inputs=["gradients: float", "inputs: float", "min: float", "max: float"],
   outputs=["backprops_wrt_input: float", "backprop_wrt_min: float",
            "backprop_wrt_max: float"],
   attrs=_FAKE_QUANT_ATTRS,
   shape_fn=fake_quant_per_channel_gradient)

# --- QuantizeAndDequantize: symmetric around zero, the range given or the input's own
op("QuantizeAndDequantizeV2",
   inputs=["input: T", "input_min: T", "input_max: T"],
   outputs=["output: T"],
   attrs=["signed_input: bool = true", "num_bits: int = 8", "range_given: bool = false", _QDQ_T,
          "round_mode: {'HALF_TO_EVEN', 'HALF_UP'} = 'HALF_TO_EVEN'",
          "narrow_range: bool = false", "axis: int = -1"],
   shape_fn=unchanged)
op("QuantizeAndDequantizeV3",
   inputs=["input: T", "input_min: T", "input_max: T", "num_bits: int32"],
   outputs=["output: T"],
   attrs=["signed_input: bool = true", "range_given: bool = true", _QDQ_T,
          "narrow_range: bool = false", "axis: int = -1"],
   shape_fn=unchanged)
op("QuantizeAndDequantizeV4",
   inputs=["input: T", "input_min: T", "input_max: T"],
   outputs=["output: T"],
   attrs=["signed_input: bool = true", "num_bits: int = 8", "range_given: bool = false", _QDQ_T,
          "round_mode: {'HALF_TO_EVEN', 'HALF_UP'} = 'HALF_TO_EVEN'",
          "narrow_range: bool = false", "axis: int = -1"],
   shape_fn=unchanged)
op("QuantizeAndDequantizeV4Grad",
   inputs=["gradients: T", "input: T", "input_min: T", "input_max: T"],
   outputs=["input_backprop: T", "input_min_backprop: T", "input_max_backprop: T"],
   attrs=[_QDQ_T, "axis: int = -1"],
   shape_fn=qdq_v4_grad)
