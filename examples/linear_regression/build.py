#!/usr/bin/env python3
"""Linear regression trained by gradient descent, gradients written by hand.

    python3 examples/linear_regression/build.py -o linear.pb --feeds linear_feeds.npz
    tfg run linear.pb --feeds linear_feeds.npz --init init --target train --steps 100 \
        --fetch loss --fetch w

Graph: placeholders x [32, 3], y [32, 1]; ref variables w, b (VariableV2 + Assign + read);
pred = x @ w + b; loss = mean((pred - y)^2); grads/w, grads/b; `train` applies
ApplyGradientDescent to both; `init` is the global initializer.
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

N, D = 32, 3


def sample_feeds(seed=0):
    rng = np.random.RandomState(seed)
    x = rng.randn(N, D).astype(np.float32)
    y = (x @ np.array([[2.0], [-1.0], [0.5]]) + 0.3 + 0.01 * rng.randn(N, 1)).astype(np.float32)
    return {"x:0": x, "y:0": y}


def build(learning_rate=0.1):
    """The graph and how to run it: (GraphBuilder, dict of feeds/fetches/init/targets/steps)."""
    g = tb.Graph()
    with g:
        x = tb.placeholder(tb.float32, [N, D], name="x")
        y = tb.placeholder(tb.float32, [N, 1], name="y")
        w = tb.Variable(np.zeros((D, 1), np.float32), name="w")
        b = tb.Variable(np.zeros((1,), np.float32), name="b")
        pred = tb.add(x @ w, b, name="pred")
        err = pred - y
        tb.reduce_mean(tb.square(err), name="loss")
        with tb.name_scope("grads"):
            # d/dw mean((xw + b - y)^2) = 2/N x^T err;  d/db = 2/N sum(err)
            g_w = tb.multiply(tb.matmul(x, err, transpose_a=True), 2.0 / N, name="w")
            g_b = tb.multiply(tb.reduce_sum(err, axis=0), 2.0 / N, name="b")
        tb.train.gradient_descent(learning_rate, [(g_w, w), (g_b, b)], name="train")
        tb.global_variables_initializer()
    return g, dict(feeds=sample_feeds(), fetches=["loss:0", "w:0", "b:0"], init=["init"],
                   targets=["train"], steps=100)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--output", default="linear.pb", help="graph file (.pb or .pbtxt)")
    ap.add_argument("--feeds", help="also write sample feeds to this .npz")
    args = ap.parse_args(argv)
    g, run = build()
    g.save(args.output)
    if args.feeds:
        np.savez(args.feeds, **run["feeds"])


if __name__ == "__main__":
    main()
