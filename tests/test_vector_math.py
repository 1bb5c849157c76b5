"""Float32 Sigmoid, swish and Tanh as compiled loops (tfg/kernels/vector_math.py over
vector_loops.py): their values against float64 over the float32 range (ulp bounds, the
specials), when they run (a Session's second step, float32 only, TFG_JIT), every memory
layout a caller may pass, the kernels and fused loop chains giving the same bits, and numba
failing."""
import numpy as np
import pytest

from tfg import builder as tb
from tfg.executor import Session
from tfg.kernels import fused, jit, math_ops, vector_math

needs_numba = pytest.mark.skipif(not jit.wanted(), reason="numba not installed (tfg[perf])")

F32 = np.float32


@pytest.fixture
def warm():
    """This process after a Session's second step (conftest's warm_process), loops loaded."""
    assert jit.warm() and vector_math._loops() is not None
    return vector_math


@pytest.fixture
def cold(monkeypatch):
    """This process before any Session's second step, the loops not loaded."""
    monkeypatch.setattr(jit, "_state", {k: v for k, v in jit._state.items() if k != "warm"})
    monkeypatch.setattr(vector_math, "_loaded", [])


def _ulps(got, exact):
    """|got - exact| in units of the float32 spacing at `exact` (subnormals: the smallest)."""
    spacing = np.spacing(np.abs(exact).astype(F32)).astype(np.float64)
    return np.abs(got.astype(np.float64) - exact) / np.maximum(spacing, 2.0 ** -149)


def _sweep():
    """4M points over [-110, 110], the neighbourhood of 0 at every scale, and specials."""
    tiny = np.logspace(-45, 0, 20001).astype(F32)
    return np.concatenate([np.linspace(-110, 110, 4_000_001).astype(F32), tiny, -tiny])


EXACT = {
    "tanh": np.tanh,
    "sigmoid": lambda x: 1 / (1 + np.exp(-x)),
    "swish": lambda x: x / (1 + np.exp(-x)),
}
# Largest error allowed, in ulp of the exact float64 value rounded (numpy's own float32 exp,
# which the numpy path uses, is within 2.4).
BOUND = {"tanh": 2, "sigmoid": 3, "swish": 3}


@needs_numba
@pytest.mark.parametrize("name", sorted(EXACT))
def test_within_a_few_ulp_of_float64_over_the_range(warm, name):
    x = _sweep()
    with np.errstate(over="ignore"):
        exact = EXACT[name](x.astype(np.float64))
    got = getattr(vector_math, name)(x)
    finite = np.isfinite(exact) & (np.abs(exact) < np.finfo(F32).max)
    assert got.dtype == F32 and got.shape == x.shape
    # below -87 swish is x times a subnormal sigmoid, of fewer bits: there the error is
    # bounded in absolute terms (TensorFlow's x * sigmoid(x) has the same subnormal)
    normal = finite & ((x > -87) if name == "swish" else True)
    assert _ulps(got[normal], exact[normal]).max() <= BOUND[name]
    tail = finite & ~normal
    assert np.abs(got[tail].astype(np.float64) - exact[tail]).max(initial=0) <= 1e-40


@needs_numba
def test_special_values(warm):
    x = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, -100.0, 100.0, -88.0, 89.0], F32)
    t = vector_math.tanh(x)
    np.testing.assert_array_equal(t, np.tanh(x))
    assert np.signbit(t[4]) and not np.signbit(t[3])  # tanh(-0) = -0
    s = vector_math.sigmoid(x)
    assert np.isnan(s[0]) and s[1] == 1 and s[2] == 0 and s[3] == s[4] == 0.5
    assert 0 < s[5] < 1e-43  # e^-100, subnormal: no overflow, not flushed to 0
    assert s[6] == 1
    w = vector_math.swish(x)
    with np.errstate(over="ignore", invalid="ignore"):
        numpy_swish = x / (1 + np.exp(-x))  # the numpy path's form: swish(-inf) is NaN too
    np.testing.assert_array_equal(np.isnan(w), np.isnan(numpy_swish))
    assert w[1] == np.inf and -1e-41 < w[5] < 0 and w[8] == 89  # -100 e^-100, not 0


@needs_numba
@pytest.mark.parametrize("name", sorted(EXACT))
def test_every_layout_gives_the_same_bits(warm, name):
    fn = getattr(vector_math, name)
    base = np.random.default_rng(3).standard_normal((6, 10, 8)).astype(F32) * 4
    want = fn(base)
    # strided input
    wide = np.zeros((6, 20, 8), F32)
    wide[:, ::2] = base
    np.testing.assert_array_equal(fn(wide[:, ::2]), want)
    # in place (the fused activations'), and into an array of another layout
    y = base.copy()
    assert fn(y, out=y) is y
    np.testing.assert_array_equal(y, want)
    out = np.zeros((8, 10, 6), F32).transpose(2, 1, 0)
    assert fn(base, out=out) is out
    np.testing.assert_array_equal(out, want)
    # `out` a view of x's own memory
    z = base.copy()
    fn(z, out=z.reshape(-1).reshape(z.shape))
    np.testing.assert_array_equal(z, want)
    # any size: empty, one value, a 0-d array
    assert fn(np.zeros((0, 3), F32)).shape == (0, 3)
    np.testing.assert_array_equal(fn(base[0, 0, :1]), want[0, 0, :1])
    assert fn(np.array(base[1, 2, 3])).shape == ()


@needs_numba
@pytest.mark.parametrize("name", ["_hard_swish", "_hard_sigmoid"])
def test_hard_activations_are_numpys_bits(warm, name, monkeypatch):
    """MobileNetV3's hard swish and hard sigmoid (kernels/fused.py) in one pass, with numpy's
    roundings, NaN, infinities and signed zeros: the same bytes as the numpy steps."""
    fn = getattr(fused, name)
    rng = np.random.default_rng(7)
    x = np.concatenate([rng.standard_normal(5005).astype(F32) * 5, np.array(
        [np.nan, np.inf, -np.inf, 0, -0.0, -3, 3, 6, -6, np.nextafter(F32(3), F32(0)),
         np.nextafter(F32(-3), F32(-4)), 1e-40, -1e-40], F32)]).reshape(-1, 13)
    compiled, in_place = fn(np, x), x.copy()
    assert fn(np, in_place, out=in_place) is in_place
    monkeypatch.setattr(vector_math, "_loaded", [None])  # numpy's steps
    with np.errstate(invalid="ignore"):  # -inf * 0
        numpy_steps = fn(np, x)
    assert compiled.tobytes() == numpy_steps.tobytes() == in_place.tobytes()


@needs_numba
@pytest.mark.parametrize("op", ["TanhGrad", "SigmoidGrad"])
def test_activation_gradients_are_numpys_bits(warm, op, monkeypatch):
    from types import SimpleNamespace

    from tfg.kernels import nn_ops
    kernel = nn_ops.tanh_grad if op == "TanhGrad" else nn_ops.sigmoid_grad
    ctx = SimpleNamespace(xp=np)
    rng = np.random.default_rng(8)
    y = np.tanh(rng.standard_normal((40, 25)).astype(F32) * 2)
    y[0, :5] = [np.nan, np.inf, -0.0, 1.0, -1.0]
    dy = rng.standard_normal((40, 25)).astype(F32)
    dy[1, :3] = [np.inf, np.nan, -0.0]
    strided = np.zeros((40, 50), F32)
    strided[:, ::2] = y
    assert vector_math.tanh_grad(y, dy[:1]) is None  # (a broadcast: numpy's)
    assert vector_math.tanh_grad(y, dy.astype(np.float64)) is None
    with np.errstate(invalid="ignore"):
        compiled = kernel(ctx, y, dy)
        assert kernel(ctx, strided[:, ::2], dy).tobytes() == compiled.tobytes()
        monkeypatch.setattr(vector_math, "_loaded", [None])
        numpy_steps = kernel(ctx, y, dy)
    assert compiled.dtype == F32 and compiled.tobytes() == numpy_steps.tobytes()


@needs_numba
@pytest.mark.parametrize("dtype", [np.float64, np.float16, np.int32])
def test_other_dtypes_are_numpys(warm, dtype):
    assert vector_math.tanh(np.ones(4, dtype)) is None
    assert vector_math.sigmoid(np.ones(4, dtype)) is None


def test_not_before_a_sessions_second_step(cold):
    x = np.linspace(-3, 3, 50).astype(F32)
    assert vector_math.tanh(x) is None
    np.testing.assert_array_equal(math_ops.tanh_into(x), np.tanh(x))
    assert not jit.warm()


def test_tfg_jit_0_keeps_numpy(cold, monkeypatch):
    monkeypatch.setenv("TFG_JIT", "0")
    monkeypatch.setitem(jit._state, "warm", True)
    assert vector_math.sigmoid(np.ones(3, F32)) is None


W = np.random.default_rng(1).standard_normal((64, 64)).astype(F32) * 0.3


def _tanh_sigmoid_graph():
    g = tb.Graph()
    with g:
        x = tb.placeholder(tb.float32, [4, 64], name="x")
        h = tb.tanh(tb.matmul(x, tb.constant(W, name="w")), name="h")
        tb.sigmoid(h, name="s")
    return g.graph


@needs_numba
def test_a_session_runs_numpy_first_and_the_loops_from_its_second_step(cold):
    sess = Session(_tanh_sigmoid_graph())
    x = np.random.default_rng(2).standard_normal((4, 64)).astype(F32) * 3
    first = sess.run(["h:0", "s:0"], {"x:0": x})
    assert not jit.warm() and not vector_math._loaded
    np.testing.assert_array_equal(first[0], np.tanh(x @ W))
    second = sess.run(["h:0", "s:0"], {"x:0": x})
    assert jit.warm() and vector_math._loaded
    np.testing.assert_array_equal(second[0], vector_math.tanh(x @ W))
    np.testing.assert_array_equal(second[1], vector_math.sigmoid(second[0]))
    for a, b in zip(first, second):
        np.testing.assert_allclose(a, b, rtol=3e-7, atol=1e-7)


@needs_numba
def test_fused_loop_chains_give_the_kernels_bits(warm):
    """A while loop whose body is MatMul -> AddV2 -> Tanh -> Sigmoid (one fused chain in the
    compiled loop) against the dataflow executor's kernels, bit for bit."""
    g = tb.Graph()
    with g:
        x0 = tb.placeholder(tb.float32, [8, 32], name="x")
        w = tb.constant(np.random.default_rng(4).standard_normal((32, 32)).astype(F32) * 0.4)
        _, y = tb.while_loop(lambda i, h: i < 6,
                             lambda i, h: (i + 1, tb.sigmoid(tb.tanh(tb.matmul(h, w) + h))),
                             [tb.constant(0), x0])
        tb.identity(y, name="out")
    x = np.random.default_rng(5).standard_normal((8, 32)).astype(F32)
    fast, plain = Session(g.graph), Session(g.graph, fast_path=False)
    for _ in range(2):
        got = fast.run("out:0", {"x:0": x})
        want = plain.run("out:0", {"x:0": x})
    np.testing.assert_array_equal(got, want)
    fused = [call.members for prep in fast.backend._cache.values() for plan in prep.plans
             for prog in (plan.loops or {}).values() for call, _ in prog.body
             if hasattr(call, "members")]
    assert [[m.op for m in members] for members in fused] == [
        ["MatMul", "AddV2", "Tanh", "Sigmoid"]]


@needs_numba
def test_numba_failing_turns_the_loops_off_with_one_line(warm, monkeypatch, capsys):
    loops = vector_math._loops()

    def broken(*args):
        raise RuntimeError("LLVM said no")
    broken.py_func = broken
    monkeypatch.setattr(loops, "tanh_loop", broken)
    x = np.linspace(-2, 2, 9).astype(F32)
    assert vector_math.tanh(x) is None
    np.testing.assert_array_equal(math_ops.tanh_into(x), np.tanh(x))
    assert vector_math.sigmoid(x) is None  # off for the process
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "compiled kernels off" in err[0]
