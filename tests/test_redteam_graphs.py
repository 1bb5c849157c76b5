"""Graphs the fast paths were not written for, against TensorFlow's values
(tools/gen_redteam_graphs.py; tests/fixtures/redteam/): TF1 dynamic_rnn LSTM/GRU with
sequence lengths, raw_rnn, a beam-search loop (top_k, gathers, a dynamic TensorArray), nested
loops with a cond and a ref variable's AssignAdd inside, Keras RNN variants (masking,
return_state, go_backwards, unroll, stacked) and functional While/If frozen with and without
lowering, a conv net; each fed several signatures in a row on ONE session (A, B, A again, trip
counts 0 and 1), with the fast paths on and off (TFG_OUTER_SCHEDULE, TFG_STATIC_GUARDS,
TFG_GEMM_FLOOR), and `tfg grad` where TensorFlow gave a gradient.
"""
import json

import numpy as np
import pytest

import tfg
from conftest import FIXTURES
from tfg.errors import TfgError

ROOT = FIXTURES / "redteam"
CASES = sorted(p.name for p in ROOT.iterdir() if (p / "case.json").exists())
SWITCHES = ("TFG_OUTER_SCHEDULE", "TFG_STATIC_GUARDS", "TFG_GEMM_FLOOR")


def _load(case):
    meta = json.loads((ROOT / case / "case.json").read_text())
    with np.load(ROOT / case / "data.npz") as data:
        return meta, dict(data)


def _check_runs(case, kind):
    meta, data = _load(case)
    graph = tfg.load(str(ROOT / case / "graph.pb"))
    if kind == "grad":
        graph = tfg.grad(graph, ys=meta["grad"]["ys"], xs=meta["grad"]["xs"])
        fetches = ["grad/" + x.split(":")[0] for x in meta["grad"]["xs"]]
        keys = [f"grad/{x}" for x in meta["grad"]["xs"]]
    else:
        fetches, keys = meta["fetches"], [f"fetch/{f}" for f in meta["fetches"]]
    sess = tfg.Session(graph)
    if meta["init"]:
        sess.run(targets=meta["init"])
    for i in range(meta["runs"]):
        feeds = {k: data[f"{i}/feed/{k}"] for k in meta["feeds"]}
        for key, value in zip(keys, sess.run(fetches, feeds)):
            want = data[f"{i}/{key}"]
            assert np.shape(value) == want.shape, (case, i, key)
            # Gradients sum over time steps and batch: a looser tolerance than the forward.
            scale = 10 if kind == "grad" else 1
            np.testing.assert_allclose(value, want, rtol=meta["rtol"] * scale,
                                       atol=meta["atol"] * scale, err_msg=f"{case} run {i} {key}")


def _params():
    out = []
    for case in CASES:
        meta, _ = _load(case)
        for kind in ("run", "grad") if meta["grad"] else ("run",):
            for fast in ("on", "off"):
                out.append(pytest.param(case, kind, fast, id=f"{case}-{kind}-{fast}"))
    return out


@pytest.mark.parametrize("case,kind,fast", _params())
def test_matches_tensorflow(case, kind, fast, monkeypatch):
    for name in SWITCHES:
        monkeypatch.setenv(name, "1" if fast == "on" else "0")
    if fast == "on":
        monkeypatch.delenv("TFG_GEMM_FLOOR")  # the default floor, not a floor of 1
    _check_runs(case, kind)


def test_suite_covers_the_families():
    ops = set()
    for case in CASES:
        ops |= set(_load(case)[0]["ops"])
    for op in ("While", "StatelessIf", "StatelessWhile", "TensorArrayV3", "TopKV2", "AssignAdd",
               "DepthwiseConv2dNative", "TensorListReserve", "LoopCond", "MaxPool"):
        assert op in ops, op
    total = sum(p.stat().st_size for p in ROOT.rglob("*") if p.is_file())
    assert total < 2_000_000


def test_assign_add_in_loops_runs_every_iteration():
    """A ref variable's AssignAdd whose inputs are loop-invariant (the variable and a Const)
    ran once per loop in the compiled loops (it was hoisted: TensorFlow does not mark AssignAdd
    stateful), so the counter read 3 where TensorFlow reads 6."""
    meta, data = _load("tf1_nested_stateful")
    for fast_path in (True, False):
        sess = tfg.Session(tfg.load(str(ROOT / "tf1_nested_stateful" / "graph.pb")),
                           fast_path=fast_path)
        sess.run(targets=meta["init"])
        counts = [float(sess.run("count:0", {k: data[f"{i}/feed/{k}"] for k in meta["feeds"]}))
                  for i in range(meta["runs"])]
        assert counts == [float(data[f"{i}/fetch/count:0"]) for i in range(meta["runs"])]
        assert counts == [6.0, 6.0, 6.0, 9.0, 15.0]


def test_grad_through_loop_with_pruned_exits():
    """raw_rnn frozen by extract_sub_graph keeps only the Exits of the loop variables read
    afterwards; `tfg grad` gave zeros (with a warning) for every gradient through the loop."""
    meta, data = _load("tf1_raw_rnn")
    graph = tfg.load(str(ROOT / "tf1_raw_rnn" / "graph.pb"))
    assert sum(n.op == "Exit" for n in graph) == 2  # of 6 loop variables
    g = tfg.grad(graph, ys=meta["grad"]["ys"], xs=meta["grad"]["xs"])
    feeds = {k: data[f"0/feed/{k}"] for k in meta["feeds"]}
    got = tfg.Session(g).run("grad/raw/kernel", feeds)
    np.testing.assert_allclose(got, data["0/grad/raw/kernel:0"], rtol=1e-3, atol=1e-4)
    assert np.abs(got).max() > 0.1


@pytest.mark.parametrize("static", ["1", "0"])
def test_memory_limit_per_value_not_per_signature(static, monkeypatch):
    """Feeds of ONE signature whose values size the allocations: good A three times (the
    static guards decide on the second), then values over the limit (an int, a float, a loop's
    trip count), then A again: each bad one refused with the limit's message, A exact."""
    monkeypatch.setenv("TFG_STATIC_GUARDS", static)
    meta, data = _load("alloc_by_value")
    sess = tfg.Session(tfg.load(str(ROOT / "alloc_by_value" / "graph.pb")), max_memory="1M")
    good = {k: data[f"0/feed/{k}"] for k in meta["feeds"]}
    want = [data[f"0/fetch/{f}"] for f in meta["fetches"]]
    for _ in range(3):
        np.testing.assert_allclose(sess.run(meta["fetches"], good), want)
    bad = [("by_float:0", {"n:0": np.int32(3), "f:0": np.float32(100.0)}),
           ("by_int:0", {"n:0": np.int32(5000), "f:0": np.float32(0.05)}),
           ("by_loop:0", {"n:0": np.int32(5000), "f:0": np.float32(0.05)})]
    for fetch, feeds in bad:
        for _ in range(2):
            with pytest.raises(TfgError, match="over the memory limit"):
                sess.run(fetch, feeds)
    np.testing.assert_allclose(sess.run(meta["fetches"], good), want)
    other = {k: data[f"3/feed/{k}"] for k in meta["feeds"]}
    np.testing.assert_allclose(sess.run(meta["fetches"], other),
                               [data[f"3/fetch/{f}"] for f in meta["fetches"]])


def test_conv_net_batches_and_memory_limit():
    """The conv net fed batch 1, 4, 1, then a batch over the limit (twice: the second step of
    a signature is where the static guards decide), then batch 4 again."""
    meta, data = _load("conv_net_batches")
    sess = tfg.Session(tfg.load(str(ROOT / "conv_net_batches" / "graph.pb")), max_memory="2M")
    name = meta["feeds"][0]
    fetch = meta["fetches"][0]
    for i in (0, 1, 2, 0, 1):
        np.testing.assert_allclose(sess.run(fetch, {name: data[f"{i}/feed/{name}"]}),
                                   data[f"{i}/fetch/{fetch}"], rtol=2e-4, atol=2e-5)
    big = np.zeros((512, 12, 12, 3), np.float32)
    for _ in range(3):
        with pytest.raises(TfgError, match="over the memory limit"):
            sess.run(fetch, {name: big})
    np.testing.assert_allclose(sess.run(fetch, {name: data[f"1/feed/{name}"]}),
                               data[f"1/fetch/{fetch}"], rtol=2e-4, atol=2e-5)


@pytest.mark.parametrize("fast_path", [True, False])
def test_failing_iteration_leaves_no_state(fast_path):
    """An Assert and a CheckNumerics inside a loop body fail mid-loop (twice each: the second
    step of a signature is where the static guards decide); the next good step is exact."""
    meta, data = _load("tf1_loop_assert")
    sess = tfg.Session(tfg.load(str(ROOT / "tf1_loop_assert" / "graph.pb")), fast_path=fast_path)
    good = {k: data[f"0/feed/{k}"] for k in meta["feeds"]}
    want = [data[f"0/fetch/{f}"] for f in meta["fetches"]]
    for _ in range(2):
        np.testing.assert_allclose(sess.run(meta["fetches"], good), want, rtol=1e-5)
    bad = [({"x:0": np.array([0.5, 2.0, 30.0], np.float32)}, "Condition x < y did not hold"),
           ({"x:0": np.array([0.5, -9.0, 3.0], np.float32)}, "log of x : Tensor had NaN"),
           ({"limit:0": np.float32(2.1)}, "Condition x < y did not hold")]
    for change, says in bad:
        for _ in range(2):
            with pytest.raises(TfgError, match=says):
                sess.run(meta["fetches"], {**good, **change})
    np.testing.assert_allclose(sess.run(meta["fetches"], good), want, rtol=1e-5)
