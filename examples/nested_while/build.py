#!/usr/bin/env python3
"""Nested tb.while_loop: an outer loop over i < n whose body runs an inner loop over j < i.

    python3 examples/nested_while/build.py -o nested_while.pb
    tfg run nested_while.pb --feed n=5 --feed x=0.5 --fetch total --fetch pairs

total = sum over 0 <= j < i < n of (x * i + j); pairs counts the inner iterations (n(n-1)/2).
The inner loop reads x from outside both loops: it enters the outer frame, then the inner one,
each through an Enter with is_constant=true.
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


def build():
    """The graph and how to run it: (GraphBuilder, dict of feeds/fetches/init/targets/steps)."""
    g = tb.Graph()
    with g:
        n = tb.placeholder(tb.int32, [], name="n")
        x = tb.placeholder(tb.float32, [], name="x")

        def outer_body(i, total, pairs):
            fi = tb.cast(i, tb.float32)

            def inner_body(j, t, p):
                return j + 1, t + (x * fi + tb.cast(j, tb.float32)), p + 1

            _, total, pairs = tb.while_loop(lambda j, t, p: j < i, inner_body,
                                            [0, total, pairs], name="inner")
            return i + 1, total, pairs

        _, total, pairs = tb.while_loop(lambda i, t, p: i < n, outer_body, [0, 0.0, 0],
                                        name="outer")
        tb.identity(total, name="total")
        tb.identity(pairs, name="pairs")
    feeds = {"n:0": np.int32(5), "x:0": np.float32(0.5)}
    return g, dict(feeds=feeds, fetches=["total:0", "pairs:0"], init=[], targets=[], steps=1)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--output", default="nested_while.pb",
                    help="graph file (.pb or .pbtxt)")
    ap.add_argument("--feeds", help="also write sample feeds to this .npz")
    args = ap.parse_args(argv)
    g, run = build()
    g.save(args.output)
    if args.feeds:
        np.savez(args.feeds, **run["feeds"])


if __name__ == "__main__":
    main()
