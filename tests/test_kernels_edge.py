"""Kernel edge cases that TensorFlow-made fixtures do not reach."""
import types

import numpy as np

from tfg.kernels.registry import get_kernel


def test_addn_of_three_scalars():
    # The arithmetic optimizer turns scalar add trees into AddN; 0-d sums are numpy scalars.
    add_n = get_kernel("AddN").fn
    out = add_n(types.SimpleNamespace(xp=np), np.array(1, np.float32), np.array(2, np.float32), np.array(3, np.float32))
    assert out.dtype == np.float32 and out.shape == () and out == 6


def test_pow_cube_matches_power():
    # x ** 3 (tanh-approximate GELU) as two multiplies: within 1 ulp of pow, the same at
    # signed zeros, infinities and NaN; other exponents still go through power.
    pow_ = get_kernel("Pow").fn
    ctx = types.SimpleNamespace(xp=np, attrs={})
    x = np.concatenate([np.random.default_rng(0).standard_normal(1000) * 10,
                        [0.0, -0.0, np.inf, -np.inf, np.nan, 1e13, -1e-13]]).astype(np.float32)
    with np.errstate(all="ignore"):
        got, want = pow_(ctx, x, np.float32(3.0)), np.power(x, np.float32(3.0))
        other = np.power(x, np.float32(2.5))
    assert got.dtype == np.float32
    np.testing.assert_array_max_ulp(got, want, maxulp=1)
    assert np.signbit(got[1001]) and np.isnan(got[1004])
    np.testing.assert_array_equal(pow_(ctx, x, np.float32(2.5)), other)
