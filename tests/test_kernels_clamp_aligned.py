"""Relu/Relu6 through block comparisons (tfg/kernels/clamp.py) and 64-byte-aligned arrays for
constants, variables and ReluGrad results (tfg/kernels/aligned.py)."""
import types

import numpy as np
import pytest

from tfg import builder as tb
from tfg.executor import Session
from tfg.kernels import aligned, clamp
from tfg.errors import TfgError
from tfg.graphdef.attrs import Shape
from tfg.graphdef.graph import Graph
from tfg.schemas.dtypes import DType

_CPU = types.SimpleNamespace(xp=np)  # all a kernel called directly reads of its context

F = DType.FLOAT

SPECIALS = np.array([-0.0, 0.0, np.nan, -np.nan, np.inf, -np.inf, 1e-45, -1e-45, 3, 7, -2, 6.0,
                     5.999, 6.001], np.float32)


def _bits(a):
    a = np.ascontiguousarray(a)
    return a.view(np.dtype(f"u{a.dtype.itemsize}"))


@pytest.mark.parametrize("size", [0, 1, 255, 256, 16384, 2 * 16384 + 5, 100003])
@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_relu_equals_numpy_maximum_bit_for_bit(size, dtype):
    x = np.resize(SPECIALS, size).astype(dtype)
    x[::7] = np.random.default_rng(size).standard_normal(x[::7].size)
    want = np.maximum(x, dtype(0))
    assert np.array_equal(_bits(clamp.relu(x)), _bits(want))
    y = x.copy()
    assert clamp.relu(y, out=y) is y
    assert np.array_equal(_bits(y), _bits(want))


@pytest.mark.parametrize("size", [14, 300, 40000])
def test_relu6_is_max_then_min(size):
    x = np.resize(SPECIALS, size) * np.float32(1.5)
    got = clamp.relu6(x)
    want = np.minimum(np.maximum(x, np.float32(0)), np.float32(6))
    assert np.array_equal(_bits(got), _bits(want))
    # The same values as np.clip except the sign of zero: -0.0 becomes +0.0, as maximum gives.
    clip = np.clip(x, np.float32(0), np.float32(6))
    same = ~((x == 0) & np.signbit(x))
    assert np.array_equal(_bits(got)[same], _bits(clip)[same])
    assert not np.signbit(got[x == 0]).any()


@pytest.mark.parametrize("shape", [(2, 3, 3, 176), (2, 12, 12, 44), (16, 1024), (300,)])
def test_clamps_of_at_most_one_block_in_their_shape_and_any_layout(shape):
    """Arrays of up to one block are compared with a view of the block in their shape (kept
    per shape): the same bits as numpy's scalar forms, for views, in place and repeated, and
    the shared block is never written."""
    size = int(np.prod(shape))
    for _ in range(2):
        x = np.resize(SPECIALS, size).reshape(shape) * np.float32(1.5)
        x.reshape(-1)[::5] = np.random.default_rng(size).standard_normal(x.reshape(-1)[::5].size)
        for got_of, want_of in ((clamp.relu, lambda a: np.maximum(a, np.float32(0))),
                                (clamp.relu6, lambda a: np.minimum(np.maximum(
                                    a, np.float32(0)), np.float32(6)))):
            for a in (x, x.T, x[..., ::-1]):
                want = want_of(a)
                assert np.array_equal(_bits(got_of(a)), _bits(want))
                y = a.copy()
                assert got_of(y, out=y) is y
                assert np.array_equal(_bits(y), _bits(want))
    for value in (0, 6):
        block = clamp._block(np.dtype(np.float32), value)
        assert not block.flags.writeable and (block == value).all()


def test_clamp_handles_views_ints_and_scalars():
    x = np.arange(-40000, 40000, dtype=np.float32).reshape(200, 400)
    view = x[:, ::2]  # not contiguous: the scalar form
    assert np.array_equal(clamp.relu(view), np.maximum(view, 0))
    ints = np.arange(-5000, 5000, dtype=np.int32)
    assert np.array_equal(clamp.relu6(ints), np.clip(ints, 0, 6))
    assert clamp.relu(np.float32(-3)) == 0 and clamp.relu6(np.float32(9)) == 6
    y = x.copy()
    clamp.relu(x, out=y)  # into another array
    assert np.array_equal(y, np.maximum(x, 0)) and x.min() < 0


def test_aligned_empty_and_copy():
    for shape, dtype in [((128, 1024), np.float32), ((3, 5000), np.float64), (70000, np.int8)]:
        a = aligned.empty(shape, dtype)
        assert a.ctypes.data % 64 == 0 and a.flags.c_contiguous and a.flags.writeable
        assert a.shape == (shape if isinstance(shape, tuple) else (shape,)) and a.dtype == dtype
        assert a.base.dtype == np.uint8 and a.base.flags.owndata
    small = aligned.empty((30, 40), np.float32)
    assert small.flags.owndata
    x = np.random.default_rng(0).standard_normal((300, 301)).astype(np.float32)
    c = aligned.copy(x)
    assert np.array_equal(c, x) and c.ctypes.data % 64 == 0
    assert aligned.copy(c) is c
    f = aligned.fresh_copy(c)
    assert f is not c and np.array_equal(f, c) and f.ctypes.data % 64 == 0
    t = aligned.copy(x.T)  # Fortran-ordered: copied C-ordered
    assert t.flags.c_contiguous and np.array_equal(t, x.T)
    strings = np.array([b"a", b"b"], dtype=object)
    assert aligned.copy(strings) is strings


@pytest.mark.parametrize("act", ["Relu", "Relu6", "Elu", None])
def test_fused_matmul_equals_the_three_kernels_and_leaves_inputs_alone(act):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((64, 300)).astype(np.float32)
    w = rng.standard_normal((300, 200)).astype(np.float32)
    b = rng.standard_normal(200).astype(np.float32)
    g = Graph()
    g.add_node("x", "Placeholder", [], {"dtype": F, "shape": Shape((64, 300))})
    g.add_node("w", "Const", [], {"dtype": F, "value": w})
    g.add_node("b", "Const", [], {"dtype": F, "value": b})
    ops = [b"BiasAdd"] + ([act.encode()] if act else [])
    g.add_node("f", "_FusedMatMul", ["x", "w", "b"], {"T": F, "fused_ops": ops, "num_args": 1,
                                                       "transpose_a": False,
                                                       "transpose_b": False})
    copies = x.copy(), w.copy(), b.copy()
    sess = Session(g)
    for _ in range(2):  # the second step reuses the node's cached steps and constants
        got = sess.run("f:0", {"x:0": x})
    z = x @ w + b
    want = {"Relu": np.maximum(z, 0), "Relu6": np.clip(z, 0, 6),
            "Elu": np.where(z < 0, np.expm1(np.minimum(z, 0)), z), None: z}[act]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-4)
    for before, after in zip(copies, (x, sess.run("w:0"), sess.run("b:0"))):
        assert np.array_equal(before, after)


def test_fused_matmul_with_a_bias_of_the_wrong_length_fails():
    g = Graph()
    g.add_node("x", "Const", [], {"dtype": F, "value": np.ones((4, 3), np.float32)})
    g.add_node("w", "Const", [], {"dtype": F, "value": np.ones((3, 5), np.float32)})
    g.add_node("b", "Const", [], {"dtype": F, "value": np.ones(1, np.float32)})
    g.add_node("f", "_FusedMatMul", ["x", "w", "b"], {"T": F, "fused_ops": [b"BiasAdd"],
                                                       "num_args": 1})
    with pytest.raises(TfgError, match="f"):
        Session(g).run("f:0")


def test_constants_and_variables_are_aligned():
    rng = np.random.default_rng(1)
    w0 = rng.standard_normal((300, 200)).astype(np.float32)
    with tb.Graph() as g:
        x = tb.placeholder("float32", [64, 300], name="x")
        w = tb.Variable(w0, name="w")
        c = tb.constant(w0, name="c")
        y = tb.matmul(x, w, name="y")
        z = tb.matmul(x, c, name="z")
        loss = tb.reduce_sum(y + z, name="loss")
        init = tb.variables_initializer([w], name="init")
    from tfg.passes.grad.core import grad
    trained = grad(g.graph, "loss", ["w"], optimizer="sgd:0.01")
    sess = Session(trained)
    sess.run(None, targets=[init.name])
    feeds = {"x:0": rng.standard_normal((64, 300)).astype(np.float32)}
    const, ys = sess.run(["c:0", "y:0"], feeds)
    assert const.ctypes.data % 64 == 0
    np.testing.assert_allclose(ys, feeds["x:0"] @ w0, rtol=1e-5, atol=1e-4)
    stored = sess.resources.lookup("", "w")  # the variable's own array (a fetch is a copy)
    assert stored.get().ctypes.data % 64 == 0  # Assign's copy of the initial value
    before = stored.get().copy()
    sess.run(["loss:0"], feeds, targets=["train"])
    after = stored.get()
    assert after.ctypes.data % 64 == 0  # the SGD update's new value
    np.testing.assert_allclose(after, before - 0.01 * feeds["x:0"].sum(0)[:, None],
                               rtol=1e-5, atol=1e-4)


def test_relu_grads_follow_tensorflows_formula():
    """ReluGrad = dy * (x > 0), Relu6Grad = dy * ((x > 0) & (x < 6)) (relu_op_functor.h): a NaN
    gradient stays NaN where the mask is off, and the result has dy's dtype."""
    from tfg.kernels.nn_ops import relu6_grad, relu_grad
    x = np.array([-1, 0, 1, 5, 6, 7, np.nan, -2], np.float32)
    dy = np.array([np.nan, 2, 3, -4, 5, 6, 7, np.inf], np.float32)
    got = relu_grad(_CPU, dy, x)
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, [np.nan, 0, 3, -4, 5, 6, 0, np.nan])
    np.testing.assert_array_equal(relu6_grad(_CPU, dy, x), [np.nan, 0, 3, -4, 0, 0, 0, np.nan])
    big_x = np.random.default_rng(3).standard_normal((128, 1024)).astype(np.float32)
    big_dy = np.random.default_rng(4).standard_normal((128, 1024)).astype(np.float32)
    out = relu_grad(_CPU, big_dy, big_x)
    np.testing.assert_array_equal(out, np.where(big_x > 0, big_dy, 0))
    assert out.ctypes.data % 64 == 0
    ints = relu_grad(_CPU, np.arange(6, dtype=np.int32), np.array([-1, 0, 1, 2, -3, 4], np.int32))
    assert ints.dtype == np.int32 and ints.tolist() == [0, 0, 2, 3, 0, 5]
