"""Tensor references (`node`, `node:1`, `^node`) and device names.

    >>> parse_input("^a"), parse_input("b:2"), tensor_name("b", 0)
    (TensorRef(node='a', port=-1), TensorRef(node='b', port=2), 'b:0')
    >>> DeviceSpec.parse("/job:w/task:1/device:GPU:0").to_string()
    '/job:w/task:1/device:GPU:0'
    >>> DeviceSpec.parse("/cpu:0").to_string()
    '/device:CPU:0'
"""
import os
import re
from typing import NamedTuple, Optional

from tfg.errors import TfgInputError

CONTROL = -1  # port of a control input
# On a Const that `tfg partition` copied onto another device: the original's name (a feed of
# the original cannot reach the copies: tfg.executor.feeds.refuse_fed_copies).
COPY_OF_ATTR = "_tfg_copy_of"


class TensorRef(NamedTuple):
    node: str
    port: int  # CONTROL for `^node`

    @property
    def is_control(self):
        return self.port == CONTROL

    def __str__(self):
        if self.port == CONTROL:
            return "^" + self.node
        return self.node if self.port == 0 else f"{self.node}:{self.port}"


def parse_input(s):
    """A NodeDef input string -> TensorRef; `n` means output 0, `^n` a control edge."""
    if s.startswith("^"):
        return TensorRef(s[1:], CONTROL)
    name, sep, port = s.rpartition(":")
    if sep and port.isdigit():
        return TensorRef(name, int(port))
    return TensorRef(s, 0)


def parse_tensor(s):
    """A user-given tensor name (`x` or `x:0`) -> TensorRef; control refs are refused."""
    ref = parse_input(s.strip())
    if ref.is_control or not ref.node:
        raise TfgInputError(f"{s!r} is not a tensor name (expected node or node:port)")
    return ref


def tensor_name(node, port=0):
    """The canonical `node:port` form, as used in feeds, fetches and npz keys."""
    return f"{node}:{port}"


def input_string(node, port=0):
    """The NodeDef form: `node` for port 0, `node:port` otherwise, `^node` for control."""
    if port == CONTROL:
        return "^" + node
    return node if port == 0 else f"{node}:{port}"


_DEVICE_PART = re.compile(r"^(job|replica|task|device|cpu|gpu|CPU|GPU|[A-Za-z_]+)(?::(.*))?$")


class DeviceSpec(NamedTuple):
    """A full or partial device name; None fields are unconstrained ('*' ids are None)."""

    job: Optional[str] = None
    replica: Optional[int] = None
    task: Optional[int] = None
    device_type: Optional[str] = None
    device_index: Optional[int] = None

    @staticmethod
    def parse(name):
        """Parse `/job:x/replica:0/task:1/device:GPU:0`, partial specs, and legacy `/cpu:0`."""
        fields = {}
        if not name:
            return DeviceSpec()
        for part in name.strip().strip("/").split("/"):
            if not part:
                continue
            key, _, rest = part.partition(":")
            low = key.lower()
            try:
                if low in ("job", "replica", "task") and rest:
                    fields[low] = rest if low == "job" else (None if rest == "*" else int(rest))
                elif low == "device":
                    dtype, _, idx = rest.partition(":")
                    fields["device_type"] = dtype.upper() if dtype.lower() in ("cpu", "gpu") else dtype
                    fields["device_index"] = None if idx in ("", "*") else int(idx)
                elif rest or low in ("cpu", "gpu"):
                    # Legacy `/cpu:0`, `/gpu:1`, or a bare `CPU:0`.
                    fields["device_type"] = key.upper() if low in ("cpu", "gpu") else key
                    fields["device_index"] = None if rest in ("", "*") else int(rest)
                else:
                    raise ValueError
            except ValueError:
                raise TfgInputError(f"malformed device name {name!r}") from None
        return DeviceSpec(**fields)

    def to_string(self):
        parts = []
        if self.job is not None:
            parts.append(f"/job:{self.job}")
        if self.replica is not None:
            parts.append(f"/replica:{self.replica}")
        if self.task is not None:
            parts.append(f"/task:{self.task}")
        if self.device_type is not None:
            idx = "*" if self.device_index is None else self.device_index
            parts.append(f"/device:{self.device_type}:{idx}")
        return "".join(parts)

    def is_full(self):
        return None not in self

    def matches(self, full):
        """Whether the full device `full` satisfies this (partial) spec."""
        return all(mine is None or mine == theirs for mine, theirs in zip(self, full))

    def merged_with(self, other):
        """Fields of `other` fill the unconstrained fields of self."""
        return DeviceSpec(*(a if a is not None else b for a, b in zip(self, other)))


def canonical_device(name):
    """A device name in TensorFlow's canonical form (empty stays empty)."""
    return DeviceSpec.parse(name).to_string() if name else ""


# --- device lists -----------------------------------------------------------------------------
LOCAL_JOB = "localhost"

# The device types tfg runs kernels on: what `--devices` may name (device_types below).
DEVICE_TYPES = ("CPU", "GPU")


# Far more than any machine has; a bound so that a typo is an error, not minutes of work.
MAX_DEVICES_PER_TYPE = 4096


def parse_device_list(spec, job=LOCAL_JOB, task=0, device_types=None):
    """A devices SPEC -> full DeviceSpecs, in order: the one grammar of `--devices`.

    `cpu:N` / `gpu:N` add N devices of that type (numbered after those already listed); names
    (`/device:CPU:1`, `/job:localhost/replica:0/task:0/device:GPU:0`) are completed with
    `/job:{job}/replica:0/task:{task}`. `device_types` limits the types a name may have.

        >>> [d.to_string() for d in parse_device_list("cpu:2,/device:GPU:0")]
        ['/job:localhost/replica:0/task:0/device:CPU:0',
         '/job:localhost/replica:0/task:0/device:CPU:1',
         '/job:localhost/replica:0/task:0/device:GPU:0']
    """
    parts = spec.split(",") if isinstance(spec, str) else [str(d) for d in spec]
    out = []
    for part in (p.strip() for p in parts):
        if not part:
            continue
        kind, sep, count = (s.strip() for s in part.partition(":"))  # ("cpu : 2" is cpu:2)
        if "/" not in part and kind.upper() in DEVICE_TYPES and (not sep or count.isdigit()):
            n = int(count) if sep else 1
            if n < 1:
                raise TfgInputError(
                    f"device spec {part!r}: N in {kind.lower()}:N is a number of devices "
                    f"(at least 1; {kind.lower()}:1 is one); to name one device, write "
                    f"/device:{kind.upper()}:{count}")
            if n > MAX_DEVICES_PER_TYPE:  # cpu:99999999 built 10**8 devices for minutes
                raise TfgInputError(
                    f"device spec {part!r}: at most {MAX_DEVICES_PER_TYPE} devices of a type")
            dtype = kind.upper()
            start = sum(1 for s in out if s.device_type == dtype)
            out.extend(DeviceSpec(job, 0, task, dtype, start + i) for i in range(n))
            continue
        parsed = DeviceSpec.parse(part)
        if (parsed.device_type is None or parsed.device_index is None
                or (device_types is not None and parsed.device_type not in device_types)):
            raise TfgInputError(f"unknown device {part!r} in device spec {spec!r} (expected "
                                "cpu:N, gpu:N or a full device name such as /device:CPU:0)")
        out.append(parsed.merged_with(DeviceSpec(job, 0, task)))
    if not out:
        raise TfgInputError(f"device spec {spec!r} names no device")
    names = [s.to_string() for s in out]
    if len(set(names)) != len(names):
        raise TfgInputError(f"device spec {spec!r} names a device twice")
    return out


# TFG_GPU_STANDIN=N makes N numpy-backed stand-in GPUs (tfg.kernels.gpu.standin), so tests
# check the GPU path on machines without one.
STANDIN_ENV = "TFG_GPU_STANDIN"


def standin_gpu_count():
    """How many stand-in GPUs TFG_GPU_STANDIN asks for (1 for any non-number but 0)."""
    value = os.environ.get(STANDIN_ENV, "").strip()
    if not value or value == "0":
        return 0
    return int(value) if value.isdigit() else 1


def local_gpu_count():
    """How many GPUs this machine has for tfg: the stand-ins asked for, else those CuPy sees
    (0 without CuPy or without a CUDA runtime)."""
    if standin_gpu_count():
        return standin_gpu_count()
    cupy = cupy_module()
    if cupy is None:
        return 0
    try:
        return int(cupy.cuda.runtime.getDeviceCount())
    except Exception:  # noqa: BLE001 - a driver that fails to answer: no usable GPU
        return 0


def host_cpu_for(specs):
    """The host CPU that a set of GPUs alone runs its CPU-only ops on, or None.

    TensorFlow always has the host's CPU: `--devices gpu:1` means "run on the GPU", and ops
    with no GPU kernel (TensorList and TensorArray bookkeeping, string ops) go to the host.
    So a local set with GPUs and no CPU of their task gets that task's CPU:0, which placement
    uses only for what no GPU of the set can run (build_groups' `host_only`).

        >>> host_cpu_for(parse_device_list("gpu:1")).to_string()
        '/job:localhost/replica:0/task:0/device:CPU:0'
        >>> host_cpu_for(parse_device_list("cpu:1,gpu:1")) is None
        True
    """
    gpus = [s for s in specs if s.device_type == "GPU"]
    if not gpus or any(s.device_type == "CPU" for s in specs):
        return None
    first = gpus[0]
    return DeviceSpec(first.job, first.replica, first.task, "CPU", 0)


def local_device_specs(job=LOCAL_JOB, task=0):
    """The devices of this machine, as an empty `--devices` means: CPU:0 and every GPU."""
    return ([DeviceSpec(job, 0, task, "CPU", 0)]
            + [DeviceSpec(job, 0, task, "GPU", i) for i in range(local_gpu_count())])


def cupy_module():
    """The `cupy` module, or None when it is not installed or its CUDA runtime fails to load."""
    try:
        import cupy  # lazy: optional, and slow to import; only GPU work needs it
    except Exception:  # noqa: BLE001 - ImportError, or a CUDA runtime that fails to load
        return None
    return cupy
