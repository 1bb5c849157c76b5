"""Hostile variants of the redteam graphs (tests/fixtures/redteam/) through `python -m tfg run`:
each ends in ONE clear line on stderr, no traceback, within bounded CPU and memory
(tests/hostile_helpers.py), with the CLI contract's exit code: 2 for bad input (a file that
is not a GraphDef, a feed of the wrong dtype or shape, a loop cycle without NextIteration),
1 for a valid graph failing while running (a kernel's InvalidArgument, the memory limit;
tfg/errors.py, docs/python-api.md).
"""
import numpy as np
import pytest

import tfg
from conftest import FIXTURES
from hostile_helpers import assert_refused, run_bounded
from tfg.errors import TfgRuntimeError

R = FIXTURES / "redteam"
KERAS = R / "keras_rnn_mix_lowered" / "graph.pb"
LSTM = R / "tf1_dynamic_lstm_gru" / "graph.pb"
BEAM = R / "tf1_beam_steps" / "graph.pb"
RAW = R / "tf1_raw_rnn" / "graph.pb"


@pytest.fixture
def x_npy(tmp_path):
    path = tmp_path / "x.npy"
    np.save(path, np.ones((2, 6, 3), np.float32))
    return path


def _run(graph, *args):
    return run_bounded(["run", graph, *args])


@pytest.mark.parametrize("frac", [0.5, 0.999])
def test_truncated_graph(frac, tmp_path, x_npy):
    raw = KERAS.read_bytes()
    path = tmp_path / "cut.pb"
    path.write_bytes(raw[:int(len(raw) * frac)])
    assert_refused(_run(path, "--feed", f"x=@{x_npy}", "--fetch", "Identity"), rc=2,
                   says="not a binary GraphDef")


@pytest.mark.parametrize("value,says", [
    ("@STR", "got <U1 values, expected float32"),
    ("[[1.0, 2.0]]", "does not match the declared shape [?,6,3]"),
])
def test_wrong_feed(value, says, tmp_path):
    if value == "@STR":
        path = tmp_path / "s.npy"
        np.save(path, np.full((2, 6, 3), "a"))
        value = f"@{path}"
    assert_refused(_run(KERAS, "--feed", f"x={value}", "--fetch", "Identity"), rc=2, says=says)


def test_float_into_int32_feed():
    assert_refused(_run(LSTM, "--feed", "x=[[[1,2,3,4]]]", "--feed", "lengths=[1.5]",
                        "--fetch", "outputs"), rc=2, says="cannot feed float64 values")


def test_sequence_length_of_another_batch():
    assert_refused(_run(LSTM, "--feed", "x=[[[1,2,3,4]]]", "--feed", "lengths=[1,1]",
                        "--fetch", "outputs"), rc=1, says="Expected shape for Tensor")


@pytest.mark.parametrize("steps", ["0", "-3"])
def test_zero_size_tensor_array_stack(steps):
    """TensorFlow refuses it too: a zero-size TensorArray whose element shape is not fully
    defined cannot be stacked (tools/gen_redteam_graphs.py keeps steps=0 out for this)."""
    assert_refused(_run(BEAM, "--feed", "memory=[[1,2,3,4,5]]", "--feed", f"steps={steps}",
                        "--fetch", "ids"), rc=1, says="TensorArray has size zero")


def test_loop_cycle_without_next_iteration(tmp_path):
    g = tfg.load(str(BEAM))
    merge = next(n for n in g if n.op == "Merge" and g[n.inputs[1].split(":")[0]].op
                 == "NextIteration")
    merge.inputs = [merge.inputs[0], g[merge.inputs[1].split(":")[0]].inputs[0]]
    path = tmp_path / "cycle.pb"
    tfg.save(g, str(path))
    assert_refused(_run(path, "--feed", "memory=[[1,2,3,4,5]]", "--feed", "steps=2",
                        "--fetch", "ids"), rc=2, says="cycle not broken by a NextIteration")


def _with_const(src, tmp_path, op, index, value, pick=0):
    g = tfg.load(str(src))
    node = [n for n in g if n.op == op][pick]
    const = g[node.inputs[index].split(":")[0]]
    assert const.op == "Const"
    const.set_attr("value", np.asarray(value, np.int32))
    path = tmp_path / f"{op}.pb"
    tfg.save(g, str(path))
    return path


@pytest.mark.parametrize("value,says", [
    (-3, "The num_elements to reserve must be a non negative number, but got -3"),
    # Session-time constant folding evaluated it, allocating 16 GiB of slots before any check.
    (2**31 - 1, "would allocate 16.00 GiB (shape [2147483647] of object)"),
])
def test_tensor_list_reserve_size(value, says, tmp_path, x_npy):
    path = _with_const(KERAS, tmp_path, "TensorListReserve", 1, value)
    assert_refused(_run(path, "--feed", f"x=@{x_npy}", "--fetch", "Identity",
                        "--max-memory", "1G"), rc=1, says=says)


@pytest.mark.parametrize("shape", [[7], [2, 3, 4]])
def test_tensor_list_element_shape_mismatch(shape, tmp_path, x_npy):
    path = _with_const(KERAS, tmp_path, "TensorListReserve", 0, shape)
    assert_refused(_run(path, "--feed", f"x=@{x_npy}", "--fetch", "Identity"), rc=1,
                   says="Tried to set a tensor with incompatible shape at a list index")


@pytest.mark.parametrize("value,says", [
    (-2, "Size should be >= 0."),
    # One bookkeeping object per index: it took minutes and all memory before the check.
    (2**31 - 1, "of TensorArray entries), over the memory limit"),
])
def test_tensor_array_size(value, says, tmp_path):
    path = _with_const(RAW, tmp_path, "TensorArrayV3", 0, value, pick=-1)
    assert_refused(_run(path, "--feed", "x=[[[1,2,3]]]", "--feed", "lengths=[1]",
                        "--fetch", "outputs", "--max-memory", "1G"), rc=1, says=says)


def test_dataflow_executor_keeps_the_memory_limit():
    """fast_path=False (and every step the fast path leaves to the dataflow executor) ran its
    kernels unchecked: the plan's calls had captured them before the guard wrapped them."""
    sess = tfg.Session(tfg.load(str(R / "alloc_by_value" / "graph.pb")), max_memory="1M",
                       fast_path=False)
    feeds = {"n:0": np.int32(3), "f:0": np.float32(0.05)}
    assert float(sess.run("by_int:0", feeds)) == 768.0
    with pytest.raises(TfgRuntimeError, match="over the memory limit"):
        sess.run("by_int:0", {"n:0": np.int32(5000), "f:0": np.float32(0.05)})


@pytest.mark.parametrize("args,says", [
    (["--fetch", "while/add"], "fetch 'while/add:0' is inside while loop 'while/while_context'"),
    (["--feed", "while/Identity_1=[[1,2,3,4,5]]", "--fetch", "ids"],
     "feed 'while/Identity_1:0' is inside while loop 'while/while_context'"),
])
def test_feed_or_fetch_inside_a_loop(args, says):
    """TensorFlow refuses both (Retval already set / inputs from different frames); tfg said
    "has no value: it is dead (computed on a branch that was not taken)", exit 1."""
    assert_refused(_run(BEAM, "--feed", "memory=[[1,2,3,4,5]]", "--feed", "steps=2", *args),
                   rc=2, says=says)


def test_exit_of_a_loop_can_be_fetched_and_fed():
    sess = tfg.Session(tfg.load(str(BEAM)))
    feeds = {"memory:0": np.ones((1, 5), np.float32), "steps:0": np.int32(2)}
    assert sess.run("while/Exit_1:0", feeds).shape == (3, 5)
    h = np.full((3, 5), 0.5, np.float32)
    assert float(sess.run("hsum:0", {**feeds, "while/Exit_1:0": h})) == pytest.approx(7.5)
