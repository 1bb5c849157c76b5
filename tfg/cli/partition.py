"""`tfg partition`: one subgraph per device, joined by _Send/_Recv, in one GraphDef."""
import click

from tfg.cli.common import graph_argument, output_options, read_graph, write_graph
from tfg.cli.place import device_options


@click.command("partition")
@graph_argument
@device_options
@output_options
def command(graph, devices, cluster, cost_model, hard, output, fmt):
    """Partition GRAPH per device: nodes without a device are placed first, then every edge
    between devices becomes a _Send/_Recv pair (loops split across devices get a control
    loop on each). `tfg run` runs the result without placing again.

    \b
    Example:
      tfg partition model.pb --devices cpu:3 | tfg run - --devices cpu:3 --fetch out
      tfg partition model.pb --cluster worker=127.0.0.1:2222,127.0.0.1:2223 -o parts.pb
    """
    from tfg.passes.partition import partition

    g = read_graph(graph)
    write_graph(partition(g, devices, cost_model=cost_model, soft=not hard, cluster=cluster),
                output, fmt)
