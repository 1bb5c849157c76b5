"""Signatures of the block-rearranging ops (array_ops.cc in TensorFlow): SpaceToBatchND and
BatchToSpaceND, which TensorFlow wraps around a dilated convolution (Keras' Conv1D/Conv2D
with dilation_rate > 1, tf.nn.atrous_conv2d), and DepthToSpace / SpaceToDepth (pixel
shuffle).

    >>> get_op("SpaceToBatchND").attrs["Tpaddings"].default
    <DType.INT32: 3>

Shapes: SpaceToBatchND([2, 12, 12, 3], block [2, 2], paddings [[2, 2], [2, 2]]) is
[8, 8, 8, 3]; BatchToSpaceND undoes it with the paddings as crops.
"""
from tfg.schemas.ops.registry import op
from tfg.schemas.ops.shape_fns import ShapeError, with_rank


def _blocks(ctx):
    """(block_shape as ints or None, pads/crops as pairs or None, M)."""
    block = ctx.elems(1)
    pads = ctx.elems(2)
    m = len(block) if block is not None else None
    if m is None and ctx.shape(1) is not None and ctx.shape(1)[0] is not None:
        m = ctx.shape(1)[0]
    if pads is not None:
        pads = [(pads[2 * i], pads[2 * i + 1]) for i in range(len(pads) // 2)]
    if block is not None and any(b is not None and b < 1 for b in block):
        raise ShapeError(f"block_shape must be positive, got {list(block)}")
    return block, pads, m


def space_to_batch_nd(ctx, forward=True):
    s = ctx.shape(0)
    block, pads, m = _blocks(ctx)
    if s is None or m is None:
        return [None]
    if len(s) < m + 1:
        raise ShapeError(f"input rank should be > {m}, got {len(s)}")
    if block is None or pads is None or any(b is None for b in block):
        return [(None,) * len(s)]
    prod = 1
    for b in block:
        prod *= b
    out = [None if s[0] is None else (s[0] * prod if forward else s[0] // prod)]
    if not forward and s[0] is not None and s[0] % prod:
        raise ShapeError(f"batch {s[0]} is not divisible by the block size product {prod}")
    for i, b in enumerate(block):
        d, (lo, hi) = s[1 + i], pads[i]
        if d is None or lo is None or hi is None:
            out.append(None)
        elif forward:
            if (d + lo + hi) % b:
                raise ShapeError(f"padded dimension {i + 1} ({d + lo + hi}) is not a multiple "
                                 f"of block size {b}")
            out.append((d + lo + hi) // b)
        else:
            out.append(d * b - lo - hi)
    return [tuple(out) + tuple(s[1 + m:])]


def batch_to_space_nd(ctx):
    return space_to_batch_nd(ctx, forward=False)


def _depth_space(ctx, to_space):
    s = with_rank(ctx.shape(0), 4, "input")
    bs = ctx.attr("block_size")
    fmt = ctx.attr("data_format")
    fmt = fmt.decode() if isinstance(fmt, bytes) else fmt
    if fmt == "NCHW_VECT_C":
        raise ShapeError("data_format NCHW_VECT_C is not supported")
    c_axis, hw = (1, (2, 3)) if fmt == "NCHW" else (3, (1, 2))
    out = list(s)
    c = s[c_axis]
    if to_space:
        if c is not None and c % (bs * bs):
            raise ShapeError(f"depth {c} is not divisible by block_size * block_size "
                             f"({bs * bs})")
        out[c_axis] = None if c is None else c // (bs * bs)
        for a in hw:
            out[a] = None if s[a] is None else s[a] * bs
    else:
        for a in hw:
            if s[a] is not None and s[a] % bs:
                raise ShapeError(f"dimension {a} ({s[a]}) is not divisible by block_size {bs}")
            out[a] = None if s[a] is None else s[a] // bs
        out[c_axis] = None if c is None else c * bs * bs
    return [tuple(out)]


def depth_to_space(ctx):
    return _depth_space(ctx, True)


def space_to_depth(ctx):
    return _depth_space(ctx, False)


op("SpaceToBatchND",
   inputs=["input: T", "block_shape: Tblock_shape", "paddings: Tpaddings"],
   outputs=["output: T"],
   attrs=["T: type", "Tblock_shape: {int32, int64} = DT_INT32",
          "Tpaddings: {int32, int64} = DT_INT32"],
   shape_fn=space_to_batch_nd)
op("BatchToSpaceND",
   inputs=["input: T", "block_shape: Tblock_shape", "crops: Tcrops"],
   outputs=["output: T"],
   attrs=["T: type", "Tblock_shape: {int32, int64} = DT_INT32",
          "Tcrops: {int32, int64} = DT_INT32"],
   shape_fn=batch_to_space_nd)
for _name, _fn in (("DepthToSpace", depth_to_space), ("SpaceToDepth", space_to_depth)):
    op(_name,
       inputs=["input: T"],
       outputs=["output: T"],
       attrs=["T: type", "block_size: int >= 2",
              "data_format: {'NHWC', 'NCHW', 'NCHW_VECT_C'} = 'NHWC'"],
       shape_fn=_fn)
