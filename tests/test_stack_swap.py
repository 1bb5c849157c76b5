"""Memory swapping of while-loop stacks (issue 19): `tfg grad --swap-memory` marks the stack
pushes, and on a GPU (here the numpy-backed stand-in, TFG_GPU_STANDIN=1) their entries move to
host memory during the forward loop and come back for the backward loop; a no-op on a CPU."""
import subprocess
import sys

import numpy as np
import pytest

import tfg
from conftest import ROOT
from tfg import builder as tb
from tfg.executor.devices import STANDIN_ENV
from tfg.executor.session import Session
from tfg.graphdef import io
from tfg.kernels import stack_swap
from tfg.kernels.gpu import standin
from tfg.kernels.stack_ops import Stack

ITERATIONS = 5


@pytest.fixture
def gpu(monkeypatch):
    monkeypatch.setenv(STANDIN_ENV, "1")
    return standin


def loop_graph(swap_memory):
    g = tb.Graph()
    with g:
        x = tb.placeholder(tb.float32, [4, 4], name="x")
        w = tb.placeholder(tb.float32, [4, 4], name="w")
        _, h = tb.while_loop(lambda i, h: i < ITERATIONS,
                             lambda i, h: (i + 1, tb.tanh(tb.matmul(h, w))),
                             [tb.constant(0, name="i0"), x])
        tb.reduce_sum(h, name="y")
    return tfg.grad(g.graph, ys="y", xs=["w", "x"], swap_memory=swap_memory)


def feeds():
    rng = np.random.RandomState(0)
    return {"x": rng.randn(4, 4).astype(np.float32),
            "w": (rng.randn(4, 4) / 2).astype(np.float32)}


def run(graph, devices):
    stack_swap.reset_stats()
    standin.reset_counts()
    with Session(graph, devices=devices) as sess:
        out = sess.run(["grad/w", "grad/x"], feeds=feeds())
    return out, dict(stack_swap.STATS), dict(standin.COUNTS)


def test_grad_marks_only_the_loop_stack_pushes():
    marked = loop_graph(True)
    pushes = [n for n in marked if n.op == "StackPushV2"]
    assert len(pushes) == 2 and all(n.get_attr("swap_memory") is True for n in pushes)
    assert not any(n.has_attr("swap_memory") for n in loop_graph(False)
                   if n.op == "StackPushV2")


def test_swapped_entries_go_to_host_and_come_back_with_the_same_values(gpu):
    ref, _, _ = run(loop_graph(False), "cpu:1")
    plain, plain_stats, plain_counts = run(loop_graph(False), "gpu:1")
    swapped, stats, counts = run(loop_graph(True), "gpu:1")
    for a, b, c in zip(ref, plain, swapped):
        np.testing.assert_allclose(b, a, rtol=1e-5, atol=1e-6)
        np.testing.assert_array_equal(c, b)  # swapping never changes a value
    assert plain_stats == {"out": 0, "in": 0, "prefetched": 0}
    # Two stacks (the loop's h and tanh's output), one entry per iteration: every entry was
    # copied out, and the entries that had left came back (prefetched by the pop above them).
    assert stats["out"] == 2 * ITERATIONS
    assert ITERATIONS <= stats["in"] <= 2 * ITERATIONS
    assert stats["prefetched"] == 2 * (ITERATIONS - 1)
    assert counts["d2h"] - plain_counts["d2h"] == stats["out"]
    assert counts["h2d"] - plain_counts["h2d"] == stats["in"]


def test_cpu_runs_ignore_swap_memory():
    ref, _, _ = run(loop_graph(False), "cpu:1")
    got, stats, _ = run(loop_graph(True), "cpu:1")
    for a, b in zip(ref, got):
        np.testing.assert_array_equal(a, b)
    assert stats == {"out": 0, "in": 0, "prefetched": 0}


def test_an_entry_leaves_the_device_in_the_background_and_is_prefetched(gpu):
    stack_swap.reset_stats()
    stack = Stack("s")
    values = [np.full(3, i, np.float32) for i in range(3)]
    for v in values:
        stack.push(stack_swap.swap_out(gpu, gpu.asarray(v)))
    for entry in stack.items:
        entry.out.result()
        assert entry.on_host and type(entry.host) is np.ndarray
    top = stack_swap.swap_in(stack, stack.pop())
    assert type(top) is gpu.ndarray and np.array_equal(top.get(), values[2])
    assert stack.items[-1].back is not None  # the next entry is on its way back already
    for want in reversed(values[:2]):
        got = stack_swap.swap_in(stack, stack.pop())
        assert type(got) is gpu.ndarray and np.array_equal(got.get(), want)
    assert stack_swap.STATS == {"out": 3, "in": 3, "prefetched": 2}
    # A host value (a CPU run, an int32 counter on a GPU) is kept as it is.
    assert stack_swap.swap_out(np, values[0]) is values[0]


def test_tfg_grad_swap_memory_flag(tmp_path):
    g = tb.Graph()
    with g:
        x = tb.placeholder(tb.float32, [2], name="x")
        _, h = tb.while_loop(lambda i, h: i < 3, lambda i, h: (i + 1, tb.sin(h)),
                             [tb.constant(0), x])
        tb.reduce_sum(h, name="y")
    io.save(g.graph, str(tmp_path / "loop.pb"))
    p = subprocess.run([sys.executable, "-m", "tfg", "grad", str(tmp_path / "loop.pb"),
                        "--ys", "y", "--xs", "x", "--swap-memory", "-o",
                        str(tmp_path / "out.pbtxt")], capture_output=True, timeout=120, cwd=ROOT)
    assert p.returncode == 0, p.stderr
    out = io.load(str(tmp_path / "out.pbtxt"))
    pushes = [n for n in out if n.op == "StackPushV2"]
    assert pushes and all(n.get_attr("swap_memory") is True for n in pushes)
