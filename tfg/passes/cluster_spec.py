"""Device lists for the placement and partitioning passes: a local SPEC, full names, or a
cluster spec, turned into full device names without touching any hardware.

    >>> device_names("cpu:2,gpu:1")
    ['/job:localhost/replica:0/task:0/device:CPU:0', '/job:localhost/replica:0/task:0/device:CPU:1',
     '/job:localhost/replica:0/task:0/device:GPU:0']
    >>> parse_cluster("worker=127.0.0.1:2222,127.0.0.1:2223")
    {'worker': ['127.0.0.1:2222', '127.0.0.1:2223']}
    >>> cluster_devices({"worker": ["a:1", "b:2"]})
    ['/job:worker/replica:0/task:0/device:CPU:0', '/job:worker/replica:0/task:1/device:CPU:0']

Placement only names devices, so `gpu:1` is accepted here on a machine without a GPU (the
executor is the one that needs CuPy). A cluster SPEC is a JSON file in TensorFlow's ClusterSpec
shape (`{"worker": ["host:port", ...]}`), the same JSON inline, or `job=host:port,host:port`
with several jobs separated by `;` or spaces.
"""
import json
import os

from tfg.errors import TfgInputError
from tfg.graphdef.names import (DEVICE_TYPES, DeviceSpec, host_cpu_for, local_device_specs,
                                parse_device_list)


def parse_cluster(spec):
    """A cluster SPEC (dict, JSON file path, inline JSON or `job=a,b`) -> {job: [address]}."""
    if isinstance(spec, dict):
        jobs = spec
    else:
        text = str(spec).strip()
        if not text:
            raise TfgInputError("empty cluster spec")
        if os.path.isfile(text):
            try:
                with open(text) as f:
                    jobs = json.load(f)
            except (OSError, ValueError, RecursionError) as e:  # (nested too deep)
                raise TfgInputError(f"cluster spec {text!r}: not a JSON file ({e})") from None
        elif text.startswith("{"):
            try:
                jobs = json.loads(text)
            except (ValueError, RecursionError) as e:
                raise TfgInputError(f"cluster spec: bad JSON ({e})") from None
        else:
            jobs = _parse_inline(text)
    if not isinstance(jobs, dict):  # JSON `[1]` or `3`: was an internal AttributeError
        raise TfgInputError('cluster spec: expected {"job": ["host:port", ...]}')
    if "cluster" in jobs and isinstance(jobs["cluster"], dict):  # a TF_CONFIG-like wrapper
        jobs = jobs["cluster"]
    out = {}
    for job, addrs in jobs.items():
        if isinstance(addrs, dict):  # {"0": "host:port", ...} (sparse task ids)
            if not all(str(k).isdigit() for k in addrs):
                raise TfgInputError(f"cluster spec: job {job!r}: task ids must be numbers")
            addrs = [addrs[k] for k in sorted(addrs, key=int)]
        if not isinstance(addrs, list) or not all(isinstance(a, str) for a in addrs) \
                or not addrs:
            raise TfgInputError(f"cluster spec: job {job!r} must list host:port strings")
        for a in addrs:
            port = a.rpartition(":")[2]
            # gRPC takes port 99999 modulo 65536 (it dialed 34463): refused here
            if not port.isdigit() or not 0 < int(port) < 65536:
                raise TfgInputError(f"cluster spec: job {job!r}: address {a!r} needs a port "
                                    "from 1 to 65535 (host:port)")
        out[str(job)] = list(addrs)
    if not out:
        raise TfgInputError("cluster spec names no job")
    return out


def _parse_inline(text):
    jobs = {}
    for part in text.replace(";", " ").split():
        job, sep, addrs = part.partition("=")
        if not sep or not job or not addrs:
            raise TfgInputError(f"cluster spec {text!r}: expected job=host:port,host:port "
                                "or a JSON file")
        jobs[job] = [a for a in addrs.split(",") if a]
    return jobs


def cluster_devices(cluster):
    """One CPU device per task of every job, in job then task order."""
    jobs = parse_cluster(cluster)
    return [DeviceSpec(job, 0, task, "CPU", 0).to_string()
            for job, addrs in jobs.items() for task in range(len(addrs))]


def device_names(devices=None, cluster=None):
    """Full device names from a SPEC (`cpu:3`, `cpu:2,gpu:1`, names), a list, a DeviceSet,
    or a cluster spec. With neither, the local CPU (plus visible GPUs) as the executor sees it.
    """
    if cluster is not None:
        names = cluster_devices(cluster)
        if devices is not None:  # a device list narrows the cluster's devices
            wanted = [DeviceSpec.parse(d) for d in _split(devices)]
            names = [n for n in names if any(w.matches(DeviceSpec.parse(n)) for w in wanted)]
            if not names:
                raise TfgInputError(f"no device of the cluster matches {devices!r}")
        return names
    if devices is None:
        return [d.to_string() for d in local_device_specs()]
    if hasattr(devices, "names"):
        return list(devices.names)
    specs = parse_device_list(devices, device_types=DEVICE_TYPES)
    host = host_cpu_for(specs)
    return [d.to_string() for d in specs + ([host] if host else [])]


def host_only_names(devices=None, cluster=None):
    """The names `device_names` added as the host CPU of a set of GPUs alone (host_cpu_for):
    placement gives them only the nodes no GPU of the set has a kernel for."""
    if cluster is not None or devices is None:
        return set()
    if hasattr(devices, "host_only"):
        return set(devices.host_only)
    host = host_cpu_for(parse_device_list(devices, device_types=DEVICE_TYPES))
    return {host.to_string()} if host else set()


def _split(devices):
    if isinstance(devices, str):
        return [p.strip() for p in devices.split(",") if p.strip()]
    return [str(d).strip() for d in devices if str(d).strip()]
