"""Conv2D on oneDNN (tfg/kernels/onednn.py), where the optional onednn-cpu-gomp wheel is
installed: TensorFlow's own values on both backends; the definition over strides, dilations,
paddings (EXPLICIT ones wider than the filter too) and both layouts, with the output bounds
checked; the bias fused and the activation kept tfg's (NaN stays NaN); fed filters that
change between calls; one kernel per OpenMP team size; and the ways it turns itself off (an
error, TFG_ONEDNN=0, no library, float64, fork()), each falling back to the numpy kernels."""
import os

import numpy as np
import pytest

from test_conv_fast_paths import _attrs, reference
from test_kernels_fixtures import CASES as TF_CASES
from test_kernels_fixtures import DIR as TF_DIR
from test_kernels_fixtures import make_ctx
from tfg.graphdef import io
from tfg.graphdef.graph import Graph
from tfg.kernels import get_kernel, onednn
from tfg.kernels.conv_geom import Geom
from tfg.kernels.context import KernelContext

rng = np.random.default_rng(17)
needs_onednn = pytest.mark.skipif(not onednn.wanted(),
                                  reason="oneDNN not installed (tfg[perf])")


@pytest.fixture
def kept_state():
    """Tests that turn oneDNN off put its state back after."""
    saved = dict(onednn._state)
    yield
    onednn._state.clear()
    onednn._state.update(saved)


def geom(x_shape, k, strides, dilations, padding, explicit, fmt):
    h, w = x_shape[2:] if fmt == b"NCHW" else x_shape[1:3]
    return Geom(_attrs(strides, dilations, padding, explicit, fmt), h, w, *k)


def conv_node(op="Conv2D", **attrs):
    return KernelContext(Graph().add_node("n", op), attrs)


TF_CONV = [c for c in TF_CASES if c["name"].startswith(("conv2d_", "depthwise_"))]


@pytest.mark.parametrize("backend", ["numpy", "onednn"])
@pytest.mark.parametrize("case", TF_CONV, ids=[c["name"] for c in TF_CONV])
def test_convolutions_match_tensorflow_on_both_backends(case, backend, monkeypatch):
    if backend == "onednn" and not onednn.wanted():
        pytest.skip("oneDNN not installed (tfg[perf])")
    monkeypatch.setenv("TFG_ONEDNN", "1" if backend == "onednn" else "0")
    graph = io.load(str(TF_DIR / "kernels.pb"))
    with np.load(TF_DIR / "expected.npz") as f:
        want = f[f"{case['name']}:0"]
    node = graph[case["name"]]
    inputs = [get_kernel(graph[r.node].op).fn(make_ctx(graph[r.node])) for r in node.data_inputs]
    ctx = make_ctx(node)
    for _ in range(2):  # the first call prepares the path, the second runs it
        got = get_kernel(node.op).fn(ctx, *inputs)
        assert got.shape == want.shape and got.dtype == want.dtype
        np.testing.assert_allclose(got, want, rtol=case["rtol"], atol=case["atol"])
    assert _on_onednn(ctx) == (backend == "onednn")


def _on_onednn(ctx):
    """Whether a Conv2D or DepthwiseConv2dNative node's prepared run is oneDNN's."""
    for key, run in ctx.cache.items():
        if isinstance(key, tuple) and (len(key) == 4 or key[0] == "dw_run"):
            return isinstance(run, onednn.Prepared)
    return False


GEOMETRIES = [  # x (NHWC), filter, strides, dilations, padding, explicit
    ((2, 9, 8, 5), (3, 3, 5, 7), (1, 1), (1, 1), "SAME", None),
    ((2, 9, 8, 5), (3, 2, 5, 7), (2, 3), (1, 1), "SAME", None),
    ((1, 11, 10, 3), (5, 5, 3, 9), (2, 2), (2, 1), "VALID", None),
    ((2, 7, 6, 16), (1, 1, 16, 33), (1, 1), (1, 1), "VALID", None),
    ((2, 7, 6, 16), (1, 1, 16, 8), (2, 2), (1, 1), "SAME", None),
    ((1, 6, 7, 4), (3, 3, 4, 5), (1, 2), (1, 1), "EXPLICIT", ((1, 2), (0, 3))),
    ((1, 4, 4, 3), (3, 3, 3, 4), (1, 1), (1, 1), "EXPLICIT", ((5, 6), (6, 4))),  # > filter
    ((1, 1, 1, 8), (3, 3, 8, 2), (1, 1), (1, 1), "SAME", None),
    ((3, 2, 9, 1), (1, 7, 1, 1), (1, 1), (1, 2), "SAME", None),
]


@needs_onednn
@pytest.mark.parametrize("fmt", [b"NHWC", b"NCHW"])
@pytest.mark.parametrize("case", GEOMETRIES)
def test_convolution_matches_the_definition_within_its_output(case, fmt):
    """Called on buffers of our own, with a guard after the output: nothing written past it."""
    xs, ks, strides, dilations, padding, explicit = case
    x = rng.standard_normal(xs).astype(np.float32)
    w = rng.standard_normal(ks).astype(np.float32)
    b = rng.standard_normal(ks[3]).astype(np.float32)
    xin = np.ascontiguousarray(x.transpose(0, 3, 1, 2)) if fmt == b"NCHW" else x
    g = geom(xin.shape, ks[:2], strides, dilations, padding, explicit, fmt)
    conv = onednn.convolution(xin.shape, ks, g, fmt == b"NCHW", bias=True)
    want = reference(x.astype(np.float64), w.astype(np.float64), strides, dilations, padding,
                     explicit or ((0, 0), (0, 0))) + b
    size = int(np.prod(conv.out_shape))
    guarded = np.full(size + 4096, 7.0, np.float32)
    kernel = conv._kernel(None)
    conv._filter(kernel, w, None)
    for memory, address in [(conv.m_src, xin.ctypes.data), (conv.m_dst, guarded.ctypes.data),
                            (conv.m_bias, b.ctypes.data),
                            (kernel.m_scratch, onednn._scratch(kernel.scratch_size))]:
        conv.lib.set_handle(memory, address)
    conv.lib.execute(kernel.prim, kernel.args, None)
    assert (guarded[size:] == 7.0).all()
    got = guarded[:size].reshape(conv.out_shape)
    got = got.transpose(0, 2, 3, 1) if fmt == b"NCHW" else got
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(conv(xin, w, b), guarded[:size].reshape(conv.out_shape))


DEPTHWISE = [  # x (NHWC), filter [KH, KW, C, M], strides, dilations, padding
    ((2, 9, 8, 5), (3, 3, 5, 1), (1, 1), (1, 1), "SAME"),
    ((2, 9, 8, 5), (3, 3, 5, 3), (2, 2), (1, 1), "SAME"),
    ((1, 11, 10, 4), (5, 5, 4, 2), (2, 1), (2, 2), "VALID"),
    ((2, 3, 3, 96), (3, 3, 96, 1), (1, 1), (1, 1), "SAME"),
    ((1, 12, 12, 17), (7, 7, 17, 1), (2, 2), (1, 1), "SAME"),
]


@needs_onednn
@pytest.mark.parametrize("fmt", [b"NHWC", b"NCHW"])
@pytest.mark.parametrize("case", DEPTHWISE)
def test_depthwise_on_onednn_matches_the_definition(case, fmt):
    xs, ws, strides, dilations, padding = case
    x = rng.standard_normal(xs).astype(np.float32)
    w = rng.standard_normal(ws).astype(np.float32)
    want = reference(x.astype(np.float64), w.astype(np.float64), strides, dilations, padding,
                     depthwise=True)
    xin = np.ascontiguousarray(x.transpose(0, 3, 1, 2)) if fmt == b"NCHW" else x
    ctx = conv_node("DepthwiseConv2dNative", **_attrs(strides, dilations, padding, None, fmt))
    for _ in range(2):
        got = get_kernel("DepthwiseConv2dNative").fn(ctx, xin, w)
        got = got.transpose(0, 2, 3, 1) if fmt == b"NCHW" else got
        assert got.shape == want.shape and got.dtype == np.float32
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    assert _on_onednn(ctx)


@needs_onednn
@pytest.mark.parametrize("act", ["Relu", "Relu6", "Identity", "Sigmoid"])
def test_fused_conv_adds_the_bias_in_onednn_and_keeps_tfgs_activation(act, monkeypatch):
    x = rng.standard_normal((2, 8, 8, 6)).astype(np.float32)
    x[0, 3, 3, :] = np.nan  # NaN through a Relu stays NaN, as in TensorFlow
    w = rng.standard_normal((3, 3, 6, 5)).astype(np.float32)
    w.flags.writeable = False  # a graph constant
    b = rng.standard_normal(5).astype(np.float32)
    ops = ["BiasAdd"] + ([] if act == "Identity" else [act])
    attrs = dict(_attrs((1, 1), (1, 1), "SAME", None, b"NHWC"), num_args=1, fused_ops=ops)
    results = {}
    for backend in ("0", "1"):
        monkeypatch.setenv("TFG_ONEDNN", backend)
        ctx = conv_node("_FusedConv2D", **attrs)
        results[backend] = [get_kernel("_FusedConv2D").fn(ctx, x, w, b) for _ in range(3)]
        if backend == "1":
            assert isinstance(ctx.cache["chunked"][1].conv, onednn.Prepared)
    for numpy_y, onednn_y in zip(results["0"], results["1"]):
        assert np.isnan(onednn_y).any() == np.isnan(numpy_y).any()
        np.testing.assert_allclose(onednn_y, numpy_y, rtol=1e-5, atol=1e-5, equal_nan=True)


@needs_onednn
def test_a_fed_filter_is_reordered_at_every_call_a_constant_once(monkeypatch):
    x = rng.standard_normal((1, 6, 6, 4)).astype(np.float32)
    g = geom(x.shape, (3, 3), (1, 1), (1, 1), "SAME", None, b"NHWC")
    conv = onednn.convolution(x.shape, (3, 3, 4, 3), g)
    reorders = []
    execute = conv.lib.execute
    monkeypatch.setattr(conv.lib, "execute", lambda prim, args, threads: (
        reorders.append(prim) if args is not conv._kernel(threads).args else None,
        execute(prim, args, threads)))
    fed = rng.standard_normal((3, 3, 4, 3)).astype(np.float32)
    first = conv(x, fed)
    fed *= 2  # the same array, new values: a variable after an update
    np.testing.assert_allclose(conv(x, fed), 2 * first, rtol=1e-5, atol=1e-5)
    assert len(reorders) == 2
    constant = fed.copy()
    constant.flags.writeable = False
    for _ in range(3):
        np.testing.assert_allclose(conv(x, constant), 2 * first, rtol=1e-5, atol=1e-5)
    assert len(reorders) == 3


@needs_onednn
def test_each_team_size_gets_its_own_kernel_with_the_same_values():
    x = rng.standard_normal((2, 12, 12, 32)).astype(np.float32)
    w = rng.standard_normal((3, 3, 32, 16)).astype(np.float32)
    g = geom(x.shape, (3, 3), (1, 1), (1, 1), "SAME", None, b"NHWC")
    conv = onednn.convolution(x.shape, w.shape, g)
    try:
        values = {}
        for n in (1, 2, 1):
            onednn.set_threads(n)
            values[n] = conv(x, w)
        assert {1, 2} <= set(conv.kernels)
        np.testing.assert_allclose(values[1], values[2], rtol=1e-5, atol=1e-5)
        one, two = conv.kernels[1].layout, conv.kernels[2].layout
        if conv.lib.dll.dnnl_memory_desc_equal(one.w_md, two.w_md):
            assert one is two and conv.layouts == [one]  # the filter kept once
    finally:
        onednn.set_threads(None)


@needs_onednn
@pytest.mark.parametrize("depthwise", [False, True])
def test_a_tiny_convolution_runs_on_one_thread_whatever_the_team(depthwise):
    """Under SERIAL_MACS a second thread only waits at the team's barrier (ConvLSTM's 2x2
    maps): the one-thread kernel runs, and no two-thread kernel is made."""
    x = rng.standard_normal((2, 2, 2, 2)).astype(np.float32)
    w = rng.standard_normal((3, 3, 2, 1 if depthwise else 2)).astype(np.float32)
    w.flags.writeable = False  # a graph constant's filter: what a bound call takes
    g = geom(x.shape, (3, 3), (1, 1), (1, 1), "SAME", None, b"NHWC")
    try:
        onednn.set_threads(2)
        conv = onednn.convolution(x.shape, w.shape, g, depthwise=depthwise)
        assert conv.serial and conv.team() == 1
        y = conv(x, w)
        bound = conv.bound(w)
        np.testing.assert_array_equal(bound(x), y)
        assert set(conv.kernels) == {1}
        big = onednn.convolution((2, 12, 12, 32), (3, 3, 32, 16), geom(
            (2, 12, 12, 32), (3, 3), (1, 1), (1, 1), "SAME", None, b"NHWC"))
        assert not big.serial and big.team() == 2
    finally:
        onednn.set_threads(None)


@needs_onednn
def test_a_failing_call_turns_onednn_off_with_one_line(kept_state, monkeypatch, capsys):
    x = rng.standard_normal((1, 5, 5, 3)).astype(np.float32)
    w = rng.standard_normal((3, 3, 3, 2)).astype(np.float32)
    ctx = conv_node(**_attrs((1, 1), (1, 1), "SAME", None, b"NHWC"))
    first = get_kernel("Conv2D").fn(ctx, x, w)

    def fails(*_):
        raise onednn.OneDnnError("oneDNN execute failed with status 5")
    monkeypatch.setattr(onednn._state["lib"], "execute", fails)
    for _ in range(2):
        np.testing.assert_allclose(get_kernel("Conv2D").fn(ctx, x, w), first,
                                   rtol=1e-5, atol=1e-5)
    err = capsys.readouterr().err
    assert err.count("oneDNN is off") == 1 and "status 5" in err
    assert not onednn.wanted() and onednn.convolution(x.shape, w.shape, ctx.cache[
        ("geom", 5, 5, 3, 3, None, None)]) is None


def test_off_by_environment_by_dtype_and_without_a_library(kept_state, monkeypatch, capsys):
    g = geom((1, 5, 5, 3), (3, 3), (1, 1), (1, 1), "SAME", None, b"NHWC")
    fallback = object()
    assert onednn.prepared((1, 5, 5, 3), (3, 3, 3, 2), g, False, np.float64,
                           fallback) is fallback
    monkeypatch.setenv("TFG_ONEDNN", "0")
    assert onednn.convolution((1, 5, 5, 3), (3, 3, 3, 2), g) is None
    monkeypatch.delenv("TFG_ONEDNN")
    onednn._state.clear()
    monkeypatch.setattr(onednn, "library_candidates", lambda: ["/nonexistent/libdnnl.so.3"])
    assert not onednn.wanted()
    assert onednn.prepared((1, 5, 5, 3), (3, 3, 3, 2), g, False, np.float32,
                           fallback) is fallback
    assert capsys.readouterr().err == ""  # not installed is not an error


@needs_onednn
def test_a_forked_child_runs_the_numpy_kernels():
    """GNU OpenMP hangs in a forked child whose parent ran a parallel region."""
    x = rng.standard_normal((2, 12, 12, 16)).astype(np.float32)
    w = rng.standard_normal((3, 3, 16, 16)).astype(np.float32)
    g = geom(x.shape, (3, 3), (1, 1), (1, 1), "SAME", None, b"NHWC")
    run = onednn.Prepared(onednn.convolution(x.shape, w.shape, g), lambda x, w: "numpy")
    onednn.set_threads(2)
    try:
        assert isinstance(run(x, w), np.ndarray)
    finally:
        onednn.set_threads(None)
    read, write = os.pipe()
    pid = os.fork()
    if pid == 0:
        try:
            ok = run(x, w) == "numpy" and onednn.convolution(x.shape, w.shape, g) is None
            os.write(write, b"1" if ok else b"0")
        finally:
            os._exit(0)
    os.close(write)
    _, status = os.waitpid(pid, 0)
    assert os.read(read, 1) == b"1" and status == 0
    assert isinstance(run(x, w), np.ndarray)  # the parent keeps oneDNN


@pytest.mark.parametrize("users", [{}, {"GOMP_SPINCOUNT": "5"}, {"OMP_WAIT_POLICY": "active"}])
def test_openmp_spins_briefly_unless_the_user_chose(users, kept_state, monkeypatch):
    """libgomp reads GOMP_SPINCOUNT as it loads: set then, and only then."""
    for k in ("GOMP_SPINCOUNT", "OMP_WAIT_POLICY"):
        monkeypatch.delenv(k, raising=False)
    for k, v in users.items():
        monkeypatch.setenv(k, v)
    seen = []

    class Library:
        def __init__(self, path):
            seen.append(os.environ.get("GOMP_SPINCOUNT"))

    monkeypatch.setattr(onednn, "_Library", Library)
    monkeypatch.setattr(onednn, "library_candidates", lambda: ["libdnnl.so.3"])
    onednn._state.clear()
    assert onednn.wanted()
    assert seen == [users.get("GOMP_SPINCOUNT", None if users else onednn.GOMP_SPIN)]
    assert os.environ.get("GOMP_SPINCOUNT") == users.get("GOMP_SPINCOUNT")


@needs_onednn
def test_handles_set_only_on_change_still_follow_every_array_and_bias_update():
    """A memory handle is set only when its address changes (onednn.Convolution._at): new
    inputs, a bias updated in place, a new bias, and a converted (float64) bias that is
    then changed all give the definition's values."""
    xs, ks = (2, 5, 5, 6), (1, 1, 6, 4)
    g = geom(xs, ks[:2], (1, 1), (1, 1), "SAME", None, b"NHWC")
    conv = onednn.convolution(xs, ks, g, bias=True)
    w = rng.standard_normal(ks).astype(np.float32)
    w.flags.writeable = False

    def want(x, b):
        return (x.astype(np.float64) @ w.reshape(6, 4).astype(np.float64)
                + np.asarray(b, np.float64))

    b = rng.standard_normal(4).astype(np.float32)
    for _ in range(3):
        x = rng.standard_normal(xs).astype(np.float32)
        np.testing.assert_allclose(conv(x, w, b), want(x, b), rtol=1e-5, atol=1e-5)
    b += 1  # the same array, new values: no new handle needed, the new values used
    np.testing.assert_allclose(conv(x, w, b), want(x, b), rtol=1e-5, atol=1e-5)
    b2 = b * 3
    np.testing.assert_allclose(conv(x, w, b2), want(x, b2), rtol=1e-5, atol=1e-5)
    b64 = rng.standard_normal(4)  # converted to a float32 copy at each call
    np.testing.assert_allclose(conv(x, w, b64), want(x, b64), rtol=1e-5, atol=1e-5)
    b64 += 5
    np.testing.assert_allclose(conv(x, w, b64), want(x, b64), rtol=1e-5, atol=1e-5)
    frozen = rng.standard_normal(ks).astype(np.float32)
    frozen.flags.writeable = False
    assert onednn._address(frozen) == frozen.ctypes.data
