#!/usr/bin/env python3
"""Data-dependent branching with tb.cond: a piecewise function and a two-output cond.

    python3 examples/cond/build.py -o cond.pb
    tfg run cond.pb --feed x=-2.0 --feed y=3.0 --fetch piecewise --fetch lo --fetch hi

piecewise(x) = -3x if x < 0 else sqrt(x) + y;  (lo, hi) = (x, y) sorted, from one cond with two
outputs. Each outside tensor a branch reads gets one Switch; each output one Merge.
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
        x = tb.placeholder(tb.float32, [], name="x")
        y = tb.placeholder(tb.float32, [], name="y")
        r = tb.cond(x < 0.0, lambda: x * -3.0, lambda: tb.sqrt(x) + y)
        tb.identity(r, name="piecewise")
        lo, hi = tb.cond(x <= y, lambda: (x, y), lambda: (y, x), name="sort2")
        tb.identity(lo, name="lo")
        tb.identity(hi, name="hi")
    feeds = {"x:0": np.float32(-2.0), "y:0": np.float32(3.0)}
    return g, dict(feeds=feeds, fetches=["piecewise:0", "lo:0", "hi:0"], init=[], targets=[],
                   steps=1)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-o", "--output", default="cond.pb", help="graph file (.pb or .pbtxt)")
    ap.add_argument("--feeds", help="also write sample feeds to this .npz")
    args = ap.parse_args(argv)
    g, run = build()
    g.save(args.output)
    if args.feeds:
        np.savez(args.feeds, **run["feeds"])


if __name__ == "__main__":
    main()
