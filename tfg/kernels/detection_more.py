"""Detection post-processing and preprocessing kernels with TensorFlow's arithmetic:
CombinedNonMaxSuppression (non_max_suppression_op.cc), DrawBoundingBoxes/V2
(draw_bounding_box_op.cc), and the stateful SampleDistortedBoundingBoxV2
(sample_distorted_bounding_box_op.cc) and RandomShuffle (random_shuffle_op.cc).

    CombinedNonMaxSuppression(boxes [B, anchors, q, 4], scores [B, anchors, classes], ...)
        -> nmsed_boxes [B, size, 4], nmsed_scores, nmsed_classes [B, size], valid [B]

Per batch and class, greedy NMS (detection_ops' _hard_nms, the class's boxes when q is the
class count, else the shared ones) keeps at most max_output_size_per_class boxes; the kept
ones of every class are then sorted by score and the first max_total_size taken. As in
TensorFlow, every class owns max_output_size_per_class slots (min'd with the anchors); the
ones NMS left unused hold score -1, class -1 and a zero box, and sort among the rest, so with
scores below -1 they are what fills the output past the valid detections. size is
max_total_size, or with pad_per_class min(max_total_size, max_output_size_per_class *
classes).

The two random ops draw from the node's own numpy Generator (`step.rng_for`, as
random_ops.py): a fixed (seed, seed2) repeats across sessions; the streams are not
TensorFlow's.
"""
import numpy as np

from tfg.kernels._util import fail, tf_dims
from tfg.kernels.detection_ops import _Corners, _hard_nms
from tfg.kernels.registry import kernel

F32 = np.float32


# --- CombinedNonMaxSuppression -----------------------------------------------------------------
def _scalar_input(v, what):
    v = np.asarray(v)
    if v.ndim != 0:
        fail(f"{what} must be 0-D, got shape {tf_dims(v.shape)}")
    return v[()]


def _combined_nms_args(boxes, scores, per_class, total, iou, score):
    """The kernel's checks, in its order: (per_class, total, iou, score_threshold)."""
    if boxes.ndim and scores.ndim and boxes.shape[0] != scores.shape[0]:
        fail("boxes and scores must have same batch size")
    per_class = int(_scalar_input(per_class, "max_size_per_class"))
    if per_class <= 0:
        fail("max_size_per_class must be positive")
    total = int(_scalar_input(total, "max_total_size"))
    if total <= 0:
        fail("max_total_size must be > 0")
    iou = F32(_scalar_input(iou, "iou_threshold"))
    score = F32(_scalar_input(score, "score_threshold"))
    if not 0 <= iou <= 1:
        fail("iou_threshold must be in [0, 1]")
    if boxes.ndim != 4:
        fail(f"boxes must be 4-D{tf_dims(boxes.shape)}")
    if scores.ndim != 3:
        fail(f"scores must be 3-D{tf_dims(scores.shape)}")
    if boxes.shape[2] not in (1, scores.shape[2]):
        fail("third dimension of boxes must be either 1 or num classes")
    if boxes.shape[3] != 4:
        fail("boxes must have 4 columns")
    if scores.shape[1] != boxes.shape[1]:
        fail("scores has incompatible shape")
    return per_class, total, iou, score


def _batch_candidates(boxes, scores, size_per_class, iou, score_threshold):
    """DoNMSPerClass for each class of one batch entry: [slots] scores, classes and [slots, 4]
    boxes, class c's selections in slots c * size_per_class onwards, the rest unused."""
    num_classes = scores.shape[1]
    slots = size_per_class * num_classes
    out_scores = np.full(slots, F32(-1))
    out_classes = np.full(slots, -1, np.int64)
    out_boxes = np.zeros((slots, 4), F32)
    shared = _Corners(boxes[:, 0]) if boxes.shape[1] == 1 else None
    for c in range(num_classes):
        col = 0 if shared is not None else c
        corners = shared if shared is not None else _Corners(boxes[:, col])
        selected, kept = _hard_nms(corners, scores[:, c], size_per_class, iou, score_threshold)
        at = c * size_per_class
        n = len(selected)
        out_scores[at:at + n] = kept
        out_classes[at:at + n] = c
        out_boxes[at:at + n] = boxes[selected, col]
    return out_scores, out_classes, out_boxes


@kernel("CombinedNonMaxSuppression", host_inputs=(2, 3, 4, 5))
def combined_non_max_suppression(ctx, boxes, scores, max_output_size_per_class,
                                 max_total_size, iou_threshold, score_threshold):
    boxes, scores = np.asarray(boxes, F32), np.asarray(scores, F32)
    per_class, total, iou, score = _combined_nms_args(
        boxes, scores, max_output_size_per_class, max_total_size, iou_threshold,
        score_threshold)
    batch, anchors, num_classes = scores.shape
    pad_per_class = bool(ctx.attrs.get("pad_per_class", False))
    size = min(total, per_class * num_classes) if pad_per_class else total
    size_per_class = min(per_class, anchors)
    out_boxes = np.zeros((batch, size, 4), F32)
    out_scores = np.zeros((batch, size), F32)
    out_classes = np.zeros((batch, size), F32)
    valid = np.zeros(batch, np.int32)
    for b in range(batch):
        cand_scores, cand_classes, cand_boxes = _batch_candidates(
            boxes[b], scores[b], size_per_class, iou, score)
        # std::sort by score, highest first (unstable there: equal scores in any order)
        order = np.argsort(-cand_scores, kind="stable")
        count = min(int((cand_classes >= 0).sum()), size)
        valid[b] = count
        take = order[:count]
        picked = cand_boxes[take]
        if ctx.attrs.get("clip_boxes", True):
            picked = np.clip(picked, F32(0), F32(1))
        out_boxes[b, :count] = picked
        out_scores[b, :count] = cand_scores[take]
        out_classes[b, :count] = cand_classes[take]
    return out_boxes, out_scores, out_classes, valid


# --- DrawBoundingBoxes ---------------------------------------------------------------------------
_DEFAULT_COLORS = np.array([[1, 1, 0, 1], [0, 0, 1, 1], [1, 0, 0, 1], [0, 1, 0, 1],
                            [0.5, 0, 0.5, 1], [0.5, 0.5, 0, 1], [0.5, 0, 0, 1], [0, 0, 0.5, 1],
                            [0, 1, 1, 1], [1, 0, 1, 1]], F32)


def _color_table(colors, depth):
    """The colors input's rows, or TensorFlow's ten defaults (red channel 1 when gray)."""
    if colors is not None:
        if colors.ndim != 2:
            fail(f"colors must be a 2-D matrix{tf_dims(colors.shape)}")
        if colors.shape[1] < depth:
            fail(f"colors must have equal or more channels than the image provided: "
                 f"{tf_dims(colors.shape)}")
        if colors.size:
            return colors.astype(F32)[:, :depth]
    table = _DEFAULT_COLORS.copy()
    if depth == 1:
        table[:, 0] = 1
    return table[:, :depth]


def _draw_checks(images, boxes):
    if images.ndim != 4:
        fail("The rank of the images should be 4")
    if boxes.ndim != 3:
        fail("The rank of the boxes tensor should be 3")
    if images.shape[0] != boxes.shape[0]:
        fail("The batch sizes should be the same")
    if images.shape[3] not in (1, 3, 4):
        fail("Channel depth should be either 1 (GRY), 3 (RGB), or 4 (RGBA)")
    if boxes.shape[2] != 4:
        fail(f"The size of the third dimension of the box must be 4. Received: "
             f"{boxes.shape[2]}")


def _edge(coord, size):
    """static_cast<int64>(float(coord) * (size - 1)); None for a non-finite product (undefined
    in C++: such a box is not drawn)."""
    v = F32(coord) * F32(size - 1)
    return int(np.trunc(v)) if np.isfinite(v) else None


def _draw_box(canvas, box, color):
    """One box's four one-pixel lines on canvas [H, W, depth], clipped to the image."""
    height, width = canvas.shape[:2]
    top, left = _edge(box[0], height), _edge(box[1], width)
    bottom, right = _edge(box[2], height), _edge(box[3], width)
    if None in (top, left, bottom, right):
        return
    if top > bottom or left > right:  # inverted: TensorFlow warns and skips it
        return
    if top >= height or bottom < 0 or left >= width or right < 0:  # wholly outside
        return
    r0, r1 = max(top, 0), min(bottom, height - 1)
    c0, c1 = max(left, 0), min(right, width - 1)
    if top >= 0:
        canvas[top, c0:c1 + 1] = color
    if bottom < height:
        canvas[bottom, c0:c1 + 1] = color
    if left >= 0:
        canvas[r0:r1 + 1, left] = color
    if right < width:
        canvas[r0:r1 + 1, right] = color


def _draw(images, boxes, colors=None):
    images, boxes = np.asarray(images), np.asarray(boxes, F32)
    _draw_checks(images, boxes)
    table = _color_table(None if colors is None else np.asarray(colors), images.shape[3])
    table = table.astype(images.dtype)
    out = images.copy()
    for b in range(images.shape[0]):
        for k in range(boxes.shape[1]):
            _draw_box(out[b], boxes[b, k], table[k % len(table)])
    return out


@kernel("DrawBoundingBoxes")
def draw_bounding_boxes(ctx, images, boxes):
    return _draw(images, boxes)


@kernel("DrawBoundingBoxesV2")
def draw_bounding_boxes_v2(ctx, images, boxes, colors):
    return _draw(images, boxes, colors)


# --- RandomShuffle -------------------------------------------------------------------------------
def _rng(ctx, step):
    return step.rng_for(ctx.name, ctx.attrs.get("seed", 0), ctx.attrs.get("seed2", 0))


@kernel("RandomShuffle", needs_step=True)
def random_shuffle(ctx, step, value):
    """value with its first dimension permuted (a scalar or one row: unchanged)."""
    value = np.asarray(value)
    if value.size <= 1 or value.shape[0] <= 1:
        return value
    return value[_rng(ctx, step).permutation(value.shape[0])]


# --- SampleDistortedBoundingBoxV2 ----------------------------------------------------------------
class _Rect:
    """TensorFlow's Rectangle: integer corners, min inclusive, max exclusive."""

    def __init__(self, x0=0, y0=0, x1=0, y1=0):
        self.x0, self.y0, self.x1, self.y1 = x0, y0, x1, y1

    def area(self):
        return (self.x1 - self.x0) * (self.y1 - self.y0)

    def intersect(self, r):
        x0, y0 = max(self.x0, r.x0), max(self.y0, r.y0)
        x1, y1 = min(self.x1, r.x1), min(self.y1, r.y1)
        if x0 > x1 or y0 > y1:
            return _Rect()
        return _Rect(x0, y0, x1, y1)


def _lrintf(v):
    """lrintf: float to the nearest integer, halves to even."""
    return int(np.rint(F32(v)))


def _random_crop(rng, width, height, area_range, aspect):
    """GenerateRandomCrop: a crop of about the sampled area and aspect ratio, or None."""
    min_rel, max_rel = F32(area_range[0]), F32(area_range[1])
    if max_rel <= 0 or aspect <= 0 or width <= 0 or height <= 0 or min_rel > max_rel:
        return None
    min_area = min_rel * F32(width) * F32(height)
    max_area = max_rel * F32(width) * F32(height)
    h = _lrintf(np.sqrt(min_area / aspect))
    max_h = _lrintf(np.sqrt(max_area / aspect))
    if _lrintf(F32(max_h) * aspect) > width:
        # the smallest max height with round(max_height * aspect) <= width
        max_h = int((width + 0.5 - float(F32(1e-7))) / float(aspect))
        if _lrintf(F32(max_h) * aspect) > width:
            max_h -= 1
    max_h = min(max_h, height)
    h = min(h, max_h)
    if h < max_h:
        h += int(rng.integers(0, max_h - h + 1))
    w = _lrintf(F32(h) * aspect)
    area = F32(w * h)
    for _ in range(2):  # rounding may leave the area short: try one or two rows taller
        if area < min_area:
            h += 1
            w = _lrintf(F32(h) * aspect)
            area = F32(w * h)
    if area < min_area or area > max_area or not 0 < w <= width or not 0 < h <= height:
        return None
    y = int(rng.integers(0, height - h)) if h < height else 0
    x = int(rng.integers(0, width - w)) if w < width else 0
    return _Rect(x, y, x + w, y + h)


def _covers(crop, min_covered, objects):
    """SatisfiesOverlapConstraints: at least 10 pixels, and enough of one object covered."""
    if crop.area() < 10:
        return False
    for obj in objects:
        area = F32(obj.area())
        if area == 0:
            continue
        if F32(crop.intersect(obj).area()) / area >= min_covered:
            return True
    return False


def _sample_attrs(ctx):
    """The constructor's checks of the attrs: (aspect_ratio_range, area_range, max_attempts)."""
    aspect = [F32(v) for v in ctx.attrs.get("aspect_ratio_range", [0.75, 1.33])]
    if len(aspect) != 2:
        fail("Aspect ratio range field must specify 2 dimensions")
    if not (aspect[0] > 0 and aspect[1] > 0):
        fail(f"Aspect ratio range must be non-negative: [{aspect[0]:g}, {aspect[1]:g}]")
    area = [F32(v) for v in ctx.attrs.get("area_range", [0.05, 1.0])]
    if len(area) != 2:
        fail("Area range field must specify 2 dimensions")
    if not (area[0] > 0 and area[1] > 0):
        fail(f"Area range must be non-negative: [{area[0]:g}, {area[1]:g}]")
    if not (area[0] <= 1 and area[1] <= 1):
        fail(f"Area range must be less then or equal to 1.0: [{area[0]:g}, {area[1]:g}]")
    attempts = int(ctx.attrs.get("max_attempts", 100))
    if attempts <= 0:
        fail(f"Max attempts must be non-negative: {attempts}")
    return aspect, area, attempts


def _objects(boxes, width, height, use_image):
    """The bounding boxes as pixel rectangles (the whole image when there are none)."""
    if boxes.ndim != 3:
        fail(f"input boxes must be 3-dimensional [batch, num_boxes, coords]: "
             f"{tf_dims(boxes.shape)}")
    if boxes.shape[-1] != 4:
        fail(f"bounding boxes must have shape [4] or [*, 4], got {tf_dims(boxes.shape)}")
    rects = []
    for y0, x0, y1, x1 in boxes.reshape(-1, 4):
        for v in (y0, x0, y1, x1):
            if not 0 <= v <= 1:
                fail(f"All bounding box coordinates must be in [0.0, 1.0]: {v:g}")
        rects.append(_Rect(*(int(F32(a) * F32(n)) for a, n in
                             ((x0, width), (y0, height), (x1, width), (y1, height)))))
    if not rects:
        if not use_image:
            fail("No bounding boxes provided as input. One must enable "
                 "use_image_if_no_bounding_boxes if you wish to not provide any bounding "
                 "boxes.")
        rects.append(_Rect(0, 0, width, height))
    return rects


def _image_hw(image_size):
    size = np.asarray(image_size)
    if size.ndim != 1:
        fail(f"image_size must be 1-dimensional{tf_dims(size.shape)}")
    if size.shape[0] != 3:
        fail(f"image_size must contain 3 elements{tf_dims(size.shape)}")
    # read as uint64: a negative size is a huge one
    height, width = (int(v) % (1 << 64) for v in size[:2])
    if height >= 2 ** 31 - 1:
        fail("image height cannot be >= int32 max")
    if width >= 2 ** 31 - 1:
        fail("image width cannot be >= int32 max")
    return height, width


@kernel("SampleDistortedBoundingBoxV2", needs_step=True)
def sample_distorted_bounding_box_v2(ctx, step, image_size, bounding_boxes, min_object_covered):
    """A random crop [begin, size] (for Slice) and its normalised box [1, 1, 4]: up to
    max_attempts samples of aspect ratio and area in their ranges, the first that covers at
    least min_object_covered of one bounding box; the whole image when none does."""
    aspect, area, attempts = _sample_attrs(ctx)
    height, width = _image_hw(image_size)
    boxes = np.asarray(bounding_boxes, F32)
    covered = F32(_scalar_input(min_object_covered, "min_object_covered"))
    if not covered >= 0:
        fail(f"Min object covered must be non-negative: {covered:g}")
    objects = _objects(boxes, width, height,
                       bool(ctx.attrs.get("use_image_if_no_bounding_boxes", False)))
    rng = _rng(ctx, step)
    crop = _Rect(0, 0, width, height)
    for _ in range(attempts):
        ratio = F32(rng.random(dtype=F32)) * (aspect[1] - aspect[0]) + aspect[0]
        got = _random_crop(rng, width, height, area, ratio)
        if got is not None and _covers(got, covered, objects):
            crop = got
            break
    dtype = np.asarray(image_size).dtype
    begin = np.array([crop.y0, crop.x0, 0]).astype(dtype)
    size = np.array([crop.y1 - crop.y0, crop.x1 - crop.x0, -1]).astype(dtype)
    with np.errstate(all="ignore"):  # a 0-sized image divides by zero, as TensorFlow
        box = np.array([F32(crop.y0) / F32(height), F32(crop.x0) / F32(width),
                        F32(crop.y1) / F32(height), F32(crop.x1) / F32(width)], F32)
    return begin, size, box.reshape(1, 1, 4)
