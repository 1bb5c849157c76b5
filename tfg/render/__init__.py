"""Draw a graph with Graphviz: `to_dot` gives dot source, `render` writes .dot/.svg/.png/.pdf.

    >>> render(load("model.pb"), "model.svg")                  # scopes collapse above 200 units
    >>> render(g, "loop.svg", scope="while")                   # one scope, expanded
    >>> render(g, "near.dot", around="loss", depth=2)          # a neighbourhood
    >>> print(to_dot(g, max_nodes=50))

svg/png/pdf need Graphviz's `dot` binary (through the `graphviz` Python package, imported here
only when drawing); `.dot` needs neither. Files are written whole or not at all.
"""
import os
import sys

from tfg.errors import TfgError, TfgInputError
from tfg.render.dot import dot_source
from tfg.render.view import select

FORMATS = ("dot", "gv", "svg", "png", "pdf")


def to_dot(graph, max_nodes=200, scope=None, around=None, depth=2, labels=True, title=None):
    """Dot source for `graph`.

    Before: a Graph.  After: 'digraph tfg {\\n  graph [...]\\n  subgraph "cluster_frame:...'
    """
    view = select(graph, max_nodes=max_nodes, scope=scope, around=around, depth=depth)
    info = _control_flow(graph)
    edge_labels = edge_types(graph, view.nodes) if labels else {}
    return dot_source(graph, view, info, edge_labels, title)


def _control_flow(graph):
    from tfg.graphdef import frames

    try:
        return frames.analyze(graph)
    except TfgError:
        return None  # malformed control flow: draw it anyway, without frame clusters


def edge_types(graph, names):
    """{(node, port): 'float32 [?,20]'} for outputs of `names`, as far as tfg can tell.

    Uses tfg.graphdef.infer (dtypes and shapes) when it is importable, else the op signatures
    (dtypes only); any failure just leaves labels out.
    """
    try:
        labels = _labels_from_infer(graph)
        if labels:
            return labels
    except Exception:  # inference is a nicety here (or not importable): never stop a drawing
        pass
    out = {}
    try:
        from tfg.schemas.ops import has_op, signature
    except ImportError:
        return out
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
    from tfg.graphdef import infer

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
                            f".svg, .png, .pdf or .dot")
    return "dot" if ext == "gv" else ext


def render(graph, path, fmt=None, **options):
    """Draw `graph` into `path` (`-` writes dot source to stdout); options as for to_dot.

    Before: a Graph.  After: `path` holds the whole drawing (or nothing, on an error).
    """
    text = to_dot(graph, **options)
    if path in (None, "-"):
        sys.stdout.write(text)
        sys.stdout.flush()
        return
    fmt = fmt or format_for(path)
    data = text.encode("utf-8") if fmt == "dot" else run_dot(text, fmt)
    from tfg.graphdef.io import write_bytes_atomic

    write_bytes_atomic(path, data)


def run_dot(text, fmt):
    """dot source -> bytes of `fmt`, through Graphviz's `dot` binary."""
    try:
        import graphviz
    except ImportError:
        raise TfgInputError("drawing svg/png/pdf needs the `graphviz` Python package "
                            "(pip install graphviz); write a .dot file instead") from None
    try:
        return graphviz.Source(text).pipe(format=fmt)
    except graphviz.ExecutableNotFound:
        raise TfgInputError("Graphviz's `dot` program is not installed (apt-get install "
                            "graphviz); write a .dot file instead") from None
    except graphviz.CalledProcessError as e:
        err = (e.stderr or b"").decode(errors="replace").strip().splitlines()
        raise TfgError(f"dot failed: {err[-1] if err else e}") from None
