"""Shape inference: the context a shape function sees, shape algebra, and common shape functions.

A shape is a tuple with None for an unknown dimension, or None for an unknown rank. A shape
function takes an `InferenceContext` and returns one shape per output:

    >>> def matmul_shape(ctx):
    ...     a, b = ctx.shape(0), ctx.shape(1)
    ...     ...
    ...     return [(rows, cols)]
    >>> broadcast((None, 3), (4, 1)), merge((None, 3), (2, None)), relax((2, 3), (2, 4))
    ((4, 3), (2, 3), (2, None))

Shape functions read constant inputs through `ctx.value(i)` (a numpy array, or None) and
shape-valued inputs through `ctx.shape_tensor(i)` (which also understands partially known values
such as `Pack([Shape(x)[0], 4])`). They raise `ShapeError` when the inputs cannot fit together.
"""
from collections.abc import Mapping

import numpy as np

from tfg.errors import GraphValidationError
from tfg.schemas.ops.registry import NO_DEFAULT


class ShapeError(GraphValidationError):
    """Input shapes (or constant values) that the op cannot accept."""


MAX_RANK = 254  # TensorFlow's most dimensions of a tensor (TensorShape::MaxDimensions)


# --- shape algebra -------------------------------------------------------------------------
def rank(shape):
    return None if shape is None else len(shape)


def is_fully_defined(shape):
    return shape is not None and all(d is not None for d in shape)


def num_elements(shape):
    """The element count of a fully known shape, else None."""
    if not is_fully_defined(shape):
        return None
    n = 1
    for d in shape:
        n *= d
    return n


def merge_dim(a, b):
    if a is None:
        return b
    if b is None or a == b:
        return a
    raise ShapeError(f"dimensions {a} and {b} are not compatible")


def merge(a, b):
    """The most specific shape compatible with both (error if they conflict)."""
    if a is None:
        return b
    if b is None:
        return a
    if len(a) != len(b):
        raise ShapeError(f"shapes {fmt(a)} and {fmt(b)} have different ranks")
    try:
        return tuple(merge_dim(x, y) for x, y in zip(a, b))
    except ShapeError:
        raise ShapeError(f"shapes {fmt(a)} and {fmt(b)} are not compatible") from None


def compatible(a, b):
    try:
        merge(a, b)
        return True
    except ShapeError:
        return False


def relax(a, b):
    """The most specific shape that both are instances of (what a loop Merge carries)."""
    if a is None or b is None or len(a) != len(b):
        return None
    return tuple(x if x == y else None for x, y in zip(a, b))


def broadcast(a, b):
    """numpy broadcasting with unknown dims, as TensorFlow's binary ops infer it."""
    if a is None or b is None:
        return None
    n = max(len(a), len(b))
    a = (1,) * (n - len(a)) + tuple(a)
    b = (1,) * (n - len(b)) + tuple(b)
    out = []
    for x, y in zip(a, b):
        if x is None or y is None:
            # An unknown dim broadcast against 1 is unknown; against a known n > 1 it must be n.
            known = x if x is not None else y
            out.append(known if known is not None and known > 1 else None)
        elif x == 1:
            out.append(y)
        elif y == 1 or x == y:
            out.append(x)
        else:
            raise ShapeError(f"shapes {fmt(a)} and {fmt(b)} cannot be broadcast")
    return tuple(out)


def with_rank(shape, r, what="input"):
    if shape is None:
        if r > MAX_RANK:  # r from a vector's length (a perm of 2**31): no tuple of 2**31 Nones
            raise ShapeError(f"{what} must have rank {r}, above TensorFlow's most ({MAX_RANK})")
        return (None,) * r
    if len(shape) != r:
        raise ShapeError(f"{what} must have rank {r}, got shape {fmt(shape)}")
    return shape


def with_rank_at_least(shape, r, what="input"):
    if shape is not None and len(shape) < r:
        raise ShapeError(f"{what} must have rank at least {r}, got shape {fmt(shape)}")
    return shape


def fmt(shape):
    """[2,?,3] / <unknown> the way TensorFlow prints shapes."""
    if shape is None:
        return "<unknown>"
    return "[" + ",".join("?" if d is None else str(d) for d in shape) + "]"


def canonical_axis(axis, r, what="axis"):
    if not -r <= axis < max(r, 1) and not (r == 0 and axis in (0, -1)):
        raise ShapeError(f"{what} {axis} is out of range for rank {r}")
    return axis + r if axis < 0 else axis


def shape_from_elems(elems):
    """A shape from the elements of a shape tensor (None or negative = unknown dim)."""
    return tuple(None if e is None or e < 0 else int(e) for e in elems)


# --- the context ---------------------------------------------------------------------------
class AttrView(Mapping):
    """A node's attrs decoded on demand, with the signature's defaults filled in."""

    __slots__ = ("_node", "_sig")

    def __init__(self, node, sig):
        self._node, self._sig = node, sig

    def __getitem__(self, name):
        value = self._node.get_attr(name, NO_DEFAULT)
        if value is not NO_DEFAULT:
            return value
        ad = self._sig.attrs.get(name) if self._sig is not None else None
        if ad is None or not ad.has_default:
            raise KeyError(name)
        return ad.default

    def __iter__(self):
        names = set(self._node.attr.keys())
        if self._sig is not None:
            names |= {n for n, ad in self._sig.attrs.items() if ad.has_default}
        return iter(sorted(names))

    def __len__(self):
        return sum(1 for _ in self)


class InferenceContext:
    """What one node's shape function sees: its attrs and what is known about its inputs.

    `input_elems[i]` is a tuple of the elements of a small integer input, None where unknown
    (e.g. `Shape` of a partially known shape); `input_handles[i]` the (dtype, shape) of the
    variable behind a resource input, when known.
    """

    __slots__ = ("node", "sig", "attrs", "input_shapes", "input_dtypes", "input_values",
                 "input_elems", "input_handles", "output_dtypes")

    def __init__(self, node, sig, input_shapes, input_dtypes=None, input_values=None,
                 input_elems=None, input_handles=None, output_dtypes=None):
        n = len(input_shapes)
        self.node = node
        self.sig = sig
        self.attrs = AttrView(node, sig)
        self.input_shapes = input_shapes
        self.input_dtypes = input_dtypes if input_dtypes is not None else [None] * n
        self.input_values = input_values if input_values is not None else [None] * n
        self.input_elems = input_elems if input_elems is not None else [None] * n
        self.input_handles = input_handles if input_handles is not None else [None] * n
        self.output_dtypes = output_dtypes if output_dtypes is not None else []

    @property
    def num_inputs(self):
        return len(self.input_shapes)

    @property
    def num_outputs(self):
        return len(self.output_dtypes)

    def attr(self, name):
        try:
            return self.attrs[name]
        except KeyError:
            raise ShapeError(f"missing attr {name!r}") from None

    def shape(self, i):
        return self.input_shapes[i]

    def rank(self, i):
        return rank(self.input_shapes[i])

    def value(self, i):
        return self.input_values[i] if i < len(self.input_values) else None

    def elems(self, i):
        """Elements of input i as a tuple (None = unknown element), or None."""
        v = self.input_values[i]
        if v is not None and v.size <= 4096:
            return tuple(int(x) for x in np.asarray(v).reshape(-1))
        return self.input_elems[i]

    def scalar(self, i):
        """Input i as a Python int when it is a known scalar (or 1-element) constant."""
        v = self.input_values[i]
        if v is None or v.size != 1:
            return None
        return int(np.asarray(v).reshape(-1)[0])

    def shape_tensor(self, i):
        """The shape that int vector input i describes (Reshape's `shape`, Fill's `dims`)."""
        elems = self.elems(i)
        v = self.input_values[i]
        if v is not None and v.ndim == 0:
            # A scalar -1 stands for "unknown rank" in TensorFlow's shape tensors.
            if int(v) == -1:
                return None
            raise ShapeError(f"a shape tensor must be a vector, got scalar {int(v)}")
        if elems is not None:
            return shape_from_elems(elems)
        s = self.input_shapes[i]
        if s is not None and len(s) == 1 and s[0] is not None:
            if s[0] > MAX_RANK:  # a declared 2**31 must not build a tuple
                raise ShapeError(f"a shape tensor of {s[0]} elements describes a rank above "
                                 f"{MAX_RANK}")
            return (None,) * s[0]
        return None


# --- common shape functions -------------------------------------------------------------------
def unknown(ctx):
    """Every output of unknown shape."""
    return [None] * ctx.num_outputs


def no_outputs(ctx):
    return []


def scalar(ctx):
    return [()] * max(ctx.num_outputs, 1)


def unchanged(ctx):
    """Output 0 has the shape of input 0 (elementwise unary ops, Identity, ...)."""
    return [ctx.shape(0)]


def unchanged_all(ctx):
    """Output i has the shape of input i (IdentityN)."""
    return list(ctx.input_shapes)


def merge_inputs(ctx):
    """Every input has one shape, which the output takes (AddN, ReluGrad, ...)."""
    out = None
    for s in ctx.input_shapes:
        out = merge(out, s)
    return [out]


def broadcast_binary(ctx):
    return [broadcast(ctx.shape(0), ctx.shape(1))]


def vector(n):
    def fn(ctx):
        return [(n,)]
    return fn


def from_shape_attr(name="shape"):
    """The output shape is the node's shape attr (Placeholder, VariableV2)."""
    def fn(ctx):
        return [ctx.attr(name)]
    return fn


def from_shape_input(i):
    """The output shape is the value of int vector input i (Fill, RandomUniform)."""
    def fn(ctx):
        return [ctx.shape_tensor(i)]
    return fn


def per_output(*fns):
    """Combine shape functions giving one output each."""
    def fn(ctx):
        return [f(ctx)[0] for f in fns]
    return fn
