"""The image resize kernels and their gradient kernels against TensorFlow's values
(tests/fixtures/image_ops/resize.npz, made by tools/gen_image_fixtures.py): bilinear,
nearest-neighbour and bicubic, in the legacy, align_corners and half_pixel_centers modes,
up- and down-sampling; plus shape inference and the bad-input errors."""
import numpy as np
import pytest

from conftest import FIXTURES
from tfg import builder as tb
from tfg.errors import TfgError, TfgRuntimeError
from tfg.graphdef.builder.core import make
from tfg.executor.session import Session
from tfg.graphdef.graph import Graph
from tfg.kernels.context import KernelContext
from tfg.kernels.registry import get_kernel
from tfg.schemas.dtypes import DType

FIX = np.load(FIXTURES / "image_ops" / "resize.npz")
KEYS = sorted({k.rsplit("/", 1)[0] for k in FIX.files if k.startswith("Resize")})
MODES = {"legacy": (False, False), "align": (True, False), "half": (False, True)}


def _run_op(op, inputs, attrs, fetch="op:0"):
    g = Graph()
    names = []
    for i, v in enumerate(inputs):
        v = np.asarray(v)
        g.add_node(f"in{i}", "Const", attrs={"dtype": DType.from_numpy(v.dtype), "value": v})
        names.append(f"in{i}:0")
    attrs = dict(attrs)
    attrs.setdefault("T", DType.from_numpy(np.asarray(inputs[0 if "Grad" not in op or
                                                            op.startswith("ResizeNearest")
                                                            else 1]).dtype))
    g.add_node("op", op, names, attrs)
    return Session(g).run([fetch], {})[0]


@pytest.mark.parametrize("key", KEYS)
def test_resize_and_its_gradient_match_tensorflow(key):
    op, mode, _, _ = key.split("-")
    align, half = MODES[mode]
    attrs = {"align_corners": align, "half_pixel_centers": half}
    x, y, g, dx = (FIX[f"{key}/{p}"] for p in ("x", "y", "g", "dx"))
    got = _run_op(op, [x, np.array(y.shape[1:3], np.int32)], attrs)
    assert got.dtype == y.dtype and got.shape == y.shape
    np.testing.assert_allclose(got, y, rtol=1e-5, atol=1e-5, err_msg=key)
    if op == "ResizeNearestNeighbor":
        got_dx = _run_op(op + "Grad", [g, np.array(x.shape[1:3], np.int32)], attrs)
    else:
        got_dx = _run_op(op + "Grad", [g, x], attrs)
    assert got_dx.shape == dx.shape
    np.testing.assert_allclose(got_dx, dx, rtol=1e-5, atol=1e-5, err_msg=key)


def test_integer_images():
    x = FIX["uint8/x"]
    size = np.array([7, 3], np.int32)
    attrs = {"half_pixel_centers": True}
    bil = _run_op("ResizeBilinear", [x, size], attrs)
    assert bil.dtype == np.float32
    np.testing.assert_allclose(bil, FIX["uint8/bilinear"], rtol=1e-6)
    nn = _run_op("ResizeNearestNeighbor", [x, size], attrs)
    assert nn.dtype == np.uint8
    np.testing.assert_array_equal(nn, FIX["uint8/nearest"])


def test_shape_inference_and_bad_attrs():
    with tb.Graph():
        x = tb.placeholder(tb.float32, (2, 5, 7, 3), name="x")
        y = make("ResizeBilinear", [x, tb.constant(np.array([9, 4], np.int32))],
                 {"half_pixel_centers": True}, name="y")
        assert tuple(y.outputs[0].get_shape()) == (2, 9, 4, 3)
    x = np.zeros((1, 2, 2, 1), np.float32)
    with pytest.raises(TfgError, match="half_pixel_centers is True, align_corners must be"):
        _run_op("ResizeBilinear", [x, np.array([3, 3], np.int32)],
                {"align_corners": True, "half_pixel_centers": True})
    with pytest.raises(TfgError, match="positive"):
        _run_op("ResizeNearestNeighbor", [x, np.array([0, 3], np.int32)], {})


@pytest.mark.parametrize("op", ["ResizeBilinear", "ResizeNearestNeighbor", "ResizeBicubic"])
def test_an_empty_image_is_refused_by_name(op):
    ctx = KernelContext(Graph().add_node("n", op), {"T": DType.FLOAT, "align_corners": False,
                                                    "half_pixel_centers": False})
    with pytest.raises(TfgRuntimeError, match="non-zero size"):
        get_kernel(op).fn(ctx, np.ones((1, 0, 2, 1), np.float32), np.array([3, 3], np.int32))
