"""`tfg info`: summarize a graph (ops, inputs, outputs, variables, devices, loops), list the
ops tfg supports, or the local devices."""
import click

from tfg.cli.census import local_devices, supported_ops
from tfg.cli.common import graph_argument, read_graph, tag_option
from tfg.graphdef import summary as summ


@click.command("info")
@graph_argument
@click.option("--json", "as_json", is_flag=True, help="Print the same data as JSON.")
@click.option("--ops", "list_ops", is_flag=True,
              help="List the ops tfg supports (signatures, kernels per device); no GRAPH.")
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
      tfg info --ops
    """
    if list_ops or list_devices:
        data = {}
        if list_ops:
            data["ops"] = supported_ops()
        if list_devices:
            data["devices"] = local_devices()
        click.echo(summ.to_json(data) if as_json else _format_lists(data))
        return
    g = read_graph(graph, tag)
    s = summ.summarize(g, source=None if graph in (None, "-") else graph)
    text = None if as_json else summ.format_text(s)
    saved = getattr(g, "saved_model", None)
    if saved is not None:  # a SavedModel: its signatures name the feeds and fetches
        from tfg.graphdef import savedmodel

        s["saved_model"] = savedmodel.describe(saved)
        if text is not None:
            text += "\n" + "\n".join(savedmodel.format_signatures(saved))
            line = savedmodel.run_command(s["graph"], saved)
            if line:
                text += "\nrun a signature with:\n  " + line
    click.echo(summ.to_json(s) if as_json else text)


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
