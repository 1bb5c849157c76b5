"""tb.collective across two real `tfg worker` processes on loopback, and the data-parallel
example (examples/data_parallel/train.py): its losses on 2 workers match single-device
training on the whole batch, through the Python API and through `tfg run --cluster`."""
import importlib.util

import numpy as np
import pytest

from conftest import ROOT
from helpers import tfg_cli
from tfg import builder as tb
from tfg.executor.distributed.local import LocalCluster
from tfg.executor.session import Session

TASKS = ["/job:worker/task:0", "/job:worker/task:1"]
STEPS = 15


@pytest.fixture(scope="module")
def cluster():
    with LocalCluster(2, threads=1) as c:
        yield c


@pytest.fixture(scope="module")
def example():
    path = ROOT / "examples" / "data_parallel" / "train.py"
    spec = importlib.util.spec_from_file_location("data_parallel_train", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_collective_across_two_workers(cluster):
    rng = np.random.RandomState(3)
    a, c = rng.randn(4, 2).astype(np.float32), rng.randn(4, 2).astype(np.float32)
    g = tb.Graph()
    with g:
        xs = []
        for i, task in enumerate(TASKS):
            with tb.device(task):
                xs.append(tb.placeholder(tb.float32, [4, 2], name=f"x{i}"))
        cv = tb.collective
        outs = {"sum": cv.all_sum(xs), "prod": cv.all_prod(xs), "min": cv.all_min(xs),
                "max": cv.all_max(xs), "mean": cv.all_mean(xs),
                "reduce_sum": [cv.reduce_sum(xs, device=TASKS[1])],
                "broadcast": cv.broadcast(xs[1], TASKS)}
    want = {"sum": a + c, "prod": a * c, "min": np.minimum(a, c), "max": np.maximum(a, c),
            "mean": (a + c) / np.float32(2), "reduce_sum": a + c, "broadcast": c}
    names = [(k, t.name) for k, ts in outs.items() for t in ts]
    with Session(g.graph, cluster=cluster.spec) as sess:
        got = sess.run([n for _, n in names], feeds={"x0": a, "x1": c})
        # The members' results really live on both tasks.
        tasks = {sess.backend.graph[n.split(":")[0]].device.split("/task:")[1][0]
                 for _, n in names}
        assert tasks == {"0", "1"}
    for (kind, name), value in zip(names, got):
        np.testing.assert_allclose(value, want[kind], rtol=1e-6, err_msg=name)


def test_data_parallel_matches_single_device_training(cluster, example):
    graph = example.build(TASKS)
    feeds = example.split_feeds(example.sample_batch(), 2)
    # Each worker reads half of the batch.
    assert feeds["replica_0/x"].shape == feeds["replica_1/x"].shape == (16, example.D)
    with Session(graph, cluster=cluster.spec) as sess:
        losses, _ = example.train(sess, feeds, STEPS)
        replicas = sess.variables()
    ref, _ = example.single_device_losses(STEPS)
    assert losses[-1] < 0.6 * losses[0]  # it trains
    np.testing.assert_allclose(losses, ref, rtol=1e-5, atol=1e-6)
    # Every replica applied the same averaged update: the copies are still equal.
    for v in example.VARS:
        np.testing.assert_array_equal(replicas[f"replica_0/{v}"], replicas[f"replica_1/{v}"])
    # Everything but the two grouping NoOps was built on a replica's task, the backward
    # passes that tfg.grad added included; and each task has one replica's variables.
    assert sorted(n.name for n in graph if not n.device) == ["init", "train"]
    for r, task in enumerate(TASKS):
        grads = [n for n in graph if n.name.startswith(f"replica_{r}/grad/")]
        assert grads and all(n.device == task for n in grads)


def test_data_parallel_graph_through_tfg_run_cluster(cluster, example, tmp_path):
    pb, npz, out = tmp_path / "dp.pb", tmp_path / "dp_feeds.npz", tmp_path / "out.npz"
    assert example.main(["--workers", "2", "-o", str(pb), "--feeds", str(npz)]) == 0
    tfg_cli("run", pb, "--cluster", cluster.spec, "--timeout", "30", "--feeds", npz,
            "--init", "init", "--target", "train", "--steps", "5", "--fetch", "loss", "-o", out)
    ref, _ = example.single_device_losses(5)
    # The printed fetch is the last step's: the loss before the 5th update.
    np.testing.assert_allclose(np.load(out)["loss"], ref[4], rtol=1e-5)


def test_data_parallel_on_three_local_devices(example):
    graph = example.build([f"/device:CPU:{r}" for r in range(3)], batch=30)
    feeds = example.split_feeds(example.sample_batch(30), 3)
    with Session(graph, devices="cpu:3") as sess:
        losses, _ = example.train(sess, feeds, 8)
    ref, _ = example.single_device_losses(8, batch_size=30)
    np.testing.assert_allclose(losses, ref, rtol=1e-5, atol=1e-6)
