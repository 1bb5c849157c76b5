"""Fused chains and CSE in compiled loop bodies (tfg/executor/loop_fusion.py, fused_steps.py):
the same values, bit for bit, as the unfused loop (TFG_LOOP_FUSE=0: one prepared call per node)
and close to a numpy reference; operands the steps do not take (a broadcast, a Sigmoid input
below its overflow floor) fall back to the kernels; a failing member is named; temporaries
reused across iterations never leak into values that outlive the iteration; concurrent steps
of one Session do not share buffers."""
import threading

import numpy as np
import pytest

from tfg import builder as tb
from tfg.kernels import math_ops
from tfg.errors import TfgRuntimeError
from tfg.executor import Session

B, F, H = 4, 3, 5


def _lstm_loop(dtype=tb.float32, bias="bias_add"):
    """A Keras-style LSTM cell in a v1 while loop: MatMuls, BiasAdd, Split, three Sigmoids,
    two Tanhs, the c and h updates; `acc` sums h over the iterations (an Exit)."""
    rng = np.random.default_rng(0)
    npd = np.float32 if dtype == tb.float32 else np.float64
    w = rng.standard_normal((F, 4 * H)).astype(npd)
    u = rng.standard_normal((H, 4 * H)).astype(npd)
    kind = bias
    bias = rng.standard_normal((1, 4 * H) if kind == "row" else (4 * H,)).astype(npd)
    with tb.Graph() as b:
        n = tb.placeholder(tb.int32, [], name="n")
        x = tb.placeholder(dtype, [None, None], name="x")
        h0 = tb.placeholder(dtype, [None, H], name="h0")

        def body(i, h, c, acc):
            z = tb.add(tb.matmul(x, tb.constant(w), name="mm_x"),
                       tb.matmul(h, tb.constant(u), name="mm_h"), name="z")
            if kind == "bias_add":
                z = tb.bias_add(z, tb.constant(bias), name="zb")
            else:  # AddV2 of a vector (a step takes it) or a row (it does not) to every row
                z = tb.add(z, tb.constant(bias), name="zb")
            gi, gf, gg, go = tb.split(z, 4, axis=1, name="gates")
            c2 = tb.add(tb.multiply(tb.sigmoid(gf), c), tb.multiply(tb.sigmoid(gi),
                                                                    tb.tanh(gg)), name="c2")
            h2 = tb.multiply(tb.sigmoid(go), tb.tanh(c2), name="h2")
            return i + 1, h2, c2, tb.add(acc, h2, name="acc2")

        _, h, c, acc = tb.while_loop(lambda i, h, c, acc: i < n, body,
                                     [tb.constant(0), h0, tb.zeros_like(h0), tb.zeros_like(h0)],
                                     name="loop")
        tb.identity(h, name="h")
        tb.identity(c, name="c")
        tb.identity(acc, name="acc")
    return b.graph, (w, u, bias)


def _reference(feeds, weights, n):
    w, u, bias = weights
    x, h = feeds["x"], feeds["h0"]
    c, acc = np.zeros_like(h), np.zeros_like(h)
    sig = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
    for _ in range(n):
        z = x @ w + h @ u + bias
        gi, gf, gg, go = np.split(z, 4, axis=1)
        c = sig(gf) * c + sig(gi) * np.tanh(gg)
        h = sig(go) * np.tanh(c)
        acc = acc + h
    return [h, c, acc]


def _feeds(n, scale=1.0, npd=np.float32, f=F):
    rng = np.random.default_rng(n)
    return {"n": n, "x": (scale * rng.standard_normal((B, f))).astype(npd),
            "h0": rng.standard_normal((B, H)).astype(npd)}


def _session(graph, fuse, monkeypatch):
    monkeypatch.setenv("TFG_LOOP_FUSE", "1" if fuse else "0")
    sess = Session(graph)
    return sess


def _run_both(graph, feeds, monkeypatch):
    """(fused outputs, unfused outputs, the fused session), each run twice (the second run
    reuses nothing from the first: buffers live per run)."""
    out = {}
    for fuse in (True, False):
        sess = _session(graph, fuse, monkeypatch)
        first = sess.run(["h", "c", "acc"], feeds)  # compiled under this setting
        second = sess.run(["h", "c", "acc"], feeds)
        for a, b in zip(first, second):
            np.testing.assert_array_equal(a, b)
        out[fuse] = (first, sess)
    return out[True][0], out[False][0], out[True][1]


def _body(sess, first=False):
    """The calls of an iteration's body (`first`: of the first, with the loop invariants)."""
    progs = [prog for prepared in sess.backend._cache.values()
             for plan in prepared.plans for prog in (plan.loops or {}).values()]
    assert len(progs) == 1
    return progs[0].body if first else progs[0].body_rest


@pytest.mark.parametrize("n", [0, 1, 6])
@pytest.mark.parametrize("dtype", [tb.float32, tb.float64])
def test_a_fused_lstm_cell_equals_the_unfused_loop_bit_for_bit(n, dtype, monkeypatch):
    graph, weights = _lstm_loop(dtype)
    npd = np.float32 if dtype == tb.float32 else np.float64
    feeds = _feeds(n, npd=npd)
    fused, unfused, sess = _run_both(graph, feeds, monkeypatch)
    for a, b in zip(fused, unfused):
        assert a.dtype == npd
        np.testing.assert_array_equal(a, b)
    for a, r in zip(fused, _reference(feeds, weights, n)):
        np.testing.assert_allclose(a, r, rtol=2e-5, atol=2e-6)
    chains = [c.members for c, _ in _body(sess) if hasattr(c, "members")]
    # both MatMuls, the Add, BiasAdd, Split, the gates and the c/h updates, acc: one call
    assert len(chains) == 1 and len(chains[0]) >= 14
    assert {"MatMul", "BiasAdd", "Split", "Sigmoid", "Tanh"} <= {m.op for m in chains[0]}


@pytest.mark.parametrize("case", ["sigmoid below its floor", "row", "vector"])
def test_operands_the_steps_do_not_take_run_the_kernels(case, monkeypatch):
    """A row added to a matrix and large negative gate inputs fall back to the kernels; a
    vector along the last axis is a step's broadcast: the same values either way."""
    if case != "sigmoid below its floor":
        graph, weights = _lstm_loop(bias=case)
        feeds = _feeds(5)
    else:  # gate inputs down to about -500: exp(-x) would overflow float32
        graph, weights = _lstm_loop()
        feeds = _feeds(5, scale=200.0)
    fused, unfused, _ = _run_both(graph, feeds, monkeypatch)
    for a, b in zip(fused, unfused):
        np.testing.assert_array_equal(a, b)
    with np.errstate(over="ignore"):
        ref = _reference(feeds, weights, 5)
    for a, r in zip(fused, ref):
        np.testing.assert_allclose(a, r, rtol=2e-5, atol=2e-6)


def test_a_failing_member_of_a_chain_is_named(monkeypatch):
    graph, _ = _lstm_loop()
    sess = _session(graph, True, monkeypatch)
    sess.run(["h"], _feeds(2))
    with pytest.raises(TfgRuntimeError, match=r"node 'loop/mm_x' \(MatMul\) failed"):
        sess.run(["h"], _feeds(2, f=F + 1))  # x: 4 features where W has 3 rows
    assert any(hasattr(c, "members") for c, _ in _body(sess))


def test_values_that_outlive_an_iteration_are_never_reused_buffers(monkeypatch):
    """A chain's temporary that is also a loop variable (the next iteration reads it) and one
    that leaves the loop (an Exit): fresh arrays each iteration, as unfused."""
    with tb.Graph() as b:
        n = tb.placeholder(tb.int32, [], name="n")
        x0 = tb.placeholder(tb.float32, [3], name="x0")

        def body(i, x, prev):
            t = tb.tanh(tb.multiply(x, tb.constant(np.float32(0.9))), name="t")
            s = tb.sigmoid(t, name="s")
            return i + 1, tb.add(s, t, name="x2"), t  # t: a temporary and a loop variable

        _, x, prev = tb.while_loop(lambda i, x, p: i < n, body,
                                   [tb.constant(0), x0, tb.zeros_like(x0)], name="loop")
        tb.identity(x, name="h")
        tb.identity(prev, name="c")
        tb.identity(tb.add(x, prev), name="acc")
    feeds = {"n": 7, "x0": np.float32([0.5, -1.0, 2.0])}
    fused, unfused, sess = _run_both(b.graph, feeds, monkeypatch)
    for a, c in zip(fused, unfused):
        np.testing.assert_array_equal(a, c)
    x, prev = feeds["x0"].astype(np.float64), None
    for _ in range(7):
        prev = np.tanh(x * 0.9)
        x = 1 / (1 + np.exp(-prev)) + prev
    np.testing.assert_allclose(fused[0], x, rtol=1e-5)
    np.testing.assert_allclose(fused[1], prev, rtol=1e-5)
    assert any(hasattr(c, "members") for c, _ in _body(sess))


def test_concurrent_steps_of_one_session_keep_their_own_buffers(monkeypatch):
    graph, weights = _lstm_loop()
    sess = _session(graph, True, monkeypatch)
    cases = [_feeds(k) for k in (3, 4, 5, 6)]
    expected = [sess.run(["h", "c", "acc"], f) for f in cases]
    errors = []

    def work(k):
        try:
            for _ in range(15):
                got = sess.run(["h", "c", "acc"], cases[k])
                for a, e in zip(got, expected[k]):
                    np.testing.assert_array_equal(a, e)
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)
    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]


def test_identical_nodes_of_a_body_run_once(monkeypatch):
    """Three Tiles of one mask with equal multiples (a masked BiLSTM's): one Tile; the
    SelectV2s of one shape take the kernel's `where` straight."""
    with tb.Graph() as b:
        n = tb.placeholder(tb.int32, [], name="n")
        mask = tb.placeholder(tb.bool_, [4, 1], name="mask")
        x0 = tb.placeholder(tb.float32, [4, 3], name="x0")

        def body(i, x, y):
            m1 = tb.tile(mask, tb.constant([1, 3]), name="t1")
            m2 = tb.tile(mask, tb.constant([1, 3]), name="t2")
            m3 = tb.tile(mask, tb.constant([1, 3]), name="t3")
            nx = tb.select(m1, tb.multiply(x, tb.constant(np.float32(2))), x, name="s1")
            ny = tb.select(m2, y, tb.add(y, x), name="s2")
            return i + 1, nx, tb.select(m3, ny, tb.negative(ny), name="s3")

        _, x, y = tb.while_loop(lambda i, x, y: i < n, body,
                                [tb.constant(0), x0, tb.zeros_like(x0)], name="loop")
        tb.identity(x, name="h")
        tb.identity(y, name="c")
        tb.identity(tb.add(x, y), name="acc")
    m = np.array([[True], [False], [True], [False]])
    feeds = {"n": 4, "mask": m, "x0": np.arange(12, dtype=np.float32).reshape(4, 3)}
    fused, unfused, sess = _run_both(b.graph, feeds, monkeypatch)
    for a, c in zip(fused, unfused):
        np.testing.assert_array_equal(a, c)
    x, y = feeds["x0"], np.zeros((4, 3), np.float32)
    for _ in range(4):
        x, y = np.where(m, 2 * x, x), np.where(m, y, y + x)
        y = np.where(m, y, -y)
    np.testing.assert_array_equal(fused[0], x)
    np.testing.assert_array_equal(fused[1], y)
    ops = [it.op for c, it in _body(sess, first=True) for it in getattr(c, "members", [it])]
    assert ops.count("Tile") == 1 and ops.count("SelectV2") == 3  # (the Tile: invariant)


def test_list_get_item_goes_straight_to_the_kernel_only_for_a_set_item():
    """direct_calls.list_get_call: a set item is the kernel's (the stored array itself); an
    unset one, or an index the fast test does not take, is the prepared call's."""
    from tfg.executor.direct_calls import list_get_call
    from tfg.kernels.list_ops import TensorList, tensor_list_get_item
    from tfg.schemas.dtypes import DType

    class Ctx:
        attrs = {"element_dtype": DType.FLOAT}
        cache = {}
    item = np.float32([1, 2])
    lst = TensorList(DType.FLOAT, (2,), [item, None])
    prepared = []
    call = list_get_call(lambda vals, step: prepared.append(vals[1]), tensor_list_get_item,
                         Ctx(), (0, 1, 2), 3)
    vals = [lst, np.int32(0), np.int32(-1), None]
    call(vals, None)
    assert vals[3] is item and not prepared
    for index in (np.int32(1), np.int32(2), np.int32(-1), 0):  # unset, out of range, a Python int
        vals[1] = index
        call(vals, None)
    assert prepared == [1, 2, -1, 0]


@pytest.mark.parametrize("fuse", [True, False])
def test_a_matmul_in_a_loop_keeps_the_memory_limit(fuse, monkeypatch):
    """A MatMul that runs without the guard's layers (fused, or direct_calls.matmul_call) still
    refuses an output over max_memory, exactly where the guard would: 16x16 float32 is 1 KiB."""
    with tb.Graph() as b:
        n = tb.placeholder(tb.int32, [], name="n")
        col = tb.placeholder(tb.float32, [None, 1], name="col")

        def body(i, acc):
            outer = tb.matmul(col, col, transpose_b=True, name="outer")  # (k, k)
            return i + 1, tb.add(acc, tb.reduce_sum(tb.tanh(outer)), name="acc2")

        _, acc = tb.while_loop(lambda i, a: i < n, body, [tb.constant(0), tb.constant(0.0)],
                               name="loop")
        tb.identity(acc, name="acc")
    monkeypatch.setenv("TFG_LOOP_FUSE", "1" if fuse else "0")
    col = np.linspace(-1, 1, 16, dtype=np.float32).reshape(16, 1)
    ok = Session(b.graph, max_memory=1024).run("acc", {"n": 3, "col": col})
    np.testing.assert_allclose(ok, 3 * math_ops.tanh_into(col @ col.T).sum(), rtol=1e-5)
    with pytest.raises(TfgRuntimeError, match=r"node 'loop/outer' \(MatMul\).*memory limit"):
        Session(b.graph, max_memory=1023).run("acc", {"n": 3, "col": col})


@pytest.mark.parametrize("limit,ok", [(None, True), (1000, True), (200, True), (100, False)])
def test_a_strided_slice_in_a_loop_keeps_the_memory_limit(limit, ok):
    """direct_calls.slice_call skips the guard only when the input is within the limit (the
    slice is never larger); above it the guard decides, on the slice's own size (128 B)."""
    with tb.Graph() as b:
        n = tb.placeholder(tb.int32, [], name="n")
        x = tb.placeholder(tb.float32, [64], name="x")  # 256 B, fed: not checked

        def body(i, acc):
            part = tb.strided_slice(x, [0], [32], [1], name="sl")
            return i + 1, tb.add(acc, tb.reduce_sum(part), name="acc2")

        _, acc = tb.while_loop(lambda i, a: i < n, body, [tb.constant(0), tb.constant(0.0)],
                               name="loop")
        tb.identity(acc, name="acc")
    feeds = {"n": 3, "x": np.arange(64, dtype=np.float32)}
    sess = Session(b.graph, max_memory=limit)
    if ok:
        assert float(sess.run("acc", feeds)) == 3 * float(np.arange(32).sum())
    else:
        with pytest.raises(TfgRuntimeError, match=r"node 'loop/sl' \(StridedSlice\).*limit"):
            sess.run("acc", feeds)


def _gru_loop(mask_shape=(B, 1)):
    """A Keras-style GRU cell with a time-step mask in a v1 while loop: the input projection
    MatMul + BiasAdd (a _FusedMatMul after the Session's remap), a Split of it, the recurrent
    gates sliced by StridedSlices of Const bounds, and SelectV2 of a mask of `mask_shape` that
    keeps the previous state; `acc` sums h (an Exit)."""
    rng = np.random.default_rng(1)
    w = rng.standard_normal((F, 3 * H)).astype(np.float32)
    u = rng.standard_normal((H, 3 * H)).astype(np.float32)
    bias = rng.standard_normal(3 * H).astype(np.float32)
    rbias = rng.standard_normal(3 * H).astype(np.float32)
    with tb.Graph() as b:
        n = tb.placeholder(tb.int32, [], name="n")
        x = tb.placeholder(tb.float32, [None, F], name="x")
        h0 = tb.placeholder(tb.float32, [None, H], name="h0")
        mask = tb.placeholder(tb.bool_, list(mask_shape), name="mask")

        def body(i, x, h, c, acc):
            xw = tb.bias_add(tb.matmul(x, tb.constant(w), name="mm_x"), tb.constant(bias),
                             name="xw")
            xz, xr, xh = tb.split(xw, 3, axis=1, name="gates")
            hu = tb.add(tb.matmul(h, tb.constant(u), name="mm_h"), tb.constant(rbias),
                        name="hu")
            hz, hr, hh = (tb.strided_slice(hu, [0, k * H], [0, (k + 1) * H], [1, 1],
                                           begin_mask=1, end_mask=1, name=f"sl{k}")
                          for k in range(3))
            z = tb.sigmoid(tb.add(xz, hz))
            r = tb.sigmoid(tb.add(xr, hr))
            g = tb.tanh(tb.add(xh, tb.multiply(r, hh)))
            h2 = tb.add(tb.multiply(z, h), tb.multiply(tb.subtract(np.float32(1), z), g))
            h3 = tb.select(mask, h2, h, name="keep")
            # (x changes every step, as a sequence's input does: its projection is no
            # loop invariant)
            return (i + 1, tb.multiply(x, np.float32(0.75), name="x2"), h3,
                    tb.select(mask, g, c, name="keep_c"), tb.add(acc, h3, name="acc2"))

        _, _, h, c, acc = tb.while_loop(
            lambda i, x, h, c, acc: i < n, body,
            [tb.constant(0), x, h0, tb.zeros_like(h0), tb.zeros_like(h0)], name="loop")
        tb.identity(h, name="h")
        tb.identity(c, name="c")
        tb.identity(acc, name="acc")
    return b.graph, (w, u, bias, rbias)


def _gru_reference(feeds, weights, n):
    w, u, bias, rbias = weights
    x, h, m = feeds["x"], feeds["h0"], feeds["mask"]
    c, acc = np.zeros_like(h), np.zeros_like(h)
    sig = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
    for _ in range(n):
        xz, xr, xh = np.split(x @ w + bias, 3, axis=1)
        hz, hr, hh = np.split(h @ u + rbias, 3, axis=1)
        z, r = sig(xz + hz), sig(xr + hr)
        g = np.tanh(xh + r * hh)
        h, c = np.where(m, z * h + (1 - z) * g, h), np.where(m, g, c)
        acc = acc + h
        x = x * np.float32(0.75)
    return [h, c, acc]


@pytest.mark.parametrize("mask_shape", [(B, 1), (B, H), (1, H)])
@pytest.mark.parametrize("n", [0, 1, 5])
def test_a_masked_gru_cell_is_one_chain_equal_to_the_unfused_loop(mask_shape, n, monkeypatch):
    """_FusedMatMul, StridedSlice of Const bounds and SelectV2 of a broadcast mask are steps:
    the whole cell is one call, bit for bit the unfused loop's values."""
    graph, weights = _gru_loop(mask_shape)
    rng = np.random.default_rng(n)
    feeds = dict(_feeds(n), mask=rng.random(mask_shape) < 0.5)
    fused, unfused, sess = _run_both(graph, feeds, monkeypatch)
    for a, b in zip(fused, unfused):
        np.testing.assert_array_equal(a, b)
    for a, r in zip(fused, _gru_reference(feeds, weights, n)):
        np.testing.assert_allclose(a, r, rtol=2e-5, atol=2e-6)
    chains = [c.members for c, _ in _body(sess) if hasattr(c, "members")]
    assert len(chains) == 1
    assert {"_FusedMatMul", "StridedSlice", "SelectV2", "Split"} <= {m.op for m in chains[0]}


def test_a_split_piece_that_outlives_the_iteration_is_not_a_reused_block(monkeypatch):
    """A Split along the columns copies its pieces into contiguous blocks; a piece that is a
    loop variable and an Exit (and read after the loop) keeps its values: the blocks of an
    iteration are fresh when a piece escapes."""
    with tb.Graph() as b:
        n = tb.placeholder(tb.int32, [], name="n")
        x0 = tb.placeholder(tb.float32, [B, 2 * H], name="x0")

        def body(i, x, keep):
            z = tb.tanh(tb.multiply(x, tb.constant(np.float32(1.5))), name="z")
            p, q = tb.split(z, 2, axis=1, name="halves")
            return i + 1, tb.concat([tb.sigmoid(q), tb.exp(p)], 1, name="x2"), p

        _, x, keep = tb.while_loop(lambda i, x, k: i < n, body,
                                   [tb.constant(0), x0, tb.zeros([B, H])], name="loop")
        tb.identity(x, name="h")
        tb.identity(keep, name="c")
        tb.identity(tb.reduce_sum(keep), name="acc")
    rng = np.random.default_rng(3)
    feeds = {"n": 6, "x0": rng.standard_normal((B, 2 * H)).astype(np.float32)}
    fused, unfused, sess = _run_both(b.graph, feeds, monkeypatch)
    for a, c in zip(fused, unfused):
        np.testing.assert_array_equal(a, c)
    x = feeds["x0"].astype(np.float64)
    for _ in range(6):
        p, q = np.split(np.tanh(1.5 * x), 2, axis=1)
        x, keep = np.concatenate([1 / (1 + np.exp(-q)), np.exp(p)], 1), p
    np.testing.assert_allclose(fused[1], keep, rtol=1e-5)
    assert any(hasattr(c, "members") for c, _ in _body(sess))


def test_direct_list_set_item_defers_to_the_kernel_off_its_path():
    """direct_calls.list_set_call makes the kernel's new list for an in-range index and an
    array of the dtype the kernel accepted; anything else (a Python int index, an index
    out of range, another dtype) is the prepared call's."""
    from tfg.executor.direct_calls import list_set_call
    from tfg.kernels.list_ops import TensorList, tensor_list_set_item
    from tfg.schemas.dtypes import DType

    class Ctx:
        attrs = {"element_dtype": DType.FLOAT}
        cache = {}
    ctx = Ctx()
    lst = TensorList(DType.FLOAT, (2,), [None, None])
    prepared = []

    def kernel_call(vals, step):
        prepared.append(vals[1])
        vals[3] = tensor_list_set_item(ctx, vals[0], vals[1], vals[2])
    call = list_set_call(kernel_call, tensor_list_set_item, ctx, (0, 1, 2), 3)
    item = np.float32([1, 2])
    vals = [lst, np.int32(0), item, None]
    call(vals, None)  # the first: the kernel's, which accepts float32 into a float list
    call(vals, None)
    vals[1] = np.array(1, np.int32)  # a 0-d index (a Const)
    call(vals, None)
    assert prepared == [0] and vals[3].items == [None, item] and lst.items == [None, None]
    vals[1] = 1  # a Python int: the kernel's to read
    call(vals, None)
    assert prepared == [0, 1] and vals[3].items == [None, item]
    for index, value, words in ((np.int32(2), item, "element 2 in a list with 2"),
                                (np.int32(0), np.float64([1, 2]), "Invalid data types")):
        vals[1], vals[2] = index, value
        with pytest.raises(TfgRuntimeError, match=words):
            call(vals, None)
    assert len(prepared) == 4



@pytest.mark.parametrize("model", ["keras_lstm", "keras_gru"])
def test_keras_savedmodel_loops_fused_equal_unfused(model, monkeypatch):
    """The Keras LSTM and GRU SavedModels (tools/gen_keras_rnn_fixtures.py; their values
    against TensorFlow's are tests/test_keras_rnn.py's): the compiled loops with fused chains
    give the unfused loops' values bit for bit, their whole cell one chain."""
    from conftest import FIXTURES
    from tfg.executor.restore import restore_variables
    from tfg.graphdef import io, savedmodel

    saved = FIXTURES / "savedmodel"
    feeds = dict(np.load(saved / "keras_rnn_feeds.npz"))
    out = {}
    for fuse in (True, False):
        monkeypatch.setenv("TFG_LOOP_FUSE", "1" if fuse else "0")
        g = io.load(str(saved / model))
        sess = Session(g)
        restore_variables(sess, g, savedmodel.read_variables(g.saved_model.path))
        bound, tensors, _ = savedmodel.bind_signature(g, "serving_default", feeds,
                                                      ["output_0"])
        out[fuse] = [sess.run(tensors, feeds=bound)[0] for _ in range(2)]
        if fuse:
            progs = [prog for prepared in sess.backend._cache.values()
                     for plan in prepared.plans for prog in (plan.loops or {}).values()]
            assert progs
            for prog in progs:  # each loop's cell: one chain
                chains = [c for c, _ in prog.body_rest if hasattr(c, "members")]
                assert len(chains) == 1 and len(chains[0].members) >= 12
    for a, b in zip(out[True], out[False]):
        np.testing.assert_array_equal(a, b)


def _steps(sess):
    """The step functions' names of the body's one fused chain."""
    chains = [c for c, _ in _body(sess) if hasattr(c, "members")]
    assert len(chains) == 1
    return [f.__name__ for f in chains[0].steps]


@pytest.mark.parametrize("scale", [1.0, 200.0])
def test_a_gru_cells_gates_are_one_sigmoid_bit_for_bit(scale, monkeypatch):
    """The update and reset gates' Sigmoids (of two Adds of the chain) run as one Sigmoid
    over a stack of both; inputs below the overflow floor in one gate only (scale 200) fall
    back to the kernels, each deciding its own form: the unfused values either way."""
    graph, weights = _gru_loop((B, H))
    rng = np.random.default_rng(4)
    feeds = dict(_feeds(6, scale=scale), mask=rng.random((B, H)) < 0.8)
    fused, unfused, sess = _run_both(graph, feeds, monkeypatch)
    for a, b in zip(fused, unfused):
        np.testing.assert_array_equal(a, b)
    with np.errstate(over="ignore"):
        ref = _gru_reference(feeds, weights, 6)
    for a, r in zip(fused, ref):
        np.testing.assert_allclose(a, r, rtol=2e-5, atol=2e-6)
    names = _steps(sess)
    assert names.count("step_stack") == 1 and "step_sig" not in names


def test_a_sigmoid_that_feeds_the_others_input_is_not_stacked(monkeypatch):
    """s2 = sigmoid(sigmoid(a) + b): the second Sigmoid's input needs the first's value, so
    no stack; a third one beside them (of an Add of the chain) shares one with the first."""
    with tb.Graph() as b:
        n = tb.placeholder(tb.int32, [], name="n")
        x0 = tb.placeholder(tb.float32, [B, H], name="x0")

        def body(i, x, c):
            s1 = tb.sigmoid(tb.add(x, tb.constant(np.float32(0.5))), name="s1")
            s2 = tb.sigmoid(tb.add(s1, x), name="s2")
            s3 = tb.sigmoid(tb.multiply(x, tb.constant(np.float32(-2.0))), name="s3")
            return i + 1, tb.add(tb.multiply(s2, s3), s1, name="x2"), tb.add(c, s2)

        _, x, c = tb.while_loop(lambda i, x, c: i < n, body,
                                [tb.constant(0), x0, tb.zeros([B, H])], name="loop")
        tb.identity(x, name="h")
        tb.identity(c, name="c")
        tb.identity(tb.reduce_sum(c), name="acc")
    rng = np.random.default_rng(5)
    feeds = {"n": 5, "x0": rng.standard_normal((B, H)).astype(np.float32)}
    fused, unfused, sess = _run_both(b.graph, feeds, monkeypatch)
    for a, c in zip(fused, unfused):
        np.testing.assert_array_equal(a, c)
    sig = lambda v: 1 / (1 + np.exp(-v))  # noqa: E731
    x, c = feeds["x0"].astype(np.float64), 0.0
    for _ in range(5):
        s1 = sig(x + 0.5)
        s2 = sig(s1 + x)
        x, c = s2 * sig(-2 * x) + s1, c + s2
    np.testing.assert_allclose(fused[0], x, rtol=1e-5)
    names = _steps(sess)
    assert names.count("step_stack") == 1 and names.count("step_sig") == 1


def _gate_loop():
    """A GRU-style gate, sigmoid(h W + b) split into r and u, in a v1 while loop, and the same
    gate once more on the loop's result outside it."""
    rng = np.random.default_rng(3)
    w = rng.standard_normal((H, 2 * H)).astype(np.float32)
    bias = rng.standard_normal(2 * H).astype(np.float32)
    with tb.Graph() as b:
        n = tb.placeholder(tb.int32, [], name="n")
        h0 = tb.placeholder(tb.float32, [None, H], name="h0")

        def body(i, h):
            gate = tb.sigmoid(tb.bias_add(tb.matmul(h, tb.constant(w)), tb.constant(bias)),
                              name="gate")
            r, u = tb.split(gate, 2, axis=1)
            return i + 1, tb.subtract(tb.multiply(r, h), u, name="h2")

        _, h = tb.while_loop(lambda i, h: i < n, body, [tb.constant(0), h0], name="loop")
        tb.sigmoid(tb.bias_add(tb.matmul(h, tb.constant(w[:, :H])), tb.constant(bias[:H])),
                   name="out")
    return b.graph, w, bias


def test_a_gate_sigmoid_inside_a_loop_stays_in_the_loops_chain():
    """The remapper fuses Sigmoid(MatMul + BiasAdd) into one _FusedMatMul for tfg's Session,
    but not inside a while loop (tfg/passes/remap.py's sigmoid_gate): there the chain takes
    the product, the bias, the Sigmoid and the gate's arithmetic after it as one call. The
    same gate after the loop is still fused. Values: the unrewritten graph's and numpy's."""
    graph, w, bias = _gate_loop()
    feeds = {"n": np.int32(5), "h0": np.random.default_rng(4).standard_normal(
        (B, H)).astype(np.float32)}
    sess = Session(graph)
    for _ in range(3):  # (the chain program runs from the second step on)
        got = sess.run(["out"], feeds)[0]
    want = Session(graph, graph_rewrites=False).run(["out"], feeds)[0]
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
    h = feeds["h0"]
    sig = lambda v: 1 / (1 + np.exp(-v.astype(np.float64)))  # noqa: E731
    for _ in range(5):
        g = sig(h @ w + bias)
        h = (g[:, :H] * h - g[:, H:]).astype(np.float32)
    np.testing.assert_allclose(got, sig(h @ w[:, :H] + bias[:H]), rtol=1e-5, atol=1e-6)
    rewritten = sess.rewrites[0].graph
    inside = [n for n in rewritten if n.name.endswith("gate")]
    assert [n.op for n in inside] == ["Sigmoid"]
    assert rewritten["out"].op == "_FusedMatMul"
    assert rewritten["out"].get_attr("fused_ops") == [b"BiasAdd", b"Sigmoid"]
    chains = [c.members for c, _ in _body(sess) if hasattr(c, "members")]
    assert len(chains) == 1
    assert {"_FusedMatMul", "Sigmoid", "Split", "Mul", "Sub"} <= {m.op for m in chains[0]}


@pytest.mark.parametrize("case", ["tf1_raw_rnn_swap_grad_tfgrad",
                                  "tf1_multirnn_timemajor_grad_tfgrad"])
def test_tensorflows_gru_gradient_loop_fuses_its_cells_gradient(case, monkeypatch):
    """TensorFlow's own gradient graph of a TF1 GRUCell (and an LSTMCell) loop: the cell's
    TanhGrad, SigmoidGrad and AddN fuse with the gates' products into chains, each product
    of a chain's elementwise value (dz W^T) ending the chain before it; the gradients are
    the unfused loop's bit for bit (the chains' programs, from the second run on,
    included) and TensorFlow's values."""
    from tests.case_check import load_run_case
    from tests.conftest import FIXTURES
    meta, graph, feeds, expected = load_run_case(FIXTURES / "real_loops" / case)
    # (the deferred weight-gradient sums add in another order than the nodes: off on both
    # sides, so that the bytes compare; loop_accumulation.py)
    monkeypatch.setenv("TFG_LOOP_PROJECT", "0")
    got = {}
    for fuse in (True, False):
        sess = _session(graph, fuse, monkeypatch)
        got[fuse] = [sess.run(meta["fetches"], feeds) for _ in range(3)]
        if fuse:
            fused = sess
    for run in got[True] + got[False][1:]:
        for a, b, want in zip(run, got[False][0], expected):
            assert a.dtype == b.dtype and a.tobytes() == b.tobytes()
            np.testing.assert_allclose(a, want, rtol=meta["rtol"], atol=meta["atol"])
    progs = [prog for prepared in fused.backend._cache.values()
             for plan in prepared.plans for prog in (plan.loops or {}).values()]
    chains = [c for prog in progs for c, _ in prog.body_rest if hasattr(c, "members")]
    ops = {m.op for c in chains for m in c.members}
    assert {"TanhGrad", "AddN", "Mul"} <= ops, ops
    for c in chains:
        made = set()
        for it, kind, ins, outs in c.io:
            if kind[0] in ("matmul", "fmatmul"):
                assert not made & set(ins), [m.op for m in c.members]
            else:
                made.update(outs)
