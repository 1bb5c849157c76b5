"""Cluster failures end steps, never hang: a killed worker (kill -9), a stopped one (SIGSTOP),
then restart and resume from the last checkpoint without losing a step."""
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from tfg import builder as tb
from tfg.errors import TfgRuntimeError
from tfg.executor.distributed import ClusterConfig
from tfg.executor.distributed.local import LocalCluster
from tfg.executor.session import Session
from tfg.graphdef import io

T0, T1 = "/job:worker/task:0", "/job:worker/task:1"
TIMEOUT = 3.0


def long_loop_graph(n=100000):
    """A loop ping-ponging between tasks every iteration: a step that lasts many seconds."""
    g = tb.Graph()
    with g:
        with tb.device(T0):
            i0 = tb.constant(0, name="i0")
            x0 = tb.constant(1.0, name="x0")

        def body(i, x):
            with tb.device(T0):
                i1 = i + 1
            with tb.device(T1):
                x1 = x * 1.0
            return i1, x1

        def cond(i, x):  # needs x from task 1 every iteration
            with tb.device(T0):
                return tb.logical_and(tb.less(i, n), tb.greater(x, 0.0))

        with tb.device(T0):
            tb.identity(tb.while_loop(cond, body, [i0, x0])[0], name="count")
    return g.graph


def _run_in_thread(sess, box):
    import threading

    def target():
        t = time.monotonic()
        try:
            sess.run("count")
            box.append(("ok", time.monotonic() - t))
        except Exception as e:  # noqa: BLE001
            box.append((e, time.monotonic()))

    th = threading.Thread(target=target, daemon=True)
    th.start()
    return th


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGSTOP], ids=["kill-9", "sigstop"])
def test_dead_or_stopped_worker_ends_the_step_with_an_error_naming_it(sig):
    with LocalCluster(2) as c:
        sess = Session(long_loop_graph(), cluster=ClusterConfig(c.spec, timeout=TIMEOUT))
        box = []
        th = _run_in_thread(sess, box)
        time.sleep(1.0)  # the loop is running on both tasks
        assert not box
        killed_at = time.monotonic()
        c.kill(1, sig)
        th.join(timeout=4 * TIMEOUT + 20)  # bounded: never a hang
        assert box, "the step did not end"
        err, ended_at = box[0]
        assert isinstance(err, TfgRuntimeError)
        assert "/job:worker/task:1" in str(err)
        assert ended_at - killed_at < 2 * TIMEOUT + 10
        # Task 0 ended its part too: it answers and runs nothing.
        status = sess.backend.clients[("worker", 0)].call("GetStatus", _status_req(), timeout=5)
        assert status.active_steps == 0


def _status_req():
    from tfg.schemas.proto import worker_pb2 as pb

    return pb.GetStatusRequest()


def train_graph():
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
        tb.train.gradient_descent(0.05, [(g_w, w), (g_b, b)], name="train")
        tb.global_variables_initializer()
    feeds = {"x:0": rng.randn(16, 3).astype(np.float32),
             "y:0": rng.randn(16, 1).astype(np.float32)}
    return g.graph, feeds


def test_restart_and_resume_from_checkpoint(tmp_path):
    graph, feeds = train_graph()
    steps = 1000
    local = graph.copy()
    for node in local:
        node.device = ""
    ref = Session(local)
    ref.run(None, targets=["init"])
    for _ in range(steps):
        want = ref.run("loss", feeds=feeds, targets=["train"])
    pb_path, npz, ckpt, out = (tmp_path / "g.pb", tmp_path / "f.npz", tmp_path / "ckpt",
                               tmp_path / "out.npz")
    io.save(graph, str(pb_path))
    np.savez(npz, **feeds)
    with LocalCluster(2) as c:
        cmd = [sys.executable, "-m", "tfg", "run", str(pb_path), "--cluster", c.spec,
               "--feeds", str(npz), "--init", "init", "--target", "train", "--fetch", "loss",
               "--steps", str(steps), "--checkpoint-dir", str(ckpt), "--checkpoint-every",
               "10", "--timeout", str(TIMEOUT), "-o", str(out)]
        first = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 120
        while not (ckpt / "variables.tfgckpt").exists():
            assert first.poll() is None, first.stderr.read()
            assert time.monotonic() < deadline
            time.sleep(0.01)
        c.kill(1)
        _, err = first.communicate(timeout=4 * TIMEOUT + 30)
        assert first.returncode == 1, err
        assert b"/job:worker/task:1" in err and b"Traceback" not in err
        from tfg.kernels.checkpoint_format import read_checkpoint_with_step

        _, saved_step = read_checkpoint_with_step(ckpt / "variables.tfgckpt")
        assert 10 <= saved_step < steps and saved_step % 10 == 0
        assert not out.exists()
        c.restart(1)
        second = subprocess.run(cmd, capture_output=True, timeout=300)
        assert second.returncode == 0, second.stderr
        # Resumed, not restarted: the result is that of exactly `steps` steps.
        assert np.allclose(np.load(out)["loss"], want, rtol=1e-5, atol=1e-7)
        _, final_step = read_checkpoint_with_step(ckpt / "variables.tfgckpt")
        assert final_step == steps
