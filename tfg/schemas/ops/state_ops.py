"""Signatures of stateful resources (TensorFlow's state_ops.cc, resource_variable_ops.cc,
data_flow_ops.cc, io_ops.cc): reference and resource variables, stacks, queues, checkpoints.

    >>> get_op("Assign").inputs[0].is_ref, get_op("VariableV2").stateful
    (True, True)
"""
from tfg.schemas.ops.registry import op
from tfg.schemas.ops.shape_fns import (
    ShapeError, compatible, fmt, from_shape_attr, merge, no_outputs, scalar, unchanged, unknown,
    with_rank, with_rank_at_least)


def assign(ctx):
    if ctx.attr("validate_shape"):
        return [merge(ctx.shape(0), ctx.shape(1))]
    return [ctx.shape(1)]


def read_variable(ctx):
    """The variable's declared shape, when the handle traces back to its VarHandleOp."""
    handle = ctx.input_handles[0]
    return [handle[1] if handle is not None else None]


def variable_shape(ctx):
    """[rank] of the variable's value, when its declared shape is known."""
    handle = ctx.input_handles[0]
    shape = handle[1] if handle is not None else None
    return [(len(shape),) if shape is not None else (None,)]


def stack_push(ctx):
    return [ctx.shape(1)]


def _queue_shapes(ctx):
    handle = ctx.input_handles[0]
    shapes = list(handle[1]) if handle is not None and handle[1] is not None else []
    n = ctx.num_outputs
    return shapes if len(shapes) == n else [None] * n


def queue_dequeue(ctx):
    return _queue_shapes(ctx)


def queue_dequeue_many(ctx):
    n = ctx.scalar(1)
    return [None if s is None else (n,) + tuple(s) for s in _queue_shapes(ctx)]


# --- reference variables
op("VariableV2",
   outputs=["ref: Ref(dtype)"],
   attrs=["shape: shape", "dtype: type", "container: string = ''", "shared_name: string = ''"],
   stateful=True, shape_fn=from_shape_attr(),
   traits=["variable"])
op("Variable",
   outputs=["ref: Ref(dtype)"],
   attrs=["shape: shape", "dtype: type", "container: string = ''", "shared_name: string = ''"],
   stateful=True, shape_fn=from_shape_attr(),
   traits=["variable"])
op("Assign",
   inputs=["ref: Ref(T)", "value: T"],
   outputs=["output_ref: Ref(T)"],
   attrs=["T: type", "validate_shape: bool = true", "use_locking: bool = true"],
   shape_fn=assign)
op("AssignAdd",
   inputs=["ref: Ref(T)", "value: T"],
   outputs=["output_ref: Ref(T)"],
   attrs=["T: numbertype", "use_locking: bool = false"],
   shape_fn=unchanged)
op("AssignSub",
   inputs=["ref: Ref(T)", "value: T"],
   outputs=["output_ref: Ref(T)"],
   attrs=["T: numbertype", "use_locking: bool = false"],
   shape_fn=unchanged)
op("IsVariableInitialized",
   inputs=["ref: Ref(dtype)"],
   outputs=["is_initialized: bool"],
   attrs=["dtype: type"],
   shape_fn=scalar)


# --- reference variable rows and slices (TF1's scatter_update / scatter_add ..., an optimizer's
# sparse update, `ref[1:3].assign(v)`): the ref updated in place, output as the ref
def scatter_update(ctx):
    """The variable's shape; updates must be indices.shape + ref.shape[1:] or a scalar
    (TensorFlow's ScatterUpdateShape)."""
    ref, indices, updates = ctx.shape(0), ctx.shape(1), ctx.shape(2)
    ref = with_rank_at_least(ref, 1, "ref")
    if ref is not None and indices is not None and updates is not None and len(updates):
        try:
            merge(updates, tuple(indices) + tuple(ref[1:]))
        except ShapeError:
            raise ShapeError(f"updates {fmt(updates)} must be indices {fmt(indices)} + "
                             f"ref[1:] {fmt(ref[1:])} or a scalar") from None
    return [ref]


def scatter_nd_update(ctx):
    """The input's shape; updates must be indices.shape[:-1] + ref.shape[indices.shape[-1]:]
    (TensorFlow's ScatterNdUpdateShape)."""
    ref, indices, updates = ctx.shape(0), ctx.shape(1), ctx.shape(2)
    if ref is None or indices is None or updates is None or len(indices) < 1:
        return [ref]
    k = indices[-1]
    if k is not None and k > len(ref):
        raise ShapeError(f"The last dimension of indices ({k}) must be <= the rank of ref "
                         f"({len(ref)})")
    if k is not None:
        want = tuple(indices[:-1]) + tuple(ref[k:])
        if not compatible(updates, want):
            raise ShapeError(f"updates {fmt(updates)} must be indices.shape[:-1] + "
                             f"ref.shape[{k}:] = {fmt(want)}")
    return [ref]


def count_up_to(ctx):
    with_rank(ctx.shape(0), 0, "CountUpTo's ref")
    return [()]


_NUMBER = ("{float, double, int32, uint8, int16, int8, complex64, int64, qint8, quint8, qint32, "
           "bfloat16, qint16, quint16, uint16, complex128, half, uint32, uint64")
_REAL = "{half, bfloat16, float, double, int32, int64}"
for _name, _t, _locking in (("ScatterUpdate", "type", "true"),
                            ("ScatterAdd", "numbertype", "false"),
                            ("ScatterSub", "numbertype", "false"),
                            ("ScatterMul", "numbertype", "false"),
                            ("ScatterDiv", "numbertype", "false"),
                            ("ScatterMin", _REAL, "false"),
                            ("ScatterMax", _REAL, "false")):
    op(_name,
       inputs=["ref: Ref(T)", "indices: Tindices", "updates: T"],
       outputs=["output_ref: Ref(T)"],
       attrs=[f"T: {_t}", "Tindices: {int32, int64}", f"use_locking: bool = {_locking}"],
       shape_fn=scatter_update)
for _name, _t, _locking in (("ScatterNdUpdate", "type", "true"),
                            ("ScatterNdAdd", "numbertype", "false"),
                            ("ScatterNdSub", "numbertype", "false"),
                            ("ScatterNdMax", "numbertype", "false"),
                            ("ScatterNdMin", "numbertype", "false")):
    op(_name,
       inputs=["ref: Ref(T)", "indices: Tindices", "updates: T"],
       outputs=["output_ref: Ref(T)"],
       attrs=[f"T: {_t}", "Tindices: {int32, int64}", f"use_locking: bool = {_locking}",
              "bad_indices_policy: string = ''"],
       shape_fn=scatter_nd_update)
# (its value-semantics sibling: a new tensor, with a gradient)
op("ScatterNdNonAliasingAdd",
   inputs=["input: T", "indices: Tindices", "updates: T"],
   outputs=["output: T"],
   attrs=[f"T: {_NUMBER}, bool}}", "Tindices: {int32, int64}", "bad_indices_policy: string = ''"],
   shape_fn=scatter_nd_update)
op("StridedSliceAssign",
   inputs=["ref: Ref(T)", "begin: Index", "end: Index", "strides: Index", "value: T"],
   outputs=["output_ref: Ref(T)"],
   attrs=["T: type", "Index: {int32, int64}", "begin_mask: int = 0", "end_mask: int = 0",
          "ellipsis_mask: int = 0", "new_axis_mask: int = 0", "shrink_axis_mask: int = 0"],
   shape_fn=unchanged)
op("CountUpTo",
   inputs=["ref: Ref(T)"],
   outputs=["output: T"],
   attrs=["limit: int", "T: {int32, int64}"],
   shape_fn=count_up_to)

# --- resource variables
op("VarHandleOp",
   outputs=["resource: resource"],
   attrs=["container: string = ''", "shared_name: string = ''", "debug_name: string = ''",
          "dtype: type", "shape: shape", "allowed_devices: list(string) = []"],
   stateful=True, shape_fn=scalar,
   traits=["variable"])
op("ReadVariableOp",
   inputs=["resource: resource"],
   outputs=["value: dtype"],
   attrs=["dtype: type"],
   stateful=True, shape_fn=read_variable)
op("VariableShape",
   inputs=["input: resource"],
   outputs=["output: out_type"],
   attrs=["out_type: {int32, int64} = DT_INT32"],
   stateful=True, shape_fn=variable_shape)
op("AssignVariableOp",
   inputs=["resource: resource", "value: dtype"],
   attrs=["dtype: type", "validate_shape: bool = false"],
   stateful=True, shape_fn=no_outputs)
op("AssignAddVariableOp",
   inputs=["resource: resource", "value: dtype"],
   attrs=["dtype: type"],
   stateful=True, shape_fn=no_outputs)
op("AssignSubVariableOp",
   inputs=["resource: resource", "value: dtype"],
   attrs=["dtype: type"],
   stateful=True, shape_fn=no_outputs)
op("VarIsInitializedOp",
   inputs=["resource: resource"],
   outputs=["is_initialized: bool"],
   stateful=True, shape_fn=scalar)
# Keras 3's save functions call it before reading a variable (TensorFlow then copies the
# variable's buffer on write instead of on read); tfg's variables have one mode, so a no-op.
op("DisableCopyOnRead",
   inputs=["resource: resource"],
   stateful=True, shape_fn=no_outputs)
op("DestroyResourceOp",
   inputs=["resource: resource"],
   attrs=["ignore_lookup_error: bool = true"],
   stateful=True, shape_fn=no_outputs)


# --- resource variable rows (Keras Embedding over a resource variable, sparse updates)
def resource_gather(ctx):
    """params.shape[:B] + indices.shape[B:] + params.shape[B+1:] (B = batch_dims), params
    being the variable's declared shape (TensorFlow's ResourceGather shape function)."""
    b = int(ctx.attr("batch_dims"))
    if b < 0:
        raise ShapeError(f"batch_dims is negative ({b})")
    handle = ctx.input_handles[0]
    params = handle[1] if handle is not None else None
    indices = with_rank_at_least(ctx.shape(1), b, "indices")
    params = with_rank_at_least(params, b + 1, "params")
    if params is None or indices is None:
        return [None]
    return [tuple(merge(params[:b], indices[:b])) + tuple(indices[b:]) + tuple(params[b + 1:])]


op("ResourceGather",
   inputs=["resource: resource", "indices: Tindices"],
   outputs=["output: dtype"],
   attrs=["batch_dims: int = 0", "validate_indices: bool = true", "dtype: type",
          "Tindices: {int32, int64}"],
   stateful=True, shape_fn=resource_gather)
op("ResourceScatterAdd",
   inputs=["resource: resource", "indices: Tindices", "updates: dtype"],
   attrs=["dtype: numbertype", "Tindices: {int32, int64}"],
   stateful=True, shape_fn=no_outputs)
op("ResourceScatterUpdate",
   inputs=["resource: resource", "indices: Tindices", "updates: dtype"],
   attrs=["dtype: type", "Tindices: {int32, int64}"],
   stateful=True, shape_fn=no_outputs)

# --- stacks (while-loop gradients keep forward values here)
op("StackV2",
   inputs=["max_size: int32"],
   outputs=["handle: resource"],
   attrs=["elem_type: type", "stack_name: string = ''"],
   stateful=True, shape_fn=scalar)
op("StackPushV2",
   inputs=["handle: resource", "elem: T"],
   outputs=["output: T"],
   attrs=["T: type", "swap_memory: bool = false"],
   stateful=True, shape_fn=stack_push,
   traits=["within_input", "cheap"])
op("StackPopV2",
   inputs=["handle: resource"],
   outputs=["elem: elem_type"],
   attrs=["elem_type: type"],
   stateful=True, shape_fn=unknown,
   traits=["cheap"])
op("StackCloseV2",
   inputs=["handle: resource"],
   stateful=True, shape_fn=no_outputs)

# --- queues
op("FIFOQueueV2",
   outputs=["handle: resource"],
   attrs=["component_types: list(type) >= 1", "shapes: list(shape) >= 0 = []",
          "capacity: int = -1", "container: string = ''", "shared_name: string = ''"],
   stateful=True, shape_fn=scalar)
op("RandomShuffleQueueV2",
   outputs=["handle: resource"],
   attrs=["component_types: list(type) >= 1", "shapes: list(shape) >= 0 = []",
          "capacity: int = -1", "min_after_dequeue: int = 0", "seed: int = 0", "seed2: int = 0",
          "container: string = ''", "shared_name: string = ''"],
   stateful=True, shape_fn=scalar)
op("QueueEnqueueV2",
   inputs=["handle: resource", "components: Tcomponents"],
   attrs=["Tcomponents: list(type) >= 1", "timeout_ms: int = -1"],
   stateful=True, shape_fn=no_outputs,
   traits=["blocking"])
op("QueueEnqueueManyV2",
   inputs=["handle: resource", "components: Tcomponents"],
   attrs=["Tcomponents: list(type) >= 1", "timeout_ms: int = -1"],
   stateful=True, shape_fn=no_outputs,
   traits=["blocking"])
op("QueueDequeueV2",
   inputs=["handle: resource"],
   outputs=["components: component_types"],
   attrs=["component_types: list(type) >= 1", "timeout_ms: int = -1"],
   stateful=True, shape_fn=queue_dequeue,
   traits=["blocking"])
op("QueueDequeueManyV2",
   inputs=["handle: resource", "n: int32"],
   outputs=["components: component_types"],
   attrs=["component_types: list(type) >= 1", "timeout_ms: int = -1"],
   stateful=True, shape_fn=queue_dequeue_many,
   traits=["blocking"])
op("QueueCloseV2",
   inputs=["handle: resource"],
   attrs=["cancel_pending_enqueues: bool = false"],
   stateful=True, shape_fn=no_outputs)
op("QueueIsClosedV2",
   inputs=["handle: resource"],
   outputs=["is_closed: bool"],
   stateful=True, shape_fn=scalar)
op("QueueSizeV2",
   inputs=["handle: resource"],
   outputs=["size: int32"],
   stateful=True, shape_fn=scalar)

# --- checkpoints
op("SaveV2",
   inputs=["prefix: string", "tensor_names: string", "shape_and_slices: string",
           "tensors: dtypes"],
   attrs=["dtypes: list(type) >= 1"],
   stateful=True, shape_fn=no_outputs)
op("RestoreV2",
   inputs=["prefix: string", "tensor_names: string", "shape_and_slices: string"],
   outputs=["tensors: dtypes"],
   attrs=["dtypes: list(type) >= 1"],
   stateful=True, shape_fn=unknown)
