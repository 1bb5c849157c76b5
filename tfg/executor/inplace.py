"""In-place variants of cheap elementwise kernels, for the fast path's schedule.

    Conv2D -> BiasAdd -> Relu      (each output used once, nothing fetched in between)
    BiasAdd and Relu write into the Conv2D output's memory instead of allocating two more
    tensors of the same size.

`inplace_kernel(consumer, producer, index)` gives the in-place function to use for the
consumer when it may overwrite its input `index`, or None. The schedule asks only when that
input's slot has this consumer as its single use and is not fetched, so no other value can
see the write; the producer must be an op whose kernel always returns a newly allocated array
(not a constant's cached value, a variable's buffer, a view of an input or a fed array), which
the FRESH_OUTPUT list states. At run time the variant still checks the array (a writable
ndarray of the result's dtype) and otherwise calls the ordinary kernel, so values are
bit-for-bit those of the ordinary kernels.
"""
import numpy as np

from tfg.kernels import clamp
from tfg.kernels.nn_ops import _bias_shape
from tfg.kernels.registry import get_kernel
from tfg.schemas.ops import ops_with

# Ops whose CPU kernel returns, on output 0, an array that nothing else references (trait
# "fresh_output"): a fresh matmul/convolution/pooling result, or (for the in-place ops below)
# their input written over, which was itself such an array.
FRESH_OUTPUT = ops_with("fresh_output")


def _clamp(fn):
    """The factory of an in-place Relu/Relu6: `fn` (clamp.relu or clamp.relu6) into x."""
    def factory(base):
        def clamp_inplace(ctx, x):
            if type(x) is np.ndarray and x.flags.writeable:
                return fn(x, out=x)
            return base(ctx, x)
        clamp_inplace.__name__ = f"{fn.__name__}_inplace"  # relu_inplace, relu6_inplace
        return clamp_inplace
    return factory


def _bias_add(base):
    def bias_add_inplace(ctx, value, bias):
        if (type(value) is np.ndarray and value.flags.writeable
                and type(bias) is np.ndarray and bias.dtype == value.dtype):
            axis = _bias_shape(value, bias, ctx.attrs.get("data_format", b"NHWC"))
            if axis != value.ndim - 1:
                bias = bias.reshape((-1,) + (1,) * (value.ndim - axis - 1))
            return np.add(value, bias, out=value)
        return base(ctx, value, bias)
    return bias_add_inplace


# op -> (input index it may overwrite, factory of the in-place function from the base kernel)
_VARIANTS = {
    "Relu": (0, _clamp(clamp.relu)),
    "Relu6": (0, _clamp(clamp.relu6)),
    "BiasAdd": (0, _bias_add),
    "BiasAddV1": (0, _bias_add),
}


def inplace_kernel(item, producer, index):
    """The in-place function for plan item `item` overwriting its input `index`, which is
    output 0 of plan item `producer`; None when there is none or either does not run the
    CPU numpy kernel of its op."""
    spec = _VARIANTS.get(item.op)
    if spec is None or spec[0] != index or not fresh_producer(producer):
        return None
    base = get_kernel(item.op, "CPU").fn
    # A kernel behind the memory check (tfg/executor/limits.py) is still that kernel.
    if _unwrapped(item.fn) is not base:
        return None
    return spec[1](base)


def fresh_producer(producer):
    """Whether plan item `producer` runs the CPU numpy kernel of an op whose output 0 is a new
    array nothing else references (trait fresh_output)."""
    return (producer.kind == "kernel" and producer.op in FRESH_OUTPUT
            and producer.ctx is not None and producer.ctx.xp is np
            and _unwrapped(producer.fn) is get_kernel(producer.op, "CPU").fn)


def _unwrapped(fn):
    return getattr(fn, "__wrapped__", fn)
