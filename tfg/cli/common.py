"""Options and helpers shared by subcommands: the GRAPH argument, graph output, and names
checked against the graph ("did you mean")."""
import difflib

import click

from tfg.errors import TfgInputError
from tfg.graphdef import io, savedmodel
from tfg.graphdef.canonical import canonicalize
from tfg.graphdef.validate import check_control_flow, validate
from tfg.graphdef.names import parse_tensor

graph_argument = click.argument("graph", required=False, default="-", metavar="GRAPH")


def output_options(f):
    """`-o PATH` and `--format pb|pbtxt` for commands that write a graph."""
    f = click.option("--format", "fmt", type=click.Choice(["pb", "pbtxt"]), default=None,
                     help="Output format (default: pbtxt for *.pbtxt paths, else binary).")(f)
    f = click.option("-o", "--output", default="-", metavar="PATH",
                     help="Where to write the graph (default: stdout).")(f)
    return f


def tag_option(f):
    """`--tag TAGS`: which MetaGraphDef of a SavedModel GRAPH to read (default: the only one,
    else the one tagged `serve`)."""
    return click.option("--tag", "tag", default=None, metavar="TAGS",
                        help="SavedModel GRAPH: the MetaGraphDef with these tags (comma "
                             "list; default: the only one, else `serve`).")(f)


def progress_option(f):
    """`--progress/--no-progress`: the one-line progress display on stderr (tfg.cli.progress);
    by default shown only when stderr is a terminal, so pipes and logs stay clean."""
    return click.option("--progress/--no-progress", "progress", default=None,
                        help="Show a progress line on stderr after 1 s (default: only when "
                             "stderr is a terminal).")(f)


def read_graph(path, tag=None):
    """A Graph from a .pb/.pbtxt path, `-` (stdin), or a SavedModel folder/saved_model.pb."""
    if tag:
        if not savedmodel.is_saved_model(path):
            raise TfgInputError("--tag applies only to a SavedModel GRAPH")
        return savedmodel.load_graph(path, tags=tag)
    return io.load(path)


def check_graph(graph):
    """What `tfg run` refuses on load, refused by the commands that write a graph (optimize,
    place, partition): attrs, arity and the dtype of every edge against the op signatures,
    and control flow that TensorFlow's importer and executor refuse (a Merge of an int32 and
    a float32, a LoopCond of an int32, an Exit no Enter leads to, nodes of two frames). Before,
    these commands wrote such a graph, which `tfg run` and TensorFlow then refused.

        >>> check_graph(g)          # a loop whose LoopCond reads an int32 Merge
        GraphValidationError: node 'while/LoopCond' (LoopCond): input 0 ('while/Merge') is
        int32, expected bool

    Checked on the graph as the commands see it (calls inlined, functional control flow
    lowered; a call that cannot be inlined stays, as for run, and unknown ops pass)."""
    front = canonicalize(graph, strict=False)
    validate(front, require_known_ops=False)
    check_control_flow(front)


def write_graph(graph, output, fmt):
    io.save(graph, output, fmt)


def split_names(values):
    """Flags given as repeated options and/or comma lists -> flat list of names."""
    out = []
    for v in values or ():
        out.extend(s.strip() for s in v.split(",") if s.strip())
    return out


def check_names(graph, names, flag, what="node"):
    """Every name (`node`, `node:1`, `^node`) of `flag` must name a node of `graph`; the first
    that does not is an input error with the closest node names.

    Before: check_names(g, ["lose"], "--fetch") on a graph with a node `loss`.
    After:  TfgInputError("--fetch lose: no node named 'lose' in the graph; did you mean
            'loss'?")
    """
    for name in names:
        try:
            node = parse_tensor(name.lstrip("^")).node
        except Exception:  # noqa: BLE001 - a malformed name: the command's own check says so
            continue
        if node not in graph:
            raise TfgInputError(f"{flag} {name}: no {what} named {node!r} in the graph"
                                + did_you_mean(node, graph.node_names()))


def did_you_mean(name, candidates):
    """'; did you mean 'loss'?' (up to three close names), or '' when none is close."""
    close = difflib.get_close_matches(name, list(candidates), n=3, cutoff=0.6)
    if not close:
        return ""
    return "; did you mean " + " or ".join(repr(c) for c in close) + "?"
