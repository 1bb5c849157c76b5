"""Igamma, Igammac, IgammaGradA, Zeta and Polygamma against TensorFlow
(tests/fixtures/special_more/ops.npz, made by tools/gen_special_more_fixtures.py) on a grid with
edge cases (x = 0, large a, NaN, infinities, poles, outside the domain); their gradients and
Digamma's through tfg's gradient pass against tf.gradients; shape inference and the CLI."""
import subprocess
import sys

import numpy as np
import pytest

from conftest import FIXTURES
from tfg import builder as tb
from tfg.errors import TfgError
from tfg.executor.session import Session
from tfg.graphdef import io
from tfg.graphdef.builder.core import make
from tfg.graphdef.graph import Graph
from tfg.passes.grad import grad
from tfg.schemas.dtypes import DType

FIX = np.load(FIXTURES / "special_more" / "ops.npz")
CASES = sorted({k.split("/")[0] for k in FIX.files if not k.startswith("grad-")})
GRADS = sorted({k.split("/")[0] for k in FIX.files if k.startswith("grad-")})

# Relative tolerances. The incomplete gamma functions start from exp(a log x - x - lgamma(a)),
# where lgamma(1e4) ~ 8e4 carries an absolute rounding error of ~1e-11 (float64) that no
# implementation avoids; the rest match to a few ulps.
RTOL = {np.float32: {"IgammaGradA": 2e-5, "Igammac": 5e-6}, np.float64: {
    "Igamma": 5e-11, "Igammac": 5e-11, "IgammaGradA": 5e-11}}
DEFAULT_RTOL = {np.float32: 1e-6, np.float64: 1e-12}


def _dt(v):
    return DType.from_numpy(np.asarray(v).dtype)


def run_op(op, inputs):
    g = Graph()
    for i, v in enumerate(inputs):
        g.add_node(f"in{i}", "Const", attrs={"dtype": _dt(v), "value": np.asarray(v)})
    g.add_node("op", op, [f"in{i}:0" for i in range(len(inputs))], {"T": _dt(inputs[0])})
    return Session(g).run(["op:0"], {})[0]


@pytest.mark.parametrize("case", CASES)
def test_values_match_tensorflow(case):
    op = str(FIX[f"{case}/op"])
    want = FIX[f"{case}/out"]
    got = run_op(op, [FIX[f"{case}/in0"], FIX[f"{case}/in1"]])
    assert got.dtype == want.dtype and got.shape == want.shape, case
    dt = want.dtype.type
    rtol = RTOL[dt].get(op, DEFAULT_RTOL[dt])
    # below ~1e-300 TensorFlow's flushed intermediates (denormals) differ: absolute there
    atol = 1e-300 if dt == np.float64 else 1e-35
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=case)  # NaN == NaN


def _grad_graph(op, in0, in1, w):
    g = Graph()
    for name, v in (("in0", in0), ("in1", in1)):
        g.add_node(name, "Placeholder", attrs={"dtype": _dt(v)})
    ins = ["in1:0"] if op == "Digamma" else ["in0:0", "in1:0"]
    g.add_node("y", op, ins, {"T": _dt(in1)})
    g.add_node("w", "Const", attrs={"dtype": _dt(w), "value": w})
    g.add_node("wy", "Mul", ["y:0", "w:0"], {"T": _dt(w)})
    g.add_node("axes", "Const", attrs={"dtype": DType.INT32,
                                       "value": np.arange(w.ndim, dtype=np.int32)})
    g.add_node("loss", "Sum", ["wy:0", "axes:0"], {"T": _dt(w)})
    return g


@pytest.mark.parametrize("key", GRADS)
def test_gradients_match_tensorflow(key):
    op = str(FIX[f"{key}/op"])
    in0, in1, w = FIX[f"{key}/in0"], FIX[f"{key}/in1"], FIX[f"{key}/w"]
    xs = [x for x, k in (("in0:0", "d0"), ("in1:0", "d1")) if f"{key}/{k}" in FIX.files]
    g = grad(_grad_graph(op, in0, in1, w), ["loss:0"], xs)
    got = Session(g).run([f"grad/{x[:-2]}:0" for x in xs], {"in0:0": in0, "in1:0": in1})
    tol = 2e-6 if in1.dtype == np.float32 else 1e-11
    for x, v in zip(xs, got):
        want = FIX[f"{key}/d{x[2]}"]
        assert v.dtype == want.dtype and v.shape == want.shape, (key, x)
        np.testing.assert_allclose(v, want, rtol=tol, atol=tol, err_msg=f"{key}: d/d{x}")


def test_the_undifferentiated_inputs_get_none_as_in_tensorflow():
    """Zeta in x and Polygamma in n: TensorFlow's gradient is None, so no path reaches them."""
    assert not any(f"grad-{op}-float32/d0" in FIX.files for op in ("Zeta", "Polygamma"))
    assert "grad-Igamma-float32/d0" in FIX.files  # (a's, through IgammaGradA)


def test_identities():
    x = np.linspace(0.2, 30, 50)
    a = np.full_like(x, 2.5)
    np.testing.assert_allclose(run_op("Igamma", [a, x]) + run_op("Igammac", [a, x]), 1,
                               rtol=1e-14)
    np.testing.assert_allclose(run_op("Zeta", [np.full(3, 2.0), np.ones(3)]), np.pi ** 2 / 6,
                               rtol=1e-15)
    np.testing.assert_allclose(run_op("Polygamma", [np.ones(1), np.ones(1)]), np.pi ** 2 / 6,
                               rtol=1e-15)


def test_shape_inference_broadcasts():
    with tb.Graph():
        a = tb.placeholder(tb.float32, (3, 1), name="a")
        x = tb.placeholder(tb.float32, (None, 4), name="x")
        for op in ("Igamma", "Igammac", "IgammaGradA", "Zeta", "Polygamma"):
            y = make(op, [a, x], {"T": tb.float32}, name=op)
            assert tuple(y.outputs[0].get_shape()) == (3, 4), op
        with pytest.raises(TfgError, match="compatible|broadcast"):
            make("Igamma", [a, tb.placeholder(tb.float32, (2, 4), name="x2")], {"T": tb.float32},
                 name="bad")


def test_integer_inputs_are_refused():
    with pytest.raises(TfgError):
        run_op("Zeta", [np.int32([2]), np.int32([1])])


def test_cli_end_to_end(tmp_path):
    g = Graph()
    g.add_node("a", "Placeholder", attrs={"dtype": DType.FLOAT})
    g.add_node("x", "Placeholder", attrs={"dtype": DType.FLOAT})
    g.add_node("y", "Igammac", ["a:0", "x:0"], {"T": DType.FLOAT})
    path = tmp_path / "g.pb"
    io.save(g, str(path))
    case = "Igammac-float32"
    feeds = tmp_path / "f.npz"
    np.savez(feeds, a=FIX[f"{case}/in0"], x=FIX[f"{case}/in1"])
    out = tmp_path / "out.npz"
    cmd = [sys.executable, "-m", "tfg", "run", str(path), "--feeds", str(feeds), "--fetch", "y",
           "-o", str(out)]
    p = subprocess.run(cmd, capture_output=True, timeout=300)
    assert p.returncode == 0, p.stderr.decode()
    np.testing.assert_allclose(np.load(out)["y"], FIX[f"{case}/out"], rtol=5e-6, atol=1e-35)
    np.savez(feeds, a=np.float32([1, 2]), x=np.float32([1, 2, 3]))  # shapes do not broadcast
    p = subprocess.run(cmd, capture_output=True, timeout=300)
    err = p.stderr.decode().strip().splitlines()
    assert p.returncode in (1, 2) and len(err) == 1, err
