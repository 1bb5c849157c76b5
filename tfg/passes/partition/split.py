"""Cut every edge between devices into a `_Send` on the source device and a `_Recv` on the
destination, as TensorFlow's graph_partition.cc does.

- One Send/Recv pair per (source tensor, destination device), shared by every consumer there;
  a tensor read from a reference (a ref-typed output) gets one pair per consumer, never shared.
- An edge whose consumer takes a reference (or a resource handle) cannot cross devices:
  colocation should have kept it on one device, so it is an error.
- A control edge crosses as data: a dummy `Const` (float, shape [0]) with `^src` feeds the
  Send; on the other side `_Recv -> Identity`, and the consumer gets `^Identity`.
- A Recv inside a loop frame takes a control edge from that frame's control-loop Merge on its
  device (control_flow.py), so it runs in every iteration.

    >>> split_edges(graph, cloops, info)     # a:0 on CPU:0 read by b on CPU:1
    >>> [(n.op, n.device[-5:]) for n in graph if n.op in ("_Send", "_Recv")]
    [('_Send', 'CPU:0'), ('_Recv', 'CPU:1')]
    >>> graph["b"].inputs
    ('a/_1',)

Send/Recv attrs: tensor_name `edge_<id>_<src>`, send_device, send_device_incarnation 1,
recv_device, client_terminated false, T (Send) / tensor_type (Recv).
"""
import numpy as np

from tfg.errors import GraphValidationError
from tfg.graphdef.names import CONTROL, input_string
from tfg.passes.partition.control_flow import out_frame
from tfg.passes.place.colocation import PlacementError, ref_or_resource_inputs
from tfg.schemas.dtypes import DType
from tfg.schemas.ops import signature

SEND_INCARNATION = 1  # a local session's devices all have incarnation 1


class _Splitter:
    def __init__(self, graph, cloops, info):
        self.graph = graph
        self.cloops = cloops
        self.info = info
        self.recvs = {}  # (src, port, dst device) -> input string for the consumer
        self.counter = 0
        self.edge_ids = {}
        self.added = []
        self.added_names = set()

    def new_name(self, prefix):
        """TensorFlow's `prefix/_N` names for nodes the partitioner adds."""
        while True:
            self.counter += 1
            name = f"{prefix}/_{self.counter}"
            if name not in self.graph:
                return name

    def add(self, name, op, inputs, attrs, device):
        node = self.graph.add_node(name, op, inputs, attrs, device)
        self.added.append(node)
        self.added_names.add(name)
        return node

    def edge_id(self, dst, index):
        key = (dst, index)
        if key not in self.edge_ids:
            self.edge_ids[key] = len(self.edge_ids)
        return self.edge_ids[key]

    def number_edges(self):
        """Edge ids in file order, as TensorFlow numbers edges when it builds the graph."""
        for node in self.graph:
            for i in range(len(node.inputs)):
                self.edge_id(node.name, i)

    def split(self):
        self.number_edges()
        for node in list(self.graph):
            if node.name in self.added_names:
                continue
            refs = node.input_refs
            if not any(self._crosses(node, r) for r in refs):
                continue
            by_ref = set(ref_or_resource_inputs(self.graph, node))
            new_inputs = []
            data_index = 0
            for i, ref in enumerate(refs):
                if not self._crosses(node, ref):
                    new_inputs.append(node.inputs[i])
                elif ref.port == CONTROL:
                    new_inputs.append("^" + self._control(node, i, ref))
                else:
                    if data_index in by_ref:
                        src = self.graph[ref.node]
                        raise PlacementError(
                            f"node {node.name!r} ({node.op}) on {node.device} takes "
                            f"{ref} on {src.device} by reference; a reference cannot cross "
                            "devices (colocate them)")
                    new_inputs.append(self._data(node, i, ref))
                if ref.port != CONTROL:
                    data_index += 1
            # Control inputs must stay after data inputs; a shared ^Identity may repeat.
            data = [s for s in new_inputs if not s.startswith("^")]
            ctrl = list(dict.fromkeys(s for s in new_inputs if s.startswith("^")))
            node.inputs = data + ctrl

    def _crosses(self, node, ref):
        src = self.graph.get(ref.node)
        return src is not None and src.device != node.device

    def _data(self, dst, index, ref):
        src = self.graph[ref.node]
        dtypes = signature.output_dtypes(src)
        if ref.port >= len(dtypes):  # a malformed input string: an input error, not a crash
            raise GraphValidationError(f"node {dst.name!r} ({dst.op}) reads output {ref.port} "
                                       f"of {src.name!r}, which has {len(dtypes)} output(s)")
        dtype = dtypes[ref.port]
        key = (ref.node, ref.port, dst.device)
        if not dtype.is_ref and key in self.recvs:
            return self.recvs[key]
        recv = self._pair(src, input_string(ref.node, ref.port), dtype.base, dst, index)
        if not dtype.is_ref:  # reads of a reference are never shared
            self.recvs[key] = recv
        return recv

    def _control(self, dst, index, ref):
        key = (ref.node, CONTROL, dst.device)
        if key in self.recvs:
            return self.recvs[key]
        src = self.graph[ref.node]
        dummy = self.add(self.new_name(src.name), "Const", ["^" + src.name],
                         {"dtype": DType.FLOAT, "value": np.zeros([0], np.float32)},
                         src.device)
        recv = self._pair(src, dummy.name, DType.FLOAT, dst, index)
        ident = self.add(self.new_name(src.name), "Identity", [recv], {"T": DType.FLOAT},
                         dst.device)
        self.recvs[key] = ident.name
        return ident.name

    def _pair(self, src, send_from, dtype, dst, index):
        """Send `send_from` (a tensor on src's device) to dst's device; the Recv's name."""
        common = {
            "tensor_name": f"edge_{self.edge_id(dst.name, index)}_{src.name}".encode(),
            "send_device": src.device.encode(),
            "send_device_incarnation": SEND_INCARNATION,
            "recv_device": dst.device.encode(),
            "client_terminated": False,
        }
        self.add(self.new_name(src.name), "_Send", [send_from], {"T": dtype, **common},
                 src.device)
        recv_inputs = []
        frame = out_frame(self.info, src)
        if frame is not None:
            recv_inputs.append("^" + self.cloops[(frame.name, dst.device)])
        recv = self.add(self.new_name(src.name), "_Recv", recv_inputs,
                        {"tensor_type": dtype, **common}, dst.device)
        return recv.name


def split_edges(graph, cloops, info):
    """Replace every cross-device edge of `graph` (in place) by Send/Recv pairs; returns the
    nodes added. `cloops` maps (frame name, device) to the control-loop Merge there."""
    splitter = _Splitter(graph, cloops, info)
    splitter.split()
    return splitter.added
