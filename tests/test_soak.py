"""Load and soak: 50 concurrent Session.run calls on one session give correct results (CI);
10,000 training steps of an MLP on 2 workers without growth of memory (RSS) or threads
(`slow`, on demand: TFG_SOAK=1 python3 -m pytest -s tests/test_soak.py).
"""
import os
import threading
import time

import numpy as np
import pytest

from tfg import builder as tb
from tfg.executor.session import Session
from tfg.passes.partition import partition

DEV = "/job:localhost/replica:0/task:0/device:CPU:{}"
T0, T1 = "/job:worker/task:0", "/job:worker/task:1"


def _concurrently(n, fn):
    """Run fn(i) for i < n on n threads started together -> results in order."""
    barrier = threading.Barrier(n)
    out, errors = [None] * n, []

    def target(i):
        barrier.wait()
        try:
            out[i] = fn(i)
        except BaseException as e:  # noqa: BLE001
            errors.append((i, e))

    threads = [threading.Thread(target=target, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in threads), "a run never returned"
    assert not errors, errors[:3]
    return out


def _graphs():
    rng = np.random.RandomState(0)
    w = rng.randn(4, 3).astype(np.float32)
    with tb.Graph() as g:  # no control flow: the fast path
        x = tb.placeholder(tb.float32, [None, 4], name="x")
        tb.identity(tb.nn.relu(tb.matmul(x, tb.constant(w))), name="y")
    plain = g.graph
    with tb.Graph() as g:  # a loop: the dataflow executor, frames per run
        x = tb.placeholder(tb.float32, [None, 4], name="x")
        n = tb.placeholder(tb.int32, [], name="n")
        _, acc = tb.while_loop(lambda i, a: i < n, lambda i, a: (i + 1, a + x),
                               [tb.constant(0), tb.zeros_like(x)])
        tb.identity(tb.matmul(acc, tb.constant(w)), name="y")
    loop = g.graph
    g2 = tb.Graph()
    with g2:  # two devices exchanging values every iteration
        with tb.device(DEV.format(0)):
            x = tb.placeholder(tb.float32, [None, 4], name="x")
            n = tb.placeholder(tb.int32, [], name="n")

        def body(i, a):
            with tb.device(DEV.format(1)):
                a1 = a + x
            with tb.device(DEV.format(0)):
                return i + 1, a1
        with tb.device(DEV.format(0)):
            _, acc = tb.while_loop(lambda i, a: i < n, body, [tb.constant(0), tb.zeros_like(x)])
            tb.identity(tb.matmul(acc, tb.constant(w)), name="y")
    multi = partition(g2.graph, devices="cpu:2")
    return w, {"plain": (plain, None), "loop": (loop, None), "multi": (multi, "cpu:2")}


@pytest.mark.parametrize("kind", ["plain", "loop", "multi"])
def test_50_concurrent_runs_on_one_session_are_correct(kind):
    w, graphs = _graphs()
    graph, devices = graphs[kind]
    sess = Session(graph, devices=devices)
    feeds = [np.random.RandomState(i).randn(i % 5 + 1, 4).astype(np.float32) for i in range(50)]

    def one(i):
        f = {"x": feeds[i]}
        if kind != "plain":
            f["n"] = i % 7
        return sess.run("y", feeds=f)

    results = _concurrently(50, one)
    for i, got in enumerate(results):
        if kind == "plain":
            want = np.maximum(feeds[i] @ w, 0)
        else:
            want = (feeds[i] * (i % 7)) @ w
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


# --- soak --------------------------------------------------------------------------------
def _status(pid):
    """(RSS in MB, threads) of a process from /proc."""
    rss = threads = 0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                rss = int(line.split()[1]) / 1024
            elif line.startswith("Threads:"):
                threads = int(line.split()[1])
    return rss, threads


def mlp_on_two_tasks(batch=64, hidden=64):
    rng = np.random.RandomState(0)
    g = tb.Graph()
    with g:
        with tb.device(T0):
            x = tb.placeholder(tb.float32, [batch, 16], name="x")
            w1 = tb.Variable(rng.randn(16, hidden).astype(np.float32) * 0.1, name="w1")
            b1 = tb.Variable(np.zeros(hidden, np.float32), name="b1")
            pre = tb.matmul(x, w1) + b1
            h = tb.nn.relu(pre)
        with tb.device(T1):
            y = tb.placeholder(tb.float32, [batch, 1], name="y")
            w2 = tb.Variable(rng.randn(hidden, 1).astype(np.float32) * 0.1, name="w2")
            out = tb.matmul(h, w2)
            err = out - y
            tb.reduce_mean(tb.square(err), name="loss")
            d_out = err * (2.0 / batch)
            g_w2 = tb.matmul(h, d_out, transpose_a=True)
            d_h = tb.matmul(d_out, w2, transpose_b=True)
        with tb.device(T0):
            d_pre = d_h * tb.cast(tb.greater(pre, 0.0), tb.float32)
            g_w1 = tb.matmul(x, d_pre, transpose_a=True)
            g_b1 = tb.reduce_sum(d_pre, axis=0)
        tb.train.gradient_descent(0.05, [(g_w1, w1), (g_b1, b1), (g_w2, w2)], name="train")
        tb.global_variables_initializer()
    feeds = {"x:0": rng.randn(batch, 16).astype(np.float32),
             "y:0": rng.randn(batch, 1).astype(np.float32)}
    return g.graph, feeds


@pytest.mark.slow
@pytest.mark.skipif(not os.environ.get("TFG_SOAK"), reason="soak: set TFG_SOAK=1 to run")
def test_soak_mlp_10000_steps_on_two_workers():
    from tfg.executor.distributed import ClusterConfig
    from tfg.executor.distributed.local import LocalCluster

    steps = int(os.environ.get("TFG_SOAK_STEPS", 10000))
    graph, feeds = mlp_on_two_tasks()
    with LocalCluster(2, threads=1) as cluster:
        sess = Session(graph, cluster=ClusterConfig(cluster.spec, timeout=10))
        sess.run(None, targets=["init"])
        pids = {"client": os.getpid(), "worker0": cluster.procs[0].pid,
                "worker1": cluster.procs[1].pid}
        samples, losses = [], []
        start = time.monotonic()
        for i in range(steps):
            loss = sess.run("loss", feeds=feeds, targets=["train"])
            if i % 500 == 0 or i == steps - 1:
                losses.append(float(loss))
                samples.append((i, {k: _status(p) for k, p in pids.items()}))
        secs = time.monotonic() - start
    warm = next(s for i, s in samples if i >= min(1000, steps // 2))
    last = samples[-1][1]
    print(f"\nsoak: {steps} steps in {secs:.0f}s ({steps / secs:.0f} steps/s), loss "
          f"{losses[0]:.4f} -> {losses[-1]:.4f}")
    for k in pids:
        print(f"  {k}: RSS {samples[0][1][k][0]:.1f} MB at step 0, {warm[k][0]:.1f} MB after "
              f"warm-up, {last[k][0]:.1f} MB at the end; threads {samples[0][1][k][1]} -> "
              f"{warm[k][1]} -> {last[k][1]}")
    assert losses[-1] < losses[0]
    for k in pids:
        assert last[k][0] - warm[k][0] < 30, f"{k} RSS grew"
        assert last[k][1] - warm[k][1] <= 4, f"{k} threads grew"
