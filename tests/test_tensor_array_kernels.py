"""TensorArray, ReverseSequence, TopKV2 and Erfc kernels against TensorFlow's semantics: the
error words below are what TensorFlow 2.21 prints for the same calls (its kernels run on a
graph of the raw ops), with the array's name `<name>_<counter>` as TensorFlow prints it."""
import math

import numpy as np
import pytest

from tfg import builder as tb
from tfg.errors import TfgRuntimeError
from tfg.graphdef.attrs import Shape
from tfg.kernels.context import KernelContext
from tfg.kernels.registry import get_kernel
from tfg.kernels.resources import StepContext
from tfg.kernels.tensor_array_ops import TensorArray
from tfg.schemas.dtypes import DType

F32 = DType.FLOAT


def _k(op, *inputs, step=None, **attrs):
    """Run op's CPU kernel on inputs (attrs as the node carries them, defaults filled)."""
    with tb.Graph() as b:
        node = b.make_op("NoOp", [], name=attrs.pop("name", "ta")).node
    node.op = op
    for k, v in attrs.items():
        node.set_attr(k, v)
    kd = get_kernel(op)
    ctx = KernelContext.for_node(node)
    if kd.needs_step:
        return kd.fn(ctx, step or StepContext(), *inputs)
    return kd.fn(ctx, *inputs)


def _array(size=3, **attrs):
    attrs.setdefault("dtype", F32)
    handle, flow = _k("TensorArrayV3", np.int32(size), **attrs)
    assert isinstance(handle, TensorArray) and flow == 0.0
    return handle, flow


def _write(h, i, value, flow=np.float32(0)):
    value = np.asarray(value, np.float32)
    return _k("TensorArrayWriteV3", h, np.int32(i), value, flow, T=F32)


def _read(h, i, flow=np.float32(0)):
    return _k("TensorArrayReadV3", h, np.int32(i), flow, dtype=F32)


def _raises(words, fn, *args, **kwargs):
    with pytest.raises(TfgRuntimeError) as e:
        fn(*args, **kwargs)
    assert words in str(e.value), str(e.value)
    return str(e.value)


# --- reads and writes ------------------------------------------------------------------------
def test_write_read_and_the_flow_passes_through():
    h, flow = _array()
    flow = _write(h, 1, [1.0, 2.0], np.float32(5.0))
    assert flow == 5.0
    np.testing.assert_array_equal(_read(h, 1, flow), [1.0, 2.0])
    assert _k("TensorArraySizeV3", h, flow) == 3


def test_the_handle_name_is_the_attr_or_node_name_with_a_counter():
    h, _ = _array(tensor_array_name=b"foo")
    assert h.name.startswith("foo_")
    h2, _ = _array(name="rnn/TensorArray")
    assert h2.name.startswith("rnn/TensorArray_") and h2.name != h.name


def test_reading_an_unwritten_index():
    h, _ = _array()
    msg = _raises("Could not read from TensorArray index 1.  Furthermore, the element shape is "
                  "not fully defined: <unknown>.  It is possible you are working with a "
                  "resizeable TensorArray", _read, h, 1)
    assert msg.startswith(f"TensorArray {h.name}: ")
    # A fully known element shape reads as zeros, as in TensorFlow.
    h, _ = _array(element_shape=Shape((2,)))
    np.testing.assert_array_equal(_read(h, 1), np.zeros(2, np.float32))
    h, _ = _array(element_shape=Shape((None, 2)))
    _write(h, 0, [[1.0, 2.0]])
    _raises("the element shape is not fully defined: [?,2].", _read, h, 2)


def test_identical_element_shapes_fixes_the_shape_at_the_first_write():
    h, _ = _array(identical_element_shapes=True)
    _write(h, 0, [1.0, 2.0])
    np.testing.assert_array_equal(_read(h, 2), [0.0, 0.0])
    _raises("Could not write to TensorArray index 1 because the value shape is [3] which is "
            "incompatible with the TensorArray's inferred element shape: [2] (consider setting "
            "infer_shape=False).", _write, h, 1, [1.0, 2.0, 3.0])
    h, _ = _array()  # without it elements may differ, as TensorFlow allows
    _write(h, 0, [1.0])
    _write(h, 1, [1.0, 2.0])


def test_writing_an_index_twice():
    h, _ = _array(tensor_array_name=b"foo")
    _write(h, 0, [1.0])
    _raises(f"TensorArray {h.name}: Could not write to TensorArray index 0 because it has "
            "already been written to.", _write, h, 0, [2.0])


def test_reading_twice_clears_after_read():
    h, _ = _array()
    _write(h, 0, [1.0])
    _read(h, 0)
    _raises("Could not read index 0 twice because it was cleared after a previous read "
            "(perhaps try setting clear_after_read = false?).", _read, h, 0)
    _raises("Could not write to TensorArray index 0 because it has already been read.",
            _write, h, 0, [1.0])
    h, _ = _array(clear_after_read=False)
    _write(h, 0, [1.0])
    _read(h, 0)
    np.testing.assert_array_equal(_read(h, 0), [1.0])


def test_indices_out_of_range_and_dtypes():
    h, _ = _array()
    _raises(f"TensorArray {h.name}: Tried to write to index 5 but array is not resizeable and "
            "size is: 3", _write, h, 5, [1.0])
    _raises("Tried to write to index -1 but array is not resizeable", _write, h, -1, [1.0])
    _raises("Tried to read from index 5 but array size is: 3", _read, h, 5)
    _raises("TensorArray dtype is float but Op is trying to write dtype int32.",
            _k, "TensorArrayWriteV3", h, np.int32(0), np.array([1], np.int32), np.float32(0),
            T=DType.INT32)


def test_checks_still_hold_after_a_write_of_the_same_dtype_and_shape_passed():
    """A write's dtype and shape are checked at the first of each (dtype, shape); the range,
    the element shape and a second write still fail as TensorFlow's do after one passed."""
    h, _ = _array(size=4, identical_element_shapes=True)
    _write(h, 0, [1.0, 2.0])
    _write(h, 1, [3.0, 4.0])  # the same dtype and shape: not checked again
    _raises("TensorArray dtype is float but Op is trying to write dtype int32.",
            _k, "TensorArrayWriteV3", h, np.int32(2), np.array([1, 2], np.int32),
            np.float32(0), T=DType.INT32)
    _raises("the value shape is [3] which is incompatible", _write, h, 2, [1.0, 2.0, 3.0])
    _raises("Tried to write to index 9 but array is not resizeable", _write, h, 9, [1.0, 2.0])
    _raises("because it has already been written to.", _write, h, 1, [5.0, 6.0])
    _write(h, 2, [5.0, 6.0])
    np.testing.assert_array_equal(_read(h, 1), [3.0, 4.0])


def test_dynamic_size_grows_on_write():
    h, flow = _array(size=0, dynamic_size=True)
    _write(h, 4, [1.0])
    assert _k("TensorArraySizeV3", h, flow) == 5
    _raises("Could not read from TensorArray index 0.", _k, "TensorArrayGatherV3", h,
            np.array([0, 4], np.int32), flow, dtype=F32)


def test_close():
    h, flow = _array()
    _k("TensorArrayCloseV3", h)
    _raises(f"TensorArray {h.name} has already been closed.", _write, h, 0, [1.0])
    assert _k("TensorArraySizeV3", h, flow) == 3  # TensorFlow still answers the size


# --- whole-array ops -------------------------------------------------------------------------
def test_scatter_gather():
    h, flow = _array()
    value = np.arange(6, dtype=np.float32).reshape(3, 2)
    flow = _k("TensorArrayScatterV3", h, np.array([2, 0, 1], np.int32), value, flow, T=F32)
    got = _k("TensorArrayGatherV3", h, np.array([0, 1, 2], np.int32), flow, dtype=F32)
    np.testing.assert_array_equal(got, value[[1, 2, 0]])
    h, flow = _array()
    _raises("Could not write to TensorArray index 0 because it has already been written to.",
            _k, "TensorArrayScatterV3", h, np.array([0, 0], np.int32),
            np.ones((2, 1), np.float32), flow, T=F32)
    h, flow = _array()
    _raises("Max scatter index must be < array size (3 vs. 3)", _k, "TensorArrayScatterV3", h,
            np.array([0, 3], np.int32), np.ones((2, 1), np.float32), flow, T=F32)
    h, flow = _array(size=0)
    _raises("TensorArray has size zero, but element shape <unknown> is not fully defined. "
            "Currently only static shapes are supported when packing zero-size TensorArrays.",
            _k, "TensorArrayGatherV3", h, np.zeros(0, np.int32), flow, dtype=F32)
    got = _k("TensorArrayGatherV3", h, np.zeros(0, np.int32), flow, dtype=F32,
             element_shape=Shape((2,)))
    assert got.shape == (0, 2)


def test_split_concat():
    h, flow = _array()
    flow = _k("TensorArraySplitV3", h, np.arange(1, 7, dtype=np.float32),
              np.array([1, 2, 3], np.int64), flow, T=F32)
    value, lengths = _k("TensorArrayConcatV3", h, flow, dtype=F32)
    np.testing.assert_array_equal(value, np.arange(1, 7, dtype=np.float32))
    np.testing.assert_array_equal(lengths, [1, 2, 3])
    assert lengths.dtype == np.int64
    h, flow = _array()
    _raises("TensorArray's size is not equal to the size of lengths (3 vs. 2), and the "
            "TensorArray is not marked as dynamically resizeable", _k, "TensorArraySplitV3", h,
            np.arange(3, dtype=np.float32), np.array([1, 2], np.int64), flow, T=F32)
    h, flow = _array()
    _write(h, 0, [1.0])
    _raises("Could not read from TensorArray index 1.", _k, "TensorArrayConcatV3", h, flow,
            dtype=F32)


# --- gradient arrays -------------------------------------------------------------------------
def test_grad_array_is_keyed_by_source_and_aggregates_writes():
    h, flow = _array()
    _write(h, 0, [1.0])
    g, gflow = _k("TensorArrayGradV3", h, flow, source=b"gradients")
    g2, _ = _k("TensorArrayGradV3", h, flow, source=b"gradients")
    other, _ = _k("TensorArrayGradV3", h, flow, source=b"gradients_1")
    assert g is g2 and other is not g and g.name == f"{h.name}@gradients"
    _write(g, 0, [2.0])
    _write(g2, 0, [3.0])
    np.testing.assert_array_equal(_read(g, 0), [5.0])
    _write(g, 1, [1.0])
    _raises(f"TensorArray {h.name}@gradients: Could not aggregate to TensorArray index 1 "
            "because the existing shape is [1] but the new input shape is [2].",
            _write, g, 1, [3.0, 4.0])
    # An unwritten gradient entry of an unknown-shaped forward entry: TensorFlow's error.
    _raises(f"TensorArray {h.name}@gradients: Could not read from TensorArray index 2.",
            _read, g, 2)


def test_grad_array_reads_unwritten_entries_as_zeros_of_the_forward_shapes():
    h, flow = _array(dynamic_size=True, size=0)
    _write(h, 0, [1.0, 2.0])
    _write(h, 1, [[1.0], [2.0], [3.0]])
    g, _ = _k("TensorArrayGradV3", h, flow, source=b"gradients")
    assert len(g) == 2
    np.testing.assert_array_equal(_read(g, 1), np.zeros((3, 1), np.float32))
    # Once a gradient exists the forward array no longer grows.
    _raises("Tried to write to index 4 but array is not resizeable and size is: 2",
            _write, h, 4, [1.0])
    gs, _ = _k("TensorArrayGradWithShape", h, flow, np.array([2], np.int32), source=b"s")
    np.testing.assert_array_equal(_read(gs, 0), np.zeros((2, 2), np.float32))


# --- ReverseSequence, TopKV2, Erfc -------------------------------------------------------------
def test_reverse_sequence():
    x = np.array([[1, 2, 3], [4, 5, 6]], np.float32)
    got = _k("ReverseSequence", x, np.array([2, 3], np.int64), seq_dim=1, T=F32)
    np.testing.assert_array_equal(got, [[2, 1, 3], [6, 5, 4]])
    got = _k("ReverseSequence", x.T, np.array([0, 3], np.int32), seq_dim=0, batch_dim=1,
             T=F32, Tlen=DType.INT32)
    np.testing.assert_array_equal(got, [[1, 6], [2, 5], [3, 4]])
    _raises("seq_lens(0) > input.dims(1)", _k, "ReverseSequence", x,
            np.array([4, 1], np.int64), seq_dim=1, T=F32)
    _raises("Length of seq_lengths != input.dims(0), (3 vs. 2)", _k, "ReverseSequence", x,
            np.array([1, 1, 1], np.int64), seq_dim=1, T=F32)


def test_top_k_orders_ties_by_index_for_every_dtype():
    for dtype in (np.float32, np.int32, np.uint8):
        x = np.array([[1, 3, 3, 2], [0, 0, 5, 0]], dtype)
        values, indices = _k("TopKV2", x, np.int32(3), T=DType.from_numpy(x.dtype))
        np.testing.assert_array_equal(indices, [[1, 2, 3], [2, 0, 1]])
        np.testing.assert_array_equal(values, np.take_along_axis(x, indices, 1))
        assert values.dtype == dtype and indices.dtype == np.int32
    _, idx = _k("TopKV2", np.ones(4, np.float32), np.int32(2), T=F32, index_type=DType.INT64)
    assert idx.dtype == np.int64
    _raises("input must have at least k columns. Had 4, needed 5", _k, "TopKV2",
            np.ones(4, np.float32), np.int32(5), T=F32)
    _raises("Need k >= 0, got -1", _k, "TopKV2", np.ones(4, np.float32), np.int32(-1), T=F32)


def test_erfc_keeps_its_tail():
    x = np.array([-3.0, 0.0, 1.0, 5.0, 9.0], np.float32)
    got = _k("Erfc", x, T=F32)
    want = np.array([math.erfc(v) for v in x.astype(np.float64)], np.float32)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    assert got[-1] > 0  # 1 - erf(9) would be 0 in float32


# --- the CLI ---------------------------------------------------------------------------------
def _read_unwritten_graph(index_dtype=DType.INT32):
    with tb.Graph() as b:
        size = tb.constant(3)
        h, flow = b.make_op("TensorArrayV3", [size], {"dtype": F32}, "ta",
                            out_dtypes=[DType.RESOURCE, F32]).outputs
        index = tb.constant(np.array(1, index_dtype.np))
        b.make_op("TensorArrayReadV3", [h, index, flow], {"dtype": F32}, "read",
                  out_dtypes=[F32])
    return b.graph


def test_cli_errors_name_the_node(tmp_path):
    """A read of an unwritten index fails while running (exit 1); a read whose index is a
    float is a malformed graph refused before running (exit 2). One line each, the node named,
    no output file."""
    from helpers import tfg_cli
    from tfg.graphdef import io

    for graph, code, words in (
            (_read_unwritten_graph(), 1, "Could not read from TensorArray index 1."),
            (_read_unwritten_graph(DType.FLOAT), 2, "expected int32")):
        path, out = tmp_path / "g.pb", tmp_path / "out.npz"
        io.save(graph, str(path))
        p = tfg_cli("run", path, "--fetch", "read", "-o", out, check=False)
        err = p.stderr.decode()
        assert p.returncode == code, err
        assert "'read'" in err and words in err, err
        assert "Traceback" not in err and len(err.strip().splitlines()) == 1
        assert not out.exists()
