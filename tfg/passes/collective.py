"""Lower TensorFlow's collective ops into ordinary ops, so partitioning turns them into
`_Send`/`_Recv` like any cross-device edge and no collective runtime is needed.

    >>> g2 = lower_collectives(tfg.load("tf_collectives.pbtxt"))
    # before: CollectiveReduce(x0) on CPU:0 and CollectiveReduce_1(x1) on CPU:1, both with
    #         group_key=1, instance_key=1, group_size=2, merge_op=Add, final_op=Div
    # after:  collective_g1_i1/reduce_0_0 = AddV2(x0, x1) and .../mean = RealDiv(.., 2) on
    #         CPU:0; CollectiveReduce = Identity(mean) on CPU:0, CollectiveReduce_1 =
    #         Identity(mean) on CPU:1 (the members keep their names, so consumers are unchanged)

Supported (the builder's trees, see tfg/graphdef/builder/collective.py):
- CollectiveReduce (attrs group_size, group_key, instance_key, merge_op Add|Mul|Min|Max,
  final_op Id|Div) and CollectiveReduceV2 (group_size, group_key, instance_key as constant
  inputs; ordering tokens become control edges);
- CollectiveBcastSend / CollectiveBcastRecv and their V2 forms (one sender per instance).
Members of one instance are the nodes sharing (group_key, instance_key); there must be
group_size of them, one per device, agreeing on group_size, merge_op, final_op and T.
subdiv_offsets, wait_for, communication_hint, timeout_seconds, max_subdivs_per_device and
is_stateless only tune TensorFlow's runtime algorithm and are ignored (a dataflow graph needs
no extra ordering). CollectiveGather, CollectiveAllToAll, CollectivePermute and the V3 ops
(group handles from a resource) are not lowered: an input error names the node.
"""
from dataclasses import dataclass, field

import numpy as np

from tfg.errors import TfgInputError
from tfg.graphdef.builder import collective as cv
from tfg.graphdef.builder.core import GraphBuilder, Operation, Tensor
from tfg.graphdef.names import CONTROL, DeviceSpec, input_string
from tfg.passes.manager import register_pass

REDUCE_OPS = frozenset({"CollectiveReduce", "CollectiveReduceV2"})
SEND_OPS = frozenset({"CollectiveBcastSend", "CollectiveBcastSendV2"})
RECV_OPS = frozenset({"CollectiveBcastRecv", "CollectiveBcastRecvV2"})
LOWERED_OPS = REDUCE_OPS | SEND_OPS | RECV_OPS
UNSUPPORTED_OPS = frozenset({
    "CollectiveGather", "CollectiveGatherV2", "CollectiveAllToAllV2", "CollectiveAllToAllV3",
    "CollectivePermute", "CollectiveReduceV3", "CollectiveReduceScatterV2",
    "CollectiveInitializeCommunicator", "CollectiveAssignGroupV2"})
MERGE_OPS = {"Add": "sum", "Mul": "prod", "Min": "min", "Max": "max"}
FINAL_OPS = {"Id": False, "Div": True}
_V2_KEYS = ("group_size", "group_key", "instance_key")  # inputs 1..3 (0..2 for a RecvV2)


@dataclass
class _Member:
    name: str
    op: str
    device: str
    data: str = None  # the input string of the value it contributes (None for a Recv)
    controls: list = field(default_factory=list)
    attrs: dict = field(default_factory=dict)  # group_size, group_key, instance_key, T, ...
    key_inputs: list = field(default_factory=list)  # V2: the nodes giving the keys

    @property
    def kind(self):
        return "reduce" if self.op in REDUCE_OPS else "broadcast"


def has_collectives(graph):
    """Whether the graph holds a collective op that lower_collectives rewrites (or refuses)."""
    return any(n.op in LOWERED_OPS or n.op in UNSUPPORTED_OPS for n in graph)


def lower_collectives(graph):
    """A copy of `graph` with every collective instance lowered (see the module docstring)."""
    out = graph.copy()
    _lower(out)
    return out


@register_pass("collective", "Lower TensorFlow's CollectiveReduce/CollectiveBcastSend/Recv "
               "(V1, V2) into reduction and broadcast trees of ordinary ops.",
               first_round_only=True)
def collective_pass(graph, opts):
    """The pass-manager form of lower_collectives (in place); returns whether it changed."""
    return _lower(graph) > 0


def _lower(graph):
    for node in graph:
        if node.op in UNSUPPORTED_OPS:
            raise TfgInputError(f"node {node.name!r}: {node.op} is not supported (tfg lowers "
                                f"{', '.join(sorted(LOWERED_OPS))})")
    groups = {}
    for node in graph:
        if node.op in LOWERED_OPS:
            m = _member(graph, node)
            key = (m.attrs["group_key"], m.attrs["instance_key"])
            groups.setdefault(key, []).append(m)
    if not groups:
        return 0
    for key, members in groups.items():
        _check(key, members)
    keys = {k for members in groups.values() for m in members for k in m.key_inputs}
    for members in groups.values():
        for m in members:
            graph.remove_node(m.name)
    b = GraphBuilder(graph=graph)
    with b:
        for (gk, ik), members in groups.items():
            with b.name_scope(f"collective_g{gk}_i{ik}"):
                outs = (_reduce(b, members) if members[0].kind == "reduce"
                        else _broadcast(b, members))
            for m, t in zip(members, outs):
                graph.rename_node(t.op.name, m.name)
                if m.data is None:  # a Recv's control inputs gate its value
                    for c in m.controls:
                        graph[m.name].add_control_input(c)
    # The V2 key constants have done their job; drop those nothing else reads.
    for name in keys:
        if name in graph and graph[name].op == "Const" and not graph.consumers(
                name, include_control=True):
            graph.remove_node(name)
    return len(groups)


def _reduce(b, members):
    first = members[0].attrs
    ins = [_contribution(b, m) for m in members]
    return cv.all_reduce(ins, MERGE_OPS[first["merge_op"]], mean=FINAL_OPS[first["final_op"]],
                         devices=[m.device for m in members], name="all_reduce")


def _broadcast(b, members):
    sender = next(m for m in members if m.op in SEND_OPS)
    value = _contribution(b, sender)
    return cv.broadcast(value, [m.device for m in members], source=sender.device)


def _contribution(b, m):
    """The member's input as a builder Tensor; through an Identity on its device when the
    member had control inputs, so its value still waits for them."""
    t = _wrap(b, m.data, m.attrs["T"])
    if not m.controls:
        return t
    with b.device(m.device), b.control_dependencies(m.controls):
        return cv.make("Identity", [t], {"T": t.dtype}, f"{m.name.replace('/', '_')}_input",
                       [t.dtype]).outputs[0]


def _wrap(b, name, dtype):
    node, _, port = name.partition(":")
    op = Operation(b, node, b.graph[node].op, None)
    op.outputs = [None] * (int(port or 0) + 1)
    op.outputs[-1] = Tensor(op, int(port or 0), dtype)
    return op.outputs[-1]


# --- reading the members ----------------------------------------------------------------------
def _member(graph, node):
    if not node.device:
        raise TfgInputError(f"node {node.name!r} ({node.op}) has no device; a collective's "
                            "members must each name the device they run on")
    m = _Member(node.name, node.op, DeviceSpec.parse(node.device).to_string())
    data = [input_string(r.node, r.port) for r in node.input_refs if r.port != CONTROL]
    m.controls = list(node.control_inputs)
    m.attrs["T"] = node.get_attr("T")
    v2 = node.op.endswith("V2")
    if v2:
        first = 0 if node.op in RECV_OPS else 1
        if len(data) < first + 3:
            raise TfgInputError(f"node {node.name!r} ({node.op}) has {len(data)} inputs; "
                                f"expected {first + 3} or more")
        for i, key in enumerate(_V2_KEYS):
            m.attrs[key] = _constant_int(graph, node, data[first + i], key)
            m.key_inputs.append(data[first + i].split(":")[0])
        if node.op in RECV_OPS:
            m.key_inputs += [d.split(":")[0] for d in data[3:4]]  # the shape input
        if node.op in REDUCE_OPS:
            # Ordering tokens only order collectives; as control edges they keep that order.
            m.controls += [data[j].split(":")[0] for j in range(4, len(data))]
        data = data[:first]
    else:
        for key in _V2_KEYS:
            m.attrs[key] = int(node.get_attr(key))
        data = data[:1] if node.op not in RECV_OPS else []
    if node.op in REDUCE_OPS:
        for key, table in (("merge_op", MERGE_OPS), ("final_op", FINAL_OPS)):
            value = node.get_attr(key)
            value = value.decode() if isinstance(value, bytes) else str(value)
            if value not in table:
                raise TfgInputError(f"node {node.name!r}: {key} {value!r} is not supported "
                                    f"(one of {', '.join(table)})")
            m.attrs[key] = value
    m.data = data[0] if data else None
    return m


def _constant_int(graph, node, name, what):
    """The int value of a V2 key input: a Const, possibly behind Identity nodes."""
    src = graph.get(name.split(":")[0])
    while src is not None and src.op == "Identity" and src.data_inputs:
        src = graph.get(src.data_inputs[0].node)
    if src is None or src.op != "Const":
        raise TfgInputError(f"node {node.name!r} ({node.op}): input {what} ({name}) must be a "
                            "constant; tfg lowers collectives when the graph is built, so their "
                            "groups must be known then")
    value = np.asarray(src.get_attr("value")).reshape(-1)
    if value.size != 1:
        raise TfgInputError(f"node {node.name!r}: {what} ({name}) is not a scalar")
    return int(value[0])


def _check(key, members):
    gk, ik = key
    where = f"collective group_key={gk} instance_key={ik}"
    first = members[0]
    kinds = {m.kind for m in members}
    if len(kinds) > 1:
        raise TfgInputError(f"{where}: mixes reductions and broadcasts ({first.name!r}, ...)")
    for m in members:
        for attr in ("group_size", "T", "merge_op", "final_op"):
            if m.attrs.get(attr) != first.attrs.get(attr):
                raise TfgInputError(f"{where}: nodes {first.name!r} and {m.name!r} disagree on "
                                    f"{attr} ({first.attrs.get(attr)} vs {m.attrs.get(attr)})")
    size = first.attrs["group_size"]
    if len(members) != size:
        names = ", ".join(repr(m.name) for m in members)
        raise TfgInputError(f"{where}: group_size is {size} but the graph has {len(members)} "
                            f"member(s) ({names}); TensorFlow would wait forever")
    seen = {}
    for m in members:
        if m.device in seen:
            raise TfgInputError(f"{where}: nodes {seen[m.device]!r} and {m.name!r} are both on "
                                f"{m.device}; a group has one member per device")
        seen[m.device] = m.name
    if first.kind == "broadcast":
        senders = [m.name for m in members if m.op in SEND_OPS]
        if len(senders) != 1:
            raise TfgInputError(f"{where}: a broadcast needs exactly one sender, found "
                                f"{len(senders)} ({', '.join(senders) or 'none'})")


__all__ = ["lower_collectives", "has_collectives", "collective_pass", "LOWERED_OPS"]
