"""Per-step costs of compiled loops cut without changing a bit (issue 20, "Loop cells, stop
29"): values the graph fixes kept from one run of a loop to the next (tfg/executor/loops.py
`_fixed_values`), and what stays computed every run (a fed or variable invariant, a value
that leaves the loop); a read-only bias added as a contiguous tile (fused_steps.tiled);
Sigmoid's overflow test by argmin (math_ops.sigmoid_into); TensorListStack of set rows in
one copy. Each against the unfused loop (TFG_LOOP_FUSE=0) or the plain numpy form."""
from types import SimpleNamespace

import numpy as np
import pytest

from tfg import builder as tb
from tfg.executor import Session
from tfg.executor import fused_steps as S
from tfg.kernels.list_ops import TensorList, tensor_list_stack
from tfg.kernels.math_ops import sigmoid_into
from tfg.schemas.dtypes import DType

B, H = 3, 4


def _programs(sess):
    return [prog for prepared in sess.backend._cache.values()
            for plan in prepared.plans for prog in (plan.loops or {}).values()]


def _cell_graph():
    """A loop whose body reads invariants of Consts (a Split of a weight, a sum of two
    Consts: fixed by the graph), an invariant of a feed (`scale`: not fixed), a BiasAdd of a
    Const bias, and carries `w2` (an invariant of Consts) out as a loop variable."""
    rng = np.random.default_rng(3)
    w = rng.standard_normal((H, 2 * H)).astype(np.float32)
    a = rng.standard_normal((H, H)).astype(np.float32)
    bias = rng.standard_normal(H).astype(np.float32)
    with tb.Graph() as b:
        n = tb.placeholder(tb.int32, [], name="n")
        h0 = tb.placeholder(tb.float32, [None, H], name="h0")
        s = tb.placeholder(tb.float32, [], name="s")
        wc, ac = tb.constant(w), tb.constant(a)

        def body(i, h, carried):
            w1, w2 = tb.split(wc, 2, axis=1, name="wsplit")
            both = tb.add(w1, ac, name="wsum")
            scale = tb.multiply(s, 2.0, name="scale")
            z = tb.bias_add(tb.matmul(h, both, name="mm"), tb.constant(bias), name="zb")
            h2 = tb.multiply(tb.tanh(z), scale, name="h2")
            return i + 1, h2, tb.add(w2, ac, name="carried2")

        _, h, carried = tb.while_loop(lambda i, h, c: i < n, body,
                                      [tb.constant(0), h0, tb.zeros([H, H])], name="loop")
        tb.identity(h, name="h")
        tb.identity(carried, name="carried")
    return b.graph


def _feeds(n, s, seed):
    h0 = np.random.default_rng(seed).standard_normal((B, H)).astype(np.float32)
    return {"n": np.int32(n), "h0": h0, "s": np.float32(s)}


def test_fixed_invariants_are_kept_across_runs_bit_for_bit(monkeypatch):
    graph = _cell_graph()
    monkeypatch.setenv("TFG_LOOP_FUSE", "0")
    plain = Session(graph)
    monkeypatch.setenv("TFG_LOOP_FUSE", "1")
    sess = Session(graph)
    # runs of other lengths, feeds and the scale (a fed invariant: computed every run);
    # n=0 first: a run without an iteration keeps nothing
    for n, s, seed in [(0, 1.0, 0), (3, 1.0, 1), (5, 0.5, 2), (1, -3.0, 3), (4, 0.5, 4)]:
        feeds = _feeds(n, s, seed)
        got = sess.run(["h", "carried"], feeds)
        want = plain.run(["h", "carried"], feeds)
        for g, w in zip(got, want):
            assert g.dtype == w.dtype and g.tobytes() == w.tobytes()
        (prog,) = _programs(sess)
        if n == 0 and seed == 0:
            assert prog.fixed is None  # (nothing computed the body's invariants yet)
    (prog,) = _programs(sess)
    assert prog.fixed is not None
    fixed_ops = {it.op for c, it in prog.body if (c, it) not in prog.body_fixed}
    assert "Split" in fixed_ops and "AddV2" in fixed_ops  # the weight's Split and `wsum`
    names = {it.name for c, it in prog.body_fixed}
    assert any(name.endswith("scale") for name in names)  # of a feed: every run
    assert any(name.endswith("carried2") for name in names)  # leaves the loop: every run


def test_a_variable_bias_is_read_every_step(monkeypatch):
    """A bias read from a variable (a writable array, changed between steps) is not tiled
    and kept: each step adds its current value."""
    with tb.Graph() as b:
        n = tb.placeholder(tb.int32, [], name="n")
        h0 = tb.placeholder(tb.float32, [None, H], name="h0")
        v = tb.Variable(np.zeros(H, np.float32), name="v")
        w = tb.constant(np.eye(H, dtype=np.float32))

        def body(i, h):
            z = tb.bias_add(tb.matmul(h, w, name="mm"), v, name="zb")
            return i + 1, tb.multiply(tb.sigmoid(z), 2.0, name="h2")

        _, h = tb.while_loop(lambda i, h: i < n, body, [tb.constant(0), h0], name="loop")
        tb.identity(h, name="h")
        tb.assign_add(v, tb.constant(np.full(H, 0.25, np.float32)), name="bump")
        init = tb.global_variables_initializer()
    graph = b.graph
    runs = {}
    for fuse in ("1", "0"):
        monkeypatch.setenv("TFG_LOOP_FUSE", fuse)
        sess = Session(graph)
        sess.run(targets=init.name)
        out = []
        for step in range(3):
            out.append(sess.run("h", {"n": np.int32(3), "h0": _feeds(3, 1.0, 0)["h0"]}))
            sess.run(targets="bump")
        runs[fuse] = out
    for a, c in zip(runs["1"], runs["0"]):
        assert a.tobytes() == c.tobytes()
    assert runs["1"][0].tobytes() != runs["1"][1].tobytes()  # (the bias moved: same feeds)


def test_tiled_takes_only_a_read_only_operand():
    last = [(None, None, None)]
    b = np.arange(4, dtype=np.float32)
    assert S.tiled(b, (3, 4), last) is b  # writable: could change while kept
    b.setflags(write=False)
    t = S.tiled(b, (3, 4), last)
    assert t.shape == (3, 4) and t.flags.c_contiguous and (t == b).all()
    assert S.tiled(b, (3, 4), last) is t  # kept for the same operand and shape
    assert S.tiled(b, (2, 4), last).shape == (2, 4)
    big = np.zeros(S.TILE_MAX, np.float32)
    big.setflags(write=False)
    assert S.tiled(big, (2, S.TILE_MAX), [(None, None, None)]) is big


@pytest.mark.parametrize("writable", [True, False])
def test_a_bias_add_step_equals_numpy_broadcast(writable):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((8, 128)).astype(np.float32)
    bias = rng.standard_normal(128).astype(np.float32)
    bias.setflags(write=writable)
    step = S.bias_add(0, 1, 2, True, False)
    vals = [x, bias, None]
    for k in range(3):  # fresh result, then into the kept buffer
        step(vals)
        assert vals[2].tobytes() == np.add(x, bias).tobytes()
        x = x + k
        vals[0] = x


@pytest.mark.parametrize("order", ["C", "F"])
def test_sigmoid_into_keeps_its_overflow_test(order, numpy_exp):
    rng = np.random.default_rng(2)
    for dt, floor in ((np.float16, -10.0), (np.float32, -80.0), (np.float64, -700.0)):
        x = np.asarray(rng.standard_normal((6, 5)) * 3, dt, order=order)
        r = sigmoid_into(x)
        want = np.divide(dt(1), np.add(np.exp(np.negative(x)), dt(1)))
        assert r.dtype == dt and np.array_equal(r, want)
        for bad in (np.nan, floor, floor - 1):
            y = x.copy(order=order)
            y[4, 3] = bad
            assert sigmoid_into(y) is None  # the two-sided form: the kernel's to run
        y = x.copy(order=order)
        y[1, 1] = np.nextafter(dt(floor), dt(0))  # just above the floor: one-sided
        assert sigmoid_into(y) is not None


def _ctx():
    return SimpleNamespace(attrs={"element_dtype": DType.FLOAT}, cache={}, xp=np)


def test_tensor_list_stack_of_set_rows_equals_row_by_row():
    rng = np.random.default_rng(4)
    rows = [rng.standard_normal((2, 3)).astype(np.float32) for _ in range(5)]
    shape = np.array([2, 3], np.int32)
    got = tensor_list_stack(_ctx(), TensorList(DType.FLOAT, (2, 3), list(rows)), shape)
    assert got.tobytes() == np.stack(rows).tobytes() and got.flags.c_contiguous
    assert all(not np.shares_memory(got, r) for r in rows)
    # an unset row is zeros (the row-by-row path), as before
    partial = list(rows)
    partial[2] = None
    got = tensor_list_stack(_ctx(), TensorList(DType.FLOAT, (2, 3), partial), shape)
    want = np.stack(rows)
    want[2] = 0
    assert got.tobytes() == want.tobytes()
    # an element of another shape is still the kernel's error
    bad = list(rows)
    bad[1] = np.zeros((3, 2), np.float32)
    with pytest.raises(Exception, match="list element of shape"):
        tensor_list_stack(_ctx(), TensorList(DType.FLOAT, (None, None), bad),
                          np.array([-1, -1], np.int32))


def test_element_shapes_read_once_per_value_still_refuse_bad_ones():
    rng = np.random.default_rng(5)
    rows = [rng.standard_normal((2, 3)).astype(np.float32) for _ in range(2)]
    lst = TensorList(DType.FLOAT, None, rows)
    for dt in (np.int32, np.int64, np.dtype(">i4")):  # same numbers, other bytes
        for _ in range(2):
            got = tensor_list_stack(_ctx(), lst, np.array([2, -1], dt))
            assert got.tobytes() == np.stack(rows).tobytes()
    for _ in range(2):  # an error is not remembered as a shape
        with pytest.raises(Exception, match="element_shape must be int32 or int64"):
            tensor_list_stack(_ctx(), lst, np.array([2.0, 3.0], np.float32))
        with pytest.raises(Exception, match=r"element_shape \[3,3\]"):
            tensor_list_stack(_ctx(), lst, np.array([3, 3], np.int32))
