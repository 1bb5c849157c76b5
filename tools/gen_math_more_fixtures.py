#!/usr/bin/env python3
"""TensorFlow's values and gradients of the inverse hyperbolics, bitwise ops and shifts,
PopulationCount, Erfinv, Ndtri, the Bessel I's, Mod, MulNoNan, Xlogy, Xlog1py and
ClipByValue, for tests/test_math_more_ops.py. NEEDS TENSORFLOW; never imports tfg:

    /work/tfvenv/bin/python tools/gen_math_more_fixtures.py

Writes tests/fixtures/math_more/: math_more.pb (one tf.compat.v1 graph: per case
`<case>/<arg>` placeholders -> `<case>/out`; a differentiable case also has
`<case>/loss` = Sum(w * out) and TensorFlow's own gradient graph, `<case>/tf_d<arg>`),
math_more.npz (`<case>/<arg>` feeds, `<case>/out`, `<case>/d<arg>` TensorFlow's gradients of
the loss) and cases.json (per case: op, args, the args with gradients, tolerances, or the
error TensorFlow's kernel raises on those feeds).
"""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from fixture_cases import CaseSet, fixture_dir, generate  # noqa: E402

OUT = fixture_dir("math_more")
R = tf.raw_ops
INTS = (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32, np.uint64)
INF, NAN = np.inf, np.nan
RNG = np.random.default_rng(11)
NO_KERNEL = set()  # (op, dtype) TensorFlow has no CPU kernel for

# op -> values covering its domain, edges and specials (each float dtype keeps what it holds)
UNARY_VALUES = {
    "Asinh": [-1e30, -50, -3, -1, -0.5, 0, 1e-8, 0.3, 2, 100, INF, -INF, NAN],
    "Acosh": [0.5, 1, 1.0001, 1.5, 2, 10, 1e20, INF, NAN, -2],
    "Atanh": [-1, -0.999, -0.5, 0, 1e-8, 0.3, 0.9999, 1, 2, NAN],
    "Erfinv": [-1, -0.9999999999, -0.9999999, -0.9, -0.5, -1e-3, 0, 1e-6, 1e-20, 0.3, 0.999,
               1, 1.5, -2, NAN],
    "Ndtri": [0, 1e-300, 1e-30, 1e-10, 0.01, 0.2, 0.25, 0.5, 0.5 + 1e-9, 0.6, 0.75, 0.99,
              1 - 1e-7, 1 - 1e-15, 1, -0.5, 1.5, NAN],
    "BesselI0e": [-1e300, -800, -100, -20.5, -20, -5, -1, -1e-5, 0, 1e-3, 0.5, 3, 8, 19.9, 20.1,
                  30, 88, 88.9, 200, 700, 710, INF, -INF, NAN],
}
for _op in ("BesselI1e", "BesselI0", "BesselI1"):
    UNARY_VALUES[_op] = UNARY_VALUES["BesselI0e"]
RANDOM = {"Asinh": (-5, 5), "Acosh": (1, 6), "Atanh": (-1, 1), "Erfinv": (-1, 1),
          "Ndtri": (0, 1), "BesselI0e": (-30, 30), "BesselI1e": (-30, 30),
          "BesselI0": (-30, 30), "BesselI1": (-30, 30)}
# smooth domains for the gradient cases (the Bessel ones include 0: the imputed branch)
GRAD_DOMAIN = {"Asinh": (-3, 3), "Acosh": (1.1, 5), "Atanh": (-0.9, 0.9),
               "Erfinv": (-0.95, 0.95), "Ndtri": (0.02, 0.98), "BesselI0e": (-25, 25),
               "BesselI1e": (-25, 25), "BesselI0": (-25, 25), "BesselI1": (-25, 25)}
TOL = {np.float16: (2e-3, 1e-3), np.float32: (2e-6, 1e-6), np.float64: (1e-12, 1e-300),
       np.complex64: (2e-6, 1e-6)}


class Cases(CaseSet):
    """The cases' graph pieces, arrays and index (tools/fixture_cases.py runs and writes them)."""

    def add(self, name, op, args, grad=(), tol=None, error=None, attrs=None):
        """args: {input name: array}; grad: the args TensorFlow's gradient is taken for."""
        dt = next(iter(args.values())).dtype.type
        rtol, atol = tol or TOL.get(dt, (0, 0))
        with tf.name_scope(name):
            phs = {k: tf.compat.v1.placeholder(v.dtype, v.shape, name=k) for k, v in args.items()}
            out = getattr(R, op)(**phs, **(attrs or {}), name="out")
            self.fetches[f"{name}/out"] = out
            for k, v in args.items():
                self.arrays[f"{name}/{k}"] = v
            if grad:
                w = tf.constant(RNG.uniform(0.5, 1.5, out.shape).astype(out.dtype.as_numpy_dtype))
                loss = tf.reduce_sum(w * out, name="loss")
                for k, d in zip(grad, tf.gradients(loss, [phs[k] for k in grad])):
                    self.fetches[f"{name}/d{k}"] = tf.identity(d, name=f"tf_d{k}")
        self.index.append({"name": name, "op": op, "args": list(args), "grad": list(grad),
                           "rtol": rtol, "atol": atol, "error": error})


def _has_cpu_kernel(op, dt):
    """Whether TensorFlow has a CPU kernel of unary `op` for dtype dt (no half Erfinv), run
    eagerly: call before building the graph."""
    try:
        getattr(R, op)(x=tf.constant(np.zeros(1, dt)))
        return True
    except tf.errors.NotFoundError:
        return False


def _fits(values, dt):
    info = np.finfo(dt)
    v = np.asarray(values, np.float64)
    return v[~(np.abs(v) > info.max) | np.isinf(v)]


def unary_cases(c):
    for op, values in UNARY_VALUES.items():
        lo, hi = RANDOM[op]
        for dt in (np.float32, np.float64, np.float16):
            if (op, dt) in NO_KERNEL:
                continue
            v = _fits(values, dt)
            if dt == np.float16:  # half: moderate values (TF computes half through float)
                v = v[~(np.abs(v) > 8) & ~((v != 0) & (np.abs(v) < 1e-4))]
            v = np.concatenate([v, RNG.uniform(lo, hi, 12)]).astype(dt)
            c.add(f"{op}_{dt.__name__}", op, {"x": v})
        for dt in (np.float32, np.float64):
            glo, ghi = GRAD_DOMAIN[op]
            x = RNG.uniform(glo, ghi, (3, 4))
            if op.startswith("Bessel"):
                x[0, 0] = 0.0
            c.add(f"{op}_{dt.__name__}_grad", op, {"x": x.astype(dt)}, grad=["x"],
                  tol=(1e-5, 1e-6) if dt == np.float32 else (1e-10, 1e-12))
    for op in ("Asinh", "Acosh", "Atanh"):
        z = (RNG.uniform(-2, 2, 8) + 1j * RNG.uniform(-2, 2, 8)).astype(np.complex64)
        c.add(f"{op}_complex64", op, {"x": z}, tol=(1e-5, 1e-6))
    c.add("Asinh_empty", "Asinh", {"x": np.zeros((0, 3), np.float32)})
    c.add("BesselI0e_empty", "BesselI0e", {"x": np.zeros((2, 0), np.float64)})
    c.add("Ndtri_scalar", "Ndtri", {"x": np.float32(0.975)})


def _int_values(dt, n):
    info = np.iinfo(dt)
    edge = [info.min, info.max, 0, 1, info.min + 1, info.max - 1]
    if info.min < 0:
        edge += [-1, -2]
    return np.concatenate([np.array(edge, dt), RNG.integers(info.min, info.max, n - len(edge),
                                                            dtype=dt, endpoint=True)])


def bitwise_cases(c):
    for dt in INTS:
        bits = np.dtype(dt).itemsize * 8
        x, y = _int_values(dt, 12), _int_values(dt, 12)[::-1].copy()
        n = dt.__name__
        for op in ("BitwiseAnd", "BitwiseOr", "BitwiseXor"):
            c.add(f"{op}_{n}", op, {"x": x, "y": y})
        c.add(f"Invert_{n}", "Invert", {"x": x})
        c.add(f"PopulationCount_{n}", "PopulationCount", {"x": x})
        low = -3 if np.iinfo(dt).min < 0 else 0
        shifts = np.array([low, 0, 1, bits - 1, bits, bits + 2, 3, 5, 7, low, bits // 2, 2], dt)
        if np.iinfo(dt).min == 0:
            shifts[-1] = min(200, np.iinfo(dt).max)
        for op in ("LeftShift", "RightShift"):
            c.add(f"{op}_{n}", op, {"x": x, "y": shifts})
    c.add("BitwiseXor_broadcast", "BitwiseXor",
          {"x": _int_values(np.int32, 12).reshape(3, 1, 4), "y": _int_values(np.int32, 8)
           .reshape(2, 4)})
    c.add("LeftShift_broadcast", "LeftShift",
          {"x": _int_values(np.int16, 12)[:6].reshape(2, 3, 1), "y": np.int16([0, 4, 15, 20])})
    c.add("BitwiseAnd_empty", "BitwiseAnd", {"x": np.zeros((0, 4), np.uint8),
                                            "y": np.uint8([1, 2, 3, 4])})
    c.add("PopulationCount_scalar", "PopulationCount", {"x": np.int64(-1)})


def binary_cases(c):
    # Mod: C's % for integers, fmod for floats
    xi = np.array([7, -7, 7, -7, 0, 5, -2**31, 2**31 - 1, 13, -13, 1, 6])
    yi = np.array([3, 3, -3, -3, 5, 7, -1, -2, 13, 4, 1, -6])
    c.add("Mod_int32", "Mod", {"x": xi.astype(np.int32), "y": yi.astype(np.int32)})
    c.add("Mod_int64", "Mod", {"x": (xi * 3**20).astype(np.int64), "y": yi.astype(np.int64)})
    xf = [7.5, -7.5, 7.5, -7.5, 1, INF, 3, NAN, 0, -0.0, 1e30, 2.25]
    yf = [2, 2, -2, -2, 0, 1, INF, 1, 3, 3, 3.5, NAN]
    for dt in (np.float32, np.float64):  # (TensorFlow has no half Mod kernel on CPU)
        c.add(f"Mod_{dt.__name__}", "Mod", {"x": np.array(xf[:-2] + [5, 2.25], dt),
                                            "y": np.array(yf, dt)})
    c.add("Mod_broadcast", "Mod", {"x": RNG.uniform(-9, 9, (3, 1, 4)).astype(np.float32),
                                   "y": RNG.uniform(1, 3, (4,)).astype(np.float32)})
    c.add("Mod_int_zero", "Mod", {"x": np.int32([7, -7]), "y": np.int32([3, 0])},
          error="Integer division by zero")

    specials = {"x": [INF, NAN, 2, INF, 0, -3, 1e30, 0], "y": [0, 0, NAN, 1, INF, 2, 1e30, 0]}
    for dt in (np.float32, np.float64):
        c.add(f"MulNoNan_{dt.__name__}", "MulNoNan",
              {k: np.array(v, dt) for k, v in specials.items()})
    c.add("MulNoNan_complex64", "MulNoNan",
          {"x": np.complex64([1 + 2j, np.inf + 0j, 3j]), "y": np.complex64([0, 0, 2 - 1j])})
    xl = [0, 0, 0, 0, 1, NAN, 2, -1, 3, 0.5]
    yl = [0, NAN, -1, INF, 0, 1, 3, -2, 1e-30, 7]
    for op in ("Xlogy", "Xlog1py"):
        for dt in (np.float32, np.float64, np.float16):
            c.add(f"{op}_{dt.__name__}", op, {"x": np.array(xl, dt), "y": np.array(yl, dt)})
        c.add(f"{op}_complex64", op, {"x": np.complex64([0, 1 + 1j, 2]),
                                      "y": np.complex64([3, 2 - 1j, -1])}, tol=(1e-5, 1e-6))
    for dt in (np.float32, np.float64):
        tol = (1e-5, 1e-6) if dt == np.float32 else (1e-10, 1e-12)
        x = RNG.uniform(-2, 2, (3, 1, 4))
        x[0, 0, :2] = 0
        c.add(f"Xlogy_{dt.__name__}_grad", "Xlogy",
              {"x": x.astype(dt), "y": RNG.uniform(0.1, 3, (2, 4)).astype(dt)},
              grad=["x", "y"], tol=tol)
        c.add(f"Xlog1py_{dt.__name__}_grad", "Xlog1py",
              {"x": x.astype(dt), "y": RNG.uniform(-0.8, 3, (4,)).astype(dt)},
              grad=["x", "y"], tol=tol)
        y = RNG.uniform(-2, 2, (2, 4))
        y[1, 1:3] = 0
        c.add(f"MulNoNan_{dt.__name__}_grad", "MulNoNan",
              {"x": RNG.uniform(-2, 2, (3, 1, 4)).astype(dt), "y": y.astype(dt)},
              grad=["x", "y"], tol=tol)
        c.add(f"MulNoNan_{dt.__name__}_grad_same", "MulNoNan",
              {"x": RNG.uniform(-2, 2, (2, 4)).astype(dt), "y": y.astype(dt)},
              grad=["x", "y"], tol=tol)
    c.add("MulNoNan_empty", "MulNoNan", {"x": np.zeros((0, 3), np.float32),
                                        "y": np.float32([1, 0, 2])})


def clip_cases(c):
    t = RNG.uniform(-5, 5, (3, 4))
    c.add("ClipByValue_float32", "ClipByValue",
          {"t": t.astype(np.float32), "clip_value_min": np.float32(-1),
           "clip_value_max": np.float32(2.5)})
    c.add("ClipByValue_float64_same", "ClipByValue",
          {"t": t, "clip_value_min": RNG.uniform(-3, 0, (3, 4)),
           "clip_value_max": RNG.uniform(0, 3, (3, 4))})
    c.add("ClipByValue_min_above_max", "ClipByValue",
          {"t": np.float32([0, 5, 10]), "clip_value_min": np.float32(6),
           "clip_value_max": np.float32(4)})
    c.add("ClipByValue_nan", "ClipByValue",
          {"t": np.float32([NAN, 5, -INF]), "clip_value_min": np.float32(0),
           "clip_value_max": np.float32(4)})
    for dt in (np.int32, np.int64, np.uint8, np.int8, np.uint16):
        v = _int_values(dt, 10)
        c.add(f"ClipByValue_{dt.__name__}", "ClipByValue",
              {"t": v, "clip_value_min": dt(1), "clip_value_max": dt(100)})
    c.add("ClipByValue_empty", "ClipByValue",
          {"t": np.zeros((0, 2), np.float32), "clip_value_min": np.float32(0),
           "clip_value_max": np.float32(1)})
    c.add("ClipByValue_bad_shape", "ClipByValue",
          {"t": np.ones((2, 3), np.float32), "clip_value_min": np.zeros(3, np.float32),
           "clip_value_max": np.float32(1)},
          error="clip_value_min and clip_value_max must be either of the same shape as input")
    c.add("ClipByValue_rank1_bound", "ClipByValue",
          {"t": np.ones((3,), np.float32), "clip_value_min": np.zeros(1, np.float32),
           "clip_value_max": np.float32(1)},
          error="clip_value_min and clip_value_max must be either of the same shape as input")
    for dt in (np.float32, np.float64):
        tol = (1e-5, 1e-6) if dt == np.float32 else (1e-10, 1e-12)
        c.add(f"ClipByValue_{dt.__name__}_grad", "ClipByValue",
              {"t": t.astype(dt), "clip_value_min": dt(-1), "clip_value_max": dt(2.5)},
              grad=["t", "clip_value_min", "clip_value_max"], tol=tol)
        c.add(f"ClipByValue_{dt.__name__}_grad_same", "ClipByValue",
              {"t": t.astype(dt), "clip_value_min": RNG.uniform(-3, 0, (3, 4)).astype(dt),
               "clip_value_max": RNG.uniform(0, 3, (3, 4)).astype(dt)},
              grad=["t", "clip_value_min", "clip_value_max"], tol=tol)


def main():
    NO_KERNEL.update((op, dt) for op in UNARY_VALUES for dt in (np.float16, np.float32)
                     if not _has_cpu_kernel(op, dt))
    generate(Cases(), (unary_cases, bitwise_cases, binary_cases, clip_cases), OUT, "math_more")


if __name__ == "__main__":
    main()
