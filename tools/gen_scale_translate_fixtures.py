#!/usr/bin/env python3
"""TensorFlow's values and gradients of ScaleAndTranslate, the op `tf.image.resize` emits for
antialiased bilinear/bicubic ("triangle", "keyscubic") and for the lanczos3, lanczos5,
gaussian and mitchellcubic methods, for tests/test_scale_translate_ops.py.
NEEDS TENSORFLOW; never imports tfg:

    /work/tfvenv/bin/python tools/gen_scale_translate_fixtures.py

Writes tests/fixtures/scale_translate/ops.npz. Each case key holds `<case>/x` (the image),
`<case>/size`, `<case>/scale`, `<case>/translation` (the op's other inputs, as
tf.image.resize computes them or given directly to the raw op), `<case>/kernel_type`,
`<case>/antialias`, `<case>/y` (TensorFlow's output) and, for float32 images, `<case>/w` and
`<case>/dx`: TensorFlow's gradient of sum(w * y) with respect to x. Also writes resize.pb (a
tf.image.resize(method="lanczos3", antialias=True) graph as TensorFlow writes it) with its
feeds and output, for the CLI test.
"""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from fixture_cases import fixture_dir, write_arrays  # noqa: E402

DIR = fixture_dir("scale_translate")
RNG = np.random.default_rng(5)

# tf.image.resize method -> the kernel_type it writes (antialiased bilinear/bicubic only)
RESIZE_METHODS = {"lanczos3": "lanczos3", "lanczos5": "lanczos5", "gaussian": "gaussian",
                  "mitchellcubic": "mitchellcubic", "bilinear": "triangle",
                  "bicubic": "keyscubic"}
SIZES = {"down": (4, 5), "up": (13, 17), "mixed": (3, 20), "one": (1, 1)}


def _image(shape, dtype=np.float32):
    if np.dtype(dtype).kind in "iu":
        return RNG.integers(0, 100, shape).astype(dtype)
    return RNG.standard_normal(shape).astype(dtype)


def _run_graph(x, build):
    """(y, dx, w, the ScaleAndTranslate node's inputs) of y = build(x)."""
    with tf.Graph().as_default() as g:
        px = tf.compat.v1.placeholder(tf.as_dtype(x.dtype), x.shape)
        y = build(px)
        op = [o for o in g.get_operations() if o.type == "ScaleAndTranslate"][0]
        fetches = {"y": y, "ins": list(op.inputs[1:])}
        w = None
        if x.dtype == np.float32:
            w = RNG.standard_normal(y.shape).astype(np.float32)
            fetches["dx"] = tf.compat.v1.gradients(tf.reduce_sum(y * w), px)[0]
        with tf.compat.v1.Session() as s:
            res = s.run(fetches, {px: x})
    attrs = {"kernel_type": op.get_attr("kernel_type").decode(),
             "antialias": op.get_attr("antialias")}
    return res, w, attrs


def _record(out, key, x, res, w, attrs):
    out[f"{key}/x"] = x
    for name, v in zip(("size", "scale", "translation"), res["ins"]):
        out[f"{key}/{name}"] = np.asarray(v)
    out[f"{key}/kernel_type"] = np.array(attrs["kernel_type"])
    out[f"{key}/antialias"] = np.array(attrs["antialias"])
    out[f"{key}/y"] = res["y"]
    if w is not None:
        out[f"{key}/w"], out[f"{key}/dx"] = w, res["dx"]


def resize_cases(out):
    """tf.image.resize with each method, antialias on and off, up- and downsampling."""
    x = _image((2, 7, 9, 3))
    for method, kernel in RESIZE_METHODS.items():
        for antialias in (True, False):
            if kernel in ("triangle", "keyscubic") and not antialias:
                continue  # those are ResizeBilinear / ResizeBicubic
            for name, size in SIZES.items():
                res, w, attrs = _run_graph(x, lambda t: tf.image.resize(
                    t, size, method=method, antialias=antialias))
                assert attrs["kernel_type"] == kernel
                _record(out, f"resize-{method}-aa{int(antialias)}-{name}", x, res, w, attrs)


def raw_cases(out):
    """The raw op: other kernels, translations (samples outside the image give 0), scales
    unrelated to the sizes, and every input dtype."""
    for kernel in ("lanczos1", "box", "triangle", "gaussian", "keyscubic"):
        for antialias in (True, False):
            for k, (size, scale, trans) in enumerate((
                    ((6, 8), (0.6, 1.7), (0.8, -1.3)),
                    ((9, 4), (2.5, 0.45), (-2.0, 0.5)),
                    ((5, 5), (1.0, 1.0), (0.0, 0.25)))):
                x = _image((1, 5, 6, 2))
                res, w, attrs = _run_graph(x, lambda t: tf.raw_ops.ScaleAndTranslate(
                    images=t, size=np.int32(size), scale=np.float32(scale),
                    translation=np.float32(trans), kernel_type=kernel, antialias=antialias))
                _record(out, f"raw-{kernel}-aa{int(antialias)}-{k}", x, res, w, attrs)
    for dt in (np.uint8, np.int8, np.int16, np.uint16, np.int32, np.int64, np.float16,
               np.float64):
        x = _image((2, 6, 5, 1), dt)
        res, w, attrs = _run_graph(x, lambda t: tf.image.resize(
            t, (4, 7), method="lanczos3", antialias=True))
        _record(out, f"dtype-{np.dtype(dt).name}", x, res, w, attrs)


def cli_graph():
    """x [1, 8, 8, 3] -> y = tf.image.resize(x, [5, 11], "lanczos3", antialias=True)."""
    with tf.Graph().as_default() as g:
        x = tf.compat.v1.placeholder(tf.float32, [1, 8, 8, 3], name="x")
        tf.identity(tf.image.resize(x, [5, 11], method="lanczos3", antialias=True), name="y")
        gd = g.as_graph_def()
        feeds = {"x": _image((1, 8, 8, 3))}
        with tf.compat.v1.Session() as s:
            y = s.run("y:0", {"x:0": feeds["x"]})
    with open(os.path.join(DIR, "resize.pb"), "wb") as f:
        f.write(gd.SerializeToString())
    np.savez(os.path.join(DIR, "resize_feeds.npz"), **feeds)
    np.savez(os.path.join(DIR, "resize_y.npz"), y=y)


def main():
    write_arrays(DIR, "ops.npz", (resize_cases, raw_cases))
    cli_graph()


if __name__ == "__main__":
    main()
