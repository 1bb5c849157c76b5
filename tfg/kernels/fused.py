"""Kernels (CPU and GPU, on ctx.xp) for Grappler's fused ops: the base op's kernel, then the fused steps in order.

    _FusedConv2D(x, W, b, fused_ops=[BiasAdd, Relu])             = Relu(BiasAdd(Conv2D(x, W), b))
    _FusedConv2D(x, W, s, o, m, v, fused_ops=[FusedBatchNorm])   = BN_inference(Conv2D(x, W))
    _FusedMatMul(a, b, bias, fused_ops=[BiasAdd, LeakyRelu])     = LeakyRelu(a @ b + bias)
    _FusedBatchNormEx(x, s, o, m, v, activation_mode=Relu)       = Relu(FusedBatchNorm(x, ...))

The convolution and matmul themselves come from the registered Conv2D/MatMul kernels, so the
fused result is bit-for-bit the unfused one.
"""
import numpy as np

from tfg.errors import TfgRuntimeError
from tfg.kernels import bound, clamp, conv_chunks, onednn, onednn_chain, vector_math
from tfg.kernels._util import fail, immutable
from tfg.kernels.context import KernelContext
from tfg.kernels.math_ops import sigmoid, sigmoid_into, tanh
from tfg.kernels.registry import ALL_DEVICES, get_kernel, kernel
from tfg.kernels.select import where

def _relu(xp, x, a):
    return clamp.relu(x) if xp is np else xp.maximum(x, x.dtype.type(0))


def _relu6(xp, x, a):
    return clamp.relu6(x) if xp is np else xp.clip(x, x.dtype.type(0), x.dtype.type(6))


def _swish(xp, x):
    if xp is np:
        r = vector_math.swish(x)  # float32 on the compiled loop where it may run
        if r is not None:
            return r
    d = xp.exp(-x)
    d += 1
    return xp.divide(x, d, out=d) if d.dtype == x.dtype else (x / d).astype(x.dtype)


def _swish_inplace(y):
    """`_swish` of a float numpy array written into `y`, with one temporary where `_swish`
    makes two (-y, then its exp): the same roundings in the same order, so the same bits.
    EfficientNetB0 runs 49 swishes a step on up to 2x48x48x96 values, where the exp is most
    of the time and a fresh temporary of 1.7 MB costs its page faults (measured alone,
    2x12x12x240: 223 -> 171 us, 2x48x48x32: 747 -> 558 us). float32 as `_swish`."""
    r = vector_math.swish(y, out=y)
    if r is not None:
        return r
    t = np.negative(y)
    np.exp(t, out=t)
    t += 1
    return np.divide(y, t, out=y)


# Each activation is (xp, x, alpha) -> y, for numpy or a GPU array module alike.
_ACTIVATIONS = {
    "Relu": _relu,
    "Relu6": _relu6,
    "Elu": lambda xp, x, a: where(x < 0, xp.expm1(xp.minimum(x, x.dtype.type(0))), x, xp),
    "LeakyRelu": lambda xp, x, a: where(x < 0, x * x.dtype.type(a), x, xp),
    "Tanh": lambda xp, x, a: tanh(xp, x),  # the Tanh kernel's values
    "Sigmoid": lambda xp, x, a: sigmoid(xp, x),  # the Sigmoid kernel's values
    "Identity": lambda xp, x, a: x,
}
# Swish, x * sigmoid(x), under TensorFlow's oneDNN name (not an op: the remapper's fused step
# for tfg's own Session): x / (1 + e^-x), in one temporary.
_ACTIVATIONS["_MklSwish"] = lambda xp, x, a: _swish(xp, x)


def _hard_swish(xp, x, out=None):
    """x * (relu6(x + 3) * (1/6)), each step rounded as the graph Keras writes (AddV2, Relu6,
    Mul by the reciprocal constant folding makes of /6, Mul) rounds it; into `out` if given.
    float32 in one compiled pass where vector_math runs (the same bits)."""
    if xp is np:
        r = vector_math.hard_swish(x, out)
        if r is not None:
            return r
    t = x + x.dtype.type(3)
    t = clamp.relu6(t, out=t) if xp is np else xp.clip(t, 0, 6)
    t *= x.dtype.type(1 / 6)
    return xp.multiply(x, t, out=out) if out is not None else x * t


# MobileNetV3's hard swish (tfg's own name, for tfg's Session only: no TensorFlow kernel).
_ACTIVATIONS["_TfgHardSwish"] = lambda xp, x, a: _hard_swish(xp, x)


def _hard_sigmoid(xp, x, out=None):
    """relu6(x) * (1/6): MobileNetV3's squeeze-excite gate after a convolution whose bias took
    the + 3, rounded as the graph's Relu6 then Mul by the float 1/6; into `out` if given.
    float32 in one compiled pass where vector_math runs (the same bits)."""
    if xp is np:
        r = vector_math.hard_sigmoid(x, out)
        if r is not None:
            return r
    t = clamp.relu6(x, out=out) if xp is np else xp.clip(x, 0, 6)
    if out is not None:
        t *= x.dtype.type(1 / 6)
        return t
    return t * x.dtype.type(1 / 6)


# (tfg's own name, for tfg's Session only, as _TfgHardSwish.)
_ACTIVATIONS["_TfgHardSigmoid"] = lambda xp, x, a: _hard_sigmoid(xp, x)


def _base(ctx, op, *inputs):
    """Run the registered kernel of `op` with this node's attrs (looked up once per node).

    The CPU registration is the plain function, written against `ctx.xp`: on a GPU it runs
    on the device arrays this kernel already has."""
    hit = ctx.cache.get("base")
    if hit is None or hit[0] != op:
        kd = get_kernel(op, "CPU", ctx.name)
        sub = KernelContext(ctx.node, ctx.attrs, ctx.xp, ctx.device, ctx.output_dtypes)
        hit = ctx.cache["base"] = (op, kd.fn, sub)
    return ctx.xp.asarray(hit[1](hit[2], *inputs))


def _channel_axis(ctx, ndim):
    fmt = ctx.attrs.get("data_format", b"NHWC")
    fmt = fmt.decode() if isinstance(fmt, bytes) else fmt
    return 1 if fmt.startswith("NC") and ndim > 2 else ndim - 1


def _bias(xp, y, b, axis):
    shape = [1] * y.ndim
    shape[axis] = -1
    return (y + xp.asarray(b).reshape(shape)).astype(y.dtype)


def _batch_norm(xp, y, scale, offset, mean, var, eps, axis):
    shape = [1] * y.ndim
    shape[axis] = -1
    r = lambda v: xp.asarray(v, np.float32).reshape(shape)  # noqa: E731
    inv = 1.0 / xp.sqrt(r(var) + np.float32(eps))
    return ((y.astype(np.float32) - r(mean)) * inv * r(scale) + r(offset)).astype(y.dtype)


def _bias_inplace(y, b, axis):
    """y += b along `axis`, in y's memory (the same values as `_bias`)."""
    if axis != y.ndim - 1:
        shape = [1] * y.ndim
        shape[axis] = -1
        b = b.reshape(shape)
    np.add(y, b, out=y)
    return y


def _sigmoid_inplace(y):
    """The Sigmoid kernel's values, written into `y` where its one-sided form applies
    (math_ops.sigmoid_into: each step elementwise, so `y` may be its own output)."""
    r = sigmoid_into(y, out=y)
    return r if r is not None else sigmoid(np, y)


# Activations written into their input's memory: the same values as _ACTIVATIONS (and as the
# unfused kernels), without a temporary and a copy per step.
_INPLACE_ACTIVATIONS = {
    "Relu": lambda y, a: clamp.relu(y, out=y),
    "Relu6": lambda y, a: clamp.relu6(y, out=y),
    "Identity": lambda y, a: y,
}
_INPLACE_ACTIVATIONS["_TfgHardSwish"] = lambda y, a: _hard_swish(np, y, out=y)
_INPLACE_ACTIVATIONS["_TfgHardSigmoid"] = lambda y, a: _hard_sigmoid(np, y, out=y)
_INPLACE_ACTIVATIONS["Sigmoid"] = lambda y, a: _sigmoid_inplace(y)
_INPLACE_ACTIVATIONS["_MklSwish"] = lambda y, a: (_swish_inplace(y) if y.dtype.kind == "f"
                                                  else _swish(np, y))


def _steps(ctx, ndim):
    """The node's fused steps for an output of rank `ndim`, decoded once per node and rank:
    (ops, channel axis, LeakyRelu alpha, batch-norm epsilon, quick), where `quick` is the
    in-place activation when the steps are BiasAdd along the last axis then that activation
    (Identity for BiasAdd alone), else None."""
    key = ("steps", ndim)
    steps = ctx.cache.get(key)
    if steps is None:
        ops = tuple(o.decode() if isinstance(o, bytes) else o
                    for o in ctx.attrs.get("fused_ops", []))
        for op in ops:
            if op not in ("BiasAdd", "FusedBatchNorm") and op not in _ACTIVATIONS:
                raise TfgRuntimeError(f"{ctx.name}: fused op {op!r} is not supported by tfg's "
                                      f"{ctx.op} kernel")
        axis = _channel_axis(ctx, ndim)
        quick = None
        if ops[:1] == ("BiasAdd",) and axis == ndim - 1 and len(ops) <= 2:
            quick = _INPLACE_ACTIVATIONS.get(ops[1] if len(ops) == 2 else "Identity")
        steps = ctx.cache[key] = (ops, axis, ctx.attrs.get("leakyrelu_alpha", 0.2),
                                  ctx.attrs.get("epsilon", 1e-4), quick)
    return steps


def _apply_fused(ctx, y, args):
    """The fused steps applied to `y`, the base kernel's output, with their operands `args`.

    The base kernels (MatMul, Conv2D, DepthwiseConv2dNative) return arrays that no input and
    no other value shares (the contract of tfg/executor/inplace.py's FRESH_OUTPUT list), so a
    writable result takes the bias and the activation in place."""
    xp = ctx.xp
    ops, axis, alpha, epsilon, quick = _steps(ctx, y.ndim)
    inplace = type(y) is np.ndarray and y.flags.writeable
    if quick is not None and inplace:
        # The common case in as few Python steps as possible: right after a large matmul the
        # interpreter's own data is out of the caches, and each step costs several times more.
        b = args[0]
        if type(b) is np.ndarray and b.dtype == y.dtype and b.shape == y.shape[-1:]:
            np.add(y, b, out=y)
            return quick(y, alpha)
    i = 0
    for op in ops:
        if op == "BiasAdd":
            b = args[i]
            if type(b) is not np.ndarray:
                b = xp.asarray(b)
            if b.ndim != 1 or b.shape[0] != y.shape[axis]:
                fail(f"Must provide as many biases as the channel dimension of the input "
                     f"tensor: {list(b.shape)} vs. {list(y.shape)}")
            if inplace and (b.dtype == y.dtype or np.can_cast(np.result_type(y, b), y.dtype,
                                                               "same_kind")):
                y = _bias_inplace(y, b, axis)
            else:
                y = _bias(xp, y, b, axis)
            i += 1
        elif op == "FusedBatchNorm":
            scale, offset, mean, var = args[i:i + 4]
            y = _batch_norm(xp, y, scale, offset, mean, var, epsilon, axis)
            i += 4
        elif inplace and op in _INPLACE_ACTIVATIONS:
            y = _INPLACE_ACTIVATIONS[op](y, alpha)
        else:
            y = _ACTIVATIONS[op](xp, y, alpha)
    return y


# The in-place activations a chunked convolution applies per chunk (conv_chunks.py).
_CHUNK_ACTIVATIONS = {"Identity": None, "Relu": clamp.relu, "Relu6": clamp.relu6}


@bound.binds
@kernel("_FusedConv2D", device_types=ALL_DEVICES)
def fused_conv2d(ctx, x, w, *args):
    n = int(ctx.attrs.get("num_args", 0))
    if type(x) is np.ndarray and type(w) is np.ndarray and n == 1:
        # BiasAdd (+ Relu/Relu6) of a chunked convolution: applied to each chunk of the
        # output while it is in cache, inside the convolution (same values as below); of
        # an unchunked one, straight after its prepared GEMM path (_whole).
        hit = ctx.cache.get("chunked")
        b = args[0]
        if (hit is not None and hit[0] == (x.shape, w.shape, x.dtype, w.dtype)
                and type(b) is np.ndarray and b.dtype == x.dtype and b.shape == w.shape[3:]):
            return hit[1](x, w, b, hit[2])
    y = _apply_fused(ctx, _base(ctx, "Conv2D", x, w), args[:n])
    if type(x) is np.ndarray and type(w) is np.ndarray and n == 1 and "chunked" not in ctx.cache:
        _remember_chunked(ctx, x, w, args[0])
    return y


def _remember_chunked(ctx, x, w, b):
    """After the first call: whether the base Conv2D chose the chunked path for this
    signature and the steps are BiasAdd + an activation it can apply per chunk; where it
    chose oneDNN, the node's bound form too (bound.py: the bias added in oneDNN's loop, the
    activation in place after it)."""
    key = (x.shape, w.shape, x.dtype, w.dtype)
    run = ctx.cache["base"][2].cache.get(key)
    ops, axis, alpha, _, quick = _steps(ctx, 4)
    act = ops[1] if len(ops) == 2 else "Identity"
    if quick is not None and isinstance(run, onednn.Prepared) and run.conv is not None:
        # oneDNN adds the bias in its own output loop; the activation runs in place after
        # it, as on the numpy path (oneDNN's ReLU maps NaN to 0, TensorFlow's keeps it).
        c = run.conv
        conv = onednn.convolution(c.x_shape, c.w_shape, c.g, c.nchw, bias=True)
        if conv is not None:
            # The base convolution's copy of the filter in oneDNN's layout goes: this one
            # makes its own (the base runs numpy, should this signature miss the hit above).
            run.conv = None
            # (and the base's bound form, which holds the base convolution)
            ctx.cache["base"][2].cache.pop(bound.KEY, None)
            base = run.fallback  # tfg's own path, should a oneDNN call fail later

            def numpy_path(x, w, b, _act):
                y = base(x, w)
                return np.add(y, b, out=y)
            ctx.cache["chunked"] = (key, _BiasThenActivation(
                onednn.Prepared(conv, numpy_path), quick, alpha), None)
            if type(b) is np.ndarray:
                bound.remember(ctx, x.shape, w, b, _then(conv.bound(w, b), quick, alpha),
                               onednn_chain.Stage(conv, w, b, _after(quick, alpha)))
            return
    if quick is not None and act in _CHUNK_ACTIVATIONS and run is not None:
        if not isinstance(run, conv_chunks.ChunkedConv):
            run = _whole(ctx, run)
        ctx.cache["chunked"] = (key, run, _CHUNK_ACTIVATIONS[act])
    else:
        ctx.cache["chunked"] = (None, None, None)


class _BiasThenActivation:
    """`run(x, w, b, _)`: a convolution that adds the bias itself (oneDNN's), then the
    node's in-place activation `quick(y, alpha)`."""

    __slots__ = ("conv", "quick", "alpha")

    def __init__(self, conv, quick, alpha):
        self.conv, self.quick, self.alpha = conv, quick, alpha

    def __call__(self, x, w, b, _act):
        return self.quick(self.conv(x, w, b, None), self.alpha)


def _whole(ctx, run):
    """The base Conv2D's prepared GEMM path `run(x, w)` with the bias and activation applied
    after it, as _apply_fused's quick path applies them (same ufuncs, same order), without
    the frames between: a NASNet 1x1 convolution's Python was ~10 us of a 50 us call.

    The bias is added as rows of K*C against the bias repeated K times (_bias_tile) when the
    bias has the bytes it had when tiled: the same sums, without numpy's broadcast loop of C
    elements per output row (alone: 2x24x24x128 34.5 -> 20.8 us, 2x22x22x80 21.1 -> 9.8)."""
    tiled = [None]  # (bias bytes, output shape, rows, width, tile) of the last call

    def whole(x, w, b, act):
        y = run(x, w)
        if type(y) is not np.ndarray or not y.flags.writeable or y.dtype != b.dtype:
            return _apply_fused(ctx, ctx.xp.asarray(y), (b,))
        t = tiled[0]
        if (t is not None and t[1] == y.shape and y.flags.c_contiguous
                and t[0] == b.tobytes()):
            yv = y.reshape(t[2], t[3])
            np.add(yv, t[4], out=yv)
        else:
            np.add(y, b, out=y)
            tiled[0] = _bias_tile(b, y.shape)
        return y if act is None else act(y, out=y)
    return whole


_TILE = 16384  # elements of a tiled bias at most (64 KB of float32)


def _bias_tile(b, shape):
    """(b's bytes, shape, rows, row width, b repeated K times) for adding the bias `b` of C
    channels to an output of `shape` as rows of K*C; None when it has too few rows."""
    c = shape[-1]
    rows = 1
    for d in shape[:-1]:
        rows *= d
    if rows < 8 or b.shape != (c,):
        return None
    k = min(rows, _TILE // max(c, 1))
    while k > 1 and rows % k:
        k -= 1
    if k < 2:
        return None
    tile = np.tile(b, k)
    tile.flags.writeable = False
    return b.tobytes(), shape, rows // k, k * c, tile


@bound.binds
@kernel("_FusedDepthwiseConv2dNative", device_types=ALL_DEVICES)
def fused_depthwise(ctx, x, w, *args):
    y = _apply_fused(ctx, _base(ctx, "DepthwiseConv2dNative", x, w), args)
    if bound.KEY not in ctx.cache and len(args) == 1 and type(x) is np.ndarray:
        _bind_depthwise(ctx, x, w, args[0])
    return y


def _bind_depthwise(ctx, x, w, b):
    """After the first call: where the base depthwise convolution bound its node (oneDNN)
    and the steps are _apply_fused's quick path (BiasAdd + an in-place activation), this
    node's bound form: the base's run, the bias added in place, then the activation (the
    same ufuncs in the same order as _apply_fused)."""
    _, _, alpha, _, quick = _steps(ctx, x.ndim)
    hit = ctx.cache["base"][2].cache.get(bound.KEY)
    if (quick is None or hit is None or hit[0] != x.shape or hit[1] is not w
            or type(b) is not np.ndarray or b.dtype != np.float32
            or b.shape != (w.shape[2] * w.shape[3],) or not immutable(b)):
        ctx.cache[bound.KEY] = None  # (looked at once)
        return
    base, base_stage = hit[3], hit[4]

    def after(y):
        np.add(y, b, out=y)
        return quick(y, alpha)

    def run(x):
        y = base(x)
        return None if y is None else after(y)
    stage = (None if base_stage is None
             else onednn_chain.Stage(base_stage.conv, base_stage.w, None, after))
    bound.remember(ctx, x.shape, w, b, run, stage)


def _after(quick, alpha):
    """`after(y)`: the in-place activation `quick(y, alpha)` (a chain stage's step)."""
    return lambda y: quick(y, alpha)


def _then(run, quick, alpha):
    """`run` followed by the in-place activation `quick(y, alpha)` (None stays None)."""
    if run is None:
        return None

    def run_then(x):
        y = run(x)
        return None if y is None else quick(y, alpha)
    return run_then


@kernel("_FusedMatMul", device_types=ALL_DEVICES)
def fused_matmul(ctx, a, b, *args):
    return _apply_fused(ctx, _base(ctx, "MatMul", a, b), args)


@kernel("_FusedBatchNormEx", device_types=ALL_DEVICES)
def fused_batch_norm_ex(ctx, x, scale, offset, mean, var, *side):
    xp = ctx.xp
    x = xp.asarray(x)
    axis = _channel_axis(ctx, x.ndim)
    axes = tuple(a for a in range(x.ndim) if a != axis)
    eps = ctx.attrs.get("epsilon", 1e-4)
    if ctx.attrs.get("is_training", True):
        xf = x.astype(np.float32)
        bm, bv = xf.mean(axis=axes), xf.var(axis=axes)
        n = x.size // max(x.shape[axis], 1)
        unbiased = bv * (n / max(n - 1, 1))
        f = float(ctx.attrs.get("exponential_avg_factor", 1.0))
        out_m = bm if f == 1.0 else (1 - f) * xp.asarray(mean, np.float32) + f * bm
        out_v = unbiased if f == 1.0 else (1 - f) * xp.asarray(var, np.float32) + f * unbiased
        y = _batch_norm(xp, x, scale, offset, bm, bv, eps, axis)
        reserve = (bm, bv)
    else:
        y = _batch_norm(xp, x, scale, offset, mean, var, eps, axis)
        out_m, out_v = xp.asarray(mean, np.float32), xp.asarray(var, np.float32)
        reserve = (out_m, out_v)
    for s in side:
        y = (y + xp.asarray(s)).astype(y.dtype)
    mode = ctx.attrs.get("activation_mode", b"Identity")
    mode = mode.decode() if isinstance(mode, bytes) else mode
    if mode not in _ACTIVATIONS:
        raise TfgRuntimeError(f"{ctx.name}: activation_mode {mode!r} is not supported")
    y = _ACTIVATIONS[mode](xp, y, ctx.attrs.get("leakyrelu_alpha", 0.2))
    f32 = lambda v: xp.asarray(v, np.float32)  # noqa: E731
    return y, f32(out_m), f32(out_v), f32(reserve[0]), f32(reserve[1]), xp.zeros(0, np.float32)
