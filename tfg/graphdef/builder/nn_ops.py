"""Neural-network ops: activations, softmax, cross entropy, bias_add, conv2d, pooling.

    >>> h = tb.relu(tb.bias_add(tb.conv2d(x, w, [1, 1, 1, 1], "SAME"), b))
    >>> p = tb.max_pool(h, ksize=2, strides=2, padding="VALID")
    >>> loss = tb.reduce_mean(tb.softmax_cross_entropy_with_logits(labels=y, logits=p2))

Attrs are the ones TensorFlow writes for these nodes (data_format, dilations, explicit_paddings,
use_cudnn_on_gpu ...), so TensorFlow imports the graph unchanged. NHWC is the default layout.
"""
from tfg.errors import TfgInputError
from tfg.graphdef.builder.core import A, get_default_builder
from tfg.graphdef.builder.constants import convert_to_tensor
from tfg.graphdef.builder.math_ops import _pair, make, unary


def relu(x, name=None):
    """max(x, 0)."""
    return unary("Relu", x, name)


def relu6(x, name=None):
    return unary("Relu6", x, name)


def elu(x, name=None):
    return unary("Elu", x, name)


def selu(x, name=None):
    return unary("Selu", x, name)


def softmax(logits, name=None):
    """Softmax over the last axis."""
    return unary("Softmax", logits, name)


def log_softmax(logits, name=None):
    return unary("LogSoftmax", logits, name)


def leaky_relu(x, alpha=0.2, name=None):
    b = get_default_builder()
    with b.name_scope(name or "LeakyRelu") as scope:
        x = convert_to_tensor(x, name="features")
        return make("LeakyRelu", [x], {"T": x.dtype.base, "alpha": float(alpha)}, scope,
                    [x.dtype.base]).outputs[0]


def l2_loss(x, name=None):
    """sum(x ** 2) / 2."""
    b = get_default_builder()
    with b.name_scope(name or "L2Loss") as scope:
        x = convert_to_tensor(x, name="t")
        return make("L2Loss", [x], {"T": x.dtype.base}, scope, [x.dtype.base]).outputs[0]


def bias_add(value, bias, data_format="NHWC", name=None):
    """Add a 1-D bias along the channel axis."""
    b = get_default_builder()
    with b.name_scope(name or "BiasAdd") as scope:
        v, bias = _pair(value, bias)
        return make("BiasAdd", [v, bias], {"T": v.dtype.base,
                                           "data_format": _fmt(data_format)},
                    scope, [v.dtype.base]).outputs[0]


def softmax_cross_entropy_with_logits(labels, logits, name=None):
    """Per-row cross entropy of 2-D logits against label distributions (output 0 of
    SoftmaxCrossEntropyWithLogits; output 1 is the backprop, reachable as `.op.outputs[1]`)."""
    b = get_default_builder()
    with b.name_scope(name or "SoftmaxCrossEntropyWithLogits") as scope:
        logits, labels = _pair(logits, labels)
        _need_rank(logits, 2, "softmax_cross_entropy_with_logits")
        op = make("SoftmaxCrossEntropyWithLogits", [logits, labels], {"T": logits.dtype.base},
                  scope, [logits.dtype.base] * 2)
        return op.outputs[0]


def sparse_softmax_cross_entropy_with_logits(labels, logits, name=None):
    """Per-row cross entropy of 2-D logits against integer class labels."""
    b = get_default_builder()
    with b.name_scope(name or "SparseSoftmaxCrossEntropyWithLogits") as scope:
        logits = convert_to_tensor(logits, name="logits")
        labels = convert_to_tensor(labels, name="labels")
        if not labels.dtype.is_integer:
            raise TfgInputError(f"labels {labels.name!r} must be int32 or int64")
        _need_rank(logits, 2, "sparse_softmax_cross_entropy_with_logits")
        op = make("SparseSoftmaxCrossEntropyWithLogits", [logits, labels],
                  {"T": logits.dtype.base, "Tlabels": labels.dtype.base}, scope,
                  [logits.dtype.base] * 2)
        return op.outputs[0]


def _need_rank(t, n, what):
    if t.shape is not None and len(t.shape) != n:
        raise TfgInputError(f"{what}: {t.name!r} has rank {len(t.shape)}, expected {n}")


def _fmt(data_format):
    f = data_format.decode() if isinstance(data_format, bytes) else str(data_format)
    if f not in ("NHWC", "NCHW"):
        raise TfgInputError(f"unsupported data_format {f!r} (NHWC or NCHW)")
    return f.encode()


def _four(v, data_format, what):
    """Expand an int or 2-list to the 4-element NHWC/NCHW form TensorFlow stores."""
    if isinstance(v, int):
        v = [v, v]
    v = [int(a) for a in v]
    if len(v) == 2:
        return [1, v[0], v[1], 1] if data_format == b"NHWC" else [1, 1, v[0], v[1]]
    if len(v) != 4:
        raise TfgInputError(f"{what} must have 1, 2 or 4 elements, got {v}")
    return v


def _padding(padding):
    p = padding.decode() if isinstance(padding, bytes) else str(padding).upper()
    if p not in ("SAME", "VALID"):
        raise TfgInputError(f"unsupported padding {padding!r} (SAME or VALID)")
    return p.encode()


def conv2d(x, filters, strides=1, padding="VALID", data_format="NHWC", dilations=1,
           name=None):
    """2-D convolution; `filters` is [height, width, in_channels, out_channels]."""
    b = get_default_builder()
    df = _fmt(data_format)
    st, dl, pad = _four(strides, df, "strides"), _four(dilations, df, "dilations"), \
        _padding(padding)
    with b.name_scope(name or "Conv2D") as scope:
        x, f = _pair(x, filters)
        return make("Conv2D", [x, f], {
            "T": x.dtype.base, "strides": st, "use_cudnn_on_gpu": True, "padding": pad,
            "explicit_paddings": A([], "list(i)"), "data_format": df, "dilations": dl},
            scope, [x.dtype.base]).outputs[0]


def depthwise_conv2d(x, filters, strides=1, padding="VALID", data_format="NHWC",
                     dilations=1, name=None):
    """Depthwise 2-D convolution; `filters` is [h, w, in_channels, channel_multiplier]."""
    b = get_default_builder()
    df = _fmt(data_format)
    st, dl, pad = _four(strides, df, "strides"), _four(dilations, df, "dilations"), \
        _padding(padding)
    with b.name_scope(name or "DepthwiseConv2dNative") as scope:
        x, f = _pair(x, filters)
        return make("DepthwiseConv2dNative", [x, f], {
            "T": x.dtype.base, "strides": st, "padding": pad,
            "explicit_paddings": A([], "list(i)"), "data_format": df, "dilations": dl},
            scope, [x.dtype.base]).outputs[0]


def _pool(op_type, x, ksize, strides, padding, data_format, name, explicit):
    b = get_default_builder()
    df = _fmt(data_format)
    ks, st, pad = _four(ksize, df, "ksize"), _four(strides, df, "strides"), _padding(padding)
    with b.name_scope(name or op_type) as scope:
        x = convert_to_tensor(x, name="input")
        attrs = {"T": x.dtype.base, "ksize": ks, "strides": st, "padding": pad,
                 "data_format": df}
        if explicit:
            attrs["explicit_paddings"] = A([], "list(i)")
        return make(op_type, [x], attrs, scope, [x.dtype.base]).outputs[0]


def max_pool(x, ksize, strides, padding="VALID", data_format="NHWC", name=None):
    """Max pooling over 2-D windows (`ksize`, `strides`: int, 2 or 4 elements)."""
    return _pool("MaxPool", x, ksize, strides, padding, data_format, name, explicit=True)


def avg_pool(x, ksize, strides, padding="VALID", data_format="NHWC", name=None):
    return _pool("AvgPool", x, ksize, strides, padding, data_format, name, explicit=False)


__all__ = ["relu", "relu6", "elu", "selu", "softmax", "log_softmax", "leaky_relu", "l2_loss",
           "bias_add", "softmax_cross_entropy_with_logits",
           "sparse_softmax_cross_entropy_with_logits", "conv2d", "depthwise_conv2d",
           "max_pool", "avg_pool"]
