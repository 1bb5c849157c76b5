"""Column blocks in fused loop chains (tfg/executor/block_steps.py, loop_blocks.py): a binary
ufunc sliced into column blocks by StridedSlices is written into a (n, rows, k) buffer whose
blocks are the slices, and two Adds of a stacked Sigmoid's rows over blocks of the same
buffers run as one call; the values are the unfused loop's bit for bit, and slices that are
not whole column blocks of one width take the plain steps."""
import numpy as np
import pytest

from tfg import builder as tb
from tfg.executor import Session
from tfg.executor import block_steps as BS
from tfg.executor import loop_fusion

B, F, H = 4, 3, 5


def _gru_loop(reset_first, bounds):
    """A Keras `reset_after` GRU cell in a v1 while loop: the recurrent product plus its bias
    sliced by StridedSlices of Const `bounds` ([(begin, end, stride)] of the columns), the
    update and reset gates' Adds of the input projection's Split pieces and the slices
    (`reset_first`: the reset gate's Add comes first in the body, as Keras builds it)."""
    rng = np.random.default_rng(7)
    w = rng.standard_normal((F, 3 * H)).astype(np.float32)
    u = rng.standard_normal((H, 3 * H)).astype(np.float32)
    bias = rng.standard_normal(3 * H).astype(np.float32)
    rbias = rng.standard_normal(3 * H).astype(np.float32)
    with tb.Graph() as b:
        n = tb.placeholder(tb.int32, [], name="n")
        x = tb.placeholder(tb.float32, [None, F], name="x")
        h0 = tb.placeholder(tb.float32, [None, H], name="h0")

        def body(i, x, h, acc):
            xw = tb.bias_add(tb.matmul(x, tb.constant(w)), tb.constant(bias), name="xw")
            xz, xr, xh = tb.split(xw, 3, axis=1, name="gates")
            hu = tb.add(tb.matmul(h, tb.constant(u)), tb.constant(rbias), name="hu")
            hz, hr, hh = (tb.strided_slice(hu, [0, lo], [0, hi], [1, st], begin_mask=1,
                                           end_mask=1, name=f"sl{k}")
                          for k, (lo, hi, st) in enumerate(bounds))
            if reset_first:
                r = tb.sigmoid(tb.add(xr, hr, name="r_in"))
                z = tb.sigmoid(tb.add(xz, hz, name="z_in"))
            else:
                z = tb.sigmoid(tb.add(xz, hz, name="z_in"))
                r = tb.sigmoid(tb.add(xr, hr, name="r_in"))
            g = tb.tanh(tb.add(xh, tb.multiply(r, hh)))
            h2 = tb.add(tb.multiply(z, h), tb.multiply(tb.subtract(np.float32(1), z), g),
                        name="h2")
            # (x changes every step, as a sequence's input does: no loop invariant)
            return i + 1, tb.multiply(x, np.float32(0.75)), h2, tb.add(acc, h2, name="acc2")

        _, _, h, acc = tb.while_loop(lambda i, x, h, acc: i < n, body,
                                     [tb.constant(0), x, h0, tb.zeros_like(h0)], name="loop")
        tb.identity(h, name="h")
        tb.identity(acc, name="acc")
    return b.graph


BLOCKS = [(0, H, 1), (H, 2 * H, 1), (2 * H, 3 * H, 1)]


def _run(graph, fuse, feeds, monkeypatch):
    monkeypatch.setenv("TFG_LOOP_FUSE", "1" if fuse else "0")
    sess = Session(graph)
    return [sess.run(["h", "acc"], feeds) for _ in range(2)], sess


def _steps(sess):
    progs = [prog for prepared in sess.backend._cache.values()
             for plan in prepared.plans for prog in (plan.loops or {}).values()]
    chains = [c for prog in progs for c, _ in prog.body_rest if hasattr(c, "members")]
    assert len(chains) == 1
    return [f.__name__ for f in chains[0].steps]


def _counting(monkeypatch):
    """Counts of the pair step's calls and of its plain steps' calls."""
    counts = {"pair": 0, "plain": 0}
    paired = BS.paired

    def counted(fn, first, second, sources, stack, row, plain):
        def plain_first(vals):
            counts["plain"] += 1
            plain[0](vals)
        step = paired(fn, first, second, sources, stack, row, (plain_first,) + plain[1:])

        def step_pair(vals):
            counts["pair"] += 1
            step(vals)
        return step_pair
    monkeypatch.setattr(loop_fusion.B, "paired", counted)
    return counts


@pytest.mark.parametrize("reset_first", [False, True])
@pytest.mark.parametrize("n", [0, 1, 6])
def test_a_gru_cells_gate_slices_are_blocks_and_its_gate_adds_one_call(reset_first, n,
                                                                       monkeypatch):
    monkeypatch.setenv("TFG_CHAIN_PROGRAMS", "0")  # (the numpy steps' blocks, not a program)
    graph = _gru_loop(reset_first, BLOCKS)
    rng = np.random.default_rng(n)
    feeds = {"n": n, "x": rng.standard_normal((B, F)).astype(np.float32),
             "h0": rng.standard_normal((B, H)).astype(np.float32)}
    counts = _counting(monkeypatch)
    fused, sess = _run(graph, True, feeds, monkeypatch)
    unfused, _ = _run(graph, False, feeds, monkeypatch)
    for f, u in zip(fused, unfused):
        for a, b in zip(f, u):
            np.testing.assert_array_equal(a, b)
    names = _steps(sess)
    assert "step_blocks" in names and "step_pair" in names and "step_slice" not in names
    # each run's first iteration builds the stack (the plain Adds); the others: one call
    assert counts["pair"] == 2 * n and counts["plain"] == min(n, 1) * 2


@pytest.mark.parametrize("bounds", [
    [(0, H, 1), (H, 3 * H, 2), (2 * H, 3 * H, 1)],        # a strided slice
    [(0, H, 1), (H + 1, 2 * H + 1, 1), (2 * H, 3 * H, 1)],  # not on a block boundary
    [(0, H, 1), (-2 * H, -H, 1), (2 * H, 3 * H, 1)],        # negative bounds: still blocks
])
def test_slices_that_are_not_column_blocks_take_the_plain_steps(bounds, monkeypatch):
    graph = _gru_loop(True, bounds)
    rng = np.random.default_rng(2)
    feeds = {"n": 5, "x": rng.standard_normal((B, F)).astype(np.float32),
             "h0": rng.standard_normal((B, H)).astype(np.float32)}
    fused, sess = _run(graph, True, feeds, monkeypatch)
    unfused, _ = _run(graph, False, feeds, monkeypatch)
    for f, u in zip(fused, unfused):
        for a, b in zip(f, u):
            np.testing.assert_array_equal(a, b)


def test_column_blocks_step_writes_blocks_or_runs_the_plain_steps():
    """The step alone: block views of one buffer for whole column blocks; the plain steps
    (a plain Add and strided views of it) for slices of two widths."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((8, 12)).astype(np.float32)
    y = rng.standard_normal(12).astype(np.float32)
    attrs = {"begin_mask": 1, "end_mask": 1}

    def vals_for(spans):
        vals = [x, y, None, None, None, None, None]
        for lo, hi in spans:
            vals += [np.array([0, lo], np.int32), np.array([0, hi], np.int32),
                     np.array([1, 1], np.int32)]
        return vals
    ran = []

    def plain(vals):
        ran.append(1)
        vals[2] = np.add(vals[0], vals[1])
        for k, o in enumerate((3, 4)):
            vals[o] = vals[2][:, [slice(0, 4), slice(4, 12)][k]]
    slices = tuple((3 + k, (7 + 3 * k, 8 + 3 * k, 9 + 3 * k), attrs, None) for k in range(2))
    step = BS.column_blocks(np.add, 0, 1, 2, slices, 5, 6, True, (plain,))
    vals = vals_for([(8, 12), (0, 4)])
    step(vals)
    whole = x + y
    np.testing.assert_array_equal(vals[3], whole[:, 8:12])
    np.testing.assert_array_equal(vals[4], whole[:, 0:4])
    assert vals[3].base is vals[5] and vals[3].flags.c_contiguous and vals[5].shape == (3, 8, 4)
    assert vals[6][0] == {3: 2, 4: 0} and not ran
    buf = vals[5]
    step(vals)  # the next iteration writes into the same buffer
    assert vals[5] is buf
    step = BS.column_blocks(np.add, 0, 1, 2, slices, 5, 6, True, (plain,))
    vals = vals_for([(0, 4), (4, 12)])
    step(vals)
    assert ran and vals[5] is None
    np.testing.assert_array_equal(vals[4], whole[:, 4:12])


def _masked_loop(mask_shape, zero_output):
    """A Keras-style masked RNN step in a v1 while loop: h2 = tanh(x W + h U), then the new
    output and the new state both where(mask, h2, previous) (`zero_output`: the output's
    `previous` is a zeros Enter instead, the same every iteration), and c = where(mask, h2 * 2,
    c); the mask changes every iteration (a time step's)."""
    rng = np.random.default_rng(3)
    w = rng.standard_normal((F, H)).astype(np.float32)
    u = rng.standard_normal((H, H)).astype(np.float32)
    with tb.Graph() as b:
        n = tb.placeholder(tb.int32, [], name="n")
        x = tb.placeholder(tb.float32, [None, F], name="x")
        h0 = tb.placeholder(tb.float32, [None, H], name="h0")
        m0 = tb.placeholder(tb.bool_, list(mask_shape), name="mask")
        zeros = tb.zeros_like(h0)

        def body(i, x, m, out, h, c):
            h2 = tb.tanh(tb.add(tb.matmul(x, tb.constant(w)), tb.matmul(h, tb.constant(u))),
                         name="h2")
            out2 = tb.select(m, h2, zeros if zero_output else out, name="out2")
            return (i + 1, tb.multiply(x, np.float32(0.75)), tb.logical_not(m), out2,
                    tb.select(m, h2, h, name="h3"),
                    tb.select(m, tb.multiply(h2, np.float32(2)), c, name="c2"))

        _, _, _, out, h, c = tb.while_loop(
            lambda i, x, m, out, h, c: i < n, body,
            [tb.constant(0), x, m0, zeros, h0, zeros], name="loop")
        tb.identity(h, name="h")
        tb.identity(c, name="c")
        tb.identity(out, name="acc")
    return b.graph


@pytest.mark.parametrize("zero_output", [False, True])
@pytest.mark.parametrize("mask_shape", [(B, 1), (B, H)])
@pytest.mark.parametrize("n", [0, 1, 6])
def test_selects_of_one_mask_and_value_are_one_where(zero_output, mask_shape, n, monkeypatch):
    """The new output's and the new state's SelectV2 (one mask, one new h) run as one
    np.where against a stack of their previous values (the last iteration's result, or a
    copy where one is not: the zeros), bit for bit the unfused loop's values."""
    graph = _masked_loop(mask_shape, zero_output)
    rng = np.random.default_rng(n)
    feeds = {"n": n, "x": rng.standard_normal((B, F)).astype(np.float32),
             "h0": rng.standard_normal((B, H)).astype(np.float32),
             "mask": rng.random(mask_shape) < 0.5}
    plain = []
    shared = BS.shared_select

    def counted(mask, x, ys, outs, held, broadcast, steps):
        return shared(mask, x, ys, outs, held, broadcast,
                      tuple(lambda vals, f=f: plain.append(1) or f(vals) for f in steps))
    monkeypatch.setattr(loop_fusion.B, "shared_select", counted)
    monkeypatch.setenv("TFG_LOOP_FUSE", "1")
    sess = Session(graph)
    fused = [sess.run(["h", "c", "acc"], feeds) for _ in range(2)]
    monkeypatch.setenv("TFG_LOOP_FUSE", "0")
    unfused = Session(graph).run(["h", "c", "acc"], feeds)
    for f in fused:
        for a, b in zip(f, unfused):
            np.testing.assert_array_equal(a, b)
    names = _steps(sess)
    assert names.count("step_selects") == 1 and names.count("step_select") == 1
    assert not plain


@pytest.mark.parametrize("mask_shape", [(8, 1), (8, 64), (64,)])
def test_select_steps_copy_the_bits_np_where_gives(mask_shape):
    """The select step (y copied, then x where the mask is set) and the shared one give
    np.where's bytes: -0.0, NaNs with payloads and infinities included."""
    from tfg.executor import fused_steps as S
    rng = np.random.default_rng(5)
    x = rng.standard_normal((8, 64)).astype(np.float32)
    y = rng.standard_normal((8, 64)).astype(np.float32)
    x[0, :4] = [-0.0, np.inf, -np.inf, np.nan]
    y[1, :3] = [-0.0, np.nan, np.inf]
    x.view(np.uint32)[2, 5] = 0x7FC00123  # a NaN with a payload
    m = rng.random(mask_shape) < 0.5
    vals = [m, x, y, None, y.copy(), None, None]
    S.select(0, 1, 2, 3, True)(vals)
    assert vals[3].tobytes() == np.where(m, x, y).tobytes()
    BS.shared_select(0, 1, (2, 4), (3, 5), 6, True, ())(vals)
    for o in (3, 5):
        assert vals[o].tobytes() == np.where(m, x, y).tobytes()
