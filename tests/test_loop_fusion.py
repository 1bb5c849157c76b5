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
    np.testing.assert_allclose(ok, 3 * np.tanh(col @ col.T).sum(), rtol=1e-5)
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
