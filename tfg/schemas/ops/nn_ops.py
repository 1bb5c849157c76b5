"""Signatures of the neural-network ops (TensorFlow's nn_ops.cc): bias, convolution, pooling,
batch normalization, activations with their gradients, and losses.

    >>> get_op("Conv2D").attrs["data_format"].default
    b'NHWC'
"""
from tfg.schemas.ops.nn_shapes import (
    bias_add, bias_add_grad, conv2d, conv2d_backprop_input, conv3d, depthwise_conv2d,
    extract_image_patches, fused_batch_norm, fused_batch_norm_grad, lrn, lrn_grad,
    max_pool_3d_grad_grad, max_pool_grad_grad, max_pool_grad_with_argmax, max_pool_with_argmax,
    pool, pool3d, softmax, softmax_xent, sparse_softmax_xent, unchanged_rank5)
from tfg.schemas.ops.registry import op
from tfg.schemas.ops.shape_fns import from_shape_input, merge_inputs, scalar, unchanged

# --- bias
op("BiasAdd",
   inputs=["value: T", "bias: T"],
   outputs=["output: T"],
   attrs=["T: numbertype", "data_format: {'NHWC', 'NCHW'} = 'NHWC'"],
   shape_fn=bias_add,
   traits=["fresh_output"])
op("BiasAddV1",
   inputs=["value: T", "bias: T"],
   outputs=["output: T"],
   attrs=["T: numbertype"],
   shape_fn=bias_add,
   traits=["fresh_output"])
op("BiasAddGrad",
   inputs=["out_backprop: T"],
   outputs=["output: T"],
   attrs=["T: numbertype", "data_format: {'NHWC', 'NCHW'} = 'NHWC'"],
   shape_fn=bias_add_grad,
   traits=["within_input"])

# --- convolution
op("Conv2D",
   inputs=["input: T", "filter: T"],
   outputs=["output: T"],
   attrs=["T: {half, bfloat16, float, double, int32}", "strides: list(int)",
          "use_cudnn_on_gpu: bool = true", "padding: {'SAME', 'VALID', 'EXPLICIT'}",
          "explicit_paddings: list(int) = []", "data_format: {'NHWC', 'NCHW'} = 'NHWC'",
          "dilations: list(int) = [1, 1, 1, 1]"],
   shape_fn=conv2d,
   traits=["blas", "fresh_output"])
op("Conv2DBackpropInput",
   inputs=["input_sizes: int32", "filter: T", "out_backprop: T"],
   outputs=["output: T"],
   attrs=["T: {half, bfloat16, float, double, int32}", "strides: list(int)",
          "use_cudnn_on_gpu: bool = true", "padding: {'SAME', 'VALID', 'EXPLICIT'}",
          "explicit_paddings: list(int) = []", "data_format: {'NHWC', 'NCHW'} = 'NHWC'",
          "dilations: list(int) = [1, 1, 1, 1]"],
   shape_fn=conv2d_backprop_input,
   traits=["blas"])
op("Conv2DBackpropFilter",
   inputs=["input: T", "filter_sizes: int32", "out_backprop: T"],
   outputs=["output: T"],
   attrs=["T: floattype", "strides: list(int)", "use_cudnn_on_gpu: bool = true",
          "padding: {'SAME', 'VALID', 'EXPLICIT'}", "explicit_paddings: list(int) = []",
          "data_format: {'NHWC', 'NCHW'} = 'NHWC'", "dilations: list(int) = [1, 1, 1, 1]"],
   shape_fn=from_shape_input(1),
   traits=["blas"])
op("DepthwiseConv2dNative",
   inputs=["input: T", "filter: T"],
   outputs=["output: T"],
   attrs=["T: floattype", "strides: list(int)", "padding: {'SAME', 'VALID', 'EXPLICIT'}",
          "explicit_paddings: list(int) = []", "data_format: {'NHWC', 'NCHW'} = 'NHWC'",
          "dilations: list(int) = [1, 1, 1, 1]"],
   shape_fn=depthwise_conv2d,
   traits=["blas", "fresh_output"])
op("DepthwiseConv2dNativeBackpropInput",
   inputs=["input_sizes: int32", "filter: T", "out_backprop: T"],
   outputs=["output: T"],
   attrs=["T: {half, bfloat16, float, double}", "strides: list(int)",
          "padding: {'SAME', 'VALID', 'EXPLICIT'}", "explicit_paddings: list(int) = []",
          "data_format: {'NHWC', 'NCHW'} = 'NHWC'", "dilations: list(int) = [1, 1, 1, 1]"],
   shape_fn=from_shape_input(0),
   traits=["blas"])
op("DepthwiseConv2dNativeBackpropFilter",
   inputs=["input: T", "filter_sizes: int32", "out_backprop: T"],
   outputs=["output: T"],
   attrs=["T: {half, bfloat16, float, double}", "strides: list(int)",
          "padding: {'SAME', 'VALID', 'EXPLICIT'}", "explicit_paddings: list(int) = []",
          "data_format: {'NHWC', 'NCHW'} = 'NHWC'", "dilations: list(int) = [1, 1, 1, 1]"],
   shape_fn=from_shape_input(1),
   traits=["blas"])

# --- pooling
op("MaxPool",
   inputs=["input: T"],
   outputs=["output: T"],
   attrs=["T: {half, bfloat16, float, double, int32, int64, uint8, int16, int8, uint16, qint8} = "
          "DT_FLOAT", "ksize: list(int) >= 4", "strides: list(int) >= 4",
          "padding: {'SAME', 'VALID', 'EXPLICIT'}", "explicit_paddings: list(int) = []",
          "data_format: {'NHWC', 'NCHW', 'NCHW_VECT_C'} = 'NHWC'"],
   shape_fn=pool,
   traits=["fresh_output"])
op("MaxPoolV2",
   inputs=["input: T", "ksize: int32", "strides: int32"],
   outputs=["output: T"],
   attrs=["T: {half, bfloat16, float, double, int32, int64, uint8, int16, int8, uint16, qint8} = "
          "DT_FLOAT", "padding: {'SAME', 'VALID'}",
          "data_format: {'NHWC', 'NCHW', 'NCHW_VECT_C'} = 'NHWC'"],
   shape_fn=pool)
op("MaxPoolGrad",
   inputs=["orig_input: T", "orig_output: T", "grad: T"],
   outputs=["output: T"],
   attrs=["ksize: list(int) >= 4", "strides: list(int) >= 4",
          "padding: {'SAME', 'VALID', 'EXPLICIT'}", "explicit_paddings: list(int) = []",
          "data_format: {'NHWC', 'NCHW'} = 'NHWC'", "T: realnumbertype = DT_FLOAT"],
   shape_fn=unchanged)
op("MaxPoolGradV2",
   inputs=["orig_input: T", "orig_output: T", "grad: T", "ksize: int32", "strides: int32"],
   outputs=["output: T"],
   attrs=["padding: {'SAME', 'VALID'}", "data_format: {'NHWC', 'NCHW'} = 'NHWC'",
          "T: realnumbertype = DT_FLOAT"],
   shape_fn=unchanged)
# The gradients of MaxPoolGrad (second-order max pooling gradients): the grad at each
# window's first maximum of orig_input (nn_ops.cc)
_GRAD_GRAD_T = ("T: {float, double, int32, uint8, int16, int8, int64, bfloat16, uint16, half, "
                "uint32, uint64}")
op("MaxPoolGradGrad",
   inputs=["orig_input: T", "orig_output: T", "grad: T"],
   outputs=["output: T"],
   attrs=["ksize: list(int) >= 4", "strides: list(int) >= 4", "padding: {'SAME', 'VALID'}",
          "data_format: {'NHWC', 'NCHW'} = 'NHWC'", _GRAD_GRAD_T],
   shape_fn=max_pool_grad_grad)
op("MaxPoolGradGradV2",
   inputs=["orig_input: T", "orig_output: T", "grad: T", "ksize: int32", "strides: int32"],
   outputs=["output: T"],
   attrs=["padding: {'SAME', 'VALID'}", "data_format: {'NHWC', 'NCHW'} = 'NHWC'",
          _GRAD_GRAD_T],
   shape_fn=max_pool_grad_grad)
op("MaxPool3DGradGrad",
   inputs=["orig_input: T", "orig_output: T", "grad: T"],
   outputs=["output: T"],
   attrs=["ksize: list(int) >= 5", "strides: list(int) >= 5", "padding: {'SAME', 'VALID'}",
          "data_format: {'NDHWC', 'NCDHW'} = 'NDHWC'", _GRAD_GRAD_T],
   shape_fn=max_pool_3d_grad_grad)
op("AvgPool",
   inputs=["value: T"],
   outputs=["output: T"],
   attrs=["ksize: list(int) >= 4", "strides: list(int) >= 4", "padding: {'SAME', 'VALID'}",
          "data_format: {'NHWC', 'NCHW'} = 'NHWC'", "T: floattype"],
   shape_fn=pool,
   traits=["fresh_output"])
op("AvgPoolGrad",
   inputs=["orig_input_shape: int32", "grad: T"],
   outputs=["output: T"],
   attrs=["ksize: list(int) >= 4", "strides: list(int) >= 4", "padding: {'SAME', 'VALID'}",
          "data_format: {'NHWC', 'NCHW'} = 'NHWC'", "T: floattype"],
   shape_fn=from_shape_input(0))

# --- 3-D convolution and pooling (NCDHW is a GPU layout: the CPU kernels refuse it)
_CONV3D_ATTRS = ["T: {half, bfloat16, float, double}", "strides: list(int) >= 5",
                 "padding: {'SAME', 'VALID'}", "data_format: {'NDHWC', 'NCDHW'} = 'NDHWC'",
                 "dilations: list(int) = [1, 1, 1, 1, 1]"]
_POOL3D_ATTRS = ["ksize: list(int) >= 5", "strides: list(int) >= 5",
                 "padding: {'SAME', 'VALID'}", "data_format: {'NDHWC', 'NCDHW'} = 'NDHWC'"]
op("Conv3D",
   inputs=["input: T", "filter: T"],
   outputs=["output: T"],
   attrs=_CONV3D_ATTRS,
   shape_fn=conv3d,
   traits=["blas", "fresh_output"])
op("Conv3DBackpropInputV2",
   inputs=["input_sizes: Tshape", "filter: T", "out_backprop: T"],
   outputs=["output: T"],
   attrs=_CONV3D_ATTRS + ["Tshape: {int32, int64} = DT_INT32"],
   shape_fn=from_shape_input(0),
   traits=["blas"])
op("Conv3DBackpropFilterV2",
   inputs=["input: T", "filter_sizes: int32", "out_backprop: T"],
   outputs=["output: T"],
   attrs=_CONV3D_ATTRS,
   shape_fn=from_shape_input(1),
   traits=["blas"])
op("MaxPool3D",
   inputs=["input: T"],
   outputs=["output: T"],
   attrs=_POOL3D_ATTRS + ["T: {half, bfloat16, float}"],
   shape_fn=pool3d,
   traits=["fresh_output"])
op("AvgPool3D",
   inputs=["input: T"],
   outputs=["output: T"],
   attrs=_POOL3D_ATTRS + ["T: {half, bfloat16, float, double}"],
   shape_fn=pool3d,
   traits=["fresh_output"])
op("MaxPool3DGrad",
   inputs=["orig_input: TInput", "orig_output: TInput", "grad: T"],
   outputs=["output: T"],
   attrs=_POOL3D_ATTRS + ["T: {half, bfloat16, float} = DT_FLOAT",
                          "TInput: {half, bfloat16, float} = DT_FLOAT"],
   shape_fn=unchanged_rank5)
op("AvgPool3DGrad",
   inputs=["orig_input_shape: int32", "grad: T"],
   outputs=["output: T"],
   attrs=_POOL3D_ATTRS + ["T: {half, bfloat16, float, double}"],
   shape_fn=from_shape_input(0))

# --- pooling with argmax, image patches
op("MaxPoolWithArgmax",
   inputs=["input: T"],
   outputs=["output: T", "argmax: Targmax"],
   attrs=["ksize: list(int) >= 4", "strides: list(int) >= 4",
          "Targmax: {int32, int64} = DT_INT64", "padding: {'SAME', 'VALID'}",
          "include_batch_in_index: bool = false", "T: realnumbertype"],
   shape_fn=max_pool_with_argmax)
op("MaxPoolGradWithArgmax",
   inputs=["input: T", "grad: T", "argmax: Targmax"],
   outputs=["output: T"],
   attrs=["ksize: list(int) >= 4", "strides: list(int) >= 4", "padding: {'SAME', 'VALID'}",
          "include_batch_in_index: bool = false", "Targmax: {int32, int64}",
          "T: realnumbertype"],
   shape_fn=max_pool_grad_with_argmax)
op("ExtractImagePatches",
   inputs=["images: T"],
   outputs=["patches: T"],
   attrs=["ksizes: list(int) >= 4", "strides: list(int) >= 4", "rates: list(int) >= 4",
          "T: {bfloat16, half, float, double, int8, int16, int32, int64, uint8, uint16, "
          "uint32, uint64, complex64, complex128, bool}", "padding: {'SAME', 'VALID'}"],
   shape_fn=extract_image_patches,
   traits=["fresh_output"])

# --- local response normalization
_LRN_ATTRS = ["depth_radius: int = 5", "bias: float = 1", "alpha: float = 1",
              "beta: float = 0.5", "T: {half, bfloat16, float} = DT_FLOAT"]
op("LRN",
   inputs=["input: T"],
   outputs=["output: T"],
   attrs=_LRN_ATTRS,
   shape_fn=lrn,
   traits=["fresh_output"])
op("LRNGrad",
   inputs=["input_grads: T", "input_image: T", "output_image: T"],
   outputs=["output: T"],
   attrs=_LRN_ATTRS,
   shape_fn=lrn_grad)

# --- batch normalization
op("FusedBatchNorm",
   inputs=["x: T", "scale: T", "offset: T", "mean: T", "variance: T"],
   outputs=["y: T", "batch_mean: T", "batch_variance: T", "reserve_space_1: T",
            "reserve_space_2: T"],
   attrs=["T: {float}", "epsilon: float = 0.0001", "exponential_avg_factor: float = 1.0",
          "data_format: {'NHWC', 'NCHW'} = 'NHWC'", "is_training: bool = true"],
   shape_fn=fused_batch_norm)
op("FusedBatchNormV2",
   inputs=["x: T", "scale: U", "offset: U", "mean: U", "variance: U"],
   outputs=["y: T", "batch_mean: U", "batch_variance: U", "reserve_space_1: U",
            "reserve_space_2: U"],
   attrs=["T: {half, bfloat16, float}", "U: {float}", "epsilon: float = 0.0001",
          "exponential_avg_factor: float = 1.0", "data_format: {'NHWC', 'NCHW'} = 'NHWC'",
          "is_training: bool = true"],
   shape_fn=fused_batch_norm)
op("FusedBatchNormV3",
   inputs=["x: T", "scale: U", "offset: U", "mean: U", "variance: U"],
   outputs=["y: T", "batch_mean: U", "batch_variance: U", "reserve_space_1: U",
            "reserve_space_2: U", "reserve_space_3: U"],
   attrs=["T: {half, bfloat16, float}", "U: {bfloat16, float}", "epsilon: float = 0.0001",
          "exponential_avg_factor: float = 1.0",
          "data_format: {'NHWC', 'NCHW', 'NDHWC', 'NCDHW'} = 'NHWC'", "is_training: bool = true"],
   shape_fn=fused_batch_norm)
op("FusedBatchNormGrad",
   inputs=["y_backprop: T", "x: T", "scale: T", "reserve_space_1: T", "reserve_space_2: T"],
   outputs=["x_backprop: T", "scale_backprop: T", "offset_backprop: T", "reserve_space_3: T",
            "reserve_space_4: T"],
   attrs=["T: {float}", "epsilon: float = 0.0001", "data_format: {'NHWC', 'NCHW'} = 'NHWC'",
          "is_training: bool = true"],
   shape_fn=fused_batch_norm_grad)
op("FusedBatchNormGradV2",
   inputs=["y_backprop: T", "x: T", "scale: float", "reserve_space_1: U", "reserve_space_2: U"],
   outputs=["x_backprop: T", "scale_backprop: U", "offset_backprop: U", "reserve_space_3: U",
            "reserve_space_4: U"],
   attrs=["T: {half, bfloat16, float}", "U: {float}", "epsilon: float = 0.0001",
          "data_format: {'NHWC', 'NCHW'} = 'NHWC'", "is_training: bool = true"],
   shape_fn=fused_batch_norm_grad)
op("FusedBatchNormGradV3",
   inputs=["y_backprop: T", "x: T", "scale: float", "reserve_space_1: U", "reserve_space_2: U",
           "reserve_space_3: U"],
   outputs=["x_backprop: T", "scale_backprop: U", "offset_backprop: U", "reserve_space_4: U",
            "reserve_space_5: U"],
   attrs=["T: {half, bfloat16, float}", "U: {float}", "epsilon: float = 0.0001",
          "data_format: {'NHWC', 'NCHW', 'NDHWC', 'NCDHW'} = 'NHWC'", "is_training: bool = true"],
   shape_fn=fused_batch_norm_grad)

# --- activations and their gradients (gradients, features) -> backprops
op("Relu",
   inputs=["features: T"],
   outputs=["activations: T"],
   attrs=["T: {float, double, int32, uint8, int16, int8, int64, bfloat16, uint16, half, uint32, "
          "uint64, qint8}"],
   shape_fn=unchanged,
   traits=["elementwise", "fresh_output", "layout_agnostic"])
op("ReluGrad",
   inputs=["gradients: T", "features: T"],
   outputs=["backprops: T"],
   attrs=["T: realnumbertype"],
   shape_fn=merge_inputs,
   traits=["elementwise", "layout_agnostic"])
op("Relu6",
   inputs=["features: T"],
   outputs=["activations: T"],
   attrs=["T: realnumbertype"],
   shape_fn=unchanged,
   traits=["elementwise", "fresh_output", "layout_agnostic"])
op("Relu6Grad",
   inputs=["gradients: T", "features: T"],
   outputs=["backprops: T"],
   attrs=["T: realnumbertype"],
   shape_fn=merge_inputs,
   traits=["elementwise", "layout_agnostic"])
op("Elu",
   inputs=["features: T"],
   outputs=["activations: T"],
   attrs=["T: floattype"],
   shape_fn=unchanged,
   traits=["elementwise", "layout_agnostic"])
op("EluGrad",
   inputs=["gradients: T", "outputs: T"],
   outputs=["backprops: T"],
   attrs=["T: floattype"],
   shape_fn=merge_inputs,
   traits=["elementwise", "layout_agnostic"])
op("Selu",
   inputs=["features: T"],
   outputs=["activations: T"],
   attrs=["T: floattype"],
   shape_fn=unchanged,
   traits=["elementwise", "layout_agnostic"])
op("SeluGrad",
   inputs=["gradients: T", "outputs: T"],
   outputs=["backprops: T"],
   attrs=["T: floattype"],
   shape_fn=merge_inputs,
   traits=["elementwise"])
op("LeakyRelu",
   inputs=["features: T"],
   outputs=["activations: T"],
   attrs=["alpha: float = 0.2", "T: floattype = DT_FLOAT"],
   shape_fn=unchanged,
   traits=["elementwise", "layout_agnostic"])
op("LeakyReluGrad",
   inputs=["gradients: T", "features: T"],
   outputs=["backprops: T"],
   attrs=["alpha: float = 0.2", "T: floattype = DT_FLOAT"],
   shape_fn=merge_inputs,
   traits=["elementwise", "layout_agnostic"])
op("Softplus",
   inputs=["features: T"],
   outputs=["activations: T"],
   attrs=["T: floattype"],
   shape_fn=unchanged,
   traits=["elementwise", "layout_agnostic"])
op("SoftplusGrad",
   inputs=["gradients: T", "features: T"],
   outputs=["backprops: T"],
   attrs=["T: floattype"],
   shape_fn=merge_inputs,
   traits=["elementwise"])
op("Softsign",
   inputs=["features: T"],
   outputs=["activations: T"],
   attrs=["T: floattype"],
   shape_fn=unchanged,
   traits=["elementwise"])
op("SoftsignGrad",
   inputs=["gradients: T", "features: T"],
   outputs=["backprops: T"],
   attrs=["T: floattype"],
   shape_fn=merge_inputs,
   traits=["elementwise"])
op("Softmax",
   inputs=["logits: T"],
   outputs=["softmax: T"],
   attrs=["T: floattype"],
   shape_fn=softmax)
op("LogSoftmax",
   inputs=["logits: T"],
   outputs=["logsoftmax: T"],
   attrs=["T: floattype"],
   shape_fn=softmax)

# --- losses
op("SoftmaxCrossEntropyWithLogits",
   inputs=["features: T", "labels: T"],
   outputs=["loss: T", "backprop: T"],
   attrs=["T: floattype"],
   shape_fn=softmax_xent)
op("SparseSoftmaxCrossEntropyWithLogits",
   inputs=["features: T", "labels: Tlabels"],
   outputs=["loss: T", "backprop: T"],
   attrs=["T: floattype", "Tlabels: {int32, int64} = DT_INT64"],
   shape_fn=sparse_softmax_xent)
op("L2Loss",
   inputs=["t: T"],
   outputs=["output: T"],
   attrs=["T: floattype"],
   shape_fn=scalar)


# --- NthElement (nth_element_op.cc) and grayscale morphology (dilation_ops.cc) ---------------
from tfg.schemas.ops.nn_shapes import window_out  # noqa: E402
from tfg.schemas.ops.shape_fns import (  # noqa: E402
    ShapeError, merge_dim, with_rank, with_rank_at_least)


def nth_element(ctx):
    """input [..., n] and a scalar k < n -> input's shape without its last dim."""
    x = with_rank_at_least(ctx.shape(0), 1, "input")
    with_rank(ctx.shape(1), 0, "n")
    k = ctx.scalar(1)
    if x is None:
        return [None]
    if None not in (k, x[-1]) and x[-1] <= k:
        raise ShapeError(f"Input must have last dimension > n = {k} but is {x[-1]}")
    return [tuple(x[:-1])]


def dilation2d(ctx):
    """input [B, H, W, D], filter [h, w, D] -> [B, out_h, out_w, D]: the window's effective
    size h + (h - 1) * (rate - 1) slid with the strides (TensorFlow's Dilation2D shape fn)."""
    x = with_rank(ctx.shape(0), 4, "input")
    f = with_rank(ctx.shape(1), 3, "filter")
    strides, rates = list(ctx.attr("strides")), list(ctx.attr("rates"))
    for name, v in (("stride", strides), ("rates", rates)):
        if len(v) != 4:
            raise ShapeError(f"Dilation2D requires the {name} attribute to contain 4 values, "
                             f"but got: {len(v)}")
    if None in (x[1], x[2], f[0], f[1]):
        return [(x[0], None, None, f[2])]
    merge_dim(x[3], f[2])
    padding = ctx.attr("padding")
    padding = padding.decode() if isinstance(padding, bytes) else padding
    out = [window_out(x[i], f[i - 1] + (f[i - 1] - 1) * (rates[i] - 1), strides[i], padding)
           for i in (1, 2)]
    return [(x[0], out[0], out[1], f[2])]


def dilation2d_backprop_filter(ctx):
    return [ctx.shape(1)]


_DILATION_ATTRS = ["T: realnumbertype", "strides: list(int) >= 4", "rates: list(int) >= 4",
                   "padding: {'SAME', 'VALID'}"]
op("NthElement",
   inputs=["input: T", "n: int32"],
   outputs=["values: T"],
   attrs=["reverse: bool = false", "T: realnumbertype"],
   shape_fn=nth_element)
op("Dilation2D",
   inputs=["input: T", "filter: T"],
   outputs=["output: T"],
   attrs=_DILATION_ATTRS,
   shape_fn=dilation2d)
op("Dilation2DBackpropInput",
   inputs=["input: T", "filter: T", "out_backprop: T"],
   outputs=["in_backprop: T"],
   attrs=_DILATION_ATTRS,
   shape_fn=unchanged)
op("Dilation2DBackpropFilter",
   inputs=["input: T", "filter: T", "out_backprop: T"],
   outputs=["filter_backprop: T"],
   attrs=_DILATION_ATTRS,
   shape_fn=dilation2d_backprop_filter)
