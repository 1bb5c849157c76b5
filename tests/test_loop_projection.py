"""Input projections hoisted out of compiled loop bodies (tfg/executor/loop_projection.py):
an RNN's `x_t W` for all time steps as one GEMM, each iteration its row block. Values agree
with the unhoisted loop (TFG_LOOP_PROJECT=0) within float rounding and with numpy and
TensorFlow's fixtures; what the projection does not take (an index out of range, items of
two shapes or unset, a list written in the loop, an index that is not the counter, a
projection over the memory limit, zero iterations) runs the nodes' own calls, with their
errors; and the Keras LSTM, GRU and masked BiLSTM graphs are projected (a test that fails
if the hoisting silently stops applying to them)."""
import json

import numpy as np
import pytest

from case_check import load_run_case
from conftest import FIXTURES
from tfg import builder as tb
from tfg.errors import TfgRuntimeError
from tfg.executor import Session
from tfg.executor import loop_projection as LP
from tfg.graphdef import io
from tfg.schemas.dtypes import DType

T, B, F, H = 6, 4, 3, 5


def _weights(npd, f=F):
    rng = np.random.default_rng(1)
    return (rng.standard_normal((f, H)).astype(npd), rng.standard_normal((H, H)).astype(npd),
            rng.standard_normal(H).astype(npd))


def _rnn(read="list", bias=True, dtype=tb.float64, index="counter", written=False, f=F):
    """h_t = tanh(x_t W (+ b) + h U) over a tfg.builder while loop of `n` iterations; x_t
    read from a TensorList of x's rows (`read` "list") or by GatherV2 ("gather"). `index`:
    "counter" (i), or "reverse" (n - 1 - i: not the counter); `written`: the list is a loop
    variable the body sets (x_t written back doubled) instead of an invariant."""
    npd = np.float32 if dtype == tb.float32 else np.float64
    w, u, b = _weights(npd, f)
    with tb.Graph() as g:
        x = tb.placeholder(dtype, [None, None, f], name="x")
        n = tb.placeholder(tb.int32, [], name="n")
        h0 = tb.placeholder(dtype, [None, H], name="h0")
        es = tb.constant(np.array([-1, f], np.int32))
        xs = g.make_op("TensorListFromTensor", [x, es],
                       {"element_dtype": dtype, "shape_type": tb.int32}, "xs",
                       out_dtypes=[DType.VARIANT]).outputs[0]

        def get(lst, i):
            if read == "gather":
                return tb.gather(x, i, name="x_t")
            return g.make_op("TensorListGetItem", [lst, i, es], {"element_dtype": dtype},
                             "x_t", out_dtypes=[dtype]).outputs[0]

        def cell(i, h, lst):
            t = i if index == "counter" else tb.subtract(tb.subtract(n, 1), i)
            x_t = get(lst, t)
            z = tb.matmul(x_t, tb.constant(w), name="proj")
            if bias:
                z = tb.bias_add(z, tb.constant(b), name="proj_b")
            h2 = tb.tanh(tb.add(z, tb.matmul(h, tb.constant(u), name="rec")), name="h2")
            if written:
                lst = g.make_op("TensorListSetItem", [lst, t, tb.multiply(x_t, 2.0)],
                                {"element_dtype": dtype}, "rewrite",
                                out_dtypes=[DType.VARIANT]).outputs[0]
            return i + 1, h2, lst

        if written:
            _, h, _ = tb.while_loop(lambda i, h, lst: i < n, cell, [tb.constant(0), h0, xs],
                                    name="loop")
        else:
            _, h = tb.while_loop(lambda i, h: i < n, lambda i, h: cell(i, h, xs)[:2],
                                 [tb.constant(0), h0], name="loop")
        tb.identity(h, name="h")
    return g.graph, (w, u, b if bias else np.zeros_like(b))


def _reference(feeds, weights, index="counter"):
    w, u, b = weights
    h = feeds["h0"]
    n = int(feeds["n"])
    for i in range(n):
        t = i if index == "counter" else n - 1 - i
        h = np.tanh(feeds["x"][t] @ w + b + h @ u)
    return h


def _feeds(n, npd=np.float64, t=T):
    rng = np.random.default_rng(n + 10)
    return {"x": rng.standard_normal((t, B, F)).astype(npd), "n": np.int32(n),
            "h0": rng.standard_normal((B, H)).astype(npd)}


@pytest.fixture
def made(monkeypatch):
    """[projections made (None: it did not apply)]: every call of LP._project."""
    got = []
    real = LP._project

    def counting(*args):
        p = real(*args)
        got.append(p)
        return p
    monkeypatch.setattr(LP, "_project", counting)
    return got


def _programs(sess):
    return [prog for prepared in sess.backend._cache.values() for plan in prepared.plans
            for prog in (plan.loops or {}).values()]


def _projected(sess):
    """The items of the projected calls of the sessions' compiled loops."""
    return [it for prog in _programs(sess) for c, it in prog.body_rest
            if getattr(c, "__name__", "") == "project"]


def _run(graph, fetches, feeds, project, monkeypatch, **kw):
    monkeypatch.setenv("TFG_LOOP_PROJECT", "1" if project else "0")
    sess = Session(graph, **kw)
    out = sess.run(fetches, feeds)
    again = sess.run(fetches, feeds)  # (a second run makes its own projection)
    for a, b in zip(out if isinstance(fetches, list) else [out],
                    again if isinstance(fetches, list) else [again]):
        np.testing.assert_array_equal(a, b)
    return out, sess


@pytest.mark.parametrize("read", ["list", "gather"])
@pytest.mark.parametrize("bias", [True, False])
@pytest.mark.parametrize("n", [1, T])
def test_projected_equals_unprojected_and_numpy(read, bias, n, made, monkeypatch):
    graph, weights = _rnn(read, bias)
    feeds = _feeds(n)
    got, sess = _run(graph, "h", feeds, True, monkeypatch)
    want, plain = _run(graph, "h", feeds, False, monkeypatch)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)
    np.testing.assert_allclose(got, _reference(feeds, weights), rtol=1e-10, atol=1e-12)
    (it,) = _projected(sess)
    assert it.op == "MatMul"  # (float64: no _FusedMatMul, TensorFlow's remapper's rule)
    assert not _projected(plain)
    assert len(made) == 2 and all(p is not None and p.shape == (T, B, H) for p in made)
    ops = {it.op for prog in _programs(sess) for _, it in prog.body_rest}
    # the list read went with its MatMul; a Gather too (nothing else reads x_t here)
    assert not ops & {"TensorListGetItem", "GatherV2"}


@pytest.mark.parametrize("read", ["list", "gather"])
def test_float32_fused_bias_within_rounding(read, made, monkeypatch):
    """float32: the MatMul and its BiasAdd are one _FusedMatMul (the step's remap), whose
    bias the projection adds to its product as the kernel does."""
    graph, weights = _rnn(read, True, tb.float32)
    feeds = _feeds(T, np.float32)
    got, sess = _run(graph, "h", feeds, True, monkeypatch)
    want, _ = _run(graph, "h", feeds, False, monkeypatch)
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(got, _reference(feeds, weights), rtol=1e-4, atol=1e-5)
    assert [it.op for it in _projected(sess)] == ["_FusedMatMul"]
    assert made and made[0].dtype == np.float32


def test_zero_iterations_compute_nothing(made, monkeypatch):
    graph, _ = _rnn()
    feeds = _feeds(0)
    got, sess = _run(graph, "h", feeds, True, monkeypatch)
    np.testing.assert_array_equal(got, feeds["h0"])
    assert _projected(sess) and made == []


@pytest.mark.parametrize("read, words", [
    ("list", "Trying to access element 6 in a list with 6 elements"),
    ("gather", "indices\\[\\] = 6 is not in \\[0, 6\\)")])
def test_an_index_out_of_range_is_the_kernels_error(read, words, made, monkeypatch):
    """n > T: the iterations in range read the projection, the one past it runs the read
    and its kernel's error, named as without the projection."""
    graph, _ = _rnn(read)
    feeds = _feeds(T + 1)
    errors = []
    for project in (True, False):
        monkeypatch.setenv("TFG_LOOP_PROJECT", "1" if project else "0")
        with pytest.raises(TfgRuntimeError, match=words) as e:
            Session(graph).run("h", feeds)
        errors.append(str(e.value))
    assert errors[0] == errors[1]
    assert made and made[0] is not None


def _list_graph(items, dtype=tb.float64, op_dtype=None):
    """The loop of _rnn reading a list built outside it by TensorListSetItem (items: the
    arrays to set, None for unset), one iteration per item."""
    w, u, _ = _weights(np.float64 if (op_dtype or dtype) == tb.float64 else np.float32)
    with tb.Graph() as g:
        h0 = tb.placeholder(op_dtype or dtype, [None, H], name="h0")
        es = tb.constant(np.array([-1, F], np.int32))
        lst = g.make_op("TensorListReserve", [es, tb.constant(len(items))],
                        {"element_dtype": dtype, "shape_type": tb.int32}, "xs",
                        out_dtypes=[DType.VARIANT]).outputs[0]
        for k, a in enumerate(items):
            if a is not None:
                lst = g.make_op("TensorListSetItem", [lst, tb.constant(k), tb.constant(a)],
                                {"element_dtype": dtype}, f"set{k}",
                                out_dtypes=[DType.VARIANT]).outputs[0]

        def cell(i, h):
            x_t = g.make_op("TensorListGetItem", [lst, i, es],
                            {"element_dtype": op_dtype or dtype}, "x_t",
                            out_dtypes=[op_dtype or dtype]).outputs[0]
            z = tb.matmul(x_t, tb.constant(w), name="proj")
            return i + 1, tb.tanh(tb.add(z, tb.matmul(h, tb.constant(u))), name="h2")

        _, h = tb.while_loop(lambda i, h: i < len(items), cell, [tb.constant(0), h0],
                             name="loop")
        tb.identity(h, name="h")
    return g.graph


@pytest.mark.parametrize("case", ["two shapes", "an unset item"])
def test_lists_the_projection_does_not_take_run_the_nodes(case, made, monkeypatch):
    rng = np.random.default_rng(3)
    if case == "two shapes":  # (the rows broadcast against h's: batch 1 then batch B)
        items = [rng.standard_normal((1, F)), rng.standard_normal((B, F)),
                 rng.standard_normal((B, F))]
    else:
        items = [rng.standard_normal((B, F)), None, rng.standard_normal((B, F))]
    graph = _list_graph(items)
    feeds = {"h0": rng.standard_normal((B, H))}
    got, sess = _run(graph, "h", feeds, True, monkeypatch)
    want, _ = _run(graph, "h", feeds, False, monkeypatch)
    np.testing.assert_array_equal(got, want)  # the same calls: the same bits
    assert _projected(sess) and made and all(p is None for p in made)


def test_a_list_of_another_dtype_than_the_op_is_the_kernels_error(made, monkeypatch):
    graph = _list_graph([np.ones((B, F), np.float32)] * 2, tb.float32, op_dtype=tb.float64)
    errors = []
    for project in (True, False):
        monkeypatch.setenv("TFG_LOOP_PROJECT", "1" if project else "0")
        with pytest.raises(TfgRuntimeError, match="Invalid data types") as e:
            Session(graph).run("h", {"h0": np.zeros((B, H))})
        errors.append(str(e.value))
    assert errors[0] == errors[1] and all(p is None for p in made)


@pytest.mark.parametrize("case", ["written in the loop", "not the counter"])
def test_not_projected(case, made, monkeypatch):
    kw = {"written": True} if case == "written in the loop" else {"index": "reverse"}
    graph, weights = _rnn(**kw)
    feeds = _feeds(T)
    got, sess = _run(graph, "h", feeds, True, monkeypatch)
    want, _ = _run(graph, "h", feeds, False, monkeypatch)
    np.testing.assert_array_equal(got, want)
    assert not _projected(sess) and made == []
    if case == "not the counter":
        np.testing.assert_allclose(got, _reference(feeds, weights, "reverse"), rtol=1e-10)


def test_a_projection_over_the_memory_limit_runs_per_iteration(made, monkeypatch):
    """Each iteration's [4, 5] product fits the per-tensor limit, the [60, 4, 5] projection
    (9,600 bytes) does not: the MatMuls run one by one, no error."""
    graph, _ = _rnn(read="gather", bias=False, f=1)
    feeds = _feeds(60, t=60)
    feeds["x"] = feeds["x"][:, :, :1].copy()  # (x itself, 1,920 bytes, within the limit)
    got, sess = _run(graph, "h", feeds, True, monkeypatch, max_memory=4096)
    want, _ = _run(graph, "h", feeds, False, monkeypatch, max_memory=4096)
    np.testing.assert_array_equal(got, want)
    assert _projected(sess) and made and all(p is None for p in made)
    made.clear()
    got, _ = _run(graph, "h", feeds, True, monkeypatch)  # (the default limit: projected)
    assert made and made[0] is not None
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)


# --- TensorFlow's graphs ------------------------------------------------------------------
def _real_model(name, project, monkeypatch):
    """(outputs, Session, meta, expected) of a frozen Keras model of the real-model suite
    (tools/gen_real_models.py: TensorFlow's values)."""
    case = FIXTURES / "real_models" / name
    meta = json.loads((case / "case.json").read_text())
    feeds = dict(np.load(case / "feeds.npz"))
    out, sess = _run(io.load(str(case / "graph.pb")), meta["fetches"], feeds, project,
                     monkeypatch)
    return out, sess, meta, np.load(case / "expected.npz")


@pytest.mark.parametrize("name, op, reads", [
    ("keras_lstm", "MatMul", 0), ("keras_gru", "_FusedMatMul", 0),
    # the masked BiLSTM: its backward loops read a list reversed before it was made
    # (ReverseV2, then TensorListFromTensor) at the counter, as the forward ones; the
    # mask's list read stays
    ("keras_bilstm_masked", "MatMul", 1)])
def test_frozen_keras_rnns_are_projected(name, op, reads, made, monkeypatch):
    """Each loop of the frozen Keras LSTM, GRU and masked BiLSTM has its input product
    projected (this fails if the hoisting stops applying to them) and as many list reads
    left as the cell needs besides; TensorFlow's values, and the unprojected loop's within
    float rounding."""
    got, sess, meta, expected = _real_model(name, True, monkeypatch)
    want, _, _, _ = _real_model(name, False, monkeypatch)
    progs = _programs(sess)
    assert progs and len(_projected(sess)) == len(progs)
    assert all(it.op == op for it in _projected(sess))
    assert all(sum(it.op == "TensorListGetItem" for _, it in prog.body_rest) == reads
               for prog in progs)
    assert len(made) == 2 * len(progs) and all(p is not None for p in made)
    for key, a, b in zip(meta["fetches"], got, want):
        np.testing.assert_allclose(a, expected[key], rtol=meta["rtol"], atol=meta["atol"])
        np.testing.assert_allclose(a, b, rtol=1e-6, atol=1e-6 * np.abs(b).max())


# --- gradient accumulations deferred to the loop's end (loop_accumulation.py) -----------
def _rnn_grad(n_steps, dtype=tb.float64):
    """bench_rnn.py's graph, small: h_t = tanh(h W + x_t U) over a TF1-style loop of
    `n_steps` (x_t by GatherV2), loss = sum(h_T), and `tfg grad` of it for W and U."""
    import tfg

    npd = np.float32 if dtype == tb.float32 else np.float64
    rng = np.random.default_rng(5)
    w = (rng.standard_normal((H, H)) * 0.3).astype(npd)
    u = (rng.standard_normal((F, H)) * 0.3).astype(npd)
    with tb.Graph() as g:
        x = tb.placeholder(dtype, [None, B, F], name="x")
        wc, uc = tb.constant(w, name="W"), tb.constant(u, name="U")

        def body(i, h):
            return i + 1, tb.tanh(tb.add(tb.matmul(h, wc), tb.matmul(tb.gather(x, i), uc)))

        _, h = tb.while_loop(lambda i, h: i < n_steps, body,
                             [tb.constant(0), tb.zeros([B, H], dtype)], name="rnn")
        tb.reduce_sum(h, name="loss")
    return tfg.grad(g.graph, "loss", "W,U"), (w, u)


def _rnn_grad_reference(x, w, u, n_steps):
    hs = [np.zeros((B, H))]
    for t in range(n_steps):
        hs.append(np.tanh(hs[-1] @ w + x[t] @ u))
    dw, du, dh = np.zeros_like(w), np.zeros_like(u), np.ones((B, H))
    for t in reversed(range(n_steps)):
        dz = dh * (1 - hs[t + 1] ** 2)
        dw += hs[t].T @ dz
        du += x[t].T @ dz
        dh = dz @ w.T
    return dw, du


def _collects(sess):
    return [c for prog in _programs(sess) for c, _ in prog.body_rest
            if getattr(c, "__name__", "") == "collect"]


@pytest.mark.parametrize("n", [0, 1, 7])
def test_deferred_gradient_accumulations(n, monkeypatch):
    """dW and dU of the gradient loop summed by one GEMM each when it exits: the values of
    the loop adding the products one by one (within rounding), numpy's BPTT; zero
    iterations: the zeros the accumulators start from. dW and dU multiply the same G (the
    TanhGrad): one call collects both, and one GEMM makes both sums."""
    graph, (w, u) = _rnn_grad(n)
    x = np.random.default_rng(n).standard_normal((max(n, 1), B, F))
    fetches = ["loss", "grad/W", "grad/U"]
    got, sess = _run(graph, fetches, {"x": x}, True, monkeypatch)
    want, plain = _run(graph, fetches, {"x": x}, False, monkeypatch)
    assert len(_collects(sess)) == 1 and not _collects(plain)
    assert not any(it.op == "MatMul" and it.ctx.attrs.get("transpose_a")
                   for prog in _programs(sess) for _, it in prog.body_rest)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-13)
    dw, du = _rnn_grad_reference(x, w, u, n)
    np.testing.assert_allclose(got[1], dw, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(got[2], du, rtol=1e-10, atol=1e-12)
    if n == 0:
        assert not np.any(got[1]) and not np.any(got[2])


def test_deferred_accumulations_float32_within_rounding(monkeypatch):
    graph, _ = _rnn_grad(30, tb.float32)
    x = np.random.default_rng(2).standard_normal((30, B, F)).astype(np.float32)
    got, sess = _run(graph, ["grad/W", "grad/U"], {"x": x}, True, monkeypatch)
    want, _ = _run(graph, ["grad/W", "grad/U"], {"x": x}, False, monkeypatch)
    assert _collects(sess)
    for a, b in zip(got, want):
        assert a.dtype == np.float32
        np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6 * np.abs(b).max())


def test_deferred_accumulations_within_the_memory_limit(monkeypatch):
    """dW's buffers ([rows, 5] float64, 40 bytes a row, 4 rows an iteration) under a
    512-byte limit hold 12 rows: the sums so far are made when the next rows would not fit
    and new buffers start with them; no error, and the values the loop's adding one by one,
    within rounding."""
    from tfg.executor.loop_buffers import BufferPool

    taken = []
    real = BufferPool.take

    def take(self, shape, dtype):
        taken.append(shape[0] * shape[1] * np.dtype(dtype).itemsize)
        return real(self, shape, dtype)
    monkeypatch.setattr(BufferPool, "take", take)
    graph, _ = _rnn_grad(10)
    x = np.random.default_rng(3).standard_normal((10, B, F))
    fetches = ["grad/W", "grad/U"]
    got, sess = _run(graph, fetches, {"x": x}, True, monkeypatch, max_memory=512)
    want, _ = _run(graph, fetches, {"x": x}, False, monkeypatch, max_memory=512)
    assert _collects(sess)
    assert taken and max(taken) <= 512 and len(taken) > 8  # (several buffers a run)
    for a, b in zip(got, want):
        np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-13)


def test_an_accumulator_read_in_the_loop_is_not_deferred(monkeypatch):
    """acc += a_t^T b_t where the body also reads acc (s += sum(acc)): every iteration's
    value is seen, so the products are added one by one as written."""
    rng = np.random.default_rng(4)
    a, b = rng.standard_normal((5, B, F)), rng.standard_normal((5, B, H))
    with tb.Graph() as g:
        xa, xb = tb.constant(a), tb.constant(b)

        def body(i, acc, s):
            acc2 = tb.add(acc, tb.matmul(tb.gather(xa, i), tb.gather(xb, i), transpose_a=True))
            return i + 1, acc2, tb.add(s, tb.reduce_sum(acc))

        _, acc, s = tb.while_loop(lambda i, acc, s: i < 5, body,
                                  [tb.constant(0), tb.zeros([F, H], tb.float64),
                                   tb.constant(0.0, tb.float64)], name="loop")
        tb.identity(acc, name="acc")
        tb.identity(s, name="s")
    got, sess = _run(g.graph, ["acc", "s"], {}, True, monkeypatch)
    assert not _collects(sess)
    acc, s = np.zeros((F, H)), 0.0
    for t in range(5):
        s += acc.sum()
        acc = acc + a[t].T @ b[t]
    np.testing.assert_allclose(got[0], acc, rtol=1e-12)
    np.testing.assert_allclose(got[1], s, rtol=1e-12)


def _biased_rnn_grad(n_steps, xs, rank3=False):
    """h_t = tanh(h W + x_t U + b) over a TF1-style loop, loss = sum(h_T), and `tfg grad`
    of it for `xs` (a BiasAdd whose gradient loop sums BiasAddGrad(dz) into db); `rank3`:
    the BiasAdd over the pre-activation reshaped to [B, 1, H] (a rank-3 gradient)."""
    import tfg

    rng = np.random.default_rng(6)
    w = rng.standard_normal((H, H)) * 0.3
    u = rng.standard_normal((F, H)) * 0.3
    b = rng.standard_normal(H) * 0.3
    with tb.Graph() as g:
        x = tb.placeholder(tb.float64, [None, B, F], name="x")
        wc, uc, bc = tb.constant(w, name="W"), tb.constant(u, name="U"), tb.constant(b, name="b")

        def body(i, h):
            z = tb.add(tb.matmul(h, wc), tb.matmul(tb.gather(x, i), uc))
            if rank3:
                z = tb.reshape(tb.bias_add(tb.reshape(z, [B, 1, H]), bc), [B, H])
            else:
                z = tb.bias_add(z, bc)
            return i + 1, tb.tanh(z)

        _, h = tb.while_loop(lambda i, h: i < n_steps, body,
                             [tb.constant(0), tb.zeros([B, H], tb.float64)], name="rnn")
        tb.reduce_sum(h, name="loss")
    return tfg.grad(g.graph, "loss", xs), (w, u, b)


def _biased_reference(x, w, u, b, n_steps):
    hs = [np.zeros((B, H))]
    for t in range(n_steps):
        hs.append(np.tanh(hs[-1] @ w + x[t] @ u + b))
    dw, db, dh = np.zeros_like(w), np.zeros_like(b), np.ones((B, H))
    for t in reversed(range(n_steps)):
        dz = dh * (1 - hs[t + 1] ** 2)
        dw += hs[t].T @ dz
        db += dz.sum(axis=0)
        dh = dz @ w.T
    return dw, db


def _bias_grads(prog):
    return [it for _, it in prog.body_rest if it.op == "BiasAddGrad"]


@pytest.mark.parametrize("xs", ["W,U,b", "b"])
@pytest.mark.parametrize("n", [0, 1, 7])
def test_deferred_bias_gradient_sums(xs, n, monkeypatch):
    """db = sum_t BiasAddGrad(dz_t) as the column sums of the collected dz rows when the
    loop exits: with dW and dU (one call collects dz for the three) or alone (xs "b"); the
    values of the loop adding them one by one (within rounding) and numpy's BPTT; zero
    iterations: zeros."""
    graph, (w, u, b) = _biased_rnn_grad(n, xs)
    x = np.random.default_rng(n + 1).standard_normal((max(n, 1), B, F))
    fetches = ["grad/" + v for v in xs.split(",")]
    got, sess = _run(graph, fetches, {"x": x}, True, monkeypatch)
    want, plain = _run(graph, fetches, {"x": x}, False, monkeypatch)
    assert len(_collects(sess)) == 1 and not _collects(plain)
    assert all(not _bias_grads(prog) for prog in _programs(sess))
    assert any(_bias_grads(prog) for prog in _programs(plain))
    for a, c in zip(got, want):
        np.testing.assert_allclose(a, c, rtol=1e-12, atol=1e-13)
    dw, db = _biased_reference(x, w, u, b, n)
    np.testing.assert_allclose(got[-1], db, rtol=1e-10, atol=1e-12)
    if xs != "b":
        np.testing.assert_allclose(got[0], dw, rtol=1e-10, atol=1e-12)
    if n == 0:
        assert not np.any(got[-1])


def test_a_rank3_bias_gradient_runs_its_nodes(monkeypatch):
    """A BiasAddGrad of a [B, 1, H] gradient: the collected rows are not its operand, so
    every iteration runs BiasAddGrad and the AddV2 as written (their values: numpy's)."""
    graph, (w, u, b) = _biased_rnn_grad(5, "b", rank3=True)
    x = np.random.default_rng(9).standard_normal((5, B, F))
    got, sess = _run(graph, ["grad/b"], {"x": x}, True, monkeypatch)
    want, _ = _run(graph, ["grad/b"], {"x": x}, False, monkeypatch)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-12, atol=1e-13)
    np.testing.assert_allclose(got[0], _biased_reference(x, w, u, b, 5)[1], rtol=1e-10)


def _addn_accumulations(axis, g_rows=B, fed=False):
    """A TF2 gradient loop's accumulations (AddN of the accumulator and the term): acc_w +=
    a_t^T g_t and acc_b += Reshape(Sum(g_t, axis), [H]) over 6 iterations, g_t = tanh of a
    [g_rows, H] row block. `axis` [0]: the bias form (the column sums of g); [1] with g_rows
    == H: the same shapes, the other sums. `fed`: the axis a placeholder "axis" (fed), not
    a Const (known only when the loop runs)."""
    rng = np.random.default_rng(8)
    a, g = rng.standard_normal((6, g_rows, F)), rng.standard_normal((6, g_rows, H))
    with tb.Graph() as gr:
        xa, xg = tb.constant(a), tb.constant(g)
        sum_axis = tb.placeholder(tb.int32, [1], name="axis") if fed else axis

        def body(i, acc_w, acc_b):
            g_t = tb.tanh(tb.gather(xg, i))
            acc_w = tb.add_n([acc_w, tb.matmul(tb.gather(xa, i), g_t, transpose_a=True)])
            acc_b = tb.add_n([acc_b, tb.reshape(tb.reduce_sum(g_t, axis=sum_axis), [H])])
            return i + 1, acc_w, acc_b

        _, acc_w, acc_b = tb.while_loop(
            lambda i, w, b: i < 6, body,
            [tb.constant(0), tb.zeros([F, H], tb.float64), tb.zeros([H], tb.float64)],
            name="loop")
        tb.identity(acc_w, name="w")
        tb.identity(acc_b, name="b")
    want_w = sum(a[t].T @ np.tanh(g[t]) for t in range(6))
    want_b = sum(np.tanh(g[t]).sum(axis=axis[0]) for t in range(6))
    return gr.graph, want_w, want_b


def _ops_in_loops(sess):
    return {it.op for prog in _programs(sess) for _, it in prog.body_rest}


def test_addn_accumulations_and_row_sums_are_deferred(monkeypatch):
    """AddN(acc, MatMul(a^T, g)) and AddN(acc, Reshape(Sum(g, [0]), [H])) (a TF2 gradient
    loop's weight and bias accumulations): one call collects g for both, the sums are made
    when the loop exits; the values of the loop as written, within rounding, and numpy's."""
    graph, want_w, want_b = _addn_accumulations([0])
    got, sess = _run(graph, ["w", "b"], {}, True, monkeypatch)
    plain, _ = _run(graph, ["w", "b"], {}, False, monkeypatch)
    assert len(_collects(sess)) == 1
    assert not {"Sum", "Reshape", "MatMul"} & _ops_in_loops(sess)
    for x, y, want in zip(got, plain, (want_w, want_b)):
        np.testing.assert_allclose(x, y, rtol=1e-12, atol=1e-13)
        np.testing.assert_allclose(x, want, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("fed", [False, True])
def test_a_sum_over_other_axes_runs_its_nodes(fed, monkeypatch):
    """Reshape(Sum(g, [1]), [H]) of a square g has the bias form's shapes but sums the
    other axis: a Const axis keeps it out of the deferral (its Sum runs each iteration, the
    weight sums are deferred); a fed one is refused when the loop runs (every iteration runs
    the nodes as written, the weight sums with them). The values are numpy's."""
    graph, want_w, want_b = _addn_accumulations([1], g_rows=H, fed=fed)
    feeds = {"axis": np.array([1], np.int32)} if fed else {}
    got, sess = _run(graph, ["w", "b"], feeds, True, monkeypatch)
    assert len(_collects(sess)) == 1
    assert ("Sum" in _ops_in_loops(sess)) != fed
    np.testing.assert_allclose(got[0], want_w, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(got[1], want_b, rtol=1e-10, atol=1e-12)


def test_a_tf2_tape_gradient_loop_defers_its_accumulations():
    """TensorFlow's own gradient While of an LSTM loop (tf.GradientTape in a tf.function,
    tests/fixtures/real_loops/tf2_lstm_tape_tfgrad): its weight accumulation (AddN of
    MatMul) is collected, and the loops push and pop their TensorLists in place
    (loop_list_writes.py); TensorFlow's values."""
    meta, graph, feeds, expected = load_run_case(str(FIXTURES / "real_loops"
                                                     / "tf2_lstm_tape_tfgrad"))
    sess = Session(graph)
    got = sess.run(meta["fetches"], feeds)
    names = {getattr(c, "__name__", "") for prog in _programs(sess) for c, _ in prog.body_rest}
    assert {"collect", "write"} <= names
    assert "IdentityN" not in _ops_in_loops(sess)
    for value, want in zip(got, expected):
        np.testing.assert_allclose(value, want, rtol=meta["rtol"], atol=meta["atol"])
