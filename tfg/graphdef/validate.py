"""Structural validation of a graph against the op signatures, as TensorFlow checks a GraphDef
on import.

    >>> validate(graph)                            # returns [] or raises
    GraphValidationError: node 'y' (MatMul): missing required attr 'T'
    >>> validate(graph, require_known_ops=False)   # unknown ops listed, not raised
    ['MyCustomOp']
    >>> unknown_ops(graph)
    ['MyCustomOp']
    >>> check_control_flow(graph)                  # what `tfg run` checks (see below)
    GraphValidationError: node 'c' (Enter): has 0 data inputs, an Enter takes 1

Checked, in this order per node (file order), the first problem raising with a one-line message
that names the node: input syntax (a data input after a control input), dangling inputs, unknown
ops, attrs (missing required ones, attrs the op does not define, an AttrValue field that does not
match the attr's type, values outside the allowed set or under the minimum), the number of data
inputs, Merge/Switch/Enter specifics, input ports beyond the producer's outputs, and input dtypes
against the producer's output dtypes. Then the graph must have no cycle that a NextIteration does
not break.
"""
from tfg.errors import GraphFormatError, GraphValidationError, TfgInputError, UnknownOpError
from tfg.graphdef import attrs as attrcodec
from tfg.schemas import tensors
from tfg.graphdef.frames_loops import ENTER_OPS, assign_frames
from tfg.graphdef.names import CONTROL
from tfg.schemas.ops import control_flow_names, registry
from tfg.schemas.ops.signature import _arg_dtypes

_ENTER_OPS = control_flow_names("enter")
_MERGE_OPS = control_flow_names("merge")
_SWITCH_OPS = control_flow_names("switch")

# AttrDef type -> the AttrValue field holding it.
_FIELD = {"string": "s", "int": "i", "float": "f", "bool": "b", "type": "type", "shape": "shape",
          "tensor": "tensor", "func": "func"}


def unknown_ops(graph):
    """Sorted names of the ops in `graph` that tfg has no signature for."""
    return sorted({n.op for n in graph if not registry.has_op(n.op)})


def validate(graph, require_known_ops=True):
    """Raise GraphValidationError / UnknownOpError on the first problem; return the sorted list
    of unknown ops (always empty when `require_known_ops`)."""
    unknown = set()
    nodes = graph._nodes if hasattr(graph, "_nodes") else {n.name: n for n in graph}
    for node in graph:
        _check_inputs(node, nodes)
        sig = registry._OPS.get(node.op)
        if sig is None:
            if require_known_ops:
                raise UnknownOpError(f"node {node.name!r}: unknown op {node.op!r}")
            unknown.add(node.op)
            continue
        _check_attrs(node, sig)
        _check_arity(node, sig)
        _check_edges(node, sig, nodes)
    graph.topo_order()  # raises on a cycle that no NextIteration breaks
    return sorted(unknown)


def _arity(sig):
    """(min, max) data inputs a signature allows (max None: a list input has no maximum)."""
    single = sum(1 for a in sig.inputs if not a.number_attr and not a.type_list_attr)
    if single == len(sig.inputs):
        return single, single
    lists = sum(sig.attrs[a.number_attr].minimum or 0 for a in sig.inputs if a.number_attr)
    return single + lists, None


# Ops the executor runs itself (those with a control-flow kind) -> (min, max) data inputs from
# their signatures. The executor does not consult the signatures when it runs them, so a
# mutated graph (a Const turned into an Enter) must be refused here, not crash its loop.
_BUILTIN_ARITY = {name: _arity(registry.get_op(name)) for name in control_flow_names()}
# String attrs of _Send/_Recv that the executor turns into rendezvous keys (text).
_TRANSFER_TEXT_ATTRS = ("tensor_name", "send_device", "recv_device")


def check_builtin_inputs(node, n_data=None):
    """Raise GraphValidationError when a node the executor runs itself has the wrong number of
    data inputs (`n_data`, counted from the node when None) or an Enter has no frame name.

        >>> check_builtin_inputs(graph["while/Enter"])    # Enter(x): fine
        >>> check_builtin_inputs(graph["c"])              # a Const turned into an Enter
        GraphValidationError: node 'c' (Enter): has 0 data inputs, an Enter takes 1
    """
    bounds = _BUILTIN_ARITY.get(node.op)
    if bounds is None:
        return
    if n_data is None:
        n_data = sum(1 for r in node.input_refs if r.port != CONTROL)
    lo, hi = bounds
    if n_data < lo or (hi is not None and n_data > hi):
        want = f"at least {lo}" if hi is None else str(lo)
        extra = " (data, pred)" if node.op.endswith("Switch") else ""
        raise GraphValidationError(
            f"{_where(node)}: has {n_data} data input{'s' if n_data != 1 else ''}, "
            f"a{'n' if node.op[0] in 'AEIOU' else ''} {node.op} takes {want}{extra}")
    if node.op in _ENTER_OPS:
        frame = node.get_attr("frame_name", b"")
        if isinstance(frame, (bytes, str)) and not frame:
            raise GraphValidationError(f"{_where(node)}: an Enter needs a non-empty frame_name")


def check_control_flow(graph):
    """What `tfg run` checks before running (TensorFlow refuses such a GraphDef on import):
    every node the executor runs itself has the data inputs it needs, every control-flow
    node (Switch, Merge, Enter, Exit, NextIteration, LoopCond) is valid against its signature,
    input dtypes included, and every _Send/_Recv has attrs of the right types (the
    rendezvous key is made of them). The executor runs these ops without a kernel that
    would type-check them: a LoopCond fed an int32 or a Merge of a float and a bool would
    otherwise run, and may loop for ever.

        >>> check_control_flow(graph)        # a loop whose LoopCond reads an int32 Merge
        GraphValidationError: node 'while/LoopCond' (LoopCond): input 0 ('while/Less') is
        int32, expected bool
    """
    nodes = graph._nodes if hasattr(graph, "_nodes") else {n.name: n for n in graph}
    for node in graph:
        if node.op not in _BUILTIN_ARITY:
            continue
        check_builtin_inputs(node)
        sig = registry._OPS.get(node.op)
        if sig is None:
            continue
        if node.op.startswith("_"):  # _Send/_Recv: attrs that make the rendezvous key
            _check_transfer_attrs(node, sig)
            continue
        _check_inputs(node, nodes)
        _check_attrs(node, sig)
        _check_arity(node, sig)
        _check_edges(node, sig, nodes)
    # Every node in one frame, as TensorFlow's executor checks when it is created: an Add of
    # tensors from two loops' Enters (frames 'a' and 'b') ran before, and gave a value.
    if any(node.op in ENTER_OPS for node in graph):
        assign_frames(graph, graph.topo_order())




def _kind_ok(ad, kind):
    if ad.type.startswith("list("):
        want = "list(" + _FIELD.get(ad.type[5:-1], ad.type[5:-1]) + ")"
        return kind in (want, "list") or kind is None
    return kind == _FIELD.get(ad.type, ad.type)


def _check_transfer_attrs(node, sig):
    for name, ad in sig.attrs.items():
        if name in node.attr:
            _check_attr_value(node, ad, node.attr[name])
    for name in _TRANSFER_TEXT_ATTRS:
        value = node.get_attr(name, b"")
        if isinstance(value, bytes):
            try:
                value.decode("utf-8")
            except UnicodeDecodeError:
                raise GraphValidationError(f"{_where(node)}: attr {name!r} is not UTF-8 text "
                                           f"({value[:40]!r})") from None


def _where(node):
    return f"node {node.name!r} ({node.op})"


def _check_inputs(node, nodes):
    seen_control = None
    for s, ref in zip(node.inputs, node.input_refs):
        if not ref.node:
            raise GraphValidationError(f"{_where(node)}: malformed input {s!r}")
        if ref.port == CONTROL:
            seen_control = s
        elif seen_control is not None:
            raise GraphValidationError(
                f"{_where(node)}: data input {s!r} comes after control input {seen_control!r}")
        if ref.node not in nodes:
            raise GraphValidationError(f"{_where(node)}: input {s!r} names no node in the graph")


def _check_attrs(node, sig):
    attr = node.attr
    for name, ad in sig.attrs.items():
        if name not in attr:
            if not ad.has_default:
                raise GraphValidationError(f"{_where(node)}: missing required attr {name!r}")
            continue
        _check_attr_value(node, ad, attr[name])
    for name in attr.keys():
        if name not in sig.attrs and not name.startswith("_"):
            raise GraphValidationError(
                f"{_where(node)}: attr {name!r} is not an attr of {node.op} "
                f"(it has {', '.join(sorted(sig.attrs)) or 'none'})")


def _check_attr_value(node, ad, av):
    kind = attrcodec.kind_of(av)
    if not _kind_ok(ad, kind):
        raise GraphValidationError(
            f"{_where(node)}: attr {ad.name!r} must be {ad.type}, but the AttrValue holds "
            f"{kind or 'nothing'}")
    try:
        # A tensor is checked, not decoded: a splat of 2**27 strings would take a gigabyte.
        value = tensors.check(av.tensor) if kind == "tensor" else attrcodec.decode(av)
    except GraphFormatError as e:  # a corrupt tensor or dtype: say which node holds it
        raise GraphValidationError(f"{_where(node)}: attr {ad.name!r}: {e}") from None
    if ad.allowed is not None:
        values = value if ad.type.startswith("list(") else [value]
        allowed = [a.encode() if isinstance(a, str) else a for a in ad.allowed]
        for v in values:
            if v not in allowed:
                shown = v.tf_name if hasattr(v, "tf_name") else (
                    v.decode(errors="replace") if isinstance(v, bytes) else v)
                names = [a.tf_name if hasattr(a, "tf_name") else (
                    a.decode() if isinstance(a, bytes) else a) for a in allowed]
                raise GraphValidationError(
                    f"{_where(node)}: attr {ad.name!r} is {shown!s}, not one of "
                    f"{{{', '.join(map(str, names))}}}")
    if ad.minimum is not None:
        n = len(value) if ad.type.startswith("list(") else value
        if n < ad.minimum:
            what = "length" if ad.type.startswith("list(") else "value"
            raise GraphValidationError(
                f"{_where(node)}: attr {ad.name!r} has {what} {n}, below the minimum "
                f"{ad.minimum}")


def _expected_inputs(node, sig):
    out = []
    for arg in sig.inputs:
        out.extend(_arg_dtypes(node, arg, sig))
    return out


def _check_arity(node, sig):
    n = sum(1 for r in node.input_refs if r.port != CONTROL)
    if node.op in _MERGE_OPS and n < 1:
        raise GraphValidationError(f"{_where(node)}: a Merge needs at least 1 data input")
    if node.op in _SWITCH_OPS and n != 2:
        raise GraphValidationError(
            f"{_where(node)}: a Switch needs 2 data inputs (data, pred), got {n}")
    if node.op in _ENTER_OPS and not node.get_attr("frame_name"):
        raise GraphValidationError(f"{_where(node)}: an Enter needs a non-empty frame_name")
    try:
        expected = len(_expected_inputs(node, sig))
    except TfgInputError as e:
        raise GraphValidationError(str(e)) from None
    if n != expected:
        names = ", ".join(a.name for a in sig.inputs) or "none"
        raise GraphValidationError(
            f"{_where(node)}: has {n} data inputs, the op takes {expected} ({names})")


def _check_edges(node, sig, nodes):
    expected = _expected_inputs(node, sig)
    data = [(s, r) for s, r in zip(node.inputs, node.input_refs) if r.port != CONTROL]
    for i, (s, ref) in enumerate(data):
        src = nodes[ref.node]
        src_sig = registry._OPS.get(src.op)
        if src_sig is None:
            continue
        try:
            outs = []
            for arg in src_sig.outputs:
                outs.extend(_arg_dtypes(src, arg, src_sig))
        except TfgInputError:
            continue  # reported when the producer itself is checked
        if ref.port >= len(outs):
            raise GraphValidationError(
                f"{_where(node)}: input {s!r} reads output {ref.port} of {ref.node!r}, which "
                f"has {len(outs)} output{'s' if len(outs) != 1 else ''}")
        have, want = outs[ref.port], expected[i]
        if have == want or have.base == want:  # a ref output feeds a value input as is
            continue
        if want.is_ref and not have.is_ref:
            raise GraphValidationError(
                f"{_where(node)}: input {i} ({s!r}) must be a reference to {want.base.tf_name}, "
                f"got a {have.tf_name} value")
        raise GraphValidationError(
            f"{_where(node)}: input {i} ({s!r}) is {have.tf_name}, expected {want.tf_name}")
