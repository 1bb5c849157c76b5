"""Gradients of the Optional ops (TensorFlow's optional_grad.py): control flow v2's cond
gradient wraps the intermediates a backward branch needs in OptionalFromValue, so a second
gradient (or a gradient of a graph that holds a first one) passes through them.

    Before: o = OptionalFromValue(a, b)
    After:  ga, gb = OptionalGetValue(g)   (the inputs' dtypes and shapes as attrs)
    Before: a, b = OptionalGetValue(o)
    After:  go = OptionalFromValue(ga, gb)
"""
from tfg.graphdef.attrs import Shape
from tfg.passes.grad.registry import gradient


@gradient("OptionalFromValue")
def _optional_from_value(b, op, grads):
    """Unwrap the optional gradient into one gradient per component."""
    n = len(op.inputs)
    types = [op.input_dtype(i) for i in range(n)]
    shapes = [_partial_shape(b, t) for t in op.inputs]
    got = b.op("OptionalGetValue", [grads[0]], {"output_types": types, "output_shapes": shapes})
    return [b.out(got, i) for i in range(n)]


@gradient("OptionalGetValue")
def _optional_get_value(b, op, grads):
    """Wrap the components' gradients back into one optional."""
    return [b.op("OptionalFromValue", list(grads))]


def _partial_shape(b, t):
    """t's shape as shape inference knows it (None dims unknown; None: unknown rank)."""
    shape = b.builder._inferred_shape(t)
    return None if shape is None else Shape(shape)
