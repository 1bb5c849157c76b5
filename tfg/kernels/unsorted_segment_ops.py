"""UnsortedSegmentMax / Min / Prod: rows of `data` reduced into `num_segments` segments by
ids in any order (negative ids dropped), as TensorFlow's CPU kernels do; UnsortedSegmentSum
is in indexing_ops.py. An empty segment holds the reduction's identity: the dtype's lowest
value for Max (not -inf), its largest for Min, 1 for Prod.

    UnsortedSegmentMax([[1, 2], [3, 4], [5, 6]], [0, 0, -1], 3)
        -> [[3, 4], [lowest, lowest], [lowest, lowest]]
"""
import numpy as np

from tfg.kernels._util import fail, tf_dims
from tfg.kernels.registry import kernel


def _identity(kind, dtype):
    if kind == "Prod":
        return 1
    info = np.finfo(dtype) if dtype.kind in "fc" else np.iinfo(dtype)
    return info.min if kind == "Max" else info.max


_UFUNC = {"Max": np.maximum, "Min": np.minimum, "Prod": np.multiply}


@kernel(["UnsortedSegmentMax", "UnsortedSegmentMin", "UnsortedSegmentProd"],
         host_inputs=(1, 2))
def unsorted_segment(ctx, data, segment_ids, num_segments):
    data, ids = np.asarray(data), np.asarray(segment_ids)
    n = int(np.asarray(num_segments).reshape(()))
    if n < 0:
        fail(f"num_segments must be non-negative, got {n}")
    if data.shape[:ids.ndim] != ids.shape:
        fail(f"data.shape = {tf_dims(data.shape)} does not start with segment_ids.shape = "
             f"{tf_dims(ids.shape)}")
    flat = ids.reshape(-1)
    bad = np.flatnonzero(flat >= n)
    if bad.size:
        fail(f"segment_ids[{int(bad[0])}] = {int(flat[bad[0]])} is out of range [0, {n})")
    kind = ctx.op[len("UnsortedSegment"):]
    rest = data.shape[ids.ndim:]
    out = np.full((n,) + rest, _identity(kind, data.dtype), data.dtype)
    keep = flat >= 0  # negative ids are dropped, as TensorFlow does
    _UFUNC[kind].at(out, flat[keep], data.reshape((-1,) + rest)[keep])
    return out
