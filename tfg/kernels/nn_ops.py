"""Dense layers and activations: MatMul/BatchMatMul, BiasAdd, activations and their gradient
ops, softmax, the cross-entropy losses, L2Loss.

    MatMul(a[3,4], b[5,4], transpose_b=True) -> [3,5]
    BiasAdd(x[N,C,H,W], b[C], data_format="NCHW") adds b along axis 1
    ReluGrad(dy, x) = dy where x > 0 else 0
    SparseSoftmaxCrossEntropyWithLogits(logits[B,K], labels[B]) -> (loss[B], dlogits[B,K])
"""
import numpy as np

from tfg.kernels import aligned, clamp, vector_math
from tfg.kernels.conv_gemm import matmul as _np_matmul
from tfg.kernels._util import errstate, fail, is_nchw, np_dtype, require_float
from tfg.kernels.registry import ALL_DEVICES, kernel
from tfg.kernels.select import where

SELU_ALPHA = 1.6732632423543772848170429916717
SELU_SCALE = 1.0507009873554804934193349852946


def _t(xp, x, adjoint):
    if not adjoint:
        return x
    x = xp.swapaxes(x, -1, -2)
    return xp.conj(x) if x.dtype.kind == "c" else x


@kernel("MatMul", device_types=ALL_DEVICES)
def matmul(ctx, a, b):
    xp = ctx.xp
    a, b = xp.asarray(a), xp.asarray(b)
    if a.ndim != 2 or b.ndim != 2:
        fail(f"MatMul needs matrices, got shapes {list(a.shape)} and {list(b.shape)}")
    a = a.T if ctx.attrs.get("transpose_a", False) else a
    b = b.T if ctx.attrs.get("transpose_b", False) else b
    if a.shape[1] != b.shape[0]:
        fail(f"Matrix size-incompatible: In[0]: {list(a.shape)}, In[1]: {list(b.shape)}")
    if xp is np:
        return _np_matmul(a, b)  # 2-3 rows: GEMVs (conv_gemm.matmul)
    return xp.matmul(a, b)


@kernel(["BatchMatMul", "BatchMatMulV2", "BatchMatMulV3"], device_types=ALL_DEVICES)
def batch_matmul(ctx, x, y):
    xp = ctx.xp
    x, y = xp.asarray(x), xp.asarray(y)
    if x.ndim < 2 or y.ndim < 2:
        fail(f"BatchMatMul needs inputs of rank >= 2, got {list(x.shape)} and {list(y.shape)}")
    tout = ctx.attrs.get("Tout")
    if tout is not None:  # V3 may take mixed input types and name the output's
        tout = np_dtype(tout)
        x, y = x.astype(tout, copy=False), y.astype(tout, copy=False)
    x, y = _t(xp, x, ctx.attrs.get("adj_x", False)), _t(xp, y, ctx.attrs.get("adj_y", False))
    if x.shape[-1] != y.shape[-2]:
        fail(f"Matrix size-incompatible: In[0]: {list(x.shape)}, In[1]: {list(y.shape)}")
    try:
        return xp.matmul(x, y)
    except ValueError:
        fail(f"In[0] and In[1] must have compatible batch dimensions: {list(x.shape)} vs. "
             f"{list(y.shape)}")


def _bias_shape(value, bias, fmt):
    if bias.ndim != 1:
        fail(f"Biases must be 1D: {list(bias.shape)}")
    if value.ndim < 2:
        fail(f"Input tensor must be at least 2D: {list(value.shape)}")
    axis = 1 if is_nchw(fmt) and value.ndim >= 3 else value.ndim - 1
    if value.shape[axis] != bias.shape[0]:
        fail(f"Must provide as many biases as the channel dimension of the input tensor: "
             f"{list(bias.shape)} vs. {list(value.shape)}")
    return axis


@kernel(["BiasAdd", "BiasAddV1"], device_types=ALL_DEVICES)
def bias_add(ctx, value, bias):
    xp = ctx.xp
    value, bias = xp.asarray(value), xp.asarray(bias)
    if ctx.cache.get("bias_last") == (value.shape, bias.shape):
        return value + bias  # checked before: the channel axis is the last (a loop's step)
    fmt = ctx.attrs.get("data_format", b"NHWC")
    axis = _bias_shape(value, bias, fmt)
    if axis == value.ndim - 1:
        ctx.cache["bias_last"] = (value.shape, bias.shape)
        return value + bias
    return value + bias.reshape((-1,) + (1,) * (value.ndim - axis - 1))


@kernel("BiasAddGrad", device_types=ALL_DEVICES)
def bias_add_grad(ctx, dy):
    xp = ctx.xp
    dy = xp.asarray(dy)
    if dy.ndim < 2:
        fail(f"Input tensor must be at least 2D: {list(dy.shape)}")
    axis = 1 if is_nchw(ctx.attrs.get("data_format", b"NHWC")) and dy.ndim >= 3 else dy.ndim - 1
    axes = tuple(a for a in range(dy.ndim) if a != axis)
    if xp is np:  # what np.sum calls, without its wrapper (a gradient loop's [8, 128]: 3 us)
        return np.add.reduce(dy, axis=axes, dtype=dy.dtype)
    return xp.sum(dy, axis=axes, dtype=dy.dtype)


# --------------------------------------------------------------------------- activations
def _zero(x):
    # A numpy scalar: both numpy and CuPy take it as an operand without a copy.
    return x.dtype.type(0)


@kernel("Relu", device_types=ALL_DEVICES)
def relu(ctx, x):
    xp = ctx.xp
    return clamp.relu(x) if xp is np else xp.maximum(x, _zero(x))


@kernel("Relu6", device_types=ALL_DEVICES)
def relu6(ctx, x):
    xp = ctx.xp
    return clamp.relu6(x) if xp is np else xp.clip(x, _zero(x), x.dtype.type(6))


@kernel("Elu", device_types=ALL_DEVICES)
def elu(ctx, x):
    xp = ctx.xp
    x = xp.asarray(x)
    require_float("Elu", x)
    return where(x < 0, xp.expm1(xp.minimum(x, _zero(x))), x, xp)


@kernel("Selu", device_types=ALL_DEVICES)
def selu(ctx, x):
    xp = ctx.xp
    require_float("Selu", xp.asarray(x))
    neg = (SELU_SCALE * SELU_ALPHA) * xp.expm1(xp.minimum(x, 0))
    return where(x < 0, neg.astype(x.dtype, copy=False),
                  (SELU_SCALE * x).astype(x.dtype, copy=False), xp)


@kernel("LeakyRelu", device_types=ALL_DEVICES)
def leaky_relu(ctx, x):
    xp = ctx.xp
    alpha = ctx.attrs.get("alpha", 0.2)
    x = xp.asarray(x)
    return where(x > 0, x, (x * alpha).astype(x.dtype, copy=False), xp)


@kernel("Softplus", device_types=ALL_DEVICES)
def softplus(ctx, x):
    xp = ctx.xp
    require_float("Softplus", xp.asarray(x))
    return xp.logaddexp(x, _zero(x))


@kernel("Softsign", device_types=ALL_DEVICES)
def softsign(ctx, x):
    xp = ctx.xp
    return x / (1 + xp.abs(x))


def _masked(xp, dy, mask):
    """dy * mask (booleans), TensorFlow's formula for ReluGrad/Relu6Grad: a NaN gradient stays
    NaN where the mask is off (np.where would give 0), and it is one vectorized pass, where
    np.where on a random mask is not (128x1024 float32: 40 us against 550 us). The result is
    aligned: it is the right-hand operand of the weight gradient's matmul."""
    if xp is not np:
        return xp.multiply(dy, mask, dtype=dy.dtype)
    dy = np.asarray(dy)
    out = aligned.empty(dy.shape, dy.dtype) if dy.shape == mask.shape else None
    with np.errstate(invalid="ignore"):  # inf * 0 is NaN, as in TensorFlow, without a warning
        return np.multiply(dy, mask, out=out, dtype=dy.dtype)


@kernel("ReluGrad", device_types=ALL_DEVICES)
def relu_grad(ctx, dy, x):
    xp = ctx.xp
    return _masked(xp, dy, xp.greater(x, _zero(x)))


@kernel("Relu6Grad", device_types=ALL_DEVICES)
def relu6_grad(ctx, dy, x):
    xp = ctx.xp
    x = xp.asarray(x)
    return _masked(xp, dy, (x > _zero(x)) & (x < x.dtype.type(6)))


@kernel("EluGrad", device_types=ALL_DEVICES)
def elu_grad(ctx, dy, y):
    xp = ctx.xp
    dy = xp.asarray(dy)
    return where(xp.asarray(y) < 0, (dy * (y + 1)).astype(dy.dtype, copy=False), dy, xp)


@kernel("SeluGrad", device_types=ALL_DEVICES)
def selu_grad(ctx, dy, y):
    xp = ctx.xp
    dy = xp.asarray(dy)
    neg = (dy * (y + SELU_SCALE * SELU_ALPHA)).astype(dy.dtype, copy=False)
    return where(xp.asarray(y) < 0, neg, (dy * SELU_SCALE).astype(dy.dtype, copy=False), xp)


@kernel("LeakyReluGrad", device_types=ALL_DEVICES)
def leaky_relu_grad(ctx, dy, x):
    xp = ctx.xp
    alpha = ctx.attrs.get("alpha", 0.2)
    dy = xp.asarray(dy)
    return where(xp.asarray(x) > 0, dy, (dy * alpha).astype(dy.dtype, copy=False), xp)


@kernel("SoftplusGrad", device_types=ALL_DEVICES)
def softplus_grad(ctx, dy, x):
    xp = ctx.xp
    e = xp.exp(-xp.abs(x))
    sig = xp.where(x >= 0, 1 / (1 + e), e / (1 + e))
    return (dy * sig).astype(dy.dtype, copy=False)


@kernel("SoftsignGrad", device_types=ALL_DEVICES)
def softsign_grad(ctx, dy, x):
    xp = ctx.xp
    d = 1 + xp.abs(x)
    return dy / (d * d)


@kernel("TanhGrad", device_types=ALL_DEVICES)
def tanh_grad(ctx, y, dy):
    r = vector_math.tanh_grad(y, dy)  # float32: one compiled pass, the same bits
    if r is not None:
        return r
    if (type(y) is np.ndarray and type(dy) is np.ndarray and y.ndim and y.shape == dy.shape
            and y.dtype == dy.dtype and y.dtype.kind == "f"):
        # the same three operations in one array instead of three (an RNN's gradient loop)
        t = y * y
        np.subtract(1, t, out=t)
        return np.multiply(dy, t, out=t)
    return dy * (1 - y * y)


@kernel("SigmoidGrad", device_types=ALL_DEVICES)
def sigmoid_grad(ctx, y, dy):
    r = vector_math.sigmoid_grad(y, dy)  # float32: one compiled pass, the same bits
    return dy * (y * (1 - y)) if r is None else r


def _grad_into(compiled, y, dy, out, factor):
    """dy * factor(y) as the kernel computes it: `compiled` (vector_math's loop: float32
    arrays of one shape) where it runs, else numpy; into `out` or a fresh array."""
    r = compiled(y, dy, out)
    if r is None:
        return np.multiply(dy, factor(y), out=out)
    if out is not None and r is not out:
        np.copyto(out, r)  # (`out` was not one the loop may write: vector_math._run_grad)
        return out
    return r


def tanh_grad_into(y, dy, out=None):
    """TanhGrad's values of numpy float arrays (the kernel's, bit for bit), into `out` (the
    result's shape and dtype) or a fresh array: a loop's fused chain calls it as it calls a
    binary ufunc (tfg/executor/loop_fusion.py)."""
    return _grad_into(vector_math.tanh_grad, y, dy, out, lambda v: 1 - v * v)


def sigmoid_grad_into(y, dy, out=None):
    """SigmoidGrad's values (the kernel's), into `out` or a fresh array (tanh_grad_into)."""
    return _grad_into(vector_math.sigmoid_grad, y, dy, out, lambda v: v * (1 - v))


tanh_grad_into.nin = sigmoid_grad_into.nin = 2  # (what a chain asks of a ufunc step)
tanh_grad_into.nout = sigmoid_grad_into.nout = 1


# For complex y TensorFlow's gradient functors use conj(y) (the conjugate direction, as the
# Python gradients that call them assume): 0.5 dy / conj(y), -0.5 dy conj(y)^3, -dy conj(y)^2.
def _conj_if_complex(xp, y):
    return xp.conj(y) if y.dtype.kind == "c" else y


@kernel("SqrtGrad", device_types=ALL_DEVICES)
def sqrt_grad(ctx, y, dy):
    xp = ctx.xp
    y = _conj_if_complex(xp, y)
    with errstate(xp, divide="ignore", invalid="ignore"):
        return (dy * 0.5) / y


@kernel("RsqrtGrad", device_types=ALL_DEVICES)
def rsqrt_grad(ctx, y, dy):
    y = _conj_if_complex(ctx.xp, y)
    return (y * y * y) * dy * -0.5


@kernel(["ReciprocalGrad", "InvGrad"], device_types=ALL_DEVICES)
def reciprocal_grad(ctx, y, dy):
    y = _conj_if_complex(ctx.xp, y)
    return -dy * (y * y)


# --------------------------------------------------------------------------- softmax and losses
def _log_softmax(xp, x):
    rmax, rsum = _row_reductions(xp)
    shifted = x - rmax(x, axis=-1, keepdims=True)
    return shifted - xp.log(rsum(xp.exp(shifted), axis=-1, keepdims=True))


def _row_reductions(xp):
    """(max, sum) along an axis: numpy's ufunc reductions themselves on the CPU (np.max's
    and np.sum's Python wrappers cost 1-3 us a call, the whole of a beam's small softmax)."""
    if xp is np:
        return np.maximum.reduce, np.add.reduce
    return xp.max, xp.sum


@kernel("Softmax", device_types=ALL_DEVICES)
def softmax(ctx, logits):
    xp = ctx.xp
    x = xp.asarray(logits)
    if x.ndim < 1:
        fail("logits must have >= 1 dimension, got a scalar")
    rmax, rsum = _row_reductions(xp)
    e = xp.exp(x - rmax(x, axis=-1, keepdims=True))
    e /= rsum(e, axis=-1, keepdims=True)
    return e


@kernel("LogSoftmax", device_types=ALL_DEVICES)
def log_softmax(ctx, logits):
    xp = ctx.xp
    x = xp.asarray(logits)
    if x.ndim < 1:
        fail("logits must have >= 1 dimension, got a scalar")
    return _log_softmax(xp, x)


@kernel("SoftmaxCrossEntropyWithLogits", device_types=ALL_DEVICES)
def softmax_xent(ctx, features, labels):
    xp = ctx.xp
    x, y = xp.asarray(features), xp.asarray(labels)
    try:
        shape = np.broadcast_shapes(x.shape, y.shape)
    except ValueError:
        shape = None
    if shape is None or len(shape) != 2:
        fail(f"logits and labels must be broadcastable 2-D tensors: logits_size="
             f"{list(x.shape)} labels_size={list(y.shape)}")
    logp = _log_softmax(xp, xp.broadcast_to(x, shape))
    loss = -xp.sum(y * logp, axis=-1)
    backprop = xp.exp(logp) - y
    return loss.astype(x.dtype, copy=False), backprop.astype(x.dtype, copy=False)


@kernel("SparseSoftmaxCrossEntropyWithLogits", device_types=ALL_DEVICES)
def sparse_softmax_xent(ctx, features, labels):
    xp = ctx.xp
    x, labels = xp.asarray(features), xp.asarray(labels)
    if x.ndim != 2 or labels.ndim != 1 or labels.shape[0] != x.shape[0]:
        fail(f"logits must be 2-D and labels 1-D with the same first dimension: logits shape "
             f"{list(x.shape)}, labels shape {list(labels.shape)}")
    k = x.shape[1]
    bad = (labels < 0) | (labels >= k)
    if bad.any():
        v = int(labels[bad][0])
        fail(f"Received a label value of {v} which is outside the valid range of [0, {k}).  "
             f"Label values: {' '.join(str(int(v)) for v in labels.tolist())}")
    logp = _log_softmax(xp, x)
    rows = xp.arange(x.shape[0])
    loss = -logp[rows, labels]
    backprop = xp.exp(logp)
    backprop[rows, labels] -= 1
    return loss, backprop


@kernel("L2Loss", device_types=ALL_DEVICES)
def l2_loss(ctx, t):
    xp = ctx.xp
    t = xp.asarray(t)
    require_float("L2Loss", t)
    flat = t.reshape(-1)
    return xp.asarray(xp.dot(flat, flat) / 2, dtype=t.dtype)
