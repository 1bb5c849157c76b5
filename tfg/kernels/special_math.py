"""Lgamma (log |Gamma(x)|, Python's math.lgamma per element) and Digamma (psi), as Eigen
computes them: psi is NaN at 0 and the negative integers, reflected below zero
(psi(x) = psi(1 - x) - pi / tan(pi x)), and above by the recurrence psi(x) = psi(x + 1) - 1/x
up to x >= 10, then the asymptotic series.

    Lgamma([0.5, 3.0, -0.5]) -> [0.5724, 0.6931, 1.2655];  Digamma(1.0) -> -0.5772

Also the inverse normal CDF Ndtri and Erfinv (an initial guess refined by Newton steps on
math.erf / math.erfc in float64), and the modified Bessel functions of the first kind I0, I1
and their exponentially scaled forms I0e = exp(-|x|) I0(x), I1e (power series, or the
asymptotic expansion for large |x|: the scaled forms never overflow).

    Ndtri(0.975) -> 1.95996;  Erfinv(0.5) -> 0.476936;  BesselI0e(1e300) -> 3.989e-151
"""
import math

import numpy as np

from tfg.kernels._util import errstate, fail, tf_name
from tfg.kernels.registry import ALL_DEVICES, kernel


def _lgamma(v):
    try:
        return math.lgamma(v)
    except ValueError:  # a pole: 0 or a negative integer
        return math.inf


_LGAMMA = np.vectorize(_lgamma, otypes=[np.float64])


@kernel("Lgamma")
def lgamma(ctx, x):
    x = np.asarray(x)
    if x.size == 0:
        return x.copy()
    return _LGAMMA(x.astype(np.float64)).astype(x.dtype)


def _psi(x):
    """Digamma of a float64 array."""
    x = np.array(x, np.float64, copy=True)
    out = np.zeros_like(x)
    pole = (x <= 0) & (x == np.floor(x))
    neg = (x < 0) & ~pole
    reflect = np.zeros_like(x)
    with np.errstate(all="ignore"):
        reflect[neg] = np.pi / np.tan(np.pi * x[neg])
    x[neg] = 1 - x[neg]
    x[pole] = 1.0
    while True:
        small = x < 10
        if not small.any():
            break
        out[small] -= 1 / x[small]
        x[small] += 1
    inv2 = 1 / (x * x)
    series = inv2 * (1 / 12 - inv2 * (1 / 120 - inv2 * (1 / 252 - inv2 * (1 / 240 - inv2 / 132))))
    out += np.log(x) - 0.5 / x - series
    out[neg] -= reflect[neg]
    out[pole] = np.nan
    return out


@kernel("Digamma")
def digamma(ctx, x):
    x = np.asarray(x)
    return _psi(x).astype(x.dtype)


# --------------------------------------------------------------------------- Ndtri, Erfinv
_erf64 = np.vectorize(math.erf, otypes=[np.float64])
_erfc64 = np.vectorize(math.erfc, otypes=[np.float64])
_SQRT2 = math.sqrt(2.0)
_LOG_SQRT_2PI = 0.5 * math.log(2.0 * math.pi)
_NEWTON_STEPS = 4  # from the initial guesses below: error 5e-4 -> 1e-7 -> 1e-14 -> exact


def _tail_guess(q):
    """-ndtri(q) for 0 < q <= 0.5 to 4.5e-4 (Abramowitz & Stegun 26.2.23)."""
    t = np.sqrt(-2.0 * np.log(q))
    num = 2.515517 + t * (0.802853 + t * 0.010328)
    den = 1.0 + t * (1.432788 + t * (0.189269 + t * 0.001308))
    return t - num / den


def _central(w):
    """ndtri(0.5 + w) for |w| <= 0.25, solving erf(y / sqrt 2) / 2 = w: relative accuracy
    near w = 0 (TF's ndtri has it too: it works on w, not on p)."""
    y = math.sqrt(2.0 * math.pi) * w
    for _ in range(_NEWTON_STEPS + 1):
        density = np.exp(-0.5 * y * y - _LOG_SQRT_2PI)
        y = y - (0.5 * _erf64(y / _SQRT2) - w) / density
    return y


def _lower_tail(q):
    """ndtri(q) for 0 < q < 0.25 (negative), by Newton steps on log Phi(y) = log q: Phi
    from erfc (relative accuracy far into the tail), the step scaled by Phi / phi in logs so
    that q down to 1e-300 stays exact."""
    y = -_tail_guess(q)
    log_q = np.log(q)
    for _ in range(_NEWTON_STEPS):
        log_cdf = np.log(0.5 * _erfc64(-y / _SQRT2))
        log_pdf = -0.5 * y * y - _LOG_SQRT_2PI
        y = y - (log_cdf - log_q) * np.exp(log_cdf - log_pdf)
    return y


def ndtri64(p):
    """The inverse of the standard normal CDF of a float64 array: -inf at 0, inf at 1, NaN
    outside [0, 1]."""
    p = np.asarray(p, np.float64)
    out = np.full(p.shape, np.nan)
    with np.errstate(all="ignore"):
        q = np.minimum(p, 1.0 - p)  # 1 - p is exact for p >= 0.5
        central = (q >= 0.25) & (q <= 0.5)
        tail = (q > 0) & (q < 0.25)
        out[central] = _central(p[central] - 0.5)  # exact for p in [0.25, 0.75]
        y = _lower_tail(q[tail])
        out[tail] = np.where(p[tail] > 0.5, -y, y)
    out[p == 0] = -np.inf
    out[p == 1] = np.inf
    return out


@kernel("Ndtri")
def ndtri(ctx, x):
    x = np.asarray(x)
    if x.dtype.kind != "f":
        fail(f"Ndtri does not support dtype {tf_name(x)}")
    return ndtri64(x).astype(x.dtype)


@kernel("Erfinv")
def erfinv(ctx, x):
    """erfinv(x) = ndtri(x / 2 + 1/2) / sqrt 2, as TensorFlow computes it: p in x's own dtype,
    so tiny |x| rounds to p = 0.5 (erfinv(1e-20) is 0 there too)."""
    x = np.asarray(x)
    if x.dtype.kind != "f":
        fail(f"Erfinv does not support dtype {tf_name(x)}")
    half = x.dtype.type(0.5)
    return (ndtri64(x * half + half) * math.sqrt(0.5)).astype(x.dtype)


# ------------------------------------------------------------------------- Bessel I0, I1
_SERIES_UP_TO = 20.0  # |x| at or below: the power series; above, the asymptotic expansion
_SERIES_TERMS = 60    # (x/2)^2k / (k! (k+n)!) < 1e-17 of the sum by then for |x| <= 20
_ASYMPTOTIC_TERMS = 30  # the expansion's terms are below 3e-18 there for |x| > 20


def _scaled_bessel(xp, a, order):
    """exp(-a) I_order(a) of a float64 array a >= 0 (or NaN), order 0 or 1: to ~1e-15
    relative, with no overflow for any a."""
    small = a <= _SERIES_UP_TO
    s = xp.where(small, a, 0.0)
    quarter_sq = s * s / 4
    term = xp.ones_like(s) if order == 0 else s / 2
    total = term
    for k in range(1, _SERIES_TERMS):
        term = term * quarter_sq / (k * (k + order))
        total = total + term
    series = total * xp.exp(-s)
    big = xp.where(small, 2 * _SERIES_UP_TO, a)
    inv8x = 1 / (8 * big)
    term = xp.ones_like(big)
    total = term
    for k in range(1, _ASYMPTOTIC_TERMS):
        term = term * (((2 * k - 1) ** 2 - 4 * order * order) / k) * inv8x
        total = total + term
    asymptotic = total / xp.sqrt(2 * math.pi * big)
    return xp.where(small, series, asymptotic)


def _bessel(op, order, scaled):
    @kernel(op, device_types=ALL_DEVICES)
    def run(ctx, x):
        xp = ctx.xp
        x = xp.asarray(x)
        if x.dtype.kind != "f":
            fail(f"{op} does not support dtype {tf_name(x)}")
        with errstate(xp, invalid="ignore", over="ignore"):
            a = xp.abs(x.astype(np.float64))
            y = _scaled_bessel(xp, a, order)
            if order == 1:  # I1 is odd, I0 even
                y = xp.sign(x.astype(np.float64)) * y
            if not scaled:
                # exp(|x|) in x's own dtype (half: float), as TensorFlow's kernel computes
                # it: I0(89.0) is inf in float32 though it fits, I0(inf) NaN (inf * 0)
                exp_dtype = np.float32 if x.dtype.itemsize < 4 else x.dtype
                y = y * xp.exp(xp.abs(x).astype(exp_dtype)).astype(np.float64)
            return y.astype(x.dtype)  # (half I0, I1 overflow to inf here)
    run.__name__ = op
    return run


_bessel("BesselI0e", 0, scaled=True)
_bessel("BesselI1e", 1, scaled=True)
_bessel("BesselI0", 0, scaled=False)
_bessel("BesselI1", 1, scaled=False)
