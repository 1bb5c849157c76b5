"""Where a kernel's inputs live on a GPU device: TensorFlow's HostMemory convention.

A GPU registration of a kernel is the same `fn(ctx, *inputs)` written against `ctx.xp`; this
module wraps it so each input arrives in the memory the kernel expects:

    @kernel("Reshape", device_types=ALL_DEVICES, host_inputs=(1,))
    GPU call: Reshape(tensor: numpy float32 (a feed), shape: int32 numpy (from Shape))
           -> fn(ctx, cupy float32 (copied once), numpy int32 (stays on the host))

Rules, as TensorFlow's GPU kernels declare them:
- inputs listed in `host_inputs` (shapes, axes, sizes, paddings) are host (numpy) arrays;
- a node whose type attr `T` (or `dtype`) is int32 or a string computes on the host
  (`ctx.xp` is numpy): TensorFlow keeps int32 tensors of a GPU device in host memory, so shape
  arithmetic never touches the device;
- every other numeric input is a device array; a numpy value (a feed, a value received from a
  CPU partition, an int32 index) is copied to the device by the first kernel that needs it.
Outputs stay where the kernel computed them. Nothing here falls back to the CPU kernel: an op
without a GPU registration has no GPU kernel, and placement puts it on a CPU.

Copies between host and device go through page-locked (pinned) host memory, so the GPU's DMA
engine moves them without the driver's own bounce buffer:

    >>> to_host(cupy.ones((256, 1024)))    # -> numpy array in pinned memory (cupyx.empty_pinned)
    >>> to_device(cupy, np.ones((256, 1024)))  # staged through a reused pinned buffer, then DMA
"""
import threading

import numpy as np

from tfg.schemas.dtypes import DType

# Array types of device memory (cupy.ndarray, the stand-in's array): registered by
# tfg.executor.devices when it loads a GPU array module.
DEVICE_ARRAY_TYPES = []
_HOST_DTYPES = (DType.INT32, DType.STRING)
# Per device array type and per array module: `empty_pinned(shape, dtype)`, a numpy array in
# page-locked memory (cupyx.empty_pinned; the stand-in's counting one).
_PINNED_BY_TYPE = {}
_PINNED_BY_MODULE = {}
# Below this size a copy is cheaper than staging it (the driver copies small pageable buffers
# through its own pinned buffer at no extra cost; an extra host memcpy would only add work).
PINNED_MIN_BYTES = 4096
# Host->device staging buffers, one per size and thread (free again once the copy is done;
# per thread, as partitions run on threads of their own).
_STAGING = threading.local()
_STAGING_MAX = 8  # distinct sizes kept per thread; more and the cache starts over


_SYNC_BY_MODULE = {}  # array module -> wait for the copies queued on its current stream


def register_device(xp, array_type, empty_pinned, synchronize=None):
    """Make `array_type` (of module `xp`) a device array whose copies use `empty_pinned`;
    `synchronize()` waits for a queued host->device copy (CuPy may copy from pinned memory
    asynchronously on the current stream); None where copies are synchronous."""
    if array_type not in DEVICE_ARRAY_TYPES:
        DEVICE_ARRAY_TYPES.append(array_type)
    _PINNED_BY_TYPE[array_type] = empty_pinned
    _PINNED_BY_MODULE[xp] = empty_pinned
    _SYNC_BY_MODULE[xp] = synchronize


def is_device_array(value):
    return type(value) in DEVICE_ARRAY_TYPES


def in_memory_of(xp, value):
    """`value` where a kernel of array module `xp` reads it: numpy for the host, a device
    array for a GPU (a TensorArray entry written by a kernel on the other side)."""
    if type(value) is np.ndarray:
        return value if xp is np else to_device(xp, value)
    return to_host(value) if xp is np else value


# Variant values that hold arrays (a TensorList's items): type -> `copy(value, move)`, a copy
# of the value with `move` applied to each array it holds. TensorFlow copies a variant across
# devices the same way (its registered device-copy functions), item by item.
_CONTAINERS = {}


def register_container(value_type, copy):
    _CONTAINERS[value_type] = copy


def to_host(value):
    """A device array copied to numpy (into pinned memory when large); anything else unchanged.

    >>> to_host(cupy.arange(3))      # -> array([0, 1, 2]) (numpy)
    """
    t = type(value)
    if t not in DEVICE_ARRAY_TYPES:
        return value
    empty_pinned = _PINNED_BY_TYPE.get(t)
    if empty_pinned is None or value.nbytes < PINNED_MIN_BYTES:
        return value.get()
    # A fresh pinned array (CuPy's pinned pool recycles the memory once the caller drops it):
    # it is handed to the caller, so it cannot be a buffer reused by the next copy.
    out = empty_pinned(value.shape, value.dtype)
    value.get(out=out)
    return out


def to_device(xp, value):
    """A numeric numpy value copied to `xp`'s device; strings, objects and non-arrays unchanged.

    >>> to_device(cupy, np.ones(2, np.float32))   # -> cupy array
    """
    t = type(value)
    if (t is np.ndarray or isinstance(value, np.generic)) and value.dtype.kind not in "OSUVM":
        empty_pinned = _PINNED_BY_MODULE.get(xp)
        if empty_pinned is None or value.nbytes < PINNED_MIN_BYTES:
            return xp.asarray(value)
        return _upload(xp, value, empty_pinned)
    return value


def _upload(xp, value, empty_pinned):
    """`value` copied into a reused pinned buffer of its size, then to a new device array."""
    cache = getattr(_STAGING, "buffers", None)
    if cache is None:
        cache = _STAGING.buffers = {}
    nbytes = value.nbytes
    flat = cache.get(nbytes)
    if flat is None:
        if len(cache) >= _STAGING_MAX:
            cache.clear()
        flat = cache[nbytes] = empty_pinned((nbytes,), np.uint8)
    staged = flat.view(value.dtype).reshape(value.shape)
    np.copyto(staged, value)
    out = xp.empty(value.shape, value.dtype)
    out.set(staged)
    synchronize = _SYNC_BY_MODULE.get(xp)
    if synchronize is not None:  # the buffer is reused by the next copy of this size
        synchronize()
    return out


def received(xp, value):
    """A value arriving at a device from another one (a _Recv): a numpy array for a CPU
    (`xp` numpy), a device array for a GPU except int32 and strings, which stay on the host;
    a container (a TensorList) copied with each item moved so."""
    copy = _CONTAINERS.get(type(value))
    if copy is not None:
        return copy(value, lambda item: received(xp, item))
    if xp is np:
        return to_host(value)
    if type(value) is np.ndarray and value.dtype == np.int32:
        return value
    return to_device(xp, value)


def computes_on_host(host_only, attrs):
    """True when a GPU kernel runs on host memory for this node (`ctx.xp` is numpy)."""
    if host_only:
        return True
    dt = attrs.get("T", attrs.get("dtype"))
    return dt in _HOST_DTYPES


def on_device(fn, host_inputs=(), ref_inputs=(), needs_step=False, shape_only=False):
    """`fn` as a GPU kernel: inputs moved to the memory they belong in, then `fn` called.

    host_inputs may count from the end (-1: the last input, e.g. ConcatV2's axis);
    shape_only kernels (Shape, Size, Rank) read only metadata: their inputs are not moved."""
    if shape_only:
        return fn
    host = frozenset(host_inputs)
    skip = frozenset(ref_inputs)

    def place(ctx, args):
        xp = ctx.xp
        if xp is np:  # a host-memory node: every input on the host
            return [to_host(a) for a in args]
        n = len(args)
        return [a if i in skip else to_host(a) if i in host or i - n in host
                else to_device(xp, a) for i, a in enumerate(args)]

    if needs_step:
        def run(ctx, step, *args):
            return fn(ctx, step, *place(ctx, args))
    else:
        def run(ctx, *args):
            return fn(ctx, *place(ctx, args))
    run.__name__ = f"gpu_{fn.__name__}"
    run.__doc__ = fn.__doc__
    run.__wrapped__ = fn
    return run
