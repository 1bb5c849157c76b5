"""The numexpr backend of elementwise chains (tfg/executor/numexpr_chains.py): values within
float rounding of the plain program (one kernel call per node, TFG_FAST_PROGRAM=0), Relu's
NaN and signed-zero rules kept exactly, chains longer than a segment, what stays on numpy
(mixed dtypes, large arrays, short chains, unsupported members, numpy's error traps), the
off switch TFG_NUMEXPR=0, and tfg without numexpr."""
import sys

import numpy as np
import pytest

from tfg.executor import Session
from tfg.executor import numexpr_chains as NE
from tfg.executor.executor import NodeError
from tfg.schemas.dtypes import DType

from test_fastpath_chains import F, RNG, SPECIAL, _assert_same, _fast_fns, _graph

BENCH = ["Sin", "Neg", "Abs", "Tanh"]
RUNS = NE._TIER_UP + 3  # enough runs for a chain to tier up and run compiled
# index in `used` of the first accelerated run: the chain's first run learns its signature
# without calling the accelerator, the _TIER_UP-th compiles and uses it
FIRST = NE._TIER_UP - 2


@pytest.fixture
def spy(monkeypatch):
    """The accelerators made, and per accelerator call whether numexpr computed the value.
    A run's credit is made large and the budget unbounded, so chains tier up at their
    _TIER_UP-th run (test_tier_up_waits_until_it_pays puts the estimates back)."""
    monkeypatch.setattr(NE, "_STEP_S", 1.0)
    monkeypatch.setattr(NE, "_BUDGET_S", 60.0)
    made, used = [], []
    make, call = NE.accelerator, NE.Accelerator.__call__

    def accelerator(*a):
        acc = make(*a)
        made.append(acc)
        return acc

    def traced(self, args):
        v = call(self, args)
        used.append(v is not None)
        return v
    monkeypatch.setattr(NE, "accelerator", accelerator)
    monkeypatch.setattr(NE.Accelerator, "__call__", traced)
    return made, used


def _values(monkeypatch, g, fetch, feeds, numexpr, runs=RUNS):
    monkeypatch.setenv("TFG_FAST_PROGRAM", "1")
    monkeypatch.setenv("TFG_NUMEXPR", numexpr)
    sess = Session(g, graph_rewrites=False)
    return [sess.run(fetch, dict(feeds)) for _ in range(runs)], sess


def _plain(monkeypatch, g, fetch, feeds):
    monkeypatch.setenv("TFG_FAST_PROGRAM", "0")
    return Session(g, graph_rewrites=False).run(fetch, dict(feeds))


def _close(a, b, dtype):
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape
    rtol = 1e-5 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(a, b, rtol=rtol, atol=rtol, equal_nan=True)
    assert (np.signbit(a) == np.signbit(b))[a != 0].all()


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_values_within_rounding_of_the_kernels(monkeypatch, spy, dtype):
    pytest.importorskip("numexpr")
    # its own seeded generator: the shared RNG's state depends on which tests ran before in
    # this process (pytest-xdist), and some draws send Log or Sqrt below zero
    rng = np.random.default_rng(20)
    c = (rng.standard_normal(6) + 3).astype(dtype)
    ops = (BENCH * 2 + [("Mul", "c", "L"), "Floor", ("AddV2", "c", "R"), "Ceil",
                        ("Sub", "c", "L"), "Exp", ("Sub", "c", "R"), "Tanh",
                        ("RealDiv", "c", "L"), "Cos", ("AddV2", "c", "R"), "Sqrt", "Log1p",
                        "Square", "Neg", "Expm1", "Sinh", "Atan", ("Atan2", "c", "R"), "Log",
                        ("Mul", "c", "R"), "Tan", "Cosh", "Sin"])
    g = _graph(DType.FLOAT if dtype == np.float32 else DType.DOUBLE, (6,), ops, {"c": c})
    x = rng.standard_normal(6).astype(dtype)
    fetch = f"n{len(ops) - 1}"
    out, sess = _values(monkeypatch, g, fetch, {"x": x}, "1")
    want = _plain(monkeypatch, g, fetch, {"x": x})
    (acc,), used = spy
    assert [type(p) for p in acc.parts] == [NE._Segment] and acc.parts[0].fn is not None
    assert used[-1] and used.index(True) == FIRST
    assert _fast_fns(sess) == [f"chain_{len(ops)}"]
    assert np.isfinite(want).all()
    for v in out:
        _close(v, want, dtype)


def test_relu_keeps_nan_and_turns_minus_zero_into_zero(monkeypatch, spy):
    pytest.importorskip("numexpr")
    # segments: Relu Neg Neg Neg Neg | Relu6 Neg Neg Neg | Relu Neg Neg Neg (a template that
    # names its operand twice starts a segment)
    ops = ["Neg", "Relu", "Neg", "Neg", "Neg", "Neg", "Relu6", "Neg", "Neg", "Neg", "Relu",
           "Neg", "Neg", "Neg"]
    x = np.resize(SPECIAL, 12).astype(np.float32)
    x[10:] = [5.0, 7.0]
    out, _ = _values(monkeypatch, _graph(F, (12,), ops), "n13", {"x": x}, "1")
    want = _plain(monkeypatch, _graph(F, (12,), ops), "n13", {"x": x})
    (acc,), used = spy
    assert [len(p.ops) for p in acc.parts if p.fn is not None] == [5, 4, 4] and used[-1]
    _assert_same(out[-1], want)  # no transcendental member: bit for bit, signs of zeros too


def test_chain_longer_than_a_segment(monkeypatch, spy):
    pytest.importorskip("numexpr")
    # 182 ops: segments of at most _SEGMENT ops, Maximum left to numpy between two of them
    ops = BENCH * 30 + [("Mul", "c", "L")] + BENCH * 3 + [("Maximum", "c", "R")] + BENCH * 12
    c = RNG.standard_normal(4).astype(np.float32)
    g = _graph(F, (4,), ops, {"c": c})
    x = RNG.standard_normal(4).astype(np.float32)
    fetch = f"n{len(ops) - 1}"
    out, _ = _values(monkeypatch, g, fetch, {"x": x}, "1")
    want = _plain(monkeypatch, g, fetch, {"x": x})
    (acc,), used = spy
    kinds = [len(p.ops) if isinstance(p, NE._Segment) else p for p in acc.parts]
    assert kinds == [48, 48, 36, ((np.maximum, NE.RIGHT, 2),), 48]
    assert all(p.fn is not None for p in acc.parts if isinstance(p, NE._Segment))
    assert used[-1]
    _close(out[-1], want, np.float32)


def test_mixed_dtypes_get_no_accelerator():
    steps = [(np.multiply, NE.LEFT, 1, 1)] + [(np.sin, NE.UNARY, 0, k) for k in range(2, 8)]
    x = np.ones(4, np.float32)
    v = np.sin(x)
    assert NE.accelerator(np.sin, 1, steps, (x, np.ones(4, np.float32)), v) is not None
    assert NE.accelerator(np.sin, 1, steps, (x, np.float32(2)), v) is not None
    for side in (np.ones(4, np.float16), np.ones(4, np.float64), np.float64(2), 2.0):
        assert NE.accelerator(np.sin, 1, steps, (x, side), v) is None
    assert NE.accelerator(np.sin, 1, steps, (x.astype(np.float16), np.float16(2)),
                          v.astype(np.float16)) is None


def test_one_shot_runs_use_numpy(monkeypatch, spy):
    pytest.importorskip("numexpr")
    g = _graph(F, (4,), BENCH * 5)
    x = RNG.standard_normal(4).astype(np.float32)
    out, _ = _values(monkeypatch, g, "n19", {"x": x}, "1", runs=NE._TIER_UP - 1)
    assert spy[0] and not any(spy[1])
    _assert_same(out[-1], _plain(monkeypatch, g, "n19", {"x": x}))


@pytest.mark.parametrize("case", ["half", "int", "large", "short"])
def test_what_stays_on_numpy_is_bit_for_bit(monkeypatch, spy, case):
    ops, shape, dtype = BENCH * 3, (4,), DType.FLOAT
    if case == "half":  # numexpr has no float16
        dtype = DType.HALF
    elif case == "int":
        ops, dtype = ["Neg", "Abs", "Square", "Neg", "Abs", "Neg"], DType.INT32
    elif case == "large":  # numpy's SIMD loops are faster there
        shape = (NE._MAX_SIZE + 1,)
    else:
        ops = BENCH[:NE._MIN_OPS]
    g = _graph(dtype, shape, ops)
    x = (RNG.standard_normal(shape) * 3).astype(dtype.np)
    fetch = f"n{len(ops) - 1}"
    out, _ = _values(monkeypatch, g, fetch, {"x": x}, "1")
    assert spy[0] and all(a is None for a in spy[0])
    _assert_same(out[-1], _plain(monkeypatch, g, fetch, {"x": x}))


def test_off_switch(monkeypatch, spy):
    g = _graph(F, (4,), BENCH * 5)
    x = RNG.standard_normal(4).astype(np.float32)
    out, _ = _values(monkeypatch, g, "n19", {"x": x}, "0")
    assert spy == ([], [])
    _assert_same(out[-1], _plain(monkeypatch, g, "n19", {"x": x}))


def test_without_numexpr_the_numpy_path_runs(monkeypatch):
    monkeypatch.setitem(sys.modules, "numexpr", None)  # `import numexpr` raises ImportError
    monkeypatch.setattr(NE, "_module", [])
    monkeypatch.setattr(NE, "_found", [])
    assert not NE.wanted()
    g = _graph(F, (4,), BENCH * 5)
    x = RNG.standard_normal(4).astype(np.float32)
    out, _ = _values(monkeypatch, g, "n19", {"x": x}, "1")
    _assert_same(out[-1], _plain(monkeypatch, g, "n19", {"x": x}))
    # found but failing to import (a broken install): the accelerator steps aside for good
    monkeypatch.setattr(NE, "wanted", lambda: True)
    out, _ = _values(monkeypatch, g, "n19", {"x": x}, "1")
    _assert_same(out[-1], _plain(monkeypatch, g, "n19", {"x": x}))


def test_numpy_error_traps_still_name_the_member(monkeypatch, spy):
    pytest.importorskip("numexpr")
    g = _graph(F, (2,), ["Neg", "Exp"] + BENCH * 3)
    sess = _values(monkeypatch, g, "n13", {"x": np.zeros(2, np.float32)}, "1")[1]
    assert spy[1][-1]
    with np.errstate(over="raise"):
        with pytest.raises(NodeError, match="'n1' \\(Exp\\).*FloatingPointError"):
            sess.run("n13", {"x": np.float32([-100.0, 0.0])})


def test_segments_compile_once_and_respect_the_budget(monkeypatch, spy):
    ne = pytest.importorskip("numexpr")
    compiled = []
    real = ne.NumExpr
    monkeypatch.setattr(ne, "NumExpr", lambda *a, **k: compiled.append(a[0]) or real(*a, **k))
    monkeypatch.setattr(NE, "_cache", {})
    monkeypatch.setattr(NE, "_BUDGET_S", 0.0)  # one segment a run
    # BENCH is periodic: every full segment has the same text
    g = _graph(F, (4,), BENCH * 40)
    x = RNG.standard_normal(4).astype(np.float32)
    _values(monkeypatch, g, "n159", {"x": x}, "1", runs=NE._TIER_UP + 8)
    (acc,), used = spy
    segments = [p for p in acc.parts if isinstance(p, NE._Segment)]
    assert [len(p.ops) for p in segments] == [48, 48, 48, 15]
    assert all(s.fn is not None for s in segments)
    assert len(compiled) == len(set(compiled)) == 2  # the full text and the shorter tail
    assert used.index(True) == FIRST  # the first compiled segment is used at once


def test_tier_up_waits_until_it_pays(monkeypatch, spy):
    pytest.importorskip("numexpr")
    monkeypatch.setattr(NE, "_OP_COMPILE_S", 1e-4)  # the module's estimates
    monkeypatch.setattr(NE, "_STEP_S", 5e-7)
    monkeypatch.setattr(NE, "_cache", {})
    x = RNG.standard_normal(4).astype(np.float32)
    # 19 ops earn 9.5 us a run against a compile estimated at 1.9 ms: not in 12 runs
    g = _graph(F, (4,), BENCH * 5)
    out, _ = _values(monkeypatch, g, "n19", {"x": x}, "1", runs=12)
    assert len(spy[0]) == 1 and not any(spy[1])
    _assert_same(out[-1], _plain(monkeypatch, g, "n19", {"x": x}))
    # the same segment compiled (in the cache): no cost left to earn, used from _TIER_UP on
    monkeypatch.setattr(NE, "_STEP_S", 1.0)
    _values(monkeypatch, g, "n19", {"x": x}, "1", runs=NE._TIER_UP + 1)
    monkeypatch.setattr(NE, "_STEP_S", 5e-7)
    monkeypatch.setattr(NE, "_OP_COMPILE_S", 1.0)
    del spy[1][:]
    _values(monkeypatch, g, "n19", {"x": x}, "1", runs=NE._TIER_UP)
    assert spy[1] == [False] * FIRST + [True]
    # a long chain earns its compile in a few runs: 499 ops, 250 us a run, 4.8 ms a segment
    monkeypatch.setattr(NE, "_OP_COMPILE_S", 1e-4)
    del spy[1][:]
    g = _graph(F, (4,), ["Sin", "Cos", "Neg", "Tanh", "Abs"] * 100)
    _values(monkeypatch, g, "n499", {"x": x}, "1", runs=40)
    assert not any(spy[1][:NE._TIER_UP + 15]) and spy[1][-1]
