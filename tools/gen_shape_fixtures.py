#!/usr/bin/env python3
"""Shapes TensorFlow infers for a graph of many ops on partially known inputs (needs TensorFlow).

    /tmp/tfenv/bin/python tools/gen_shape_fixtures.py tests/fixtures/shapes

Writes graph.pb (without `_output_shapes`, so tfg must infer everything itself) and shapes.json
({node: [shape per output]}, a shape a list with null for unknown dims, or null for unknown
rank), which tests/test_infer.py compares with tfg.graphdef.infer. Imports TensorFlow only.
"""
import json
import os
import sys

import numpy as np
import tensorflow as tf

v1 = tf.compat.v1


def build():
    F = tf.float32
    x = v1.placeholder(F, [None, 8, 8, 3], name="x")          # NHWC image, unknown batch
    xc = v1.placeholder(F, [2, 3, 8, 8], name="xc")           # NCHW image
    m = v1.placeholder(F, [None, 6], name="m")
    v = v1.placeholder(F, [5], name="v")
    u = v1.placeholder(F, None, name="u")                     # unknown rank
    r3 = v1.placeholder(F, [4, None, 6], name="r3")
    i = v1.placeholder(tf.int32, [None], name="i")
    b = v1.placeholder(tf.bool, [None, 6], name="b")

    # broadcasting
    tf.add(m, v1.placeholder(F, [3, 1, 6]), name="bc1")
    tf.multiply(m, tf.constant(2.0), name="bc2")
    tf.subtract(r3, v1.placeholder(F, [None, 1]), name="bc3")
    tf.maximum(u, m, name="bc4")
    tf.raw_ops.SelectV2(condition=b, t=m, e=tf.constant(0.0), name="selv2")
    tf.raw_ops.Select(condition=v1.placeholder(tf.bool, [None]), x=m, y=m, name="sel")
    tf.raw_ops.AddN(inputs=[m, m, v1.placeholder(F, [3, None])], name="addn")

    # convolution and pooling
    w = tf.constant(np.ones([3, 3, 3, 4], np.float32))
    tf.nn.conv2d(x, w, strides=1, padding="SAME", name="conv_same")
    tf.nn.conv2d(x, w, strides=2, padding="VALID", name="conv_valid_s2")
    tf.nn.conv2d(x, w, strides=1, padding="VALID", dilations=2, name="conv_dil")
    tf.nn.conv2d(x, w, strides=2, padding=[[0, 0], [1, 2], [0, 1], [0, 0]], name="conv_explicit")
    tf.raw_ops.Conv2D(input=xc, filter=w, strides=[1, 1, 2, 2], padding="SAME",
                      data_format="NCHW", name="conv_nchw")
    tf.nn.depthwise_conv2d(x, tf.constant(np.ones([3, 3, 3, 2], np.float32)), [1, 2, 2, 1],
                           "SAME", name="dwconv")
    tf.nn.max_pool2d(x, 3, 2, "VALID", name="maxpool")
    tf.nn.avg_pool2d(x, 2, 2, "SAME", name="avgpool")
    tf.raw_ops.MaxPool(input=xc, ksize=[1, 1, 3, 3], strides=[1, 1, 2, 2], padding="SAME",
                       data_format="NCHW", name="maxpool_nchw")
    tf.nn.bias_add(xc, tf.zeros([3]), data_format="NCHW", name="biasadd_nchw")
    tf.raw_ops.BiasAddGrad(out_backprop=x, name="biasaddgrad")
    tf.raw_ops.FusedBatchNormV3(x=x, scale=tf.ones([3]), offset=tf.zeros([3]),
                                mean=tf.zeros([3]), variance=tf.ones([3]), is_training=False,
                                name="fbn")
    tf.raw_ops.Conv2DBackpropInput(input_sizes=tf.constant([2, 8, 8, 3]), filter=w,
                                   out_backprop=v1.placeholder(F, [2, 4, 4, 4]),
                                   strides=[1, 2, 2, 1], padding="SAME", name="conv_bp_in")

    # matrix products
    tf.matmul(m, tf.ones([6, 2]), name="mm")
    tf.matmul(tf.ones([6, 2]), m, transpose_a=True, transpose_b=True, name="mm_t")
    tf.raw_ops.BatchMatMulV2(x=v1.placeholder(F, [None, 1, 3, 4]), y=tf.ones([5, 4, 2]),
                             name="bmm")

    # reductions
    tf.reduce_sum(r3, axis=1, name="sum1")
    tf.reduce_mean(r3, axis=[0, -1], keepdims=True, name="mean_keep")
    tf.reduce_max(r3, name="max_all")
    tf.raw_ops.Sum(input=r3, axis=i, name="sum_unknown_axes")
    tf.raw_ops.Sum(input=r3, axis=i, keep_dims=True, name="sum_unknown_keep")
    tf.argmax(r3, axis=2, name="argmax")
    tf.cumsum(r3, axis=1, name="cumsum")

    # reshaping
    tf.reshape(r3, [-1, 6], name="reshape_m1")
    tf.reshape(x, [-1, 8 * 8 * 3], name="reshape_flat")
    tf.reshape(v, [5, 1], name="reshape_known")
    tf.reshape(x, tf.stack([tf.shape(x)[0], -1]), name="reshape_dyn")
    tf.reshape(m, tf.concat([tf.shape(m)[:1], [2, 3]], 0), name="reshape_concat")
    tf.squeeze(v1.placeholder(F, [1, None, 1, 3]), axis=[0, 2], name="squeeze")
    tf.squeeze(v1.placeholder(F, [1, 4, 1, 3]), name="squeeze_all")
    tf.expand_dims(m, -1, name="expand")
    tf.transpose(r3, [2, 0, 1], name="transpose")
    tf.transpose(u, name="transpose_u")

    # strided slices
    tf.identity(x[:, 1:5, ::2, 0], name="ss1")
    tf.identity(x[..., tf.newaxis, 1], name="ss2")
    tf.identity(r3[-1], name="ss3")
    tf.identity(r3[1:, :, 2:-1], name="ss4")
    tf.identity(v[::-1], name="ss5")
    tf.identity(v[10:], name="ss6")
    tf.identity(r3[tf.newaxis, ..., :3], name="ss7")
    tf.identity(tf.shape(r3)[1:], name="ss_shape")

    # joining and splitting
    tf.concat([m, v1.placeholder(F, [3, None])], axis=0, name="concat0")
    tf.concat([m, m], axis=1, name="concat1")
    tf.stack([v, v, v], axis=1, name="stack")
    tf.unstack(v1.placeholder(F, [3, 4]), axis=1, name="unstack")
    tf.split(x, 3, axis=3, name="split")
    tf.split(m, [1, 2, -1], axis=1, name="splitv")
    tf.tile(m, [2, 3], name="tile")
    tf.pad(r3, [[1, 1], [0, 2], [3, 0]], name="pad")
    tf.slice(r3, [1, 0, 2], [-1, 2, 3], name="slice")
    tf.gather(r3, i, axis=1, name="gather")
    tf.gather_nd(r3, v1.placeholder(tf.int32, [7, 2]), name="gathernd")
    tf.one_hot(i, 10, name="onehot")
    tf.one_hot(v1.placeholder(tf.int32, [2, 3]), 4, axis=1, name="onehot_axis")
    tf.fill(tf.shape(m), 1.0, name="fill")
    tf.zeros_like(r3, name="zeros_like")
    tf.range(2, 11, 3, name="range")
    tf.broadcast_to(v, [2, 3, 5], name="broadcast_to")
    tf.math.unsorted_segment_sum(r3, tf.constant([0, 1, 0, 1]), 2, name="segsum")
    tf.shape(u, name="shape_u")
    tf.size(r3, name="size")
    tf.rank(r3, name="rank")

    # nn
    tf.nn.softmax(m, name="softmax")
    tf.nn.softmax_cross_entropy_with_logits(labels=m, logits=m, name="xent")
    tf.nn.sparse_softmax_cross_entropy_with_logits(labels=i, logits=m, name="sxent")
    tf.nn.l2_loss(m, name="l2")
    tf.nn.relu(x, name="relu")
    tf.cast(m, tf.int32, name="cast")
    tf.where(b, name="where")


def main(out_dir):
    g = tf.Graph()
    with g.as_default():
        build()
    gd = g.as_graph_def(add_shapes=True)
    shapes = {}
    for nd in gd.node:
        outs = []
        for s in nd.attr["_output_shapes"].list.shape:
            outs.append(None if s.unknown_rank else [d.size if d.size >= 0 else None
                                                     for d in s.dim])
        shapes[nd.name] = outs
        del nd.attr["_output_shapes"]
    os.makedirs(out_dir, exist_ok=True)
    with open(os.path.join(out_dir, "graph.pb"), "wb") as f:
        f.write(gd.SerializeToString())
    with open(os.path.join(out_dir, "shapes.json"), "w") as f:
        json.dump({"tensorflow": tf.__version__, "shapes": shapes}, f, indent=0, sort_keys=True)


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "tests/fixtures/shapes")
