"""`tfg convert`: binary <-> text GraphDef."""
import click

from tfg.cli.common import graph_argument, output_options, read_graph, write_graph


@click.command("convert")
@graph_argument
@output_options
def command(graph, output, fmt):
    """Convert GRAPH between binary (.pb) and text (.pbtxt) GraphDef.

    \b
    Example:
      tfg convert model.pb -o model.pbtxt
      cat model.pbtxt | tfg convert --format pb > model.pb
    """
    write_graph(read_graph(graph), output, fmt)
