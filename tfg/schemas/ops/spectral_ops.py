"""Signatures of the FFT ops (TensorFlow's spectral_ops.cc) and of the complex-number ops
they come with (Complex, Real, Imag, ComplexAbs, Conj, Angle: math_ops.cc in TensorFlow,
kept here because nothing else in tfg makes complex values).

    >>> get_op("RFFT").attrs["Tcomplex"].default
    <DType.COMPLEX64: 8>

`tf.signal.stft` writes RFFT then ComplexAbs; the FFTs work on the innermost 1-3 axes.
"""
from tfg.schemas.ops.registry import op
from tfg.schemas.ops.shape_fns import (
    ShapeError, broadcast_binary, unchanged, with_rank_at_least)


def _fft_rank(name):
    return 3 if name.endswith("3D") else 2 if name.endswith("2D") else 1


def fft(ctx):
    return [with_rank_at_least(ctx.shape(0), _fft_rank(ctx.node.op), "input")]


def rfft(ctx):
    """input [..., n] with fft_length [m]: [..., m // 2 + 1] (IRFFT: [..., m])."""
    k = _fft_rank(ctx.node.op)
    s = ctx.shape(0)
    with_rank_at_least(s, k, "input")
    lengths = ctx.elems(1)
    if lengths is not None and len(lengths) != k:
        raise ShapeError(f"fft_length must have {k} elements, got {len(lengths)}")
    if s is None:
        return [None]
    if lengths is None:
        return [tuple(s[:-k]) + (None,) * k]
    last = lengths[-1]
    if last is not None and not ctx.node.op.startswith("I"):
        last = last // 2 + 1
    return [tuple(s[:-k]) + tuple(lengths[:-1]) + (last,)]


_COMPLEX = "Tcomplex: {complex64, complex128}"
for _name in ("FFT", "IFFT", "FFT2D", "IFFT2D", "FFT3D", "IFFT3D"):
    op(_name,
       inputs=["input: Tcomplex"],
       outputs=["output: Tcomplex"],
       attrs=[_COMPLEX + " = DT_COMPLEX64"],
       shape_fn=fft)
for _name in ("RFFT", "RFFT2D", "RFFT3D"):
    op(_name,
       inputs=["input: Treal", "fft_length: int32"],
       outputs=["output: Tcomplex"],
       attrs=["Treal: {float, double} = DT_FLOAT", _COMPLEX + " = DT_COMPLEX64"],
       shape_fn=rfft)
for _name in ("IRFFT", "IRFFT2D", "IRFFT3D"):
    op(_name,
       inputs=["input: Tcomplex", "fft_length: int32"],
       outputs=["output: Treal"],
       attrs=["Treal: {float, double} = DT_FLOAT", _COMPLEX + " = DT_COMPLEX64"],
       shape_fn=rfft)

# --- complex numbers
op("Complex",
   inputs=["real: T", "imag: T"],
   outputs=["out: Tout"],
   attrs=["T: {float, double} = DT_FLOAT", "Tout: {complex64, complex128} = DT_COMPLEX64"],
   shape_fn=broadcast_binary,
   traits=["elementwise"])
for _name in ("Real", "Imag", "ComplexAbs", "Angle"):
    op(_name,
       inputs=["input: T"] if _name != "ComplexAbs" else ["x: T"],
       outputs=["output: Tout"] if _name != "ComplexAbs" else ["y: Tout"],
       attrs=["T: {complex64, complex128} = DT_COMPLEX64", "Tout: {float, double} = DT_FLOAT"],
       shape_fn=unchanged,
       traits=["elementwise"])
op("Conj",
   inputs=["input: T"],
   outputs=["output: T"],
   attrs=["T: {complex64, complex128, variant} = DT_COMPLEX64"],
   shape_fn=unchanged,
   traits=["elementwise"])
