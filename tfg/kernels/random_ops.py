"""Random number ops: RandomUniform, RandomUniformInt, RandomStandardNormal, TruncatedNormal,
Multinomial.

    RandomUniform(shape=[2, 3], dtype=float, seed=1, seed2=2) -> floats in [0, 1)

Each node draws from its own numpy Generator (Philox), made on first use from the node's
(seed, seed2) and kept for the session (`step.rng_for`), so successive steps give new values
and a fixed seed pair gives the same sequence in every session. The streams are not bit-equal
to TensorFlow's. Both seeds 0 means a fresh seed from the OS, as in TensorFlow.
"""
import numpy as np

from tfg.kernels._util import fail, np_dtype, shape_vector, tf_name
from tfg.kernels.registry import kernel
from tfg.kernels.stateless_random import _sample_row as sample_row, multinomial_sizes


def _rng(ctx, step):
    return step.rng_for(ctx.name, ctx.attrs.get("seed", 0), ctx.attrs.get("seed2", 0))


def _shape(shape):
    dims = shape_vector(shape, "shape")
    if any(d < 0 for d in dims):
        fail(f"shape must be non-negative, got {list(dims)}")
    return dims


def _float_dtype(ctx):
    dt = np_dtype(ctx.attrs.get("dtype", "float32"))
    if dt.kind != "f":
        fail(f"random floats of dtype {tf_name(dt)} are not supported")
    # numpy generates float32/float64 directly; half (and bfloat16) go through float32.
    return dt, (dt if dt in (np.float32, np.float64) else np.dtype(np.float32))


@kernel("RandomUniform", needs_step=True)
def random_uniform(ctx, step, shape):
    dt, gen = _float_dtype(ctx)
    return _rng(ctx, step).random(_shape(shape), dtype=gen).astype(dt, copy=False)


@kernel("RandomStandardNormal", needs_step=True)
def random_standard_normal(ctx, step, shape):
    dt, gen = _float_dtype(ctx)
    return _rng(ctx, step).standard_normal(_shape(shape), dtype=gen).astype(dt, copy=False)


@kernel("TruncatedNormal", needs_step=True)
def truncated_normal(ctx, step, shape):
    dt, gen = _float_dtype(ctx)
    rng = _rng(ctx, step)
    out = rng.standard_normal(_shape(shape), dtype=gen)
    flat = out.reshape(-1)
    # Redraw values beyond two standard deviations until none is left (~4.6% per round).
    bad = np.flatnonzero(np.abs(flat) > 2)
    while bad.size:
        flat[bad] = rng.standard_normal(bad.size, dtype=gen)
        bad = bad[np.abs(flat[bad]) > 2]
    return out.astype(dt, copy=False)


@kernel("RandomUniformInt", needs_step=True)
def random_uniform_int(ctx, step, shape, minval, maxval):
    lo, hi = np.asarray(minval), np.asarray(maxval)
    if lo.ndim or hi.ndim:
        fail("minval and maxval must be scalars")
    if not lo < hi:
        fail(f"Need minval < maxval: {lo} >= {hi}")
    return _rng(ctx, step).integers(lo, hi, _shape(shape), dtype=lo.dtype)


@kernel("Multinomial", needs_step=True)
def multinomial(ctx, step, logits, num_samples):
    """tf.random.categorical: num_samples class indices per row of logits [batch, classes],
    each drawn with probability softmax(row); the uniforms come from the node's generator and
    map to classes as StatelessMultinomial's do (TensorFlow's CPU MultinomialFunctor)."""
    logits = np.asarray(logits)
    batch, ns = multinomial_sizes("Multinomial", logits, np.asarray(num_samples))
    out = np.zeros((batch, ns), np_dtype(ctx.attrs.get("output_dtype", "int64")))
    if out.size:
        draws = _rng(ctx, step).random((batch, ns))
        for b in range(batch):
            out[b] = sample_row(logits[b], draws[b])
    return out
