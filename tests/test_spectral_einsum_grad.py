"""The gradients of RFFT2D, RFFT3D, IRFFT2D, IRFFT3D and of Einsum with a label repeated
within one operand (a diagonal, a trace), against TensorFlow's (tests/fixtures/
spectral_einsum_grad, made by tools/gen_spectral_einsum_grad_fixtures.py) and finite
differences; TensorFlow's own gradient graphs run in tfg (its Einsum gradient writes
"i->ii": a label repeated in the output, put on a diagonal of zeros).

TensorFlow has no gradient for RFFT3D / IRFFT3D: their fixtures are TensorFlow's gradients of
the same transform written as RFFT + FFT2D (IRFFT + IFFT2D).
"""
import json

import numpy as np
import pytest

from conftest import FIXTURES
from helpers import numeric_gradient, tfg_cli
from tfg.errors import TfgError
from tfg.executor.session import Session
from tfg.graphdef import io
from tfg.graphdef.attrs import Shape
from tfg.graphdef.graph import Graph
from tfg.passes.grad import grad
from tfg.schemas.dtypes import DType

DIR = FIXTURES / "spectral_einsum_grad"
CASES = json.loads((DIR / "cases.json").read_text())
TF_GRAPHS = [c for c in CASES if c["tf_grads"]]
D, C128, I32 = DType.DOUBLE, DType.COMPLEX128, DType.INT32
_CACHE = {}


def fixture():
    """(the cases' graph, the feeds and TensorFlow's gradients), loaded once."""
    if not _CACHE:
        _CACHE["graph"] = io.load(str(DIR / "graph.pb"))
        _CACHE["arrays"] = dict(np.load(DIR / "arrays.npz"))
    return _CACHE["graph"], _CACHE["arrays"]


def _feeds(case, arrays):
    return {f"{case['name']}/{a}:0": arrays[f"{case['name']}/{a}"] for a in case["args"]}


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_gradient_matches_tensorflow(case):
    graph, arrays = fixture()
    name = case["name"]
    xs = [f"{name}/{a}" for a in case["args"]]
    got = Session(grad(graph, [f"{name}/loss"], xs)).run([f"grad/{x}:0" for x in xs],
                                                         _feeds(case, arrays))
    for arg, value in zip(case["args"], got):
        want = arrays[f"{name}/grad_{arg}"]
        assert value.dtype == want.dtype and value.shape == want.shape, arg
        np.testing.assert_allclose(value, want, rtol=case["rtol"], atol=case["atol"],
                                   err_msg=f"{name}: d/d{arg}")


@pytest.mark.parametrize("case", TF_GRAPHS, ids=[c["name"] for c in TF_GRAPHS])
def test_tensorflows_gradient_graph_runs_in_tfg(case):
    graph, arrays = fixture()
    got = Session(graph).run(case["tf_grads"], _feeds(case, arrays))
    for arg, value in zip(case["args"], got):
        np.testing.assert_allclose(value, arrays[f"{case['name']}/grad_{arg}"],
                                   rtol=case["rtol"], atol=case["atol"], err_msg=arg)


def test_fixture_covers_every_op_and_dtype():
    names = {c["name"] for c in CASES}
    for op in ("RFFT2D", "IRFFT2D", "RFFT3D", "IRFFT3D"):
        for tag in ("float32", "float64"):
            assert any(n.startswith(op + "_") and n.endswith(tag) for n in names), (op, tag)
    assert {"Einsum_trace_complex64", "Einsum_double_trace_float64",
            "Einsum_broadcast_diag_float32"} <= names


# --- finite differences (float64; crops, dynamic shapes) --------------------------------------
class G:
    """A tiny graph writer: each call adds one node and returns its output 0."""

    def __init__(self):
        self.g, self.n, self.feeds = Graph(), 0, {}

    def node(self, op, inputs, attrs, name=None):
        self.n += 1
        name = name or f"n{self.n}"
        self.g.add_node(name, op, inputs, attrs)
        return f"{name}:0"

    def const(self, v):
        v = np.asarray(v)
        return self.node("Const", [], {"dtype": DType.from_numpy(v.dtype), "value": v})

    def ph(self, name, v, static):
        self.feeds[f"{name}:0"] = v
        shape = {"shape": Shape(v.shape)} if static else {}
        return self.node("Placeholder", [], {"dtype": D, **shape}, name=name)

    def weighted_sum(self, t, w, dtype=D):
        m = self.node("Mul", [t, self.const(w)], {"T": dtype})
        return self.node("Sum", [m, self.const(np.arange(w.ndim, dtype=np.int32))], {"T": dtype})

    def add(self, a, b):
        return self.node("AddV2", [a, b], {"T": D})


def _check_fd(b, loss, tol=1e-6):
    xs = sorted(b.feeds)
    got = Session(grad(b.g, [loss], xs)).run([f"grad/{x[:-2]}:0" for x in xs], b.feeds)
    fwd = Session(b.g)
    for x, analytic in zip(xs, got):
        def f(v, x=x):
            return float(fwd.run([loss], {**b.feeds, x: v})[0])
        numeric = numeric_gradient(f, b.feeds[x], eps=1e-6)
        np.testing.assert_allclose(analytic, numeric, rtol=tol, atol=tol, err_msg=x)
    return got


def _real_loss(b, z, shape, rng):
    """sum(Re(z) * w1 + Im(z) * w2): every part of every output matters."""
    parts = [b.node(op, [z], {"T": C128, "Tout": D}) for op in ("Real", "Imag")]
    return b.add(b.weighted_sum(parts[0], rng.uniform(0.5, 1.5, shape)),
                 b.weighted_sum(parts[1], rng.uniform(-1.5, 1.5, shape)))


# (op, input shape, fft_length): inputs longer than fft_length are cropped by the op
SPECTRAL = [("RFFT2D", (2, 4, 6), [4, 6]), ("RFFT2D", (3, 5), [3, 5]),
            ("RFFT2D", (2, 5, 7), [3, 4]), ("RFFT2D", (1, 4), [1, 0]),
            ("RFFT3D", (2, 3, 4, 6), [3, 4, 6]), ("RFFT3D", (3, 4, 5), [2, 3, 3]),
            ("IRFFT2D", (2, 4, 4), [4, 6]), ("IRFFT2D", (3, 3), [3, 5]),
            ("IRFFT2D", (5, 6), [3, 4]), ("IRFFT3D", (2, 3, 4, 4), [3, 4, 6]),
            ("IRFFT3D", (3, 4, 4), [2, 3, 5])]


@pytest.mark.parametrize("static", [False, True], ids=["dynamic", "static"])
@pytest.mark.parametrize("op,shape,n", SPECTRAL,
                         ids=[f"{o}-{'x'.join(map(str, s))}-{'x'.join(map(str, n))}"
                              for o, s, n in SPECTRAL])
def test_real_fft_gradient_matches_finite_differences(op, shape, n, static):
    rng = np.random.default_rng(len(shape) * 10 + sum(n))
    b = G()
    length = b.const(np.int32(n))
    if op.startswith("RFFT"):
        x = b.ph("x", rng.standard_normal(shape), static)
        z = b.node(op, [x, length], {"Treal": D, "Tcomplex": C128})
        out = shape[:-len(n)] + tuple(n[:-1]) + (n[-1] // 2 + 1,)
        loss = _real_loss(b, z, out, rng)
    else:
        parts = [b.ph(p, rng.standard_normal(shape), static) for p in ("re", "im")]
        z = b.node("Complex", parts, {"T": D, "Tout": C128})
        y = b.node(op, [z, length], {"Treal": D, "Tcomplex": C128})
        loss = b.weighted_sum(y, rng.uniform(0.5, 1.5, shape[:-len(n)] + tuple(n)))
    got = _check_fd(b, loss)
    cropped = tuple(slice(m, None) for m in (n[:-1] + [n[-1] // 2 + 1 if op[0] == "I"
                                                         else n[-1]]))
    for value in got:  # what the op cropped away gets exactly zero
        for axis, sl in enumerate(cropped):
            index = (Ellipsis,) + (slice(None),) * axis + (sl,) + (slice(None),) * (
                len(n) - axis - 1)
            assert np.all(value[index] == 0)


EINSUM = [("ii->i", [(3, 3)]), ("ii->", [(3, 3)]), ("iij->j", [(2, 2, 4)]),
          ("iji->j", [(3, 2, 3)]), ("jii->ij", [(2, 3, 3)]), ("aabbcd->ca", [(2, 2, 3, 3, 2, 4)]),
          ("i->ii", [(3,)]), ("ij->iji", [(2, 3)]), ("...ii->...i", [(2, 3, 3)]),
          ("i...i->...", [(3, 2, 3)]), ("ii,ij->j", [(3, 3), (3, 2)]),
          ("bii,bj->bij", [(2, 3, 3), (2, 4)]), ("ij,jj->i", [(2, 3), (3, 3)]),
          ("ii...,...->...i", [(3, 3, 2), (1,)]), ("bb", [(3, 3)]),
          ("bii,bjj->bij", [(2, 3, 3), (2, 4, 4)])]


@pytest.mark.parametrize("static", [False, True], ids=["dynamic", "static"])
@pytest.mark.parametrize("eq,shapes", EINSUM, ids=[e for e, _ in EINSUM])
def test_einsum_gradient_matches_finite_differences(eq, shapes, static):
    rng = np.random.default_rng(len(eq))
    b = G()
    xs = [b.ph(f"x{i}", rng.uniform(-1, 1, s), static) for i, s in enumerate(shapes)]
    y = b.node("Einsum", xs, {"equation": eq, "T": D, "N": len(xs)})
    out = Session(b.g).run([y], b.feeds)[0]
    _check_fd(b, b.weighted_sum(y, rng.uniform(0.5, 1.5, np.shape(out))))


# --- structure, the kernel, errors, the CLI ---------------------------------------------------
def _grad_ops(b, loss, xs):
    g2 = grad(b.g, [loss], xs)
    return [n for n in g2 if n.name.startswith("gradients/")]


def test_real_fft_gradients_use_the_matching_transform():
    for op, inverse in (("RFFT2D", "IFFT2D"), ("RFFT3D", "IFFT3D"), ("IRFFT2D", "RFFT2D"),
                        ("IRFFT3D", "RFFT3D")):
        b = G()
        k = int(op[-2])
        shape = (2,) + (4,) * k
        if op.startswith("I"):
            x = b.ph("x", np.ones(shape), True)
            z = b.node("Complex", [x, x], {"T": D, "Tout": C128})
            y = b.node(op, [z, b.const(np.int32([4] * (k - 1) + [6]))],
                       {"Treal": D, "Tcomplex": C128})
        else:
            x = b.ph("x", np.ones(shape), True)
            y = b.node("Real", [b.node(op, [x, b.const(np.int32([4] * k))],
                                       {"Treal": D, "Tcomplex": C128})],
                       {"T": C128, "Tout": D})
        ops = [n.op for n in _grad_ops(b, b.weighted_sum(y, np.ones((2,) + (3,) * k)), ["x"])]
        assert inverse in ops, (op, ops)


def test_einsum_trace_gradient_writes_the_diagonal():
    b = G()
    x = b.ph("x", np.arange(9.0).reshape(3, 3), True)
    y = b.node("Einsum", [x], {"equation": "ii->", "T": D, "N": 1}, name="trace")
    nodes = _grad_ops(b, y, ["x"])
    outs = [str(n.get_attr("equation"), "utf-8").split("->")[1] for n in nodes
            if n.op == "Einsum"]
    assert any(len(set(o)) < len(o) for o in outs), outs  # "i->ii": g on the diagonal
    got = Session(grad(b.g, [y], ["x"])).run(["grad/x:0"], b.feeds)[0]
    np.testing.assert_array_equal(got, np.eye(3))


# (equation, input shape, the same written with identity matrices: one per extra copy)
INFLATE = [("i->ii", (3,), lambda x: np.diag(x)),
           ("ij->iji", (2, 3), lambda x: np.einsum("ij,ik->ijk", x, np.eye(2))),
           ("...i->...ii", (2, 3), lambda x: np.einsum("...i,ij->...ij", x, np.eye(3))),
           ("i...->i...i", (2, 0), lambda x: np.einsum("i...,ij->i...j", x, np.eye(2))),
           ("ji->jiij", (2, 3), lambda x: np.einsum("ji,ik,jl->jikl", x, np.eye(3), np.eye(2)))]


@pytest.mark.parametrize("eq,shape,reference", INFLATE, ids=[e for e, *_ in INFLATE])
def test_einsum_kernel_writes_repeated_output_labels_on_a_diagonal(eq, shape, reference):
    b = G()
    x = np.arange(1.0, 1.0 + np.prod(shape)).reshape(shape)
    got = Session(b.g).run([b.node("Einsum", [b.const(x)], {"equation": eq, "T": D, "N": 1})],
                           {})[0]
    want = reference(x)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


# (equation, operand shapes, the np.einsum calls the kernel makes: [] where the contraction is
# planned once as one matmul (tfg/kernels/einsum_plan.py), [False] for numpy's C loop, [True]
# for its optimized path). A decode step's one-token projections and attention products are
# planned; planning per call (numpy's optimize) cost ~8x the product there.
CONTRACTIONS = [("btd,de->bte", [(2, 1, 8), (8, 24)], []),
                ("bqhd,bkhd->bhqk", [(2, 1, 2, 4), (2, 5, 2, 4)], []),
                ("ij,ij->", [(4, 4), (4, 4)], []),
                ("btd,de->bte", [(4, 32, 64), (64, 64)], []),
                ("aij,bjk->abik", [(2, 3, 4), (3, 4, 5)], []),
                ("ijm,jkn->ik", [(2, 3, 4), (3, 5, 6)], []),
                ("...ij,jk->...ik", [(3, 2, 4), (4, 5)], [False]),
                ("...ij,jk->...ik", [(8, 32, 64), (64, 64)], [True]),
                ("ii,ij->j", [(3, 3), (3, 4)], [False]),
                ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 2)], [True])]


@pytest.mark.parametrize("eq,shapes,calls", CONTRACTIONS,
                         ids=[f"{e}-{s}" for e, s, _ in CONTRACTIONS])
def test_einsum_kernel_plans_the_plain_contractions(monkeypatch, eq, shapes, calls):
    made = []
    real = np.einsum

    def spy(*args, **kw):
        made.append(kw.get("optimize"))
        return real(*args, **kw)
    monkeypatch.setattr(np, "einsum", spy)
    b = G()
    xs = [np.random.default_rng(i).standard_normal(sh) for i, sh in enumerate(shapes)]
    y = b.node("Einsum", [b.ph(f"x{i}", x, True) for i, x in enumerate(xs)],
               {"equation": eq, "T": D, "N": len(xs)})
    sess = Session(b.g)
    for _ in range(2):  # the second call takes the plan the first one made
        made.clear()
        got = sess.run([y], b.feeds)[0]
        assert made == calls, made
        want = real(eq, *xs, optimize=True)
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


def test_dynamic_fft_length_is_refused_by_name():
    b = G()
    x = b.ph("x", np.ones((4, 6)), True)
    n = b.node("Placeholder", [], {"dtype": I32}, name="n")
    z = b.node("RFFT2D", [x, n], {"Treal": D, "Tcomplex": C128}, name="spectrum")
    y = b.node("Real", [z], {"T": C128, "Tout": D})
    with pytest.raises(TfgError, match="RFFT2D node 'spectrum' needs a constant 2-element"):
        grad(b.g, [y], ["x"])


def test_cli_grad_of_trace_and_rfft2d_matches_tensorflow(tmp_path):
    graph, arrays = fixture()
    for name in ("Einsum_trace_float32", "RFFT2D_2x4x6_float32"):
        arg = "x0" if name.startswith("Einsum") else "x"
        feeds = tmp_path / "feeds.npz"
        np.savez(feeds, **{f"{name}/{arg}:0": arrays[f"{name}/{arg}"]})
        g = tfg_cli("grad", "--ys", f"{name}/loss", "--xs", f"{name}/{arg}", DIR / "graph.pb")
        out = tmp_path / "out.npz"
        tfg_cli("run", "-", "--feeds", feeds, "--fetch", f"grad/{name}/{arg}:0", "-o", out,
                input=g.stdout)
        np.testing.assert_allclose(np.load(out)[f"grad/{name}/{arg}:0"],
                                   arrays[f"{name}/grad_{arg}"], rtol=1e-4, atol=1e-5)
