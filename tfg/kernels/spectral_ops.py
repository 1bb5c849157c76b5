"""FFT kernels (numpy.fft, cast back to TensorFlow's dtypes) and the complex-number ops.

    RFFT(x [..., 16], fft_length [16]) -> complex64 [..., 9]

RFFT/IRFFT crop each transformed axis to fft_length first (an input shorter than that is an
error, as in TensorFlow: tf.signal pads before calling them);
IRFFT ignores the imaginary parts of the zero and Nyquist bins (numpy does the same).
"""
import numpy as np

from tfg.kernels._util import fail, np_dtype
from tfg.kernels.registry import ALL_DEVICES, kernel

def _rank(op):
    return 3 if op.endswith("3D") else 2 if op.endswith("2D") else 1


def _axes(x, k):
    if x.ndim < k:
        fail(f"input must have rank at least {k}, got shape {list(x.shape)}")
    return tuple(range(-k, 0))


def _lengths(x, fft_length, k, forward):
    """fft_length, checked as fft_ops.cc does: the op crops its input, never pads it
    (tf.signal.rfft pads before calling it)."""
    n = [int(v) for v in np.asarray(fft_length).reshape(-1)]
    if len(n) != k:
        fail(f"fft_length must have {k} elements, got {len(n)}")
    if any(v < 0 for v in n):
        fail(f"fft_length must be non-negative, got {n}")
    for i, v in enumerate(n):
        need = v if forward or i < k - 1 else v // 2 + 1
        dim = x.ndim - k + i
        if x.shape[dim] < need:
            fail(f"Input dimension {dim} must have length of at least {need} but got: "
                 f"{x.shape[dim]}")
    return n


def _complex_out(ctx, value):
    return np.asarray(value).astype(np_dtype(ctx.attrs["Tcomplex"]), copy=False)


@kernel(["FFT", "FFT2D", "FFT3D", "IFFT", "IFFT2D", "IFFT3D"])
def fft(ctx, x):
    x = np.asarray(x)
    axes = _axes(x, _rank(ctx.op))
    if not x.size:  # (numpy refuses a transform of 0 points; TensorFlow returns the empty input)
        return x.copy()
    fn = np.fft.ifftn if ctx.op.startswith("I") else np.fft.fftn
    return fn(x, axes=axes).astype(x.dtype, copy=False)


@kernel(["RFFT", "RFFT2D", "RFFT3D"], host_inputs=(1,))
def rfft(ctx, x, fft_length):
    x = np.asarray(x)
    k = _rank(ctx.op)
    axes = _axes(x, k)
    n = _lengths(x, fft_length, k, True)
    if not all(n) or not x.size:  # a transform of no points: numpy refuses it; its sums are 0
        return _complex_out(ctx, np.zeros(x.shape[:-k] + tuple(n[:-1]) + (n[-1] // 2 + 1,)))
    return _complex_out(ctx, np.fft.rfftn(x, s=n, axes=axes))


@kernel(["IRFFT", "IRFFT2D", "IRFFT3D"], host_inputs=(1,))
def irfft(ctx, x, fft_length):
    x = np.asarray(x)
    k = _rank(ctx.op)
    axes = _axes(x, k)
    n = _lengths(x, fft_length, k, False)
    # numpy crops the input to s[-1] // 2 + 1 bins on the last axis, as TensorFlow does
    out = (np.fft.irfftn(x, s=n, axes=axes) if all(n) and x.size
           else np.zeros(x.shape[:-k] + tuple(n)))
    return out.astype(np_dtype(ctx.attrs["Treal"]), copy=False)


@kernel("Complex", device_types=ALL_DEVICES)
def complex_(ctx, real, imag):
    xp = ctx.xp
    out = xp.asarray(real) + 1j * xp.asarray(imag)
    return out.astype(np_dtype(ctx.attrs["Tout"]), copy=False)


@kernel(["Real", "Imag", "ComplexAbs", "Angle"], device_types=ALL_DEVICES)
def complex_part(ctx, x):
    xp = ctx.xp
    fn = {"Real": xp.real, "Imag": xp.imag, "ComplexAbs": xp.abs, "Angle": xp.angle}[ctx.op]
    return xp.asarray(fn(xp.asarray(x))).astype(np_dtype(ctx.attrs["Tout"]), copy=False)


@kernel("Conj", device_types=ALL_DEVICES)
def conj(ctx, x):
    return ctx.xp.conj(ctx.xp.asarray(x))
