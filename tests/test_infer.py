"""Shape/dtype inference: against shapes TensorFlow inferred (tests/fixtures/shapes), against the
values TensorFlow computed in the conformance cases, through loops, and targeted shape functions."""
import json

import numpy as np
import pytest

from conftest import FIXTURES, conformance_cases
from tfg.errors import GraphValidationError, UnknownOpError
from tfg.graphdef import io
from tfg.graphdef.attrs import Shape
from tfg.graphdef.graph import Graph
from tfg.graphdef.infer import TensorInfo, infer, infer_node, output_shapes
from tfg.schemas.dtypes import DType
from tfg.schemas.ops.shape_fns import ShapeError, broadcast, merge, relax
from tfg.schemas.ops.signature import output_dtypes

F, I32 = DType.FLOAT, DType.INT32


# --- against TensorFlow ----------------------------------------------------------------------
def test_shapes_match_tensorflow():
    g = io.load(FIXTURES / "shapes" / "graph.pb")
    errors = []
    info = infer(g, errors=errors)
    assert errors == []
    tf_shapes = json.loads((FIXTURES / "shapes" / "shapes.json").read_text())["shapes"]
    checked = 0
    for name, outs in tf_shapes.items():
        for port, s in enumerate(outs):
            theirs = None if s is None else tuple(s)
            ours = info[(name, port)].shape
            # At least as specific as TensorFlow, never in conflict with it.
            assert merge(ours, theirs) == ours, (name, port, ours, theirs)
            checked += 1
    assert checked > 150


@pytest.mark.parametrize("case", conformance_cases(), ids=lambda p: p.name)
def test_conformance_graph_infers(case):
    g = io.load(case / "graph.pb")
    errors = []
    info = infer(g, errors=errors)
    assert errors == []
    for node in g:
        dts = output_dtypes(node)
        for port, dt in enumerate(dts):
            assert info[(node.name, port)].dtype == dt
    expected = np.load(case / "expected.npz")
    meta = json.loads((case / "case.json").read_text())
    fetched = expected.files if meta["kind"] != "grad" else []
    for key in fetched:
        node, _, port = key.partition(":")
        ti = info[(node, int(port or 0))]
        assert merge(ti.shape, expected[key].shape) == expected[key].shape, key
        assert ti.dtype.base.np == expected[key].dtype or expected[key].dtype == object, key


# --- whole-graph behaviour -----------------------------------------------------------------
def _const(g, name, value):
    value = np.asarray(value)
    return g.add_node(name, "Const", attrs={"dtype": DType.from_numpy(value.dtype),
                                            "value": value})


def _placeholder(g, name, shape, dtype=F):
    attrs = {"dtype": dtype}
    if shape is not None:
        attrs["shape"] = Shape(shape)
    return g.add_node(name, "Placeholder", attrs=attrs)


def test_shape_arithmetic_resolves_reshape_and_fill():
    g = Graph()
    _placeholder(g, "x", (None, 7, 4))
    g.add_node("s", "Shape", ["x"], {"T": F, "out_type": I32})
    _const(g, "b0", np.array([0], np.int32))
    _const(g, "b1", np.array([1], np.int32))
    g.add_node("batch", "StridedSlice", ["s", "b0", "b1", "b1"],
               {"T": I32, "Index": I32, "shrink_axis_mask": 1})
    _const(g, "m1", np.int32(-1))
    g.add_node("target", "Pack", ["batch", "m1"], {"T": I32, "N": 2})
    g.add_node("r", "Reshape", ["x", "target"], {"T": F, "Tshape": I32})
    g.add_node("inner", "StridedSlice", ["s", "b1", "b0", "b1"],
               {"T": I32, "Index": I32, "end_mask": 1})
    _const(g, "two", np.int32(2))
    g.add_node("dbl", "Mul", ["inner", "two"], {"T": I32})
    g.add_node("f", "Fill", ["dbl", "two"], {"T": I32, "index_type": I32})
    info = infer(g)
    assert info[("s", 0)].elems == (None, 7, 4)
    assert info[("target", 0)].elems == (None, -1)
    assert info[("r", 0)].shape == (None, None)
    assert info[("inner", 0)].value.tolist() == [7, 4]
    assert info[("dbl", 0)].value.tolist() == [14, 8]
    assert info[("f", 0)].shape == (14, 8)


def test_reshape_minus_one_with_known_input():
    g = Graph()
    _placeholder(g, "x", (2, 3, 4))
    _const(g, "s", np.array([-1, 4], np.int32))
    g.add_node("r", "Reshape", ["x", "s"], {"T": F, "Tshape": I32})
    assert output_shapes(g, "r") == [(6, 4)]


def test_loop_merge_relaxes_to_a_fixed_point():
    # i = zeros([1]); while ...: i = concat(i, i): the loop variable's length is unknown.
    g = Graph()
    _const(g, "init", np.zeros([1], np.float32))
    _const(g, "axis", np.int32(0))
    g.add_node("enter", "Enter", ["init"], {"T": F, "frame_name": b"loop"})
    g.add_node("merge", "Merge", ["enter", "next"], {"T": F, "N": 2})
    _const(g, "pred", np.bool_(True))
    g.add_node("cond", "LoopCond", ["pred"])
    g.add_node("switch", "Switch", ["merge", "cond"], {"T": F})
    g.add_node("body", "ConcatV2", ["switch:1", "switch:1", "axis"],
               {"T": F, "N": 2, "Tidx": I32})
    g.add_node("next", "NextIteration", ["body"], {"T": F})
    g.add_node("exit", "Exit", ["switch"], {"T": F})
    info = infer(g)
    assert info[("merge", 0)].shape == (None,)
    assert info[("merge", 1)].shape == ()
    assert info[("body", 0)].shape == (None,)
    assert info[("exit", 0)].shape == (None,)


def test_loop_with_stable_shape_keeps_it():
    g = Graph()
    _placeholder(g, "x", (3, 2))
    g.add_node("enter", "Enter", ["x"], {"T": F, "frame_name": b"loop"})
    g.add_node("merge", "Merge", ["enter", "next"], {"T": F, "N": 2})
    g.add_node("sq", "Square", ["merge"], {"T": F})
    g.add_node("next", "NextIteration", ["sq"], {"T": F})
    assert infer(g)[("merge", 0)].shape == (3, 2)


def test_unknown_ops_are_unknown_unless_strict():
    g = Graph()
    _placeholder(g, "x", (2,))
    g.add_node("c", "MyCustomOp", ["x"])
    g.add_node("y", "Neg", ["c:1"], {"T": F})
    errors = []
    info = infer(g, errors=errors)
    assert info[("c", 1)] == TensorInfo(None, None)
    assert info[("y", 0)] == TensorInfo(F, None)
    assert "MyCustomOp" in errors[0]
    with pytest.raises(UnknownOpError, match="MyCustomOp"):
        infer(g, strict=True)


def test_shape_conflict_is_unknown_or_strict_error():
    g = Graph()
    _placeholder(g, "a", (2, 3))
    _placeholder(g, "b", (4, 5))
    g.add_node("mm", "MatMul", ["a", "b"], {"T": F})
    assert infer(g)[("mm", 0)].shape is None
    with pytest.raises(GraphValidationError, match="'mm'"):
        infer(g, strict=True)


def test_feed_shapes_override():
    g = Graph()
    _placeholder(g, "x", None)
    g.add_node("y", "Relu", ["x"], {"T": F})
    assert infer(g, shapes={"x:0": (8, 3)})[("y", 0)].shape == (8, 3)


def test_resource_variable_read_has_the_declared_shape():
    g = Graph()
    g.add_node("v", "VarHandleOp", attrs={"dtype": F, "shape": Shape((4, 5)),
                                          "shared_name": b"v"})
    g.add_node("vid", "Identity", ["v"], {"T": DType.RESOURCE})
    g.add_node("r", "ReadVariableOp", ["vid"], {"dtype": F})
    assert output_shapes(g, "r") == [(4, 5)]


def test_infer_node_alone():
    g = Graph()
    node = g.add_node("mm", "MatMul", ["a", "b"], {"T": F, "transpose_b": True})
    out = infer_node(node, [TensorInfo(F, (8, 3)), TensorInfo(F, (5, 3))])
    assert out == [TensorInfo(F, (8, 5))]


def test_large_graph_is_linear():
    g = Graph()
    _placeholder(g, "x", (None, 4))
    prev = "x"
    for i in range(3000):
        g.add_node(f"n{i}", "Relu", [prev], {"T": F})
        prev = f"n{i}"
    assert infer(g)[(prev, 0)].shape == (None, 4)


# --- shape algebra and targeted shape functions ------------------------------------------------
def test_shape_algebra():
    assert broadcast((None, 3), (4, 1)) == (4, 3)
    assert broadcast((2, 1, 5), (3, 1)) == (2, 3, 5)
    assert broadcast((None,), (1,)) == (None,)
    assert broadcast((None,), (4,)) == (4,)
    assert broadcast(None, (4,)) is None
    with pytest.raises(ShapeError):
        broadcast((2,), (3,))
    assert merge((None, 3), (2, None)) == (2, 3)
    with pytest.raises(ShapeError):
        merge((2,), (2, 1))
    assert relax((2, 3), (2, 4)) == (2, None)
    assert relax((2,), (2, 3)) is None


def _shape_of(op, inputs, attrs):
    """Infer `op` on float placeholders of the given shapes (Consts for numpy arrays)."""
    g = Graph()
    names = []
    for i, spec in enumerate(inputs):
        names.append(f"in{i}")
        if isinstance(spec, np.ndarray):
            _const(g, names[-1], spec)
        else:
            _placeholder(g, names[-1], spec)
    g.add_node("op", op, names, attrs)
    return output_shapes(g, "op", strict=True)


def test_conv2d_shapes():
    x, w = (None, 32, 32, 3), (5, 5, 3, 16)
    base = {"T": F, "strides": [1, 2, 2, 1]}
    assert _shape_of("Conv2D", [x, w], {**base, "padding": b"SAME"}) == [(None, 16, 16, 16)]
    assert _shape_of("Conv2D", [x, w], {**base, "padding": b"VALID"}) == [(None, 14, 14, 16)]
    dil = {"T": F, "strides": [1, 1, 1, 1], "dilations": [1, 2, 2, 1], "padding": b"VALID"}
    assert _shape_of("Conv2D", [x, w], dil) == [(None, 24, 24, 16)]
    nchw = {"T": F, "strides": [1, 1, 2, 2], "padding": b"SAME", "data_format": b"NCHW"}
    assert _shape_of("Conv2D", [(8, 3, 32, 32), w], nchw) == [(8, 16, 16, 16)]
    with pytest.raises(GraphValidationError):
        _shape_of("Conv2D", [(1, 4, 4), w], {**base, "padding": b"SAME"})


def test_pool_shapes():
    attrs = {"T": F, "ksize": [1, 3, 3, 1], "strides": [1, 2, 2, 1], "padding": b"VALID"}
    assert _shape_of("MaxPool", [(8, 32, 32, 16)], attrs) == [(8, 15, 15, 16)]
    attrs["padding"] = b"SAME"
    assert _shape_of("AvgPool", [(8, 31, None, 16)], attrs) == [(8, 16, None, 16)]


def test_strided_slice_masks():
    def ss(shape, begin, end, strides, **masks):
        consts = [np.array(v, np.int32) for v in (begin, end, strides)]
        return _shape_of("StridedSlice", [shape, *consts],
                         {"T": F, "Index": I32, **masks})[0]
    assert ss((5, None, 3), [1, 0, 0], [0, 0, 1], [1, 1, 1],
              end_mask=3, shrink_axis_mask=4) == (4, None)
    assert ss((5, 6), [0, 1], [0, 0], [1, 1], ellipsis_mask=1, shrink_axis_mask=2) == (5,)
    assert ss((5, 6), [0, 0], [0, 0], [1, 1], new_axis_mask=1, ellipsis_mask=2) == (1, 5, 6)
    assert ss((10,), [8], [2], [-2]) == (3,)
    assert ss((4, 5, 6), [1], [3], [1]) == (2, 5, 6)
    assert ss((4, 5, 6), [0, 0], [0, 0], [1, -1], begin_mask=3, end_mask=3) == (4, 5, 6)


def test_reductions():
    consts = np.array([0, 2], np.int32)
    attrs = {"T": F, "Tidx": I32}
    assert _shape_of("Sum", [(2, 3, 4), consts], attrs) == [(3,)]
    assert _shape_of("Mean", [(2, 3, 4), consts], {**attrs, "keep_dims": True}) == [(1, 3, 1)]
    assert _shape_of("Max", [(2, 3, 4), np.array(-1, np.int32)], attrs) == [(2, 3)]
    assert _shape_of("ArgMax", [(2, 3, 4), np.array(1, np.int32)],
                     {**attrs, "output_type": DType.INT64}) == [(2, 4)]


def test_matmul_and_batch_matmul():
    assert _shape_of("MatMul", [(4, 3), (5, 3)], {"T": F, "transpose_b": True}) == [(4, 5)]
    assert _shape_of("BatchMatMulV2", [(None, 1, 3, 4), (5, 4, 2)], {"T": F}) == \
        [(None, 5, 3, 2)]


def test_split_concat_pack():
    axis = np.array(1, np.int32)
    assert _shape_of("Split", [axis, (2, 6)], {"T": F, "num_split": 3}) == [(2, 2)] * 3
    assert _shape_of("ConcatV2", [(2, 3), (2, None), axis],
                     {"T": F, "N": 2, "Tidx": I32}) == [(2, None)]
    assert _shape_of("ConcatV2", [(2, 3), (None, 4), axis],
                     {"T": F, "N": 2, "Tidx": I32}) == [(2, 7)]
    assert _shape_of("Pack", [(3,), (3,)], {"T": F, "N": 2, "axis": 1}) == [(3, 2)]


@pytest.mark.parametrize("name", ["cond_in_while_grad", "nested_while_cond_grad",
                                  "while_in_cond_grad"])
def test_while_gradients_infer_fully(name):
    # Stack pops take the shape of the forward pushes; loop Merges settle on the entry shape.
    g = io.load(FIXTURES / "frames" / name / "graph.pb")
    info = infer(g)
    unknown = [k for k, v in info.items() if v.shape is None]
    assert unknown == []
    pops = [n.name for n in g if n.op == "StackPopV2"]
    assert pops and all(info[(p, 0)].shape is not None for p in pops)


def test_odd_graphs_never_crash():
    # Mutated TensorFlow graphs (dropped inputs, attrs of the wrong kind, missing attrs, extra
    # inputs): inference gives unknowns and errors, never an exception.
    import random
    rng = random.Random(7)
    paths = sorted((FIXTURES / "frames").glob("*/graph.pb")) + [FIXTURES / "shapes" / "graph.pb"]
    for _ in range(60):
        g = io.load(rng.choice(paths))
        nodes = g.nodes
        for _ in range(5):
            n, r = rng.choice(nodes), rng.random()
            if r < 0.25 and n.inputs:
                ins = list(n.inputs)
                ins.pop(rng.randrange(len(ins)))
                n.inputs = ins
            elif r < 0.5 and n.attr:
                n.set_attr(rng.choice(list(n.attr.keys())),
                           rng.choice([3, -2, 1.5, b"x", [1, 2], [], True, Shape((3, 0))]))
            elif r < 0.75 and n.attr:
                n.del_attr(rng.choice(list(n.attr.keys())))
            else:
                n.inputs = list(n.inputs) + [f"{rng.choice(nodes).name}:{rng.randrange(3)}"]
        infer(g)
