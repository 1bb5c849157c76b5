"""Late Recv scheduling (issue 19, white paper 5.2): `partition(..., schedule_recv="alap")`
adds control edges that start each _Recv just before its value is needed; values stay the
same, the graph stays acyclic across partitions, loops and conds are left alone."""
import subprocess
import sys

import numpy as np
import pytest

import tfg
from conftest import ROOT
from tfg import builder as tb
from tfg.executor.session import Session
from tfg.graphdef import io
from tfg.passes.partition import partition
from tfg.passes.partition.recv_schedule import _edges, _topo, schedule_recvs

PS = "/device:CPU:0"
WORKERS = ("/device:CPU:1", "/device:CPU:2")


def ps_mlp(layers=6, width=256, batch=8):
    """Variables on CPU:0, layers alternating over CPU:1 and CPU:2: every weight crosses."""
    rng = np.random.RandomState(0)
    g = tb.Graph()
    with g:
        with tb.device(WORKERS[0]):
            h = tb.placeholder(tb.float32, [batch, width], name="x")
        for i in range(layers):
            with tb.device(PS):
                w = tb.Variable((rng.randn(width, width) / np.sqrt(width)).astype(np.float32),
                                name=f"w{i}")
            with tb.device(WORKERS[i % 2]):
                h = tb.nn.relu(tb.matmul(h, w), name=f"layer{i}")
        with tb.device(WORKERS[(layers - 1) % 2]):
            tb.reduce_mean(tb.square(h), name="loss")
        tb.global_variables_initializer()
    graph = tfg.grad(g.graph, ys="loss", xs=[f"w{i}/read" for i in range(layers)])
    b = tb.GraphBuilder(graph=graph)
    with b:
        pairs = [(tb.collective.from_graph(f"grad/w{i}/read"), tb.collective.from_graph(f"w{i}"))
                 for i in range(layers)]
        with tb.device(PS):
            tb.train.gradient_descent(0.1, pairs, name="train")
    return b.graph, {"x": rng.randn(batch, width).astype(np.float32)}


def acyclic(graph):
    succ, pred = _edges(graph)
    return _topo(graph, succ, pred) is not None


def run_steps(graph, feeds, steps=3):
    with Session(graph, devices="cpu:3") as sess:
        sess.run(None, targets=["init"])
        out = [sess.run(["loss", "layer5"], feeds=feeds, targets=["train"])
               for _ in range(steps)]
        sess.run("layer5", feeds=feeds, trace=True)
        peaks = sess.last_trace.device_peaks
    return out, max(v for d, v in peaks.items() if not d.endswith("CPU:0"))


def test_alap_delays_weight_recvs_keeps_values_and_lowers_receiver_memory():
    graph, feeds = ps_mlp()
    plain = partition(graph, "cpu:3", schedule_recv="none")
    late = partition(graph, "cpu:3", schedule_recv="alap")
    recvs = {n.name: n for n in late if n.op == "_Recv"}
    delayed = {name: n.control_inputs for name, n in recvs.items() if n.control_inputs}
    assert delayed and not any(n.control_inputs for n in plain if n.op == "_Recv")
    assert acyclic(late)
    # Each anchor is on the Recv's own device.
    for name, anchors in delayed.items():
        assert all(late[a].device == late[name].device for a in anchors)
    # w5's Recv for layer 5 waits for work of the layers before it (not the step's start).
    w5 = [n for n in recvs.values() if n.get_attr("tensor_name").decode().endswith("_w5/read")
          and n.device.endswith(WORKERS[1][-5:])]
    assert w5 and w5[0].control_inputs
    want, peak_plain = run_steps(plain, feeds)
    got, peak_late = run_steps(late, feeds)
    for (a_loss, a_out), (b_loss, b_out) in zip(want, got):
        assert a_loss == b_loss and np.array_equal(a_out, b_out)
    # Forward only: without the edges every weight is received at once; with them about two
    # at a time (256 KiB each) sit on a receiving device.
    assert peak_late < 0.75 * peak_plain, (peak_late, peak_plain)


def test_partitioning_again_adds_nothing_and_none_removes_nothing():
    graph, _ = ps_mlp(layers=3)
    late = partition(graph, "cpu:3", schedule_recv="alap")
    again = partition(late, schedule_recv="alap")
    assert sorted((n.name, tuple(n.inputs)) for n in again) == \
        sorted((n.name, tuple(n.inputs)) for n in late)


def test_loops_and_conds_are_left_alone(tmp_path):
    """Recvs in or after a split while loop get no edges (an edge across frames or from a
    maybe-dead node would be wrong), and the loop still computes the same values."""
    p = subprocess.run([sys.executable, "examples/nested_while/build.py", "-o",
                        str(tmp_path / "loops.pb"), "--feeds", str(tmp_path / "f.npz")],
                       capture_output=True, cwd=ROOT, timeout=120)
    assert p.returncode == 0, p.stderr
    graph = io.load(str(tmp_path / "loops.pb"))
    feeds = {k: v for k, v in np.load(tmp_path / "f.npz").items()}
    plain = partition(graph, "cpu:3", schedule_recv="none")
    late = partition(graph, "cpu:3", schedule_recv="alap")
    assert acyclic(late)
    enters = {n.name for n in late if n.op in ("Enter", "RefEnter", "Switch")}
    for n in late:
        if n.op == "_Recv" and n.control_inputs:
            assert not set(n.control_inputs) & enters
    with Session(plain, devices="cpu:3") as a, Session(late, devices="cpu:3") as b:
        for x, y in zip(a.run(["total", "pairs"], feeds=feeds),
                        b.run(["total", "pairs"], feeds=feeds)):
            np.testing.assert_array_equal(x, y)


def test_schedule_never_closes_a_cycle_across_devices():
    """Ping-pong between two devices: a->b (CPU:1) -> c (CPU:0) -> d (CPU:1), with a weight
    on CPU:0 that d needs. An anchor downstream of the weight's Recv would close a cycle."""
    g = tb.Graph()
    with g:
        with tb.device("/device:CPU:0"):
            x = tb.placeholder(tb.float32, [4, 4], name="x")
            w = tb.constant(np.eye(4, dtype=np.float32), name="w")
            c0 = tb.matmul(x, x, name="a")
        with tb.device("/device:CPU:1"):
            b = tb.matmul(c0, w, name="b")  # uses w early
        with tb.device("/device:CPU:0"):
            c = tb.matmul(b, b, name="c")
        with tb.device("/device:CPU:1"):
            tb.matmul(c, w, name="d")
    late = partition(g.graph, "cpu:2", schedule_recv="alap")
    assert acyclic(late)
    feeds = {"x": np.arange(16, dtype=np.float32).reshape(4, 4) / 16}
    with Session(late, devices="cpu:2") as sess:
        got = sess.run("d", feeds=feeds)
    x = feeds["x"]
    np.testing.assert_allclose(got, (x @ x) @ (x @ x), rtol=1e-5)
    assert schedule_recvs(late) == {}  # already scheduled: nothing more


@pytest.mark.parametrize("flag", ["none", "alap"])
def test_cli_flag(tmp_path, flag):
    graph, _ = ps_mlp(layers=2, width=8)
    io.save(graph, str(tmp_path / "g.pb"))
    p = subprocess.run([sys.executable, "-m", "tfg", "partition", str(tmp_path / "g.pb"),
                        "--devices", "cpu:3", "--schedule-recv", flag, "-o",
                        str(tmp_path / "p.pb")], capture_output=True, cwd=ROOT, timeout=120)
    assert p.returncode == 0, p.stderr
    parted = io.load(str(tmp_path / "p.pb"))
    assert any(n.op == "_Recv" and n.control_inputs for n in parted) == (flag == "alap")
