"""Compiled float32 loops of the exp family (Sigmoid, swish, Tanh), and of MobileNetV3's hard
swish and hard sigmoid, TanhGrad and SigmoidGrad, for tfg/kernels/vector_math.py.

Importing this module imports numba: only vector_math imports it, and only where compiled
loops are wanted (tfg/kernels/jit.py) and a Session has reached its second step.

Each loop reads C-contiguous float32 arrays and writes one of the same size (an `_inplace`
loop writes its one array; every element is read before it is written). The exp family calls
one exp, `_exp`, written out in
arithmetic that LLVM turns into AVX2/AVX-512 instructions (numpy's float32 exp on this
package's wheels runs about 2 ns an element, the loop here 0.6; TensorFlow's Eigen kernels
do the same kind of thing):

    exp(x) = 2^n * e^r,  n = round(x / ln 2),  r = x - n ln 2 (ln 2 in two parts, Cody and
    Waite), e^r by a degree-7 polynomial on |r| <= ln(2)/2 (the Cephes expf coefficients),
    2^n as two powers of two made from their bits, so that results under 2^-126 (subnormal)
    and over 2^127 (infinity) come out right.

Measured over 4M points of [-110, 95]: at most 1.0 ulp from the float64 exp rounded, where
numpy's float32 exp gives 2.4. NaN stays NaN, exp(+inf) = inf, exp(-inf) = 0.
"""
import math

import numpy as np
from llvmlite import ir
from numba import float32, int32, njit
from numba.extending import intrinsic

_F = np.float32
_LOG2E = _F(1.44269504088896341)
_LN2_HI, _LN2_LO = _F(0.693359375), _F(-2.12194440e-4)
_E0, _E1, _E2, _E3, _E4, _E5 = (_F(1.9875691500e-4), _F(1.3981999507e-3), _F(8.3334519073e-3),
                                _F(4.1665795894e-2), _F(1.6666665459e-1), _F(5.0000001201e-1))
# Past these exp is 0 or infinity in float32 whatever the rounding; clamping keeps n in
# [-150, 128], where the two halves of 2^n are both normal floats.
_LOW, _HIGH = _F(-104.0), _F(89.0)
_ONE, _TWO, _HALF = _F(1.0), _F(2.0), _F(0.5)
# tanh on |x| < 0.625: x + x^3 P(x^2) (the Cephes tanhf coefficients); above it
# 1 - 2 / (e^2|x| + 1), which has no cancellation there (tanh(0.625) = 0.55).
_T4, _T3, _T2, _T1, _T0 = (_F(-5.70498872745e-3), _F(2.06390887954e-2), _F(-5.37397155531e-2),
                           _F(1.33314422036e-1), _F(-3.33332819422e-1))
_TANH_SMALL = _F(0.625)

# contract: a * b + c may become one fused multiply-add (closer, not farther, from the exact
# value); no other fast-math licence, so NaN and infinities keep IEEE's rules.
_OPTIONS = dict(nogil=True, error_model="numpy", fastmath={"contract"})


@intrinsic
def _float_from_bits(typingctx, bits):
    """The float32 whose bits are the int32 `bits` (a reinterpretation, not a conversion)."""
    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.FloatType())
    return float32(int32), codegen


@njit(inline="always", **_OPTIONS)
def _exp(x):
    xc = min(max(x, _LOW), _HIGH)
    n = np.floor(xc * _LOG2E + _HALF)
    r = xc - n * _LN2_HI
    r = r - n * _LN2_LO
    p = ((((_E0 * r + _E1) * r + _E2) * r + _E3) * r + _E4) * r + _E5
    p = p * (r * r) + r + _ONE
    k = np.int32(n)
    half = k >> 1
    y = p * _float_from_bits((half + 127) << 23) * _float_from_bits((k - half + 127) << 23)
    return y if x == x else x  # min/max would have turned a NaN into a bound


def _compiled(options):
    """njit with `options`, kept on disk where numba finds a folder for it (as jit._njit)."""
    def make(fn):
        try:
            return njit(cache=True, **options)(fn)
        except Exception:  # noqa: BLE001 - numba's "no locator available" RuntimeError
            return njit(**options)(fn)
    return make


_cached = _compiled(_OPTIONS)


@njit(inline="always", **_OPTIONS)
def _sigmoid(v):
    """1 / (1 + e^-v), as e^-|v| over 1 + e^-|v| where v < 0 (no overflow)."""
    e = _exp(-abs(v))
    return (_ONE if v >= 0 else e) / (_ONE + e)


@njit(inline="always", **_OPTIONS)
def _swish(v):
    """v * sigmoid(v) (-inf gives NaN, as TensorFlow's product does): below -88, where
    e^-v overflows, v / (1 + e^-v) would be 0 where v e^v is still a normal float."""
    return v * _sigmoid(v)


@njit(inline="always", **_OPTIONS)
def _tanh(v):
    """The odd polynomial near 0, 1 - 2 / (e^2|v| + 1) elsewhere, with v's sign."""
    a = abs(v)
    z = a * a
    small = ((((_T4 * z + _T3) * z + _T2) * z + _T1) * z + _T0) * z * a + a
    large = _ONE - _TWO / (_exp(a + a) + _ONE)
    return math.copysign(small if a < _TANH_SMALL else large, v)  # -0 stays -0


# MobileNetV3's hard swish and hard sigmoid (kernels/fused.py), each operation rounded as
# numpy's steps round it, so the same bits: no fast-math at all (no multiply-add to fuse
# anyway). A clamp as numpy's maximum and minimum against 0 and 6 are: NaN kept, and a
# comparison that is false for -0 (maximum(-0, 0) is the 0 given, on numpy's SIMD loops).
_EXACT = dict(nogil=True, error_model="numpy")
_THREE, _SIX, _SIXTH = _F(3.0), _F(6.0), _F(1 / 6)


@njit(inline="always", **_EXACT)
def _relu6(v):
    r = v if (v > 0 or v != v) else _F(0.0)
    return r if (r < _SIX or r != r) else _SIX


@njit(inline="always", **_EXACT)
def _hard_swish(v):
    return v * (_relu6(v + _THREE) * _SIXTH)


@njit(inline="always", **_EXACT)
def _hard_sigmoid(v):
    return _relu6(v) * _SIXTH


# Two loops per function: (x, out) for two arrays, and one array in place; C-contiguous
# arrays of any shape, as flat views (one compile per rank). Written out, one module-level
# function each, so that each has its own name in numba's disk cache (a factory's closures
# would all be `make.<locals>.loop` there). One loop over two
# arrays that may be the same would not be vectorized where they are (LLVM's overlap check
# at run time falls back to one element at a time: 6.5 instead of 0.8 ns an element).
@_cached
def sigmoid_loop(x, out):
    a, b = x.reshape(x.size), out.reshape(out.size)
    for i in range(a.size):
        b[i] = _sigmoid(a[i])


@_cached
def sigmoid_inplace(y):
    a = y.reshape(y.size)
    for i in range(a.size):
        a[i] = _sigmoid(a[i])


@_cached
def swish_loop(x, out):
    a, b = x.reshape(x.size), out.reshape(out.size)
    for i in range(a.size):
        b[i] = _swish(a[i])


@_cached
def swish_inplace(y):
    a = y.reshape(y.size)
    for i in range(a.size):
        a[i] = _swish(a[i])


@_cached
def tanh_loop(x, out):
    a, b = x.reshape(x.size), out.reshape(out.size)
    for i in range(a.size):
        b[i] = _tanh(a[i])


@_cached
def tanh_inplace(y):
    a = y.reshape(y.size)
    for i in range(a.size):
        a[i] = _tanh(a[i])


_cached_exact = _compiled(_EXACT)


@_cached_exact
def hard_swish_loop(x, out):
    a, b = x.reshape(x.size), out.reshape(out.size)
    for i in range(a.size):
        b[i] = _hard_swish(a[i])


@_cached_exact
def hard_swish_inplace(y):
    a = y.reshape(y.size)
    for i in range(a.size):
        a[i] = _hard_swish(a[i])


@_cached_exact
def hard_sigmoid_loop(x, out):
    a, b = x.reshape(x.size), out.reshape(out.size)
    for i in range(a.size):
        b[i] = _hard_sigmoid(a[i])


@_cached_exact
def hard_sigmoid_inplace(y):
    a = y.reshape(y.size)
    for i in range(a.size):
        a[i] = _hard_sigmoid(a[i])


# TanhGrad and SigmoidGrad: dy * (1 - y*y) and dy * (y * (1 - y)), rounded step by step as the
# numpy kernels round them (tfg/kernels/nn_ops.py): the same bits, one pass instead of three.
@_cached_exact
def tanh_grad_loop(y, dy, out):
    a, d, b = y.reshape(y.size), dy.reshape(dy.size), out.reshape(out.size)
    for i in range(a.size):
        v = a[i]
        b[i] = d[i] * (_ONE - v * v)


@_cached_exact
def sigmoid_grad_loop(y, dy, out):
    a, d, b = y.reshape(y.size), dy.reshape(dy.size), out.reshape(out.size)
    for i in range(a.size):
        v = a[i]
        b[i] = d[i] * (v * (_ONE - v))
