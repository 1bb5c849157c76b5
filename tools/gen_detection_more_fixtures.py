#!/usr/bin/env python3
"""TensorFlow's values, gradients and errors of the detection, morphology and index ops
(CombinedNonMaxSuppression, EditDistance, UnravelIndex, NthElement, Dilation2D and its two
backprops, SampleDistortedBoundingBoxV2's deterministic fallback, DrawBoundingBoxes/V2) for
tests/test_detection_more_ops.py. NEEDS TENSORFLOW; never imports tfg:

    /work/tfvenv/bin/python tools/gen_detection_more_fixtures.py

Writes tests/fixtures/detection_more/: detection_more.pb (one tf.compat.v1 graph: per case
`<case>/<arg>` placeholders -> `<case>/out<k>`, Identity of the op's output k; the cases with
a gradient also `<case>/loss` = sum(out0 * weights) and TensorFlow's gradients
`<case>/tf_d<arg>`), detection_more.npz (feeds, `<case>/out<k>`, `<case>/d<arg>`; strings as
numpy bytes arrays), cases.json.
"""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from fixture_cases import CaseSet, fixture_dir, generate  # noqa: E402

OUT = fixture_dir("detection_more")
R = tf.raw_ops
RNG = np.random.default_rng(4747)
I32, I64, F16, F32, F64 = np.int32, np.int64, np.float16, np.float32, np.float64


class Cases(CaseSet):
    """The cases' graph pieces, arrays and index (tools/fixture_cases.py writes them)."""

    # EditDistance's out-of-buffer group is an Internal error, Dilation2D's batch stride an
    # Unimplemented one
    refusals = (tf.errors.InvalidArgumentError, tf.errors.InternalError,
                tf.errors.UnimplementedError, tf.errors.FailedPreconditionError)

    def add(self, name, op, args, attrs=None, error=None, grad=(), rtol=1e-6, atol=1e-6):
        """args: {input name: array}; grad: the args TensorFlow differentiates
        sum(out0 * w) by."""
        with tf.name_scope(name):
            phs = {k: tf.compat.v1.placeholder(
                tf.string if v.dtype.kind == "S" else tf.as_dtype(v.dtype),
                None if error else v.shape, name=k) for k, v in args.items()}
            result = getattr(R, op)(**phs, **(attrs or {}), name="op")
            outs = list(result) if isinstance(result, (list, tuple)) else [result]
            for k, o in enumerate(outs):
                self.fetches[f"{name}/out{k}"] = tf.identity(o, name=f"out{k}")
            self.arrays.update({f"{name}/{k}": v for k, v in args.items()})
            if grad:
                dtype = outs[0].dtype
                w = RNG.standard_normal(4000).astype(dtype.as_numpy_dtype)
                weights = tf.reshape(tf.constant(w)[:tf.size(outs[0])], tf.shape(outs[0]))
                loss = tf.reduce_sum(outs[0] * weights, name="loss")
                for arg, d in zip(grad, tf.gradients(loss, [phs[a] for a in grad])):
                    self.fetches[f"{name}/d{arg}"] = tf.identity(d, name=f"tf_d{arg}")
        self.index.append({"name": name, "op": op, "args": list(args), "outputs": len(outs),
                           "attrs": {k: v if isinstance(v, (int, float, list)) else str(v)
                                     for k, v in (attrs or {}).items()},
                           "grad": list(grad), "rtol": rtol, "atol": atol, "error": error})


def scalar(v, dtype):
    return np.array(v, dtype)


# --- CombinedNonMaxSuppression ---------------------------------------------------------------
def clustered_boxes(batch, anchors, q, spread=0.08):
    """Boxes around a few centres (so that NMS suppresses), corners in either order."""
    centres = RNG.uniform(0.15, 0.85, (batch, 3, 2))
    pick = RNG.integers(0, 3, (batch, anchors))
    c = np.take_along_axis(centres, pick[..., None], axis=1)[:, :, None, :]
    c = c + RNG.normal(0, spread, (batch, anchors, q, 2))
    hw = RNG.uniform(0.1, 0.3, (batch, anchors, q, 2))
    boxes = np.concatenate([c - hw / 2, c + hw / 2], axis=-1)[..., [0, 1, 2, 3]]
    flip = RNG.random((batch, anchors, q)) < 0.2  # (y2, x2, y1, x1): TF takes either order
    boxes[flip] = boxes[flip][:, [2, 3, 0, 1]]
    return boxes.astype(F32)


def cnms(c, name, boxes, scores, per_class, total, iou=0.5, score=0.1, error=None, **attrs):
    c.add(name, "CombinedNonMaxSuppression",
          {"boxes": boxes, "scores": scores, "max_output_size_per_class": scalar(per_class, I32),
           "max_total_size": scalar(total, I32), "iou_threshold": scalar(iou, F32),
           "score_threshold": scalar(score, F32)}, attrs, error=error)


def combined_nms_cases(c):
    b, s = clustered_boxes(2, 12, 1), RNG.random((2, 12, 3)).astype(F32)
    cnms(c, "Cnms_basic", b, s, 4, 6)
    cnms(c, "Cnms_no_clip", b * 1.6 - 0.3, s, 4, 6, clip_boxes=False)
    cnms(c, "Cnms_clip", b * 1.6 - 0.3, s, 4, 6)
    cnms(c, "Cnms_pad_per_class", b, s, 2, 10, pad_per_class=True)
    cnms(c, "Cnms_pad_per_class_small_total", b, s, 3, 4, pad_per_class=True)
    cnms(c, "Cnms_per_class_over_anchors", b, s, 40, 50, iou=0.3, score=0.0)
    cnms(c, "Cnms_nothing_scores", b, s, 4, 5, score=0.999)
    cnms(c, "Cnms_iou_one", b, s, 12, 36, iou=1.0, score=0.0)
    bq, sq = clustered_boxes(3, 9, 4), RNG.random((3, 9, 4)).astype(F32)
    cnms(c, "Cnms_q_per_class", bq, sq, 3, 7, iou=0.4, score=0.2)
    cnms(c, "Cnms_q_pad", bq, sq, 2, 100, iou=0.4, score=0.2, pad_per_class=True)
    cnms(c, "Cnms_zero_anchors", np.zeros((2, 0, 1, 4), F32), np.zeros((2, 0, 3), F32), 3, 4)
    cnms(c, "Cnms_one_class", b[:1], s[:1, :, :1], 5, 3, iou=0.6, score=0.05)
    # negative scores: the unused per-class slots (score -1) sort among them
    cnms(c, "Cnms_negative_scores", b[:1], -RNG.random((1, 12, 2)).astype(F32) * 3, 3, 6,
         score=-np.inf)
    # refusals
    cnms(c, "CnmsErr_total_zero", b, s, 4, 0, error="max_total_size must be > 0")
    cnms(c, "CnmsErr_per_class_zero", b, s, 0, 4, error="max_size_per_class must be positive")
    cnms(c, "CnmsErr_iou", b, s, 4, 4, iou=1.5, error="iou_threshold must be in [0, 1]")
    cnms(c, "CnmsErr_columns", b[..., :3], s, 4, 4, error="boxes must have 4 columns")
    cnms(c, "CnmsErr_q", clustered_boxes(2, 12, 2), s, 4, 4,
         error="third dimension of boxes must be either 1 or num classes")
    cnms(c, "CnmsErr_anchors", b, s[:, :5], 4, 4, error="scores has incompatible shape")
    cnms(c, "CnmsErr_batch", b, s[:1], 4, 4, error="boxes and scores must have same batch size")
    cnms(c, "CnmsErr_boxes_rank", b[:, :, 0], s, 4, 4, error="boxes must be 4-D")
    c.add("CnmsErr_total_vector", "CombinedNonMaxSuppression",
          {"boxes": b, "scores": s, "max_output_size_per_class": scalar(3, I32),
           "max_total_size": np.array([4], I32), "iou_threshold": scalar(0.5, F32),
           "score_threshold": scalar(0.1, F32)}, error="max_total_size must be 0-D, got shape")


# --- EditDistance ----------------------------------------------------------------------------
def sparse_of(dense, lengths, dtype):
    """Row-major SparseTensor pieces of the sequences dense[..., :length]."""
    idx, vals = [], []
    for pos in np.ndindex(*lengths.shape):
        for k in range(lengths[pos]):
            idx.append(list(pos) + [k])
            vals.append(dense[pos + (k,)])
    rank = lengths.ndim + 1
    return (np.array(idx, I64).reshape(-1, rank), np.array(vals).astype(dtype),
            np.array(list(lengths.shape) + [dense.shape[-1]], I64))


def edit(c, name, hyp, truth, error=None, **attrs):
    args = dict(zip(("hypothesis_indices", "hypothesis_values", "hypothesis_shape"), hyp))
    args.update(zip(("truth_indices", "truth_values", "truth_shape"), truth))
    c.add(name, "EditDistance", args, attrs, error=error)


def edit_distance_cases(c):
    tokens = RNG.integers(0, 4, (3, 4, 7))
    hl, tl = RNG.integers(0, 8, (3, 4)), RNG.integers(0, 8, (3, 4))
    hl[0, 0], tl[0, 0] = 3, 0  # an empty truth: inf normalised
    hl[0, 1], tl[0, 1] = 0, 0  # both empty: 0
    hl[1, 2], tl[1, 2] = 0, 5  # an empty hypothesis: 1 normalised
    h3 = sparse_of(tokens, hl, I64)
    t3 = sparse_of(RNG.integers(0, 4, (3, 4, 7)), tl, I64)
    for norm in (True, False):
        edit(c, f"Ed_3d_norm{int(norm)}", h3, t3, normalize=norm)
    h2 = sparse_of(tokens[0], hl[0], I32)
    t2 = sparse_of(tokens[1], tl[1], I32)
    edit(c, "Ed_2d", h2, t2)
    # hypothesis [4, 7] vs truth [2, 9]: the output is their elementwise max [4]
    t_small = sparse_of(tokens[2, :2, :], np.array([7, 2]), I32)
    t_small = (t_small[0], t_small[1], np.array([2, 9], I64))
    edit(c, "Ed_shapes_differ", h2, t_small, normalize=False)
    words = np.array([b"the", b"cat", b"sat", b"on", b"a", b"mat", b""], dtype="S")
    ws = words[RNG.integers(0, 7, (2, 5))]
    edit(c, "Ed_strings", sparse_of(ws, np.array([5, 3]), "S"),
         sparse_of(words[RNG.integers(0, 7, (2, 5))], np.array([4, 5]), "S"))
    f = RNG.integers(0, 3, (2, 6)).astype(F32) / 2
    edit(c, "Ed_floats", sparse_of(f, np.array([6, 2]), F32),
         sparse_of(f[::-1], np.array([4, 6]), F32))
    edit(c, "Ed_all_empty", (np.zeros((0, 2), I64), np.zeros(0, I64), np.array([3, 0], I64)),
         (np.zeros((0, 2), I64), np.zeros(0, I64), np.array([2, 0], I64)))
    # refusals
    edit(c, "EdErr_rank_mismatch", h3, (t2[0], t2[1].astype(I64), t2[2]),
         error="Expected truth and hypothesis to have matching ranks")
    edit(c, "EdErr_values", (h2[0], h2[1][:-1], h2[2]), t2,
         error="Expected hypothesis_values.NumElements == #rows(hypothesis_indices)")
    edit(c, "EdErr_hshape", (h2[0], h2[1], h2[2][:1]), t2,
         error="Expected hypothesis_shape.NumElements == #cols(hypothesis_indices)")
    edit(c, "EdErr_rank1", (h2[0][:, :1], h2[1], h2[2][:1]), (t2[0][:, :1], t2[1], t2[2][:1]),
         error="Input SparseTensors must have rank at least 2")
    edit(c, "EdErr_indices_rank", (h2[0][:, 0], h2[1], h2[2]), t2,
         error="hypothesis_indices should be a matrix")
    edit(c, "EdErr_empty_output", (np.zeros((0, 2), I64), np.zeros(0, I64), np.array([0, 3], I64)),
         (np.zeros((0, 2), I64), np.zeros(0, I64), np.array([0, 2], I64)),
         error="Got output shape [0] which has 0 elements")
    bad = h2[0].copy()
    bad[-1, 0] = 9
    edit(c, "EdErr_outside", (bad, h2[1], h2[2]), t2, error="which would require writing to "
                                                             "outside of the buffer")
    edit(c, "EdErr_negative_shape", (h2[0], h2[1], np.array([4, -7], I64)), t2,
         error="must be >= 0")


# --- UnravelIndex, NthElement ----------------------------------------------------------------
def unravel(c, name, indices, dims, error=None):
    c.add(name, "UnravelIndex", {"indices": indices, "dims": dims}, error=error)


def index_cases(c):
    unravel(c, "Unravel_vector", np.array([0, 5, 11, 23, 7], I32), np.array([2, 3, 4], I32))
    unravel(c, "Unravel_scalar", np.array(1621, I64), np.array([6, 7, 8, 9], I64))
    unravel(c, "Unravel_one_dim", np.array([3, 0], I32), np.array([5], I32))
    unravel(c, "UnravelErr_empty", np.zeros(0, I64), np.array([3, 3], I64),
            error="received empty tensor indices")
    unravel(c, "Unravel_negative", np.array([-1, -7], I32), np.array([3, 4], I32))
    unravel(c, "UnravelErr_zero", np.array([1], I32), np.array([3, 0], I32),
            error="Input dims cannot contain a dim of zero, but dims contains zero at index 1")
    unravel(c, "UnravelErr_negative_dim", np.array([1], I32), np.array([-3, 2], I32),
            error="Input dims cannot be negative. Got dim = -3 at index 0")
    unravel(c, "UnravelErr_bound", np.array([1, 12], I32), np.array([3, 4], I32),
            error="index is out of bound as with dims")
    unravel(c, "UnravelErr_overflow", np.array([1], I32), np.array([70000, 70000], I32),
            error="Input dims product is causing integer overflow")
    unravel(c, "UnravelErr_indices_rank", np.zeros((2, 2), I32), np.array([3, 4], I32),
            error="The indices can only be scalar or vector")
    unravel(c, "UnravelErr_dims_rank", np.array([1], I32), np.array(3, I32),
            error="The indices can only be 1-D")


def nth(c, name, x, n, error=None, grad=(), **attrs):
    c.add(name, "NthElement", {"input": x, "n": scalar(n, I32)}, attrs, error=error, grad=grad)


def nth_element_cases(c):
    x = RNG.standard_normal((3, 4, 6)).astype(F32)
    x[0, 0, :3] = x[0, 0, 3]  # ties: the gradient splits among equal values
    for n in (0, 2, 5):
        for rev in (False, True):
            nth(c, f"Nth_f32_n{n}_rev{int(rev)}", x, n, reverse=rev,
                grad=("input",) if n == 2 or (n == 0 and rev) else ())
    nth(c, "Nth_f64_vector", RNG.standard_normal(9), 4, grad=("input",))
    nth(c, "Nth_half", RNG.standard_normal((2, 5)).astype(F16), 1, reverse=True)
    nth(c, "Nth_int32", RNG.integers(-9, 9, (4, 7)).astype(I32), 3)
    nth(c, "Nth_uint8", RNG.integers(0, 255, (2, 3, 5)).astype(np.uint8), 4)
    nth(c, "Nth_int64", RNG.integers(-2 ** 40, 2 ** 40, (5,)).astype(I64), 0, reverse=True)
    nth(c, "Nth_empty_rows", np.zeros((0, 4), F32), 3)
    nth(c, "NthErr_n_negative", x, -1, error="n must be non-negative but is -1")
    nth(c, "NthErr_n_too_big", x, 6, error="Input must have last dimension > n = 6")
    nth(c, "NthErr_scalar_input", np.array(1.0, F32), 0,
        error="Input must be at least rank 1 but is rank 0")
    c.add("NthErr_n_vector", "NthElement", {"input": x, "n": np.array([1], I32)},
          error="N must be scalar but has rank 1")


# --- Dilation2D ------------------------------------------------------------------------------
def dilation(c, name, x, f, strides, rates, padding, error=None, grad=()):
    c.add(name, "Dilation2D", {"input": x, "filter": f},
          {"strides": strides, "rates": rates, "padding": padding}, error=error, grad=grad,
          rtol=1e-5 if x.dtype == F16 else 1e-6)


def dilation_cases(c):
    x = RNG.standard_normal((2, 7, 8, 3)).astype(F32)
    f = RNG.standard_normal((3, 2, 3)).astype(F32)
    for pad in ("VALID", "SAME"):
        dilation(c, f"Dil_{pad}", x, f, [1, 1, 1, 1], [1, 1, 1, 1], pad,
                 grad=("input", "filter"))
        dilation(c, f"Dil_{pad}_strided", x, f, [1, 2, 3, 1], [1, 1, 1, 1], pad,
                 grad=("input", "filter"))
        dilation(c, f"Dil_{pad}_rates", x, f, [1, 1, 2, 1], [1, 2, 3, 1], pad,
                 grad=("input", "filter"))
    dilation(c, "Dil_f64", RNG.standard_normal((1, 5, 5, 2)), RNG.standard_normal((2, 2, 2)),
             [1, 2, 2, 1], [1, 1, 1, 1], "SAME", grad=("input", "filter"))
    dilation(c, "Dil_half", x[:1].astype(F16), f.astype(F16), [1, 1, 1, 1], [1, 1, 1, 1],
             "SAME")
    dilation(c, "Dil_int32", RNG.integers(-20, 20, (1, 6, 5, 2)).astype(I32),
             RNG.integers(-3, 3, (2, 3, 2)).astype(I32), [1, 1, 1, 1], [1, 2, 1, 1], "VALID")
    dilation(c, "Dil_uint8_ties", RNG.integers(0, 3, (1, 5, 5, 1)).astype(np.uint8),
             np.zeros((3, 3, 1), np.uint8), [1, 1, 1, 1], [1, 1, 1, 1], "SAME")
    ties = np.zeros((1, 4, 5, 1), F32)
    ties[0, 1:3, 1:4, 0] = 1.0
    dilation(c, "Dil_ties_grad", ties, np.zeros((2, 2, 1), F32), [1, 1, 1, 1], [1, 1, 1, 1],
             "SAME", grad=("input", "filter"))
    # the two backprops directly, on integers
    xi = RNG.integers(-5, 5, (1, 5, 6, 2)).astype(I32)
    fi = RNG.integers(-2, 2, (2, 3, 2)).astype(I32)
    gi = RNG.integers(-3, 4, (1, 3, 2, 2)).astype(I32)
    for op in ("Dilation2DBackpropInput", "Dilation2DBackpropFilter"):
        c.add(f"{op}_int32", op, {"input": xi, "filter": fi, "out_backprop": gi},
              {"strides": [1, 2, 3, 1], "rates": [1, 1, 1, 1], "padding": "SAME"})
        c.add(f"{op}Err_size", op, {"input": xi, "filter": fi, "out_backprop": gi[:, :2]},
              {"strides": [1, 2, 3, 1], "rates": [1, 1, 1, 1], "padding": "SAME"},
              error="out_backprop has incompatible size")
    dilation(c, "DilErr_input_rank", x[0], f, [1, 1, 1, 1], [1, 1, 1, 1], "SAME",
             error="input must be 4-dimensional")
    dilation(c, "DilErr_filter_rank", x, f[..., 0], [1, 1, 1, 1], [1, 1, 1, 1], "SAME",
             error="filter must be 3-dimensional")
    dilation(c, "DilErr_depth", x, f[..., :2], [1, 1, 1, 1], [1, 1, 1, 1], "SAME",
             error="input and filter must have the same depth: 3 vs 2")
    dilation(c, "DilErr_negative", x[:, :2], f, [1, 1, 1, 1], [1, 2, 1, 1], "VALID",
             error="Computed output size would be negative")
    dilation(c, "DilErr_batch_stride", x, f, [2, 1, 1, 1], [1, 1, 1, 1], "SAME",
             error="Stride is only supported across spatial dimensions.")
    dilation(c, "DilErr_depth_rate", x, f, [1, 1, 1, 1], [1, 1, 1, 2], "SAME",
             error="Rate is only supported across spatial dimensions.")


# --- SampleDistortedBoundingBoxV2 (its deterministic fallback), DrawBoundingBoxes ------------
def sample(c, name, size, boxes, covered, error=None, **attrs):
    c.add(name, "SampleDistortedBoundingBoxV2",
          {"image_size": size, "bounding_boxes": boxes,
           "min_object_covered": scalar(covered, F32)}, dict({"seed": 3, "seed2": 4}, **attrs),
          error=error)


def sample_cases(c):
    whole = np.array([[[0, 0, 1, 1]]], F32)
    size = np.array([40, 60, 3], I32)
    # no crop of at most 10% of the image covers all of the one box: the whole image
    sample(c, "Sdbb_fallback", size, whole, 1.0, area_range=[0.05, 0.1])
    sample(c, "Sdbb_fallback_uint8", np.array([9, 7, 1], np.uint8), whole, 0.9,
           area_range=[0.05, 0.2], max_attempts=3)
    sample(c, "SdbbErr_coords", size, np.array([[[0, 0, 1.5, 1]]], F32), 0.1,
           error="All bounding box coordinates must be in [0.0, 1.0]: 1.5")
    sample(c, "SdbbErr_no_boxes", size, np.zeros((1, 0, 4), F32), 0.1,
           error="No bounding boxes provided as input")
    sample(c, "SdbbErr_image_size", np.array([4, 5], I32), whole, 0.1,
           error="image_size must contain 3 elements")
    sample(c, "SdbbErr_covered", size, whole, -0.5,
           error="Min object covered must be non-negative: -0.5")
    sample(c, "SdbbErr_boxes_rank", size, whole[0], 0.1,
           error="input boxes must be 3-dimensional [batch, num_boxes, coords]")
    sample(c, "SdbbErr_area", size, whole, 0.1, area_range=[0.5, 1.5],
           error="Area range must be less then or equal to 1.0")
    sample(c, "SdbbErr_aspect", size, whole, 0.1, aspect_ratio_range=[-1.0, 2.0],
           error="Aspect ratio range must be non-negative")
    sample(c, "SdbbErr_attempts", size, whole, 0.1, max_attempts=0,
           error="Max attempts must be non-negative: 0")


def draw(c, name, images, boxes, colors=None, error=None):
    args = {"images": images, "boxes": boxes}
    op = "DrawBoundingBoxes"
    if colors is not None:
        args["colors"], op = colors, "DrawBoundingBoxesV2"
    c.add(name, op, args, error=error)


def draw_cases(c):
    boxes = np.array([[[0.1, 0.2, 0.6, 0.9], [-0.3, 0.5, 0.5, 1.4], [0.7, 0.7, 0.2, 0.9],
                       [1.2, 0.0, 1.5, 0.5], [0.0, 0.0, 1.0, 1.0], [0.45, 0.45, 0.46, 0.47]] +
                      [[0.05 * k, 0.04 * k, 0.1 + 0.07 * k, 0.2 + 0.06 * k]
                       for k in range(7)]], F32)
    for depth in (1, 3, 4):
        img = RNG.random((1, 11, 13, depth)).astype(F32)
        draw(c, f"Draw_depth{depth}", img, boxes)
    img = RNG.random((2, 9, 10, 3)).astype(F32)
    two = np.concatenate([boxes[:, :5], boxes[:, 5:10]])
    draw(c, "Draw_half", img.astype(F16), two)
    colors = RNG.random((3, 4)).astype(F32)
    draw(c, "DrawV2_colors", img, two, colors)
    draw(c, "DrawV2_colors3", img, two, colors[:, :3])
    draw(c, "DrawV2_no_colors", img, two, np.zeros((0, 4), F32))
    draw(c, "DrawV2_gray", img[..., :1], two, colors[:2])
    draw(c, "DrawErr_depth", img[..., :2], two, error="Channel depth should be either 1 (GRY), "
                                                      "3 (RGB), or 4 (RGBA)")
    draw(c, "DrawErr_batch", img, boxes, error="The batch sizes should be the same")
    draw(c, "DrawErr_box_size", img, two[..., :3],
         error="The size of the third dimension of the box must be 4. Received: 3")
    draw(c, "DrawErr_boxes_rank", img, two[0], error="The rank of the boxes tensor should be 3")
    draw(c, "DrawV2Err_colors_rank", img, two, colors[0], error="colors must be a 2-D matrix")
    draw(c, "DrawV2Err_colors_depth", img, two, colors[:, :2],
         error="colors must have equal or more channels than the image provided")


if __name__ == "__main__":
    generate(Cases(), [combined_nms_cases, edit_distance_cases, index_cases, nth_element_cases,
                       dilation_cases, sample_cases, draw_cases], OUT, "detection_more")
