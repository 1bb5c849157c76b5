"""Options and helpers shared by subcommands: the GRAPH argument and graph output."""
import click

from tfg.errors import TfgInputError
from tfg.graphdef import io

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
        from tfg.graphdef import savedmodel

        if not savedmodel.is_saved_model(path):
            raise TfgInputError("--tag applies only to a SavedModel GRAPH")
        return savedmodel.load_graph(path, tags=tag)
    return io.load(path)


def write_graph(graph, output, fmt):
    io.save(graph, output, fmt)


def split_names(values):
    """Flags given as repeated options and/or comma lists -> flat list of names."""
    out = []
    for v in values or ():
        out.extend(s.strip() for s in v.split(",") if s.strip())
    return out
