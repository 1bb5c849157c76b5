"""Gradients through complex-valued ops against TensorFlow's (tests/fixtures/complex_grad,
made by tools/gen_complex_grad_fixtures.py). TensorFlow takes a complex gradient in the
conjugate direction (for a real loss L of z, tf.gradients gives conj(dL/dz)): Mul's
gx = g * conj(y), MatMul's with conj'd operands, Exp's g * conj(exp(x)), ... and the kernels
of SqrtGrad, RsqrtGrad and ReciprocalGrad use conj(y). Real graphs get no Conj node.
"""
import json

import numpy as np
import pytest

from conftest import FIXTURES
from helpers import tfg_cli
from tfg.executor.session import Session
from tfg.graphdef import io
from tfg.graphdef.graph import Graph
from tfg.passes.grad import grad
from tfg.passes.grad.emitter import NodeFactory
from tfg.schemas.dtypes import DType

DIR = FIXTURES / "complex_grad"
INDEX = json.loads((DIR / "cases.json").read_text())
CASES = [c for c in INDEX if c["group"] == "complex"]
_CACHE = {}


def fixture():
    """(the cases' graph, the feeds and TensorFlow's gradients), loaded once."""
    if not _CACHE:
        _CACHE["graph"] = io.load(str(DIR / "complex_grad.pb"))
        _CACHE["arrays"] = dict(np.load(DIR / "complex_grad.npz"))
    return _CACHE["graph"], _CACHE["arrays"]


def check_case(case):
    """`tfg grad` of the case's loss w.r.t. its args, run, against TensorFlow's gradients."""
    graph, arrays = fixture()
    name = case["name"]
    xs = [f"{name}/{a}" for a in case["args"]]
    g2 = grad(graph, [f"{name}/loss"], xs)
    got = Session(g2).run([f"grad/{x}:0" for x in xs], {f"{x}:0": arrays[x] for x in xs})
    for arg, value in zip(case["args"], got):
        expected = arrays[f"{name}/grad_{arg}"]
        assert value.dtype == expected.dtype and value.shape == expected.shape, arg
        np.testing.assert_allclose(value, expected, rtol=case["rtol"], atol=case["atol"],
                                   err_msg=f"{name}: d/d{arg}")


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_complex_gradient_matches_tensorflow(case):
    check_case(case)


def test_fixture_covers_both_complex_dtypes_of_every_op():
    ops = {}
    for c in CASES:
        op, _, tag = c["name"].rpartition("_")
        ops.setdefault(op, set()).add(tag)
    two = {op for op, tags in ops.items() if tags >= {"complex64", "complex128"}}
    for op in ("Mul", "Div", "RealDiv", "DivNoNan", "Pow", "Square", "Exp", "Sqrt", "Rsqrt",
               "Reciprocal", "Tanh", "Sigmoid", "Sinh", "Asin", "MatMul_11", "Einsum", "Prod",
               "BatchMatMulV2_00", "TanhGrad", "SqrtGrad"):
        assert op in two, op
    assert {"dct2_ortho", "dct3", "idct", "mfcc"} <= {c["name"] for c in CASES}


# --- real graphs are unchanged ----------------------------------------------------------------
REAL_OPS = [("Square", 1), ("Exp", 1), ("Expm1", 1), ("Log", 1), ("Log1p", 1), ("Sin", 1),
            ("Cos", 1), ("Tan", 1), ("Tanh", 1), ("Sigmoid", 1), ("Asinh", 1), ("Atanh", 1),
            ("Sinh", 1), ("Cosh", 1), ("Asin", 1), ("Acos", 1), ("Atan", 1), ("Mul", 2),
            ("RealDiv", 2), ("Div", 2), ("DivNoNan", 2), ("Pow", 2), ("MatMul", 2),
            ("TanhGrad", 2), ("SigmoidGrad", 2), ("SqrtGrad", 2), ("RsqrtGrad", 2),
            ("ReciprocalGrad", 2)]


def _real_graph(op, n):
    """op over n float64 [2, 2] Placeholders, summed into `y`."""
    g = Graph()
    factory = NodeFactory()
    factory.graph, factory._dtypes = g, {}
    names = []
    for i in range(n):
        g.add_node(f"in{i}", "Placeholder", attrs={"dtype": DType.DOUBLE})
        names.append(f"in{i}:0")
    attrs = {}
    factory._fill_type_attrs(op, names, attrs)
    g.add_node("op", op, names, attrs)
    g.add_node("axes", "Const", attrs={"dtype": DType.INT32,
                                       "value": np.array([0, 1], np.int32)})
    g.add_node("y", "Sum", ["op:0", "axes:0"], {"T": DType.DOUBLE})
    return g, [f"in{i}" for i in range(n)]


@pytest.mark.parametrize("op,n", REAL_OPS, ids=[o for o, _ in REAL_OPS])
def test_real_gradient_has_no_conj(op, n):
    g, xs = _real_graph(op, n)
    g2 = grad(g, ["y"], xs)
    assert not [node.name for node in g2 if node.op == "Conj"]


def test_complex_gradient_conjugates_once_per_operand():
    """Mul of complex x, y: gx = g * Conj(y), gy = Conj(x) * g, TensorFlow's nodes."""
    graph, _ = fixture()
    g2 = grad(graph, ["Mul_complex64/loss"], ["Mul_complex64/x", "Mul_complex64/y"])
    conj_inputs = sorted(str(n.inputs[0]) for n in g2
                         if n.op == "Conj" and n.name.startswith("gradients/Mul_complex64/Mul_"))
    assert conj_inputs == ["Mul_complex64/x", "Mul_complex64/y"]


# --- end to end ------------------------------------------------------------------------------
def test_cli_grad_of_complex_mul_matches_tensorflow(tmp_path):
    """The sweep's repro: real(sum(Complex(x, 2x) * s)) -> `tfg grad | tfg run`."""
    _, arrays = fixture()
    name = "ComplexMulConst_complex64"
    feeds = tmp_path / "feeds.npz"
    np.savez(feeds, **{f"{name}/x:0": arrays[f"{name}/x"]})
    g = tfg_cli("grad", "--ys", f"{name}/loss", "--xs", f"{name}/x", DIR / "complex_grad.pb")
    out = tmp_path / "out.npz"
    tfg_cli("run", "-", "--feeds", feeds, "--fetch", f"grad/{name}/x:0", "-o", out,
            input=g.stdout)
    got = np.load(out)[f"grad/{name}/x:0"]
    np.testing.assert_allclose(got, arrays[f"{name}/grad_x"], rtol=2e-6, atol=1e-6)
