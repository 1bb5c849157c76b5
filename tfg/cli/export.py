"""`tfg export tensorboard`: write a graph (and a run's step stats) as a TensorBoard event file."""
import click

from tfg.cli.common import graph_argument, read_graph
from tfg.tensorboard import read_chrome_trace, write_graph_events


@click.group("export")
def command():
    """Export a graph to other tools' formats.

    \b
    Example:
      tfg export tensorboard model.pb logs/model && tensorboard --logdir logs
    """


@command.command("tensorboard")
@graph_argument
@click.argument("logdir", metavar="LOGDIR")
@click.option("--trace", "traces", multiple=True, metavar="TRACE.json",
              help="Add the step stats of a `tfg run --trace` file (TensorBoard's 'Session "
                   "runs'). Repeatable: one run each.")
@click.option("--tag", default="step", show_default=True,
              help="Name prefix of the runs added by --trace.")
def tensorboard(graph, logdir, traces, tag):
    """Write GRAPH into a new events file in LOGDIR for TensorBoard's Graphs tab.

    Prints the path of the events file. GRAPH is read as anywhere else (a .pb/.pbtxt, `-`
    for stdin, or a SavedModel).

    \b
    Example:
      tfg run mlp.pb --init init --target train --fetch loss --trace trace.json
      tfg export tensorboard mlp.pb logs/mlp --trace trace.json
      tensorboard --logdir logs
    """
    g = read_graph(graph)
    runs = []
    for i, path in enumerate(traces):
        runs.append((f"{tag}_{i}" if len(traces) > 1 else tag, i, read_chrome_trace(path)))
    click.echo(write_graph_events(g, logdir, run_metadata=runs))
