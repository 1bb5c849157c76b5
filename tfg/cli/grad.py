"""`tfg grad`: add the gradient of sum(ys) w.r.t. each x to a graph."""
import click

from tfg.cli.common import (check_names, graph_argument, output_options, read_graph,
                            split_names, write_graph)
from tfg.passes.grad import grad


@click.command("grad")
@graph_argument
@click.option("--ys", multiple=True, required=True, metavar="NAMES",
              help="Tensors to differentiate (summed), comma-separated or repeated.")
@click.option("--xs", multiple=True, required=True, metavar="NAMES",
              help="Tensors to differentiate with respect to.")
@click.option("--grad-ys", "grad_ys", multiple=True, metavar="NAMES",
              help="Tensors holding the initial gradient of each y (default: ones).")
@click.option("--prefix", default="grad", show_default=True,
              help="Name scope of the Identity nodes exposing the gradients.")
@click.option("--optimizer", metavar="SPEC",
              help="Also add a `train` NoOp updating the variable xs: sgd:LR, "
                   "momentum:LR,M, adam:LR[,B1,B2,EPS] or rmsprop:LR[,DECAY,M,EPS].")
@click.option("--swap-memory", is_flag=True,
              help="While loops: mark the stack pushes swap_memory, so on a GPU the forward "
                   "values the backward loop needs wait in host memory.")
@output_options
def command(graph, ys, xs, grad_ys, prefix, optimizer, output, fmt, swap_memory):
    """Add gradient nodes of sum(YS) w.r.t. each of XS to GRAPH.

    The gradient of x = `node:0` is the Identity `<prefix>/node` (port p > 0:
    `<prefix>/node_p`); new nodes go under `gradients/`. Works through v1 control flow
    (cond, while loops, nested).

    \b
    Example:
      tfg grad model.pb --ys loss --xs w1,b1 | tfg run - --feeds batch.npz --fetch grad/w1
      tfg grad model.pb --ys loss --xs w1,b1 --optimizer momentum:0.1,0.9 -o train.pb
      tfg run train.pb --init init --target train --steps 1000 --fetch loss
    """
    g = read_graph(graph)
    for flag, names in (("--ys", ys), ("--xs", xs), ("--grad-ys", grad_ys)):
        check_names(g, split_names(names), flag)
    out = grad(g, split_names(ys), split_names(xs), split_names(grad_ys) or None, prefix,
               warn=lambda msg: click.echo(msg, err=True), optimizer=optimizer,
               swap_memory=swap_memory)
    write_graph(out, output, fmt)
