"""Cluster execution against real `tfg worker` processes on loopback: values equal to a local
run (split while loops, variables across tasks, large tensors), the CLI end to end, auth.

Failures (killed / stopped workers, restart and resume) are in test_cluster_failures.py.
"""
import json
import os
import signal
import subprocess
import sys
import time

import grpc
import numpy as np
import pytest

from conftest import conformance_cases
from helpers import tfg_cli
from tfg import builder as tb
from tfg.errors import TfgInputError, TfgRuntimeError
from tfg.executor.distributed import rpc
from tfg.executor.distributed.local import LocalCluster, free_port
from tfg.executor.distributed.spec import bind_address, task_from_tf_config
from tfg.executor.session import Session
from tfg.graphdef import io

T0, T1 = "/job:worker/task:0", "/job:worker/task:1"


@pytest.fixture(scope="module")
def cluster():
    with LocalCluster(2) as c:
        yield c


def split_loop_graph(n=7):
    """A while loop whose body runs on task 1 and whose counter and predicate run on task 0."""
    g = tb.Graph()
    with g:
        with tb.device(T0):
            x = tb.placeholder(tb.float32, [3], name="x")
            i0 = tb.constant(0, name="i0")

        def cond(i, acc):
            with tb.device(T0):
                return tb.less(i, n)

        def body(i, acc):
            with tb.device(T0):
                i1 = i + 1
            with tb.device(T1):
                acc1 = acc * 0.5 + tb.cast(i, tb.float32)
            return i1, acc1

        i_out, acc = tb.while_loop(cond, body, [i0, x])
        with tb.device(T1):
            tb.identity(acc, name="out")
        with tb.device(T0):
            tb.identity(i_out, name="count")
    return g.graph


def train_graph():
    """Linear regression with w on task 0 and b, the loss and its update on task 1."""
    rng = np.random.RandomState(0)
    g = tb.Graph()
    with g:
        with tb.device(T0):
            x = tb.placeholder(tb.float32, [16, 3], name="x")
            w = tb.Variable(rng.randn(3, 1).astype(np.float32), name="w")
            xw = tb.matmul(x, w)
        with tb.device(T1):
            y = tb.placeholder(tb.float32, [16, 1], name="y")
            b = tb.Variable(np.zeros((1,), np.float32), name="b")
            err = xw + b - y
            tb.reduce_mean(tb.square(err), name="loss")
            g_b = tb.multiply(tb.reduce_sum(err, axis=0), 2.0 / 16)
        with tb.device(T0):
            g_w = tb.multiply(tb.matmul(x, err, transpose_a=True), 2.0 / 16)
        tb.train.gradient_descent(0.1, [(g_w, w), (g_b, b)], name="train")
        tb.global_variables_initializer()
    feeds = {"x:0": rng.randn(16, 3).astype(np.float32),
             "y:0": rng.randn(16, 1).astype(np.float32)}
    return g.graph, feeds


def local_graph(graph):
    """The same graph with the cluster devices stripped (for a local reference run)."""
    out = graph.copy()
    for node in out:
        node.device = ""
    return out


def test_split_while_loop_matches_local(cluster):
    graph = split_loop_graph()
    x = np.array([1.0, -2.0, 4.0], np.float32)
    want = Session(local_graph(graph)).run(["out", "count"], feeds={"x": x})
    with Session(graph, cluster=cluster.spec) as sess:
        got = sess.run(["out", "count"], feeds={"x": x})
        assert np.allclose(got[0], want[0]) and got[1] == want[1] == 7
        # The loop's parts really run on both tasks, each with its own control loop.
        devices = {n.device for n in sess.backend.graph if n.op == "Merge"}
        assert len({d.split("/task:")[1][0] for d in devices}) == 2
        # A second step reuses the registered graphs.
        again = sess.run(["out", "count"], feeds={"x": 2 * x})
        assert np.allclose(again[0], Session(local_graph(graph)).run("out", feeds={"x": 2 * x}))


def test_training_keeps_variables_on_their_tasks(cluster, tmp_path):
    graph, feeds = train_graph()
    ref = Session(local_graph(graph))
    ref.run(None, targets=["init"])
    with Session(graph, cluster=cluster.spec) as sess:
        sess.run(None, targets=["init"])
        for _ in range(5):
            want = ref.run("loss", feeds=feeds, targets=["train"])
            got = sess.run("loss", feeds=feeds, targets=["train"])
            assert np.allclose(got, want, rtol=1e-5)
        assert set(sess.variables()) == {"w", "b"}
        assert np.allclose(sess.variables()["w"], ref.variables()["w"])
        sess.save(tmp_path)
        before = sess.run("loss", feeds=feeds)
        sess.run(None, feeds=feeds, targets=["train"])
        assert sess.run("loss", feeds=feeds) != before
        assert sess.restore(tmp_path) == ["b", "w"]
        assert sess.run("loss", feeds=feeds) == before


def test_large_tensor_crosses_tasks_in_chunks(cluster):
    g = tb.Graph()
    with g:
        with tb.device(T0):
            x = tb.placeholder(tb.float32, [None], name="x")
            a = x * 2.0
        with tb.device(T1):
            tb.identity(a + 1.0, name="y")
    v = np.random.RandomState(1).rand(3 * rpc.CHUNK_BYTES // 4 + 5).astype(np.float32)
    with Session(g.graph, cluster=cluster.spec) as sess:
        assert np.array_equal(sess.run("y", feeds={"x": v}), v * 2 + 1)


def test_chunks_roundtrip_dtypes():
    for value in (np.float32(3), np.arange(10, dtype=np.int64).reshape(2, 5),
                  np.zeros((0, 3), np.float64), np.array([True, False]),
                  np.array([b"ab", b"c"], dtype=object), np.random.rand(1000, 7)):
        got, dead = rpc.assemble(rpc.tensor_chunks(value, False, chunk_bytes=1000))
        assert not dead and got.shape == np.shape(value)
        assert got.dtype == np.asarray(value).dtype and np.array_equal(got, value)
    assert rpc.assemble(rpc.tensor_chunks(None, True)) == (None, True)


def test_a_workers_kernels_take_the_compiled_loops_from_a_graphs_second_step():
    """As a local Session's (kernels/vector_math.py): a float32 Tanh on a fresh worker is
    numpy's at the first step, the compiled loop's from the second."""
    from tfg.kernels import jit, vector_math
    if not jit.wanted():
        pytest.skip("numba not installed (tfg[perf])")
    g = tb.Graph()
    with g:
        with tb.device(T0):
            x = tb.placeholder(tb.float32, [64], name="x")
            tb.tanh(x, name="t")
    x = np.linspace(-4, 4, 64).astype(np.float32)
    with LocalCluster(1) as fresh, Session(g.graph, cluster=fresh.spec) as sess:
        steps = [sess.run("t", {"x": x}) for _ in range(3)]
    np.testing.assert_array_equal(steps[0], np.tanh(x))
    compiled = vector_math.tanh(x)  # (this test process is warm: conftest)
    assert compiled.tobytes() != np.tanh(x).tobytes()  # (else the test could not fail)
    for later in steps[1:]:
        assert later.tobytes() == compiled.tobytes()


def test_kernel_error_names_the_node_and_ends_every_task(cluster):
    graph, feeds = train_graph()
    with Session(graph, cluster=cluster.spec, ) as sess:
        sess.reset()  # earlier tests' variables live on in the workers' default container
        with pytest.raises(TfgRuntimeError, match="uninitialized") as info:
            sess.run("loss", feeds=feeds)  # no init
        assert "step aborted" not in str(info.value)
        # The session (and the workers) still work afterwards.
        sess.run(None, targets=["init"])
        assert np.isfinite(sess.run("loss", feeds=feeds))


def test_input_errors(cluster):
    graph, feeds = train_graph()
    with Session(graph, cluster=cluster.spec) as sess:
        with pytest.raises(TfgInputError, match="no node named"):
            sess.run("nope", feeds=feeds)
        with pytest.raises(TfgInputError, match="must feed"):
            sess.run("loss")
    # Partitioned for local devices: refused rather than silently run elsewhere.
    bad = split_loop_graph()
    for node in bad:
        node.device = node.device.replace("/job:worker/task:", "/device:CPU:")
    from tfg.passes.partition import partition
    with pytest.raises(TfgInputError, match="no task of the cluster serves"):
        Session(partition(bad, devices="cpu:2"), cluster=cluster.spec)


def test_unreachable_cluster_is_a_clear_error():
    spec = f"worker=127.0.0.1:{free_port()}"
    t = time.monotonic()
    with pytest.raises(TfgRuntimeError, match=r"task /job:worker/task:0 .* unreachable"):
        Session(split_loop_graph(), cluster={"worker": [spec.split("=")[1]]})
    assert time.monotonic() - t < 60


def test_cli_partition_then_run(cluster, tmp_path):
    graph, feeds = train_graph()
    pb, npz, out = tmp_path / "g.pb", tmp_path / "feeds.npz", tmp_path / "out.npz"
    io.save(local_graph(graph), str(pb))
    np.savez(npz, **feeds)
    part = tfg_cli("partition", pb, "--cluster", cluster.spec).stdout
    tfg_cli("run", "-", "--cluster", cluster.spec, "--feeds", npz, "--init", "init",
            "--target", "train", "--fetch", "loss", "--steps", "3", "-o", out, input=part)
    ref = Session(local_graph(graph))
    ref.run(None, targets=["init"])
    for _ in range(3):
        want = ref.run("loss", feeds=feeds, targets=["train"])
    assert np.allclose(np.load(out)["loss"], want, rtol=1e-5)
    # Not partitioned beforehand: the master places and partitions it.
    p = tfg_cli("run", pb, "--cluster", cluster.spec, "--feeds", npz, "--init", "init",
                "--fetch", "loss")
    assert p.stdout.decode().startswith("loss = ")
    bad = tfg_cli("run", pb, "--cluster", cluster.spec, "--feeds", npz, "--fetch", "nope",
                  check=False)
    assert bad.returncode == 2 and b"nope" in bad.stderr and b"Traceback" not in bad.stderr


@pytest.mark.parametrize("case", [c for c in conformance_cases()
                                  if json.loads((c / "case.json").read_text())["kind"]
                                  in ("run", "train")][:4], ids=lambda c: c.name)
def test_conformance_cases_on_the_cluster(cluster, case, tmp_path):
    meta = json.loads((case / "case.json").read_text())
    args = ["run", case / "graph.pb", "--cluster", cluster.spec, "--feeds", case / "feeds.npz",
            "-o", tmp_path / "out.npz"]
    for f in meta["fetches"]:
        args += ["--fetch", f]
    for t in meta.get("targets", []):
        args += ["--target", t]
    for t in meta.get("init", []):
        args += ["--init", t]
    args += ["--steps", str(meta.get("steps", 1))]
    tfg_cli(*args)
    got, want = np.load(tmp_path / "out.npz"), np.load(case / "expected.npz")
    for f in meta["fetches"]:
        assert np.allclose(got[f], want[f], rtol=meta.get("rtol", 1e-4),
                           atol=meta.get("atol", 1e-5))


def test_auth_token_refused_and_accepted(monkeypatch):
    monkeypatch.delenv("TFG_AUTH_TOKEN", raising=False)
    graph = split_loop_graph(3)
    x = np.ones(3, np.float32)
    with LocalCluster(2, token="s3cret-token") as c:
        with pytest.raises(TfgInputError, match="refused GetStatus.*auth token"):
            Session(graph, cluster=c.spec)
        from tfg.executor.distributed import ClusterConfig
        with pytest.raises(TfgInputError, match="auth token"):
            Session(graph, cluster=ClusterConfig(c.spec, auth_token="wrong"))
        with Session(graph, cluster=ClusterConfig(c.spec, auth_token="s3cret-token")) as sess:
            assert sess.run("count", feeds={"x": x}) == 3
        monkeypatch.setenv("TFG_AUTH_TOKEN", "s3cret-token")
        with Session(graph, cluster=c.spec) as sess:
            assert sess.run("count", feeds={"x": x}) == 3
        # The standard health check needs no token.
        with grpc.insecure_channel(c.addresses[0]) as ch:
            assert rpc.health_check(ch, timeout=5) == 1
        # A RecvTensor without the token is refused too (workers pull with theirs).
        raw = rpc.WorkerClient(("worker", 0), c.addresses[0])
        with pytest.raises(grpc.RpcError) as info:
            raw.recv_tensor(1, "a;0;b;c;0:0")
        assert info.value.code() == grpc.StatusCode.UNAUTHENTICATED
        raw.close()


def test_worker_cli_tf_config_verbose_and_sigterm(tmp_path):
    port = free_port()
    env = dict(os.environ, TF_CONFIG=json.dumps(
        {"cluster": {"worker": [f"127.0.0.1:{port}"]}, "task": {"type": "worker", "index": 0}}))
    env.pop("TFG_AUTH_TOKEN", None)
    log = open(tmp_path / "log", "wb")
    proc = subprocess.Popen([sys.executable, "-m", "tfg", "worker", "--verbose"], env=env,
                            stderr=log)
    try:
        c = LocalCluster.__new__(LocalCluster)
        c.addresses, c.procs, c.ready_s, c.logs = [f"127.0.0.1:{port}"], [proc], 60, [log]
        LocalCluster.wait_ready(c, 0)
        graph = split_loop_graph(2)
        for node in graph:
            node.device = node.device.replace("task:1", "task:0")
        with Session(graph, cluster=f"worker=127.0.0.1:{port}") as sess:
            assert sess.run("count", feeds={"x": np.ones(3, np.float32)}) == 2
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        log.close()
    text = (tmp_path / "log").read_text()
    assert "listening on 127.0.0.1:" in text
    assert "RegisterGraph" in text and "RunGraph" in text and "stopped" in text


def test_worker_cli_bad_task_and_spec_helpers():
    p = tfg_cli("worker", "--cluster", "worker=127.0.0.1:1", "--task", "3", check=False)
    assert p.returncode == 2 and b"--task 3" in p.stderr
    assert bind_address("10.0.0.5:2222") == "127.0.0.1:2222"
    assert bind_address("10.0.0.5:2222", "0.0.0.0") == "0.0.0.0:2222"
    assert bind_address("10.0.0.5:2222", "0.0.0.0:9000") == "0.0.0.0:9000"
    jobs, job, index = task_from_tf_config(
        '{"cluster": {"worker": ["a:1", "b:2"]}, "task": {"type": "worker", "index": 1}}')
    assert jobs == {"worker": ["a:1", "b:2"]} and (job, index) == ("worker", 1)
    with pytest.raises(TfgInputError):
        task_from_tf_config("{}")
