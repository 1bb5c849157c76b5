"""Quantization-aware-training kernels: the FakeQuant family (TensorFlow's
fake_quant_ops_functor.h, float32 bit for bit) and QuantizeAndDequantizeV2/V3/V4 (+ V4Grad,
quantize_and_dequantize_op.h).

    FakeQuantWithMinMaxArgs([-0.1, 0.3], min=-1, max=1, num_bits=8) -> [-0.10196079, 0.29803923]
    QuantizeAndDequantizeV2([-1, 0.3, 1], num_bits=3)                -> [-1, 0.33333334, 1]
                              (integers [-4, 3]: scale 3 from the max side, the range [-4/3, 1])
"""

import numpy as np

from tfg.kernels._util import fail
from tfg.kernels.registry import kernel

F32 = np.float32


# --- FakeQuant --------------------------------------------------------------------------------
def quant_range(attrs):
    """(quant_min, quant_max) of num_bits and narrow_range; num_bits outside 2..16 refused as
    TensorFlow's op constructor refuses it."""
    num_bits = int(attrs.get("num_bits", 8))
    if not 2 <= num_bits <= 16:
        fail(f"num_bits must be between 2 and 16, inclusive: {num_bits}")
    return (1 if attrs.get("narrow_range", False) else 0), (1 << num_bits) - 1


def nudge(min_, max_, quant_min, quant_max):
    """TensorFlow's Nudge, in float32 (elementwise over arrays of mins and maxes): the range
    moved so that real zero is an exact quantized value. Returns (nudged_min, nudged_max,
    scale, steps_below_zero), each float32 like min_: the last is zero_point - quant_min, the
    whole steps from nudged_min up to zero."""
    min_, max_ = np.asarray(min_, F32), np.asarray(max_, F32)
    qmin, qmax = F32(quant_min), F32(quant_max)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        scale = ((max_ - min_) / (qmax - qmin)).astype(F32)
        zero_point_from_min = (qmin - min_ / scale).astype(F32)
        # std::round, in double so that x + 0.5 cannot round up (0.49999997f)
        rounded = np.floor(zero_point_from_min.astype(np.float64) + 0.5)
        zero_point = np.where(zero_point_from_min < qmin, quant_min,
                              np.where(zero_point_from_min > qmax, quant_max, rounded))
        zero_point = np.nan_to_num(zero_point).astype(np.uint16).astype(F32)
        nudged_min = ((qmin - zero_point) * scale).astype(F32)
        nudged_max = ((qmax - zero_point) * scale).astype(F32)
    return nudged_min, nudged_max, scale, (zero_point - qmin).astype(F32)


def fake_quantize(x, nudged, by_inverse):
    """q = floor((clamp(x) - nudged_min) / scale + 0.5), then (q - steps_below_zero) * scale,
    in float32. TensorFlow 2.21's values are those of the integer step times the scale (not
    q * scale + nudged_min, which differs in the last bit); the Args functor multiplies by
    1/scale where the Vars functors divide, hence `by_inverse`."""
    nudged_min, nudged_max, scale, below_zero = nudged
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        shifted = np.maximum(np.minimum(x, nudged_max), nudged_min) - nudged_min
        steps = shifted * (F32(1) / scale) if by_inverse else shifted / scale
        return ((np.floor(steps + F32(0.5)) - below_zero) * scale).astype(F32)


def float32_input(x, what):
    x = np.asarray(x)
    if x.dtype != F32:
        fail(f"{what} must be float32, got {x.dtype}")
    return x


def args_range(ctx):
    min_, max_ = float(ctx.attrs.get("min", -6.0)), float(ctx.attrs.get("max", 6.0))
    if not min_ < max_:
        fail(f"min has to be smaller than max, was: {min_:g} >= {max_:g}")
    return min_, max_


@kernel("FakeQuantWithMinMaxArgs")
def fake_quant_args(ctx, inputs):
    qmin, qmax = quant_range(ctx.attrs)
    nudged = nudge(*args_range(ctx), qmin, qmax)
    return fake_quantize(float32_input(inputs, "inputs"), nudged, by_inverse=True)


@kernel("FakeQuantWithMinMaxArgsGradient")
def fake_quant_args_gradient(ctx, gradients, inputs):
    qmin, qmax = quant_range(ctx.attrs)
    nmin, nmax, _, _ = nudge(*args_range(ctx), qmin, qmax)
    check_same_shape(gradients, inputs)
    return pass_between(gradients, inputs, nmin, nmax)


def check_same_shape(gradients, inputs):
    if np.shape(gradients) != np.shape(inputs):
        fail(f"gradients and inputs must be the same size: {list(np.shape(gradients))} vs "
             f"{list(np.shape(inputs))}")


def pass_between(gradients, inputs, nudged_min, nudged_max):
    """The gradient where nudged_min <= input <= nudged_max, zero elsewhere."""
    inside = (inputs >= nudged_min) & (inputs <= nudged_max)
    return np.where(inside, gradients, F32(0)).astype(F32)


def scalar_bounds(min_, max_):
    for what, v in (("min", min_), ("max", max_)):
        if np.ndim(v) != 0:
            fail(f"{what} must be a scalar, got shape {list(np.shape(v))}")
    return F32(min_), F32(max_)


@kernel("FakeQuantWithMinMaxVars")
def fake_quant_vars(ctx, inputs, min_, max_):
    qmin, qmax = quant_range(ctx.attrs)
    lo, hi = scalar_bounds(min_, max_)
    x = float32_input(inputs, "inputs")
    if lo == 0 and hi == 0:  # TensorFlow: both zero -> all zeros
        return np.zeros(x.shape, F32)
    return fake_quantize(x, nudge(lo, hi, qmin, qmax), by_inverse=False)


@kernel("FakeQuantWithMinMaxVarsGradient")
def fake_quant_vars_gradient(ctx, gradients, inputs, min_, max_):
    qmin, qmax = quant_range(ctx.attrs)
    lo, hi = scalar_bounds(min_, max_)
    check_same_shape(gradients, inputs)
    g, x = float32_input(gradients, "gradients"), float32_input(inputs, "inputs")
    if lo == 0 and hi == 0:  # TensorFlow: both zero -> everything to the input
        return [g.copy(), F32(0), F32(0)]
    nmin, nmax, _, _ = nudge(lo, hi, qmin, qmax)
    below = np.where(x < nmin, g, F32(0)).sum(dtype=F32)
    above = np.where(x > nmax, g, F32(0)).sum(dtype=F32)
    return [pass_between(g, x, nmin, nmax), F32(below), F32(above)]


def channel_bounds(x, min_, max_):
    """Per-channel min/max: vectors as long as the input's last dimension."""
    if np.ndim(x) < 1:
        fail("inputs must be at least rank 1")
    depth = np.shape(x)[-1]
    for what, v in (("min", min_), ("max", max_)):
        if np.ndim(v) != 1:
            fail(f"{what} must be a vector, got shape {list(np.shape(v))}")
        if np.shape(v)[0] != depth:  # the last dimension of inputs
            fail(f"{what} has incorrect size, expected {depth} was {np.shape(v)[0]}")
    return np.asarray(min_, F32), np.asarray(max_, F32)


@kernel("FakeQuantWithMinMaxVarsPerChannel")
def fake_quant_per_channel(ctx, inputs, min_, max_):
    qmin, qmax = quant_range(ctx.attrs)
    x = float32_input(inputs, "inputs")
    lo, hi = channel_bounds(x, min_, max_)
    out = fake_quantize(x, nudge(lo, hi, qmin, qmax), by_inverse=False)
    both_zero = (lo == 0) & (hi == 0)
    return np.where(both_zero, F32(0), out).astype(F32)


@kernel("FakeQuantWithMinMaxVarsPerChannelGradient")
def fake_quant_per_channel_gradient(ctx, gradients, inputs, min_, max_):
    qmin, qmax = quant_range(ctx.attrs)
    check_same_shape(gradients, inputs)
    g, x = float32_input(gradients, "gradients"), float32_input(inputs, "inputs")
    lo, hi = channel_bounds(x, min_, max_)
    nmin, nmax, _, _ = nudge(lo, hi, qmin, qmax)
    both_zero = (lo == 0) & (hi == 0)
    rows = g.reshape(-1, g.shape[-1])
    flat_x = x.reshape(rows.shape)
    below = np.where((flat_x < nmin) & ~both_zero, rows, F32(0)).sum(0, dtype=F32)
    above = np.where((flat_x > nmax) & ~both_zero, rows, F32(0)).sum(0, dtype=F32)
    backprop = np.where(both_zero, g, pass_between(g, x, nmin, nmax)).astype(F32)
    return [backprop, below.astype(F32), above.astype(F32)]


# --- QuantizeAndDequantize --------------------------------------------------------------------
def check_num_bits(num_bits, signed_input, quote=""):
    if not 0 < num_bits < (62 if signed_input else 63):
        fail(f"num_bits is out of range: {num_bits} with {quote}signed_input_{quote} "
             f"{int(bool(signed_input))}")


def quantized_limits(signed_input, num_bits, narrow_range):
    """The integer range simulated: [-128, 127], [-127, 127] (narrow) or [0, 255] for 8 bits."""
    if signed_input:
        lowest = -(1 << (num_bits - 1)) + (1 if narrow_range else 0)
        return lowest, (1 << (num_bits - 1)) - 1
    return 0, (1 << num_bits) - 1


def quantization_range(min_range, max_range, limits):
    """TensorFlow's ComputeQuantizationRange, elementwise in the input's dtype: the largest
    scale keeping [min, max] inside the integer range with zero fixed, and the range it
    implies. Returns (min_range, max_range, scale, inverse_scale)."""
    dt = min_range.dtype.type
    qmin, qmax = dt(limits[0]), dt(limits[1])
    big = dt(np.finfo(dt).max)
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        from_min = np.where(qmin * min_range > 0, qmin / min_range, big).astype(dt)
        from_max = np.where(qmax * max_range > 0, qmax / max_range, big).astype(dt)
        use_min = from_min < from_max
        scale = np.where(use_min, from_min, from_max).astype(dt)
        inverse = np.where(use_min, min_range / qmin, max_range / qmax).astype(dt)
        new_max = np.where(use_min, (qmax * inverse).astype(dt), max_range).astype(dt)
        new_min = np.where(use_min, min_range, (qmin * inverse).astype(dt)).astype(dt)
    return new_min, new_max, scale, inverse


def round_scaled(x, round_mode):
    if round_mode == b"HALF_UP":  # Eigen's scalar_round_up_op: floor(x + 0.5)
        return np.floor(x + x.dtype.type(0.5))
    return np.rint(x)


def qdq_axis(x, axis):
    """The channel axis checked as TensorFlow checks it; -1 means one scale for the tensor."""
    if axis < -1:
        fail(f"Axis must be at least -1. Found {axis}")
    if axis != -1 and axis >= x.ndim:
        fail(f"Shape must be at least rank {axis + 1} but is rank {x.ndim}")
    return axis


def given_bounds(x, min_, max_, axis):
    """The range inputs of range_given: scalars, as TensorFlow 2.21's CPU kernel insists (it
    refuses a per-channel range; tfg refuses range_given with an axis too)."""
    min_, max_ = np.asarray(min_, x.dtype), np.asarray(max_, x.dtype)
    for what, v in (("input_min", min_), ("input_max", max_)):
        if v.ndim != 0:
            fail(f"{what} must be a scalar.")
    if axis != -1:
        fail("range_given with a per-channel axis is not supported by tfg (TensorFlow's CPU "
             "kernel takes scalar ranges only)")
    if min_ > max_:
        fail(f"Invalid range: input_min {min_:g} > input_max {max_:g}")
    return min_, max_


def channel_view(v, x, axis):
    """A per-channel vector shaped to broadcast along `axis` of x (a scalar when axis=-1)."""
    if axis == -1:
        return v
    shape = [1] * x.ndim
    shape[axis] = x.shape[axis]
    return v.reshape(shape)


def observed_bounds(x, axis):
    """The input's own min and max (per channel): range_given=false."""
    if axis == -1:
        if x.size == 0:
            return np.asarray(np.inf, x.dtype), np.asarray(-np.inf, x.dtype)
        return x.min(), x.max()
    others = tuple(a for a in range(x.ndim) if a != axis)
    if x.size == 0:
        n = x.shape[axis]
        return np.full(n, np.inf, x.dtype), np.full(n, -np.inf, x.dtype)
    return x.min(axis=others), x.max(axis=others)


def quantize_dequantize(x, min_, max_, *, signed_input, num_bits, range_given, round_mode,
                        narrow_range, axis):
    """The QuantizeAndDequantize functors: one scale (axis -1) or one per channel."""
    x = np.asarray(x)
    if x.dtype not in (np.float32, np.float64):  # TensorFlow's CPU kernels: float, double
        fail(f"QuantizeAndDequantize supports float and double, not {x.dtype}")
    axis = qdq_axis(x, axis)
    if range_given:
        lo, hi = given_bounds(x, min_, max_, axis)
    else:
        lo, hi = observed_bounds(x, axis)
    limits = quantized_limits(signed_input, num_bits, narrow_range)
    lo, hi, scale, inverse = quantization_range(np.asarray(lo, x.dtype), np.asarray(hi, x.dtype),
                                                limits)
    lo, hi, scale, inverse = (channel_view(v, x, axis) for v in (lo, hi, scale, inverse))
    with np.errstate(invalid="ignore", over="ignore"):
        if range_given:  # clamped to avoid overflowing the integer type
            x = np.maximum(np.minimum(x, hi), lo)
        return (round_scaled((x * scale).astype(x.dtype), round_mode) * inverse).astype(x.dtype)


def qdq_attrs(ctx, num_bits):
    return dict(signed_input=bool(ctx.attrs.get("signed_input", True)), num_bits=num_bits,
                range_given=bool(ctx.attrs.get("range_given", False)),
                round_mode=ctx.attrs.get("round_mode", b"HALF_TO_EVEN"),
                narrow_range=bool(ctx.attrs.get("narrow_range", False)),
                axis=int(ctx.attrs.get("axis", -1)))


@kernel(["QuantizeAndDequantizeV2", "QuantizeAndDequantizeV4"])
def quantize_and_dequantize_v2(ctx, x, input_min, input_max):
    num_bits = int(ctx.attrs.get("num_bits", 8))
    check_num_bits(num_bits, ctx.attrs.get("signed_input", True))
    return quantize_dequantize(x, input_min, input_max, **qdq_attrs(ctx, num_bits))


@kernel("QuantizeAndDequantizeV3", host_inputs=(3,))
def quantize_and_dequantize_v3(ctx, x, input_min, input_max, num_bits):
    num_bits = np.asarray(num_bits)
    if num_bits.ndim != 0:
        fail("Invalid shape. The `num_bits` tensor should be a scalar. Got dimensions: "
             f"{num_bits.ndim}")
    bits = int(num_bits)
    check_num_bits(bits, ctx.attrs.get("signed_input", True), quote="`")
    attrs = qdq_attrs(ctx, bits)
    attrs["round_mode"] = b"HALF_TO_EVEN"
    attrs["range_given"] = bool(ctx.attrs.get("range_given", True))
    return quantize_dequantize(x, input_min, input_max, **attrs)


@kernel("QuantizeAndDequantizeV4Grad")
def quantize_and_dequantize_v4_grad(ctx, gradients, x, input_min, input_max):
    """The straight-through gradient: passed where min <= x <= max; min and max get zeros."""
    x, g = np.asarray(x), np.asarray(gradients)
    axis = int(ctx.attrs.get("axis", -1))
    if axis < -1:
        fail(f"Axis must be at least -1. Found {axis}")
    if axis != -1 and axis >= x.ndim:
        fail(f"Axis should be -1 or 0 or a positive value less than {x.ndim}but given axis "
             f"value was {axis}")
    if g.shape != x.shape:
        fail("gradient and input must be the same size")
    lo, hi = np.asarray(input_min, x.dtype), np.asarray(input_max, x.dtype)
    for what, v in (("min", lo), ("max", hi)):
        if v.ndim > 1:
            fail(f"Input {what} tensor must have dimension 0 or 1. Received {v.ndim}.")
        if axis != -1 and (v.ndim != 1 or v.shape[0] != x.shape[axis]):
            fail(f"{what} has incorrect size, expected {x.shape[axis]} was "
                 f"{v.shape[0] if v.ndim else 0}")
        if axis == -1 and v.ndim != 0:
            fail(f"input_{what} must be a scalar if axis is unspecified")
    inside = (x >= channel_view(lo, x, axis)) & (x <= channel_view(hi, x, axis))
    backprop = np.where(inside, g, x.dtype.type(0)).astype(x.dtype)
    return [backprop, np.zeros(lo.shape, x.dtype), np.zeros(hi.shape, x.dtype)]
