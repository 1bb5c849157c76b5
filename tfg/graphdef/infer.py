"""Dtype, shape and small-constant inference over a whole graph.

    >>> info = infer(graph)
    >>> info[("dense/MatMul", 0)]
    TensorInfo(dtype=DType.FLOAT, shape=(None, 10), value=None, elems=None, handle=None)
    >>> output_shapes(graph, "reshape")
    [(None, 3136)]

Nodes are visited in topological order (NextIteration back edges ignored). A loop's Merge first
sees only its Enter; once the body is inferred, each Merge is relaxed to the most specific shape
that all its inputs are instances of, and the nodes downstream are inferred again, until nothing
changes. Small integer tensors carry their values, possibly partial (`Shape` of `[?, 7]` is
`[None, 7]`), so that `Reshape`, `Fill`, `Tile` shapes computed in the graph resolve.

Unknown ops, missing attrs and shape conflicts give unknown outputs, never a crash, unless
`strict=True` (then the first one raises, naming the node). `errors`, when a list, collects a
one-line message per problem in either mode.
"""
from collections import deque
from typing import NamedTuple, Optional

import numpy as np

from tfg.errors import GraphValidationError, TfgInputError, UnknownOpError
from tfg.graphdef.graph import BACK_EDGE_OPS
from tfg.graphdef.names import CONTROL, parse_tensor
from tfg.schemas.dtypes import DType
from tfg.schemas.ops import control_flow_names, registry
from tfg.schemas.ops.shape_fns import InferenceContext, ShapeError, merge, relax
from tfg.schemas.ops.signature import _arg_dtypes
from tfg.schemas.ops.value_fns import (
    EVALUATED_OPS, FORWARDING, SHAPE_VALUE_OPS, can_evaluate, evaluate)

_MERGE_OPS = control_flow_names("merge")

MAX_LOOP_ROUNDS = 8


def _queue_handle(node, ctx):
    return (tuple(ctx.attrs.get("component_types", ())), tuple(ctx.attrs.get("shapes", ())))


# How each op that makes a resource describes its handle output (a per-op rule, like a shape
# function: what a variable's or queue's readers infer from).
_HANDLES = {
    "VarHandleOp": lambda node, ctx: (ctx.attrs.get("dtype"), ctx.attrs.get("shape")),
    # Pushes and pops find each other through the stack's name.
    "StackV2": lambda node, ctx: ("stack", node.name),
    "FIFOQueueV2": _queue_handle,
    "RandomShuffleQueueV2": _queue_handle,
    # A lookup table: (value dtype, value shape), what LookupTableFindV2 appends to the keys'.
    **dict.fromkeys(("HashTableV2", "MutableHashTableV2", "MutableHashTableOfTensorsV2",
                     "AnonymousHashTable", "AnonymousMutableHashTable",
                     "AnonymousMutableHashTableOfTensors"),
                    lambda node, ctx: (ctx.attrs.get("value_dtype"),
                                       tuple(ctx.attrs.get("value_shape", ())))),
}
# Ops whose outputs may carry values or resource handles beyond dtype and shape.
_EXTRA_OPS = FORWARDING | EVALUATED_OPS | frozenset(_HANDLES)


class TensorInfo(NamedTuple):
    """What is known about one tensor. `value` is set when every element is known; `elems`
    holds the elements of a small integer tensor with None where unknown; `handle` is the
    (dtype, shape) of the variable or the (dtypes, shapes) of the queue behind a resource."""

    dtype: Optional[DType]
    shape: Optional[tuple]
    value: Optional[np.ndarray] = None
    elems: Optional[tuple] = None
    handle: Optional[tuple] = None


UNKNOWN = TensorInfo(None, None)


def infer(graph, strict=False, shapes=None, errors=None, problems_out=None):
    """{(node name, port): TensorInfo} for every output of every node.

    `shapes` maps tensor names (`x`, `x:0`) or (node, port) to shapes known from outside (e.g.
    feeds); they are merged with what the graph says. `problems_out`, when a dict, gets
    {node name: the error} of each problem.
    """
    overrides = _parse_overrides(shapes)
    order = _order(graph, strict)
    result, problems, stacks = {}, {}, {}
    for node in order:
        _visit(node, result, problems, overrides, stacks)
    _loops(graph, order, result, problems, overrides, stacks)
    # A problem seen while a loop's shapes were still too specific may have gone since.
    found = [problems[n.name] for n in order if n.name in problems]
    if errors is not None:
        errors.extend(str(e) for e in found)
    if problems_out is not None:
        problems_out.update((n.name, problems[n.name]) for n in order if n.name in problems)
    if strict and found:
        raise found[0]
    # Outputs of unknown ops that something reads: present, and unknown.
    for node in order:
        for ref in node.input_refs:
            if ref.port != CONTROL and (ref.node, ref.port) not in result and ref.node in graph:
                result[(ref.node, ref.port)] = UNKNOWN
    return result


def static_conflict(graph, node_name, shapes=None):
    """The ShapeError that the graph's static shapes alone (with `shapes` known from outside,
    e.g. the feeds') give at `node_name`, or None: what tells a graph TensorFlow's importer
    refuses from a kernel that failed on values.

        >>> static_conflict(g, "m")       # m = MatMul(Const [2, 3], Const [4, 5])
        ShapeError("node 'm' (MatMul): MatMul inner dimensions differ: 3 vs 4")
    """
    if node_name not in graph:
        return None
    problems = {}
    try:
        infer(graph, shapes=shapes, problems_out=problems)
    except TfgInputError:  # a graph inference cannot order (a cycle): no verdict
        return None
    err = problems.get(node_name)
    return err if isinstance(err, ShapeError) else None


def output_shapes(graph, node, strict=False):
    """The inferred shapes of every output of `node` (a name or Node)."""
    name = node if isinstance(node, str) else node.name
    info = infer(graph, strict=strict)
    out, port = [], 0
    while (name, port) in info:
        out.append(info[(name, port)].shape)
        port += 1
    return out


def infer_node(node, inputs, strict=False, errors=None):
    """TensorInfos of `node`'s outputs given TensorInfos of its data inputs, in order.

        >>> infer_node(g["mm"], [TensorInfo(DType.FLOAT, (8, 3)), TensorInfo(DType.FLOAT, (3, 5))])
        [TensorInfo(dtype=DType.FLOAT, shape=(8, 5), value=None, elems=None, handle=None)]
    """
    infos, err = _infer_one(node, inputs)
    if err is not None:
        if errors is not None:
            errors.append(str(err))
        if strict:
            raise err
    return infos


def _visit(node, result, problems, overrides, stacks):
    inputs = _inputs(result, node)
    infos, err = _infer_one(node, inputs)
    if node.op in ("StackPushV2", "StackPopV2") and inputs and inputs[0].handle is not None:
        # Pops take the shape of what is pushed on the same stack (while-loop gradients push
        # in the forward loop, which comes first, and pop in the backward one).
        h = inputs[0].handle
        if node.op == "StackPushV2" and len(inputs) > 1 and inputs[1].dtype is not None:
            stacks[h] = relax(stacks[h], inputs[1].shape) if h in stacks else inputs[1].shape
        elif node.op == "StackPopV2" and h in stacks and infos:
            infos[0] = infos[0]._replace(shape=stacks[h])
    problems.pop(node.name, None)
    if err is not None:
        problems[node.name] = err
    _store(result, node, infos, overrides)


def _infer_one(node, inputs):
    """(TensorInfos, None) or (TensorInfos with what is known, the error)."""
    sig = registry._OPS.get(node.op)
    if sig is None:
        return _fail(node, UnknownOpError(f"unknown op {node.op!r} (node {node.name!r})"), None)
    try:
        out_dtypes = []
        for arg in sig.outputs:
            out_dtypes.extend(_arg_dtypes(node, arg, sig))
    except (TfgInputError, TypeError, ValueError) as e:
        return _fail(node, e, None)
    ctx = InferenceContext(node, sig, [i.shape for i in inputs], [i.dtype for i in inputs],
                           [i.value for i in inputs], [i.elems for i in inputs],
                           [i.handle for i in inputs], out_dtypes)
    try:
        out_shapes = list(sig.shape_fn(ctx)) if sig.shape_fn else [None] * len(out_dtypes)
    except Exception as e:  # an odd graph (e.g. an attr of the wrong kind) must not crash us
        if not isinstance(e, TfgInputError):
            e = GraphValidationError(str(e))
        return _fail(node, e, out_dtypes)
    n = len(out_dtypes)
    if len(out_shapes) != n:
        out_shapes = (out_shapes + [None] * n)[:n]
    for i, sh in enumerate(out_shapes):
        if sh is not None and (not isinstance(sh, tuple) or not all(
                d is None or type(d) is int for d in sh)):
            try:  # a shape from a malformed attr (e.g. `shape: true`) is no shape at all
                out_shapes[i] = tuple(None if d is None or d < 0 else int(d) for d in sh)
            except Exception:
                return _fail(node, GraphValidationError(f"output {i} has no valid shape "
                                                        f"({sh!r})"), out_dtypes)
    if "_output_shapes" in node.attr:
        _merge_declared(node, out_shapes)
    if node.op in _EXTRA_OPS:
        values, elems, handles = _extras(node, ctx, inputs, n)
        return [TensorInfo(dt, s, v, e, h)
                for dt, s, v, e, h in zip(out_dtypes, out_shapes, values, elems, handles)], None
    return [TensorInfo(dt, s) for dt, s in zip(out_dtypes, out_shapes)], None


def _merge_declared(node, out_shapes):
    """Merge TensorFlow's `_output_shapes` annotation, when a node carries one."""
    try:
        declared = node.get_attr("_output_shapes")
    except Exception:
        return
    if isinstance(declared, list) and len(declared) == len(out_shapes):
        for i, d in enumerate(declared):
            try:
                out_shapes[i] = merge(out_shapes[i], d)
            except (GraphValidationError, TypeError):
                pass  # the inferred shape wins over a stale or malformed annotation


def _extras(node, ctx, inputs, n):
    values, elems, handles = [None] * n, [None] * n, [None] * n
    op = node.op
    if op in FORWARDING and inputs:
        for i in range(n):
            src = inputs[i] if op == "IdentityN" and i < len(inputs) else inputs[0]
            values[i], elems[i], handles[i] = src.value, src.elems, src.handle
        return values, elems, handles
    if op in _HANDLES:
        handles[0] = _HANDLES[op](node, ctx)
    elif can_evaluate(op):
        if op not in SHAPE_VALUE_OPS and any(i.value is None and i.elems is None
                                             for i in inputs):
            return values, elems, handles
        try:
            with np.errstate(all="ignore"):
                outs = evaluate(ctx)
        except Exception:  # values are an optimization: a failure leaves them unknown
            outs = None
        for i, v in enumerate(outs or ()):
            if i >= n or v is None:
                continue
            if v.dtype == object:
                elems[i] = tuple(v.reshape(-1).tolist())
            else:
                values[i] = v
                if v.dtype.kind in "iu" and v.size <= 64:
                    elems[i] = tuple(int(x) for x in v.reshape(-1))
    return values, elems, handles


def _fail(node, err, out_dtypes):
    msg = str(err)
    if repr(node.name) not in msg:
        msg = f"node {node.name!r} ({node.op}): {msg}"
    err = type(err)(msg) if isinstance(err, TfgInputError) else GraphValidationError(msg)
    return [TensorInfo(dt, None) for dt in (out_dtypes or ())], err


def _inputs(result, node, entry_only=None):
    """TensorInfos of the node's data inputs; with `entry_only` (the graph), back-edge inputs
    (from NextIteration) count as not yet inferred."""
    if entry_only is None:
        return [result.get((r.node, r.port), UNKNOWN) for r in node.input_refs
                if r.port != CONTROL]
    out = []
    for r in node.input_refs:
        if r.port != CONTROL:
            src = entry_only.get(r.node)
            back = src is not None and src.op in BACK_EDGE_OPS
            out.append(UNKNOWN if back else result.get((r.node, r.port), UNKNOWN))
    return out


def _store(result, node, infos, overrides):
    for port, info in enumerate(infos):
        key = (node.name, port)
        if overrides and key in overrides:
            try:
                info = info._replace(shape=merge(info.shape, overrides[key]))
            except GraphValidationError:
                info = info._replace(shape=overrides[key])
        result[key] = info


def _parse_overrides(shapes):
    if not shapes:
        return None
    out = {}
    for k, v in shapes.items():
        ref = parse_tensor(k) if isinstance(k, str) else k
        out[(ref[0], ref[1])] = None if v is None else tuple(v)
    return out


def _order(graph, strict):
    try:
        return graph.topo_order()
    except GraphValidationError:
        if strict:
            raise
    # A cycle no NextIteration breaks: infer what can be ordered, then the rest in file order.
    seen, order = set(), []
    indeg = {n.name: 0 for n in graph}
    succ = {}
    for n in graph:
        for r in n.input_refs:
            src = graph.get(r.node)
            if src is not None and src.op not in BACK_EDGE_OPS:
                indeg[n.name] += 1
                succ.setdefault(r.node, []).append(n.name)
    ready = deque(name for name, d in indeg.items() if d == 0)
    while ready:
        name = ready.popleft()
        seen.add(name)
        order.append(graph[name])
        for s in succ.get(name, ()):
            indeg[s] -= 1
            if indeg[s] == 0:
                ready.append(s)
    return order + [n for n in graph if n.name not in seen]


def _loops(graph, order, result, problems, overrides, stacks):
    """Relax loop Merges against their NextIteration inputs (and stack pops against their
    pushes) until the shapes settle."""
    merges = [n for n in order if n.op in _MERGE_OPS and any(
        (graph.get(r.node) is not None and graph.get(r.node).op in BACK_EDGE_OPS)
        for r in n.input_refs if r.port != CONTROL)]
    pops = [n for n in order if n.op == "StackPopV2"]
    if not merges and not pops:
        return
    position = {n.name: i for i, n in enumerate(order)}
    merge_names = {m.name for m in merges}
    for round_ in range(MAX_LOOP_ROUNDS + 1):
        # Pops first: their shapes come from pushes seen later in the first pass, and the
        # loops they feed must see them before their Merges are relaxed.
        dirty = []
        for p in pops:
            ins = _inputs(result, p)
            h = ins[0].handle if ins else None
            old = result.get((p.name, 0), UNKNOWN)
            if h in stacks and stacks[h] != old.shape:
                result[(p.name, 0)] = old._replace(
                    shape=stacks[h] if round_ < MAX_LOOP_ROUNDS else None)
                dirty.append(p.name)
        _revisit(graph, dirty, position, result, problems, overrides, stacks, merge_names)
        changed = bool(dirty)
        if round_ == 0 or changed:
            # Start the Merges optimistic again (entry values only): a body inferred from a
            # too general start would keep them general.
            dirty = []
            for m in merges:
                infos, _ = _infer_one(m, _inputs(result, m, graph))
                if infos and infos[0].shape != result.get((m.name, 0), UNKNOWN).shape:
                    _store(result, m, infos, overrides)
                    dirty.append(m.name)
            _revisit(graph, dirty, position, result, problems, overrides, stacks, merge_names)
        dirty = []
        for m in merges:
            infos, _ = _infer_one(m, _inputs(result, m))
            old = result.get((m.name, 0), UNKNOWN)
            if infos and infos[0].shape != old.shape:
                if round_ == MAX_LOOP_ROUNDS:  # give up on precision, not on termination
                    infos[0] = infos[0]._replace(shape=relax(old.shape, None))
                _store(result, m, infos, overrides)
                dirty.append(m.name)
        _revisit(graph, dirty, position, result, problems, overrides, stacks, merge_names)
        if not changed and not dirty:
            return


def _revisit(graph, names, position, result, problems, overrides, stacks, skip):
    """Infer again everything downstream of `names` (in topological order)."""
    if not names:
        return
    for node in sorted(_downstream(graph, names), key=lambda n: position[n.name]):
        # Loop Merges reached through a back edge are relaxed by _loops itself, after the
        # body has been brought up to date.
        if node.name not in names and node.name not in skip:
            _visit(node, result, problems, overrides, stacks)


def _downstream(graph, names):
    seen, todo = {}, list(names)
    while todo:
        name = todo.pop()
        for consumer, _ in graph.consumers(name):
            if consumer.name not in seen:
                seen[consumer.name] = consumer
                todo.append(consumer.name)
    return list(seen.values())
