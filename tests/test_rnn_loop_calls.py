"""The `rnn` benchmark's loop calls (stop 30): a GatherV2 of one index as a view of its
params' row, dh = g W^T through a contiguous copy of a loop-invariant W^T, TanhGrad in one
array, and the gradient accumulations of one G (dW and dU) collected by one call and
summed by one GEMM each when the loop exits. Values: bit for bit the dataflow executor's
(fast_path=False) where the kernels are the same; within float rounding (and numpy's BPTT)
for the deferred sums."""
import numpy as np
import pytest

from tfg import builder as tb
from tfg.executor import Session
from tfg.kernels.nn_ops import tanh_grad

from test_loop_projection import B, F, H, _programs, _rnn_grad, _rnn_grad_reference


def _both(graph, fetches, feeds):
    """(compiled-loop values, the session), dataflow executor values; each run twice."""
    sess = Session(graph)
    got = sess.run(fetches, feeds)
    again = sess.run(fetches, feeds)
    for a, b in zip(got, again):
        np.testing.assert_array_equal(a, b)
    plain = Session(graph, fast_path=False).run(fetches, feeds)
    return got, sess, plain


def _calls(sess, name):
    return [c for prog in _programs(sess) for c, _ in prog.body_rest
            if getattr(c, "__name__", "") == name]


def _transposed_copy(call):
    """The (operand, its contiguous transpose) a matmul_call keeps."""
    return call.__closure__[call.__code__.co_freevars.index("seen")].cell_contents[0]


@pytest.mark.parametrize("dtype", [tb.float32, tb.float64])
@pytest.mark.parametrize("n", [0, 1, 9])
def test_rnn_gradient_loop(dtype, n):
    """The RNN's loss and dW, dU: the compiled loops against the dataflow executor and numpy;
    dh = g W^T reads W^T made contiguous once (from the second iteration), and dW and dU
    share one collecting call."""
    npd = np.float32 if dtype == tb.float32 else np.float64
    graph, (w, u) = _rnn_grad(n, dtype)
    x = np.random.default_rng(n).standard_normal((max(n, 1), B, F)).astype(npd)
    x0 = x.copy()
    fetches = ["loss", "grad/W", "grad/U"]
    got, sess, plain = _both(graph, fetches, {"x": x})
    np.testing.assert_array_equal(x, x0)  # the feed, of which the loop gathered views
    tol = dict(rtol=1e-5, atol=1e-5) if npd is np.float32 else dict(rtol=1e-12, atol=1e-12)
    for a, b in zip(got, plain):
        assert a.dtype == npd
        np.testing.assert_allclose(a, b, **tol)
    np.testing.assert_array_equal(got[0], plain[0])  # the forward loop: the same kernels
    dw, du = _rnn_grad_reference(x.astype(np.float64), w.astype(np.float64),
                                 u.astype(np.float64), n)
    np.testing.assert_allclose(got[1], dw, **tol)
    np.testing.assert_allclose(got[2], du, **tol)
    assert len(_calls(sess, "collect")) == 1
    (mm,) = _calls(sess, "mm")
    weight, transposed = _transposed_copy(mm)
    if n > 1:
        np.testing.assert_array_equal(weight, w)
        # B = 4 rows: a GEMM (2-3 rows are the kernel's GEMVs and keep the view)
        assert transposed is not None and transposed.flags.c_contiguous
        np.testing.assert_array_equal(transposed, w.T)


def _recurrence(m, k, invariant, dtype=tb.float32):
    """h' = h W^T (invariant: W a constant) or h W_i^T with W_{i+1} = 0.9 W_i (the right
    operand a new array every iteration) over 6 iterations of a builder loop; h is [m, k].
    (The product is the iteration's last op, as the RNN's dh: not in a fused chain.)"""
    rng = np.random.default_rng(m * 100 + k)
    npd = np.float32 if dtype == tb.float32 else np.float64
    w = (rng.standard_normal((k, k)) / np.sqrt(k)).astype(npd)
    h0 = rng.standard_normal((m, k)).astype(npd)
    with tb.Graph() as g:
        def body(i, h, wv):
            nxt = wv if invariant else tb.multiply(wv, tb.constant(npd(0.9)))
            return i + 1, tb.matmul(h, wv, transpose_b=True, name="dh"), nxt

        _, h, _ = tb.while_loop(lambda i, h, wv: i < 6, body,
                                [tb.constant(0), tb.constant(h0), tb.constant(w, name="W")],
                                name="loop")
        tb.identity(h, name="out")
    return g.graph


@pytest.mark.parametrize("m", [1, 2, 3, 4, 33])
@pytest.mark.parametrize("dtype", [tb.float32, tb.float64])
def test_matmul_transpose_b_same_bits(m, dtype):
    """MatMul(h, W, transpose_b) in a compiled loop: bit for bit the kernel's product, with
    W^T kept contiguous (4 rows or more) or the transposed view (1-3 rows: GEMVs)."""
    got, sess, plain = _both(_recurrence(m, 24, True, dtype), ["out"], {})
    np.testing.assert_array_equal(got[0], plain[0])
    mms = [c for prog in _programs(sess) for c, it in prog.body_rest
           if getattr(c, "__name__", "") == "mm" and it.name.endswith("dh")]
    assert len(mms) == 1
    kept = _transposed_copy(mms[0])[1]
    assert (kept is not None) == (m > 3)


def test_matmul_transpose_b_of_a_new_operand_each_iteration():
    """A right operand made in the loop (a new array every iteration) is not copied: the
    kernel's product each time, the same bits."""
    got, sess, plain = _both(_recurrence(8, 16, False), ["out"], {})
    np.testing.assert_array_equal(got[0], plain[0])
    mms = [c for prog in _programs(sess) for c, it in prog.body_rest
           if getattr(c, "__name__", "") == "mm" and it.name.endswith("dh")]
    assert mms and _transposed_copy(mms[0])[1] is None


def test_matmul_transpose_b_of_a_fed_weight_changed_in_place_between_runs():
    """A fed W that the caller updates in place between runs (a numpy training loop's
    `W -= lr * g`) is the same object each run: its transpose must not be kept (only a
    read-only Const's is), or the second run would use the first run's W."""
    rng = np.random.default_rng(3)
    h0 = rng.standard_normal((8, 16)).astype(np.float32)
    with tb.Graph() as g:
        wfeed = tb.placeholder(tb.float32, [16, 16], name="W")

        def body(i, h):
            return i + 1, tb.matmul(h, wfeed, transpose_b=True, name="dh")

        _, h = tb.while_loop(lambda i, h: i < 6, body, [tb.constant(0), tb.constant(h0)],
                             name="loop")
        tb.identity(h, name="out")
    sess, plain = Session(g.graph), Session(g.graph, fast_path=False)
    w = (rng.standard_normal((16, 16)) / 4).astype(np.float32)
    for _ in range(3):
        np.testing.assert_array_equal(sess.run("out", {"W": w}), plain.run("out", {"W": w}))
        w *= np.float32(0.5)  # in place: the same array object next run


@pytest.mark.parametrize("axis", [0, 1])
def test_gather_of_one_index(axis):
    """x[:, i] or x[i] of a fed array summed over a loop: the compiled loop's gather (a view
    of the row along axis 0, a copy along another) gives the dataflow executor's values, the
    last row gathered is fetched unchanged, and the feed is left as it was."""
    x = np.random.default_rng(axis).standard_normal((5, 5, 3)).astype(np.float32)
    with tb.Graph() as g:
        xp = tb.placeholder(tb.float32, [5, 5, 3], name="x")

        def body(i, s, last):
            row = tb.gather(xp, i, axis=axis)
            return i + 1, tb.add(s, tb.tanh(row)), row

        _, s, last = tb.while_loop(lambda i, s, last: i < 5, body,
                                   [tb.constant(0), tb.zeros([5, 3], tb.float32),
                                    tb.zeros([5, 3], tb.float32)], name="loop")
        tb.identity(s, name="s")
        tb.identity(last, name="last")
    x0 = x.copy()
    got, sess, plain = _both(g.graph, ["s", "last"], {"x": x})
    for a, b in zip(got, plain):
        np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(got[1], x[4] if axis == 0 else x[:, 4])
    np.testing.assert_array_equal(x, x0)
    assert _calls(sess, "gather")


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
@pytest.mark.parametrize("shapes", [((4, 6), (4, 6)), ((), ()), ((4, 6), (6,))])
def test_tanh_grad_values(dtype, shapes):
    """TanhGrad dy * (1 - y * y): the same bits as the expression, in one array for two
    arrays of one shape; 0-d and broadcast operands as the expression computes them."""
    rng = np.random.default_rng(7)
    y = np.asarray(np.tanh(rng.standard_normal(shapes[0]))).astype(dtype)
    dy = np.asarray(rng.standard_normal(shapes[1])).astype(dtype)
    got = tanh_grad(None, y, dy)
    want = dy * (1 - y * y)
    assert np.asarray(got).dtype == dtype and np.shape(got) == np.shape(want)
    np.testing.assert_array_equal(got, want)
    assert got is not y and got is not dy
