"""While loops split across devices: keep each loop's skeleton together, and give every device
that takes part in a frame a control loop, so its executor knows the iteration structure.

TensorFlow's partitioner does both (graph_partition.cc, OptimizeControlFlowColocation and
AddControlFlow):
- a Switch moves to its data input's device, an Exit to its input's, and an Enter (not of a
  reference) or NextIteration to its first data consumer's;
- for each (frame, device) where a cross-device edge inside the frame arrives, a control loop
  `Enter -> Merge(Enter, NextIteration) -> Switch(Merge, LoopCond) -> NextIteration(Switch:1)`;
  its Enter reads the enclosing frame's control-loop Merge on that device, or an empty float
  Const at the root. The Recvs of that frame on that device then take a control edge from the
  control-loop Merge (split.py), so they run again in every iteration.

tfg also gives a control loop to every other device holding nodes of a frame that spans
devices: a device whose part of the loop only reads loop invariants then still runs (and
sends) once per iteration, where TensorFlow's partitioner would leave its peer waiting.

    >>> cloops = add_control_loops(graph, info)
    >>> cloops[("while/while_context", "/job:localhost/replica:0/task:0/device:CPU:1")]
    'cloop/while/while_context/CPU_1/Merge'
"""
import numpy as np

from tfg.errors import TfgInputError
from tfg.graphdef.frames import ENTER_OPS, EXIT_OPS, NEXT_ITERATION_OPS, SWITCH_OPS
from tfg.graphdef.names import DeviceSpec
from tfg.schemas.dtypes import DType


def normalize_control_flow_devices(graph):
    """Move Switch/Exit to their data input's device, Enter/NextIteration to their first
    consumer's (in place). Returns the number of nodes moved.

    Before: Merge on CPU:0, its Switch on CPU:2.  After: the Switch on CPU:0.
    """
    order = graph.topo_order()
    moved = 0
    for node in order:
        if node.op in SWITCH_OPS or node.op in EXIT_OPS:
            data = node.data_inputs
            src = graph.get(data[0].node) if data else None
            if src is not None and src.device and src.device != node.device:
                node.device = src.device
                moved += 1
    for node in reversed(order):
        # A RefEnter stays with the variable it reads by reference.
        if node.op in NEXT_ITERATION_OPS or (node.op in ENTER_OPS and node.op != "RefEnter"):
            for consumer, _ in graph.consumers(node.name):
                if consumer.device and consumer.device != node.device:
                    node.device = consumer.device
                    moved += 1
                break
    return moved


def out_frame(info, node):
    """The frame a node's outputs live in (an Exit's are in the parent)."""
    frame = info.frame_of(node.name)
    if frame is not None and node.op in EXIT_OPS:
        return frame.parent
    return frame


def needed_control_loops(graph, info):
    """{(frame name, device)} that need a control loop, parents included."""
    frames = info.frames
    need = set()
    for node in graph:
        for ref in node.input_refs:
            src = graph.get(ref.node)
            if src is None or src.device == node.device:
                continue
            frame = out_frame(info, src)
            if frame is not None:
                need.add((frame.name, node.device))
    for frame in frames.values():
        devices = {graph[n].device for n in frame.all_nodes() if n in graph}
        if len(devices) > 1:
            need.update((frame.name, d) for d in devices)
    # A nested frame's control loop is entered from its parent's on the same device.
    for name, device in list(need):
        parent = frames[name].parent
        while parent is not None:
            need.add((parent.name, device))
            parent = parent.parent
    return need


def add_control_loops(graph, info):
    """Add the control loops `needed_control_loops` asks for; {(frame, device): merge name}.

    Before: frame F's body split over CPU:0 and CPU:1, LoopCond on CPU:0.
    After:  on each of them `cloop/F/CPU_k/{Enter,Merge,Switch,NextIteration}` (and a
    `cloop/F/CPU_k/Const` feeding the Enter at the root), the Switch reading the LoopCond.
    """
    need = needed_control_loops(graph, info)
    merges = {}
    # Parents first, so a nested control loop can read its parent's Merge.
    for name, device in sorted(need, key=lambda k: (info.frames[k[0]].depth, k[0], k[1])):
        frame = info.frames[name]
        if frame.loop_cond is None:
            raise TfgInputError(f"a cross-device loop must have a pivot predicate: frame "
                                f"{name!r} has no LoopCond")
        prefix = _prefix(graph, name, device)
        if frame.parent is None:
            start = graph.add_node(
                graph.unique_name(prefix + "/Const"), "Const",
                attrs={"dtype": DType.FLOAT, "value": np.zeros([0], np.float32)},
                device=device).name
        else:
            start = merges[(frame.parent.name, device)]
        enter = graph.add_node(
            graph.unique_name(prefix + "/Enter"), "Enter", [start],
            attrs={"T": DType.FLOAT, "frame_name": name.encode(), "is_constant": False,
                   "parallel_iterations": int(frame.parallel_iterations)}, device=device)
        merge_name = graph.unique_name(prefix + "/Merge")
        next_name = graph.unique_name(prefix + "/NextIteration")
        graph.add_node(merge_name, "Merge", [enter.name, next_name],
                       attrs={"T": DType.FLOAT, "N": 2}, device=device)
        switch = graph.add_node(graph.unique_name(prefix + "/Switch"), "Switch",
                                [merge_name, frame.loop_cond], attrs={"T": DType.FLOAT},
                                device=device)
        graph.add_node(next_name, "NextIteration", [f"{switch.name}:1"],
                       attrs={"T": DType.FLOAT}, device=device)
        merges[(name, device)] = merge_name
    return merges


def _prefix(graph, frame_name, device):
    # TensorFlow's own partitioner says `_cloop`, but its graph import refuses names that start
    # with `_`, and TensorFlow must be able to load what tfg writes.
    spec = DeviceSpec.parse(device)
    where = f"{spec.device_type}_{spec.device_index}"
    if spec.job not in (None, "localhost") or spec.task not in (None, 0):
        where = f"{spec.job}_{spec.task}_{where}"
    return f"cloop/{frame_name}/{where}"
