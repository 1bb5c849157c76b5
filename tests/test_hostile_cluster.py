"""Workers under abuse (issue 21): sessions closed and expired, orphan steps collected, the
token checked before a body is read, registered graphs validated, hung and dead workers ending
a run within --timeout + 5 s naming the task, during a step and between steps.

Each test is bounded (about 20 s at most); the long soak is tests/test_soak.py (TFG_SOAK=1).
"""
import os
import signal
import subprocess
import sys
import threading
import time

import grpc
import numpy as np
import pytest

from hostile_helpers import rss_bytes, worker_status
from test_cluster_failures import long_loop_graph, train_graph
from tfg.errors import TfgInputError, TfgRuntimeError
from tfg.executor.distributed import ClusterConfig, rpc, session_table
from tfg.executor.distributed.local import LocalCluster
from tfg.executor.distributed.worker import WorkerService
from tfg.executor.session import Session
from tfg.graphdef import io
from tfg.schemas.proto import graph_pb2
from tfg.schemas.proto import worker_pb2 as pb

TIMEOUT = 4.0
TASK1 = "/job:worker/task:1"


# --- sessions and steps -----------------------------------------------------------------------
def test_tfg_run_closes_its_session_on_the_workers(tmp_path):
    graph, feeds = train_graph()
    io.save(graph, str(tmp_path / "g.pb"))
    np.savez(tmp_path / "f.npz", **feeds)
    with LocalCluster(2) as c:
        for fail in (False, True):
            args = [sys.executable, "-m", "tfg", "run", str(tmp_path / "g.pb"), "--cluster",
                    c.spec, "--feeds", str(tmp_path / "f.npz"), "--init", "init",
                    "--target", "train", "--fetch", "loss" if not fail else "nowhere"]
            p = subprocess.run(args, capture_output=True, timeout=60)
            assert p.returncode == (2 if fail else 0), p.stderr
            for address in c.addresses:
                assert worker_status(address).sessions == 0


def test_idle_sessions_expire_and_orphan_steps_are_collected():
    """In-process: a session no RPC touched for idle_s goes (unless a step of it runs); a step
    created by a RecvTensor for an id no RunGraph claims goes after ORPHAN_TTL_S."""
    service = WorkerService({"worker": ["127.0.0.1:1"]}, "worker", 0)
    busy = service._session("busy", None)
    idle = service._session("idle", None)
    idle.resources.get_or_create("", "w", lambda: object())  # the worker's default container
    idle.resources.get_or_create("_rng", "r", lambda: object())  # the session's own
    running = service._step(1)
    running.session, running.group = "busy", object()
    orphan = service._step(2)
    now = time.monotonic()
    assert session_table.sweep(service, idle_s=60, now=now) == (0, 0)
    busy.last_used = idle.last_used = now - 61
    assert session_table.sweep(service, idle_s=60, now=now) == (1, 0)
    # The session's private state goes; its variables stay in the worker's containers (issue
    # 19: another session may share them) until a reset clears them.
    assert set(service.sessions) == {"busy"} and idle.resources.private.items() == []
    assert [k for k, _ in service.containers.items()] == [("", "w")]
    later = orphan.created + session_table.ORPHAN_TTL_S + 1
    assert session_table.sweep(service, idle_s=60, now=later) == (0, 1)
    assert set(service.steps) == {1}


def test_worker_expires_a_killed_masters_session():
    """A master killed with -9 never says CloseSession: --idle-timeout drops its session."""
    graph, feeds = train_graph()
    code = ("import sys, os, numpy as np\n"
            "sys.path.insert(0, 'tests')\n"
            "from test_cluster_failures import train_graph\n"
            "from tfg.executor.session import Session\n"
            "g, feeds = train_graph()\n"
            "s = Session(g, cluster=sys.argv[1])\n"
            "s.run(None, targets=['init'])\n"
            "s.run('loss', feeds=feeds, targets=['train'])\n"
            "print('ran', flush=True)\n"
            "os.kill(os.getpid(), 9)\n")
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with LocalCluster(2, extra_args=["--idle-timeout", "1"]) as c:
        p = subprocess.run([sys.executable, "-c", code, c.spec], capture_output=True,
                           timeout=60, cwd=root)
        assert p.returncode == -9 and p.stdout == b"ran\n", p.stderr
        deadline = time.monotonic() + 15
        while any(worker_status(a).sessions for a in c.addresses):
            assert time.monotonic() < deadline, "the session never expired"
            time.sleep(0.5)


# --- authentication ---------------------------------------------------------------------------
def test_unauthenticated_large_request_is_refused_unread():
    """200 MB of RegisterGraph without the token: UNAUTHENTICATED, and the worker's memory
    does not grow by the message (the interceptor answers before the body is read)."""
    with LocalCluster(1, token="s3cret") as c:
        pid = c.procs[0].pid
        before = rss_bytes(pid)
        gd = graph_pb2.GraphDef()
        gd.node.add(name="big", op="NoOp").attr["pad"].s = b"x" * (200 << 20)
        raw = rpc.WorkerClient(("worker", 0), c.addresses[0])
        try:
            with pytest.raises(TfgInputError, match="refused RegisterGraph"):
                raw.call("RegisterGraph", pb.RegisterGraphRequest(session_handle="s",
                                                                  graph_def=gd), timeout=20)
        finally:
            raw.close()
        assert rss_bytes(pid) - before < 50 << 20
        assert worker_status(c.addresses[0], "s3cret").sessions == 0


def test_token_from_a_file_not_the_command_line(tmp_path):
    token_file = tmp_path / "token"
    token_file.write_text("file-token-123\n")
    graph, feeds = train_graph()
    io.save(graph, str(tmp_path / "g.pb"))
    np.savez(tmp_path / "f.npz", **feeds)
    with LocalCluster(2, extra_args=["--auth-token-file", str(token_file)]) as c:
        with open(f"/proc/{c.procs[0].pid}/cmdline", "rb") as f:
            assert b"file-token-123" not in f.read()
        base = [sys.executable, "-m", "tfg", "run", str(tmp_path / "g.pb"), "--cluster",
                c.spec, "--feeds", str(tmp_path / "f.npz"), "--init", "init", "--fetch", "loss"]
        env = {k: v for k, v in os.environ.items() if k != "TFG_AUTH_TOKEN"}
        refused = subprocess.run(base, capture_output=True, timeout=60, env=env)
        assert refused.returncode == 2 and b"auth token" in refused.stderr
        ok = subprocess.run(base + ["--auth-token-file", str(token_file)], capture_output=True,
                            timeout=60, env=env)
        assert ok.returncode == 0, ok.stderr


# --- RegisterGraph validation -----------------------------------------------------------------
def test_register_graph_with_duplicate_names_is_invalid_argument():
    with LocalCluster(1) as c:
        gd = graph_pb2.GraphDef()
        gd.node.add(name="a", op="NoOp")
        gd.node.add(name="a", op="NoOp")
        neg = gd.node.add(name="n", op="Neg", input=["nowhere"])
        neg.attr["T"].type = 1
        client = rpc.WorkerClient(("worker", 0), c.addresses[0])
        try:
            with pytest.raises(grpc.RpcError) as info:
                client.stub.RegisterGraph(pb.RegisterGraphRequest(session_handle="s",
                                                                  graph_def=gd), timeout=10)
            assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert "duplicate node name 'a'" in info.value.details()
            del gd.node[1]
            with pytest.raises(grpc.RpcError) as info:
                client.stub.RegisterGraph(pb.RegisterGraphRequest(session_handle="s",
                                                                  graph_def=gd), timeout=10)
            assert info.value.code() == grpc.StatusCode.INVALID_ARGUMENT
            assert "input 'nowhere' names no node" in info.value.details()
        finally:
            client.close()


# --- hung and dead workers ----------------------------------------------------------------------
def _watch(args, stop_after, c, sig):
    """Start `tfg run ARGS`, send `sig` to task 1 after `stop_after` s; -> (rc, stderr, seconds
    from the signal to the command's exit)."""
    p = subprocess.Popen([sys.executable, "-m", "tfg", *args, "--cluster", c.spec,
                          "--timeout", str(TIMEOUT)], stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    time.sleep(stop_after)
    assert p.poll() is None, p.stderr.read()
    c.kill(1, sig)
    t = time.monotonic()
    _, err = p.communicate(timeout=TIMEOUT + 30)
    return p.returncode, err.decode(), time.monotonic() - t


@pytest.mark.parametrize("sig", [signal.SIGSTOP, signal.SIGKILL], ids=["sigstop", "kill-9"])
def test_hung_or_dead_worker_mid_step_ends_the_run_within_timeout(sig, tmp_path):
    io.save(long_loop_graph(10 ** 7), str(tmp_path / "loop.pb"))
    with LocalCluster(2) as c:
        try:
            rc, err, took = _watch(["run", str(tmp_path / "loop.pb"), "--fetch", "count"], 3.0,
                                   c, sig)
        finally:
            if sig == signal.SIGSTOP:
                os.kill(c.procs[1].pid, signal.SIGCONT)
    assert rc == 1 and TASK1 in err and "Traceback" not in err, err
    assert len(err.strip().splitlines()) == 1, err
    assert took < TIMEOUT + 5, f"ended {took:.1f} s after the signal"


@pytest.mark.parametrize("sig", [signal.SIGSTOP, signal.SIGKILL], ids=["sigstop", "kill-9"])
def test_hung_or_dead_worker_between_steps(sig):
    """The master is idle between steps when the task stops: the next step, and a checkpoint's
    variable transfer, each end within the timeout naming it."""
    graph, feeds = train_graph()
    with LocalCluster(2) as c:
        sess = Session(graph, cluster=ClusterConfig(c.spec, timeout=TIMEOUT))
        try:
            sess.run(None, targets=["init"])
            sess.run("loss", feeds=feeds, targets=["train"])
            c.kill(1, sig)
            for what in ("step", "variables"):
                t = time.monotonic()
                with pytest.raises(TfgRuntimeError, match=TASK1):
                    if what == "step":
                        sess.run("loss", feeds=feeds, targets=["train"])
                    else:
                        sess.variables()
                assert time.monotonic() - t < TIMEOUT + 5, what
        finally:
            t = time.monotonic()
            done = threading.Event()
            threading.Thread(target=lambda: (sess.close(), done.set()), daemon=True).start()
            assert done.wait(TIMEOUT + 5), "closing the session hung"
            if sig == signal.SIGSTOP:
                os.kill(c.procs[1].pid, signal.SIGCONT)


# --- many clients at once ---------------------------------------------------------------------
def _threads(pid):
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("Threads:"))


def _one_client(address, i, codes):
    """One client connection making one call that blocks (RecvTensor of a step that never
    runs, until its 3 s deadline) or returns at once (RunGraph of an unknown graph,
    GetStatus); its status code goes to `codes`."""
    from tfg.schemas.proto import worker_pb2_grpc

    channel = grpc.insecure_channel(address)
    stub = worker_pb2_grpc.WorkerServiceStub(channel)
    try:
        if i % 4 == 3:
            stub.RunGraph(pb.RunGraphRequest(session_handle="none", graph_handle="none",
                                             step_id=1000 + i), timeout=3)
        elif i % 8 == 2:
            stub.GetStatus(pb.GetStatusRequest(), timeout=3)
        else:
            stub.RecvTensor(pb.RecvTensorRequest(step_id=5000 + i, rendezvous_key=f"k{i}"),
                            timeout=3)
        codes.append(grpc.StatusCode.OK)
    except grpc.RpcError as e:
        codes.append(e.code())
    finally:
        channel.close()


def test_two_hundred_clients_take_a_bounded_number_of_threads():
    """200 client connections at once, most calls blocking, on a worker with --max-calls 32:
    its thread count stays under its start + 32 + a few (it grew by one thread per blocked
    call, to 1024), the calls past 32 are refused RESOURCE_EXHAUSTED at once, every call is
    answered, and afterwards the worker answers as before."""
    with LocalCluster(1, extra_args=("--max-calls", "32")) as c:
        pid, address = c.procs[0].pid, c.addresses[0]
        worker_status(address)
        start = _threads(pid)
        codes, peak = [], [start]
        clients = [threading.Thread(target=_one_client, args=(address, i, codes), daemon=True)
                   for i in range(200)]
        began = time.monotonic()
        for t in clients:
            t.start()
        while any(t.is_alive() for t in clients) and time.monotonic() - began < 15:
            peak.append(_threads(pid))
            time.sleep(0.05)
        for t in clients:
            t.join(timeout=1)
        assert not any(t.is_alive() for t in clients), "a call was never answered"
        assert len(codes) == 200
        assert max(peak) <= start + 32 + 8, (start, max(peak))
        refused = codes.count(grpc.StatusCode.RESOURCE_EXHAUSTED)
        served = {grpc.StatusCode.DEADLINE_EXCEEDED, grpc.StatusCode.NOT_FOUND,
                  grpc.StatusCode.OK, grpc.StatusCode.ABORTED}
        assert refused >= 100 and all(code in served for code in codes
                                      if code != grpc.StatusCode.RESOURCE_EXHAUSTED), codes
        assert worker_status(address).sessions == 0  # still answering
        # A refused call reaches a master as one line naming the task and the bound.
        client = rpc.WorkerClient(("worker", 0), address)
        try:
            err = client.error("RecvTensor", _Exhausted())
        finally:
            client.close()
        assert "refused RecvTensor" in str(err) and "--max-calls" in str(err)


class _Exhausted(grpc.RpcError):
    def code(self):
        return grpc.StatusCode.RESOURCE_EXHAUSTED

    def details(self):
        return "Concurrent RPC limit exceeded!"


def test_max_calls_must_be_positive():
    from tfg.executor.distributed.worker import serve

    with pytest.raises(TfgInputError, match="--max-calls must be at least 1"):
        serve({"worker": ["127.0.0.1:1"]}, "worker", 0, max_calls=0)
