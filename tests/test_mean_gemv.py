"""Mean of floats over a run of middle axes (a squeeze-excite block's global average pool) as
one GEMV per leading index (tfg/kernels/reduce_ops.py `_middle_sum`): values against a float64
reference, inf and NaN as numpy's sum gives them, and the shapes it must leave to
np.add.reduce (bit for bit the old values there)."""
import numpy as np
import pytest

from tfg.graphdef.graph import Graph
from tfg.kernels import reduce_ops
from tfg.kernels.context import KernelContext
from tfg.kernels.registry import get_kernel

rng = np.random.default_rng(11)


def _mean(x, axes, keep):
    ctx = KernelContext(Graph().add_node("m", "Mean"), {"keep_dims": keep})
    return np.asarray(get_kernel("Mean").fn(ctx, x, np.array(axes, np.int32)))


@pytest.mark.parametrize("shape,axes", [((2, 48, 48, 32), [1, 2]), ((2, 3, 3, 1152), [1, 2]),
                                        ((1, 7, 7, 16), [1, 2]), ((3, 5, 40), [1]),
                                        ((2, 3, 4, 20), [0, 1]), ((4, 2, 3, 2, 17), [1, 2, 3])])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("keep", [True, False])
def test_middle_mean_matches_float64(shape, axes, dtype, keep):
    x = rng.standard_normal(shape).astype(dtype)
    assert reduce_ops._middle_sum(x, tuple(axes), keep) is not None  # the GEMV path
    got = _mean(x, axes, keep)
    want = np.mean(x.astype(np.float64), axis=tuple(axes), keepdims=keep)
    assert got.dtype == dtype and got.shape == want.shape
    tol = 2e-6 if dtype == np.float32 else 1e-13
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol)


def test_middle_mean_inf_and_nan_as_numpy():
    x = rng.standard_normal((2, 6, 6, 24)).astype(np.float32)
    x[0, 1, 2, 3] = np.inf
    x[0, 4, 4, 3] = -np.inf  # inf - inf: NaN
    x[1, 0, 0, 5] = np.inf
    x[1, 2, 2, 7] = np.nan
    got = _mean(x, [1, 2], True)
    want = np.mean(x, axis=(1, 2), keepdims=True)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_array_equal(np.isinf(got), np.isinf(want))
    fin = np.isfinite(want)
    np.testing.assert_allclose(got[fin], want[fin], rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("x,axes", [
    (rng.standard_normal((2, 6, 6, 8)).astype(np.float32), [1, 2]),  # rows too short
    (rng.standard_normal((2, 6, 6, 24)).astype(np.float32), [3]),  # the last axis
    (rng.standard_normal((2, 6, 6, 24)).astype(np.float32), [1, 3]),  # not a run
    (rng.standard_normal((2, 24, 6, 6)).astype(np.float32).transpose(0, 2, 3, 1), [1, 2]),
    (rng.standard_normal((2, 6, 6, 24)).astype(np.float16), [1, 2])])
def test_other_means_keep_numpys_bits(x, axes):
    assert reduce_ops._middle_sum(x, tuple(axes), False) is None or x.dtype == np.float16
    got = _mean(x, axes, False)
    if x.dtype == np.float16:
        want = np.mean(x, axis=tuple(axes), dtype=np.float32).astype(np.float16)
    else:
        want = np.add.reduce(x, axis=tuple(axes), dtype=x.dtype)
        want /= np.prod([x.shape[a] for a in axes])
    np.testing.assert_array_equal(got, want)
