#!/usr/bin/env python3
"""A two-layer perceptron classifier trained with SGD (hand-written backprop).

    python3 examples/mlp/build.py -o mlp.pb --feeds mlp_feeds.npz
    tfg run mlp.pb --feeds mlp_feeds.npz --init init --target train --steps 50 \
        --fetch loss --fetch accuracy

Graph: x [16, 4], labels [16] (int32) -> one_hot; h = relu(x @ w1 + b1); logits = h @ w2 + b2;
loss = mean(softmax_cross_entropy(labels, logits)); the backward pass is spelled out under
`grads/` and `train` applies ApplyGradientDescent to w1, b1, w2, b2.
"""
import argparse
import sys
from pathlib import Path

import numpy as np

try:
    from tfg import builder as tb
except ImportError:  # running from a checkout without `pip install -e .`
    sys.path.insert(0, str(Path(__file__).resolve().parents[2]))
    from tfg import builder as tb

N, D, H, C = 16, 4, 8, 3


def sample_feeds(seed=0):
    rng = np.random.RandomState(seed)
    x = rng.randn(N, D).astype(np.float32)
    labels = (np.argmax(x[:, :C] + 0.1 * rng.randn(N, C), axis=1)).astype(np.int32)
    return {"x:0": x, "labels:0": labels}


def build(learning_rate=0.5, seed=1):
    """The graph and how to run it: (GraphBuilder, dict of feeds/fetches/init/targets/steps)."""
    rng = np.random.RandomState(seed)
    g = tb.Graph()
    with g:
        x = tb.placeholder(tb.float32, [N, D], name="x")
        labels = tb.placeholder(tb.int32, [N], name="labels")
        onehot = tb.one_hot(labels, C)
        w1 = tb.Variable((0.5 * rng.randn(D, H)).astype(np.float32), name="w1")
        b1 = tb.Variable(np.zeros(H, np.float32), name="b1")
        w2 = tb.Variable((0.5 * rng.randn(H, C)).astype(np.float32), name="w2")
        b2 = tb.Variable(np.zeros(C, np.float32), name="b2")
        with tb.name_scope("layer1"):
            h = tb.relu(tb.bias_add(x @ w1, b1))
        with tb.name_scope("layer2"):
            logits = tb.bias_add(h @ w2, b2, name="logits")
        xent = tb.softmax_cross_entropy_with_logits(labels=onehot, logits=logits)
        tb.reduce_mean(xent, name="loss")
        hits = tb.equal(tb.argmax(logits, 1), tb.cast(labels, tb.int64))
        tb.reduce_mean(tb.cast(hits, tb.float32), name="accuracy")
        with tb.name_scope("grads"):
            d_logits = (tb.softmax(logits) - onehot) / float(N)
            g_w2 = tb.matmul(h, d_logits, transpose_a=True, name="w2")
            g_b2 = tb.reduce_sum(d_logits, axis=0, name="b2")
            d_h = tb.matmul(d_logits, w2, transpose_b=True) * tb.cast(h > 0.0, tb.float32)
            g_w1 = tb.matmul(x, d_h, transpose_a=True, name="w1")
            g_b1 = tb.reduce_sum(d_h, axis=0, name="b1")
        tb.train.gradient_descent(learning_rate, [(g_w1, w1), (g_b1, b1), (g_w2, w2),
                                                  (g_b2, b2)], name="train")
        tb.global_variables_initializer()
    return g, dict(feeds=sample_feeds(), fetches=["loss:0", "accuracy:0"], init=["init"],
                   targets=["train"], steps=50)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--output", default="mlp.pb", help="graph file (.pb or .pbtxt)")
    ap.add_argument("--feeds", help="also write sample feeds to this .npz")
    args = ap.parse_args(argv)
    g, run = build()
    g.save(args.output)
    if args.feeds:
        np.savez(args.feeds, **run["feeds"])


if __name__ == "__main__":
    main()
