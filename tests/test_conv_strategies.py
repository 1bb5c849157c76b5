"""Each CPU strategy of the convolution and pooling kernels on shapes chosen to take it, against
the definition (test_conv_fast_paths.reference: one output pixel at a time in float64) or a
brute-force pool, in both layouts: conv_gemm's 1x1 and patch-matrix GEMMs (NHWC and NCHW),
conv_depthwise's row windows, W phases and plain windows, pool_ops' separable pools, and the
numpy constant Pad. The strategy each shape takes is asserted too, so a changed threshold
cannot leave a branch untested."""
import numpy as np
import pytest

from test_conv_fast_paths import _attrs, reference, run
from tfg.graphdef.graph import Graph
from tfg.kernels import conv_depthwise, conv_gemm, conv_phases
from tfg.kernels.array_ops import _constant_pad
from tfg.kernels.conv_geom import Geom, padded
from tfg.kernels.context import KernelContext
from tfg.kernels.registry import get_kernel

# tfg's numpy convolution paths, also where oneDNN is installed (tests/test_onednn.py).
pytestmark = pytest.mark.usefixtures("numpy_convs")

rng = np.random.default_rng(5)


def nchw(x):
    return x.transpose(0, 3, 1, 2)


def conv(op, x, w, strides, dilations, padding, explicit, fmt):
    a = _attrs(strides, dilations, padding, explicit, fmt)
    got = run(op, nchw(x) if fmt == b"NCHW" else x, w, **a)
    return got.transpose(0, 2, 3, 1) if fmt == b"NCHW" else got


CONV2D = [  # x shape, filter shape, strides, dilations, padding, explicit
    ((2, 7, 6, 5), (1, 1, 5, 4), (1, 1), (1, 1), "VALID", None),      # 1x1: the input is the GEMM
    ((2, 7, 6, 5), (1, 1, 5, 4), (2, 3), (1, 1), "SAME", None),       # strided 1x1: sampled pixels
    ((2, 7, 6, 5), (1, 1, 5, 4), (1, 1), (1, 1), "EXPLICIT", ((0, 2), (1, 0))),  # padded 1x1
    ((2, 9, 8, 3), (3, 2, 3, 4), (1, 1), (1, 1), "SAME", None),       # patches, kw*c runs
    ((2, 9, 8, 3), (3, 3, 3, 4), (2, 1), (1, 2), "VALID", None),      # W-dilated patches
    ((1, 9, 9, 2), (2, 3, 2, 3), (2, 2), (2, 1), "EXPLICIT", ((1, 2), (2, 0))),
]


@pytest.mark.parametrize("fmt", [b"NHWC", b"NCHW"])
@pytest.mark.parametrize("case", CONV2D)
def test_conv2d_gemm_paths_match_the_definition(case, fmt):
    xs, ws, strides, dilations, padding, explicit = case
    x = rng.standard_normal(xs).astype(np.float32)
    w = rng.standard_normal(ws).astype(np.float32)
    want = reference(x.astype(np.float64), w.astype(np.float64), strides, dilations, padding,
                     explicit or ((0, 0), (0, 0)))
    got = conv("Conv2D", x, w, strides, dilations, padding, explicit, fmt)
    assert got.dtype == np.float32 and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("channels,thin", [(3, True), (1, True), (8, False)])
def test_thin_stems_take_the_transposed_patch_matrix(channels, thin, monkeypatch):
    """A convolution of 1-4 input channels (an image model's stem) copies its patch matrix
    transposed; the values are the definition's either way, on the node's repeated calls."""
    taken = []
    real = conv_gemm.patches_t_nhwc
    monkeypatch.setattr(conv_gemm, "patches_t_nhwc", lambda *a: taken.append(1) or real(*a))
    fn, ctx = get_kernel("Conv2D").fn, KernelContext(
        Graph().add_node("c", "Conv2D"), dict(strides=[1, 2, 2, 1], padding=b"EXPLICIT",
                                              explicit_paddings=[0, 0, 0, 1, 0, 1, 0, 0],
                                              dilations=[1, 1, 1, 1], data_format=b"NHWC"))
    w = rng.standard_normal((3, 3, channels, 5)).astype(np.float32)
    for _ in range(2):
        x = rng.standard_normal((2, 11, 10, channels)).astype(np.float32)
        want = reference(x.astype(np.float64), w.astype(np.float64), (2, 2), (1, 1),
                         "EXPLICIT", ((0, 1), (0, 1)))
        np.testing.assert_allclose(fn(ctx, x, w), want, rtol=1e-4, atol=1e-4)
    assert bool(taken) == thin


@pytest.mark.parametrize("rows", [1, 2, 3, 4])
def test_skinny_matmul_rows_as_gemvs(rows, monkeypatch):
    """conv_gemm.matmul: 2-3 rows against a large right matrix go one GEMV per row (a 1x1
    convolution at 1x1 pixels, a classifier at batch 2); the same values as one GEMM, for
    Conv2D, MatMul (transposed operands too) and float64."""
    from tfg.kernels import conv_gemm
    calls = []
    real = np.matmul
    monkeypatch.setattr(conv_gemm.np, "matmul", lambda *a, **k: calls.append(1) or real(*a, **k))
    x = rng.standard_normal((rows, 1, 1, 256)).astype(np.float32)
    w = rng.standard_normal((1, 1, 256, 200)).astype(np.float32)
    got = run("Conv2D", x, w, **_attrs((1, 1), (1, 1), "VALID", None, b"NHWC"))
    want = (x.reshape(rows, 256).astype(np.float64) @ w.reshape(256, 200)).reshape(got.shape)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    assert len(calls) == (rows if rows in conv_gemm.SKINNY_ROWS else 0)
    a = rng.standard_normal((300, rows))
    b = rng.standard_normal((200, 300))
    got = run("MatMul", a, b, transpose_a=True, transpose_b=True)
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, a.T @ b.T, rtol=1e-10, atol=1e-10)


def test_conv2d_nchw_output_is_contiguous_nchw():
    x = nchw(rng.standard_normal((2, 6, 6, 4)).astype(np.float32))
    for k in (1, 3):
        y = run("Conv2D", x, rng.standard_normal((k, k, 4, 3)).astype(np.float32),
                **_attrs((1, 1), (1, 1), "SAME", None, b"NCHW"))
        assert y.shape == (2, 3, 6, 6) and y.flags.c_contiguous


# x shape, kernel, strides, dilations, padding, multiplier, the strategy it must take
DEPTHWISE = [
    ((2, 14, 13, 5), (3, 3), (1, 1), (1, 1), "SAME", 1, "_rows"),       # OW >= 12
    ((2, 7, 6, 9), (5, 3), (2, 1), (1, 1), "SAME", 1, "_rows"),         # OW 6, few channels
    ((2, 14, 14, 3), (3, 2), (1, 1), (2, 3), "VALID", 1, "_rows"),      # dilated rows
    ((2, 7, 6, 400), (3, 3), (1, 1), (1, 1), "SAME", 1, "_windows"),    # OW 6, wide
    ((2, 7, 6, 240), (5, 5), (1, 1), (1, 1), "SAME", 1, "_rows"),       # OW 6, 240 channels
    ((2, 4, 3, 7), (3, 3), (1, 1), (1, 1), "SAME", 1, "_windows"),      # OW 3
    ((2, 15, 15, 6), (5, 5), (2, 2), (1, 1), "VALID", 1, "_phases"),    # strided, few channels
    ((2, 12, 13, 4), (3, 4), (1, 3), (2, 1), "SAME", 1, "_phases"),     # 3 W phases, H dilated
    ((2, 9, 9, 70), (3, 3), (2, 2), (1, 1), "SAME", 1, "_windows"),     # strided, wide
    ((2, 24, 23, 40), (3, 3), (2, 2), (1, 1), "SAME", 1, "_phases"),    # right pad
    ((2, 26, 25, 30), (5, 5), (2, 2), (1, 1), "EXPLICIT", 1, "_phases"),
    ((2, 9, 8, 4), (3, 3), (2, 2), (1, 1), "SAME", 3, "_windows"),      # channel multiplier
    ((2, 9, 16, 4), (2, 3), (1, 1), (1, 1), "EXPLICIT", 2, "_windows"),
    ((2, 3, 3, 6), (5, 5), (1, 1), (1, 1), "SAME", 1, "_dense"),        # NASNet's 3x3 cells
    ((2, 3, 3, 5), (7, 7), (1, 1), (1, 1), "SAME", 1, "_dense"),
    ((1, 3, 2, 4), (5, 3), (1, 1), (1, 1), "SAME", 1, "_dense"),        # not square
    ((2, 3, 3, 3), (3, 3), (1, 1), (1, 1), "VALID", 1, "_dense"),       # a 1x1 output
    ((2, 3, 3, 6), (3, 3), (1, 1), (1, 1), "SAME", 1, "_windows"),      # corners out of reach
    ((2, 3, 3, 6), (5, 5), (1, 1), (1, 1), "SAME", 2, "_windows"),      # channel multiplier
]


def _strategy(xs, ks, strides, dilations, padding, explicit, m):
    a = _attrs(strides, dilations, padding, explicit, b"NHWC")
    g = Geom(a, xs[1], xs[2], *ks)
    taken = []
    originals = {f: getattr(conv_depthwise, f)
                 for f in ("_rows", "_phases", "_windows", "_dense")}

    def spy(name):
        def f(*args):
            taken.append(name)
            return originals[name](*args)
        return f
    try:
        for name in originals:
            setattr(conv_depthwise, name, spy(name))
        x = np.zeros(xs, np.float32)
        conv_depthwise.forward(x, np.zeros((*ks, xs[3], m), np.float32), g)
    finally:
        for name, f in originals.items():
            setattr(conv_depthwise, name, f)
    return taken


@pytest.mark.parametrize("fmt", [b"NHWC", b"NCHW"])
@pytest.mark.parametrize("case", DEPTHWISE, ids=[f"{c[-1]}-{i}" for i, c in enumerate(DEPTHWISE)])
def test_depthwise_strategies_match_the_definition(case, fmt):
    xs, ks, strides, dilations, padding, m, strategy = case
    explicit = ((1, 0), (2, 1)) if padding == "EXPLICIT" else None
    assert _strategy(xs, ks, strides, dilations, padding, explicit, m) == [strategy]
    x = rng.standard_normal(xs).astype(np.float32)
    w = rng.standard_normal((*ks, xs[3], m)).astype(np.float32)
    want = reference(x.astype(np.float64), w.astype(np.float64), strides, dilations, padding,
                     explicit or ((0, 0), (0, 0)), depthwise=True)
    got = conv("DepthwiseConv2dNative", x, w, strides, dilations, padding, explicit, fmt)
    assert got.dtype == np.float32 and got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("case", [next(c for c in DEPTHWISE if c[-1] == s)
                                  for s in ("_rows", "_phases", "_dense")],
                         ids=["rows", "phases", "dense"])
def test_depthwise_tiled_filter_kept_only_for_a_read_only_filter(case):
    """A Const's filter (read-only, the same array every step) is tiled once per node; a
    writable filter (a variable's value, changed in place between steps) never is."""
    xs, ks, strides, dilations, padding, m, _ = case
    g = Geom(_attrs(strides, dilations, padding, None, b"NHWC"), xs[1], xs[2], *ks)
    x = rng.standard_normal(xs).astype(np.float32)
    cache = {}
    for writable in (False, True):
        w = rng.standard_normal((*ks, xs[3], m)).astype(np.float32)
        w.flags.writeable = writable
        first = conv_depthwise.forward(x, w, g, cache)
        np.testing.assert_array_equal(conv_depthwise.forward(x, w, g, cache), first)
        want = reference(x.astype(np.float64), w.astype(np.float64), strides, dilations,
                         padding, ((0, 0), (0, 0)), depthwise=True)
        np.testing.assert_allclose(first, want, rtol=1e-4, atol=1e-4)
        if writable:
            w *= 2  # in place, as an assign would
            np.testing.assert_allclose(conv_depthwise.forward(x, w, g, cache), 2 * first,
                                       rtol=1e-5, atol=1e-5)
    assert cache and all(not v[0].flags.writeable for v in cache.values())


@pytest.mark.parametrize("k", [5, 7])
def test_depthwise_dense_gives_the_windows_values_bit_for_bit(k):
    """Tiny images under big filters: the spatial matrix sums each output's taps in the
    windows' (kh, kw) order, without the padding's zero products: the same float32 values,
    an inf in the input an inf (no NaN)."""
    g = Geom(_attrs((1, 1), (1, 1), "SAME", None, b"NHWC"), 3, 3, k, k)
    x = rng.standard_normal((2, 3, 3, 40)).astype(np.float32)
    x[1, 2, 0, 7] = np.inf
    w = rng.standard_normal((k, k, 40, 1)).astype(np.float32)
    want = conv_depthwise._windows(padded(x, g), w, g)
    got = conv_depthwise._dense(x, w, g)
    np.testing.assert_array_equal(got, want)
    assert np.isinf(got[1, ..., 7]).all() and not np.isnan(got).any()


@pytest.mark.parametrize("case", [
    ((2, 15, 15, 6), (5, 5), (2, 2), "VALID", None),
    ((2, 12, 13, 4), (3, 4), (1, 3), "SAME", None),
    ((2, 24, 23, 72), (3, 3), (2, 2), "SAME", None),
    ((1, 10, 11, 3), (5, 5), (2, 2), "EXPLICIT", ((1, 2), (3, 1))),
    ((2, 7, 9, 5), (3, 7), (1, 4), "EXPLICIT", ((0, 0), (2, 5))),
])
def test_depthwise_phases_from_the_input_are_the_padded_phases_bit_for_bit(case):
    """conv_phases fills each W phase straight from the input (pad zero, only the columns a
    phase is read at): the same values as einsums over the phases of the padded input, on
    every call of one split (with an inf in between)."""
    xs, ks, strides, padding, explicit = case
    g = Geom(_attrs(strides, (1, 1), padding, explicit, b"NHWC"), xs[1], xs[2], *ks)
    split = conv_phases.PhaseSplit(xs, g)
    w = rng.standard_normal((*ks, xs[3], 1)).astype(np.float32)
    for k in range(3):
        x = rng.standard_normal(xs).astype(np.float32)
        if k == 1:
            x[0, -1, -1, 0] = x[0, 0, 0, 0] = np.inf
        xpad = padded(x, g)
        want = None
        for b in range(min(g.sw, g.kw)):
            xb = np.ascontiguousarray(xpad[:, :, b::g.sw, :])
            wb = conv_depthwise._tiled(w, g.ow, None, (b, g.sw))
            sn, sh, sw, sc = xb.strides
            view = np.lib.stride_tricks.as_strided(
                xb, (xs[0], g.oh, g.kh, wb.shape[1], g.ow * xs[3]),
                (sn, sh * g.sh, sh * g.dh, sw, sc))
            part = np.einsum("nhijv,ijv->nhv", view, wb, optimize=False)
            want = part if want is None else want + part
        tiles = [conv_depthwise._tiled(w, g.ow, None, (b, g.sw))
                 for b in range(min(g.sw, g.kw))]
        got = conv_phases.phases(x, tiles, g, split)
        np.testing.assert_array_equal(got, want.reshape(got.shape))


def test_depthwise_phases_keep_an_inf_an_inf():
    """No zero weight ever multiplies an input: inf * w stays inf (not NaN) in every phase."""
    x = np.ones((1, 9, 9, 2), np.float32)
    x[0, 4, 5, 0] = np.inf
    w = np.ones((3, 3, 2, 1), np.float32)
    y = run("DepthwiseConv2dNative", x, w, **_attrs((2, 2), (1, 1), "VALID", None, b"NHWC"))
    assert np.isinf(y[..., 0]).sum() == 2 and not np.isnan(y).any()
    assert np.isfinite(y[..., 1]).all()


def _pool_reference(x, op, k, s, padding):
    n, h, w, c = x.shape
    (kh, kw), (sh, sw) = k, s
    if padding == "SAME":
        oh, ow = -(-h // sh), -(-w // sw)
        pt = max((oh - 1) * sh + kh - h, 0) // 2
        pl = max((ow - 1) * sw + kw - w, 0) // 2
    else:
        oh, ow, pt, pl = (h - kh) // sh + 1, (w - kw) // sw + 1, 0, 0
    out = np.empty((n, oh, ow, c), np.float64)
    for i in range(oh):
        for j in range(ow):
            r0, c0 = i * sh - pt, j * sw - pl
            win = x[:, max(r0, 0):r0 + kh, max(c0, 0):c0 + kw].astype(np.float64)
            out[:, i, j] = win.max(axis=(1, 2)) if op == "MaxPool" else win.mean(axis=(1, 2))
    return out


POOLS = [((3, 3), (2, 2), "VALID"), ((3, 3), (1, 1), "SAME"), ((1, 1), (2, 2), "VALID"),
         ((1, 3), (1, 2), "SAME"), ((3, 1), (2, 1), "SAME"), ((2, 2), (2, 2), "VALID"),
         ((4, 3), (3, 2), "SAME")]


@pytest.mark.parametrize("fmt", [b"NHWC", b"NCHW"])
@pytest.mark.parametrize("op", ["MaxPool", "AvgPool"])
@pytest.mark.parametrize("case", POOLS)
def test_separable_pools_match_brute_force(case, op, fmt):
    k, s, padding = case
    x = rng.standard_normal((2, 9, 8, 3)).astype(np.float32)
    want = _pool_reference(x, op, k, s, padding)
    nc = fmt == b"NCHW"
    a = dict(ksize=[1, 1, *k] if nc else [1, *k, 1], strides=[1, 1, *s] if nc else [1, *s, 1],
             padding=padding.encode(), data_format=fmt)
    got = run(op, nchw(x) if nc else x, **a)
    got = got.transpose(0, 2, 3, 1) if nc else got
    assert got.dtype == np.float32 and got.shape == want.shape
    if op == "MaxPool":
        np.testing.assert_array_equal(got, want.astype(np.float32))
    else:
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_max_pool_of_integers_and_nan():
    x = rng.integers(-100, 100, (1, 5, 5, 2)).astype(np.int32)
    a = dict(ksize=[1, 2, 3, 1], strides=[1, 1, 2, 1], padding=b"SAME", data_format=b"NHWC")
    want = _pool_reference(x, "MaxPool", (2, 3), (1, 2), "SAME").astype(np.int32)
    np.testing.assert_array_equal(run("MaxPool", x, **a), want)
    f = np.zeros((1, 4, 4, 1), np.float32)
    f[0, 1, 1, 0] = np.nan
    y = run("MaxPool", f, ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1], padding=b"VALID",
            data_format=b"NHWC")
    assert np.isnan(y[0, 0, 0, 0]) and (y.ravel()[1:] == 0).all()


@pytest.mark.parametrize("shape,pads", [
    ((2, 6, 5, 3), [(0, 0), (0, 1), (2, 1), (0, 0)]), ((4,), [(2, 3)]),
    ((2, 3, 4), [(1, 0), (0, 2), (3, 1)]), ((0, 3), [(1, 1), (1, 0)]),
    ((2, 5, 1, 3, 2), [(1, 1), (0, 0), (2, 3), (0, 1), (1, 0)])])
@pytest.mark.parametrize("value", [0, 1.5, -np.inf])
def test_constant_pad_matches_numpy(shape, pads, value):
    x = rng.standard_normal(shape).astype(np.float32)
    np.testing.assert_array_equal(_constant_pad(x, pads, value),
                                  np.pad(x, pads, constant_values=value))


@pytest.mark.parametrize("keep", [True, False])
def test_mean_fast_path_matches_numpy(keep):
    """A squeeze-excite block's spatial Mean (and other float means): one node asked for
    several axis values and ranks keeps each apart (the parsed axes are cached per node)."""
    from tfg.graphdef.graph import Graph
    from tfg.kernels.context import KernelContext
    from tfg.kernels.registry import get_kernel
    ctx = KernelContext(Graph().add_node("m", "Mean"), {"keep_dims": keep})
    fn = get_kernel("Mean").fn
    for shape, axes in [((2, 6, 6, 24), [1, 2]), ((2, 6, 6, 24), [-1]), ((3, 4), [0, 1]),
                        ((5,), [0]), ((2, 3), []), ((2, 6, 6, 24), [1, 2])]:
        for dtype in (np.float32, np.float64):
            x = rng.standard_normal(shape).astype(dtype)
            got = np.asarray(fn(ctx, x, np.array(axes, np.int32)))
            want = np.mean(x, axis=tuple(axes), keepdims=keep, dtype=dtype) if axes else x
            assert got.dtype == dtype and got.shape == np.shape(want)
            np.testing.assert_allclose(got, want, rtol=1e-6)
