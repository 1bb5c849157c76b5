"""Grappler's fused ops (made by the remapper, never by users): signatures as TensorFlow
registers them, so a remapped graph loads in TensorFlow and tfg alike.

    _FusedConv2D(input, filter, args...)  fused_ops=["BiasAdd", "Relu"], num_args=1
    _FusedMatMul(a, b, args...)           fused_ops=["BiasAdd", "Relu6"], num_args=1
    _FusedBatchNormEx(x, scale, offset, mean, variance)   activation_mode="Relu"
"""
from tfg.schemas.ops.nn_shapes import conv2d, depthwise_conv2d, fused_batch_norm
from tfg.schemas.ops.math_ops import matmul
from tfg.schemas.ops.registry import op

_FUSED_ATTRS = ["fused_ops: list(string) = []", "epsilon: float = 0.0001",
                "leakyrelu_alpha: float = 0.2"]

op("_FusedConv2D",
   inputs=["input: T", "filter: T", "args: TArgs", "host_args: num_host_args * float"],
   outputs=["output: T"],
   attrs=["T: {half, float, double, int8, qint8}", "TArgs: list(type)", "num_args: int >= 0",
          "num_host_args: int >= 0 = 0", "strides: list(int)",
          "padding: {'SAME', 'VALID', 'EXPLICIT'}", "explicit_paddings: list(int) = []",
          "data_format: {'NHWC', 'NCHW', 'NCHW_VECT_C'} = 'NHWC'",
          "filter_format: {'HWIO', 'OIHW', 'OIHW_VECT_I'} = 'HWIO'",
          "dilations: list(int) = [1, 1, 1, 1]", "use_cudnn_on_gpu: bool = true"]
   + _FUSED_ATTRS,
   shape_fn=conv2d,
   traits=["blas", "fresh_output"])

op("_FusedDepthwiseConv2dNative",
   inputs=["input: T", "filter: T", "args: num_args * T"],
   outputs=["output: T"],
   attrs=["T: {half, bfloat16, float, double}", "num_args: int >= 0", "strides: list(int)",
          "padding: {'SAME', 'VALID', 'EXPLICIT'}", "explicit_paddings: list(int) = []",
          "data_format: {'NHWC', 'NCHW'} = 'NHWC'", "dilations: list(int) = [1, 1, 1, 1]"]
   + _FUSED_ATTRS,
   shape_fn=depthwise_conv2d,
   traits=["fresh_output"])

op("_FusedMatMul",
   inputs=["a: T", "b: T", "args: num_args * T"],
   outputs=["product: T"],
   attrs=["transpose_a: bool = false", "transpose_b: bool = false",
          "T: {bfloat16, half, float}", "num_args: int >= 0"] + _FUSED_ATTRS,
   shape_fn=matmul,
   traits=["blas", "fresh_output"])

op("_FusedBatchNormEx",
   inputs=["x: T", "scale: U", "offset: U", "mean: U", "variance: U",
           "side_input: num_side_inputs * T"],
   outputs=["y: T", "batch_mean: U", "batch_variance: U", "reserve_space_1: U",
            "reserve_space_2: U", "reserve_space_3: U"],
   attrs=["T: {half, float, bfloat16}", "U: {float}", "epsilon: float = 0.0001",
          "exponential_avg_factor: float = 1.0", "num_side_inputs: int >= 0 = 0",
          "activation_mode: string = 'Identity'", "data_format: {'NHWC', 'NCHW'} = 'NHWC'",
          "is_training: bool = true"],
   shape_fn=fused_batch_norm)
