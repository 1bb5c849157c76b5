"""The fast program of a CPU schedule (tfg/executor/program.py, chains.py): elementwise chains
run as one call in place, Consts set once, Identities sharing their input's slot. Every
result is compared bit for bit with the plain program (one call per node, TFG_FAST_PROGRAM=0),
over two steps (the first learns a chain's input signature, the second runs it in place)."""
import numpy as np
import pytest

from tfg.executor.executor import NodeError
from tfg.executor import Session
from tfg.executor.devices import DeviceSet
from tfg.executor.plan import build_plan
from tfg.executor.fastpath import Schedule
from tfg.graphdef.attrs import Shape
from tfg.graphdef.graph import Graph
from tfg.graphdef.names import TensorRef
from tfg.kernels import math_ops
from tfg.schemas.dtypes import DType

F = DType.FLOAT
RNG = np.random.default_rng(5)


def _graph(dtype, shape, ops, consts=None):
    """x -> ops[0] -> ops[1] -> ...; an op is "Sin" or ("Mul", const name, side) with side
    "L" (x op c) or "R" (c op x). Nodes are named n0, n1, ..."""
    g = Graph()
    g.add_node("x", "Placeholder", [], {"dtype": dtype,
                                        **({"shape": Shape(shape)} if shape else {})})
    for name, value in (consts or {}).items():
        g.add_node(name, "Const", [], {"dtype": dtype, "value": value})
    src = "x"
    for i, op in enumerate(ops):
        if isinstance(op, str):
            g.add_node(f"n{i}", op, [src], {"T": dtype})
        else:
            op, c, side = op
            g.add_node(f"n{i}", op, [src, c] if side == "L" else [c, src], {"T": dtype})
        src = f"n{i}"
    return g


def _run_both(monkeypatch, g, fetches, feeds, steps=3):
    """Values of `steps` runs with the fast program and with the plain one, on the graph as
    given (no Session-time rewrites: these tests are about the programs, not the rewrites)."""
    out = {}
    # bit for bit is the numpy path's promise: numexpr's (tests/test_numexpr_chains.py) is
    # within rounding, from a chain's third run on
    monkeypatch.setenv("TFG_NUMEXPR", "0")
    for mode in ("1", "0"):
        monkeypatch.setenv("TFG_FAST_PROGRAM", mode)
        sess = Session(g, graph_rewrites=False)
        out[mode] = [sess.run(fetches, dict(feeds)) for _ in range(steps)]
        if mode == "1":
            fast = sess
    return out["1"], out["0"], fast


def _assert_same(a, b):
    for x, y in zip(a, b):
        x, y = np.asarray(x), np.asarray(y)
        assert x.dtype == y.dtype and x.shape == y.shape
        assert x.tobytes() == y.tobytes()  # bit for bit, NaNs and signed zeros included


def _fast_fns(sess):
    names = []
    for prepared in sess._cache.values():
        for sched in prepared.schedules:
            if isinstance(sched, Schedule):
                names += [getattr(fn, "__wrapped__", fn).__name__
                          for fn, *_ in sched.fast.entries]
    return names


SPECIAL = np.array([0.0, -0.0, 1e-30, -2.5, 3.0, 88.0, -90.0, np.inf, -np.inf, np.nan])


@pytest.mark.parametrize("dtype", [DType.HALF, DType.FLOAT, DType.DOUBLE])
@pytest.mark.parametrize("n", [1, 4, 17, 1000])
def test_unary_chain_equals_the_unfused_kernels(monkeypatch, dtype, n):
    ops = ["Sin", "Neg", "Abs", "Tanh", "Exp", "Square", "Cos", "Floor", "Sign", "Relu6",
           "Neg", "Relu"] * 3
    x = (RNG.standard_normal(n) * 4).astype(dtype.np)
    x[:min(n, SPECIAL.size)] = SPECIAL[:n]
    fast, plain, sess = _run_both(monkeypatch, _graph(dtype, (n,), ops), [f"n{len(ops) - 1}"],
                                  {"x": x})
    for a, b in zip(fast, plain):
        _assert_same(a, b)
    assert f"chain_{len(ops)}" in _fast_fns(sess)


def test_chain_on_the_benchmark_shape(monkeypatch):
    ops = ["Sin", "Neg", "Abs", "Tanh"] * 50
    x = RNG.standard_normal(4).astype(np.float32)
    fast, plain, sess = _run_both(monkeypatch, _graph(F, (4,), ops), ["n199"], {"x": x})
    _assert_same(fast[-1], plain[-1])
    assert _fast_fns(sess) == ["chain_200"]


def test_fetched_intermediate_keeps_its_value(monkeypatch):
    ops = ["Sin", "Neg", "Abs", "Tanh", "Exp", "Neg"]
    x = RNG.standard_normal(8).astype(np.float32)
    fast, plain, sess = _run_both(monkeypatch, _graph(F, (8,), ops), ["n2", "n5", "n1"],
                                  {"x": x})
    for a, b in zip(fast, plain):
        _assert_same(a, b)
    np.testing.assert_array_equal(fast[-1][0], np.abs(np.negative(np.sin(x))))
    # split where values leave: n0..n1 (n1 fetched), n2 (fetched), n3..n5
    assert sorted(_fast_fns(sess)) == ["Abs", "chain_2", "chain_3"]


def test_value_with_a_second_reader_ends_the_chain(monkeypatch):
    g = _graph(F, (6,), ["Sin", "Tanh", "Neg"])
    g.add_node("other", "Exp", ["n0"], {"T": F})  # n0 read twice
    x = RNG.standard_normal(6).astype(np.float32)
    fast, plain, _ = _run_both(monkeypatch, g, ["n2", "other"], {"x": x})
    for a, b in zip(fast, plain):
        _assert_same(a, b)


@pytest.mark.parametrize("side", ["L", "R"])
@pytest.mark.parametrize("op", ["Mul", "AddV2", "Sub", "Maximum", "Minimum"])
def test_binary_members_with_a_side_operand(monkeypatch, op, side):
    c = RNG.standard_normal(5).astype(np.float32)  # broadcast along the last axis
    ops = ["Tanh", (op, "c", side), "Neg", (op, "s", "R" if side == "L" else "L"), "Sin"]
    g = _graph(F, (3, 5), ops, {"c": c, "s": np.float32(0.75)})
    x = RNG.standard_normal((3, 5)).astype(np.float32)
    fast, plain, sess = _run_both(monkeypatch, g, ["n4"], {"x": x})
    for a, b in zip(fast, plain):
        _assert_same(a, b)
    assert _fast_fns(sess) == ["chain_5"]


@pytest.mark.parametrize("dtype", [DType.HALF, DType.FLOAT, DType.DOUBLE])
def test_float_only_members_divide_and_log_quietly(monkeypatch, recwarn, dtype):
    c = np.array([0.0, 2.0, -3.0, 0.5], dtype.np)
    ops = ["Abs", ("RealDiv", "c", "L"), "Sqrt", "Neg", "Log", ("Div", "c", "R"), "Log1p", "Tanh"]
    x = np.array([0.0, 1.5, -2.0, np.nan], dtype.np)
    fast, plain, sess = _run_both(monkeypatch, _graph(dtype, (4,), ops, {"c": c}), ["n7"],
                                  {"x": x})
    for a, b in zip(fast, plain):
        _assert_same(a, b)
    assert _fast_fns(sess) == ["chain_8"]
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]


@pytest.mark.parametrize("dtype", [DType.INT32, DType.INT64])
def test_integer_division_in_a_chain_truncates(monkeypatch, dtype):
    c = np.array([3, -3, 2, 7], dtype.np)
    ops = ["Neg", ("RealDiv", "c", "L"), "Square", ("Div", "c", "R"), "Abs"]
    x = np.array([7, 7, -9, 15], dtype.np)
    fast, plain, _ = _run_both(monkeypatch, _graph(dtype, (4,), ops, {"c": c}), ["n4"],
                               {"x": x})
    for a, b in zip(fast, plain):
        _assert_same(a, b)
    # -7 / 3 = -2 (truncated, not floored), squared 4; 3 / 4 = 0, 7 / 4 = 1
    np.testing.assert_array_equal(fast[-1][0], [0, 0, 0, 1])


def test_side_that_broadcasts_the_value_up_stays_unfused(monkeypatch):
    big = RNG.standard_normal((3, 4)).astype(np.float32)
    g = _graph(F, (4,), ["Sin", ("Mul", "big", "L"), "Neg"], {"big": big})
    x = RNG.standard_normal(4).astype(np.float32)
    fast, plain, _ = _run_both(monkeypatch, g, ["n2"], {"x": x})
    for a, b in zip(fast, plain):
        _assert_same(a, b)
    assert fast[-1][0].shape == (3, 4)


@pytest.mark.parametrize("dtype", [DType.INT8, DType.INT32, DType.INT64])
def test_integer_overflow_wraps_as_unfused(monkeypatch, dtype):
    info = np.iinfo(dtype.np)
    x = np.array([info.min, info.max, -1, 0, 7, info.min + 1], dtype.np)
    c = np.array(3, dtype.np)
    ops = ["Neg", "Abs", ("Mul", "c", "L"), ("AddV2", "c", "R"), "Square", ("Sub", "c", "R")]
    fast, plain, sess = _run_both(monkeypatch, _graph(dtype, (6,), ops, {"c": c}), ["n5"],
                                  {"x": x})
    for a, b in zip(fast, plain):
        _assert_same(a, b)
    assert "chain_6" in _fast_fns(sess)


def test_dtype_change_inside_the_chain_runs_member_by_member(monkeypatch):
    # float32 * float64 scalar Const -> float64: the chain cannot reuse the float32 buffer
    g = _graph(F, (4,), ["Sin", "Neg"])
    g.add_node("c64", "Const", [], {"dtype": DType.DOUBLE, "value": np.float64(1.5)})
    g.add_node("m", "Mul", ["n1", "c64"], {"T": DType.DOUBLE})  # (a malformed graph)
    g.add_node("t", "Tanh", ["m"], {"T": DType.DOUBLE})
    x = RNG.standard_normal(4).astype(np.float32)
    fast, plain, _ = _run_both(monkeypatch, g, ["t"], {"x": x})
    for a, b in zip(fast, plain):
        _assert_same(a, b)


def test_shape_change_between_steps_relearns(monkeypatch):
    monkeypatch.setenv("TFG_FAST_PROGRAM", "1")
    sess = Session(_graph(F, None, ["Sin", ("Mul", "c", "L"), "Tanh"],
                          {"c": np.float32(2.0)}), graph_rewrites=False)
    for shape in [(4,), (2, 3), (4,), (), (7,)]:
        x = np.asarray(RNG.standard_normal(shape), np.float32)
        got = sess.run("n2", {"x": x})
        want = math_ops.tanh_into(np.multiply(np.sin(x), np.float32(2.0)))  # Tanh's kernel
        np.testing.assert_array_equal(got, want)


def test_fed_member_is_not_computed(monkeypatch):
    ops = ["Sin", "Neg", "Abs", "Tanh"]
    x = RNG.standard_normal(4).astype(np.float32)
    mid = np.array([1.0, -2.0, 3.0, -4.0], np.float32)
    fast, plain, _ = _run_both(monkeypatch, _graph(F, (4,), ops), ["n3", "n0"],
                               {"x": x, "n1": mid})
    for a, b in zip(fast, plain):
        _assert_same(a, b)
    np.testing.assert_array_equal(fast[-1][0], np.tanh(np.abs(mid)))


def test_feed_and_constants_are_never_written(monkeypatch):
    c = RNG.standard_normal(4).astype(np.float32)
    g = _graph(F, (4,), [("Mul", "c", "L"), "Neg", "Relu"], {"c": c})
    x = RNG.standard_normal(4).astype(np.float32)
    x0 = x.copy()
    monkeypatch.setenv("TFG_FAST_PROGRAM", "1")
    sess = Session(g, graph_rewrites=False)
    for _ in range(3):
        got = sess.run(["n2", "c", "x"], {"x": x})
    np.testing.assert_array_equal(x, x0)
    np.testing.assert_array_equal(got[1], c)
    np.testing.assert_array_equal(got[2], x0)
    np.testing.assert_array_equal(got[0], np.maximum(-(x0 * c), 0))


def test_chain_after_a_fresh_matmul_writes_in_place(monkeypatch):
    g = Graph()
    g.add_node("x", "Placeholder", [], {"dtype": F, "shape": Shape((3, 4))})
    w = RNG.standard_normal((4, 5)).astype(np.float32)
    g.add_node("w", "Const", [], {"dtype": F, "value": w})
    g.add_node("scale", "Const", [], {"dtype": F, "value": np.float32([1, 2, 3, 4, 5])})
    g.add_node("mm", "MatMul", ["x", "w"], {"T": F})
    g.add_node("id", "Identity", ["mm"], {"T": F})
    g.add_node("m", "Mul", ["id", "scale"], {"T": F})
    g.add_node("r", "Relu6", ["m"], {"T": F})
    x = RNG.standard_normal((3, 4)).astype(np.float32)
    fast, plain, sess = _run_both(monkeypatch, g, ["r"], {"x": x})
    for a, b in zip(fast, plain):
        _assert_same(a, b)
    assert "chain_2" in _fast_fns(sess)
    # the MatMul's output, fetched, must keep its value
    fast, plain, _ = _run_both(monkeypatch, g, ["r", "mm"], {"x": x})
    for a, b in zip(fast, plain):
        _assert_same(a, b)
    np.testing.assert_array_equal(fast[-1][1], x @ w)


def test_chain_writes_into_a_fresh_input_and_nothing_else():
    g = Graph()
    g.add_node("x", "Placeholder", [], {"dtype": F, "shape": Shape((3, 4))})
    g.add_node("w", "Const", [], {"dtype": F, "value": np.eye(4, dtype=np.float32)})
    g.add_node("mm", "MatMul", ["x", "w"], {"T": F})
    g.add_node("t", "Tanh", ["mm"], {"T": F})
    g.add_node("r", "Relu", ["t"], {"T": F})
    g.add_node("u", "Tanh", ["x"], {"T": F})  # a chain on a feed: never in place
    g.add_node("v", "Neg", ["u"], {"T": F})
    plan = build_plan(list(g), DeviceSet.from_spec("cpu:1").default,
                      feeds=[TensorRef("x", 0)], fetches=[TensorRef("r", 0), TensorRef("v", 0)])
    fns = {getattr(fn, "members", None): (fn, ctx)
           for fn, ctx, *_ in Schedule.build(plan).fast.entries}
    (on_mm, ctx), (on_x, ctx2) = fns[("t", "r")], fns[("u", "v")]
    for _ in range(2):  # the first call learns the signature, the second runs in place
        buf = RNG.standard_normal((3, 4)).astype(np.float32)
        want = np.maximum(math_ops.tanh_into(buf), 0)
        got = on_mm(ctx, buf)
        np.testing.assert_array_equal(got, want)
    assert got is buf
    x = RNG.standard_normal((3, 4)).astype(np.float32)
    for _ in range(2):
        x0 = x.copy()
        assert on_x(ctx2, x) is not x
        np.testing.assert_array_equal(x, x0)


def test_error_names_the_member_that_failed(monkeypatch):
    monkeypatch.setenv("TFG_FAST_PROGRAM", "1")
    g = _graph(F, (4,), ["Sin", ("AddV2", "c", "L"), "Neg"],
               {"c": np.zeros(3, np.float32)})  # [4] + [3]: incompatible
    sess = Session(g, graph_rewrites=False)
    with pytest.raises(NodeError, match="'n1'.*Incompatible shapes"):
        sess.run("n2", {"x": np.ones(4, np.float32)})


def test_floating_error_in_place_names_the_member(monkeypatch):
    monkeypatch.setenv("TFG_FAST_PROGRAM", "1")
    sess = Session(_graph(F, (2,), ["Neg", "Exp", "Sin"]), graph_rewrites=False)
    sess.run("n2", {"x": np.zeros(2, np.float32)})  # learns the signature
    with np.errstate(over="raise"):
        with pytest.raises(NodeError, match="'n1' \\(Exp\\).*FloatingPointError"):
            sess.run("n2", {"x": np.float32([-100.0, 0.0])})


def test_floating_error_with_tiled_consts_names_the_member(monkeypatch):
    """A chain whose per-channel Consts are tiled (chain_tiles.py) names the member that
    raised too: here the Mul by a tiled scale after an Exp."""
    monkeypatch.setenv("TFG_FAST_PROGRAM", "1")
    c = 16
    g = _graph(F, (8, c), ["Neg", "Exp", ("Mul", "s", "L"), "Sin"],
               {"s": np.full(c, 1e30, np.float32)})
    sess = Session(g, graph_rewrites=False)
    for _ in range(2):
        sess.run("n3", {"x": np.zeros((8, c), np.float32)})  # learns, then tiles
    with np.errstate(over="raise"):
        with pytest.raises(NodeError, match="'n2' \\(Mul\\).*FloatingPointError"):
            sess.run("n3", {"x": np.full((8, c), -20.0, np.float32)})


def test_identities_share_slots_and_constants_are_set_once(monkeypatch):
    g = Graph()
    g.add_node("x", "Placeholder", [], {"dtype": F, "shape": Shape((2,))})
    g.add_node("c", "Const", [], {"dtype": F, "value": np.float32([3, 4])})
    g.add_node("i1", "Identity", ["x"], {"T": F})
    g.add_node("i2", "StopGradient", ["i1"], {"T": F})
    g.add_node("n", "IdentityN", ["i2", "c"], {"T": [F, F]})
    g.add_node("s", "AddV2", ["n", "n:1"], {"T": F})
    x = np.float32([1, 2])
    fast, plain, sess = _run_both(monkeypatch, g, ["s", "i1", "n:1", "c"], {"x": x})
    for a, b in zip(fast, plain):
        _assert_same(a, b)
    assert _fast_fns(sess) == ["AddV2"]
    assert fast[-1][1] is not x  # a fetched Identity of a feed is still a copy


def test_traced_steps_still_record_every_node(monkeypatch):
    monkeypatch.setenv("TFG_FAST_PROGRAM", "1")
    g = _graph(F, (4,), ["Sin", ("Mul", "c", "L"), "Identity", "Neg"],
               {"c": np.float32(2.0)})
    sess = Session(g, graph_rewrites=False)
    x = RNG.standard_normal(4).astype(np.float32)
    want = sess.run("n3", {"x": x})
    got = sess.run("n3", {"x": x}, trace=True)
    np.testing.assert_array_equal(got, want)
    assert {"c", "n0", "n1", "n2", "n3"} <= {e[0] for e in sess.last_trace.events}


@pytest.mark.parametrize("dtype", [DType.HALF, DType.FLOAT, DType.DOUBLE, DType.INT32])
@pytest.mark.parametrize("shape", [(2, 6, 6, 12), (3, 40), (4, 3, 5), (2, 2, 7)])
@pytest.mark.parametrize("x_kind", ["fed", "fresh", "strided"])
def test_per_channel_consts_tiled_equal_the_unfused_kernels(monkeypatch, dtype, shape, x_kind):
    """A batch norm's Mul by a per-channel Const, a shift on either side, Maximum, Relu: the
    Const operands tiled along rows of K*C (chains.py _tiles) give every element the plain
    program gives, on a fed input (copied), a fresh one (written in place) and a strided view
    (copied first); shapes with too few rows to tile and a non-float dtype too. The Consts
    stay as they were."""
    c = shape[-1]
    side = (RNG.standard_normal(c) * 3).astype(dtype.np)
    side[0] = 0
    consts = {"scale": side, "shift": side[::-1].reshape((1,) * (len(shape) - 1) + (c,)).copy(),
              "floor": np.full(c, 0.5, dtype.np)}
    ops = [("Mul", "scale", "L"), ("AddV2", "shift", "R"), ("Sub", "scale", "L"),
           ("Maximum", "floor", "R")] + (["Relu"] if dtype != DType.INT32 else [])
    g = Graph()
    xshape = list(shape)
    if x_kind == "strided":  # the chain's input is a Transpose's view: not contiguous
        xshape = [shape[-1]] + list(shape[:-1])
    g.add_node("x0", "Placeholder", [], {"dtype": dtype, "shape": Shape(xshape)})
    for name, value in consts.items():
        g.add_node(name, "Const", [], {"dtype": dtype, "value": value})
    if x_kind == "fed":
        src = "x0"
    elif x_kind == "fresh":  # a MatMul's output, fresh and read only by the chain
        g.add_node("eye", "Const", [], {"dtype": dtype, "value": np.eye(c, dtype=dtype.np)})
        flat = int(np.prod(shape[:-1]))
        g.add_node("s2", "Const", [], {"dtype": DType.INT32,
                                        "value": np.array([flat, c], np.int32)})
        g.add_node("s0", "Const", [], {"dtype": DType.INT32,
                                        "value": np.array(shape, np.int32)})
        g.add_node("flat", "Reshape", ["x0", "s2"], {"T": dtype, "Tshape": DType.INT32})
        g.add_node("mm", "MatMul", ["flat", "eye"], {"T": dtype})
        g.add_node("x", "Reshape", ["mm", "s0"], {"T": dtype, "Tshape": DType.INT32})
        src = "x"
    else:
        perm = list(range(1, len(shape))) + [0]
        g.add_node("perm", "Const", [], {"dtype": DType.INT32,
                                          "value": np.array(perm, np.int32)})
        g.add_node("x", "Transpose", ["x0", "perm"], {"T": dtype, "Tperm": DType.INT32})
        src = "x"
    for i, (op, cname, where) in enumerate(o for o in ops if not isinstance(o, str)):
        g.add_node(f"n{i}", op, [src, cname] if where == "L" else [cname, src], {"T": dtype})
        src = f"n{i}"
    if ops[-1] == "Relu":
        g.add_node("out", "Relu", [src], {"T": dtype})
        src = "out"
    feeds = []
    for _ in range(4):
        x = (RNG.standard_normal(xshape) * 4).astype(dtype.np)
        if dtype != DType.INT32:
            x.reshape(-1)[:SPECIAL.size] = SPECIAL[:x.size].astype(dtype.np)
        feeds.append(x)
    before = {k: v.copy() for k, v in consts.items()}
    out = {}
    monkeypatch.setenv("TFG_NUMEXPR", "0")
    for mode in ("1", "0"):
        monkeypatch.setenv("TFG_FAST_PROGRAM", mode)
        sess = Session(g, graph_rewrites=False)
        with np.errstate(all="ignore"):
            out[mode] = [sess.run(src, {"x0": x}) for x in feeds]
    for a, b in zip(out["1"], out["0"]):
        _assert_same([a], [b])
    for k, v in consts.items():
        assert v.tobytes() == before[k].tobytes()
