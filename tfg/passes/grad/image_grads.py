"""Gradients of the image resize ops (TensorFlow's image_grad.py).

    Before: y = ResizeBilinear(x, size)    After: ResizeBilinearGrad(g, x)
    Before: y = ResizeNearestNeighbor(x, size)
                                           After: ResizeNearestNeighborGrad(g, Shape(x)[1:3])

The size input gets no gradient; integer images get none either (TensorFlow differentiates
ResizeBilinear and ResizeBicubic only for float images).
"""
from tfg.passes.grad.registry import gradient
from tfg.schemas.dtypes import DType

I32 = DType.INT32


def _flags(op):
    return {k: op.attr(k, False) for k in ("align_corners", "half_pixel_centers")}


def _float_image(op, types=(DType.FLOAT, DType.DOUBLE, DType.HALF, DType.BFLOAT16)):
    # unknown (the image comes from an op without a signature): differentiate, as the
    # gradient pass does for every tensor of unknown dtype
    dt = op.input_dtype(0)
    return dt is None or dt in types


@gradient("ResizeBilinear")
def _resize_bilinear(b, op, grads):
    if not _float_image(op):
        return [None, None]
    return [b.op("ResizeBilinearGrad", [grads[0], op.inputs[0]], _flags(op)), None]


@gradient("ResizeBicubic")
def _resize_bicubic(b, op, grads):
    if not _float_image(op, (DType.FLOAT, DType.DOUBLE)):
        return [None, None]
    return [b.op("ResizeBicubicGrad", [grads[0], op.inputs[0]], _flags(op)), None]


@gradient("ResizeNearestNeighbor")
def _resize_nearest(b, op, grads):
    size = b.op("Slice", [b.shape(op.inputs[0]), b.const([1], I32), b.const([2], I32)])
    return [b.op("ResizeNearestNeighborGrad", [grads[0], size], _flags(op)), None]
