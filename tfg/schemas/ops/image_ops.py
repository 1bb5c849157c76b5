"""Signatures of the image resize ops (TensorFlow's image_ops.cc) and their gradients.

    >>> get_op("ResizeBilinear").attrs["half_pixel_centers"].default
    False

`tf.image.resize` (and Keras' UpSampling2D, Resizing) write these with half_pixel_centers;
TF1 code wrote the legacy corner-aligned form.
"""
from tfg.schemas.ops.registry import op
from tfg.schemas.ops.shape_fns import ShapeError, merge, with_rank

_RESIZE_ATTRS = ["align_corners: bool = false", "half_pixel_centers: bool = false"]


def resize(ctx):
    """images [N, H, W, C], size = [h, w] -> [N, h, w, C]."""
    s = with_rank(ctx.shape(0), 4, "images")  # (None,) * 4 when unknown
    size = ctx.elems(1)
    if ctx.shape(1) is not None:
        merge(with_rank(ctx.shape(1), 1, "size"), (2,))
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
