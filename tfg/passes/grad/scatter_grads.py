"""Gradients of TensorScatterUpdate / Add / Sub / Min / Max (TensorFlow's array_grad.py
rules): the tensor's gradient flows where no update landed (Add/Sub: everywhere), each
update's is the GatherNd of the output's gradient at its index.

    Before: y = TensorScatterUpdate(x, idx, u)
    After:  dx = TensorScatterUpdate(g, idx, ZerosLike(u));  du = GatherNd(g, idx)
    Before: y = TensorScatterMax(x, idx, u)
    After:  the gradient split equally among x and the updates equal to y at each element
"""
from tfg.passes.grad.registry import gradient, no_gradient


def _at_indices(b, g, indices):
    return b.op("GatherNd", [g, indices])


@gradient("TensorScatterUpdate")
def _update(b, op, grads):
    _, indices, updates = op.inputs
    g = grads[0]
    return [b.op("TensorScatterUpdate", [g, indices, b.zeros_like(updates)]), None,
            _at_indices(b, g, indices)]


@gradient("TensorScatterAdd", "ScatterNdNonAliasingAdd")
def _add(b, op, grads):
    return [grads[0], None, _at_indices(b, grads[0], op.inputs[1])]


# TensorFlow's state_grad.py: updates of reference variables (the other ref scatters, CountUpTo,
# StridedSliceAssign and InplaceUpdate / Add / Sub have no gradient registered at all)
no_gradient("ScatterAdd", "ScatterSub", "ScatterMul", "ScatterDiv", "ScatterNdUpdate",
            "ScatterNdAdd", "ScatterNdSub")


@gradient("TensorScatterSub")
def _sub(b, op, grads):
    return [grads[0], None, b.op("Neg", [_at_indices(b, grads[0], op.inputs[1])])]


@gradient("TensorScatterMin", "TensorScatterMax")
def _min_max(b, op, grads):
    x, indices, updates = op.inputs
    y, g = op.outputs[0], grads[0]
    dt = {"DstT": b.dtype(g)}
    x_hit = b.op("Cast", [b.op("Equal", [x, y])], dt)
    u_hit = b.op("Cast", [b.op("Equal", [updates, _at_indices(b, y, indices)])], dt)
    scattered = b.op("ScatterNd", [indices, u_hit, b.shape(x, b.dtype(indices))])
    hits = b.op("AddV2", [x_hit, scattered])
    shared = b.op("RealDiv", [g, hits])
    return [b.op("Mul", [shared, x_hit]), None,
            b.op("Mul", [u_hit, _at_indices(b, shared, indices)])]
