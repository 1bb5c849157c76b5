"""`tfg prune`: keep only what the fetches and targets need, cut off at the feeds."""
import click

from tfg.cli.common import (check_names, graph_argument, output_options, read_graph,
                            split_names, write_graph)
from tfg.passes.prune import prune


@click.command("prune")
@graph_argument
@click.option("--fetch", "fetches", multiple=True, metavar="TENSORS",
              help="Tensors to compute (repeatable or comma-separated).")
@click.option("--target", "targets", multiple=True, metavar="NODES",
              help="Nodes to run for their effects (repeatable or comma-separated).")
@click.option("--feed", "feeds", multiple=True, metavar="TENSORS",
              help="Tensors that will be fed: their producers are cut off (a fed node that is "
                   "not a Placeholder becomes one).")
@output_options
def command(graph, fetches, targets, feeds, output, fmt):
    """Prune GRAPH to the minimal subgraph computing the fetches from the feeds.

    Control dependencies among kept nodes are kept.

    \b
    Example:
      tfg prune model.pb --fetch loss --feed x:0 -o small.pb
    """
    g = read_graph(graph)
    for flag, names in (("--fetch", fetches), ("--target", targets), ("--feed", feeds)):
        check_names(g, split_names(names), flag)
    out = prune(g, fetches=split_names(fetches), targets=split_names(targets),
                feeds=split_names(feeds))
    write_graph(out, output, fmt)
