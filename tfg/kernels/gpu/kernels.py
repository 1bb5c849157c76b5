"""Hand-written GPU kernels: constants kept on the device, and the state-changing ops
(Assign*, the Apply* optimizers) whose variables hold CuPy arrays.

    x = VariableV2(); Assign(x, numpy init) -> x's Ref now holds a cupy array
    ApplyGradientDescent(x, lr, g)          -> x <- x - lr * g, computed by cuBLAS/CuPy on device
"""
import numpy as np

import cupy

from tfg.kernels import basic, training_ops
from tfg.kernels._util import fail
from tfg.kernels.registry import GPU, kernel
from tfg.kernels.gpu.wrap import to_output


@kernel("Const", device_types=GPU)
def const(ctx):
    """A Const lives on the device once (int32 and string constants stay on the host)."""
    value = ctx.cache.get("gpu_value")
    if value is None:
        value = to_output(basic.const(ctx))
        ctx.cache["gpu_value"] = value
    return value


def _same_shape(op, ref, value):
    old = ref.get()
    if tuple(old.shape) != tuple(value.shape):
        fail(f"{op} requires shapes of both tensors to match. lhs shape= {list(old.shape)} "
             f"rhs shape= {list(value.shape)}")
    return old


@kernel("Assign", device_types=GPU, ref_inputs=(0,))
def assign(ctx, ref, value):
    """Assign on the device: the variable keeps its own copy as a CuPy array."""
    value = cupy.array(value, copy=True) if value.dtype.kind not in "OSU" else np.array(value)
    with ref.lock:
        if ctx.attrs.get("validate_shape", True):
            if ref.initialized:
                _same_shape("Assign", ref, value)
            elif ref.shape is not None and not _compatible(value.shape, ref.shape):
                fail(f"Assign requires shapes of both tensors to match. lhs shape= "
                     f"{list(ref.shape)} rhs shape= {list(value.shape)}")
        ref.assign(value)
    return ref


def _compatible(shape, want):
    want = list(want)
    return len(shape) == len(want) and all(w is None or w < 0 or w == s
                                           for s, w in zip(shape, want))


def _update(op, fn):
    @kernel(op, device_types=GPU, ref_inputs=(0,))
    def run(ctx, ref, value):
        value = cupy.asarray(value)
        with ref.lock:
            old = cupy.asarray(_same_shape(op, ref, value))
            ref.assign(fn(old, value).astype(old.dtype, copy=False))
        return ref


_update("AssignAdd", lambda a, b: a + b)
_update("AssignSub", lambda a, b: a - b)


def _apply(refs, args, rule, grad_index, attrs):
    var = refs[0]
    with var.lock:
        values = [cupy.asarray(r.get()) for r in refs]
        args = [cupy.asarray(a) if type(a) is np.ndarray else a for a in args]
        grad = args[grad_index]
        for r, v in zip(refs, values):
            if v.shape != grad.shape:
                fail(f"var and grad do not have the same shape: {list(v.shape)} "
                     f"{list(grad.shape)} ({r.name})")
        new = rule(attrs, *values, *args)
        for r, old, value in zip(refs, values, new):
            r.assign(cupy.asarray(value).astype(old.dtype, copy=False))


def _register(name, rule, nvars, grad_index):
    # The update rules call np.sqrt etc.: with CuPy arrays NumPy dispatches them to CuPy.
    @kernel("Apply" + name, device_types=GPU, ref_inputs=tuple(range(nvars)))
    def apply_ref(ctx, *inputs):
        _apply(inputs[:nvars], inputs[nvars:], rule, grad_index, ctx.attrs)
        return inputs[0]


for _name, (_rule, _n, _g) in training_ops.RULES.items():
    _register(_name, _rule, _n, _g)
