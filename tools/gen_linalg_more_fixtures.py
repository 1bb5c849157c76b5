#!/usr/bin/env python3
"""TensorFlow's values and gradients of MatrixDeterminant, LogMatrixDeterminant, MatrixSolve,
MatrixSolveLs, Qr, Svd, SelfAdjointEigV2, Lu and MatrixSquareRoot, for
tests/test_linalg_more_ops.py. NEEDS TENSORFLOW; never imports tfg:

    /work/tfvenv/bin/python tools/gen_linalg_more_fixtures.py

Writes tests/fixtures/linalg_more/: linalg_more.pb (one tf.compat.v1 graph: per case
`<case>/<arg>` placeholders -> `<case>/op` (outputs op:0, op:1, ...); a differentiable case also
has `<case>/loss` and TensorFlow's own gradient graph, `<case>/tf_d<arg>`), linalg_more.npz
(`<case>/<arg>` feeds, `<case>/out<i>` outputs, `<case>/d<arg>` TensorFlow's gradients) and
cases.json (per case: op, args, attrs, how each output compares, the args with gradients,
tolerances, or the error TensorFlow's kernel raises).

Singular vectors, eigenvectors and Q, R are unique only up to each column's sign (phase):
those outputs are marked "abs" (compared by magnitude, plus the tests' reconstructions), and
their loss terms are sign-free: Sum(w * x * x).
"""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from fixture_cases import CaseSet, fixture_dir, generate  # noqa: E402

OUT = fixture_dir("linalg_more")
R = tf.raw_ops
RNG = np.random.default_rng(7)
FLOATS = (np.float32, np.float64)
ALL = (np.float32, np.float64, np.complex64, np.complex128)
TOL = {np.float16: (2e-2, 2e-2), np.float32: (2e-5, 2e-5), np.float64: (1e-10, 1e-10),
       np.complex64: (2e-5, 2e-5), np.complex128: (1e-10, 1e-10)}
GRAD_TOL = {np.float32: (2e-4, 2e-4), np.float64: (1e-8, 1e-8),
            np.complex128: (1e-8, 1e-8)}
# per op: how each output compares ("exact" values, "abs": up to a sign or phase, "skip")
# and its loss term ("lin", "sq": sign-free, None: no gradient)
OUTPUTS = {
    "MatrixDeterminant": [("exact", "lin")],
    "LogMatrixDeterminant": [("exact", None), ("exact", "lin")],
    "MatrixSolve": [("exact", "lin")],
    "MatrixSolveLs": [("exact", "lin")],
    "Qr": [("abs", "sq"), ("abs", "sq")],
    "Svd": [("exact", "lin"), ("abs", "sq"), ("abs", "sq")],
    "SelfAdjointEigV2": [("exact", "lin"), ("abs", "sq")],
    "Lu": [("exact", None), ("exact", None)],
    "MatrixSquareRoot": [("exact", "lin")],
}


def rand(shape, dt, lo=-1.0, hi=1.0):
    x = RNG.uniform(lo, hi, shape)
    if np.dtype(dt).kind == "c":
        x = x + 1j * RNG.uniform(lo, hi, shape)
    return x.astype(dt)


def well_conditioned(shape, dt):
    """Random matrices plus n on the diagonal: far from singular."""
    n = shape[-1]
    return (rand(shape, dt) + n * np.eye(n)).astype(dt)


def hermitian(shape, dt):
    x = rand(shape, dt)
    return ((x + np.conj(np.swapaxes(x, -1, -2))) / 2 + np.diag(np.arange(shape[-1]) * 1.5)) \
        .astype(dt)


def spd(shape, dt):
    x = rand(shape, dt)
    return (x @ np.conj(np.swapaxes(x, -1, -2)) + shape[-1] * np.eye(shape[-1])).astype(dt)


class Cases(CaseSet):
    """The cases' graph pieces, arrays and index (tools/fixture_cases.py runs and writes them)."""

    def add(self, name, op, args, attrs=None, grad=(), tol=None, error=None, outputs=None):
        """args: {input name: array}; grad: the args TensorFlow's gradient is taken for."""
        dt = next(iter(args.values())).dtype.type
        rtol, atol = tol or (GRAD_TOL[dt] if grad else TOL[dt])
        outputs = outputs or [kind for kind, _ in OUTPUTS[op]]
        with tf.name_scope(name):
            # an error case's shapes stay unknown: TensorFlow's kernel, not its shape
            # function, must refuse them
            phs = {k: tf.compat.v1.placeholder(v.dtype, None if error else v.shape, name=k)
                   for k, v in args.items()}
            res = getattr(R, op)(**phs, **(attrs or {}), name="op")
            res = list(res) if isinstance(res, (tuple, list)) else [res]
            for i, t in enumerate(res):
                if outputs[i] != "skip":
                    self.fetches[f"{name}/out{i}"] = t
            for k, v in args.items():
                self.arrays[f"{name}/{k}"] = v
            if grad:
                terms = []
                for t, kind, (_, loss) in zip(res, outputs, OUTPUTS[op]):
                    if loss is None or kind == "skip":
                        continue
                    w = tf.constant(RNG.uniform(0.5, 1.5, t.shape).astype(
                        t.dtype.as_numpy_dtype))
                    if loss == "sq" and t.dtype.is_complex:  # |t|^2: phase-free
                        t = tf.cast(tf.math.real(t * tf.math.conj(t)), t.dtype)
                    elif loss == "sq":
                        t = t * t
                    term = tf.reduce_sum(w * t)
                    # a complex loss's gradient needs grad_ys: take its real part
                    terms.append(tf.math.real(term) if term.dtype.is_complex else term)
                loss = tf.add_n(terms, name="loss")
                for k, d in zip(grad, tf.gradients(loss, [phs[k] for k in grad])):
                    self.fetches[f"{name}/d{k}"] = tf.identity(d, name=f"tf_d{k}")
        self.index.append({"name": name, "op": op, "args": list(args),
                           "attrs": {k: (v if not isinstance(v, tf.DType) else v.name)
                                     for k, v in (attrs or {}).items()},
                           "outputs": outputs, "grad": list(grad), "rtol": rtol, "atol": atol,
                           "error": error})


def determinant_cases(c):
    for dt in ALL:
        n = dt.__name__
        c.add(f"Det_{n}", "MatrixDeterminant", {"input": rand((2, 3, 3), dt, -2, 2)})
        c.add(f"LogDet_{n}", "LogMatrixDeterminant", {"input": rand((2, 3, 3), dt, -2, 2)})
    c.add("Det_4x4", "MatrixDeterminant", {"input": rand((4, 4), np.float64, -3, 3)})
    c.add("Det_singular", "MatrixDeterminant", {"input": np.array([[[1., 2], [2, 4]],
                                                                   [[0, 0], [0, 0]]])})
    c.add("LogDet_singular", "LogMatrixDeterminant",
          {"input": np.array([[[1., 2], [2, 4]], [[2, 0], [0, 3]]])})
    c.add("Det_nan", "MatrixDeterminant", {"input": np.array([[np.nan, 1], [1, 1.]])})
    c.add("LogDet_nan", "LogMatrixDeterminant", {"input": np.array([[np.nan, 1], [1, 1.]])})
    c.add("Det_overflow", "MatrixDeterminant", {"input": np.diag([1e300, 1e300])})
    c.add("LogDet_overflow", "LogMatrixDeterminant", {"input": np.diag([1e300, -1e300])})
    c.add("Det_empty", "MatrixDeterminant", {"input": np.zeros((2, 0, 0), np.float32)})
    c.add("LogDet_empty", "LogMatrixDeterminant", {"input": np.zeros((2, 0, 0), np.float32)})
    c.add("Det_1x1", "MatrixDeterminant", {"input": np.float32([[[-3.5]]])})
    c.add("Det_not_square", "MatrixDeterminant", {"input": np.ones((2, 3), np.float32)},
          error="Input matrix must be square.")
    c.add("Det_rank1", "MatrixDeterminant", {"input": np.ones((3,), np.float32)},
          error="must have rank >= 2")
    for dt in FLOATS:
        c.add(f"Det_{dt.__name__}_grad", "MatrixDeterminant",
              {"input": well_conditioned((2, 3, 3), dt)}, grad=["input"])
        c.add(f"LogDet_{dt.__name__}_grad", "LogMatrixDeterminant",
              {"input": rand((2, 3, 3), dt, -2, 2)}, grad=["input"])


def solve_cases(c):
    for dt in ALL:
        n = dt.__name__
        c.add(f"Solve_{n}", "MatrixSolve", {"matrix": well_conditioned((2, 3, 3), dt),
                                             "rhs": rand((2, 3, 2), dt)})
        c.add(f"Solve_{n}_adjoint", "MatrixSolve", {"matrix": well_conditioned((2, 3, 3), dt),
                                                     "rhs": rand((2, 3, 2), dt)},
              attrs={"adjoint": True})
    c.add("Solve_4x4", "MatrixSolve", {"matrix": rand((4, 4), np.float64),
                                       "rhs": rand((4, 1), np.float64)})
    c.add("Solve_singular", "MatrixSolve", {"matrix": np.array([[1., 2], [2, 4]]),
                                            "rhs": np.ones((2, 1))},
          error="Input matrix is not invertible.")
    c.add("Solve_nan", "MatrixSolve", {"matrix": np.array([[np.nan, 1], [1, 1.]]),
                                       "rhs": np.ones((2, 1))},
          error="Input matrix is not invertible.")
    c.add("Solve_empty", "MatrixSolve", {"matrix": np.zeros((0, 0), np.float32),
                                         "rhs": np.zeros((0, 3), np.float32)})
    c.add("Solve_incompatible", "MatrixSolve", {"matrix": np.eye(2, dtype=np.float32),
                                                "rhs": np.ones((3, 1), np.float32)},
          error="Input matrix and rhs are incompatible.")
    c.add("Solve_batches_differ", "MatrixSolve",
          {"matrix": np.tile(np.eye(2), (2, 1, 1)), "rhs": np.ones((3, 2, 1))},
          error="All input tensors must have the same outer dimensions.")
    for dt in FLOATS:
        for adj in (False, True):
            c.add(f"Solve_{dt.__name__}_grad{'_adjoint' if adj else ''}", "MatrixSolve",
                  {"matrix": well_conditioned((2, 3, 3), dt), "rhs": rand((2, 3, 2), dt)},
                  attrs={"adjoint": adj}, grad=["matrix", "rhs"])


def _l2(v):
    return np.float64(v)


def solve_ls_cases(c):
    for dt in ALL:
        n = dt.__name__
        c.add(f"SolveLs_{n}_tall", "MatrixSolveLs",
              {"matrix": rand((2, 4, 3), dt), "rhs": rand((2, 4, 2), dt),
               "l2_regularizer": _l2(0.0)}, tol=(1e-4, 1e-4) if n == "float32" else None)
        c.add(f"SolveLs_{n}_wide", "MatrixSolveLs",
              {"matrix": rand((2, 2, 4), dt), "rhs": rand((2, 2, 2), dt),
               "l2_regularizer": _l2(0.25)}, tol=(1e-4, 1e-4) if n == "float32" else None)
        c.add(f"SolveLs_{n}_slow", "MatrixSolveLs",
              {"matrix": rand((2, 4, 3), dt), "rhs": rand((2, 4, 1), dt),
               "l2_regularizer": _l2(0.0)}, attrs={"fast": False},
              tol=(1e-4, 1e-4) if n == "float32" else None)
    c.add("SolveLs_rank_deficient_slow", "MatrixSolveLs",
          {"matrix": np.array([[1., 2], [2, 4], [0, 0]]), "rhs": np.ones((3, 1)),
           "l2_regularizer": _l2(5.0)}, attrs={"fast": False})
    c.add("SolveLs_rank_deficient", "MatrixSolveLs",
          {"matrix": np.array([[1., 2], [2, 4]]), "rhs": np.ones((2, 1)),
           "l2_regularizer": _l2(0.0)},
          error="Input matrix was rank deficient or ill-conditioned")
    c.add("SolveLs_regularized", "MatrixSolveLs",
          {"matrix": np.array([[1., 2], [2, 4]]), "rhs": np.ones((2, 1)),
           "l2_regularizer": _l2(0.5)})
    c.add("SolveLs_negative_l2", "MatrixSolveLs",
          {"matrix": np.eye(2), "rhs": np.ones((2, 1)), "l2_regularizer": _l2(-1.0)},
          error="l2_regularizer must be >= 0.")
    c.add("SolveLs_empty", "MatrixSolveLs",
          {"matrix": np.zeros((2, 0, 3), np.float32), "rhs": np.zeros((2, 0, 2), np.float32),
           "l2_regularizer": _l2(0.0)}, outputs=["skip"])  # TensorFlow leaves it unset
    for dt in FLOATS:
        for shape, rhs in (((2, 4, 3), (2, 4, 2)), ((2, 2, 3), (2, 2, 2))):
            kind = "tall" if shape[1] >= shape[2] else "wide"
            c.add(f"SolveLs_{dt.__name__}_grad_{kind}", "MatrixSolveLs",
                  {"matrix": rand(shape, dt), "rhs": rand(rhs, dt),
                   "l2_regularizer": _l2(0.5)}, grad=["matrix", "rhs"],
                  tol=(2e-3, 2e-3) if dt == np.float32 else None)


def qr_cases(c):
    for dt in ALL + (np.float16,):
        n = dt.__name__
        for shape in ((2, 3, 3), (2, 4, 3), (2, 3, 4)):
            for full in (False, True):
                c.add(f"Qr_{n}_{shape[1]}x{shape[2]}{'_full' if full else ''}", "Qr",
                      {"input": rand(shape, dt)}, attrs={"full_matrices": full})
    c.add("Qr_empty", "Qr", {"input": np.zeros((2, 0, 3), np.float32)})
    c.add("Qr_rank1", "Qr", {"input": np.ones((3,), np.float32)}, error="must have rank >= 2")
    for dt in FLOATS:  # (float32: the square case only, to keep the graph small)
        for shape in ((2, 3, 3),) + (((2, 4, 3), (2, 3, 4)) if dt == np.float64 else ()):
            c.add(f"Qr_{dt.__name__}_grad_{shape[1]}x{shape[2]}", "Qr",
                  {"input": rand(shape, dt)}, grad=["input"])


def svd_cases(c):
    for dt in ALL:
        n = dt.__name__
        for shape in ((2, 3, 3), (2, 4, 3), (2, 3, 4)):
            for full in (False, True):
                c.add(f"Svd_{n}_{shape[1]}x{shape[2]}{'_full' if full else ''}", "Svd",
                      {"input": rand(shape, dt)}, attrs={"full_matrices": full})
        c.add(f"Svd_{n}_no_uv", "Svd", {"input": rand((2, 4, 3), dt)},
              attrs={"compute_uv": False}, outputs=["exact", "skip", "skip"])
    c.add("Svd_empty", "Svd", {"input": np.zeros((2, 0, 3), np.float32)})
    c.add("Svd_rank_deficient", "Svd", {"input": np.array([[1., 2], [2, 4], [0, 0]])},
          outputs=["exact", "skip", "skip"])
    for dt in FLOATS:  # (float32: the square case only, to keep the graph small)
        for shape in ((2, 3, 3),) + (((2, 4, 3), (2, 3, 4)) if dt == np.float64 else ()):
            c.add(f"Svd_{dt.__name__}_grad_{shape[1]}x{shape[2]}", "Svd",
                  {"input": rand(shape, dt)}, grad=["input"])
        c.add(f"Svd_{dt.__name__}_grad_no_uv", "Svd", {"input": rand((2, 4, 3), dt)},
              attrs={"compute_uv": False}, outputs=["exact", "skip", "skip"], grad=["input"])


def eig_cases(c):
    for dt in ALL:
        n = dt.__name__
        c.add(f"Eig_{n}", "SelfAdjointEigV2", {"input": hermitian((2, 3, 3), dt)})
        c.add(f"Eig_{n}_no_v", "SelfAdjointEigV2", {"input": hermitian((2, 4, 4), dt)},
              attrs={"compute_v": False}, outputs=["exact", "skip"])
    lower_only = hermitian((3, 3), np.float64)
    lower_only[np.triu_indices(3, 1)] = 9.0  # the upper triangle is never read
    c.add("Eig_reads_lower", "SelfAdjointEigV2", {"input": lower_only})
    c.add("Eig_empty", "SelfAdjointEigV2", {"input": np.zeros((0, 0), np.float32)})
    c.add("Eig_not_square", "SelfAdjointEigV2", {"input": np.ones((2, 3), np.float32)},
          error="Input matrix must be square.")
    for dt in FLOATS:
        c.add(f"Eig_{dt.__name__}_grad", "SelfAdjointEigV2", {"input": hermitian((2, 3, 3), dt)},
              grad=["input"])
        c.add(f"Eig_{dt.__name__}_grad_no_v", "SelfAdjointEigV2",
              {"input": hermitian((2, 3, 3), dt)}, attrs={"compute_v": False},
              outputs=["exact", "skip"], grad=["input"])


def lu_cases(c):
    for dt in ALL:
        c.add(f"Lu_{dt.__name__}", "Lu", {"input": rand((2, 4, 4), dt)})
    c.add("Lu_int64", "Lu", {"input": np.array([[4., 3, 1], [6, 3, 2], [1, 5, 9]])},
          attrs={"output_idx_type": tf.int64})
    c.add("Lu_ties", "Lu", {"input": np.array([[1., 2, 3], [-1, 0, 2], [1, 4, 0]])})
    c.add("Lu_empty", "Lu", {"input": np.zeros((2, 0, 0), np.float32)})
    c.add("Lu_singular", "Lu", {"input": np.array([[1., 2], [2, 4]])},
          error="Input is not invertible.")


def sqrt_cases(c):
    for dt in ALL:
        c.add(f"Sqrtm_{dt.__name__}", "MatrixSquareRoot", {"input": spd((2, 3, 3), dt)})
    c.add("Sqrtm_complex_eigenvalues", "MatrixSquareRoot",
          {"input": np.array([[1., -2], [3, 1]])})
    c.add("Sqrtm_negative_eigenvalue", "MatrixSquareRoot",
          {"input": np.array([[-1., 1], [0, 2]])})
    c.add("Sqrtm_empty", "MatrixSquareRoot", {"input": np.zeros((0, 0), np.float64)})
    for dt in FLOATS:
        c.add(f"Sqrtm_{dt.__name__}_grad", "MatrixSquareRoot", {"input": spd((2, 3, 3), dt)},
              grad=["input"])


def complex_grad_cases(c):
    """TensorFlow's complex gradients (its conjugate convention) for one case per op."""
    dt = np.complex128
    c.add("Det_complex_grad", "MatrixDeterminant", {"input": well_conditioned((2, 3, 3), dt)},
          grad=["input"])
    c.add("LogDet_complex_grad", "LogMatrixDeterminant",
          {"input": well_conditioned((2, 3, 3), dt)}, grad=["input"])
    c.add("Solve_complex_grad", "MatrixSolve", {"matrix": well_conditioned((2, 3, 3), dt),
                                                "rhs": rand((2, 3, 2), dt)},
          grad=["matrix", "rhs"])
    c.add("SolveLs_complex_grad", "MatrixSolveLs",
          {"matrix": rand((2, 4, 3), dt), "rhs": rand((2, 4, 2), dt),
           "l2_regularizer": _l2(0.5)}, grad=["matrix", "rhs"])
    for shape in ((2, 3, 3), (2, 4, 3), (2, 3, 4)):
        c.add(f"Qr_complex_grad_{shape[1]}x{shape[2]}", "Qr", {"input": rand(shape, dt)},
              grad=["input"])
        c.add(f"Svd_complex_grad_{shape[1]}x{shape[2]}", "Svd", {"input": rand(shape, dt)},
              grad=["input"])
    c.add("Eig_complex_grad", "SelfAdjointEigV2", {"input": hermitian((2, 3, 3), dt)},
          grad=["input"])
    c.add("Sqrtm_complex_grad", "MatrixSquareRoot", {"input": spd((2, 3, 3), dt)},
          grad=["input"])


def non_finite_cases(c):
    """What TensorFlow's kernels make of a NaN or an infinity (one matrix of a batch)."""
    for tag, v in (("nan", np.nan), ("inf", np.inf)):
        x = np.stack([np.array([[v, 1], [1, 1.]]), np.array([[4., 1], [1, 3]])])
        c.add(f"Svd_{tag}", "Svd", {"input": x})
        c.add(f"Sqrtm_{tag}", "MatrixSquareRoot", {"input": x})
        c.add(f"SolveLs_slow_{tag}", "MatrixSolveLs",
              {"matrix": x, "rhs": np.ones((2, 2, 1)), "l2_regularizer": _l2(0.0)},
              attrs={"fast": False})
    c.add("Eig_inf", "SelfAdjointEigV2", {"input": np.array([[np.inf, 1], [1, 1.]])})
    c.add("Eig_nan", "SelfAdjointEigV2", {"input": np.array([[np.nan, 1], [1, 1.]])},
          error="Self-adjoint eigen decomposition was not successful.")


def main():
    generate(Cases(), (determinant_cases, solve_cases, solve_ls_cases, qr_cases, svd_cases,
                       eig_cases, lu_cases, sqrt_cases, complex_grad_cases, non_finite_cases),
             OUT, "linalg_more")


if __name__ == "__main__":
    main()
