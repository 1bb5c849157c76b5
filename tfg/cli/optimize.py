"""`tfg optimize`: run graph optimization passes (Grappler's pipeline by default)."""
import json
import time

import click

from tfg.cli.common import (check_graph, check_names, graph_argument, output_options,
                            progress_option, read_graph, split_names, write_graph)
from tfg.cli.progress import Progress, passes_line
from tfg.errors import TfgInputError
from tfg.passes.manager import DEFAULT_PIPELINE, DEFAULT_ROUNDS, list_passes, optimize


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
@click.option("--json", "as_json", is_flag=True,
              help="With --report: the report as one JSON document (stderr); with --list: "
                   "the passes as JSON.")
@click.option("--list", "list_", is_flag=True, help="Print the passes and what each does.")
@progress_option
@output_options
def command(graph, passes, keep, feeds, devices, rounds, report, as_json, list_, progress,
            output, fmt):
    """Optimize GRAPH: prune, CSE, constant folding, arithmetic, layout and remapping.

    Placeholders are always kept and never folded (a user may feed them). The report goes to
    stderr, so the graph on stdout can still be piped.

    \b
    Example:
      tfg optimize model.pb --keep loss,train_op -o opt.pb --report
      tfg optimize model.pb --passes prune,constfold --keep out
      tfg optimize model.pb --report --json 2>report.json | tfg run - --fetch out
    """
    if as_json and not (report or list_):
        raise TfgInputError("--json applies to --report and --list (the graph itself is "
                            "written as GraphDef)")
    if list_:
        _print_list(as_json)
        return
    g = read_graph(graph)
    check_graph(g)
    check_names(g, split_names(keep), "--keep")
    check_names(g, split_names(feeds), "--feed")
    rows = []
    start = time.perf_counter()
    # The line is erased when the block ends, before the report or an error is printed.
    with Progress(0, describe=passes_line, enabled=progress) as bar:
        def on_pass(name, index, total):
            bar.total = total
            bar.update(index, name)

        out = optimize(g, passes=passes, keep=split_names(keep), feeds=split_names(feeds),
                       devices=devices or (), rounds=rounds, report=rows, on_pass=on_pass)
    seconds = time.perf_counter() - start
    if report and as_json:  # the whole of stderr stays one JSON document
        click.echo(json.dumps(report_json(rows, len(g), len(out), seconds), indent=2), err=True)
    elif report:
        _print_report(rows, len(g), len(out))
    else:
        for r in rows:
            if r["error"]:
                click.echo(f"tfg: warning: pass {r['pass']} failed and was rolled back: "
                           f"{r['error']}", err=True)
    write_graph(out, output, fmt)


def _print_list(as_json):
    if as_json:
        passes = [{"name": name, "doc": doc, "default": default}
                  for name, doc, default in list_passes()]
        click.echo(json.dumps({"pipeline": list(DEFAULT_PIPELINE), "rounds": DEFAULT_ROUNDS,
                               "passes": passes}, indent=2))
        return
    click.echo(f"default pipeline ({' -> '.join(DEFAULT_PIPELINE)}), {DEFAULT_ROUNDS} rounds:")
    for name, doc, default in list_passes():
        click.echo(f"  {name:10s} {'*' if default else ' '} {doc}")


def _print_report(rows, nodes_before, nodes_after):
    click.echo(f"{'pass':10s} {'round':>5s} {'before':>8s} {'after':>8s} {'ms':>9s}", err=True)
    for r in rows:
        note = f"  rolled back: {r['error']}" if r["error"] else ""
        click.echo(f"{r['pass']:10s} {r['round']:5d} {r['before']:8d} {r['after']:8d} "
                   f"{r['seconds'] * 1000:9.1f}{note}", err=True)
    click.echo(f"nodes: {nodes_before} -> {nodes_after}", err=True)


def report_json(rows, nodes_before, nodes_after, seconds):
    """The --report --json document: one entry per pass run, then totals.

        {"passes": [{"name": "prune", "round": 1, "nodes_before": 40, "nodes_after": 31,
                     "seconds": 0.0012, "changed": true, "error": null}, ...],
         "totals": {"nodes_before": 40, "nodes_after": 17, "seconds": 0.05, "passes_run": 16,
                    "passes_changed": 5, "rolled_back": 0, "rounds": 2}}
    """
    passes = [{"name": r["pass"], "round": r["round"], "nodes_before": r["before"],
               "nodes_after": r["after"], "seconds": round(r["seconds"], 6),
               "changed": bool(r["changed"]), "error": r["error"]} for r in rows]
    totals = {"nodes_before": nodes_before, "nodes_after": nodes_after,
              "seconds": round(seconds, 6), "passes_run": len(rows),
              "passes_changed": sum(p["changed"] for p in passes),
              "rolled_back": sum(p["error"] is not None for p in passes),
              "rounds": max((r["round"] for r in rows), default=0)}
    return {"passes": passes, "totals": totals}
