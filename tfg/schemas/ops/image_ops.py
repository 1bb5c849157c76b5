"""Signatures of the image resize ops (TensorFlow's image_ops.cc) and their gradients.

    >>> get_op("ResizeBilinear").attrs["half_pixel_centers"].default
    False

`tf.image.resize` (and Keras' UpSampling2D, Resizing) write these with half_pixel_centers;
TF1 code wrote the legacy corner-aligned form.
"""
from tfg.schemas.ops.registry import op
from tfg.schemas.ops.shape_fns import ShapeError, fmt, merge, with_rank, with_rank_at_least

_RESIZE_ATTRS = ["align_corners: bool = false", "half_pixel_centers: bool = false"]


def resize(ctx, size_input=1):
    """images [N, H, W, C], size = [h, w] -> [N, h, w, C]."""
    s = with_rank(ctx.shape(0), 4, "images")  # (None,) * 4 when unknown
    size = ctx.elems(size_input)
    if ctx.shape(size_input) is not None:
        merge(with_rank(ctx.shape(size_input), 1, "size"), (2,))
    if size is not None and len(size) != 2:
        raise ShapeError(f"size must have 2 elements, got {len(size)}")
    h, w = size if size is not None else (None, None)
    for d in (h, w):
        if d is not None and d <= 0:
            raise ShapeError(f"size must be positive, got {list(size)}")
    return [(s[0], h, w, s[3])]


def resize_grad_like_image(ctx):
    """ResizeBilinearGrad / ResizeBicubicGrad: the original image's shape."""
    with_rank(ctx.shape(0), 4, "grads")
    return [with_rank(ctx.shape(1), 4, "original_image")]


def resize_nn_grad(ctx):
    """ResizeNearestNeighborGrad: grads [N, h, w, C], size = the image's [H, W]."""
    return resize(ctx)


op("ResizeBilinear",
   inputs=["images: T", "size: int32"],
   outputs=["resized_images: float"],
   attrs=["T: {int8, uint8, int16, uint16, int32, int64, bfloat16, half, float, double}"]
   + _RESIZE_ATTRS,
   shape_fn=resize)
op("ResizeNearestNeighbor",
   inputs=["images: T", "size: int32"],
   outputs=["resized_images: T"],
   attrs=["T: {int8, uint8, int16, uint16, int32, int64, half, float, double, bfloat16}"]
   + _RESIZE_ATTRS,
   shape_fn=resize)
op("ResizeBicubic",
   inputs=["images: T", "size: int32"],
   outputs=["resized_images: float"],
   attrs=["T: {int8, uint8, int16, uint16, int32, int64, half, float, double, bfloat16}"]
   + _RESIZE_ATTRS,
   shape_fn=resize)
op("ResizeBilinearGrad",
   inputs=["grads: float", "original_image: T"],
   outputs=["output: T"],
   attrs=["T: {float, bfloat16, half, double}"] + _RESIZE_ATTRS,
   shape_fn=resize_grad_like_image)
op("ResizeNearestNeighborGrad",
   inputs=["grads: T", "size: int32"],
   outputs=["output: T"],
   attrs=["T: {uint8, int8, int32, half, float, double, bfloat16}"] + _RESIZE_ATTRS,
   shape_fn=resize_nn_grad)
op("ResizeBicubicGrad",
   inputs=["grads: float", "original_image: T"],
   outputs=["output: T"],
   attrs=["T: {float, double}"] + _RESIZE_ATTRS,
   shape_fn=resize_grad_like_image)


# --- ScaleAndTranslate (scale_and_translate_op.cc): tf.image.resize's antialiased and
# lanczos / gaussian / mitchellcubic methods ----------------------------------------------------
def scale_and_translate_grad(ctx):
    """The original image's shape, as TensorFlow (set_output(0, input(1)))."""
    return [ctx.shape(1)]


_SAMPLING_ATTRS = ["kernel_type: string = 'lanczos3'", "antialias: bool = true"]
op("ScaleAndTranslate",
   inputs=["images: T", "size: int32", "scale: float", "translation: float"],
   outputs=["resized_images: float"],
   attrs=["T: {int8, uint8, int16, uint16, int32, int64, bfloat16, half, float, double}"]
   + _SAMPLING_ATTRS,
   shape_fn=resize)
op("ScaleAndTranslateGrad",
   inputs=["grads: T", "original_image: T", "scale: float", "translation: float"],
   outputs=["output: T"],
   attrs=["T: {float}"] + _SAMPLING_ATTRS,
   shape_fn=scale_and_translate_grad)


# --- detection ops (non_max_suppression_op.cc, crop_and_resize_op.cc) -----------------------
def _scalar_inputs(ctx, first, what):
    for i, name in zip(range(first, ctx.num_inputs), what):
        with_rank(ctx.shape(i), 0, name)


def _boxes(shape):
    """[num_boxes, 4]."""
    boxes = with_rank(shape, 2, "boxes")
    if boxes[1] not in (None, 4):
        raise ShapeError(f"boxes must have 4 columns, got shape {fmt(boxes)}")
    return boxes


def _nms_checks(ctx):
    """boxes [num_boxes, 4], scores [num_boxes], and scalar thresholds."""
    boxes = _boxes(ctx.shape(0))
    scores = with_rank(ctx.shape(1), 1, "scores")
    merge(boxes[:1], scores)
    _scalar_inputs(ctx, 2, ["max_output_size", "iou_threshold", "score_threshold",
                            "soft_nms_sigma"])


def _padded_size(ctx):
    """max_output_size when the outputs are padded to it (TF's MakeDimForScalarInput), else
    unknown: how many boxes survive depends on their values."""
    if not ctx.attrs.get("pad_to_max_output_size", False):
        return None
    size = ctx.scalar(2)
    if size is not None and size < 0:
        raise ShapeError(f"Dimension size, given by scalar input 2, must be non-negative but "
                         f"is {size}")
    return size


def nms(ctx):
    """selected_indices [?] (V1-V3)."""
    _nms_checks(ctx)
    return [(None,)]


def nms_v4(ctx):
    """selected_indices [?] (or [max_output_size] padded), valid_outputs []."""
    _nms_checks(ctx)
    return [(_padded_size(ctx),), ()]


def nms_v5(ctx):
    """selected_indices, selected_scores [?] (or [max_output_size]), valid_outputs []."""
    _nms_checks(ctx)
    n = _padded_size(ctx)
    return [(n,), (n,), ()]


def crop_and_resize(ctx):
    """image [B, H, W, C], boxes [n, 4], box_ind [n], crop_size = [h, w] -> [n, h, w, C]."""
    image = with_rank(ctx.shape(0), 4, "image")
    boxes = _boxes(ctx.shape(1))
    box_ind = with_rank(ctx.shape(2), 1, "box_ind")
    n = merge(boxes[:1], box_ind)[0]
    out = resize(_CropSizeView(ctx))[0]
    return [(n, out[1], out[2], image[3])]


class _CropSizeView:
    """The view `resize` reads: input 0 an image of unknown shape, input 1 the crop size."""

    def __init__(self, ctx):
        self._ctx = ctx

    def shape(self, i):
        return None if i == 0 else self._ctx.shape(3)

    def elems(self, i):
        return self._ctx.elems(3)


def crop_and_resize_grad_image(ctx):
    """The image's shape, from the value of image_size."""
    with_rank(ctx.shape(0), 4, "grads")
    return [with_rank(ctx.shape_tensor(3), 4, "image_size")]


def crop_and_resize_grad_boxes(ctx):
    with_rank(ctx.shape(0), 4, "grads")
    with_rank(ctx.shape(1), 4, "image")
    return [_boxes(ctx.shape(2))]


_NMS_T = ["T: {half, float} = DT_FLOAT"]
_NMS_THRESHOLDS = ["T_threshold: {half, float} = DT_FLOAT"]
_NMS_PAD = ["pad_to_max_output_size: bool = false"]
op("NonMaxSuppression",
   inputs=["boxes: float", "scores: float", "max_output_size: int32"],
   outputs=["selected_indices: int32"],
   attrs=["iou_threshold: float = 0.5"],
   shape_fn=nms)
op("NonMaxSuppressionV2",
   inputs=["boxes: T", "scores: T", "max_output_size: int32", "iou_threshold: T_threshold"],
   outputs=["selected_indices: int32"],
   attrs=_NMS_T + _NMS_THRESHOLDS,
   shape_fn=nms)
op("NonMaxSuppressionV3",
   inputs=["boxes: T", "scores: T", "max_output_size: int32", "iou_threshold: T_threshold",
           "score_threshold: T_threshold"],
   outputs=["selected_indices: int32"],
   attrs=_NMS_T + _NMS_THRESHOLDS,
   shape_fn=nms)
op("NonMaxSuppressionV4",
   inputs=["boxes: T", "scores: T", "max_output_size: int32", "iou_threshold: T_threshold",
           "score_threshold: T_threshold"],
   outputs=["selected_indices: int32", "valid_outputs: int32"],
   attrs=_NMS_T + _NMS_THRESHOLDS + _NMS_PAD,
   shape_fn=nms_v4)
op("NonMaxSuppressionV5",
   inputs=["boxes: T", "scores: T", "max_output_size: int32", "iou_threshold: T",
           "score_threshold: T", "soft_nms_sigma: T"],
   outputs=["selected_indices: int32", "selected_scores: T", "valid_outputs: int32"],
   attrs=_NMS_T + _NMS_PAD,
   shape_fn=nms_v5)
op("CropAndResize",
   inputs=["image: T", "boxes: float", "box_ind: int32", "crop_size: int32"],
   outputs=["crops: float"],
   attrs=["T: {uint8, uint16, int8, int16, int32, int64, half, float, double}",
          "method: {'bilinear', 'nearest'} = 'bilinear'", "extrapolation_value: float = 0"],
   shape_fn=crop_and_resize)
op("CropAndResizeGradImage",
   inputs=["grads: float", "boxes: float", "box_ind: int32", "image_size: int32"],
   outputs=["output: T"],
   attrs=["T: {float, half, double}", "method: {'bilinear', 'nearest'} = 'bilinear'"],
   shape_fn=crop_and_resize_grad_image)
op("CropAndResizeGradBoxes",
   inputs=["grads: float", "image: T", "boxes: float", "box_ind: int32"],
   outputs=["output: float"],
   attrs=["T: {uint8, uint16, int8, int16, int32, int64, half, float, double}",
          "method: {'bilinear'} = 'bilinear'"],
   shape_fn=crop_and_resize_grad_boxes)


# --- colour ops (colorspace_op.cc, adjust_*_op.cc) and ResizeArea -----------------------------
def colorspace(ctx):
    """[..., 3] -> [..., 3]."""
    s = with_rank_at_least(ctx.shape(0), 1, "images")
    if s is not None and s[-1] not in (None, 3):
        raise ShapeError(f"images must have 3 channels in its last dimension, got shape "
                         f"{fmt(s)}")
    return [None if s is None else tuple(s[:-1]) + (3,)]


def image_at_least_3d(ctx):
    """UnchangedShapeWithRankAtLeast(c, 3)."""
    return [with_rank_at_least(ctx.shape(0), 3, "images")]


_COLOUR_T = ["T: {half, bfloat16, float, double} = DT_FLOAT"]
op("RGBToHSV", inputs=["images: T"], outputs=["output: T"], attrs=_COLOUR_T,
   shape_fn=colorspace)
op("HSVToRGB", inputs=["images: T"], outputs=["output: T"], attrs=_COLOUR_T,
   shape_fn=colorspace)
for _name, _factor in (("AdjustContrastv2", "contrast_factor"), ("AdjustSaturation", "scale"),
                       ("AdjustHue", "delta")):
    op(_name, inputs=["images: T", f"{_factor}: float"], outputs=["output: T"],
       attrs=["T: {half, float} = DT_FLOAT"], shape_fn=image_at_least_3d)
op("ResizeArea",
   inputs=["images: T", "size: int32"],
   outputs=["resized_images: float"],
   attrs=["T: {int8, uint8, int16, uint16, int32, int64, half, float, double, bfloat16}",
          "align_corners: bool = false"],
   shape_fn=resize)


# --- ImageProjectiveTransformV2/V3 (image_ops.cc): Keras RandomRotation, RandomTranslation,
# RandomZoom, RandomShear. The output's [height, width] is output_shape's value.
def projective_transform(ctx):
    """images [N, H, W, C], output_shape = [h, w] -> [N, h, w, C]."""
    return resize(ctx, size_input=2)


_PROJECTIVE_ATTRS = ["dtype: {uint8, int32, int64, half, bfloat16, float, double}",
                     "interpolation: string", "fill_mode: string = 'CONSTANT'"]
op("ImageProjectiveTransformV2",
   inputs=["images: dtype", "transforms: float", "output_shape: int32"],
   outputs=["transformed_images: dtype"],
   attrs=_PROJECTIVE_ATTRS,
   shape_fn=projective_transform)
op("ImageProjectiveTransformV3",
   inputs=["images: dtype", "transforms: float", "output_shape: int32", "fill_value: float"],
   outputs=["transformed_images: dtype"],
   attrs=_PROJECTIVE_ATTRS,
   shape_fn=projective_transform)


# --- CombinedNonMaxSuppression (non_max_suppression_op.cc), DrawBoundingBoxes/V2
# (draw_bounding_box_op.cc), SampleDistortedBoundingBoxV2 (sample_distorted_bounding_box_op.cc)
def _scalar_dim(ctx, i):
    """MakeDimForScalarInput: input i's value as a dim (-1 or unknown: None)."""
    v = ctx.scalar(i)
    if v is not None and v < -1:
        raise ShapeError(f"Dimension size, given by scalar input {i}, must be non-negative but "
                         f"is {v}")
    return None if v == -1 else v


def combined_nms(ctx):
    """boxes [B, anchors, q, 4], scores [B, anchors, classes] -> [B, size, 4], [B, size] x2,
    [B]; size is max_total_size's value (with pad_per_class, at most max_output_size_per_class
    * classes), which the kernel allocates however few boxes survive."""
    boxes = with_rank(ctx.shape(0), 4, "boxes")
    scores = with_rank(ctx.shape(1), 3, "scores")
    _scalar_inputs(ctx, 2, ["max_output_size_per_class", "max_total_size", "iou_threshold",
                            "score_threshold"])
    batch = merge(boxes[:1], scores[:1])[0]
    merge(boxes[1:2], scores[1:2])
    if boxes[3] not in (None, 4):
        raise ShapeError(f"boxes must have 4 columns, got shape {fmt(boxes)}")
    q, classes = boxes[2], scores[2]
    if None not in (q, classes) and q not in (1, classes):
        raise ShapeError("third dimension of boxes must be either 1 or equal to the third "
                         "dimension of scores")
    size = _scalar_dim(ctx, 3)
    if size is not None and size <= 0:
        raise ShapeError("max_total_size should be > 0 ")
    if ctx.attrs.get("pad_per_class", False):
        per_class = _scalar_dim(ctx, 2)
        if per_class is not None and per_class <= 0:
            raise ShapeError("max_output_size_per_class must be > 0 if pad_per_class is set "
                             "to true ")
        if None in (size, per_class, classes):
            size = None
        else:
            size = min(size, per_class * classes)
    return [(batch, size, 4), (batch, size), (batch, size), (batch,)]


def sample_distorted_bounding_box(ctx):
    """image_size [3], bounding_boxes [batch, N, 4], a scalar -> begin [3], size [3],
    bboxes [1, 1, 4]."""
    size = with_rank(ctx.shape(0), 1, "image_size")
    boxes = with_rank(ctx.shape(1), 3, "bounding_boxes")
    with_rank(ctx.shape(2), 0, "min_object_covered")
    if size[0] not in (None, 3):
        raise ShapeError(f"image_size must have 3 elements, got shape {fmt(size)}")
    if boxes[2] not in (None, 4):
        raise ShapeError(f"bounding_boxes must have 4 coordinates, got shape {fmt(boxes)}")
    return [(3,), (3,), (1, 1, 4)]


op("CombinedNonMaxSuppression",
   inputs=["boxes: float", "scores: float", "max_output_size_per_class: int32",
           "max_total_size: int32", "iou_threshold: float", "score_threshold: float"],
   outputs=["nmsed_boxes: float", "nmsed_scores: float", "nmsed_classes: float",
            "valid_detections: int32"],
   attrs=["pad_per_class: bool = false", "clip_boxes: bool = true"],
   shape_fn=combined_nms)
op("DrawBoundingBoxes",
   inputs=["images: T", "boxes: float"],
   outputs=["output: T"],
   attrs=["T: {float, half} = DT_FLOAT"],
   shape_fn=image_at_least_3d)
op("DrawBoundingBoxesV2",
   inputs=["images: T", "boxes: float", "colors: float"],
   outputs=["output: T"],
   attrs=["T: {float, half} = DT_FLOAT"],
   shape_fn=image_at_least_3d)
op("SampleDistortedBoundingBoxV2",
   inputs=["image_size: T", "bounding_boxes: float", "min_object_covered: float"],
   outputs=["begin: T", "size: T", "bboxes: float"],
   attrs=["T: {uint8, int8, int16, int32, int64}", "seed: int = 0", "seed2: int = 0",
          # (TensorFlow's defaults 1.33 and 0.05 as float32 holds them)
          "aspect_ratio_range: list(float) = [0.75, 1.3300000429153442]",
          "area_range: list(float) = [0.05000000074505806, 1.0]", "max_attempts: int = 100",
          "use_image_if_no_bounding_boxes: bool = false"],
   stateful=True, shape_fn=sample_distorted_bounding_box)
