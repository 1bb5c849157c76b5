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

And the Hurwitz Zeta, Polygamma and the regularized incomplete gamma functions Igamma, Igammac
(with IgammaGradA, d/da Igamma), following Eigen's (Cephes') series and continued fractions
step by step in the input's own precision.

    Zeta(2, 1) -> 1.644934;  Polygamma(1, 1) -> 1.644934;  Igamma(1, 1) -> 0.632121
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


# --------------------------------------------------------------------------- Zeta, Polygamma
# Eigen's zeta_impl (Cephes' zeta, the Euler-Maclaurin sum) in the input's own precision:
# TensorFlow's float32 Zeta is computed in float32, so this follows its steps in x's dtype.
_ZETA_A = (12.0, -720.0, 30240.0, -1209600.0, 47900160.0, -1.8924375803183791606e9,
           7.47242496e10, -2.950130727918164224e12, 1.1646782814350067249e14,
           -4.5979787224074726105e15, 1.8152105401943546773e17, -7.1661652561756670113e18)


def _flush_denormals(v):
    """TensorFlow runs its CPU kernels with denormals flushed to zero: a subnormal result
    (Igamma(150, 0.5) in float64, Zeta(40, 9.5) in float32) comes out as a signed 0."""
    with np.errstate(invalid="ignore"):
        return np.where(np.abs(v) < np.finfo(v.dtype).tiny, v * 0, v)


def _zeta_special(x, q):
    """(result, decided): Eigen's early returns (x = 1: inf; x < 1: NaN; q a non-positive
    integer: inf for even integer x else NaN; q < 0 with x not an integer: NaN)."""
    res = np.full(x.shape, np.nan, x.dtype)
    x_int = x == np.floor(x)
    q_pole = (q <= 0) & (q == np.floor(q))
    even = x_int & (np.fmod(x, 2) == 0)
    res[x == 1] = np.inf
    res[(x > 1) & q_pole & even] = np.inf
    decided = (x <= 1) | np.isnan(x) | np.isnan(q) | q_pole | ((q <= 0) & ~x_int)
    return res, decided


def _zeta_series(x, q, live, machep):
    """Eigen's zeta_impl_series: s = q^-x + (q+1)^-x + ... until a term is below machep of the
    sum (float: at most 9 terms; double: also until q + i > 9)."""
    s = np.where(live, np.power(q, -x), 0).astype(x.dtype)
    a, b = q.copy(), np.zeros_like(x)
    todo = live.copy()  # not converged
    going = live.copy()  # still summing
    i = 0
    while going.any():
        i += 1
        a = np.where(going, a + 1, a)
        b = np.where(going, np.power(a, -x), b)
        s = np.where(going, s + b, s)
        todo &= ~(going & (np.abs(b / s) < machep))
        going &= todo
        if i >= 9:
            if x.dtype == np.float32:
                break
            going &= a <= 9
    return a, b, s, todo


def _zeta_tail(x, a, b, s, todo, machep):
    """Eigen's Euler-Maclaurin correction for the elements the series left unfinished."""
    dt = x.dtype
    todo = todo & (b != 0)
    w = a
    s = np.where(todo, s + b * w / (x - 1), s)
    s = np.where(todo, s - dt.type(0.5) * b, s)
    a, k = np.ones_like(x), np.zeros_like(x)
    for coeff in _ZETA_A:
        a = a * (x + k)
        b = b / w
        t = a * b / dt.type(coeff)
        s = np.where(todo, s + t, s)
        todo &= ~(np.abs(t / s) < machep)
        k = k + 1
        a = a * (x + k)
        b = b / w
        k = k + 1
    return s


def zeta(x, q):
    """Hurwitz zeta sum_k (q + k)^-x of same-dtype float arrays, as Eigen computes it."""
    x, q = (np.array(v) for v in np.broadcast_arrays(x, q))
    machep = x.dtype.type(np.finfo(x.dtype).eps / 2)
    with np.errstate(all="ignore"):
        res, decided = _zeta_special(x, q)
        a, b, s, todo = _zeta_series(x, q, ~decided, machep)
        s = _zeta_tail(x, a, b, s, todo, machep)
    return _flush_denormals(np.where(decided, res, s).astype(x.dtype))


def _real_float(op, v):
    v = np.asarray(v)
    if v.dtype not in (np.float32, np.float64):
        fail(f"{op} does not support dtype {tf_name(v)}")
    return v


@kernel("Zeta")
def zeta_kernel(ctx, x, q):
    return zeta(_real_float("Zeta", x), _real_float("Zeta", q))


def polygamma(n, x):
    """psi^(n)(x): digamma for n = 0, else (-1)^(n+1) n! zeta(n + 1, x) (Eigen's
    polygamma_impl); NaN where n is not a non-negative integer."""
    n, x = (np.array(v) for v in np.broadcast_arrays(n, x))
    dt = x.dtype
    with np.errstate(all="ignore"):
        nplus = n + dt.type(1)
        factorial = np.exp(_LGAMMA(nplus.astype(np.float64)).astype(dt))
        sign = np.power(dt.type(-1), nplus)
        higher = sign * factorial * zeta(nplus, x)
    out = np.where(n == 0, _psi(x).astype(dt), higher)
    return _flush_denormals(np.where((np.floor(n) != n) | (n < 0), dt.type(np.nan), out)
                            .astype(dt))


@kernel("Polygamma")
def polygamma_kernel(ctx, a, x):
    return polygamma(_real_float("Polygamma", a), _real_float("Polygamma", x))


# --------------------------------------------------------------- Igamma, Igammac, IgammaGradA
# Eigen's igamma_generic_impl / igammac_impl (Cephes' igam, igamc): the power series below
# x = max(a, 1), the continued fraction above, each run until a step changes the value by
# less than machep, in the input's own precision; IgammaGradA carries d/da through the same
# recurrences (forward mode), as Eigen's DERIVATIVE mode.
def _machep(dt):
    return dt.type(np.finfo(dt).eps / 2)


def _iterations(dt, deriv):
    if not deriv:
        return 2000
    return 200 if dt == np.float32 else 500


def _main_igamma_term(a, x):
    """x^a e^-x / Gamma(a), or 0 where its log underflows (or is NaN)."""
    dt = a.dtype
    logax = a * np.log(x) - x - _LGAMMA(a.astype(np.float64)).astype(dt)
    small = (logax < -np.log(np.finfo(dt).max).astype(dt)) | np.isnan(logax)
    return np.where(small, dt.type(0), np.exp(logax))


def _igamma_series(a, x, live, deriv):
    dt = a.dtype
    ax = _main_igamma_term(a, x)
    live = live & (ax != 0)
    ax = ax / a
    r, c, ans = a.copy(), np.ones_like(a), np.ones_like(a)
    dc_da, dans_da = np.zeros_like(a), np.zeros_like(a)
    machep = _machep(dt)
    for _ in range(_iterations(dt, deriv)):
        if not live.any():
            break
        r = np.where(live, r + 1, r)
        term = x / r
        dterm_da = -x / (r * r)
        dc_da = np.where(live, term * dc_da + dterm_da * c, dc_da)
        dans_da = np.where(live, dans_da + dc_da, dans_da)
        c = np.where(live, c * term, c)
        ans = np.where(live, ans + c, ans)
        live &= ~((np.abs(dc_da) <= machep * np.abs(dans_da)) if deriv else (c <= machep * ans))
    if not deriv:
        return np.where(ax != 0, ans * ax, dt.type(0))
    dlogax_da = np.log(x) - _psi(a + 1).astype(dt)
    return np.where(ax != 0, ans * (ax * dlogax_da) + dans_da * ax, dt.type(0))


def _igammac_cf(a, x, live, deriv):
    dt = a.dtype
    one, zero = dt.type(1), dt.type(0)
    ax = _main_igamma_term(a, x)
    zero_out = np.isinf(x) | (ax == 0)
    live = live & ~zero_out
    y = one - a
    z = x + y + one
    c = np.zeros_like(a)
    pkm2, qkm2, pkm1, qkm1 = np.ones_like(a), x.copy(), x + one, z * x
    ans = pkm1 / qkm1
    dpkm2, dqkm2, dpkm1, dqkm1 = (np.zeros_like(a), np.zeros_like(a), np.zeros_like(a), -x)
    dans = (dpkm1 - ans * dqkm1) / qkm1
    machep, big, biginv = _machep(dt), one / _machep(dt), _machep(dt)
    for _ in range(_iterations(dt, deriv)):
        if not live.any():
            break
        c, y, z = c + one, y + one, z + dt.type(2)
        yc = y * c
        pk, qk = pkm1 * z - pkm2 * yc, qkm1 * z - qkm2 * yc
        dpk = dpkm1 * z - pkm1 - dpkm2 * yc + pkm2 * c
        dqk = dqkm1 * z - qkm1 - dqkm2 * yc + qkm2 * c
        step = live & (qk != 0)
        ans_prev, dans_prev = ans, dans
        ans = np.where(step, pk / qk, ans)
        dans = np.where(step, (dpk - ans * dqk) / qk, dans)
        if deriv:
            done = np.abs(dans - dans_prev) <= machep
        else:
            done = np.abs(ans_prev - ans) <= machep * np.abs(ans)
        done &= step
        go = live & ~done  # the recurrences advance only where the loop did not break
        pkm2, pkm1 = np.where(go, pkm1, pkm2), np.where(go, pk, pkm1)
        qkm2, qkm1 = np.where(go, qkm1, qkm2), np.where(go, qk, qkm1)
        dpkm2, dpkm1 = np.where(go, dpkm1, dpkm2), np.where(go, dpk, dpkm1)
        dqkm2, dqkm1 = np.where(go, dqkm1, dqkm2), np.where(go, dqk, dqkm1)
        rescale = go & (np.abs(pk) > big)
        s = np.where(rescale, biginv, one)
        pkm2, pkm1, qkm2, qkm1 = pkm2 * s, pkm1 * s, qkm2 * s, qkm1 * s
        dpkm2, dpkm1, dqkm2, dqkm1 = dpkm2 * s, dpkm1 * s, dqkm2 * s, dqkm1 * s
        live = go
    if not deriv:
        return np.where(zero_out, zero, ans * ax)
    dlogax_da = np.log(x) - _psi(a).astype(dt)
    return np.where(zero_out, zero, ans * (ax * dlogax_da) + dans * ax)


def _igamma_inputs(op, a, x):
    a, x = np.asarray(a), np.asarray(x)
    if a.dtype.kind != "f" or x.dtype != a.dtype:
        fail(f"{op} does not support dtype {tf_name(a)}")
    out_dtype = a.dtype
    work = np.float32 if a.dtype.itemsize < 4 else a.dtype  # half, bfloat16: in float
    a, x = (np.array(v, work) for v in np.broadcast_arrays(a, x))
    return a, x, out_dtype


def igamma(a, x, deriv=False):
    """P(a, x), the regularized lower incomplete gamma function (or d/da P with deriv)."""
    dt = a.dtype
    with np.errstate(all="ignore"):
        bad = (x < 0) | (a <= 0) | np.isnan(a) | np.isnan(x)
        upper = ~bad & (x > 1) & (x > a)
        series = _igamma_series(a, x, ~bad & ~upper, deriv)
        cf = _igammac_cf(a, x, upper, deriv)
        out = np.where(upper, -cf if deriv else dt.type(1) - cf, series)
        out = np.where(bad, dt.type(np.nan), out)
        return _flush_denormals(np.where(x == 0, dt.type(0), out).astype(dt))


def igammac(a, x):
    """Q(a, x) = 1 - P(a, x), the regularized upper incomplete gamma function."""
    dt = a.dtype
    with np.errstate(all="ignore"):
        bad = (x < 0) | (a <= 0) | np.isnan(a) | np.isnan(x)
        lower = ~bad & ((x < 1) | (x < a))
        series = dt.type(1) - _igamma_series(a, x, lower, False)
        cf = _igammac_cf(a, x, ~bad & ~lower, False)
        out = np.where(bad, dt.type(np.nan), np.where(lower, series, cf)).astype(dt)
        return _flush_denormals(out)


@kernel("Igamma")
def igamma_kernel(ctx, a, x):
    a, x, out = _igamma_inputs("Igamma", a, x)
    return igamma(a, x).astype(out)


@kernel("Igammac")
def igammac_kernel(ctx, a, x):
    a, x, out = _igamma_inputs("Igammac", a, x)
    return igammac(a, x).astype(out)


@kernel("IgammaGradA")
def igamma_grad_a(ctx, a, x):
    a, x, out = _igamma_inputs("IgammaGradA", a, x)
    return igamma(a, x, deriv=True).astype(out)
