"""Gradients of neural-network ops: activations, softmax and losses, convolution, pooling,
batch normalization, bias (TensorFlow's nn_grad.py rules), and the second order of the
activation *Grad ops where TensorFlow has it.

    Before: y = Relu(x)          After: gradients/y_grad/ReluGrad = ReluGrad(g, y)
    Before: y = Conv2D(x, w)     After: Conv2DBackpropInput(Shape(x), w, g),
                                        Conv2DBackpropFilter(x, Shape(w), g)
"""
from tfg.passes.grad.registry import gradient, unary
from tfg.schemas.dtypes import DType

_CONV_ATTRS = ("strides", "use_cudnn_on_gpu", "padding", "explicit_paddings", "data_format",
               "dilations")
_POOL_ATTRS = ("ksize", "strides", "padding", "data_format")


def _attrs(op, names):
    out = {}
    for name in names:
        if op.node.has_attr(name):
            out[name] = op.node.attr[name]  # the AttrValue verbatim (keeps its list kind)
    return out


def _mul(b, x, y):
    return b.op("Mul", [x, y])


# --- activations ---------------------------------------------------------------------------
@unary("Relu")
def _relu(b, op, g):
    return b.op("ReluGrad", [g, op.outputs[0]])


@unary("Relu6")
def _relu6(b, op, g):
    return b.op("Relu6Grad", [g, op.inputs[0]])


@unary("Elu")
def _elu(b, op, g):
    return b.op("EluGrad", [g, op.outputs[0]])


@unary("Selu")
def _selu(b, op, g):
    return b.op("SeluGrad", [g, op.outputs[0]])


@unary("LeakyRelu")
def _leaky_relu(b, op, g):
    return b.op("LeakyReluGrad", [g, op.inputs[0]], {"alpha": float(op.attr("alpha", 0.2))})


@unary("Softplus")
def _softplus(b, op, g):
    return b.op("SoftplusGrad", [g, op.inputs[0]])


@unary("Softsign")
def _softsign(b, op, g):
    x = op.inputs[0]
    denom = b.op("Square", [b.op("AddV2", [b.scalar_like(1, x), b.op("Abs", [x])])])
    return b.op("RealDiv", [g, denom])


@gradient("ReluGrad")
def _relu_grad_grad(b, op, grads):
    x = op.inputs[1]
    return [b.op("ReluGrad", [grads[0], x]), b.zeros_like(x)]


@gradient("Relu6Grad")
def _relu6_grad_grad(b, op, grads):
    x = op.inputs[1]
    return [b.op("Relu6Grad", [grads[0], x]), b.zeros_like(x)]


@gradient("EluGrad")
def _elu_grad_grad(b, op, grads):
    dy, y = op.inputs
    negative = b.op("Less", [y, b.scalar_like(0, y)])
    return [b.op("EluGrad", [grads[0], y]),
            b.op("SelectV2", [negative, _mul(b, grads[0], dy), b.zeros_like(y)])]


@gradient("SeluGrad")
def _selu_grad_grad(b, op, grads):
    dy, y = op.inputs
    negative = b.op("Less", [y, b.scalar_like(0, y)])
    return [b.op("SeluGrad", [grads[0], y]),
            b.op("SelectV2", [negative, _mul(b, grads[0], dy), b.zeros_like(y)])]


@gradient("LeakyReluGrad")
def _leaky_relu_grad_grad(b, op, grads):
    x = op.inputs[1]
    alpha = float(op.attr("alpha", 0.2))
    return [b.op("LeakyReluGrad", [grads[0], x], {"alpha": alpha}), b.zeros_like(x)]


@gradient("SoftplusGrad")
def _softplus_grad_grad(b, op, grads):
    dy, x = op.inputs
    g = grads[0]
    ddy = b.op("SoftplusGrad", [g, x])
    denom = b.op("AddV2", [b.op("AddV2", [b.op("Exp", [b.op("Neg", [x])]), b.scalar_like(2, x)]),
                           b.op("Exp", [x])])
    return [ddy, b.op("RealDiv", [_mul(b, g, dy), denom])]


# --- softmax and losses --------------------------------------------------------------------
@unary("Softmax")
def _softmax(b, op, g):
    y = op.outputs[0]
    s = b.op("Sum", [_mul(b, g, y), b.const(-1, DType.INT32)], {"keep_dims": True})
    return _mul(b, b.op("Sub", [g, s]), y)


@unary("LogSoftmax")
def _log_softmax(b, op, g):
    softmax = b.op("Exp", [op.outputs[0]])
    s = b.op("Sum", [g, b.const(-1, DType.INT32)], {"keep_dims": True})
    return b.op("Sub", [g, _mul(b, s, softmax)])


def _xent_logits_grad(b, op, grads):
    """d loss_i / d logits = backprop_i * g_i (+ the second-order term when it has a gradient)."""
    g_loss, g_backprop = grads[0], grads[1]
    minus_one = b.const(-1, DType.INT32)
    out = _mul(b, b.op("ExpandDims", [g_loss, minus_one]), op.outputs[1])
    if g_backprop is not None:
        logits = op.inputs[0]
        softmax = b.op("Softmax", [logits])
        inner = b.op("BatchMatMulV2", [
            b.op("ExpandDims", [g_backprop, b.const(1, DType.INT32)]),
            b.op("ExpandDims", [softmax, b.const(2, DType.INT32)])])
        inner = b.op("Squeeze", [inner], {"squeeze_dims": [1]}, name="Squeeze")
        out = b.op("AddV2", [out, _mul(b, b.op("Sub", [g_backprop, inner]), softmax)])
    return out


@gradient("SoftmaxCrossEntropyWithLogits", fill_zeros=False)
def _softmax_xent(b, op, grads):
    if grads[0] is None:
        return [None, None]
    logits = op.inputs[0]
    g_labels = _mul(b, b.op("ExpandDims", [grads[0], b.const(-1, DType.INT32)]),
                    b.op("Neg", [b.op("LogSoftmax", [logits])]))
    if grads[1] is not None:
        # backprop = softmax - labels (TensorFlow leaves this term out).
        g_labels = b.op("Sub", [g_labels, grads[1]])
    return [_xent_logits_grad(b, op, grads), g_labels]


@gradient("SparseSoftmaxCrossEntropyWithLogits", fill_zeros=False)
def _sparse_softmax_xent(b, op, grads):
    if grads[0] is None:
        return [None, None]
    return [_xent_logits_grad(b, op, grads), None]


# --- bias, convolution, pooling ------------------------------------------------------------
@gradient("BiasAdd", "BiasAddV1")
def _bias_add(b, op, grads):
    g = grads[0]
    attrs = _attrs(op, ("data_format",)) if op.type == "BiasAdd" else {}
    return [g, b.op("BiasAddGrad", [g], attrs)]


@gradient("BiasAddGrad")
def _bias_add_grad_grad(b, op, grads):
    g = grads[0]
    shape = b.shape(op.inputs[0])
    nchw = op.attr("data_format", b"NHWC") == b"NCHW"
    i32 = DType.INT32

    def piece(begin, end):
        return b.op("StridedSlice", [shape, b.const([begin], i32), b.const([end], i32),
                                     b.const([1], i32)],
                    {"end_mask": 1 if end == 0 else 0})

    bias_shape = b.shape(g)
    if nchw:
        expanded = b.op("ConcatV2", [b.op("OnesLike", [piece(0, 1)]), bias_shape,
                                     b.op("OnesLike", [piece(2, 0)]), b.const(0, i32)])
    else:
        expanded = b.op("ConcatV2", [b.op("OnesLike", [piece(0, -1)]), bias_shape,
                                     b.const(0, i32)])
    return [b.op("BroadcastTo", [b.op("Reshape", [g, expanded]), shape])]


def _conv_gradients(conv, backprop_input, backprop_filter, attr_names):
    """Register the gradients of a convolution and of its two backprops (each is linear in
    both of its tensor inputs, so each one's gradient is made of the other two):
    Conv2D/Conv2DBackpropInput/Conv2DBackpropFilter, the depthwise and the 3-D ones alike."""

    @gradient(conv)
    def _conv(b, op, grads):
        x, w = op.inputs
        attrs = _attrs(op, attr_names)
        return [b.op(backprop_input, [b.shape(x), w, grads[0]], attrs),
                b.op(backprop_filter, [x, b.shape(w), grads[0]], attrs)]

    @gradient(backprop_input)
    def _conv_backprop_input(b, op, grads):
        _, w, dy = op.inputs
        attrs = _attrs(op, attr_names)
        return [None, b.op(backprop_filter, [grads[0], b.shape(w), dy], attrs),
                b.op(conv, [grads[0], w], attrs)]

    @gradient(backprop_filter)
    def _conv_backprop_filter(b, op, grads):
        x, _, dy = op.inputs
        attrs = _attrs(op, attr_names)
        return [b.op(backprop_input, [b.shape(x), grads[0], dy], attrs), None,
                b.op(conv, [x, grads[0]], attrs)]


def _pool_gradients(max_pool, max_attr_names, avg_pool, attr_names):
    """Register the gradients of a max and an average pooling (2-D or 3-D) and the second
    order of the average one (its *Grad is linear in the gradient: the pooling again)."""
    max_grad, avg_grad = max_pool + "Grad", avg_pool + "Grad"

    @unary(max_pool)
    def _max_pool(b, op, g):
        return b.op(max_grad, [op.inputs[0], op.outputs[0], g], _attrs(op, max_attr_names))

    @unary(avg_pool)
    def _avg_pool(b, op, g):
        return b.op(avg_grad, [b.shape(op.inputs[0]), g], _attrs(op, attr_names))

    @gradient(avg_grad)
    def _avg_pool_grad_grad(b, op, grads):
        return [None, b.op(avg_pool, [grads[0]], _attrs(op, attr_names))]


_conv_gradients("Conv2D", "Conv2DBackpropInput", "Conv2DBackpropFilter", _CONV_ATTRS)
_conv_gradients("DepthwiseConv2dNative", "DepthwiseConv2dNativeBackpropInput",
                "DepthwiseConv2dNativeBackpropFilter",
                ("strides", "padding", "explicit_paddings", "data_format", "dilations"))
_pool_gradients("MaxPool", _POOL_ATTRS + ("explicit_paddings",), "AvgPool", _POOL_ATTRS)


def _max_pool_grad_gradients(pool_grad, pool_grad_grad, third_order=True):
    """The second-order max pooling gradients, as nn_grad.py: MaxPoolGrad is linear in its
    gradient, which MaxPoolGradGrad routes back (each window's grad at its max), and
    MaxPoolGradGrad's gradient is MaxPoolGrad again (third_order; TensorFlow has none for
    MaxPoolGradGradV2); orig_input and orig_output get zeros (the argmax moves only at
    ties)."""

    def zeros(b, op):
        return [b.op("ZerosLike", [op.inputs[0]]), b.op("ZerosLike", [op.inputs[1]])]

    @gradient(pool_grad)
    def _grad(b, op, grads):
        rest = op.inputs[3:]  # MaxPoolGradV2: ksize, strides (inputs): no gradient
        return zeros(b, op) + [b.op(pool_grad_grad, [op.inputs[0], op.inputs[1], grads[0]]
                                    + rest, _attrs(op, _POOL_ATTRS))] + [None] * len(rest)

    def _grad_grad(b, op, grads):
        return zeros(b, op) + [b.op(pool_grad, [op.inputs[0], op.inputs[1], grads[0]],
                                    _attrs(op, _POOL_ATTRS))]

    if third_order:
        gradient(pool_grad_grad)(_grad_grad)


_max_pool_grad_gradients("MaxPoolGrad", "MaxPoolGradGrad")
_max_pool_grad_gradients("MaxPoolGradV2", "MaxPoolGradGradV2", third_order=False)
_max_pool_grad_gradients("MaxPool3DGrad", "MaxPool3DGradGrad")


# --- batch normalization -------------------------------------------------------------------
@gradient("FusedBatchNormV3", "FusedBatchNormV2", "FusedBatchNorm", fill_zeros=False)
def _fused_batch_norm(b, op, grads):
    """Through the normalized output only: the batch statistics outputs get no gradient
    (as in TensorFlow)."""
    x, scale = op.inputs[0], op.inputs[1]
    g = grads[0]
    if g is None:
        return [None] * 5
    training = bool(op.attr("is_training", True))
    attrs = _attrs(op, ("epsilon", "data_format"))
    attrs["is_training"] = training
    if op.type == "FusedBatchNormV3":
        if training:
            reserve = [op.outputs[3], op.outputs[4], op.outputs[5]]
        else:
            reserve = [op.inputs[3], op.inputs[4], op.outputs[5]]
        dx = b.op("FusedBatchNormGradV3", [g, x, scale] + reserve, attrs)
    else:
        reserve = ([op.outputs[3], op.outputs[4]] if training else [op.inputs[3], op.inputs[4]])
        dx = b.op("FusedBatchNormGrad", [g, x, scale] + reserve, attrs)
    return [dx, b.out(dx, 1), b.out(dx, 2), None, None]


# --- 3-D convolution and pooling, LRN, pooling with argmax, image patches -----------------
_conv_gradients("Conv3D", "Conv3DBackpropInputV2", "Conv3DBackpropFilterV2",
                ("strides", "padding", "data_format", "dilations"))
_pool_gradients("MaxPool3D", _POOL_ATTRS, "AvgPool3D", _POOL_ATTRS)


@unary("LRN")
def _lrn(b, op, g):
    attrs = _attrs(op, ("depth_radius", "bias", "alpha", "beta"))
    return b.op("LRNGrad", [g, op.inputs[0], op.outputs[0]], attrs)


@gradient("MaxPoolWithArgmax")
def _max_pool_with_argmax(b, op, grads):
    """Through the pooled output only (the argmax is an index)."""
    attrs = _attrs(op, ("ksize", "strides", "padding", "include_batch_in_index"))
    return [b.op("MaxPoolGradWithArgmax", [op.inputs[0], grads[0], op.outputs[1]], attrs)]


@unary("ExtractImagePatches")
def _extract_image_patches(b, op, g):
    """Each patch value's gradient added back to the pixel it was copied from. Which pixel
    that is comes from the op itself, run on an image of pixel numbers 1..H*W (0 is the
    padding): TensorFlow's array_grad builds a sparse [H*W, patches] matrix from the same
    index image; here one UnsortedSegmentSum over the patch values does the adding."""
    i32 = DType.INT32
    shape = b.shape(op.inputs[0])  # [N, H, W, C]

    def part(begin, end):
        return b.op("StridedSlice", [shape, b.const([begin], i32), b.const([end], i32),
                                     b.const([1], i32)])

    hw = part(1, 3)
    pixels = b.op("Prod", [hw, b.const(0, i32)])
    numbers = b.op("Range", [b.const(1, i32), b.op("AddV2", [pixels, b.const(1, i32)]),
                             b.const(1, i32)])
    one = b.const([1], i32)
    image = b.op("Reshape", [numbers, b.op("ConcatV2", [one, hw, one, b.const(0, i32)])])
    attrs = _attrs(op, ("ksizes", "strides", "rates", "padding"))
    ids = b.op("Reshape", [b.op("ExtractImagePatches", [image], attrs), b.const([-1], i32)])
    # g [N, OH, OW, KH*KW*C] as [N, OH*OW*KH*KW, C]: one row per index of `ids`
    rows = b.op("ConcatV2", [part(0, 1), b.op("Shape", [ids], {"out_type": i32}), part(3, 4),
                             b.const(0, i32)])
    per_patch = b.op("Transpose", [b.op("Reshape", [g, rows]), b.const([1, 0, 2], i32)])
    sums = b.op("UnsortedSegmentSum", [per_patch, ids,
                                       b.op("AddV2", [pixels, b.const(1, i32)])])
    real = b.op("Slice", [sums, b.const([1, 0, 0], i32), b.const([-1, -1, -1], i32)])
    return b.op("Reshape", [b.op("Transpose", [real, b.const([1, 0, 2], i32)]), shape])
