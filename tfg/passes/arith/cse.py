"""Common-subgraph elimination: nodes with equal op, device, inputs (sorted for commutative
ops), control inputs and attrs compute the same value, so one of them is enough.

    before: a = Mul(x, y); b = Mul(y, x); out = Add(a, b)
    after:  a = Mul(x, y); out = Add(a, a)

Never merged: preserved nodes, Enter/Exit/NextIteration (frame plumbing), stateful ops (random
ops, variables, queues; Assert is the exception: two identical asserts check the same thing),
CheckNumerics (each reports its own message), nodes with reference inputs or outputs, and
nodes whose op tfg has no signature for.
"""
from tfg.errors import TfgError
from tfg.graphdef.names import TensorRef
from tfg.passes.rewrite import RewriteContext
from tfg.schemas.dtypes import DType
from tfg.schemas.ops import control_flow_names, get_op, has_op
from tfg.schemas.ops.signature import output_dtypes

_NEVER = frozenset({"CheckNumerics"}) | control_flow_names(
    "enter", "exit", "next_iteration", "send", "recv", "control_trigger", "loop_cond")
_ALLOWED_STATEFUL = frozenset({"Assert"})
_INPLACE = frozenset({"InplaceUpdate", "InplaceAdd", "InplaceSub"})


_SIG_OK = {}  # id(signature) -> (signature, whether its nodes may be merged at all)


def _op_candidate(op):
    """The op's signature if nodes of `op` may be merged at all, else None (the signature
    checks are made once per signature, not once per node)."""
    if op in _NEVER or not has_op(op):
        return None
    sig = get_op(op)
    hit = _SIG_OK.get(id(sig))
    if hit is None or hit[0] is not sig:
        ok = not (sig.stateful and op not in _ALLOWED_STATEFUL) and not sig.has_ref_inputs
        hit = _SIG_OK[id(sig)] = (sig, ok)
    return sig if hit[1] else None


def _candidate(ctx, node):
    sig = _op_candidate(node.op)
    if sig is None or ctx.preserved(node.name):
        return None
    if not _plain_outputs(node, sig):
        try:  # an attr-typed output may be a ref type, a malformed attr is no candidate
            if any(dt.is_ref for dt in output_dtypes(node)):
                return None
        except TfgError:
            return None
    if any(c.op in _INPLACE for c, _ in ctx.consumers(node.name)):
        return None
    return sig


def _plain_outputs(node, sig):
    """True when every output is one tensor of a fixed dtype, or of a non-ref dtype the node
    sets itself (the common `T`): what output_dtypes would say, without building the list."""
    for a in sig.outputs:
        if a.is_ref or a.number_attr or a.type_list_attr:
            return False
        if a.dtype is None:
            dt = node.get_attr(a.type_attr, None)
            if not isinstance(dt, DType) or dt.is_ref:
                return False  # missing (default), malformed or a ref: the full check decides
    return True


def _key(node, sig):
    data = [str(r) for r in node.data_inputs]
    if sig.is_commutative or sig.is_aggregate:
        data = sorted(data)
    ctrls = tuple(sorted(node.control_inputs))
    attrs = tuple(sorted((k, v.SerializeToString(deterministic=True))
                         for k, v in node.attr_view.items()))
    return (node.op, node.device, tuple(data), ctrls, attrs)


def common_subgraph_elimination(graph, opts):
    """Merge duplicate nodes (in topological order, so whole duplicate chains collapse)."""
    ctx = RewriteContext(graph, opts, stage="CSE")
    seen = {}
    changed = False
    for node in ctx.ordered_nodes():
        sig = _candidate(ctx, node)
        if sig is None:
            continue
        key = _key(node, sig)
        rep = seen.get(key)
        if rep is None or graph.get(rep.name) is not rep:
            seen[key] = node
            continue
        _merge_into(ctx, node, rep)
        changed = True
    return changed


def _merge_into(ctx, dup, rep):
    ports = {ctx.graph[c.name].input_refs[i].port for c, i in ctx.consumers(dup.name)}
    for port in ports:
        ctx.reroute(TensorRef(dup.name, port), TensorRef(rep.name, port))
    for consumer in ctx.control_consumers(dup.name):
        ins = [s for s in consumer.inputs if s != "^" + dup.name]
        ctx.set_inputs(consumer, ins + ["^" + rep.name])
    producers = [r.node for r in dup.input_refs]
    ctx.remove(dup)
    for p in producers:
        ctx.remove_if_dead(p)
