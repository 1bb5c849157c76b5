"""MatrixDeterminant, LogMatrixDeterminant, MatrixSolve, MatrixSolveLs, Qr, Svd,
SelfAdjointEigV2, Lu and MatrixSquareRoot against TensorFlow (tests/fixtures/linalg_more, made
by tools/gen_linalg_more_fixtures.py): values (vectors up to their sign or phase, with the
decompositions rebuilt), errors, tfg's gradients and TensorFlow's own gradient graphs run by
tfg, shape inference, the memory guard and the CLI."""
import numpy as np
import pytest

from helpers import tfg_cli
from op_cases import OpCases, case_ids, check, grad_ids
from tfg.errors import TfgError, UnknownOpError
from tfg.executor.session import Session
from tfg.graphdef.attrs import Shape
from tfg.graphdef.graph import Graph
from tfg.graphdef.infer import infer
from tfg.kernels.context import KernelContext
from tfg.kernels.registry import get_kernel
from tfg.passes.grad import grad
from tfg.schemas.dtypes import DType

OPS = OpCases("linalg_more")
DIR, CASES, ARRAYS, GRAPH = OPS.dir, OPS.cases, OPS.arrays, OPS.graph
RUNS, ERRORS, GRADS = OPS.runs, OPS.errors, OPS.grads


@pytest.fixture(scope="module")
def session():
    return Session(GRAPH)


def _adj(x):
    return np.conj(np.swapaxes(x, -1, -2))


def _rebuilt(case, outs):
    """The input the decomposition's outputs give back (None: nothing to rebuild)."""
    op, attrs = case["op"], case["attrs"]
    if op == "Qr":
        return outs[0] @ outs[1]
    if op == "Svd" and attrs.get("compute_uv", True):
        s, u, v = outs
        p = s.shape[-1]
        return (u[..., :p] * s[..., None, :]) @ _adj(v[..., :p])
    if op == "SelfAdjointEigV2" and attrs.get("compute_v", True):
        e, v = outs
        return (v * e[..., None, :]) @ _adj(v)
    return None


@pytest.mark.parametrize("case", RUNS, ids=case_ids(RUNS))
def test_values_match_tensorflow(session, case):
    name = case["name"]
    n_out = len(case["outputs"])
    outs = session.run([f"{name}/op:{i}" for i in range(n_out)], OPS.feeds(case))
    for i, kind in enumerate(case["outputs"]):
        if kind != "skip":
            check(outs[i], ARRAYS[f"{name}/out{i}"], case, f"{name}:{i}", kind == "abs")
    x = ARRAYS[f"{name}/input"] if "input" in case["args"] else None
    rebuilt = _rebuilt(case, outs)
    if rebuilt is not None and np.all(np.isfinite(x)):
        if case["op"] == "SelfAdjointEigV2":  # the matrix the lower triangle defines
            x = np.tril(x) + _adj(np.tril(x, -1))
        tol = 50 * np.finfo(x.dtype).eps * max(1, x.shape[-1])
        np.testing.assert_allclose(rebuilt, x, rtol=tol, atol=tol * np.abs(x).max(initial=1))


@pytest.mark.parametrize("case", ERRORS, ids=case_ids(ERRORS))
def test_errors_match_tensorflow(session, case):
    # TensorFlow's kernel refused these feeds with case["error"]; tfg's must too
    with pytest.raises(TfgError, match=case["error"].replace(".", r"\.")):
        session.run([f"{case['name']}/op:0"], OPS.feeds(case))


@pytest.mark.parametrize("case,arg", GRADS, ids=grad_ids(GRADS))
def test_tfg_gradient_matches_tensorflow(case, arg):
    OPS.check_tfg_gradient(case, arg)


@pytest.mark.parametrize("case,arg", GRADS, ids=grad_ids(GRADS))
def test_tensorflow_gradient_graph_runs(session, case, arg):
    """The nodes TensorFlow's own gradient emits (MatrixInverse, Cholesky, triangular solves,
    the diagonal ops, ...) run in tfg to TensorFlow's values."""
    OPS.check_tf_gradient_graph(session, case, arg)


def _graph(op, shapes, dtype=DType.FLOAT, attrs=None):
    """A graph of placeholders of `shapes` -> node 'y' = op(...)."""
    g = Graph()
    names = []
    for i, shape in enumerate(shapes):
        dt = DType.DOUBLE if op == "MatrixSolveLs" and i == 2 else dtype
        g.add_node(f"x{i}", "Placeholder", [], {"dtype": dt, "shape": Shape(shape)})
        names.append(f"x{i}")
    g.add_node("y", op, names, {"T": dtype, **(attrs or {})})
    return g


def test_lu_has_no_gradient_as_in_tensorflow():
    # TensorFlow registers no gradient for Lu: tf.gradients raises LookupError
    g = _graph("Lu", [[3, 3]])
    with pytest.raises(UnknownOpError, match="Lu"):
        grad(g, ["y"], ["x0"])


@pytest.mark.parametrize("op,shape,attrs,message", [
    ("MatrixSolveLs", [[4, 3], [4, 2], []], {"fast": False}, "fast=False"),
    ("Svd", [[5, 2]], {"full_matrices": True}, r"abs\(m - n\) > 1"),
    ("Qr", [[4, 3]], {"full_matrices": True}, "nrows > ncols"),
    ("Svd", [[-1, 3]], {}, "static matrix shape"),
])
def test_gradients_tensorflow_does_not_define_are_refused(op, shape, attrs, message):
    g = _graph(op, shape, attrs=attrs)
    with pytest.raises(TfgError, match=message):
        grad(g, ["y:0"], ["x0"])


def _kernel(op, *ins, **attrs):
    return get_kernel(op).fn(KernelContext(Graph().add_node("n", op), attrs), *ins)


@pytest.mark.parametrize("op", ["MatrixDeterminant", "LogMatrixDeterminant", "Svd",
                                "SelfAdjointEigV2", "Lu", "MatrixSquareRoot"])
def test_half_fails_cleanly_where_tensorflow_has_no_kernel(op):
    with pytest.raises(TfgError, match="does not support dtype (half|float16)"):
        _kernel(op, np.eye(2, dtype=np.float16))


def test_half_qr_runs_as_in_tensorflow():
    x = np.array([[3., 1], [4, 2]], np.float16)
    q, r = _kernel("Qr", x)
    assert q.dtype == r.dtype == np.float16
    np.testing.assert_allclose((q.astype(np.float32) @ r.astype(np.float32)), x, atol=1e-2)


def test_integer_input_fails_cleanly():
    with pytest.raises(TfgError, match="does not support dtype int32"):
        _kernel("MatrixDeterminant", np.eye(2, dtype=np.int32))


def test_lu_packs_l_and_u_with_the_row_permutation():
    a = np.random.default_rng(3).uniform(-1, 1, (3, 5, 5))
    lu, p = _kernel("Lu", a, output_idx_type=DType.INT64)
    assert p.dtype == np.int64
    lower = np.tril(lu, -1) + np.eye(5)
    upper = np.triu(lu)
    np.testing.assert_allclose(lower @ upper, np.take_along_axis(a, p[..., None], axis=-2),
                               atol=1e-12)
    assert np.all(np.abs(np.tril(lu, -1)) <= 1 + 1e-12)  # partial pivoting's bound


def test_determinant_agrees_with_the_log_determinant():
    a = np.random.default_rng(4).uniform(-2, 2, (4, 4, 4))
    det = _kernel("MatrixDeterminant", a)
    sign, log_abs = _kernel("LogMatrixDeterminant", a)
    np.testing.assert_allclose(det, sign * np.exp(log_abs), rtol=1e-12)
    np.testing.assert_allclose(det, np.linalg.det(a), rtol=1e-10)


def test_matrix_square_root_squares_back():
    rng = np.random.default_rng(5)
    x = rng.uniform(-1, 1, (2, 4, 4)) + 1j * rng.uniform(-1, 1, (2, 4, 4))
    root = _kernel("MatrixSquareRoot", x)
    np.testing.assert_allclose(root @ root, x, atol=1e-10)


def test_shapes_are_inferred_as_tensorflow_made_them():
    info = infer(GRAPH)
    for case in RUNS:
        for i, kind in enumerate(case["outputs"]):
            if kind == "skip":
                continue
            expected = ARRAYS[f"{case['name']}/out{i}"]
            ti = info[(f"{case['name']}/op", i)]
            assert ti.shape == expected.shape, (case["name"], i)
            assert ti.dtype.np == expected.dtype, (case["name"], i)


@pytest.mark.parametrize("op,shapes,attrs,expected", [
    ("Svd", [[-1, 5, 3]], {"full_matrices": True}, [(None, 3), (None, 5, 5), (None, 3, 3)]),
    ("Svd", [[2, 5, 3]], {"compute_uv": False}, [(2, 3), (0,), (0,)]),
    ("Qr", [[2, -1, 3]], {}, [(2, None, None), (2, None, 3)]),
    ("Qr", [[2, 5, 3]], {"full_matrices": True}, [(2, 5, 5), (2, 5, 3)]),
    ("SelfAdjointEigV2", [[-1, 4, -1]], {"compute_v": False}, [(None, 4), (0,)]),
    ("Lu", [[2, -1, 3]], {}, [(2, 3, 3), (2, 3)]),
    ("MatrixDeterminant", [[2, 3, 3]], {}, [(2,)]),
    ("LogMatrixDeterminant", [[-1, 3]], {}, [(), ()]),
    ("MatrixSolve", [[2, 3, 3], [-1, 3, 4]], {}, [(2, 3, 4)]),
    ("MatrixSolveLs", [[2, 5, 3], [2, -1, 4], []], {}, [(2, 3, 4)]),
])
def test_partial_shapes(op, shapes, attrs, expected):
    info = infer(_graph(op, shapes, attrs=attrs))
    assert [info[("y", i)].shape for i in range(len(expected))] == expected


@pytest.mark.parametrize("op,shapes", [
    ("MatrixDeterminant", [[2, 3]]),
    ("Lu", [[3]]),
    ("MatrixSolve", [[3, 3], [4, 1]]),
    ("MatrixSolve", [[2, 3, 3], [3, 1]]),
    ("MatrixSolveLs", [[3, 2], [3, 1], [1]]),
])
def test_bad_static_shapes_are_refused_at_build_time(op, shapes):
    with pytest.raises(TfgError):
        infer(_graph(op, shapes), strict=True)


def test_memory_guard_refuses_huge_full_svd_factors():
    g = _graph("Svd", [[3000, 2]], attrs={"full_matrices": True})
    with pytest.raises(TfgError, match="would allocate"):
        Session(g, max_memory="1M").run(["y:1"], {"x0": np.ones((3000, 2), np.float32)})


def test_cli_runs_a_case_and_reports_a_bad_input(tmp_path):
    case = next(c for c in CASES if c["name"] == "Solve_float64")
    feeds = tmp_path / "f.npz"
    np.savez(feeds, **{f"Solve_float64/{k}": ARRAYS[f"Solve_float64/{k}"]
                       for k in ("matrix", "rhs")})
    out = tmp_path / "out.npz"
    tfg_cli("run", DIR / "linalg_more.pb", "--feeds", feeds, "--fetch", "Solve_float64/op",
            "-o", out)
    got = np.load(out)
    check(got[got.files[0]], ARRAYS["Solve_float64/out0"], case, "cli")

    # a singular matrix: the kernel refuses it (a run failure, exit 1), one stderr line
    bad = tmp_path / "bad.npz"
    np.savez(bad, **{"Solve_float64/matrix": np.zeros((2, 3, 3)),
                     "Solve_float64/rhs": ARRAYS["Solve_float64/rhs"]})
    p = tfg_cli("run", DIR / "linalg_more.pb", "--feeds", bad, "--fetch", "Solve_float64/op",
                check=False)
    assert p.returncode == 1
    lines = p.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and "Input matrix is not invertible." in lines[0]

    # a feed of the wrong shape: bad input (exit 2), one stderr line
    np.savez(bad, **{"Solve_float64/matrix": np.zeros((3, 3)),
                     "Solve_float64/rhs": ARRAYS["Solve_float64/rhs"]})
    p = tfg_cli("run", DIR / "linalg_more.pb", "--feeds", bad, "--fetch", "Solve_float64/op",
                check=False)
    assert p.returncode == 2
    assert len(p.stderr.decode().strip().splitlines()) == 1
