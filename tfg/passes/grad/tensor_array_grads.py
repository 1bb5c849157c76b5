"""Gradients of the TensorArray ops (TensorFlow's tensor_array_grad.py rules).

The gradient of an array's contents lives in a second array, `TensorArrayGradV3(handle, flow,
source=<gradient scope>)`: one per forward array and gradient construction, whose writes add
up. Each access's gradient is the opposite access on it, and the float flow carries the
ordering back: a read's gradient writes, a write's gradient reads, a gather's scatters, a
scatter's gathers, a concat's splits, a split's concats.

    Before: v = TensorArrayReadV3(h, i, flow)
    After:  g, gflow = TensorArrayGradV3(h, flow, source="gradients")
            dflow = TensorArrayWriteV3(g, i, dv, gflow)            # the gradient of `flow`

    Before: flow_out = TensorArrayWriteV3(h, i, v, flow_in)
    After:  g, gflow = TensorArrayGradV3(h, dflow_out, source="gradients")
            dv = TensorArrayReadV3(g, i, gflow);   dflow_in = dflow_out

Inside a while loop the handle is a loop invariant (entered into the backward loop as one)
and the index the forward loop's value (popped from its stack), as for any op. Outside loops
a write's gradient waits for the forward write (TensorFlow's `write_barrier`); in a loop the
backward loop starts only after the forward one finished.
"""
from tfg.passes.grad.registry import gradient, no_gradient


def _grad_array(b, op, flow):
    """TensorArrayGradV3 of op's array with flow_in `flow`: (grad handle, grad flow)."""
    g = b.op("TensorArrayGradV3", [op.inputs[0], flow], {"source": b.builder.scope.encode()},
             name="TensorArrayGrad/TensorArrayGradV3")
    return g, b.out(g, 1)


def _write_barrier(b, op, flow):
    """The incoming gradient flow, ordered after the forward op outside loops."""
    if b.ctx.frame is not None:
        return flow
    return b.op("Identity", [flow], name="write_barrier", control=[op.name])


@gradient("TensorArrayReadV3")
def _read(b, op, grads):
    dtype = op.attr("dtype")
    g, gflow = _grad_array(b, op, op.inputs[2])
    flow = b.op("TensorArrayWriteV3", [g, op.inputs[1], grads[0], gflow], {"T": dtype})
    return [None, None, flow]


@gradient("TensorArrayWriteV3")
def _write(b, op, grads):
    dtype = op.attr("T")
    flow = _write_barrier(b, op, grads[0])
    g, gflow = _grad_array(b, op, flow)
    value = b.op("TensorArrayReadV3", [g, op.inputs[1], gflow], {"dtype": dtype})
    return [None, None, value, flow]


@gradient("TensorArrayGatherV3")
def _gather(b, op, grads):
    dtype = op.attr("dtype")
    g, gflow = _grad_array(b, op, op.inputs[2])
    flow = b.op("TensorArrayScatterV3", [g, op.inputs[1], grads[0], gflow], {"T": dtype})
    return [None, None, flow]


@gradient("TensorArrayScatterV3")
def _scatter(b, op, grads):
    dtype = op.attr("T")
    flow = _write_barrier(b, op, grads[0])
    g, gflow = _grad_array(b, op, flow)
    value = b.op("TensorArrayGatherV3", [g, op.inputs[1], gflow], {"dtype": dtype})
    return [None, None, value, flow]


@gradient("TensorArrayConcatV3")
def _concat(b, op, grads):
    dtype = op.attr("dtype")
    g, gflow = _grad_array(b, op, op.inputs[1])
    flow = b.op("TensorArraySplitV3", [g, grads[0], op.outputs[1], gflow], {"T": dtype})
    return [None, flow]


@gradient("TensorArraySplitV3")
def _split(b, op, grads):
    dtype = op.attr("T")
    flow = _write_barrier(b, op, grads[0])
    g, gflow = _grad_array(b, op, flow)
    value = b.op("TensorArrayConcatV3", [g, gflow], {"dtype": dtype}, name="TensorArrayConcat")
    return [None, value, None, flow]


# TensorFlow's NotDifferentiable list: making, sizing, closing an array, and its gradient.
no_gradient("TensorArrayV3", "TensorArrayGradV3", "TensorArrayGradWithShape",
            "TensorArraySizeV3", "TensorArrayCloseV3")
