"""The nodes whose outputs may be a reference variable's buffer, in a graph whose kernels write
variables in place (Assign, AssignAdd, AssignSub, Apply*: tfg/kernels/ref_updates.py).

    w/read = Identity(w)                     # w's buffer, not a copy
    Identity(w/read, ^loop_done)             # reads the buffer after the loop's AssignSubs

Two users. The placer's heuristics (place/simulate.py) put a node they may move freely next
to the buffer it reads: a reader on the variable's process sees the buffer as it is when the
reader runs, as in TensorFlow on one device, where one on another task would get a copy made
when the buffer was sent (w/read's value before the loop). And a Session copies such a fetch
(tfg/executor/step.py): a later step's update must not change an array it returned.

A node holds a buffer when it takes a ref-typed output by value (an Identity of a VariableV2,
of a RefEnter, ...), or passes on such a value: a control-flow node or an op without the
fresh_output trait (Identity, Reshape: a view or the input itself).
"""
import functools

from tfg.kernels.ref_updates import IN_PLACE_OPS
from tfg.schemas.ops import all_ops, control_flow_names, has_op, ops_with, signature

_FRESH = ops_with("fresh_output")
_FORWARDING = control_flow_names()


def buffer_holders(graph, written=True):
    """Names of the nodes of `graph` whose outputs may be a variable's buffer; `written`:
    only where a node of `graph` writes one in place (else none), False: any (a later step,
    of another subgraph, may write it)."""
    if written and not any(node.op in IN_PLACE_OPS for node in graph):
        return frozenset()
    producers = _ref_producing_ops()
    todo = [consumer for node in graph if node.op in producers
            for consumer, _ in graph.consumers(node.name) if ref_reads(graph, consumer)]
    found = set()
    while todo:
        node = todo.pop()
        if node.name in found:
            continue
        found.add(node.name)
        for consumer, _ in graph.consumers(node.name):
            if consumer.name not in found and (consumer.op in _FORWARDING
                                               or consumer.op not in _FRESH):
                todo.append(consumer)
    return frozenset(found)


@functools.cache
def _ref_producing_ops():
    """The ops with a ref-typed output (VariableV2, RefEnter, Assign, ...): where a read by
    value starts (a cheap first test: the graph's other nodes are not looked at)."""
    return frozenset(n for n, sig in all_ops().items() if any(a.is_ref for a in sig.outputs))


def buffer_inputs(graph, node, holders):
    """The data inputs of `node` that may be a variable's buffer (`holders`: buffer_holders),
    or that are a variable's ref it takes by value."""
    refs = [ref for ref in node.data_inputs if ref.node in holders]
    return refs + ref_reads(graph, node) if node.name in holders else refs


def ref_reads(graph, node):
    """The data inputs of `node` that are ref-typed outputs its op takes by value."""
    data = node.data_inputs
    if not data or not has_op(node.op):
        return []
    try:
        wanted = signature.input_dtypes(node)
    except Exception:  # a malformed node: the checks that run it will say what is wrong
        return []
    out = []
    for ref, dtype in zip(data, wanted):
        if dtype.is_ref or ref.node not in graph:
            continue
        src = graph[ref.node]
        try:
            given = signature.output_dtypes(src) if has_op(src.op) else ()
        except Exception:
            continue
        if ref.port < len(given) and given[ref.port].is_ref:
            out.append(ref)
    return out
