"""`tfg grad` through TensorLists: the Keras LSTM/GRU SavedModels (their lowered While loops
carry the input list, the output list and the variables through) against TensorFlow's
tf.GradientTape (tests/fixtures/tensor_array/keras_rnn_grads.npz), each list op's gradient
against finite differences, and the list kernels the gradients use (Scatter, Concat, Split,
AddN and ZerosLike of lists)."""
import numpy as np
import pytest

from conftest import FIXTURES
from helpers import numeric_gradient
from tfg import builder as tb
from tfg.errors import TfgRuntimeError
from tfg.executor.restore import restore_variables
from tfg.executor.session import Session
from tfg.graphdef import io, savedmodel
from tfg.kernels.context import KernelContext
from tfg.kernels.list_ops import TensorList
from tfg.kernels.registry import get_kernel
from tfg.passes.grad import grad
from tfg.schemas.dtypes import DType

SAVED = FIXTURES / "savedmodel"
KERAS = np.load(FIXTURES / "tensor_array" / "keras_rnn_grads.npz")
F32, I32, VARIANT = DType.FLOAT, DType.INT32, DType.VARIANT


# --- Keras LSTM / GRU -------------------------------------------------------------------------
def _handles(g, output):
    """VarHandleOp names the output's computation reads, keyed by TensorFlow's variable name
    (the serving function's captures are `<name>_1` next to the other function's `<name>`)."""
    seen, stack = set(), [output]
    while stack:
        name = stack.pop()
        if name in seen or name not in g:
            continue
        seen.add(name)
        stack.extend(i.lstrip("^").split(":")[0] for i in g[name].inputs)
    out = {}
    for n in g:
        if n.op == "VarHandleOp" and n.name in seen:
            base = n.name[:-2] if n.name.endswith("_1") else n.name
            out[base] = n.name
    return out


def _keras_case(model):
    """(SavedModel graph, bound feeds, y, xs, TensorFlow names of the xs)."""
    g = io.load(str(SAVED / model))
    feeds = dict(np.load(SAVED / "keras_rnn_feeds.npz"))
    bound, (y,), _ = savedmodel.bind_signature(g, "serving_default", feeds, ["output_0"])
    (x,) = bound
    handles = _handles(g, y.split(":")[0])
    names = sorted(k[len(model) + 1:] for k in KERAS.files
                   if k.startswith(model + "/") and k != f"{model}/x")
    assert len(names) == 8 and set(names) <= set(handles)
    return g, bound, y, [x.split(":")[0]] + [handles[n] for n in names], ["x"] + names


def _check_keras(model, g, graph, bound, xs, names, devices=None):
    sess = Session(graph, devices=devices)
    restore_variables(sess, g, savedmodel.read_variables(g.saved_model.path))
    got = sess.run([f"grad/{n}" for n in xs], feeds=bound)
    for name, value in zip(names, got):
        want = KERAS[f"{model}/{name}"]
        assert value.shape == want.shape, name
        np.testing.assert_allclose(value, want, rtol=1e-4, atol=1e-6, err_msg=name)


@pytest.mark.parametrize("model", ["keras_lstm", "keras_gru"])
def test_keras_rnn_gradients_equal_tensorflow(model):
    g, bound, y, xs, names = _keras_case(model)
    g2 = grad(g, y, xs)
    _check_keras(model, g, g2, bound, xs, names)
    ops = {n.op for n in g2 if n.name.startswith("gradients/")}
    assert {"TensorListStack", "TensorListGetItem", "TensorListSetItem",
            "TensorListFromTensor"} <= ops


def test_keras_lstm_gradients_after_optimize_on_three_devices():
    from tfg.passes.manager import optimize

    g, bound, y, xs, names = _keras_case("keras_lstm")
    keep = [f"grad/{n}" for n in xs] + [n.name for n in g]  # the model's restore function too
    g3 = optimize(grad(g, y, xs), keep=keep)
    _check_keras("keras_lstm", g, g3, bound, xs, names, devices="cpu:3")


# --- each list op's gradient against finite differences --------------------------------------
def _list(b, op, inputs, attrs, name, n_out=1, dtypes=None):
    node = b.make_op(op, inputs, attrs, name, out_dtypes=dtypes or [VARIANT] * n_out)
    return node.outputs if n_out > 1 else node.outputs[0]


def _es(shape):
    return tb.constant(np.array(shape, np.int32))


def _f32(attrs=None):
    return dict({"element_dtype": F32}, **(attrs or {}))


def _shape_type(attrs=None):
    return dict({"element_dtype": F32, "shape_type": I32}, **(attrs or {}))


def _graph(build):
    """A graph with placeholder x (4, 3) and loss = sum(y * y + y), y = build(b, x)."""
    with tb.Graph() as b:
        x = tb.placeholder(tb.float32, [4, 3], name="x")
        y = build(b, x)
        tb.reduce_sum(y * y + y, name="loss")
    return b.graph


def _from(b, x):
    return _list(b, "TensorListFromTensor", [x, _es([3])], _shape_type(), "l")


def _stack(b, lst, n=-1, shape=(3,)):
    return _list(b, "TensorListStack", [lst, _es(list(shape))], _f32({"num_elements": n}),
                 "stack", dtypes=[F32])


CASES = {
    # FromTensor + Stack
    "stack": lambda b, x: (_stack(b, _from(b, x)) * 1.0),
    # GetItem of two items, one read twice
    "get_item": lambda b, x: (_list(
        b, "TensorListGetItem", [_from(b, x), tb.constant(1), _es([3])], _f32(), "get",
        dtypes=[F32]) * 2.0 + _list(b, "TensorListGetItem", [_from(b, x), tb.constant(3),
                                                             _es([3])], _f32(), "get2",
                                    dtypes=[F32])),
    # SetItem over an item of x: x's item 2 gets no gradient, the new value does
    "set_item": lambda b, x: (_stack(b, _list(
        b, "TensorListSetItem", [_from(b, x), tb.constant(2), tb.sin(x[0])], _f32(), "set"))),
    # PushBack onto a list from x, then PopBack twice
    "push_pop": lambda b, x: (_push_pop(b, x)),
    # Gather rows 3, 0, 3
    "gather": lambda b, x: (_list(
        b, "TensorListGather", [_from(b, x), tb.constant(np.array([3, 0, 3], np.int32)),
                                _es([3])], _f32(), "gather", dtypes=[F32])),
    # Scatter x's rows to 1, 0, 5, 2 of a 6-item list, stacked (unset items zeros)
    "scatter": lambda b, x: (_stack(b, _list(
        b, "TensorListScatterV2", [x, tb.constant(np.array([1, 0, 5, 2], np.int32)), _es([3]),
                                   tb.constant(6)], _shape_type(), "scatter"))),
    # ScatterIntoExistingList over a list from x
    "scatter_into": lambda b, x: (_stack(b, _list(
        b, "TensorListScatterIntoExistingList",
        [_from(b, x), tb.square(x[1:3]), tb.constant(np.array([3, 0], np.int32))], _f32(),
        "scatter_into"))),
    # Split into 1 + 3 rows, Concat back, resized to 3 items then stacked
    "split_concat": lambda b, x: (_list(
        b, "TensorListConcatV2", [_list(b, "TensorListSplit", [
            x, _es([-1, 3]), tb.constant(np.array([1, 3], np.int64))], _shape_type(), "split"),
            _es([-1, 3]), tb.constant(np.zeros(0, np.int64))], _shape_type(), "concat", 2,
        dtypes=[F32, DType.INT64])[0]),
    "resize": lambda b, x: (_stack(b, _list(
        b, "TensorListResize", [_from(b, x), tb.constant(3)], {}, "resize"))),
}


def _push_pop(b, x):
    pushed = _list(b, "TensorListPushBack", [_from(b, x), tb.exp(x[2])], _f32(), "push")
    rest, last = _list(b, "TensorListPopBack", [pushed, _es([3])], _f32(), "pop", 2,
                       dtypes=[VARIANT, F32])
    _, before = _list(b, "TensorListPopBack", [rest, _es([3])], _f32(), "pop2", 2,
                      dtypes=[VARIANT, F32])
    return last * 3.0 + before


@pytest.mark.parametrize("case", sorted(CASES))
def test_list_op_gradient_equals_finite_differences(case):
    g = _graph(CASES[case])
    x0 = np.random.RandomState(1).randn(4, 3).astype(np.float32)
    got = Session(grad(g, "loss", "x")).run("grad/x", {"x": x0})
    sess = Session(g)
    want = numeric_gradient(lambda v: float(sess.run("loss", {"x": v.astype(np.float32)})),
                            x0.astype(np.float64))
    np.testing.assert_allclose(got, want, rtol=2e-2, atol=2e-3)


def test_a_list_carried_around_a_while_loop_is_differentiated():
    """The list read inside the loop is a loop invariant: its gradients (lists) are summed
    over the iterations by AddN of lists."""
    with tb.Graph() as b:
        x = tb.placeholder(tb.float32, [3, 2], name="x")
        ins = _from_es(b, x)
        outs = _list(b, "TensorListReserve", [_es([2]), tb.constant(3)], _shape_type(), "outs")

        def body(i, acc):
            item = _list(b, "TensorListGetItem", [ins, i, _es([2])], _f32(), "get",
                         dtypes=[F32])
            return i + 1, _list(b, "TensorListSetItem", [acc, i, item * item], _f32(), "set")

        _, done = tb.while_loop(lambda i, acc: i < 3, body, [tb.constant(0), outs])
        tb.reduce_sum(_list(b, "TensorListStack", [done, _es([2])], _f32(), "ys",
                            dtypes=[F32]), name="loss")
    x0 = np.arange(6, dtype=np.float32).reshape(3, 2)
    got = Session(grad(b.graph, "loss", "x")).run("grad/x", {"x": x0})
    np.testing.assert_allclose(got, 2 * x0)


def _from_es(b, x):
    return _list(b, "TensorListFromTensor", [x, _es([2])], _shape_type(), "ins")


# --- kernels ------------------------------------------------------------------------------------
def _k(op, *inputs, **attrs):
    with tb.Graph() as b:
        node = b.make_op("NoOp", [], name="n").node
    node.op = op
    for k, v in attrs.items():
        node.set_attr(k, v)
    return get_kernel(op).fn(KernelContext.for_node(node), *inputs)


def _items(lst):
    return [None if a is None else a.tolist() for a in lst.items]


def test_scatter_kernels():
    x = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
    lst = _k("TensorListScatter", x, np.array([2, 0], np.int32), np.array([-1], np.int32),
             element_dtype=F32, shape_type=I32)
    assert _items(lst) == [[3.0, 4.0], None, [1.0, 2.0]]
    lst = _k("TensorListScatterV2", x, np.array([0, 1], np.int32), np.array([2], np.int32),
             np.int32(4), element_dtype=F32, shape_type=I32)
    assert _items(lst) == [[1.0, 2.0], [3.0, 4.0], None, None]
    lst = _k("TensorListScatterIntoExistingList", lst, x[:1] * 0, np.array([1], np.int32),
             element_dtype=F32)
    assert _items(lst)[1] == [0.0, 0.0]
    with pytest.raises(TfgRuntimeError, match="Indices in TensorListScatter must all be "
                                              "non-negative."):
        _k("TensorListScatter", x, np.array([-1, 0], np.int32), np.array([-1], np.int32),
           element_dtype=F32, shape_type=I32)
    with pytest.raises(TfgRuntimeError, match="Invalid number of rows in input tensor. "
                                              "Expected: 3 Actual: 2"):
        _k("TensorListScatter", x, np.array([0, 1, 2], np.int32), np.array([-1], np.int32),
           element_dtype=F32, shape_type=I32)


def test_split_and_concat_kernels():
    x = np.arange(1, 7, dtype=np.float32).reshape(3, 2)
    lst = _k("TensorListSplit", x, np.array([-1, 2], np.int32), np.array([1, 0, 2], np.int64),
             element_dtype=F32, shape_type=I32)
    assert [a.shape for a in lst.items] == [(1, 2), (0, 2), (2, 2)]
    value, lengths = _k("TensorListConcat", lst, element_dtype=F32)
    np.testing.assert_array_equal(value, x)
    np.testing.assert_array_equal(lengths, [1, 0, 2])
    with pytest.raises(TfgRuntimeError, match="Unused values in tensor. Length of tensor: 3 "
                                              "Values used: 2"):
        _k("TensorListSplit", x, np.array([-1, 2], np.int32), np.array([1, 1], np.int64),
           element_dtype=F32, shape_type=I32)
    # unset items concat as zeros of leading_dims rows
    reserve = TensorList(F32, (None, 2), [None, np.ones((1, 2), np.float32)])
    value, lengths = _k("TensorListConcatV2", reserve, np.array([-1, 2], np.int32),
                        np.array([2, 1], np.int64), element_dtype=F32, shape_type=I32)
    np.testing.assert_array_equal(value, [[0, 0], [0, 0], [1, 1]])
    np.testing.assert_array_equal(lengths, [2, 1])
    scalars = TensorList(F32, (), [np.float32(1.0)])
    with pytest.raises(TfgRuntimeError, match="Concat requires elements to be at least "
                                              "vectors, found scalars instead."):
        _k("TensorListConcat", scalars, element_dtype=F32)


def test_add_n_and_zeros_like_of_lists():
    a = TensorList(F32, (2,), [np.ones(2, np.float32), None, None])
    b = TensorList(F32, (2,), [np.ones(2, np.float32), np.full(2, 3.0, np.float32), None])
    total = _k("AddN", a, b, N=2, T=VARIANT)
    assert _items(total) == [[2.0, 2.0], [3.0, 3.0], None]
    zeros = _k("ZerosLike", b, T=VARIANT)
    assert _items(zeros) == [[0.0, 0.0], [0.0, 0.0], None]
    with pytest.raises(TfgRuntimeError, match="Trying to add two lists of tensors with "
                                              "different lengths. One is 3 and the other is 1"):
        _k("AddN", a, TensorList(F32, (2,), [None]), N=2, T=VARIANT)
