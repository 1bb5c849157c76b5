"""Detection kernels with TensorFlow's arithmetic: greedy non-max suppression
(non_max_suppression_op.cc) and CropAndResize with its two gradient ops
(crop_and_resize_op.cc).

    NonMaxSuppressionV5(boxes [n, 4], scores [n], max_output_size, iou_threshold,
                        score_threshold, soft_nms_sigma) -> indices, scores, valid count

Candidates (score > score_threshold) are taken highest score first, ties to the lower box
index (TensorFlow's priority queue order). Hard NMS drops a candidate whose IoU with a box
already selected is above the threshold; soft NMS (sigma > 0) scales its score by
exp(-0.5 * iou^2 / sigma) for each selected box and requeues it. Scores, thresholds and
weights are in T (half rounds each step); IoU is float32, boxes taken with either corner order.

CropAndResize samples box b of image box_ind[b] at crop_size points from y1 * (H - 1) to
y2 * (H - 1) (a single point: the middle, computed in double as the C++ does); points outside
the image get extrapolation_value. The gradient ops add their contributions in the kernel's
loop order (np.add.at is sequential), so float sums round as TensorFlow's do.
"""
import heapq

import numpy as np

from tfg.kernels._util import fail, s
from tfg.kernels.registry import kernel

F32 = np.float32


# --- non-max suppression ---------------------------------------------------------------------
def _tf_shape(a):
    return "[" + ",".join(str(d) for d in np.shape(a)) + "]"


def _scalar(v, what):
    v = np.asarray(v)
    if v.ndim != 0:
        fail(f"{what} must be 0-D, got shape {_tf_shape(v)}")
    return v[()]


def _check_boxes(boxes, per_box, name):
    """ParseAndCheckBoxSizes: boxes [n, 4] and a vector `name` [n], one value a box (the
    scores of NonMaxSuppression, the box_index of CropAndResize)."""
    if boxes.ndim != 2:
        fail(f"boxes must be 2-D{_tf_shape(boxes)}")
    if boxes.shape[1] != 4:
        fail("boxes must have 4 columns")
    if per_box.ndim != 1:
        fail(f"{name} must be 1-D{_tf_shape(per_box)}")
    if per_box.shape[0] != boxes.shape[0]:
        fail(f"{name} has incompatible shape")


def _iou_threshold(v):
    if not 0 <= v <= 1:
        fail("iou_threshold must be in [0, 1]")
    return v


class _Corners:
    """Each box's normalised corners and area, float32, as IOU() computes them."""

    def __init__(self, boxes):
        b = boxes.astype(F32)
        self.ymin = np.minimum(b[:, 0], b[:, 2])
        self.xmin = np.minimum(b[:, 1], b[:, 3])
        self.ymax = np.maximum(b[:, 0], b[:, 2])
        self.xmax = np.maximum(b[:, 1], b[:, 3])
        self.area = (self.ymax - self.ymin) * (self.xmax - self.xmin)

    def iou(self, i, js):
        """IoU of box i with each box in js (0 where either box has no area)."""
        iy0 = np.maximum(self.ymin[i], self.ymin[js])
        ix0 = np.maximum(self.xmin[i], self.xmin[js])
        iy1 = np.minimum(self.ymax[i], self.ymax[js])
        ix1 = np.minimum(self.xmax[i], self.xmax[js])
        inter = np.maximum(iy1 - iy0, F32(0)) * np.maximum(ix1 - ix0, F32(0))
        with np.errstate(all="ignore"):
            iou = inter / (self.area[i] + self.area[js] - inter)
        empty = (self.area[i] <= 0) | (self.area[js] <= 0)
        return np.where(empty, F32(0), iou).astype(F32)


def _candidates(scores, score_threshold):
    """Indices with score > threshold, in the priority queue's order."""
    keep = np.nonzero(scores > score_threshold)[0]
    order = np.lexsort((keep, -scores[keep].astype(np.float64)))
    return keep[order]


def _hard_nms(corners, scores, size, iou_threshold, score_threshold):
    """Greedy NMS: each selected box suppresses every later candidate it overlaps too much."""
    t = scores.dtype.type
    order = _candidates(scores, score_threshold)
    alive = np.ones(order.size, bool)
    selected = []
    pos = 0
    while len(selected) < size:
        rest = np.nonzero(alive[pos:])[0]
        if rest.size == 0:
            break
        pos += int(rest[0])
        box = int(order[pos])
        selected.append(box)
        alive[pos] = False
        later = order[pos + 1:]
        sim = corners.iou(box, later).astype(scores.dtype)
        alive[pos + 1:] &= ~(sim > t(iou_threshold))
    return selected, [scores[i] for i in selected]


def _soft_nms(corners, scores, size, sigma, score_threshold):
    """The kernel's loop with soft suppression: a candidate is compared with the boxes
    selected since it was last looked at, its score decayed by each, and requeued."""
    t = scores.dtype.type
    scale = t(-0.5) / t(sigma)
    thr = t(score_threshold)
    heap = [(-float(scores[i]), int(i), 0) for i in _candidates(scores, thr)]
    heapq.heapify(heap)
    selected, kept = [], []
    while len(selected) < size and heap:
        neg, box, begin = heapq.heappop(heap)
        original = t(-neg)
        score = original
        if begin < len(selected):
            js = np.array(selected[begin:][::-1])
            sim = corners.iou(box, js).astype(scores.dtype)
            weight = _exp(scale * sim * sim, scores.dtype)
            run = np.multiply.accumulate(np.concatenate([[original], weight]).astype(
                scores.dtype))[1:]
            low = np.nonzero(run <= thr)[0]
            score = run[low[0]] if low.size else run[-1]
        if score == original:
            selected.append(box)
            kept.append(score)
        elif score > thr:
            heapq.heappush(heap, (-float(score), box, len(selected)))
    return selected, kept


def _exp(x, dtype):
    """expf (correctly rounded, as glibc's), rounded to T."""
    return np.exp(x.astype(np.float64)).astype(F32).astype(dtype)


def _nms(boxes, scores, max_output_size, iou_threshold, score_threshold, sigma=0.0,
         pad=False):
    boxes, scores = np.asarray(boxes), np.asarray(scores)
    _check_boxes(boxes, scores, "scores")
    size = int(max_output_size)
    if size < 0:
        fail("output size must be non-negative")
    corners = _Corners(boxes)
    if sigma > 0:
        selected, kept = _soft_nms(corners, scores, size, sigma, score_threshold)
    else:
        selected, kept = _hard_nms(corners, scores, size, iou_threshold, score_threshold)
    valid = len(selected)
    total = size if pad else valid
    indices = np.zeros(total, np.int32)
    indices[:valid] = selected
    out_scores = np.zeros(total, scores.dtype)
    out_scores[:valid] = kept
    return indices, out_scores, np.int32(valid)


def _lowest(scores):
    """V1/V2 keep every score above float's lowest (-inf and NaN are dropped)."""
    return scores.dtype.type(np.finfo(F32).min)


@kernel("NonMaxSuppression", host_inputs=(2,))
def non_max_suppression(ctx, boxes, scores, max_output_size):
    size = _scalar(max_output_size, "max_output_size")
    iou = _iou_threshold(ctx.attrs.get("iou_threshold", 0.5))
    scores = np.asarray(scores)
    return _nms(boxes, scores, size, iou, _lowest(scores))[0]


def _thresholds(max_output_size, iou_threshold, score_threshold=None):
    size = _scalar(max_output_size, "max_output_size")
    iou = _iou_threshold(_scalar(iou_threshold, "iou_threshold"))
    if score_threshold is None:
        return size, iou, None
    return size, iou, _scalar(score_threshold, "score_threshold")


@kernel("NonMaxSuppressionV2", host_inputs=(2, 3))
def non_max_suppression_v2(ctx, boxes, scores, max_output_size, iou_threshold):
    size, iou, _ = _thresholds(max_output_size, iou_threshold)
    scores = np.asarray(scores)
    return _nms(boxes, scores, size, iou, _lowest(scores))[0]


@kernel("NonMaxSuppressionV3", host_inputs=(2, 3, 4))
def non_max_suppression_v3(ctx, boxes, scores, max_output_size, iou_threshold,
                           score_threshold):
    size, iou, st = _thresholds(max_output_size, iou_threshold, score_threshold)
    scores = np.asarray(scores)
    return _nms(boxes, scores, size, iou, scores.dtype.type(st))[0]


@kernel("NonMaxSuppressionV4", host_inputs=(2, 3, 4))
def non_max_suppression_v4(ctx, boxes, scores, max_output_size, iou_threshold,
                           score_threshold):
    size, iou, st = _thresholds(max_output_size, iou_threshold, score_threshold)
    scores = np.asarray(scores)
    pad = bool(ctx.attrs.get("pad_to_max_output_size", False))
    indices, _, valid = _nms(boxes, scores, size, iou, scores.dtype.type(st), pad=pad)
    return indices, valid


@kernel("NonMaxSuppressionV5", host_inputs=(2, 3, 4, 5))
def non_max_suppression_v5(ctx, boxes, scores, max_output_size, iou_threshold,
                           score_threshold, soft_nms_sigma):
    size, iou, st = _thresholds(max_output_size, iou_threshold, score_threshold)
    sigma = _scalar(soft_nms_sigma, "soft_nms_sigma")
    if not sigma >= 0:
        fail("soft_nms_sigma_val must be >= 0")
    scores = np.asarray(scores)
    pad = bool(ctx.attrs.get("pad_to_max_output_size", False))
    return _nms(boxes, scores, size, iou, scores.dtype.type(st), sigma, pad)


# --- CropAndResize ---------------------------------------------------------------------------
def _crop_boxes(boxes, box_ind):
    """ParseAndCheckBoxSizes: boxes [n, 4] float32, box_ind [n] (no boxes: both empty)."""
    boxes, box_ind = np.asarray(boxes), np.asarray(box_ind)
    if boxes.size == 0 and box_ind.size == 0:
        return np.zeros((0, 4), F32), np.zeros(0, np.int64)
    _check_boxes(boxes, box_ind, "box_index")
    return boxes.astype(F32), box_ind.astype(np.int64)


def _check_box_ind(box_ind, batch):
    """RunIfBoxIndexIsValid (TensorFlow's OutOfRange)."""
    if box_ind.size and (box_ind.min() < 0 or box_ind.max() >= batch):
        fail("box_index has values outside [0, batch_size)")


def _positive_hw(h, w, what):
    if h <= 0 or w <= 0:
        fail(f"{what} dimensions must be positive")


class _Samples:
    """Where each crop row (column) samples the image along one axis, for all boxes:
    `at` [n, crop] the float32 source coordinate, `ok` whether it lies in the image, and the
    bilinear pair (lo, hi, lerp) or the nearest index, clamped where not ok."""

    def __init__(self, c0, c1, in_size, crop, ratio_first=False):
        last = F32(in_size - 1)
        if crop > 1:
            pos = np.arange(crop, dtype=F32)
            if ratio_first:  # CropAndResizeBackpropBoxes: (y2 - y1) * ((H - 1) / (h - 1))
                ratio = last / F32(crop - 1)
                step = (c1 - c0) * ratio
            else:
                step = (c1 - c0) * last / F32(crop - 1)
            at = c0[:, None] * last + pos[None, :] * step[:, None]
        else:
            # `0.5 * (y1 + y2) * (H - 1)`: a float sum, then double arithmetic
            at = (0.5 * (c0 + c1).astype(np.float64) * (in_size - 1)).astype(F32)[:, None]
        self.at = at.astype(F32)
        self.ok = (self.at >= 0) & (self.at <= last)  # NaN: not ok
        safe = np.where(self.ok, self.at, F32(0))
        self.lo = np.floor(safe).astype(np.int64)
        self.hi = np.ceil(safe).astype(np.int64)
        self.lerp = (safe - self.lo.astype(F32)).astype(F32)
        fl = np.floor(safe)
        self.near = (fl + (safe - fl >= F32(0.5))).astype(np.int64)  # roundf


def _crop_size(crop_size):
    crop_size = np.asarray(crop_size)
    if crop_size.ndim != 1:
        fail(f"crop_size must be 1-D{_tf_shape(crop_size)}")
    if crop_size.shape[0] != 2:
        fail(f"crop_size must have two elements{_tf_shape(crop_size)}")
    h, w = int(crop_size[0]), int(crop_size[1])
    _positive_hw(h, w, "crop")
    return h, w


def _nearest(ctx):
    return s(ctx.attrs.get("method", "bilinear")) == "nearest"


def _image4d(image, what="input image"):
    image = np.asarray(image)
    if image.ndim != 4:
        fail(f"{what} must be 4-D{_tf_shape(image)}")
    _positive_hw(image.shape[1], image.shape[2], "image")
    return image


@kernel("CropAndResize", host_inputs=(3,))
def crop_and_resize(ctx, image, boxes, box_ind, crop_size):
    image = _image4d(image)
    boxes, box_ind = _crop_boxes(boxes, box_ind)
    ch, cw = _crop_size(crop_size)
    _check_box_ind(box_ind, image.shape[0])
    _, height, width, depth = image.shape
    ys = _Samples(boxes[:, 0], boxes[:, 2], height, ch)
    xs = _Samples(boxes[:, 1], boxes[:, 3], width, cw)
    b = box_ind[:, None, None]

    def at(yi, xi):
        return image[b, yi[:, :, None], xi[:, None, :]].astype(F32)

    if _nearest(ctx):
        out = at(ys.near, xs.near)
    else:
        xl = xs.lerp[:, None, :, None]
        top_l, top_r = at(ys.lo, xs.lo), at(ys.lo, xs.hi)
        bot_l, bot_r = at(ys.hi, xs.lo), at(ys.hi, xs.hi)
        top = top_l + (top_r - top_l) * xl
        bottom = bot_l + (bot_r - bot_l) * xl
        out = top + (bottom - top) * ys.lerp[:, :, None, None]
    ok = (ys.ok[:, :, None] & xs.ok[:, None, :])[..., None]
    extrapolate = F32(ctx.attrs.get("extrapolation_value", 0.0))
    return np.where(ok, out, extrapolate).astype(F32).reshape(len(boxes), ch, cw, depth)


def _grads4d(grads):
    grads = np.asarray(grads)
    if grads.ndim != 4:
        fail(f"grads image must be 4-D{_tf_shape(grads)}")
    _positive_hw(grads.shape[1], grads.shape[2], "grads")
    return grads.astype(F32)


def _grad_boxes_count(grads, boxes):
    if grads.shape[0] != boxes.shape[0]:
        fail("boxes and grads have incompatible shape")


@kernel("CropAndResizeGradImage", host_inputs=(3,))
def crop_and_resize_grad_image(ctx, grads, boxes, box_ind, image_size):
    grads = _grads4d(grads)
    boxes, box_ind = _crop_boxes(boxes, box_ind)
    _grad_boxes_count(grads, boxes)
    size = np.asarray(image_size)
    if size.ndim != 1:
        fail(f"image_size must be 1-D{_tf_shape(size)}")
    if size.shape[0] != 4:
        fail(f"image_size must have 4 elements{_tf_shape(size)}")
    batch, height, width, depth = (int(v) for v in size)
    _positive_hw(height, width, "image")
    if batch < 0 or depth < 0:
        fail(f"image_size must be non-negative, got {[int(v) for v in size]}")
    if grads.shape[3] != depth:
        fail("image_size and grads are incompatible")
    _check_box_ind(box_ind, batch)
    dtype = ctx.attrs["T"].np
    out = np.zeros((batch, height, width, depth), dtype)
    n, ch, cw, _ = grads.shape
    ys = _Samples(boxes[:, 0], boxes[:, 2], height, ch)
    xs = _Samples(boxes[:, 1], boxes[:, 3], width, cw)
    # [n, ch, cw, depth, corner]: the kernel's loop order, each pixel's corners in turn
    shape = (n, ch, cw, depth)
    if _nearest(ctx):
        corners = [(ys.near, xs.near, grads)]
    else:
        yl, xl = ys.lerp[:, :, None, None], xs.lerp[:, None, :, None]
        dtop = (F32(1) - yl) * grads
        dbottom = yl * grads
        corners = [(ys.lo, xs.lo, (F32(1) - xl) * dtop), (ys.lo, xs.hi, xl * dtop),
                   (ys.hi, xs.lo, (F32(1) - xl) * dbottom), (ys.hi, xs.hi, xl * dbottom)]
    full = shape + (len(corners),)
    ok = np.broadcast_to((ys.ok[:, :, None] & xs.ok[:, None, :])[..., None, None], full)

    def per_corner(parts):
        return np.stack([np.broadcast_to(p, shape) for p in parts], axis=-1)[ok]

    index = (np.broadcast_to(box_ind[:, None, None, None, None], full)[ok],
             per_corner([yi[:, :, None, None] for yi, _, _ in corners]),
             per_corner([xi[:, None, :, None] for _, xi, _ in corners]),
             np.broadcast_to(np.arange(depth)[:, None], full)[ok])
    values = per_corner([v for _, _, v in corners])
    np.add.at(out, index, values.astype(F32).astype(dtype))
    return out


@kernel("CropAndResizeGradBoxes")
def crop_and_resize_grad_boxes(ctx, grads, image, boxes, box_ind):
    grads = _grads4d(grads)
    image = _image4d(image)
    if image.shape[3] != grads.shape[3]:
        fail("image, grads depth differ")
    boxes, box_ind = _crop_boxes(boxes, box_ind)
    _grad_boxes_count(grads, boxes)
    _check_box_ind(box_ind, image.shape[0])
    n, ch, cw, depth = grads.shape
    _, height, width, _ = image.shape
    ys = _Samples(boxes[:, 0], boxes[:, 2], height, ch, ratio_first=True)
    xs = _Samples(boxes[:, 1], boxes[:, 3], width, cw, ratio_first=True)
    b = box_ind[:, None, None]

    def at(yi, xi):
        return image[b, yi[:, :, None], xi[:, None, :]].astype(F32)

    top_l, top_r = at(ys.lo, xs.lo), at(ys.lo, xs.hi)
    bot_l, bot_r = at(ys.hi, xs.lo), at(ys.hi, xs.hi)
    yl, xl = ys.lerp[:, :, None, None], xs.lerp[:, None, :, None]
    grad_y = ((F32(1) - xl) * (bot_l - top_l) + xl * (bot_r - top_r)) * grads
    grad_x = ((F32(1) - yl) * (top_r - top_l) + yl * (bot_r - bot_l)) * grads
    ok = np.broadcast_to((ys.ok[:, :, None] & xs.ok[:, None, :])[..., None], grads.shape)
    out = np.zeros((n, 4), F32)
    for grad, pair, samples, size, crop in ((grad_y, (0, 2), ys, height, ch),
                                            (grad_x, (1, 3), xs, width, cw)):
        _add_box_grads(out, grad, ok, pair, samples, size, crop)
    return out


def _add_box_grads(out, grad, ok, pair, samples, size, crop):
    """out[:, pair] += grad times d(coordinate)/d(box corner), summed in loop order."""
    n = grad.shape[0]
    axis = 1 if pair[0] == 0 else 2
    if crop > 1:
        ratio = F32(size - 1) / F32(crop - 1)
        pos = np.arange(crop, dtype=F32) * ratio
        shape = [1, 1, 1, 1]
        shape[axis] = -1
        first = grad * (F32(size - 1) - pos).reshape(shape)
        second = grad * pos.reshape(shape)
        rows = np.broadcast_to(np.arange(n)[:, None, None, None], grad.shape)[ok]
        np.add.at(out[:, pair[0]], rows, first[ok].astype(F32))
        np.add.at(out[:, pair[1]], rows, second[ok].astype(F32))
        return
    # a one-point crop: `grad * 0.5 * (H - 1)` is a double, added to the float sum
    term = np.where(ok, grad.astype(np.float64) * 0.5 * (size - 1), 0.0).reshape(n, -1)
    used = ok.reshape(n, -1)
    acc = np.zeros(n, F32)
    for k in range(term.shape[1]):
        acc = np.where(used[:, k], (acc.astype(np.float64) + term[:, k]).astype(F32), acc)
    out[:, pair[0]] += acc
    out[:, pair[1]] += acc
