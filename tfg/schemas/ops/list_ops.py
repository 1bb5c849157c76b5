"""Signatures of the TensorList ops (TensorFlow's list_ops.cc): the variant-typed lists that
TF2 control flow uses for TensorArrays, e.g. the per-timestep inputs and outputs of a Keras
LSTM/GRU loop.

    >>> get_op("TensorListSetItem").attrs["resize_if_index_out_of_bounds"].default
    False
    >>> [a.name for a in get_op("TensorListGetItem").inputs]
    ['input_handle', 'index', 'element_shape']

A list handle is a scalar variant; the shape functions of the ops that read elements use the
`element_shape` input (TensorFlow also merges the handle's shape data, which tfg does not
track: an unknown dimension there stays unknown).
"""
from tfg.schemas.ops.registry import op
from tfg.schemas.ops.shape_fns import ShapeError, scalar


def _element_shape(ctx, i):
    try:
        return ctx.shape_tensor(i)
    except ShapeError:
        return None  # the kernel reports a malformed element_shape with TensorFlow's words


def get_item(ctx):
    return [_element_shape(ctx, 2)]


def stack(ctx):
    shape = _element_shape(ctx, 1)
    n = ctx.attr("num_elements")
    return [None if shape is None else (n if n >= 0 else None,) + tuple(shape)]


def gather(ctx):
    shape, idx = _element_shape(ctx, 2), ctx.shape(1)
    n = idx[0] if idx is not None and len(idx) == 1 else None
    return [None if shape is None else (n,) + tuple(shape)]


def pop_back(ctx):
    return [(), _element_shape(ctx, 1)]


def element_shape(ctx):
    return [(None,)]


_SHAPE_TYPE = "shape_type: {int32, int64}"

op("EmptyTensorList",
   inputs=["element_shape: shape_type", "max_num_elements: int32"],
   outputs=["handle: variant"],
   attrs=["element_dtype: type", _SHAPE_TYPE],
   shape_fn=scalar)
op("TensorListReserve",
   inputs=["element_shape: shape_type", "num_elements: int32"],
   outputs=["handle: variant"],
   attrs=["element_dtype: type", _SHAPE_TYPE],
   shape_fn=scalar)
op("TensorListFromTensor",
   inputs=["tensor: element_dtype", "element_shape: shape_type"],
   outputs=["output_handle: variant"],
   attrs=["element_dtype: type", _SHAPE_TYPE],
   shape_fn=scalar)
op("TensorListGetItem",
   inputs=["input_handle: variant", "index: int32", "element_shape: Tshape"],
   outputs=["item: element_dtype"],
   attrs=["element_dtype: type", "Tshape: {int32, int64} = DT_INT32"],
   shape_fn=get_item)
op("TensorListSetItem",
   inputs=["input_handle: variant", "index: int32", "item: element_dtype"],
   outputs=["output_handle: variant"],
   attrs=["element_dtype: type", "resize_if_index_out_of_bounds: bool = false"],
   shape_fn=scalar)
op("TensorListStack",
   inputs=["input_handle: variant", "element_shape: int32"],
   outputs=["tensor: element_dtype"],
   attrs=["element_dtype: type", "num_elements: int = -1"],
   shape_fn=stack)
op("TensorListGather",
   inputs=["input_handle: variant", "indices: int32", "element_shape: int32"],
   outputs=["values: element_dtype"],
   attrs=["element_dtype: type"],
   shape_fn=gather)
op("TensorListLength",
   inputs=["input_handle: variant"],
   outputs=["length: int32"],
   shape_fn=scalar)
op("TensorListElementShape",
   inputs=["input_handle: variant"],
   outputs=["element_shape: shape_type"],
   attrs=[_SHAPE_TYPE],
   shape_fn=element_shape)
op("TensorListPushBack",
   inputs=["input_handle: variant", "tensor: element_dtype"],
   outputs=["output_handle: variant"],
   attrs=["element_dtype: type"],
   shape_fn=scalar)
op("TensorListPopBack",
   inputs=["input_handle: variant", "element_shape: int32"],
   outputs=["output_handle: variant", "tensor: element_dtype"],
   attrs=["element_dtype: type"],
   shape_fn=pop_back)
op("TensorListResize",
   inputs=["input_handle: variant", "size: int32"],
   outputs=["output_handle: variant"],
   shape_fn=scalar)


# --- whole-tensor ops: scatter rows into a list, concat/split along the first axis
def concat(ctx):
    shape = ctx.attr("element_shape")
    rest = None if shape is None or len(shape) < 1 else tuple(shape[1:])
    return [None if rest is None else (None,) + rest, (None,)]


def concat_v2(ctx):
    shape = _element_shape(ctx, 1)
    rest = None if shape is None or len(shape) < 1 else tuple(shape[1:])
    return [None if rest is None else (None,) + rest, (None,)]


op("TensorListScatter",
   inputs=["tensor: element_dtype", "indices: int32", "element_shape: shape_type"],
   outputs=["output_handle: variant"],
   attrs=["element_dtype: type", _SHAPE_TYPE],
   shape_fn=scalar)
op("TensorListScatterV2",
   inputs=["tensor: element_dtype", "indices: int32", "element_shape: shape_type",
           "num_elements: int32"],
   outputs=["output_handle: variant"],
   attrs=["element_dtype: type", _SHAPE_TYPE],
   shape_fn=scalar)
op("TensorListScatterIntoExistingList",
   inputs=["input_handle: variant", "tensor: element_dtype", "indices: int32"],
   outputs=["output_handle: variant"],
   attrs=["element_dtype: type"],
   shape_fn=scalar)
op("TensorListConcat",
   inputs=["input_handle: variant"],
   outputs=["tensor: element_dtype", "lengths: int64"],
   attrs=["element_dtype: type", "element_shape: shape = unknown"],
   shape_fn=concat)
op("TensorListConcatV2",
   inputs=["input_handle: variant", "element_shape: shape_type", "leading_dims: int64"],
   outputs=["tensor: element_dtype", "lengths: int64"],
   attrs=["element_dtype: type", _SHAPE_TYPE],
   shape_fn=concat_v2)
op("TensorListSplit",
   inputs=["tensor: element_dtype", "element_shape: shape_type", "lengths: int64"],
   outputs=["output_handle: variant"],
   attrs=["element_dtype: type", _SHAPE_TYPE],
   shape_fn=scalar)
