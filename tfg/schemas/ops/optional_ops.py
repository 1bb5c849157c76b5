"""Signatures of the Optional ops (TensorFlow's optional_ops.cc): a scalar variant that holds a
tuple of tensors or nothing. Control flow v2 writes them into a cond's gradient: the forward
`If` outputs each intermediate the backward branch needs wrapped by OptionalFromValue in the
branch that computed it and OptionalNone in the other, and the gradient's branch unwraps it
with OptionalGetValue.

    >>> [a.name for a in get_op("OptionalGetValue").outputs]
    ['components']
    >>> get_op("OptionalFromValue").attrs["Toutput_types"].minimum
    1
"""
from tfg.schemas.ops.registry import op
from tfg.schemas.ops.shape_fns import scalar


def get_value(ctx):
    shapes = ctx.attr("output_shapes") or []
    return [None if s is None else tuple(s) for s in shapes] or [None] * ctx.num_outputs


op("OptionalNone",
   outputs=["optional: variant"],
   shape_fn=scalar)
op("OptionalFromValue",
   inputs=["components: Toutput_types"],
   outputs=["optional: variant"],
   attrs=["Toutput_types: list(type) >= 1"],
   shape_fn=scalar)
op("OptionalHasValue",
   inputs=["optional: variant"],
   outputs=["has_value: bool"],
   shape_fn=scalar)
op("OptionalGetValue",
   inputs=["optional: variant"],
   outputs=["components: output_types"],
   attrs=["output_types: list(type) >= 1", "output_shapes: list(shape) >= 1"],
   shape_fn=get_value)
