"""Ops Keras augmentation, embedding and sampling graphs carry, against TensorFlow
(tests/fixtures/augment_embed, made by tools/gen_augment_embed_fixtures.py):

- ImageProjectiveTransformV2/V3 (RandomRotation, RandomTranslation, RandomZoom, RandomShear):
  every interpolation x fill_mode, far translations, one-pixel images, projective rows (one
  with a zero denominator), every image dtype, bit for bit; TensorFlow's registered gradient
  through tfg's gradient pass; shapes, the memory guard, errors, the CLI.
- ResourceGather (an Embedding over a resource variable), with batch_dims, and its gradient
  through tfg's gradient pass (TensorFlow's IndexedSlices, densified);
  ResourceScatterAdd/Update and ResourceSparseApplyAdagrad/AdagradV2/Momentum (repeated
  indices applied one after another), on a graph TensorFlow wrote.
- Multinomial (tf.random.categorical): stateful like tfg's other random ops, so its draws
  are checked for their distribution, shape, dtype, seeding and errors, not TensorFlow's bits.
"""
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
from tfg.graphdef.infer import infer
from tfg.graphdef.io import load
from tfg.passes.grad import grad
from tfg.schemas.dtypes import DType

DIR = FIXTURES / "augment_embed"
PROJ = np.load(DIR / "projective.npz")
PROJ_CASES = sorted({k.split("/")[0] for k in PROJ.files})
PROJ_GRADS = [c for c in PROJ_CASES if f"{c}/dx" in PROJ.files]
VARS = np.load(DIR / "variables.npz")


def _dt(v):
    return DType.from_numpy(np.asarray(v).dtype)


def _const(g, name, v):
    v = np.asarray(v)
    g.add_node(name, "Const", attrs={"dtype": _dt(v), "value": v})
    return f"{name}:0"


# --------------------------------------------------------------------- projective transforms
def _projective_graph(case, x_placeholder=False):
    """y = ImageProjectiveTransformV2/V3 with the case's inputs and attrs."""
    x = PROJ[f"{case}/images"]
    g = Graph()
    if x_placeholder:
        g.add_node("x", "Placeholder", attrs={"dtype": _dt(x)})
    else:
        _const(g, "x", x)
    version = int(PROJ[f"{case}/version"])
    ins = ["x:0", _const(g, "t", PROJ[f"{case}/transforms"]),
           _const(g, "size", PROJ[f"{case}/output_shape"])]
    if version == 3:
        ins.append(_const(g, "fill", PROJ[f"{case}/fill_value"]))
    g.add_node("y", f"ImageProjectiveTransformV{version}", ins,
               {"dtype": _dt(x), "interpolation": str(PROJ[f"{case}/interpolation"]),
                "fill_mode": str(PROJ[f"{case}/fill_mode"])})
    return g


@pytest.mark.parametrize("case", PROJ_CASES)
def test_projective_values_match_tensorflow_bit_for_bit(case):
    got = Session(_projective_graph(case)).run(["y:0"], {})[0]
    want = PROJ[f"{case}/y"]
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape)
    np.testing.assert_array_equal(got, want, err_msg=case)


def _weighted_loss(g, y, w):
    _const(g, "w", w)
    g.add_node("wy", "Mul", [y, "w:0"], {"T": DType.FLOAT})
    _const(g, "axes", np.arange(w.ndim, dtype=np.int32))
    g.add_node("loss", "Sum", ["wy:0", "axes:0"], {"T": DType.FLOAT})
    return "loss:0"


@pytest.mark.parametrize("case", PROJ_GRADS[::2] + ["proj-BILINEAR", "v3-NEAREST-WRAP"])
def test_projective_gradient_pass_matches_tensorflow(case):
    """TensorFlow's rule (the incoming gradient resampled through the inverse transforms,
    fill 0), so equal to tf.gradients up to MatrixInverse's rounding."""
    g = _projective_graph(case, x_placeholder=True)
    loss = _weighted_loss(g, "y:0", PROJ[f"{case}/w"])
    g2 = grad(g, [loss], ["x:0"])
    ops = {g2[n].op for n in g2.node_names()}
    assert "MatrixInverse" in ops
    dx = Session(g2).run(["grad/x:0"], {"x:0": PROJ[f"{case}/images"]})[0]
    want = PROJ[f"{case}/dx"]
    assert dx.shape == want.shape and dx.dtype == np.float32
    np.testing.assert_allclose(dx, want, rtol=1e-5, atol=1e-4, err_msg=case)


def test_projective_shape_inference_and_memory_guard():
    with tb.Graph():
        img = tb.placeholder(tb.float32, (2, 6, 7, 3), name="img")
        t = tb.constant(np.zeros((1, 8), np.float32))
        attrs = {"interpolation": "BILINEAR", "dtype": DType.FLOAT}
        y = make("ImageProjectiveTransformV2", [img, t, tb.constant(np.int32([9, 4]))], attrs,
                 name="y")
        assert tuple(y.outputs[0].get_shape()) == (2, 9, 4, 3)
        dyn = make("ImageProjectiveTransformV3",
                   [img, t, tb.placeholder(tb.int32, (2,), name="s"), tb.constant(np.float32(0))],
                   attrs, name="dyn")
        assert tuple(dyn.outputs[0].get_shape()) == (2, None, None, 3)
        with pytest.raises(TfgError, match="not compatible"):
            make("ImageProjectiveTransformV2", [img, t, tb.constant(np.int32([9, 4, 1]))],
                 attrs, name="bad")
    with pytest.raises(TfgError, match="would allocate"):
        _run("ImageProjectiveTransformV2", [IMG, T1, np.int32([100000, 100000])],
             {"interpolation": "NEAREST"}, max_memory="1M")


def _run(op, inputs, attrs, **session):
    g = Graph()
    names = [_const(g, f"in{i}", v) for i, v in enumerate(inputs)]
    g.add_node("op", op, names, {"dtype": _dt(inputs[0]), **attrs})
    return Session(g, **session).run(["op:0"], {})[0]


IMG = np.ones((2, 4, 4, 1), np.float32)
T1 = np.float32([[1, 0, 0, 0, 1, 0, 0, 0]])
SIZE = np.int32([3, 3])


@pytest.mark.parametrize("inputs, attrs, says", [
    ([IMG[0], T1, SIZE], {}, "Input images must have rank 4"),
    ([IMG, np.zeros((3, 8), np.float32), SIZE], {}, "num_images x 8 or 1 x 8"),
    ([IMG, np.zeros((1, 6), np.float32), SIZE], {}, "num_images x 8 or 1 x 8"),
    ([IMG, T1[0], SIZE], {}, "num_images x 8 or 1 x 8"),
    ([IMG, T1, np.int32([3, 3, 3])], {}, "output_shape must have two elements"),
    ([IMG, T1, np.int32([0, 3])], {}, "output dimensions must be positive"),
    ([IMG, T1, SIZE], {"interpolation": "BICUBIC"}, "Invalid interpolation BICUBIC"),
    ([IMG, T1, SIZE], {"fill_mode": "MIRROR"}, "Invalid mode MIRROR"),
    ([IMG, T1, SIZE, np.float32([0, 1])], {}, "fill_value must be a scalar"),
])
def test_projective_bad_inputs_are_refused(inputs, attrs, says):
    op = "ImageProjectiveTransformV3" if len(inputs) == 4 else "ImageProjectiveTransformV2"
    with pytest.raises(TfgError, match=says):
        _run(op, inputs, {"interpolation": "NEAREST", **attrs})


def _cli(*args):
    return subprocess.run([sys.executable, "-m", "tfg", *map(str, args)], capture_output=True,
                          timeout=300)


def test_projective_cli_end_to_end(tmp_path):
    out = tmp_path / "out.npz"
    p = _cli("run", DIR / "projective.pb", "--feeds", DIR / "projective_feeds.npz", "--fetch",
             "y", "-o", out)
    assert p.returncode == 0, p.stderr.decode()
    np.testing.assert_array_equal(np.load(out)["y"], np.load(DIR / "projective_y.npz")["y"])
    bad = tmp_path / "bad.npz"
    np.savez(bad, x=np.ones((1, 8, 3), np.float32))  # a feed of the wrong rank: exit 2
    p = _cli("run", DIR / "projective.pb", "--feeds", bad, "--fetch", "y", "-o", out)
    err = p.stderr.decode()
    assert p.returncode == 2, err
    assert len(err.strip().splitlines()) == 1 and "x" in err, err


# ------------------------------------------------------------------- resource variable rows
def _variables_session():
    s = Session(load(DIR / "variables.pb"))
    s.run(targets=["init"])
    return s


@pytest.mark.parametrize("key", VARS.files)
def test_variable_graph_matches_tensorflow(key):
    """ResourceGather values (batch_dims 0 and 1), TensorFlow's own gradient graph of them
    (IndexedSlices densified) and the variables after ResourceScatterAdd/Update."""
    got = _variables_session().run([f"{key}:0"], {})[0]
    want = VARS[key]
    assert got.dtype == want.dtype and got.shape == want.shape, (got.dtype, got.shape)
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6, err_msg=key)


@pytest.mark.parametrize("case, var", [("embed", "table_var"), ("embed64", "table_var"),
                                       ("scalar", "table_var"), ("empty", "table_var"),
                                       ("cube", "cube_var")])
def test_resource_gather_gradient_pass_matches_tensorflow(case, var):
    """tfg grad of TensorFlow's loss with respect to the variable (its VarHandleOp): a dense
    tensor equal to TensorFlow's densified IndexedSlices."""
    g2 = grad(load(DIR / "variables.pb"), [f"{case}/Sum:0"], [f"{var}:0"], prefix="tfg_grad")
    assert any(g2[n].op == "VariableShape" for n in g2.node_names() if "gradients" in n)
    s = Session(g2)
    s.run(targets=["init"])
    got = s.run([f"tfg_grad/{var}:0"], {})[0]
    np.testing.assert_allclose(got, VARS[f"{case}/dvar"], rtol=1e-6, atol=1e-6)


def test_resource_gather_gradient_with_batch_dims_is_refused():
    g = load(DIR / "variables.pb")
    g.add_node("bsum", "Sum", ["batch/y:0", _const(g, "baxes", np.int32([0, 1, 2]))],
               {"T": DType.FLOAT})
    with pytest.raises(TfgError, match="batch_dims 1 is not supported"):
        grad(g, ["bsum:0"], ["cube_var:0"])


def _var_graph(value, *ops):
    """A resource variable v = value, then `ops` [(op type, inputs after the handle, attrs)]
    in order; fetch `read:0` (v after them) or `op0:0`."""
    g = Graph()
    value = np.asarray(value)
    g.add_node("v", "VarHandleOp", attrs={"dtype": _dt(value), "shape": value.shape,
                                          "shared_name": "v"})
    g.add_node("init", "AssignVariableOp", ["v:0", _const(g, "v0", value)],
               {"dtype": _dt(value)})
    prev = "^init"
    for i, (op, ins, attrs) in enumerate(ops):
        names = [_const(g, f"in{i}_{j}", x) for j, x in enumerate(ins)]
        g.add_node(f"op{i}", op, ["v:0", *names, prev], attrs)
        prev = f"^op{i}"
    g.add_node("read", "ReadVariableOp", ["v:0", prev], {"dtype": _dt(value)})
    return g


def test_resource_gather_shape_inference():
    table = np.zeros((10, 4), np.float32)
    g = _var_graph(table, ("ResourceGather", [np.int32([[1, 2, 3]])],
                           {"dtype": DType.FLOAT}))
    assert tuple(infer(g, strict=True)[("op0", 0)].shape) == (1, 3, 4)


@pytest.mark.parametrize("ops, says", [
    ([("ResourceGather", [np.int32([1, 10])], {"dtype": DType.FLOAT})],
     r"indices\[1\] = 10 is not in \[0, 10\)"),
    ([("ResourceGather", [np.int32([-1])], {"dtype": DType.FLOAT})],
     r"indices\[0\] = -1 is not in \[0, 10\)"),
    ([("ResourceGather", [np.int32([1])], {"dtype": DType.INT32})],
     "wrong dtype. Expected int32 got float"),
    ([("ResourceScatterAdd", [np.int32([10]), np.ones((1, 4), np.float32)],
       {"dtype": DType.FLOAT})], r"indices\[0\] = 10 is not in \[0, 10\)"),
    ([("ResourceScatterUpdate", [np.int32([1, 2]), np.ones((2, 3), np.float32)],
       {"dtype": DType.FLOAT})], "Must have updates.shape = indices.shape"),
    ([("ResourceScatterAdd", [np.int32([1]), np.ones((1, 4), np.float64)],
       {"dtype": DType.DOUBLE})], "wrong dtype"),
])
def test_resource_row_ops_refuse_bad_inputs(ops, says):
    g = _var_graph(np.zeros((10, 4), np.float32), *ops)
    with pytest.raises(TfgError, match=says):
        Session(g).run(["read:0"], {})


def test_resource_gather_of_an_uninitialized_variable_fails_cleanly():
    g = Graph()
    g.add_node("v", "VarHandleOp", attrs={"dtype": DType.FLOAT, "shape": (3,)})
    g.add_node("y", "ResourceGather", ["v:0", _const(g, "i", np.int32([0]))],
               {"dtype": DType.FLOAT})
    with pytest.raises(TfgError, match="does not exist"):
        Session(g).run(["y:0"], {})


def test_scatter_results_are_new_arrays_and_a_read_keeps_its_value():
    value = np.arange(8, dtype=np.float32).reshape(4, 2)
    g = _var_graph(value, ("ResourceScatterUpdate", [np.int32([0, 0]), np.float32([[1, 1],
                                                                                 [2, 2]])],
                           {"dtype": DType.FLOAT}),
                   ("ResourceScatterAdd", [np.int32([3, 3]), np.float32(0.5)],
                    {"dtype": DType.FLOAT}))
    got = Session(g).run(["read:0"], {})[0]
    want = value.copy()
    want[0] = 2  # the last of repeated updates stays
    want[3] += 1  # repeated adds add up
    np.testing.assert_array_equal(got, want)


def _sparse_apply_graph(op, scalars, grad, indices, accum_shape=(4, 2)):
    """var [4, 2] and accum, then `op` on them; fetch `read:0` (var after it)."""
    g = _var_graph(np.ones((4, 2), np.float32))
    g.add_node("acc", "VarHandleOp", attrs={"dtype": DType.FLOAT, "shape": accum_shape,
                                            "shared_name": "acc"})
    g.add_node("acc_init", "AssignVariableOp",
               ["acc:0", _const(g, "acc0", np.ones(accum_shape, np.float32))],
               {"dtype": DType.FLOAT})
    ins = ["v:0", "acc:0"] + [_const(g, f"s{i}", x) for i, x in enumerate(scalars)]
    ins.insert(2 + (1 if op.endswith("V2") else 0) + 1, _const(g, "g", grad))
    ins.insert(ins.index("g:0") + 1, _const(g, "i", indices))
    g.add_node("apply", op, ins + ["^init", "^acc_init"], {"T": DType.FLOAT})
    g.add_node("after", "ReadVariableOp", ["v:0", "^apply"], {"dtype": DType.FLOAT})
    return g


ROW = np.ones((1, 2), np.float32)


@pytest.mark.parametrize("op, scalars, grad, indices, says", [
    ("ResourceSparseApplyAdagrad", [np.float32(0.1)], ROW, np.int32([4]),
     "Index 4 at offset 0 in indices is out of range"),
    ("ResourceSparseApplyAdagrad", [np.float32(0.1)], ROW, np.int32([[0]]),
     "indices must be one-dimensional"),
    ("ResourceSparseApplyAdagrad", [np.float32(0.1)], np.ones((2, 2), np.float32),
     np.int32([0]), "grad must be the same size as indices"),
    ("ResourceSparseApplyAdagrad", [np.float32(0.1)], np.ones((1, 3), np.float32),
     np.int32([0]), "var and grad must match"),
    ("ResourceSparseApplyAdagradV2", [np.float32(0.1), np.float32([1e-3, 1])], ROW,
     np.int32([0]), "epsilon is not a scalar"),
    ("ResourceSparseApplyMomentum", [np.float32(0.1), np.float32(0.9)], ROW, np.int64([-1]),
     "Index -1 at offset 0 in indices is out of range"),
])
def test_sparse_apply_refuses_bad_inputs(op, scalars, grad, indices, says):
    g = _sparse_apply_graph(op, scalars, grad, indices)
    with pytest.raises(TfgError, match=says):
        Session(g).run(["after:0"], {})


def test_sparse_apply_refuses_slots_of_another_shape():
    g = _sparse_apply_graph("ResourceSparseApplyAdagrad", [np.float32(0.1)], ROW,
                            np.int32([0]), accum_shape=(4, 3))
    with pytest.raises(TfgError, match="var and accum do not have the same shape"):
        Session(g).run(["after:0"], {})


def test_sparse_apply_changes_only_the_named_rows():
    g = _sparse_apply_graph("ResourceSparseApplyMomentum", [np.float32(0.5), np.float32(0)],
                            np.float32([[1, 2], [3, 4]]), np.int32([2, 2]))
    got = Session(g).run(["after:0"], {})[0]
    want = np.ones((4, 2), np.float32)
    want[2] -= 0.5 * np.float32([4, 6])  # repeated index: both rows of grad, in turn
    np.testing.assert_array_equal(got, want)


# ----------------------------------------------------------------------------- Multinomial
def _multinomial(logits, num_samples, **attrs):
    g = Graph()
    g.add_node("y", "Multinomial", [_const(g, "logits", logits), _const(g, "n", num_samples)],
               {"T": _dt(logits), **attrs})
    return g


def test_multinomial_draws_follow_the_softmax():
    p = np.array([[0.1, 0.2, 0.7, 0.0], [0.25, 0.25, 0.25, 0.25]])
    with np.errstate(divide="ignore"):
        logits = np.log(p).astype(np.float32) + np.float32(3)  # -inf: never drawn
    n = 20000
    got = Session(_multinomial(logits, np.int32(n), seed=1, seed2=2)).run(["y:0"], {})[0]
    assert got.dtype == np.int64 and got.shape == (2, n)
    for row, probs in zip(got, p):
        freq = np.bincount(row, minlength=4) / n
        np.testing.assert_allclose(freq, probs, atol=0.015)
    assert not np.any(got[0] == 3)


def test_multinomial_is_stateful_and_seeded():
    logits = np.zeros((3, 50), np.float64)
    s = Session(_multinomial(logits, np.int32(40), seed=7, seed2=1, output_dtype=DType.INT32))
    a, b = s.run(["y:0"], {})[0], s.run(["y:0"], {})[0]
    assert a.dtype == np.int32 and a.shape == (3, 40) and 0 <= a.min() and a.max() < 50
    assert not np.array_equal(a, b)  # successive steps draw anew
    again = Session(_multinomial(logits, np.int32(40), seed=7, seed2=1,
                                 output_dtype=DType.INT32)).run(["y:0"], {})[0]
    np.testing.assert_array_equal(a, again)  # the same seeds, the same sequence


def test_multinomial_half_logits_and_empty_outputs():
    got = Session(_multinomial(np.float16([[0, 30, 0]]), np.int32(5))).run(["y:0"], {})[0]
    np.testing.assert_array_equal(got, [[1] * 5])
    got = Session(_multinomial(np.zeros((2, 3), np.float32), np.int32(0))).run(["y:0"], {})[0]
    assert got.shape == (2, 0) and got.dtype == np.int64
    got = Session(_multinomial(np.zeros((0, 3), np.float32), np.int32(4))).run(["y:0"], {})[0]
    assert got.shape == (0, 4)


@pytest.mark.parametrize("logits, n, says", [
    (np.zeros(3, np.float32), np.int32(2), "logits should be a matrix"),
    (np.zeros((2, 3), np.float32), np.int32(-1), "num_samples should be non-negative, got -1"),
    (np.zeros((2, 0), np.float32), np.int32(2), "num_classes should be positive"),
    (np.zeros((2, 3), np.int32), np.int32(2), "no CPU kernel"),
])
def test_multinomial_bad_inputs_are_refused(logits, n, says):
    with pytest.raises(TfgError, match=says):
        Session(_multinomial(logits, n)).run(["y:0"], {})


def test_multinomial_shape_memory_guard_and_no_gradient():
    with tb.Graph():
        logits = tb.placeholder(tb.float32, (5, 7), name="logits")
        y = make("Multinomial", [logits, tb.constant(np.int32(3))], {}, name="y")
        assert tuple(y.outputs[0].get_shape()) == (5, 3)
        with pytest.raises(TfgError, match="non-negative"):
            make("Multinomial", [logits, tb.constant(np.int32(-2))], {}, name="bad")
    with pytest.raises(TfgError, match="would allocate"):
        Session(_multinomial(np.zeros((1000, 3), np.float32), np.int32(10 ** 9)),
                max_memory="1M").run(["y:0"], {})
    g = _multinomial(np.zeros((2, 3), np.float32), np.int32(4))
    g.add_node("f", "Cast", ["y:0"], {"SrcT": DType.INT64, "DstT": DType.FLOAT})
    g.add_node("loss", "Sum", ["f:0", _const(g, "axes", np.int32([0, 1]))], {"T": DType.FLOAT})
    with pytest.warns(Warning, match="do not depend on logits:0"):
        g2 = grad(g, ["loss:0"], ["logits:0"])
    assert not np.any(Session(g2).run(["grad/logits:0"], {})[0])
