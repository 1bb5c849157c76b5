"""Graph validation: every TensorFlow-made graph passes; each kind of problem gives a one-line
error naming the node."""
import numpy as np
import pytest

from conftest import FIXTURES, conformance_cases
from tfg.errors import GraphValidationError, UnknownOpError
from tfg.graphdef import io
from tfg.graphdef.attrs import Shape
from tfg.graphdef.graph import Graph
from tfg.graphdef.validate import unknown_ops, validate
from tfg.schemas.dtypes import DType

F = DType.FLOAT


@pytest.mark.parametrize("case", conformance_cases(), ids=lambda p: p.name)
def test_conformance_graphs_validate(case):
    assert validate(io.load(case / "graph.pb")) == []


TF_MADE = [p for d in ("frames", "kernels", "shapes")
           for p in sorted((FIXTURES / d).glob("**/*.pb"))]


@pytest.mark.parametrize("path", TF_MADE, ids=lambda p: p.parent.name)
def test_fixture_graphs_validate(path):
    assert validate(io.load(path)) == []


def _base():
    g = Graph()
    g.add_node("x", "Placeholder", attrs={"dtype": F, "shape": Shape((2, 2))})
    g.add_node("y", "Relu", ["x"], {"T": F})
    return g


def _fails(g, *words, error=GraphValidationError):
    with pytest.raises(error) as info:
        validate(g)
    msg = str(info.value)
    assert "\n" not in msg
    for w in words:
        assert w in msg, msg
    return msg


def test_valid_graph():
    assert validate(_base()) == []


def test_dangling_input():
    g = _base()
    g.add_node("z", "Neg", ["nothere"], {"T": F})
    _fails(g, "'z'", "nothere", "names no node")


def test_input_port_out_of_range():
    g = _base()
    g.add_node("z", "Neg", ["y:1"], {"T": F})
    _fails(g, "'z'", "output 1", "1 output")


def test_unknown_op():
    g = _base()
    g.add_node("z", "FancyOp", ["y"])
    _fails(g, "'z'", "FancyOp", error=UnknownOpError)
    assert validate(g, require_known_ops=False) == ["FancyOp"]
    assert unknown_ops(g) == ["FancyOp"]


def test_missing_required_attr():
    g = _base()
    g.add_node("z", "Neg", ["y"])
    _fails(g, "'z'", "missing required attr 'T'")


def test_attr_of_the_wrong_type():
    g = _base()
    g.add_node("z", "Neg", ["y"], {"T": 3})
    _fails(g, "'z'", "attr 'T' must be type", "holds i")


def test_attr_list_of_the_wrong_type():
    g = _base()
    g.add_node("z", "Squeeze", ["y"], {"T": F, "squeeze_dims": [1.5]})
    _fails(g, "'z'", "squeeze_dims", "list(int)", "list(f)")


def test_attr_value_not_allowed():
    g = _base()
    g.add_node("z", "Relu", ["y"], {"T": DType.STRING})
    _fails(g, "'z'", "attr 'T' is string", "not one of")
    g = _base()
    g.add_node("w", "Const", attrs={"dtype": F, "value": np.ones((1, 1, 2, 2), np.float32)})
    g.add_node("c", "Conv2D", ["x", "w"], {"T": F, "strides": [1, 1, 1, 1], "padding": b"FULL"})
    _fails(g, "'c'", "padding", "FULL")


def test_attr_below_minimum():
    g = _base()
    g.add_node("z", "AddN", [], {"T": F, "N": 0})
    _fails(g, "'z'", "minimum 1")


def test_attr_the_op_does_not_have():
    g = _base()
    g.add_node("z", "Neg", ["y"], {"T": F, "bogus": 1})
    _fails(g, "'z'", "bogus")
    g = _base()
    g.add_node("z", "Neg", ["y"], {"T": F, "_private": 1})  # underscore attrs are free
    assert validate(g) == []


def test_wrong_number_of_inputs():
    g = _base()
    g.add_node("z", "Neg", ["x", "y"], {"T": F})
    _fails(g, "'z'", "2 data inputs", "takes 1")
    g = _base()
    g.add_node("z", "AddN", ["x", "y"], {"T": F, "N": 3})
    _fails(g, "'z'", "2 data inputs", "takes 3")


def test_control_input_before_data_input():
    g = _base()
    g.add_node("z", "Neg", ["^x", "y"], {"T": F})
    _fails(g, "'z'", "after control input")


def test_cycle_without_next_iteration():
    g = _base()
    g.add_node("a", "Neg", ["b"], {"T": F})
    g.add_node("b", "Neg", ["a"], {"T": F})
    _fails(g, "cycle", "'a'")


def test_cycle_through_next_iteration_is_fine():
    g = _base()
    g.add_node("e", "Enter", ["x"], {"T": F, "frame_name": b"f"})
    g.add_node("m", "Merge", ["e", "n"], {"T": F, "N": 2})
    g.add_node("n", "NextIteration", ["m"], {"T": F})
    assert validate(g) == []


def test_merge_without_inputs():
    g = _base()
    g.add_node("m", "Merge", [], {"T": F, "N": 1})
    _fails(g, "'m'", "Merge needs at least 1")


def test_switch_without_two_inputs():
    g = _base()
    g.add_node("s", "Switch", ["x"], {"T": F})
    _fails(g, "'s'", "Switch needs 2 data inputs")


def test_enter_without_frame_name():
    g = _base()
    g.add_node("e", "Enter", ["x"], {"T": F})
    _fails(g, "'e'", "frame_name")
    g = _base()
    g.add_node("e", "Enter", ["x"], {"T": F, "frame_name": b""})
    _fails(g, "'e'", "non-empty frame_name")


def test_input_dtype_mismatch():
    g = _base()
    g.add_node("i", "Placeholder", attrs={"dtype": DType.INT32})
    g.add_node("z", "AddV2", ["x", "i"], {"T": F})
    _fails(g, "'z'", "int32", "float32")


def test_reference_inputs():
    g = _base()
    g.add_node("v", "VariableV2", attrs={"dtype": F, "shape": Shape((2, 2))})
    g.add_node("a", "Assign", ["v", "x"], {"T": F})
    g.add_node("r", "Relu", ["v"], {"T": F})  # a ref output feeds a value input
    assert validate(g) == []
    g.add_node("bad", "Assign", ["x", "x"], {"T": F})
    _fails(g, "'bad'", "reference")
