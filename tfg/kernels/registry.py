"""Kernels, registered by (op, device type). One registration block per op family.

    @kernel("MatMul")                       # CPU, numpy
    def matmul(ctx, a, b):
        ta, tb = ctx.attrs["transpose_a"], ctx.attrs["transpose_b"]
        return (a.T if ta else a) @ (b.T if tb else b)

A kernel is called as `fn(ctx, *inputs)` and returns one array, or a tuple/list with one array
per output. `ctx` is a `KernelContext` made once per node when the executor prepares a graph:
`ctx.attrs` holds every attr decoded (signature defaults filled in), `ctx.node` the Node,
`ctx.xp` the array module (numpy on CPU, cupy on GPU), `ctx.device` the device name.

Kernels registered with `needs_step=True` are called as `fn(ctx, step, *inputs)`: `step` gives
the per-step state (`step.resources` for step-scoped resources such as stacks,
`step.session_resources` for variables/queues that live as long as the session, `step.rng`).
`ref_inputs` lists input indices the kernel takes by reference (a `Ref` object, see
tfg.kernels.resources); every other input reaching the kernel is a plain array.

One function serves several device types when it is written against `ctx.xp`:

    @kernel("Sum", device_types=ALL_DEVICES, host_inputs=(1,))   # axes stay on the host
    def sum_(ctx, x, axes):
        return ctx.xp.sum(x, axis=norm_axes(axes, x.ndim), keepdims=ctx.attrs["keep_dims"])

Its GPU registration gets its inputs in the memory TensorFlow keeps them in
(tfg.kernels.memory): `host_inputs` on the host, the rest on the device; `host_only=True`
makes the GPU kernel compute on the host altogether (Shape, Size, ...). An op registered for
CPU only has no GPU kernel: placement keeps it on a CPU device.
"""
from dataclasses import dataclass
from typing import Callable

from tfg.errors import UnknownOpError
from tfg.kernels.memory import on_device

CPU, GPU = "CPU", "GPU"
ALL_DEVICES = (CPU, GPU)


@dataclass(frozen=True)
class KernelDef:
    op: str
    device_type: str
    fn: Callable
    needs_step: bool = False
    ref_inputs: tuple = ()
    # The kernel may return one of its inputs itself (Identity-like): the executor must then
    # not let a later in-place update of that input alias the output.
    forwards_input: bool = False
    # GPU only: inputs kept in host memory, and whether the kernel computes on the host.
    host_inputs: tuple = ()
    host_only: bool = False


_KERNELS = {}


def kernel(op, device_types=(CPU,), needs_step=False, ref_inputs=(), forwards_input=False,
           host_inputs=(), host_only=False, shape_only=False):
    """Decorator registering `fn` for `op` (a name or a list) on each of `device_types`."""
    ops = [op] if isinstance(op, str) else list(op)
    types = [device_types] if isinstance(device_types, str) else list(device_types)

    def register(fn):
        for t in types:
            call = fn if t == CPU else on_device(fn, host_inputs, ref_inputs, needs_step,
                                                 shape_only)
            for o in ops:
                _KERNELS[(o, t)] = KernelDef(o, t, call, needs_step, tuple(ref_inputs),
                                             forwards_input, tuple(host_inputs), host_only)
        return fn

    return register


def get_kernel(op, device_type=CPU, node=None):
    """The KernelDef for (op, device_type); the error names the node and what exists."""
    kd = _KERNELS.get((op, device_type))
    if kd is None:
        _ensure_loaded()
        kd = _KERNELS.get((op, device_type))
    if kd is None:
        where = f" for node {node!r}" if node else ""
        others = sorted(t for (o, t) in _KERNELS if o == op)
        have = f"; it has kernels on {', '.join(others)}" if others else "; no device has one"
        raise UnknownOpError(f"no {device_type} kernel for op {op!r}{where}{have}")
    return kd


def find_kernel(op, device_type=CPU):
    """The KernelDef for (op, device_type), or None (no error: for callers that only ask)."""
    kd = _KERNELS.get((op, device_type))
    if kd is None and not _loaded:
        _ensure_loaded()
        kd = _KERNELS.get((op, device_type))
    return kd


def has_kernel(op, device_type=CPU):
    _ensure_loaded()
    return (op, device_type) in _KERNELS


def registered_ops(device_type=CPU):
    _ensure_loaded()
    return sorted(o for (o, t) in _KERNELS if t == device_type)


_loaded = False


def _ensure_loaded():
    global _loaded
    if not _loaded:
        _loaded = True
        # lazy: registers every kernel module on the first lookup (the package imports this
    # module: a circle at import time), so graph-only commands never load the kernels
    import tfg.kernels  # noqa: F401
