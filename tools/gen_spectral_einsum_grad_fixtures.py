#!/usr/bin/env python3
"""TensorFlow's gradients of the 2-D and 3-D real FFTs and of Einsum with a label repeated
within one operand (a diagonal or a trace), for tests/test_spectral_einsum_grad.py.
NEEDS TENSORFLOW; never imports tfg:

    /work/tfvenv/bin/python tools/gen_spectral_einsum_grad_fixtures.py

Writes tests/fixtures/spectral_einsum_grad/: graph.pb (one tf.compat.v1 graph: per case
`<case>/<arg>` placeholders -> `<case>/loss`, a real scalar: real(sum(out * w)) for a complex
output, w a fixed complex constant, or sum(out * w) for a real one; and TensorFlow's own
gradient nodes), arrays.npz (`<case>/<arg>` feeds, `<case>/grad_<arg>` TensorFlow's
tf.gradients of the loss: for a complex arg the conjugate of dloss/darg, TensorFlow's
convention) and cases.json (per case: args, tolerances, the names of TensorFlow's gradient
tensors in graph.pb, or null where they were taken from an equivalent graph).

TensorFlow registers no gradient for RFFT3D and IRFFT3D: their cases take TensorFlow's
gradients of the same transform written with ops it can differentiate (RFFT or IRFFT on the
last axis, FFT2D or IFFT2D on the two before it, transposes), checked here to give the same
forward values; the loss in graph.pb is still over RFFT3D / IRFFT3D.
"""
import json
import os
import pathlib

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

tf1 = tf.compat.v1
R = tf.raw_ops
OUT = pathlib.Path(__file__).resolve().parent.parent / "tests" / "fixtures" / "spectral_einsum_grad"
RNG = np.random.default_rng(11)
TOL = {np.float32: (1e-4, 1e-5), np.complex64: (1e-4, 1e-5),
       np.float64: (1e-10, 1e-12), np.complex128: (1e-10, 1e-12)}
COMPLEX_OF = {np.float32: np.complex64, np.float64: np.complex128}


def real(shape, dtype):
    return RNG.uniform(-1, 1, shape).astype(dtype)


def cplx(shape, dtype):
    return (RNG.uniform(-1, 1, shape) + 1j * RNG.uniform(-1, 1, shape)).astype(dtype)


class Cases:
    def __init__(self):
        self.index, self.arrays, self.pending = [], {}, []

    def add(self, name, args, fn, ref=None):
        """args: {arg: value}; fn(*placeholders) -> the output whose weighted sum is the loss.
        ref: the same function written with ops TensorFlow differentiates (fn's has none)."""
        with tf.name_scope(name + "/"):
            phs = [tf1.placeholder(tf.as_dtype(v.dtype), v.shape, name=a)
                   for a, v in args.items()]
            out = fn(*phs)
            w = RNG.uniform(0.5, 1.5, out.shape.as_list())
            if out.dtype.is_complex:
                w = w + 1j * RNG.uniform(-1, 1, out.shape.as_list())
            w = tf.constant(w.astype(out.dtype.as_numpy_dtype), name="w")

            def loss_of(y):
                total = tf.reduce_sum(y * w)
                return tf.math.real(total) if y.dtype.is_complex else total
            loss = tf.identity(loss_of(out), name="loss")
            if ref is None:
                grads = tf1.gradients(loss, phs)
            else:
                with tf.name_scope("ref"):
                    ref_out = ref(*phs)
                    grads = tf1.gradients(loss_of(ref_out), phs)
        for a, v in args.items():
            self.arrays[f"{name}/{a}"] = v
        self.pending.append((name, list(args), phs, grads, out, ref and ref_out))
        rtol, atol = TOL[next(iter(args.values())).dtype.type]
        self.index.append({"name": name, "args": list(args), "rtol": rtol, "atol": atol,
                           "tf_grads": None if ref else [g.name for g in grads]})

    def run(self):
        feeds = {p: self.arrays[f"{name}/{a}"]
                 for name, args, phs, *_ in self.pending for a, p in zip(args, phs)}
        fetches = {f"{name}/grad_{a}": g for name, args, _, grads, *_ in self.pending
                   for a, g in zip(args, grads)}
        checks = {name: (out, ref_out) for name, _, _, _, out, ref_out in self.pending
                  if ref_out is not None}
        with tf1.Session() as sess:
            values, same = sess.run([fetches, checks], feeds)
        for name, (y, y_ref) in same.items():  # the equivalent graph computes the same thing
            np.testing.assert_allclose(y, y_ref, rtol=1e-4, atol=1e-4, err_msg=name)
        self.arrays.update({k: np.asarray(v) for k, v in values.items()})


def _inner3_last_first(t):
    """[..., a, b, c] -> [..., c, a, b] (static rank)."""
    r = t.shape.rank
    return tf.transpose(t, list(range(r - 3)) + [r - 1, r - 3, r - 2])


def _inner3_first_last(t):
    """[..., c, a, b] -> [..., a, b, c]."""
    r = t.shape.rank
    return tf.transpose(t, list(range(r - 3)) + [r - 2, r - 1, r - 3])


def rfft3d_ref(x, n):
    """RFFT3D(x, n) for x's innermost dims equal to n: RFFT on the last axis, FFT2D on the
    two before it."""
    y = R.RFFT(input=x, fft_length=n[-1:], Tcomplex=COMPLEX_OF[x.dtype.as_numpy_dtype])
    return _inner3_first_last(R.FFT2D(input=_inner3_last_first(y)))


def irfft3d_ref(z, n):
    """IRFFT3D(z, n) for z's innermost dims equal to [n0, n1, n2 // 2 + 1]."""
    y = _inner3_first_last(R.IFFT2D(input=_inner3_last_first(z)))
    return R.IRFFT(input=y, fft_length=n[-1:], Treal=z.dtype.real_dtype)


def spectral_cases(c):
    for dt in (np.float32, np.float64):
        tag = np.dtype(dt).name
        ct = COMPLEX_OF[dt]
        for shape, n in (((2, 4, 6), [4, 6]), ((3, 5), [3, 5]), ((1, 2, 1, 3), [1, 3])):
            c.add(f"RFFT2D_{'x'.join(map(str, shape))}_{tag}", {"x": real(shape, dt)},
                  lambda x, n=n: R.RFFT2D(input=x, fft_length=n, Tcomplex=ct))
            bins = tuple(shape[:-1]) + (n[-1] // 2 + 1,)
            c.add(f"IRFFT2D_{'x'.join(map(str, bins))}_{tag}", {"z": cplx(bins, ct)},
                  lambda z, n=n: R.IRFFT2D(input=z, fft_length=n, Treal=dt))
        for shape in ((2, 3, 4, 6), (3, 2, 5)):
            n = list(shape[-3:])
            c.add(f"RFFT3D_{'x'.join(map(str, shape))}_{tag}", {"x": real(shape, dt)},
                  lambda x, n=n: R.RFFT3D(input=x, fft_length=n, Tcomplex=ct),
                  ref=lambda x, n=n: rfft3d_ref(x, n))
            bins = tuple(shape[:-1]) + (shape[-1] // 2 + 1,)
            c.add(f"IRFFT3D_{'x'.join(map(str, bins))}_{tag}", {"z": cplx(bins, ct)},
                  lambda z, n=n: R.IRFFT3D(input=z, fft_length=n, Treal=dt),
                  ref=lambda z, n=n: irfft3d_ref(z, n))


EINSUM = [  # (case, equation, operand shapes)
    ("diag", "ii->i", [(3, 3)]),
    ("trace", "ii->", [(4, 4)]),
    ("partial_trace", "iij->j", [(2, 2, 4)]),
    ("double_trace", "aabbcd->ca", [(2, 2, 3, 3, 2, 4)]),
    ("transposed_diag", "jii->ij", [(2, 3, 3)]),
    ("inflate", "i->ii", [(3,)]),
    ("batch_diag", "...ii->...i", [(2, 3, 3)]),
    ("diag_times", "ii,ij->j", [(3, 3), (3, 2)]),
    ("batch_repeated", "bii,bj->bij", [(2, 3, 3), (2, 4)]),
    ("other_repeated", "ij,jj->i", [(2, 3), (3, 3)]),
    ("both_repeated", "bii,bjj->bij", [(2, 3, 3), (2, 4, 4)]),
    ("broadcast_diag", "...ii,...i->...i", [(2, 3, 3), (1, 3)]),
]


def einsum_cases(c):
    for case, eq, shapes in EINSUM:
        for dt in (np.float32, np.float64):
            args = {f"x{i}": real(s, dt) for i, s in enumerate(shapes)}
            c.add(f"Einsum_{case}_{np.dtype(dt).name}", args,
                  lambda *xs, eq=eq: R.Einsum(inputs=list(xs), equation=eq))
    for case, eq, shapes in (EINSUM[1], EINSUM[8], EINSUM[9]):
        args = {f"x{i}": cplx(s, np.complex64) for i, s in enumerate(shapes)}
        c.add(f"Einsum_{case}_complex64", args,
              lambda *xs, eq=eq: R.Einsum(inputs=list(xs), equation=eq))


def main():
    OUT.mkdir(parents=True, exist_ok=True)
    with tf.Graph().as_default() as graph:
        c = Cases()
        spectral_cases(c)
        einsum_cases(c)
        c.run()
    (OUT / "graph.pb").write_bytes(graph.as_graph_def().SerializeToString())
    np.savez_compressed(OUT / "arrays.npz", **c.arrays)
    (OUT / "cases.json").write_text(json.dumps(c.index, indent=1) + "\n")
    print(f"{len(c.index)} cases -> {OUT}")


if __name__ == "__main__":
    main()
