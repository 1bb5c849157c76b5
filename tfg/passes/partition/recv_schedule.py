"""Late Recv scheduling (white paper 5.2): control edges that hold each `_Recv` back until just
before its value is needed, so a received tensor does not sit in the receiving device's memory
from the start of the step.

An ASAP/ALAP analysis over the whole partitioned graph (every device, with each `_Send ->
_Recv` pair as an edge) with the cost model's compute and transfer times gives each node its
earliest start (ASAP) and the latest start that does not lengthen the critical path (ALAP).
For a `_Recv` R on device D, the anchor is the node P of D that finishes last, by ASAP, no
later than R's ALAP start, among the ancestors of R's consumers (P is computed whenever R's
value is needed: the edge never adds work to a step), and the pass adds the control edge
P -> R.

    Before: w/read/_2 (_Recv, CPU:1) starts at once; its consumer layer3/MatMul runs at t=900
    After:  w/read/_2 has ^layer2/Relu (ASAP finish 880 <= its ALAP start 890)

Never a deadlock: an edge P -> R is added only when R does not reach P through any path of
the partitioned graph (data, control and Send->Recv edges, the edges already added included),
so the graph stays acyclic across partitions. Nodes that may be dead (downstream of a Switch)
or inside a loop frame (downstream of an Enter) are neither anchors nor delayed: a control
edge from a dead node would make the Recv dead, and an edge across frames is not allowed.
"""
from collections import defaultdict

from tfg.passes.cost_model import CostModel
from tfg.passes.place import tensor_shapes
from tfg.schemas.ops import control_flow_names

MODES = ("none", "alap")
SEND_OPS = control_flow_names("send")
RECV_OPS = control_flow_names("recv")


def schedule_recvs(graph, cost_model=None):
    """Add the control edges (in place); -> {recv name: anchor name} for each one added."""
    cm = cost_model if cost_model is not None else CostModel()
    succ, pred = _edges(graph)
    order = _topo(graph, succ, pred)
    if order is None:  # a cycle already (a malformed graph): leave it alone
        return {}
    shapes = tensor_shapes(graph)
    cost = {name: _cost(graph, graph[name], cm, shapes, pred) for name in order}
    asap_start, asap_finish = {}, {}
    for n in order:
        asap_start[n] = max((asap_finish[p] for p in pred[n]), default=0.0)
        asap_finish[n] = asap_start[n] + cost[n]
    end = max(asap_finish.values(), default=0.0)
    alap_start = {}
    for n in reversed(order):
        latest_finish = min((alap_start[s] for s in succ[n]), default=end)
        alap_start[n] = latest_finish - cost[n]
    unsafe = _maybe_dead_or_in_frame(graph, succ)
    added = {}
    for r in order:
        node = graph[r]
        # A _Recv with a control input is scheduled already (a partitioned graph partitioned
        # again changes nothing) or ordered by the partitioner itself.
        if node.op not in RECV_OPS or r in unsafe or node.control_inputs:
            continue
        anchor = _anchor(graph, r, succ, pred, asap_start, asap_finish, alap_start, unsafe)
        if anchor is None:
            continue
        node.add_control_input(anchor)
        succ[anchor].add(r)
        pred[r].add(anchor)
        added[r] = anchor
    return added


def _anchor(graph, r, succ, pred, asap_start, asap_finish, alap_start, unsafe):
    device = graph[r].device
    consumers = [c for c in succ[r] if graph[c].device == device]
    if not consumers:
        return None
    below = _reach(r, succ)  # R's descendants, across devices: never an anchor (a cycle)
    best, best_t = None, asap_start[r]  # an anchor must delay R, or it is no use
    for n in _reach_many(consumers, pred):
        if n == r or n in below or n in unsafe or graph[n].device != device:
            continue
        t = asap_finish[n]
        if best_t < t <= alap_start[r] + 1e-9 or (t == best_t and best is not None
                                                     and n < best):
            best, best_t = n, t
    return best


def _edges(graph):
    """succ/pred over data and control inputs plus Send->Recv pairs; NextIteration back
    edges are left out (they close loops, which the pass does not schedule into)."""
    succ, pred = defaultdict(set), defaultdict(set)
    sends = {}
    for node in graph:
        if node.op in SEND_OPS:
            sends[_pair_key(node)] = node.name
    next_ops = control_flow_names("next_iteration")
    for node in graph:
        succ[node.name], pred[node.name]  # every node present
        for ref in node.input_refs:
            if ref.node not in graph:
                continue
            if graph[ref.node].op in next_ops:
                continue
            succ[ref.node].add(node.name)
            pred[node.name].add(ref.node)
        if node.op in RECV_OPS:
            src = sends.get(_pair_key(node))
            if src is not None:
                succ[src].add(node.name)
                pred[node.name].add(src)
    return succ, pred


def _pair_key(node):
    def s(name):
        v = node.get_attr(name, b"") if node.has_attr(name) else b""
        return v.decode() if isinstance(v, bytes) else str(v)
    return s("send_device"), s("recv_device"), s("tensor_name")


def _topo(graph, succ, pred):
    indeg = {n: len(pred[n]) for n in succ}
    ready = [n.name for n in graph if indeg[n.name] == 0]
    order = []
    while ready:
        n = ready.pop()
        order.append(n)
        for s in succ[n]:
            indeg[s] -= 1
            if indeg[s] == 0:
                ready.append(s)
    return order if len(order) == len(indeg) else None


def _cost(graph, node, cm, shapes, pred):
    """Compute time on the node's device; a _Recv costs its transfer (bytes over the link)."""
    if node.op in RECV_OPS:
        for p in pred[node.name]:
            send = graph[p]
            if send.op in SEND_OPS and send.data_inputs:
                ref = send.data_inputs[0]
                if ref.node in graph:
                    nbytes = cm.output_bytes(graph[ref.node], ref.port, shapes)
                    return cm.transfer_us(nbytes, send.device, node.device)
        return 0.0
    device_type = node.device.rsplit("/device:", 1)[-1].split(":")[0] or "CPU"
    try:
        return cm.compute_us(node, device_type, shapes)
    except Exception:  # noqa: BLE001 - an op the estimates do not know: a small cost
        return 10.0


def _reach(start, edges):
    """Every node reachable from `start` along `edges` (start excluded unless on a cycle)."""
    return _reach_many([start], edges, include_start=False)


def _reach_many(starts, edges, include_start=True):
    seen = set(starts) if include_start else set()
    stack = list(starts)
    while stack:
        n = stack.pop()
        for m in edges[n]:
            if m not in seen:
                seen.add(m)
                stack.append(m)
    return seen


def _maybe_dead_or_in_frame(graph, succ):
    """Nodes downstream of a Switch (maybe dead) or an Enter (in a loop frame), across
    devices; conservative: everything after a loop or a cond is left as it is."""
    starts = [n.name for n in graph if n.op in control_flow_names("switch", "enter")]
    return _reach_many(starts, succ)
