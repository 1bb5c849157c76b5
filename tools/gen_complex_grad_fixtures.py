#!/usr/bin/env python3
"""TensorFlow's gradients through complex-valued ops (which TensorFlow takes in the conjugate
direction), through the tf.signal transforms built on them, and of the gradients tfg added
for Sinh, Cosh, Asin, Acos, Atan, Atan2, Xdivy, Angle, SegmentProd, DynamicStitch and
Cumprod at zero, for tests/test_complex_grads.py and tests/test_more_grads.py.
NEEDS TENSORFLOW; never imports tfg:

    /work/tfvenv/bin/python tools/gen_complex_grad_fixtures.py

Writes tests/fixtures/complex_grad/: complex_grad.pb (one tf.compat.v1 graph: per case
`<case>/<arg>` placeholders -> `<case>/loss`, a real scalar: real(sum(out * w)) for a complex
output, w a fixed complex constant, or sum(out * w) for a real one), complex_grad.npz
(`<case>/<arg>` feeds and `<case>/grad_<arg>` TensorFlow's tf.gradients of the loss: for a complex
arg the conjugate of dloss/darg, TensorFlow's convention) and cases.json (per case: group
"complex" or "more", args, tolerances).
"""
import json
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from fixture_cases import fixture_dir  # noqa: E402

tf1 = tf.compat.v1
R = tf.raw_ops
OUT = fixture_dir("complex_grad")
RNG = np.random.default_rng(5)
COMPLEX = (np.complex64, np.complex128)
TOL = {np.complex64: (2e-5, 2e-6), np.complex128: (1e-10, 1e-12),
       np.float32: (2e-5, 2e-6), np.float64: (1e-10, 1e-12)}


def cvalues(shape, dtype, re=(0.3, 1.0), im=(-0.6, 0.6)):
    """Complex values with real parts in `re` (away from the branch cuts on the negative real
    axis) and imaginary parts in `im`."""
    v = RNG.uniform(*re, shape) + 1j * RNG.uniform(*im, shape)
    return v.astype(dtype)


def rvalues(shape, dtype, lo=-1.0, hi=1.0):
    return RNG.uniform(lo, hi, shape).astype(dtype)


class Cases:
    def __init__(self):
        self.index, self.arrays, self.grads = [], {}, []

    def add(self, group, name, args, fn, dtype=None, tol=None):
        """args: {arg: value}; fn(*placeholders) -> the output whose weighted sum is the loss."""
        with tf.name_scope(name + "/"):
            phs = [tf1.placeholder(tf.as_dtype(v.dtype), v.shape, name=a)
                   for a, v in args.items()]
            out = fn(*phs)
            w = np.asarray(RNG.uniform(0.5, 1.5, out.shape.as_list()))
            if out.dtype.is_complex:
                w = w + 1j * RNG.uniform(-1, 1, out.shape.as_list())
            w = tf.constant(w.astype(out.dtype.as_numpy_dtype), name="w")
            total = tf.reduce_sum(out * w)
            loss = tf.identity(tf.math.real(total) if out.dtype.is_complex else total,
                               name="loss")
            grads = tf1.gradients(loss, phs)
        for a, v in args.items():
            self.arrays[f"{name}/{a}"] = v
        self.grads.append((name, list(args), phs, grads))
        dtype = dtype or next(iter(args.values())).dtype.type
        rtol, atol = tol or TOL[dtype]
        self.index.append({"name": name, "group": group, "args": list(args),
                           "rtol": rtol, "atol": atol})

    def run(self):
        feeds = {}
        for name, args, phs, _ in self.grads:
            for a, p in zip(args, phs):
                feeds[p] = self.arrays[f"{name}/{a}"]
        fetches = {f"{name}/grad_{a}": g for name, args, _, grads in self.grads
                   for a, g in zip(args, grads)}
        with tf1.Session() as sess:
            values = sess.run(fetches, feeds)
        self.arrays.update({k: np.asarray(v) for k, v in values.items()})


UNARY = {  # op -> (fn, value domain: real-part range)
    "Square": tf.square, "Sqrt": tf.sqrt, "Rsqrt": tf.math.rsqrt,
    "Reciprocal": tf.math.reciprocal, "Inv": lambda x: R.Inv(x=x), "Exp": tf.exp,
    "Expm1": tf.math.expm1, "Log": tf.math.log, "Log1p": tf.math.log1p, "Sin": tf.sin,
    "Cos": tf.cos, "Tan": tf.tan, "Tanh": tf.tanh, "Sigmoid": tf.sigmoid, "Sinh": tf.sinh,
    "Cosh": tf.cosh, "Asin": tf.asin, "Acos": tf.acos, "Atan": tf.atan, "Asinh": tf.asinh,
    "Acosh": lambda x: tf.acosh(x + 1.5), "Atanh": lambda x: tf.atanh(x * 0.5),
}
GRAD_OPS = {  # the *Grad ops' own gradients (second order): y, dy
    "TanhGrad": R.TanhGrad, "SigmoidGrad": R.SigmoidGrad, "SqrtGrad": R.SqrtGrad,
    "RsqrtGrad": R.RsqrtGrad, "ReciprocalGrad": R.ReciprocalGrad,
}


def complex_cases(c):
    for dt in COMPLEX:
        tag = np.dtype(dt).name
        for op, fn in UNARY.items():
            c.add("complex", f"{op}_{tag}", {"x": cvalues((2, 3), dt)}, fn)
        for op, fn in GRAD_OPS.items():
            c.add("complex", f"{op}_{tag}", {"y": cvalues((3,), dt), "dy": cvalues((3,), dt)},
                  lambda y, dy, fn=fn: fn(y=y, dy=dy))
        c.add("complex", f"Mul_{tag}", {"x": cvalues((2, 3), dt), "y": cvalues((3,), dt)},
              tf.multiply)
        c.add("complex", f"Div_{tag}", {"x": cvalues((2, 3), dt), "y": cvalues((2, 1), dt)},
              lambda x, y: R.Div(x=x, y=y))
        c.add("complex", f"RealDiv_{tag}", {"x": cvalues((3,), dt), "y": cvalues((2, 3), dt)},
              lambda x, y: R.RealDiv(x=x, y=y))
        c.add("complex", f"DivNoNan_{tag}", {"x": cvalues((2, 3), dt), "y": cvalues((3,), dt)},
              tf.math.divide_no_nan)
        c.add("complex", f"Pow_{tag}", {"x": cvalues((2, 3), dt), "y": cvalues((3,), dt)},
              tf.pow)
        for ta in (False, True):
            for tb in (False, True):
                a = cvalues((3, 2) if ta else (2, 3), dt)
                b = cvalues((4, 3) if tb else (3, 4), dt)
                c.add("complex", f"MatMul_{int(ta)}{int(tb)}_{tag}", {"a": a, "b": b},
                      lambda a, b, ta=ta, tb=tb: R.MatMul(a=a, b=b, transpose_a=ta,
                                                          transpose_b=tb))
        for ax in (False, True):
            for ay in (False, True):
                x = cvalues((2, 3, 2) if ax else (2, 2, 3), dt)
                y = cvalues((1, 4, 3) if ay else (1, 3, 4), dt)
                c.add("complex", f"BatchMatMulV2_{int(ax)}{int(ay)}_{tag}", {"x": x, "y": y},
                      lambda x, y, ax=ax, ay=ay: R.BatchMatMulV2(x=x, y=y, adj_x=ax, adj_y=ay))
        c.add("complex", f"Einsum_{tag}", {"x": cvalues((2, 3, 4), dt), "y": cvalues((4, 5), dt)},
              lambda x, y: tf.einsum("bij,jk->bik", x, y))
        c.add("complex", f"Prod_{tag}", {"x": cvalues((2, 3, 2), dt)},
              lambda x: tf.reduce_prod(x, axis=[0, 2]))
        c.add("complex", f"Cumprod_{tag}", {"x": cvalues((2, 4), dt)},
              lambda x: tf.math.cumprod(x, axis=1, exclusive=True))
        # the sweep's repro: Complex(x, 2x) times a complex constant
        c.add("complex", f"ComplexMulConst_{tag}", {"x": rvalues((3,), _real(dt))},
              lambda x: tf.complex(x, 2.0 * x) * tf.constant(
                  np.array([1 + 2j, -1j, 0.5 + 0.5j], dt)), dtype=dt)
        c.add("more", f"Angle_{tag}", {"x": cvalues((2, 3), dt, re=(-1, 1))}, tf.math.angle)
    # tf.signal: DCT (an rfft times a complex scale), its inverse and MFCCs
    x = rvalues((2, 16), np.float32)
    c.add("complex", "dct2_ortho", {"x": x}, lambda v: tf.signal.dct(v, type=2, norm="ortho"),
          tol=(1e-4, 1e-5))
    c.add("complex", "dct3", {"x": x}, lambda v: tf.signal.dct(v, type=3), tol=(1e-4, 1e-5))
    c.add("complex", "idct", {"x": x}, lambda v: tf.signal.idct(v, type=2, norm="ortho"),
          tol=(1e-4, 1e-5))
    c.add("complex", "mfcc", {"x": rvalues((2, 4, 16), np.float32)},
          tf.signal.mfccs_from_log_mel_spectrograms, tol=(1e-4, 1e-5))


def _real(dt):
    return np.float32 if dt == np.complex64 else np.float64


def more_cases(c):
    for dt in (np.float32, np.float64):
        tag = np.dtype(dt).name
        for op, fn, lo, hi in (("Sinh", tf.sinh, -2, 2), ("Cosh", tf.cosh, -2, 2),
                               ("Asin", tf.asin, -0.9, 0.9), ("Acos", tf.acos, -0.9, 0.9),
                               ("Atan", tf.atan, -3, 3)):
            c.add("more", f"{op}_{tag}", {"x": rvalues((2, 3), dt, lo, hi)}, fn)
        y = rvalues((2, 3), dt, 0.5, 2)
        c.add("more", f"Atan2_{tag}", {"y": rvalues((2, 3), dt), "x": rvalues((3,), dt)},
              tf.atan2)
        x = rvalues((2, 3), dt)
        x[0, 1] = 0  # TensorFlow's d/dx at x = 0 is 0 (xdivy(0, y))
        c.add("more", f"Xdivy_{tag}", {"x": x, "y": y}, tf.math.xdivy)
        c.add("more", f"Xdivy_bcast_{tag}", {"x": rvalues((3,), dt), "y": y}, tf.math.xdivy)
        # segments: no zero, one zero, two zeros
        data = rvalues((7, 2), dt, 0.5, 1.5)
        data[3, 0] = 0
        data[5, 1] = data[6, 1] = 0
        ids = tf.constant([0, 0, 1, 1, 1, 2, 2])
        c.add("more", f"SegmentProd_{tag}", {"x": data},
              lambda d: tf.reshape(tf.math.segment_prod(d, ids), [3, 2]))
        xz = np.array([[1.5, 0.0, 2.0, 3.0], [0.5, 2.0, 0.0, 0.0]], dt)
        c.add("more", f"Cumprod_zero_{tag}", {"x": xz}, lambda v: tf.math.cumprod(v, axis=1))
        c.add("more", f"Cumprod_zero_ex_rev_{tag}", {"x": xz},
              lambda v: tf.math.cumprod(v, axis=1, exclusive=True, reverse=True))
        c.add("more", f"DynamicStitch_{tag}",
              {"a": rvalues((2, 3), dt), "b": rvalues((1, 2, 3), dt)},
              lambda a, b: tf.reshape(tf.dynamic_stitch(
                  [tf.constant([0, 3]), tf.constant([[1, 3]])], [a, b]), [4, 3]))
    # the Optional ops (control flow v2's cond gradient wraps intermediates in them)
    def optional_round_trip(x, use_both=True):
        o = R.OptionalFromValue(components=[x * 2.0, x])
        a, b = R.OptionalGetValue(optional=o, output_types=[tf.float32] * 2,
                                  output_shapes=[x.shape] * 2)
        return a * b + a if use_both else a * a
    c.add("more", "Optional", {"x": rvalues((2, 3), np.float32)}, optional_round_trip)
    c.add("more", "Optional_one_used", {"x": rvalues((3,), np.float32)},
          lambda x: optional_round_trip(x, use_both=False))
    c.add("more", "Cumprod_zero_sweep", {"x": np.array([1.0, 0.0, 2.0, 3.0], np.float32)},
          lambda v: tf.math.cumprod(v))


def scan_map_cond():
    """A TF2 function (map_fn, a scan with a cond inside, foldl) that takes its own gradient
    with a GradientTape, frozen with functional control flow: its cond gradient holds
    OptionalFromValue / OptionalGetValue. Writes scan_map_cond.pb, scan_map_cond_feeds.npz
    (`x:0`) and scan_map_cond_expected.npz (`Identity:0` the loss, `grad/x:0` TensorFlow's
    gradient of the loss, which the function's fourth output computes)."""
    from tensorflow.python.framework.convert_to_constants import (
        convert_variables_to_constants_v2)
    rng = np.random.default_rng(7)
    w0 = rng.standard_normal((4, 4)).astype(np.float32) * 0.5

    def fn(x):
        w = tf.constant(w0)
        with tf.GradientTape() as tape:
            tape.watch(x)
            a, b = tf.map_fn(lambda r: (tf.reduce_sum(r * r), tf.tanh(r) * 2.0), x,
                             fn_output_signature=(tf.float32, tf.float32))

            def step(acc, r):
                s, c = acc
                s2 = tf.cond(tf.reduce_sum(r) > 0.0,
                             lambda: tf.tanh(tf.linalg.matvec(w, s) + r),
                             lambda: tf.sigmoid(s - r))
                return (s2, c + tf.reduce_max(s2))
            ss, cs = tf.scan(step, x, initializer=(tf.zeros([4]), tf.constant(0.0)))
            f = tf.foldl(lambda acc, r: acc * 0.5 + r, x, initializer=tf.zeros([4]))
            loss = (tf.reduce_sum(a) + tf.reduce_sum(b * ss) + tf.reduce_sum(cs)
                    + tf.reduce_sum(f))
        return loss, ss, cs, tape.gradient(loss, x)

    x = rng.standard_normal((6, 4)).astype(np.float32)
    concrete = tf.function(fn).get_concrete_function(tf.TensorSpec(x.shape, tf.float32,
                                                                   name="x"))
    frozen = convert_variables_to_constants_v2(concrete, lower_control_flow=False)
    gd = frozen.graph.as_graph_def()
    with tf.Graph().as_default() as g:
        tf.graph_util.import_graph_def(gd, name="")
        with tf1.Session(graph=g) as sess:
            loss, dx = sess.run(["Identity:0", "Identity_3:0"], {"x:0": x})
    with open(os.path.join(OUT, "scan_map_cond.pb"), "wb") as f:
        f.write(gd.SerializeToString(deterministic=True))
    np.savez(os.path.join(OUT, "scan_map_cond_feeds.npz"), **{"x:0": x})
    np.savez(os.path.join(OUT, "scan_map_cond_expected.npz"),
             **{"Identity:0": loss, "grad/x:0": dx})


def main():
    os.makedirs(OUT, exist_ok=True)
    scan_map_cond()
    with tf.Graph().as_default() as g:
        c = Cases()
        complex_cases(c)
        more_cases(c)
        c.run()
        gd = g.as_graph_def()
    # the gradient nodes TensorFlow added are not part of the fixture graph
    keep = [n for n in gd.node if not n.name.split("/")[1:2] == ["gradients"]]
    del gd.node[:]
    gd.node.extend(keep)
    with open(os.path.join(OUT, "complex_grad.pb"), "wb") as f:
        f.write(gd.SerializeToString(deterministic=True))
    np.savez_compressed(os.path.join(OUT, "complex_grad.npz"), **c.arrays)
    with open(os.path.join(OUT, "cases.json"), "w") as f:
        json.dump(c.index, f, indent=1)
    print(len(c.index), "cases,", len(gd.node), "nodes")


if __name__ == "__main__":
    main()
