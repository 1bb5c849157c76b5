"""Per-channel Const operands of an elementwise chain (chains.py) tiled, so the chain's
in-place loop runs over long rows (the fast path on a CPU).

    before: multiply(x[2,24,24,96], scale[96])        numpy: 1,152 inner loops of 96
    after:  multiply(x.reshape(8, 13824), tile(scale, 144)[13824])   8 inner loops of 13,824

The same elements meet the same elements under the same ufunc and dtypes, so the values are
bit for bit those of the broadcast. Only a Const's value is tiled (the same read-only array
every step, held here and checked by identity on each call); a per-channel operand is one of
shape (C,) or (1, .., 1, C) against a buffer whose last axis is C. A strided chain input (a
channel slice, a transpose) is copied into the chain's new buffer first, then tiled: about
30 + 20 us against 71 for the broadcast, a 2x24x24x96 slice of 256 channels times a vector.
"""
import numpy as np

UNARY, LEFT, RIGHT = 0, 1, 2  # as chains.py: f(v), f(v, side), f(side, v)
_ndarray = np.ndarray

# A per-channel operand (shape (C,) or (1, .., 1, C)) against a buffer of rows of C: numpy
# runs one inner loop of C elements per row (2x48x48x96 times a 96-vector: 44 us, against
# 17 us for a scalar). Viewed as rows of K*C elements against the vector repeated K times,
# the same elements meet the same elements in loops K times longer: ~2x faster from ~100
# rows of 32-256 channels (DenseNet's batch norms before each convolution).
_TILE = 16384  # elements of a tiled operand at most (64 KB of float32), as clamp.py's block
_TILE_MIN_ROWS = 8  # fewer rows: the broadcast loop is as fast


def _per_channel_k(side, shape):
    """K (rows per tiled row) when `side` is a per-channel operand of a buffer of `shape`
    that tiling speeds up, else 0."""
    if type(side) is not _ndarray or not shape or side.ndim > len(shape) or not side.ndim:
        return 0
    c = shape[-1]
    if side.shape[-1] != c or side.size != c or c < 2:
        return 0
    rows = 1
    for d in shape[:-1]:
        rows *= d
    if rows < _TILE_MIN_ROWS:
        return 0
    k = min(rows, _TILE // c)
    while k > 1 and rows % k:
        k -= 1
    return k if k > 1 else 0


def plan(args, n0, steps, xi, v, consts):
    """For a signature that runs in place (`xi`: the chain input, `v`: the result): the Const
    per-channel operands tiled, as (rows, width, first, later): `first` = (argument index,
    the Const's array, its tile, whether x is the left operand) for the first member, `later`
    {step position: (argument index, the Const's array, its tile)}; None when none is."""
    shape, dtype = v.shape, v.dtype
    found = []
    if n0 == 2:
        o = 1 - xi
        found.append((-1, o))
    found += [(p, j) for p, (_, kind, j, _) in enumerate(steps) if kind != UNARY]
    ks = {}
    for p, j in found:
        side = args[j]
        if consts[j] and type(side) is _ndarray and side.dtype == dtype:
            k = _per_channel_k(side, shape)
            if k:
                ks[(p, j)] = k
    if not ks:
        return None
    k = min(ks.values())
    while any(kk % k for kk in ks.values()):  # one row width for all: a common divisor
        k -= 1
    if k < 2:
        return None
    c = shape[-1]
    rows, width = v.size // (k * c), k * c
    first, later = None, {}
    for (p, j), _ in ks.items():
        tile = np.tile(args[j].reshape(-1), k)
        tile.flags.writeable = False
        if p < 0:
            first = (j, args[j], tile, xi == 0)
        else:
            later[p] = (j, args[j], tile)
    return rows, width, first, later


def run(tp, f0, n0, steps, args, x, in_place, at):
    """The chain in place with its tiled operands (the same ufuncs on the same elements, in
    the same order); None (nothing written) when a Const operand is not the tiled array.
    `at[0]`: the member running (chains.py names it if a ufunc raises)."""
    rows, width, first, later = tp
    at[0] = 0
    if first is not None and args[first[0]] is not first[1]:
        return None
    for j, src, _ in later.values():
        if args[j] is not src:
            return None
    contiguous = x.flags.c_contiguous
    buf = x if in_place and contiguous else np.empty(x.shape, x.dtype)
    bv = buf.reshape(rows, width)
    if first is not None:
        j, _, tile, x_left = first
        if contiguous:
            xv = x.reshape(rows, width)
        else:  # a strided view: copied, then tiled (~50 against 71 us for the broadcast)
            np.copyto(buf, x)
            xv = bv
        if x_left:
            f0(xv, tile, out=bv)
        else:
            f0(tile, xv, out=bv)
    else:
        f0(*args[:n0], out=buf)
    for p, (f, kind, j, k) in enumerate(steps):
        at[0] = k
        t = later.get(p)
        if t is not None:
            if kind == LEFT:
                f(bv, t[2], out=bv)
            else:
                f(t[2], bv, out=bv)
        elif kind == UNARY:
            f(buf, buf)
        elif kind == LEFT:
            f(buf, args[j], out=buf)
        else:
            f(args[j], buf, out=buf)
    return buf
