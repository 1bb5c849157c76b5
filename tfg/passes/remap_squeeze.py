"""A squeeze-excite block's squeeze as one Mean: Reshape(Mean(x, axes), [N, 1, 1, C]) ->
Mean(x, axes, keep_dims=True), for tfg's Session only (a remap rule, opts.extra["tfg_kernels"]).

    before: m = Mean(x[2,24,24,144], [1, 2], keep_dims=False); r = Reshape(m, [2, 1, 1, 144])
    after:  r = Mean(x, [1, 2], keep_dims=True)                               # [2, 1, 1, 144]

Why: Keras's EfficientNet squeezes each block with GlobalAveragePooling2D then a Reshape to
[N, 1, 1, C]: 16 Reshape calls a step that only put the reduced axes back. keep_dims gives the
same values in the same shape (a reshape moves no value). The node keeps the Reshape's name,
so a fetch of it still works; the rule needs the reduced input's shape (other than the reduced
axes) and the target shape as constants, and leaves the pair alone otherwise.
"""


def _axes(value, rank):
    """Sorted distinct axes of a Mean's reduction_indices constant, or None if invalid."""
    if value is None or value.dtype.kind not in "iu" or value.ndim > 1:
        return None
    axes = sorted({int(a) + rank if int(a) < 0 else int(a) for a in value.reshape(-1)})
    return axes if all(0 <= a < rank for a in axes) else None


def _kept_shape_matches(target, kept):
    """Whether a Reshape to `target` (ints, at most one -1) of an array of shape `kept` (the
    keep_dims shape, all dims known) gives exactly that shape."""
    if target is None or target.dtype.kind not in "iu" or target.shape != (len(kept),):
        return False
    target = [int(t) for t in target]
    if target.count(-1) > 1 or any(t < -1 for t in target):
        return False
    if -1 in target and 0 in kept:
        return False  # -1 against an empty array is ambiguous
    return all(t == k or t == -1 for t, k in zip(target, kept))


def squeeze_keepdims(ctx, node, mean):
    """Reshape(Mean(x, axes, keep_dims=False), target) -> Mean(x, axes, keep_dims=True) when
    `target` is the keep_dims shape (see module doc)."""
    if not ctx.opts.extra.get("tfg_kernels", False) or mean.op != "Mean":
        return False
    ref = node.data_inputs[0]
    if ref.port != 0 or ctx.preserved(mean.name) or mean.get_attr("keep_dims", False):
        return False
    if mean.control_inputs or node.control_inputs or mean.device != node.device:
        return False
    if ctx.control_consumers(mean.name) or len(ctx.consumers(mean.name)) != 1:
        return False
    shape = ctx.shape(mean.data_inputs[0])
    if shape is None:
        return False
    axes = _axes(ctx.const_value(mean.data_inputs[1]), len(shape))
    if axes is None:
        return False
    kept = [1 if i in axes else d for i, d in enumerate(shape)]
    if any(d is None or d < 0 for d in kept):
        return False
    if not _kept_shape_matches(ctx.const_value(node.data_inputs[1]), kept):
        return False
    attrs = {k: mean.get_attr(k) for k in mean.attr if not k.startswith("_")}
    attrs["keep_dims"] = True
    old_shape = node.data_inputs[1].node
    ctx.morph(node, "Mean", list(mean.inputs[:2]), attrs)
    ctx.remove_if_dead(mean.name)
    ctx.remove_if_dead(old_shape)
    return True
