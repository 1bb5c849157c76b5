"""TensorList kernels (CPU and GPU): the variant-typed lists of TF2 control flow (TensorArray
in a tf.function, the per-timestep inputs and outputs of a Keras LSTM/GRU loop).

    l = TensorListReserve(element_shape=[-1, 8], num_elements=5, element_dtype=float)
    l = TensorListSetItem(l, 0, h0)             # a new list; the old one is unchanged
    TensorListGetItem(l, 0, [-1, 8]) -> h0;     TensorListGetItem(l, 1, [2, 8]) -> zeros(2, 8)
    TensorListStack(l, [-1, 8]) -> (5, 2, 8)    # unset items as zeros of the set items' shape

A list is a value, not a resource: every op that changes one returns a new `TensorList`
(copying the Python list of items, never the arrays, which no kernel writes in place), so a
list that flows into two consumers, or around a loop, is never changed behind a reader's
back. Errors use TensorFlow's words.

On a GPU, as TensorFlow's GPU list kernels: the items live in device memory, indices, sizes
and element shapes in host memory (`host_inputs`); Length and ElementShape compute on the
host. A list that crosses devices (a _Recv) is copied item by item (memory.register_container).
"""
import numpy as np

from tfg.kernels._util import fail
from tfg.kernels.basic import shape_string
from tfg.kernels.memory import in_memory_of, is_device_array, register_container
from tfg.kernels.registry import ALL_DEVICES, kernel
from tfg.schemas.dtypes import DType

# DataTypeString's names, which TensorFlow's list errors print ("op elements int32 but list
# elements float").
_TYPE_STRING = {DType.FLOAT: "float", DType.DOUBLE: "double", DType.HALF: "half"}


def type_string(dtype):
    dtype = DType.parse(dtype) if not isinstance(dtype, DType) else dtype
    return _TYPE_STRING.get(dtype.base, dtype.tf_name)


def merge_shapes(a, b):
    """The most specific shape compatible with both, or a TensorFlow error."""
    if a is None:
        return b
    if b is None:
        return a
    if len(a) != len(b) or any(x is not None and y is not None and x != y for x, y in zip(a, b)):
        fail(f"PartialTensorShape: Incompatible shapes during merge: {shape_string(a)} vs. "
             f"{shape_string(b)}")
    return tuple(x if x is not None else y for x, y in zip(a, b))


def compatible(partial, shape):
    # (equal tuples first: a fully known element shape, every item of an RNN's output list)
    return partial is None or partial == shape or (len(partial) == len(shape) and all(
        d is None or d == s for d, s in zip(partial, shape)))


def fully_defined(shape):
    return shape is not None and all(d is not None for d in shape)


class TensorList:
    """One TensorList value: element dtype, element shape (None = unknown rank, None dims =
    unknown), the items (an ndarray, or None where never set) and max_num_elements (-1 = no
    limit). Treat as immutable: `with_items` makes the changed copy."""

    __slots__ = ("element_dtype", "element_shape", "items", "max_num_elements")

    def __init__(self, element_dtype, element_shape, items, max_num_elements=-1):
        self.element_dtype = DType.parse(element_dtype) if not isinstance(
            element_dtype, DType) else element_dtype
        self.element_shape = element_shape
        self.items = items
        self.max_num_elements = max_num_elements

    def with_items(self, items):
        return TensorList(self.element_dtype, self.element_shape, items, self.max_num_elements)

    def __len__(self):
        return len(self.items)

    @property
    def nbytes(self):
        """Bytes held by the set items (memory accounting of live values)."""
        return sum(a.nbytes for a in self.items if a is not None)

    def __repr__(self):
        n_set = sum(a is not None for a in self.items)
        return (f"<TensorList {type_string(self.element_dtype)} {shape_string(self.element_shape)}"
                f" x {len(self.items)} ({n_set} set)>")


# --- helpers reading kernel inputs --------------------------------------------------------
def _element_dtype(ctx):
    dt = ctx.cache.get("element_dtype")  # parsed once per node: list ops run every step
    if dt is None:
        dt = ctx.attrs.get("element_dtype")
        if dt is None:
            fail("the node has no element_dtype attr (the dtype of the list's elements)")
        dt = ctx.cache["element_dtype"] = DType.parse(dt) if not isinstance(dt, DType) else dt
    return dt


def _list(ctx, handle, check_dtype=True):
    if not isinstance(handle, TensorList):
        fail(f"input_handle is not a TensorList (got {type(handle).__name__}); "
             f"expected the output of a TensorList op")
    if check_dtype:
        want = _element_dtype(ctx)
        if want is not handle.element_dtype and want != handle.element_dtype:
            fail(f"Invalid data types; op elements {type_string(want)} but list elements "
                 f"{type_string(handle.element_dtype)}")
    return handle


_INT_SCALARS = frozenset({np.int32, np.int64})


def _int(value, what):
    if type(value) in _INT_SCALARS:  # a loop's index: the common case, without asarray
        return int(value)
    v = np.asarray(value)
    if v.size != 1 or v.dtype.kind not in "iu":
        fail(f"{what} must be an int scalar, got {v.dtype.name} of shape {list(v.shape)}")
    return int(v.reshape(-1)[0])


# element_shape values read before -> their shape (a Keras RNN's list ops read the same few
# Consts every step): keyed by dtype, rank and bytes, so what a key gives is what the same
# value gives
_SHAPES = {}


def _partial_shape(value):
    """An element_shape input: scalar -1 = unknown rank, a vector with -1 for unknown dims."""
    key = None
    if type(value) is np.ndarray and value.ndim <= 1 and value.size <= 8:
        key = (value.dtype.str, value.ndim, value.tobytes())
        got = _SHAPES.get(key)
        if got is not None:
            return got[0]
    shape = _read_partial_shape(value)
    if key is not None:
        if len(_SHAPES) >= 256:
            _SHAPES.clear()
        _SHAPES[key] = (shape,)
    return shape


def _read_partial_shape(value):
    v = np.asarray(value)
    if v.dtype.kind not in "iu":
        fail(f"element_shape must be int32 or int64, got {v.dtype.name}")
    if v.ndim == 0:
        if int(v) != -1:
            fail(f"The shape tensor must be a vector or the scalar -1 (unknown rank), got "
                 f"{int(v)}")
        return None
    if v.ndim > 1:
        fail(f"Shape must be at most rank 1 but is rank {v.ndim}")
    dims = [int(d) for d in v.tolist()]
    if any(d < -1 for d in dims):
        fail(f"element_shape dimensions must be >= -1, got {dims}")
    return tuple(None if d == -1 else d for d in dims)


_VARIANT = object()  # the cached "numpy dtype" of a list of variants (lists, optionals)


def item_shape(value):
    """An item's shape: a variant item (a TensorList, an Optional) is a scalar."""
    return value.shape if type(value) is np.ndarray or is_device_array(value) else ()


def _variant_item(value):
    # A scalar variant is kept as the object itself (a 0-d object array is unwrapped), so
    # GetItem / PopBack give the list or optional back to the ops that read it.
    if type(value) is np.ndarray:
        if value.dtype != object or value.ndim != 0:
            fail(f"Invalid data types; op elements {type_string(DType.from_numpy(value.dtype))}"
                 f" but list elements variant")
        return value[()]
    return value


def _element(ctx, value):
    """An item being stored: of the op's element_dtype."""
    want_np = ctx.cache.get("element_np")
    if want_np is None:  # the numpy dtype that means exactly the element dtype, else False
        want = _element_dtype(ctx)
        if want.base == DType.VARIANT:
            want_np = _VARIANT
        else:
            want_np = want.np if want.np != object and DType.from_numpy(want.np) == want \
                else False
        ctx.cache["element_np"] = want_np
    if want_np is _VARIANT:
        return _variant_item(value)
    arr = value if is_device_array(value) else np.asarray(value)
    if want_np is not False and arr.dtype == want_np:
        return arr  # (DType's own conversions cost microseconds; an LSTM sets an item a step)
    want = _element_dtype(ctx)
    got = DType.from_numpy(arr.dtype)
    if got != want:
        fail(f"Invalid data types; op elements {type_string(got)} but list elements "
             f"{type_string(want)}")
    return arr


def _read_shape(lst, shape_input):
    """The shape of an unset item: the element_shape input merged with the list's, else the
    shape of the set items; TensorFlow's error when still not fully defined."""
    shape = merge_shapes(_partial_shape(shape_input), lst.element_shape)
    if not fully_defined(shape):
        for a in lst.items:
            if a is not None:
                shape = merge_shapes(shape, a.shape)
    if not fully_defined(shape):
        fail(f"Trying to read an uninitialized tensor but element_shape is not fully defined: "
             f"{shape_string(shape)} and no list element is set.")
    return shape


def _zeros(lst, shape, xp=np):
    return xp.zeros(shape, lst.element_dtype.np)


def stacked_shape(lst, element_shape):
    """(shape, numpy dtype) TensorListStack would allocate, when the element_shape input and
    the list's give it fully; else None. For the executor's memory-limit check."""
    try:
        shape = merge_shapes(_partial_shape(element_shape), lst.element_shape)
    except Exception:  # noqa: BLE001 - the kernel reports malformed inputs
        return None
    if not fully_defined(shape):
        return None
    return (len(lst),) + tuple(shape), lst.element_dtype.np


# --- making lists -------------------------------------------------------------------------
@kernel("EmptyTensorList", device_types=ALL_DEVICES, host_inputs=(0, 1))
def empty_tensor_list(ctx, element_shape, max_num_elements):
    return TensorList(_element_dtype(ctx), _partial_shape(element_shape), [],
                      _int(max_num_elements, "max_num_elements"))


@kernel("TensorListReserve", device_types=ALL_DEVICES, host_inputs=(0, 1))
def tensor_list_reserve(ctx, element_shape, num_elements):
    shape = _partial_shape(element_shape)
    n = _int(num_elements, "num_elements")
    if n < 0:
        fail(f"The num_elements to reserve must be a non negative number, but got {n}")
    return TensorList(_element_dtype(ctx), shape, [None] * n)


@kernel("TensorListFromTensor", device_types=ALL_DEVICES, host_inputs=(1,))
def tensor_list_from_tensor(ctx, tensor, element_shape):
    t = _element(ctx, tensor)
    shape = _partial_shape(element_shape)
    if t.ndim < 1:
        fail(f"Tensor must be at least a vector, but saw shape: {shape_string(t.shape)}")
    if not compatible(shape, t.shape[1:]):
        fail(f"Specified a list with shape {shape_string(shape)} from a tensor with shape "
             f"{shape_string(t.shape[1:])}")
    # Views of the input: items are only ever read, never written in place.
    return TensorList(_element_dtype(ctx), shape, [t[i] for i in range(t.shape[0])])


# --- reading ------------------------------------------------------------------------------
@kernel("TensorListLength", device_types=ALL_DEVICES, host_only=True)
def tensor_list_length(ctx, handle):
    return np.int32(len(_list(ctx, handle, check_dtype=False)))


@kernel("TensorListElementShape", device_types=ALL_DEVICES, host_only=True)
def tensor_list_element_shape(ctx, handle):
    shape = _list(ctx, handle, check_dtype=False).element_shape
    dt = DType.parse(ctx.attrs["shape_type"]).np
    if shape is None:
        return np.array(-1, dt)
    return np.array([-1 if d is None else d for d in shape], dt)


# GetItem and PopBack return a stored item itself, which may be a view of an op's input (a
# variable's buffer read into TensorListFromTensor): a fetch of it is copied, as Identity's.
@kernel("TensorListGetItem", device_types=ALL_DEVICES, host_inputs=(1, 2),
        forwards_input=True)
def tensor_list_get_item(ctx, handle, index, element_shape):
    lst = _list(ctx, handle)
    i = _int(index, "index")
    if not 0 <= i < len(lst):
        fail(f"Trying to access element {i} in a list with {len(lst)} elements.")
    item = lst.items[i]
    if item is not None:
        return item
    return _zeros(lst, _read_shape(lst, element_shape), ctx.xp)


def _stacked(lst, rows, shape_input, what, xp=np):
    """Stack `rows` (items or None) into one array of `xp`, unset items as zeros
    (TensorListStack, TensorListGather)."""
    shape = merge_shapes(_partial_shape(shape_input), lst.element_shape)
    if not fully_defined(shape):
        if not lst.items:
            fail(f"Tried to {what} elements of an empty list with non-fully-defined "
                 f"element_shape: {shape_string(shape)}")
        first = next((a for a in lst.items if a is not None), None)
        if first is None:
            fail(f"Tried to {what} list which only contains uninitialized tensors and has a "
                 f"non-fully-defined element_shape: {shape_string(shape)}")
        shape = merge_shapes(shape, first.shape)
    shape, dt, n = tuple(shape), lst.element_dtype.np, len(rows)
    array = xp.ndarray
    if n and shape and all(type(a) is array and a.shape == shape and a.dtype == dt
                           for a in rows):
        # every row set, of the element shape and dtype (a Keras RNN's outputs): one copy of
        # them all into the result's memory, the same values as row by row (20 rows of 8x64:
        # 22 -> 11 us)
        out = xp.empty((n,) + shape, dt)
        xp.concatenate(rows, 0, out=out.reshape((n * shape[0],) + shape[1:]))
        return out
    out = xp.zeros((n,) + shape, dt)
    for k, a in enumerate(rows):
        if a is None:
            continue
        if type(a) is not array:
            a = in_memory_of(xp, a)  # (an item set on the other side, before the list came)
        if a.shape != shape:
            fail(f"Tried to {what} a list element of shape {shape_string(a.shape)} with "
                 f"element_shape {shape_string(shape)}")
        else:
            out[k] = a
    return out


@kernel("TensorListStack", device_types=ALL_DEVICES, host_inputs=(1,))
def tensor_list_stack(ctx, handle, element_shape):
    lst = _list(ctx, handle)
    n = ctx.attrs.get("num_elements", -1)
    if n != -1 and n != len(lst):
        fail(f"Operation expected a list with {n} elements but got a list with {len(lst)} "
             f"elements.")
    return _stacked(lst, lst.items, element_shape, "stack", ctx.xp)


@kernel("TensorListGather", device_types=ALL_DEVICES, host_inputs=(1, 2))
def tensor_list_gather(ctx, handle, indices, element_shape):
    lst = _list(ctx, handle)
    idx = np.asarray(indices)
    if idx.ndim != 1 or idx.dtype.kind not in "iu":
        fail(f"indices must be a vector of int32, got {idx.dtype.name} of shape "
             f"{list(idx.shape)}")
    rows = []
    for i in idx.tolist():
        if not 0 <= i < len(lst):
            fail(f"Trying to gather element {i} in a list with {len(lst)} elements.")
        rows.append(lst.items[i])
    return _stacked(lst, rows, element_shape, "gather", ctx.xp)


# --- changing (each returns a new list) ---------------------------------------------------
@kernel("TensorListSetItem", device_types=ALL_DEVICES, host_inputs=(1,))
def tensor_list_set_item(ctx, handle, index, item):
    lst = _list(ctx, handle)
    i = _int(index, "index")
    value = _element(ctx, item)
    items = list(lst.items)
    if not 0 <= i < len(items):
        if i < 0 or not ctx.attrs.get("resize_if_index_out_of_bounds", False):
            fail(f"Trying to modify element {i} in a list with {len(items)} elements.")
        items.extend([None] * (i + 1 - len(items)))
    if not compatible(lst.element_shape, item_shape(value)):
        fail(f"Tried to set a tensor with incompatible shape at a list index. Item element "
             f"shape: {shape_string(item_shape(value))} list shape: {shape_string(lst.element_shape)}")
    items[i] = value
    return lst.with_items(items)


@kernel("TensorListPushBack", device_types=ALL_DEVICES)
def tensor_list_push_back(ctx, handle, tensor):
    lst = _list(ctx, handle)
    value = _element(ctx, tensor)
    if not compatible(lst.element_shape, item_shape(value)):
        fail(f"Tried to append a tensor with incompatible shape to a list. Op element shape: "
             f"{shape_string(item_shape(value))} list shape: {shape_string(lst.element_shape)}")
    if 0 <= lst.max_num_elements <= len(lst):
        fail(f"Tried to push item into a full list list size: {len(lst)} max_num_elements: "
             f"{lst.max_num_elements}")
    return lst.with_items(lst.items + [value])


@kernel("TensorListPopBack", device_types=ALL_DEVICES, host_inputs=(1,), forwards_input=True)
def tensor_list_pop_back(ctx, handle, element_shape):
    lst = _list(ctx, handle)
    if not lst.items:
        fail("Trying to pop from an empty list.")
    item = lst.items[-1]
    if item is None:
        item = _zeros(lst, _read_shape(lst, element_shape), ctx.xp)
    return lst.with_items(lst.items[:-1]), item


@kernel("TensorListResize", device_types=ALL_DEVICES, host_inputs=(1,))
def tensor_list_resize(ctx, handle, size):
    lst = _list(ctx, handle, check_dtype=False)
    n = _int(size, "size")
    if n < 0:
        fail(f"TensorListSlice expects size to be non-negative. Got: {n}")
    return lst.with_items(lst.items[:n] + [None] * max(0, n - len(lst)))


def _moved(lst, move):
    """`lst` with each set item moved to the receiving device (a _Recv of a list)."""
    return lst.with_items([None if a is None else move(a) for a in lst.items])


register_container(TensorList, _moved)
