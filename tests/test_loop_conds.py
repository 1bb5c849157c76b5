"""Conds inside compiled loop bodies as blocks (tfg/executor/loop_conds.py), the direct stack
and scalar calls of compiled loops (tfg/executor/loop_calls.py): the same values, bit for bit,
as the dataflow executor, which keeps dead values node by node; errors name the node."""
import warnings
from pathlib import Path

import numpy as np
import pytest

import tfg
from tfg import builder as tb
from tfg.errors import TfgRuntimeError
from tfg.executor import Session
from tfg.executor.loop_calls import LoopNodeError, binary_call
from tfg.executor.loop_kernels import stack_call
from tfg.kernels.math_ops import SCALAR_OPS, scalar_kernel
from tfg.kernels.stack_ops import Stack

from test_executor_loops import _programs


def _loop(body, n_iters=None):
    """`while i < n: i, acc = i + 1, body(i, acc, x)`; acc and x of 4 floats."""
    with tb.Graph() as b:
        n = tb.placeholder(tb.int32, [], name="n")
        x = tb.placeholder(tb.float32, [4], name="x")
        p = tb.placeholder(tb.bool_, [], name="p")
        _, acc = tb.while_loop(lambda i, a: i < n,
                               lambda i, a: (i + 1, body(i, a, x, p)),
                               [tb.constant(0), tb.ones([4])], name="loop")
        tb.identity(acc, name="out")
    return b.graph


def _even(i):
    return tb.equal(tb.floormod(i, 2), 0)


BODIES = {
    # one cond: a different op in each branch
    "cond": lambda i, a, x, p: tb.cond(_even(i), lambda: a * x, lambda: a + tb.tanh(a)),
    # a branch that returns its input unchanged: the Merge reads the Switch itself
    "passthrough": lambda i, a, x, p: tb.cond(_even(i), lambda: a, lambda: a * x),
    # a cond inside a branch of another
    "nested": lambda i, a, x, p: tb.cond(
        _even(i),
        lambda: tb.cond(tb.equal(tb.floormod(i, 4), 0), lambda: a * x, lambda: a - x),
        lambda: a + 0.5),
    # two conds on one predicate tensor, the second after the first's Merge
    "same_pred": lambda i, a, x, p: (lambda e: tb.cond(
        e, lambda: tb.cond(e, lambda: a * x, lambda: a + 1.0) * 2.0,
        lambda: a - 1.0))(_even(i)),
    # the same op twice in a branch (computed once) and a branch without a node of its own
    "repeated": lambda i, a, x, p: tb.cond(
        _even(i), lambda: tb.tanh(a) * x + tb.tanh(a), lambda: tb.identity(a)) + x,
    # the predicate a loop invariant (an Enter)
    "invariant_pred": lambda i, a, x, p: tb.cond(p, lambda: a * x, lambda: a + x),
}


@pytest.mark.parametrize("case", sorted(BODIES))
@pytest.mark.parametrize("n", [0, 1, 7])
def test_conds_as_blocks_equal_the_dataflow_executor(case, n):
    _check_body(case, n, blocks=True)


@pytest.mark.parametrize("case", sorted(BODIES))
def test_conds_guarded_node_by_node_equal_the_dataflow_executor(case, monkeypatch):
    # the form a frame with a node of unknown condition keeps (and TFG_LOOP_BLOCKS=0)
    monkeypatch.setenv("TFG_LOOP_BLOCKS", "0")
    _check_body(case, 7, blocks=False)


def _check_body(case, n, blocks):
    g = _loop(BODIES[case])
    x = np.float32([1.5, -0.5, 0.25, 2.0])
    for p in (True, False):
        feeds = {"n": n, "x": x, "p": p}
        compiled, plain = Session(g), Session(g, fast_path=False)
        got, want = compiled.run("out", feeds), plain.run("out", feeds)
        np.testing.assert_array_equal(got, want, err_msg=f"{case} n={n} p={p}")
        assert got.dtype == want.dtype
        (prog,) = _programs(compiled).values()
        calls = [c for c, _ in prog.body]
        per_node = any("guarded" in c.__qualname__ or "switch_call" in c.__qualname__
                       for c in calls)
        if blocks:  # the branches run as blocks: no guarded call, no call per Switch
            assert any(hasattr(c, "calls") for c in calls) and not per_node, case
        else:
            assert per_node and not any(hasattr(c, "calls") for c in calls), case


@pytest.mark.parametrize("blocks", [True, False])
def test_a_cond_merge_waiting_on_both_branches_by_control_edges_compiles(blocks, monkeypatch):
    """TensorFlow's lowered If ends in a `branch_executed` Merge that also waits, by control
    edges, for the nodes of both branches, one of them dead in every iteration: a Merge is
    never dead by its control inputs (only its data decide), so the frame still compiles,
    with the dataflow executor's values."""
    if not blocks:
        monkeypatch.setenv("TFG_LOOP_BLOCKS", "0")
    g = _loop(BODIES["cond"])
    g["loop/cond/Merge"].add_control_input("loop/cond/mul")
    g["loop/cond/Merge"].add_control_input("loop/cond/Tanh")
    x = np.float32([1.5, -0.5, 0.25, 2.0])
    for n in (0, 1, 6):
        feeds = {"n": n, "x": x, "p": True}
        compiled, plain = Session(g), Session(g, fast_path=False)
        np.testing.assert_array_equal(compiled.run("out", feeds), plain.run("out", feeds))
        assert len(_programs(compiled)) == 1  # the loop compiled


FRAMES = Path(__file__).parent / "fixtures" / "frames"


@pytest.mark.parametrize("case", ["cond_in_while_grad", "nested_while_cond_grad"])
def test_conds_and_their_gradient_stacks_run_as_blocks_with_the_dataflow_values(case):
    # TensorFlow's graphs (tools/gen_frames_fixtures.py): the forward loop pushes the
    # predicate and the branch's values, the gradient loop pops them inside its own conds
    g = tfg.load(str(FRAMES / case / "graph.pb"))
    for n in (0, 1, 6):
        feeds = {"x": np.float32(1.5), "n": np.int32(n)}
        compiled, plain = Session(g), Session(g, fast_path=False)
        for a, b in zip(compiled.run(["y", "gx"], feeds), plain.run(["y", "gx"], feeds)):
            np.testing.assert_array_equal(a, b, err_msg=f"{case} n={n}")
    progs = _programs(compiled)
    assert len(progs) == 2  # the (inner) forward loop and its gradient loop
    for prog in progs.values():
        assert any(hasattr(c, "calls") for c, _ in prog.body)


def test_a_failing_node_inside_a_branch_is_named():
    with tb.Graph() as b:
        n = tb.placeholder(tb.int32, [], name="n")
        y = tb.placeholder(tb.float32, [None], name="y")
        _, acc = tb.while_loop(
            lambda i, a: i < n,
            lambda i, a: (i + 1, tb.cond(_even(i), lambda: a * 2.0, lambda: a + tb.reduce_sum(
                tb.reshape(y, [3], name="bad")))),
            [tb.constant(0), tb.ones([4])], name="loop")
        tb.identity(acc, name="out")
    sess = Session(b.graph)
    y = np.float32([1, 2])
    np.testing.assert_array_equal(sess.run("out", {"n": 1, "y": y}), np.full(4, 2.0))
    with pytest.raises(TfgRuntimeError, match=r"node 'loop/cond/bad' \(Reshape\) failed"):
        sess.run("out", {"n": 2, "y": y})
    assert _programs(sess)


class _Ctx:
    xp, cache, attrs = np, {}, {}


class _It:
    op = "StackPushV2"
    ctx = _Ctx


def test_stack_calls_push_and_pop_in_order_and_word_the_kernels_errors():
    from tfg.kernels.stack_ops import stack_pop_v2, stack_push_v2

    fallbacks = []

    def push_kernel(vals, step):  # the prepared call: it words what the direct call leaves
        fallbacks.append("push")
        vals[2] = stack_push_v2(_Ctx, vals[0], vals[1])

    def pop_kernel(vals, step):
        fallbacks.append("pop")
        vals[2] = stack_pop_v2(_Ctx, vals[0])
    push = stack_call(_It, stack_push_v2, push_kernel, (0, 1), (2,))
    pop = stack_call(_It, stack_pop_v2, pop_kernel, (0,), (2,))
    stack = Stack("s")
    vals = [stack, np.float32(1), None]
    push(vals, None)
    assert vals[2] is vals[1]
    vals[1] = np.float32(2)
    push(vals, None)
    pop(vals, None)
    assert vals[2] == 2
    pop(vals, None)
    assert vals[2] == 1 and not fallbacks
    with pytest.raises(Exception, match=r"Stack\[s\] is empty\."):
        pop(vals, None)
    stack.close()
    with pytest.raises(Exception, match=r"Stack\[s\] has already been closed\."):
        push(vals, None)
    with pytest.raises(Exception, match=r"Stack\[s\] has already been closed\."):
        pop(vals, None)
    bounded = Stack("b", max_size=1)
    vals[0] = bounded
    push(vals, None)
    with pytest.raises(Exception, match=r"overflowed its max_size \(1\)"):
        push(vals, None)
    vals[0] = "not a stack"
    with pytest.raises(Exception, match=r"expected a stack handle, got str"):
        push(vals, None)
    with pytest.raises(Exception, match=r"expected a stack handle, got str"):
        pop(vals, None)
    assert fallbacks == ["pop", "push", "pop", "push", "push", "push", "pop"]
    assert stack_call(_It, abs, None, (0,), (1,)) is None


def _ufunc_result(op, x, y):
    class Ctx:
        xp, attrs, cache = np, {}, {}
    from tfg.kernels.registry import get_kernel
    return get_kernel(op, "CPU", "x").fn(Ctx, np.asarray(x), np.asarray(y))


@pytest.mark.parametrize("op", sorted(SCALAR_OPS))
def test_scalar_calls_equal_the_kernels_and_wrap_silently(op):
    imax = np.iinfo(np.int32).max
    logic = op.startswith("Logical")
    pairs = ([(np.True_, np.False_), (np.True_, np.True_)] if logic else
             [(np.int32(imax), np.int32(1)), (np.int32(-imax - 1), np.int32(1)),
              (np.int32(-7), np.int32(3)), (np.int32(7), np.int32(-1)),
              (np.int32(imax), np.int32(-1)), (np.int32(-imax), np.int32(-2)),
              (np.uint8(250), np.uint8(9)), (np.int64(1 << 40), np.int64(1 << 30)),
              (np.float32(1.5), np.float32(-2)), (np.float32(np.nan), np.float32(np.nan)),
              (np.float16(3), np.float16(0.5)), (np.float64(np.inf), np.float64(1)),
              (np.array(2, np.int32), np.int32(1)), (np.int32(3), np.int64(4))])

    def kernel(vals, step):
        vals[2] = _ufunc_result(op, vals[0], vals[1])
    from tfg.kernels.math_ops import _PLAIN
    call = binary_call(kernel, _PLAIN.get(op, (None, None))[1], scalar_kernel(op), (0, 1), 2,
                       op)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for x, y in pairs:
            if op == "FloorMod" and type(x) in (np.float16, np.float32, np.float64):
                continue
            try:
                want = _ufunc_result(op, x, y)
            except Exception:  # noqa: BLE001 - a pair the kernel refuses: not compared
                continue
            vals = [x, y, None]
            call(vals, None)
            got = vals[2]
            assert np.asarray(got).dtype == want.dtype, (op, x, y)
            np.testing.assert_array_equal(got, want, err_msg=f"{op} {x!r} {y!r}")


def test_a_loop_node_error_keeps_the_item():
    err = LoopNodeError("item", ValueError("boom"))
    assert err.item == "item" and str(err) == "boom"


def test_gather_calls_equal_the_kernel_and_fall_back_to_it():
    from tfg.executor.loop_kernels import gather_call
    from tfg.kernels.indexing_ops import gather_v2

    class Ctx:
        xp, attrs, cache = np, {}, {}
    fallbacks = []

    def kernel(vals, step):
        fallbacks.append(1)
        vals[3] = gather_v2(Ctx, vals[0], vals[1], vals[2])
    params = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    call = gather_call(kernel, (0, 1, 2), 3, None, 0)
    cases = [(np.int32(1), np.int32(0)), (np.array(2, np.int64), np.array(1, np.int32)),
             (np.int64(3), np.int32(-1)), (np.int32(0), np.array(2))]
    for idx, axis in cases:
        vals = [params, idx, axis, None]
        call(vals, None)
        want = gather_v2(Ctx, params, idx, axis)
        # along axis 0 the row itself (a view: no copy), along another a copy
        view = int(axis) == 0
        assert vals[3].dtype == want.dtype and vals[3].flags.owndata != view
        assert np.shares_memory(vals[3], params) == view
        np.testing.assert_array_equal(vals[3], want)
    assert not fallbacks
    with pytest.raises(Exception, match=r"indices\[\] = 5 is not in \[0, 3\)"):
        call([params, np.int32(5), np.int32(1), None], None)
    vals = [params, np.int32([0, 1]), np.int32(0), None]  # a vector of indices: the kernel
    call(vals, None)
    np.testing.assert_array_equal(vals[3], params[[0, 1]])
    small = gather_call(kernel, (0, 1, 2), 3, 16, 0)  # a 48-byte slice over the limit
    small([params, np.int32(0), np.int32(0), None], None)
    assert len(fallbacks) == 3
