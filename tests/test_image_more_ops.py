"""The detection and colour image kernels against TensorFlow (tests/fixtures/image_more/ops.npz,
made by tools/gen_image_more_fixtures.py): non-max suppression V1-V5 (ties, thresholds,
padding, soft-NMS, half), CropAndResize and its gradient ops, RGB/HSV, AdjustContrastv2,
AdjustSaturation, AdjustHue and ResizeArea; the gradients of CropAndResize and RGBToHSV
through tfg's gradient pass against tf.gradients; shape inference, the memory guard, the
errors, and the CLI."""
import subprocess
import sys

import numpy as np
import pytest

from conftest import FIXTURES
from tfg import builder as tb
from tfg.errors import TfgError
from tfg.graphdef.builder.core import make
from tfg.executor.session import Session
from tfg.graphdef.graph import Graph
from tfg.passes.grad import grad
from tfg.schemas.dtypes import DType

DIR = FIXTURES / "image_more"
FIX = np.load(DIR / "ops.npz")
CASES = sorted({k.split("/")[0] for k in FIX.files if not k.startswith("grad-")})
GRADS = sorted({k.split("/")[0] for k in FIX.files if k.startswith("grad-")})


def _dt(v):
    return DType.from_numpy(np.asarray(v).dtype)


def _attrs(case, op, inputs):
    attrs = {}
    for k in FIX.files:
        if k.startswith(f"{case}/attr:"):
            v = FIX[k]
            name = k.split(":", 1)[1]
            attrs[name] = DType.parse(str(v)) if name == "T" else v.item()
    if op.startswith("NonMaxSuppression") and op != "NonMaxSuppression":
        attrs.setdefault("T", _dt(inputs[0]))
        if op != "NonMaxSuppressionV5":
            attrs.setdefault("T_threshold", _dt(inputs[3]))
    elif op == "CropAndResizeGradBoxes":
        attrs.setdefault("T", _dt(inputs[1]))
    elif op != "NonMaxSuppression":
        attrs.setdefault("T", _dt(inputs[0]))
    return attrs


def run_op(op, inputs, attrs, n_out=1, **session):
    g = Graph()
    names = []
    for i, v in enumerate(inputs):
        v = np.asarray(v)
        g.add_node(f"in{i}", "Const", attrs={"dtype": _dt(v), "value": v})
        names.append(f"in{i}:0")
    g.add_node("op", op, names, attrs)
    return Session(g, **session).run([f"op:{k}" for k in range(n_out)], {})


def _case(case):
    op = str(FIX[f"{case}/op"])
    inputs = [FIX[f"{case}/in{i}"] for i in range(8) if f"{case}/in{i}" in FIX.files]
    wants = [FIX[f"{case}/out{i}"] for i in range(8) if f"{case}/out{i}" in FIX.files]
    return op, inputs, _attrs(case, op, inputs), wants


@pytest.mark.parametrize("case", CASES)
def test_values_match_tensorflow(case):
    op, inputs, attrs, wants = _case(case)
    gots = run_op(op, inputs, attrs, len(wants))
    for k, (got, want) in enumerate(zip(gots, wants)):
        got = np.asarray(got)
        assert got.dtype == want.dtype and got.shape == want.shape, (case, k, got.shape)
        if want.dtype.kind in "iub":
            np.testing.assert_array_equal(got, want, err_msg=case)
        else:
            tol = 1e-6 if want.dtype != np.float16 else 1e-3
            np.testing.assert_allclose(got, want, rtol=tol, atol=tol, err_msg=case)


def _crop_graph(key, x, boxes):
    """loss = sum(w * CropAndResize(x, boxes, ...)) as in the generator's grad cases."""
    _, _, method, size, _ = key.split("-")
    ch, cw = (int(v) for v in size.split("x"))
    g = Graph()
    g.add_node("x", "Placeholder", attrs={"dtype": _dt(x)})
    g.add_node("boxes", "Placeholder", attrs={"dtype": DType.FLOAT})
    for name, v in (("ind", np.array([0, 1, 1, 0, 1, 0], np.int32)),
                    ("size", np.int32([ch, cw]))):
        g.add_node(name, "Const", attrs={"dtype": DType.INT32, "value": v})
    g.add_node("y", "CropAndResize", ["x:0", "boxes:0", "ind:0", "size:0"],
               {"T": _dt(x), "method": method})
    return g, "y:0", DType.FLOAT


def _hsv_graph(key, x, _):
    g = Graph()
    g.add_node("x", "Placeholder", attrs={"dtype": _dt(x)})
    g.add_node("y", "RGBToHSV", ["x:0"], {"T": _dt(x)})
    return g, "y:0", _dt(x)


def _weighted_loss(g, y, w, dtype):
    g.add_node("w", "Const", attrs={"dtype": dtype, "value": w})
    g.add_node("wy", "Mul", [y, "w:0"], {"T": dtype})
    g.add_node("axes", "Const", attrs={"dtype": DType.INT32,
                                       "value": np.arange(w.ndim, dtype=np.int32)})
    g.add_node("loss", "Sum", ["wy:0", "axes:0"], {"T": dtype})
    return "loss:0"


@pytest.mark.parametrize("key", GRADS)
def test_gradients_match_tensorflow(key):
    x, w = FIX[f"{key}/x"], FIX[f"{key}/w"]
    has_boxes = f"{key}/boxes" in FIX.files
    make = _crop_graph if key.startswith("grad-crop") else _hsv_graph
    g, y, dtype = make(key, x, FIX[f"{key}/boxes"] if has_boxes else None)
    loss = _weighted_loss(g, y, w, dtype)
    feeds = {"x:0": x}
    if has_boxes:
        feeds["boxes:0"] = FIX[f"{key}/boxes"]
    xs = sorted(feeds)
    got = Session(grad(g, [loss], xs)).run([f"grad/{t.split(':')[0]}:0" for t in xs], feeds)
    for t, v in zip(xs, got):
        want = FIX[f"{key}/d{t.split(':')[0] if t != 'x:0' else 'x'}"]
        assert v.dtype == want.dtype and v.shape == want.shape, (key, t)
        np.testing.assert_allclose(v, want, rtol=1e-6, atol=1e-6, err_msg=f"{key}: d/d{t}")


def test_uint8_crops_give_box_gradients_only():
    """As TensorFlow: no image gradient for an integer image, the boxes' one still."""
    g = Graph()
    g.add_node("x", "Const", attrs={"dtype": DType.UINT8,
                                    "value": np.arange(2 * 5 * 4 * 1, dtype=np.uint8)
                                    .reshape(2, 5, 4, 1)})
    g.add_node("boxes", "Placeholder", attrs={"dtype": DType.FLOAT})
    g.add_node("ind", "Const", attrs={"dtype": DType.INT32, "value": np.int32([0, 1])})
    g.add_node("size", "Const", attrs={"dtype": DType.INT32, "value": np.int32([3, 2])})
    g.add_node("y", "CropAndResize", ["x:0", "boxes:0", "ind:0", "size:0"],
               {"T": DType.UINT8})
    loss = _weighted_loss(g, "y:0", np.ones((2, 3, 2, 1), np.float32), DType.FLOAT)
    boxes = np.float32([[0.1, 0.2, 0.7, 0.9], [0.3, 0.05, 0.9, 0.5]])  # no sample on a pixel
    d = Session(grad(g, [loss], ["boxes:0"])).run(["grad/boxes:0"], {"boxes:0": boxes})[0]
    # the image rises by 4 per row and 1 per column: d(sum)/d(y1) = 6 * 4 * (H - 1) * (1 - t)
    np.testing.assert_allclose(d[:, 0] + d[:, 2], 6 * 4 * 4, rtol=1e-6)
    np.testing.assert_allclose(d[:, 1] + d[:, 3], 6 * 3, rtol=1e-6)


@pytest.mark.parametrize("op", ["AdjustHue", "ResizeArea", "NonMaxSuppressionV5"])
def test_ops_tensorflow_cannot_differentiate_are_refused_by_name(op):
    g = Graph()
    g.add_node("x", "Placeholder", attrs={"dtype": DType.FLOAT})
    if op == "AdjustHue":
        g.add_node("d", "Const", attrs={"dtype": DType.FLOAT, "value": np.asarray(0.1, np.float32)})
        g.add_node("y", op, ["x:0", "d:0"], {"T": DType.FLOAT})
        out = "y:0"
    elif op == "ResizeArea":
        g.add_node("s", "Const", attrs={"dtype": DType.INT32, "value": np.int32([2, 2])})
        g.add_node("y", op, ["x:0", "s:0"], {"T": DType.FLOAT})
        out = "y:0"
    else:
        g.add_node("boxes", "Const", attrs={"dtype": DType.FLOAT,
                                            "value": np.float32([[0, 0, 1, 1]] * 2)})
        for name, v in (("n", np.int32(2)), ("iou", np.float32(0.5)), ("st", np.float32(0)),
                        ("sigma", np.float32(0.5))):
            g.add_node(name, "Const", attrs={"dtype": _dt(v), "value": np.asarray(v)})
        g.add_node("y", op, ["boxes:0", "x:0", "n:0", "iou:0", "st:0", "sigma:0"],
                   {"T": DType.FLOAT})
        out = "y:1"
    g.add_node("loss", "Sum", [out, "axes:0"], {"T": DType.FLOAT})
    g.add_node("axes", "Const", attrs={"dtype": DType.INT32, "value": np.int32([0])})
    with pytest.raises(TfgError, match=f"no gradient defined for op '{op}'"):
        grad(g, ["loss:0"], ["x:0"])


def test_shape_inference():
    def shape_of(t, k=0):
        return tuple(t.outputs[k].get_shape())

    with tb.Graph():
        img = tb.placeholder(tb.float32, (2, 6, 7, 3), name="img")
        boxes = tb.placeholder(tb.float32, (5, 4), name="boxes")
        ind = tb.placeholder(tb.int32, (5,), name="ind")
        crops = make("CropAndResize", [img, boxes, ind, tb.constant(np.int32([9, 4]))], {},
                     name="crops")
        assert shape_of(crops) == (5, 9, 4, 3)
        scores = tb.placeholder(tb.float32, (5,), name="scores")
        c = [tb.constant(np.int32(7))] + [tb.constant(np.float32(v)) for v in (0.5, 0, 0.3)]
        for pad, want in ((True, (7,)), (False, (None,))):
            v4 = make("NonMaxSuppressionV4", [boxes, scores] + c[:3],
                      {"pad_to_max_output_size": pad}, name=f"v4{pad}")
            assert shape_of(v4) == want and shape_of(v4, 1) == ()
            v5 = make("NonMaxSuppressionV5", [boxes, scores] + c,
                      {"pad_to_max_output_size": pad}, name=f"v5{pad}")
            assert shape_of(v5) == want == shape_of(v5, 1) and shape_of(v5, 2) == ()
        hsv = make("RGBToHSV", [tb.placeholder(tb.float32, (4, None, 3), name="rgb")], {},
                   name="hsv")
        assert shape_of(hsv) == (4, None, 3)
        area = make("ResizeArea", [img, tb.constant(np.int32([3, 11]))], {}, name="area")
        assert shape_of(area) == (2, 3, 11, 3)
        gi = make("CropAndResizeGradImage", [crops, boxes, ind,
                                             tb.constant(np.int32([2, 6, 7, 3]))],
                  {"T": tb.float32}, name="gi")
        assert shape_of(gi) == (2, 6, 7, 3)
        with pytest.raises(TfgError, match="must have 3"):
            make("HSVToRGB", [tb.placeholder(tb.float32, (4, 2), name="bad")], {}, name="h2")
        with pytest.raises(TfgError, match="boxes"):
            make("NonMaxSuppressionV3", [tb.placeholder(tb.float32, (5, 3), name="b3"),
                                         scores] + c[:3], {}, name="nms_bad")


@pytest.mark.parametrize("op, inputs, attrs, says", [
    ("CropAndResize", [np.zeros((1, 4, 4, 1), np.float32), np.float32([[0, 0, 1, 1]]),
                       np.int32([0]), np.int32([100000, 100000])], {}, "would allocate"),
    ("CropAndResizeGradImage", [np.zeros((1, 2, 2, 1), np.float32), np.float32([[0, 0, 1, 1]]),
                                np.int32([0]), np.int32([1, 100000, 100000, 1])],
     {"T": DType.FLOAT}, "would allocate"),
    ("NonMaxSuppressionV4", [np.float32([[0, 0, 1, 1]]), np.float32([1]), np.int32(10 ** 9),
                             np.float32(0.5), np.float32(0)],
     {"pad_to_max_output_size": True}, "would allocate"),
    ("ResizeArea", [np.zeros((1, 4, 4, 1), np.float32), np.int32([100000, 100000])], {},
     "would allocate"),
])
def test_the_memory_guard_sizes_outputs_from_values(op, inputs, attrs, says):
    attrs = {"T": _dt(inputs[0]), **attrs}
    with pytest.raises(TfgError, match=says):
        run_op(op, inputs, attrs, max_memory="1M")


B1 = np.float32([[0, 0, 1, 1], [0, 0, 0.5, 0.5]])
S1 = np.float32([0.9, 0.8])
IMG = np.zeros((2, 4, 4, 3), np.float32)


@pytest.mark.parametrize("op, inputs, says", [
    ("CropAndResize", [IMG, B1, np.int32([0, 2]), np.int32([2, 2])],
     r"box_index has values outside \[0, batch_size\)"),
    ("CropAndResize", [IMG, B1, np.int32([0, -1]), np.int32([2, 2])], "box_index has values"),
    ("CropAndResize", [IMG, B1, np.int32([0, 1]), np.int32([0, 2])],
     "crop dimensions must be positive"),
    ("CropAndResize", [IMG, B1[:, :3], np.int32([0, 1]), np.int32([2, 2])],
     "boxes must have 4 columns"),
    ("CropAndResize", [IMG, B1, np.int32([0]), np.int32([2, 2])],
     "box_index has incompatible shape"),
    ("CropAndResizeGradImage", [np.ones((2, 2, 2, 3), np.float32), B1, np.int32([0, 5]),
                                np.int32([2, 4, 4, 3])], "box_index has values outside"),
    ("CropAndResizeGradImage", [np.ones((2, 2, 2, 3), np.float32), B1, np.int32([0, 1]),
                                np.int32([2, 4, 4, 2])], "image_size and grads are incompat"),
    ("CropAndResizeGradBoxes", [np.ones((2, 2, 2, 3), np.float32), IMG, B1,
                                np.int32([0, 7])], "box_index has values outside"),
    ("NonMaxSuppressionV2", [B1, S1, np.int32(3), np.float32(1.5)],
     r"iou_threshold must be in \[0, 1\]"),
    ("NonMaxSuppressionV3", [B1, S1, np.int32(-1), np.float32(0.5), np.float32(0)],
     "output size must be non-negative"),
    ("NonMaxSuppressionV3", [B1, S1[:1], np.int32(3), np.float32(0.5), np.float32(0)],
     "scores has incompatible shape"),
    ("NonMaxSuppressionV3", [B1, S1, np.int32([3]), np.float32(0.5), np.float32(0)],
     "max_output_size must be 0-D"),
    ("NonMaxSuppressionV5", [B1, S1, np.int32(3), np.float32(0.5), np.float32(0),
                             np.float32(-1)], "soft_nms_sigma_val must be >= 0"),
    ("RGBToHSV", [np.zeros((2, 4), np.float32)],
     "input must have 3 channels but input only has 4 channels"),
    ("AdjustHue", [np.zeros((2, 3), np.float32), np.float32(0.1)],
     r"input must be at least 3-D, got shape\[2,3\]"),
    ("AdjustSaturation", [np.zeros((2, 2, 4), np.float32), np.float32(0.1)],
     "input must have 3 channels but instead has 4"),
    ("AdjustContrastv2", [np.zeros((2, 2, 4), np.float32), np.float32([0.1, 2])],
     "contrast_factor must be scalar"),
    ("ResizeArea", [IMG, np.int32([0, 3])], "output dimensions must be positive"),
])
def test_bad_inputs_are_refused_as_tensorflow_does(op, inputs, says):
    attrs = {} if op == "NonMaxSuppression" else {"T": _dt(inputs[1 if "Boxes" in op else 0])}
    if op in ("NonMaxSuppressionV2", "NonMaxSuppressionV3"):
        attrs["T_threshold"] = DType.FLOAT
    if op == "CropAndResizeGradImage":
        attrs["T"] = DType.FLOAT
    with pytest.raises(TfgError, match=says):
        run_op(op, inputs, attrs)


def test_adjust_hue_and_saturation_in_half_compute_in_float32():
    """TensorFlow's CPU has only float32 kernels for these (its GPU takes half too): tfg
    computes a half image in float32 and rounds back."""
    x = FIX["hue-0.3/in0"]
    for op, arg in (("AdjustHue", np.float32(0.3)), ("AdjustSaturation", np.float32(0.6)),
                    ("AdjustContrastv2", np.float32(1.3))):
        half = run_op(op, [x.astype(np.float16), arg], {"T": DType.HALF})[0]
        full = run_op(op, [x.astype(np.float16).astype(np.float32), arg],
                      {"T": DType.FLOAT})[0]
        assert half.dtype == np.float16
        np.testing.assert_array_equal(half, full.astype(np.float16))


def test_a_huge_hue_delta_finishes():
    """TensorFlow's `while (h >= 6) h -= 6` would spin on a delta of 1e9 turns; tfg stops
    stepping after a few turns and takes the remainder."""
    x = FIX["hue-0.3/in0"]
    got = run_op("AdjustHue", [x, np.float32(1e9)], {"T": DType.FLOAT})[0]
    assert got.shape == x.shape and np.all(np.isfinite(got))
    same = run_op("AdjustHue", [x, np.float32(np.inf)], {"T": DType.FLOAT})[0]
    assert same.shape == x.shape


def test_nms_ties_go_to_the_lower_index_and_scores_must_exceed_the_threshold():
    boxes = np.float32([[0, 0, 1, 1]] * 3 + [[2, 2, 3, 3]])
    got = run_op("NonMaxSuppressionV3", [boxes, np.float32([.5, .7, .7, .4]), np.int32(10),
                                         np.float32(1.0), np.float32(0.4)],
                 {"T": DType.FLOAT, "T_threshold": DType.FLOAT})[0]
    np.testing.assert_array_equal(got, [1, 2, 0])  # 0.4 is not above 0.4


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "tfg", *map(str, args)], capture_output=True,
                          timeout=300)


def test_cli_end_to_end(tmp_path):
    out = tmp_path / "out.npz"
    p = _cli("run", DIR / "crop_and_resize.pb", "--feeds", DIR / "crop_and_resize_feeds.npz",
             "--fetch", "y", "-o", out)
    assert p.returncode == 0, p.stderr.decode()
    want = np.load(DIR / "crop_and_resize_y.npz")["y"]
    np.testing.assert_allclose(np.load(out)["y"], want, rtol=1e-6, atol=1e-6)
    feeds = dict(np.load(DIR / "crop_and_resize_feeds.npz"))
    feeds["box_ind"] = np.int32([0, 1, 2])
    bad = tmp_path / "bad.npz"
    np.savez(bad, **feeds)
    p = _cli("run", DIR / "crop_and_resize.pb", "--feeds", bad, "--fetch", "y", "-o", out)
    err = p.stderr.decode()  # a kernel's refusal: exit 1, one line
    assert p.returncode == 1, err
    assert len(err.strip().splitlines()) == 1 and "box_index has values outside" in err, err
    feeds["boxes"] = feeds["boxes"][:, :3]  # a feed of the wrong shape: bad input, exit 2
    np.savez(bad, **feeds)
    p = _cli("run", DIR / "crop_and_resize.pb", "--feeds", bad, "--fetch", "y", "-o", out)
    err = p.stderr.decode()
    assert p.returncode == 2, err
    assert len(err.strip().splitlines()) == 1 and "boxes" in err, err
