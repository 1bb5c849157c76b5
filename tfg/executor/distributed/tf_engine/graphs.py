"""The GraphDef each TensorFlow server registers for one (feeds, fetches, targets).

    >>> parts = task_graphs(graph, needed, feed_refs, fetch_refs, incarnations)
    >>> parts[("worker", 1)].graph_def        # what RegisterGraph sends to task 1
    >>> parts[("worker", 1)].feed_keys        # [(feed index, rendezvous key)] for RunGraph.send
    >>> parts[("worker", 1)].fetch_keys       # [(fetch index, rendezvous key)] for recv_key

A TensorFlow worker takes feeds and returns fetches only through its rendezvous: RunGraph's
`send` puts tensors there under rendezvous keys and `recv_key` takes them out. So, as
TensorFlow's own master does, a fed tensor becomes a client-terminated `_Recv` and a fetched one
a client-terminated `_Send`. TensorFlow's master puts those on its own (client) device; tfg is
not a TensorFlow task, so both ends name the consumer's (or producer's) own device: the key is
then local to that worker and RunGraph can fill and drain it.

Before (task 1's nodes, x fed, y fetched):  x (Placeholder) -> y (Relu)
After:  _tfg_feed/x_0 (_Recv, client_terminated) -> y -> _tfg_fetch/y_0 (_Send, client_terminated)

The `_Send`/`_Recv` pairs `tfg partition` wrote between tasks carry incarnation 1; a TensorFlow
server refuses RecvTensor for a key whose incarnation is not its device's, so each pair gets
the incarnation its sending device reported in GetStatus.
"""
from tfg.errors import TfgInputError
from tfg.executor.distributed.spec import task_of
from tfg.graphdef.graph import Graph
from tfg.graphdef.names import CONTROL, canonical_device, input_string
from tfg.schemas.ops import control_flow_names
from tfg.schemas.ops.signature import output_dtypes

# The transfer ops that may be client-terminated (feeds and fetches of a registered graph).
CLIENT_TERMINATED = control_flow_names("send", "recv")


class TaskGraph:
    """What one task registers and how a step talks to it."""

    def __init__(self, graph):
        self.graph = graph
        self.feed_keys = []   # (index in feed_refs, rendezvous key)
        self.fetch_keys = []  # (index in fetch_refs, rendezvous key)

    @property
    def graph_def(self):
        return self.graph.to_proto()


def rendezvous_key(src_device, incarnation, dst_device, tensor_name, frame_iter="0:0"):
    """TensorFlow's key: `src;hex16(incarnation);dst;tensor_name;frame:iter`."""
    return f"{src_device};{incarnation & (2 ** 64 - 1):016x};{dst_device};{tensor_name};" \
           f"{frame_iter}"


def task_graphs(graph, needed, feed_refs, fetch_refs, incarnations):
    """{task: TaskGraph} for the nodes `needed` (see the module docstring). `incarnations`
    maps canonical device names to the incarnations their servers reported."""
    fed = {ref: i for i, ref in enumerate(feed_refs)}
    parts = {}
    names = set(graph.node_names())

    def part(device):
        task = task_of(device)
        if task not in parts:
            sub = Graph()
            sub.versions.CopyFrom(graph.versions)
            sub.library = graph.library
            parts[task] = TaskGraph(sub)
        return parts[task]

    def incarnation(device):
        inc = incarnations.get(canonical_device(device))
        if inc is None:
            raise TfgInputError(f"device {device!r} is not served by any task of the cluster")
        return inc

    def fresh(base):
        name, i = base, 0
        while name in names:
            i += 1
            name = f"{base}_{i}"
        names.add(name)
        return name

    feed_nodes = {}  # (ref, device) -> name of the client-terminated _Recv there

    def feed_recv(ref, device):
        key = (ref, device)
        if key not in feed_nodes:
            tp = part(device)
            dtype = output_dtypes(graph[ref.node])[ref.port].base
            tensor = f"{ref.node}:{ref.port}"
            name = fresh(f"_tfg_feed/{ref.node}_{ref.port}")
            inc = incarnation(device)
            tp.graph.add_node(name, "_Recv", [], _attrs(tensor, device, inc, dtype,
                                                       "tensor_type"), device)
            tp.feed_keys.append((fed[ref], rendezvous_key(device, inc, device, tensor)))
            feed_nodes[key] = name
        return feed_nodes[key]

    for node in graph:  # file order, as TensorFlow would see the GraphDef
        if node.name not in needed:
            continue
        copy = node.copy()
        inputs = []
        for text, ref in zip(node.inputs, node.input_refs):
            if ref.port == CONTROL:
                if ref.node in needed:
                    inputs.append(text)
                # else: a fed single-output node (partitions.needed_nodes): nothing to wait for
            elif (ref.node, ref.port) in fed:
                inputs.append(feed_recv(ref, node.device))
            else:
                inputs.append(text)
        copy.inputs = inputs
        if copy.op in CLIENT_TERMINATED and not copy.get_attr("client_terminated", False):
            copy.set_attr("send_device_incarnation",
                          _signed(incarnation(copy.get_attr("send_device").decode())))
        part(node.device).graph.add(copy)
    for i, ref in enumerate(fetch_refs):
        if ref in fed:
            continue  # the master answers it from the feeds
        src = graph[ref.node]
        dtype = output_dtypes(src)[ref.port].base
        tensor = f"{ref.node}:{ref.port}"
        inc = incarnation(src.device)
        tp = part(src.device)
        name = fresh(f"_tfg_fetch/{ref.node}_{ref.port}")
        tp.graph.add_node(name, "_Send", [input_string(ref.node, ref.port)],
                          _attrs(tensor, src.device, inc, dtype, "T"), src.device)
        tp.fetch_keys.append((i, rendezvous_key(src.device, inc, src.device, tensor)))
    for task in parts:
        if task is None:
            raise TfgInputError("a node of the graph has no /job:.../task:... device; "
                                "partition it with --cluster for this cluster")
    return parts


def _attrs(tensor, device, incarnation, dtype, type_attr):
    return {type_attr: dtype, "tensor_name": tensor.encode(), "send_device": device.encode(),
            "send_device_incarnation": _signed(incarnation), "recv_device": device.encode(),
            "client_terminated": True}


def _signed(value):
    """An incarnation (fixed64 in GetStatus) as the int64 a NodeDef attr holds."""
    value &= 2 ** 64 - 1
    return value - 2 ** 64 if value >= 2 ** 63 else value
