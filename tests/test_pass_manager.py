"""The pass manager: pipelines, preserved nodes, verification, rollback, reports. Also holds the
small graph-building helper (`G`) and the before/after comparison the other pass tests share."""
import numpy as np
import pytest

from tfg.errors import GraphValidationError, TfgInputError
from tfg.graphdef.graph import Graph
from tfg.passes import manager
from tfg.passes.manager import optimize, register_pass, verify_graph
from tfg.schemas.dtypes import DType

F = DType.FLOAT


class G:
    """Terse graph building for pass tests: G().ph("x", [2]).op("y", "Neg", "x")."""

    def __init__(self):
        self.g = Graph()

    def const(self, name, value, dtype=None, ctrl=(), device=""):
        arr = np.asarray(value, dtype=(dtype.np if dtype else None))
        if arr.dtype == np.float64 and dtype is None:
            arr = arr.astype(np.float32)
        self.g.add_node(name, "Const", ["^" + c for c in ctrl],
                        {"dtype": DType.from_numpy(arr.dtype), "value": arr}, device)
        return self

    def ph(self, name, shape, dtype=F):
        from tfg.graphdef.attrs import Shape
        self.g.add_node(name, "Placeholder", [], {"dtype": dtype, "shape": Shape(shape)})
        return self

    def op(self, name, op, *inputs, device="", **attrs):
        if "T" not in attrs and op not in ("NoOp", "Shape", "Size", "Rank", "Assert"):
            attrs["T"] = F
        attrs = {k: v for k, v in attrs.items() if v is not None}  # T=None: op has no T
        self.g.add_node(name, op, list(inputs), attrs, device)
        return self


def run(graph, fetches, feeds=None):
    from tfg.executor.session import Session
    # As given: a Session's own rewrites would run on both sides of a before/after check.
    return Session(graph, graph_rewrites=False).run(list(fetches), feeds=feeds or {})


def assert_same(before, after, fetches, feeds=None, rtol=1e-5, atol=1e-6):
    """Run both graphs; every fetch must agree."""
    a, b = run(before, fetches, feeds), run(after, fetches, feeds)
    for f, x, y in zip(fetches, a, b):
        assert np.shape(x) == np.shape(y), f
        np.testing.assert_allclose(np.asarray(x, np.float64), np.asarray(y, np.float64),
                                   rtol=rtol, atol=atol, err_msg=f)


def ops_of(graph):
    return {n.name: n.op for n in graph}


def test_default_keeps_sinks_and_placeholders():
    b = G().ph("x", [2]).ph("unused", [3]).const("c", [1.0, 2.0]).op("y", "Mul", "x", "c")
    out = optimize(b.g, verify=True)
    assert {"x", "unused", "y"} <= set(ops_of(out))


def test_keep_prunes_everything_else():
    b = G().ph("x", [2]).op("a", "Neg", "x").op("b", "Exp", "x")
    out = optimize(b.g, keep=["a:0"], verify=True)
    assert set(ops_of(out)) == {"x", "a"}


def test_unknown_keep_and_pass_are_input_errors():
    b = G().ph("x", [2])
    with pytest.raises(TfgInputError):
        optimize(b.g, keep=["nope"])
    with pytest.raises(TfgInputError):
        optimize(b.g, passes="prune,nope")


def test_report_rows_and_input_not_mutated():
    b = G().const("a", 1.0).const("c", 2.0).op("s", "AddV2", "a", "c").op("o", "Neg", "s")
    rows = []
    out = optimize(b.g, passes=["constfold"], keep=["o"], report=rows, verify=True)
    assert len(b.g) == 4 and len(out) == 1
    assert rows[0]["pass"] == "constfold" and rows[0]["before"] == 4 and rows[0]["after"] == 1
    assert all(r["error"] is None for r in rows)


def test_failing_pass_is_rolled_back(capsys):
    @register_pass("_broken_for_test", "raises")
    def broken(graph, opts):
        graph.remove_node("x")
        raise RuntimeError("boom")
    try:
        b = G().ph("x", [2]).op("y", "Neg", "x")
        rows = []
        out = optimize(b.g, passes=["_broken_for_test"], report=rows)
        assert "x" in out and rows[0]["error"].startswith("internal RuntimeError")
        with pytest.raises(RuntimeError):
            optimize(b.g, passes=["_broken_for_test"], verify=True)
    finally:
        manager.PASSES.pop("_broken_for_test")


def test_verify_catches_dangling_input_and_bad_port():
    b = G().ph("x", [2]).op("y", "Neg", "x")
    b.g["y"].inputs = ["missing"]
    with pytest.raises(GraphValidationError):
        verify_graph(b.g)
    b.g["y"].inputs = ["x:3"]
    with pytest.raises(GraphValidationError):
        verify_graph(b.g)


def test_every_pass_in_default_pipeline_is_registered():
    names = [n for n, _, _ in manager.list_passes()]
    for p in manager.DEFAULT_PIPELINE:
        assert p in names
