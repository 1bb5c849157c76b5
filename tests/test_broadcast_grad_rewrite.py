"""A broadcasting op's dynamic gradient reduction as one node in tfg's Session
(tfg/passes/remap_broadcast_grad.py, the _TfgBroadcastGradSum kernel): the same values as
the Shape/BroadcastGradientArgs/Sum/Reshape nodes it replaces, broadcast or not, with their
errors; made for tfg's Session only (`tfg optimize` keeps TensorFlow's ops); and an LSTM's
gradient loop with an unknown batch dimension no longer runs those nodes every iteration."""
import numpy as np
import pytest

import tfg
from tfg import builder as tb
from tfg.errors import TfgRuntimeError
from tfg.executor import Session
from tfg.passes.manager import optimize

B, F, H = 3, 4, 5


def _grad_of(op, shape_x, shape_y, value_x, value_y):
    """`tfg grad` of sum(op(x, y) * w) for x, y placeholders of the given (partly unknown)
    shapes, so that both gradients take the dynamic path."""
    rng = np.random.default_rng(0)
    out = np.broadcast_shapes(value_x.shape, value_y.shape)
    with tb.Graph() as g:
        x = tb.placeholder(tb.float64, shape_x, name="x")
        y = tb.placeholder(tb.float64, shape_y, name="y")
        w = tb.constant(rng.standard_normal(out), name="w")
        tb.reduce_sum(tb.multiply(op(x, y), w), name="loss")
    return tfg.grad(g.graph, "loss", "x,y")


def _ops(graph):
    return [n.op for n in graph.nodes]


@pytest.mark.parametrize("shape_x, shape_y, vx, vy", [
    ([None, F], [None, F], (B, F), (B, F)),        # equal shapes: the gradients themselves
    ([None, F], [None], (B, F), (F,)),             # a bias: summed over the rows
    ([None, 1, F], [None, None, F], (2, 1, F), (2, 3, F)),  # a size-1 axis broadcast
])
@pytest.mark.parametrize("op", [tb.add, tb.multiply])
def test_the_rewritten_gradients_equal_the_nodes_they_replace(shape_x, shape_y, vx, vy, op):
    rng = np.random.default_rng(1)
    feeds = {"x": rng.standard_normal(vx), "y": rng.standard_normal(vy)}
    graph = _grad_of(op, shape_x, shape_y, feeds["x"], feeds["y"])
    assert "BroadcastGradientArgs" in _ops(graph)
    fetches = ["grad/x", "grad/y"]
    plain = Session(graph, graph_rewrites=False).run(fetches, feeds)
    sess = Session(graph)
    got = sess.run(fetches, feeds)
    for a, b, v in zip(got, plain, vx and (vx, vy)):
        assert a.shape == v
        np.testing.assert_array_equal(a, b)


def test_made_for_tfgs_session_only():
    x = np.zeros((B, F))
    graph = _grad_of(tb.add, [None, F], [None], x, np.zeros(F))
    for_tf = optimize(graph, passes=["remap"], keep=["grad/x", "grad/y"])
    assert "_TfgBroadcastGradSum" not in _ops(for_tf)
    for_tfg = optimize(graph, passes=["remap"], keep=["grad/x", "grad/y"],
                       extra={"tfg_kernels": True})
    ops = _ops(for_tfg)
    assert ops.count("_TfgBroadcastGradSum") >= 2  # (x and y; the product with w too)
    assert "BroadcastGradientArgs" not in ops
    assert [n.name for n in for_tfg.nodes if n.op == "Sum"] == ["loss"]


def test_a_kept_sum_is_not_taken():
    x = np.zeros((B, F))
    graph = _grad_of(tb.add, [None, F], [None], x, np.zeros(F))
    kept = [n.name for n in graph.nodes if n.op == "Sum" and "grad" in n.name]
    out = optimize(graph, passes=["remap"], keep=["grad/x", "grad/y"] + kept,
                   extra={"tfg_kernels": True})
    assert _ops(out).count("Sum") >= len(kept)


def test_shapes_that_do_not_broadcast_fail_as_the_nodes_do():
    """x [3, 4] * y [2, 4]: the forward product fails first; the kernel alone names the same
    error as BroadcastGradientArgs."""
    from tfg.kernels.array_ops import broadcast_grad_sum

    class _Ctx:
        xp = np
        attrs = {}
    with pytest.raises(TfgRuntimeError, match="Incompatible shapes"):
        broadcast_grad_sum(_Ctx(), np.zeros((3, 4)), np.array([3, 4]), np.array([2, 4]))
    g = np.ones((3, 4))
    assert broadcast_grad_sum(_Ctx(), g, np.array([3, 4]), np.array([3, 4])) is g
    np.testing.assert_array_equal(
        broadcast_grad_sum(_Ctx(), g, np.array([1, 4]), np.array([3, 4])), np.full((1, 4), 3.0))


def _lstm_grad(batch):
    rng = np.random.default_rng(0)
    w = (rng.standard_normal((F, 4 * H)) * 0.3).astype(np.float32)
    u = (rng.standard_normal((H, 4 * H)) * 0.3).astype(np.float32)
    with tb.Graph() as b:
        n = tb.placeholder(tb.int32, [], name="n")
        x = tb.placeholder(tb.float32, [batch, F], name="x")
        h0 = tb.placeholder(tb.float32, [batch, H], name="h0")

        def body(i, h, c, acc):
            z = tb.add(tb.matmul(x, tb.constant(w)), tb.matmul(h, tb.constant(u)))
            gi, gf, gg, go = tb.split(z, 4, axis=1)
            c2 = tb.add(tb.multiply(tb.sigmoid(gf), c), tb.multiply(tb.sigmoid(gi), tb.tanh(gg)))
            h2 = tb.multiply(tb.sigmoid(go), tb.tanh(c2))
            return i + 1, h2, c2, tb.add(acc, h2)
        _, h, c, acc = tb.while_loop(lambda i, h, c, acc: i < n, body,
                                     [tb.constant(0), h0, tb.zeros_like(h0), tb.zeros_like(h0)],
                                     name="loop")
        tb.identity(acc, name="acc")
    return tfg.grad(b.graph, "acc", "x,h0")


def test_a_gradient_loop_with_an_unknown_batch_runs_no_broadcast_nodes():
    """The LSTM gradient loop built with a None batch dimension: the Session's graph has no
    BroadcastGradientArgs left, and its gradients equal the static-shape graph's."""
    rng = np.random.default_rng(2)
    feeds = {"n": 6, "x": rng.standard_normal((B, F)).astype(np.float32),
             "h0": rng.standard_normal((B, H)).astype(np.float32)}
    dynamic, static = _lstm_grad(None), _lstm_grad(B)
    assert "BroadcastGradientArgs" in _ops(dynamic) and "BroadcastGradientArgs" not in \
        _ops(static)
    fetches = ["grad/x", "grad/h0"]
    sess = Session(dynamic)
    got = sess.run(fetches, feeds)
    ran = _ops(sess.backend.rewrites[0].graph)
    assert "BroadcastGradientArgs" not in ran and "_TfgBroadcastGradSum" in ran
    for a, b in zip(got, Session(static).run(fetches, feeds)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    for a, b in zip(got, Session(dynamic, graph_rewrites=False).run(fetches, feeds)):
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
