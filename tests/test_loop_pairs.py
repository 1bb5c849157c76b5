"""Two independent compiled loops of one cell run in lockstep, their fused chains as one call on
stacked operands (tfg/executor/loop_pairs.py, loop_lockstep.py, batched_chain.py): the
values are the sequential run's, bit for bit (TFG_LOOP_PAIR=0), and TensorFlow's on the
frozen Keras masked BiLSTM; two trip counts, two cells, a loop that reads the other,
operands the stacked steps do not take and a bad input run the loops one after the other,
with the same values and errors."""
import json

import numpy as np
import pytest

from conftest import FIXTURES
from tfg import builder as tb
from tfg.errors import TfgRuntimeError
from tfg.executor import Session
from tfg.executor import batched_chain as BC
from tfg.executor import batched_rows as BRW
from tfg.executor import batched_run as BR
from tfg.executor import lockstep_plans as LPL
from tfg.executor import loop_list_writes as LW
from tfg.executor import pair_scalars as PS
from tfg.graphdef import io
from tfg.kernels.list_ops import TensorList

B, H = 4, 3


@pytest.fixture
def batched(monkeypatch):
    """{True: stacked calls done, False: declined}: every call of a batched chain."""
    got = {True: 0, False: 0}
    real = BR.runner

    def counting(*args):
        run = real(*args)

        def count(va, vb, last, lazy=False):
            ok = run(va, vb, last, lazy)
            got[ok] += 1
            return ok
        count.kept, count.rows, count.external = run.kept, run.rows, run.external
        count.masks = run.masks
        return count
    monkeypatch.setattr(BR, "runner", counting)
    return got


def _cell(h, c, m, u, b, plain=False, reordered=False):
    """A masked cell; `reordered`: the same cell, its nodes made in another order (as
    two exports of a Keras Bidirectional layer may list its directions' nodes)."""
    z = tb.bias_add(tb.add(tb.matmul(h, tb.constant(u)), tb.matmul(c, tb.constant(u[::-1]))),
                    tb.constant(b))
    if plain:  # another cell: no Split, no Sigmoid
        h2 = tb.tanh(tb.matmul(z, tb.constant(np.eye(3 * H, H, dtype=u.dtype))))
        return tb.where(m, h2, h), c
    i, f, g = tb.split(z, 3, axis=1)
    if reordered:
        tg = tb.tanh(g)
        si = tb.sigmoid(i)
        c2 = tb.add(tb.multiply(tb.sigmoid(f), c), tb.multiply(si, tg))
        c_new = tb.where(m, c2, c)
        h2 = tb.multiply(tb.tanh(c2), si)
        return tb.where(m, h2, h), c_new
    c2 = tb.add(tb.multiply(tb.sigmoid(f), c), tb.multiply(tb.sigmoid(i), tb.tanh(g)))
    h2 = tb.multiply(tb.tanh(c2), tb.sigmoid(i))
    return tb.where(m, h2, h), tb.where(m, c2, c)


def _graph(plain_b=False, chained=False, dtype=tb.float32, start_b=0, reordered_b=False):
    """Two while loops of n_a and n_b iterations of a masked cell (weights of their own),
    fed h0_a, h0_b; `chained`: loop b starts from loop a's h; `start_b`: loop b counts from
    it (loop a from 0); `reordered_b`: loop b's cell made in another node order. Fetch i_a,
    i_b: the counters' last values."""
    npd = np.float32 if dtype == tb.float32 else np.float64
    rng = np.random.default_rng(3)
    with tb.Graph() as g:
        outs = []
        for k, name in enumerate("ab"):
            u = rng.standard_normal((H, 3 * H)).astype(npd)
            b = rng.standard_normal(3 * H).astype(npd)
            n = tb.placeholder(tb.int32, [], name=f"n_{name}")
            h0 = tb.placeholder(dtype, [None, None], name=f"h0_{name}")
            if chained and k:
                h0 = tb.add(h0, outs[0])
            m = tb.placeholder(tb.bool_, [None, 1], name=f"m_{name}")
            plain, reordered = plain_b and k == 1, reordered_b and k == 1
            i, h, c = tb.while_loop(
                lambda i, h, c: tb.less(i, n),
                lambda i, h, c, m=m, u=u, b=b, plain=plain, reordered=reordered: (i + 1,) + (
                    _cell(h, c, m, u, b, plain, reordered)),
                [tb.constant(start_b if k else 0), h0, tb.multiply(h0, 0.0)],
                name=f"loop_{name}")
            outs.append(tb.identity(tb.add(h, c), name=f"out_{name}"))
            tb.identity(i, name=f"i_{name}")
    return g.graph


def _feeds(n_a=5, n_b=5, scale=1.0, npd=np.float32):
    rng = np.random.default_rng(7)
    return {"n_a": np.int32(n_a), "n_b": np.int32(n_b),
            "h0_a": (scale * rng.standard_normal((B, H))).astype(npd),
            "h0_b": (scale * rng.standard_normal((B, H))).astype(npd),
            "m_a": rng.random((B, 1)) > 0.3, "m_b": rng.random((B, 1)) > 0.3}


def _run(graph, feeds, pair, monkeypatch, fetches=("out_a", "out_b")):
    monkeypatch.setenv("TFG_LOOP_PAIR", "1" if pair else "0")
    sess = Session(graph)
    out = sess.run(list(fetches), feeds)
    again = sess.run(list(fetches), feeds)  # (the second run takes the kept values)
    for a, b in zip(out, again):
        assert a.tobytes() == b.tobytes()
    return out


def _same(a, b):
    assert len(a) == len(b)
    for x, y in zip(a, b):
        assert x.dtype == y.dtype and x.shape == y.shape and x.tobytes() == y.tobytes()


@pytest.mark.parametrize("npd, dtype", [(np.float32, tb.float32), (np.float64, tb.float64)])
def test_paired_loops_give_the_sequential_bytes(npd, dtype, batched, monkeypatch):
    graph = _graph(dtype=dtype)
    feeds = _feeds(npd=npd)
    got = _run(graph, feeds, True, monkeypatch)
    assert batched[True] == 2 * 5 and not batched[False]  # every iteration of both runs
    want = _run(graph, feeds, False, monkeypatch)
    _same(got, want)
    assert not np.array_equal(got[0], got[1])  # (two loops of their own weights)


def test_a_cell_whose_nodes_come_in_another_order_is_paired(batched, monkeypatch):
    """Loop b's chain lists its members in another order than loop a's (its Tanh before
    a Sigmoid, its c Select before the h one): matched member by member
    (chain_match.py), every iteration stacked, the sequential bytes."""
    graph = _graph(reordered_b=True)
    orders = []
    real = BC.aligned

    def spy(ia, ib, *rest):
        orders.append(([it.op for it, *_ in ia], [it.op for it, *_ in ib]))
        return real(ia, ib, *rest)
    monkeypatch.setattr(BC, "aligned", spy)
    feeds = _feeds()
    got = _run(graph, feeds, True, monkeypatch)
    assert orders and orders[0][0] != orders[0][1]
    assert batched[True] == 2 * 5 and not batched[False]
    _same(got, _run(graph, feeds, False, monkeypatch))
    _same(got, _run(_graph(), feeds, False, monkeypatch))  # (the same cell)


def test_two_trip_counts_run_one_after_the_other(batched, monkeypatch):
    graph = _graph()
    feeds = _feeds(n_a=5, n_b=3)
    got = _run(graph, feeds, True, monkeypatch)
    _same(got, _run(graph, feeds, False, monkeypatch))
    # lockstep until the third iteration's predicates differ, then never again
    assert batched[True] == 3 and not batched[False]


def test_zero_iterations(batched, monkeypatch):
    graph = _graph()
    feeds = _feeds(n_a=0, n_b=0)
    got = _run(graph, feeds, True, monkeypatch)
    _same(got, _run(graph, feeds, False, monkeypatch))
    np.testing.assert_array_equal(got[0], feeds["h0_a"])


def test_two_cells_or_a_loop_reading_the_other_are_not_paired(batched, monkeypatch):
    for graph in (_graph(plain_b=True), _graph(chained=True)):
        feeds = _feeds()
        got = _run(graph, feeds, True, monkeypatch)
        _same(got, _run(graph, feeds, False, monkeypatch))
    assert batched == {True: 0, False: 0}


def test_operands_the_stacked_steps_do_not_take_run_the_chains(batched, monkeypatch,
                                                               numpy_exp):
    """h0 of 200 puts a Sigmoid's input below its overflow floor: the stacked call declines,
    each chain decides (its kernels' two-sided Sigmoid). numpy's Sigmoid: the compiled loop
    (vector_math) takes every float32 value, so nothing declines there."""
    graph = _graph()
    feeds = _feeds(scale=200.0)
    got = _run(graph, feeds, True, monkeypatch)
    _same(got, _run(graph, feeds, False, monkeypatch))
    assert batched[False] > 0
    assert all(np.isfinite(g).all() for g in got)


def test_a_bad_input_is_the_sequential_runs_error(monkeypatch):
    graph = _graph()
    feeds = _feeds()
    feeds["h0_b"] = np.zeros((B, H + 1), np.float32)
    errors = []
    for pair in (True, False):
        monkeypatch.setenv("TFG_LOOP_PAIR", "1" if pair else "0")
        with pytest.raises(TfgRuntimeError, match="loop_b") as e:
            Session(graph).run(["out_a", "out_b"], feeds)
        errors.append(str(e.value))
    assert errors[0] == errors[1]


def test_frozen_keras_bilstm_is_paired(batched, monkeypatch):
    """The real-model suite's masked BiLSTM (tools/gen_real_models.py, TensorFlow's values):
    the forward and backward loops of each of its two Bidirectional layers run as one pair
    (one layer's two chains list their members in two orders: chain_match.py), every
    iteration stacked; the outputs are TensorFlow's, and the sequential run's bit for bit."""
    case = FIXTURES / "real_models" / "keras_bilstm_masked"
    meta = json.loads((case / "case.json").read_text())
    feeds = dict(np.load(case / "feeds.npz"))
    expected = np.load(case / "expected.npz")
    graph = io.load(str(case / "graph.pb"))
    got = _run(graph, feeds, True, monkeypatch, meta["fetches"])
    assert batched[True] == 2 * 2 * 7 and not batched[False]  # two runs, two pairs, 7 steps
    _same(got, _run(graph, feeds, False, monkeypatch, meta["fetches"]))
    for key, a in zip(meta["fetches"], got):
        np.testing.assert_allclose(a, expected[key], rtol=meta["rtol"], atol=meta["atol"])


@pytest.fixture
def shared(monkeypatch):
    """{(op, shared): count}: every merged scalar call of a pair; shared: B's own call did not
    run (its output slot took A's result)."""
    got = {}
    real = PS._shared

    def spy(ca, ia, pa, cb, ib, pb):
        ran = []

        def own(vals, step):
            ran.append(1)
            cb(vals, step)
        ins, outs, _ = pb.call_slots[ib.id]
        pb.call_slots[ib.id] = (ins, outs, own)
        f = real(ca, ia, pa, own, ib, pb)
        if f is None:
            return None

        def count(va, vb, step):
            ran.clear()
            f(va, vb, step)
            assert vb[outs[0]] is not None
            key = (ia.op, not ran)
            got[key] = got.get(key, 0) + 1
        return count
    monkeypatch.setattr(PS, "_shared", spy)
    return got


FETCH_I = ("out_a", "out_b", "i_a", "i_b")


def test_equal_counters_are_computed_once(batched, shared, monkeypatch):
    """Both loops count 0..5 against equal limits: each iteration's Less and i + 1 run once,
    B taking A's numpy scalar; the values are the sequential run's bytes."""
    graph = _graph()
    feeds = _feeds()
    got = _run(graph, feeds, True, monkeypatch, FETCH_I)
    assert batched[True] == 2 * 5
    # two runs: 6 predicates and 5 increments each, all shared (the limits, fed as two
    # equal numpy scalars, are compared once a run; the counters are then one object)
    assert shared == {("Less", True): 12, ("AddV2", True): 10}
    _same(got, _run(graph, feeds, False, monkeypatch, FETCH_I))
    assert got[2] == got[3] == 5


@pytest.mark.parametrize("start_b, n_b", [(1, 6), (0, 7)])
def test_unequal_counters_are_not_shared(start_b, n_b, batched, shared, monkeypatch):
    """Loop b counts from 1 to 6 (the same trip count, other values), or against another
    limit: no Less is shared, nor (from 1) an increment; values and counters as sequential."""
    graph = _graph(start_b=start_b)
    feeds = _feeds(n_a=5, n_b=n_b)
    got = _run(graph, feeds, True, monkeypatch, FETCH_I)
    assert not shared.get(("Less", True))
    if start_b:
        assert batched[True] == 2 * 5 and not shared.get(("AddV2", True))
    _same(got, _run(graph, feeds, False, monkeypatch, FETCH_I))
    assert (got[2], got[3]) == (5, 6 if start_b else 7)


def test_projection_rows_are_a_view_of_one_stack(batched, monkeypatch):
    """The frozen Keras BiLSTM's two input projections: from the second iteration the stacked
    call reads both rows as one view of a [T, 2, B, N] copy (batched_rows.projection_row),
    and the outputs are the sequential run's bytes."""
    case = FIXTURES / "real_models" / "keras_bilstm_masked"
    meta = json.loads((case / "case.json").read_text())
    feeds = dict(np.load(case / "feeds.npz"))
    graph = io.load(str(case / "graph.pb"))
    views = {True: 0, False: 0}
    real = BRW.projection_row

    def row(*args):
        st = real(*args)
        views[st is not None] += 1
        if st is not None:
            assert st.base is not None and st.shape[0] == 2
        return st
    monkeypatch.setattr(BRW, "projection_row", row)
    got = _run(graph, feeds, True, monkeypatch, meta["fetches"])
    # two runs of two pairs (its two Bidirectional layers); the first iteration's counter
    # is still a 0-d array, which the view declines
    assert views[True] > 0 and views[False] == 2 * 2
    _same(got, _run(graph, feeds, False, monkeypatch, meta["fetches"]))


def test_masks_are_a_view_of_one_expanded_stack(batched, monkeypatch):
    """The frozen Keras BiLSTM's masks, read from the two loops' lists: from the second
    iteration the stacked call reads both as one view of a [T, 2, B, N] copy
    (batched_rows.mask_row; from the second run expanded to the Selects' shape), and the
    outputs are the sequential run's bytes (the numpy steps: a program reads the narrow
    mask as it is)."""
    monkeypatch.setenv("TFG_CHAIN_PROGRAMS", "0")
    case = FIXTURES / "real_models" / "keras_bilstm_masked"
    meta = json.loads((case / "case.json").read_text())
    feeds = dict(np.load(case / "feeds.npz"))
    graph = io.load(str(case / "graph.pb"))
    views = {True: 0, False: 0}
    shapes = set()
    real = BRW.mask_row

    def mask_row(*args):
        st = real(*args)
        views[st is not None] += 1
        if st is not None:
            assert st.base is not None and st.dtype == np.bool_ and st.shape[0] == 2
            shapes.add(st.shape)
        return st
    monkeypatch.setattr(BRW, "mask_row", mask_row)
    got = _run(graph, feeds, True, monkeypatch, meta["fetches"])
    # two runs of two pairs; the first iteration's counter is still a 0-d array, which the
    # view declines
    assert views[True] > 0 and views[False] == 2 * 2 and not batched[False]
    assert any(s[-1] > 1 for s in shapes)  # expanded along the state's last axis
    _same(got, _run(graph, feeds, False, monkeypatch, meta["fetches"]))


def test_list_writes_in_place_only_on_a_list_of_their_own():
    """loop_list_writes._writer: the first write of a run is the normal call (a new list),
    whose copy the writer owns; later writes of an item of that dtype and shape at an index
    in range change only that list; the list the loop started from, and a list of an
    earlier run (reset), are never written."""
    calls = []

    def normal(vals, step):  # (what TensorListSetItem does: a new list, the item set)
        calls.append(1)
        lst, i = vals[0], int(vals[1])
        items = list(lst.items)
        items[i] = vals[2]
        vals[3] = lst.with_items(items)
    write = LW._writer(normal, 0, 1, 2, 3)
    start = TensorList(tb.float32, (2,), [None] * 3)
    a, b = np.ones(2, np.float32), np.full(2, 2.0, np.float32)
    vals = [start, np.int32(0), a, None]
    write(vals, None)
    first = vals[3]
    assert len(calls) == 1 and first is not start and start.items == [None] * 3
    vals[:3] = [first, np.int32(1), b]
    write(vals, None)
    assert len(calls) == 1 and vals[3] is first and first.items[1] is b
    vals[:3] = [first, np.int32(2), b.astype(np.float64)]  # another dtype: the normal call
    write(vals, None)
    assert len(calls) == 2 and vals[3] is not first and first.items[2] is None
    write.reset()  # a new run, from the last run's list (a caller holds it)
    held = vals[3]
    vals[:3] = [held, np.int32(0), b]
    write(vals, None)
    assert len(calls) == 3 and vals[3] is not held and held.items[0] is a



def test_list_writes_read_a_writable_index_array_by_value():
    """A 0-d index array some call updates in place keeps its identity, not its value: the
    writer reads its value each write (only an index nothing can write is remembered)."""
    def normal(vals, step):
        lst, i = vals[0], int(vals[1])
        items = list(lst.items)
        items[i] = vals[2]
        vals[3] = lst.with_items(items)
    write = LW._writer(normal, 0, 1, 2, 3)
    idx = np.zeros((), np.int32)  # writable: a counter an in-place AddV2 advances
    a, b = np.ones(2, np.float32), np.full(2, 2.0, np.float32)
    vals = [TensorList(tb.float32, (2,), [None] * 3), idx, a, None]
    write(vals, None)
    idx[...] = 2
    vals[:3] = [vals[3], idx, b]
    write(vals, None)
    assert vals[3].items[0] is a and vals[3].items[2] is b and vals[3].items[1] is None

def _keras_bilstm():
    case = FIXTURES / "real_models" / "keras_bilstm_masked"
    meta = json.loads((case / "case.json").read_text())
    return io.load(str(case / "graph.pb")), dict(np.load(case / "feeds.npz")), meta["fetches"]


def test_row_reads_wait_for_a_declined_batched_call(monkeypatch):
    """The frozen Keras BiLSTM (two Bidirectional layers: two pairs): from the second
    iteration its projection rows and mask reads are deferred (lockstep_deferral.py); a
    batched call that declines in a later iteration runs them, then the two chains, and the
    run goes on eager: the sequential bytes."""
    graph, feeds, fetches = _keras_bilstm()
    waits = []
    real_deferrable = LPL.deferrable

    def deferrable(*args):
        waits.append(real_deferrable(*args))
        return waits[-1]
    monkeypatch.setattr(LPL, "deferrable", deferrable)
    real = BR.runner
    pairs = []  # each batched call's counts

    def declining(*args):
        run = real(*args)
        seen = {"calls": 0, "lazy": 0, "declined": 0, "run": 0}
        pairs.append(seen)

        def once_declined(va, vb, last, lazy=False):
            if not run.kept:  # (a run's first call: the lockstep cleared them)
                seen["run"] = 0
            seen["calls"] += 1
            seen["run"] += 1
            seen["lazy"] += lazy
            if seen["run"] == 4:  # (the fourth iteration of each run)
                seen["declined"] += 1
                return False
            return run(va, vb, last, lazy)
        once_declined.kept, once_declined.rows = run.kept, run.rows
        once_declined.external, once_declined.masks = run.external, run.masks
        return once_declined
    monkeypatch.setattr(BR, "runner", declining)
    got = _run(graph, feeds, True, monkeypatch, fetches)
    ran = [seen for seen in pairs if seen["calls"]]
    assert waits == [True, True] and len(ran) == 2
    for seen in ran:
        # lazy from the second iteration to the declined fourth, eager after it (7 a run)
        assert seen["declined"] == 2 and seen["calls"] == 14 and seen["lazy"] == 6
    _same(got, _run(graph, feeds, False, monkeypatch, fetches))
