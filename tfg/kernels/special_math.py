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


# ----------------------------------------------- Dawsn, Expint, FresnelCos, FresnelSin, Spence
# Cephes' rational approximations as TensorFlow's special_math_op_misc_impl.h runs them: each
# interval's polynomials in the input's own precision (half in float), the same branches in
# the same order (NaN falls through every comparison to the last one).
def _polevl(x, coeffs):
    """coeffs[0] x^n + ... + coeffs[n] by Horner's rule, in x's dtype (Eigen's ppolevl)."""
    dt = x.dtype.type
    y = np.full_like(x, dt(coeffs[0]))
    for c in coeffs[1:]:
        y = y * x + dt(c)
    return y


def _work(op, x):
    """x as the dtype its arithmetic runs in (float32 for half), and its own dtype."""
    x = np.asarray(x)
    if x.dtype.kind != "f":
        fail(f"{op} does not support dtype {tf_name(x)}")
    return (x.astype(np.float32) if x.dtype.itemsize < 4 else x), x.dtype


def _select(conditions, choices, default):
    """The first choice whose condition holds (np.select, keeping the dtype)."""
    return np.select(conditions, choices, default).astype(default.dtype)


_DAWSN_AN = (1.13681498971755972054E-11, 8.49262267667473811108E-10, 1.94434204175553054283E-8,
             9.53151741254484363489E-7, 3.07828309874913200438E-6, 3.52513368520288738649E-4,
             -8.50149846724410912031E-4, 4.22618223005546594270E-2, -9.17480371773452345351E-2,
             9.99999999999999994612E-1)
_DAWSN_AD = (2.40372073066762605484E-11, 1.48864681368493396752E-9, 5.21265281010541664570E-8,
             1.27258478273186970203E-6, 2.32490249820789513991E-5, 3.25524741826057911661E-4,
             3.48805814657162590916E-3, 2.79448531198828973716E-2, 1.58874241960120565368E-1,
             5.74918629489320327824E-1, 1.00000000000000000539E0)
_DAWSN_BN = (5.08955156417900903354E-1, -2.44754418142697847934E-1, 9.41512335303534411857E-2,
             -2.18711255142039025206E-2, 3.66207612329569181322E-3, -4.23209114460388756528E-4,
             3.59641304793896631888E-5, -2.14640351719968974225E-6, 9.10010780076391431042E-8,
             -2.40274520828250956942E-9, 3.59233385440928410398E-11)
_DAWSN_BD = (1.0, -6.31839869873368190192E-1, 2.36706788228248691528E-1,
             -5.31806367003223277662E-2, 8.48041718586295374409E-3, -9.47996768486665330168E-4,
             7.81025592944552338085E-5, -4.55875153252442634831E-6, 1.89100358111421846170E-7,
             -4.91324691331920606875E-9, 7.18466403235734541950E-11)
_DAWSN_CN = (-5.90592860534773254987E-1, 6.29235242724368800674E-1, -1.72858975380388136411E-1,
             1.64837047825189632310E-2, -4.86827613020462700845E-4)
_DAWSN_CD = (1.0, -2.69820057197544900361E0, 1.73270799045947845857E0,
             -3.93708582281939493482E-1, 3.44278924041233391079E-2, -9.73655226040941223894E-4)


def _dawsn_tail(x, num, den):
    """(1/x + z/x^2) / 2 with z = num(1/x^2) / (x den(1/x^2)): Cephes' intervals 2 and 3."""
    inv = 1 / x
    inv2 = inv * inv
    z = _polevl(inv2, num) / (x * _polevl(inv2, den))
    return x.dtype.type(0.5) * (inv2 * z + inv)


@kernel("Dawsn")
def dawsn(ctx, x):
    """Dawson's integral exp(-x^2) int_0^x exp(t^2) dt (odd; 1 / 2x beyond |x| = 1e9)."""
    x, out = _work("Dawsn", x)
    with np.errstate(all="ignore"):
        a = np.abs(x)
        x2 = a * a
        near = a * _polevl(x2, _DAWSN_AN) / _polevl(x2, _DAWSN_AD)
        y = _select([a < 3.25, a < 6.25, a < 1e9],
                    [near, _dawsn_tail(a, _DAWSN_BN, _DAWSN_BD),
                     _dawsn_tail(a, _DAWSN_CN, _DAWSN_CD)], x.dtype.type(0.5) / x)
        return np.where(x < 0, -y, y).astype(out)


_EXPINT_SMALL = ((-5.350447357812542947283E0, 2.185049168816613393830E2,
                  -4.176572384826693777058E3, 5.541176756393557601232E4,
                  -3.313381331178144034309E5, 1.592627163384945414220E6),
                 (1.0, -5.250547959112862969197E1, 1.259616186786790571525E3,
                  -1.756549581973534652631E4, 1.493062117002725991967E5,
                  -7.294949239640527645655E5, 1.592627163384945429726E6))
# x exp(-x) Ei(x) - 1 = w num(w) / den(w), w = 1/x, below each bound (the last: beyond 64)
_EXPINT_LARGE = (
    (4.0, (1.981808503259689673238E-2, -1.271645625984917501326E0, -2.088160335681228318920E0,
           2.755544509187936721172E0, -4.409507048701600257171E-1, 4.665623805935891391017E-2,
           -1.545042679673485262580E-3, 7.059980605299617478514E-5),
     (1.0, 1.476498670914921440652E0, 5.629177174822436244827E-1, 1.699017897879307263248E-1,
      2.291647179034212017463E-2, 4.450150439728752875043E-3, 1.727439612206521482874E-4,
      3.953167195549672482304E-5)),
    (8.0, (-1.373215375871208729803E0, -7.084559133740838761406E-1, 1.580806855547941010501E0,
           -2.601500427425622944234E-1, 2.994674694113713763365E-2,
           -1.038086040188744005513E-3, 4.371064420753005429514E-5, 2.141783679522602903795E-6),
     (1.0, 8.585231423622028380768E-1, 4.483285822873995129957E-1, 7.687932158124475434091E-2,
      2.449868241021887685904E-2, 8.832165941927796567926E-4, 4.590952299511353531215E-4,
      -4.729848351866523044863E-6, 2.665195537390710170105E-6)),
    (16.0, (-2.106934601691916512584E0, 1.732733869664688041885E0, -2.423619178935841904839E-1,
            2.322724180937565842585E-2, 2.372880440493179832059E-4, -8.343219561192552752335E-5,
            1.363408795605250394881E-5, -3.655412321999253963714E-7,
            1.464941733975961318456E-8, 6.176407863710360207074E-10),
     (1.0, -2.298062239901678075778E-1, 1.105077041474037862347E-1, -1.566542966630792353556E-2,
      2.761106850817352773874E-3, -2.089148012284048449115E-4, 1.708528938807675304186E-5,
      -4.459311796356686423199E-7, 1.394634930353847498145E-8, 6.150865933977338354138E-10)),
    (32.0, (-2.458119367674020323359E-1, -1.483382253322077687183E-1, 7.248291795735551591813E-2,
            -1.348315687380940523823E-2, 1.342775069788636972294E-3,
            -7.942465637159712264564E-5, 2.644179518984235952241E-6,
            -4.239473659313765177195E-8),
     (1.0, -1.044225908443871106315E-1, -2.676453128101402655055E-1, 9.695000254621984627876E-2,
      -1.601745692712991078208E-2, 1.496414899205908021882E-3, -8.462452563778485013756E-5,
      2.728938403476726394024E-6, -4.239462431819542051337E-8)),
    (64.0, (1.212561118105456670844E-1, -5.823133179043894485122E-1, 2.348887314557016779211E-1,
            -3.040034318113248237280E-2, 1.510082146865190661777E-3,
            -2.523137095499571377122E-5),
     (1.0, -1.002252150365854016662E0, 2.928709694872224144953E-1, -3.337004338674007801307E-2,
      1.560544881127388842819E-3, -2.523137093603234562648E-5)),
    (np.inf, (-7.657847078286127362028E-1, 6.886192415566705051750E-1,
              -2.132598113545206124553E-1, 3.346107552384193813594E-2,
              -3.076541477344756050249E-3, 1.747119316454907477380E-4,
              -6.103711682274170530369E-6, 1.218032765428652199087E-7,
              -1.086076102793290233007E-9),
     (1.0, -1.888802868662308731041E0, 1.066691687211408896850E0, -2.751915982306380647738E-1,
      3.930852688233823569726E-2, -3.414684558602365085394E-3, 1.866844370703555398195E-4,
      -6.345146083130515357861E-6, 1.239754287483206878024E-7, -1.086076102793126632978E-9)))


@kernel("Expint")
def expint(ctx, x):
    """The exponential integral Ei(x) = -PV int_{-x}^inf exp(-t)/t dt: NaN below 0, -inf at
    0; one rational approximation per interval [0, 2), [2, 4), ... [32, 64), [64, inf]."""
    x, out = _work("Expint", x)
    dt = x.dtype.type
    with np.errstate(all="ignore"):
        num, den = _EXPINT_SMALL
        small = x * (_polevl(x, num) / _polevl(x, den)) + dt(0.5772156649015329) + np.log(x)
        conditions, choices = [x < 0, x < 2], [np.full_like(x, np.nan), small]
        w = 1 / x
        for bound, num, den in _EXPINT_LARGE:
            f = w * (_polevl(w, num) / _polevl(w, den)) + dt(1)
            conditions.append(x < bound)
            choices.append(np.exp(x) * w * f)
        return _select(conditions[:-1], choices[:-1], choices[-1]).astype(out)


_FRESNEL_CN = (-4.98843114573573548651E-8, 9.50428062829859605134E-6, -6.45191435683965050962E-4,
               1.88843319396703850064E-2, -2.05525900955013891793E-1, 9.99999999999999998822E-1)
_FRESNEL_CD = (3.99982968972495980367E-12, 9.15439215774657478799E-10, 1.25001862479598821474E-7,
               1.22262789024179030997E-5, 8.68029542941784300606E-4, 4.12142090722199792936E-2,
               1.00000000000000000118E0)
_FRESNEL_SN = (-2.99181919401019853726E3, 7.08840045257738576863E5, -6.29741486205862506537E7,
               2.54890880573376359104E9, -4.42979518059697779103E10, 3.18016297876567817986E11)
_FRESNEL_SD = (1.0, 2.81376268889994315696E2, 4.55847810806532581675E4, 5.17343888770096400730E6,
               4.19320245898111231129E8, 2.24411795645340920940E10, 6.07366389490084639049E11)
_FRESNEL_FN = (4.21543555043677546506E-1, 1.43407919780758885261E-1, 1.15220955073585758835E-2,
               3.45017939782574027900E-4, 4.63613749287867322088E-6, 3.05568983790257605827E-8,
               1.02304514164907233465E-10, 1.72010743268161828879E-13,
               1.34283276233062758925E-16, 3.76329711269987889006E-20)
_FRESNEL_FD = (1.0, 7.51586398353378947175E-1, 1.16888925859191382142E-1,
               6.44051526508858611005E-3, 1.55934409164153020873E-4, 1.84627567348930545870E-6,
               1.12699224763999035261E-8, 3.60140029589371370404E-11,
               5.88754533621578410010E-14, 4.52001434074129701496E-17,
               1.25443237090011264384E-20)
_FRESNEL_GN = (5.04442073643383265887E-1, 1.97102833525523411709E-1, 1.87648584092575249293E-2,
               6.84079380915393090172E-4, 1.15138826111884280931E-5, 9.82852443688422223854E-8,
               4.45344415861750144738E-10, 1.08268041139020870318E-12,
               1.37555460633261799868E-15, 8.36354435630677421531E-19,
               1.86958710162783235106E-22)
_FRESNEL_GD = (1.0, 1.47495759925128324529E0, 3.37748989120019970451E-1,
               2.53603741420338795122E-2, 8.14679107184306179049E-4, 1.27545075667729118702E-5,
               1.04314589657571990585E-7, 4.60680728146520428211E-10,
               1.10273215066240270757E-12, 1.38796531259578871258E-15,
               8.39158816283118707363E-19, 1.86958710162783236342E-22)


def _fresnel_asymptotic(x, use_sin):
    """Cephes' auxiliary functions f, g for x^2 >= 2.5625."""
    dt = x.dtype.type
    x2 = x * x
    t = 1 / (dt(math.pi) * x2)
    u = t * t
    f = 1 - u * (_polevl(u, _FRESNEL_FN) / _polevl(u, _FRESNEL_FD))
    g = t * _polevl(u, _FRESNEL_GN) / _polevl(u, _FRESNEL_GD)
    z = dt(1.5707963267948966) * x2
    c, s = np.cos(z), np.sin(z)
    y = 1 / (dt(math.pi) * x)
    if use_sin:
        return dt(0.5) - (f * c + g * s) * y
    return dt(0.5) + (f * s - g * c) * y


def _fresnel(op, use_sin):
    @kernel(op)
    def run(ctx, x):
        x, out = _work(op, x)
        dt = x.dtype.type
        with np.errstate(all="ignore"):
            a = np.abs(x)
            x2 = a * a
            x4 = x2 * x2
            if use_sin:
                near = a * x2 * _polevl(x4, _FRESNEL_SN) / _polevl(x4, _FRESNEL_SD)
            else:
                near = a * _polevl(x4, _FRESNEL_CN) / _polevl(x4, _FRESNEL_CD)
            y = np.where(x2 < 2.5625, near, _fresnel_asymptotic(a, use_sin))
            y = np.where(a > 36974.0, dt(0.5), y)
            return np.where(x < 0, -y, y).astype(out)
    run.__doc__ = (f"The Fresnel integral int_0^x {'sin' if use_sin else 'cos'}(pi t^2 / 2) "
                   "dt (odd; +-1/2 beyond |x| = 36974).")
    run.__name__ = op
    return run


_fresnel("FresnelCos", use_sin=False)
_fresnel("FresnelSin", use_sin=True)

_SPENCE_A = (4.65128586073990045278E-5, 7.31589045238094711071E-3, 1.33847639578309018650E-1,
             8.79691311754530315341E-1, 2.71149851196553469920E0, 4.25697156008121755724E0,
             3.29771340985225106936E0, 1.00000000000000000126E0)
_SPENCE_B = (6.90990488912553276999E-4, 2.54043763932544379113E-2, 2.82974860602568089943E-1,
             1.41172597751831069617E0, 3.63800533345137075418E0, 5.03278880143316990390E0,
             3.54771340985225096217E0, 9.99999999999999998740E-1)


@kernel("Spence")
def spence(ctx, x):
    """Spence's integral (the dilogarithm Li2(1 - x)): -int_1^x log(t) / (t - 1) dt, NaN
    below 0, pi^2/6 at 0, 0 at 1."""
    x, out = _work("Spence", x)
    dt = x.dtype.type
    pi2o6 = dt(math.pi * math.pi / 6.0)
    with np.errstate(all="ignore"):
        y = np.where(x < 2, x, 1 / x)
        w = np.where(1.5 < y, 1 / y - 1, np.where(y < 0.5, -y, y - 1))
        s = -w * (_polevl(w, _SPENCE_A) / _polevl(w, _SPENCE_B))
        z = np.log(y)
        s = np.where(y < 0.5, -z * np.log1p(-y) + pi2o6 - s, s)
        s = np.where(1.5 < x, dt(-0.5) * z * z - s, s)
        s = _select([x < 0, x == 0, x == 1], [np.full_like(x, np.nan), np.full_like(x, pi2o6),
                                              np.zeros_like(x)], s)
        return s.astype(out)
