"""The dependency optimizer (Grappler's DependencyOptimizer): fewer control edges and fewer
nodes that exist only to carry them.

- a side-effect-free node whose outputs nobody reads, only waits on, becomes a NoOp
      before: a = Neg(x); t = NoOp(^a)         after: a = NoOp(^x); t = NoOp(^a)
- a NoOp (or an Identity read only through control edges) is bypassed when that does not add
  edges or device crossings: its consumers wait on its inputs directly
      before: a = NoOp(^x); t = NoOp(^a)       after: t = NoOp(^x)
- an Identity read only as data is bypassed (not across devices or frames, never of a ref)
      before: i = Identity(s:1); a = Neg(i)    after: a = Neg(s:1)
- transitive reduction: a control edge ^c into n goes when n already depends on c through
  another input      before: b = Neg(a); n = Exp(b, ^a)      after: n = Exp(b)

Never touched: preserved nodes, frame ops (Enter/Exit/Merge/Switch/NextIteration/LoopCond),
Assert, CheckNumerics, ControlTrigger, stateful ops, nodes reading a Switch (a control edge from
a Switch fires on either branch), and paths through Merges or frame ops.
"""
from tfg.errors import TfgError
from tfg.graphdef.names import TensorRef
from tfg.passes.manager import register_pass
from tfg.passes.rewrite import FRAME_OPS, SWITCH_OPS, RewriteContext
from tfg.schemas.ops import control_flow_names, get_op, has_op
from tfg.schemas.ops.signature import ref_input_indices

_NEVER = frozenset({"Assert", "CheckNumerics", "Print", "PrintV2"}) | control_flow_names()
_ENTER_EXIT = control_flow_names("enter", "exit", "next_iteration")
_FORWARDERS = frozenset({"NoOp", "Identity"})
_SEARCH_LIMIT = 2000  # ancestors visited per control edge before giving up (keeps it linear)


@register_pass("dependency", "Dependency optimizer: nodes only waited on become NoOps, NoOps "
               "forwarding control edges are bypassed, redundant control edges dropped.")
def dependency_optimizer(graph, opts):
    """Run the three rewrites; returns whether anything changed.

    >>> optimize(g, passes=["dependency"])   # before: n = Exp(Neg(a), ^a)  after: n = Exp(Neg(a))
    """
    ctx = RewriteContext(graph, opts, stage="DependencyOptimizer")
    changed = False
    for node in list(graph):
        if graph.get(node.name) is node and _to_noop(ctx, node):
            changed = True
    for node in list(graph):
        if graph.get(node.name) is node and _bypass(ctx, node):
            changed = True
    for node in list(graph):
        if graph.get(node.name) is node and _bypass_identity(ctx, node):
            changed = True
    changed |= transitive_reduction(ctx)
    return changed


def _bypass_identity(ctx, node):
    """Identity(x) read only as data -> its consumers read x (as Grappler does), when it
    crosses no device or frame, its control inputs move to a single consumer, and x is not a ref (a read of a
    variable is a snapshot: it must stay)."""
    if node.op != "Identity" or ctx.preserved(node.name):
        return False
    if len(node.data_inputs) != 1 or ctx.control_consumers(node.name):
        return False
    ref = node.data_inputs[0]
    src = ctx.graph.get(ref.node)
    if src is None or src.op in _ENTER_EXIT or src.device != node.device:
        return False
    dtype = ctx.dtype(ref)
    if dtype is None or dtype.is_ref:
        return False
    consumers = ctx.consumers(node.name)
    if not consumers or any(c.device != node.device for c, _ in consumers):
        return False
    ctrls = ["^" + c for c in node.control_inputs]
    if ctrls and (len(consumers) > 1 or consumers[0][0].op in FRAME_OPS):
        return False  # moving its control inputs would add edges or change frames
    ctx.reroute(TensorRef(node.name, 0), ref)
    for consumer, _ in consumers:
        ctx.set_inputs(consumer, list(consumer.inputs) + ctrls)
    ctx.remove(node)
    return True


def _side_effect_free(ctx, node):
    if node.op in _NEVER or ctx.preserved(node.name) or not has_op(node.op):
        return False
    if get_op(node.op).stateful or _writes_ref(node):
        return False  # Assign and the Apply* ops are not "stateful" but write through refs
    for ref in node.input_refs:  # reading a Switch: its deadness must flow through data
        src = ctx.graph.get(ref.node)
        if src is None or src.op in SWITCH_OPS:
            return False
    return True


def _writes_ref(node):
    try:
        return bool(ref_input_indices(node))
    except TfgError:
        return True


def _to_noop(ctx, node):
    if node.op == "NoOp" or not ctx.has_consumers(node.name):
        return False
    if ctx.consumers(node.name) or not _side_effect_free(ctx, node):
        return False  # someone reads a value
    ctrls = ["^" + r.node for r in node.input_refs]
    ctx.morph(node, "NoOp", ctrls, {})
    return True


def _bypass(ctx, node):
    if node.op not in _FORWARDERS or ctx.consumers(node.name):
        return False
    if not _side_effect_free(ctx, node):
        return False
    outs = ctx.control_consumers(node.name)
    if not outs:
        return False
    ins = list(dict.fromkeys(r.node for r in node.input_refs))
    if any(o.op in FRAME_OPS for o in outs):
        return False  # a control edge into a Merge or Enter changes frames
    if len(ins) * len(outs) > len(ins) + len(outs):
        return False
    dev = node.device
    before = sum(ctx.graph[i].device != dev for i in ins) + sum(o.device != dev for o in outs)
    after = sum(ctx.graph[i].device != o.device for i in ins for o in outs)
    if after > before:
        return False
    for o in outs:
        kept = [s for s in o.inputs if s != "^" + node.name]
        ctx.set_inputs(o, kept + ["^" + i for i in ins if i != o.name])
    ctx.remove(node)
    return True


def transitive_reduction(ctx):
    """Drop ^c from n when c is already an ancestor of another input of n (not through frames)."""
    changed = False
    for node in list(ctx.graph):
        ctrls = node.control_inputs
        if not ctrls or node.op in FRAME_OPS or len(node.input_refs) < 2:
            continue
        drop = set()
        for c in ctrls:
            src = ctx.graph.get(c)
            if src is None or src.op in FRAME_OPS:
                continue
            others = [r.node for r in node.input_refs if r.node != c and r.node not in drop]
            if _reaches(ctx, c, others):
                drop.add(c)
        if drop:
            ctx.set_inputs(node, [s for s in node.inputs if s[1:] not in drop
                                  or not s.startswith("^")])
            changed = True
    return changed


def _reaches(ctx, target, starts):
    """Whether `target` is an ancestor of (or one of) `starts`, not walking through frame ops."""
    seen, stack = set(), list(starts)
    while stack:
        name = stack.pop()
        if name == target:
            return True
        if name in seen:
            continue
        seen.add(name)
        if len(seen) > _SEARCH_LIMIT:
            return False
        node = ctx.graph.get(name)
        if node is None or node.op in FRAME_OPS:
            continue
        stack.extend(r.node for r in node.input_refs)
    return False
