"""Lgamma (log |Gamma(x)|, Python's math.lgamma per element) and Digamma (psi), as Eigen
computes them: psi is NaN at 0 and the negative integers, reflected below zero
(psi(x) = psi(1 - x) - pi / tan(pi x)), and above by the recurrence psi(x) = psi(x + 1) - 1/x
up to x >= 10, then the asymptotic series.

    Lgamma([0.5, 3.0, -0.5]) -> [0.5724, 0.6931, 1.2655];  Digamma(1.0) -> -0.5772
"""
import math

import numpy as np

from tfg.kernels.registry import kernel


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
