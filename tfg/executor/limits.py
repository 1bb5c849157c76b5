"""Memory limits: refuse a tensor that would not fit BEFORE allocating it.

    >>> parse_size("512M"), parse_size("4GiB"), parse_size("1e9")
    (536870912, 4294967296, 1000000000)
    >>> plan = build_plan(...); guard_plan(plan, parse_size("1G"))
    >>> sess.run("y")     # Fill of shape [1048576, 1048576] float32:
    MemoryLimitError: node 'y' (Fill) failed: would allocate 4.00 TiB (shape [1048576, 1048576]
    of float32), over the memory limit of 1.00 GiB (tfg run --max-memory)

A kernel that allocates from a shape it is given (Fill, the random ops, Tile, Range, OneHot,
Pad, BroadcastTo, ScatterNd, UnsortedSegmentSum) or from a broadcast of its inputs (the binary
elementwise ops, Select, MatMul) is wrapped, when a plan is prepared, by a check that computes
the output's size from the input values (a few integer multiplications) and raises
`MemoryLimitError` when one output would exceed the limit. A Const is checked from its declared
shape, without decoding it, before the plan is built (decoding is what allocates it).

The limit is per tensor: it stops a graph from asking for more memory than the machine has; it
does not account for the sum of live tensors. The default is the machine's physical memory; the
broadcasting ops (elementwise, Select, MatMul) are checked only under an explicit limit (or
where the kernel overcommits): numpy already refuses a result larger than the machine, and they
are most of a step's ops.
"""
import math
import os
import re

import numpy as np

from tfg.errors import TfgInputError, TfgRuntimeError
from tfg.schemas.dtypes import DType
from tfg.schemas.ops import get_op, ops_with
from tfg.schemas.ops.shape_fns import broadcast_binary

_UNITS = {"": 1, "b": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40,
          "p": 1 << 50}
_SIZE = re.compile(r"^\s*([0-9]+(?:\.[0-9]*)?(?:e[0-9]+)?)\s*([kmgtp]?)(?:i?b)?\s*$", re.I)


class MemoryLimitError(TfgRuntimeError):
    """A tensor would exceed the memory limit; raised before anything is allocated."""


def parse_size(text):
    """'512M', '4G', '4GiB', '1.5g', '1e9', 1000 -> bytes (binary units)."""
    if isinstance(text, (int, np.integer)) and not isinstance(text, bool):
        value = int(text)
    else:
        m = _SIZE.match(str(text))
        if m is None:
            raise TfgInputError(f"--max-memory {text!r}: expected a size such as 512M, 4G or "
                                "1000000 (bytes)")
        value = int(float(m.group(1)) * _UNITS[m.group(2).lower()])
    if value <= 0:
        raise TfgInputError(f"--max-memory must be positive, got {text!r}")
    return value


def physical_memory():
    """Bytes of RAM of this machine (or its cgroup limit, when lower); None if unknown."""
    total = None
    try:
        total = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        pass
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            with open(path) as f:
                text = f.read().strip()
        except OSError:
            continue
        if text.isdigit() and (total is None or 0 < int(text) < total):
            total = int(text)
    return total


def resolve_limit(max_memory):
    """The limit in bytes a Session uses: `max_memory` (bytes or a size string), else the
    machine's physical memory; None when neither is known (no check)."""
    if max_memory is None:
        return physical_memory()
    return parse_size(max_memory)


def human(nbytes):
    """4398046511104 -> '4.00 TiB'."""
    value = float(nbytes)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if value < 1024 or unit == "PiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.2f} {unit}"
        value /= 1024
    return f"{value:.2f} EiB"


def _over(shape, dtype, limit):
    """MemoryLimitError text when `shape` of `dtype` exceeds `limit`; None otherwise."""
    count = 1
    for d in shape:
        count *= max(int(d), 0)
    itemsize = np.dtype(dtype).itemsize if dtype is not None else 8
    nbytes = count * itemsize
    if nbytes <= limit:
        return None
    dims = list(shape) if len(shape) <= 8 else f"{list(shape[:8])[:-1]}...]"
    return (f"would allocate {human(nbytes)} (shape {dims} of {np.dtype(dtype).name}), over "
            f"the memory limit of {human(limit)} (tfg run --max-memory)")


def _vec(value):
    """A shape-like input as a tuple of Python ints (raises on anything else)."""
    arr = np.asarray(value)
    if arr.dtype.kind not in "iu" or arr.ndim > 1:
        raise ValueError("not an integer vector")
    return tuple(int(v) for v in arr.reshape(-1))


def _attr_dtype(ctx, name="dtype"):
    dt = ctx.attrs.get(name)
    try:
        return dt.np if isinstance(dt, DType) else np.dtype(dt)
    except (TypeError, AttributeError):
        return np.float64


# --- output shapes computed from the inputs (op -> fn(ctx, inputs) -> (shape, dtype)) -----
def _fill(ctx, a):
    return _vec(a[0]), np.asarray(a[1]).dtype


def _random(ctx, a):
    return _vec(a[0]), _attr_dtype(ctx)


def _random_int(ctx, a):
    return _vec(a[0]), np.asarray(a[1]).dtype


def _tile(ctx, a):
    x, m = np.asarray(a[0]), _vec(a[1])
    if len(m) != x.ndim:
        raise ValueError("rank")
    return tuple(d * k for d, k in zip(x.shape, m)), x.dtype


def _broadcast_to(ctx, a):
    return _vec(a[1]), np.asarray(a[0]).dtype


def _range(ctx, a):
    st, li, de = (float(np.asarray(v)) for v in a[:3])
    if de == 0 or not all(map(math.isfinite, (st, li, de))):
        raise ValueError("the kernel reports it")
    return (max(0, math.ceil((li - st) / de)),), np.asarray(a[0]).dtype


def _one_hot(ctx, a):
    idx = np.asarray(a[0])
    return idx.shape + (int(np.asarray(a[1])),), np.asarray(a[2]).dtype


def _pad(ctx, a):
    x, p = np.asarray(a[0]), np.asarray(a[1])
    if p.shape != (x.ndim, 2):
        raise ValueError("the kernel reports it")
    return tuple(d + int(lo) + int(hi) for d, (lo, hi) in zip(x.shape, p.tolist())), x.dtype


def _scatter_nd(ctx, a):
    return _vec(a[2]), np.asarray(a[1]).dtype


def _segment_sum(ctx, a):
    data, ids = np.asarray(a[0]), np.asarray(a[1])
    return (int(np.asarray(a[2])),) + data.shape[ids.ndim:], data.dtype


def _binary(ctx, a):
    x, y = np.asarray(a[0]), np.asarray(a[1])
    if x.shape == y.shape:
        return (), None
    return np.broadcast_shapes(x.shape, y.shape), np.result_type(x, y)


def _select(ctx, a):
    c, x, y = (np.asarray(v) for v in a[:3])
    if c.shape == x.shape == y.shape:
        return (), None
    return np.broadcast_shapes(c.shape, x.shape, y.shape), x.dtype


def _matmul(ctx, a):
    x, y = np.asarray(a[0]), np.asarray(a[1])
    if x.ndim != 2 or y.ndim != 2:
        raise ValueError("the kernel reports it")
    m = x.shape[1] if ctx.attrs.get("transpose_a") else x.shape[0]
    n = y.shape[0] if ctx.attrs.get("transpose_b") else y.shape[1]
    return (m, n), x.dtype


def _list_slots(ctx, a):
    """TensorListReserve/TensorListResize: a Python list of that many item slots."""
    return (int(np.asarray(a[1])),), np.dtype(object)


def _list_stack(ctx, a):
    from tfg.kernels.list_ops import TensorList, stacked_shape

    got = stacked_shape(a[0], a[1]) if isinstance(a[0], TensorList) else None
    return got or (None, None)


OUTPUT_SHAPES = {
    "Fill": _fill, "RandomUniform": _random, "RandomStandardNormal": _random,
    "TruncatedNormal": _random, "RandomUniformInt": _random_int, "Tile": _tile,
    "BroadcastTo": _broadcast_to, "Range": _range, "OneHot": _one_hot, "Pad": _pad,
    "PadV2": _pad, "MirrorPad": _pad, "ScatterNd": _scatter_nd,
    "UnsortedSegmentSum": _segment_sum, "Select": _select, "SelectV2": _select,
    "MatMul": _matmul, "TensorListReserve": _list_slots, "TensorListResize": _list_slots,
    "TensorListStack": _list_stack,
}
# The broadcasting binary ops: elementwise, with the broadcasting shape function.
for _op in {n for n in ops_with("elementwise") if get_op(n).shape_fn is broadcast_binary}:
    OUTPUT_SHAPES[_op] = _binary
OUTPUT_SHAPES["BiasAdd"] = _binary


def _guarded(fn, shape_of, limit, needs_step):
    def checked(ctx, *args):
        inputs = args[1:] if needs_step else args
        try:
            shape, dtype = shape_of(ctx, inputs)
        except Exception:  # noqa: BLE001 - malformed inputs: the kernel names the problem
            shape = None
        if shape:
            msg = _over(shape, dtype, limit)
            if msg is not None:
                raise MemoryLimitError(msg)
        return fn(ctx, *args)

    checked.__wrapped__ = fn
    return checked


def _guarded_binary(fn, shape_of, limit):
    """The check for broadcasting binary ops, on every elementwise op of a step: one
    multiplication decides in the common case (the output has at most size(x) * size(y)
    elements, at most 16 bytes each)."""
    cap = limit // 16
    slow = _guarded(fn, shape_of, limit, False)

    def checked(ctx, x, y, *rest):
        if getattr(x, "size", 1) * getattr(y, "size", 1) <= cap:
            return fn(ctx, x, y, *rest)
        return slow(ctx, x, y, *rest)

    checked.__wrapped__ = fn
    return checked


def overcommits():
    """Whether the kernel grants any allocation (vm.overcommit_memory = 1): then numpy cannot
    refuse a broadcast larger than the machine, and only our check stands before the OOM
    killer."""
    try:
        with open("/proc/sys/vm/overcommit_memory") as f:
            return f.read().strip() == "1"
    except OSError:
        return False


def guard_plan(plan, limit, elementwise=True):
    """Wrap the kernels of `plan` that allocate from a shape with the size check (in place).

    `elementwise=False` leaves the ops whose output size derives from their inputs' alone
    (broadcasting binary ops, Select, MatMul: most of a step's ops, and numpy itself refuses a
    result larger than the machine's memory).
    """
    if limit is None:
        return plan
    for item in plan.items:
        shape_of = OUTPUT_SHAPES.get(item.op)
        if shape_of is None or item.fn is None or hasattr(item.fn, "__wrapped__"):
            continue
        if shape_of in (_binary, _select, _matmul) and not elementwise:
            continue
        if shape_of is _binary and not item.needs_step:
            item.fn = _guarded_binary(item.fn, shape_of, limit)
        else:
            item.fn = _guarded(item.fn, shape_of, limit, item.needs_step)
    return plan


def check_constants(nodes, limit):
    """Refuse a Const whose declared shape exceeds `limit`, before anything decodes it."""
    if limit is None:
        return
    for node in nodes:
        if node.op != "Const" or "value" not in node.attr:
            continue
        tensor = node.attr["value"].tensor
        dims = tuple(max(int(d.size), 0) for d in tensor.tensor_shape.dim)
        try:
            dtype = DType(tensor.dtype).base.np
        except Exception:  # noqa: BLE001 - an unknown dtype is refused when decoded
            continue
        if dtype == object:
            dtype = np.dtype(object)  # a pointer per string, at least
        msg = _over(dims, dtype, limit)
        if msg is not None:
            raise MemoryLimitError(f"node {node.name!r} (Const) {msg}")
