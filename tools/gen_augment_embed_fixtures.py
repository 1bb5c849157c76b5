#!/usr/bin/env python3
"""TensorFlow's values and gradients of the ops Keras augmentation and embedding graphs carry:
ImageProjectiveTransformV2/V3 (RandomRotation, RandomTranslation, RandomZoom, RandomShear),
ResourceGather (an Embedding over a resource variable), ResourceScatterAdd/Update and
ResourceSparseApplyAdagrad/AdagradV2/Momentum, for
tests/test_augment_embed_ops.py. NEEDS TENSORFLOW; never imports tfg:

    /work/tfvenv/bin/python tools/gen_augment_embed_fixtures.py

Writes to tests/fixtures/augment_embed/:
  projective.npz   per case `<case>/images`, `/transforms`, `/output_shape`, `/fill_value`
                   (V3 only), `/interpolation`, `/fill_mode`, `/version`, `/y` (TensorFlow's
                   output) and, for float32 images, `/w` and `/dx`: tf.gradients of
                   sum(w * y) with respect to the images (TensorFlow's registered gradient)
  projective.pb, projective_feeds.npz, projective_y.npz
                   a tf.compat.v1 graph x -> y = ImageProjectiveTransformV3, for the CLI
  variables.pb     one tf.compat.v1 graph of resource variables (VarHandleOp, the `init` op)
                   with ResourceGather cases `<case>/y`, their gradients `<case>/dvar`
                   (tf.gradients, IndexedSlices densified), ResourceScatterAdd/Update cases
                   `<case>/after` (the variable's value read after the update) and
                   ResourceSparseApply* cases `<case>/var`, `<case>/accum` (read after it)
  variables.npz    TensorFlow's values of every fetch above, keyed by node name
"""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from fixture_cases import fixture_dir  # noqa: E402

DIR = fixture_dir("augment_embed")
RNG = np.random.default_rng(45)
V1 = tf.compat.v1


def _image(shape, dtype=np.float32):
    if np.dtype(dtype).kind in "iu":
        return RNG.integers(0, 200, shape).astype(dtype)
    return (RNG.standard_normal(shape) * 3).astype(dtype)


def _rotation(angle, h, w, dx=0.0, dy=0.0):
    """Keras' RandomRotation transform (output -> input coordinates) about the centre."""
    c, s = np.cos(angle), np.sin(angle)
    x_off = ((w - 1) - (c * (w - 1) - s * (h - 1))) / 2.0
    y_off = ((h - 1) - (s * (w - 1) + c * (h - 1))) / 2.0
    return [c, -s, x_off + dx, s, c, y_off + dy, 0.0, 0.0]


def _projective_case(out, key, images, transforms, output_shape, interpolation, fill_mode,
                     fill_value=None):
    """Run one transform (V3 when fill_value is given, else V2) and its gradient."""
    transforms = np.asarray(transforms, np.float32)
    output_shape = np.asarray(output_shape, np.int32)
    with tf.Graph().as_default():
        x = V1.placeholder(tf.as_dtype(images.dtype), images.shape)
        kw = dict(images=x, transforms=transforms, output_shape=output_shape,
                  interpolation=interpolation, fill_mode=fill_mode)
        if fill_value is None:
            y = tf.raw_ops.ImageProjectiveTransformV2(**kw)
        else:
            y = tf.raw_ops.ImageProjectiveTransformV3(fill_value=np.float32(fill_value), **kw)
        fetches = {"y": y}
        w = None
        if images.dtype == np.float32:
            w = RNG.standard_normal(y.shape).astype(np.float32)
            fetches["dx"] = tf.gradients(tf.reduce_sum(y * w), x)[0]
        with V1.Session() as s:
            res = s.run(fetches, {x: images})
    out[f"{key}/images"], out[f"{key}/transforms"] = images, transforms
    out[f"{key}/output_shape"] = output_shape
    out[f"{key}/interpolation"] = np.array(interpolation)
    out[f"{key}/fill_mode"] = np.array(fill_mode)
    out[f"{key}/version"] = np.int32(2 if fill_value is None else 3)
    if fill_value is not None:
        out[f"{key}/fill_value"] = np.float32(fill_value)
    out[f"{key}/y"] = res["y"]
    if w is not None:
        out[f"{key}/w"], out[f"{key}/dx"] = w, res["dx"]


def projective_cases(out):
    x = _image((2, 6, 7, 3))
    rot = [_rotation(0.7, 6, 7), _rotation(-2.1, 6, 7, 1.5, -0.5)]
    for interp in ("NEAREST", "BILINEAR"):
        for mode in ("REFLECT", "WRAP", "CONSTANT", "NEAREST"):
            _projective_case(out, f"v3-{interp}-{mode}", x, rot, (6, 7), interp, mode, 0.5)
            _projective_case(out, f"v2-{interp}-{mode}", x, rot[:1], (6, 7), interp, mode)
            # far translations (several periods of REFLECT / WRAP) and a zoom out
            far = [[1.3, 0.2, -23.0, -0.1, 0.8, 17.5, 0, 0], [0.5, 0, 40.25, 0, 2.5, -31, 0, 0]]
            _projective_case(out, f"far-{interp}-{mode}", x, far, (6, 7), interp, mode, -1.0)
            # one pixel wide / high (REFLECT and WRAP of a length 1)
            _projective_case(out, f"thin-{interp}-{mode}", _image((1, 1, 5, 2)), [rot[0]],
                             (3, 4), interp, mode, 2.0)
    # projective rows (t6, t7 != 0), one making the denominator exactly 0 on the grid
    proj = [[1, 0.1, 0.5, 0.2, 1, -0.5, 0.05, -0.02], [1, 0, 0, 0, 1, 0, -0.5, 0]]
    for interp in ("NEAREST", "BILINEAR"):
        _projective_case(out, f"proj-{interp}", x, proj, (5, 9), interp, "REFLECT", 3.0)
    # rounding halves (x' = k + 0.5) for NEAREST, identity and output larger than the input
    half = [[1, 0, 0.5, 0, 1, -0.5, 0, 0]]
    _projective_case(out, "half-NEAREST", x, half, (6, 7), "NEAREST", "CONSTANT", 0.0)
    _projective_case(out, "identity-big", x, [[1, 0, 0, 0, 1, 0, 0, 0]], (8, 10), "BILINEAR",
                     "CONSTANT", 0.25)
    for dt in (np.uint8, np.int32, np.int64, np.float16, np.float64):
        xi = _image((2, 5, 6, 2), dt)
        for interp in ("NEAREST", "BILINEAR"):
            _projective_case(out, f"dtype-{np.dtype(dt).name}-{interp}", xi,
                             [_rotation(0.4, 5, 6, 0.3)], (5, 6), interp, "CONSTANT", 7.6)
    _projective_case(out, "empty-batch", _image((0, 4, 4, 1)), [rot[0]], (3, 3), "BILINEAR",
                     "WRAP", 0.0)


def projective_cli_graph():
    """x [1, 8, 8, 3] -> y = ImageProjectiveTransformV3(x, a rotation, [8, 8], BILINEAR,
    REFLECT), as a tf.compat.v1 graph."""
    with tf.Graph().as_default() as g:
        x = V1.placeholder(tf.float32, [1, 8, 8, 3], name="x")
        y = tf.raw_ops.ImageProjectiveTransformV3(
            images=x, transforms=np.float32([_rotation(0.3, 8, 8)]),
            output_shape=np.int32([8, 8]), fill_value=np.float32(0), interpolation="BILINEAR",
            fill_mode="REFLECT")
        tf.identity(y, name="y")
        feeds = {"x": _image((1, 8, 8, 3))}
        with V1.Session() as s:
            want = s.run("y:0", {"x:0": feeds["x"]})
    with open(os.path.join(DIR, "projective.pb"), "wb") as f:
        f.write(g.as_graph_def().SerializeToString())
    np.savez(os.path.join(DIR, "projective_feeds.npz"), **feeds)
    np.savez(os.path.join(DIR, "projective_y.npz"), y=want)


def _variable(name, value):
    return V1.get_variable(name, initializer=tf.constant(value), use_resource=True)


def _gather_cases(fetches):
    """ResourceGather (tf.gather / Embedding on a resource variable) and its gradient."""
    table = _variable("table_var", (RNG.standard_normal((10, 4))).astype(np.float32))
    cube = _variable("cube_var", (RNG.standard_normal((3, 5, 2))).astype(np.float32))
    ints = _variable("ints_var", np.arange(12, dtype=np.int32).reshape(6, 2))
    cases = {
        "embed": (table, np.int32([[1, 3, 3], [9, 0, 3]])),   # repeated rows add up
        "embed64": (table, np.int64([7, 2])),
        "scalar": (table, np.int32(4)),
        "empty": (table, np.zeros((0, 2), np.int32)),
        "cube": (cube, np.int32([[2], [0]])),
        "ints": (ints, np.int64([5, 0, 5])),
    }
    for name, (var, idx) in cases.items():
        with tf.name_scope(name):
            y = tf.gather(var, idx)
            assert y.op.type == "ResourceGather", y.op.type
            fetches[f"{name}/y"] = tf.identity(y, name="y")
            if var.dtype == tf.float32:
                w = tf.constant(RNG.standard_normal(y.shape).astype(np.float32))
                grad = tf.gradients(tf.reduce_sum(y * w), var)[0]
                fetches[f"{name}/dvar"] = tf.identity(tf.convert_to_tensor(grad), name="dvar")
    with tf.name_scope("batch"):
        idx = np.int32([[0, 4], [1, 1], [3, 2]])
        y = tf.raw_ops.ResourceGather(resource=cube.handle, indices=idx, dtype=tf.float32,
                                      batch_dims=1)
        fetches["batch/y"] = tf.identity(y, name="y")


def _scatter_cases(fetches):
    """ResourceScatterAdd/Update, each on its own variable, read after the update."""
    base = (RNG.standard_normal((6, 3))).astype(np.float32)
    cases = {
        "add": ("ResourceScatterAdd", np.int32([4, 1, 4]), RNG.standard_normal((3, 3))),
        "add2d": ("ResourceScatterAdd", np.int64([[0, 5], [5, 5]]),
                  RNG.standard_normal((2, 2, 3))),
        "add_scalar": ("ResourceScatterAdd", np.int32([2, 3]), np.float32(1.5)),
        "update": ("ResourceScatterUpdate", np.int32([5, 0]), RNG.standard_normal((2, 3))),
        "update_scalar": ("ResourceScatterUpdate", np.int64([1]), np.float32(-2)),
    }
    for name, (op, idx, upd) in cases.items():
        with tf.name_scope(name):
            var = _variable(f"var_{name}", base)
            upd = np.asarray(upd, np.float32)
            scatter = getattr(tf.raw_ops, op)(resource=var.handle, indices=idx, updates=upd)
            with tf.control_dependencies([scatter]):
                fetches[f"{name}/after"] = tf.identity(var.read_value(), name="after")


def _sparse_apply_cases(fetches):
    """ResourceSparseApply* (v1 optimizers' and optimizer_v2's updates of embedding rows):
    unique and repeated indices, the attr variants, a 1-D variable; var and slot read after."""
    lr, eps, mom = np.float32(0.1), np.float32(1e-3), np.float32(0.9)
    cases = {
        "adagrad": ("ResourceSparseApplyAdagrad", (5, 3), np.int32([4, 0]), {"lr": lr}, {}),
        "adagrad_dup": ("ResourceSparseApplyAdagrad", (5, 3), np.int64([1, 3, 1]), {"lr": lr},
                        {}),
        "adagrad_noslots": ("ResourceSparseApplyAdagrad", (5, 3), np.int32([2]), {"lr": lr},
                            {"update_slots": False}),
        "adagrad_v2": ("ResourceSparseApplyAdagradV2", (5, 3), np.int32([3, 1, 3]),
                       {"lr": lr, "epsilon": eps}, {}),
        "momentum": ("ResourceSparseApplyMomentum", (6,), np.int32([5, 2, 5]),
                     {"lr": lr, "momentum": mom}, {}),
        "nesterov": ("ResourceSparseApplyMomentum", (5, 2), np.int64([0, 4]),
                     {"lr": lr, "momentum": mom}, {"use_nesterov": True}),
    }
    for name, (op, shape, idx, scalars, attrs) in cases.items():
        with tf.name_scope(name):
            var = _variable(f"var_{name}", RNG.standard_normal(shape).astype(np.float32))
            acc = _variable(f"acc_{name}", RNG.uniform(0.1, 1, shape).astype(np.float32))
            grad = RNG.standard_normal((idx.size,) + shape[1:]).astype(np.float32)
            update = getattr(tf.raw_ops, op)(var=var.handle, accum=acc.handle, grad=grad,
                                             indices=idx, **scalars, **attrs)
            with tf.control_dependencies([update]):
                fetches[f"{name}/var"] = tf.identity(var.read_value(), name="var")
                fetches[f"{name}/accum"] = tf.identity(acc.read_value(), name="accum")


def variables_graph():
    with tf.Graph().as_default() as g:
        fetches = {}
        _gather_cases(fetches)
        _scatter_cases(fetches)
        _sparse_apply_cases(fetches)
        init = V1.global_variables_initializer()
        assert init.name == "init", init.name
        values = {}
        for key, t in fetches.items():  # a fresh session each: a scatter changes its variable
            with V1.Session() as s:
                s.run(init)
                values[key] = s.run(t)
    with open(os.path.join(DIR, "variables.pb"), "wb") as f:
        f.write(g.as_graph_def().SerializeToString())
    np.savez(os.path.join(DIR, "variables.npz"), **values)


def main():
    os.makedirs(DIR, exist_ok=True)
    out = {}
    projective_cases(out)
    np.savez_compressed(os.path.join(DIR, "projective.npz"), **out)
    projective_cli_graph()
    variables_graph()


if __name__ == "__main__":
    main()
