"""A compiled loop's stack pushes as one call at the body's end and its adjacent pops as one
call (tfg/executor/loop_stack_groups.py): the same values bit for bit, the same stacks, and
an error still named by its own node."""
import numpy as np
import pytest

from tfg import builder as tb
from tfg.errors import TfgRuntimeError
from tfg.executor import Session
from tfg.executor.loops import LoopProgram
from tfg.passes.grad.core import grad

B, H = 4, 8


def _training_graph():
    """A tanh RNN cell in a v1 while loop and `tfg grad` of its sum for w and h0: the
    forward loop pushes what the gradient loop pops."""
    rng = np.random.default_rng(0)
    w = rng.standard_normal((H, H)).astype(np.float32) * 0.3
    with tb.Graph() as b:
        n = tb.placeholder(tb.int32, [], name="n")
        h0 = tb.placeholder(tb.float32, [B, H], name="h0")
        wv = tb.placeholder_with_default(tb.constant(w), [H, H], name="w")

        def body(i, h):
            z = tb.matmul(h, wv)
            return i + 1, tb.tanh(tb.add(tb.multiply(z, h), h), name="h_next")

        _, h = tb.while_loop(lambda i, h: i < n, body, [tb.constant(0), h0], name="loop")
        tb.reduce_sum(tb.multiply(h, h), name="loss")
    return grad(b.graph, "loss", "w,h0")


def _programs(sess):
    return [prog for prepared in sess.backend._cache.values()
            for plan in prepared.plans for prog in (plan.loops or {}).values()]


def _run(graph, feeds, monkeypatch, grouped):
    monkeypatch.setenv("TFG_STACK_GROUPS", "1" if grouped else "0")
    sess = Session(graph)
    out = [sess.run(["loss", "grad/w", "grad/h0"], feeds) for _ in range(3)]
    for a, b in zip(out[0], out[-1]):
        np.testing.assert_array_equal(a, b)
    return out[-1], sess


def _names(prog):
    return [getattr(c, "__name__", "") for c, _ in prog.body_rest]


@pytest.mark.parametrize("n", [0, 1, 5])
def test_grouped_pushes_and_pops_give_the_same_bits(n, monkeypatch):
    graph = _training_graph()
    rng = np.random.default_rng(n)
    feeds = {"n": n, "h0": rng.standard_normal((B, H)).astype(np.float32)}
    grouped, sess = _run(graph, feeds, monkeypatch, True)
    plain, plain_sess = _run(graph, feeds, monkeypatch, False)
    for a, b in zip(grouped, plain):
        np.testing.assert_array_equal(a, b)
    names = [_names(p) for p in _programs(sess)]
    assert sorted(x.count("push_all") for x in names) == [0, 1]
    assert sorted(x.count("pop_all") for x in names) == [0, 1]
    assert not any("push" in x or "pop" in x for p in _programs(sess) for x in _names(p)
                   if x not in ("push_all", "pop_all"))
    plain_names = [x for p in _programs(plain_sess) for x in _names(p)]
    assert "push_all" not in plain_names and plain_names.count("push") > 1


def test_the_pushes_run_after_every_other_call_of_the_body(monkeypatch):
    graph = _training_graph()
    feeds = {"n": 3, "h0": np.ones((B, H), np.float32)}
    _, sess = _run(graph, feeds, monkeypatch, True)
    (fwd,) = [p for p in _programs(sess) if "push_all" in _names(p)]
    assert _names(fwd)[-1] == "push_all"


def test_a_failing_pop_in_a_group_is_named_by_its_own_node(monkeypatch):
    """The group's last member's stack loses all but one item when a run starts: the first
    iteration (ungrouped) pops it, the second's group finds the stack empty, and the error
    names that member's StackPopV2, not the group's first."""
    graph = _training_graph()
    feeds = {"n": 4, "h0": np.ones((B, H), np.float32)}
    monkeypatch.setenv("TFG_STACK_GROUPS", "1")
    sess = Session(graph)
    sess.run(["grad/w"], feeds)
    (bwd,) = [p for p in _programs(sess) if "pop_all" in _names(p)]
    pop_all, first = next((c, it) for c, it in bwd.body_rest if c.__name__ == "pop_all")
    (members,) = [cell.cell_contents for cell in pop_all.__closure__
                  if type(cell.cell_contents) is tuple]
    handle, _, _, victim = members[-1]
    assert victim is not first
    original_start = LoopProgram.start

    def start(self, enter_values):
        got = original_start(self, enter_values)
        if self is bwd:
            del got[0][handle].items[1:]
        return got

    monkeypatch.setattr(LoopProgram, "start", start)
    with pytest.raises(TfgRuntimeError) as e:
        sess.run(["grad/w"], feeds)
    assert victim.name in str(e.value) and first.name not in str(e.value)
