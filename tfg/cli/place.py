"""`tfg place`: assign a full device name to every node."""
import click

from tfg.cli.common import (check_graph, graph_argument, output_options, read_graph,
                            write_graph)
from tfg.passes.place import place


def device_options(f):
    """--devices / --cluster / --cost-model / --no-soft-placement / --spread-loops, shared
    with `partition`."""
    f = click.option("--spread-loops", is_flag=True,
                     help="Place a while loop's nodes one by one, as for straight-line "
                          "work (default: each loop nest on one device, so no iteration "
                          "crosses devices).")(f)
    f = click.option("--no-soft-placement", "hard", is_flag=True,
                     help="A requested device that is missing or has no kernel for the op "
                          "is an error (default: fall back with a warning).")(f)
    f = click.option("--cost-model", "cost_model", default=None, metavar="FILE",
                     help="Measured costs (`tfg run --profile FILE`) for the placer.")(f)
    f = click.option("--cluster", default=None, metavar="SPEC",
                     help="Cluster spec: JSON file or job=host:port,host:port; one CPU "
                          "device per task.")(f)
    f = click.option("--devices", default=None, metavar="SPEC",
                     help="Devices: cpu:4, cpu:2,gpu:1 or full names (default: local).")(f)
    return f


@click.command("place")
@graph_argument
@device_options
@output_options
def command(graph, devices, cluster, cost_model, hard, spread_loops, output, fmt):
    """Set every node's device in GRAPH: requested devices are kept (partial specs narrow
    the choice), colocation groups stay together, and the rest go where a cost-model
    simulation says they finish first.

    \b
    Example:
      tfg place model.pb --devices cpu:2,gpu:1 -o placed.pbtxt
      tfg place model.pb --devices cpu:2 --cost-model cost.json --no-soft-placement
    """
    g = read_graph(graph)
    check_graph(g)
    write_graph(place(g, devices, cost_model=cost_model, soft=not hard, cluster=cluster,
                      spread_loops=spread_loops), output, fmt)
