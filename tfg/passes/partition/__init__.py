"""Partitioning: one subgraph per device, in ONE GraphDef, joined only by `_Send`/`_Recv`.

    >>> g2 = partition(g, "cpu:2")
    >>> sorted({n.device[-5:] for n in g2}), [n.op for n in g2 if n.op.startswith("_")]
    (['CPU:0', 'CPU:1'], ['_Send', '_Recv'])
    >>> parts = split_by_device(g2)          # {device: Graph}, e.g. for one executor each

Steps: place nodes that have no full device (placement keeps the ones that do), keep each
loop's skeleton together and add control loops for frames that span devices
(control_flow.py), give each device that reads a small Const its own copy (const_copies.py),
then cut every cross-device edge into a Send/Recv pair (split.py). The result
satisfies the partitioned-graph invariant: every node has a full device name and every data or
control edge stays on one device. Partitioning a partitioned graph changes nothing.
"""
import os

from tfg.errors import GraphValidationError, TfgInputError
from tfg.graphdef.canonical import canonicalize
from tfg.graphdef.frames import analyze
from tfg.graphdef.graph import Graph
from tfg.graphdef.names import DeviceSpec
from tfg.passes.collective import has_collectives, lower_collectives
from tfg.passes.cost_model import CostModel
from tfg.passes.partition.control_flow import (  # noqa: F401
    add_control_loops, normalize_control_flow_devices)
from tfg.passes.partition.compress import compress_transfers
from tfg.passes.partition.const_copies import copy_small_consts
from tfg.passes.partition.recv_schedule import MODES as SCHEDULE_MODES, schedule_recvs
from tfg.passes.partition.split import split_edges
from tfg.passes.place import default_warn, place


def partition(graph, devices=None, cost_model=None, soft=True, cluster=None,
              warn=default_warn, compress=None, schedule_recv=None, spread_loops=False):
    """A copy of `graph` partitioned per device (see the module docstring).

    devices/cluster/cost_model/soft/spread_loops are as for `tfg.passes.place.place`, which
    runs first unless `devices` and `cluster` are both None and every node already has a full
    device.
    `compress="bf16"` marks float32 transfers for truncation to 16 bits (compress.py).
    `schedule_recv="alap"` delays each _Recv with a control edge until just before its value
    is needed (recv_schedule.py); "none" starts every _Recv at once. Default: the
    environment's TFG_SCHEDULE_RECV, else "none".

    Before: a:0 (CPU:0) -> b (CPU:1).
    After:  a -> a/_1 (_Send, CPU:0);  a/_2 (_Recv, CPU:1) -> b.
    """
    graph = canonicalize(graph)  # calls inlined, functional control flow lowered
    if has_collectives(graph):  # TensorFlow's collective ops become trees of ordinary ops
        graph = lower_collectives(graph)
    if devices is None and cluster is None and all(
            n.device and DeviceSpec.parse(n.device).is_full() for n in graph):
        out = graph.copy()
        for node in out:  # canonical names, so that equal devices compare equal
            node.device = DeviceSpec.parse(node.device).to_string()
    else:
        out = place(graph, devices, cost_model=cost_model, soft=soft, cluster=cluster,
                    warn=warn, spread_loops=spread_loops)
    normalize_control_flow_devices(out)
    copy_small_consts(out)  # small Consts: a copy per reading device, not a Send/Recv
    cloops = add_control_loops(out, analyze(out))
    # Frames again: the control loops are new members of their frames.
    split_edges(out, cloops, analyze(out))
    if compress is not None:
        compress_transfers(out, compress)
    if schedule_recv is None:
        schedule_recv = os.environ.get("TFG_SCHEDULE_RECV") or "none"
    if schedule_recv != "none":
        if schedule_recv not in SCHEDULE_MODES:
            raise TfgInputError(f"--schedule-recv must be one of "
                                f"{', '.join(SCHEDULE_MODES)}, not {schedule_recv!r}")
        if isinstance(cost_model, str):
            cost_model = CostModel.load(cost_model)
        schedule_recvs(out, cost_model)
    return _grouped_by_device(out)


def _grouped_by_device(graph):
    """The same graph with its nodes ordered device by device (file order within one)."""
    order = {}
    for node in graph:
        order.setdefault(node.device, len(order))
    nodes = sorted(graph, key=lambda n: order[n.device])  # stable: file order kept
    for node in nodes:
        graph.remove_node(node.name)
    for node in nodes:
        graph.add(node)
    return graph


def split_by_device(graph):
    """{device: Graph} of a partitioned graph (each keeps the versions and library).

    Before: one GraphDef with nodes on CPU:0 and CPU:1.  After: {'/job:.../CPU:0': Graph,
    '/job:.../CPU:1': Graph}; a node whose input is on another device is an input error.
    """

    empty = Graph()
    empty.versions.CopyFrom(graph.versions)
    empty.library = graph.library
    parts = {}
    for node in graph:
        if not node.device:
            raise GraphValidationError(f"node {node.name!r} has no device; partition first")
        part = parts.get(node.device)
        if part is None:
            part = parts[node.device] = empty.copy()
        part.add(node.copy())
    for device, part in parts.items():
        for node in part:
            for ref in node.input_refs:
                if ref.node not in part:
                    raise GraphValidationError(
                        f"node {node.name!r} on {device} reads {ref} from another device; "
                        "the graph is not partitioned")
    return parts


__all__ = ["partition", "split_by_device", "normalize_control_flow_devices",
           "add_control_loops", "split_edges"]
