"""Gradients of NthElement and Dilation2D (TensorFlow's nn_grad.py), and the detection, index
and random ops TensorFlow marks NotDifferentiable.

    Before: y = NthElement(x, n)
    After:  ind = Cast(Equal(ExpandDims(y, -1), x)); dx = ind / ExpandDims(Sum(ind, -1), -1)
            * ExpandDims(g, -1)       (ties share the gradient equally)
    Before: y = Dilation2D(x, f)
    After:  Dilation2DBackpropInput(x, f, g), Dilation2DBackpropFilter(x, f, g)

CombinedNonMaxSuppression, UnravelIndex, DrawBoundingBoxesV2 and the two Dilation2D backprops
have no gradient in TensorFlow either, and are left unregistered as there (refused by name).
"""
from tfg.passes.grad.registry import gradient, no_gradient
from tfg.schemas.dtypes import DType

I32 = DType.INT32

no_gradient("EditDistance", "RandomShuffle", "DrawBoundingBoxes",
            "SampleDistortedBoundingBoxV2")


@gradient("NthElement")
def _nth_element(b, op, grads):
    """TensorFlow's _NthElementGrad, node for node."""
    x, y = op.inputs[0], op.outputs[0]
    dtype = b.dtype(grads[0]) or op.input_dtype(0)
    last = b.const(-1, I32)
    indicators = b.op("Cast", [b.op("Equal", [b.op("ExpandDims", [y, last]), x])],
                      {"DstT": dtype})
    g = b.op("ExpandDims", [grads[0], last])
    num_selected = b.op("ExpandDims", [b.op("Sum", [indicators, last]), last])
    return [b.op("Mul", [b.op("RealDiv", [indicators, num_selected]), g]), None]


@gradient("Dilation2D")
def _dilation2d(b, op, grads):
    attrs = {k: op.attr(k) for k in ("strides", "rates", "padding")}
    x, f = op.inputs
    return [b.op("Dilation2DBackpropInput", [x, f, grads[0]], attrs),
            b.op("Dilation2DBackpropFilter", [x, f, grads[0]], attrs)]
