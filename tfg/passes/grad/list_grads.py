"""Gradients of the TensorList ops (TensorFlow's list_ops.py rules): the gradient of a list is
a list of the items' gradients, so each op's gradient is its opposite list op.

    Before: l = TensorListFromTensor(x, shape)     After: dx = TensorListStack(dl, shape(x)[1:])
    Before: y = TensorListGetItem(l, i, shape)     After: dl = TensorListSetItem(
                                                       TensorListReserve(ElementShape(l),
                                                                         Length(l)), i, dy)
    Before: l2 = TensorListSetItem(l, i, v)        After: dv = TensorListGetItem(dl2, i),
                                                          dl = TensorListSetItem(dl2, i, 0)

List gradients from several consumers are summed by AddN of variants (item-wise, unset
items as zeros), as TensorFlow's variant add does; a list loop variable with no gradient
gets ZerosLike of the list.
"""
from tfg.passes.grad.registry import gradient, no_gradient
from tfg.schemas.dtypes import DType

I32 = DType.INT32


def _dtype(op):
    return op.attr("element_dtype")


def _element_shape(b, t):
    """shape(t)[1:]: the element shape of the rows of tensor t."""
    return b.op("Slice", [b.shape(t), b.const([1], I32), b.const([-1], I32)])


def _list_element_shape(b, lst):
    return b.op("TensorListElementShape", [lst], {"shape_type": I32})


@gradient("TensorListFromTensor")
def _from_tensor(b, op, grads):
    t = op.inputs[0]
    shape = b.static_shape(t)
    n = shape[0] if shape else -1
    dt = b.op("TensorListStack", [grads[0], _element_shape(b, t)],
              {"element_dtype": _dtype(op), "num_elements": n})
    return [dt, None]


@gradient("TensorListStack")
def _stack(b, op, grads):
    g = grads[0]
    dl = b.op("TensorListFromTensor", [g, _element_shape(b, op.outputs[0])],
              {"element_dtype": _dtype(op), "shape_type": I32})
    return [dl, None]


@gradient("TensorListGetItem")
def _get_item(b, op, grads):
    lst, index = op.inputs[0], op.inputs[1]
    reserve = b.op("TensorListReserve", [_list_element_shape(b, lst),
                                         b.op("TensorListLength", [lst])],
                   {"element_dtype": _dtype(op), "shape_type": I32})
    dl = b.op("TensorListSetItem", [reserve, index, grads[0]], {"element_dtype": _dtype(op)})
    return [dl, None, None]


@gradient("TensorListSetItem")
def _set_item(b, op, grads):
    lst, index, item = op.inputs
    dl = grads[0]
    ditem = b.op("TensorListGetItem", [dl, index, b.shape(item)],
                 {"element_dtype": _dtype(op)})
    dlist = b.op("TensorListSetItem", [dl, index, b.zeros_like(item)],
                 {"element_dtype": _dtype(op)})
    if op.attr("resize_if_index_out_of_bounds", False):
        dlist = b.op("TensorListResize", [dlist, b.op("TensorListLength", [lst])])
    return [dlist, None, ditem]


@gradient("TensorListResize")
def _resize(b, op, grads):
    return [b.op("TensorListResize", [grads[0], b.op("TensorListLength", [op.inputs[0]])]),
            None]


@gradient("TensorListPushBack")
def _push_back(b, op, grads):
    pop = b.op("TensorListPopBack", [grads[0], b.shape(op.inputs[1])],
               {"element_dtype": _dtype(op)})
    return [pop, b.out(pop, 1)]


@gradient("TensorListPopBack", fill_zeros=False)
def _pop_back(b, op, grads):
    dlist, ditem = grads
    if dlist is None:
        # TensorFlow starts from an empty list here, which is a list of the wrong length
        # when the rest of the list is unused; a list of zeros like it is always right.
        dlist = b.zeros_like(op.outputs[0])
    if ditem is None:
        ditem = b.zeros_like(op.outputs[1])
    return [b.op("TensorListPushBack", [dlist, ditem], {"element_dtype": _dtype(op)}), None]


@gradient("TensorListGather")
def _gather(b, op, grads):
    """Rows summed per index (UnsortedSegmentSum) into a full list: TensorFlow scatters
    into a reserved list instead, which keeps only one row of an index gathered twice."""
    lst, indices = op.inputs[0], op.inputs[1]
    rows = b.op("UnsortedSegmentSum", [grads[0], indices, b.op("TensorListLength", [lst])])
    dl = b.op("TensorListFromTensor", [rows, _list_element_shape(b, lst)],
              {"element_dtype": _dtype(op), "shape_type": I32})
    return [dl, None, None]


@gradient("TensorListScatter", "TensorListScatterV2")
def _scatter(b, op, grads):
    t, indices = op.inputs[0], op.inputs[1]
    dt = b.op("TensorListGather", [grads[0], indices, _element_shape(b, t)],
              {"element_dtype": _dtype(op)})
    return [dt] + [None] * (len(op.inputs) - 1)


@gradient("TensorListScatterIntoExistingList")
def _scatter_into(b, op, grads):
    _, t, indices = op.inputs
    dt = b.op("TensorListGather", [grads[0], indices, _element_shape(b, t)],
              {"element_dtype": _dtype(op)})
    dl = b.op("TensorListScatterIntoExistingList", [grads[0], b.zeros_like(t), indices],
              {"element_dtype": _dtype(op)})
    return [dl, dt, None]


@gradient("TensorListConcat", "TensorListConcatV2")
def _concat(b, op, grads):
    dl = b.op("TensorListSplit", [grads[0], _list_element_shape(b, op.inputs[0]),
                                  op.outputs[1]],
              {"element_dtype": _dtype(op), "shape_type": I32})
    return [dl] + [None] * (len(op.inputs) - 1)


@gradient("TensorListSplit")
def _split(b, op, grads):
    t, _, lengths = op.inputs
    shape = b.op("ConcatV2", [b.const([-1], I32), _element_shape(b, t), b.const(0, I32)])
    concat = b.op("TensorListConcatV2", [grads[0], shape, lengths],
                  {"element_dtype": _dtype(op), "shape_type": I32})
    return [concat, None, None]


# Lengths and shapes carry no gradient; making a list from ints has nothing to differentiate.
no_gradient("TensorListLength", "TensorListElementShape", "TensorListReserve",
            "EmptyTensorList")
