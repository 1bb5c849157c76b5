"""The in-memory graph: `Graph` (ordered nodes, consumer index) and `Node` (a NodeDef).

A Node keeps its NodeDef message as storage, so attrs it does not understand, debug info and
unknown fields survive verbatim; name, op, inputs and device are plain Python fields that edits
go through (the graph's consumer index follows them).

    >>> g = Graph()
    >>> a = g.add_node("a", "Const", attrs={"dtype": DType.FLOAT, "value": np.float32(1)})
    >>> b = g.add_node("b", "Neg", ["a"], attrs={"T": DType.FLOAT})
    >>> [c.name for c, _ in g.consumers("a")]
    ['b']
    >>> g.rename_node("a", "x"); b.inputs
    ('x',)
"""
from collections import defaultdict

import numpy as np  # noqa: F401  (doctest)

from tfg.errors import GraphFormatError, GraphValidationError, TfgInputError
from tfg.graphdef import attrs as attrcodec
from tfg.graphdef.names import CONTROL, TensorRef, input_string, parse_input
from tfg.schemas.dtypes import DType  # noqa: F401  (doctest)
from tfg.schemas.ops import control_flow_names
from tfg.schemas.proto import graph_pb2, node_def_pb2

# Ops whose outgoing edges close a loop (the back edge into Merge).
BACK_EDGE_OPS = control_flow_names("next_iteration")
_NO_DEFAULT = object()


_new_node = object.__new__


class Node:
    """One NodeDef. Change inputs/name/device through the setters (or Graph methods)."""

    __slots__ = ("_graph", "_name", "op", "_inputs", "_refs", "device", "_nd", "_attr_cache",
                 "_shared")

    def __init__(self, name, op, inputs=(), device="", nodedef=None):
        self._graph = None
        self._name = name
        self.op = op
        self._inputs = tuple(inputs)
        self._refs = None
        self.device = device
        self._nd = nodedef if nodedef is not None else node_def_pb2.NodeDef()
        self._attr_cache = None
        # True while `_nd` may be shared with a copy (copy-on-write: `copy()` is O(1) per node
        # and the pass manager copies the whole graph before every pass).
        self._shared = False

    def __repr__(self):
        return f"<Node {self._name} op={self.op} inputs={list(self._inputs)}>"

    # --- identity and edges -------------------------------------------------------------
    @property
    def name(self):
        return self._name

    @property
    def inputs(self):
        """NodeDef input strings, data inputs first, then `^control` inputs."""
        return self._inputs

    @inputs.setter
    def inputs(self, values):
        self._inputs = tuple(values)
        self._refs = None
        if self._graph is not None:
            self._graph._touch()

    @property
    def input_refs(self):
        """All inputs as TensorRefs (control ones have port CONTROL)."""
        if self._refs is None:
            self._refs = tuple(parse_input(s) for s in self._inputs)
        return self._refs

    @property
    def data_inputs(self):
        return [r for r in self.input_refs if r.port != CONTROL]

    @property
    def control_inputs(self):
        return [r.node for r in self.input_refs if r.port == CONTROL]

    def add_control_input(self, node_name):
        if "^" + node_name not in self._inputs:
            self.inputs = self._inputs + ("^" + node_name,)

    # --- attrs ----------------------------------------------------------------------------
    @property
    def attr(self):
        """The NodeDef attr map (name -> AttrValue message), mutable in place."""
        self._own()
        return self._nd.attr

    @property
    def attr_view(self):
        """The attr map for reading only (no copy made; it may be shared with copies)."""
        return self._nd.attr

    def get_attr(self, name, default=_NO_DEFAULT):
        """An attr decoded to Python (see tfg.graphdef.attrs); cached until set_attr."""
        cache = self._attr_cache
        if cache is not None and name in cache:
            return cache[name]
        if name not in self._nd.attr:
            if default is _NO_DEFAULT:
                raise TfgInputError(f"node {self._name!r} ({self.op}) has no attr {name!r}")
            return default
        try:
            value = attrcodec.decode(self._nd.attr[name])
        except GraphFormatError as e:  # a corrupt tensor or dtype: name the node that holds it
            raise GraphFormatError(f"node {self._name!r} ({self.op}): attr {name!r}: {e}") \
                from None
        if cache is None:
            cache = self._attr_cache = {}
        cache[name] = value
        return value

    def attr_fact(self, key, compute):
        """`compute(self)`, cached with the decoded attrs: dropped by set_attr/del_attr and
        carried by copies (which share the NodeDef). For what passes derive from attr messages
        again and again: a Const's value, when small enough to decode, is asked for by every
        pattern that reads it. `key` is a tuple, so it never names an attr.

            >>> c.attr_fact(("nbytes",), lambda n: n.get_attr("value").nbytes)  # a [4] float32
            16
        """
        cache = self._attr_cache
        if cache is not None and key in cache:
            return cache[key]
        value = compute(self)
        cache = self._attr_cache  # compute may have decoded attrs into a new cache
        if cache is None:
            cache = self._attr_cache = {}
        cache[key] = value
        return value

    def has_attr(self, name):
        return name in self._nd.attr

    def set_attr(self, name, value, kind=None):
        self._own()
        self._nd.attr[name].CopyFrom(attrcodec.encode(value, kind))
        self._attr_cache = None

    def del_attr(self, name):
        if name in self._nd.attr:
            self._own()
            del self._nd.attr[name]
        self._attr_cache = None

    # --- NodeDef --------------------------------------------------------------------------
    def _own(self):
        """Give this node a private NodeDef before it is written to (copy-on-write)."""
        if self._shared:
            nd = node_def_pb2.NodeDef()
            nd.CopyFrom(self._nd)
            self._nd = nd
            self._shared = False

    def to_proto(self, out=None):
        """This node as a NodeDef (written into `out` when given)."""
        nd = self._nd
        inputs_differ = tuple(nd.input) != self._inputs
        if (inputs_differ or nd.name != self._name or nd.op != self.op
                or nd.device != self.device):
            self._own()
            nd = self._nd
            nd.name = self._name
            nd.op = self.op
            nd.device = self.device
            if inputs_differ:
                del nd.input[:]
                nd.input.extend(self._inputs)
        if out is None:
            out = node_def_pb2.NodeDef()
        out.CopyFrom(nd)
        return out

    @staticmethod
    def from_proto(nd):
        return Node(nd.name, nd.op, tuple(nd.input), nd.device, nodedef=nd)

    def copy(self):
        """An independent Node (not in any graph). The NodeDef is shared until either side
        writes to it, so copying is cheap."""
        n = _new_node(Node)  # no __init__: this runs for every node before every pass
        n._graph = None
        n._name = self._name
        n.op = self.op
        n._inputs = self._inputs
        n._refs = self._refs  # immutable tuples: safe to share
        n.device = self.device
        n._nd = self._nd
        cache = self._attr_cache
        n._attr_cache = dict(cache) if cache else None
        n._shared = self._shared = True
        return n


class Graph:
    """Nodes in file order, plus the GraphDef's versions and function library, verbatim."""

    def __init__(self):
        self._nodes = {}
        self.versions = graph_pb2.GraphDef().versions  # a VersionDef message
        self.library = None  # FunctionDefLibrary message, or None
        self._versions_present = False
        self._extra = b""  # GraphDef fields tfg does not model (debug_info, version, unknown)
        self._version = 0
        self._consumers = None
        self._consumers_version = -1
        self._topo = None  # (version, back-edge node names, order) of the last topo_order()

    # --- access ---------------------------------------------------------------------------
    def __len__(self):
        return len(self._nodes)

    def __iter__(self):
        return iter(self._nodes.values())

    def __contains__(self, name):
        return name in self._nodes

    def __getitem__(self, name):
        try:
            return self._nodes[name]
        except KeyError:
            raise TfgInputError(f"no node named {name!r} in the graph") from None

    def get(self, name, default=None):
        return self._nodes.get(name, default)

    @property
    def nodes(self):
        return list(self._nodes.values())

    def node_names(self):
        return list(self._nodes)

    def _touch(self):
        self._version += 1

    # --- editing --------------------------------------------------------------------------
    def add(self, node):
        """Add a Node object; its name must be new."""
        if node._name in self._nodes:
            raise GraphValidationError(f"duplicate node name {node._name!r}")
        if node._graph is not None and node._graph is not self:
            node = node.copy()
        node._graph = self
        self._nodes[node._name] = node
        self._touch()
        return node

    def add_node(self, name, op, inputs=(), attrs=None, device=""):
        """Create and add a node; `attrs` values are Python values or AttrValue messages."""
        node = Node(name, op, [str(i) for i in inputs], device)
        for key, value in (attrs or {}).items():
            node.set_attr(key, value)
        return self.add(node)

    def remove_node(self, name):
        node = self._nodes.pop(name)
        node._graph = None
        self._touch()
        return node

    def remove_nodes(self, names):
        for name in list(names):
            self.remove_node(name)

    def unique_name(self, base):
        """`base` if unused, else `base_1`, `base_2`, ..."""
        if base not in self._nodes:
            return base
        i = 1
        while f"{base}_{i}" in self._nodes:
            i += 1
        return f"{base}_{i}"

    def rename_node(self, old, new):
        """Rename a node and every reference to it."""
        if new in self._nodes:
            raise GraphValidationError(f"cannot rename {old!r}: {new!r} exists")
        consumers = {c.name for c, _ in self.consumers(old, include_control=True)}
        node = self._nodes[old]
        node._name = new
        # Keep file order: rebuild the dict with the renamed key in place.
        self._nodes = {(new if k == old else k): v for k, v in self._nodes.items()}
        for cname in consumers:
            c = self._nodes[cname]
            c.inputs = [_rename_ref(s, old, new) for s in c.inputs]
        self._touch()

    def replace_input(self, node_name, index, new_input):
        node = self._nodes[node_name]
        ins = list(node.inputs)
        ins[index] = str(new_input)
        node.inputs = ins

    def reroute(self, old, new, include_control=False):
        """Make every consumer of tensor `old` (a TensorRef or string) read `new` instead."""
        old = parse_input(old) if isinstance(old, str) else old
        new_s = str(new) if not isinstance(new, TensorRef) else input_string(new.node, new.port)
        for consumer, idx in list(self.consumers(old.node, include_control=include_control)):
            ref = consumer.input_refs[idx]
            if ref.port == old.port or (include_control and ref.is_control and old.is_control):
                self.replace_input(consumer.name, idx, new_s)

    # --- structure ------------------------------------------------------------------------
    def consumers(self, name, port=None, include_control=False):
        """[(consumer Node, input index)] reading `name` (optionally only output `port`)."""
        if self._consumers_version != self._version:
            index = defaultdict(list)
            for node in self._nodes.values():
                for i, ref in enumerate(node.input_refs):
                    index[ref.node].append((node, i))
            self._consumers = index
            self._consumers_version = self._version
        out = []
        for node, i in self._consumers.get(name, ()):
            ref = node.input_refs[i]
            if ref.is_control and not include_control:
                continue
            if port is not None and ref.port != port:
                continue
            out.append((node, i))
        return out

    def topo_order(self):
        """Nodes so that every input comes first, except NextIteration back edges.

        Raises GraphValidationError naming nodes of a cycle that no NextIteration breaks.
        The order is cached until the graph's edges change (passes ask for it many times).
        """
        nodes = self._nodes
        back = [name for name, node in nodes.items() if node.op in BACK_EDGE_OPS]
        cached = self._topo
        if cached is not None and cached[0] == self._version and cached[1] == back:
            return list(cached[2])  # same edges, same back edges (an op may change in place)
        indeg = {}
        succ = {}
        for name, node in nodes.items():
            n = 0
            refs = node._refs if node._refs is not None else node.input_refs
            for ref in refs:
                src = nodes.get(ref.node)
                if src is None or src.op in BACK_EDGE_OPS:
                    continue
                n += 1
                lst = succ.get(ref.node)
                if lst is None:
                    succ[ref.node] = [name]
                else:
                    lst.append(name)
            indeg[name] = n
        ready = [name for name, d in indeg.items() if d == 0]
        order = []
        append = order.append
        while ready:
            name = ready.pop()
            append(nodes[name])
            for s in succ.get(name, ()):
                d = indeg[s] - 1
                indeg[s] = d
                if d == 0:
                    ready.append(s)
        if len(order) != len(self._nodes):
            stuck = sorted(name for name, d in indeg.items() if d > 0)
            raise GraphValidationError(
                f"cycle not broken by a NextIteration among nodes {stuck[:5]}"
                + (f" (and {len(stuck) - 5} more)" if len(stuck) > 5 else ""))
        self._topo = (self._version, back, order)
        return list(order)

    def copy(self):
        g = Graph()
        g.versions.CopyFrom(self.versions)
        if self.library is not None:
            g.library = type(self.library)()
            g.library.CopyFrom(self.library)
        g._extra = self._extra
        g._versions_present = self._versions_present
        nodes = g._nodes
        for name, node in self._nodes.items():
            n = node.copy()
            n._graph = g
            nodes[name] = n
        if self._topo is not None and self._topo[0] == self._version:
            g._topo = (g._version, self._topo[1], [nodes[n._name] for n in self._topo[2]])
        return g

    # --- GraphDef -------------------------------------------------------------------------
    def to_proto(self):
        gd = graph_pb2.GraphDef()
        if self._extra:
            gd.MergeFromString(self._extra)
        nodes = gd.node
        for node in self._nodes.values():
            node.to_proto(nodes.add())
        if self._versions_present or self.versions.ListFields():
            gd.versions.CopyFrom(self.versions)
        if self.library is not None:
            gd.library.CopyFrom(self.library)
        return gd

    @staticmethod
    def from_proto(gd):
        """Build a Graph from a GraphDef message (duplicate names are an error)."""
        g = Graph()
        nodes = g._nodes
        for nd in gd.node:
            if nd.name in nodes:
                raise GraphValidationError(f"duplicate node name {nd.name!r}")
            node = Node(nd.name, nd.op, tuple(nd.input), nd.device, nodedef=nd)
            node._graph = g
            nodes[nd.name] = node
        if gd.HasField("versions"):
            g.versions.CopyFrom(gd.versions)
            g._versions_present = True
        if gd.HasField("library"):
            g.library = type(gd.library)()
            g.library.CopyFrom(gd.library)
        rest = graph_pb2.GraphDef()
        rest.CopyFrom(gd)
        for field in ("node", "versions", "library"):
            rest.ClearField(field)
        g._extra = rest.SerializeToString()
        return g


def _rename_ref(s, old, new):
    ref = parse_input(s)
    if ref.node != old:
        return s
    return input_string(new, ref.port)
