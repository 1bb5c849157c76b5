"""The XLA ops that Keras's TensorFlow backend writes into ordinary graphs:
`keras.ops.slice_update` is XlaDynamicUpdateSlice (keras-hub's Swin Transformer builds its
shifted-window attention mask with it). TensorFlow runs these by compiling them with XLA; the
semantics are XLA's.

    XlaDynamicUpdateSlice(zeros(4, 5), ones(2, 3), [3, 4])
        -> ones at rows 2:4, columns 2:5     (each start clamped to [0, dim - update dim])

Errors use TensorFlow's words.
"""
import numpy as np

from tfg.kernels._util import fail, tf_dims
from tfg.kernels.registry import ALL_DEVICES, kernel


@kernel("XlaDynamicUpdateSlice", device_types=ALL_DEVICES, host_inputs=(2,))
def dynamic_update_slice(ctx, x, update, indices):
    """A copy of `x` with `update` written at `indices`; XLA clamps every start so the
    update fits (a negative start is 0, one past the end is dim - update dim)."""
    xp = ctx.xp
    x, update, idx = xp.asarray(x), xp.asarray(update), np.asarray(indices)
    if x.ndim != update.ndim:
        fail(f"input and update must have the same rank, input shape is {tf_dims(x.shape)}; "
             f"update shape is {tf_dims(update.shape)}")
    if idx.ndim != 1 or idx.size != x.ndim:
        fail("index must be a vector with length equal to the number of input dimensions")
    for u, d in zip(update.shape, x.shape):
        if u > d:
            fail(f"Update dim size {u} greater than dynamic slice dimension: {d}.")
    starts = [min(max(int(i), 0), d - u) for i, d, u in zip(idx, x.shape, update.shape)]
    out = x.copy()
    out[tuple(slice(s, s + u) for s, u in zip(starts, update.shape))] = update
    return out
