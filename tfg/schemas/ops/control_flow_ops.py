"""Signatures of v1 control flow (TensorFlow's control_flow_ops.cc), NoOp, Assert, Abort, and
the function-body `_Arg`/`_Retval` ops.

    >>> get_op("Merge").control_flow, [a.name for a in get_op("Merge").outputs]
    ('merge', ['output', 'value_index'])

The executor implements the ops with a `control_flow` kind itself (dead values, frames,
iterations).
"""
from tfg.schemas.ops.registry import op
from tfg.schemas.ops.shape_fns import ShapeError, no_outputs, relax, unchanged, unknown


def switch(ctx):
    if ctx.shape(1) not in (None, ()):
        raise ShapeError(f"Switch predicate must be a scalar, got rank {len(ctx.shape(1))}")
    return [ctx.shape(0), ctx.shape(0)]


def switch_n(ctx):
    if ctx.shape(1) not in (None, ()):
        raise ShapeError(f"_SwitchN output_index must be a scalar, got rank {len(ctx.shape(1))}")
    return [ctx.shape(0)] * ctx.attr("num_outs")


def merge_shape(ctx):
    """The most specific shape all inputs are instances of; inputs still unknown (None in
    `ctx.input_dtypes`, e.g. a NextIteration not yet inferred) do not constrain it."""
    shapes = [s for s, t in zip(ctx.input_shapes, ctx.input_dtypes) if t is not None]
    if not shapes:
        shapes = ctx.input_shapes
    out = shapes[0] if shapes else None
    for s in shapes[1:]:
        out = relax(out, s)
    return [out, ()]


def loop_cond(ctx):
    if ctx.shape(0) not in (None, ()):
        raise ShapeError("LoopCond input must be a scalar")
    return [()]


# --- v1 control flow: the executor implements these itself
op("Switch",
   inputs=["data: T", "pred: bool"],
   outputs=["output_false: T", "output_true: T"],
   attrs=["T: type"],
   control_flow="switch", shape_fn=switch)
op("RefSwitch",
   inputs=["data: Ref(T)", "pred: bool"],
   outputs=["output_false: Ref(T)", "output_true: Ref(T)"],
   attrs=["T: type"],
   control_flow="switch", shape_fn=switch)
# TensorFlow's lowering of Case (lower_case_op.cc) writes it into frozen graphs; tfg rewrites it
# into Switches when it loads a graph (tfg.graphdef.lower_switch_n), so no kernel runs it.
op("_SwitchN",
   inputs=["data: T", "output_index: int32"],
   outputs=["outputs: num_outs * T"],
   attrs=["num_outs: int >= 1", "T: type"],
   shape_fn=switch_n)
op("Merge",
   inputs=["inputs: N * T"],
   outputs=["output: T", "value_index: int32"],
   attrs=["T: type", "N: int >= 1"],
   control_flow="merge", shape_fn=merge_shape)
op("RefMerge",
   inputs=["inputs: Ref(N * T)"],
   outputs=["output: Ref(T)", "value_index: int32"],
   attrs=["T: type", "N: int >= 1"],
   control_flow="merge", shape_fn=merge_shape)
op("Enter",
   inputs=["data: T"],
   outputs=["output: T"],
   attrs=["T: type", "frame_name: string", "is_constant: bool = false",
          "parallel_iterations: int = 10"],
   control_flow="enter", shape_fn=unchanged)
op("RefEnter",
   inputs=["data: Ref(T)"],
   outputs=["output: Ref(T)"],
   attrs=["T: type", "frame_name: string", "is_constant: bool = false",
          "parallel_iterations: int = 10"],
   control_flow="enter", shape_fn=unchanged)
op("Exit",
   inputs=["data: T"],
   outputs=["output: T"],
   attrs=["T: type"],
   control_flow="exit", shape_fn=unchanged)
op("RefExit",
   inputs=["data: Ref(T)"],
   outputs=["output: Ref(T)"],
   attrs=["T: type"],
   control_flow="exit", shape_fn=unchanged)
op("NextIteration",
   inputs=["data: T"],
   outputs=["output: T"],
   attrs=["T: type"],
   control_flow="next_iteration", shape_fn=unchanged)
op("RefNextIteration",
   inputs=["data: Ref(T)"],
   outputs=["output: Ref(T)"],
   attrs=["T: type"],
   control_flow="next_iteration", shape_fn=unchanged)
op("LoopCond",
   inputs=["input: bool"],
   outputs=["output: bool"],
   control_flow="loop_cond", shape_fn=loop_cond)
op("ControlTrigger",
   control_flow="control_trigger", shape_fn=no_outputs)

# --- ordering, checks and aborts
op("NoOp",
   shape_fn=no_outputs)
op("Assert",
   inputs=["condition: bool", "data: T"],
   attrs=["T: list(type) >= 1", "summarize: int = 3"],
   stateful=True, shape_fn=no_outputs)
op("Abort",
   attrs=["error_msg: string = ''", "exit_without_error: bool = false"],
   shape_fn=no_outputs)

# --- function arguments and results
op("_Arg",
   outputs=["output: T"],
   attrs=["T: type", "index: int >= 0"],
   stateful=True, shape_fn=unknown)
op("_Retval",
   inputs=["input: T"],
   attrs=["T: type", "index: int >= 0"],
   stateful=True, shape_fn=no_outputs)
