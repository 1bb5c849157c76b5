"""Optional kernels (CPU): the variant that holds a tuple of tensors or nothing, which
control flow v2's cond gradient passes from the forward `If` to the backward one (see
tfg/schemas/ops/optional_ops.py). Errors use TensorFlow's words.

    o = OptionalFromValue([x, i]);  OptionalHasValue(o) -> True;  OptionalGetValue(o) -> x, i
    OptionalGetValue(OptionalNone()) -> "The given optional does not have a value."
"""
import numpy as np

from tfg.kernels._util import fail
from tfg.kernels.basic import shape_string
from tfg.kernels.list_ops import type_string
from tfg.kernels.registry import kernel
from tfg.schemas.dtypes import DType


class OptionalValue:
    """One Optional: `values` is a tuple of arrays, or None for no value. Immutable."""

    __slots__ = ("values",)

    def __init__(self, values):
        self.values = values

    @property
    def nbytes(self):
        return sum(getattr(v, "nbytes", 0) for v in self.values or ())

    def __repr__(self):
        if self.values is None:
            return "<Optional none>"
        return f"<Optional of {len(self.values)} component(s)>"


@kernel("OptionalNone")
def optional_none(ctx):
    return OptionalValue(None)


@kernel("OptionalFromValue")
def optional_from_value(ctx, *components):
    # Arrays flowing through the executor are never written in place: keep them, no copies.
    return OptionalValue(tuple(components))


def _optional(value):
    if not isinstance(value, OptionalValue):
        fail(f"Input tensor must contain an Optional (got {type(value).__name__}); expected "
             f"the output of OptionalFromValue or OptionalNone")
    return value


@kernel("OptionalHasValue")
def optional_has_value(ctx, optional):
    return np.bool_(_optional(optional).values is not None)


@kernel("OptionalGetValue", forwards_input=True)
def optional_get_value(ctx, optional):
    values = _optional(optional).values
    if values is None:
        fail("The given optional does not have a value.")
    types = [DType.parse(t) if not isinstance(t, DType) else t
             for t in ctx.attrs.get("output_types") or ()]
    shapes = ctx.attrs.get("output_shapes") or [None] * len(types)
    if len(values) != len(types):
        fail(f"The given optional has {len(values)} components, expected {len(types)}")
    for i, (v, want, shape) in enumerate(zip(values, types, shapes)):
        got = DType.from_numpy(np.asarray(v).dtype)
        if got != want:
            fail(f"The given optional does not match the expected type for component {i}. "
                 f"Expected: {type_string(want)}. Actual: {type_string(got)}.")
        actual = np.shape(v)
        if shape is not None and (len(shape) != len(actual) or any(
                d is not None and d != a for d, a in zip(shape, actual))):
            fail(f"The given optional does not match the expected shape for component {i}. "
                 f"Expected: {shape_string(shape)}. Actual: {shape_string(actual)}.")
    return tuple(values)
