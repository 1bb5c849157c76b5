"""Gradients of the FFTs and the complex-number ops (TensorFlow's fft_ops grads and
math_grad.py). A complex gradient is dL/dRe + i dL/dIm, TensorFlow's convention.

    Before: y = FFT2D(x)            After: IFFT2D(g) * (x's last two dims' size)
    Before: y = RFFT(x, [n])        After: Real(IFFT(Pad(g, to n bins)) * n), cropped or
                                            padded back to x's last axis
    Before: y = ComplexAbs(x)       After: DivNoNan(Complex(g, 0) * x, Complex(y, 0))

RFFT's gradient is Re(F^H g) for the rfft matrix F, i.e. n * ifft of g zero-filled to n
bins; IRFFT's is rfft(g) / n with the bins that irfft counts twice doubled. The 2-D and 3-D
real FFTs (RFFT2D, IRFFT3D, ...) have no gradient here (tfg grad names the node).
"""
import numpy as np

from tfg.errors import TfgInputError
from tfg.passes.grad.registry import broadcast_binary, gradient, unary
from tfg.schemas.dtypes import DType

I32 = DType.INT32
_REAL = {DType.COMPLEX64: DType.FLOAT, DType.COMPLEX128: DType.DOUBLE}


def _static_length(b, op):
    n = op.const_input(1)
    if n is None or np.asarray(n).size != 1:
        raise TfgInputError(f"tfg grad: {op.type} node {op.name!r} needs a constant 1-element "
                            "fft_length to be differentiated")
    return int(np.asarray(n).reshape(-1)[0])


def _last_dim(b, op, i):
    """(rank or None, innermost size): the size an int when shape inference knows it, else a
    scalar int32 tensor read from Shape at run time."""
    s = b.static_shape(op.inputs[i])
    if s is not None:
        return len(s), s[-1]
    shape = b.op("Shape", [op.inputs[i]], {"out_type": I32})
    last = b.op("StridedSlice", [shape, b.const([-1], I32), b.const([0], I32),
                                 b.const([1], I32)],
                {"shrink_axis_mask": 1, "end_mask": 1})
    return b.builder.static_rank(op.inputs[i]), last


def _size_as(b, n, dtype):
    """n (an int or a scalar int32 tensor) as a scalar of `dtype`."""
    if isinstance(n, int):
        return b.const(n, dtype)
    return b.op("Cast", [n], {"DstT": dtype})


def _fit_last(b, t, rank, have, want):
    """Crop or zero-pad t's innermost axis from `have` to `want` elements (`want` an int, or
    a scalar tensor not below `have`: zero-padding only). rank None: known only at run time."""
    if rank is None and isinstance(want, int) and have > want:
        # t[..., :want]: an ellipsis slice needs no rank
        return b.op("StridedSlice", [t, b.const([0, 0], I32), b.const([0, want], I32),
                                     b.const([1, 1], I32)],
                    {"ellipsis_mask": 1, "begin_mask": 2})
    if rank is None and isinstance(want, int) and have < want:
        want = b.const(want, I32)
    if not isinstance(want, int):
        extra = b.op("Sub", [want, b.const(have, I32)])
        row = b.op("Reshape", [b.op("Pack", [b.const(0, I32), extra], {"axis": 0}),
                               b.const([1, 2], I32)])
        if rank is not None:
            lead = b.const(np.zeros((rank - 1, 2), np.int32), I32)
        else:  # rank known only at run time: Fill([Rank(t) - 1, 2], 0)
            outer = b.op("Sub", [b.op("Rank", [t]), b.const(1, I32)])
            dims = b.op("Pack", [outer, b.const(2, I32)], {"axis": 0})
            lead = b.op("Fill", [dims, b.const(0, I32)])
        pads = b.op("ConcatV2", [lead, row, b.const(0, I32)])
        return b.op("Pad", [t, pads])
    if have > want:
        return b.op("Slice", [t, b.const([0] * rank, I32),
                              b.const([-1] * (rank - 1) + [want], I32)])
    if have < want:
        pads = [[0, 0]] * (rank - 1) + [[0, want - have]]
        return b.op("Pad", [t, b.const(pads, I32)])
    return t


def _complex(b, re, im):
    return b.op("Complex", [re, im], {"Tout": {DType.FLOAT: DType.COMPLEX64,
                                               DType.DOUBLE: DType.COMPLEX128}[b.dtype(re)]})


def _inner_size(b, op, k):
    """The number of elements in the innermost k axes of input 0 (what an FFT over them
    sums): an int when shape inference knows them, else a scalar int32 tensor."""
    s = b.static_shape(op.inputs[0])
    if s is not None and len(s) >= k and all(d is not None for d in s[len(s) - k:]):
        return int(np.prod(s[len(s) - k:], dtype=np.int64))
    if k == 1:
        return _last_dim(b, op, 0)[1]
    shape = b.op("Shape", [op.inputs[0]], {"out_type": I32})
    inner = b.op("StridedSlice", [shape, b.const([-k], I32), b.const([0], I32),
                                  b.const([1], I32)], {"end_mask": 1})
    return b.op("Prod", [inner, b.const([0], I32)])


def _register_fft(k, fft, ifft):
    """FFT over the innermost k axes: its gradient is n * IFFT(g) (F^H = n F^-1), IFFT's
    is FFT(g) / n, n the number of elements transformed."""
    @unary(fft)
    def _fft(b, op, g):
        n = _inner_size(b, op, k)
        return b.op("Mul", [b.op(ifft, [g]), _size_as(b, n, op.input_dtype(0))])

    @unary(ifft)
    def _ifft(b, op, g):
        n = _inner_size(b, op, k)
        if isinstance(n, int):
            return b.op("Mul", [b.op(fft, [g]), b.const(1.0 / max(n, 1), op.input_dtype(0))])
        return b.op("DivNoNan", [b.op(fft, [g]), _size_as(b, n, op.input_dtype(0))])


for _k, _fft_op, _ifft_op in ((1, "FFT", "IFFT"), (2, "FFT2D", "IFFT2D"), (3, "FFT3D", "IFFT3D")):
    _register_fft(_k, _fft_op, _ifft_op)


@gradient("RFFT")
def _rfft(b, op, grads):
    n = _static_length(b, op)
    rank, length = _last_dim(b, op, 0)
    g = _fit_last(b, grads[0], rank, n // 2 + 1, n)  # the bins rfft dropped get nothing
    real = b.op("Real", [b.op("IFFT", [g])], {"Tout": op.input_dtype(0)})
    x_grad = b.op("Mul", [real, b.const(n, op.input_dtype(0))])
    return [_fit_last(b, x_grad, rank, n, length), None]


@gradient("IRFFT")
def _irfft(b, op, grads):
    n = _static_length(b, op)
    rank, bins = _last_dim(b, op, 0)
    z = b.op("RFFT", [grads[0], b.const([n], I32)], {"Tcomplex": op.input_dtype(0)})
    twice = np.full(n // 2 + 1, 2.0 / max(n, 1))
    twice[0] = 1.0 / max(n, 1)
    if n % 2 == 0:
        twice[-1] = 1.0 / max(n, 1)
    scaled = b.op("Mul", [z, b.const(twice, op.input_dtype(0))])
    return [_fit_last(b, scaled, rank, n // 2 + 1, bins), None]


@unary("Real")
def _real(b, op, g):
    return _complex(b, g, b.zeros_like(g))


@unary("Imag")
def _imag(b, op, g):
    return _complex(b, b.zeros_like(g), g)


@unary("Conj")
def _conj(b, op, g):
    return b.op("Conj", [g])


@unary("ComplexAbs")
def _complex_abs(b, op, g):
    num = b.op("Mul", [_complex(b, g, b.zeros_like(g)), op.inputs[0]])
    den = _complex(b, op.outputs[0], b.zeros_like(op.outputs[0]))
    return b.op("DivNoNan", [num, den])


@unary("Angle")
def _angle(b, op, g):
    """-Complex(g, 0) / (Im(x) + i Re(x)), TensorFlow's rule."""
    x = op.inputs[0]
    real = _REAL[op.input_dtype(0)]
    re = b.op("Real", [x], {"Tout": real})
    im = b.op("Imag", [x], {"Tout": real})
    z = b.op("Reciprocal", [_complex(b, im, re)])
    complex_grad = _complex(b, g, b.scalar_like(0, g))
    return b.op("Mul", [b.op("Neg", [complex_grad]), z])


@gradient("Complex")
def _complex_grad(b, op, grads):
    real = _REAL[op.output_dtype(0)]
    gx = b.op("Real", [grads[0]], {"Tout": real})
    gy = b.op("Imag", [grads[0]], {"Tout": real})
    return list(broadcast_binary(b, op.inputs[0], op.inputs[1], gx, gy))
