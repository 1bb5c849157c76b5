"""Gradients of the image resize ops (TensorFlow's image_grad.py).

    Before: y = ResizeBilinear(x, size)    After: ResizeBilinearGrad(g, x)
    Before: y = ResizeNearestNeighbor(x, size)
                                           After: ResizeNearestNeighborGrad(g, Shape(x)[1:3])

The size input gets no gradient; integer images get none either (TensorFlow differentiates
ResizeBilinear and ResizeBicubic only for float images).

    Before: y = CropAndResize(image, boxes, box_ind, crop_size)
    After:  CropAndResizeGradImage(g, boxes, box_ind, Shape(image)),
            CropAndResizeGradBoxes(g, image, boxes, box_ind)

RGBToHSV's gradient is TensorFlow's elementwise case analysis, emitted node for node.

    Before: y = ImageProjectiveTransformV2/V3(x, t, size, ...)
    After:  the same op of g through the inverses of t (MatrixInverse), size Shape(x)[1:3]
"""
from tfg.errors import TfgInputError
from tfg.passes.grad.registry import gradient, no_gradient
from tfg.schemas.dtypes import DType

I32 = DType.INT32


def _flags(op):
    return {k: op.attr(k, False) for k in ("align_corners", "half_pixel_centers")}


def _float_image(op, types=(DType.FLOAT, DType.DOUBLE, DType.HALF, DType.BFLOAT16)):
    # unknown (the image comes from an op without a signature): differentiate, as the
    # gradient pass does for every tensor of unknown dtype
    dt = op.input_dtype(0)
    return dt is None or dt in types


@gradient("ResizeBilinear")
def _resize_bilinear(b, op, grads):
    if not _float_image(op):
        return [None, None]
    return [b.op("ResizeBilinearGrad", [grads[0], op.inputs[0]], _flags(op)), None]


@gradient("ResizeBicubic")
def _resize_bicubic(b, op, grads):
    if not _float_image(op, (DType.FLOAT, DType.DOUBLE)):
        return [None, None]
    return [b.op("ResizeBicubicGrad", [grads[0], op.inputs[0]], _flags(op)), None]


@gradient("ResizeNearestNeighbor")
def _resize_nearest(b, op, grads):
    size = b.op("Slice", [b.shape(op.inputs[0]), b.const([1], I32), b.const([2], I32)])
    return [b.op("ResizeNearestNeighborGrad", [grads[0], size], _flags(op)), None]


@gradient("ScaleAndTranslate")
def _scale_and_translate(b, op, grads):
    """TensorFlow's _ScaleAndTranslateGrad: ScaleAndTranslateGrad(g, images, scale,
    translation). Integer images get none; TensorFlow has that op for float32 only, so a
    half or double image's gradient is refused, as TensorFlow refuses to build it."""
    if not _float_image(op):
        return [None] * 4
    if not _float_image(op, (DType.FLOAT,)):
        raise TfgInputError(f"the gradient of ScaleAndTranslate node {op.name!r} needs "
                            f"ScaleAndTranslateGrad, which TensorFlow defines for float32 "
                            f"images only, not {op.input_dtype(0)}")
    attrs = {"T": DType.FLOAT, "kernel_type": op.attr("kernel_type", "lanczos3"),
             "antialias": op.attr("antialias", True)}
    d = b.op("ScaleAndTranslateGrad", [grads[0], op.inputs[0], op.inputs[2], op.inputs[3]],
             attrs)
    return [d, None, None, None]


# --- detection and colour ops (TensorFlow's image_grad.py, image_ops_impl.py) ----------------
no_gradient("NonMaxSuppression", "NonMaxSuppressionV2", "HSVToRGB")
# NonMaxSuppressionV3-V5, AdjustContrastv2, AdjustSaturation, AdjustHue and ResizeArea have no
# gradient in TensorFlow either, and are left unregistered as there: a gradient that must pass
# through one is refused by name ("no gradient defined for op ...") instead of being zero.


@gradient("CropAndResize")
def _crop_and_resize(b, op, grads):
    """The image gradient for float images only; the boxes' always (bilinear, whatever the
    method: TensorFlow approximates nearest sampling's box gradient that way)."""
    image, boxes, box_ind, _ = op.inputs
    d_image = None
    if _float_image(op, (DType.HALF, DType.FLOAT, DType.DOUBLE)):
        d_image = b.op("CropAndResizeGradImage", [grads[0], boxes, box_ind, b.shape(image)],
                       {"T": op.input_dtype(0) or DType.FLOAT,
                        "method": op.attr("method", "bilinear")})
    d_boxes = b.op("CropAndResizeGradBoxes", [grads[0], image, boxes, box_ind])
    return [d_image, d_boxes, None, None]


class _Expr:
    """A gradient-graph tensor with Python's operators, so _rgb_to_hsv below reads (and
    associates) exactly like TensorFlow's _RGBToHSVGrad: `a * b * c` is Mul(Mul(a, b), c)."""

    def __init__(self, b, t, dtype):
        self.b, self.t, self.dtype = b, t, dtype

    def _wrap(self, v):
        return v if isinstance(v, _Expr) else _Expr(self.b, self.b.const(v, self.dtype),
                                                    self.dtype)

    def _op(self, optype, *args, dtype=None):
        ins = [self._wrap(a).t for a in args]
        return _Expr(self.b, self.b.op(optype, ins), dtype or self.dtype)

    def __mul__(self, o):
        return self._op("Mul", self, o)

    def __rmul__(self, o):
        return self._op("Mul", o, self)

    def __add__(self, o):
        return self._op("AddV2", self, o)

    def __sub__(self, o):
        return self._op("Sub", self, o)

    def __truediv__(self, o):
        return self._op("RealDiv", self, o)

    def __gt__(self, o):
        return self._op("Greater", self, o, dtype=DType.BOOL)

    def __ge__(self, o):
        return self._op("GreaterEqual", self, o, dtype=DType.BOOL)

    def __lt__(self, o):
        return self._op("Less", self, o, dtype=DType.BOOL)

    def __le__(self, o):
        return self._op("LessEqual", self, o, dtype=DType.BOOL)

    def __and__(self, o):
        return _Expr(self.b, self.b.op("LogicalAnd", [self.t, o.t]), DType.BOOL)

    def cast(self, dtype):
        return _Expr(self.b, self.b.op("Cast", [self.t], {"SrcT": self.dtype, "DstT": dtype}),
                     dtype)

    def channel(self, k):
        """x[..., k]: StridedSlice with an ellipsis and the last axis shrunk."""
        c = [self.b.const(v, I32) for v in ([0, k], [0, k + 1], [1, 1])]
        return _Expr(self.b, self.b.op("StridedSlice", [self.t] + c,
                                       {"Index": I32, "ellipsis_mask": 1,
                                        "shrink_axis_mask": 2, "begin_mask": 0,
                                        "end_mask": 0, "new_axis_mask": 0}), self.dtype)


def _square(x):
    return x._op("Square", x)


def _add(x, y):
    return x._op("AddV2", x, y)


def _recip(x):
    """_CustomReciprocal: DivNoNan(1, x)."""
    return x._op("DivNoNan", x._wrap(1.0), x)


def _stack(parts):
    b = parts[0].b
    return _Expr(b, b.op("Pack", [p.t for p in parts], {"axis": -1, "N": len(parts)}),
                 parts[0].dtype)


@gradient("RGBToHSV")
def _rgb_to_hsv(b, op, grads):
    """TensorFlow's _RGBToHSVGrad, node for node: the partial derivatives of v, s and h in
    each case of which channel is the largest and smallest (ties go R > G > B)."""
    dtype = op.input_dtype(0) or DType.FLOAT
    x, y, grad = (_Expr(b, t, dtype) for t in (op.inputs[0], op.outputs[0], grads[0]))
    reds, greens, blues = x.channel(0), x.channel(1), x.channel(2)
    saturation, value = y.channel(1), y.channel(2)

    red_biggest = ((reds >= blues) & (reds >= greens)).cast(dtype)
    green_biggest = ((greens > reds) & (greens >= blues)).cast(dtype)
    blue_biggest = ((blues > reds) & (blues > greens)).cast(dtype)
    red_smallest = ((reds < blues) & (reds < greens)).cast(dtype)
    green_smallest = ((greens <= reds) & (greens < blues)).cast(dtype)
    blue_smallest = ((blues <= reds) & (blues <= greens)).cast(dtype)

    dv_dr, dv_dg, dv_db = red_biggest, green_biggest, blue_biggest

    ds_dr = (reds > 0).cast(dtype) * _add(
        red_biggest * _add(green_smallest * greens, blue_smallest * blues)
        * _recip(_square(reds)), red_smallest * -1 *
        _recip((green_biggest * greens) + (blue_biggest * blues)))
    ds_dg = (greens > 0).cast(dtype) * _add(
        green_biggest * _add(red_smallest * reds, blue_smallest * blues) *
        _recip(_square(greens)), green_smallest * -1 *
        _recip((red_biggest * reds) + (blue_biggest * blues)))
    ds_db = (blues > 0).cast(dtype) * _add(
        blue_biggest * _add(green_smallest * greens, red_smallest * reds)
        * _recip(_square(blues)), blue_smallest * -1 *
        _recip((green_biggest * greens) + (red_biggest * reds)))

    dh_dr = _hue_partial(
        60 * ((reds > 0).cast(dtype) * red_biggest * -1 * (greens - blues)
              * _recip(_square(saturation)) * _recip(_square(value))),
        60 * ((greens > 0).cast(dtype) * green_biggest * red_smallest * (blues - greens)
              * _recip(_square(reds - greens))),
        60 * ((greens > 0).cast(dtype) * green_biggest * blue_smallest * -1
              * _recip(greens - blues)),
        60 * ((blues > 0).cast(dtype) * blue_biggest * red_smallest * (blues - greens)
              * _recip(_square(blues - reds))),
        60 * ((blues > 0).cast(dtype) * blue_biggest * green_smallest
              * _recip(blues - greens)))
    dh_dg = _hue_partial(
        60 * ((greens > 0).cast(dtype) * green_biggest * -1 * (blues - reds)
              * _recip(_square(saturation)) * _recip(_square(value))),
        60 * ((reds > 0).cast(dtype) * red_biggest * green_smallest * (reds - blues)
              * _recip(_square(reds - greens))),
        60 * ((reds > 0).cast(dtype) * red_biggest * blue_smallest * _recip(reds - blues)),
        60 * ((blues > 0).cast(dtype) * blue_biggest * green_smallest * (reds - blues)
              * _recip(_square(blues - greens))),
        60 * ((blues > 0).cast(dtype) * blue_biggest * red_smallest * -1
              * _recip(blues - reds)))
    dh_db = _hue_partial(
        60 * ((blues > 0).cast(dtype) * blue_biggest * -1 * (reds - greens)
              * _recip(_square(saturation)) * _recip(_square(value))),
        60 * ((reds > 0).cast(dtype) * red_biggest * blue_smallest * (greens - reds)
              * _recip(_square(reds - blues))),
        60 * ((reds > 0).cast(dtype) * red_biggest * green_smallest * -1
              * _recip(reds - greens)),
        60 * ((greens > 0).cast(dtype) * green_biggest * blue_smallest * (greens - reds)
              * _recip(_square(greens - blues))),
        60 * ((greens > 0).cast(dtype) * green_biggest * red_smallest
              * _recip(greens - reds)))

    g_h, g_s, g_v = grad.channel(0), grad.channel(1), grad.channel(2)
    dv_drgb = _stack([g_v * dv_dr, g_v * dv_dg, g_v * dv_db])
    ds_drgb = _stack([g_s * ds_dr, g_s * ds_dg, g_s * ds_db])
    dh_drgb = _stack([g_h * dh_dr, g_h * dh_dg, g_h * dh_db])
    return [_add(_add(dv_drgb, ds_drgb), dh_drgb).t]


def _hue_partial(*terms):
    """(t1 + t2 + t3 + t4 + t5) / 360: degrees back to TensorFlow's [0, 1] hue."""
    total = terms[0]
    for t in terms[1:]:
        total = total + t
    return total / 360


# --- ImageProjectiveTransformV2/V3 (TensorFlow's image_ops.py): not the adjoint of the
# sampling, but what TensorFlow registers: g resampled through the inverse transforms.
def _inverse_transforms(b, transforms):
    """TensorFlow's flat_transforms_to_matrices, MatrixInverse, matrices_to_flat_transforms:
    [N, 8] (or [8]) flat projective transforms -> the flat transforms of their inverses."""
    flat = b.op("Reshape", [transforms, b.const([-1, 8], I32)])
    num = b.op("StridedSlice", [b.shape(flat), b.const([0], I32), b.const([1], I32),
                                b.const([1], I32)], {"shrink_axis_mask": 1})
    ones = b.op("Fill", [b.op("Pack", [num, b.const(1, I32)], {"axis": 0}),
                         b.const(1.0, DType.FLOAT)])
    matrices = b.op("Reshape", [b.op("ConcatV2", [flat, ones, b.const(1, I32)]),
                                b.const([-1, 3, 3], I32)])
    inverse = b.op("Reshape", [b.op("MatrixInverse", [matrices]), b.const([-1, 9], I32)])
    last = b.op("StridedSlice", [inverse, b.const([0, 8], I32), b.const([0, 9], I32),
                                 b.const([1, 1], I32)], {"begin_mask": 1, "end_mask": 1})
    return b.op("StridedSlice", [b.op("RealDiv", [inverse, last]), b.const([0, 0], I32),
                                 b.const([0, 8], I32), b.const([1, 1], I32)],
                {"begin_mask": 1, "end_mask": 1})


def _projective_transform(b, op, grads, fill_value=()):
    images = op.inputs[0]
    size = b.op("StridedSlice", [b.shape(images), b.const([1], I32), b.const([3], I32),
                                 b.const([1], I32)])
    attrs = {"interpolation": op.attr("interpolation"),
             "fill_mode": op.attr("fill_mode", "CONSTANT")}
    d = b.op(op.type, [grads[0], _inverse_transforms(b, op.inputs[1]), size, *fill_value],
             attrs)
    return [d] + [None] * (len(op.inputs) - 1)


@gradient("ImageProjectiveTransformV2")
def _image_projective_transform_v2(b, op, grads):
    return _projective_transform(b, op, grads)


@gradient("ImageProjectiveTransformV3")
def _image_projective_transform_v3(b, op, grads):
    """V3's gradient fills with 0, whatever the forward op's fill_value."""
    return _projective_transform(b, op, grads, [b.const(0.0, DType.FLOAT)])
