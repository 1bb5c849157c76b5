"""TensorArray kernels (CPU and GPU): the per-timestep arrays of TF1 `dynamic_rnn`, `raw_rnn`
and beam search, as TensorFlow's tensor_array.cc runs them.

    h, flow = TensorArrayV3(size=3, dtype=float)      # a new array each time it runs
    flow = TensorArrayWriteV3(h, 0, x, flow)           # every access passes the flow along
    TensorArrayReadV3(h, 0, flow) -> x;  again -> "Could not read index 0 twice because it was
                                                  cleared after a previous read ..."
    g, gflow = TensorArrayGradV3(h, flow, source="gradients")   # the same g for each call
    TensorArrayWriteV3(g, 0, d1, gflow); TensorArrayWriteV3(g, 0, d2, ...)   # g[0] = d1 + d2

An array is a resource of its step: the handle is the `TensorArray` itself (as a stack's is),
so it lives as long as the values that carry it. The float `flow` carries no data: a kernel
returns its flow_in as flow_out, and the data edges it makes order the accesses (and carry the
gradient of the array's contents in `tfg grad`). Errors use TensorFlow's words, with the
array's name `<tensor_array_name or node name>_<counter>` as TensorFlow prints it.

On a GPU, as TensorFlow's GPU kernels: entries live in device memory; sizes, indices, lengths
and the flow in host memory (`host_inputs`). A kernel reads entries in its own memory
(memory.in_memory_of), so an array whose ops placement split between a CPU and a GPU still
reads right.
"""
import itertools
import threading

import numpy as np

from tfg.kernels._util import fail, s
from tfg.kernels.basic import shape_string
from tfg.kernels.list_ops import type_string
from tfg.kernels.memory import in_memory_of, is_device_array
from tfg.kernels.registry import ALL_DEVICES, kernel
from tfg.schemas.dtypes import DType

_ids = itertools.count()


class _Entry:
    """One index: its value (None when unset or cleared) and what happened to it."""

    __slots__ = ("value", "shape", "written", "read", "cleared")

    def __init__(self, shape=None):
        self.value = None
        self.shape = shape  # a gradient array's per-index shape (copied from the forward one)
        self.written = False
        self.read = False
        self.cleared = False


def _merge(a, b):
    """The most specific of two partial shapes, or None when they are incompatible."""
    if a is None:
        return b
    if b is None:
        return a
    if len(a) != len(b) or any(x is not None and y is not None and x != y
                               for x, y in zip(a, b)):
        return None
    return tuple(x if x is not None else y for x, y in zip(a, b))


def _compatible(partial, shape):
    return partial is None or _merge(partial, tuple(shape)) is not None


def _defined(shape):
    return shape is not None and all(d is not None for d in shape)


class TensorArray:
    """A TensorArray's state (TensorFlow's tensor_array.h): dtype, element shape, entries."""

    def __init__(self, name, dtype, size, element_shape=None, dynamic_size=False,
                 clear_after_read=True, identical_element_shapes=False, is_grad=False):
        self.name = name
        self.dtype = DType.parse(dtype) if not isinstance(dtype, DType) else dtype
        self.element_shape = element_shape
        self.dynamic_size = dynamic_size
        self.clear_after_read = clear_after_read
        self.identical_element_shapes = identical_element_shapes
        self.is_grad = is_grad  # gradient arrays aggregate writes and read unset entries as 0
        self.entries = [_Entry() for _ in range(size)]
        self.grads = {}  # source -> the gradient TensorArray (TensorArrayGradV3)
        self.closed = False
        self.lock = threading.RLock()
        self._written = None  # (dtype, shape) of values that passed write's checks

    def __len__(self):
        return len(self.entries)

    def __repr__(self):
        return f"<TensorArray {self.name} {type_string(self.dtype)} x {len(self.entries)}>"

    def _fail(self, msg):
        fail(f"TensorArray {self.name}: {msg}")

    def _check_open(self):
        if self.closed:
            fail(f"TensorArray {self.name} has already been closed.")

    # --- writes -------------------------------------------------------------------------------
    def write(self, index, value, xp=np):
        """Store `value` (an array of `xp`) at `index`; a gradient array adds it to what is
        there."""
        with self.lock:
            self._check_open()
            if type(value) is not np.ndarray and not is_device_array(value):
                value = np.asarray(value)
            # Once a dtype and shape passed the checks, a later value of the same passes too
            # (the element shape only narrows to shapes that passed): a loop's writes are
            # checked at the first (TensorArrayWriteV3 in a TF1 gradient loop: 15 -> 6 us).
            fresh = (value.dtype, value.shape) != self._written
            if fresh:
                got = DType.from_numpy(value.dtype)
                if got != self.dtype:
                    fail(f"TensorArray dtype is {type_string(self.dtype)} but Op is trying to "
                         f"write dtype {type_string(got)}.")
            if index < 0 or (index >= len(self.entries) and not self.dynamic_size):
                self._fail(f"Tried to write to index {index} but array is not resizeable and "
                           f"size is: {len(self.entries)}")
            if index >= len(self.entries):
                self.entries.extend(_Entry() for _ in range(index + 1 - len(self.entries)))
            if fresh:
                self._check_shape(index, value)
            entry = self.entries[index]
            if entry.read:
                self._fail(f"Could not write to TensorArray index {index} because it has "
                           f"already been read.")
            if entry.written and not self.is_grad:
                self._fail(f"Could not write to TensorArray index {index} because it has "
                           f"already been written to.")
            if entry.written:
                if entry.shape != value.shape:
                    self._fail(f"Could not aggregate to TensorArray index {index} because the "
                               f"existing shape is {shape_string(entry.shape)} but the "
                               f"new input shape is {shape_string(value.shape)}.")
                if entry.value is not None:  # a gradient array sums its writes
                    old = entry.value
                    value = (old if type(old) is type(value) else in_memory_of(xp, old)) + value
            entry.value, entry.shape, entry.written = value, tuple(value.shape), True

    def _check_shape(self, index, value):
        if not _compatible(self.element_shape, value.shape):
            self._fail(f"Could not write to TensorArray index {index} because the value "
                       f"shape is {shape_string(value.shape)} which is incompatible with "
                       f"the TensorArray's inferred element shape: "
                       f"{shape_string(self.element_shape)} (consider setting "
                       f"infer_shape=False).")
        if self.identical_element_shapes and not _defined(self.element_shape):
            self.element_shape = tuple(value.shape)  # the first write fixes it
        self._written = (value.dtype, value.shape)

    # --- reads --------------------------------------------------------------------------------
    def read(self, index, xp=np):
        """Entry `index` as an array of `xp` (zeros where unset and its shape is known)."""
        with self.lock:
            self._check_open()
            if index < 0 or (not self.is_grad and index >= len(self.entries)):
                fail(f"Tried to read from index {index} but array size is: {len(self.entries)}")
            if index >= len(self.entries) or not self.entries[index].written:
                self._fill_unwritten(index)
            entry = self.entries[index]
            if entry.cleared:
                self._fail(f"Could not read index {index} twice because it was cleared after a "
                           f"previous read (perhaps try setting clear_after_read = false?).")
            value = entry.value
            if value is None:
                value = xp.zeros(entry.shape, self.dtype.np)
            elif type(value) is not xp.ndarray:
                value = in_memory_of(xp, value)
            if self.clear_after_read:
                entry.value, entry.cleared = None, True
            entry.read = True
            return value

    def _fill_unwritten(self, index):
        """An unset entry reads as zeros when its shape is known (a gradient array knows each
        forward entry's shape), else TensorFlow's error."""
        entry = self.entries[index] if index < len(self.entries) else None
        if self.is_grad and entry is not None and entry.shape:
            shape = entry.shape
        elif _defined(self.element_shape):
            shape = self.element_shape
        else:
            self._fail(f"Could not read from TensorArray index {index}.  Furthermore, the "
                       f"element shape is not fully defined: "
                       f"{shape_string(self.element_shape)}.  It is possible you are working "
                       f"with a resizeable TensorArray and stop_gradients is not allowing the "
                       f"gradients to be written.  If you set the full element_shape property "
                       f"on the forward TensorArray, the proper all-zeros tensor will be "
                       f"returned instead of incurring this error.")
        if entry is None:  # a gradient array reads past its end as zeros, and grows
            old = len(self.entries)
            self.entries.extend(_Entry() for _ in range(index + 1 - old))
            fill = range(old, index + 1)
        else:
            fill = (index,)
        for i in fill:
            self.entries[i].shape, self.entries[i].written = tuple(shape), True

    def size(self):
        return len(self.entries)

    def close(self):
        with self.lock:
            self.closed = True
            for e in self.entries:
                e.value = None

    # --- gradients ----------------------------------------------------------------------------
    def grad(self, source, shape_to_prepend=()):
        """The gradient array for `source`, made on first use: same size (fixed from now on),
        aggregating writes, its entries' shapes those of this array's."""
        with self.lock:
            self._check_open()
            self.dynamic_size = False  # once gradients exist the forward array cannot grow
            g = self.grads.get(source)
            if g is None:
                prefix = tuple(shape_to_prepend)
                shape = None if self.element_shape is None else prefix + tuple(self.element_shape)
                g = TensorArray(f"{self.name}@{source}", self.dtype, len(self.entries), shape,
                                identical_element_shapes=self.identical_element_shapes,
                                is_grad=True)
                for mine, theirs in zip(g.entries, self.entries):
                    if theirs.shape is not None:
                        mine.shape = prefix + tuple(theirs.shape)
                self.grads[source] = g
            return g

    # --- stacking -----------------------------------------------------------------------------
    def gather(self, indices, element_shape, xp=np):
        """The entries at `indices` stacked (TensorArrayGatherV3; all of one shape)."""
        values = [self.read(i, xp) for i in indices]
        if not values:
            shape = _merge(element_shape, self.element_shape)
            if not _defined(shape):
                fail(f"TensorArray has size zero, but element shape "
                     f"{shape_string(shape)} is not fully defined. Currently only static "
                     f"shapes are supported when packing zero-size TensorArrays.")
            return xp.zeros((0,) + tuple(shape), self.dtype.np)
        first = values[0].shape
        for i, v in zip(indices, values):
            if v.shape != first:
                fail(f"TensorArray has inconsistent shapes.  Index 0 has shape: "
                     f"{shape_string(first)} but index {i} has shape: {shape_string(v.shape)}")
        return xp.stack(values)


def _array(handle):
    if not isinstance(handle, TensorArray):
        fail(f"expected a TensorArray handle, got {type(handle).__name__}")
    return handle


def _index(value, what="index"):
    if type(value) is np.ndarray and value.ndim == 0 and value.dtype.kind in "iu":
        return int(value)
    v = np.asarray(value)
    if v.ndim != 0 or v.dtype.kind not in "iu":
        fail(f"{what} must be an int32 scalar, got {v.dtype.name} of shape {list(v.shape)}")
    return int(v)


def _vector(value, what):
    v = np.asarray(value)
    if v.ndim != 1:
        fail(f"Expected {what} to be a vector, but received shape: {shape_string(v.shape)}")
    return [int(i) for i in v.tolist()]


def _flow(flow):
    return np.asarray(flow, np.float32)


def _shape_attr(ctx, name):
    shape = ctx.attrs.get(name)
    return None if shape is None else tuple(shape)


# --- making arrays ----------------------------------------------------------------------------
@kernel("TensorArrayV3", device_types=ALL_DEVICES, needs_step=True, host_inputs=(0,))
def tensor_array_v3(ctx, step, size):
    n = _index(size, "size")
    if n < 0:
        fail("Size should be >= 0.")
    name = f"{s(ctx.attrs.get('tensor_array_name', b'')) or ctx.name}_{next(_ids)}"
    array = TensorArray(name, ctx.attrs["dtype"], n, _shape_attr(ctx, "element_shape"),
                        bool(ctx.attrs.get("dynamic_size", False)),
                        bool(ctx.attrs.get("clear_after_read", True)),
                        bool(ctx.attrs.get("identical_element_shapes", False)))
    step.resources.get_or_create("_tensor_arrays", name, lambda: array)
    return array, np.float32(0.0)


@kernel("TensorArrayGradV3", device_types=ALL_DEVICES, host_inputs=(1,))
def tensor_array_grad_v3(ctx, handle, flow_in):
    g = _array(handle).grad(s(ctx.attrs["source"]))
    return g, _flow(flow_in)


@kernel("TensorArrayGradWithShape", device_types=ALL_DEVICES, host_inputs=(1, 2))
def tensor_array_grad_with_shape(ctx, handle, flow_in, shape_to_prepend):
    prefix = _vector(shape_to_prepend, "shape_to_prepend")
    g = _array(handle).grad(s(ctx.attrs["source"]), prefix)
    return g, _flow(flow_in)


# --- element access ---------------------------------------------------------------------------
@kernel("TensorArrayWriteV3", device_types=ALL_DEVICES, host_inputs=(1, 3))
def tensor_array_write_v3(ctx, handle, index, value, flow_in):
    _array(handle).write(_index(index), value, ctx.xp)
    return _flow(flow_in)


# A read returns the written array itself: a fetch of it is copied, as Identity's.
@kernel("TensorArrayReadV3", device_types=ALL_DEVICES, host_inputs=(1, 2), forwards_input=True)
def tensor_array_read_v3(ctx, handle, index, flow_in):
    array = _array(handle)
    _check_dtype(ctx, array)
    return array.read(_index(index), ctx.xp)


@kernel("TensorArraySizeV3", device_types=ALL_DEVICES, host_only=True)
def tensor_array_size_v3(ctx, handle, flow_in):
    return np.int32(_array(handle).size())


@kernel("TensorArrayCloseV3", device_types=ALL_DEVICES, host_only=True)
def tensor_array_close_v3(ctx, handle):
    _array(handle).close()
    return ()


def _check_dtype(ctx, array):
    want = DType.parse(ctx.attrs["dtype"]) if not isinstance(ctx.attrs["dtype"], DType) \
        else ctx.attrs["dtype"]
    if want != array.dtype:
        fail(f"TensorArray dtype is {type_string(array.dtype)} but Op requested dtype "
             f"{type_string(want)}.")


# --- whole-array access -----------------------------------------------------------------------
@kernel("TensorArrayGatherV3", device_types=ALL_DEVICES, host_inputs=(1, 2))
def tensor_array_gather_v3(ctx, handle, indices, flow_in):
    array = _array(handle)
    _check_dtype(ctx, array)
    idx = _vector(indices, "indices")
    with array.lock:
        return array.gather(idx, _shape_attr(ctx, "element_shape"), ctx.xp)


@kernel("TensorArrayScatterV3", device_types=ALL_DEVICES, host_inputs=(1, 3))
def tensor_array_scatter_v3(ctx, handle, indices, value, flow_in):
    array = _array(handle)
    idx = _vector(indices, "indices")
    value = ctx.xp.asarray(value)
    if value.ndim < 1 or len(idx) != value.shape[0]:
        fail(f"Expected len(indices) == values.shape[0], but saw: {len(idx)} vs. "
             f"{value.shape[0] if value.ndim else 0}")
    with array.lock:
        if idx and not array.dynamic_size and max(idx) >= len(array):
            fail(f"Max scatter index must be < array size ({max(idx)} vs. {len(array)})")
        for k, i in enumerate(idx):
            array.write(i, value[k], ctx.xp)
    return _flow(flow_in)


@kernel("TensorArrayConcatV3", device_types=ALL_DEVICES, host_inputs=(1,))
def tensor_array_concat_v3(ctx, handle, flow_in):
    array = _array(handle)
    _check_dtype(ctx, array)
    with array.lock:
        values = [array.read(i, ctx.xp) for i in range(len(array))]
        if not values:
            rest = _shape_attr(ctx, "element_shape_except0")
            if not _defined(rest):
                fail(f"TensorArray has size zero, but element_shape_except0 "
                     f"{shape_string(rest)} is not fully defined. Currently only static "
                     f"shapes are supported when concatenating zero-size TensorArrays.")
            return ctx.xp.zeros((0,) + tuple(rest), array.dtype.np), np.zeros(0, np.int64)
    for i, v in enumerate(values):
        if v.ndim == 0:
            fail(f"Concat saw a scalar shape at index {i} but requires at least vector.  Did "
                 f"you mean to call TensorArray::Pack?")
        if v.shape[1:] != values[0].shape[1:]:
            fail(f"TensorArray has inconsistent shapes.  Index 0 has (excepting dimension 0) "
                 f"shape: {shape_string(values[0].shape[1:])} but index {i} has (excepting "
                 f"dimension 0) shape: {shape_string(v.shape[1:])}")
    lengths = np.array([v.shape[0] for v in values], np.int64)
    return ctx.xp.concatenate(values), lengths


@kernel("TensorArraySplitV3", device_types=ALL_DEVICES, host_inputs=(2, 3))
def tensor_array_split_v3(ctx, handle, value, lengths, flow_in):
    array = _array(handle)
    value = ctx.xp.asarray(value)
    sizes = _vector(lengths, "lengths")
    if value.ndim < 1:
        fail(f"Expected value to be at least a vector, but received shape: "
             f"{shape_string(value.shape)}")
    if sum(sizes) != value.shape[0] or any(n < 0 for n in sizes):
        fail(f"Expected sum of lengths to be equal to values.shape[0], but sum of lengths is "
             f"{sum(sizes)} and value's shape is: {shape_string(value.shape)}")
    with array.lock:
        if not array.dynamic_size and len(sizes) != len(array):
            fail(f"TensorArray's size is not equal to the size of lengths ({len(array)} vs. "
                 f"{len(sizes)}), and the TensorArray is not marked as dynamically resizeable")
        start = 0
        for i, n in enumerate(sizes):
            array.write(i, value[start:start + n], ctx.xp)
            start += n
    return _flow(flow_in)
