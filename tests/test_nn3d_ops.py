"""Conv3D and its backprops, MaxPool3D/AvgPool3D and their gradients, LRN/LRNGrad,
MaxPoolWithArgmax/MaxPoolGradWithArgmax and ExtractImagePatches against TensorFlow
(tests/fixtures/nn3d, made by tools/gen_nn3d_fixtures.py with TensorFlow's stock CPU kernels):
TensorFlow's graphs run as they are, tfg's gradient of each against tf.gradients, a few
gradients by finite differences, shape inference, the memory guard on shapes read from
values, TensorFlow's CPU refusals, and the CLI end to end."""
import numpy as np
import pytest

from conftest import FIXTURES
from helpers import numeric_gradient, tfg_cli
from tfg.errors import TfgError
from tfg.executor.session import Session
from tfg.graphdef.attrs import Shape
from tfg.graphdef.graph import Graph
from tfg.graphdef.infer import output_shapes
from tfg.graphdef.io import load, save
from tfg.kernels import conv3d_ops
from tfg.passes.grad import grad
from tfg.schemas.dtypes import DType
from tfg.schemas.ops.registry import get_op

DIR = FIXTURES / "nn3d"
FIX = np.load(DIR / "nn3d.npz")
CASES = sorted({k.split("/")[0] for k in FIX.files})
GRAD_CASES = [c for c in CASES if any(k.startswith(f"{c}/d") for k in FIX.files)]
F32 = DType.FLOAT


def _feeds(case):
    prefix = f"{case}/feed/"
    return {k[len(prefix):] + ":0": FIX[k] for k in FIX.files if k.startswith(prefix)}


def _tolerance(dtype):
    if dtype == np.float16:
        return {"rtol": 2e-2, "atol": 2e-2}
    if dtype == np.float64:
        return {"rtol": 1e-12, "atol": 1e-12}
    return {"rtol": 2e-6, "atol": 2e-6}


def _assert_matches(got, want, what):
    assert got.dtype == want.dtype and got.shape == want.shape, \
        f"{what}: {got.dtype}{list(got.shape)} != TensorFlow's {want.dtype}{list(want.shape)}"
    if want.dtype.kind in "iub":
        np.testing.assert_array_equal(got, want, err_msg=what)
    else:
        np.testing.assert_allclose(got, want, err_msg=what, **_tolerance(want.dtype))


@pytest.mark.parametrize("case", CASES)
def test_forward_matches_tensorflow(case):
    fetches = sorted(k.split("/", 1)[1] for k in FIX.files if k.startswith(f"{case}/y:"))
    got = Session(load(DIR / f"{case}.pb")).run(fetches, _feeds(case))
    for name, value in zip(fetches, got):
        _assert_matches(np.asarray(value), FIX[f"{case}/{name}"], f"{case} {name}")


@pytest.mark.parametrize("case", GRAD_CASES)
def test_gradient_matches_tensorflow(case):
    """tfg's gradient pass on TensorFlow's forward graph against tf.gradients."""
    feeds = _feeds(case)
    xs = sorted(feeds)
    g2 = grad(load(DIR / f"{case}.pb"), ["loss:0"], xs)
    got = Session(g2).run([f"grad/{x.split(':')[0]}:0" for x in xs], feeds)
    for x, value in zip(xs, got):
        want = FIX[f"{case}/d{x.split(':')[0]}"]
        if want.dtype == np.float32:  # sums of many products: relative to the largest
            np.testing.assert_allclose(value, want, rtol=1e-5,
                                       atol=1e-5 * float(np.abs(want).max(initial=1)),
                                       err_msg=f"{case} d/d{x}")
            assert value.dtype == want.dtype and value.shape == want.shape
        else:
            _assert_matches(np.asarray(value), want, f"{case} d/d{x}")


@pytest.mark.parametrize("case", ["conv3d_same_strided", "conv3d_bpi_int64", "conv3d_bpf"])
def test_conv3d_in_slabs_of_one_output_plane(case, monkeypatch):
    """With a tiny SLAB_BYTES every output plane of every image is its own GEMM: the same
    values and gradients as TensorFlow's."""
    monkeypatch.setattr(conv3d_ops, "SLAB_BYTES", 1)
    test_forward_matches_tensorflow(case)
    test_gradient_matches_tensorflow(case)


def test_half_conv3d_backprops_keep_half():
    w, dy = np.ones((2, 2, 2, 1, 1), np.float16), np.ones((1, 2, 2, 2, 1), np.float16)
    dx = _run_op("Conv3DBackpropInputV2", [np.int32([1, 3, 3, 3, 1]), w, dy],
                 dict(CONV, padding="VALID"))
    assert dx.dtype == np.float16 and dx[0, 1, 1, 1, 0] == 8
    dw = _run_op("Conv3DBackpropFilterV2", [np.ones((1, 3, 3, 3, 1), np.float16),
                                            np.int32([2, 2, 2, 1, 1]), dy],
                 dict(CONV, padding="VALID"))
    assert dw.dtype == np.float16 and np.all(dw == 8)


def test_max_pool3d_grad_gives_every_tied_maximum_the_gradient():
    """TensorFlow's CPU MaxPool3DGrad compares each window with its max: with ties, every
    equal input gets the window's gradient (MaxPoolWithArgmax picks only the first)."""
    x = FIX["maxpool3d_ties/feed/x"]
    dx = FIX["maxpool3d_ties/dx"]
    assert len(np.unique(x)) <= 3 and np.count_nonzero(dx) > dx.size // 4
    test_gradient_matches_tensorflow("maxpool3d_ties")


# --- small graphs of one op ------------------------------------------------------------------
class G:
    """A tiny graph writer: each call adds one node and returns its output 0, its type attrs
    (T, Tshape, ...) taken from its inputs' dtypes."""

    def __init__(self):
        self.g, self.n, self.dtypes = Graph(), 0, {}

    def node(self, op, inputs, attrs, name=None, dtype=None):
        self.n += 1
        name = name or f"n{self.n}"
        attrs = dict(attrs)
        for arg, t in zip(get_op(op).inputs, inputs):
            if arg.type_attr and t in self.dtypes:
                attrs.setdefault(arg.type_attr, self.dtypes[t])
        self.g.add_node(name, op, inputs, attrs)
        out = f"{name}:0"
        self.dtypes[out] = dtype or attrs.get("T") or (self.dtypes.get(inputs[0]) if inputs
                                                         else None)
        return out

    def const(self, v):
        v = np.asarray(v)
        dt = DType.from_numpy(v.dtype)
        return self.node("Const", [], {"dtype": dt, "value": v}, dtype=dt)

    def ph(self, name, dtype=F32, shape=None):
        attrs = {"dtype": dtype}
        if shape is not None:
            attrs["shape"] = Shape(tuple(shape))
        return self.node("Placeholder", [], attrs, name=name, dtype=dtype)


def _run_op(op, inputs, attrs, fetch="op:0", **session):
    b = G()
    names = [b.const(v) for v in inputs]
    b.node(op, names, attrs, name="op")
    return Session(b.g, **session).run([fetch], {})[0]


CONV = {"strides": [1, 1, 1, 1, 1], "padding": "SAME"}
POOL = {"ksize": [1, 2, 2, 2, 1], "strides": [1, 1, 1, 1, 1], "padding": "VALID"}


def test_conv3d_gradient_by_finite_differences():
    """float64 Conv3D with SAME padding and strides: both gradients against central
    differences of the forward graph."""
    rng = np.random.default_rng(0)
    x, w = rng.standard_normal((1, 3, 4, 5, 2)), rng.standard_normal((2, 3, 2, 2, 3))
    b = G()
    px, pw = b.ph("x", DType.DOUBLE), b.ph("w", DType.DOUBLE)
    y = b.node("Conv3D", [px, pw], {"strides": [1, 2, 1, 2, 1], "padding": "SAME"})
    weights = rng.uniform(0.5, 1.5, (1, 2, 4, 3, 3))
    loss = b.node("Sum", [b.node("Mul", [y, b.const(weights)], {}),
                          b.const(np.arange(5, dtype=np.int32))], {}, name="loss")
    feeds = {"x:0": x, "w:0": w}
    dx, dw = Session(grad(b.g, [loss], ["x:0", "w:0"])).run(["grad/x:0", "grad/w:0"], feeds)
    fwd = Session(b.g)
    nx = numeric_gradient(lambda v: float(fwd.run([loss], {"x:0": v, "w:0": w})[0]), x, 1e-6)
    nw = numeric_gradient(lambda v: float(fwd.run([loss], {"x:0": x, "w:0": v})[0]), w, 1e-6)
    np.testing.assert_allclose(dx, nx, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(dw, nw, rtol=1e-6, atol=1e-6)


def test_extract_image_patches_gradient_by_finite_differences():
    """Overlapping, dilated SAME patches: a pixel copied into several patches sums their
    gradients, padding gets none."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 5, 4, 2))
    b = G()
    px = b.ph("x", DType.DOUBLE)
    attrs = {"ksizes": [1, 3, 2, 1], "strides": [1, 1, 2, 1], "rates": [1, 2, 1, 1],
             "padding": "SAME"}
    y = b.node("ExtractImagePatches", [px], attrs)
    weights = rng.uniform(0.5, 1.5, (2, 5, 2, 12))
    loss = b.node("Sum", [b.node("Mul", [y, b.const(weights)], {}),
                          b.const(np.arange(4, dtype=np.int32))], {}, name="loss")
    dx = Session(grad(b.g, [loss], ["x:0"])).run(["grad/x:0"], {"x:0": x})[0]
    fwd = Session(b.g)
    numeric = numeric_gradient(lambda v: float(fwd.run([loss], {"x:0": v})[0]), x, 1e-6)
    np.testing.assert_allclose(dx, numeric, rtol=1e-7, atol=1e-7)


def test_second_order_gradients_of_the_conv3d_backprops_and_avg_pool3d_grad():
    """Conv3DBackpropInputV2 / FilterV2 / AvgPool3DGrad are linear in their float inputs:
    the gradient of sum(w * op(a, b)) w.r.t. each is the adjoint, checked numerically."""
    rng = np.random.default_rng(2)
    cases = [
        ("Conv3DBackpropInputV2", [np.int32([1, 3, 4, 4, 2]), (2, 2, 2, 2, 3), (1, 2, 2, 4, 3)],
         dict(CONV, strides=[1, 2, 2, 1, 1])),
        ("Conv3DBackpropFilterV2", [(1, 3, 4, 4, 2), np.int32([2, 2, 2, 2, 3]), (1, 3, 4, 4, 3)],
         CONV),
        ("AvgPool3DGrad", [np.int32([1, 3, 4, 4, 2]), (1, 2, 3, 3, 2)], POOL),
    ]
    for op, specs, attrs in cases:
        b = G()
        names, feeds = [], {}
        for i, spec in enumerate(specs):
            if isinstance(spec, tuple):
                feeds[f"p{i}:0"] = rng.standard_normal(spec).astype(np.float32)
                names.append(b.ph(f"p{i}"))
            else:
                names.append(b.const(spec))
        y = b.node(op, names, attrs)
        out = Session(b.g).run([y], feeds)[0]
        loss = b.node("Sum", [b.node("Mul", [y, b.const(rng.uniform(0.5, 1.5, out.shape)
                                                          .astype(np.float32))], {}),
                              b.const(np.arange(5, dtype=np.int32))], {}, name="loss")
        xs = sorted(feeds)
        got = Session(grad(b.g, [loss], xs)).run([f"grad/{x[:-2]}:0" for x in xs], feeds)
        fwd = Session(b.g)
        for x, g in zip(xs, got):
            def f(v, x=x):
                return float(fwd.run([loss], dict(feeds, **{x: v.astype(np.float32)}))[0])
            numeric = numeric_gradient(f, feeds[x].astype(np.float64), 1e-2)
            np.testing.assert_allclose(g, numeric, rtol=2e-3, atol=2e-3, err_msg=f"{op} {x}")


def test_lrn_grad_is_lrns_gradient_by_finite_differences():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 2, 2, 6)).astype(np.float32)
    b = G()
    px = b.ph("x")
    y = b.node("LRN", [px], {"depth_radius": 2, "bias": 1.5, "alpha": 0.4, "beta": 0.75})
    weights = rng.uniform(0.5, 1.5, x.shape).astype(np.float32)
    loss = b.node("Sum", [b.node("Mul", [y, b.const(weights)], {}),
                          b.const(np.arange(4, dtype=np.int32))], {}, name="loss")
    dx = Session(grad(b.g, [loss], ["x:0"])).run(["grad/x:0"], {"x:0": x})[0]
    fwd = Session(b.g)
    numeric = numeric_gradient(
        lambda v: float(fwd.run([loss], {"x:0": v.astype(np.float32)})[0]),
        x.astype(np.float64), 1e-2)
    np.testing.assert_allclose(dx, numeric, rtol=3e-3, atol=3e-3)


def test_argmax_indices_follow_tensorflows_formula():
    """((b*H + y)*W + x)*C + c with the batch, (y*W + x)*C + c without; the first maximum."""
    x = np.zeros((2, 2, 3, 2), np.float32)
    x[1, 1, 2, 1] = 5  # the only max of image 1's window, channel 1
    attrs = {"ksize": [1, 2, 3, 1], "strides": [1, 2, 3, 1], "padding": "VALID"}
    with_batch = _run_op("MaxPoolWithArgmax", [x], dict(attrs, include_batch_in_index=True),
                         "op:1")
    without = _run_op("MaxPoolWithArgmax", [x], attrs, "op:1")
    assert with_batch.dtype == np.int64
    assert with_batch.reshape(-1).tolist() == [0, 1, 12, ((1 * 2 + 1) * 3 + 2) * 2 + 1]
    assert without.reshape(-1).tolist() == [0, 1, 0, (1 * 3 + 2) * 2 + 1]


def test_max_pool_grad_with_argmax_scatters_by_the_indices():
    x = np.arange(24, dtype=np.float32).reshape(1, 3, 4, 2)
    argmax = np.int64([[[[23, 0]]]])
    dy = np.float32([[[[2.0, 3.0]]]])
    attrs = {"ksize": [1, 3, 4, 1], "strides": [1, 1, 1, 1], "padding": "VALID"}
    dx = _run_op("MaxPoolGradWithArgmax", [x, dy, argmax], attrs)
    assert dx.reshape(-1)[23] == 2 and dx.reshape(-1)[0] == 3 and dx.sum() == 5


# --- shapes, memory guard, errors ---------------------------------------------------------------
def test_shape_inference():
    b = G()
    x5 = b.ph("x5", shape=(2, 9, 8, 7, 3))
    b.node("Conv3D", [x5, b.ph("w", shape=(3, 2, 2, 3, 5))],
           {"strides": [1, 2, 2, 3, 1], "padding": "SAME"}, name="conv")
    b.node("MaxPool3D", [x5], {"ksize": [1, 3, 3, 3, 1], "strides": [1, 2, 2, 2, 1],
                               "padding": "VALID"}, name="pool")
    x4 = b.ph("x4", shape=(2, 7, 9, 3))
    b.node("MaxPoolWithArgmax", [x4], {"ksize": [1, 2, 2, 1], "strides": [1, 2, 2, 1],
                                       "padding": "SAME"}, name="argmax")
    b.node("ExtractImagePatches", [x4], {"ksizes": [1, 3, 2, 1], "strides": [1, 2, 1, 1],
                                         "rates": [1, 2, 1, 1], "padding": "VALID"},
           name="patches")
    b.node("LRN", [x4], {}, name="lrn")
    b.node("Conv3DBackpropInputV2", [b.const(np.int64([2, 9, 8, 7, 3])), "w:0", "conv:0"],
           CONV, name="bpi")
    assert output_shapes(b.g, "conv") == [(2, 5, 4, 3, 5)]
    assert output_shapes(b.g, "pool") == [(2, 4, 3, 3, 3)]
    assert output_shapes(b.g, "argmax") == [(2, 4, 5, 3), (2, 4, 5, 3)]
    assert output_shapes(b.g, "patches") == [(2, 2, 8, 18)]
    assert output_shapes(b.g, "lrn") == [(2, 7, 9, 3)]
    assert output_shapes(b.g, "bpi") == [(2, 9, 8, 7, 3)]


def test_a_window_larger_than_a_valid_input_gives_an_empty_output():
    """As TensorFlow's kernels (its graph construction refuses such a window)."""
    x = np.ones((1, 4, 5, 6, 2), np.float32)
    assert _run_op("MaxPool3D", [x], dict(POOL, ksize=[1, 5, 2, 2, 1])).shape == (1, 0, 4, 5, 2)
    assert _run_op("ExtractImagePatches", [x[:, 0]],
                   {"ksizes": [1, 6, 2, 1], "strides": [1, 1, 1, 1], "rates": [1, 1, 1, 1],
                    "padding": "VALID"}).shape == (1, 0, 5, 24)


@pytest.mark.parametrize("op, sizes_at, inputs", [
    ("Conv3DBackpropInputV2", 0, [None, np.zeros((1, 1, 1, 64, 1), np.float32),
                                  np.zeros((1, 1000, 1000, 1000, 1), np.float32)]),
    ("AvgPool3DGrad", 0, [None, np.zeros((1, 1000, 1000, 1000, 1), np.float32)]),
])
def test_sizes_read_from_values_are_guarded(op, sizes_at, inputs):
    """A hostile input_sizes fed at run time: refused before the kernel allocates."""
    b = G()
    names = [b.ph("sizes", DType.INT32) if v is None else b.const(v[:, :1, :1, :1])
             for v in inputs]
    attrs = dict(CONV) if op.startswith("Conv") else dict(POOL, ksize=[1, 1, 1, 1, 1])
    b.node(op, names, attrs, name="op")
    feeds = {"sizes:0": np.int32([1, 100000, 100000, 1000, 64])}
    with pytest.raises(TfgError, match="would allocate"):
        Session(b.g, max_memory="1M").run(["op:0"], feeds)


@pytest.mark.parametrize("op, inputs, attrs, message", [
    ("Conv3D", [np.zeros((1, 2, 4, 4, 4), np.float32), np.zeros((1, 1, 1, 2, 3), np.float32)],
     dict(CONV, data_format="NCDHW"), "only supports the NHWC tensor format"),
    ("Conv3D", [np.zeros((1, 4, 4, 4, 2), np.float32), np.zeros((2, 2, 2, 2, 3), np.float32)],
     dict(CONV, dilations=[1, 2, 1, 1, 1]), "only supports dilated rates of 1"),
    ("Conv3D", [np.zeros((1, 4, 4, 4, 2), np.float32), np.zeros((2, 2, 2, 2, 3), np.float32)],
     dict(CONV, strides=[2, 1, 1, 1, 1]), "strides in the batch and depth"),
    ("Conv3D", [np.zeros((1, 4, 4, 4, 4), np.float32), np.zeros((2, 2, 2, 2, 3), np.float32)],
     CONV, r"Number of channels in filter \(2\) must match"),
    ("Conv3D", [np.zeros((1, 4, 4, 4, 2), np.int32), np.zeros((2, 2, 2, 2, 3), np.int32)],
     CONV, "one floating dtype"),
    ("Conv3DBackpropInputV2", [np.int32([1, 4, 4, 4, 2]), np.zeros((2, 2, 2, 2, 3), np.float32),
                               np.zeros((1, 3, 4, 4, 3), np.float32)],
     CONV, "does not match the computed output shape"),
    ("MaxPool3D", [np.zeros((1, 4, 4, 4, 2), np.float32)], dict(POOL, data_format="NCDHW"),
     "only supports NDHWC"),
    ("MaxPool3D", [np.zeros((1, 4, 4, 4, 2), np.float32)], dict(POOL, ksize=[1, 2, 2, 2, 2]),
     "not yet supported on the batch or depth"),
    ("AvgPool3D", [np.zeros((1, 4, 4, 4, 2), np.float64)], POOL, "no CPU kernel for dtype"),
    ("LRN", [np.zeros((1, 2, 2, 3), np.float32)], {"depth_radius": -1},
     "depth_radius = -1 is out of range"),
    ("LRN", [np.zeros((2, 2, 3), np.float32)], {}, "must be 4-dimensional"),
    ("MaxPoolWithArgmax", [np.zeros((1, 4, 4, 2), np.float32)],
     {"ksize": [2, 2, 2, 1], "strides": [1, 1, 1, 1], "padding": "VALID"},
     "not yet supported on the batch dimension"),
    ("MaxPoolGradWithArgmax", [np.zeros((1, 2, 2, 1), np.float32), np.ones((1, 1, 1, 1),
                                                                           np.float32),
                               np.int64([[[[4]]]])],
     {"ksize": [1, 2, 2, 1], "strides": [1, 1, 1, 1], "padding": "VALID"},
     "Invalid output gradient index"),
    ("MaxPoolGradWithArgmax", [np.zeros((1, 2, 2, 1), np.float32), np.ones((1, 1, 1, 1),
                                                                           np.float32),
                               np.int32([[[[0]]]])],
     {"ksize": [1, 2, 2, 1], "strides": [1, 1, 1, 1], "padding": "VALID"},
     "argmax of dtype int32"),
    ("MaxPoolGradWithArgmax", [np.zeros((1, 2, 2, 1), np.float32), np.ones((1, 2, 1, 1),
                                                                           np.float32),
                               np.int64([[[[0]], [[0]]]])],
     {"ksize": [1, 2, 2, 1], "strides": [1, 1, 1, 1], "padding": "VALID"},
     r"Expected grad shape to be \[1,1,1,1\], but got \[1,2,1,1\]"),
    ("ExtractImagePatches", [np.zeros((1, 4, 4, 2), bool)],
     {"ksizes": [1, 2, 2, 1], "strides": [1, 1, 1, 1], "rates": [1, 1, 1, 1],
      "padding": "VALID"}, "no CPU kernel for dtype bool"),
    ("ExtractImagePatches", [np.zeros((1, 4, 4, 2), np.float32)],
     {"ksizes": [1, 2, 2, 2], "strides": [1, 1, 1, 1], "rates": [1, 1, 1, 1],
      "padding": "VALID"}, "Only support ksizes across space"),
    ("ExtractImagePatches", [np.zeros((1, 4, 4, 2), np.float32)],
     {"ksizes": [1, 2, 2, 1], "strides": [1, 1, 1, 1], "rates": [1, 0, 1, 1],
      "padding": "VALID"}, "out of range|must be >= 1"),
])
def test_tensorflows_cpu_refusals(op, inputs, attrs, message):
    with pytest.raises(TfgError, match=message):
        _run_op(op, inputs, attrs)


def test_gradients_tensorflow_lacks_are_refused():
    """LRNGrad has no gradient in TensorFlow; MaxPool3DGrad's and MaxPoolGradWithArgmax's
    need ops tfg does not have (MaxPool3DGradGrad, MaxPoolGradGradWithArgmax)."""
    b = G()
    px = b.ph("x", shape=(1, 2, 2, 3))
    y = b.node("LRNGrad", [px, px, px], {})
    loss = b.node("Sum", [y, b.const(np.arange(4, dtype=np.int32))], {}, name="loss")
    with pytest.raises(TfgError, match="LRNGrad"):
        grad(b.g, [loss], ["x:0"])


# --- the CLI ------------------------------------------------------------------------------------
def test_cli_runs_a_tensorflow_graph_and_refuses_bad_input(tmp_path):
    feeds = tmp_path / "feeds.npz"
    np.savez(feeds, **{k[:-2]: v for k, v in _feeds("conv3d_same_strided").items()})
    out = tmp_path / "out.npz"
    tfg_cli("run", DIR / "conv3d_same_strided.pb", "--feeds", feeds, "--fetch", "y", "-o", out)
    np.testing.assert_allclose(np.load(out)["y"], FIX["conv3d_same_strided/y:0"],
                               rtol=2e-6, atol=2e-6)

    b = G()
    b.node("MaxPool3D", [b.ph("x", shape=(1, 4, 4, 4, 2))], dict(POOL, data_format="NCDHW"),
           name="y")
    save(b.g, tmp_path / "bad.pb")
    np.savez(feeds, x=np.zeros((1, 4, 4, 4, 2), np.float32))
    p = tfg_cli("run", tmp_path / "bad.pb", "--feeds", feeds, "--fetch", "y", "-o", out,
                check=False)
    lines = p.stderr.decode().strip().splitlines()
    # The kernel refuses NCDHW, and the shape function its window over the channels: a graph
    # TensorFlow's importer refuses, so bad input: exit 2 (docs/run.md), one line.
    assert p.returncode == 2 and len(lines) == 1, p.stderr.decode()
    assert "'y' (MaxPool3D)" in lines[0] and "depth dimension" in lines[0]

    # A feed that does not fit the placeholder is bad input: exit 2, one line.
    np.savez(feeds, x=np.zeros((1, 4, 4, 2), np.float32),
             w=FIX["conv3d_same_strided/feed/w"])
    p = tfg_cli("run", DIR / "conv3d_same_strided.pb", "--feeds", feeds, "--fetch", "y",
                "-o", out, check=False)
    lines = p.stderr.decode().strip().splitlines()
    assert p.returncode == 2 and len(lines) == 1, p.stderr.decode()
