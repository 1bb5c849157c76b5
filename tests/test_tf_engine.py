"""tfg as the master of TensorFlow servers (`tfg run --cluster SPEC --engine tensorflow`).

Without TensorFlow: what each server registers (client-terminated feeds and fetches, rendezvous
keys, incarnations) and the CLI's input errors. With TensorFlow (TFG_TF_PYTHON, as in
test_tf_import.py): two `tf.distribute.Server` processes on loopback run shared conformance
cases partitioned by tfg, a training run keeps its variables on the servers across steps and
checkpoints them, and kill -9 of a server mid-step ends the step within the timeout, naming it.
"""
import os
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from conftest import CONFORMANCE, ROOT, conformance_cases
from helpers import tfg_cli
from test_cluster_failures import long_loop_graph, train_graph
from tfg.errors import TfgRuntimeError
from tfg.executor.distributed import ClusterConfig
from tfg.executor.distributed.tf_engine.graphs import rendezvous_key, task_graphs
from tfg.executor.session import Session
from tfg.executor.step import check_request
from tfg.graphdef.names import TensorRef
from tfg.passes.partition import partition

D0 = "/job:worker/replica:0/task:0/device:CPU:0"
D1 = "/job:worker/replica:0/task:1/device:CPU:0"
INC = {D0: 0xA1, D1: 2 ** 64 - 5}  # the second above 2**63: stored as a negative int64


# --- without TensorFlow ---------------------------------------------------------------------
def test_rendezvous_key_is_tensorflows_format():
    assert rendezvous_key(D0, 0xA1, D1, "edge_12_foo") == \
        f"{D0};00000000000000a1;{D1};edge_12_foo;0:0"
    assert rendezvous_key(D0, -1, D0, "x:0").split(";")[1] == "ffffffffffffffff"


def _attr_key(node):
    inc = node.get_attr("send_device_incarnation")
    return rendezvous_key(node.get_attr("send_device").decode(), inc,
                          node.get_attr("recv_device").decode(),
                          node.get_attr("tensor_name").decode())


def test_each_task_gets_its_nodes_with_client_terminated_feeds_and_fetches():
    graph, _ = train_graph()
    parted = partition(graph, cluster={"worker": ["a:1", "b:2"]})
    feeds = (TensorRef("x", 0), TensorRef("y", 0))
    fetches = [TensorRef("loss", 0), TensorRef("x", 0)]
    needed = check_request(parted, feeds, fetches, ("train",))
    parts = task_graphs(parted, needed, feeds, fetches, INC)
    assert set(parts) == {("worker", 0), ("worker", 1)}
    names = set()
    for task, part in parts.items():
        nodes = {n.name: n for n in part.graph}
        names |= set(nodes)
        assert all(n.device == (D0 if task[1] == 0 else D1) for n in part.graph)
        # Feeds: a _Recv per consumer device, its key built from its own attrs; the fed
        # Placeholder itself is not registered.
        for i, key in part.feed_keys:
            recv = [n for n in part.graph if n.op == "_Recv" and _attr_key(n) == key]
            assert len(recv) == 1 and recv[0].get_attr("client_terminated") is True
            assert recv[0].get_attr("tensor_name").decode() == f"{feeds[i].node}:0"
        assert "x" not in nodes and "y" not in nodes
        for i, key in part.fetch_keys:
            send = [n for n in part.graph if n.op == "_Send" and _attr_key(n) == key]
            assert len(send) == 1 and list(send[0].inputs) == [fetches[i].node]
        # tfg partition's pairs get the sending device's real incarnation (int64 form).
        for n in part.graph:
            if n.op in ("_Send", "_Recv") and not n.get_attr("client_terminated"):
                sender = n.get_attr("send_device").decode()
                assert n.get_attr("send_device_incarnation") % 2 ** 64 == INC[sender]
    assert "train" in names
    # The fed x is answered by the master: no task returns it.
    assert all(i != 1 for p in parts.values() for i, _ in p.fetch_keys)
    assert sorted(i for p in parts.values() for i, _ in p.fetch_keys) == [0]


def test_engine_without_cluster_is_an_input_error(tmp_path):
    graph, _ = train_graph()
    from tfg.graphdef import io

    io.save(graph, str(tmp_path / "g.pb"))
    p = tfg_cli("run", tmp_path / "g.pb", "--engine", "tensorflow", "--target", "init",
                check=False)
    assert p.returncode == 2
    assert p.stderr.decode().strip() == "tfg: error: --engine needs --cluster"


def test_unreachable_tensorflow_server_is_named(tmp_path):
    graph, _ = train_graph()
    from tfg.graphdef import io

    io.save(graph, str(tmp_path / "g.pb"))
    import socket

    with socket.socket() as s:  # a port nobody listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    p = tfg_cli("run", tmp_path / "g.pb", "--cluster", f"worker=127.0.0.1:{port}",
                "--engine", "tensorflow", "--timeout", "2", "--target", "init", check=False)
    err = p.stderr.decode()
    assert p.returncode == 1 and f"/job:worker/task:0 (127.0.0.1:{port})" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1


# --- with TensorFlow servers ----------------------------------------------------------------
def _tf_python():
    for py in filter(None, [os.environ.get("TFG_TF_PYTHON"), sys.executable]):
        p = subprocess.run([py, "-c", "import tensorflow"], capture_output=True, timeout=120)
        if p.returncode == 0:
            return py
    return None


TF_PYTHON = _tf_python()
needs_tf = pytest.mark.skipif(TF_PYTHON is None, reason="needs TensorFlow (TFG_TF_PYTHON)")


class TFServers:
    """n `tf.distribute.Server` tasks of job worker on loopback (tools/tf_server.py)."""

    def __init__(self, n=2):
        from check_tf_cluster import start_tf_servers

        self.spec, self.procs = start_tf_servers(TF_PYTHON, n, _free_port)

    def kill(self, i):
        self.procs[i].kill()

    def close(self):
        for p in self.procs:
            p.kill()
            p.wait()


sys.path.insert(0, str(ROOT / "tools"))


def _free_port():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def tf_servers():
    servers = TFServers(2)
    yield servers
    servers.close()


def _load_check():
    from check_tf_cluster import load_check

    return load_check(str(CONFORMANCE / "check.py"))


CASES = ["grad_while", "nested_while", "train_sgd", "cnn_infer"]


@needs_tf
@pytest.mark.slow
@pytest.mark.parametrize("case", CASES)
def test_conformance_case_on_tensorflow_servers(case, tf_servers, monkeypatch):
    if not conformance_cases():
        pytest.skip("../shared/conformance is not present")
    check = _load_check()
    monkeypatch.setenv("TFG_ENGINE", "tensorflow")
    check.check_case(str(CONFORMANCE / case), "cluster", f"{sys.executable} -m tfg", 300,
                     tf_servers.spec)


def _local_losses(graph, feeds, steps):
    local = graph.copy()
    for node in local:
        node.device = ""
    ref = Session(local)
    ref.run(None, targets=["init"])
    return [ref.run("loss", feeds=feeds, targets=["train"]) for _ in range(steps)], ref


@needs_tf
@pytest.mark.slow
def test_training_keeps_variables_on_the_servers_across_steps(tf_servers, tmp_path):
    graph, feeds = train_graph()
    want, ref = _local_losses(graph, feeds, 20)
    sess = Session(graph, cluster=ClusterConfig(tf_servers.spec, engine="tensorflow"))
    try:
        sess.run(None, targets=["init"])
        got = [sess.run("loss", feeds=feeds, targets=["train"]) for _ in range(20)]
        np.testing.assert_allclose(got, want, rtol=1e-5)
        assert got[-1] < got[0]
        local_vars = ref.variables()
        for name, value in sess.variables().items():
            np.testing.assert_allclose(value, local_vars[name], rtol=1e-5)
        # Save, train on, restore: the variables are the saved ones again, on the servers.
        sess.save(str(tmp_path / "ckpt"), step=20)
        saved = sess.variables()
        sess.run(None, feeds=feeds, targets=["train"])
        assert not np.allclose(sess.variables()["w"], saved["w"])
        sess.restore(str(tmp_path / "ckpt"))
        for name, value in sess.variables().items():
            np.testing.assert_array_equal(value, saved[name])
    finally:
        sess.close()


@needs_tf
@pytest.mark.slow
def test_kill_9_of_a_tensorflow_server_ends_the_step_naming_it():
    servers = TFServers(2)
    try:
        timeout = 3.0
        sess = Session(long_loop_graph(10 ** 9),
                       cluster=ClusterConfig(servers.spec, timeout=timeout, engine="tensorflow"))
        box = []

        def target():
            try:
                sess.run("count")
                box.append("ok")
            except Exception as e:  # noqa: BLE001
                box.append((e, time.monotonic()))

        th = threading.Thread(target=target, daemon=True)
        th.start()
        time.sleep(3.0)  # the loop runs on both servers
        assert not box
        killed_at = time.monotonic()
        servers.kill(1)
        th.join(timeout=4 * timeout + 20)
        assert box, "the step did not end"
        err, ended_at = box[0]
        assert isinstance(err, TfgRuntimeError)
        assert "/job:worker/task:1" in str(err)
        assert ended_at - killed_at < 2 * timeout + 10
        sess.close()
    finally:
        servers.close()


@needs_tf
@pytest.mark.slow
def test_mixed_cluster_driven_by_tensorflows_client_equals_a_local_run():
    """Task 0 a TensorFlow server, task 1 a `tfg worker`: TensorFlow's master registers the
    task-1 partition on the tfg worker (tensorflow.WorkerService on its port), tensors flow
    both ways with TensorFlow's RecvTensor, a resource variable lives on the tfg worker."""
    import json

    p0, p1 = _free_port(), _free_port()
    spec = f"worker=127.0.0.1:{p0},127.0.0.1:{p1}"
    tfg_worker = subprocess.Popen([sys.executable, "-m", "tfg", "worker", "--cluster", spec,
                                   "--job", "worker", "--task", "1", "--verbose"],
                                  stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    server = subprocess.Popen([TF_PYTHON, str(ROOT / "tools" / "tf_server.py"), "--cluster",
                               spec, "--task", "0"], stdout=subprocess.PIPE,
                              stderr=subprocess.DEVNULL, text=True)
    try:
        assert server.stdout.readline().startswith("ready")
        p = subprocess.run([TF_PYTHON, str(ROOT / "tools" / "tf_mixed_client.py"), "--target",
                            f"grpc://127.0.0.1:{p0}", "--steps", "4"], capture_output=True,
                           text=True, timeout=300)
        assert p.returncode == 0, p.stderr[-2000:]
        got = json.loads(p.stdout.strip().splitlines()[-1])
        assert len(got["cluster"]) == 4
        for (loss, summary), (want_loss, want_summary) in zip(got["cluster"], got["local"]):
            np.testing.assert_allclose(loss, want_loss, rtol=1e-5)
            np.testing.assert_allclose(summary, want_summary, rtol=1e-5)
        assert got["cluster"][-1][0] < got["cluster"][0][0]  # it trained
        assert tfg_worker.poll() is None  # and the tfg worker is still serving
    finally:
        for proc in (server, tfg_worker):
            proc.kill()
            proc.wait()
    log = tfg_worker.stderr.read().decode()
    # Its part ran there, and TensorFlow's task pulled from it; the session was closed.
    for call in ("tensorflow.RegisterGraph", "tensorflow.RunGraph", "tensorflow.RecvTensor",
                 "tensorflow.DeleteWorkerSession"):
        assert call in log


@needs_tf
@pytest.mark.slow
def test_a_spec_in_another_order_than_the_servers_own_is_an_input_error(tf_servers):
    from tfg.errors import TfgInputError

    job, addrs = tf_servers.spec.split("=")
    swapped = f"{job}=" + ",".join(reversed(addrs.split(",")))
    graph, _ = train_graph()
    with pytest.raises(TfgInputError, match="in the order of their own cluster spec"):
        Session(graph, cluster=ClusterConfig(swapped, engine="tensorflow"))


@needs_tf
@pytest.mark.slow
@pytest.mark.parametrize("model,signature,feeds", [
    ("savedmodel/mlp", "serving_default", "savedmodel/mlp_feeds.npz"),
    ("text_models/tf1_vocab_file", "serving_default", "text_models/tf1_vocab_file_feeds.npz")])
def test_saved_model_on_tensorflow_servers(model, signature, feeds, tf_servers, tmp_path):
    """A SavedModel's variables restored on the servers that hold them (the assign nodes
    tfg adds to their graphs) and its table init op run there, as on a local run."""
    from conftest import FIXTURES

    local, remote = tmp_path / "local.npz", tmp_path / "remote.npz"
    args = ("run", FIXTURES / model, "--signature", signature, "--feeds", FIXTURES / feeds)
    tfg_cli(*args, "-o", local)
    tfg_cli(*args, "--cluster", tf_servers.spec, "--engine", "tensorflow", "-o", remote)
    want, got = np.load(local), np.load(remote)
    assert sorted(got.files) == sorted(want.files)
    for key in want.files:
        np.testing.assert_allclose(got[key], want[key], rtol=1e-6, err_msg=key)
