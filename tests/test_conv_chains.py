"""Consecutive bound convolutions joined into one call (tfg/executor/conv_chains.py, run by
tfg/kernels/onednn_chain.py): values bit for bit the separate calls', on a separable branch
(depthwise -> 1x1 + bias + Relu -> fused depthwise + bias + Relu6 -> 1x1), with joins only
where nothing else reads an inner value, and the nodes' own calls wherever the chain
declines (a new input shape, a non-contiguous input, oneDNN off or failing, inner results
too large to keep), and from threads stepping one Session at once."""
import threading

import numpy as np
import pytest

from test_bound_calls import _bound_nodes
from test_onednn import kept_state, needs_onednn  # noqa: F401 - a fixture, and a mark
from tfg.executor import Session
from tfg.graphdef.attrs import Shape
from tfg.graphdef.graph import Graph
from tfg.kernels import onednn, onednn_chain
from tfg.schemas.dtypes import DType

F = DType.FLOAT
RNG = np.random.default_rng(43)
C = 6
CONV = {"T": F, "strides": [1, 1, 1, 1], "padding": b"SAME"}


def _const(g, name, value):
    g.add_node(name, "Const", [], {"dtype": F, "value": value.astype(np.float32)})


def _separable(extra_reader=None):
    """x -> dw -> pw (+b, Relu) -> dw2 (+b2, Relu6) -> y (1x1), all filters Consts;
    `extra_reader`: an inner node that a second output `z` also reads (nothing joins across
    it)."""
    g = Graph()
    g.add_node("x", "Placeholder", [], {"dtype": F, "shape": Shape((-1, -1, -1, C))})
    _const(g, "w_dw", RNG.standard_normal((3, 3, C, 1)))
    _const(g, "w_pw", RNG.standard_normal((1, 1, C, C)) * 0.3)
    _const(g, "b_pw", RNG.standard_normal(C))
    _const(g, "w_dw2", RNG.standard_normal((3, 3, C, 1)))
    _const(g, "b_dw2", RNG.standard_normal(C))
    _const(g, "w_y", RNG.standard_normal((1, 1, C, C)) * 0.3)
    g.add_node("dw", "DepthwiseConv2dNative", ["x", "w_dw"], dict(CONV))
    g.add_node("pw", "_FusedConv2D", ["dw", "w_pw", "b_pw"],
               dict(CONV, fused_ops=[b"BiasAdd", b"Relu"], num_args=1, epsilon=1e-4))
    g.add_node("dw2", "_FusedDepthwiseConv2dNative", ["pw", "w_dw2", "b_dw2"],
               dict(CONV, fused_ops=[b"BiasAdd", b"Relu6"], num_args=1, epsilon=1e-4))
    g.add_node("y", "Conv2D", ["dw2", "w_y"], dict(CONV))
    if extra_reader:
        g.add_node("z", "Neg", [extra_reader], {"T": F})
    return g


def _joined(sess):
    """The node names of each joined call in the session's fast programs."""
    out = []
    for prepared in sess._cache.values():
        for sched in prepared.schedules:
            lists = [sched._joined] + (list(sched.guards._by_sig.values())
                                       if sched.guards is not None else [])
            for calls in lists:
                out += [[ctx.name for _, ctx in call.joined]
                        for call, _ in calls if hasattr(call, "joined")]
    return out


def _pair(g, monkeypatch):
    """A Session with chains and one without (TFG_CONV_CHAINS=0 while it prepares)."""
    sess = Session(g, graph_rewrites=False)
    monkeypatch.setenv("TFG_CONV_CHAINS", "0")
    apart = Session(g, graph_rewrites=False)
    x = RNG.standard_normal((2, 8, 8, C)).astype(np.float32)
    for _ in range(2):  # its calls are prepared in its first two steps
        apart.run("y", {"x": x})
    monkeypatch.delenv("TFG_CONV_CHAINS")
    return sess, apart


@needs_onednn
def test_a_separable_branch_is_one_call_with_the_separate_calls_bits(monkeypatch):
    sess, apart = _pair(_separable(), monkeypatch)
    xs = [RNG.standard_normal(s).astype(np.float32)
          for s in [(2, 8, 8, C), (2, 8, 8, C), (2, 8, 8, C), (1, 5, 9, C), (2, 8, 8, C)]]
    xs.append(np.asfortranarray(xs[0]))  # not C-contiguous: the nodes' own calls
    for x in xs:
        assert sess.run("y", {"x": x}).tobytes() == apart.run("y", {"x": x}).tobytes()
    assert ["dw", "pw", "dw2", "y"] in _joined(sess)
    assert _joined(apart) == []
    # what the chain runs is each node's bound form (oneDNN), not the numpy fallback
    assert set(_bound_nodes(sess)) == {"dw", "pw", "dw2", "y"}


@needs_onednn
@pytest.mark.parametrize("reader, longest", [("pw", [["dw", "pw"], ["dw2", "y"]]),
                                             ("dw", [["pw", "dw2", "y"]]),
                                             ("dw2", [["dw", "pw", "dw2"]])])
def test_an_inner_value_read_elsewhere_splits_the_chain(reader, longest, monkeypatch):
    """A node's output that another node (z) reads ends a chain there; where z runs in the
    schedule may split the longest chains further, never join across the read value."""
    g = _separable(extra_reader=reader)
    sess, apart = _pair(g, monkeypatch)
    x = RNG.standard_normal((2, 8, 8, C)).astype(np.float32)
    for _ in range(3):
        got, want = sess.run(["y", "z"], {"x": x}), apart.run(["y", "z"], {"x": x})
        for a, b in zip(got, want):
            assert a.tobytes() == b.tobytes()
    found = _joined(sess)
    assert found
    for names in found:
        assert reader not in names[:-1]  # the read value is never an inner one
        assert any(" ".join(names) in " ".join(chain) for chain in longest)


@needs_onednn
def test_fetching_an_inner_value_keeps_it_out_of_the_chain(monkeypatch):
    sess, apart = _pair(_separable(), monkeypatch)
    x = RNG.standard_normal((2, 8, 8, C)).astype(np.float32)
    for _ in range(3):
        got, want = sess.run(["y", "pw"], {"x": x}), apart.run(["y", "pw"], {"x": x})
        assert all(a.tobytes() == b.tobytes() for a, b in zip(got, want))
    assert all("pw" not in names[:-1] for names in _joined(sess))


@needs_onednn
def test_the_chain_declines_and_the_nodes_run(monkeypatch, kept_state, capfd):
    """Inner results over the size kept, oneDNN failing: each step's value is still the
    separate calls'."""
    sess, apart = _pair(_separable(), monkeypatch)
    x = RNG.standard_normal((2, 8, 8, C)).astype(np.float32)
    want = apart.run("y", {"x": x})
    for _ in range(3):
        assert sess.run("y", {"x": x}).tobytes() == want.tobytes()
    chains = []
    orig = onednn_chain.Chain.__call__

    def spy(self, x):
        chains.append(self)
        return orig(self, x)
    monkeypatch.setattr(onednn_chain.Chain, "__call__", spy)
    assert sess.run("y", {"x": x}).tobytes() == want.tobytes()
    (chain,) = chains
    monkeypatch.setattr(chain, "fits", False)
    assert sess.run("y", {"x": x}).tobytes() == want.tobytes()
    monkeypatch.setattr(chain, "fits", True)
    lib = onednn._library()
    monkeypatch.setattr(lib, "primitive_execute", lambda *a: 5)  # a oneDNN error status
    np.testing.assert_allclose(sess.run("y", {"x": x}), want, rtol=1e-4, atol=1e-4)
    assert onednn._state.get("lib") is None
    assert "oneDNN is off" in capfd.readouterr().err


@needs_onednn
def test_two_threads_stepping_one_session_get_their_own_values(monkeypatch):
    sess, apart = _pair(_separable(), monkeypatch)
    xs = [RNG.standard_normal((2, 8, 8, C)).astype(np.float32) for _ in range(4)]
    want = [apart.run("y", {"x": x}).tobytes() for x in xs]
    sess.run("y", {"x": xs[0]})
    sess.run("y", {"x": xs[0]})
    bad = []

    def worker(k):
        for r in range(30):
            i = (k + r) % len(xs)
            if sess.run("y", {"x": xs[i]}).tobytes() != want[i]:
                bad.append(i)
    threads = [threading.Thread(target=worker, args=(k,)) for k in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not bad
