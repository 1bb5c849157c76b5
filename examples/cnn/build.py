#!/usr/bin/env python3
"""A small convolutional network (inference): conv -> relu -> max pool -> conv -> relu ->
avg pool -> dense -> softmax, with weights in ref variables.

    python3 examples/cnn/build.py -o cnn.pb --feeds cnn_feeds.npz
    tfg run cnn.pb --feeds cnn_feeds.npz --init init --fetch probs
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

N, HW, C = 2, 8, 3


def sample_feeds(seed=0):
    rng = np.random.RandomState(seed)
    return {"images:0": rng.rand(N, HW, HW, C).astype(np.float32)}


def build(seed=2):
    """The graph and how to run it: (GraphBuilder, dict of feeds/fetches/init/targets/steps)."""
    rng = np.random.RandomState(seed)

    def param(*shape):
        return (0.3 * rng.randn(*shape)).astype(np.float32)

    g = tb.Graph()
    with g:
        images = tb.placeholder(tb.float32, [N, HW, HW, C], name="images")
        with tb.name_scope("conv1"):
            k = tb.Variable(param(3, 3, C, 4), name="kernel")
            bias = tb.Variable(param(4), name="bias")
            h = tb.relu(tb.bias_add(tb.conv2d(images, k, strides=1, padding="SAME"), bias))
        h = tb.max_pool(h, ksize=2, strides=2, padding="VALID", name="pool1")   # [2, 4, 4, 4]
        with tb.name_scope("conv2"):
            k = tb.Variable(param(3, 3, 4, 6), name="kernel")
            h = tb.relu(tb.conv2d(h, k, strides=[1, 1], padding="VALID"))          # [2, 2, 2, 6]
        h = tb.avg_pool(h, ksize=2, strides=1, padding="SAME", name="pool2")
        flat = tb.reshape(h, [N, -1])
        with tb.name_scope("dense"):
            w = tb.Variable(param(24, 5), name="kernel")
            logits = flat @ w
        tb.softmax(logits, name="probs")
        tb.global_variables_initializer()
    return g, dict(feeds=sample_feeds(), fetches=["probs:0"], init=["init"], targets=[],
                   steps=1)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--output", default="cnn.pb", help="graph file (.pb or .pbtxt)")
    ap.add_argument("--feeds", help="also write sample feeds to this .npz")
    args = ap.parse_args(argv)
    g, run = build()
    g.save(args.output)
    if args.feeds:
        np.savez(args.feeds, **run["feeds"])


if __name__ == "__main__":
    main()
