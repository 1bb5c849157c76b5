#!/usr/bin/env python3
"""TensorFlow's values, errors and gradients of Diag, DiagPart, InTopK, ApproximateEqual,
NextAfter, GuaranteeConst, ToBool, CheckNumericsV2, UniqueWithCountsV2, the second-order max
pool gradients (MaxPoolGradGrad, MaxPoolGradGradV2, MaxPool3DGradGrad, and MaxPoolGrad's own
gradient) and the integrals of tf.math.special (Dawsn, Expint, FresnelCos, FresnelSin,
Spence), for tests/test_math_misc_ops.py.
NEEDS TENSORFLOW; never imports tfg:

    /work/tfvenv/bin/python tools/gen_math_misc_fixtures.py

Writes tests/fixtures/math_misc/ (tools/fixture_cases.py's layout): math_misc.pb (per case
`<case>/<arg>` placeholders -> `<case>/out`, whose outputs TensorFlow's values are
`<case>/out<i>` in the npz; a differentiable case also has `<case>/loss` = Sum(w * out) and
TensorFlow's own gradient graph `<case>/tf_d<arg>`), math_misc.npz and cases.json.
"""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from fixture_cases import CaseSet, fixture_dir, generate  # noqa: E402

OUT = fixture_dir("math_misc")
R = tf.raw_ops
INF, NAN = np.inf, np.nan
RNG = np.random.default_rng(47)
TOL = {np.float16: (2e-3, 1e-3), np.float32: (2e-6, 1e-6), np.float64: (1e-12, 1e-300)}
GRAD_TOL = {np.float32: (1e-5, 1e-6), np.float64: (1e-10, 1e-12)}


class Cases(CaseSet):
    """The cases' graph pieces, arrays and index (tools/fixture_cases.py runs and writes them)."""

    # (pooling over the batch dimension is Unimplemented in TensorFlow's kernel)
    refusals = CaseSet.refusals + (tf.errors.UnimplementedError,)

    def write(self, out, stem, graph):
        """As CaseSet's, with strings stored as bytes arrays (an npz holds no objects)."""
        for k, v in self.arrays.items():
            if np.asarray(v).dtype == object:
                self.arrays[k] = np.asarray(v).astype(bytes)
        super().write(out, stem, graph)

    def add(self, name, op, args, grad=(), tol=None, error=None, attrs=None):
        """args: {input name: array}; grad: the args TensorFlow's gradient is taken for."""
        dt = next(iter(args.values())).dtype.type
        rtol, atol = tol or TOL.get(dt, (0, 0))
        with tf.name_scope(name):
            # (refused feeds: shapes unknown, so that the kernel, not the shape function, refuses)
            phs = {k: tf.compat.v1.placeholder(v.dtype, None if error else v.shape, name=k)
                   for k, v in args.items()}
            out = getattr(R, op)(**phs, **(attrs or {}), name="out")
            outs = list(out) if isinstance(out, (tuple, list)) else [out]
            for i, o in enumerate(outs):
                self.fetches[f"{name}/out{i}"] = o
            for k, v in args.items():
                self.arrays[f"{name}/{k}"] = v
            if grad:
                w = tf.constant(RNG.uniform(0.5, 1.5, outs[0].shape)
                                .astype(outs[0].dtype.as_numpy_dtype))
                loss = tf.reduce_sum(w * outs[0], name="loss")
                for k, d in zip(grad, tf.gradients(loss, [phs[k] for k in grad])):
                    self.fetches[f"{name}/d{k}"] = tf.identity(d, name=f"tf_d{k}")
        self.index.append({"name": name, "op": op, "args": list(args), "grad": list(grad),
                           "outputs": len(outs), "rtol": rtol, "atol": atol, "error": error})


def array_cases(c):
    for dt in (np.float32, np.float64, np.int32, np.int64, np.complex64, np.float16):
        d = (RNG.uniform(-3, 3, (2, 3)) * 4).astype(dt)
        c.add(f"Diag_{dt.__name__}", "Diag", {"diagonal": d})
        c.add(f"DiagPart_{dt.__name__}", "DiagPart",
              {"input": (RNG.uniform(-3, 3, (2, 3, 2, 3)) * 4).astype(dt)})
    c.add("Diag_vector", "Diag", {"diagonal": np.float32([1, 2, 3])})
    c.add("Diag_empty", "Diag", {"diagonal": np.zeros((2, 0), np.float32)})
    c.add("Diag_scalar", "Diag", {"diagonal": np.float32(1)}, error="at least rank 1")
    c.add("DiagPart_odd", "DiagPart", {"input": np.zeros(3, np.float32)},
          error="even and positive, got shape [3]")
    c.add("DiagPart_mismatch", "DiagPart", {"input": np.zeros((2, 3), np.float32)},
          error="dimensions 0 and 1 do not match")
    for dt in (np.float32, np.float64):
        c.add(f"Diag_{dt.__name__}_grad", "Diag", {"diagonal": RNG.uniform(-1, 1, (2, 2))
                                                   .astype(dt)}, grad=["diagonal"])
        c.add(f"DiagPart_{dt.__name__}_grad", "DiagPart",
              {"input": RNG.uniform(-1, 1, (3, 2, 3, 2)).astype(dt)}, grad=["input"])


def misc_cases(c):
    pred = np.float32([[0.1, 0.5, 0.5, 0.2], [1, 2, 3, 4], [np.nan, 1, 2, 3],
                       [3, 3, 3, 3], [0.4, -1, INF, 2]])
    for k in (0, 1, 2, 4, 5, -1):
        c.add(f"InTopK_k{k}".replace("-", "m"), "InTopK",
              {"predictions": pred, "targets": np.int32([1, 3, 1, 0, 2])}, attrs={"k": k})
    c.add("InTopK_int64_range", "InTopK",
          {"predictions": pred, "targets": np.int64([-1, 4, 3, 2, 0])}, attrs={"k": 2})
    c.add("InTopK_rows", "InTopK", {"predictions": pred, "targets": np.int32([0, 1])},
          attrs={"k": 1}, error="must match length of targets")
    for dt in (np.float32, np.float64):
        x = np.array([1, 1, 0, -2, INF, NAN, 1e-6, 3, INF], dt)
        y = np.array([1, 1.000001, 1e-5, -2.5, INF, NAN, 0, 3 + 2e-5, -INF], dt)
        c.add(f"ApproximateEqual_{dt.__name__}", "ApproximateEqual", {"x": x, "y": y})
        c.add(f"ApproximateEqual_{dt.__name__}_tol", "ApproximateEqual", {"x": x, "y": y},
              attrs={"tolerance": 0.6})
        x1 = np.array([0, 0, 1, 1, -1, INF, -INF, NAN, 1, 0, 3, np.finfo(dt).max, -0.0], dt)
        x2 = np.array([1, -1, 2, 0, -INF, 0, 0, 1, NAN, 0, 3, INF, 0], dt)
        c.add(f"NextAfter_{dt.__name__}", "NextAfter", {"x1": x1, "x2": x2})
    c.add("NextAfter_broadcast", "NextAfter", {"x1": np.float32([[1], [2]]),
                                               "x2": np.float32([0, 5, 2])})
    c.add("ApproximateEqual_shapes", "ApproximateEqual",
          {"x": np.float32([1, 2]), "y": np.float32([1, 2, 3])},
          error="x and y must be of the same shape")
    for dt, v in ((np.int32, [3, 1]), (np.float64, [[0.5]]), (np.bool_, [True]),
                  (np.float32, np.zeros((0, 2)))):
        c.add(f"GuaranteeConst_{np.dtype(dt).name}", "GuaranteeConst",
              {"input": np.array(v, dt)})
    for name, v in (("zero", np.float32(0)), ("nan", np.float32(NAN)), ("int", np.int64(-3)),
                    ("false", np.bool_(False)), ("vec0", np.float64([0.0])),
                    ("empty", np.zeros((0, 2), np.int32)), ("mat", np.zeros((2, 2), np.bool_)),
                    ("str", np.array(b"a", object)), ("str_empty", np.array(b"", object)),
                    ("str_vec", np.array([b""], object))):
        c.add(f"ToBool_{name}", "ToBool", {"input": v})
    for dt in (np.float32, np.float64, np.float16):
        c.add(f"CheckNumericsV2_{dt.__name__}", "CheckNumericsV2",
              {"tensor": np.array([1, -2.5, 0], dt)}, attrs={"message": "m"})
    for name, v, words in (("pinf", [1, INF], "m : Tensor had +Inf values"),
                           ("ninf", [-INF, 1], "m : Tensor had -Inf values"),
                           ("nan", [NAN, 0], "m : Tensor had NaN values"),
                           ("both_inf", [INF, -INF], "m : Tensor had -Inf and +Inf values"),
                           ("inf_nan", [INF, NAN], "m : Tensor had +Inf and NaN values"),
                           ("all", [INF, -INF, NAN], "m : Tensor had -Inf, +Inf, and NaN values")):
        c.add(f"CheckNumericsV2_{name}", "CheckNumericsV2", {"tensor": np.float32(v)},
              attrs={"message": "m"}, error=words)
    c.add("CheckNumericsV2_grad", "CheckNumericsV2", {"tensor": np.float64([[1, 2], [3, 4]])},
          attrs={"message": "m"}, grad=["tensor"])


def unique_cases(c):
    m = np.int32([[1, 2, 1], [3, 4, 3], [1, 2, 1], [0, 0, 0]])
    for axis, adt in (([0], np.int64), ([1], np.int32), ([-1], np.int64), ([-2], np.int32)):
        c.add(f"UniqueWithCountsV2_axis{axis[0]}".replace("-", "m"), "UniqueWithCountsV2",
              {"x": m, "axis": np.array(axis, adt)})
    c.add("UniqueWithCountsV2_vector", "UniqueWithCountsV2",
          {"x": np.float32([3, 1, 3, NAN, NAN, -0.0, 0.0]), "axis": np.int64([])},
          attrs={"out_idx": tf.int64})
    c.add("UniqueWithCountsV2_strings", "UniqueWithCountsV2",
          {"x": np.array([b"b", b"a", b"b"], object), "axis": np.int64([0])})
    c.add("UniqueWithCountsV2_3d", "UniqueWithCountsV2",
          {"x": np.int64([[[1, 2], [1, 2]], [[5, 5], [1, 2]]]), "axis": np.int32([1])})
    c.add("UniqueWithCountsV2_matrix_noaxis", "UniqueWithCountsV2",
          {"x": m, "axis": np.int64([])}, error="unique expects a 1D vector")
    c.add("UniqueWithCountsV2_badaxis", "UniqueWithCountsV2",
          {"x": m, "axis": np.int64([2])}, error="axis has to be between [0, 2)")
    c.add("UniqueWithCountsV2_twoaxes", "UniqueWithCountsV2",
          {"x": m, "axis": np.int64([0, 1])}, error="axis does not support input tensors larger")


def _ties(shape):
    """Values with ties inside pooling windows (the first max is the one chosen)."""
    return RNG.integers(0, 4, shape)


def pool_cases(c):
    pools = (("valid_s2", [1, 2, 2, 1], [1, 2, 2, 1], "VALID"),
             ("same_s1", [1, 3, 2, 1], [1, 1, 1, 1], "SAME"),
             ("same_s2", [1, 3, 3, 1], [1, 2, 2, 1], "SAME"))
    for tag, ksize, strides, padding in pools:
        for dt in (np.float32, np.float64, np.int32, np.float16):
            x = _ties((2, 5, 6, 3)).astype(dt)
            with tf.Graph().as_default():
                y = tf.compat.v1.Session().run(R.MaxPool(input=x, ksize=ksize, strides=strides,
                                                         padding=padding))
            g = RNG.uniform(-2, 2, x.shape).astype(dt) if dt != np.int32 else \
                RNG.integers(-9, 9, x.shape).astype(dt)
            att = {"ksize": ksize, "strides": strides, "padding": padding}
            n = f"{tag}_{dt.__name__}"
            c.add(f"MaxPoolGradGrad_{n}", "MaxPoolGradGrad",
                  {"orig_input": x, "orig_output": y, "grad": g}, attrs=att)
            c.add(f"MaxPoolGradGradV2_{n}", "MaxPoolGradGradV2",
                  {"orig_input": x, "orig_output": y, "grad": g,
                   "ksize": np.int32(ksize), "strides": np.int32(strides)},
                  attrs={"padding": padding})
            x5 = x.reshape(2, 5, 3, 2, 3)
            k5, s5 = [1, 2] + ksize[1:], [1, 1] + strides[1:]
            if dt in (np.float32,):  # (TensorFlow's CPU 3-D pools are float only)
                with tf.Graph().as_default():
                    y5 = tf.compat.v1.Session().run(R.MaxPool3D(input=x5, ksize=k5,
                                                                strides=s5, padding=padding))
                c.add(f"MaxPool3DGradGrad_{n}", "MaxPool3DGradGrad",
                      {"orig_input": x5, "orig_output": y5, "grad": g.reshape(x5.shape)},
                      attrs={"ksize": k5, "strides": s5, "padding": padding})
    # gradients: distinct values (no ties within a finite difference)
    for dt in (np.float32, np.float64):
        x = (RNG.permutation(2 * 4 * 5 * 2).reshape(2, 4, 5, 2) * 0.1).astype(dt)
        att = {"ksize": [1, 2, 2, 1], "strides": [1, 1, 2, 1], "padding": "SAME"}
        with tf.Graph().as_default():
            y = tf.compat.v1.Session().run(R.MaxPool(input=x, **att))
        dy = RNG.uniform(-1, 1, y.shape).astype(dt)
        c.add(f"MaxPoolGrad_{dt.__name__}_grad", "MaxPoolGrad",
              {"orig_input": x, "orig_output": y, "grad": dy}, grad=["orig_input", "grad"],
              attrs=att, tol=GRAD_TOL[dt])
        c.add(f"MaxPoolGradGrad_{dt.__name__}_grad", "MaxPoolGradGrad",
              {"orig_input": x, "orig_output": y, "grad": RNG.uniform(-1, 1, x.shape).astype(dt)},
              grad=["orig_output", "grad"], attrs=att, tol=GRAD_TOL[dt])
    x5 = (RNG.permutation(72).reshape(1, 3, 4, 3, 2) * 0.1).astype(np.float32)
    att5 = {"ksize": [1, 2, 2, 2, 1], "strides": [1, 1, 2, 2, 1], "padding": "VALID"}
    with tf.Graph().as_default():
        y5 = tf.compat.v1.Session().run(R.MaxPool3D(input=x5, **att5))
    c.add("MaxPool3DGrad_grad", "MaxPool3DGrad",
          {"orig_input": x5, "orig_output": y5, "grad": RNG.uniform(-1, 1, y5.shape)
           .astype(np.float32)}, grad=["grad"], attrs=att5, tol=GRAD_TOL[np.float32])
    c.add("MaxPool3DGradGrad_grad", "MaxPool3DGradGrad",
          {"orig_input": x5, "orig_output": y5, "grad": RNG.uniform(-1, 1, x5.shape)
           .astype(np.float32)}, grad=["grad"], attrs=att5, tol=GRAD_TOL[np.float32])
    x = np.zeros((1, 4, 4, 1), np.float32)
    c.add("MaxPoolGradGrad_badrank", "MaxPoolGradGrad",
          {"orig_input": x[0], "orig_output": x[0, :2, :2], "grad": x[0]},
          attrs={"ksize": [1, 2, 2, 1], "strides": [1, 2, 2, 1], "padding": "VALID"},
          error="must be 4-dimensional")
    c.add("MaxPoolGradGradV2_badksize", "MaxPoolGradGradV2",
          {"orig_input": x, "orig_output": x[:, :2, :2], "grad": x,
           "ksize": np.int32([2, 2, 2, 1]), "strides": np.int32([1, 2, 2, 1])},
          attrs={"padding": "VALID"}, error="Pooling is not yet supported on the batch")


SPECIAL = {
    "Dawsn": [0, 1e-8, 0.1, -0.5, 1.5, 3.24, 3.26, 6.24, 6.26, 20, -1e3, 1e10, INF, -INF, NAN],
    "Expint": [-1, 0, 1e-10, 0.01, 0.5, 1, 1.9, 2, 2.1, 4, 8.5, 16, 40, 88, 100, 709.5, 800,
               INF, NAN],
    "FresnelCos": [0, 1e-5, 0.3, -0.9, 1, 2.4, 2.6, 5, 36973.0, 36975.0, 1e5, INF, -INF, NAN],
    "Spence": [-1, 0, 1e-12, 0.3, 0.5, 0.9, 1, 1.5, 2, 2.5, 10, 1e6, INF, NAN],
}
SPECIAL["FresnelSin"] = SPECIAL["FresnelCos"]
RANDOM = {"Dawsn": (-8, 8), "Expint": (-3, 30), "FresnelCos": (-4, 4), "FresnelSin": (-4, 4),
          "Spence": (0, 4)}
GRAD_DOMAIN = {"Dawsn": (-4, 4), "Expint": (0.3, 6), "FresnelCos": (-2, 2), "FresnelSin": (-2, 2),
               "Spence": (0.2, 3)}


def special_cases(c):
    for op, values in SPECIAL.items():
        lo, hi = RANDOM[op]
        for dt in (np.float32, np.float64):
            v = np.concatenate([np.array(values, np.float64), RNG.uniform(lo, hi, 16)])
            c.add(f"{op}_{dt.__name__}", op, {"x": v.astype(dt)})
        glo, ghi = GRAD_DOMAIN[op]
        for dt in (np.float32, np.float64):
            x = RNG.uniform(glo, ghi, (2, 3))
            if op == "Spence":
                x[0, 0] = 1.0  # the imputed branch
            c.add(f"{op}_{dt.__name__}_grad", op, {"x": x.astype(dt)}, grad=["x"],
                  tol=GRAD_TOL[dt])
    c.add("Dawsn_empty", "Dawsn", {"x": np.zeros((0, 2), np.float32)})


def main():
    generate(Cases(), (array_cases, misc_cases, unique_cases, pool_cases, special_cases), OUT, "math_misc")


if __name__ == "__main__":
    main()
