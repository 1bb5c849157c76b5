"""Pruning: `prune` keeps the minimal subgraph computing fetches/targets from feeds, and the
`prune` pass (Grappler's model pruner) also bypasses nodes that only forward a value.

    >>> g2 = prune(g, fetches=["c"])          # before: a -> Sqrt b -> Identity c -> Identity d
    >>> sorted(n.name for n in g2)            # after: d is gone
    ['a', 'b', 'c']

Feeds cut their producers off: a fed node that is not already a Placeholder becomes one (same
name, dtype and known shape), so the result runs with the same feeds. Control dependencies
inside the kept set are kept.
"""
from tfg.errors import TfgInputError
from tfg.graphdef.attrs import Shape
from tfg.graphdef.names import CONTROL, TensorRef, parse_tensor
from tfg.graphdef.colocation_refs import fix_colocation_refs
from tfg.passes.manager import register_pass
from tfg.passes.rewrite import PLACEHOLDERS, PassOptions, RewriteContext, SWITCH_OPS, removable
from tfg.schemas.ops import control_flow_names
from tfg.schemas.ops.signature import output_dtypes

_MERGE_OPS = control_flow_names("merge")


def prune(graph, fetches=(), targets=(), feeds=()):
    """A copy of `graph` with only what `fetches` (tensors) and `targets` (nodes) need."""
    fetch_refs = [parse_tensor(f) for f in fetches]
    target_nodes = [t.lstrip("^") for t in targets]
    feed_refs = [parse_tensor(f) for f in feeds]
    for ref in fetch_refs + feed_refs + [TensorRef(t, 0) for t in target_nodes]:
        if ref.node not in graph:
            raise TfgInputError(f"no node named {ref.node!r} in the graph")
    if not fetch_refs and not target_nodes:
        raise TfgInputError("prune needs at least one --fetch or --target")
    fed = {r.node for r in feed_refs}
    keep = fanin(graph, [r.node for r in fetch_refs] + target_nodes, stop=fed)
    out = graph.copy()
    for node in list(out):
        if node.name not in keep:
            out.remove_node(node.name)
    for ref in feed_refs:
        _feed_to_placeholder(graph, out, ref)
    fix_colocation_refs(out)  # TensorFlow's import refuses `loc:@` names of removed nodes
    return out


def fanin(graph, roots, stop=()):
    """Names of `roots` and everything they transitively read (data and control), not looking
    past nodes in `stop`."""
    seen, stack = set(), list(roots)
    while stack:
        name = stack.pop()
        if name in seen:
            continue
        seen.add(name)
        if name in stop:
            continue
        node = graph.get(name)
        if node is None:
            continue
        stack.extend(r.node for r in node.input_refs if r.node not in seen)
    return seen


def _feed_to_placeholder(orig, out, ref):
    node = out.get(ref.node)
    if node is None or node.op in PLACEHOLDERS:
        return
    dtypes = output_dtypes(orig[ref.node])
    if len(dtypes) != 1:
        raise TfgInputError(f"feed {ref.node}:{ref.port}: prune can only turn single-output "
                            f"nodes into placeholders ({node.op} has {len(dtypes)} outputs)")
    ctx = RewriteContext(orig, PassOptions())
    shape = ctx.shape(TensorRef(ref.node, 0))
    attrs = {"dtype": dtypes[0].base}
    if shape is not None:
        attrs["shape"] = Shape(shape)
    device = node.device
    out.remove_node(node.name)
    out.add_node(ref.node, "Placeholder", [], attrs, device)


# --- the model pruner pass --------------------------------------------------------------------

_BYPASS_ALWAYS = frozenset({"StopGradient", "PreventGradient"})


@register_pass("prune", "Model pruner: drop what kept nodes do not need; bypass StopGradient, "
               "forwarding Identity, input-less NoOp and one-input AddN.")
def model_pruner(graph, opts):
    """Grappler's model pruner.

    before: loss <- Identity(i2) <- Identity(i1) <- Mul(x, w);  keep=[loss]
    after:  loss <- Mul(x, w)            (and anything loss does not need is gone)
    """
    changed = False
    if opts.keep:
        roots = set(opts.keep) | set(opts.preserved)
        needed = fanin(graph, roots)
        for node in list(graph):
            if node.name not in needed:
                graph.remove_node(node.name)
                changed = True
    ctx = RewriteContext(graph, opts, stage="ModelPruner")
    for node in ctx.ordered_nodes():
        if graph.get(node.name) is node and _bypassable(ctx, node):
            changed |= _bypass(ctx, node)
    return changed


def _bypassable(ctx, node):
    if ctx.preserved(node.name):
        return False
    op = node.op
    if op == "NoOp":
        return not node.input_refs
    if op == "AddN":
        return len(node.data_inputs) == 1 and not node.control_inputs
    if op not in _BYPASS_ALWAYS and op != "Identity":
        return False
    if node.control_inputs or ctx.control_consumers(node.name) or len(node.data_inputs) != 1:
        return False
    src_ref = node.data_inputs[0]
    src = ctx.graph.get(src_ref.node)
    if src is None:
        return False
    if op == "Identity":
        if src.op in SWITCH_OPS:
            return False  # it carries the branch's liveness for control consumers downstream
        if any(c.op in _MERGE_OPS for c, _ in ctx.consumers(node.name)):
            return False
        dtype = ctx.dtype(src_ref)
        if dtype is None or dtype.is_ref:
            return False  # reading a ref takes a snapshot; bypassing would alias the variable
        if (node.device or src.device) and node.device != src.device:
            return False  # it is the device crossing point
    return True


def _bypass(ctx, node):
    if node.op == "NoOp":
        for consumer in ctx.control_consumers(node.name):
            ctx.set_inputs(consumer, [s for s in consumer.inputs if s != "^" + node.name])
        ctx.remove(node)
        return True
    src = node.data_inputs[0]
    for consumer, idx in ctx.consumers(node.name):
        if consumer.input_refs[idx].port != 0:
            return False
    ctx.reroute(TensorRef(node.name, 0), src)
    if removable(ctx, node) and not ctx.has_consumers(node.name):
        ctx.remove(node)
    return True


__all__ = ["prune", "fanin", "model_pruner", "CONTROL"]
