"""TensorScatterUpdate / Add / Sub / Min / Max: a copy of `tensor` with slices at
`indices` (the GatherNd addressing: the last axis of indices indexes the first k axes)
replaced or combined with `updates`. tf.nn.ctc_loss with dense labels writes them in its
forward-backward scan loops.

    TensorScatterAdd(zeros(3, 2), [[0], [2], [0]], [[1, 1], [2, 2], [3, 3]])
        -> [[4, 4], [0, 0], [2, 2]]          (repeated indices accumulate; Update: last wins)

Errors use TensorFlow's words.
"""
from tfg.kernels._util import fail, scatter_add, tf_dims
from tfg.kernels.indexing_ops import _nd_index
from tfg.kernels.registry import ALL_DEVICES, kernel


def _check_updates(idx, updates, shape):
    """updates.shape must be indices.shape[:-1] + shape[k:] (TensorFlow's checks)."""
    batch, k = idx.ndim - 1, idx.shape[-1] if idx.ndim else 0
    if updates.shape[:batch] != idx.shape[:-1]:
        fail(f"The outer {batch} dimensions of updates.shape={tf_dims(updates.shape)} must match "
             f"the outer {batch} dimensions of indices.shape={tf_dims(idx.shape)}")
    if updates.shape[batch:] != tuple(shape[k:]):
        n = len(shape) - k
        fail(f"The inner {n} dimensions of output.shape={tf_dims(shape)} must match the inner "
             f"{n} dimensions of updates.shape={tf_dims(updates.shape)}")


def _scatter(ctx, tensor, indices, updates, combine):
    xp = ctx.xp
    tensor, idx, updates = xp.asarray(tensor), xp.asarray(indices), xp.asarray(updates)
    if idx.ndim == 0:
        fail(f"Indices shape must have rank at least one. Found:{tf_dims(idx.shape)}")
    if updates.dtype != tensor.dtype:
        fail(f"updates is {updates.dtype.name}, tensor is {tensor.dtype.name}")
    if idx.shape[-1] == 0:
        if idx.size or updates.size:
            fail("Indices and updates specified for empty output shape")
        return tensor.copy()
    _check_updates(idx, updates, tensor.shape)
    out = tensor.copy()
    key = _nd_index(xp, idx, out.shape, ctx.op)
    combine(xp, out, key, updates)
    return out


def _update(xp, out, key, updates):
    out[key] = updates  # numpy assigns in order: a repeated index keeps the last update


def _sub(xp, out, key, updates):
    scatter_add(xp, out, key, -updates)


def _at(name):
    def combine(xp, out, key, updates):
        getattr(xp, name).at(out, key, updates)
    return combine


# op -> (combine, device types): Min/Max use numpy's ufunc.at, CPU only.
_COMBINE = {"TensorScatterUpdate": (_update, ALL_DEVICES),
            "TensorScatterAdd": (scatter_add, ALL_DEVICES),
            "TensorScatterSub": (_sub, ALL_DEVICES),
            "TensorScatterMin": (_at("minimum"), ("CPU",)),
            "TensorScatterMax": (_at("maximum"), ("CPU",))}


def _register(op, combine, devices):
    @kernel(op, device_types=devices)
    def tensor_scatter(ctx, tensor, indices, updates):
        return _scatter(ctx, tensor, indices, updates, combine)
    return tensor_scatter


for _op, (_fn, _devices) in _COMBINE.items():
    _register(_op, _fn, _devices)
