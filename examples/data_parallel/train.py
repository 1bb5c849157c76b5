#!/usr/bin/env python3
"""Synchronous data-parallel training of an MLP on N workers (or N local devices).

    python3 examples/data_parallel/train.py --workers 2 --steps 20      # starts 2 tfg workers
    python3 examples/data_parallel/train.py --cluster worker=127.0.0.1:2222,127.0.0.1:2223
    python3 examples/data_parallel/train.py --devices cpu:2             # one process
    python3 examples/data_parallel/train.py -o dp.pb --feeds dp_feeds.npz   # just write it

Every replica r (on `/job:worker/task:r`, or `/device:CPU:r` with --devices) holds its own
copy of the variables (same initial values), reads its slice of the batch (`replica_r/x`,
`replica_r/labels`), computes its mean loss and, with `tfg.grad`, its gradients. The gradients
are averaged with `tb.collective.all_mean` (a reduction tree, then one copy back to each
replica), and every replica applies the same update to its copy, so the copies stay equal.
With equal slices the mean of the replicas' mean losses is the full batch's mean loss and the
mean of their gradients is its gradient: the run matches single-device training on the whole
batch, which the script runs too and prints beside it.

Nodes: `loss` (the full batch's mean loss, on replica 0), `train` (one SGD step everywhere),
`init` (every replica's variables).
"""
import argparse
import sys
import time
from pathlib import Path

import numpy as np

try:
    import tfg
except ImportError:  # running from a checkout without `pip install -e .`
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    import tfg
from tfg import builder as tb

D, H, C = 4, 16, 3  # input features, hidden units, classes
VARS = ("w1", "b1", "w2", "b2")


def sample_batch(n=32, seed=0, dims=(D, H, C)):
    """{'x': [n, d] float32, 'labels': [n] int32}: c noisy linear classes."""
    d, _, c = dims
    rng = np.random.RandomState(seed)
    x = rng.randn(n, d).astype(np.float32)
    labels = np.argmax(x[:, :c] + 0.3 * rng.randn(n, c), axis=1).astype(np.int32)
    return {"x": x, "labels": labels}


def initial_values(seed=1, dims=(D, H, C)):
    d, h, c = dims
    rng = np.random.RandomState(seed)
    scale = min(0.5, 2.0 / np.sqrt(d))
    return {"w1": (scale * rng.randn(d, h)).astype(np.float32), "b1": np.zeros(h, np.float32),
            "w2": (scale * rng.randn(h, c)).astype(np.float32), "b2": np.zeros(c, np.float32)}


def _forward(x, labels, init):
    """The MLP's mean cross-entropy loss on (x, labels), with variables made here."""
    v = {k: tb.Variable(val, name=k) for k, val in init.items()}
    h = tb.relu(tb.bias_add(x @ v["w1"], v["b1"]))
    logits = tb.bias_add(h @ v["w2"], v["b2"], name="logits")
    classes = init["b2"].shape[0]
    xent = tb.softmax_cross_entropy_with_logits(labels=tb.one_hot(labels, classes),
                                                logits=logits)
    return tb.reduce_mean(xent, name="loss")


def build(devices, batch=32, learning_rate=0.5, seed=1, dims=(D, H, C)):
    """The data-parallel graph over `devices` (one replica each); returns a tfg Graph.

    The global batch is split evenly: replica r reads rows [r*b, (r+1)*b) with b = batch / n.
    `dims`: (inputs, hidden units, classes).
    """
    n = len(devices)
    if batch % n:
        raise ValueError(f"batch {batch} does not split evenly over {n} replicas")
    init = initial_values(seed, dims)
    g = tb.Graph()
    with g:
        for r, dev in enumerate(devices):
            with tb.device(dev), tb.name_scope(f"replica_{r}"):
                x = tb.placeholder(tb.float32, [batch // n, dims[0]], name="x")
                labels = tb.placeholder(tb.int32, [batch // n], name="labels")
                _forward(x, labels, init)
        tb.global_variables_initializer()
    graph = g.graph
    # Each replica's backward pass with tfg's autodiff, kept on the replica's device.
    for r, dev in enumerate(devices):
        before = set(graph.node_names())
        graph = tfg.grad(graph, ys=f"replica_{r}/loss",
                         xs=[f"replica_{r}/{v}/read" for v in VARS], prefix=f"replica_{r}/grad")
        for node in graph:
            if node.name not in before and not node.device:
                node.device = dev
    b = tb.GraphBuilder(graph=graph)
    with b:
        cv = tb.collective
        updates = [[] for _ in devices]
        for v in VARS:
            grads = [cv.from_graph(f"replica_{r}/grad/replica_{r}/{v}/read")
                     for r in range(n)]
            for r, avg in enumerate(cv.all_mean(grads, name=f"all_mean_{v}")):
                updates[r].append((avg, cv.from_graph(f"replica_{r}/{v}")))
        steps = []
        for r, dev in enumerate(devices):
            with tb.device(dev):
                steps.append(tb.train.gradient_descent(learning_rate, updates[r],
                                                       name=f"replica_{r}/train"))
        tb.group(*steps, name="train")
        losses = [cv.from_graph(f"replica_{r}/loss") for r in range(n)]
        with tb.device(devices[0]):
            tb.multiply(cv.reduce_sum(losses, name="sum_loss"), 1.0 / n, name="loss")
    return b.graph


def split_feeds(batch, n):
    """The global batch as the feeds of n replicas (`replica_r/x`, `replica_r/labels`)."""
    feeds = {}
    for key, value in batch.items():
        for r, part in enumerate(np.split(value, n)):
            feeds[f"replica_{r}/{key}"] = part
    return feeds


def train(session, feeds, steps):
    """Run init, then `steps` SGD steps; -> (losses before each step, seconds per step)."""
    session.run(None, targets=["init"])
    losses = []
    session.run("loss", feeds=feeds, targets=["train"])  # warm-up: graphs registered, cached
    session.run(None, targets=["init"])
    t0 = time.perf_counter()
    for _ in range(steps):
        losses.append(float(session.run("loss", feeds=feeds, targets=["train"])))
    return np.array(losses), (time.perf_counter() - t0) / max(steps, 1)


def single_device_losses(steps, batch_size=32, learning_rate=0.5, seed=1):
    """The reference: the same model on the whole batch in one device (one replica)."""
    graph = build(["/device:CPU:0"], batch_size, learning_rate, seed)
    with tfg.Session(graph, devices="cpu:1") as sess:
        return train(sess, split_feeds(sample_batch(batch_size), 1), steps)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    where = ap.add_mutually_exclusive_group()
    where.add_argument("--workers", type=int, default=2,
                       help="start this many local tfg workers (default 2)")
    where.add_argument("--cluster", help="use these running workers (a cluster SPEC)")
    where.add_argument("--devices", help="local devices instead of workers, e.g. cpu:2")
    ap.add_argument("--steps", type=int, default=20)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--lr", type=float, default=0.5)
    ap.add_argument("-o", "--output", help="only write the graph here (for `tfg run`)")
    ap.add_argument("--feeds", help="with -o: also write the replicas' feeds to this .npz")
    ap.add_argument("--compress-transfers", choices=["none", "bf16"], default="none",
                    help="bf16: float32 tensors between replicas travel as truncated 16-bit "
                         "floats (lossy: the losses then only track single-device training)")
    args = ap.parse_args(argv)
    compress = args.compress_transfers
    if args.devices:
        count = int(args.devices.split(":")[1])
        devices = [f"/device:CPU:{r}" for r in range(count)]
    elif args.cluster:
        from tfg.executor.distributed.spec import ClusterConfig

        devices = [f"/job:worker/task:{t}" for t in range(len(ClusterConfig(args.cluster).tasks))]
    else:
        devices = [f"/job:worker/task:{t}" for t in range(args.workers)]
    graph = build(devices, args.batch, args.lr)
    feeds = split_feeds(sample_batch(args.batch), len(devices))
    if args.output:
        tfg.save(graph, args.output)
        if args.feeds:
            np.savez(args.feeds, **{f"{k}:0": v for k, v in feeds.items()})
        return 0
    sent = None
    if args.devices:
        if compress != "none":  # between local devices: marks on the _Send/_Recv pairs
            graph = tfg.partition(graph, args.devices, compress=compress)
        with tfg.Session(graph, devices=args.devices) as sess:
            losses, per_step = train(sess, feeds, args.steps)
    elif args.cluster:
        losses, per_step, sent = train_on_cluster(graph, feeds, args.steps, args.cluster,
                                                  compress)
    else:
        from tfg.executor.distributed.local import LocalCluster

        with LocalCluster(args.workers, threads=1) as cluster:
            losses, per_step, sent = train_on_cluster(graph, feeds, args.steps, cluster.spec,
                                                      compress)
    ref, ref_per_step = single_device_losses(args.steps, args.batch, args.lr)
    print(f"{'step':>4}  {'data-parallel':>13}  {'single device':>13}")
    for i, (a, c) in enumerate(zip(losses, ref)):
        print(f"{i:4d}  {a:13.6f}  {c:13.6f}")
    gap = float(np.max(np.abs(losses - ref)))
    print(f"max |difference| {gap:.2e}; {per_step * 1e3:.1f} ms/step on {len(devices)} "
          f"replicas, {ref_per_step * 1e3:.1f} ms/step on one device")
    if sent is not None:
        print(f"RecvTensor bytes between workers: {sent} ({sent / max(args.steps, 1):.0f} per "
              f"step), --compress-transfers {compress}")
    if compress != "none":  # lossy: it must still train, close to the exact curve
        return 0 if losses[-1] < 0.6 * losses[0] and gap < 0.05 else 1
    return 0 if gap < 1e-4 else 1


def train_on_cluster(graph, feeds, steps, spec, compress="none"):
    """train() on a cluster; -> (losses, seconds per step, tensor bytes the workers sent each
    other over RecvTensor during the timed steps)."""
    from tfg.executor.distributed.spec import ClusterConfig

    config = ClusterConfig(spec, compress_transfers=compress)
    with tfg.Session(graph, cluster=config) as sess:
        sess.run(None, targets=["init"])
        sess.run("loss", feeds=feeds, targets=["train"])  # warm-up, as train() does
        before = _bytes_sent(sess)
        losses, per_step = train(sess, feeds, steps)
        return losses, per_step, _bytes_sent(sess) - before


def _bytes_sent(sess):
    from tfg.schemas.proto import worker_pb2 as pb

    return sum(c.call("GetStatus", pb.GetStatusRequest(), timeout=10).tensor_bytes_sent
               for c in sess.backend.clients.values())


if __name__ == "__main__":
    sys.exit(main())
