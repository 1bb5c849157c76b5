"""Import a GraphDef into TensorFlow and run it: the check that TensorFlow accepts what tfg writes.

Needs TensorFlow (never a tfg dependency). Used by tests/test_tf_import.py through the Python
named by TFG_TF_PYTHON (or this interpreter when it imports tensorflow):

    python3 tools/tf_run_graph.py GRAPH.pb --feeds feeds.npz --fetch loss:0 --target train \
        --init init --steps 3 --cpus 3 -o out.npz
    python3 tools/tf_run_graph.py partitioned.pb --run-sends --cpus 3 --fetch y:0 -o out.npz

Imports with `tf.compat.v1.import_graph_def(name="")` (so TensorFlow checks every node, attr,
edge and colocation reference), runs `--init` once, then fetches and targets together `--steps`
times, and saves the last step's fetches under their names. Exit 3 when the import is refused,
4 when running fails; the error goes to stderr.
"""
import argparse
import sys

import numpy as np


def needed_sends(gd, roots):
    """The _Send nodes the _Recvs in the fan-in of `roots` pair with, transitively: what
    TensorFlow's master runs of each partition when it partitions a pruned graph."""
    nodes = {n.name: n for n in gd.node}
    sends = {}
    for n in gd.node:
        if n.op == "_Send":
            sends[_rendezvous_key(n)] = n.name
    seen, found, stack = set(), [], [r.split(":")[0].lstrip("^") for r in roots]
    while stack:
        name = stack.pop()
        if name in seen or name not in nodes:
            continue
        seen.add(name)
        node = nodes[name]
        stack += [i.split(":")[0].lstrip("^") for i in node.input]
        if node.op == "_Recv":
            send = sends.get(_rendezvous_key(node))
            if send is not None and send not in seen:
                found.append(send)
                stack.append(send)
    return found


def _rendezvous_key(node):
    attr = node.attr
    return (attr["send_device"].s, attr["recv_device"].s, attr["tensor_name"].s)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("graph")
    ap.add_argument("--feeds")
    ap.add_argument("--fetch", action="append", default=[])
    ap.add_argument("--target", action="append", default=[])
    ap.add_argument("--init", action="append", default=[])
    ap.add_argument("--steps", type=int, default=1)
    ap.add_argument("--cpus", type=int, default=1, help="CPU devices the session offers")
    ap.add_argument("--run-sends", action="store_true",
                    help="also run the _Send nodes that the needed _Recvs wait for: a "
                         "partitioned graph's Sends have no consumers, so TensorFlow's pruning "
                         "would drop them and its Recvs would wait forever")
    ap.add_argument("-o", "--output", required=True)
    args = ap.parse_args()

    import tensorflow as tf

    tf.compat.v1.disable_eager_execution()
    gd = tf.compat.v1.GraphDef()
    with open(args.graph, "rb") as f:
        gd.ParseFromString(f.read())
    graph = tf.Graph()
    try:
        with graph.as_default():
            tf.compat.v1.import_graph_def(gd, name="")
    except Exception as e:  # noqa: BLE001 - report whatever TensorFlow refuses with
        print(f"import refused: {type(e).__name__}: {e}", file=sys.stderr)
        return 3
    sends_for = (lambda names: needed_sends(gd, names)) if args.run_sends else (lambda n: [])
    feeds = {}
    if args.feeds:
        with np.load(args.feeds, allow_pickle=False) as data:
            feeds = {k: data[k] for k in data.files}
    config = tf.compat.v1.ConfigProto(device_count={"CPU": args.cpus},
                                      allow_soft_placement=True)
    try:
        with tf.compat.v1.Session(graph=graph, config=config) as sess:
            if args.init:
                sess.run(args.init + sends_for(args.init), feed_dict=feeds)
            values = None
            runs = args.fetch + args.target
            runs += sends_for(runs)
            for _ in range(args.steps):
                values = sess.run(runs, feed_dict=feeds)
    except Exception as e:  # noqa: BLE001
        print(f"run failed: {type(e).__name__}: {e}", file=sys.stderr)
        return 4
    np.savez(args.output, **{name: np.asarray(v) for name, v in
                             zip(args.fetch, values[:len(args.fetch)])})
    return 0


if __name__ == "__main__":
    sys.exit(main())
