"""Keras LSTM/GRU SavedModels (tools/gen_keras_rnn_fixtures.py) and the TensorList ops their
loops carry: outputs equal TensorFlow's through the Python API and `tfg run --signature`;
the list kernels against TensorFlow's semantics and error words; lists carried around a v1
while loop; variant fetches and list errors refused with one line naming the node; `tfg grad`
through the lists."""
import numpy as np
import pytest

from conftest import FIXTURES
from helpers import tfg_cli
from tfg import builder as tb
from tfg.errors import TfgError, TfgRuntimeError
from tfg.executor.session import Session
from tfg.executor.restore import restore_variables
from tfg.graphdef import io, savedmodel
from tfg.kernels.context import KernelContext
from tfg.kernels.list_ops import TensorList
from tfg.kernels.registry import get_kernel
from tfg.schemas.dtypes import DType

SAVED = FIXTURES / "savedmodel"
FEEDS = SAVED / "keras_rnn_feeds.npz"
EXPECTED = np.load(SAVED / "keras_rnn_expected.npz")
F32 = DType.FLOAT


def _run_signature(model, sig, out):
    g = io.load(str(SAVED / model))
    sess = Session(g)
    restore_variables(sess, g, savedmodel.read_variables(g.saved_model.path))
    feeds = dict(np.load(FEEDS))
    bound, tensors, _ = savedmodel.bind_signature(g, sig, feeds, [out])
    return sess.run(tensors, feeds=bound)[0]


# --- the SavedModels ------------------------------------------------------------------------
@pytest.mark.parametrize("key", sorted(EXPECTED.files))
def test_outputs_equal_tensorflow(key):
    model, sig, out = key.split("/")
    got = _run_signature(model, sig, out)
    assert got.dtype == EXPECTED[key].dtype and got.shape == EXPECTED[key].shape
    np.testing.assert_allclose(got, EXPECTED[key], rtol=1e-5, atol=1e-6)


def test_the_loops_carry_tensor_lists():
    g = io.load(str(SAVED / "keras_gru"))
    ops = {n.op for n in g}
    assert {"TensorListReserve", "TensorListFromTensor", "TensorListGetItem",
            "TensorListSetItem", "TensorListStack"} <= ops
    assert "While" not in ops and {"Enter", "NextIteration", "Exit"} <= ops  # lowered to v1
    # a TensorList crosses the loop boundary: an Enter whose input is a TensorListReserve
    enters = [n for n in g if n.op == "Enter" and n.inputs
              and g[n.inputs[0].split(":")[0].lstrip("^")].op == "TensorListReserve"]
    assert enters


def test_graph_validates_and_shapes_infer_through_lists():
    from tfg.graphdef import infer, validate

    g = io.load(str(SAVED / "keras_lstm"))
    validate.validate(g, require_known_ops=False)  # only the unused save function is a call
    shapes = infer.infer(g)
    got = {}
    for n in g:
        if n.op.startswith("TensorList") and n.name.startswith("StatefulPartitionedCall_1/"):
            got.setdefault(n.op, set()).add(shapes[(n.name, 0)].shape)
    assert got["TensorListReserve"] == got["TensorListSetItem"] == {()}
    assert got["TensorListStack"] == {(5, None, 8), (1, None, 8)}  # as TensorFlow infers
    assert got["TensorListGetItem"] == {(None, 3), (None, 8)}


@pytest.mark.parametrize("model", ["keras_lstm", "keras_gru"])
def test_cli_run_signature(model, tmp_path):
    out = tmp_path / "out.npz"
    tfg_cli("run", SAVED / model, "--signature", "serving_default", "--feeds", FEEDS,
            "-o", out)
    with np.load(out) as got:
        assert list(got.files) == ["output_0"]
        np.testing.assert_allclose(got["output_0"],
                                   EXPECTED[f"{model}/serving_default/output_0"],
                                   rtol=1e-5, atol=1e-6)


def test_cli_refuses_a_variant_fetch(tmp_path):
    g = io.load(str(SAVED / "keras_lstm"))
    reserve = next(n.name for n in g if n.op == "TensorListReserve")
    out = tmp_path / "out.npz"
    p = tfg_cli("run", SAVED / "keras_lstm", "--signature", "serving_default", "--feeds",
                FEEDS, "--fetch", reserve, "-o", out, check=False)
    err = p.stderr.decode()
    assert p.returncode == 2, err
    assert reserve in err and "variant" in err and "Traceback" not in err
    assert len(err.strip().splitlines()) == 1
    assert not out.exists()


# --- kernels ------------------------------------------------------------------------------
def _k(op, *inputs, **attrs):
    """Run op's CPU kernel on inputs (attrs as the node carries them, defaults filled)."""
    with tb.Graph() as b:
        node = b.make_op("NoOp", [], name="n").node
    node.op = op
    for k, v in attrs.items():
        node.set_attr(k, v)
    ctx = KernelContext.for_node(node)
    return get_kernel(op).fn(ctx, *inputs)


def _i(v):
    return np.asarray(v, np.int32)


def _reserve(shape, n, dtype=F32):
    return _k("TensorListReserve", _i(shape), _i(n), element_dtype=dtype, shape_type=DType.INT32)


def _from(x, shape=-1):
    x = np.asarray(x)
    return _k("TensorListFromTensor", x, _i(shape), element_dtype=DType.from_numpy(x.dtype),
              shape_type=DType.INT32)


def test_set_get_stack_length_are_values():
    l0 = _reserve([-1, 2], 3)
    assert _k("TensorListLength", l0) == 3 and _k("TensorListLength", l0).dtype == np.int32
    a = np.arange(6, dtype=np.float32).reshape(3, 2)
    l1 = _k("TensorListSetItem", l0, _i(1), a, element_dtype=F32)
    assert isinstance(l1, TensorList) and l1 is not l0
    assert l0.items == [None] * 3  # the input list is unchanged
    assert _k("TensorListGetItem", l1, _i(1), _i([-1, 2]), element_dtype=F32) is a
    # an unset item reads as zeros of the shape the set items give
    np.testing.assert_array_equal(
        _k("TensorListGetItem", l1, _i(0), _i(-1), element_dtype=F32), np.zeros((3, 2)))
    np.testing.assert_array_equal(
        _k("TensorListGetItem", l0, _i(0), _i([4, 2]), element_dtype=F32), np.zeros((4, 2)))
    s = _k("TensorListStack", l1, _i([-1, 2]), element_dtype=F32, num_elements=3)
    assert s.shape == (3, 3, 2) and s.dtype == np.float32
    np.testing.assert_array_equal(s[1], a)
    np.testing.assert_array_equal(s[[0, 2]], 0)


def test_from_tensor_round_trip_and_element_shape():
    x = np.arange(24, dtype=np.float64).reshape(4, 3, 2)
    lst = _from(x, [-1, 2])
    assert len(lst) == 4 and lst.element_shape == (None, 2) and lst.element_dtype == DType.DOUBLE
    np.testing.assert_array_equal(_k("TensorListStack", lst, _i(-1), element_dtype=DType.DOUBLE),
                                  x)
    np.testing.assert_array_equal(
        _k("TensorListGetItem", lst, _i(2), _i(-1), element_dtype=DType.DOUBLE), x[2])
    np.testing.assert_array_equal(_k("TensorListElementShape", lst, shape_type=DType.INT32),
                                  [-1, 2])
    unknown = _k("TensorListElementShape", _reserve(-1, 1), shape_type=DType.INT64)
    assert unknown.shape == () and unknown == -1 and unknown.dtype == np.int64
    np.testing.assert_array_equal(
        _k("TensorListGather", lst, _i([3, 0]), _i(-1), element_dtype=DType.DOUBLE), x[[3, 0]])


def test_push_pop_resize():
    e = _k("EmptyTensorList", _i([2]), _i(2), element_dtype=F32, shape_type=DType.INT32)
    one = _k("TensorListPushBack", e, np.ones(2, np.float32), element_dtype=F32)
    two = _k("TensorListPushBack", one, np.full(2, 2, np.float32), element_dtype=F32)
    assert (len(e), len(one), len(two)) == (0, 1, 2)
    rest, top = _k("TensorListPopBack", two, _i(-1), element_dtype=F32)
    np.testing.assert_array_equal(top, [2, 2])
    assert len(rest) == 1 and len(two) == 2
    assert _k("TensorListStack", e, _i(-1), element_dtype=F32).shape == (0, 2)
    grown = _k("TensorListResize", one, _i(4))
    assert len(grown) == 4 and grown.items[1:] == [None] * 3 and len(one) == 1
    assert len(_k("TensorListResize", grown, _i(1))) == 1
    resized = _k("TensorListSetItem", one, _i(3), np.zeros(2, np.float32), element_dtype=F32,
                 resize_if_index_out_of_bounds=True)
    assert len(resized) == 4


@pytest.mark.parametrize("call, msg", [
    (lambda: _k("TensorListGetItem", _reserve([2], 3), _i(3), _i(-1), element_dtype=F32),
     "Trying to access element 3 in a list with 3 elements."),
    (lambda: _k("TensorListGetItem", _reserve([2], 3), _i(-1), _i(-1), element_dtype=F32),
     "Trying to access element -1 in a list with 3 elements."),
    (lambda: _k("TensorListGetItem", _reserve([2], 3), _i(0), _i(-1), element_dtype=DType.INT32),
     "Invalid data types; op elements int32 but list elements float"),
    (lambda: _k("TensorListGetItem", _reserve([-1, 2], 3), _i(0), _i(-1), element_dtype=F32),
     "Trying to read an uninitialized tensor but element_shape is not fully defined: [?,2] "
     "and no list element is set."),
    (lambda: _k("TensorListSetItem", _reserve([3, 2], 3), _i(3), np.zeros((3, 2), np.float32),
                element_dtype=F32),
     "Trying to modify element 3 in a list with 3 elements."),
    (lambda: _k("TensorListSetItem", _reserve([3, 2], 3), _i(0), np.zeros((3, 3), np.float32),
                element_dtype=F32),
     "Tried to set a tensor with incompatible shape at a list index. Item element shape: [3,3] "
     "list shape: [3,2]"),
    (lambda: _k("TensorListSetItem", _reserve([2], 3), _i(0), np.zeros(2, np.int32),
                element_dtype=F32),
     "Invalid data types; op elements int32 but list elements float"),
    (lambda: _k("TensorListStack", _reserve([3, 2], 3), _i(-1), element_dtype=F32,
                num_elements=2),
     "Operation expected a list with 2 elements but got a list with 3 elements."),
    (lambda: _k("TensorListStack", _reserve([3, 2], 3), _i([3, 3]), element_dtype=F32),
     "Incompatible shapes during merge: [3,3] vs. [3,2]"),
    (lambda: _k("TensorListStack", _reserve([-1, 2], 3), _i(-1), element_dtype=F32),
     "Tried to stack list which only contains uninitialized tensors and has a "
     "non-fully-defined element_shape: [?,2]"),
    (lambda: _k("TensorListStack", _reserve(-1, 0), _i(-1), element_dtype=F32),
     "Tried to stack elements of an empty list with non-fully-defined element_shape: "
     "<unknown>"),
    (lambda: _k("TensorListPopBack", _reserve([2], 0), _i(-1), element_dtype=F32),
     "Trying to pop from an empty list."),
    (lambda: _k("TensorListFromTensor", np.float32(1), _i(-1), element_dtype=F32,
                shape_type=DType.INT32),
     "Tensor must be at least a vector, but saw shape: []"),
    (lambda: _from(np.zeros((4, 3), np.float32), [2]),
     "Specified a list with shape [2] from a tensor with shape [3]"),
    (lambda: _reserve([2], -1),
     "The num_elements to reserve must be a non negative number, but got -1"),
    (lambda: _reserve([[2]], 1), "Shape must be at most rank 1 but is rank 2"),
    (lambda: _k("TensorListGetItem", np.zeros(2, np.float32), _i(0), _i(-1), element_dtype=F32),
     "input_handle is not a TensorList"),
])
def test_errors_in_tensorflows_words(call, msg):
    with pytest.raises(TfgRuntimeError) as e:
        call()
    assert msg in str(e.value)


def test_push_into_a_full_list():
    e = _k("EmptyTensorList", _i([2]), _i(1), element_dtype=F32, shape_type=DType.INT32)
    one = _k("TensorListPushBack", e, np.ones(2, np.float32), element_dtype=F32)
    with pytest.raises(TfgRuntimeError, match="Tried to push item into a full list list size: "
                                               "1 max_num_elements: 1"):
        _k("TensorListPushBack", one, np.ones(2, np.float32), element_dtype=F32)


# --- graphs: a list around a v1 while loop, errors through the executor and the CLI ---------
def _list_loop_graph(index_offset=0):
    """ys[i] = x[i] * 2 for i < n, through a TensorList read and a TensorList written in a
    tfg.builder while loop (what Keras' RNN loop does); `index_offset` shifts the write."""
    with tb.Graph() as b:
        x = tb.placeholder(tb.float32, [None, 3], name="x")
        n = tb.reshape(tb.slice(tb.shape(x), [0], [1]), [], name="n")
        es = tb.constant(np.array([-1], np.int32))
        ins = b.make_op("TensorListFromTensor", [x, es],
                        {"element_dtype": tb.float32, "shape_type": tb.int32}, "ins",
                        out_dtypes=[DType.VARIANT]).outputs[0]
        outs = b.make_op("TensorListReserve", [es, n],
                         {"element_dtype": tb.float32, "shape_type": tb.int32}, "outs",
                         out_dtypes=[DType.VARIANT]).outputs[0]

        def body(i, acc):
            item = b.make_op("TensorListGetItem", [ins, i, es], {"element_dtype": tb.float32},
                             "get", out_dtypes=[tb.float32]).outputs[0]
            acc = b.make_op("TensorListSetItem", [acc, i + index_offset, item * 2.0],
                            {"element_dtype": tb.float32}, "set",
                            out_dtypes=[DType.VARIANT]).outputs[0]
            return i + 1, acc

        _, done = tb.while_loop(lambda i, acc: i < n, body, [tb.constant(0), outs])
        e3 = tb.constant(np.array([3], np.int32))  # 0 iterations: nothing set, shape from here
        ys = b.make_op("TensorListStack", [done, e3], {"element_dtype": tb.float32}, "ys",
                       out_dtypes=[tb.float32]).outputs[0]
        tb.identity(tb.reduce_sum(ys), name="loss")
    return b.graph


def test_a_list_carried_around_a_while_loop():
    g = _list_loop_graph()
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    np.testing.assert_array_equal(Session(g).run("ys", {"x": x}), x * 2)
    # the Python API hands a fetched list back as is (the CLI refuses it)
    done = Session(g).run("while/Exit_1", {"x": x})
    assert isinstance(done, TensorList) and len(done) == 4
    np.testing.assert_array_equal(done.items[3], x[3] * 2)
    assert Session(g).run("ys", {"x": x[:0]}).shape == (0, 3)  # zero iterations


def test_a_list_sent_between_devices():
    with tb.Graph() as b:
        x = tb.placeholder(tb.float32, [None, 3], name="x")
        es = tb.constant(np.array([-1], np.int32))
        with b.device("/device:CPU:0"):
            lst = b.make_op("TensorListFromTensor", [x, es],
                            {"element_dtype": tb.float32, "shape_type": tb.int32}, "l",
                            out_dtypes=[DType.VARIANT]).outputs[0]
        with b.device("/device:CPU:1"):
            seven = tb.constant(np.full(3, 7, np.float32))
            lst = b.make_op("TensorListSetItem", [lst, tb.constant(0), seven],
                            {"element_dtype": tb.float32}, "s",
                            out_dtypes=[DType.VARIANT]).outputs[0]
            b.make_op("TensorListStack", [lst, es], {"element_dtype": tb.float32}, "y",
                      out_dtypes=[tb.float32])
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    y = Session(b.graph, devices="cpu:2").run("y", {"x": x})
    np.testing.assert_array_equal(y, [[7, 7, 7], [3, 4, 5]])
    np.testing.assert_array_equal(x, np.arange(6).reshape(2, 3))  # the feed is not written


def test_list_error_in_a_loop_names_the_node_cli(tmp_path):
    g = _list_loop_graph(index_offset=1)  # writes ys[n]: out of range in the last iteration
    x = np.zeros((2, 3), np.float32)
    with pytest.raises(TfgError, match=r"set.*TensorListSetItem.*Trying to modify element 2 "
                                       r"in a list with 2 elements"):
        Session(g).run("ys", {"x": x})
    path, out = tmp_path / "g.pb", tmp_path / "out.npz"
    io.save(g, str(path))
    p = tfg_cli("run", path, "--feed", "x=[[0,0,0],[0,0,0]]", "--fetch", "ys", "-o", out,
                check=False)
    err = p.stderr.decode()
    # a value error while running: exit 1, as every kernel's (the CLI contract's exit codes)
    assert p.returncode == 1, err
    assert "TensorListSetItem" in err and "Trying to modify element 2" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) == 1
    assert not out.exists()


def test_malformed_list_nodes_are_named(tmp_path):
    """A list op fed a float where its signature wants a variant, or missing its
    element_dtype: a malformed graph, refused before running as TensorFlow's import refuses it
    (exit 2), one line naming the node and what is wrong."""
    with tb.Graph() as float_in:
        x = tb.placeholder(tb.float32, [2], name="x")
        float_in.make_op("TensorListLength", [x], {}, "len", out_dtypes=[tb.int32])
    with tb.Graph() as no_dtype:
        tb.placeholder(tb.float32, [2], name="x")
        es = tb.constant(np.array([2], np.int32))
        r = no_dtype.make_op("TensorListReserve", [es, tb.constant(3)],
                             {"shape_type": tb.int32}, "res",
                             out_dtypes=[DType.VARIANT]).outputs[0]
        no_dtype.make_op("TensorListLength", [r], {}, "len", out_dtypes=[tb.int32])
    for b, msg in ((float_in, "node 'len' (TensorListLength): input 0 ('x') is float32, "
                              "expected variant"),
                   (no_dtype, "node 'res' (TensorListReserve): missing required attr "
                              "'element_dtype'")):
        path = tmp_path / "g.pb"
        io.save(b.graph, str(path))
        p = tfg_cli("run", path, "--feed", "x=[1,2]", "--fetch", "len", check=False)
        err = p.stderr.decode()
        assert p.returncode == 2, err
        assert msg in err and "Traceback" not in err and len(err.strip().splitlines()) == 1


def test_tfg_grad_through_list_ops(tmp_path):
    """`tfg grad` differentiates through the TensorLists of a loop (list gradients in
    tfg/passes/grad/list_grads.py; the Keras models' in test_tensor_list_grad.py)."""
    g = _list_loop_graph()
    path, out = tmp_path / "g.pb", tmp_path / "grad.pb"
    io.save(g, str(path))
    tfg_cli("grad", path, "--ys", "loss", "--xs", "x", "-o", out)
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(Session(io.load(str(out))).run("grad/x", {"x": x}),
                                  np.full((2, 3), 2.0, np.float32))


def test_memory_limit_checked_before_a_list_allocates():
    def graph(shape, n):
        with tb.Graph() as b:
            es = tb.constant(np.array(shape, np.int32))
            r = b.make_op("TensorListReserve", [es, tb.constant(n)],
                          {"element_dtype": tb.float32, "shape_type": tb.int32}, "res",
                          out_dtypes=[DType.VARIANT]).outputs[0]
            b.make_op("TensorListStack", [r, es], {"element_dtype": tb.float32}, "st",
                      out_dtypes=[tb.float32])
        return b.graph

    with pytest.raises(TfgRuntimeError, match=r"'res' \(TensorListReserve\).*16.00 GiB"):
        Session(graph([2], 2**31 - 1), max_memory="1M").run("st")  # 2**31 item slots
    with pytest.raises(TfgRuntimeError, match=r"'st' \(TensorListStack\).*111.76 GiB"):
        Session(graph([100000, 100000], 3), max_memory="1M").run("st")
    assert Session(graph([2], 3), max_memory="1M").run("st").shape == (3, 2)
