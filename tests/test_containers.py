"""Containers (issue 19): state keyed by (container, shared_name or node name), shared between
sessions on a worker, cleared by Session.reset / `tfg run --reset`."""
import subprocess
import sys

import numpy as np
import pytest

from hostile_helpers import worker_status
from tfg import builder as tb
from tfg.errors import TfgRuntimeError
from tfg.executor.containers import SessionResources, check_bounded, ContainersFull
from tfg.executor.distributed.local import LocalCluster
from tfg.executor.session import Session
from tfg.graphdef import io
from tfg.kernels.resources import Ref, ResourceMgr

T0, T1 = "/job:worker/replica:0/task:0/device:CPU:0", "/job:worker/replica:0/task:1/device:CPU:0"


def var_graph(node_name, shared_name=None, container=None, device=None, init=None, scale=1.0):
    """A VariableV2 `node_name` (optionally shared_name/container), `out` = 2 * var * scale
    (on task 0 when `device` puts the variable on task 1), and `init`/`bump` ops."""
    g = tb.Graph()
    with g:
        with tb.device(device or ""):
            w = tb.Variable(np.zeros(3, np.float32) if init is None else init, name=node_name)
            tb.assign_add(w, np.ones(3, np.float32), name="bump")
        with tb.device(T0 if device else ""):
            tb.multiply(w, np.float32(2.0 * scale), name="out")
        tb.global_variables_initializer()
    graph = g.graph
    for key, value in (("shared_name", shared_name), ("container", container)):
        if value is not None:
            graph[node_name].set_attr("shared_name" if key == "shared_name" else key,
                                      value.encode())
    return graph


def test_reset_clears_only_the_named_containers():
    mgr = ResourceMgr()
    for container, name in (("", "a"), ("c1", "b"), ("c2", "c")):
        mgr.get_or_create(container, name, lambda n=name: Ref(n)).assign(np.ones(4, np.float32))
    assert mgr.nbytes() == 48
    assert mgr.reset(["c1"]) == 1 and {k for k, _ in mgr.items()} == {("", "a"), ("c2", "c")}
    assert mgr.reset(None) == 1 and {k for k, _ in mgr.items()} == {("c2", "c")}  # default
    assert mgr.nbytes() == 16


def test_local_session_reset_uninitializes_the_containers_variables():
    g = var_graph("w", container="mine")
    sess = Session(g)
    sess.run(None, targets=["init"])
    np.testing.assert_array_equal(sess.run("out"), [0, 0, 0])
    assert sess.reset(["other"]) == 0
    np.testing.assert_array_equal(sess.run("out"), [0, 0, 0])
    assert sess.reset("mine") == 1
    with pytest.raises(TfgRuntimeError, match="uninitialized value w"):
        sess.run("out")


def test_shared_name_keys_the_variable_not_the_node_name():
    """Two VariableV2 nodes with one shared_name are one variable."""
    g = tb.Graph()
    with g:
        a = tb.Variable(np.zeros(2, np.float32), name="a")
        b = tb.Variable(np.zeros(2, np.float32), name="b")
        tb.assign_add(a, np.float32([1, 2]), name="bump_a")
        tb.identity(b, name="read_b")
    graph = g.graph
    for n in ("a", "b"):
        graph[n].set_attr("shared_name", b"same")
    sess = Session(graph)
    sess.run(None, targets=["a/Assign"])
    sess.run(None, targets=["bump_a"])
    np.testing.assert_array_equal(sess.run("read_b"), [1, 2])


def test_worker_sessions_share_containers_and_keep_private_state_apart():
    shared = ResourceMgr()
    a, b = SessionResources(shared), SessionResources(shared)
    w = a.get_or_create("", "w", lambda: Ref("w"))
    assert b.get_or_create("", "w", lambda: Ref("other")) is w
    ra = a.get_or_create("_rng", "drop", object)
    assert b.get_or_create("_rng", "drop", object) is not ra
    a.clear()  # session a closes or expires: its private state goes, the variable stays
    assert b.lookup("", "w") is w and a.lookup("_rng", "drop") is None
    w.assign(np.zeros(1 << 10, np.float32))
    check_bounded(shared, 4096, "task 0")
    with pytest.raises(ContainersFull, match="--reset"):
        check_bounded(shared, 4095, "task 0")


def test_two_graphs_share_a_variable_on_a_two_worker_cluster_and_a_reset_clears_it(tmp_path):
    """Client 1's graph creates and trains w on task 1 and closes its session; client 2's
    different graph (another node name, shared_name w) sees the value; `tfg run --reset ''`
    (with nothing to run) clears the default container on every worker."""
    first = var_graph("w", device=T1)
    second = var_graph("model/weights", shared_name="w", device=T1, scale=10.0)
    io.save(first, str(tmp_path / "first.pb"))
    io.save(second, str(tmp_path / "second.pb"))
    with LocalCluster(2) as c:
        run = [sys.executable, "-m", "tfg", "run", "--cluster", c.spec]
        p = subprocess.run(run + [str(tmp_path / "first.pb"), "--init", "init",
                                  "--target", "bump", "--steps", "3"],
                           capture_output=True, timeout=120)
        assert p.returncode == 0, p.stderr
        assert worker_status(c.addresses[1]).sessions == 0  # the client closed its session
        assert worker_status(c.addresses[1]).container_bytes == 12
        with Session(second, cluster=c.spec) as sess:
            np.testing.assert_array_equal(sess.run("out"), [60, 60, 60])  # 10 * 2 * 3
        p = subprocess.run(run + ["--reset", ""], capture_output=True, timeout=120)
        assert p.returncode == 0, p.stderr
        assert b"1 resource(s) removed" in p.stderr
        assert worker_status(c.addresses[1]).container_bytes == 0
        p = subprocess.run(run + [str(tmp_path / "second.pb"), "--fetch", "out"],
                           capture_output=True, timeout=120)
        assert p.returncode == 1 and b"uninitialized value" in p.stderr, p.stderr
        # A reset before the steps of a run: the run starts from an empty container.
        p = subprocess.run(run + [str(tmp_path / "first.pb"), "--init", "init", "--target",
                                  "bump", "--steps", "2"], capture_output=True, timeout=120)
        assert p.returncode == 0, p.stderr
        p = subprocess.run(run + [str(tmp_path / "first.pb"), "--fetch", "out"],
                           capture_output=True, timeout=120)
        assert p.returncode == 0 and b"[4., 4., 4.]" in p.stdout, (p.stdout, p.stderr)
        p = subprocess.run(run + [str(tmp_path / "first.pb"), "--reset", "", "--fetch", "out"],
                           capture_output=True, timeout=120)
        assert p.returncode == 1 and b"uninitialized value" in p.stderr, p.stderr


def test_reset_needs_a_cluster_when_there_is_nothing_to_run():
    p = subprocess.run([sys.executable, "-m", "tfg", "run", "--reset", ""], capture_output=True,
                       timeout=60, stdin=subprocess.DEVNULL)
    assert p.returncode == 2 and b"nothing to run" in p.stderr
