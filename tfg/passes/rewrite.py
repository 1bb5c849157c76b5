"""The rewrite engine every optimization pass is written in: patterns with callbacks, applied in
topological order until nothing changes (tinygrad's `graph_rewrite`), plus `RewriteContext`,
the editing API passes use (it keeps its own incremental consumer index, knows the preserved
nodes, constant values and static shapes).

    >>> rules = [(Pat("Neg", [Pat("Neg", [Pat.var("x")], name="inner")]),
    ...           lambda ctx, node, x, inner: ctx.replace_with(node, x))]
    >>> graph_rewrite(ctx, rules)       # before: y = Neg(Neg(x))   after: consumers of y read x
    True

A callback returns True when it changed the graph; it must edit only through the context
(`set_inputs`, `add_node`, `remove`, `replace_with`, ...) so the consumer index stays right.
"""
from collections import defaultdict
from dataclasses import dataclass, field

import numpy as np

from tfg.errors import TfgError
from tfg.graphdef.frames_loops import assign_frames
from tfg.graphdef.names import CONTROL, TensorRef, input_string, parse_input
from tfg.passes.shapes import LazyShapes
from tfg.schemas.tensors import declared_shape, expands
from tfg.schemas.dtypes import DType
from tfg.schemas.ops import control_flow_names, get_op, has_op, ops_with
from tfg.schemas.ops.signature import output_dtypes

SWITCH_OPS = control_flow_names("switch")
# The ops that build loops and conds, which rewrites leave alone.
FRAME_OPS = control_flow_names("switch", "merge", "enter", "exit", "next_iteration", "loop_cond")
PLACEHOLDERS = ops_with("placeholder")
CONST_OPS = frozenset({"Const", "HostConst"})
_ENTER_OPS = control_flow_names("enter")
_COMM_OPS = control_flow_names("send", "recv")
# A Const stored as a few values (a splat) is decoded for a rewrite only up to this many bytes
# beyond its stored size: 16 splats of 1 GiB in a 1 KB file must not become 16 GiB here.
MAX_SPLAT_DECODE_BYTES = 1 << 20


@dataclass
class PassOptions:
    """What every pass is told: preserved node names, fed nodes, target devices, verify flag."""

    keep: frozenset = frozenset()  # names the user asked to keep (explicit fetches/targets)
    feeds: frozenset = frozenset()  # fed node names: never folded, never read as constants
    devices: tuple = ()  # target device specs, e.g. ("cpu:2", "gpu:1")
    verify: bool = False  # check the graph after every pass (tests turn this on)
    preserved: frozenset = frozenset()  # filled by the manager: keep + feeds + placeholders (+sinks)
    extra: dict = field(default_factory=dict)

    @property
    def gpu_targeted(self):
        return any("gpu" in str(d).lower() for d in self.devices)


class Pat:
    """A pattern over a node and (optionally) its data inputs, in order.

    Pat("Mul", [Pat.var("x"), Pat.const("c")], commutative=True) matches Mul(x, c) or Mul(c, x).
    Op patterns bind their Node under `name`; `var`/`const` bind the input's TensorRef.
    """

    def __init__(self, op=None, inputs=None, name=None, commutative=False, const=False,
                 one_consumer=False):
        self.ops = None if op is None else (frozenset([op]) if isinstance(op, str) else
                                            frozenset(op))
        self.inputs = inputs
        self.name = name
        self.commutative = commutative
        self.const = const
        self.one_consumer = one_consumer  # interior node: single data consumer, no control edges

    @staticmethod
    def var(name=None):
        return Pat(name=name)

    @staticmethod
    def const(name=None):
        return Pat(name=name, const=True)

    def match(self, ctx, node, binds=None):
        """Bindings dict when the node matches, else None."""
        binds = {} if binds is None else binds
        if self.ops is not None and node.op not in self.ops:
            return None
        if self.name:
            binds[self.name] = node
        return self._match_inputs(ctx, node, binds)

    def _match_inputs(self, ctx, node, binds):
        if self.inputs is None:
            return binds
        refs = node.data_inputs
        pats = self.inputs
        if len(refs) != len(pats):
            return None
        b = dict(binds)
        if all(_match_ref(ctx, p, r, b) for p, r in zip(pats, refs)):
            return b
        if self.commutative and len(refs) == 2:  # the operands the other way round
            b = dict(binds)
            if _match_ref(ctx, pats[0], refs[1], b) and _match_ref(ctx, pats[1], refs[0], b):
                return b
        return None


def _match_ref(ctx, pat, ref, binds):
    if pat.ops is None and pat.inputs is None:
        if pat.const and ctx.const_value(ref) is None:
            return False
        if pat.name:
            if pat.name in binds and binds[pat.name] != ref:
                return False  # a repeated variable must bind the same tensor
            binds[pat.name] = ref
        return True
    node = ctx.graph.get(ref.node)
    if node is None or ref.port != 0:
        return False
    if pat.ops is not None and node.op not in pat.ops:
        return False  # before is_interior, which walks consumers: most candidates fail here
    if pat.one_consumer and not ctx.is_interior(node):
        return False
    more = pat.match(ctx, node, dict(binds))
    if more is None:
        return False
    binds.update(more)
    return True


def graph_rewrite(ctx, rules, max_rounds=20):
    """Apply `rules` ([(Pat, callback)]) to every node in topological order, repeatedly, until a
    round changes nothing. Returns whether anything changed."""
    by_op, generic = defaultdict(list), []
    for pat, fn in rules:
        if pat.ops is None:
            generic.append((pat, fn))
        else:
            for op in pat.ops:
                by_op[op].append((pat, fn))
    if generic:
        by_op = defaultdict(lambda: generic, {op: r + generic for op, r in by_op.items()})
    changed_any = False
    for _ in range(max_rounds):
        changed = False
        for node in ctx.ordered_nodes():
            for pat, fn in by_op.get(node.op, generic):
                if ctx.graph.get(node.name) is not node:
                    break  # removed or replaced by an earlier rule
                binds = pat.match(ctx, node)
                if binds is None:
                    continue
                binds.pop(pat.name, None)
                if fn(ctx, node, **binds):
                    changed = True
                    break
        changed_any |= changed
        if not changed:
            break
    return changed_any


def const_shape(node, port=0):
    """The shape of a Const's value from its message, without decoding it (None: not a Const
    output, or no declared shape)."""
    if node is None or node.op not in CONST_OPS or port != 0:
        return None
    av = node.attr_view.get("value")
    return None if av is None else declared_shape(av.tensor)


class RewriteContext:
    """Editing API over a Graph, with an incremental consumer index and cached facts."""

    def __init__(self, graph, opts=None, stage="Rewrite"):
        self.graph = graph
        self.opts = opts or PassOptions()
        self.stage = stage
        cons = self._cons = defaultdict(dict)  # producer -> {consumer name: Node}
        has_frames = False
        for node in graph:
            name = node.name
            for src, _ in node.input_refs:
                cons[src][name] = node
            if not has_frames and node.op in _ENTER_OPS:
                has_frames = True
        self._shapes = None
        self.has_frames = has_frames
        self._writes_inputs = None
        self._loop_bodies = None

    # --- facts ------------------------------------------------------------------------------
    def writes_inputs(self):
        """Whether a node of the graph writes an input in place (an op with a ref input:
        Assign, AssignAdd, Apply*), TensorFlow's graph_contains_assign_or_inplace_op_. A read
        of a variable is then its buffer, so a rewrite that forwards a tensor where the node
        computed a new one (x * 1) leaves a Snapshot, a copy, as TensorFlow's does."""
        if self._writes_inputs is None:
            self._writes_inputs = any(has_op(n.op) and get_op(n.op).has_ref_inputs
                                      for n in self.graph)
        return self._writes_inputs

    def in_loop(self, name):
        """Whether the node `name` was in a while loop's frame when the first caller asked
        (tfg/graphdef/frames_loops.py's assignment, made once); False for a node made since,
        and for every node of a graph whose frames do not assign (malformed control flow is
        the executor's to name)."""
        if not self.has_frames:
            return False
        if self._loop_bodies is None:
            try:
                _, frame_of = assign_frames(self.graph, self.graph.topo_order())
            except TfgError:
                frame_of = {}
            self._loop_bodies = {n for n, f in frame_of.items() if f is not None}
        return name in self._loop_bodies

    def preserved(self, name):
        return name in self.opts.preserved

    def consumers(self, name, port=None, include_control=False):
        cons = self._cons.get(name)
        if not cons:
            return []
        out = []
        for node in cons.values():
            for i, (src, p) in enumerate(node.input_refs):
                if src != name or (p == CONTROL and not include_control):
                    continue
                if port is not None and p != port:
                    continue
                out.append((node, i))
        return out

    def has_consumers(self, name):
        return bool(self._cons.get(name))

    def control_consumers(self, name):
        cons = self._cons.get(name)
        if not cons:
            return []
        out = []
        for node in cons.values():
            for src, p in node.input_refs:
                if p == CONTROL and src == name:
                    out.append(node)
        return out

    def is_interior(self, node):
        """A node a rewrite may absorb: one data consumer, no control edges, not preserved."""
        if len(self._cons.get(node.name, ())) != 1:
            return False  # cheap first: high fan-out nodes are never interior
        return (not self.preserved(node.name) and not node.control_inputs
                and len(self.consumers(node.name, include_control=True)) == 1
                and not self.control_consumers(node.name))

    def const_value(self, ref):
        """The numpy value of a Const output (None if not a foldable constant)."""
        if isinstance(ref, str):
            ref = parse_input(ref)
        node = self.graph.get(ref.node)
        if node is None or node.op not in CONST_OPS or ref.port != 0:
            return None
        if node.name in self.opts.feeds:
            return None
        # Cached on the node (and so on its copies in later passes): sizing the message for
        # the splat check and decoding it cost more than the matching around them, and the
        # patterns ask for each Const again and again (benchmarks/bench_optimize.py's graph:
        # 68,728 asks for 4,688 values).
        return node.attr_fact(_DECODED_VALUE, _decoded_value)

    def dtype(self, ref):
        """The DType of a tensor, or None if its op has no signature."""
        node = self.graph.get(ref.node)
        if node is None:
            return None
        try:
            dts = output_dtypes(node)
            return dts[ref.port] if ref.port < len(dts) else None
        except (TfgError, IndexError, KeyError):
            return None

    def shape(self, ref):
        """The static shape (tuple, None entries unknown) of a tensor, or None if unknown."""
        if self._shapes is None:
            self._shapes = LazyShapes(self.graph)
        shape = None if ref.node in self.opts.feeds else const_shape(self.graph.get(ref.node),
                                                                       ref.port)
        if shape is not None:
            return shape
        return self._shapes.get((ref.node, ref.port))

    def full_shape(self, ref):
        s = self.shape(ref)
        return s if s is not None and all(d is not None for d in s) else None

    def invalidate_shapes(self):
        self._shapes = None

    def op_available(self, op):
        """Whether tfg can run `op` (signature and CPU kernel), so a rewrite may introduce it."""
        if not has_op(op):
            return False
        from tfg.kernels.registry import has_kernel  # lazy: kernels import numpy's heavy parts
        return has_kernel(op)

    def ordered_nodes(self):
        try:
            return self.graph.topo_order()
        except TfgError:
            return list(self.graph)

    # --- editing ----------------------------------------------------------------------------
    def set_inputs(self, node, inputs):
        inputs = _dedupe_controls([str(i) for i in inputs])
        for ref in node.input_refs:
            self._cons[ref.node].pop(node.name, None)
        node.inputs = inputs
        for ref in node.input_refs:
            self._cons[ref.node][node.name] = node

    def add_node(self, name, op, inputs=(), attrs=None, device=""):
        node = self.graph.add_node(name, op, _dedupe_controls([str(i) for i in inputs]),
                                   attrs, device)
        for ref in node.input_refs:
            self._cons[ref.node][node.name] = node
        return node

    def remove(self, node):
        for ref in node.input_refs:
            self._cons[ref.node].pop(node.name, None)
        self.graph.remove_node(node.name)

    def new_name(self, base):
        return self.graph.unique_name(base)

    def stage_name(self, stage, name):
        """A fresh name in TensorFlow's style: `<Pass>/<Stage>_<name>`."""
        return self.new_name(f"{self.stage}/{stage}_{name}")

    def reroute(self, old, new, include_control=False):
        """Consumers of tensor `old` read `new` (control consumers of old's node get ^new)."""
        new_s = input_string(new.node, new.port)
        for consumer, idx in self.consumers(old.node, old.port):
            ins = list(consumer.inputs)
            ins[idx] = new_s
            self.set_inputs(consumer, ins)
        if include_control:
            for consumer in self.control_consumers(old.node):
                ins = [s for s in consumer.inputs if s != "^" + old.node]
                self.set_inputs(consumer, ins + ["^" + new.node])

    def control_dep_for(self, ref):
        """A `^name` making something wait for tensor `ref`. A Switch output goes through an
        Identity `ConstantFoldingCtrl/<switch>_<port>`: a control edge from a Switch itself
        would fire on either branch."""
        node = self.graph.get(ref.node)
        if node is None or node.op not in SWITCH_OPS or ref.port == CONTROL:
            return "^" + ref.node
        name = f"ConstantFoldingCtrl/{node.name}_{ref.port}"
        if name not in self.graph:
            attrs = {"T": node.get_attr("T")} if node.has_attr("T") else {}
            self.add_node(name, "Identity", [input_string(node.name, ref.port)], attrs,
                          node.device)
        return "^" + name

    def new_const(self, name, value, dtype, device="", inherit=(), anchors=()):
        """Add a Const. It inherits the control inputs of the Consts in `inherit`; inside loops
        it also waits on `anchors` (tensors) so it lives in their frame."""
        ctrls = []
        for cname in inherit:
            cnode = self.graph.get(cname.node if isinstance(cname, TensorRef) else cname)
            if cnode is not None:
                ctrls += ["^" + c for c in cnode.control_inputs]
        if self.has_frames and not ctrls:
            ctrls += [self.control_dep_for(a) for a in anchors]
        dtype = dtype.base if dtype is not None else DType.from_numpy(np.asarray(value).dtype)
        arr = np.asarray(value, dtype=dtype.np)
        return self.add_node(name, "Const", ctrls, {"dtype": dtype, "value": arr}, device)

    def replace_with(self, node, ref, extra_controls=()):
        """Make `node`'s output 0 be tensor `ref`. A preserved node, or one with control edges,
        becomes Identity(ref) in place (its name survives); otherwise consumers are rewired."""
        keep_in_place = (self.preserved(node.name) or node.control_inputs or extra_controls
                         or self.control_consumers(node.name))
        if keep_in_place:
            dtype = self.dtype(TensorRef(node.name, 0))
            ctrls = ["^" + c for c in node.control_inputs] + list(extra_controls)
            self.morph(node, "Identity", [input_string(ref.node, ref.port)] + ctrls,
                       {"T": dtype} if dtype is not None else {})
        else:
            self.reroute(TensorRef(node.name, 0), ref)
            self.remove(node)
        return True

    def morph(self, node, op, inputs, attrs):
        """Turn `node` into another op in place (name and device kept, attrs replaced)."""
        for key in list(node.attr):
            if not key.startswith("_"):
                node.del_attr(key)
        node.op = op
        for key, value in attrs.items():
            node.set_attr(key, value)
        self.set_inputs(node, inputs)
        return node

    def remove_if_dead(self, name):
        """Remove `name` (and then its inputs, recursively) once nothing reads it."""
        stack = [name]
        while stack:
            node = self.graph.get(stack.pop())
            if node is None or self.has_consumers(node.name) or not removable(self, node):
                continue
            producers = [r.node for r in node.input_refs]
            self.remove(node)
            stack.extend(producers)


_DECODED_VALUE = ("const_value", MAX_SPLAT_DECODE_BYTES)


def _decoded_value(node):
    """A Const node's value as a numpy array; None for a splat that would decode to more than
    MAX_SPLAT_DECODE_BYTES beyond its message, or a value that does not decode."""
    av = node.attr_view.get("value")
    if av is None or expands(av.tensor, MAX_SPLAT_DECODE_BYTES):
        return None
    try:
        value = node.get_attr("value")
    except TfgError:
        return None
    return value if isinstance(value, np.ndarray) else None


def removable(ctx, node):
    """Side-effect-free and not preserved: safe to delete once unused."""
    if ctx.preserved(node.name) or node.op in PLACEHOLDERS:
        return False
    if not has_op(node.op):
        return False
    sig = get_op(node.op)
    return not sig.stateful and node.op not in _COMM_OPS


def _dedupe_controls(inputs):
    data = [s for s in inputs if not s.startswith("^")]
    ctrls, seen = [], set()
    data_nodes = {parse_input(s).node for s in data}
    for s in inputs:
        if s.startswith("^") and s not in seen and s[1:] not in data_nodes:
            seen.add(s)
            ctrls.append(s)
    return data + ctrls
