"""Needs TensorFlow (/tmp/tfenv/bin/python): run Grappler's default meta optimizer on a
conformance case and print the nodes it keeps, for comparing with `tfg optimize`.

    /tmp/tfenv/bin/python tools/grappler_diff.py /work/shared/conformance/train_sgd > g.txt
"""
import json
import sys

import tensorflow as tf
from tensorflow.core.protobuf import config_pb2
from tensorflow.python.grappler import tf_optimizer

case = sys.argv[1].rstrip("/")
spec = json.load(open(f"{case}/case.json"))
gd = tf.compat.v1.GraphDef()
gd.ParseFromString(open(f"{case}/graph.pb", "rb").read())
with tf.Graph().as_default() as g:
    tf.import_graph_def(gd, name="")
    for name in spec.get("fetches", []) + spec.get("targets", []) + spec.get("init", []):
        g.add_to_collection("train_op", g.get_operation_by_name(name.split(":")[0]))
    meta = tf.compat.v1.train.export_meta_graph(graph=g)
cfg = config_pb2.ConfigProto()
out = tf_optimizer.OptimizeGraph(cfg, meta)
print(len(out.node), file=sys.stderr)
for n in out.node:
    print(n.name, n.op, list(n.input))
