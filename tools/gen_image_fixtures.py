#!/usr/bin/env python3
"""TensorFlow's values of the image resize ops and their gradient ops, for
tests/test_image_ops.py. NEEDS TENSORFLOW; never imports tfg:

    /work/tfvenv/bin/python tools/gen_image_fixtures.py

Writes tests/fixtures/image_ops/resize.npz: for each case key `<op>-<mode>-<in>-<out>`, the
input image (`/x`), TensorFlow's output (`/y`), and for the differentiable ops the gradient
op's output for a fixed upstream gradient (`/g` in, `/dx` out). Modes: legacy, align
(align_corners), half (half_pixel_centers); sizes cover up- and down-sampling.
"""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures",
                   "image_ops", "resize.npz")
MODES = {"legacy": (False, False), "align": (True, False), "half": (False, True)}
SIZES = [((5, 7), (9, 4)), ((4, 4), (2, 3)), ((3, 6), (7, 13)), ((1, 5), (3, 1))]
OPS = {"ResizeBilinear": tf.raw_ops.ResizeBilinear,
       "ResizeNearestNeighbor": tf.raw_ops.ResizeNearestNeighbor,
       "ResizeBicubic": tf.raw_ops.ResizeBicubic}


def main():
    rng = np.random.default_rng(5)
    out = {}
    for name, fn in OPS.items():
        for mode, (align, half) in MODES.items():
            for (h, w), (oh, ow) in SIZES:
                key = f"{name}-{mode}-{h}x{w}-{oh}x{ow}"
                x = rng.standard_normal((2, h, w, 3)).astype(np.float32)
                y = fn(images=x, size=[oh, ow], align_corners=align, half_pixel_centers=half)
                g = rng.standard_normal((2, oh, ow, 3)).astype(np.float32)
                if name == "ResizeNearestNeighbor":
                    dx = tf.raw_ops.ResizeNearestNeighborGrad(
                        grads=g, size=[h, w], align_corners=align, half_pixel_centers=half)
                else:
                    grad_op = getattr(tf.raw_ops, name + "Grad")
                    dx = grad_op(grads=g, original_image=x, align_corners=align,
                                 half_pixel_centers=half)
                out.update({key + "/x": x, key + "/y": y.numpy(), key + "/g": g,
                            key + "/dx": dx.numpy()})
    ints = rng.integers(0, 255, (1, 4, 5, 2)).astype(np.uint8)
    out["uint8/x"] = ints
    out["uint8/bilinear"] = tf.raw_ops.ResizeBilinear(images=ints, size=[7, 3],
                                                      half_pixel_centers=True).numpy()
    out["uint8/nearest"] = tf.raw_ops.ResizeNearestNeighbor(images=ints, size=[7, 3],
                                                            half_pixel_centers=True).numpy()
    os.makedirs(os.path.dirname(OUT), exist_ok=True)
    np.savez_compressed(OUT, **out)
    print(OUT, len(out), "arrays")


if __name__ == "__main__":
    main()
