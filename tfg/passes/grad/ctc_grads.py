"""Gradients of the CTC ops: the nodes TensorFlow's ctc_ops.py emits. CTCLoss computes its
own gradient (output 1); _CTCLossGrad scales it by the incoming gradient of each entry's loss
and guards it against a second derivative with PreventGradient.

    Before: loss, g = CTCLoss(x, labels_indices, labels_values, sequence_length)
    After:  dx = Mul(ExpandDims(dloss, -1), PreventGradient(g))     ([B, 1] * [T, B, C])

The labels and lengths get none. CTCGreedyDecoder is not differentiable, as in TensorFlow.
"""
from tfg.passes.grad.registry import gradient, no_gradient
from tfg.schemas.dtypes import DType

# TensorFlow's words, which PreventGradient reports if a second derivative is asked for
_SECOND_DERIVATIVE = ("Currently there is no way to take the second  derivative of ctc_loss "
                      "due to the fused implementation's interaction  with tf.gradients()")


@gradient("CTCLoss")
def _ctc_loss(b, op, grads):
    """The op's own gradient output, scaled per batch entry by the loss's gradient."""
    guarded = b.op("PreventGradient", [op.outputs[1]], {"message": _SECOND_DERIVATIVE})
    scale = b.op("ExpandDims", [grads[0], b.const(-1, DType.INT32)])
    return [b.op("Mul", [scale, guarded]), None, None, None]


no_gradient("CTCGreedyDecoder")
