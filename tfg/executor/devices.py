"""Local devices: a `DeviceSet` built from a SPEC, and the array module each device type uses.

    >>> [d.name for d in DeviceSet.from_spec("cpu:2")]
    ['/job:localhost/replica:0/task:0/device:CPU:0', '/job:localhost/replica:0/task:0/device:CPU:1']
    >>> DeviceSet.from_spec("cpu:1").find("/device:CPU:0").short
    'CPU:0'

SPEC forms: `cpu:4` (four CPU devices), `cpu:2,gpu:1`, full or partial names separated by commas
(`/job:localhost/replica:0/task:0/device:CPU:1`, `/device:CPU:1`), or None/"" for every local
device (CPU:0, plus each GPU that CuPy sees). GPUs alone (`gpu:1`) come with the host's CPU:0,
as in TensorFlow, which gets only the ops no GPU has a kernel for. GPU kernels are looked up
under device type "GPU" and get `cupy` as their array module; asking for a GPU without CuPy
is an input error.
With `TFG_GPU_STANDIN=N` in the environment, N GPU devices exist and their array module is
tfg.kernels.gpu.standin (numpy behind a distinct array type): CI runs every GPU kernel that way.
"""

import numpy as np

from tfg.errors import TfgInputError
from tfg.graphdef.names import (  # noqa: F401  (local_gpu_count, STANDIN_ENV: this API's)
    DEVICE_TYPES, LOCAL_JOB, STANDIN_ENV, DeviceSpec, cupy_module, host_cpu_for,
    local_device_specs, local_gpu_count, parse_device_list, standin_gpu_count)
from tfg.kernels import memory
from tfg.kernels.memory import to_host  # noqa: F401  (re-exported: the executor's border copy)


def array_module(device_type):
    """The array module kernels of `device_type` compute with (the hook for GPU support)."""
    if device_type == "CPU":
        return np
    if device_type == "GPU":
        xp = _cupy()
        if xp is None:
            raise TfgInputError("a GPU device was requested but CuPy is not installed "
                                "(pip install 'tfg[gpu]')")
        if xp.ndarray not in memory.DEVICE_ARRAY_TYPES:
            memory.register_device(xp, xp.ndarray, _empty_pinned(xp),
                                   lambda: xp.cuda.get_current_stream().synchronize())
        return xp
    raise TfgInputError(f"unknown device type {device_type!r} (expected CPU or GPU)")


def _cupy():
    """The GPU array module: the stand-in when TFG_GPU_STANDIN asks for it, else CuPy."""
    if standin_gpu_count():
        from tfg.kernels.gpu import standin  # lazy: only test runs ask for it
        return standin
    return cupy_module()


def _empty_pinned(xp):
    """The page-locked host allocator of `xp` (cupyx.empty_pinned for CuPy)."""
    own = getattr(xp, "empty_pinned", None)  # the stand-in's counting allocator
    if own is not None:
        return own
    import cupyx  # lazy, as CuPy itself: only a GPU run gets here
    return cupyx.empty_pinned


class Device:
    """One device: its full name, type, index and array module."""

    __slots__ = ("name", "spec", "device_type", "index", "_xp")

    def __init__(self, spec):
        self.spec = spec
        self.name = spec.to_string()
        self.device_type = spec.device_type
        self.index = spec.device_index
        self._xp = None

    @property
    def xp(self):
        if self._xp is None:
            self._xp = array_module(self.device_type)
        return self._xp

    @property
    def short(self):
        return f"{self.device_type}:{self.index}"

    def __repr__(self):
        return f"<Device {self.name}>"


class DeviceSet:
    """An ordered set of devices; the first is the default for nodes without a device."""

    def __init__(self, devices, host_only=()):
        self.devices = list(devices)
        if not self.devices:
            raise TfgInputError("the device set is empty")
        self._by_name = {d.name: d for d in self.devices}
        # the host CPU added to a set of GPUs alone: only for what no GPU runs (host_cpu_for)
        self.host_only = frozenset(host_only)

    def __iter__(self):
        return iter(self.devices)

    def __len__(self):
        return len(self.devices)

    @property
    def default(self):
        return self.devices[0]

    @property
    def names(self):
        return [d.name for d in self.devices]

    @staticmethod
    def from_spec(spec=None, job=LOCAL_JOB, task=0):
        """Parse a devices SPEC (see module docstring); None means every local device."""
        if isinstance(spec, DeviceSet):
            return spec
        if isinstance(spec, (list, tuple)):
            spec = ",".join(spec)
        if spec is None or not str(spec).strip():
            return DeviceSet(Device(s) for s in local_device_specs(job, task))
        out = parse_device_list(str(spec), job, task, device_types=DEVICE_TYPES)
        for full in out:
            if full.job != job or full.task != task:
                raise TfgInputError(f"device {full.to_string()!r} is not a local device "
                                    f"(/job:{job}/task:{task}); use --cluster for remote tasks")
        host = host_cpu_for(out)
        devices = DeviceSet((Device(s) for s in out + ([host] if host else [])),
                            host_only=[host.to_string()] if host else ())
        for d in devices:
            if d.device_type == "GPU":
                d.xp  # noqa: B018  (fail now, clearly, when CuPy is missing)
                if d.index >= local_gpu_count():
                    raise TfgInputError(f"device {d.name} does not exist: CuPy sees "
                                        f"{local_gpu_count()} GPU(s)")
        return devices

    def find(self, name):
        """The device a (full or partial) device name denotes, or None when none matches.

        A partial name matching several devices gives the first of them.
        """
        if not name:
            return None
        d = self._by_name.get(name)
        if d is not None:
            return d
        spec = DeviceSpec.parse(name)
        for d in self.devices:
            if spec.matches(d.spec):
                return d
        return None

    def get(self, name):
        """Like find, but an unknown device is an input error naming the set."""
        d = self.find(name)
        if d is None:
            raise TfgInputError(f"unknown device {name!r}; the devices are "
                                f"{', '.join(x.short for x in self.devices)}")
        return d
