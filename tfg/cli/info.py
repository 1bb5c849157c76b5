"""`tfg info`: summarize a graph (ops, inputs, outputs, variables, devices, loops), list the
ops tfg supports, or the local devices."""
import sys

import click

from tfg.cli.census import format_support, graph_support, local_devices, supported_ops
from tfg.cli.common import read_graph, tag_option
from tfg.graphdef import summary as summ


@click.command("info")
# Not common.graph_argument: `--ops` without GRAPH lists every op, with GRAPH (`-`: stdin)
# reports on that graph's ops, so a missing GRAPH must be told from `-`.
@click.argument("graph", required=False, default=None, metavar="GRAPH")
@click.option("--json", "as_json", is_flag=True, help="Print the same data as JSON.")
@click.option("--ops", "list_ops", is_flag=True,
              help="With GRAPH: per op type of the graph, its count and whether tfg runs "
                   "(kernel per device type), differentiates and places it, and whether the "
                   "graph is fully supported. Without GRAPH: every op tfg supports.")
@click.option("--devices", "list_devices", is_flag=True,
              help="List the local devices `tfg run` uses by default; no GRAPH.")
@tag_option
def command(graph, as_json, list_ops, list_devices, tag):
    """Summarize GRAPH: node count, op histogram, placeholders (dtype, shape), outputs,
    variables and parameter counts, devices, while loops (nesting), ops tfg does not know,
    and a ready-to-paste `tfg run` line. For a SavedModel: its tags and signatures.

    \b
    Example:
      tfg info model.pb
      tfg info model.pb --json | jq .while_loops
      tfg info model.pb --ops
      tfg info --ops
    """
    if list_ops and graph is not None:
        # A report, not a check: exit 0 even when ops are unsupported (they are listed).
        g = read_graph(graph, tag)
        report = graph_support(g)
        source = None if graph == "-" else graph
        click.echo(summ.to_json(dict({"graph": source}, **report)) if as_json
                   else format_support(report, source))
        return
    if list_ops or list_devices:
        data = {}
        if list_ops:
            data["ops"] = supported_ops()
        if list_devices:
            data["devices"] = local_devices()
        click.echo(summ.to_json(data) if as_json else _format_lists(data))
        return
    graph = "-" if graph is None else graph
    if graph == "-" and _stdin_is_terminal():
        # Reading a graph from the keyboard would wait silently for input that never comes.
        click.echo("tfg info: reading a graph from stdin (pipe one in, or give a path; "
                   "Ctrl-D ends, Ctrl-C quits)", err=True)
    g = read_graph(graph, tag)
    s = summ.summarize(g, source=None if graph in (None, "-") else graph)
    saved = getattr(g, "saved_model", None)
    click.echo(summ.to_json(s) if as_json else summ.format_text(s, saved=saved))


def _stdin_is_terminal():
    try:
        return sys.stdin.isatty()
    except (AttributeError, ValueError):  # closed or replaced
        return False


def _format_lists(data):
    lines = []
    if "ops" in data:
        ops = data["ops"]
        lines.append(f"ops ({len(ops)}; S = signature, then devices with a kernel):")
        for op, row in ops.items():
            mark = "S" if row["signature"] else "-"
            lines.append(f"  {mark} {op:40s} {','.join(row['kernels']) or '(no kernel)'}")
    if "devices" in data:
        lines.append("devices:")
        lines.extend("  " + d for d in data["devices"])
    return "\n".join(lines)
