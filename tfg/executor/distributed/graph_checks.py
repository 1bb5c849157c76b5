"""The checks a worker runs on a graph a master registers, as `tfg run` checks a whole graph
(tfg.graphdef.validate): attrs, arity and edge dtypes against the op signatures. A registered
graph is one task's part: a fed tensor's producer may be absent (the feed comes with RunGraph),
so inputs naming a fed node are not followed; any other missing input is refused.

    >>> check_registered(part, feed_names=["x:0"])        # x is fed: fine
    >>> check_registered(part_with_a_typo, feed_names=[])
    GraphValidationError: node 'y' (Neg): input 'nowhere' names no node of the registered graph
"""
from tfg.errors import GraphValidationError
from tfg.graphdef import validate as V
from tfg.graphdef.names import parse_tensor
from tfg.schemas.ops import registry


def check_registered(graph, feed_names):
    nodes = {n.name: n for n in graph}
    fed = {parse_tensor(n).node for n in feed_names}
    for node in graph:
        missing = [r.node for r in node.input_refs if r.node and r.node not in nodes]
        for name in missing:
            if name not in fed:
                raise GraphValidationError(f"node {node.name!r} ({node.op}): input {name!r} "
                                           "names no node of the registered graph")
        if not missing:
            V._check_inputs(node, nodes)
        sig = registry._OPS.get(node.op)
        if sig is None:  # left to the kernel lookup, as `tfg run` does
            continue
        V._check_attrs(node, sig)
        V._check_arity(node, sig)
        if not missing:
            V._check_edges(node, sig, nodes)
