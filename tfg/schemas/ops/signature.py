"""Per-node questions answered through the op signature: attr values with defaults, output
dtypes, the number of outputs, and which inputs are references.

    >>> output_dtypes(node)      # MatMul with T=float -> [DType.FLOAT]
    >>> num_outputs(split_node)  # Split with num_split=3 -> 3
"""
from tfg.errors import TfgInputError
from tfg.schemas.dtypes import DType
from tfg.schemas.ops.registry import get_op


def attr_or_default(node, name, sig=None):
    """The node's attr decoded, or the signature's default."""
    if node.has_attr(name):
        return node.get_attr(name)
    sig = sig or get_op(node.op, node.name)
    ad = sig.attrs.get(name)
    if ad is None or not ad.has_default:
        raise TfgInputError(f"node {node.name!r} ({node.op}) is missing attr {name!r}")
    return ad.default


# The most inputs or outputs one list argument may have (AddN's N, Split's num_split): more
# than any real graph's node holds, few enough that a list of that many types is small.
MAX_LIST_LENGTH = 1 << 18


def _arg_dtypes(node, arg, sig):
    if arg.type_list_attr:
        types = attr_or_default(node, arg.type_list_attr, sig)
        if not isinstance(types, list) or not all(isinstance(t, DType) for t in types):
            raise TfgInputError(f"node {node.name!r} ({node.op}): attr "
                                f"{arg.type_list_attr!r} is not a list of types")
    else:
        t = arg.dtype if arg.dtype is not None else attr_or_default(node, arg.type_attr, sig)
        if not isinstance(t, DType):
            raise TfgInputError(f"node {node.name!r} ({node.op}): attr {arg.type_attr!r} "
                                f"is not a type")
        n = attr_or_default(node, arg.number_attr, sig) if arg.number_attr else 1
        if type(n) is not int or n < 0:  # a wrong attr type or a negative count
            raise TfgInputError(f"node {node.name!r} ({node.op}): attr {arg.number_attr!r} "
                                "is not a non-negative int")
        if n > MAX_LIST_LENGTH:  # (a count of 2**62 in a 200-byte file: gigabytes here)
            raise TfgInputError(f"node {node.name!r} ({node.op}): attr {arg.number_attr!r} "
                                f"is {n}; tfg takes lists of at most {MAX_LIST_LENGTH}")
        types = [t] * n
    return [t.as_ref if arg.is_ref else t for t in types]


def output_dtypes(node):
    """DTypes of every output of `node`, in order (ref types for ref outputs)."""
    sig = get_op(node.op, node.name)
    out = []
    for arg in sig.outputs:
        out.extend(_arg_dtypes(node, arg, sig))
    return out


def input_dtypes(node):
    """DTypes the signature expects for the node's data inputs."""
    sig = get_op(node.op, node.name)
    out = []
    for arg in sig.inputs:
        out.extend(_arg_dtypes(node, arg, sig))
    return out


def num_outputs(node):
    return len(output_dtypes(node))


def ref_input_indices(node):
    """Indices of the node's data inputs that the op takes by reference."""
    sig = get_op(node.op, node.name)
    idx, out = 0, []
    for arg in sig.inputs:
        n = len(_arg_dtypes(node, arg, sig))
        if arg.is_ref:
            out.extend(range(idx, idx + n))
        idx += n
    return out
