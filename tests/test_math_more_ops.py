"""Asinh, Acosh, Atanh, the bitwise ops and shifts, Invert, PopulationCount, Erfinv, Ndtri,
the Bessel I's, Mod, MulNoNan, Xlogy, Xlog1py and ClipByValue against TensorFlow
(tests/fixtures/math_more, made by tools/gen_math_more_fixtures.py): values, errors, tfg's
gradients and TensorFlow's own gradient graphs run by tfg, shape inference, the memory guard
and the CLI."""
import numpy as np
import pytest

from helpers import tfg_cli
from op_cases import OpCases, case_ids, check, grad_ids
from tfg import builder as tb
from tfg.errors import TfgError, UnknownOpError
from tfg.executor.session import Session
from tfg.graphdef.graph import Graph
from tfg.graphdef.infer import infer
from tfg.kernels.context import KernelContext
from tfg.kernels.registry import get_kernel
from tfg.passes.grad import grad
from tfg.passes.grad.registry import get_gradient
from tfg.schemas.dtypes import DType

OPS = OpCases("math_more")
DIR, CASES, ARRAYS, GRAPH = OPS.dir, OPS.cases, OPS.arrays, OPS.graph
RUNS, ERRORS, GRADS = OPS.runs, OPS.errors, OPS.grads


@pytest.fixture(scope="module")
def session():
    return Session(GRAPH)


@pytest.mark.parametrize("case", RUNS, ids=case_ids(RUNS))
def test_values_match_tensorflow(session, case):
    name = case["name"]
    got = session.run([f"{name}/out:0"], OPS.feeds(case))[0]
    check(got, ARRAYS[f"{name}/out"], case, name)


@pytest.mark.parametrize("case", ERRORS, ids=case_ids(ERRORS))
def test_errors_match_tensorflow(session, case):
    # TensorFlow's kernel refused these feeds with case["error"]; tfg's must too
    with pytest.raises(TfgError, match=case["error"]):
        session.run([f"{case['name']}/out:0"], OPS.feeds(case))


@pytest.mark.parametrize("case,arg", GRADS, ids=grad_ids(GRADS))
def test_tfg_gradient_matches_tensorflow(case, arg):
    OPS.check_tfg_gradient(case, arg)


@pytest.mark.parametrize("case,arg", GRADS, ids=grad_ids(GRADS))
def test_tensorflow_gradient_graph_runs(session, case, arg):
    """The nodes TensorFlow's own gradient emits (Cast, Xdivy, Select, Bessel*, ...) run in
    tfg to TensorFlow's values."""
    OPS.check_tf_gradient_graph(session, case, arg)


def test_bessel_scaled_forms_do_not_overflow():
    x = np.array([-1e300, -1e5, 800.0, 1e300, np.inf])
    for op in ("BesselI0e", "BesselI1e"):
        y = _kernel(op, x)
        assert np.all(np.isfinite(y)), op
        np.testing.assert_allclose(np.abs(y[:4]), 1 / np.sqrt(2 * np.pi * np.abs(x[:4])),
                                   rtol=1e-3)  # the leading term: 1 + O(1 / 8|x|)
    np.testing.assert_array_equal(_kernel("BesselI0", np.array([710.0, -800.0])), np.inf)


def test_ndtri_inverts_the_normal_cdf_far_into_the_tails():
    import math

    p = np.array([1e-300, 1e-100, 1e-12, 0.3, 0.5 + 1e-14, 0.9, 1 - 2**-50])
    y = _kernel("Ndtri", p)
    cdf = np.array([0.5 * math.erfc(-v / math.sqrt(2)) for v in y])
    tail = np.minimum(p, 1 - p)
    np.testing.assert_allclose(np.where(p > 0.5, 1 - cdf, cdf), tail, rtol=1e-12)
    assert abs(y[4] / (math.sqrt(2 * math.pi) * 1e-14) - 1) < 1e-3  # relative, near 0.5


def test_mod_has_no_gradient_as_in_tensorflow():
    # tf.gradients raises LookupError("No gradient defined for operation ... Mod")
    g = Graph()
    g.add_node("x", "Placeholder", [], {"dtype": DType.FLOAT})
    g.add_node("m", "Mod", ["x", "x"], {"T": DType.FLOAT})
    with pytest.raises(UnknownOpError, match="Mod"):
        grad(g, ["m"], ["x"])


@pytest.mark.parametrize("op", ["BitwiseAnd", "BitwiseOr", "BitwiseXor", "Invert",
                                "PopulationCount", "LeftShift", "RightShift"])
def test_bitwise_ops_are_not_differentiable(op):
    assert get_gradient(op).fn is None


def _kernel(op, *ins, **attrs):
    return get_kernel(op).fn(KernelContext(Graph().add_node("n", op), attrs), *ins)


@pytest.mark.parametrize("op,args", [
    ("LeftShift", (np.float32([1]), np.float32([1]))),
    ("RightShift", (np.float64([1]), np.float64([1]))),
    ("PopulationCount", (np.float32([1]),)),
    ("Ndtri", (np.int32([1]),)),
    ("BesselI1e", (np.int64([1]),)),
    ("ClipByValue", (np.complex64([1]), np.complex64(0), np.complex64(1))),
])
def test_unsupported_dtypes_fail_cleanly(op, args):
    with pytest.raises(TfgError, match="does not support dtype"):
        _kernel(op, *args)


def test_mod_of_integers_by_zero_fails_even_when_broadcast():
    with pytest.raises(TfgError, match="Integer division by zero"):
        _kernel("Mod", np.int64([[1], [2]]), np.int64([3, 0]))


def test_incompatible_broadcast_shapes_fail():
    with pytest.raises(TfgError, match="Incompatible shapes"):
        _kernel("BitwiseOr", np.int32([1, 2, 3]), np.int32([1, 2]))


def test_shapes_and_dtypes_are_inferred_as_tensorflow_made_them():
    info = infer(GRAPH)
    for case in RUNS:
        expected = ARRAYS[f"{case['name']}/out"]
        ti = info[(f"{case['name']}/out", 0)]
        assert ti.shape == expected.shape, case["name"]
        assert ti.dtype.np == expected.dtype, case["name"]


def test_partial_shapes_broadcast():
    g = Graph()
    g.add_node("a", "Placeholder", [], {"dtype": DType.INT32, "shape": [-1, 4]})
    g.add_node("b", "Placeholder", [], {"dtype": DType.INT32, "shape": [3, 1, 4]})
    g.add_node("t", "Placeholder", [], {"dtype": DType.FLOAT, "shape": [-1, 2]})
    g.add_node("lo", "Placeholder", [], {"dtype": DType.FLOAT, "shape": []})
    g.add_node("s", "LeftShift", ["a", "b"], {"T": DType.INT32})
    g.add_node("p", "PopulationCount", ["s"], {"T": DType.INT32})
    g.add_node("c", "ClipByValue", ["t", "lo", "lo"], {"T": DType.FLOAT})
    info = infer(g)
    assert info[("s", 0)].shape == (3, None, 4)
    assert info[("p", 0)].shape == (3, None, 4) and info[("p", 0)].dtype == DType.UINT8
    assert info[("c", 0)].shape == (None, 2)


def test_memory_guard_refuses_a_huge_broadcast():
    g = Graph()
    g.add_node("a", "Placeholder", [], {"dtype": DType.INT32, "shape": [20000, 1]})
    g.add_node("b", "Placeholder", [], {"dtype": DType.INT32, "shape": [1, 20000]})
    g.add_node("x", "BitwiseXor", ["a", "b"], {"T": DType.INT32})
    feeds = {"a": np.zeros((20000, 1), np.int32), "b": np.zeros((1, 20000), np.int32)}
    with pytest.raises(TfgError, match="would allocate"):
        Session(g, max_memory="1M").run(["x:0"], feeds)


def test_cli_runs_a_case_and_reports_a_bad_input(tmp_path):
    case = next(c for c in CASES if c["name"] == "Ndtri_float64")
    feeds = tmp_path / "f.npz"
    np.savez(feeds, **{"Ndtri_float64/x": ARRAYS["Ndtri_float64/x"]})
    out = tmp_path / "out.npz"
    tfg_cli("run", DIR / "math_more.pb", "--feeds", feeds, "--fetch", "Ndtri_float64/out",
            "-o", out)
    got = np.load(out)
    check(got[got.files[0]], ARRAYS["Ndtri_float64/out"], case, "cli")

    # a kernel refusing its values: a run failure (exit 1), one stderr line
    bad = tmp_path / "bad.npz"
    divisor = ARRAYS["Mod_int32/y"].copy()
    divisor[3] = 0
    np.savez(bad, **{"Mod_int32/x": ARRAYS["Mod_int32/x"], "Mod_int32/y": divisor})
    p = tfg_cli("run", DIR / "math_more.pb", "--feeds", bad, "--fetch", "Mod_int32/out",
                check=False)
    assert p.returncode == 1
    lines = p.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and "Integer division by zero" in lines[0]

    # a feed of the wrong shape: bad input (exit 2), one stderr line
    np.savez(bad, **{"Mod_int32/x": np.int32([1, 2]), "Mod_int32/y": np.int32([1, 3])})
    p = tfg_cli("run", DIR / "math_more.pb", "--feeds", bad, "--fetch", "Mod_int32/out",
                check=False)
    assert p.returncode == 2
    assert len(p.stderr.decode().strip().splitlines()) == 1


def test_an_empty_integer_division_is_no_division_by_zero():
    """TensorFlow's own gradient of a reduction over no axes of a scalar computes
    FloorMod([], 0): nothing is divided, so it is no error; a non-empty one still is."""
    with tb.Graph() as b:
        x = tb.placeholder(tb.int32, [None], name="x")
        y = tb.placeholder(tb.int32, [], name="y")
        tb.identity(tb.floormod(x, y), name="m")
        tb.identity(tb.mod(x, y), name="t")
    sess = Session(b.graph)
    for out in ("m", "t"):
        got = sess.run(out, {"x": np.zeros(0, np.int32), "y": np.int32(0)})
        assert got.shape == (0,) and got.dtype == np.int32
        with pytest.raises(TfgError, match="Integer division by zero"):
            sess.run(out, {"x": np.ones(2, np.int32), "y": np.int32(0)})
