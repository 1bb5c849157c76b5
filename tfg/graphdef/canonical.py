"""The front door: the one form of a graph that every stage and `Session` take.

TF2 writes computation into a GraphDef's function library: calls (`PartitionedCall`,
`StatefulPartitionedCall`, a node whose op is a function name) and functional control flow
(`If`, `Case`, `While` and their stateless forms). tfg's passes and executor work on the five v1
primitives (Switch, Merge, Enter, Exit, NextIteration), so `canonicalize` inlines every call and
lowers every functional op (tfg.graphdef.functions), and rewrites the `_SwitchN` of a Case that
TensorFlow lowered itself (tfg.graphdef.lower_switch_n), before a stage looks at the graph:

    Before: x = Placeholder; y = While(x, ..., cond=c, body=b); out = Identity(y:1)
    After:  x = Placeholder; y/enter_k = Enter(...) ... y/exit_k = Exit(...);
            y = IdentityN(y/exit_0, y/exit_1); out = Identity(y:1)

Names survive (a call or loop keeps its name as an IdentityN of its results), so fetches,
feeds, `--keep` and `--xs` given for the original graph mean the same in the canonical one.
The library is kept verbatim, so the result is still a GraphDef TensorFlow imports and runs.
A graph with nothing to inline is returned as is (the same object). `tfg place`, `partition`,
`optimize`, `grad`, `run`, `Session` and the worker's RegisterGraph all call it (`prune`,
`convert`, `render` and `diff` show the graph as the file holds it; `info --ops` reports on
both).

A SavedModel's graph was canonicalized when it was read (tfg.graphdef.savedmodel.load_graph,
which keeps a call it cannot inline, such as an unused saver function, and says why in
`graph.saved_model.functions`); it is not inlined again. Any other call that cannot be inlined
is an input error naming the call and the function, except for the stages that only rewrite
the graph (optimize) and `Session` (whose steps that do not need such a call still run): with
strict=False the call stays as an opaque node.
"""
from tfg.graphdef.functions import (  # noqa: F401  (FunctionInliningError: public here)
    FunctionInliningError, inline_functions, is_functional, library_functions)
from tfg.graphdef.lower_switch_n import has_switch_n


def needs_canonicalizing(graph):
    """Whether `graph` holds a call or a functional control-flow op that `canonicalize` would
    replace (a SavedModel's graph never does: it was canonicalized on load)."""
    if getattr(graph, "saved_model", None) is not None:
        return False
    lib = library_functions(graph)
    return any(is_functional(n, lib) for n in graph) or has_switch_n(graph)


def canonicalize(graph, strict=True):
    """`graph` with every function call inlined and functional control flow lowered to the
    v1 primitives (see the module docstring); `graph` itself when there is nothing to do.
    The input graph is never modified. With strict=False a call that cannot be inlined stays
    as it is (for optimize and Session, which need not run it); otherwise it is a
    FunctionInliningError."""
    if not needs_canonicalizing(graph):
        return graph
    return inline_functions(graph, strict=strict).graph
