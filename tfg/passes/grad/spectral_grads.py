"""Gradients of the FFTs and the complex-number ops (TensorFlow's fft_ops grads and
math_grad.py). A complex gradient is dL/dRe + i dL/dIm, TensorFlow's convention.

    Before: y = FFT2D(x)            After: IFFT2D(g) * (x's last two dims' size)
    Before: y = RFFT2D(x, [m, n])   After: Real(IFFT2D(Pad(g, to n bins)) * m*n), zero-padded
                                            back to x's innermost dims where RFFT2D cropped x
    Before: y = ComplexAbs(x)       After: DivNoNan(Complex(g, 0) * x, Complex(y, 0))

RFFT's gradient (1-D, 2-D, 3-D) is Re(F^H g) for the rfft matrix F, i.e. n * ifft of g
zero-filled to the full spectrum; IRFFT's is rfft(g) / n with the bins that irfft counts
twice doubled (TensorFlow's _irfft_grad_helper). TensorFlow registers the 1-D and 2-D ones
(its RFFT2D rule adds matmul correction terms to an IRFFT2D: the same values); tfg also
differentiates RFFT3D and IRFFT3D, which TensorFlow refuses.
"""
import numpy as np

from tfg.errors import TfgInputError
from tfg.passes.grad.registry import broadcast_binary, gradient, unary
from tfg.schemas.dtypes import DType

I32 = DType.INT32
_REAL = {DType.COMPLEX64: DType.FLOAT, DType.COMPLEX128: DType.DOUBLE}


def _static_lengths(b, op, k):
    """fft_length as k ints: the gradient's shapes and scale are built from it."""
    n = op.const_input(1)
    if n is None or np.asarray(n).size != k:
        raise TfgInputError(f"tfg grad: {op.type} node {op.name!r} needs a constant {k}-element "
                            "fft_length to be differentiated")
    return [int(v) for v in np.asarray(n).reshape(-1)]


def _inner_dims(b, op, k):
    """(rank or None, input 0's innermost k sizes): ints when shape inference knows them,
    else scalar int32 tensors read from Shape at run time."""
    s = b.static_shape(op.inputs[0])
    if s is not None:
        if len(s) < k:
            raise TfgInputError(f"tfg grad: {op.type} node {op.name!r}: input must have rank "
                                f"at least {k}, got shape {list(s)}")
        return len(s), list(s[len(s) - k:])
    shape = b.op("Shape", [op.inputs[0]], {"out_type": I32})
    dims = [b.op("StridedSlice", [shape, b.const([i], I32), b.const([i + 1], I32),
                                  b.const([1], I32)],
                 {"shrink_axis_mask": 1, "end_mask": int(i == -1)}) for i in range(-k, 0)]
    return b.builder.static_rank(op.inputs[0]), dims


def _fit_inner(b, t, rank, have, want):
    """Crop or zero-pad t's innermost len(have) axes from `have` to `want` sizes (ints; a
    `want` may be a scalar tensor not below its `have`: zero-padding only). rank None:
    known only at run time.

        have [5, 3], want [8, 2]  ->  Pad(t[..., :2], [..., [0, 3], [0, 0]])
    """
    k = len(have)
    crop = [isinstance(w, int) and w < h for h, w in zip(have, want)]
    if any(crop):
        # t[..., :w] on the cropped axes: an ellipsis slice needs no rank
        end_mask = sum(1 << (i + 1) for i in range(k) if not crop[i])
        t = b.op("StridedSlice", [t, b.const([0] * (k + 1), I32),
                                  b.const([0] + [w if c else 0 for w, c in zip(want, crop)], I32),
                                  b.const([1] * (k + 1), I32)],
                 {"ellipsis_mask": 1, "end_mask": end_mask})
        have = [w if c else h for h, w, c in zip(have, want, crop)]
    extra = [w - h if isinstance(w, int) else b.op("Sub", [w, b.const(h, I32)])
             for h, w in zip(have, want)]
    if all(isinstance(e, int) and e == 0 for e in extra):
        return t
    if rank is not None and all(isinstance(e, int) for e in extra):
        return b.op("Pad", [t, b.const([[0, 0]] * (rank - k) + [[0, e] for e in extra], I32)])
    after = b.op("Pack", [b.const(e, I32) if isinstance(e, int) else e for e in extra],
                 {"axis": 0})
    rows = b.op("Pack", [b.const([0] * k, I32), after], {"axis": 1})
    if rank is not None:
        lead = b.const(np.zeros((rank - k, 2), np.int32), I32)
    else:  # rank known only at run time: Fill([Rank(t) - k, 2], 0)
        outer = b.op("Sub", [b.op("Rank", [t]), b.const(k, I32)])
        lead = b.op("Fill", [b.op("Pack", [outer, b.const(2, I32)], {"axis": 0}),
                             b.const(0, I32)])
    return b.op("Pad", [t, b.op("ConcatV2", [lead, rows, b.const(0, I32)])])


def _size_as(b, n, dtype):
    """n (an int or a scalar int32 tensor) as a scalar of `dtype`."""
    if isinstance(n, int):
        return b.const(n, dtype)
    return b.op("Cast", [n], {"DstT": dtype})


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
        return _inner_dims(b, op, 1)[1][0]
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


def _half(n):
    """The shape of an rfft over lengths n: the last axis keeps n // 2 + 1 bins."""
    return n[:-1] + [n[-1] // 2 + 1]


def _irfft_weights(n):
    """1 / prod(n) for the bins irfft counts once (zero, and Nyquist when n[-1] is even),
    2 / prod(n) for the ones it counts twice (they stand for their mirror images too)."""
    size = max(int(np.prod(n)), 1)
    weights = np.full(n[-1] // 2 + 1, 2.0 / size)
    weights[0] = 1.0 / size
    if n[-1] % 2 == 0:
        weights[-1] = 1.0 / size
    return weights


def _register_real_fft(k, rfft, irfft, ifft):
    """The real FFTs over the innermost k axes. RFFT's gradient is Re(F^H g), F the
    full k-D DFT: g zero-filled to the full spectrum (the dropped Hermitian half gets
    nothing), prod(n) * IFFT, real part, zero-padded back where the op cropped x. IRFFT's
    is RFFT(g) weighted by _irfft_weights (TensorFlow's _irfft_grad_helper)."""
    @gradient(rfft)
    def _rfft(b, op, grads):
        n = _static_lengths(b, op, k)
        rank, dims = _inner_dims(b, op, k)
        g = _fit_inner(b, grads[0], rank, _half(n), n)
        real = b.op("Real", [b.op(ifft, [g])], {"Tout": op.input_dtype(0)})
        x_grad = b.op("Mul", [real, b.const(int(np.prod(n)), op.input_dtype(0))])
        return [_fit_inner(b, x_grad, rank, n, dims), None]

    @gradient(irfft)
    def _irfft(b, op, grads):
        n = _static_lengths(b, op, k)
        rank, dims = _inner_dims(b, op, k)
        z = b.op(rfft, [grads[0], b.const(n, I32)], {"Tcomplex": op.input_dtype(0)})
        scaled = b.op("Mul", [z, b.const(_irfft_weights(n), op.input_dtype(0))])
        return [_fit_inner(b, scaled, rank, _half(n), dims), None]


for _k, _rfft_op, _irfft_op, _ifft_op in ((1, "RFFT", "IRFFT", "IFFT"),
                                          (2, "RFFT2D", "IRFFT2D", "IFFT2D"),
                                          (3, "RFFT3D", "IRFFT3D", "IFFT3D")):
    _register_real_fft(_k, _rfft_op, _irfft_op, _ifft_op)


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
