"""Signatures of the TensorArray ops (TensorFlow's data_flow_ops.cc, V3): the arrays TF1's
`dynamic_rnn`, `raw_rnn` and beam-search decoders carry through v1 while loops.

    >>> [a.name for a in get_op("TensorArrayWriteV3").inputs]
    ['handle', 'index', 'value', 'flow_in']
    >>> get_op("TensorArrayV3").attrs["clear_after_read"].default
    True

Every op takes the array's handle (a resource, shape [2] as in TensorFlow) and a float `flow`
scalar, and those that change the array return a new flow: the flow edges order the accesses,
and `tfg grad` differentiates the array's contents through them. The element shape TensorFlow
keeps as the handle's shape data is not tracked: a read's shape is unknown, a gather's comes
from its `element_shape` attr.
"""
from tfg.schemas.ops.registry import op
from tfg.schemas.ops.shape_fns import ShapeError, no_outputs, scalar


def _scalar_input(ctx, i, what):
    shape = ctx.shape(i)
    if shape not in (None, ()):
        raise ShapeError(f"{what} must be a scalar, got rank {len(shape)}")


def tensor_array(ctx):
    _scalar_input(ctx, 0, "size")
    return [(2,), ()]


def grad(ctx):
    return [(2,), ()]


def read(ctx):
    _scalar_input(ctx, 1, "index")
    return [None]


def write(ctx):
    _scalar_input(ctx, 1, "index")
    return [()]


def gather(ctx):
    idx = ctx.shape(1)
    n = idx[0] if idx is not None and len(idx) == 1 else None
    element = ctx.attr("element_shape")
    return [None if element is None else (n,) + tuple(element)]


def concat(ctx):
    rest = ctx.attr("element_shape_except0")
    return [None if rest is None else (None,) + tuple(rest), (None,)]


op("TensorArrayV3",
   inputs=["size: int32"],
   outputs=["handle: resource", "flow: float"],
   attrs=["dtype: type", "element_shape: shape = unknown", "dynamic_size: bool = false",
          "clear_after_read: bool = true", "identical_element_shapes: bool = false",
          "tensor_array_name: string = ''"],
   stateful=True, shape_fn=tensor_array)
op("TensorArrayGradV3",
   inputs=["handle: resource", "flow_in: float"],
   outputs=["grad_handle: resource", "flow_out: float"],
   attrs=["source: string"],
   stateful=True, shape_fn=grad,
   traits=["within_input"])  # (the forward array's size: a flow scalar out)
op("TensorArrayGradWithShape",
   inputs=["handle: resource", "flow_in: float", "shape_to_prepend: int32"],
   outputs=["grad_handle: resource", "flow_out: float"],
   attrs=["source: string"],
   stateful=True, shape_fn=grad)
op("TensorArrayWriteV3",
   inputs=["handle: resource", "index: int32", "value: T", "flow_in: float"],
   outputs=["flow_out: float"],
   attrs=["T: type"],
   stateful=True, shape_fn=write, traits=["within_input", "cheap"])
op("TensorArrayReadV3",
   inputs=["handle: resource", "index: int32", "flow_in: float"],
   outputs=["value: dtype"],
   attrs=["dtype: type"],
   stateful=True, shape_fn=read, traits=["cheap"])
op("TensorArrayGatherV3",
   inputs=["handle: resource", "indices: int32", "flow_in: float"],
   outputs=["value: dtype"],
   attrs=["dtype: type", "element_shape: shape = unknown"],
   stateful=True, shape_fn=gather)
op("TensorArrayScatterV3",
   inputs=["handle: resource", "indices: int32", "value: T", "flow_in: float"],
   outputs=["flow_out: float"],
   attrs=["T: type"],
   stateful=True, shape_fn=scalar)
op("TensorArrayConcatV3",
   inputs=["handle: resource", "flow_in: float"],
   outputs=["value: dtype", "lengths: int64"],
   attrs=["dtype: type", "element_shape_except0: shape = unknown"],
   stateful=True, shape_fn=concat)
op("TensorArraySplitV3",
   inputs=["handle: resource", "value: T", "lengths: int64", "flow_in: float"],
   outputs=["flow_out: float"],
   attrs=["T: type"],
   stateful=True, shape_fn=scalar)
op("TensorArraySizeV3",
   inputs=["handle: resource", "flow_in: float"],
   outputs=["size: int32"],
   stateful=True, shape_fn=scalar, traits=["cheap"])
op("TensorArrayCloseV3",
   inputs=["handle: resource"],
   stateful=True, shape_fn=no_outputs)
