"""ScaleAndTranslate and ScaleAndTranslateGrad against TensorFlow
(tests/fixtures/scale_translate/ops.npz, made by tools/gen_scale_translate_fixtures.py): what
tf.image.resize runs for lanczos3/5, gaussian, mitchellcubic (antialias on and off) and for
antialiased bilinear/bicubic, up- and downsampling; the raw op's other kernels, translations
and every image dtype; the gradient through tfg's gradient pass against tf.gradients; shape
inference, the memory guard, the errors, and the CLI on a graph TensorFlow wrote."""
import subprocess
import sys

import numpy as np
import pytest

from conftest import FIXTURES
from tfg import builder as tb
from tfg.errors import TfgError
from tfg.executor.session import Session
from tfg.graphdef.builder.core import make
from tfg.graphdef.graph import Graph
from tfg.passes.grad import grad
from tfg.schemas.dtypes import DType

DIR = FIXTURES / "scale_translate"
FIX = np.load(DIR / "ops.npz")
CASES = sorted({k.split("/")[0] for k in FIX.files})
GRADS = [c for c in CASES if f"{c}/dx" in FIX.files]


def _dt(v):
    return DType.from_numpy(np.asarray(v).dtype)


def _const(g, name, v):
    v = np.asarray(v)
    g.add_node(name, "Const", attrs={"dtype": _dt(v), "value": v})
    return f"{name}:0"


def _attrs(case, dtype):
    return {"T": dtype, "kernel_type": str(FIX[f"{case}/kernel_type"]),
            "antialias": bool(FIX[f"{case}/antialias"])}


def _graph(case, x_placeholder=False):
    """y = ScaleAndTranslate(x, size, scale, translation) with the case's inputs."""
    x = FIX[f"{case}/x"]
    g = Graph()
    if x_placeholder:
        g.add_node("x", "Placeholder", attrs={"dtype": _dt(x)})
    else:
        _const(g, "x", x)
    ins = ["x:0"] + [_const(g, n, FIX[f"{case}/{n}"]) for n in ("size", "scale", "translation")]
    g.add_node("y", "ScaleAndTranslate", ins, _attrs(case, _dt(x)))
    return g


def _close(got, want, case):
    assert got.dtype == want.dtype == np.float32 and got.shape == want.shape, (case, got.shape)
    scale = max(float(np.max(np.abs(want))), 1.0) if want.size else 1.0
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6 * scale, err_msg=case)


@pytest.mark.parametrize("case", CASES)
def test_values_match_tensorflow(case):
    got = Session(_graph(case)).run(["y:0"], {})[0]
    _close(got, FIX[f"{case}/y"], case)


@pytest.mark.parametrize("case", GRADS)
def test_grad_op_matches_tensorflow(case):
    """ScaleAndTranslateGrad(w, x, ...) is d sum(w * y) / dx."""
    g = _graph(case)
    ins = [_const(g, "w", FIX[f"{case}/w"]), "x:0", "scale:0", "translation:0"]
    g.add_node("dx", "ScaleAndTranslateGrad", ins, _attrs(case, DType.FLOAT))
    _close(Session(g).run(["dx:0"], {})[0], FIX[f"{case}/dx"], case)


def _weighted_loss(g, y, w):
    _const(g, "w", w)
    g.add_node("wy", "Mul", [y, "w:0"], {"T": DType.FLOAT})
    _const(g, "axes", np.arange(w.ndim, dtype=np.int32))
    g.add_node("loss", "Sum", ["wy:0", "axes:0"], {"T": DType.FLOAT})
    return "loss:0"


@pytest.mark.parametrize("case", [c for c in GRADS if c.startswith("resize-")][::3]
                         + ["raw-box-aa1-1", "raw-gaussian-aa0-0"])
def test_gradient_pass_matches_tensorflow(case):
    g = _graph(case, x_placeholder=True)
    loss = _weighted_loss(g, "y:0", FIX[f"{case}/w"])
    dx = Session(grad(g, [loss], ["x:0"])).run(["grad/x:0"], {"x:0": FIX[f"{case}/x"]})[0]
    _close(dx, FIX[f"{case}/dx"], case)


def test_integer_images_get_no_gradient_and_double_images_are_refused():
    for dtype, refused in ((np.int32, False), (np.float64, True)):
        g = Graph()
        g.add_node("x", "Placeholder", attrs={"dtype": _dt(np.zeros(1, dtype))})
        ins = ["x:0", _const(g, "size", np.int32([3, 3])), _const(g, "scale", np.float32([1, 1])),
               _const(g, "t", np.float32([0, 0]))]
        g.add_node("y", "ScaleAndTranslate", ins, {"T": _dt(np.zeros(1, dtype))})
        loss = _weighted_loss(g, "y:0", np.ones((1, 3, 3, 1), np.float32))
        if refused:
            with pytest.raises(TfgError, match="float32 images only"):
                grad(g, [loss], ["x:0"])
        else:
            with pytest.warns(Warning, match="do not depend on x:0"):
                g2 = grad(g, [loss], ["x:0"])
            out = Session(g2).run(["grad/x:0"], {"x:0": np.ones((1, 3, 3, 1), dtype)})
            assert not np.any(out[0])


def test_shape_inference():
    with tb.Graph():
        img = tb.placeholder(tb.float32, (2, 6, 7, 3), name="img")
        scale = tb.constant(np.float32([1, 1]))
        trans = tb.constant(np.float32([0, 0]))
        y = make("ScaleAndTranslate", [img, tb.constant(np.int32([9, 4])), scale, trans], {},
                 name="y")
        assert tuple(y.outputs[0].get_shape()) == (2, 9, 4, 3)
        dyn = make("ScaleAndTranslate", [img, tb.placeholder(tb.int32, (2,), name="s"), scale,
                                         trans], {}, name="dyn")
        assert tuple(dyn.outputs[0].get_shape()) == (2, None, None, 3)
        g = make("ScaleAndTranslateGrad", [y, img, scale, trans], {"T": tb.float32}, name="g")
        assert tuple(g.outputs[0].get_shape()) == (2, 6, 7, 3)
        with pytest.raises(TfgError, match="not compatible"):
            make("ScaleAndTranslate", [img, tb.constant(np.int32([9, 4, 1])), scale, trans], {},
                 name="bad")


def _run(op, inputs, attrs, **session):
    g = Graph()
    names = [_const(g, f"in{i}", v) for i, v in enumerate(inputs)]
    g.add_node("op", op, names, attrs)
    return Session(g, **session).run(["op:0"], {})[0]


IMG = np.ones((1, 4, 4, 2), np.float32)
ONES, ZEROS = np.float32([1, 1]), np.float32([0, 0])


def test_the_memory_guard_sizes_outputs_from_values():
    with pytest.raises(TfgError, match="would allocate"):
        _run("ScaleAndTranslate", [IMG, np.int32([100000, 100000]), ONES, ZEROS],
             {"T": DType.FLOAT}, max_memory="1M")


@pytest.mark.parametrize("op, inputs, attrs, says", [
    ("ScaleAndTranslate", [IMG, np.int32([3, 3]), ONES, ZEROS], {"kernel_type": "cubic"},
     "Unrecognized kernel type: cubic"),
    ("ScaleAndTranslate", [IMG, np.int32([3, 3]), np.float32([1, 0]), ZEROS], {},
     "Scale must be greater than zero"),
    ("ScaleAndTranslate", [IMG, np.int32([3, 3]), np.float32([1, np.nan]), ZEROS], {},
     "Scale must be greater than zero"),
    ("ScaleAndTranslate", [IMG, np.int32([3, 3]), np.float32([1, 1, 1]), ZEROS], {},
     "scale must have two elements"),
    ("ScaleAndTranslate", [IMG, np.int32([3, 3]), ONES, np.float32([[0, 0]])], {},
     "translation must be 1-dimensional"),
    ("ScaleAndTranslate", [IMG[0], np.int32([3, 3]), ONES, ZEROS], {},
     "input must be 4-dimensional"),
    ("ScaleAndTranslate", [np.ones((1, 0, 4, 1), np.float32), np.int32([3, 3]), ONES, ZEROS],
     {}, "input image must be of non-zero size"),
    ("ScaleAndTranslateGrad", [IMG, IMG[0], ONES, ZEROS], {},
     "original_image must be 4-dimensional"),
    ("ScaleAndTranslateGrad", [IMG, IMG, ONES, np.float32([0])], {},
     "translation must have two elements"),
])
def test_bad_inputs_are_refused(op, inputs, attrs, says):
    with pytest.raises(TfgError, match=says):
        _run(op, inputs, {"T": _dt(inputs[0]), **attrs})


def test_samples_outside_the_image_are_zero_and_an_empty_batch_is_empty():
    got = _run("ScaleAndTranslate", [IMG, np.int32([2, 2]), ONES, np.float32([10, 0])],
               {"T": DType.FLOAT})
    assert not np.any(got)
    got = _run("ScaleAndTranslate", [np.ones((0, 4, 4, 2), np.float32), np.int32([3, 5]), ONES,
                                     ZEROS], {"T": DType.FLOAT})
    assert got.shape == (0, 3, 5, 2) and got.dtype == np.float32


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "tfg", *map(str, args)], capture_output=True,
                          timeout=300)


def test_cli_end_to_end(tmp_path):
    out = tmp_path / "out.npz"
    p = _cli("run", DIR / "resize.pb", "--feeds", DIR / "resize_feeds.npz", "--fetch", "y",
             "-o", out)
    assert p.returncode == 0, p.stderr.decode()
    want = np.load(DIR / "resize_y.npz")["y"]
    np.testing.assert_allclose(np.load(out)["y"], want, rtol=1e-6, atol=1e-6)
    bad = tmp_path / "bad.npz"
    np.savez(bad, x=np.ones((1, 8, 3), np.float32))  # a feed of the wrong rank: exit 2
    p = _cli("run", DIR / "resize.pb", "--feeds", bad, "--fetch", "y", "-o", out)
    err = p.stderr.decode()
    assert p.returncode == 2, err
    assert len(err.strip().splitlines()) == 1 and "x" in err, err
