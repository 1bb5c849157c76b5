"""The memory guard's fast paths (tfg/executor/limits.py): ops that are "within_input" (a
Slice, a Split, a Sum, a TensorArray write) run without their shape function while their
inputs are non-empty and within the limit, concatenations while their inputs together fit it;
an empty input, or inputs passed many times, still get the shape function's verdict before
anything is made (tests/test_loop_fusion.py: a slice of a fed input over the limit)."""
import numpy as np
import pytest

from tfg import builder as tb
from tfg.executor import Session, limits
from tfg.errors import TfgRuntimeError
from tfg.schemas.ops import registry


@pytest.fixture
def sized(monkeypatch):
    """The ops whose outputs the guard sized with their shape function, in call order."""
    seen = []
    real = limits.output_bytes

    def counted(node, inputs):
        seen.append(node.op)
        return real(node, inputs)
    monkeypatch.setattr(limits, "output_bytes", counted)
    return seen


def _graph(shape):
    with tb.Graph() as b:
        x = tb.placeholder(tb.float32, shape, name="x")
        s = tb.slice(x, [0, 0], [-1, 2])
        a, c = tb.split(x, 2, axis=1)
        total = tb.reduce_sum(x, [0])
        tb.identity(tb.concat([s, a, c], 1), name="joined")
        tb.identity(total, name="total")
    return b.graph


def test_parts_and_joins_run_without_their_shape_function(sized):
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    joined, total = Session(_graph([None, 4]), max_memory="1M", fast_path=False).run(
        ["joined", "total"], {"x": x})
    np.testing.assert_array_equal(joined, np.concatenate([x[:, :2], x[:, :2], x[:, 2:]], 1))
    np.testing.assert_array_equal(total, x.sum(0))
    assert not {"Slice", "Split", "Sum", "ConcatV2"} & set(sized)


def test_a_reduction_of_an_empty_input_is_still_sized():
    """A [0, 300000] input holds nothing; its Sum over axis 0 is 1.2 MB of zeros."""
    with pytest.raises(TfgRuntimeError, match="would allocate"):
        Session(_graph([None, 300_000]), max_memory="1M", fast_path=False).run(
            "total", {"x": np.zeros((0, 300_000), np.float32)})


def test_a_tensor_packed_many_times_is_still_sized():
    with tb.Graph() as b:
        x = tb.placeholder(tb.float32, [None], name="x")
        tb.identity(tb.stack([x] * 300), name="y")  # 300 x 4 KB = 1.2 MB
    sess = Session(b.graph, max_memory="1M", fast_path=False)
    with pytest.raises(TfgRuntimeError, match="would allocate"):
        sess.run("y", {"x": np.ones(1000, np.float32)})
    assert sess.run("y", {"x": np.ones(100, np.float32)}).shape == (300, 100)


def test_within_input_ops_keep_their_dtype():
    """The trait's promise, checked on its ops' signatures: each output is of an input's type
    (a type attr an input has, or a fixed type an input has: a TensorArray's flow), so none
    is wider than the inputs (what lets the guard skip sizing them)."""
    for name in registry.ops_with("within_input"):
        sig = registry._OPS[name]
        ins = {(a.type_attr, a.dtype) for a in sig.inputs}
        for out in sig.outputs:
            if out.dtype is not None and out.dtype.base.name in ("RESOURCE", "VARIANT"):
                continue
            assert (out.type_attr, out.dtype) in ins, (name, out.name)


def _gather_graph():
    with tb.Graph() as b:
        x = tb.placeholder(tb.float32, [None, 3], name="x")
        idx = tb.placeholder(tb.int32, [None], name="idx")
        tb.identity(tb.gather(x, idx), name="y")
        tb.identity(tb.fill(idx, 1.0), name="filled")
    return b.graph


def test_a_verdict_keyed_by_twenty_indices_is_reused(sized):
    """A step that gathers by the same 20 indices sizes the Gather once, not every step."""
    x = np.arange(60, dtype=np.float32).reshape(20, 3)
    idx = np.arange(20, dtype=np.int32)[::-1].copy()
    sess = Session(_gather_graph(), max_memory="1M", fast_path=False)
    for _ in range(3):
        np.testing.assert_array_equal(sess.run("y", {"x": x, "idx": idx}), x[::-1])
    assert sized.count("GatherV2") == 1
    sess.run("y", {"x": x, "idx": idx[:-1]})  # other indices: sized again
    assert sized.count("GatherV2") == 2


def test_values_of_a_keyed_integer_input_decide_its_verdict():
    """Fill's 20 dims: the same shape with larger values must be sized anew, not take the
    cached verdict of the small ones."""
    sess = Session(_gather_graph(), max_memory="1M", fast_path=False)
    dims = np.ones(20, np.int32)
    assert sess.run("filled", {"idx": dims}).shape == (1,) * 20
    dims[-1] = 1 << 20  # 4 MB of float32
    with pytest.raises(TfgRuntimeError, match="would allocate"):
        sess.run("filled", {"idx": dims})
