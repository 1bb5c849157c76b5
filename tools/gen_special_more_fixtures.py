#!/usr/bin/env python3
"""TensorFlow's values of Igamma, Igammac, IgammaGradA, Zeta and Polygamma on a grid with
edge cases (x = 0, large a, NaN, poles, the domain's edges), and the gradients TensorFlow
registers for them and for Digamma, for tests/test_special_more_ops.py.
NEEDS TENSORFLOW; never imports tfg:

    /work/tfvenv/bin/python tools/gen_special_more_fixtures.py

Writes tests/fixtures/special_more/ops.npz: for each case `<case>/op`, `<case>/in0`,
`<case>/in1` (broadcast against each other) and `<case>/out`; gradient cases `grad-<op>-<dtype>`
hold `in0`, `in1`, `w` (the loss is sum(w * op(in0, in1))) and TensorFlow's `d0`, `d1` (absent
where TensorFlow's gradient is None).
"""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from fixture_cases import fixture_dir, write_arrays  # noqa: E402

DIR = fixture_dir("special_more")
RNG = np.random.default_rng(3)
R = tf.raw_ops


def _grid_igamma():
    a = np.array([1e-3, 0.1, 0.5, 1, 2.5, 7, 30, 150, 1e4], np.float64)
    x = np.array([0, 1e-4, 0.05, 0.5, 1, 2, 6.5, 25, 140, 1.1e4, np.inf], np.float64)
    a, x = [v.ravel() for v in np.meshgrid(a, x)]
    a = np.concatenate([a, [np.nan, 1.0, -1.0, 0.0, 2.0, np.inf]])
    x = np.concatenate([x, [1.0, np.nan, 1.0, 1.0, -0.5, 3.0]])
    return a, x


def _grid_zeta():
    x = np.array([1.0, 1.0001, 1.5, 2, 3, 4.5, 10, 40, 0.5, np.nan], np.float64)
    q = np.array([1e-3, 0.5, 1, 2.5, 9.5, 30, 1e3, -1.5, -2.0, 0.0], np.float64)
    x, q = [v.ravel() for v in np.meshgrid(x, q)]
    return x, q


def _grid_polygamma():
    n = np.array([0, 1, 2, 3, 5, 10, 1.5, -1], np.float64)
    x = np.array([0.01, 0.5, 1, 2.5, 10, 100, -0.5, -2.0, 0.0, np.nan], np.float64)
    n, x = [v.ravel() for v in np.meshgrid(n, x)]
    return n, x


GRIDS = {"Igamma": _grid_igamma, "Igammac": _grid_igamma, "IgammaGradA": _grid_igamma,
         "Zeta": _grid_zeta, "Polygamma": _grid_polygamma}
NAMES = {"Igamma": ("a", "x"), "Igammac": ("a", "x"), "IgammaGradA": ("a", "x"),
         "Zeta": ("x", "q"), "Polygamma": ("a", "x")}


def _run(fetch):
    with tf.compat.v1.Session() as s:
        return s.run(fetch)


def value_cases(out):
    for op, grid in GRIDS.items():
        in0, in1 = grid()
        for dt in (np.float32, np.float64):  # (TensorFlow's CPU kernels: no half, bfloat16)
            a, b = in0.astype(dt), in1.astype(dt)
            with tf.Graph().as_default():
                n0, n1 = NAMES[op]
                y = _run(getattr(R, op)(**{n0: tf.constant(a), n1: tf.constant(b)}))
            key = f"{op}-{np.dtype(dt).name}"
            out[f"{key}/op"], out[f"{key}/in0"], out[f"{key}/in1"] = np.array(op), a, b
            out[f"{key}/out"] = y
    # broadcasting: a [3, 1] against x [4]
    a, x = np.float32([[0.5], [2], [9]]), np.float32([0.2, 1.5, 4, 12])
    with tf.Graph().as_default():
        out["Igamma-bcast/out"] = _run(R.Igamma(a=tf.constant(a), x=tf.constant(x)))
    out["Igamma-bcast/op"], out["Igamma-bcast/in0"], out["Igamma-bcast/in1"] = (
        np.array("Igamma"), a, x)


def _grad_case(out, op, in0, in1):
    key = f"grad-{op}-{in0.dtype.name}"
    with tf.Graph().as_default():
        p0, p1 = tf.constant(in0), tf.constant(in1)
        if op == "Digamma":
            y = R.Digamma(x=p1)
        else:
            n0, n1 = NAMES[op]
            y = getattr(R, op)(**{n0: p0, n1: p1})
        w = RNG.standard_normal(y.shape).astype(in0.dtype)
        d0, d1 = tf.compat.v1.gradients(tf.reduce_sum(y * w), [p0, p1])
        res = _run({k: v for k, v in (("d0", d0), ("d1", d1)) if v is not None})
    out[f"{key}/op"], out[f"{key}/in0"], out[f"{key}/in1"], out[f"{key}/w"] = (
        np.array(op), in0, in1, w)
    for k, v in res.items():
        out[f"{key}/{k}"] = v


def grad_cases(out):
    for dt in (np.float32, np.float64):
        a = np.array([[0.3], [1.5], [4.0]], dt)
        x = np.array([0.2, 0.9, 2.5, 7.0], dt)
        for op in ("Igamma", "Igammac"):
            _grad_case(out, op, a, x)
        _grad_case(out, "Zeta", np.array([[1.5], [3.0]], dt), np.array([0.5, 2.0, 7.5], dt))
        _grad_case(out, "Polygamma", np.array([[0.0], [1.0], [3.0]], dt),
                   np.array([0.4, 2.0, 9.0], dt))
        _grad_case(out, "Digamma", np.zeros(1, dt), np.array([0.3, 1.0, 4.5, -1.5], dt))


def main():
    write_arrays(DIR, "ops.npz", (value_cases, grad_cases))


if __name__ == "__main__":
    main()
