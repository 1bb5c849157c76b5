#!/usr/bin/env python3
"""TensorFlow's values and gradients of the 3-D convolutions and pools, LRN, MaxPoolWithArgmax
and ExtractImagePatches, for tests/test_nn3d_ops.py. NEEDS TENSORFLOW; never imports tfg:

    TF_ENABLE_ONEDNN_OPTS=0 /work/tfvenv/bin/python tools/gen_nn3d_fixtures.py

(oneDNN off: tfg matches TensorFlow's stock CPU kernels.) Writes tests/fixtures/nn3d/:
`<case>.pb`, a tf.compat.v1 graph of placeholders (`x`, and `w` or `g` where the op has a
second float input), the op as node `y`, and for differentiable cases `loss` =
sum(y * weights); and nn3d.npz with `<case>/feed/<name>`, `<case>/y:<port>` (TensorFlow's
outputs) and `<case>/d<name>` (tf.gradients of loss w.r.t. each placeholder).
"""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
os.environ.setdefault("TF_ENABLE_ONEDNN_OPTS", "0")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from fixture_cases import fixture_dir, write_arrays  # noqa: E402

tf1 = tf.compat.v1
R = tf.raw_ops
OUT = fixture_dir("nn3d")
RNG = np.random.default_rng(45)


def rand(shape, dtype=np.float32, ties=False):
    if ties:  # few distinct values: many windows hold their max more than once
        return RNG.integers(0, 3, shape).astype(dtype)
    if np.dtype(dtype).kind in "iu":
        return RNG.integers(0, 100, shape).astype(dtype)
    if np.dtype(dtype).kind == "c":
        return (RNG.standard_normal(shape) + 1j * RNG.standard_normal(shape)).astype(dtype)
    return RNG.standard_normal(shape).astype(dtype)


def conv(**kw):
    return lambda p: R.Conv3D(input=p["x"], filter=p["w"], name="y", **kw)


def case_table():
    """name -> (feeds, fn(placeholders) -> y, differentiable)."""
    c = {}
    s1, valid, same = [1] * 5, "VALID", "SAME"
    x, w = rand((1, 4, 5, 6, 2)), rand((2, 2, 3, 2, 3))
    c["conv3d_valid"] = ({"x": x, "w": w}, conv(strides=s1, padding=valid), True)
    c["conv3d_same_strided"] = ({"x": rand((2, 4, 5, 6, 2)), "w": rand((3, 2, 2, 2, 4))},
                                conv(strides=[1, 2, 1, 2, 1], padding=same), True)
    c["conv3d_f64"] = ({"x": rand((1, 3, 4, 5, 2), np.float64),
                        "w": rand((2, 3, 2, 2, 2), np.float64)},
                       conv(strides=[1, 1, 2, 1, 1], padding=same), True)
    c["conv3d_half"] = ({"x": rand((1, 3, 4, 5, 2), np.float16),
                         "w": rand((2, 2, 2, 2, 2), np.float16)},
                        conv(strides=s1, padding=same), False)
    c["conv3d_1x1"] = ({"x": rand((2, 3, 4, 5, 3)), "w": rand((1, 1, 1, 3, 2))},
                       conv(strides=[1, 1, 2, 2, 1], padding=valid), True)
    c["conv3d_empty"] = ({"x": rand((0, 4, 5, 6, 2)), "w": rand((2, 2, 2, 2, 3))},
                         conv(strides=s1, padding=same), False)
    c["conv3d_bpi_int64"] = (
        {"w": rand((2, 3, 2, 2, 3)), "g": rand((1, 2, 3, 5, 3))},
        lambda p: R.Conv3DBackpropInputV2(input_sizes=np.int64([1, 3, 5, 5, 2]), filter=p["w"],
                                          out_backprop=p["g"], strides=[1, 2, 2, 1, 1],
                                          padding=same, name="y"), True)
    c["conv3d_bpf"] = (
        {"x": rand((1, 4, 5, 6, 2)), "g": rand((1, 3, 4, 2, 3))},
        lambda p: R.Conv3DBackpropFilterV2(input=p["x"], filter_sizes=[2, 2, 3, 2, 3],
                                           out_backprop=p["g"], strides=[1, 1, 1, 2, 1],
                                           padding=valid, name="y"), True)

    def pool(op, shape, ksize, strides, padding, dtype=np.float32, ties=False, diff=True):
        return ({"x": rand(shape, dtype, ties)},
                lambda p: op(input=p["x"], ksize=ksize, strides=strides, padding=padding,
                             name="y"), diff)
    m3, a3 = R.MaxPool3D, R.AvgPool3D
    c["maxpool3d_valid"] = pool(m3, (1, 4, 5, 6, 2), [1, 2, 2, 2, 1], [1, 2, 2, 2, 1], valid)
    c["maxpool3d_same"] = pool(m3, (2, 4, 5, 6, 2), [1, 3, 2, 3, 1], [1, 2, 1, 2, 1], same)
    c["maxpool3d_ties"] = pool(m3, (1, 4, 5, 6, 2), [1, 2, 2, 2, 1], s1, valid, ties=True)
    c["avgpool3d_valid"] = pool(a3, (1, 4, 5, 6, 2), [1, 2, 3, 2, 1], [1, 1, 2, 2, 1], valid)
    c["avgpool3d_same"] = pool(a3, (2, 4, 5, 6, 2), [1, 3, 3, 3, 1], [1, 2, 2, 2, 1], same)
    c["avgpool3d_grad"] = (
        {"g": rand((1, 2, 3, 3, 2))},
        lambda p: R.AvgPool3DGrad(orig_input_shape=[1, 4, 5, 6, 2], grad=p["g"],
                                  ksize=[1, 3, 3, 3, 1], strides=[1, 2, 2, 2, 1],
                                  padding=same, name="y"), True)

    def lrn(shape, dtype=np.float32, diff=True, **kw):
        return ({"x": rand(shape, dtype)}, lambda p: R.LRN(input=p["x"], name="y", **kw), diff)
    c["lrn_default"] = lrn((2, 3, 4, 7))
    c["lrn_params"] = lrn((1, 3, 4, 9), depth_radius=2, bias=2.0, alpha=0.3, beta=0.75)
    c["lrn_big_radius"] = lrn((1, 2, 3, 4), depth_radius=10, bias=0.5, alpha=0.1, beta=1.0)
    c["lrn_radius0"] = lrn((1, 2, 3, 5), depth_radius=0, bias=1.0, alpha=2.0, beta=0.5)
    c["lrn_half"] = lrn((1, 3, 4, 6), np.float16, diff=False, depth_radius=2)

    def argmax(shape, ksize, strides, padding, dtype=np.float32, ties=False, diff=True, **kw):
        return ({"x": rand(shape, dtype, ties)},
                lambda p: R.MaxPoolWithArgmax(input=p["x"], ksize=ksize, strides=strides,
                                              padding=padding, name="y", **kw), diff)
    c["argmax_same"] = argmax((2, 5, 6, 3), [1, 2, 3, 1], [1, 2, 2, 1], same)
    c["argmax_batch_i32"] = argmax((2, 5, 6, 3), [1, 3, 2, 1], [1, 1, 2, 1], valid,
                                   include_batch_in_index=True, Targmax=tf.int32,
                                   diff=False)  # no CPU MaxPoolGradWithArgmax for int32
    c["argmax_ties"] = argmax((2, 4, 5, 2), [1, 2, 2, 1], [1, 1, 1, 1], same, ties=True,
                              include_batch_in_index=True)
    c["argmax_int32"] = argmax((1, 5, 5, 2), [1, 2, 2, 1], [1, 2, 2, 1], same, np.int32,
                               ties=True, diff=False)
    c["argmax_uint8"] = argmax((1, 4, 5, 2), [1, 3, 3, 1], [1, 1, 1, 1], valid, np.uint8,
                               diff=False)
    c["argmax_f64"] = argmax((1, 4, 5, 2), [1, 2, 2, 1], [1, 2, 1, 1], same, np.float64)

    def patches(shape, ksizes, strides, rates, padding, dtype=np.float32, diff=True):
        return ({"x": rand(shape, dtype)},
                lambda p: R.ExtractImagePatches(images=p["x"], ksizes=ksizes, strides=strides,
                                                rates=rates, padding=padding, name="y"), diff)
    c["patches_same"] = patches((2, 5, 6, 3), [1, 2, 3, 1], [1, 2, 1, 1], [1, 1, 2, 1], same)
    c["patches_valid"] = patches((1, 6, 5, 2), [1, 3, 2, 1], [1, 1, 2, 1], [1, 2, 1, 1], valid)
    c["patches_f64"] = patches((1, 4, 4, 2), [1, 2, 2, 1], [1, 3, 3, 1], [1, 1, 1, 1], same,
                               np.float64)
    c["patches_int32"] = patches((1, 4, 5, 2), [1, 2, 2, 1], [1, 1, 2, 1], [1, 1, 1, 1], same,
                                 np.int32, diff=False)
    c["patches_complex"] = patches((1, 3, 4, 1), [1, 2, 2, 1], [1, 1, 1, 1], [1, 1, 1, 1],
                                   same, np.complex64, diff=False)
    c["patches_empty"] = patches((0, 4, 5, 2), [1, 2, 3, 1], [1, 2, 1, 1], [1, 1, 1, 1], valid,
                                 diff=False)
    return c


def build(name, feeds, fn, diff, out):
    g = tf1.Graph()
    with g.as_default():
        ph = {k: tf1.placeholder(v.dtype, v.shape, name=k) for k, v in feeds.items()}
        y = fn(ph)
        ys = y if isinstance(y, (list, tuple)) else [y]
        fetch = {f"y:{i}": t for i, t in enumerate(ys)}
        if diff:
            weights = RNG.uniform(0.5, 1.5, ys[0].shape).astype(ys[0].dtype.as_numpy_dtype)
            loss = tf.reduce_sum(ys[0] * weights, name="loss")
            for k, d in zip(ph, tf1.gradients(loss, list(ph.values()))):
                fetch[f"d{k}"] = d
        with tf1.Session(graph=g) as sess:
            got = sess.run(fetch, {ph[k]: v for k, v in feeds.items()})
    # The forward graph only (tfg builds its own gradient): the nodes `loss` depends on.
    keep = ["loss"] if diff else ["y"]
    gd = tf1.graph_util.extract_sub_graph(g.as_graph_def(), keep)
    with open(os.path.join(OUT, f"{name}.pb"), "wb") as f:
        f.write(gd.SerializeToString())
    for k, v in feeds.items():
        out[f"{name}/feed/{k}"] = v
    for k, v in got.items():
        out[f"{name}/{k}"] = v


def all_cases(out):
    """Every case of case_table(): its graph written, its arrays recorded in out."""
    for name, (feeds, fn, diff) in case_table().items():
        build(name, feeds, fn, diff, out)


def main():
    write_arrays(OUT, "nn3d.npz", [all_cases])


if __name__ == "__main__":
    main()
