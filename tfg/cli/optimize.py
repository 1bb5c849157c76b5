"""`tfg optimize`: run graph optimization passes (Grappler's pipeline by default)."""
import click

from tfg.cli.common import graph_argument, output_options, read_graph, split_names, write_graph


@click.command("optimize")
@graph_argument
@click.option("--passes", "passes", default=None, metavar="LIST",
              help="Comma-separated passes to run, in order (default: the standard pipeline; "
                   "see --list).")
@click.option("--keep", multiple=True, metavar="NODES",
              help="Node or tensor names that must survive with their values (repeatable or "
                   "comma-separated). Default: every node without consumers.")
@click.option("--feed", "feeds", multiple=True, metavar="TENSORS",
              help="Tensors that will be fed: never folded as constants.")
@click.option("--devices", default=None, metavar="SPEC",
              help="Target devices (e.g. cpu:2,gpu:1); a GPU enables the layout pass.")
@click.option("--rounds", type=click.IntRange(1, 10), default=2, show_default=True,
              help="How many times the pipeline runs.")
@click.option("--report", is_flag=True, help="Per pass: nodes before/after and time, to stderr.")
@click.option("--list", "list_", is_flag=True, help="Print the passes and what each does.")
@output_options
def command(graph, passes, keep, feeds, devices, rounds, report, list_, output, fmt):
    """Optimize GRAPH: prune, CSE, constant folding, arithmetic, layout and remapping.

    Placeholders are always kept and never folded (a user may feed them).

    \b
    Example:
      tfg optimize model.pb --keep loss,train_op -o opt.pb --report
      tfg optimize model.pb --passes prune,constfold --keep out
    """
    from tfg.passes.manager import DEFAULT_PIPELINE, list_passes, optimize
    if list_:
        click.echo(f"default pipeline ({' -> '.join(DEFAULT_PIPELINE)}), 2 rounds:")
        for name, doc, default in list_passes():
            click.echo(f"  {name:10s} {'*' if default else ' '} {doc}")
        return
    g = read_graph(graph)
    rows = []
    out = optimize(g, passes=passes, keep=split_names(keep), feeds=split_names(feeds),
                   devices=devices or (), rounds=rounds, report=rows)
    if report:
        click.echo(f"{'pass':10s} {'round':>5s} {'before':>8s} {'after':>8s} {'ms':>9s}", err=True)
        for r in rows:
            note = f"  rolled back: {r['error']}" if r["error"] else ""
            click.echo(f"{r['pass']:10s} {r['round']:5d} {r['before']:8d} {r['after']:8d} "
                       f"{r['seconds'] * 1000:9.1f}{note}", err=True)
        click.echo(f"nodes: {len(g)} -> {len(out)}", err=True)
    else:
        for r in rows:
            if r["error"]:
                click.echo(f"tfg: warning: pass {r['pass']} failed and was rolled back: "
                           f"{r['error']}", err=True)
    write_graph(out, output, fmt)
