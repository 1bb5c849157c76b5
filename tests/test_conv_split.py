"""Small convolutions, 1x1 convolutions, depthwise convolutions and skinny GEMMs split over a
step's intra-op threads (tfg/kernels/conv_split.py, conv_depthwise_split.py): the parts
give the one-thread path's values (depthwise bit for bit; GEMM blocks within float32 rounding,
bit for bit on these shapes' row blocks), with the fused bias and activation applied per part; with the step's
split count at 1 (a loaded machine, outside steps, $TFG_CONV_THREADS=0) nothing is split;
the per-kernel Chooser (conv_choice.py) alternates, then keeps the faster way and re-times the other."""
import numpy as np
import pytest

from test_conv_fast_paths import reference
from tfg.executor import blas
from tfg.graphdef.graph import Graph
from tfg.kernels import (clamp, conv_choice, conv_depthwise, conv_depthwise_split, conv_gemm,
                         conv_split, conv_threads)
from tfg.kernels.context import KernelContext
from tfg.kernels.conv_geom import Geom
from tfg.kernels.registry import get_kernel

rng = np.random.default_rng(29)


@pytest.fixture(autouse=True)
def small_splits(monkeypatch):
    """Tiny shapes take the split paths (they need 1M / 128K multiply-adds by default)."""
    monkeypatch.setattr(conv_split, "MIN_SPLIT_MACS", 0)
    monkeypatch.setattr(conv_split, "MIN_PART_ROWS", 8)
    monkeypatch.setattr(conv_depthwise_split, "SPLIT_MIN_MACS", 0)
    yield
    conv_threads.configure(1)


def _geom(xs, ws, strides, padding, dil=(1, 1)):
    return Geom({"padding": padding.encode(), "strides": [1, *strides, 1],
                 "dilations": [1, *dil, 1]}, xs[1], xs[2], ws[0], ws[1])


def test_spans_cover_the_range_in_aligned_even_blocks():
    assert conv_split.spans(320, 2, 16) == [(0, 160), (160, 320)]
    assert conv_split.spans(1000, 2, 16) == [(0, 512), (512, 1000)]
    assert conv_split.spans(18, 2) == [(0, 9), (9, 18)]
    assert conv_split.spans(5, 4, 16) == [(0, 5)]  # one aligned unit: one block


GEMMS = [  # x shape, filter shape, strides, padding, mode
    ((2, 6, 5, 4), (1, 1, 4, 40), (1, 1), "VALID", "rows"),     # 1x1: the input is the GEMM
    ((2, 7, 6, 5), (1, 1, 5, 36), (2, 2), "VALID", "rows"),     # strided 1x1: sampled pixels
    ((2, 2, 2, 9), (1, 1, 9, 48), (1, 1), "VALID", "cols"),     # 8 rows: column blocks
    ((2, 6, 5, 4), (3, 3, 4, 6), (1, 1), "SAME", "chunked"),    # patches copied per part
    ((2, 9, 8, 3), (3, 3, 3, 5), (2, 2), "SAME", "chunked"),    # thin stem, per part
    ((1, 3, 3, 8), (3, 3, 8, 40), (1, 1), "SAME", "cols"),      # patches once, column blocks
]


@pytest.mark.parametrize("case", GEMMS)
def test_split_gemm_parts_give_the_one_thread_values(case):
    xs, ws, strides, padding, mode = case
    g = _geom(xs, ws, strides, padding)
    run = conv_gemm.prepared(xs, ws, g, False, np.float32)
    assert isinstance(run, conv_split.SplitGemm)
    assert mode == ("chunked" if run.chunked is not None else "rows" if run.rows else "cols")
    x = rng.standard_normal(xs).astype(np.float32)
    w = rng.standard_normal(ws).astype(np.float32)
    b = rng.standard_normal(ws[3]).astype(np.float32)
    want = reference(x.astype(np.float64), w.astype(np.float64), strides, (1, 1), padding)
    for workers in (1, 2):
        conv_threads.configure(workers, lambda n: None, split=workers)
        whole, parts = run.whole(x, w), run.parts(x, w)
        np.testing.assert_allclose(parts, want, rtol=1e-5, atol=1e-5)
        if mode != "cols":  # the same GEMM rows: the same bits
            np.testing.assert_array_equal(parts, whole)
        else:
            np.testing.assert_allclose(parts, whole, rtol=1e-6, atol=1e-6)
        fused = run.parts(x, w, b, clamp.relu6)
        np.testing.assert_allclose(fused, np.clip(whole + b, 0, 6), rtol=1e-6, atol=1e-6)


def test_nothing_is_split_when_the_step_has_one_split_thread(monkeypatch):
    xs, ws = (2, 6, 5, 4), (1, 1, 4, 40)
    run = conv_gemm.prepared(xs, ws, _geom(xs, ws, (1, 1), "VALID"), False, np.float32)
    calls = []
    monkeypatch.setattr(conv_threads, "run_chunks", lambda *a: calls.append(a))
    x, w = rng.standard_normal(xs).astype(np.float32), rng.standard_normal(ws).astype(np.float32)
    conv_threads.configure(2, lambda n: None, split=1)  # adaptive under load: one
    assert conv_threads.split_workers() == 1
    for _ in range(8):
        np.testing.assert_array_equal(run(x, w), run.whole(x, w))
    assert not calls and run.chooser.calls == 0
    monkeypatch.setenv("TFG_CONV_THREADS", "0")
    conv_threads.configure(2, lambda n: None, split=2)
    assert conv_threads.split_workers() == 1


DEPTHWISE = [  # x shape, filter shape, strides, padding, dilations: each strategy
    ((2, 12, 12, 4), (3, 3, 4, 1), (1, 1), "SAME", (1, 1)),     # rows
    ((3, 11, 10, 8), (3, 3, 8, 1), (2, 2), "SAME", (1, 1)),     # W phases (odd batch)
    ((2, 9, 9, 80), (3, 3, 80, 1), (2, 2), "SAME", (1, 1)),     # windows, C inner
    ((2, 3, 3, 16), (5, 5, 16, 1), (1, 1), "SAME", (1, 1)),     # dense (tiny images)
    ((2, 8, 8, 3), (3, 3, 3, 2), (1, 1), "VALID", (2, 2)),      # multiplier 2, dilated
]


@pytest.mark.parametrize("case", DEPTHWISE)
def test_depthwise_split_is_bit_for_bit_the_whole_batch(case):
    xs, ws, strides, padding, dil = case
    g = _geom(xs, ws, strides, padding, dil)
    run = conv_depthwise_split.split(xs, ws, g)
    assert isinstance(run, conv_depthwise_split.DepthwiseSplit)
    x = rng.standard_normal(xs).astype(np.float32)
    w = rng.standard_normal(ws).astype(np.float32)
    w.flags.writeable = False
    b = rng.standard_normal(ws[2] * ws[3]).astype(np.float32)
    whole = run.whole(x, w, {})
    want = reference(x.astype(np.float64), w.astype(np.float64), strides, dil, padding,
                     depthwise=True)
    np.testing.assert_allclose(whole, want, rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(whole, conv_depthwise.forward(x, w, g))
    for workers in (1, 2):
        conv_threads.configure(workers, lambda n: None, split=workers)
        np.testing.assert_array_equal(run.parts(x, w, {}), whole)
        np.testing.assert_array_equal(run.parts(x, w, {}, b, clamp.relu),
                                      np.maximum(whole + b, 0))


ACTS = ["Relu6", "_MklSwish", "_TfgHardSwish", None]


def _node(op, **attrs):
    return get_kernel(op).fn, KernelContext(Graph().add_node("n", op), attrs)


@pytest.mark.parametrize("act", ACTS)
@pytest.mark.parametrize("workers", [1, 2])
def test_fused_kernels_apply_bias_and_activation_per_part(act, workers):
    """_FusedConv2D and _FusedDepthwiseConv2dNative on split runners, the fused steps per
    part, over enough calls for the Chooser to take both ways: the unfused values each call."""
    ops = [b"BiasAdd"] + ([act.encode()] if act else [])
    base = dict(strides=[1, 1, 1, 1], padding=b"SAME", dilations=[1, 1, 1, 1],
                data_format=b"NHWC")
    fused = dict(base, fused_ops=ops, num_args=1, epsilon=1e-4)
    swish = lambda y: y / (1 + np.exp(-y))  # noqa: E731
    hard = lambda y: y * (clamp.relu6(y + np.float32(3)) * np.float32(1 / 6))  # noqa: E731
    activation = {"Relu6": lambda y: np.clip(y, 0, 6), "_MklSwish": swish,
                  "_TfgHardSwish": hard, None: lambda y: y}[act]
    conv_threads.configure(workers, lambda n: None, split=workers)
    for op, base_op, ws in (("_FusedConv2D", "Conv2D", (1, 1, 6, 40)),
                            ("_FusedDepthwiseConv2dNative", "DepthwiseConv2dNative",
                             (3, 3, 6, 1))):
        fn, ctx = _node(op, **fused)
        bfn, bctx = _node(base_op, **base)
        w = rng.standard_normal(ws).astype(np.float32)
        w.flags.writeable = False
        b = rng.standard_normal(ws[2] * ws[3] if "Depthwise" in op else ws[3]).astype(
            np.float32)
        for _ in range(8):
            x = rng.standard_normal((2, 6, 5, 6)).astype(np.float32)
            want = activation(bfn(bctx, x, w) + b)
            np.testing.assert_allclose(fn(ctx, x, w, b), want, rtol=1e-5, atol=1e-5)
        key = "chunked" if op == "_FusedConv2D" else "split"
        assert ctx.cache[key][1] is not None  # the per-part path was taken


def test_skinny_matmul_column_blocks_match_the_gemvs():
    a = rng.standard_normal((2, 70)).astype(np.float32)
    b = rng.standard_normal((70, 100)).astype(np.float32)
    want = np.stack([a[0] @ b, a[1] @ b])
    for workers in (1, 2):
        conv_threads.configure(workers, lambda n: None, split=workers)
        for _ in range(7):  # both ways of the Chooser
            np.testing.assert_allclose(conv_split.skinny_matmul(a, b, np.empty((2, 100),
                                                                               np.float32)),
                                       want, rtol=1e-5, atol=1e-5)


def test_chooser_probes_both_ways_then_keeps_the_faster_and_retimes_the_other():
    c = conv_choice.Chooser()
    ways = []
    for _ in range(6):  # first of each way not counted, then PROBES = 2 each
        way = c.pick()
        ways.append(way)
        c.record(way, 1.0 if way else 2.0)  # threads twice as fast
    assert ways == [False, True, False, True, False, True]
    assert c.threaded
    picks = [c.pick() for _ in range(2 * c.REPROBE)]
    assert picks.count(False) == 2 and picks.count(True) == 2 * c.REPROBE - 2
    # the machine gets busy: threaded calls slow down, the choice moves back to one thread
    for _ in range(3):
        c.record(True, 5.0)
    assert not c.threaded
    # within MARGIN: one thread (it costs less CPU)
    d = conv_choice.Chooser()
    for _ in range(6):
        way = d.pick()
        d.record(way, 0.98 if way else 1.0)
    assert d.decided and not d.threaded
    # threads far slower at the first counted probe (a busy machine): decided at once
    e = conv_choice.Chooser()
    ways = []
    while not e.decided:
        way = e.pick()
        ways.append(way)
        e.record(way, 3.0 if way else 1.0)
    assert ways == [False, True, False, True] and not e.threaded


@pytest.mark.skipif(not blas.blas_control_available(), reason="BLAS threads not settable")
def test_steps_give_split_kernels_the_step_blas_count():
    with blas.blas_limit(2):
        assert conv_threads.workers() == 2 and conv_threads.split_workers() == 2
        with blas.blas_limit(1):
            assert conv_threads.split_workers() == 1
    assert conv_threads.split_workers() == 1


def test_concurrent_threaded_calls_each_run_every_span_once_and_restore_blas():
    """Callers on several threads at once (the dataflow executor's inter-op pool): each call
    runs each of its spans exactly once, however late the helpers pick its job up, and BLAS
    is back at the step's count after the last."""
    import threading
    sets = []
    conv_threads.configure(2, sets.append, 2, split=2)
    errors = []

    def caller(k):
        try:
            for i in range(40):
                seen = []
                spans = list(range(1 + (i + k) % 5))
                conv_threads.run_chunks(lambda span, buf: seen.append(span), spans, 4,
                                        np.float32)
                assert sorted(seen) == spans
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=caller, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not errors and not any(t.is_alive() for t in threads)
    assert sets and sets[-1] == 2


@pytest.mark.skipif(not blas.blas_control_available(), reason="BLAS threads not settable")
def test_the_gemm_floor_keeps_one_blas_thread_but_lets_split_kernels_measure(monkeypatch):
    """blas_floor's one thread is for OpenBLAS's small GEMMs; the split kernels decide for
    themselves (conv_choice.py) on the cores contention leaves: both here (a quiet machine
    simulated), none when the meter sees another process on a core."""
    from tfg.executor import blas as B
    monkeypatch.setattr(B, "threads_for", lambda cores, others: 2 if others < 0.5 else 1)
    monkeypatch.setattr(B.meter(), "others", lambda: 0.0)
    with B.blas_limit(B.FLOORED):
        assert B.current_blas_threads() == 1
        assert conv_threads.split_workers() == 2 and conv_threads.workers() == 2
    monkeypatch.setattr(B.meter(), "others", lambda: 1.5)
    with B.blas_limit(B.FLOORED):
        assert conv_threads.split_workers() == 1
    with B.blas_limit(1):  # the user's one thread: nothing split
        assert conv_threads.split_workers() == 1
    assert B.FLOORED == 1
