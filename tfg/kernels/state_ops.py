"""Variables: reference variables (VariableV2 and the Assign family) and resource variables
(VarHandleOp, ReadVariableOp, AssignVariableOp, ..., and the row ops ResourceGather,
ResourceScatterAdd, ResourceScatterUpdate).

    w = VariableV2(shape=[3], dtype=float)   -> a Ref kept in step.session_resources
    Assign(w, [1, 2, 3])                     -> the Ref, now holding a copy of the value
    Identity(w) before any Assign            -> error "attempting to use uninitialized value w"

A VariableV2 lives as long as the session, keyed by (container, shared_name or node name);
a resource variable is keyed the same way and reached through a ResourceHandle. The ref
kernels (Assign, AssignAdd, AssignSub) write into the variable's buffer, which reads of the
ref share, as TensorFlow's do (ref_updates.py); the resource kernels store a fresh array
and updates build new arrays (no writes into an array a read or a fetch may still hold).
"""
import numpy as np

from tfg.kernels import aligned, ref_updates
from tfg.kernels._util import fail, s, scatter_add, shape_of, tf_dims, tf_name
from tfg.kernels.basic import shape_compatible
from tfg.kernels.indexing_ops import _check_indices, _gather  # (GatherV2's own)
from tfg.kernels.registry import ALL_DEVICES, kernel
from tfg.kernels.resources import Ref, ResourceHandle
from tfg.schemas.dtypes import DType


def _var_key(ctx):
    return s(ctx.attrs.get("container", b"")), s(ctx.attrs.get("shared_name", b"")) or ctx.name


@kernel(["VariableV2", "Variable"], device_types=ALL_DEVICES, needs_step=True)
def variable(ctx, step):
    container, name = _var_key(ctx)
    return step.session_resources.get_or_create(
        container, name, lambda: Ref(name, ctx.attrs.get("dtype"), ctx.attrs.get("shape")))


def _check_same_shape(op, var, value):
    old = var.get()
    if shape_of(old) != shape_of(value):
        fail(f"{op} requires shapes of both tensors to match. lhs shape= "
             f"{list(shape_of(old))} rhs shape= {list(shape_of(value))}")
    return old


def _fresh_copy(xp, value):
    """The variable's own copy of `value` (aligned for BLAS on the CPU)."""
    return aligned.fresh_copy(value) if xp is np else xp.array(value, copy=True)


@kernel("Assign", device_types=ALL_DEVICES, ref_inputs=(0,))
def assign(ctx, ref, value):
    xp = ctx.xp
    value = xp.asarray(value)
    with ref.lock:
        if ctx.attrs.get("validate_shape", True):
            if ref.initialized:
                _check_same_shape("Assign", ref, value)
            elif ref.shape is not None and not shape_compatible(value.shape, ref.shape):
                fail(f"Assign requires shapes of both tensors to match. lhs shape= "
                     f"{list(ref.shape)} rhs shape= {list(value.shape)}")
        ref_updates.write(xp, ref, value, lambda v: _fresh_copy(xp, v))
    return ref


def _update_ref(op, name):
    @kernel(op, device_types=ALL_DEVICES, ref_inputs=(0,))
    def run(ctx, ref, value):
        xp = ctx.xp
        value = xp.asarray(value)
        with ref.lock:
            _check_same_shape(op, ref, value)
            ref_updates.update(xp, ref, getattr(xp, name), value)
        return ref
    return run


_update_ref("AssignAdd", "add")
_update_ref("AssignSub", "subtract")
ref_updates.writes_in_place("Assign", "AssignAdd", "AssignSub")


@kernel("IsVariableInitialized", device_types=ALL_DEVICES, host_only=True, ref_inputs=(0,))
def is_variable_initialized(ctx, ref):
    return np.bool_(ref.initialized)


# --------------------------------------------------------------------------- resource variables
@kernel("VarHandleOp", device_types=ALL_DEVICES, host_only=True, needs_step=True)
def var_handle(ctx, step):
    container, name = _var_key(ctx)
    return ResourceHandle(container, name, step.session_resources, ctx.attrs.get("dtype"),
                          ctx.attrs.get("shape"))


def resolve(handle):
    """The Ref behind a resource handle (error if the variable does not exist)."""
    if isinstance(handle, Ref):
        return handle
    if not isinstance(handle, ResourceHandle):
        fail(f"expected a resource handle, got {type(handle).__name__}")
    return handle.lookup()


def _check_dtype(ctx, var, value=None):
    want = ctx.attrs.get("dtype")
    have = value.dtype if value is not None else var.get().dtype
    if want is not None and want.np != have:
        fail(f"Trying to {'assign' if value is not None else 'read'} variable with wrong dtype."
             f" Expected {want.tf_name} got {tf_name(have)}")


@kernel("ReadVariableOp", device_types=ALL_DEVICES)
def read_variable(ctx, handle):
    var = resolve(handle)
    value = var.get()
    _check_dtype(ctx, var)
    return value


@kernel("VariableShape", device_types=ALL_DEVICES, host_only=True)
def variable_shape(ctx, handle):
    """The shape of a resource variable's value (TensorFlow's gradients of Keras RNNs ask)."""
    value = resolve(handle).get()
    return np.array(value.shape, dtype=ctx.attrs.get("out_type", DType.INT32).np)


@kernel("AssignVariableOp", device_types=ALL_DEVICES)
def assign_variable(ctx, handle, value):
    xp = ctx.xp
    value = xp.asarray(value)
    var = handle.lookup_or_create(lambda: Ref(handle.name, handle.dtype, handle.shape))
    _check_dtype(ctx, var, value)
    with var.lock:
        if ctx.attrs.get("validate_shape", False) and var.initialized:
            _check_same_shape("AssignVariableOp", var, value)
        var.assign(_fresh_copy(xp, value))
    return ()


def _update_resource(op, name):
    @kernel(op, device_types=ALL_DEVICES)
    def run(ctx, handle, value):
        var = resolve(handle)
        with var.lock:
            old = _check_same_shape(op, var, value)
            var.assign(getattr(ctx.xp, name)(old, value))
        return ()
    return run


_update_resource("AssignAddVariableOp", "add")
_update_resource("AssignSubVariableOp", "subtract")


@kernel("VarIsInitializedOp", device_types=ALL_DEVICES, host_only=True)
def var_is_initialized(ctx, handle):
    var = handle.mgr.lookup(handle.container, handle.name)
    return np.bool_(var is not None and var.initialized)


@kernel("DisableCopyOnRead", device_types=ALL_DEVICES, host_only=True)
def disable_copy_on_read(ctx, handle):
    return ()  # one copy mode in tfg (see the op's signature)


@kernel("DestroyResourceOp", device_types=ALL_DEVICES, host_only=True)
def destroy_resource(ctx, handle):
    if handle.mgr.delete(handle.container, handle.name) is None and \
            not ctx.attrs.get("ignore_lookup_error", True):
        fail(f"resource {handle.container}/{handle.name} does not exist")
    return ()


# --------------------------------------------------------------------- resource variable rows
@kernel("ResourceGather", device_types=ALL_DEVICES)
def resource_gather(ctx, handle, indices):
    """Rows of a resource variable (a Keras Embedding's lookup): GatherV2 of the variable's
    value along axis batch_dims, with batch_dims batch dimensions."""
    var = resolve(handle)
    params = var.get()
    _check_dtype(ctx, var)
    batch_dims = int(ctx.attrs.get("batch_dims", 0))
    if params.ndim < 1:
        fail(f"params must be at least 1 dimensional, got shape {list(params.shape)}")
    if batch_dims < 0 or params.ndim < batch_dims + 1:
        fail(f"params must have at least {batch_dims + 1} dimensions for batch_dims "
             f"{batch_dims}, got shape {list(params.shape)}")
    return _gather(ctx.xp, params, indices, batch_dims, batch_dims)


def _scatter_rows(ctx, op, handle, indices, updates):
    """(the variable, the row indices, updates shaped as the rows they go to), refused the
    way TensorFlow's ResourceScatterUpdateOp refuses them."""
    xp = ctx.xp
    var = resolve(handle)
    params = var.get()
    updates = xp.asarray(updates)
    _check_dtype(ctx, var, updates)
    if updates.dtype != params.dtype:
        fail(f"{op}: Trying to update variable with wrong dtype. Expected "
             f"{tf_name(params.dtype)} got {tf_name(updates.dtype)}")
    return (var,) + scatter_rows(xp, op, params, indices, updates)


def scatter_rows(xp, op, params, indices, updates):
    """(the row indices flat, updates as the rows they go to) of a scatter into `params`'s
    rows (ResourceScatter*, a reference variable's Scatter*), checked as TensorFlow's
    ScatterUpdateOp checks them."""
    if params.ndim < 1:
        fail(f"{op}: params must be at least 1-D, got shape {tf_dims(params.shape)}")
    idx = xp.asarray(indices)
    rows = tuple(idx.shape) + tuple(params.shape[1:])
    if updates.ndim and tuple(updates.shape) != rows:
        fail(f"{op}: Must have updates.shape = indices.shape + params.shape[1:] or "
             f"updates.shape = [], got updates.shape {tf_dims(updates.shape)}, indices.shape "
             f"{tf_dims(idx.shape)}, params.shape {tf_dims(params.shape)}")
    idx = _check_indices(xp, idx, params.shape[0])
    return idx.reshape(-1), xp.broadcast_to(updates, rows).reshape(
        (idx.size,) + tuple(params.shape[1:]))


@kernel("ResourceScatterAdd", device_types=ALL_DEVICES)
def resource_scatter_add(ctx, handle, indices, updates):
    """var[indices] += updates; repeated indices add up (a new array, as the other resource
    kernels store)."""
    var, idx, rows = _scatter_rows(ctx, "ResourceScatterAdd", handle, indices, updates)
    with var.lock:
        new = ctx.xp.array(var.get(), copy=True)
        scatter_add(ctx.xp, new, idx, rows)
        var.assign(new)
    return ()


@kernel("ResourceScatterUpdate", device_types=ALL_DEVICES)
def resource_scatter_update(ctx, handle, indices, updates):
    """var[indices] = updates; of repeated indices the last update stays (TensorFlow's CPU
    kernel writes them in order)."""
    var, idx, rows = _scatter_rows(ctx, "ResourceScatterUpdate", handle, indices, updates)
    with var.lock:
        new = ctx.xp.array(var.get(), copy=True)
        new[idx] = rows
        var.assign(new)
    return ()
