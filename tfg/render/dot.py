"""Graphviz dot source for a graph `View`: while-loop frames and name scopes as clusters,
control edges dashed, loop back edges (NextIteration -> Merge) red and not constraining the
layout, dtypes and shapes on data edges, nodes coloured by device with a legend.

    >>> text = dot_source(graph, select(graph))
    >>> text.splitlines()[0]
    'digraph tfg {'

The text is written by hand (not through the graphviz package) so `.dot` output needs neither
the package nor the `dot` binary.
"""
import hashlib
import html
import math
from collections import defaultdict

from tfg.errors import TfgError
from tfg.graphdef.graph import BACK_EDGE_OPS
from tfg.graphdef.names import CONTROL
from tfg.render.view import BOX_PREFIX, scope_of
from tfg.schemas.ops import control_flow_names

# Fill colours by op family (when the graph is not placed) and shapes that mark control flow.
_STYLE = {
    "Placeholder": ("ellipse", "#cfe8ff"), "PlaceholderWithDefault": ("ellipse", "#cfe8ff"),
    "Const": ("box", "#eeeeee"),
    "VariableV2": ("cylinder", "#fff2b3"), "Variable": ("cylinder", "#fff2b3"),
    "VarHandleOp": ("cylinder", "#fff2b3"),
    "Enter": ("trapezium", "#ffd6e0"), "RefEnter": ("trapezium", "#ffd6e0"),
    "Exit": ("invtrapezium", "#ffd6e0"), "RefExit": ("invtrapezium", "#ffd6e0"),
    "Merge": ("invtriangle", "#ffd6e0"), "RefMerge": ("invtriangle", "#ffd6e0"),
    "Switch": ("triangle", "#ffd6e0"), "RefSwitch": ("triangle", "#ffd6e0"),
    "NextIteration": ("rarrow", "#ffd6e0"), "RefNextIteration": ("rarrow", "#ffd6e0"),
    "LoopCond": ("diamond", "#ffd6e0"),
    "_Send": ("parallelogram", "#d9f2d9"), "_Recv": ("parallelogram", "#d9f2d9"),
    "_HostSend": ("parallelogram", "#d9f2d9"), "_HostRecv": ("parallelogram", "#d9f2d9"),
}
_DEFAULT_STYLE = ("box", "#ffffff")
# Colour-blind-safe qualitative palette (Okabe-Ito, lightened) for devices.
_DEVICE_COLOURS = ["#9ecae1", "#fdae6b", "#a1d99b", "#fdd0a2", "#bcbddc", "#f4a6c6",
                   "#c7e9c0", "#fee391", "#d9d9d9", "#c6dbef"]
BACK_EDGE_COLOUR = "#d62728"
FRAME_COLOUR = "#c2185b"


# Dot refuses a quoted string longer than 16384 characters (escapes included): longer text
# (a node name, an op or a device string of a hostile file) keeps its start and a hash of the
# whole, so two long names stay two nodes.
MAX_QUOTED = 2000
# Control characters (a NUL ends dot's string) are drawn as U+FFFD; newlines stay line breaks.
_CONTROL = {c: "\ufffd" for c in range(32) if c != 10}


def _drawable(text):
    """`text` as dot can hold it: at most MAX_QUOTED characters (then a hash of the whole), no
    control characters but newlines."""
    text = str(text)
    if len(text) > MAX_QUOTED:
        digest = hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8)
        text = text[:MAX_QUOTED] + "\u2026" + digest.hexdigest()
    return text.translate(_CONTROL)


def _html_text(text):
    """`text` inside an HTML-like label."""
    return html.escape(_drawable(text))


def quote(text):
    """A dot double-quoted string; newlines become dot's centred line breaks.

    Before: 'dense/MatMul'  After: '"dense/MatMul"'
    Before: 'x' * 20000     After: '"xxx...x…<16 hex digits>"' (MAX_QUOTED characters of it)
    """
    text = _drawable(text)
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


class _Html(str):
    """An HTML-like label, emitted as `<...>` instead of a quoted string."""


def _attrs(**kw):
    parts = []
    for k, v in kw.items():
        if v is None:
            continue
        if isinstance(v, _Html):
            parts.append(f"{k}=<{v}>")
        else:
            parts.append(f"{k}={quote(v)}")
    return "[" + ", ".join(parts) + "]" if parts else ""


def dot_source(graph, view, info=None, edge_labels=None, title=None, color_by="auto",
               times=None):
    """The dot text of `view` (see tfg.render.view.select).

    Before: a Graph and its View.  After: 'digraph tfg { ... }' with `subgraph cluster_...`
    blocks for frames and scopes. `info` is tfg.graphdef.frames.analyze's result (or None);
    `edge_labels` maps (node, port) to a label such as 'float32 [?,20]'. `color_by`: 'device',
    'op', 'time' (fill from `times`, {node: seconds}, white to red) or 'auto' (device when the
    graph is placed, else op). A partitioned graph (nodes on 2+ devices talking through
    _Send/_Recv) gets one cluster per device, side by side, and a green edge from each _Send
    to its _Recv.
    """
    edge_labels = edge_labels or {}
    devices = sorted({graph[n].device for n in view.nodes if graph[n].device})
    if color_by == "auto":
        color_by = "device" if devices else "op"
    device_colour = {d: _DEVICE_COLOURS[i % len(_DEVICE_COLOURS)] for i, d in enumerate(devices)}
    colour = _colouring(color_by, device_colour, times or {})
    by_device = len(devices) > 1 and any(graph[n].op in _SEND_RECV for n in view.nodes)
    lines = ["digraph tfg {",
             "  graph " + _attrs(rankdir="TB", compound="true", newrank="true",
                                 fontname="Helvetica", fontsize="11", label=title,
                                 labelloc="t"),
             "  node " + _attrs(fontname="Helvetica", fontsize="10", style="filled",
                                penwidth="1"),
             "  edge " + _attrs(fontname="Helvetica", fontsize="8", color="#555555",
                                arrowsize="0.7")]
    # Cluster tree: a unit sits under its frame chain, then its scopes below the frame's own.
    tree = _Cluster("", None)
    units = {}
    for name in view.nodes:
        units[name] = _node_decl(graph[name], name in view.stubs, colour, times)
        _place(_device_root(tree, graph, [name], by_device, device_colour), name,
               _frame_chain(info, [name]), scope_of(name), view.base)
    for box, (prefix, members) in view.boxes.items():
        units[box] = _box_decl(graph, prefix, members)
        _place(_device_root(tree, graph, members, by_device, device_colour), box,
               _frame_chain(info, members), scope_of(prefix[:-1]), view.base)
    _emit(tree, units, lines, "  ")
    _emit_edges(graph, view, edge_labels, lines)
    if by_device:
        _emit_send_recv_edges(graph, view, lines)
    if color_by == "time":
        lines.append("  " + quote("__legend__") + " " + _attrs(
            shape="plaintext", style="", label=_time_legend(times or {})))
    elif color_by == "device" and device_colour:
        rows = "".join(f'<TR><TD BGCOLOR="{c}"> </TD><TD ALIGN="LEFT">{_html_text(d)}</TD></TR>'
                       for d, c in device_colour.items())
        legend = _Html('<TABLE BORDER="0" CELLBORDER="1" CELLSPACING="0" CELLPADDING="3">'
                       f'<TR><TD COLSPAN="2"><B>devices</B></TD></TR>{rows}</TABLE>')
        lines.append("  " + quote("__legend__") + " " + _attrs(shape="plaintext", style="",
                                                               label=legend))
    lines.append("}")
    return "\n".join(lines) + "\n"


class _Cluster:
    def __init__(self, key, frame, device=None, colour=None):
        self.key = key
        self.frame = frame  # a Frame for frame clusters, None for scope clusters
        self.device = device  # the device of a partition's cluster
        self.colour = colour
        self.children = {}
        self.units = []


def _device_root(tree, graph, names, by_device, device_colour):
    """Where a unit's clusters start: the tree, or its device's cluster in a partitioned
    graph (a box whose members span devices stays outside every device)."""
    if not by_device:
        return tree
    devs = {graph[n].device for n in names}
    if len(devs) != 1 or "" in devs:
        return tree
    (dev,) = devs
    key = "device:" + dev
    return tree.children.setdefault(key, _Cluster(key, None, dev, device_colour.get(dev)))


def _frame_chain(info, names):
    """Frames (outermost first) holding all of `names`: the deepest they have in common."""
    if info is None:
        return []
    chains = []
    for name in names:
        f = info.frame_of(name)
        chains.append(([*reversed(f.ancestors()), f] if f else []))
    common = chains[0]
    for c in chains[1:]:
        n = 0
        while n < min(len(common), len(c)) and common[n] is c[n]:
            n += 1
        common = common[:n]
    return common


def _place(tree, unit, frames, scope, base):
    node = tree
    scope_start = len(base) if scope.startswith(base) else 0
    for f in frames:
        key = "frame:" + f.name
        node = node.children.setdefault(key, _Cluster(key, f))
        # Scopes inside a frame start below the frame's own scope (`while/` for
        # `while/while_context`), so a loop is not boxed twice.
        own = scope_of(f.name)
        if scope.startswith(own) and len(own) > scope_start:
            scope_start = len(own)
    i = scope.find("/", scope_start)
    while i >= 0:
        key = "scope:" + scope[: i + 1]
        node = node.children.setdefault(key, _Cluster(key, None))
        i = scope.find("/", i + 1)
    node.units.append(unit)


def _emit(cluster, units, lines, indent, ns=""):
    # `ns` keeps cluster names unique when each device's partition repeats a frame or scope.
    for unit in cluster.units:
        lines.append(indent + units[unit])
    for key, child in cluster.children.items():
        if child.frame is None and child.device is None and \
                len(child.units) + len(child.children) < 2:
            _emit(child, units, lines, indent, ns)  # a scope of one unit is not worth a box
            continue
        lines.append(f"{indent}subgraph {quote('cluster_' + ns + key)} {{")
        if child.device is not None:
            lines.append(f"{indent}  graph " + _attrs(
                label=child.device, color=child.colour or "#666666", penwidth="2",
                style="rounded,bold", fontcolor="#333333"))
        elif child.frame is not None:
            f = child.frame
            label = (f"while {f.name}\n{len(f.loop_vars)} loop vars, "
                     f"parallel_iterations={f.parallel_iterations}")
            lines.append(f"{indent}  graph " + _attrs(label=label, color=FRAME_COLOUR,
                                                      fontcolor=FRAME_COLOUR, style="rounded,bold"))
        else:
            lines.append(f"{indent}  graph " + _attrs(label=key[len("scope:"):], color="#999999",
                                                      style="rounded", fontcolor="#555555"))
        _emit(child, units, lines, indent + "  ",
              ns + key + "|" if child.device is not None else ns)
        lines.append(f"{indent}}}")


def _colouring(color_by, device_colour, times):
    """node -> fill colour for the chosen `color_by`."""
    if color_by == "device":
        # A placed graph: fill says the device; unplaced nodes stay white.
        return lambda node: device_colour.get(node.device, "#ffffff")
    if color_by == "op":
        return lambda node: _STYLE.get(node.op, _DEFAULT_STYLE)[1]
    if color_by == "time":
        top = max(times.values(), default=0.0)
        return lambda node: _heat(times.get(node.name), top)
    raise ValueError(f"unknown color_by {color_by!r}")


def _heat(seconds, top):
    """White (no time) -> yellow -> red (the slowest node), on a log scale over 3 decades."""
    if seconds is None or top <= 0 or seconds <= 0:
        return "#ffffff"
    f = min(max(1.0 + math.log10(seconds / top) / 3.0, 0.0), 1.0)  # 1 at the slowest node
    white, yellow, red = (255, 255, 255), (254, 217, 118), (227, 26, 28)
    c0, c1, a = (white, yellow, f / 0.5) if f < 0.5 else (yellow, red, (f - 0.5) / 0.5)
    rgb = [round(x + (y - x) * a) for x, y in zip(c0, c1)]
    return "#%02x%02x%02x" % tuple(rgb)


def _time_text(seconds):
    if seconds >= 1.0:
        return f"{seconds:.2f} s"
    if seconds >= 1e-3:
        return f"{seconds * 1e3:.2f} ms"
    return f"{seconds * 1e6:.0f} us"


def _time_legend(times):
    top = max(times.values(), default=0.0)
    rows = "".join(
        f'<TR><TD BGCOLOR="{_heat(top * f, top)}"> </TD><TD ALIGN="LEFT">'
        f'{html.escape(_time_text(top * f))}</TD></TR>' for f in (1.0, 0.1, 0.01, 0.001)) \
        if top > 0 else '<TR><TD COLSPAN="2">no timings</TD></TR>'
    return _Html('<TABLE BORDER="0" CELLBORDER="1" CELLSPACING="0" CELLPADDING="3">'
                 f'<TR><TD COLSPAN="2"><B>compute time</B></TD></TR>{rows}</TABLE>')


def _node_decl(node, stub, colour, times=None):
    shape, _ = _STYLE.get(node.op, _DEFAULT_STYLE)
    fill = colour(node)
    short = node.name.rsplit("/", 1)[-1]
    label = short if short == node.op else f"{short}\n{node.op}"
    if times and node.name in times:
        label += "\n" + _time_text(times[node.name])
    tooltip = f"{node.name} ({node.op})" + (f" on {node.device}" if node.device else "")
    style = "filled,rounded" if shape == "box" else "filled"
    if stub:
        return quote(node.name) + " " + _attrs(shape=shape, label=label, tooltip=tooltip,
                                               style="dashed", color="#aaaaaa",
                                               fontcolor="#888888")
    return quote(node.name) + " " + _attrs(shape=shape, label=label, tooltip=tooltip,
                                           fillcolor=fill, style=style)


def _box_decl(graph, prefix, members):
    ops = defaultdict(int)
    for m in members:
        ops[graph[m].op] += 1
    top = ", ".join(f"{op} {n}" for op, n in sorted(ops.items(), key=lambda kv: -kv[1])[:3])
    label = f"{prefix}\n{len(members)} nodes\n{top}"
    return quote(BOX_PREFIX + prefix) + " " + _attrs(shape="box3d", label=label,
                                                     fillcolor="#fff8dc", tooltip=prefix)


def _emit_edges(graph, view, edge_labels, lines):
    unit_of = view.unit_of
    aggregated = defaultdict(int)  # (src unit, dst unit, kind) -> count, for box edges
    for dst_name, dst_unit in unit_of.items():
        for ref in graph[dst_name].input_refs:
            src_unit = unit_of.get(ref.node)
            if src_unit is None or (src_unit == dst_unit and ref.node != dst_name):
                continue
            if dst_name in view.stubs and ref.node in view.stubs:
                continue  # stubs show only their edges to the selection
            src = graph[ref.node]
            kind = ("control" if ref.port == CONTROL
                    else "back" if src.op in BACK_EDGE_OPS else "data")
            if src_unit.startswith(BOX_PREFIX) or dst_unit.startswith(BOX_PREFIX):
                aggregated[(src_unit, dst_unit, kind)] += 1
                continue
            label = edge_labels.get((ref.node, ref.port)) if kind != "control" else None
            if ref.port > 0:
                label = f":{ref.port} {label}" if label else f":{ref.port}"
            lines.append(f"  {quote(src_unit)} -> {quote(dst_unit)} " + _edge_attrs(kind, label))
    for (src_unit, dst_unit, kind), n in aggregated.items():
        lines.append(f"  {quote(src_unit)} -> {quote(dst_unit)} "
                     + _edge_attrs(kind, f"x{n}" if n > 1 else None, penwidth=min(1 + n / 4, 4)))


_SENDS = control_flow_names("send")
_RECVS = control_flow_names("recv")
_SEND_RECV = _SENDS | _RECVS
SEND_RECV_COLOUR = "#2ca02c"


def _text_attr(node, name):
    """A string attr as text, or None when the attr holds something else (a malformed node:
    render describes it rather than failing)."""
    try:
        value = node.get_attr(name, b"")
    except TfgError:
        return None
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value if isinstance(value, str) else None


def _rendezvous_key(node):
    """(tensor, send device, recv device) of a _Send/_Recv, or None when an attr is not text."""
    key = tuple(_text_attr(node, name) for name in ("tensor_name", "send_device", "recv_device"))
    return None if None in key else key


def _emit_send_recv_edges(graph, view, lines):
    """A green edge from each drawn _Send to the _Recv that receives its tensor."""
    sends = {}
    for name, unit in view.unit_of.items():
        node = graph[name]
        key = _rendezvous_key(node) if node.op in _SENDS else None
        if key is not None:
            sends[key] = unit
    pairs = defaultdict(list)
    for name, unit in view.unit_of.items():
        node = graph[name]
        key = _rendezvous_key(node) if node.op in _RECVS else None
        if key is not None:
            src = sends.get(key)
            if src is not None and src != unit:
                pairs[(src, unit)].append(key[0])
    for (src, dst), tensors in pairs.items():
        lines.append(f"  {quote(src)} -> {quote(dst)} " + _attrs(
            color=SEND_RECV_COLOUR, style="bold", penwidth="1.6", arrowhead="vee",
            tooltip="rendezvous " + ", ".join(tensors[:5]),
            label=f"x{len(tensors)}" if len(tensors) > 1 else None,
            fontcolor=SEND_RECV_COLOUR))


def _edge_attrs(kind, label, penwidth=None):
    if kind == "control":
        return _attrs(style="dashed", color="#888888", label=label,
                      penwidth=None if penwidth is None else f"{penwidth:.1f}")
    if kind == "back":
        return _attrs(color=BACK_EDGE_COLOUR, fontcolor=BACK_EDGE_COLOUR, constraint="false",
                      penwidth="1.6", label=label or "next iteration")
    return _attrs(label=label, penwidth=None if penwidth is None else f"{penwidth:.1f}")
