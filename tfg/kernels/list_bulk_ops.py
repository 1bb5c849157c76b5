"""TensorList kernels over whole tensors (CPU): scatter rows into a list, concat a list's
items along their first axis and split a tensor into one, and the list arithmetic that
gradients of lists need (AddN and ZerosLike of TensorLists, TensorFlow's variant add and
zeros-like for lists).

    l = TensorListScatter([[1, 2], [3, 4]], indices=[2, 0], element_shape=[-1])
        -> items [[3, 4], unset, [1, 2]]
    TensorListConcatV2(TensorListSplit([1, 2, 3], [-1], lengths=[1, 2]), [-1], [])
        -> [1, 2, 3], lengths [1, 2]
    add_lists([l1, l2]) -> items l1[i] + l2[i] (an unset item adds as zeros)

Errors use TensorFlow's words (list_kernels.h).
"""
import numpy as np

from tfg.kernels._util import fail
from tfg.kernels.basic import shape_string
from tfg.kernels.list_ops import (
    TensorList, _element, _element_dtype, _int, _list, _partial_shape, compatible,
    fully_defined, merge_shapes)
from tfg.kernels.optional_ops import OptionalValue
from tfg.kernels.registry import kernel


def _indices(value):
    idx = np.asarray(value)
    if idx.ndim != 1 or idx.dtype.kind not in "iu":
        fail(f"Expected indices to be a vector, received shape: {shape_string(idx.shape)}")
    out = [int(i) for i in idx.tolist()]
    if any(i < 0 for i in out):
        fail("Indices in TensorListScatter must all be non-negative.")
    return out


def _scatter_rows(items, element_shape, tensor, indices):
    """items with row k of tensor stored at indices[k] (the list grows as needed)."""
    if tensor.ndim < 1:
        fail(f"Tensor must be at least a vector, but saw shape: {shape_string(tensor.shape)}")
    if len(indices) != tensor.shape[0]:
        fail(f"Invalid number of rows in input tensor. Expected: {len(indices)} Actual: "
             f"{tensor.shape[0]}")
    if not compatible(element_shape, tensor.shape[1:]):
        fail(f"Specified a list with shape {shape_string(element_shape)} from a tensor with "
             f"shape {shape_string(tensor.shape[1:])}")
    items = list(items)
    for k, i in enumerate(indices):
        if i >= len(items):
            items.extend([None] * (i + 1 - len(items)))
        items[i] = tensor[k]
    return items


@kernel("TensorListScatter")
def tensor_list_scatter(ctx, tensor, indices, element_shape):
    shape = _partial_shape(element_shape)
    items = _scatter_rows([], shape, _element(ctx, tensor), _indices(indices))
    return TensorList(_element_dtype(ctx), shape, items)


@kernel("TensorListScatterV2")
def tensor_list_scatter_v2(ctx, tensor, indices, element_shape, num_elements):
    shape = _partial_shape(element_shape)
    n = _int(num_elements, "num_elements")
    items = _scatter_rows([None] * max(n, 0), shape, _element(ctx, tensor), _indices(indices))
    return TensorList(_element_dtype(ctx), shape, items)


@kernel("TensorListScatterIntoExistingList")
def tensor_list_scatter_into_existing_list(ctx, handle, tensor, indices):
    lst = _list(ctx, handle)
    return lst.with_items(_scatter_rows(lst.items, lst.element_shape, _element(ctx, tensor),
                                        _indices(indices)))


def _concat(lst, shape, leading_dims):
    """Items along axis 0; an unset item is zeros of shape (leading_dims[i],) + shape[1:]."""
    if shape is not None and len(shape) == 0:
        fail("Concat requires elements to be at least vectors, found scalars instead.")
    rest = None if shape is None else tuple(shape[1:])
    for a in lst.items:
        if a is not None:
            if a.ndim == 0:
                fail("Concat requires elements to be at least vectors, found scalars instead.")
            rest = merge_shapes(rest, a.shape[1:])
    if not lst.items:
        if not fully_defined(rest):
            fail(f"All except the first dimension must be fully defined when concating an "
                 f"empty tensor list. element_shape: {shape_string(shape)}")
        return np.zeros((0,) + rest, lst.element_dtype.np), np.zeros(0, np.int64)
    parts = []
    for i, a in enumerate(lst.items):
        if a is None:
            lead = shape[0] if shape is not None and shape[0] is not None else (
                leading_dims[i] if i < len(leading_dims) else None)
            if lead is None or not fully_defined(rest):
                fail(f"Trying to concat list with only uninitialized tensors but "
                     f"element_shape_except_first_dim is not fully defined: "
                     f"{shape_string(rest)}")
            a = np.zeros((lead,) + rest, lst.element_dtype.np)
        elif a.shape[1:] != rest:
            fail(f"Tried to concat tensors with unequal shapes: {shape_string(rest)} vs "
                 f"{shape_string(a.shape[1:])}")
        parts.append(a)
    return np.concatenate(parts), np.array([p.shape[0] for p in parts], np.int64)


@kernel("TensorListConcat")
def tensor_list_concat(ctx, handle):
    lst = _list(ctx, handle)
    shape = ctx.attrs.get("element_shape")
    shape = merge_shapes(None if shape is None else tuple(shape), lst.element_shape)
    return _concat(lst, shape, [])


@kernel("TensorListConcatV2")
def tensor_list_concat_v2(ctx, handle, element_shape, leading_dims):
    lst = _list(ctx, handle)
    shape = merge_shapes(_partial_shape(element_shape), lst.element_shape)
    lead = np.asarray(leading_dims)
    return _concat(lst, shape, [int(d) for d in lead.reshape(-1).tolist()])


@kernel("TensorListSplit")
def tensor_list_split(ctx, tensor, element_shape, lengths):
    t = _element(ctx, tensor)
    shape = _partial_shape(element_shape)
    sizes = np.asarray(lengths)
    if sizes.ndim != 1:
        fail(f"Expected lengths to be a vector, received shape: {shape_string(sizes.shape)}")
    if t.ndim < 1:
        fail(f"Tensor must be at least a vector, but saw shape: {shape_string(t.shape)}")
    if shape is not None and not compatible(shape[1:], t.shape[1:]):
        fail(f"Tried to split a tensor with incompatible shape {shape_string(t.shape)} into "
             f"a list of element shape {shape_string(shape)}")
    items, start = [], 0
    for n in sizes.tolist():
        if n < 0 or start + n > t.shape[0]:
            fail(f"Invalid value in lengths: {n}" if n < 0 else
                 f"Attempting to slice [{start}, {start + n}] from tensor with length "
                 f"{t.shape[0]}")
        items.append(t[start:start + n])
        start += n
    if start != t.shape[0]:
        fail(f"Unused values in tensor. Length of tensor: {t.shape[0]} Values used: {start}")
    return TensorList(_element_dtype(ctx), shape, items)


# --- list arithmetic: what AddN and ZerosLike do with TensorLists -----------------------------
def add_lists(lists):
    """Item-wise sum (TensorListBinaryAdd): same dtype and length; unset + x = x."""
    first = lists[0]
    items = list(first.items)
    for other in lists[1:]:
        if not isinstance(other, TensorList):
            fail(f"AddN cannot add a TensorList and a {type(other).__name__}")
        if other.element_dtype != first.element_dtype:
            fail(f"Trying to add two lists of tensors of different dtypes. One is "
                 f"{first.element_dtype.tf_name} and the other is {other.element_dtype.tf_name}")
        if len(other) != len(items):
            fail(f"Trying to add two lists of tensors with different lengths. One is "
                 f"{len(items)} and the other is {len(other)}")
        for i, b in enumerate(other.items):
            a = items[i]
            if b is None:
                continue
            if a is not None and a.shape != b.shape:
                fail(f"Trying to add two tensors with incompatible element shapes. One is "
                     f"{shape_string(a.shape)} and the other is {shape_string(b.shape)}")
            items[i] = b if a is None else a + b
    return first.with_items(items)


def zeros_like_list(lst, xp=np):
    """A list of the same length whose set items are zeros of `xp` (unset ones stay unset)."""
    return lst.with_items([zeros_like_item(a, xp) for a in lst.items])


def zeros_like_item(a, xp=np):
    """Zeros shaped like one value a list may hold: an array, a list, an Optional (zeros of
    its components, TensorFlow's OptionalZerosLike; an empty one stays empty), None (unset)."""
    if a is None:
        return None
    if isinstance(a, TensorList):
        return zeros_like_list(a, xp)
    if isinstance(a, OptionalValue):
        return a if a.values is None else OptionalValue(
            tuple(zeros_like_item(v, xp) for v in a.values))
    return xp.zeros(a.shape, a.dtype)
