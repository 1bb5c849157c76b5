"""The detection, morphology and index ops (CombinedNonMaxSuppression, EditDistance,
UnravelIndex, NthElement, Dilation2D and its backprops, DrawBoundingBoxes/V2) against
TensorFlow (tests/fixtures/detection_more, made by tools/gen_detection_more_fixtures.py):
values, TensorFlow's refusals, gradients (tfg's and TensorFlow's own gradient graphs), shape
inference and the memory guard; the random ops (RandomShuffle, SampleDistortedBoundingBoxV2)
by their contract; and the CLI."""
import re

import numpy as np
import pytest

from helpers import tfg_cli
from op_cases import OpCases, case_ids, check, grad_ids, one_op_graph
from tfg.errors import TfgError
from tfg.executor.session import Session
from tfg.graphdef.graph import Graph
from tfg.graphdef.infer import infer
from tfg.kernels.morphology_ops import levenshtein
from tfg.passes.grad import grad
from tfg.passes.grad.registry import get_gradient
from tfg.schemas.dtypes import DType

OPS = OpCases("detection_more")
DIR, ARRAYS, GRAPH = OPS.dir, OPS.arrays, OPS.graph
RUNS, ERRORS, GRADS = OPS.runs, OPS.errors, OPS.grads
F32, F64, I32, I64 = DType.FLOAT, DType.DOUBLE, DType.INT32, DType.INT64
FIXTURE_OPS = ("CombinedNonMaxSuppression", "EditDistance", "UnravelIndex", "NthElement",
               "Dilation2D", "Dilation2DBackpropInput", "Dilation2DBackpropFilter",
               "SampleDistortedBoundingBoxV2", "DrawBoundingBoxes", "DrawBoundingBoxesV2")


@pytest.fixture(scope="module")
def session():
    return Session(GRAPH)


def test_fixtures_cover_every_op_and_its_errors():
    assert {c["op"] for c in RUNS} == set(FIXTURE_OPS)
    assert {c["op"] for c in ERRORS} == set(FIXTURE_OPS)
    assert len(ERRORS) >= 50 and len(GRADS) >= 15


@pytest.mark.parametrize("case", RUNS, ids=case_ids(RUNS))
def test_values_match_tensorflow(session, case):
    name = case["name"]
    outs = [f"{name}/out{k}:0" for k in range(case["outputs"])]
    for k, got in enumerate(session.run(outs, OPS.feeds(case))):
        check(got, ARRAYS[f"{name}/out{k}"], case, f"{name} out{k}")


@pytest.mark.parametrize("case", ERRORS, ids=case_ids(ERRORS))
def test_errors_match_tensorflow(session, case):
    # TensorFlow's kernel refused these feeds with case["error"]; tfg's must too
    with pytest.raises(TfgError, match=re.escape(case["error"])):
        session.run([f"{case['name']}/out0:0"], OPS.feeds(case))


@pytest.mark.parametrize("case,arg", GRADS, ids=grad_ids(GRADS))
def test_tfg_gradient_matches_tensorflow(case, arg):
    OPS.check_tfg_gradient(case, arg)


@pytest.mark.parametrize("case,arg", GRADS, ids=grad_ids(GRADS))
def test_tensorflow_gradient_graph_runs(session, case, arg):
    """TensorFlow's own gradient nodes (Dilation2DBackpropInput/Filter, NthElement's
    Equal/Sum/RealDiv) run in tfg."""
    OPS.check_tf_gradient_graph(session, case, arg)


def test_levenshtein_distances():
    def seq(text):
        return np.frombuffer(text.encode(), np.uint8)

    assert levenshtein(seq("kitten"), seq("sitting")) == 3
    assert levenshtein(seq("flaw"), seq("lawn")) == 2
    assert levenshtein(seq(""), seq("abc")) == 3
    assert levenshtein(seq("abcdef"), seq("abcdef")) == 0
    assert levenshtein(seq("abc"), seq("cba")) == 2


# --- the random ops' contracts ----------------------------------------------------------------
def _random_graph(op, inputs, attrs):
    g = Graph()
    for i, (v, dt) in enumerate(inputs):
        g.add_node(f"in{i}", "Const", [], {"dtype": dt, "value": np.asarray(v, dt.np)})
    g.add_node("op", op, [f"in{i}:0" for i in range(len(inputs))], attrs)
    return g


def test_random_shuffle_permutes_rows_and_repeats_with_a_seed():
    x = np.arange(40, dtype=np.int32).reshape(20, 2)
    g = _random_graph("RandomShuffle", [(x, I32)], {"T": I32, "seed": 7, "seed2": 3})
    s = Session(g)
    first, second = (s.run(["op:0"], {})[0] for _ in range(2))
    for got in (first, second):
        assert got.shape == x.shape and got.dtype == x.dtype
        assert sorted(map(tuple, got)) == sorted(map(tuple, x))  # rows kept whole
    assert not np.array_equal(first, second)  # a new order each step
    again = Session(g).run(["op:0"], {})[0]
    np.testing.assert_array_equal(again, first)  # the same seeds: the same sequence
    # a scalar, one row, an empty tensor: unchanged
    for v in (np.int32(5), x[:1], x[:0]):
        g1 = _random_graph("RandomShuffle", [(v, I32)], {"T": I32})
        np.testing.assert_array_equal(Session(g1).run(["op:0"], {})[0], v)


_SDBB = {"T": I32, "seed": 5, "seed2": 9}


def _sample(size, boxes, covered, attrs, steps=60):
    g = _random_graph("SampleDistortedBoundingBoxV2",
                      [(size, I32), (boxes, F32), (covered, F32)], dict(_SDBB, **attrs))
    s = Session(g)
    return [s.run(["op:0", "op:1", "op:2"], {}) for _ in range(steps)]


def _area_of(box):
    return (box[2] - box[0]) * (box[3] - box[1])


def test_sample_distorted_bounding_box_contract():
    height, width = 120, 200
    obj = np.array([[[0.2, 0.3, 0.7, 0.6]]], np.float32)
    attrs = {"aspect_ratio_range": [0.5, 2.0], "area_range": [0.1, 0.6], "max_attempts": 200}
    results = _sample([height, width, 3], obj, 0.5, attrs)
    crops = set()
    for begin, size, bbox in results:
        assert begin.dtype == np.int32 and begin.shape == (3,) and bbox.shape == (1, 1, 4)
        y, x, _ = begin
        h, w, depth = size
        assert depth == -1 and begin[2] == 0
        assert 0 <= y and y + h <= height and 0 <= x and x + w <= width  # inside the image
        np.testing.assert_allclose(bbox[0, 0], [y / height, x / width, (y + h) / height,
                                                (x + w) / width], rtol=1e-6)
        if (h, w) == (height, width):
            continue  # the fallback (no sample satisfied the constraints)
        area = h * w / (height * width)
        assert 0.1 - 0.02 <= area <= 0.6  # the area range (rounding may add a row)
        ratio = w / h
        assert 0.5 - 0.05 <= ratio <= 2.0 + 0.05  # the aspect ratio range, to rounding
        # min_object_covered: half of the object's pixels lie in the crop
        oy0, ox0, oy1, ox1 = int(0.2 * height), int(0.3 * width), int(0.7 * height), \
            int(0.6 * width)
        inter = max(min(y + h, oy1) - max(y, oy0), 0) * max(min(x + w, ox1) - max(x, ox0), 0)
        assert inter / ((oy1 - oy0) * (ox1 - ox0)) >= 0.5
        crops.add((y, x, h, w))
    assert len(crops) > 20  # random crops, not one
    again = _sample([height, width, 3], obj, 0.5, attrs, steps=5)
    for a, b in zip(results, again):  # seeded: the same crops in a new session
        for u, v in zip(a, b):
            np.testing.assert_array_equal(u, v)


def test_sample_distorted_bounding_box_falls_back_to_the_whole_image():
    # no crop of at most 10% of the image holds all of an object covering it
    for begin, size, bbox in _sample([30, 50, 3], [[[0, 0, 1, 1]]], 1.0,
                                     {"area_range": [0.05, 0.1], "max_attempts": 5}, 3):
        assert begin.tolist() == [0, 0, 0] and size.tolist() == [30, 50, -1]
        assert bbox.tolist() == [[[0, 0, 1, 1]]]
    # no boxes at all, with use_image_if_no_bounding_boxes: the image is the object
    out = _sample([30, 50, 3], np.zeros((1, 0, 4)), 0.1,
                  {"use_image_if_no_bounding_boxes": True}, 20)
    assert all(s[0] * s[1] >= 10 for _, s, _ in out)


# --- shapes -----------------------------------------------------------------------------------
_CNMS = [((2, 100, 1, 4), F32), ((2, 100, 7), F32), (5, I32), (20, I32), (0.5, F32),
         (0.1, F32)]
_DIL = {"T": F32, "strides": [1, 2, 3, 1], "rates": [1, 2, 1, 1], "padding": "SAME"}


@pytest.mark.parametrize("op,inputs,attrs,shapes", [
    ("CombinedNonMaxSuppression", _CNMS, {}, [(2, 20, 4), (2, 20), (2, 20), (2,)]),
    ("CombinedNonMaxSuppression", _CNMS, {"pad_per_class": True},
     [(2, 20, 4), (2, 20), (2, 20), (2,)]),
    ("CombinedNonMaxSuppression", _CNMS[:2] + [(2, I32)] + _CNMS[3:],
     {"pad_per_class": True}, [(2, 14, 4), (2, 14), (2, 14), (2,)]),
    ("CombinedNonMaxSuppression", _CNMS[:3] + [((), I32)] + _CNMS[4:], {},
     [(2, None, 4), (2, None), (2, None), (2,)]),
    ("EditDistance", [((None, 3), I64), ((None,), I32), ([4, 2, 9], I64), ((None, 3), I64),
                      ((None,), I32), ([3, 5, 2], I64)], {"T": I32}, [(4, 5)]),
    ("EditDistance", [((None, 3), I64), ((None,), I32), ((3,), I64), ((None, 3), I64),
                      ((None,), I32), ((3,), I64)], {"T": I32}, [None]),
    ("UnravelIndex", [((7,), I32), ((3,), I32)], {"Tidx": I32}, [(3, 7)]),
    ("UnravelIndex", [((), I64), ((4,), I64)], {"Tidx": I64}, [(4,)]),
    ("NthElement", [((2, 3, 8), F32), (5, I32)], {"T": F32}, [(2, 3)]),
    ("Dilation2D", [((2, 7, 8, 3), F32), ((3, 2, 3), F32)], _DIL, [(2, 4, 3, 3)]),
    ("Dilation2D", [((2, 9, 8, 3), F32), ((3, 2, 3), F32)], dict(_DIL, padding="VALID"),
     [(2, 3, 3, 3)]),
    ("Dilation2D", [((2, None, 8, 3), F32), ((3, 2, 3), F32)], _DIL, [(2, None, None, 3)]),
    ("Dilation2DBackpropFilter", [((2, 7, 8, 3), F32), ((3, 2, 3), F32), ((2, 4, 3, 3), F32)],
     _DIL, [(3, 2, 3)]),
    ("DrawBoundingBoxesV2", [((2, 5, 6, 3), F32), ((2, 4, 4), F32), ((3, 4), F32)],
     {"T": F32}, [(2, 5, 6, 3)]),
    ("SampleDistortedBoundingBoxV2", [((3,), I32), ((1, None, 4), F32), ((), F32)],
     {"T": I32}, [(3,), (3,), (1, 1, 4)]),
    ("RandomShuffle", [((5, 2), F32)], {"T": F32}, [(5, 2)]),
])
def test_shapes_are_inferred(op, inputs, attrs, shapes):
    info = infer(one_op_graph(op, inputs, attrs))
    assert [info[("op", k)].shape for k in range(len(shapes))] == shapes


@pytest.mark.parametrize("op,inputs,attrs,words", [
    ("CombinedNonMaxSuppression", [((2, 100, 3, 4), F32)] + _CNMS[1:], {},
     "third dimension of boxes must be either 1 or equal"),
    ("CombinedNonMaxSuppression", _CNMS[:3] + [(0, I32)] + _CNMS[4:], {},
     "max_total_size should be > 0"),
    ("EditDistance", [((5, 3), I64), ((4,), I32), ((3,), I64), ((None, 3), I64),
                      ((None,), I32), ((3,), I64)], {"T": I32},
     "Number of elements in index \\(5\\) and values \\(4\\) do not match"),
    ("EditDistance", [((None, 3), I64), ((None,), I32), ([4, 2, 9], I64), ((None, 2), I64),
                      ((None,), I32), ([3, 5], I64)], {"T": I32},
     "Num elements of hypothesis_shape does not match truth_shape: 3 vs. 2"),
    ("NthElement", [((2, 3), F32), (3, I32)], {"T": F32},
     "Input must have last dimension > n = 3 but is 3"),
    ("Dilation2D", [((2, 1, 8, 3), F32), ((3, 2, 3), F32)], dict(_DIL, padding="VALID"),
     "Computed output size would be negative"),
    ("SampleDistortedBoundingBoxV2", [((2,), I32), ((1, None, 4), F32), ((), F32)],
     {"T": I32}, "image_size must have 3 elements"),
])
def test_shape_functions_refuse_what_tensorflow_refuses(op, inputs, attrs, words):
    with pytest.raises(TfgError, match=words):
        infer(one_op_graph(op, inputs, attrs), strict=True)


# --- the memory guard -------------------------------------------------------------------------
def _fed(op, dtypes, attrs):
    """The op on Placeholders in{i} (shape unknown): the guard sees only fed values."""
    g = Graph()
    for i, dt in enumerate(dtypes):
        g.add_node(f"in{i}", "Placeholder", [], {"dtype": dt})
    g.add_node("op", op, [f"in{i}:0" for i in range(len(dtypes))], attrs)
    return g


def test_memory_guard_sizes_combined_nms_from_max_total_size():
    g = _fed("CombinedNonMaxSuppression", [F32, F32, I32, I32, F32, F32], {})
    feeds = {"in0:0": np.zeros((8, 3, 1, 4), np.float32), "in1:0": np.ones((8, 3, 2),
                                                                             np.float32),
             "in2:0": np.int32(5), "in3:0": np.int32(2 ** 31 - 1), "in4:0": np.float32(0.5),
             "in5:0": np.float32(0.1)}
    # [8, 2**31 - 1, 4] float32 boxes: 256 GiB, refused before anything is allocated
    with pytest.raises(TfgError, match="would allocate 256.00 GiB"):
        Session(g, max_memory="1M").run(["op:0"], feeds)
    small = dict(feeds, **{"in3:0": np.int32(4)})
    got = Session(g, max_memory="1M").run(["op:0", "op:3"], small)
    assert got[0].shape == (8, 4, 4) and got[1].tolist() == [4] * 8  # zero-area boxes: no IoU
    # pad_per_class: min(max_total_size, per class * classes) = 10, whatever the total
    g = _fed("CombinedNonMaxSuppression", [F32, F32, I32, I32, F32, F32],
             {"pad_per_class": True})
    assert Session(g, max_memory="1M").run(["op:0"], feeds)[0].shape == (8, 10, 4)


def test_memory_guard_sizes_edit_distance_from_the_dense_shapes():
    g = _fed("EditDistance", [I64, I64, I64, I64, I64, I64], {"T": I64})
    empty = (np.zeros((0, 3), np.int64), np.zeros(0, np.int64))
    feeds = {"in0:0": empty[0], "in1:0": empty[1], "in2:0": np.int64([1000000, 1000000, 5]),
             "in3:0": empty[0], "in4:0": empty[1], "in5:0": np.int64([1, 1, 5])}
    with pytest.raises(TfgError, match="would allocate 3.64 TiB"):
        Session(g, max_memory="1M").run(["op:0"], feeds)
    feeds["in2:0"] = np.int64([3, 4, 5])
    assert Session(g, max_memory="1M").run(["op:0"], feeds)[0].shape == (3, 4)


# --- gradients --------------------------------------------------------------------------------
@pytest.mark.parametrize("op", ["EditDistance", "RandomShuffle", "DrawBoundingBoxes",
                                "SampleDistortedBoundingBoxV2"])
def test_tensorflow_not_differentiable_ops_have_none(op):
    assert get_gradient(op).fn is None


def test_dilation_gradient_matches_finite_differences():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 5, 6, 2))
    f = rng.standard_normal((2, 3, 2))
    w = rng.standard_normal((1, 3, 2, 2))
    attrs = {"T": F64, "strides": [1, 2, 3, 1], "rates": [1, 1, 2, 1], "padding": "SAME"}
    g = one_op_graph("Dilation2D", [((1, 5, 6, 2), F64), ((2, 3, 2), F64)], attrs)
    g.add_node("w", "Const", [], {"dtype": F64, "value": w})
    g.add_node("m", "Mul", ["op:0", "w:0"], {"T": F64})
    g.add_node("ax", "Const", [], {"dtype": I32, "value": np.int32([0, 1, 2, 3])})
    g.add_node("loss", "Sum", ["m:0", "ax:0"], {"T": F64, "Tidx": I32})
    g2 = grad(g, ["loss"], ["in0", "in1"])
    s = Session(g2)
    dx, df = s.run(["grad/in0:0", "grad/in1:0"], {"in0:0": x, "in1:0": f})

    def loss(xv, fv):
        return s.run(["loss:0"], {"in0:0": xv, "in1:0": fv})[0]

    eps = 1e-6
    for arr, d, is_x in ((x, dx, True), (f, df, False)):
        for idx in list(np.ndindex(arr.shape))[::5]:
            e = np.zeros_like(arr)
            e[idx] = eps
            args = (x + e, f) if is_x else (x, f + e)
            args_m = (x - e, f) if is_x else (x, f - e)
            fd = (loss(*args) - loss(*args_m)) / (2 * eps)
            assert abs(fd - d[idx]) < 1e-5, idx


# --- the CLI ----------------------------------------------------------------------------------
def test_cli_runs_combined_nms_and_reports_bad_inputs(tmp_path):
    name = "Cnms_basic"
    feeds, out = tmp_path / "f.npz", tmp_path / "out.npz"
    case = OPS.feeds_file(feeds, name)
    tfg_cli("run", DIR / "detection_more.pb", "--feeds", feeds, "--fetch", f"{name}/out0",
            "-o", out)
    got = np.load(out)
    check(got[got.files[0]], ARRAYS[f"{name}/out0"], case, "cli out0")

    # a kernel refusing its values (iou_threshold out of range): exit 1, one stderr line
    bad = tmp_path / "bad.npz"
    OPS.feeds_file(bad, name, {f"{name}/iou_threshold": np.float32(1.5)})
    p = tfg_cli("run", DIR / "detection_more.pb", "--feeds", bad, "--fetch", f"{name}/out0",
                check=False)
    lines = p.stderr.decode().strip().splitlines()
    assert p.returncode == 1 and len(lines) == 1
    assert "iou_threshold must be in [0, 1]" in lines[0]

    # a bad feed, boxes of the wrong rank for their placeholder: exit 2, one stderr line
    OPS.feeds_file(bad, name, {f"{name}/boxes": np.zeros((2, 12, 4), np.float32)})
    p = tfg_cli("run", DIR / "detection_more.pb", "--feeds", bad, "--fetch", f"{name}/out0",
                check=False)
    assert p.returncode == 2 and len(p.stderr.decode().strip().splitlines()) == 1
