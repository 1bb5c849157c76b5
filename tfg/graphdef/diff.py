"""Compare two graphs node by node: what was added, removed or changed (op, inputs, attrs,
device), like `diff` for GraphDefs.

    >>> d = diff(load("before.pb"), load("after.pb"))
    >>> d.equal
    False
    >>> d.added, d.removed
    (['dense/Relu'], ['dense/BiasAdd'])
    >>> d.changed[0]
    NodeChange(name='dense/MatMul', op=('MatMul', '_FusedMatMul'), inputs=None,
               device=None, attrs={'fused_ops': ('(absent)', '["BiasAdd", "Relu"]')})
    >>> print(format_text(d, "before.pb", "after.pb"))

What counts as equal: data inputs in order (`x` and `x:0` are the same input), control inputs
as a set, attrs by value (an attr one side leaves out that equals the op's registered default
on the other side is no change, as TensorFlow strips default attrs when it writes graphs).
Attr values are shown as TensorFlow prints them: `"SAME"`, `true`, `DT_FLOAT`, `[?,4]`,
`[1, 2, 2, 1]`; tensors as `tensor<float32>[2, 2] [1.,1.,1.,1.]`.
The graph's `versions` and function library are compared too.
"""
import hashlib
from dataclasses import dataclass, field

import numpy as np

from tfg.graphdef import attrs as attrcodec
from tfg.graphdef.names import parse_input
from tfg.schemas.dtypes import DType
from tfg.schemas.ops import get_op, has_op

_ABSENT = "(absent)"
_MAX_VALUE_CHARS = 80


@dataclass
class NodeChange:
    """How one node differs; a field is None when that part is the same."""

    name: str
    op: tuple = None  # (old op, new op)
    inputs: tuple = None  # (old input list, new input list)
    device: tuple = None  # (old device, new device)
    attrs: dict = field(default_factory=dict)  # attr -> (old text, new text)


@dataclass
class GraphDiff:
    added: list  # node names only in the second graph
    removed: list  # node names only in the first graph
    changed: list  # NodeChange per node in both that differs
    ops: dict  # node name -> op, for every added/removed node
    graph_changes: list = field(default_factory=list)  # "versions", "library"

    @property
    def equal(self):
        return not (self.added or self.removed or self.changed or self.graph_changes)

    def to_json(self):
        """A JSON-ready dict (see `tfg diff --json`)."""
        changed = []
        for c in self.changed:
            row = {"name": c.name}
            for key in ("op", "inputs", "device"):
                if getattr(c, key) is not None:
                    old, new = getattr(c, key)
                    row[key] = {"old": list(old) if key == "inputs" else old,
                                "new": list(new) if key == "inputs" else new}
            if c.attrs:
                row["attrs"] = {k: {"old": o, "new": n} for k, (o, n) in c.attrs.items()}
            changed.append(row)
        return {"equal": self.equal,
                "added": [{"name": n, "op": self.ops[n]} for n in self.added],
                "removed": [{"name": n, "op": self.ops[n]} for n in self.removed],
                "changed": changed,
                "graph": list(self.graph_changes),
                "counts": {"added": len(self.added), "removed": len(self.removed),
                           "changed": len(self.changed)}}


def diff(a, b, ignore_device=False, ignore_attrs=()):
    """The differences between graphs `a` and `b` (tfg Graphs).

    Before: a = {x: Placeholder, y: Relu(x)}, b = {x: Placeholder, y: Relu6(x), z: Neg(y)}.
    After:  GraphDiff(added=['z'], removed=[], changed=[NodeChange('y', op=('Relu', 'Relu6'))])
    """
    ignore_attrs = set(ignore_attrs)
    added = [n.name for n in b if n.name not in a]
    removed = [n.name for n in a if n.name not in b]
    ops = {n: b[n].op for n in added}
    ops.update({n: a[n].op for n in removed})
    changed = []
    for node in a:
        other = b.get(node.name)
        if other is None:
            continue
        change = _node_change(node, other, ignore_device, ignore_attrs)
        if change is not None:
            changed.append(change)
    graph_changes = []
    if a.versions.SerializeToString(deterministic=True) != \
            b.versions.SerializeToString(deterministic=True):
        graph_changes.append("versions")
    lib_a = a.library.SerializeToString(deterministic=True) if a.library is not None else b""
    lib_b = b.library.SerializeToString(deterministic=True) if b.library is not None else b""
    if lib_a != lib_b:
        graph_changes.append("library")
    return GraphDiff(added, removed, changed, ops, graph_changes)


def _node_change(x, y, ignore_device, ignore_attrs):
    change = NodeChange(x.name)
    if x.op != y.op:
        change.op = (x.op, y.op)
    if _input_key(x.inputs) != _input_key(y.inputs):
        change.inputs = (list(x.inputs), list(y.inputs))
    if not ignore_device and x.device != y.device:
        change.device = (x.device, y.device)
    for name in sorted(set(x.attr) | set(y.attr)):
        if name in ignore_attrs:
            continue
        av_x, av_y = x.attr.get(name), y.attr.get(name)
        if av_x is not None and av_y is not None and _same(av_x, av_y):
            continue
        if av_x is None and _is_default(y, name, av_y) or av_y is None and _is_default(
                x, name, av_x):
            continue
        change.attrs[name] = (_show(av_x), _show(av_y))
    if change.op is None and change.inputs is None and change.device is None \
            and not change.attrs:
        return None
    return change


def _input_key(inputs):
    data, control = [], set()
    for s in inputs:
        ref = parse_input(s)
        if ref.port < 0:
            control.add(ref.node)
        else:
            data.append((ref.node, ref.port))
    return data, control


def _same(av_x, av_y):
    return av_x.SerializeToString(deterministic=True) == \
        av_y.SerializeToString(deterministic=True)


def _is_default(node, name, av):
    """Whether attr `name` = `av` of `node` equals the default its op registers."""
    if not has_op(node.op):
        return False
    ad = get_op(node.op, node.name).attrs.get(name)
    if ad is None or not ad.has_default:
        return False
    try:
        value = attrcodec.decode(av)
        default = ad.default
        if isinstance(value, np.ndarray) or isinstance(default, np.ndarray):
            return bool(np.array_equal(np.asarray(value), np.asarray(default)))
        if isinstance(value, (list, tuple)) and isinstance(default, (list, tuple)):
            return list(value) == list(default)
        if isinstance(default, str) and isinstance(value, bytes):
            return value.decode("utf-8", "replace") == default
        return value == default
    except Exception:  # an odd default or attr form: count it as a change, never crash
        return False


def _show(av):
    """A short text form of an AttrValue for the report."""
    if av is None:
        return _ABSENT
    if av.WhichOneof("value") not in ("tensor", "func", None):
        text = _tf_text(av)
        return text if len(text) <= _MAX_VALUE_CHARS else text[:_MAX_VALUE_CHARS - 3] + "..."
    try:
        value = attrcodec.decode(av)
    except Exception:
        return "(undecodable)"
    if isinstance(value, np.ndarray):
        text = f"tensor<{value.dtype}>{list(value.shape)}"
        if value.size <= 8:
            text += " " + np.array2string(value.ravel(), separator=",", threshold=8)
        else:
            text += f" sha={_short_hash(av)}"
        return text
    if hasattr(value, "name") and hasattr(value, "attr"):  # NameAttrList
        return f"func {value.name}"
    text = repr(value)
    return text if len(text) <= _MAX_VALUE_CHARS else text[:_MAX_VALUE_CHARS - 3] + "..."


def _tf_text(av):
    """An attr value as TensorFlow's SummarizeAttrValue prints it: strings quoted ("SAME"),
    bools true/false, lists [1, 2, 2, 1] and ["BiasAdd", "Relu"], shapes [?,4]."""
    kind = av.WhichOneof("value")
    if kind == "list":
        lst = av.list
        items = ([_quote(x) for x in lst.s] + [str(x) for x in lst.i]
                 + [_float(x) for x in lst.f] + ["true" if x else "false" for x in lst.b]
                 + [_dtype(x) for x in lst.type] + [_shape(x) for x in lst.shape]
                 + [f"func {x.name}" for x in lst.func])
        items += [f"<tensor {x.dtype}>" for x in lst.tensor]
        return "[" + ", ".join(items) + "]"
    if kind == "s":
        return _quote(av.s)
    if kind == "i":
        return str(av.i)
    if kind == "f":
        return _float(av.f)
    if kind == "b":
        return "true" if av.b else "false"
    if kind == "type":
        return _dtype(av.type)
    if kind == "shape":
        return _shape(av.shape)
    if kind == "placeholder":
        return "$" + av.placeholder
    return repr(attrcodec.decode(av))  # not reached: tensor and func are shown by _show


def _quote(b):
    text = b.decode("utf-8", "backslashreplace")
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


def _float(x):
    return f"{x:g}"


def _dtype(number):
    try:
        return "DT_" + DType(number).name
    except ValueError:  # a number no DataType has
        return str(number)


def _shape(shape):
    if shape.unknown_rank:
        return "<unknown>"
    return "[" + ",".join("?" if d.size < 0 else str(d.size) for d in shape.dim) + "]"


def _short_hash(av):
    return hashlib.sha1(av.SerializeToString(deterministic=True)).hexdigest()[:8]


def format_text(d, name_a="a", name_b="b"):
    """The report `tfg diff` prints: `+`/`-`/`~` lines, then a summary line."""
    lines = [f"--- {name_a}", f"+++ {name_b}"]
    for n in d.removed:
        lines.append(f"- {n} ({d.ops[n]})")
    for n in d.added:
        lines.append(f"+ {n} ({d.ops[n]})")
    for c in d.changed:
        lines.append(f"~ {c.name}")
        if c.op is not None:
            lines.append(f"    op: {c.op[0]} -> {c.op[1]}")
        if c.inputs is not None:
            lines.append(f"    inputs: {_list(c.inputs[0])} -> {_list(c.inputs[1])}")
        if c.device is not None:
            lines.append(f"    device: {c.device[0] or '(none)'} -> {c.device[1] or '(none)'}")
        for name, (old, new) in c.attrs.items():
            lines.append(f"    attr {name}: {old} -> {new}")
    for what in d.graph_changes:
        lines.append(f"~ (graph {what})")
    lines.append(summary_line(d))
    return "\n".join(lines)


def summary_line(d):
    if d.equal:
        return "graphs are equal"
    text = f"{len(d.added)} added, {len(d.removed)} removed, {len(d.changed)} changed"
    if d.graph_changes:
        text += ", graph " + " and ".join(d.graph_changes) + " differ"
    return text


def _list(items):
    return "[" + ", ".join(items) + "]"


__all__ = ["GraphDiff", "NodeChange", "diff", "format_text", "summary_line"]
