"""Signatures of TensorFlow's printing ops (logging_ops.cc) and StringFormat (string_ops.cc),
which tf.print builds: StringFormat renders the tensors into one string, PrintV2 writes it.

    >>> get_op("PrintV2").stateful, get_op("StringFormat").stateful
    (True, False)
"""
from tfg.schemas.ops.registry import op
from tfg.schemas.ops.shape_fns import ShapeError, no_outputs, unchanged


def string_format(ctx):
    """A scalar string; the template must hold one placeholder per input, as TensorFlow's
    shape function insists."""
    template, placeholder = ctx.attr("template"), ctx.attr("placeholder")
    count = template.count(placeholder) if placeholder else 0
    if count != ctx.num_inputs:
        raise ShapeError(f"num placeholders in template and num inputs must match: {count} "
                         f"vs. {ctx.num_inputs}")
    return [()]


op("Print",
   inputs=["input: T", "data: U"],
   outputs=["output: T"],
   attrs=["T: type", "U: list(type) >= 0", "message: string = ''", "first_n: int = -1",
          "summarize: int = 3"],
   stateful=True, shape_fn=unchanged)
op("PrintV2",
   inputs=["input: string"],
   attrs=["output_stream: string = 'stderr'", "end: string = '\\n'"],
   stateful=True, shape_fn=no_outputs)
op("StringFormat",
   inputs=["inputs: T"],
   outputs=["output: string"],
   attrs=["T: list(type) >= 0", "template: string = '%s'", "placeholder: string = '%s'",
          "summarize: int = 3"],
   shape_fn=string_format)
