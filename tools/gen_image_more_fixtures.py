#!/usr/bin/env python3
"""TensorFlow's values of the detection and colour image ops (non-max suppression,
CropAndResize and its two gradient ops, RGB/HSV, AdjustContrastv2/Saturation/Hue, ResizeArea)
and of the gradients TensorFlow registers for CropAndResize and RGBToHSV, for
tests/test_image_more_ops.py. NEEDS TENSORFLOW; never imports tfg:

    /work/tfvenv/bin/python tools/gen_image_more_fixtures.py

Writes tests/fixtures/image_more/ops.npz: for each case key, `<case>/op` (the op name),
`<case>/in<i>` (its inputs in order), `<case>/attr:<name>` (attrs) and `<case>/out<k>`
(TensorFlow's outputs). Gradient cases (`grad-...`) hold `x`, `w` (the weights of the loss
sum(w * op(x))) and TensorFlow's `dx` (and `dboxes`). Also writes crop_and_resize.pb, a graph
for the CLI test.
"""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from fixture_cases import fixture_dir, write_arrays  # noqa: E402

DIR = fixture_dir("image_more")
R = tf.raw_ops
RNG = np.random.default_rng(11)

# the input names of each op, in order (the raw_ops keywords)
INPUTS = {
    "NonMaxSuppression": ["boxes", "scores", "max_output_size"],
    "NonMaxSuppressionV2": ["boxes", "scores", "max_output_size", "iou_threshold"],
    "NonMaxSuppressionV3": ["boxes", "scores", "max_output_size", "iou_threshold",
                            "score_threshold"],
    "NonMaxSuppressionV4": ["boxes", "scores", "max_output_size", "iou_threshold",
                            "score_threshold"],
    "NonMaxSuppressionV5": ["boxes", "scores", "max_output_size", "iou_threshold",
                            "score_threshold", "soft_nms_sigma"],
    "CropAndResize": ["image", "boxes", "box_ind", "crop_size"],
    "CropAndResizeGradImage": ["grads", "boxes", "box_ind", "image_size"],
    "CropAndResizeGradBoxes": ["grads", "image", "boxes", "box_ind"],
    "RGBToHSV": ["images"], "HSVToRGB": ["images"],
    "AdjustContrastv2": ["images", "contrast_factor"],
    "AdjustSaturation": ["images", "scale"], "AdjustHue": ["images", "delta"],
    "ResizeArea": ["images", "size"],
}


def _boxes(n, flip=True):
    """n boxes in [0, 1]^2 with overlaps; some written with their corners swapped."""
    centre = RNG.uniform(0.2, 0.8, (n, 2))
    half = RNG.uniform(0.05, 0.3, (n, 2))
    b = np.concatenate([centre - half, centre + half], 1)
    if flip:
        swap = RNG.random(n) < 0.3
        b[swap] = b[swap][:, [2, 3, 0, 1]]
    return b.astype(np.float32)


def _case(out, key, op, inputs, attrs=None, dtype=None):
    """Run op on inputs in a graph (so constants keep their dtypes) and record everything."""
    attrs = dict(attrs or {})
    names = INPUTS[op]
    with tf.Graph().as_default():
        ins = {n: tf.constant(v) for n, v in zip(names, inputs)}
        res = getattr(R, op)(**ins, **attrs)
        with tf.compat.v1.Session() as s:
            res = s.run(res)
    res = list(res) if isinstance(res, (list, tuple)) else [res]
    out[f"{key}/op"] = np.array(op)
    for i, v in enumerate(inputs):
        out[f"{key}/in{i}"] = np.asarray(v)
    for k, v in attrs.items():
        out[f"{key}/attr:{k}"] = np.asarray(v.name if isinstance(v, tf.DType) else v)
    for i, v in enumerate(res):
        out[f"{key}/out{i}"] = np.asarray(v)


def nms_cases(out):
    b = _boxes(24)
    s = RNG.uniform(0, 1, 24).astype(np.float32)
    s[[3, 7, 11]] = s[5]  # ties in score
    s[[1, 2]] = np.float32(0.4)  # exactly at the score threshold
    b[9] = b[4]  # an identical box
    b[13] = [0.3, 0.3, 0.3, 0.6]  # no area
    f = np.float32
    _case(out, "nms1", "NonMaxSuppression", [b, s, np.int32(10)], {"iou_threshold": 0.5})
    _case(out, "nms1-default", "NonMaxSuppression", [b, s, np.int32(30)])
    for iou in (0.0, 0.3, 1.0):
        _case(out, f"nms2-iou{iou}", "NonMaxSuppressionV2", [b, s, np.int32(30), f(iou)])
    neg = np.concatenate([s[:6] - 1, [-np.inf]]).astype(np.float32)
    _case(out, "nms2-negative", "NonMaxSuppressionV2", [b[:7], neg, np.int32(30), f(0.5)])
    for st in (0.0, 0.4, 0.95):
        _case(out, f"nms3-score{st}", "NonMaxSuppressionV3",
              [b, s, np.int32(30), f(0.5), f(st)])
    _case(out, "nms3-max0", "NonMaxSuppressionV3", [b, s, np.int32(0), f(0.5), f(0.1)])
    _case(out, "nms3-empty", "NonMaxSuppressionV3",
          [np.zeros((0, 4), f), np.zeros(0, f), np.int32(5), f(0.5), f(0.1)])
    ties = np.array([[0, 0, 1, 1]] * 3 + [[2, 2, 3, 3]], f)
    _case(out, "nms3-ties", "NonMaxSuppressionV3",
          [ties, np.array([.5, .5, .5, .4], f), np.int32(10), f(1.0), f(0.0)])
    _case(out, "nms3-half", "NonMaxSuppressionV3",
          [b.astype(np.float16), s.astype(np.float16), np.int32(30), np.float16(0.5),
           np.float16(0.2)])
    _case(out, "nms3-half-thresholds-float", "NonMaxSuppressionV3",
          [b.astype(np.float16), s.astype(np.float16), np.int32(30), f(0.45), f(0.2)])
    for pad in (False, True):
        _case(out, f"nms4-pad{pad}", "NonMaxSuppressionV4",
              [b, s, np.int32(20), f(0.4), f(0.3)], {"pad_to_max_output_size": pad})
    _case(out, "nms4-pad-empty", "NonMaxSuppressionV4",
          [np.zeros((0, 4), f), np.zeros(0, f), np.int32(3), f(0.5), f(0.1)],
          {"pad_to_max_output_size": True})
    for sigma in (0.0, 0.2, 0.5, 1.0):
        for pad in (False, True):
            _case(out, f"nms5-sigma{sigma}-pad{pad}", "NonMaxSuppressionV5",
                  [b, s, np.int32(20), f(0.5), f(0.1), f(sigma)],
                  {"pad_to_max_output_size": pad})
    _case(out, "nms5-half", "NonMaxSuppressionV5",
          [b.astype(np.float16), s.astype(np.float16), np.int32(20), np.float16(0.5),
           np.float16(0.1), np.float16(0.5)])
    _case(out, "nms5-hard-half", "NonMaxSuppressionV5",
          [b.astype(np.float16), s.astype(np.float16), np.int32(20), np.float16(0.35),
           np.float16(0.0), np.float16(0.0)])
    big = _boxes(300)
    _case(out, "nms5-many", "NonMaxSuppressionV5",
          [big, RNG.uniform(0, 1, 300).astype(f), np.int32(100), f(0.6), f(0.05), f(0.3)])


def crop_boxes():
    return np.array([[0.1, 0.2, 0.8, 0.9], [-0.2, 0.1, 1.3, 0.9], [0.9, 0.8, 0.1, 0.05],
                     [0.3, 0.3, 0.3, 0.3], [0.0, 0.0, 1.0, 1.0], [0.25, -0.5, 0.6, 0.45]],
                    np.float32)


def crop_cases(out):
    img = RNG.standard_normal((2, 6, 7, 3)).astype(np.float32)
    boxes = crop_boxes()
    ind = np.array([0, 1, 1, 0, 1, 0], np.int32)
    for method in ("bilinear", "nearest"):
        for size in ((3, 4), (1, 1), (5, 1), (9, 11)):
            for ext in (0.0, 0.5):
                _case(out, f"crop-{method}-{size[0]}x{size[1]}-ext{ext}", "CropAndResize",
                      [img, boxes, ind, np.int32(size)],
                      {"method": method, "extrapolation_value": ext})
    u8 = RNG.integers(0, 256, (2, 5, 4, 2)).astype(np.uint8)
    for dt in (np.uint8, np.int32, np.int64, np.float16, np.float64, np.int16):
        _case(out, f"crop-{np.dtype(dt).name}", "CropAndResize",
              [u8.astype(dt), boxes, ind, np.int32([4, 3])])
    _case(out, "crop-noboxes", "CropAndResize",
          [img, np.zeros((0, 4), np.float32), np.zeros(0, np.int32), np.int32([2, 2])])
    g = RNG.standard_normal((6, 3, 4, 3)).astype(np.float32)
    for method in ("bilinear", "nearest"):
        for dt in (np.float32, np.float64, np.float16):
            _case(out, f"cropgi-{method}-{np.dtype(dt).name}", "CropAndResizeGradImage",
                  [g, boxes, ind, np.int32([2, 6, 7, 3])], {"T": tf.as_dtype(dt),
                                                            "method": method})
    for dt in (np.float32, np.float64, np.uint8):
        _case(out, f"cropgb-{np.dtype(dt).name}", "CropAndResizeGradBoxes",
              [g, (img * 40 + 100).astype(dt), boxes, ind])
    g1 = RNG.standard_normal((6, 1, 1, 3)).astype(np.float32)
    _case(out, "cropgb-1x1", "CropAndResizeGradBoxes", [g1, img, boxes, ind])
    _case(out, "cropgi-1x1", "CropAndResizeGradImage",
          [g1, boxes, ind, np.int32([2, 6, 7, 3])], {"T": tf.float32})


def colour_cases(out):
    rgb = RNG.uniform(0, 1, (4, 5, 3)).astype(np.float32)
    rgb[0, 0] = 0.5  # grey
    rgb[0, 1] = 0  # black
    rgb[0, 2] = [0.7, 0.7, 0.2]  # two equal maxima
    rgb[0, 3] = [0.1, 0.6, 0.6]
    rgb[0, 4] = [0.3, 0.2, 0.3]
    rgb[1, 0] = [0.2, 0.2, 0.9]  # two equal minima
    rgb[1, 1] = [1.2, -0.1, 0.5]  # outside [0, 1]
    for dt in (np.float32, np.float64, np.float16):
        name = np.dtype(dt).name
        _case(out, f"rgb2hsv-{name}", "RGBToHSV", [rgb.astype(dt)])
        hsv = RNG.uniform(0, 1, (2, 7, 3)).astype(dt)
        hsv[0, :, 0] = np.array([-0.3, 1.4, 0.0, 1.0, 1 / 6, 0.5, 5 / 6], dt)
        _case(out, f"hsv2rgb-{name}", "HSVToRGB", [hsv])
    _case(out, "rgb2hsv-flat", "RGBToHSV", [rgb[1]])
    _case(out, "rgb2hsv-empty", "RGBToHSV", [np.zeros((0, 3), np.float32)])
    img = RNG.uniform(0, 1, (2, 5, 7, 3)).astype(np.float32)
    img[0, 0, :3] = rgb[0, :3]
    for factor in (0.4, 1.7, -0.5):
        _case(out, f"contrast-{factor}", "AdjustContrastv2", [img, np.float32(factor)])
    for shape in ((5, 1, 1), (3, 4, 4, 2), (1, 2, 1, 9, 6, 1), (2, 33, 17, 3)):
        x = RNG.standard_normal(shape).astype(np.float32) * 3
        _case(out, f"contrast-shape{len(shape)}-{shape[-2]}", "AdjustContrastv2",
              [x, np.float32(0.7)])
    _case(out, "contrast-empty", "AdjustContrastv2",
          [np.zeros((0, 2, 3), np.float32), np.float32(1.3)])
    for scale in (0.0, 0.6, 1.7, 5.0):
        _case(out, f"saturation-{scale}", "AdjustSaturation", [img, np.float32(scale)])
    _case(out, "saturation-outside", "AdjustSaturation",
          [(img * 1.4 - 0.2)[None], np.float32(1.3)])
    for delta in (0.0, 0.3, -0.7, 0.999, 1.0, -1.0, 2.5):
        _case(out, f"hue-{delta}", "AdjustHue", [img, np.float32(delta)])
    _case(out, "hue-outside", "AdjustHue", [(img * 1.4 - 0.2)[None], np.float32(0.25)])


def resize_area_cases(out):
    for (h, w), (oh, ow), c in (((7, 9), (3, 4), 3), ((7, 9), (10, 13), 3),
                                ((7, 9), (7, 9), 1), ((5, 6), (2, 5), 5), ((4, 4), (1, 1), 2),
                                ((1, 5), (3, 2), 3), ((6, 3), (4, 3), 1)):
        x = RNG.standard_normal((2, h, w, c)).astype(np.float32)
        for align in (False, True):
            _case(out, f"area-{h}x{w}-{oh}x{ow}-c{c}-align{align}", "ResizeArea",
                  [x, np.int32([oh, ow])], {"align_corners": align})
    u8 = RNG.integers(0, 256, (1, 6, 5, 3)).astype(np.uint8)
    for dt in (np.uint8, np.int8, np.int16, np.uint16, np.int32, np.int64, np.float16,
               np.float64):
        _case(out, f"area-{np.dtype(dt).name}", "ResizeArea", [u8.astype(dt), np.int32([4, 3])])


def _grad_case(out, key, x, fn, extra=None):
    """TensorFlow's gradient of sum(w * fn(x)) (and of the boxes, when fn takes them)."""
    with tf.Graph().as_default():
        px = tf.constant(x)
        pb = tf.constant(extra) if extra is not None else None
        y = fn(px, pb) if extra is not None else fn(px)
        w = RNG.uniform(0.5, 1.5, y.shape.as_list()).astype(y.dtype.as_numpy_dtype)
        loss = tf.reduce_sum(tf.constant(w) * y)
        xs = [px] + ([pb] if pb is not None else [])
        grads = tf.compat.v1.gradients(loss, xs)
        with tf.compat.v1.Session() as s:
            grads = s.run(grads)
    out[f"{key}/x"], out[f"{key}/w"], out[f"{key}/dx"] = x, w, grads[0]
    if extra is not None:
        out[f"{key}/boxes"], out[f"{key}/dboxes"] = extra, grads[1]


def grad_cases(out):
    img = RNG.standard_normal((2, 6, 7, 3)).astype(np.float32)
    ind = np.array([0, 1, 1, 0, 1, 0], np.int32)
    for method in ("bilinear", "nearest"):
        for size in ((3, 4), (1, 1)):
            for dt in (np.float32, np.float64):
                _grad_case(out, f"grad-crop-{method}-{size[0]}x{size[1]}-{np.dtype(dt).name}",
                           img.astype(dt),
                           lambda x, b, m=method, s=size: R.CropAndResize(
                               image=x, boxes=b, box_ind=ind, crop_size=s, method=m),
                           crop_boxes())
    rgb = RNG.uniform(0.05, 1, (3, 4, 3)).astype(np.float32)
    rgb[0, 0] = [0.7, 0.7, 0.2]
    rgb[0, 1] = [0.2, 0.2, 0.9]
    rgb[0, 2] = 0.5
    rgb[0, 3] = [0.0, 0.4, 0.8]
    for dt in (np.float32, np.float64):
        _grad_case(out, f"grad-rgb2hsv-{np.dtype(dt).name}", rgb.astype(dt),
                   lambda x: R.RGBToHSV(images=x))


def cli_graph():
    """x [2, 6, 7, 3], boxes [3, 4] -> y = CropAndResize(x, boxes, [0, 1, 1], [3, 4])."""
    with tf.Graph().as_default() as g:
        x = tf.compat.v1.placeholder(tf.float32, [2, 6, 7, 3], name="x")
        b = tf.compat.v1.placeholder(tf.float32, [3, 4], name="boxes")
        ind = tf.compat.v1.placeholder(tf.int32, [3], name="box_ind")
        R.CropAndResize(image=x, boxes=b, box_ind=ind, crop_size=[3, 4], name="y")
        gd = g.as_graph_def()
    with open(os.path.join(DIR, "crop_and_resize.pb"), "wb") as f:
        f.write(gd.SerializeToString())
    feeds = {"x": RNG.standard_normal((2, 6, 7, 3)).astype(np.float32),
             "boxes": crop_boxes()[:3], "box_ind": np.array([0, 1, 1], np.int32)}
    with tf.Graph().as_default():
        tf.compat.v1.import_graph_def(gd, name="")
        with tf.compat.v1.Session() as s:
            y = s.run("y:0", {f"{k}:0": v for k, v in feeds.items()})
    np.savez(os.path.join(DIR, "crop_and_resize_feeds.npz"), **feeds)
    np.savez(os.path.join(DIR, "crop_and_resize_y.npz"), y=y)


def main():
    write_arrays(DIR, "ops.npz",
                 (nms_cases, crop_cases, colour_cases, resize_area_cases, grad_cases))
    cli_graph()


if __name__ == "__main__":
    main()
