"""SaveV2 / RestoreV2 over tfg's checkpoint file (tfg.kernels.checkpoint_format).

    SaveV2(prefix="/tmp/m", tensor_names=["w", "b"], shape_and_slices=["", ""], w, b)
      writes the file /tmp/m
    RestoreV2("/tmp/m", ["w"], [""], dtypes=[float]) -> [w]

Only whole tensors: a non-empty shape_and_slices entry (a partitioned variable's slice) is
refused with a clear error. Unlike TensorFlow's V2 format, the prefix names one file.
"""
import numpy as np

from tfg.kernels._util import fail, tf_name
from tfg.kernels.checkpoint_format import read_checkpoint, write_checkpoint
from tfg.kernels.registry import kernel


def _strings(value, what):
    arr = np.asarray(value, dtype=object).reshape(-1)
    return [v.decode() if isinstance(v, bytes) else str(v) for v in arr.tolist()]


def _prefix(value):
    arr = np.asarray(value, dtype=object)
    if arr.size != 1:
        fail(f"prefix must be a single string, got shape {list(arr.shape)}")
    v = arr.reshape(-1)[0]
    return v.decode() if isinstance(v, bytes) else str(v)


def _check_slices(slices, n):
    if len(slices) != n:
        fail(f"shape_and_slices has {len(slices)} entries, tensor_names has {n}")
    for s in slices:
        if s:
            fail(f"saving or restoring slices ({s!r}) is not supported; only whole tensors")


@kernel("SaveV2")
def save_v2(ctx, prefix, tensor_names, shape_and_slices, *tensors):
    names = _strings(tensor_names, "tensor_names")
    _check_slices(_strings(shape_and_slices, "shape_and_slices"), len(names))
    if len(names) != len(tensors):
        fail(f"SaveV2 got {len(names)} names for {len(tensors)} tensors")
    if len(set(names)) != len(names):
        fail("SaveV2 tensor_names must be unique")
    write_checkpoint(_prefix(prefix), dict(zip(names, tensors)))
    return ()


@kernel("RestoreV2")
def restore_v2(ctx, prefix, tensor_names, shape_and_slices):
    names = _strings(tensor_names, "tensor_names")
    _check_slices(_strings(shape_and_slices, "shape_and_slices"), len(names))
    path = _prefix(prefix)
    stored = read_checkpoint(path)
    dtypes = list(ctx.attrs.get("dtypes", []))
    out = []
    for i, name in enumerate(names):
        if name not in stored:
            fail(f"Key {name} not found in checkpoint {path}")
        value = stored[name]
        if i < len(dtypes) and dtypes[i].np != value.dtype:
            fail(f"tensor {name} in checkpoint {path} is {tf_name(value)}, expected "
                 f"{dtypes[i].tf_name}")
        out.append(value)
    return out
