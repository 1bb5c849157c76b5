#!/usr/bin/env python3
"""TensorFlow's values and gradients of the FFT and complex-number ops, for
tests/test_spectral_ops.py. NEEDS TENSORFLOW; never imports tfg:

    /work/tfvenv/bin/python tools/gen_spectral_fixtures.py

Writes tests/fixtures/spectral_ops/spectral.npz. Forward: `<name>/in*`, `<name>/out`.
Gradients: for a real loss sum(w * f(a, b)) of real inputs a (and b), `<name>/da` (`/db`),
with f one of the chains in GRADS (each ends in a real value, as tf.signal code does).
"""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures",
                   "spectral_ops", "spectral.npz")
R = tf.raw_ops

# name -> (f(a, b), shape of a, shape of b or None); the raw ops never pad (tf.signal.rfft pads first), and
# TensorFlow's own RFFT gradient fails on a cropping fft_length (tests check that by finite
# differences)
GRADS = {
    "rfft_abs": (lambda a, b: tf.abs(R.RFFT(input=a, fft_length=[8])), (2, 8), None),
    "rfft_parts": (lambda a, b: tf.math.real(R.RFFT(input=a, fft_length=[7])) * 1.5
                   + tf.math.imag(R.RFFT(input=a, fft_length=[7])), (3, 7), None),
    "rfft_pad_odd": (lambda a, b: tf.abs(tf.signal.rfft(a, fft_length=[11])), (2, 8), None),
    "irfft_even": (lambda a, b: R.IRFFT(input=tf.complex(a, b), fft_length=[8]), (2, 5),
                   (2, 5)),
    "irfft_odd": (lambda a, b: R.IRFFT(input=tf.complex(a, b), fft_length=[7]), (3, 4), (3, 4)),
    "fft_ifft": (lambda a, b: tf.math.real(R.FFT(input=tf.complex(a, b))) * 0.7
                 + tf.math.imag(R.IFFT(input=tf.complex(b, a))), (2, 6), (2, 6)),
    "conj_angle": (lambda a, b: tf.math.imag(tf.math.conj(tf.complex(a, b))) * 2.0
                   + tf.abs(tf.complex(a, b)), (4,), (4,)),
    # keras-hub's FNet mixes tokens with FFT2D
    "fft2d_fft3d": (lambda a, b: tf.math.real(R.FFT2D(input=tf.complex(a, b))) * 0.7
                    + tf.math.imag(R.IFFT2D(input=tf.complex(b, a)))
                    + tf.math.real(R.FFT3D(input=tf.complex(a, a * b))) * 0.2
                    + tf.math.imag(R.IFFT3D(input=tf.complex(b, a))) * 3.0,
                    (2, 3, 4, 5), (2, 3, 4, 5)),
}


def main():
    rng = np.random.default_rng(9)
    out = {}
    x = rng.standard_normal((2, 3, 10)).astype(np.float32)
    z = (rng.standard_normal((2, 3, 6)) + 1j * rng.standard_normal((2, 3, 6))).astype(
        np.complex64)
    z2 = (rng.standard_normal((2, 4, 5)) + 1j * rng.standard_normal((2, 4, 5))).astype(
        np.complex64)
    forward = {
        "RFFT-10": (R.RFFT, {"input": x, "fft_length": [10]}),
        "RFFT-7": (R.RFFT, {"input": x, "fft_length": [7]}),
        "IRFFT-10": (R.IRFFT, {"input": z, "fft_length": [10]}),
        "IRFFT-9": (R.IRFFT, {"input": z, "fft_length": [9]}),
        "FFT": (R.FFT, {"input": z}), "IFFT": (R.IFFT, {"input": z}),
        "FFT2D": (R.FFT2D, {"input": z2}), "IFFT2D": (R.IFFT2D, {"input": z2}),
        "RFFT2D": (R.RFFT2D, {"input": x, "fft_length": [3, 8]}),
        "IRFFT2D": (R.IRFFT2D, {"input": z2, "fft_length": [4, 8]}),
        "ComplexAbs": (R.ComplexAbs, {"x": z}), "Angle": (R.Angle, {"input": z}),
        "Real": (R.Real, {"input": z}), "Imag": (R.Imag, {"input": z}),
        "Conj": (R.Conj, {"input": z}),
    }
    for name, (fn, kw) in forward.items():
        out[f"{name}/in"] = kw.get("input", kw.get("x"))
        out[f"{name}/out"] = fn(**kw).numpy()
    for name, (f, sa, sb) in GRADS.items():
        a = tf.constant(rng.standard_normal(sa).astype(np.float32))
        b = tf.constant(rng.standard_normal(sb).astype(np.float32)) if sb else None
        with tf.GradientTape(persistent=True) as tape:
            tape.watch(a)
            if b is not None:
                tape.watch(b)
            y = f(a, b)
            w = tf.constant(rng.uniform(0.5, 1.5, y.shape).astype(np.float32))
            loss = tf.reduce_sum(w * y)
        out[f"{name}/a"], out[f"{name}/w"] = a.numpy(), w.numpy()
        out[f"{name}/da"] = tape.gradient(loss, a).numpy()
        if b is not None:
            out[f"{name}/b"], out[f"{name}/db"] = b.numpy(), tape.gradient(loss, b).numpy()
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    np.savez_compressed(OUT, **out)
    print(OUT, len(out), "arrays")


if __name__ == "__main__":
    main()
