"""Random tensors, built as TensorFlow's Python wrappers build them.

    >>> r = tb.random_normal([3, 2], stddev=0.1, seed=1)
    # random_normal/shape, /mean, /stddev (Consts), random_normal/RandomStandardNormal
    # (seed=87654321, seed2=1 without a graph seed), random_normal/mul, random_normal (AddV2)

tfg's kernels draw from their own generator: values differ from TensorFlow's for the same seed,
so TensorFlow-checked fixtures initialize variables from constants instead.
"""
from tfg.graphdef.builder.core import get_default_builder
from tfg.graphdef.builder.constants import convert_to_tensor
from tfg.graphdef.builder.math_ops import _is_tensorish, add, make, multiply, subtract
from tfg.schemas.dtypes import DType


def _random(op_type, shape, dtype, seed, scope_name):
    b = get_default_builder()
    dt = DType.parse(dtype) if not isinstance(dtype, DType) else dtype
    s = convert_to_tensor(shape, DType.INT32 if not _is_tensorish(shape) else None,
                          name="shape")
    seed1, seed2 = b.op_seeds(seed)
    return make(op_type, [s], {"dtype": dt, "seed": seed1, "seed2": seed2, "T": s.dtype.base},
                op_type, [dt]).outputs[0], dt


def random_normal(shape, mean=0.0, stddev=1.0, dtype=DType.FLOAT, seed=None, name=None):
    """Normal values: RandomStandardNormal * stddev + mean."""
    b = get_default_builder()
    with b.name_scope(name or "random_normal") as scope:
        dt = DType.parse(dtype) if not isinstance(dtype, DType) else dtype
        m = convert_to_tensor(mean, dt, name="mean")
        sd = convert_to_tensor(stddev, dt, name="stddev")
        rnd, _ = _random("RandomStandardNormal", shape, dt, seed, scope)
        return add(multiply(rnd, sd, name="mul"), m, name=scope)


def truncated_normal(shape, mean=0.0, stddev=1.0, dtype=DType.FLOAT, seed=None, name=None):
    """Normal values redrawn beyond two standard deviations."""
    b = get_default_builder()
    with b.name_scope(name or "truncated_normal") as scope:
        dt = DType.parse(dtype) if not isinstance(dtype, DType) else dtype
        m = convert_to_tensor(mean, dt, name="mean")
        sd = convert_to_tensor(stddev, dt, name="stddev")
        rnd, _ = _random("TruncatedNormal", shape, dt, seed, scope)
        return add(multiply(rnd, sd, name="mul"), m, name=scope)


def random_uniform(shape, minval=0.0, maxval=1.0, dtype=DType.FLOAT, seed=None, name=None):
    """Uniform floats in [minval, maxval)."""
    b = get_default_builder()
    with b.name_scope(name or "random_uniform") as scope:
        dt = DType.parse(dtype) if not isinstance(dtype, DType) else dtype
        lo = convert_to_tensor(minval, dt, name="min")
        hi = convert_to_tensor(maxval, dt, name="max")
        rnd, _ = _random("RandomUniform", shape, dt, seed, scope)
        return add(multiply(rnd, subtract(hi, lo, name="sub"), name="mul"), lo, name=scope)


__all__ = ["random_normal", "truncated_normal", "random_uniform"]
