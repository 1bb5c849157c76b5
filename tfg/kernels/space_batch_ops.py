"""SpaceToBatchND / BatchToSpaceND and DepthToSpace / SpaceToDepth: pads, reshapes and
transposes, as TensorFlow's array_ops documentation spells them out.

    SpaceToBatchND(x [B, H, W, C], block [bh, bw], paddings):
        pad H, W -> reshape [B, H'/bh, bh, W'/bw, bw, C] -> transpose [2, 4, 0, 1, 3, 5]
        -> reshape [bh * bw * B, H'/bh, W'/bw, C]
    DepthToSpace(x [B, H, W, C], bs) (NHWC): [B, H, W, bs, bs, C/bs^2] -> [B, H*bs, W*bs, ...]
"""
import math

import numpy as np

from tfg.kernels._util import fail, s
from tfg.kernels.array_ops import _constant_pad
from tfg.kernels.registry import ALL_DEVICES, kernel


def _block_args(x, block_shape, pads, what):
    block = [int(v) for v in np.asarray(block_shape).reshape(-1)]
    pads = np.asarray(pads).reshape(-1, 2).astype(np.int64)
    m = len(block)
    if pads.shape[0] != m:
        fail(f"{what} must have shape [{m}, 2], got {pads.shape[0]} rows")
    if x.ndim < m + 1:
        fail(f"input rank should be > {m}, got shape {list(x.shape)}")
    if any(b < 1 for b in block):
        fail(f"block_shape must be positive, got {block}")
    if np.any(pads < 0):
        fail(f"{what} must be non-negative, got {pads.tolist()}")
    return block, pads, m


def _cached_plan(ctx, make, x, block_shape, pads):
    """make(x, block_shape, pads), kept per node for x's shape and the two arguments' values:
    parsing them was most of a small call (a dilated ConvLSTM's 2x7x2 map)."""
    if type(block_shape) is not np.ndarray or type(pads) is not np.ndarray:
        return make(x, block_shape, pads)
    key = (make, x.shape, block_shape.tobytes(), block_shape.dtype.char, pads.shape,
           pads.tobytes(), pads.dtype.char)
    plan = ctx.cache.get(key)
    if plan is None:
        if len(ctx.cache) >= 16:
            ctx.cache.clear()
        plan = ctx.cache[key] = make(x, block_shape, pads)
    return plan


@kernel("SpaceToBatchND", device_types=ALL_DEVICES, host_inputs=(1, 2))
def space_to_batch_nd(ctx, x, block_shape, paddings):
    xp = ctx.xp
    x = xp.asarray(x)
    widths, split, perm, out_shape = _cached_plan(ctx, _space_to_batch_plan, x, block_shape,
                                                  paddings)
    if any(a or b for a, b in widths):  # (np.pad's Python: ~100 us a call on tiny maps)
        x = _constant_pad(x, widths, 0) if xp is np else xp.pad(x, widths)
    return xp.ascontiguousarray(xp.transpose(x.reshape(split), perm)).reshape(out_shape)


def _space_to_batch_plan(x, block_shape, paddings):
    """(pad widths, the padded input's split shape, its transpose, the output shape) for
    SpaceToBatchND of an input shaped like `x`; the argument errors TensorFlow gives."""
    block, pads, m = _block_args(x, block_shape, paddings, "paddings")
    widths = [(0, 0)] + [tuple(int(v) for v in p) for p in pads] + [(0, 0)] * (x.ndim - 1 - m)
    padded = [d + a + b for d, (a, b) in zip(x.shape, widths)]
    batch, rest = padded[0], padded[1 + m:]
    split = [batch]
    for i, b in enumerate(block):
        d = padded[1 + i]
        if d % b:
            fail(f"padded_shape[{i}]={d} is not divisible by block_shape[{i}]={b}")
        split += [d // b, b]
    split += rest
    perm = [2 + 2 * i for i in range(m)] + [0] + [1 + 2 * i for i in range(m)] \
        + list(range(1 + 2 * m, 1 + 2 * m + len(rest)))
    out_shape = [batch * math.prod(block)] + [split[1 + 2 * i] for i in range(m)] + rest
    return widths, split, perm, out_shape


@kernel("BatchToSpaceND", device_types=ALL_DEVICES, host_inputs=(1, 2))
def batch_to_space_nd(ctx, x, block_shape, crops):
    xp = ctx.xp
    x = xp.asarray(x)
    split, perm, joined, index = _cached_plan(ctx, _batch_to_space_plan, x, block_shape, crops)
    x = xp.ascontiguousarray(xp.transpose(x.reshape(split), perm)).reshape(joined)
    return xp.ascontiguousarray(x[index])


def _batch_to_space_plan(x, block_shape, crops):
    """(the input's split shape, its transpose, the joined shape, the crop's index) for
    BatchToSpaceND of an input shaped like `x`; the argument errors TensorFlow gives."""
    block, crops, m = _block_args(x, block_shape, crops, "crops")
    prod = math.prod(block)
    if x.shape[0] % prod:
        fail(f"input batch dimension ({x.shape[0]}) is not divisible by the product of "
             f"block sizes ({prod})")
    batch, spatial, rest = x.shape[0] // prod, x.shape[1:1 + m], x.shape[1 + m:]
    split = block + [batch] + list(x.shape[1:])
    perm = [m]
    for i in range(m):
        perm += [m + 1 + i, i]
    perm += list(range(2 * m + 1, 2 * m + 1 + len(rest)))
    joined = [batch] + [d * b for d, b in zip(spatial, block)] + list(rest)
    index = [slice(None)]
    for i in range(m):
        lo, hi = int(crops[i][0]), int(crops[i][1])
        if lo + hi > joined[1 + i]:
            fail(f"crops {lo}, {hi} are larger than dimension {i + 1} ({joined[1 + i]})")
        index.append(slice(lo, joined[1 + i] - hi))
    return split, perm, joined, tuple(index)


def _format(ctx):
    fmt = s(ctx.attrs.get("data_format", b"NHWC"))
    if fmt not in ("NHWC", "NCHW"):
        fail(f"data_format {fmt} is not supported (NHWC or NCHW)")
    return fmt


@kernel("DepthToSpace", device_types=ALL_DEVICES)
def depth_to_space(ctx, x):
    xp = ctx.xp
    x = xp.asarray(x)
    bs = int(ctx.attrs["block_size"])
    if x.ndim != 4:
        fail(f"input rank should be 4, got shape {list(x.shape)}")
    if _format(ctx) == "NCHW":
        b, c, h, w = x.shape
        if c % (bs * bs):
            fail(f"input depth {c} should be divisible by block_size * block_size {bs * bs}")
        y = xp.transpose(x.reshape(b, bs, bs, c // (bs * bs), h, w), (0, 3, 4, 1, 5, 2))
        return xp.ascontiguousarray(y).reshape(b, c // (bs * bs), h * bs, w * bs)
    b, h, w, c = x.shape
    if c % (bs * bs):
        fail(f"input depth {c} should be divisible by block_size * block_size {bs * bs}")
    y = xp.transpose(x.reshape(b, h, w, bs, bs, c // (bs * bs)), (0, 1, 3, 2, 4, 5))
    return xp.ascontiguousarray(y).reshape(b, h * bs, w * bs, c // (bs * bs))


@kernel("SpaceToDepth", device_types=ALL_DEVICES)
def space_to_depth(ctx, x):
    xp = ctx.xp
    x = xp.asarray(x)
    bs = int(ctx.attrs["block_size"])
    if x.ndim != 4:
        fail(f"input rank should be 4, got shape {list(x.shape)}")
    nchw = _format(ctx) == "NCHW"
    h, w = (x.shape[2], x.shape[3]) if nchw else (x.shape[1], x.shape[2])
    if h % bs or w % bs:
        fail(f"image height {h} and width {w} should be divisible by block_size {bs}")
    if nchw:
        b, c = x.shape[:2]
        y = xp.transpose(x.reshape(b, c, h // bs, bs, w // bs, bs), (0, 3, 5, 1, 2, 4))
        return xp.ascontiguousarray(y).reshape(b, bs * bs * c, h // bs, w // bs)
    b, c = x.shape[0], x.shape[3]
    y = xp.transpose(x.reshape(b, h // bs, bs, w // bs, bs, c), (0, 1, 3, 2, 4, 5))
    return xp.ascontiguousarray(y).reshape(b, h // bs, w // bs, bs * bs * c)
