"""`tfg partition`: one subgraph per device, joined by _Send/_Recv, in one GraphDef (and, with
`--split DIR`, one file per device)."""
import click

from tfg.cli.common import (check_graph, graph_argument, output_options, read_graph,
                            write_graph)
from tfg.cli.place import device_options
from tfg.passes.partition import partition
from tfg.passes.partition.files import StagedSplit, check_split_dir, split_files


@click.command("partition")
@graph_argument
@device_options
@output_options
@click.option("--split", "split_dir", default=None, metavar="DIR",
              help="Also write DIR/<device>.pb, one GraphDef per device, and DIR/index.json "
                   "(device -> file, node counts); DIR is created if missing.")
@click.option("--compress-transfers", "compress", type=click.Choice(["none", "bf16"]),
              default=None, help="bf16: float32 tensors cross devices as truncated 16-bit "
                                 "floats (lossy, half the bytes; an attr on _Send/_Recv).")
@click.option("--schedule-recv", type=click.Choice(["none", "alap"]), default=None,
              help="alap: control edges start each _Recv as late as possible (an ASAP/ALAP "
                   "analysis with the cost model), so received tensors do not wait in memory.")
def command(graph, devices, cluster, cost_model, hard, spread_loops, output, fmt, split_dir,
            compress, schedule_recv):
    """Partition GRAPH per device: nodes without a device are placed first, then every edge
    between devices becomes a _Send/_Recv pair (loops split across devices get a control
    loop on each). `tfg run` runs the result without placing again.

    \b
    Example:
      tfg partition model.pb --devices cpu:3 | tfg run - --devices cpu:3 --fetch out
      tfg partition model.pb --cluster worker=127.0.0.1:2222,127.0.0.1:2223 -o parts.pb
      tfg partition model.pb --devices cpu:2 -o parts.pb --split parts/
      tfg partition model.pb --devices cpu:2 --compress-transfers bf16 -o parts.pb
    """
    if split_dir is not None:
        if not split_dir:
            raise click.BadParameter("needs a directory", param_hint="--split")
        check_split_dir(split_dir)  # before the work, not after it
    g = read_graph(graph)
    check_graph(g)
    parted = partition(g, devices, cost_model=cost_model, soft=not hard, cluster=cluster,
                       compress=compress, schedule_recv=schedule_recv,
                       spread_loops=spread_loops)
    if split_dir is None:
        write_graph(parted, output, fmt)
        return
    staged = StagedSplit(split_dir, *split_files(parted, fmt or "pb"))
    try:
        write_graph(parted, output, fmt)
    except BaseException:
        staged.discard()  # the combined graph failed: no per-device files either
        raise
    staged.commit()
