"""Static shapes for the optimization passes: `{(node, port): shape tuple or None}`.

Uses the project's shape inference (`tfg.graphdef.infer.infer`) when it is there and succeeds;
otherwise a small forward propagation that knows Const, Placeholder/variable shape attrs,
elementwise ops (with broadcasting) and a few shape-preserving ops, which is what the passes
need to decide e.g. that `x * 1` has x's shape.

    >>> static_shapes(g)[("x", 0)]       # x = Placeholder(shape=[2, 3])
    (2, 3)

`LazyShapes(g)` gives the same answers tensor by tensor (what RewriteContext.shape uses): the
passes ask about few tensors, and inferring a whole large graph cost as much as folding it.
"""
import numpy as np

from tfg.errors import TfgError
from tfg.graphdef.infer import infer
from tfg.passes.rewrite import const_shape

_SAME_SHAPE = frozenset({
    "Identity", "Neg", "Abs", "Exp", "Log", "Sqrt", "Rsqrt", "Square", "Reciprocal", "Relu",
    "Relu6", "Elu", "Selu", "LeakyRelu", "Sigmoid", "Tanh", "Softmax", "LogSoftmax", "Sin",
    "Cos", "Floor", "Ceil", "Round", "Sign", "Log1p", "Expm1", "LogicalNot", "StopGradient",
    "Cast", "OnesLike", "ZerosLike", "Softplus", "Erf", "CheckNumerics", "PreventGradient",
    "BiasAdd", "Inv", "IsNan", "IsFinite", "Snapshot", "Rint",
})
_BINARY = frozenset({
    "Add", "AddV2", "Sub", "Mul", "Div", "RealDiv", "FloorDiv", "FloorMod", "Maximum", "Minimum",
    "Pow", "SquaredDifference", "Less", "LessEqual", "Greater", "GreaterEqual", "Equal",
    "NotEqual", "LogicalAnd", "LogicalOr", "DivNoNan",
})


def static_shapes(graph):
    try:
        info = infer(graph)
        return {key: _shape_of(ti) for key, ti in info.items()}
    except Exception:  # noqa: BLE001 - inference is best effort; the fallback is sound
        return _fallback(graph)


_EAGER_OPS = frozenset({"NextIteration", "RefNextIteration", "StackPushV2", "StackPopV2"})


class LazyShapes:
    """`static_shapes` of the graph as it is now, computed per tensor on first `get`.

    The passes ask for the shapes of a few tensors, and whole-graph inference costs about as
    much as the rest of constant folding on a large graph. Inference is per node from its
    inputs, so inferring only the ancestors of what is asked gives the same answers, on a
    snapshot (a cheap copy-on-write copy) so that later edits do not show, as with the eager
    map. Loops (their Merges are relaxed over the whole loop), stacks, cycles and inference
    errors go to the eager `static_shapes` of the snapshot.

        >>> LazyShapes(g).get(("x", 0))     # x = Placeholder(shape=[2, 3])
        (2, 3)
    """

    def __init__(self, graph):
        self._graph = graph.copy()
        self._infos = {}
        self._done = set()
        self._eager = None
        if any(n.op in _EAGER_OPS for n in self._graph):
            self._eager = static_shapes(self._graph)

    def get(self, key, default=None):
        if self._eager is None and key[0] not in self._done and not self._infer(key[0]):
            self._eager = static_shapes(self._graph)
        if self._eager is not None:
            return self._eager.get(key, default)
        info = self._infos.get(key)
        return default if info is None else _shape_of(info)

    def _infer(self, name):
        """Infer `name` and its data ancestors (depth first); False on a cycle or an error."""
        from tfg.graphdef.infer import UNKNOWN, infer_node
        from tfg.graphdef.names import CONTROL
        graph, infos, done, visiting = self._graph, self._infos, self._done, set()
        stack = [(name, False)]
        while stack:
            n, expanded = stack.pop()
            if n in done:
                continue
            node = graph.get(n)
            if node is None:
                done.add(n)
                continue
            refs = [r for r in node.input_refs if r.port != CONTROL]
            if expanded:
                try:
                    outs = infer_node(node, [infos.get((r.node, r.port), UNKNOWN) for r in refs])
                except Exception:  # noqa: BLE001 - as static_shapes: the eager path decides
                    return False
                for port, info in enumerate(outs):
                    infos[(n, port)] = info
                visiting.discard(n)
                done.add(n)
                continue
            if n in visiting:
                return False  # a cycle that no NextIteration breaks
            visiting.add(n)
            stack.append((n, True))
            stack.extend((r.node, False) for r in refs if r.node not in done)
        return True


def _shape_of(ti):
    shape = getattr(ti, "shape", None)
    if shape is None:
        return None
    if hasattr(shape, "dims"):  # an object with dims
        shape = shape.dims
    return None if shape is None else tuple(None if d is None or d < 0 else int(d)
                                            for d in shape)


def _fallback(graph):
    shapes = {}
    try:
        order = graph.topo_order()
    except TfgError:
        return shapes
    for node in order:
        try:
            out = _node_shape(node, shapes)
        except (TfgError, ValueError, TypeError, KeyError, IndexError):
            out = None
        if out is not None:
            shapes[(node.name, 0)] = out
    return shapes


def _node_shape(node, shapes):
    op = node.op
    ins = [shapes.get((r.node, r.port)) for r in node.data_inputs]
    if op in ("Const", "HostConst"):
        return const_shape(node)  # from the message: a splat is never decoded for its shape
    if op in ("Placeholder", "PlaceholderV2", "VariableV2", "Variable"):
        return node.get_attr("shape", None)
    if op == "PlaceholderWithDefault":
        return node.get_attr("shape", None)
    if op in _SAME_SHAPE:
        return ins[0] if ins else None
    if op in _BINARY and len(ins) == 2:
        return broadcast_shapes(ins[0], ins[1])
    if op == "AddN":
        known = [s for s in ins if s is not None]
        return known[0] if known else None
    return None


def broadcast_shapes(a, b):
    """numpy broadcasting of static shapes; None where unknown (None shape: unknown rank)."""
    if a is None or b is None:
        return None
    n = max(len(a), len(b))
    a = (1,) * (n - len(a)) + tuple(a)
    b = (1,) * (n - len(b)) + tuple(b)
    out = []
    for x, y in zip(a, b):
        if x == 1:
            out.append(y)
        elif y == 1 or x == y:
            out.append(x)
        elif x is None or y is None:
            out.append(None)
        else:
            raise ValueError(f"shapes {a} and {b} do not broadcast")
    return tuple(out)


def broadcasts_into(small, big):
    """Whether broadcasting `small` against `big` gives exactly `big` (big fully known)."""
    if small is None or big is None or len(small) > len(big):
        return False
    if any(d is None for d in big):
        return all(d == 1 for d in small)
    small = (1,) * (len(big) - len(small)) + tuple(small)
    return all(s == 1 or s == b for s, b in zip(small, big))
