"""Colocation groups and the devices each group may use, as TensorFlow's placer builds them.

Nodes join one group (union-find) when a `_class: loc:@x` attr names x, and across every ref or
resource edge (a variable and the ops that update it by reference must share a device). A group
intersects its members' requested device specs and the device types that have a kernel for every
member; its candidates are the devices of the set that satisfy both.

    >>> groups = build_groups(graph, ["/job:localhost/replica:0/task:0/device:CPU:0",
    ...                               "/job:localhost/replica:0/task:0/device:GPU:0"])
    >>> groups.of("w/Assign").members        # VariableV2 w and the ops taking it by ref
    ['w', 'w/Assign', 'w/read']
    >>> groups.of("w").candidates
    ['/job:localhost/replica:0/task:0/device:CPU:0']    # Assign has no GPU kernel here

Devices in `host_only` (the host CPU a set of GPUs alone runs with: tfg.graphdef.names.
host_cpu_for) are candidates only for groups that no other device can run, or that request
them.

Soft placement: a request no device satisfies falls back to the feasible devices of the same
job/replica/task (else any feasible device) with a warning; with soft=False it is an error
naming the node and the device.
"""
import sys

from tfg.errors import TfgInputError
from tfg.graphdef.names import DeviceSpec
from tfg.kernels import has_kernel
from tfg.schemas.dtypes import DType
from tfg.schemas.ops import control_flow_names, get_op, has_op, signature

# Ops the executor runs itself on any device: control flow, communication, no-ops.
EXECUTOR_OPS = control_flow_names()
_JOB_FIELDS = ("job", "replica", "task")
_TYPE_FIELDS = ("device_type", "device_index")


class PlacementError(TfgInputError):
    """A placement no device can satisfy (unknown device, infeasible colocation)."""


def default_warn(message):
    print(f"tfg: warning: {message}", file=sys.stderr)


class Group:
    """Nodes that must share one device."""

    __slots__ = ("members", "request", "requested_by", "types", "candidates", "device")

    def __init__(self, members):
        self.members = members
        self.request = DeviceSpec()
        self.requested_by = {}  # DeviceSpec field -> node that asked for it
        self.types = None
        self.candidates = []
        self.device = None

    def __repr__(self):
        return f"<Group {self.members[:3]} candidates={len(self.candidates)}>"

    @property
    def constrained(self):
        """Whether placement may not move the group freely (requested, or several nodes)."""
        return len(self.members) > 1 or self.request != DeviceSpec()


class Groups:
    def __init__(self, groups, group_of):
        self.groups = groups
        self._of = group_of

    def __iter__(self):
        return iter(self.groups)

    def of(self, name):
        return self._of[name]


class UnionFind:
    def __init__(self):
        self.parent = {}

    def find(self, x):
        root = x
        while self.parent.setdefault(root, root) != root:
            root = self.parent[root]
        while self.parent[x] != root:
            self.parent[x], x = root, self.parent[x]
        return root

    def union(self, a, b):
        ra, rb = self.find(a), self.find(b)
        if ra != rb:
            self.parent[rb] = ra


def colocation_names(node):
    """Names in the node's `_class` attr (`loc:@x` entries)."""
    if not node.has_attr("_class"):
        return []
    out = []
    value = node.get_attr("_class")
    if not isinstance(value, list):  # a malformed attr (not a list of strings) says nothing
        return out
    for item in value:
        text = item.decode("utf-8", "replace") if isinstance(item, bytes) else str(item)
        if text.startswith("loc:@"):
            out.append(text[5:])
    return out


def ref_or_resource_inputs(graph, node):
    """Indices of data inputs that carry a reference or a resource handle into `node`."""
    try:
        if not has_op(node.op):
            return []
        expected = signature.input_dtypes(node)
    except TfgInputError:
        return []
    return [i for i, dt in enumerate(expected) if dt.is_ref or dt.base == DType.RESOURCE]


def feasible_types(node, device_types):
    """Device types among `device_types` that can run `node`'s op."""

    if node.op in EXECUTOR_OPS or (has_op(node.op) and get_op(node.op).control_flow):
        return set(device_types)
    return {t for t in device_types if has_kernel(node.op, t)}


def build_groups(graph, devices, soft=True, warn=default_warn, host_only=()):
    """Colocation groups of `graph` with their candidate devices (see module docstring)."""
    uf = UnionFind()
    for node in graph:
        uf.find(node.name)
        for target in colocation_names(node):
            # A `loc:@x` naming no node still groups every node that names it.
            uf.union(node.name, target if target in graph else "loc:@" + target)
        data = node.data_inputs
        for i in ref_or_resource_inputs(graph, node):
            if i < len(data) and data[i].node in graph:
                uf.union(data[i].node, node.name)
    members = {}
    for node in graph:
        members.setdefault(uf.find(node.name), []).append(node.name)
    specs = [DeviceSpec.parse(d) for d in devices]
    # TensorFlow prefers GPU over CPU when a group could run on either.
    types = sorted({s.device_type for s in specs}, key=lambda t: (t != "GPU", t != "CPU", t))
    groups, group_of = [], {}
    for names in members.values():
        group = Group(names)
        for name in names:
            group_of[name] = group
        _merge_requests(graph, group, soft, warn)
        _feasible(graph, group, types, devices)
        _candidates(graph, group, devices, specs, soft, warn, host_only)
        groups.append(group)
    return Groups(groups, group_of)


def _merge_requests(graph, group, soft, warn):
    request = {}
    for name in group.members:
        device = graph[name].device
        if not device:
            continue
        spec = DeviceSpec.parse(device)
        for fname in _JOB_FIELDS + _TYPE_FIELDS:
            value = getattr(spec, fname)
            if value is None:
                continue
            if fname not in request:
                request[fname] = value
                group.requested_by[fname] = name
            elif request[fname] != value:
                other = group.requested_by[fname]
                msg = (f"cannot colocate node {name!r} (device {device!r}) with node "
                       f"{other!r} (device {graph[other].device!r}): conflicting {fname}")
                if fname in _JOB_FIELDS or not soft:
                    raise PlacementError(msg)
                warn(msg + f"; keeping {other!r}'s")
    group.request = DeviceSpec(**request)


def _feasible(graph, group, types, devices):
    feasible = set(types)
    for name in group.members:
        node = graph[name]
        mine = feasible_types(node, types)
        if not mine:
            raise PlacementError(
                f"no kernel for op {node.op!r} (node {name!r}) on any device type of "
                f"{', '.join(types)}")
        if not (feasible & mine):
            others = [m for m in group.members if m != name]
            raise PlacementError(
                f"cannot colocate node {name!r} ({node.op}, kernels on "
                f"{', '.join(sorted(mine))}) with {', '.join(map(repr, others[:3]))}: no device "
                f"type of {', '.join(types)} runs them all")
        feasible &= mine
    group.types = feasible


def _candidates(graph, group, devices, specs, soft, warn, host_only=()):
    able = [d for d, s in zip(devices, specs) if s.device_type in group.types]
    ok = [d for d in able if d not in host_only] or able
    matching = ([d for d, s in zip(devices, specs) if d in ok and group.request.matches(s)]
                or [d for d, s in zip(devices, specs)
                    if d in able and group.request.matches(s)])
    if matching:
        group.candidates = matching
        return
    name = group.requested_by.get("device_type") or group.requested_by.get("device_index") \
        or next(iter(group.requested_by.values()))
    node = graph[name]
    wanted = group.request.to_string()
    exists = any(group.request.matches(s) for s in specs)
    why = (f"has no kernel for op {node.op!r} on {group.request.device_type}" if exists
           else "does not exist")
    if not soft:
        raise PlacementError(f"node {name!r} ({node.op}) requests device {wanted!r}, which "
                             f"{why} (devices: {', '.join(devices)})")
    same_task = DeviceSpec(*[getattr(group.request, f) for f in _JOB_FIELDS])
    fallback = [d for d, s in zip(devices, specs) if d in ok and same_task.matches(s)] or ok
    warn(f"node {name!r} ({node.op}) requests device {wanted!r}, which {why}; "
         f"soft placement puts it on one of {', '.join(fallback)}")
    group.candidates = fallback
