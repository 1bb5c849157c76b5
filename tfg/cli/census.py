"""What this installation of tfg supports, for `tfg info --ops` and `tfg info --devices`: the
ops with a signature or a kernel per device type, and the local devices. It lives in the CLI
layer because it asks the kernel registry and the executor's device set, which the graph layer
below must not import.

    >>> supported_ops()["MatMul"]
    {'signature': True, 'kernels': ['CPU', 'GPU']}
    >>> local_devices()
    ['/job:localhost/replica:0/task:0/device:CPU:0']
"""
from tfg.executor.devices import DeviceSet
from tfg.kernels import registry as kernels
from tfg.schemas.ops import all_ops


def supported_ops():
    """{op: {'signature': bool, 'kernels': [device types]}} for every op tfg knows of.

    Before: nothing.  After: {'MatMul': {'signature': True, 'kernels': ['CPU', 'GPU']}, ...}
    """
    out = {op: {"signature": True, "kernels": []} for op in all_ops()}
    for device in (kernels.CPU, kernels.GPU):
        try:
            names = kernels.registered_ops(device)
        except Exception:  # a kernel module that fails to import must not hide the rest
            names = []
        for op in names:
            out.setdefault(op, {"signature": False, "kernels": []})["kernels"].append(device)
    return dict(sorted(out.items()))


def local_devices():
    """Full names of the devices `tfg run` would use by default."""
    return [d.name for d in DeviceSet.from_spec(None)]
