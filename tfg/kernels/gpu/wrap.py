"""GPU kernels made from the numpy (CPU) kernels: the same maths, run on CuPy arrays.

Every CPU kernel without a hand-written GPU kernel gets a GPU registration built here:

    CPU:  Tanh(x: numpy)        -> np.tanh(x)                  (numpy)
    GPU:  Tanh(x: numpy|cupy)   -> np.tanh(cupy.asarray(x))    (cupy: NumPy dispatches the call
                                                                 to CuPy via __array_ufunc__ /
                                                                 __array_function__)

Memory placement follows TensorFlow's HostMemory convention: int32 tensors (shapes, sizes,
axes, loop counters), strings, and scalar predicates live on the host as numpy arrays; other
inputs are copied to the device before the kernel runs. A kernel whose numpy code cannot take
CuPy arrays (it calls np.asarray, builds arrays from Python data, ...) raises on the first call;
the node then runs its CPU kernel on host copies of its inputs from then on (one exception per
node, remembered in ctx.cache), so results are always the CPU kernel's.

Kernels that mutate state through Ref inputs, or need the step (queues, stacks, random ops,
checkpoints), are not wrapped: they have no GPU kernel unless kernels.py writes one, so the
placer keeps them on a CPU device.
"""
import types

import numpy as np

import cupy

from tfg.kernels import registry
from tfg.kernels.context import KernelContext

# Ops whose GPU kernels TensorFlow registers with every input and output in host memory.
HOST_OPS = frozenset({"Shape", "ShapeN", "Size", "Rank", "BroadcastGradientArgs", "Range"})
# Step-needing or Ref-taking CPU kernels that are still safe to run as-is on a GPU device:
# variables hold a Ref whose value the GPU Assign/Apply kernels keep as a CuPy array.
PASSTHROUGH_OPS = frozenset({"VariableV2", "Variable", "TemporaryVariable", "IsVariableInitialized",
                             "Identity", "RefIdentity", "StopGradient", "Snapshot", "StackV2"})
# Errors a numpy kernel raises when handed CuPy arrays it cannot use.
_DISPATCH_ERRORS = (TypeError, ValueError, NotImplementedError, AttributeError, IndexError)
_FALLBACK = "_gpu_on_host"
_HOST_CTX = "_gpu_host_ctx"


def _is_device(value):
    return type(value) is cupy.ndarray


def to_device(value):
    """numpy -> cupy for values that live in device memory (not int32, strings, objects)."""
    if type(value) is np.ndarray and value.dtype != np.int32 and value.dtype.kind not in "OSUV":
        return cupy.asarray(value)
    return value


def to_host(value):
    """cupy -> numpy; anything else unchanged."""
    return value.get() if type(value) is cupy.ndarray else value


def to_output(value):
    """Place one kernel output: int32 tensors and scalar bools on the host, floats on device."""
    if type(value) is cupy.ndarray:
        if value.dtype == np.int32 or (value.dtype == np.bool_ and value.size <= 1):
            return value.get()
        return value
    if type(value) is np.ndarray and value.dtype != np.int32 and value.dtype.kind in "fcu":
        return cupy.asarray(value)
    return value


def _host_ctx(ctx):
    hctx = ctx.cache.get(_HOST_CTX)
    if hctx is None:
        hctx = KernelContext(ctx.node, ctx.attrs, np, ctx.device, ctx.output_dtypes)
        ctx.cache[_HOST_CTX] = hctx
    return hctx


def _outputs(out, convert):
    if type(out) is tuple or type(out) is list:
        return type(out)(convert(o) for o in out)
    return convert(out)


class _NumpyOnDevice:
    """What `np` means inside a rebound kernel: each function goes to CuPy when one of its
    arguments is a CuPy array and to NumPy otherwise (so host int32 shapes stay numpy);
    non-callables (dtypes, np.newaxis, finfo) are NumPy's."""

    def __getattr__(self, name):
        npf = getattr(np, name)
        cpf = getattr(cupy, name, None)
        if cpf is None or not callable(npf) or isinstance(npf, type):
            return npf

        def call(*args, **kwargs):
            for a in args:
                if type(a) is cupy.ndarray or (type(a) in (list, tuple) and a
                                               and type(a[0]) is cupy.ndarray):
                    return cpf(*args, **kwargs)
            return npf(*args, **kwargs)

        self.__dict__[name] = call  # noqa: resolve each name once
        return call


NP_ON_DEVICE = _NumpyOnDevice()
_REBOUND = {}


def rebind(fn, depth=2):
    """`fn` with `np` in its module globals replaced by NP_ON_DEVICE; module-level helper
    functions of tfg.kernels it calls are rebound too (to `depth` levels)."""
    key = (fn, depth)
    if key in _REBOUND:
        return _REBOUND[key]
    g = dict(fn.__globals__)
    for name, value in list(g.items()):
        if value is np:
            g[name] = NP_ON_DEVICE
        elif (depth > 0 and isinstance(value, types.FunctionType)
              and getattr(value, "__module__", "").startswith("tfg.kernels")
              and value is not fn):
            g[name] = rebind(value, depth - 1)
    new = types.FunctionType(fn.__code__, g, fn.__name__, fn.__defaults__, fn.__closure__)
    new.__kwdefaults__ = fn.__kwdefaults__
    g[fn.__name__] = new if g.get(fn.__name__) is fn else g.get(fn.__name__)
    _REBOUND[key] = new
    return new


def device_kernel(fn):
    """Wrap the numpy kernel `fn` to run on device arrays, falling back to the host."""
    dfn = rebind(fn)

    def run(ctx, *args):
        if not ctx.cache.get(_FALLBACK):
            dev = [to_device(a) for a in args]
            try:
                return _outputs(dfn(ctx, *dev), to_output)
            except _DISPATCH_ERRORS:
                ctx.cache[_FALLBACK] = True
        return fn(_host_ctx(ctx), *[to_host(a) for a in args])

    run.__name__ = f"gpu_{fn.__name__}"
    run.__doc__ = fn.__doc__
    return run


def host_kernel(fn):
    """Wrap the numpy kernel `fn` as a host-memory GPU kernel: inputs copied to the host."""
    def run(ctx, *args):
        return fn(_host_ctx(ctx), *[to_host(a) for a in args])

    run.__name__ = f"gpu_host_{fn.__name__}"
    return run


def register_wrapped():
    """Give every wrappable CPU kernel a GPU kernel, unless one is already registered."""
    table = registry._KERNELS
    for (op, dtype), kd in list(table.items()):
        if dtype != registry.CPU or (op, registry.GPU) in table:
            continue
        if op in PASSTHROUGH_OPS:
            fn = kd.fn
        elif kd.needs_step or kd.ref_inputs:
            continue
        elif op in HOST_OPS:
            fn = host_kernel(kd.fn)
        else:
            fn = device_kernel(kd.fn)
        table[(op, registry.GPU)] = registry.KernelDef(op, registry.GPU, fn, kd.needs_step,
                                                       kd.ref_inputs, kd.forwards_input)
