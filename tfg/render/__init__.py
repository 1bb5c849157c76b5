"""Draw a graph with Graphviz: `to_dot` gives dot source, `render` writes .dot/.svg/.png/.pdf.

    >>> render(load("model.pb"), "model.svg")                  # scopes collapse above 200 units
    >>> render(g, "loop.svg", scope="while")                   # one scope, expanded
    >>> render(g, "near.dot", around="loss", depth=2)          # a neighbourhood
    >>> print(to_dot(g, max_nodes=50))
    >>> render(g, "hot.svg", color_by="time", times=load_times("trace.json"))
    >>> render(g, "g.graphml")                                 # for other graph tools

svg/png/pdf need Graphviz's `dot` binary (through the `graphviz` Python package, imported here
only when drawing); `.dot` needs neither. Files are written whole or not at all.
"""
import io as _io
import json
import os
import shutil
import subprocess
import sys

from tfg.errors import TfgError, TfgInputError
from tfg.graphdef import frames, infer
from tfg.graphdef.chrome_trace import event_times
from tfg.graphdef.io import write_bytes_atomic
from tfg.render.dot import dot_source
from tfg.render.view import select
from tfg.schemas.ops import has_op, signature

FORMATS = ("dot", "gv", "svg", "png", "pdf", "graphml")
COLOR_BY = ("auto", "device", "op", "time")


def to_dot(graph, max_nodes=200, scope=None, around=None, depth=2, labels=True, title=None,
           color_by="auto", times=None):
    """Dot source for `graph`.

    Before: a Graph.  After: 'digraph tfg {\\n  graph [...]\\n  subgraph "cluster_frame:...'
    `color_by`: auto|device|op|time; `times`: {node name: seconds} for 'time'.
    """
    if color_by not in COLOR_BY:
        raise TfgInputError(f"--color-by must be one of {', '.join(COLOR_BY)}")
    if color_by == "time" and not times:
        raise TfgInputError("--color-by time needs timings: --trace TRACE.json from "
                            "`tfg run --trace`")
    view = select(graph, max_nodes=max_nodes, scope=scope, around=around, depth=depth)
    info = _control_flow(graph)
    edge_labels = edge_types(graph, view.nodes) if labels else {}
    return dot_source(graph, view, info, edge_labels, title, color_by=color_by, times=times)


def to_graphml(graph, scope=None, around=None, depth=2):
    """GraphML bytes (through networkx) of the selected nodes, none collapsed.

    Before: a Graph.  After: b'<?xml ...><graphml ...>' with one node per NodeDef (attrs op,
    device) and one edge per input (attrs port, kind = data|control).
    """
    import networkx as nx  # lazy: ~1 s to import; only GraphML output needs it

    view = select(graph, max_nodes=max(len(graph), 1), scope=scope, around=around,
                  depth=depth)
    drawn = set(view.nodes)
    g = nx.MultiDiGraph()
    for name in view.nodes:
        node = graph[name]
        g.add_node(name, op=node.op, device=node.device or "",
                   stub=name in view.stubs)
    for name in view.nodes:
        for ref in graph[name].input_refs:
            if ref.node in drawn:
                g.add_edge(ref.node, name, port=ref.port,
                           kind="control" if ref.port < 0 else "data")
    buf = _io.BytesIO()
    nx.write_graphml(g, buf)
    return buf.getvalue()


def load_times(path):
    """{node name: seconds} from a Chrome trace (`tfg run --trace`): the total duration of each
    node's runs in the traced step (a node in a loop runs once per iteration)."""
    try:
        with open(path, "rb") as f:
            doc = json.loads(f.read())
    except OSError as e:
        raise TfgInputError(f"cannot read trace {path}: {e.strerror}") from None
    except (ValueError, RecursionError):
        raise TfgInputError(f"trace {path} is not JSON") from None
    events = doc.get("traceEvents") if isinstance(doc, dict) else None
    if not isinstance(events, list):
        raise TfgInputError(f"trace {path} is not a Chrome trace (no traceEvents)")
    times = {}
    for i, e in enumerate(events):
        if isinstance(e, dict) and e.get("ph") == "X" and "name" in e:
            _, dur, _ = event_times(e, i)
            times[str(e["name"])] = times.get(str(e["name"]), 0.0) + dur / 1e6
    return times


def _control_flow(graph):
    try:
        return frames.analyze(graph)
    except TfgError:
        return None  # malformed control flow: draw it anyway, without frame clusters


def edge_types(graph, names):
    """{(node, port): 'float32 [?,20]'} for outputs of `names`, as far as tfg can tell.

    Uses tfg.graphdef.infer (dtypes and shapes), else the op signatures (dtypes only); any
    failure just leaves labels out.
    """
    try:
        labels = _labels_from_infer(graph)
        if labels:
            return labels
    except Exception:  # inference is a nicety here: never stop a drawing
        pass
    out = {}
    for name in names:
        node = graph[name]
        if not has_op(node.op):
            continue
        try:
            for port, dt in enumerate(signature.output_dtypes(node)):
                out[(name, port)] = dt.tf_name
        except Exception:  # a node missing an attr: no label for it
            continue
    return out


def _labels_from_infer(graph):
    out = {}
    for key, info in infer.infer(graph).items():
        label = _type_label(info.dtype, info.shape)
        if label:
            out[key] = label
    return out


def _type_label(dtype, shape):
    """'float32 [?,20]'; the dtype alone for an unknown rank; '' when nothing is known."""
    name = dtype.tf_name if dtype is not None else "?"
    if shape is None:
        return name if dtype is not None else ""
    return f"{name} [" + ",".join("?" if d is None else str(d) for d in shape) + "]"


def format_for(path):
    ext = os.path.splitext(str(path))[1].lower().lstrip(".")
    if ext not in FORMATS:
        raise TfgInputError(f"cannot tell the drawing format of {path!r}: use a name ending in "
                            f".svg, .png, .pdf, .dot or .graphml")
    return "dot" if ext == "gv" else ext


def render(graph, path, fmt=None, timeout=None, **options):
    """Draw `graph` into `path` (`-` writes dot source to stdout); options as for to_dot;
    `timeout`: the seconds dot may take (default DOT_TIMEOUT).

    Before: a Graph.  After: `path` holds the whole drawing (or nothing, on an error).
    """
    fmt = fmt or (None if path in (None, "-") else format_for(path))
    if fmt == "graphml":
        write_bytes_atomic(path, to_graphml(graph, options.get("scope"), options.get("around"),
                                            options.get("depth", 2)))
        return
    text = to_dot(graph, **options)
    if path in (None, "-"):
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    fmt = fmt or format_for(path)
    if fmt != "dot":
        check_drawable(text)
    data = text.encode("utf-8") if fmt == "dot" else run_dot(
        text, fmt, timeout if timeout is not None else DOT_TIMEOUT)

    write_bytes_atomic(path, data)


DOT_TIMEOUT = 120.0  # seconds `tfg render` lets dot run (render --timeout)
# Graphviz's dot lays out a few thousand nodes in seconds; a flat graph of 100,000 nodes (no
# name scopes for --max-nodes to fold) took it 11 s and then a segmentation fault.
MAX_DRAWN_NODES = 20_000


def check_drawable(text):
    """Refuse dot source with more node declarations than dot can lay out."""
    nodes = sum(1 for line in text.splitlines() if line.lstrip().startswith('"')
                and "->" not in line)
    if nodes > MAX_DRAWN_NODES:
        raise TfgInputError(
            f"the drawing has {nodes} nodes after folding name scopes, more than Graphviz's "
            f"dot lays out (at most {MAX_DRAWN_NODES}); narrow it (--around NODE --depth N, "
            "--scope PREFIX) or write a .dot or .graphml file")


def run_dot(text, fmt, timeout=DOT_TIMEOUT):
    """dot source -> bytes of `fmt`, through Graphviz's `dot` binary, which may take at most
    `timeout` seconds (some drawings of a few hundred boxes keep it busy for many minutes)."""
    exe = shutil.which("dot")
    if exe is None:
        raise TfgInputError("Graphviz's `dot` program is not installed (apt-get install "
                            "graphviz); write a .dot file instead")
    try:
        done = subprocess.run([exe, f"-T{fmt}"], input=text.encode("utf-8"),
                              capture_output=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        raise TfgError(f"dot did not finish the drawing in {timeout:g} s (render --timeout); "
                       "narrow it (--around NODE --depth N, --scope PREFIX, a smaller "
                       "--max-nodes) or write a .dot file") from None
    except OSError as e:
        raise TfgError(f"dot failed: {e.strerror or e}") from None
    if done.returncode != 0:
        err = done.stderr.decode(errors="replace").strip().splitlines()
        why = err[-1] if err else (f"killed by signal {-done.returncode}"
                                   if done.returncode < 0 else f"exit {done.returncode}")
        raise TfgError(f"dot failed: {why}")
    return done.stdout