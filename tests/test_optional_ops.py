"""The Optional ops (OptionalNone / FromValue / HasValue / GetValue), which control flow v2
writes into a cond's gradient, and TensorLists whose items are variants (the While gradient's
accumulator of those optionals, pushed and popped once per iteration). Errors are
TensorFlow's words (checked against TF 2.21)."""
import numpy as np
import pytest

from tfg import builder as tb
from tfg.errors import TfgRuntimeError
from tfg.executor.session import Session
from tfg.graphdef.attrs import Shape
from tfg.schemas.dtypes import DType

F32, I32, VARIANT = DType.FLOAT, DType.INT32, DType.VARIANT


def _op(b, op, inputs, attrs, name, dtypes=(VARIANT,)):
    node = b.make_op(op, inputs, attrs, name, out_dtypes=list(dtypes))
    return node.outputs if len(dtypes) > 1 else node.outputs[0]


def _get(b, opt, types, shapes, name="get"):
    return _op(b, "OptionalGetValue", [opt],
               {"output_types": types, "output_shapes": [Shape(s) for s in shapes]},
               name, dtypes=types)


def test_from_value_round_trip_and_has_value():
    with tb.Graph() as b:
        x = tb.placeholder(tb.float32, [2, 3], name="x")
        some = _op(b, "OptionalFromValue", [x, tb.constant(7)], {"Toutput_types": [F32, I32]},
                   "some")
        none = _op(b, "OptionalNone", [], {}, "none")
        _get(b, some, [F32, I32], [(None, 3), ()])
        for o, n in ((some, "has_some"), (none, "has_none")):
            _op(b, "OptionalHasValue", [o], {}, n, dtypes=[DType.BOOL])
    x0 = np.arange(6, dtype=np.float32).reshape(2, 3)
    got = Session(b.graph).run(["get:0", "get:1", "has_some", "has_none"], {"x": x0})
    np.testing.assert_array_equal(got[0], x0)
    assert got[1] == 7 and got[2] and not got[3]


@pytest.mark.parametrize("types,shapes,message", [
    ([F32], [(2, 3)], "The given optional has 2 components, expected 1"),
    ([F32, F32], [(2, 3), ()], "The given optional does not match the expected type for "
                               "component 1. Expected: float. Actual: int32."),
    ([F32, I32], [(3,), ()], "The given optional does not match the expected shape for "
                             "component 0. Expected: [3]. Actual: [2,3]."),
    (None, None, "The given optional does not have a value."),
])
def test_get_value_refuses_what_tensorflow_refuses(types, shapes, message):
    with tb.Graph() as b:
        x = tb.placeholder(tb.float32, [2, 3], name="x")
        if types is None:
            opt, types, shapes = _op(b, "OptionalNone", [], {}, "none"), [F32], [(2, 3)]
        else:
            opt = _op(b, "OptionalFromValue", [x, tb.constant(7)],
                      {"Toutput_types": [F32, I32]}, "some")
        _get(b, opt, types, shapes)
    with pytest.raises(TfgRuntimeError) as e:
        Session(b.graph).run("get:0", {"x": np.zeros((2, 3), np.float32)})
    assert message in str(e.value)


def test_list_of_optionals_push_and_pop():
    """A variant-element list holds optionals as they are; PopBack gives them back in
    reverse (the While gradient's accumulator)."""
    with tb.Graph() as b:
        x = tb.placeholder(tb.float32, [2], name="x")
        lst = _op(b, "EmptyTensorList", [tb.constant(np.array([], np.int32)), tb.constant(-1)],
                  {"element_dtype": VARIANT, "shape_type": I32}, "empty")
        for i, v in enumerate((x, x * 2.0)):
            opt = _op(b, "OptionalFromValue", [v], {"Toutput_types": [F32]}, f"opt{i}")
            lst = _op(b, "TensorListPushBack", [lst, opt], {"element_dtype": VARIANT}, f"push{i}")
        es = tb.constant(np.array([], np.int32))
        lst, top = _op(b, "TensorListPopBack", [lst, es], {"element_dtype": VARIANT}, "pop",
                       dtypes=(VARIANT, VARIANT))
        _get(b, top, [F32], [(2,)], "top")
        _, below = _op(b, "TensorListPopBack", [lst, es], {"element_dtype": VARIANT}, "pop2",
                       dtypes=(VARIANT, VARIANT))
        _get(b, below, [F32], [(2,)], "below")
    got = Session(b.graph).run(["top:0", "below:0"], {"x": np.array([1.0, -2.0], np.float32)})
    np.testing.assert_array_equal(got[0], [2.0, -4.0])
    np.testing.assert_array_equal(got[1], [1.0, -2.0])


def test_variant_list_refuses_a_numeric_item():
    with tb.Graph() as b:
        lst = _op(b, "EmptyTensorList", [tb.constant(np.array([], np.int32)), tb.constant(-1)],
                  {"element_dtype": VARIANT, "shape_type": I32}, "empty")
        _op(b, "TensorListPushBack", [lst, tb.constant(np.float32(1.0))],
            {"element_dtype": VARIANT}, "push")
    with pytest.raises(TfgRuntimeError, match="op elements float but list elements variant"):
        Session(b.graph).run("push")


def test_optionals_cross_tasks_as_tensorflow_encodes_them():
    """Optionals (alone, and as items of a list: the While gradient's accumulator) go
    through the wire codec and come back equal; the bytes are TensorFlow's
    (type_name tensorflow::data::Optional, metadata one byte 1/0, components as tensors)."""
    from tfg.executor.distributed import rpc
    from tfg.kernels.list_ops import TensorList
    from tfg.kernels.optional_ops import OptionalValue

    some = OptionalValue((np.arange(3, dtype=np.float32), np.int32(4)))
    proto = rpc.encode(some)
    var = proto.variant_val[0]
    assert var.type_name == "tensorflow::data::Optional" and var.metadata == b"\x01"
    back = rpc.decode(proto)
    np.testing.assert_array_equal(back.values[0], some.values[0])
    assert back.values[1] == 4
    assert rpc.decode(rpc.encode(OptionalValue(None))).values is None
    lst = TensorList(VARIANT, (), [some, OptionalValue(None)])
    items = rpc.decode(rpc.encode(lst)).items
    assert items[1].values is None and items[0].values[1] == 4
    var.metadata = b"\x02"
    with pytest.raises(TfgRuntimeError, match="corrupt Optional"):
        rpc.decode(proto)
