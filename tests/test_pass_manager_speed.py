"""What the pass manager's speed rests on, tested for sameness: copy-on-write node copies, the
cached topological order, lazily inferred static shapes, rollback with shared NodeDefs, and the
caller's graph left untouched."""
import numpy as np
import pytest

from test_pass_manager import G
from tfg.errors import GraphValidationError, TfgRuntimeError
from tfg.graphdef.graph import Graph
from tfg.passes.shapes import LazyShapes, static_shapes
from tfg.passes.manager import optimize, register_pass
from tfg.schemas.dtypes import DType

F = DType.FLOAT


def _mlp_with_cond():
    from tfg import builder as tb

    with tb.Graph() as g:
        x = tb.placeholder("float32", [4, 3], name="x")
        w = tb.constant(np.ones((3, 2), np.float32), name="w")
        h = tb.relu(tb.bias_add(tb.matmul(x, w), tb.constant(np.zeros(2, np.float32))))
        s = tb.reshape(h, tb.stack([tb.shape(h)[0], -1]), name="flat")
        p = tb.placeholder("bool", [], name="p")
        tb.identity(tb.cond(p, lambda: s * 2.0, lambda: s - 1.0), name="out")
    return g.graph


def test_copies_share_nodedefs_until_one_side_writes():
    g = G().ph("x", [2]).op("y", "Neg", "x").g
    c = g.copy()
    assert c["y"]._nd is g["y"]._nd  # shared until written
    c["y"].set_attr("T", DType.DOUBLE)
    assert g["y"].get_attr("T") == F and c["y"].get_attr("T") == DType.DOUBLE
    c["y"].attr["_note"].s = b"written through the map"  # the mutable map owns first
    assert "_note" not in g["y"].to_proto().attr
    g["y"].del_attr("T")
    assert c["y"].has_attr("T") and not g["y"].has_attr("T")
    c["y"].inputs = ["x", "^x"]
    assert list(g["y"].to_proto().input) == ["x"]
    assert list(c["y"].to_proto().input) == ["x", "^x"]


def test_topo_order_follows_edits_and_ops_changed_in_place():
    g = G().ph("x", [2]).op("a", "Neg", "x").op("b", "Neg", "a").op("c", "Neg", "b").g
    first = [n.name for n in g.topo_order()]
    assert first.index("a") < first.index("b") < first.index("c")
    g["a"].inputs = ["c"]  # now a cycle a -> b -> c -> a ...
    g["b"].inputs = ["x"]  # ... broken again: b, c, a
    order = [n.name for n in g.topo_order()]
    assert order.index("b") < order.index("c") < order.index("a")
    loop = (G().ph("x", [2]).op("a", "Neg", "c").op("b", "Neg", "a")
            .op("c", "NextIteration", "b").g)
    order = [n.name for n in loop.topo_order()]  # a <- c is a back edge: no cycle
    assert order.index("a") < order.index("b") < order.index("c")
    loop["c"].op = "Neg"  # no edge changed, but now nothing breaks the cycle
    with pytest.raises(GraphValidationError):
        loop.topo_order()
    loop["c"].op = "NextIteration"
    assert [n.name for n in loop.topo_order()] == order
    g = loop
    c = g.copy()
    assert [n.name for n in c.topo_order()] == order
    assert all(n._graph is c for n in c.topo_order())  # the copy's nodes, not g's


def test_lazy_shapes_answer_as_whole_graph_inference():
    g = _mlp_with_cond()
    eager = static_shapes(g)
    lazy = LazyShapes(g)
    keys = list(eager) + [("missing", 0), ("flat", 7)]
    for key in reversed(keys):  # asked in another order than inference visits them
        assert lazy.get(key) == eager.get(key), key
    assert lazy._eager is None  # answered per tensor, not by whole-graph inference


def test_lazy_shapes_of_a_loop_are_the_eager_ones():
    from tfg import builder as tb

    with tb.Graph() as g:
        _, acc = tb.while_loop(lambda i, a: i < 3, lambda i, a: (i + 1, a * 2.0),
                               [tb.constant(0), tb.constant(np.ones((2, 5), np.float32))])
        tb.identity(acc, name="out")
    eager = static_shapes(g.graph)
    lazy = LazyShapes(g.graph)
    assert all(lazy.get(k) == v for k, v in eager.items())
    assert lazy.get(("out", 0)) == (2, 5)


def test_lazy_shapes_are_a_snapshot():
    g = G().ph("x", [2, 3]).op("y", "Neg", "x").op("z", "Neg", "y").g
    lazy = LazyShapes(g)
    g["y"].inputs = ["w"]  # edited after the snapshot: answers describe the graph as it was
    g.add_node("w", "Placeholder", [], {"dtype": F})
    assert lazy.get(("z", 0)) == (2, 3)
    assert lazy.get(("w", 0)) is None


def test_const_values_cached_on_nodes_follow_writes_and_copies():
    """RewriteContext.const_value is cached with the node's decoded attrs: a new value is read
    after set_attr, a copy keeps its own answer after the original is rewritten, and a splat
    too large to decode stays refused however often it is asked for."""
    from tfg.passes.rewrite import MAX_SPLAT_DECODE_BYTES, RewriteContext
    from tfg.graphdef.names import TensorRef

    g = G().const("c", [1.0, 2.0]).op("y", "Neg", "c").g
    ctx = RewriteContext(g)
    assert ctx.const_value(TensorRef("c", 0)).tolist() == [1.0, 2.0]
    copy = g.copy()
    g["c"].set_attr("value", np.array([3.0, 4.0], np.float32))
    assert ctx.const_value(TensorRef("c", 0)).tolist() == [3.0, 4.0]
    assert RewriteContext(copy).const_value(TensorRef("c", 0)).tolist() == [1.0, 2.0]
    ctx.morph(g["c"], "Neg", ["y"], {"T": F})  # no longer a Const: no value
    assert ctx.const_value(TensorRef("c", 0)) is None

    splat = G().const("s", np.float32(1)).g
    t = splat["s"].attr["value"].tensor
    t.tensor_shape.dim.add().size = MAX_SPLAT_DECODE_BYTES  # 4 bytes each: 4 MiB from one
    splat["s"].set_attr("dtype", F)  # drops what was decoded before the edit above
    ctx = RewriteContext(splat)
    assert [ctx.const_value(TensorRef("s", 0)) for _ in range(3)] == [None] * 3
    assert RewriteContext(splat.copy()).const_value(TensorRef("s", 0)) is None


def test_optimize_leaves_the_callers_graph_alone():
    g = _mlp_with_cond()
    before = g.to_proto().SerializeToString(deterministic=True)
    optimize(g)
    assert g.to_proto().SerializeToString(deterministic=True) == before


@register_pass("test_writes_then_fails", "test pass: edits attrs and inputs, then raises")
def _writes_then_fails(graph, opts):
    for node in graph:
        if node.op == "Neg":
            node.set_attr("T", DType.DOUBLE)
            node.attr["_scribble"].i = 1
            node.inputs = list(node.inputs) + ["^x"]
    raise TfgRuntimeError("deliberate")


def test_rollback_with_shared_nodedefs_restores_everything():
    g = G().ph("x", [2]).op("y", "Neg", "x").op("z", "Neg", "y").g
    rows = []
    out = optimize(g, passes=["test_writes_then_fails"], report=rows)
    assert rows[0]["error"] and not rows[0]["changed"]
    assert out.to_proto() == g.to_proto()
    assert out["y"].get_attr("T") == F and "_scribble" not in out["z"].to_proto().attr


def test_gc_is_back_on_after_optimize_even_when_a_pass_raises():
    import gc

    @register_pass("test_raises_internal", "test pass: raises a non-tfg error")
    def _raises(graph, opts):
        raise KeyError("boom")

    assert gc.isenabled()
    optimize(G().ph("x", [2]).op("y", "Neg", "x").g, passes=["test_raises_internal"])
    assert gc.isenabled()
    with pytest.raises(KeyError):
        optimize(G().ph("x", [2]).op("y", "Neg", "x").g, passes=["test_raises_internal"],
                 verify=True)
    assert gc.isenabled()


def test_empty_graph_and_copy_of_empty():
    g = Graph()
    assert optimize(g).to_proto() == g.to_proto()
    assert g.copy().topo_order() == []
