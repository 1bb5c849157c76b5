"""One front door (tfg.graphdef.canonical): graphs that keep TF2's functional control flow (a
Keras LSTM as functional `While` loops carrying TensorLists; a jit-compiled conv block behind a
`StatefulPartitionedCall`; tools/gen_functional_fixtures.py) go through place, partition,
optimize, grad, `Session` and `tfg run` of the partitioned output with TensorFlow's values;
what tfg writes still imports into TensorFlow (TFG_TF_PYTHON) and gives the same values."""
import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import FIXTURES, ROOT
from helpers import numeric_gradient, tfg_cli
from tfg import builder as tb
from tfg.errors import TfgInputError
from tfg.executor.distributed import rpc
from tfg.executor.distributed.local import LocalCluster
from tfg.executor.session import Session
from tfg.graphdef import io
from tfg.graphdef.canonical import FunctionInliningError, canonicalize, needs_canonicalizing
from tfg.graphdef.graph import Node
from tfg.passes.grad import grad
from tfg.passes.manager import optimize
from tfg.passes.partition import partition
from tfg.passes.place import place
from tfg.schemas.proto import attr_value_pb2, function_pb2
from tfg.schemas.proto import worker_pb2 as pb

DIR = FIXTURES / "functional"
EXPECTED = np.load(DIR / "expected.npz")
FUNCTIONAL = {"While", "StatelessWhile", "If", "StatelessIf", "Case", "PartitionedCall",
              "StatefulPartitionedCall"}
CASES = ["lstm_while", "jit_conv"]


def _load(name):
    return io.load(str(DIR / f"{name}.pb"))


def _check(name, got):
    want = EXPECTED[f"{name}/y"]
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_the_fixtures_are_functional():
    ops = {n: {node.op for node in _load(n)} for n in CASES}
    assert "While" in ops["lstm_while"] and "StatefulPartitionedCall" in ops["jit_conv"]
    g = _load("lstm_while")
    body_ops = {nd.op for f in g.library.function for nd in f.node_def}
    assert {"TensorListGetItem", "TensorListSetItem"} <= body_ops  # lists cross the loop


@pytest.mark.parametrize("name", CASES)
def test_canonicalize_lowers_and_keeps_names(name):
    g = _load(name)
    c = canonicalize(g)
    assert c is not g and needs_canonicalizing(g) and not needs_canonicalizing(c)
    assert not {n.op for n in c} & FUNCTIONAL
    assert len(g) == len(_load(name))  # the input is not modified
    assert {n.name for n in g} <= {n.name for n in c}  # x, Identity, the loop/call names
    assert c.library == g.library  # kept verbatim: TensorFlow imports the result
    assert canonicalize(c) is c  # nothing left to do: the same object


@pytest.mark.parametrize("devices", [None, "cpu:3"])
@pytest.mark.parametrize("name", CASES)
def test_session_runs_the_functional_graph(name, devices):
    got = Session(_load(name), devices=devices).run("Identity", {"x": EXPECTED[f"{name}/x"]})
    _check(name, got)


@pytest.mark.parametrize("name", CASES)
def test_library_stages_take_the_functional_graph(name):
    g, x = _load(name), EXPECTED[f"{name}/x"]
    placed = place(g, "cpu:2")
    assert all(n.device.endswith(("CPU:0", "CPU:1")) for n in placed)
    assert not {n.op for n in placed} & FUNCTIONAL
    parts = partition(g, "cpu:3")
    assert {n.op for n in parts} >= {"_Send", "_Recv"}
    _check(name, Session(parts, devices="cpu:3").run("Identity", {"x": x}))
    opt = optimize(g, keep=["Identity"])
    assert not {n.op for n in opt} & FUNCTIONAL
    _check(name, Session(opt).run("Identity", {"x": x}))


@pytest.mark.parametrize("devices", ["cpu:2", "cpu:3"])
@pytest.mark.parametrize("name", CASES)
def test_cli_partition_then_run(name, devices, tmp_path):
    part, x, out = tmp_path / "part.pb", tmp_path / "x.npy", tmp_path / "out.npz"
    tfg_cli("partition", DIR / f"{name}.pb", "--devices", devices, "-o", part)
    assert len({n.device for n in io.load(str(part))}) >= 2  # the graph is really split
    np.save(x, EXPECTED[f"{name}/x"])
    tfg_cli("run", part, "--devices", devices, "--feed", f"x=@{x}", "--fetch", "Identity",
            "-o", out)
    with np.load(out) as got:
        _check(name, got["Identity"])


def test_cli_place_and_grad_of_the_lstm(tmp_path):
    placed = io.loads(tfg_cli("place", DIR / "lstm_while.pb", "--devices", "cpu:2").stdout)
    assert not {n.op for n in placed} & FUNCTIONAL and all(n.device for n in placed)
    x = EXPECTED["lstm_while/x"].astype(np.float64)
    g = grad(_load("lstm_while"), ys=["Identity"], xs=["x"])
    sess, plain = Session(g), Session(_load("lstm_while"))
    got = sess.run("grad/x", {"x": x.astype(np.float32)})
    want = numeric_gradient(lambda v: plain.run("Identity", {"x": v.astype(np.float32)}), x,
                            eps=1e-2)
    np.testing.assert_allclose(got, want, rtol=2e-2, atol=3e-4)
    assert np.abs(want).max() > 0.02  # a vanishing gradient would prove nothing
    p = tfg_cli("grad", DIR / "lstm_while.pb", "--ys", "Identity", "--xs", "x")
    assert "grad/x" in {n.name for n in io.loads(p.stdout)}


def test_grouped_conv_call():
    _check("jit_grouped_conv", Session(_load("jit_grouped_conv"), devices="cpu:2").run(
        "Identity", {"x": EXPECTED["jit_grouped_conv/x"]}))


def _call_of_a_missing_function():
    with tb.Graph() as b:
        x = tb.placeholder(tb.float32, [2], name="x")
        tb.identity(x, name="y")
    g = b.graph
    call = Node("call", "StatefulPartitionedCall", ["x"], "")
    f = attr_value_pb2.NameAttrList(name="nowhere")
    call.set_attr("f", f)
    call.set_attr("Tin", [tb.float32], "list(type)")
    call.set_attr("Tout", [tb.float32], "list(type)")
    g.add(call)
    g.library = function_pb2.FunctionDefLibrary()
    return g


def test_a_call_that_cannot_be_inlined(tmp_path):
    g = _call_of_a_missing_function()
    with pytest.raises(FunctionInliningError, match="'call' calls function 'nowhere'"):
        canonicalize(g)
    # a Session runs the steps that do not need the call (tests/test_session_unrunnable.py)
    np.testing.assert_array_equal(Session(g).run("y", {"x": [1, 2]}), [1, 2])
    with pytest.raises(TfgInputError, match="kernel for op 'StatefulPartitionedCall' .*'call'"):
        Session(g).run("call", {"x": [1, 2]})
    kept = canonicalize(g, strict=False)  # optimize/prune keep it as an opaque node
    assert kept["call"].op == "StatefulPartitionedCall"
    assert optimize(g, keep=["call", "y"])["call"].op == "StatefulPartitionedCall"
    path = tmp_path / "g.pb"
    io.save(g, str(path))
    for args in (["place", "--devices", "cpu:2"], ["partition", "--devices", "cpu:2"],
                 ["grad", "--ys", "y", "--xs", "x"]):
        p = tfg_cli(args[0], path, *args[1:], check=False)
        err = p.stderr.decode()
        assert p.returncode == 2, err
        assert "'nowhere'" in err and "Traceback" not in err
        assert len(err.strip().splitlines()) == 1


def _call_whose_body_colocates_elsewhere():
    """f's body node colocates with `g_body` (a node of another function, as a gradient body
    names its forward body's nodes): once inlined, no node of the graph has that name."""
    with tb.Graph() as b:
        tb.placeholder(tb.float32, [2], name="x")
    g = b.graph
    lib = function_pb2.FunctionDefLibrary()
    f = lib.function.add()
    f.signature.name = "f"
    f.signature.input_arg.add(name="a", type=tb.float32.value)
    f.signature.output_arg.add(name="out", type=tb.float32.value)
    neg = f.node_def.add(name="neg", op="Neg", input=["a"])
    neg.attr["T"].type = tb.float32.value
    neg.attr["_class"].list.s.append(b"loc:@g_body")
    f.ret["out"] = "neg:y:0"
    call = Node("call", "StatefulPartitionedCall", ["x"], "")
    call.set_attr("f", attr_value_pb2.NameAttrList(name="f"))
    call.set_attr("Tin", [tb.float32], "list(type)")
    call.set_attr("Tout", [tb.float32], "list(type)")
    g.add(call)
    g.library = lib
    return g


def test_inlined_colocation_names_stay_in_the_graph(tmp_path):
    """TensorFlow's import refuses a `loc:@` naming no node; place and partition wrote some
    (a GradientTape scan's bodies) until the front door re-rooted them."""
    canon = canonicalize(_call_whose_body_colocates_elsewhere())
    for node in canon:
        av = node.attr_view.get("_class")
        locs = list(av.list.s) if av is not None else []
        assert all(s[len(b"loc:@"):].decode() in canon for s in locs if
                   s.startswith(b"loc:@")), (node.name, locs)
    np.testing.assert_array_equal(Session(canon).run("call", {"x": [1, 2]}), [-1, -2])


# --- TensorFlow imports and runs what tfg writes from a functional graph ------------------
def _tf_python():
    for py in filter(None, [os.environ.get("TFG_TF_PYTHON"), sys.executable]):
        if subprocess.run([py, "-c", "import tensorflow"], capture_output=True,
                          timeout=120).returncode == 0:
            return py
    return None


@pytest.mark.parametrize("name, stage", [("lstm_while", "partition"), ("jit_conv", "optimize")])
def test_tensorflow_runs_the_canonical_output(name, stage, tmp_path):
    tf_python = _tf_python()
    if tf_python is None:
        pytest.skip("needs TensorFlow (TFG_TF_PYTHON)")
    args = ["--devices", "cpu:3"] if stage == "partition" else ["--keep", "Identity"]
    out_graph, feeds, out = tmp_path / "g.pb", tmp_path / "feeds.npz", tmp_path / "tf.npz"
    tfg_cli(stage, DIR / f"{name}.pb", *args, "-o", out_graph)
    np.savez(feeds, **{"x:0": EXPECTED[f"{name}/x"]})
    cmd = [tf_python, str(ROOT / "tools" / "tf_run_graph.py"), str(out_graph), "--feeds",
           str(feeds), "--cpus", "3", "--fetch", "Identity:0", "-o", str(out)]
    if stage == "partition":
        cmd.append("--run-sends")
    p = subprocess.run(cmd, capture_output=True, timeout=300)
    assert p.returncode == 0, p.stderr.decode()[-2000:]
    with np.load(out) as got:
        _check(name, got["Identity:0"])


def test_worker_registers_a_functional_graph():
    """RegisterGraph canonicalizes too: a client other than tfg's master may send a graph whose
    call is still there."""
    g = _load("jit_conv")
    g.remove_node("x")  # fed: as tfg's master registers a part, without the fed producer
    for n in g:
        n.device = "/job:worker/replica:0/task:0/device:CPU:0"
    with LocalCluster(1) as cluster:
        client = rpc.WorkerClient(("worker", 0), cluster.spec.split("=")[1])
        try:
            reg = client.call("RegisterGraph", pb.RegisterGraphRequest(
                session_handle="s", graph_def=g.to_proto(), feeds=["x:0"],
                fetches=["Identity:0"]), timeout=60)
            req = pb.RunGraphRequest(session_handle="s", graph_handle=reg.graph_handle,
                                     step_id=1)
            rpc.encode(EXPECTED["jit_conv/x"], req.send.add(name="x:0").tensor)
            resp = client.call("RunGraph", req, timeout=60)
        finally:
            client.close()
    assert not resp.error.message, resp.error.message
    _check("jit_conv", rpc.decode(resp.recv[0].tensor))
