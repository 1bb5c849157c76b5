"""Memory limits: refuse a tensor that would not fit BEFORE allocating it.

    >>> parse_size("512M"), parse_size("4GiB"), parse_size("1e9")
    (536870912, 4294967296, 1000000000)
    >>> plan = build_plan(...); guard_plan(plan, parse_size("1G"))
    >>> sess.run("y")     # Fill of shape [1048576, 1048576] float32:
    MemoryLimitError: node 'y' (Fill) failed: would allocate 4.00 TiB (shape [1048576, 1048576]
    of float32), over the memory limit of 1.00 GiB (tfg run --max-memory)

One rule for every kernel, with no list of ops to forget: when a plan is prepared, each kernel
whose op has a shape function (tfg/schemas/ops) is wrapped by a check that runs that shape
function on the actual input shapes, small input values and attrs, and raises
`MemoryLimitError` when an output would exceed the limit, before the kernel allocates. The
verdict is cached per input signature (shapes, dtypes, small values), so a step's repeated ops
pay one dictionary lookup. TensorList contents (item slots, a stacked list), which no shape
function of a variant describes, are sized by VARIANT_CONTENTS. A Const is checked from its
declared shape, without decoding it, before the plan is built (decoding is what allocates it).

Where the inputs bound the outputs, the lookup itself is skipped: an op whose outputs take an
input's shape, or its shape's ints (`shape_metadata`), is not wrapped; one whose outputs are a
part or a reduction of an input (traits `view` and `within_input`) runs unsized while its
inputs are non-empty and each within the limit; a concatenation while its inputs' bytes
together fit; a broadcast while the product of its operands' sizes does. Each falls back to
the shape function otherwise (a Sum over an axis of size 0 of an empty [0, 2**34] input is
64 GiB). In a TF1 gradient loop's cell that was a third of the guarded calls, 2-4 us each.

The limit is per tensor: it stops a graph from asking for more memory than the machine has; it
does not account for the sum of live tensors. The default is 80% of the memory available when
the session starts; `tfg run --max-memory`, `tfg worker --max-memory` and
`Session(max_memory=...)` choose another.
"""
import os
import re

import numpy as np

from tfg.errors import TfgInputError, TfgRuntimeError
from tfg.executor.calls import args_call
from tfg.graphdef.infer import TensorInfo, infer_node
from tfg.kernels.list_ops import TensorList, stacked_shape
from tfg.kernels.scratch import SCRATCH, scratch_shape
from tfg.schemas.dtypes import DType
from tfg.schemas.ops import registry
from tfg.schemas.ops.signature import input_dtypes, output_dtypes
from tfg.schemas.ops.array_shapes import concat_v1, concat_v2, pack
from tfg.schemas.ops.shape_fns import broadcast_binary, merge_inputs, scalar, unchanged, \
    unchanged_all

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
        number = float(m.group(1)) * _UNITS[m.group(2).lower()]
        if not number < 1 << 62:  # 1e400 is inf: int() raised OverflowError
            raise TfgInputError(f"--max-memory {text!r}: too large")
        value = int(number)
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


DEFAULT_FRACTION = 0.8


def available_memory():
    """Bytes a new allocation can get now: MemAvailable, or what the cgroup has left when that
    is lower; the physical memory when neither is readable; None if nothing is known."""
    avail = None
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    avail = int(line.split()[1]) * 1024
                    break
    except (OSError, ValueError, IndexError):
        pass
    try:
        with open("/sys/fs/cgroup/memory.max") as f:
            cap = f.read().strip()
        with open("/sys/fs/cgroup/memory.current") as f:
            used = int(f.read().strip())
        if cap.isdigit():
            left = max(int(cap) - used, 0)
            avail = left if avail is None else min(avail, left)
    except (OSError, ValueError):
        pass
    return avail if avail is not None else physical_memory()


def resolve_limit(max_memory):
    """The per-tensor limit in bytes a Session (or worker) uses: `max_memory` (bytes or a size
    string), else 80% of the memory available when it starts; None when nothing is known."""
    if max_memory is None:
        avail = available_memory()
        return None if avail is None else int(avail * DEFAULT_FRACTION)
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
    what = np.dtype(dtype)
    what = "TensorArray entries" if what.kind == "V" else what.name  # (_array_entries)
    return (f"would allocate {human(nbytes)} (shape {dims} of {what}), over "
            f"the memory limit of {human(limit)} (tfg run --max-memory)")


# --- output sizes from the ops' shape functions ---------------------------------------------
# Input values the shape functions may read (Fill's dims, Range's bounds, DynamicStitch's
# indices): numbers up to this many elements are passed, and keyed in the verdict cache.
_VALUE_ELEMENTS = 1024
# Integer inputs up to this many elements key the cache by value (2 KB of int64 at most, hashed
# in about 1 us): a TF1 dynamic_rnn's TensorArrayGatherV3 reads range(time steps) each step,
# and with 16 its 20 indices had the shape function run every step (90-110 us, 2% of a TF1
# GRUCell training step).
_KEY_ELEMENTS = 256
_ELEMS = 64
_CACHE_SIZE = 64


def _input_info(x):
    """What the shape function sees of one actual input: dtype, shape and, for numbers small
    enough (or integers of any size, whose values may be sizes or indices), the values."""
    if isinstance(x, (np.ndarray, np.generic)):
        arr = x
    elif isinstance(x, (int, float, bool)):
        arr = np.asarray(x)
    else:  # a TensorList, a resource handle, a queue: no shape to reason about here (a lookup
        # table's values have one: LookupTableFindV2's output is sized by it)
        return TensorInfo(None, None, handle=getattr(x, "handle_info", None))
    kind = arr.dtype.kind
    if kind == "O" or kind in "SU":
        return TensorInfo(DType.STRING, tuple(arr.shape))
    try:
        dtype = DType.from_numpy(arr.dtype)
    except Exception:  # noqa: BLE001 - an exotic dtype: shape only
        return TensorInfo(None, tuple(arr.shape))
    value = arr if (kind in "iub" or arr.size <= _VALUE_ELEMENTS) else None
    elems = (tuple(int(v) for v in arr.reshape(-1))
             if kind in "iu" and arr.size <= _ELEMS else None)
    return TensorInfo(dtype, tuple(arr.shape), value, elems)


def _cache_key(inputs):
    """A key under which the verdict for these inputs may be reused: the shapes, plus the
    values of integer inputs and of scalars (what shape functions read: dims, indices,
    Range's bounds); None when an integer input is too large to key. Input dtypes are fixed
    by the node's attrs, so shapes suffice for the rest."""
    key = []
    append = key.append
    for x in inputs:
        if type(x) is np.ndarray:
            kind = x.dtype.kind
            if kind == "i" or kind == "u":
                if x.size > _KEY_ELEMENTS:
                    return None
                append((x.shape, x.tobytes()))
            elif x.ndim == 0 and kind != "O":
                append((x.dtype.char, x.tobytes()))
            else:
                append(x.shape)
        elif isinstance(x, (np.generic, int, float, bool)):
            append((type(x), x))
        else:
            append(id(type(x)))
    return tuple(key)


def output_bytes(node, inputs):
    """[(nbytes, shape, numpy dtype)] of the outputs the node's shape function gives for these
    actual inputs (outputs whose size it cannot tell are left out).

        >>> output_bytes(fill_node, [np.array([1 << 20, 1 << 20]), np.float32(0)])
        [(4398046511104, (1048576, 1048576), dtype('float32'))]
    """
    try:
        infos = infer_node(node, [_input_info(x) for x in inputs])
    except Exception:  # noqa: BLE001 - a shape function failing is the kernel's error to name
        return []
    out = []
    for info in infos:
        shape = info.shape
        if shape is None or any(d is None for d in shape) or info.dtype is None:
            continue
        base = info.dtype.base
        if base in (DType.RESOURCE, DType.VARIANT):
            continue
        np_dtype = np.dtype(object) if base == DType.STRING else base.np
        count = 1
        for d in shape:
            count *= max(d, 0)
        out.append((count * np_dtype.itemsize, shape, np_dtype))
    return out


def _verdict(node, inputs, limit):
    for nbytes, shape, dtype in output_bytes(node, inputs):
        if nbytes > limit:
            return _over(shape, dtype, limit)
    return ""


# Variant outputs whose contents the kernel allocates from its inputs (a TensorList's item
# slots, a stacked list): beyond what a shape function of the variant can say.
def _list_slots(ctx, a):
    """TensorListReserve/TensorListResize: a Python list of that many item slots."""
    return (int(np.asarray(a[1])),), np.dtype(object)


def _list_stack(ctx, a):
    got = stacked_shape(a[0], a[1]) if isinstance(a[0], TensorList) else None
    return got or (None, None)


def _array_entries(ctx, a):
    """TensorArrayV3: one bookkeeping object per index (about 80 bytes with its list slot),
    made when the array is: a size of 2**31 - 1 took minutes and all memory."""
    return (int(np.asarray(a[-1])),), np.dtype((np.void, 80))


VARIANT_CONTENTS = {"TensorListReserve": _list_slots, "TensorListResize": _list_slots,
                    "TensorListStack": _list_stack, "TensorArrayV3": _array_entries}


def _scratch_of(op):
    """A kernel's scratch array (a pool's padded input: tfg/kernels/scratch.py), sized like
    the contents above: a 4x4 MaxPool with a 2**30 SAME window has a 4x4 output and padded
    its input to 4 EiB."""
    return lambda ctx, a: scratch_shape(op, ctx.attrs, a) or (None, None)


VARIANT_CONTENTS.update({op: _scratch_of(op) for op in SCRATCH})


def _guarded(fn, node, limit, needs_step):
    """`fn` behind the memory check: the verdict for each new input signature comes from the
    op's shape function, and is cached (a step's ops repeat their shapes)."""
    cache = {}
    contents = VARIANT_CONTENTS.get(node.op)

    def checked(ctx, *args):
        inputs = args[1:] if needs_step else args
        key = _cache_key(inputs)
        verdict = cache.get(key) if key is not None else None
        if verdict is None:
            verdict = _verdict(node, inputs, limit)
            if key is not None:
                if len(cache) >= _CACHE_SIZE:
                    cache.clear()
                cache[key] = verdict
        # A list's contents are not in the key (a TensorList keys as its type): sized per
        # call, without the shape function (measured: 40-60 us a call with it, a Keras
        # BiLSTM's reserve and two stacks 3% of its step).
        if not verdict and contents is not None:
            verdict = _contents_verdict(contents, ctx, inputs, limit)
        if verdict:
            raise MemoryLimitError(verdict)
        return fn(ctx, *args)

    return _marked(checked, fn, limit)


def _marked(checked, fn, limit):
    """`checked`, a guarded form of kernel `fn`, marked as such: guard_plan leaves a kernel
    with `__wrapped__` alone, and compiled loops read `limit` (they check a MatMul's output
    size themselves)."""
    checked.__wrapped__ = fn
    checked.limit = limit
    return checked


def _contents_verdict(shape_of, ctx, inputs, limit):
    try:
        shape, dtype = shape_of(ctx, inputs)
    except Exception:  # noqa: BLE001 - malformed inputs: the kernel names the problem
        return ""
    return (_over(shape, dtype, limit) or "") if shape else ""


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
    """Put every kernel of `plan` that has a shape function behind the size check (in place):
    before it runs, its outputs' sizes come from the op's shape function on the actual input
    shapes, small input values and attrs, and one over `limit` raises MemoryLimitError.

    `elementwise` is accepted for callers of the earlier per-op table and no longer matters:
    the cached verdict makes the check cheap enough for every op.
    """
    if limit is None:
        return plan
    for item in plan.items:
        node = item.node
        if item.fn is None or node is None or hasattr(item.fn, "__wrapped__"):
            continue
        sig = registry._OPS.get(item.op)
        if item.op not in VARIANT_CONTENTS:
            if sig is None or sig.shape_fn is None or _never_larger(node, sig):
                continue
        guarded = _guarded(item.fn, node, limit, item.needs_step)
        if sig is not None and sig.shape_fn is broadcast_binary and not item.needs_step:
            guarded = _broadcast_fast_path(item.fn, guarded, limit)
        elif sig is not None and not item.needs_step and _within_input(node, sig):
            guarded = _within_fast_path(item.fn, guarded, limit)
        elif sig is not None and sig.shape_fn in _SUM_OF_INPUTS and not item.needs_step:
            guarded = _sum_fast_path(item.fn, guarded, limit)
        item.fn = guarded
        if item.call is not None:
            # The dataflow executor's closure captured the unguarded kernel when the plan was
            # built: without this, fast_path=False (and every step the fast path leaves to
            # the dataflow executor) ran with no memory check at all.
            item.call = args_call(item)
    return plan


# Shape functions whose outputs take the shape of an input (or are scalars): such an output is
# no larger than a tensor that already exists, unless its dtype is wider (Cast to complex).
_INPUT_SHAPED = (unchanged, unchanged_all, merge_inputs, scalar)
# Shape functions whose output is its inputs joined: no larger than their sum.
_SUM_OF_INPUTS = (concat_v1, concat_v2, pack)


def _never_larger(node, sig):
    try:  # outputs that are all handles (a TensorList, a resource) have no size to check
        if all(d.base in (DType.RESOURCE, DType.VARIANT) for d in output_dtypes(node)):
            return True  # (the ops whose lists it sizes are in VARIANT_CONTENTS, kept)
    except Exception:  # noqa: BLE001 - a dtype the signature cannot tell: keep the check
        return False
    if "shape_metadata" in sig.traits:
        return True  # an input's shape, size or rank: as many ints as it has dimensions
    if sig.shape_fn not in _INPUT_SHAPED:
        return False
    return _no_wider(node)


def _within_input(node, sig):
    """Ops whose outputs hold no more elements than their largest non-empty input ("view" and
    "within_input": a Slice, a Split's pieces, a Sum), of a type no wider."""
    return ("view" in sig.traits or "within_input" in sig.traits) and _no_wider(node)


def _no_wider(node):
    """Whether no output's type is wider than the widest input's."""
    try:
        ins = [d.base.np.itemsize for d in input_dtypes(node)
               if d.base not in (DType.STRING, DType.RESOURCE, DType.VARIANT)]
        outs = [d.base.np.itemsize for d in output_dtypes(node)
                if d.base not in (DType.STRING, DType.RESOURCE, DType.VARIANT)]
    except Exception:  # noqa: BLE001 - a dtype the signature cannot tell: keep the check
        return False
    return not outs or (bool(ins) and max(outs) <= max(ins))


def _within_fast_path(fn, guarded, limit):
    """An op that is "within_input" runs unchecked while every input is non-empty and within
    the limit (its outputs are then no larger than one of them); otherwise the shape function
    decides (a Sum over an axis of size 0 of an empty [0, 2**34] input is 64 GiB; a slice of
    a fed input over the limit is refused on its own size, as direct_calls.slice_call does).

    Before: a gradient loop's Slice behind the check, 8 us a call. After: 4.5 us."""
    ndarray = np.ndarray

    def checked(ctx, *args):
        for x in args:
            if type(x) is ndarray and (not x.size or x.nbytes > limit):
                return guarded(ctx, *args)
        return fn(ctx, *args)

    return _marked(checked, fn, limit)


def _sum_fast_path(fn, guarded, limit):
    """Concatenations (ConcatV2, Pack): the output is at most the inputs together, each
    counted as often as it is passed (a Pack of one tensor a thousand times is a thousand of
    it), so their bytes clear the common case with one sum."""
    def checked(ctx, *args):
        total = 0
        for x in args:
            total += getattr(x, "nbytes", 0)
        if total <= limit:
            return fn(ctx, *args)
        return guarded(ctx, *args)

    return _marked(checked, fn, limit)


def _broadcast_fast_path(fn, guarded, limit):
    """Binary broadcasting ops are most of a step: their output has at most size(x) * size(y)
    elements of at most 16 bytes, so one multiplication clears the common case."""
    cap = limit // 16

    def checked(ctx, x, y, *rest):
        if getattr(x, "size", 1) * getattr(y, "size", 1) <= cap:
            return fn(ctx, x, y, *rest)
        return guarded(ctx, x, y, *rest)

    return _marked(checked, fn, limit)


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
