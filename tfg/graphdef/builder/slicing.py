"""Python indexing on Tensor handles, built as TensorFlow's `_slice_helper` builds it.

    >>> y[1:, ::2]      # StridedSlice(y, stack=[1, 0], stack_1=[0, 0], stack_2=[1, 2]),
    ...                 # begin_mask=0b10, end_mask=0b11
    >>> y[0]            # shrink_axis_mask=1: the first axis goes away
    >>> y[..., None, 1] # ellipsis_mask=1, new_axis_mask=2, shrink_axis_mask=4

Begin/end/strides are int32 Consts (`strided_slice/stack`, `stack_1`, `stack_2`), or a Pack
when an index is a scalar tensor.
"""
import numpy as np

from tfg.errors import TfgInputError
from tfg.graphdef.builder.array_ops import stack
from tfg.graphdef.builder.constants import constant, convert_to_tensor
from tfg.graphdef.builder.core import Tensor, get_default_builder
from tfg.graphdef.builder.math_ops import _is_tensorish, make
from tfg.schemas.dtypes import DType


def strided_slice(x, begin, end, strides=None, begin_mask=0, end_mask=0, ellipsis_mask=0,
                  new_axis_mask=0, shrink_axis_mask=0, name="strided_slice"):
    """StridedSlice with explicit masks; `x[...]` builds these from Python indexing."""
    b = get_default_builder()
    with b.name_scope(name) as scope:
        x = convert_to_tensor(x, name="input")
        parts = [begin, end, strides if strides is not None else [1] * len(begin)]
        packed = []
        for i, vals in enumerate(parts):
            nm = "stack" if i == 0 else f"stack_{i}"
            if any(_is_tensorish(v) for v in vals):
                packed.append(stack([convert_to_tensor(v, DType.INT32) if not _is_tensorish(v)
                                     else convert_to_tensor(v) for v in vals], name=nm))
            else:
                packed.append(constant(np.asarray(vals, dtype=np.int32).reshape(-1), name=nm))
        idx = packed[0].dtype.base
        return make("StridedSlice", [x] + packed,
                    {"T": x.dtype.base, "Index": idx, "begin_mask": begin_mask,
                     "end_mask": end_mask, "ellipsis_mask": ellipsis_mask,
                     "new_axis_mask": new_axis_mask, "shrink_axis_mask": shrink_axis_mask},
                    scope, [x.dtype.base]).outputs[0]


def _getitem(x, spec):
    """x[spec] as TensorFlow's _slice_helper builds it."""
    if not isinstance(spec, tuple):
        spec = (spec,)
    begin, end, strides = [], [], []
    masks = dict(begin_mask=0, end_mask=0, ellipsis_mask=0, new_axis_mask=0,
                 shrink_axis_mask=0)
    for i, s in enumerate(spec):
        bit = 1 << i
        if isinstance(s, slice):
            if s.start is not None:
                begin.append(s.start)
            else:
                begin.append(0)
                masks["begin_mask"] |= bit
            if s.stop is not None:
                end.append(s.stop)
            else:
                end.append(0)
                masks["end_mask"] |= bit
            strides.append(1 if s.step is None else s.step)
        elif s is Ellipsis:
            begin.append(0), end.append(0), strides.append(1)
            masks["ellipsis_mask"] |= bit
        elif s is None:
            begin.append(0), end.append(0), strides.append(1)
            masks["new_axis_mask"] |= bit
        elif isinstance(s, (int, np.integer)) or _is_tensorish(s):
            begin.append(s)
            end.append(s + 1)
            strides.append(1)
            masks["shrink_axis_mask"] |= bit
        else:
            raise TfgInputError(f"unsupported index {s!r} on tensor {x.name!r} (ints, slices, "
                                "..., None and scalar int tensors are supported)")
    return strided_slice(x, begin, end, strides, **masks)


Tensor.__getitem__ = _getitem



__all__ = ["strided_slice"]
