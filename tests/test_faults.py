"""Runtime and cluster faults end cleanly and lose nothing: a kernel error deep in a nested loop
on one device of three ends the step everywhere naming the node; Ctrl-C stops a long run with
the last checkpoint intact; kill -9 while a checkpoint is written never corrupts the previous
one; a worker cut off the network (its port closed) ends the step within the timeout naming
the task, and a rerun resumes from the checkpoint reporting the steps lost; huge tensors are
refused before they are allocated (--max-memory).

Figures (faults injected, steps lost) are printed with -s.
"""
import os
import random
import signal
import socket
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

from tfg import builder as tb
from tfg.errors import TfgRuntimeError
from tfg.executor.limits import parse_size
from tfg.executor.session import Session
from tfg.graphdef import io
from tfg.kernels.checkpoint_format import read_checkpoint_with_step
from tfg.passes.partition import partition

DEV = "/job:localhost/replica:0/task:0/device:CPU:{}"


def _tfg(*args):
    return [sys.executable, "-m", "tfg", *map(str, args)]


def _tfg_threads():
    return [t for t in threading.enumerate() if t.name.startswith("tfg-CPU")]


# --- a kernel error in a nested loop, one device of three --------------------------------
def nested_loop_graph(fail_at):
    """outer i < 4, inner j < 3 on CPU:1 reads v[i * 3 + j] from a 10-vector on CPU:2:
    index 10 (i = 3, j = 1) is out of range when fail_at allows it."""
    g = tb.Graph()
    with g:
        with tb.device(DEV.format(0)):
            limit = tb.placeholder(tb.int32, [], name="limit")
        with tb.device(DEV.format(2)):
            v = tb.constant(np.arange(10, dtype=np.float32), name="v")

        def outer_body(i, acc):
            def inner_body(j, a):
                with tb.device(DEV.format(1)):
                    k = tb.minimum(i * 3 + j, limit)
                with tb.device(DEV.format(2)):
                    x = tb.slice(v, tb.reshape(k, [1]), [1], name="pick")
                with tb.device(DEV.format(1)):
                    return j + 1, a + tb.reduce_sum(x)
            _, a = tb.while_loop(lambda j, a: j < 3, inner_body, [tb.constant(0), acc])
            return i + 1, a

        with tb.device(DEV.format(0)):
            _, acc = tb.while_loop(lambda i, a: i < 4, outer_body,
                                   [tb.constant(0), tb.constant(0.0)])
            tb.identity(acc, name="total")
    return partition(g.graph, devices="cpu:3")


def test_kernel_error_in_nested_loop_ends_the_step_on_all_three_devices():
    graph = nested_loop_graph(fail_at=10)
    assert len({n.device for n in graph}) == 3
    sess = Session(graph, devices="cpu:3")
    # Within range: the loops run to the end on all devices.
    assert float(sess.run("total", feeds={"limit": 9})) == pytest.approx(
        sum(min(i * 3 + j, 9) for i in range(4) for j in range(3)))
    before = len(_tfg_threads())
    start = time.monotonic()
    with pytest.raises(TfgRuntimeError, match=r"node '[^']*pick[^']*' \(Slice\) failed"):
        sess.run("total", feeds={"limit": 100})
    assert time.monotonic() - start < 10
    # Every device's executor ended (no thread left waiting on a Recv that never comes).
    assert len(_tfg_threads()) <= before
    # And the session still works afterwards.
    assert float(sess.run("total", feeds={"limit": 9})) > 0


# --- huge tensors: refused before allocating -----------------------------------------------
def _huge_graphs():
    big = [1 << 20, 1 << 20]  # 4 TiB of float32
    out = {}
    with tb.Graph() as g:
        tb.identity(tb.fill(tb.constant(big), 1.0), name="y")
    out["Fill"] = g.graph
    with tb.Graph() as g:
        tb.identity(tb.random_uniform(big), name="y")
    out["RandomUniform"] = g.graph
    with tb.Graph() as g:
        tb.identity(tb.tile(tb.constant([[1.0]]), tb.constant(big)), name="y")
    out["Tile"] = g.graph
    with tb.Graph() as g:
        a = tb.placeholder(tb.float32, [None, 1], name="a")
        b = tb.placeholder(tb.float32, [1, None], name="b")
        tb.identity(a + b, name="y")
    out["AddV2"] = g.graph
    with tb.Graph() as g:
        tb.identity(tb.range(0.0, 1e12, 1.0), name="y")
    out["Range"] = g.graph
    with tb.Graph() as g:
        tb.identity(tb.constant(1.0, name="c"), name="y")
    gd = g.graph.to_proto()
    for nd in gd.node:
        if nd.name == "c":
            t = nd.attr["value"].tensor
            t.ClearField("tensor_content")
            t.ClearField("float_val")
            t.float_val.append(1.0)
            t.tensor_shape.ClearField("dim")
            for d in (1 << 15, 1 << 14):  # 2 GiB declared by a one-value splat
                t.tensor_shape.dim.add().size = d
    out["Const"] = io.loads(gd.SerializeToString())
    return out


@pytest.mark.parametrize("op", ["Fill", "RandomUniform", "Tile", "AddV2", "Range", "Const"])
def test_huge_tensor_is_refused_before_allocating(op):
    import resource

    graph = _huge_graphs()[op]
    feeds = {}
    if op == "AddV2":  # 1M x 1M from two 4 MB inputs
        feeds = {"a": np.zeros((1 << 20, 1), np.float32), "b": np.zeros((1, 1 << 20), np.float32)}
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    sess = Session(graph, max_memory="1G")
    start = time.monotonic()
    with pytest.raises(TfgRuntimeError, match=r"over the memory limit of 1\.00 GiB"):
        sess.run("y", feeds=feeds)
    assert time.monotonic() - start < 5
    # Nothing near the size was allocated (peak RSS grew by less than 200 MB).
    assert resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - rss < 200 * 1024


def test_default_limit_is_the_machine_and_small_tensors_pass():
    sess = Session(_huge_graphs()["Fill"])
    assert sess.memory_limit and sess.memory_limit >= 1 << 28
    with pytest.raises(TfgRuntimeError, match="4.00 TiB"):
        sess.run("y")
    with tb.Graph() as g:
        tb.identity(tb.fill(tb.constant([3, 2]), 7.0), name="y")
    assert Session(g.graph, max_memory=24).run("y").shape == (3, 2)
    with pytest.raises(TfgRuntimeError, match="memory limit"):
        Session(g.graph, max_memory=23).run("y")


def test_max_memory_on_the_cli(tmp_path):
    path = tmp_path / "g.pb"
    io.save(_huge_graphs()["RandomUniform"], str(path))
    p = subprocess.run(_tfg("run", path, "--fetch", "y", "--max-memory", "64M", "-o",
                            tmp_path / "o.npz"), capture_output=True, timeout=60)
    err = p.stderr.decode()
    assert p.returncode == 1 and err.count("\n") == 1 and "Traceback" not in err
    assert "(RandomUniform) failed: would allocate 4.00 TiB" in err and "64.00 MiB" in err
    assert not (tmp_path / "o.npz").exists()
    p = subprocess.run(_tfg("run", path, "--fetch", "y", "--max-memory", "lots"),
                       capture_output=True, timeout=60)
    assert p.returncode == 2 and b"--max-memory 'lots'" in p.stderr
    assert parse_size("1.5k") == 1536 and parse_size("2GiB") == 2 << 30


# --- Ctrl-C ----------------------------------------------------------------------------------
def counter_graph(n=1 << 20):
    """A variable of n floats that every step adds 1 to: its value says the step count."""
    with tb.Graph() as g:
        v = tb.Variable(np.zeros(n, np.float32), name="v")
        tb.assign_add(v, tb.ones([n]), name="train")
        tb.identity(tb.reduce_mean(v), name="avg")
        tb.global_variables_initializer()
    return g.graph


def default_sigint():
    """Popen's preexec_fn for the Ctrl-C tests: the child gets SIGINT's default disposition, as
    under a terminal. A shell's background job (`cmd &` without job control) ignores SIGINT,
    and an ignored signal stays ignored across exec, so a suite started that way would send a
    Ctrl-C nobody can receive."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def _wait_for(path, proc, timeout=60):
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert proc.poll() is None, proc.stderr.read().decode()
        assert time.monotonic() < deadline, f"{path} never appeared"
        time.sleep(0.01)


def test_ctrl_c_stops_a_long_run_and_keeps_the_last_checkpoint(tmp_path):
    path, ckpt = tmp_path / "g.pb", tmp_path / "ckpt"
    io.save(counter_graph(1 << 10), str(path))
    cmd = _tfg("run", path, "--init", "init", "--target", "train", "--fetch", "avg",
               "--steps", 10 ** 7, "--checkpoint-dir", ckpt, "--checkpoint-every", 50)
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            preexec_fn=default_sigint)
    _wait_for(ckpt / "variables.tfgckpt", proc)
    time.sleep(0.5)
    sent = time.monotonic()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    err = err.decode()
    assert proc.returncode == 130, err
    assert time.monotonic() - sent < 10
    assert err.count("\n") == 1 and "Traceback" not in err, err
    assert err.startswith("tfg: interrupted after ")
    named, saved = read_checkpoint_with_step(ckpt / "variables.tfgckpt")
    assert saved % 50 == 0 and saved >= 50
    assert np.all(named["v"] == saved)  # the variable of exactly `saved` steps
    assert f"holds step {saved}" in err
    lost = int(err.split("(")[-1].split()[0])
    # A rerun resumes there: 10 more steps give saved + 10.
    p = subprocess.run(_tfg("run", path, "--init", "init", "--target", "train", "--fetch",
                            "avg", "--steps", saved + 10, "--checkpoint-dir", ckpt),
                       capture_output=True, timeout=120)
    assert p.returncode == 0, p.stderr
    named, final = read_checkpoint_with_step(ckpt / "variables.tfgckpt")
    assert final == saved + 10 and np.all(named["v"] == saved + 10)
    print(f"\nCtrl-C: 1 fault injected, checkpoint at step {saved}, {lost} steps lost")


def test_ctrl_c_inside_a_long_multi_device_step(tmp_path):
    g = tb.Graph()
    with g:
        with tb.device(DEV.format(0)):
            n = tb.placeholder(tb.int32, [], name="n")

        def body(i, x):
            with tb.device(DEV.format(1)):
                x1 = x * 1.0
            with tb.device(DEV.format(0)):
                return i + 1, x1
        with tb.device(DEV.format(0)):
            tb.identity(tb.while_loop(lambda i, x: i < n, body,
                                      [tb.constant(0), tb.constant(1.0)])[0], name="count")
    path = tmp_path / "g.pb"
    io.save(partition(g.graph, devices="cpu:2"), str(path))
    proc = subprocess.Popen(_tfg("run", path, "--devices", "cpu:2", "--feed", "n=1000000000",
                                 "--fetch", "count"), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, preexec_fn=default_sigint)
    time.sleep(3)  # well inside the step
    assert proc.poll() is None
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=20)
    assert proc.returncode == 130, err
    assert err.decode().count("\n") == 1 and b"Traceback" not in err


# --- kill -9 while a checkpoint is written ---------------------------------------------------
def test_kill_9_while_writing_a_checkpoint_never_corrupts_the_previous_one(tmp_path):
    path, ckpt = tmp_path / "g.pb", tmp_path / "ckpt"
    io.save(counter_graph(1 << 23), str(path))  # 32 MB: every step is mostly the write
    cmd = _tfg("run", path, "--init", "init", "--target", "train", "--steps", 10 ** 6,
               "--checkpoint-dir", ckpt, "--checkpoint-every", 1)
    rng = random.Random(0)
    kills, mid_write, last = 0, 0, -1
    for k in range(8):
        proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        _wait_for(ckpt / "variables.tfgckpt", proc, timeout=120)
        if k % 2:  # at a random moment
            time.sleep(0.3 + rng.random() * 0.7)
        else:  # the moment a new checkpoint's temporary file appears: inside the write
            deadline = time.monotonic() + 30
            while not any(p.name.startswith(".tmp-") for p in ckpt.iterdir()):
                assert time.monotonic() < deadline and proc.poll() is None
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        kills += 1
        temps = [p for p in ckpt.iterdir() if p.name.startswith(".tmp-")]
        mid_write += bool(temps)
        named, step = read_checkpoint_with_step(ckpt / "variables.tfgckpt")  # checksum ok
        assert np.all(named["v"] == step) and step >= last
        last = step
        for p in temps:  # a torn temporary file is never the checkpoint
            p.unlink()
    assert last > 0
    print(f"\nkill -9: {kills} faults injected, {mid_write} while a checkpoint was being "
          f"written; the checkpoint was intact every time (last step {last})")


# --- a worker cut off the network -----------------------------------------------------------
class Proxy:
    """A TCP proxy on `port` to `target`; `cut()` closes the port and every connection."""

    def __init__(self, port, target):
        self.port, self.target = port, target
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", port))
        self.sock.listen(64)
        self.conns = []
        self.open = True
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self):
        while self.open:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target))
            except OSError:
                client.close()
                continue
            self.conns += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pump, args=(a, b), daemon=True).start()

    @staticmethod
    def _pump(a, b):
        try:
            while True:
                data = a.recv(65536)
                if not data:
                    break
                b.sendall(data)
        except OSError:
            pass
        for s in (a, b):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def cut(self):
        self.open = False
        try:
            self.sock.shutdown(socket.SHUT_RDWR)  # wakes the accept() so the port frees
        except OSError:
            pass
        self.sock.close()
        for c in self.conns:
            try:
                c.shutdown(socket.SHUT_RDWR)
                c.close()
            except OSError:
                pass


def _wait_healthy(address, timeout=60):
    import grpc

    from tfg.executor.distributed.rpc import health_check

    deadline = time.monotonic() + timeout
    with grpc.insecure_channel(address) as channel:
        while True:
            try:
                if health_check(channel, timeout=1.0) == 1:
                    return
            except grpc.RpcError:
                pass
            assert time.monotonic() < deadline, f"worker {address} did not start"
            time.sleep(0.1)


def test_closed_port_ends_the_step_naming_the_task_and_a_rerun_resumes(tmp_path):
    from tfg.executor.distributed.local import free_port
    from test_cluster_failures import train_graph

    graph, feeds = train_graph()
    steps, timeout = 100, 3.0
    pb_path, npz, ckpt, out = (tmp_path / "g.pb", tmp_path / "f.npz", tmp_path / "ckpt",
                               tmp_path / "out.npz")
    io.save(graph, str(pb_path))
    np.savez(npz, **feeds)
    public = [free_port(), free_port()]
    real = [free_port(), free_port()]
    spec = "worker=" + ",".join(f"127.0.0.1:{p}" for p in public)
    workers = [subprocess.Popen(_tfg("worker", "--cluster", spec, "--task", i, "--bind",
                                     f"127.0.0.1:{real[i]}"), stderr=subprocess.DEVNULL)
               for i in range(2)]
    proxies = [Proxy(public[i], real[i]) for i in range(2)]
    try:
        for port in real:
            _wait_healthy(f"127.0.0.1:{port}")
        cmd = _tfg("run", pb_path, "--cluster", spec, "--feeds", npz, "--init", "init",
                   "--target", "train", "--fetch", "loss", "--steps", steps,
                   "--checkpoint-dir", ckpt, "--checkpoint-every", 10, "--timeout", timeout,
                   "-o", out)
        first = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        _wait_for(ckpt / "variables.tfgckpt", first, timeout=120)
        cut_at = time.monotonic()
        proxies[1].cut()
        _, err = first.communicate(timeout=4 * timeout + 30)
        ended = time.monotonic() - cut_at
        err = err.decode()
        assert first.returncode == 1, err
        assert "/job:worker/task:1" in err and "Traceback" not in err and err.count("\n") == 1
        assert ended < 2 * timeout + 10
        _, saved = read_checkpoint_with_step(ckpt / "variables.tfgckpt")
        assert f"holds step {saved}: a rerun resumes there" in err
        lost = int(err.rsplit("(", 1)[1].split()[0])
        assert 0 <= lost < 10
        assert not out.exists()
        # The network heals: same ports, same workers (their variables survived).
        proxies[1] = Proxy(public[1], real[1])
        time.sleep(1.5)  # the workers' channels to task 1 reconnect (backoff of at most 1 s)
        second = subprocess.run(cmd, capture_output=True, timeout=300)
        assert second.returncode == 0, second.stderr
        _, final = read_checkpoint_with_step(ckpt / "variables.tfgckpt")
        assert final == steps
        print(f"\nclosed port: 1 fault injected, step ended {ended:.1f}s after the cut, "
              f"resumed from step {saved}, {lost} steps lost")
    finally:
        for p in proxies:
            p.cut()
        for w in workers:
            w.kill()
            w.wait()


def test_ctrl_c_during_a_cluster_step_ends_it_on_every_worker(tmp_path):
    from test_cluster_failures import long_loop_graph

    from tfg.executor.distributed.local import LocalCluster
    from tfg.executor.distributed.rpc import WorkerClient
    from tfg.schemas.proto import worker_pb2 as pb

    path = tmp_path / "g.pb"
    io.save(long_loop_graph(10 ** 9), str(path))
    with LocalCluster(2) as c:
        proc = subprocess.Popen(_tfg("run", path, "--cluster", c.spec, "--fetch", "count"),
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                preexec_fn=default_sigint)
        clients = [WorkerClient(("worker", i), a) for i, a in enumerate(c.addresses)]
        deadline = time.monotonic() + 60
        while not all(cl.call("GetStatus", pb.GetStatusRequest(), timeout=5).active_steps
                      for cl in clients):
            assert proc.poll() is None and time.monotonic() < deadline
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
        assert proc.returncode == 130, err
        assert err.count(b"\n") == 1 and b"Traceback" not in err
        deadline = time.monotonic() + 10  # the abort reaches both tasks
        while any(cl.call("GetStatus", pb.GetStatusRequest(), timeout=5).active_steps
                  for cl in clients):
            assert time.monotonic() < deadline, "a worker still runs the cancelled step"
            time.sleep(0.05)
