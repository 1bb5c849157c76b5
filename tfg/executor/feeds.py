"""Fetch and feed names, and feed values checked against what the graph declares.

    >>> parse_fetches("y")              # one name -> (refs, how to shape the result)
    ([TensorRef(node='y', port=0)], 'single')
    >>> convert_feed(graph, TensorRef("x", 0), [1, 2])    # Placeholder float32 [2]
    array([1., 2.], dtype=float32)

A feed is cast to the declared dtype when no information is lost in kind (ints to floats, a
Python float list to float32); a float fed to an int placeholder, a value that does not fit,
or a shape that the placeholder's declared shape excludes is an input error naming the feed.
"""
import numpy as np

from tfg.errors import TfgInputError
from tfg.graphdef.names import COPY_OF_ATTR, TensorRef, parse_tensor, tensor_name
from tfg.schemas.dtypes import DType
from tfg.schemas.ops import has_op, ops_with
from tfg.schemas.ops import signature

PLACEHOLDER_OPS = ops_with("placeholder")


def to_ref(name):
    if isinstance(name, TensorRef):
        return name
    if not isinstance(name, str):
        raise TfgInputError(f"{name!r} is not a tensor name")
    return parse_tensor(name)


def check_fed_once(feed_refs):
    """A tensor fed under two names (`x` and `x:0`) is an input error naming it."""
    seen = set()
    for ref in feed_refs:
        if ref in seen:
            raise TfgInputError(f"tensor {tensor_name(ref.node, ref.port)!r} is fed twice "
                                "(under two names, e.g. 'x' and 'x:0')")
        seen.add(ref)


def refuse_fed_copies(graph, feed_refs):
    """A feed of a Const that `tfg partition` copied onto other devices is an input error: the
    copies would keep the graph's value where TensorFlow would use the fed one."""
    fed = {r.node for r in feed_refs}
    for node in graph:
        if node.op == "Const" and COPY_OF_ATTR in node.attr_view:
            original = node.attr_view[COPY_OF_ATTR].s.decode(errors="replace")
            if original in fed:
                raise TfgInputError(
                    f"feed {original!r}: `tfg partition` copied this Const to each device "
                    f"that reads it ({node.name!r} is one); feed the graph before partitioning")


def parse_fetches(fetches):
    """-> (list of TensorRefs, shape) where shape is 'none', 'single', 'list' or a key list."""
    if fetches is None:
        return [], "none"
    if isinstance(fetches, (str, TensorRef)):
        return [to_ref(fetches)], "single"
    if isinstance(fetches, dict):
        keys = list(fetches)
        return [to_ref(fetches[k]) for k in keys], keys
    return [to_ref(f) for f in fetches], "list"


def shape_results(values, how):
    if how == "none":
        return None
    if how == "single":
        return values[0]
    if how == "list":
        return values
    return dict(zip(how, values))


def declared(graph, ref):
    """(dtype, shape) the graph declares for tensor `ref`; either may be None (unknown)."""
    node = graph[ref.node]
    dtype = shape = None
    if node.op in PLACEHOLDER_OPS:
        dtype = node.get_attr("dtype", None)
        shape = node.get_attr("shape", None)
        return dtype, shape if isinstance(shape, tuple) else None
    if has_op(node.op):
        try:
            dts = signature.output_dtypes(node)
            dtype = dts[ref.port] if ref.port < len(dts) else None
        except Exception:  # attrs missing: nothing to check against
            dtype = None
    return dtype, shape


def convert_feed(graph, ref, value):
    """`value` as an array of the tensor's declared dtype, checked against its shape."""
    dtype, shape = declared(graph, ref)
    name = tensor_name(ref.node, ref.port)
    if isinstance(dtype, DType):
        dtype = dtype.base
    else:  # a malformed dtype attr (e.g. a tensor): nothing to check against
        dtype = None
    if dtype == DType.STRING:
        kind = getattr(value, "dtype", np.dtype(object)).kind
        if kind in "biufc":  # numbers are not text: TensorFlow refuses them too
            raise TfgInputError(f"feed {name!r}: got {value.dtype} values, expected string")
        arr = np.asarray(value, dtype=object)
        arr = np.vectorize(lambda v: _to_bytes(name, v), otypes=[object])(arr) \
            if arr.size else arr
    elif isinstance(dtype, DType) and dtype not in (DType.RESOURCE, DType.VARIANT):
        arr = _cast(name, value, dtype)
    else:
        arr = value if isinstance(value, np.ndarray) else np.asarray(value)
    if shape is not None and not _shape_ok(arr.shape, shape):
        raise TfgInputError(
            f"feed {name!r}: shape {_fmt(arr.shape)} does not match the declared shape "
            f"{_fmt(shape)}")
    return arr


def _cast(name, value, dtype):
    target = dtype.np
    try:
        arr = np.asarray(value)
    except (ValueError, TypeError) as e:
        raise TfgInputError(f"feed {name!r}: not a rectangular array ({e})") from None
    if arr.dtype == target:
        return arr
    if arr.dtype.kind in "OSU":
        raise TfgInputError(f"feed {name!r}: got {arr.dtype} values, expected {dtype.tf_name}")
    if arr.size == 0 or (arr.dtype.kind == "b" and target.kind in "biufc"):
        return arr.astype(target)
    # Integers may narrow (or become bool) when every value survives; that is checked below.
    if not np.can_cast(arr.dtype, target, "same_kind") and not (
            arr.dtype.kind in "iu" and target.kind in "iub"):
        raise TfgInputError(f"feed {name!r}: cannot feed {arr.dtype} values to a tensor of "
                            f"dtype {dtype.tf_name}")
    out = arr.astype(target)
    if target.kind in "iub" and not np.array_equal(out, arr):
        raise TfgInputError(f"feed {name!r}: values do not fit in {dtype.tf_name}")
    return out


def _to_bytes(name, v):
    if isinstance(v, bytes):
        return v
    try:
        return str(v).encode()
    except UnicodeEncodeError:  # a lone surrogate ('\udcff'): no UTF-8 text holds it
        raise TfgInputError(f"feed {name!r}: {str(v)[:40]!r} is not valid Unicode text; feed "
                            "bytes (an .npz of a bytes array) instead") from None


def _shape_ok(actual, declared_shape):
    if len(actual) != len(declared_shape):
        return False
    return all(d is None or d < 0 or d == a for a, d in zip(actual, declared_shape))


def _fmt(shape):
    return "[" + ",".join("?" if d is None or d < 0 else str(d) for d in shape) + "]"
