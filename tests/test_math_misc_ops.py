"""Diag, DiagPart, InTopK, ApproximateEqual, NextAfter, GuaranteeConst, ToBool,
CheckNumericsV2, UniqueWithCountsV2, the second-order max pool gradients (MaxPoolGradGrad,
MaxPoolGradGradV2, MaxPool3DGradGrad, and the gradients of MaxPoolGrad and MaxPool3DGrad) and
the integrals of tf.math.special (Dawsn, Expint, FresnelCos, FresnelSin, Spence) against
TensorFlow (tests/fixtures/math_misc, made by tools/gen_math_misc_fixtures.py): values, errors,
tfg's gradients and TensorFlow's own gradient graphs run by tfg, shape inference, the memory
guard and the CLI.

Tolerances (per case, in cases.json): integers and booleans exact; float32 2e-6 relative,
float64 1e-12, float16 2e-3, i.e. a few ulps: the integrals run Cephes' polynomials step by
step in the input's own precision, as TensorFlow's kernels do, so only the rounding of
exp/log/sin/cos and of the order of operations differs; gradients 1e-5 / 1e-10 (they compose
several such values).
"""
import re

import numpy as np
import pytest

from helpers import tfg_cli
from op_cases import OpCases, case_ids, check, grad_ids
from tfg import builder as tb
from tfg.errors import TfgError
from tfg.executor.session import Session
from tfg.graphdef.builder.core import make
from tfg.graphdef.graph import Graph
from tfg.graphdef.infer import infer
from tfg.passes.grad import grad
from tfg.schemas.dtypes import DType

OPS = OpCases("math_misc")
DIR, CASES, ARRAYS, GRAPH = OPS.dir, OPS.cases, OPS.arrays, OPS.graph
RUNS, ERRORS, GRADS = OPS.runs, OPS.errors, OPS.grads
for _k, _v in ARRAYS.items():  # strings: stored as bytes, run as tfg's object arrays
    if _v.dtype.kind == "S":
        ARRAYS[_k] = _v.astype(object)


@pytest.fixture(scope="module")
def session():
    return Session(GRAPH)


def _fetches(case):
    return [f"{case['name']}/out:{i}" for i in range(case["outputs"])]


@pytest.mark.parametrize("case", RUNS, ids=case_ids(RUNS))
def test_values_match_tensorflow(session, case):
    name = case["name"]
    got = session.run(_fetches(case), OPS.feeds(case))
    for i, v in enumerate(got):
        want = ARRAYS[f"{name}/out{i}"]
        if want.dtype == object:  # strings
            assert v.shape == want.shape and v.tolist() == want.tolist(), name
        else:
            check(v, want, case, f"{name}:{i}")


@pytest.mark.parametrize("case", ERRORS, ids=case_ids(ERRORS))
def test_errors_match_tensorflow(session, case):
    # TensorFlow's kernel refused these feeds with case["error"]; tfg's must too
    with pytest.raises(TfgError, match=re.escape(case["error"])):
        session.run(_fetches(case), OPS.feeds(case))


@pytest.mark.parametrize("case,arg", GRADS, ids=grad_ids(GRADS))
def test_tfg_gradient_matches_tensorflow(case, arg):
    OPS.check_tfg_gradient(case, arg)


@pytest.mark.parametrize("case,arg", GRADS, ids=grad_ids(GRADS))
def test_tensorflow_gradient_graph_runs(session, case, arg):
    """The nodes TensorFlow's own gradient emits (MaxPoolGradGrad, BesselK1e, Xlogy, ...) run
    in tfg to TensorFlow's values."""
    OPS.check_tf_gradient_graph(session, case, arg)


def test_shapes_and_dtypes_are_inferred_as_tensorflow_made_them():
    info = infer(GRAPH)
    for case in RUNS:
        for i in range(case["outputs"]):
            expected = ARRAYS[f"{case['name']}/out{i}"]
            ti = info[(f"{case['name']}/out", i)]
            assert ti.dtype.np == expected.dtype, case["name"]
            if ti.shape is not None:
                assert len(ti.shape) == expected.ndim, case["name"]
                assert all(d is None or d == e for d, e in zip(ti.shape, expected.shape)), (
                    case["name"], ti.shape, expected.shape)


def _kernel_run(op, inputs, attrs=None):
    """Run one `op` node on Consts: inputs [(value, DType)]."""
    g = Graph()
    names = []
    for i, (v, dt) in enumerate(inputs):
        g.add_node(f"in{i}", "Const", [], {"dtype": dt, "value": np.asarray(v, dt.np)})
        names.append(f"in{i}:0")
    g.add_node("op", op, names, {"T": inputs[0][1], **(attrs or {})})
    return Session(g).run(["op:0"], {})[0]


@pytest.mark.parametrize("op,value,dt", [
    ("Dawsn", [1], DType.INT32), ("Spence", [1], DType.INT64),
    ("NextAfter", [1], DType.INT32), ("CheckNumericsV2", [1], DType.INT32),
])
def test_unsupported_dtypes_fail_cleanly(op, value, dt):
    inputs = [(value, dt)] * (2 if op == "NextAfter" else 1)
    with pytest.raises(TfgError, match="does not support dtype"):
        _kernel_run(op, inputs, {"message": b"m"} if op == "CheckNumericsV2" else None)


def test_special_function_identities():
    x = np.array([0.3, 1.7, 5.0, 12.0])
    # Spence(x) + Spence(1 - x)... on [0, 1]: Li2 reflection pi^2/6 - log(x) log(1 - x)
    t = np.array([0.2, 0.5, 0.9])
    total = _kernel_run("Spence", [(t, DType.DOUBLE)]) + _kernel_run("Spence",
                                                                    [(1 - t, DType.DOUBLE)])
    np.testing.assert_allclose(total, np.pi ** 2 / 6 - np.log(t) * np.log(1 - t), rtol=1e-14)
    # Dawson's integral solves D' = 1 - 2 x D (a central difference)
    h = 1e-5
    d = (_kernel_run("Dawsn", [(x + h, DType.DOUBLE)])
         - _kernel_run("Dawsn", [(x - h, DType.DOUBLE)])) / (2 * h)
    np.testing.assert_allclose(d, 1 - 2 * x * _kernel_run("Dawsn", [(x, DType.DOUBLE)]),
                               rtol=1e-8)
    np.testing.assert_allclose(_kernel_run("FresnelCos", [(np.array([1e6, -1e6]), DType.DOUBLE)]),
                               [0.5, -0.5])


def test_second_order_max_pool_gradient_of_a_gradient_penalty():
    """d/dx sum(MaxPoolGrad(x, MaxPool(x), dy) * w) goes through MaxPoolGrad's gradient
    (MaxPoolGradGrad for dy, zeros for x): the graph builds and runs."""
    x = np.random.default_rng(0).permutation(32).reshape(1, 4, 4, 2).astype(np.float64)
    att = {"ksize": [1, 2, 2, 1], "strides": [1, 2, 2, 1], "padding": b"VALID",
           "T": DType.DOUBLE}
    g = Graph()
    g.add_node("x", "Placeholder", [], {"dtype": DType.DOUBLE})
    g.add_node("dy", "Placeholder", [], {"dtype": DType.DOUBLE})
    g.add_node("y", "MaxPool", ["x"], att)
    g.add_node("dx", "MaxPoolGrad", ["x", "y", "dy"], att)
    g.add_node("sq", "Square", ["dx"], {"T": DType.DOUBLE})
    g.add_node("axes", "Const", [], {"dtype": DType.INT32, "value": np.arange(4, dtype=np.int32)})
    g.add_node("loss", "Sum", ["sq", "axes"], {"T": DType.DOUBLE})
    g2 = grad(g, ["loss"], ["dy", "x"])
    dy = np.arange(1.0, 9.0).reshape(1, 2, 2, 2)
    d_dy, d_x = Session(g2).run(["grad/dy:0", "grad/x:0"], {"x:0": x, "dy:0": dy})
    np.testing.assert_array_equal(d_dy, 2 * dy)  # each dy lands once: d/d dy sum(dx^2) = 2 dy
    np.testing.assert_array_equal(d_x, 0)


def test_partial_shapes_are_inferred():
    g = Graph()
    g.add_node("d", "Placeholder", [], {"dtype": DType.FLOAT, "shape": [2, -1]})
    g.add_node("m", "Placeholder", [], {"dtype": DType.FLOAT, "shape": [2, -1, -1, 3]})
    g.add_node("diag", "Diag", ["d"], {"T": DType.FLOAT})
    g.add_node("part", "DiagPart", ["m"], {"T": DType.FLOAT})
    g.add_node("x", "Placeholder", [], {"dtype": DType.FLOAT, "shape": [-1, 6, 6, 3]})
    g.add_node("y", "Placeholder", [], {"dtype": DType.FLOAT, "shape": [-1, 3, 3, 3]})
    g.add_node("gg", "MaxPoolGradGrad", ["x", "y", "x"],
               {"T": DType.FLOAT, "ksize": [1, 2, 2, 1], "strides": [1, 2, 2, 1],
                "padding": b"VALID"})
    g.add_node("b", "ToBool", ["x"], {"T": DType.FLOAT})
    info = infer(g)
    assert info[("diag", 0)].shape == (2, None, 2, None)
    assert info[("part", 0)].shape == (2, 3)
    assert info[("gg", 0)].shape == (None, 3, 3, 3)
    assert info[("b", 0)].shape == () and info[("b", 0)].dtype == DType.BOOL


def test_bad_ranks_are_refused_while_building():
    with tb.Graph():
        m = tb.placeholder(tb.float32, (2, 2, 2), name="m")
        with pytest.raises(TfgError, match="even and non-zero rank"):
            make("DiagPart", [m], {"T": tb.float32}, name="part")
        with pytest.raises(TfgError, match="at least 1"):
            make("Diag", [tb.placeholder(tb.float32, (), name="s")], {"T": tb.float32},
                 name="diag")


def test_memory_guard_refuses_a_huge_diag():
    g = Graph()
    g.add_node("d", "Placeholder", [], {"dtype": DType.DOUBLE, "shape": [30000]})
    g.add_node("m", "Diag", ["d"], {"T": DType.DOUBLE})  # 30000^2 doubles: 7.2 GB
    with pytest.raises(TfgError, match="would allocate"):
        Session(g, max_memory="1M").run(["m:0"], {"d:0": np.zeros(30000)})


def test_cli_runs_a_case_and_reports_a_bad_input(tmp_path):
    name = "Expint_float64"
    case = next(c for c in CASES if c["name"] == name)
    feeds, out = tmp_path / "f.npz", tmp_path / "out.npz"
    np.savez(feeds, **{f"{name}/x": ARRAYS[f"{name}/x"]})
    tfg_cli("run", DIR / "math_misc.pb", "--feeds", feeds, "--fetch", f"{name}/out", "-o", out)
    got = np.load(out)
    check(got[got.files[0]], ARRAYS[f"{name}/out0"], case, "cli")
    # CheckNumericsV2 refusing an inf: one stderr line naming it
    bad = tmp_path / "bad.npz"
    np.savez(bad, **{"CheckNumericsV2_float32/tensor": np.float32([1, -np.inf, 0])})
    p = tfg_cli("run", DIR / "math_misc.pb", "--feeds", bad, "--fetch",
                "CheckNumericsV2_float32/out", check=False)
    lines = p.stderr.decode().strip().splitlines()
    assert p.returncode in (1, 2) and len(lines) == 1, (p.returncode, lines)
    assert "m : Tensor had -Inf values" in lines[0]
