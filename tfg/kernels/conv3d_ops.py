"""3-D convolution on the CPU, NDHWC, SAME or VALID: Conv3D and its two backprops.

    Conv3D(x[N,D,H,W,C], w[KD,KH,KW,C,O], strides=[1,sd,sh,sw,1]) -> [N, OD, OH, OW, O]
    Conv3DBackpropInputV2(input_sizes, w, dy) -> dx;  Conv3DBackpropFilterV2(x, sizes, dy) -> dw

The forward op is im2col + GEMM: the patch matrix [rows, KD*KH*KW*C] is copied from a strided
view of the padded input (conv3d_geom.py), its columns in the filter's (kd, kh, kw, c) order,
one slab of output planes at a time (SLAB_BYTES bounds the copy). The input backprop multiplies
each slab of dy by the filter's transpose and adds each tap's columns back into a padded
buffer (KD*KH*KW whole-slab adds, never a loop over voxels); the filter backprop sums the
slabs' patch matrices' transposes times dy.

As TensorFlow's CPU kernels do, these refuse the NCDHW layout (a GPU layout in TensorFlow),
dilations above 1 and grouped filters. half runs in float32 and is rounded once at the end.
"""
import numpy as np

from tfg.kernels._util import fail, s, shape_vector, tf_name
from tfg.kernels.conv3d_geom import WindowGeom, spatial_of
from tfg.kernels.registry import kernel

_FLOATS = (np.float16, np.float32, np.float64)


def _geometry(ctx, op, spatial, ksize):
    """The WindowGeom of this node for these input and filter sizes, with TensorFlow's CPU
    checks on the layout, strides and dilations (once per node and size: ctx.cache)."""
    key = ("geom3d", tuple(spatial), tuple(ksize))
    g = ctx.cache.get(key)
    if g is not None:
        return g
    sn, strides, sc = spatial_of(ctx.attrs["strides"], "strides", 5)
    if sn != 1 or sc != 1:
        fail("Current implementation does not yet support strides in the batch and depth "
             "dimensions.")
    dn, dilations, dc = spatial_of(ctx.attrs.get("dilations", [1] * 5), "dilations", 5)
    if dn != 1 or dc != 1 or dilations != (1, 1, 1):
        fail(f"CPU implementation of {op} currently only supports dilated rates of 1, got "
             f"dilations {[dn, *dilations, dc]}")
    g = ctx.cache[key] = WindowGeom(spatial, ksize, strides, dilations, ctx.attrs["padding"])
    return g


def _check_layout(ctx, op):
    """NDHWC only: TensorFlow's CPU kernels refuse NCDHW (a GPU layout) first of all."""
    if s(ctx.attrs.get("data_format", b"NDHWC")) != "NDHWC":
        fail(f"CPU implementation of {op} currently only supports the NHWC tensor format "
             f"(NDHWC); NCDHW is a GPU layout")


def _compute_dtype(op, *arrays):
    """The dtype the arithmetic runs in (float32 for half), after checking the inputs'."""
    dt = arrays[0].dtype
    for a in arrays:
        if a.dtype != dt or a.dtype.type not in _FLOATS:
            fail(f"{op} needs inputs of one floating dtype (half, float, double), got "
                 f"{', '.join(tf_name(x) for x in arrays)}")
    return np.float32 if dt == np.float16 else dt


# The patch matrix is made one slab of output planes (of one image) at a time, each at most
# this big: the whole [N*OD*OH*OW, KD*KH*KW*C] matrix is KD*KH*KW times the input (a C3D-style
# 3x3x3 layer of 64 channels at 16x56x56 and batch 8: 2.8 GB).
SLAB_BYTES = 32 << 20


def _slabs(g, n, k, itemsize):
    """(image, first output plane, end plane) of every slab, in output order."""
    plane = max(1, g.out[1] * g.out[2] * k * itemsize)
    step = max(1, SLAB_BYTES // plane)
    for b in range(n):
        for d0 in range(0, g.out[0], step):
            yield b, d0, min(d0 + step, g.out[0])


def _slab_rows(g, d0, d1):
    return (d1 - d0) * g.out[1] * g.out[2]


def _check_filter(op, x_channels, w):
    if w.ndim != 5:
        fail(f"{op}: filter must be 5-dimensional, got shape {list(w.shape)}")
    if w.shape[3] == 0 or x_channels % w.shape[3]:
        fail(f"Input depth must be evenly divisible by filter depth: {x_channels} vs "
             f"{w.shape[3]}")
    if w.shape[3] != x_channels:
        fail(f"Number of channels in filter ({w.shape[3]}) must match last dimension of input "
             f"({x_channels}): grouped 3-D convolutions are GPU-only in TensorFlow")


def _sizes(v, what):
    """The backprops' input_sizes / filter_sizes: 5 sizes, none negative."""
    sizes = shape_vector(v, what)
    if len(sizes) != 5 or min(sizes) < 0:
        fail(f"{what} must be 5 non-negative sizes, got {list(sizes)}")
    return sizes


def _check_dy(dy, n, g, oc):
    want = (n, *g.out, oc)
    if tuple(dy.shape) != want:
        fail(f"out_backprop shape {list(dy.shape)} does not match the computed output shape "
             f"{list(want)}")


@kernel("Conv3D")
def conv3d(ctx, x, w):
    _check_layout(ctx, "Conv3D")
    x, w = np.asarray(x), np.asarray(w)
    if x.ndim != 5:
        fail(f"input must be 5-dimensional, got shape {list(x.shape)}")
    _check_filter("Conv3D", x.shape[4], w)
    if w.size == 0:  # refused even where the output would be empty (unlike Conv2D)
        fail("filter must not have zero elements (i.e. all dimensions must be non-zero)")
    dt = _compute_dtype("Conv3D", x, w)
    g = _geometry(ctx, "Conv3D", x.shape[1:4], w.shape[:3])
    n, oc, k = x.shape[0], w.shape[4], int(np.prod(g.ksize)) * x.shape[4]
    windows = g.windows(g.pad(x.astype(dt, copy=False)))  # [N, OD, OH, OW, KD, KH, KW, C]
    wm = w.astype(dt, copy=False).reshape(k, oc)
    y = np.empty((n, *g.out, oc), dt)
    for b, d0, d1 in _slabs(g, n, k, y.itemsize):
        rows = _slab_rows(g, d0, d1)
        np.matmul(windows[b, d0:d1].reshape(rows, k), wm, out=y[b, d0:d1].reshape(rows, oc))
    return y.astype(x.dtype, copy=False)


@kernel("Conv3DBackpropInputV2", host_inputs=(0,))
def conv3d_backprop_input(ctx, input_sizes, w, dy):
    _check_layout(ctx, "Conv3DBackpropInputV2")
    w, dy = np.asarray(w), np.asarray(dy)
    sizes = _sizes(input_sizes, "input_sizes")
    n, c = sizes[0], sizes[4]
    _check_filter("Conv3DBackpropInputV2", c, w)
    dt = _compute_dtype("Conv3DBackpropInputV2", w, dy)
    g = _geometry(ctx, "Conv3DBackpropInputV2", sizes[1:4], w.shape[:3])
    oc = w.shape[4]
    _check_dy(dy, n, g, oc)
    k, out_dtype = int(np.prod(g.ksize)) * c, dy.dtype
    dy = dy.astype(dt, copy=False)
    wt = w.astype(dt, copy=False).reshape(k, oc).T
    dxp = np.zeros(g.padded_shape(n, c), dt)
    for b, d0, d1 in _slabs(g, n, k, dxp.itemsize):
        rows = _slab_rows(g, d0, d1)
        cols = (dy[b, d0:d1].reshape(rows, oc) @ wt).reshape(d1 - d0, *g.out[1:], *g.ksize, c)
        for offsets in g.taps():
            dxp[g.slab_tap(b, d0, d1, offsets)] += cols[(slice(None),) * 3 + offsets]
    return np.ascontiguousarray(dxp[g.interior()]).astype(out_dtype, copy=False)


@kernel("Conv3DBackpropFilterV2", host_inputs=(1,))
def conv3d_backprop_filter(ctx, x, filter_sizes, dy):
    _check_layout(ctx, "Conv3DBackpropFilterV2")
    x, dy = np.asarray(x), np.asarray(dy)
    sizes = _sizes(filter_sizes, "filter_sizes")
    if x.ndim != 5:
        fail(f"input must be 5-dimensional, got shape {list(x.shape)}")
    if sizes[3] != x.shape[4]:
        fail(f"filter_sizes' input depth {sizes[3]} must match the input's depth {x.shape[4]}")
    dt = _compute_dtype("Conv3DBackpropFilterV2", x, dy)
    g = _geometry(ctx, "Conv3DBackpropFilterV2", x.shape[1:4], sizes[:3])
    oc = sizes[4]
    _check_dy(dy, x.shape[0], g, oc)
    k = int(np.prod(g.ksize)) * x.shape[4]
    windows = g.windows(g.pad(x.astype(dt, copy=False)))
    dy = dy.astype(dt, copy=False)
    dw = np.zeros((k, oc), dt)
    for b, d0, d1 in _slabs(g, x.shape[0], k, dw.itemsize):
        rows = _slab_rows(g, d0, d1)
        dw += windows[b, d0:d1].reshape(rows, k).T @ dy[b, d0:d1].reshape(rows, oc)
    return dw.reshape(sizes).astype(x.dtype, copy=False)
