"""Function inlining (tfg.graphdef.functions) on hand-written FunctionDefs: output-arg
addressing, argument pass-through, control inputs of the call, direct calls, nesting, and
the refusals (missing, recursive, unknown op, bad addressing). Values are checked by running
the inlined graph against numpy; tests/test_savedmodel_tf2.py does the same on TF-made models."""
import numpy as np
import pytest

from tfg.executor.session import Session
from tfg.graphdef.functions import FunctionInliningError, inline_functions
from tfg.graphdef.graph import Graph
from tfg.schemas.dtypes import DType
from tfg.schemas.proto import function_pb2

F, I32 = DType.FLOAT, DType.INT32


def _fdef(name, inputs, outputs, nodes, ret, control_ret=None):
    """A FunctionDef: inputs/outputs [(name, DType)], nodes [(name, op, [inputs], attrs)]."""
    f = function_pb2.FunctionDef()
    f.signature.name = name
    for arg_name, t in inputs:
        f.signature.input_arg.add(name=arg_name, type=t.value)
    for arg_name, t in outputs:
        f.signature.output_arg.add(name=arg_name, type=t.value)
    g = Graph()
    for node_name, op, ins, attrs in nodes:
        f.node_def.add().CopyFrom(g.add_node(node_name, op, ins, attrs).to_proto())
    f.ret.update(ret)
    f.control_ret.update(control_ret or {})
    return f


def _graph(nodes, functions):
    g = Graph()
    for name, op, ins, attrs in nodes:
        g.add_node(name, op, ins, attrs)
    g.library = function_pb2.FunctionDefLibrary()
    g.library.function.extend(functions)
    return Graph.from_proto(g.to_proto())


def _const(value):
    value = np.asarray(value)
    return {"dtype": DType.from_numpy(value.dtype), "value": value}


def _call(f, tin, tout, op="PartitionedCall"):
    from tfg.schemas.proto import attr_value_pb2

    fn = attr_value_pb2.NameAttrList(name=f)
    return {"f": fn, "Tin": list(tin), "Tout": list(tout)}


# split x in two halves; out = setdiff(half1, b); idx; plus b passed through
SPLIT_DIFF = _fdef(
    "split_diff", [("x", F), ("b", F)], [("out", F), ("idx", I32), ("same", F), ("h1", F)],
    [("dim", "Const", [], _const(np.int32(0))),
     ("split", "Split", ["dim:output:0", "x"], {"T": F, "num_split": 2}),
     ("ld", "ListDiff", ["split:output:1", "b"], {"T": F, "out_idx": I32}),
     ("after", "NoOp", ["^ld"], {})],
    {"out": "ld:out:0", "idx": "ld:idx:0", "same": "b", "h1": "split:output:1"},
    {"after": "after"})

X = np.arange(1, 9, dtype=np.float32)
B = np.array([5], np.float32)


def _main(op="PartitionedCall", control=False, fn="split_diff"):
    call_attrs = _call(fn, [F, F], [F, I32, F, F]) if op.endswith("PartitionedCall") else {}
    nodes = [("x", "Const", [], _const(X)), ("b", "Const", [], _const(B)),
             ("gate", "NoOp", [], {}),
             ("call", op, ["x", "b"] + (["^gate"] if control else []), call_attrs),
             ("y", "Identity", ["call:1"], {"T": I32}),
             ("z", "Identity", ["call"], {"T": F})]
    return nodes


def test_output_args_map_to_output_indices():
    g = _graph(_main(), [SPLIT_DIFF])
    res = inline_functions(g)
    out = res.graph
    assert res.count == 1 and not res.skipped
    assert out["call/ld"].inputs == ("call/split:1", "b")  # split:output:1 -> port 1
    assert out["call"].op == "IdentityN"
    # ld:idx:0 is ListDiff's second output; "same" is the argument b itself.
    assert out["call"].inputs == ("call/ld", "call/ld:1", "b", "call/split:1", "^call/after")
    assert out["call"].get_attr("T") == [F, I32, F, F]
    assert "split_diff" in [f.signature.name for f in out.library.function]
    assert "call" in g and g["call"].op == "PartitionedCall"  # the input graph is untouched
    y, z, same, h1 = Session(out).run(["y:0", "z:0", "call:2", "call:3"])
    np.testing.assert_array_equal(z, [6, 7, 8])  # [5, 6, 7, 8] minus [5]
    np.testing.assert_array_equal(y, [1, 2, 3])
    np.testing.assert_array_equal(same, B)
    np.testing.assert_array_equal(h1, [5, 6, 7, 8])


def test_control_inputs_of_the_call_gate_the_body():
    out = inline_functions(_graph(_main("StatefulPartitionedCall", control=True),
                                  [SPLIT_DIFF])).graph
    assert out["call/input_control_node"].inputs == ("^gate",)
    assert out["call/input/_0"].inputs == ("x", "^call/input_control_node")
    assert out["call/dim"].inputs == ("^call/input_control_node",)  # a source node of the body
    assert out["call/split"].inputs == ("call/dim", "call/input/_0")
    np.testing.assert_array_equal(Session(out).run("z:0"), [6, 7, 8])


def test_direct_call_and_nesting():
    outer = _fdef("outer", [("p", F), ("q", F)], [("r", F)],
                  [("inner", "StatefulPartitionedCall", ["p", "q"],
                    _call("split_diff", [F, F], [F, I32, F, F])),
                   ("twice", "split_diff", ["inner:output:3", "q"], {}),
                   ("neg", "Neg", ["twice:out:0"], {"T": F})],
                  {"r": "neg:y:0"})
    nodes = [("x", "Const", [], _const(X)), ("b", "Const", [], _const(B)),
             ("top", "outer", ["x", "b"], {})]  # a node whose op is a function name
    res = inline_functions(_graph(nodes, [SPLIT_DIFF, outer]))
    out = res.graph
    assert res.count == 3
    assert out["top/twice/split"].inputs == ("top/twice/dim", "top/inner:3")
    assert out["top/neg"].inputs == ("top/twice",)
    # inner's h1 = [5, 6, 7, 8]; its second half [7, 8] minus [5], negated
    np.testing.assert_array_equal(Session(out).run("top:0"), [-7, -8])
    assert not any(n.op in ("PartitionedCall", "StatefulPartitionedCall", "outer",
                            "split_diff") for n in out)


def test_the_gate_covers_calls_nested_in_the_body():
    """A gated call whose body calls another function by name (a While's cond wrapper, as
    tf.nn.ctc_loss's scans are written): the nested body's constants wait on the gate too,
    so they stay in the caller's loop frame."""
    wrapper = _fdef("wrapper", [("p", F), ("q", F)], [("r", F)],
                    [("nested", "split_diff", ["p", "q"], {})], {"r": "nested:h1:0"})
    nodes = [("x", "Const", [], _const(X)), ("b", "Const", [], _const(B)),
             ("gate", "NoOp", [], {}),
             ("call", "PartitionedCall", ["x", "b", "^gate"], _call("wrapper", [F, F], [F]))]
    out = inline_functions(_graph(nodes, [SPLIT_DIFF, wrapper])).graph
    assert out["call/nested/dim"].inputs == ("^call/nested/input_control_node",)
    assert out["call/nested/input_control_node"].inputs == ("^call/input_control_node",)
    np.testing.assert_array_equal(Session(out).run("call:0"), [5, 6, 7, 8])


def test_missing_and_recursive_functions():
    with pytest.raises(FunctionInliningError, match="calls function 'nope', which the graph"):
        inline_functions(_graph(_main(fn="nope"), [SPLIT_DIFF]))
    res = inline_functions(_graph(_main(fn="nope"), [SPLIT_DIFF]), strict=False)
    assert list(res.skipped) == ["call"] and res.graph["call"].op == "PartitionedCall"
    a = _fdef("a", [("x", F)], [("y", F)], [("c", "b", ["x"], {})], {"y": "c:y:0"})
    b = _fdef("b", [("x", F)], [("y", F)], [("c", "a", ["x"], {})], {"y": "c:y:0"})
    nodes = [("x", "Const", [], _const(X)), ("call", "a", ["x"], {})]
    with pytest.raises(FunctionInliningError, match=r"recursive function call a -> b -> a"):
        inline_functions(_graph(nodes, [a, b]))
    res = inline_functions(_graph(nodes, [a, b]), strict=False)
    assert list(res.skipped) == ["call/c/c"]  # a and b inlined once each, then refused


@pytest.mark.parametrize("body, ret, message", [
    ([("n", "NoSuchOp", ["x"], {})], "n:y:0", "function 'f' node 'n': unknown op 'NoSuchOp'"),
    ([("n", "Neg", ["x"], {"T": F})], "n:nope:0", "reads 'n:nope:0', which Neg does not"),
    ([("n", "Neg", ["x"], {"T": F})], "n:y:1", "reads 'n:y:1'"),
    ([("n", "Neg", ["w"], {"T": F})], "n:y:0", "has input 'w', which is neither"),
    ([("n", "For", ["x"], {})], "n:output:0", "op For is a functional For loop"),
    ([("n", "While", ["x"], {"T": [F]})], "n:output:0", "has no function attr 'cond'"),
])
def test_refusals_name_function_and_node(body, ret, message):
    f = _fdef("f", [("x", F)], [("y", F)], body, {"y": ret})
    nodes = [("x", "Const", [], _const(X)), ("call", "f", ["x"], {})]
    with pytest.raises(FunctionInliningError, match=message.replace("(", r"\(")):
        inline_functions(_graph(nodes, [f]))


def test_wrong_argument_count():
    nodes = [("x", "Const", [], _const(X)),
             ("call", "PartitionedCall", ["x"], _call("split_diff", [F], [F, I32, F, F]))]
    with pytest.raises(FunctionInliningError, match="passes 1 inputs"):
        inline_functions(_graph(nodes, [SPLIT_DIFF]))


def test_graph_without_calls_is_unchanged():
    g = _graph([("x", "Const", [], _const(X))], [SPLIT_DIFF])
    res = inline_functions(g)
    assert res.count == 0 and res.graph.to_proto() == g.to_proto()


def test_colocation_follows_the_renaming():
    f = _fdef("f", [("x", F)], [("y", F)],
              [("a", "Neg", ["x"], {"T": F}),
               ("n", "Neg", ["a:y:0"], {"T": F, "_class": [b"loc:@a", b"loc:@x"]})],
              {"y": "n:y:0"})
    out = inline_functions(_graph([("x", "Const", [], _const(X)), ("call", "f", ["x"], {})],
                                  [f])).graph
    # a body node gets its new name; other names (here the caller's x) are left alone
    assert out["call/n"].get_attr("_class") == [b"loc:@call/a", b"loc:@x"]
    np.testing.assert_array_equal(Session(out).run("call:0"), X)


def test_exponential_library_is_refused(monkeypatch):
    from tfg.graphdef import functions

    monkeypatch.setattr(functions, "MAX_NODES", 200)
    fs = [_fdef("f0", [("x", F)], [("y", F)], [("n", "Neg", ["x"], {"T": F})], {"y": "n:y:0"})]
    for i in range(1, 12):  # f_i calls f_(i-1) twice: 2**11 copies of f0's body
        fs.append(_fdef(f"f{i}", [("x", F)], [("y", F)],
                        [("a", f"f{i - 1}", ["x"], {}), ("b", f"f{i - 1}", ["a:y:0"], {})],
                        {"y": "b:y:0"}))
    g = _graph([("x", "Const", [], _const(X)), ("call", "f11", ["x"], {})], fs)
    with pytest.raises(FunctionInliningError, match="past 200 nodes"):
        inline_functions(g, strict=False)
