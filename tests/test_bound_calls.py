"""Bound convolution calls (tfg/kernels/bound.py; `bound_call` in tfg/executor/calls.py):
after a convolution node's first call on oneDNN, the fast program's call runs its bound form
(filter, bias and activation fixed) while the inputs are the bound ones, and the kernel
otherwise. Values bit for bit the unbound calls', on real models and across a change of input
shape, a fed filter, a non-contiguous input, oneDNN turning off and oneDNN failing."""

import numpy as np
import pytest

from case_check import load_run_case
from conftest import FIXTURES
from test_onednn import kept_state, needs_onednn  # noqa: F401 - a fixture, and a mark
from tfg.executor import Session
from tfg.graphdef.attrs import Shape
from tfg.graphdef.graph import Graph
from tfg.kernels import bound, onednn
from tfg.schemas.dtypes import DType

F = DType.FLOAT
RNG = np.random.default_rng(41)


def _bound_nodes(sess):
    """Names of the fast program's nodes whose call is a bound call that has a bound form."""
    names = set()
    for prepared in sess._cache.values():
        for sched in prepared.schedules:
            lists = [sched.fast.calls]
            if sched.guards is not None:  # the calls of each verified feed signature
                lists += list(sched.guards._by_sig.values())
            for calls in lists:
                for call, ctx in _unjoined(calls):
                    if (call.__qualname__.startswith("bound_call")
                            and ctx.cache.get(bound.KEY) is not None):
                        names.add(ctx.name)
    return sorted(names)


def _unjoined(calls):
    """`calls` with each joined call (tfg/executor/conv_chains.py) as the calls it joins."""
    for call, ctx in calls:
        yield from getattr(call, "joined", [(call, ctx)])


class _Unbound:
    """A Session whose steps prepare the plain calls (TFG_BOUND_CALLS=0 while it runs: the
    calls of a feed signature are prepared at its first and second steps)."""

    def __init__(self, graph, monkeypatch, **kw):
        self.sess, self.monkeypatch = Session(graph, **kw), monkeypatch

    def run(self, *args):
        with self.monkeypatch.context() as m:
            m.setenv("TFG_BOUND_CALLS", "0")
            return self.sess.run(*args)


@needs_onednn
@pytest.mark.parametrize("name", ["mobilenetv3small", "nasnet_small", "mobilenetv2",
                                  "efficientnet_small"])
def test_real_models_bound_calls_give_the_unbound_bits(name, monkeypatch):
    meta, g, feeds, expected = load_run_case(FIXTURES / "real_models" / name)
    fetches = meta["fetches"]
    # one thread count on every step ('adaptive' follows the contention meter step by step:
    # another test busy on the other core can move a step to one thread)
    plain = _Unbound(g, monkeypatch, blas_threads=1)
    sess = Session(g, blas_threads=1)
    for _ in range(3):
        got, want = sess.run(fetches, feeds), plain.run(fetches, feeds)
        for a, b, e in zip(got, want, expected):
            assert a.tobytes() == b.tobytes()
            np.testing.assert_allclose(a, e, rtol=meta["rtol"], atol=meta["atol"])
    assert _bound_nodes(sess)
    assert not _bound_nodes(plain.sess)


def _graph(fused_op, fed_filter=False):
    """x -> conv(x, w) [+ b, Relu6] -> y, with w a Const (or a Placeholder)."""
    g = Graph()
    g.add_node("x", "Placeholder", [], {"dtype": F, "shape": Shape((-1, -1, -1, 4))})
    depthwise = "Depthwise" in fused_op
    w = RNG.standard_normal((3, 3, 4, 1 if depthwise else 6)).astype(np.float32)
    if fed_filter:
        g.add_node("w", "Placeholder", [], {"dtype": F, "shape": Shape(w.shape)})
    else:
        g.add_node("w", "Const", [], {"dtype": F, "value": w})
    oc = 4 if depthwise else 6
    b = RNG.standard_normal(oc).astype(np.float32)
    g.add_node("b", "Const", [], {"dtype": F, "value": b})
    attrs = {"T": F, "strides": [1, 1, 1, 1], "padding": b"SAME"}
    if fused_op.startswith("_Fused"):
        attrs.update(fused_ops=[b"BiasAdd", b"Relu6"], num_args=1, epsilon=1e-4)
        g.add_node("y", fused_op, ["x", "w", "b"], attrs)
    else:
        g.add_node("y", fused_op, ["x", "w"], attrs)
    return g, w


OPS = ["Conv2D", "_FusedConv2D", "DepthwiseConv2dNative", "_FusedDepthwiseConv2dNative"]


@needs_onednn
@pytest.mark.parametrize("op", OPS)
def test_bound_calls_follow_shapes_layouts_and_onednn_turning_off(op, monkeypatch,
                                                                  kept_state):
    g, _ = _graph(op)
    sess = Session(g, graph_rewrites=False)
    plain = _Unbound(g, monkeypatch, graph_rewrites=False)
    xs = [RNG.standard_normal(s).astype(np.float32)
          for s in [(2, 7, 7, 4), (2, 7, 7, 4), (1, 5, 9, 4), (2, 7, 7, 4)]]
    xs.append(np.asfortranarray(xs[0]))  # not C-contiguous: the kernel runs
    xs.append(xs[0].astype(np.float64).astype(np.float32))
    for x in xs:
        assert sess.run("y", {"x": x}).tobytes() == plain.run("y", {"x": x}).tobytes()
    assert _bound_nodes(sess) == ["y"]
    onednn.off("a test")  # bound runs give way to the kernels' numpy fallback
    for x in xs[:2]:
        got = sess.run("y", {"x": x})
        np.testing.assert_allclose(got, plain.run("y", {"x": x}), rtol=1e-4, atol=1e-4)


@needs_onednn
@pytest.mark.parametrize("op", ["Conv2D", "_FusedConv2D"])
def test_a_fed_filter_is_never_bound(op):
    g, w = _graph(op, fed_filter=True)
    sess = Session(g, graph_rewrites=False)
    x = RNG.standard_normal((2, 7, 7, 4)).astype(np.float32)
    first = sess.run("y", {"x": x, "w": w})
    w2 = w * 2  # new values, and the same array updated in place
    assert not np.array_equal(sess.run("y", {"x": x, "w": w2}), first)
    w *= 2
    assert sess.run("y", {"x": x, "w": w}).tobytes() == sess.run("y", {"x": x, "w": w2}).tobytes()
    assert _bound_nodes(sess) == []


@needs_onednn
@pytest.mark.parametrize("op", ["_FusedConv2D", "DepthwiseConv2dNative"])
def test_a_failing_onednn_call_in_a_bound_run_falls_back_to_numpy(op, monkeypatch, kept_state,
                                                                  capfd):
    """oneDNN's execute failing under a bound run turns oneDNN off (one stderr line) and the
    step's value comes from the kernel's numpy path."""
    lib = onednn._library()
    failing = [False]
    execute = lib.primitive_execute

    def primitive_execute(*args):
        return 5 if failing[0] else execute(*args)  # 5: a oneDNN error status
    monkeypatch.setattr(lib, "primitive_execute", primitive_execute)  # before binding
    g, _ = _graph(op)
    sess = Session(g, graph_rewrites=False)
    x = RNG.standard_normal((2, 7, 7, 4)).astype(np.float32)
    for _ in range(3):
        want = sess.run("y", {"x": x})
    assert _bound_nodes(sess) == ["y"]
    failing[0] = True
    np.testing.assert_allclose(sess.run("y", {"x": x}), want, rtol=1e-4, atol=1e-4)
    assert onednn._state.get("lib") is None
    assert "oneDNN is off" in capfd.readouterr().err


@needs_onednn
def test_a_fused_convolution_keeps_one_onednn_convolution():
    """_FusedConv2D makes its own oneDNN convolution (with the bias) after its first call and
    lets the base Conv2D's go, its bound form included: one copy of the filter in oneDNN's
    layout per node, not two."""
    import gc

    def live():
        gc.collect()
        return sum(1 for o in gc.get_objects() if type(o) is onednn.Convolution)
    before = live()
    g, _ = _graph("_FusedConv2D")
    sess = Session(g, graph_rewrites=False)
    x = RNG.standard_normal((2, 7, 7, 4)).astype(np.float32)
    for _ in range(3):
        sess.run("y", {"x": x})
    assert _bound_nodes(sess) == ["y"]
    assert live() - before == 1
