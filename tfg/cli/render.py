"""`tfg render`: draw a graph with Graphviz."""
import click

from tfg.cli.common import graph_argument, read_graph
from tfg.errors import TfgInputError
from tfg.render import DOT_TIMEOUT, format_for, load_times, render


@click.command("render")
@graph_argument
@click.option("-o", "--output", required=True, metavar="OUT",
              help="OUT.svg, .png, .pdf, .dot or .graphml (format from the extension); - for "
                   "dot on stdout.")
@click.option("--max-nodes", default=200, show_default=True, type=int,
              help="Collapse name scopes into boxes until at most this many are drawn.")
@click.option("--scope", metavar="PREFIX", help="Draw only this name scope, expanded.")
@click.option("--around", metavar="NODE", help="Draw only the neighbourhood of NODE.")
@click.option("--depth", default=2, show_default=True, type=int,
              help="How many edges away from --around to draw.")
@click.option("--no-labels", is_flag=True, help="No dtypes and shapes on edges.")
@click.option("--color-by", "color_by", type=click.Choice(["auto", "device", "op", "time"]),
              default="auto", show_default=True,
              help="Node fill: device, op family, or compute time (needs --trace); auto = "
                   "device when placed, else op.")
@click.option("--trace", "trace_path", default=None, metavar="TRACE.json",
              help="Node timings from `tfg run --trace`: shown on nodes, for --color-by time.")
@click.option("--timeout", default=DOT_TIMEOUT, show_default=True,
              type=click.FloatRange(min=0, min_open=True), metavar="SECONDS",
              help="How long Graphviz's dot may take for svg/png/pdf.")
def command(graph, output, max_nodes, scope, around, depth, no_labels, color_by, trace_path,
            timeout):
    """Draw GRAPH: name scopes and while loops as clusters, control edges dashed, loop back
    edges red, dtypes and shapes on edges, nodes coloured by device when placed; a
    partitioned graph as one cluster per device with green _Send -> _Recv edges. `.graphml`
    writes every selected node (no collapsing) for other graph tools.

    \b
    Example:
      tfg render model.pb -o model.svg
      tfg render model.pb -o loop.svg --scope while
      tfg render model.pb -o - --around loss --depth 3 | dot -Tpng > near.png
      tfg run model.pb ... --trace t.json; tfg render model.pb -o hot.svg --color-by time --trace t.json
    """
    if scope and around:
        raise TfgInputError("--scope and --around cannot be used together")
    if depth < 0:
        raise TfgInputError("--depth must be 0 or more")
    if output != "-":
        format_for(output)  # a bad extension fails before any work
    times = load_times(trace_path) if trace_path else None
    if color_by == "time" and not times:
        raise TfgInputError("--color-by time needs --trace TRACE.json (from `tfg run --trace`)")
    g = read_graph(graph)
    render(g, output, max_nodes=max_nodes, scope=scope, around=around, depth=depth,
           labels=not no_labels, title=None if graph in (None, "-") else graph,
           color_by=color_by, times=times, timeout=timeout)
