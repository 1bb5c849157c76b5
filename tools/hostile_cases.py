"""The cases of tools/hostile_sweep.py: each a few files and the tfg commands to run on them.

A case is built from text: `node("y", "Neg", ["x"], T=F)` is one NodeDef in text format, and
`graph_case(...)` writes the GraphDef both as `g.pbtxt` and as binary `g.pb` (when the text
parses) and runs the standard subcommands on each. Cases that are not graphs (feed files,
truncated bytes, flags) write their own files. The groups are in `all_cases()`.
"""
import gzip
import io
import json
import os
import struct
import zipfile

import numpy as np
from google.protobuf import text_format

from tfg.schemas.proto import graph_pb2, tensor_pb2

F, I32, I64, STR = "type: DT_FLOAT", "type: DT_INT32", "type: DT_INT64", "type: DT_STRING"
RUN_MEMORY = "256M"


# --- building blocks ------------------------------------------------------------------------
class Cmd:
    def __init__(self, label, argv, allowed=(0, 2), says=None, output=None, stdin=None,
                 timeout=30.0, keep=()):
        self.label, self.argv = label, [str(a) for a in argv]
        self.allowed = set(allowed)
        self.says = [says] if isinstance(says, str) else list(says or ())
        self.output, self.stdin, self.timeout, self.keep = output, stdin, timeout, set(keep)
        self.waits = False  # a hang is the documented behaviour (a blocking dequeue)


class Case:
    def __init__(self, name, files, commands):
        self.name, self.files, self.commands = name, files, commands

    def write(self, folder):
        for rel, data in self.files.items():
            path = folder / rel
            path.parent.mkdir(parents=True, exist_ok=True)
            if callable(data):
                data(path)
            else:
                path.write_bytes(data.encode() if isinstance(data, str) else data)


def attr_text(value):
    return value if isinstance(value, str) else value()


def node(name, op, inputs=(), **attrs):
    parts = [f'name: {json.dumps(name)}', f'op: {json.dumps(op)}']
    parts += [f'input: {json.dumps(i)}' for i in inputs]
    parts += [f'attr {{ key: {json.dumps(k)} value {{ {v} }} }}' for k, v in attrs.items()]
    return "node { " + " ".join(parts) + " }\n"


def placeholder(name, dtype=F, shape=None):
    attrs = {"dtype": dtype}
    if shape is not None:
        attrs["shape"] = shape_attr(shape)
    return node(name, "Placeholder", **attrs)


def shape_attr(dims):
    if dims == "unknown":
        return "shape { unknown_rank: true }"
    return "shape { " + " ".join(f"dim {{ size: {d} }}" for d in dims) + " }"


def const(name, values, dtype="DT_INT32", shape=None):
    """A Const with explicit values (int_val / float_val by dtype) and shape (default [n])."""
    field = {"DT_INT32": "int_val", "DT_INT64": "int64_val", "DT_FLOAT": "float_val",
             "DT_BOOL": "bool_val", "DT_STRING": "string_val"}[dtype]
    values = list(values) if isinstance(values, (list, tuple)) else [values]
    if shape is None:
        shape = [len(values)]
    vals = " ".join(f"{field}: {json.dumps(v) if dtype == 'DT_STRING' else v}" for v in values)
    dims = " ".join(f"dim {{ size: {d} }}" for d in shape)
    return node(name, "Const", dtype=f"type: {dtype}",
                value=f"tensor {{ dtype: {dtype} tensor_shape {{ {dims} }} {vals} }}")


def ints(*values):
    return "list { " + " ".join(f"i: {v}" for v in values) + " }"


def func(name):
    return f'func {{ name: "{name}" }}'


def function(name, args, rets, body, ret_map, attrs=""):
    """A FunctionDef: args/rets are [(name, dtype)], body the node_def text, ret_map
    {ret: 'node:out:0'}."""
    sig = f'signature {{ name: "{name}" '
    sig += " ".join(f'input_arg {{ name: "{a}" type: {t} }}' for a, t in args)
    sig += " " + " ".join(f'output_arg {{ name: "{r}" type: {t} }}' for r, t in rets) + " }"
    ret = " ".join(f'ret {{ key: "{k}" value: "{v}" }}' for k, v in ret_map.items())
    return f"function {{ {sig} {body.replace('node {', 'node_def {')} {ret} {attrs} }}\n"


def library(*functions):
    return "library { " + "".join(functions) + " }\n"


def to_binary(text):
    gd = graph_pb2.GraphDef()
    text_format.Parse(text, gd)
    return gd.SerializeToString()


def subcommands(g, fetch="y", xs="x", run_extra=(), run_allowed=(1, 2), says=None,
                others=(0, 2), only=None, timeout=30.0, grad=True):
    """The standard commands on graph file `g`."""
    out = []

    def add(label, argv, output, allowed=others, cmd_says=None):
        if only is None or label in only:
            out.append(Cmd(label, argv, allowed, cmd_says, output, timeout=timeout))

    add("info", ["info", g, "--json"], None)
    add("convert", ["convert", g, "-o", "c.pbtxt"], "c.pbtxt")
    add("render", ["render", g, "-o", "r.dot"], "r.dot")
    add("optimize", ["optimize", g, "-o", "o.pb"], "o.pb")
    add("place", ["place", g, "--devices", "cpu:2", "-o", "pl.pb"], "pl.pb")
    add("partition", ["partition", g, "--devices", "cpu:2", "-o", "pa.pb"], "pa.pb")
    add("prune", ["prune", g, "--fetch", fetch, "-o", "p.pb"], "p.pb")
    if grad:
        add("grad", ["grad", g, "--ys", fetch, "--xs", xs, "-o", "gr.pb"], "gr.pb")
    add("run", ["run", g, "--fetch", fetch, "--max-memory", RUN_MEMORY, "-o", "r.npz",
                *run_extra], "r.npz", run_allowed, says)
    return out


FEED_X = ("--feed", "x=[[1,2,3],[4,5,6]]")


def graph_case(name, text, binary=True, **kw):
    """g.pbtxt and (when it parses) g.pb, the standard commands on each. `text` may be a
    function giving the text: big graphs are then built only when the case is written."""
    kw.setdefault("run_extra", FEED_X)
    cmds = subcommands("g.pbtxt", **kw)
    if callable(text):
        files = {"g.pbtxt": lambda p: p.write_text(text()),
                 "g.pb": lambda p: p.write_bytes(to_binary(p.with_suffix(".pbtxt").read_text()))}
        for c in subcommands("g.pb", **kw):
            c.label += ".pb"
            cmds.append(c)
        return Case(name, files, cmds)
    files = {"g.pbtxt": text}
    if binary:
        try:
            files["g.pb"] = to_binary(text)
        except text_format.ParseError:
            pass
        else:
            for c in subcommands("g.pb", **kw):
                c.label += ".pb"
                cmds.append(c)
    return Case(name, files, cmds)


def run_case(name, text, fetch="y", says=None, allowed=(1, 2), extra=(), files=None,
             others=True, timeout=30.0):
    """A graph that is well formed but hostile when run (sizes from values): `run` must refuse
    naming the node; the static subcommands must not crash on it."""
    case_files = {"g.pbtxt": text}
    case_files.update(files or {})
    cmds = [Cmd("run", ["run", "g.pbtxt", "--fetch", fetch, "--max-memory", RUN_MEMORY, "-o",
                        "r.npz", *extra], allowed, says, "r.npz", timeout=timeout)]
    if others:
        cmds += subcommands("g.pbtxt", fetch=fetch, only=("info", "optimize", "grad",
                                                          "partition"), timeout=timeout)
    return Case(name, case_files, cmds)


X = placeholder("x", F, [2, 3])


# --- functions and calls --------------------------------------------------------------------
def _call_node(name, op, fname, inputs, tin=(F,), tout=(F,)):
    tl = lambda ts: "list { " + " ".join(t for t in ts) + " }"  # noqa: E731
    return node(name, op, inputs, Tin=tl(tin), Tout=tl(tout), f=func(fname))


def _fn_calling(name, callee, op="PartitionedCall"):
    body = _call_node("c", op, callee, ["a"])
    return function(name, [("a", "DT_FLOAT")], [("r", "DT_FLOAT")], body, {"r": "c:output:0"})


def _fn_neg(name):
    body = node("n", "Neg", ["a"], T=F)
    return function(name, [("a", "DT_FLOAT")], [("r", "DT_FLOAT")], body, {"r": "n:y:0"})


def function_cases():
    call = lambda f, op="PartitionedCall": X + _call_node("y", op, f, ["x"])  # noqa: E731
    yield graph_case("fn_direct_recursion", call("f") + library(_fn_calling("f", "f")))
    yield graph_case("fn_stateful_recursion", call("f", "StatefulPartitionedCall")
                     + library(_fn_calling("f", "f", "StatefulPartitionedCall")))
    yield graph_case("fn_mutual_recursion", call("f") + library(
        _fn_calling("f", "g"), _fn_calling("g", "f")))
    yield graph_case("fn_duplicate_names",
                     call("f") + library(_fn_neg("f"), _fn_calling("f", "f")))
    yield graph_case("fn_missing", call("nope"))
    yield graph_case("fn_call_by_op_name",
                     X + node("y", "f", ["x"]) + library(_fn_calling("f", "f")))
    yield graph_case("fn_wrong_arity", X + _call_node("y", "PartitionedCall", "f", ["x", "x"],
                                                      tin=(F, F)) + library(_fn_neg("f")))
    yield graph_case("fn_wrong_tout", X + _call_node("y", "PartitionedCall", "f", ["x"],
                                                     tout=(F, F)) + library(_fn_neg("f")))
    yield graph_case("fn_f_attr_is_string", X + node("y", "PartitionedCall", ["x"],
                                                     Tin="list { type: DT_FLOAT }",
                                                     Tout="list { type: DT_FLOAT }",
                                                     f='s: "f"') + library(_fn_neg("f")))
    bad_ret = function("f", [("a", "DT_FLOAT")], [("r", "DT_FLOAT")],
                       node("n", "Neg", ["a"], T=F), {"r": "nope:y:0"})
    yield graph_case("fn_ret_missing_node", call("f") + library(bad_ret))
    bad_ret2 = function("f", [("a", "DT_FLOAT")], [("r", "DT_FLOAT")],
                        node("n", "Neg", ["a"], T=F), {"r": "n:y:999999999"})
    yield graph_case("fn_ret_huge_index", call("f") + library(bad_ret2))
    no_ret = function("f", [("a", "DT_FLOAT")], [("r", "DT_FLOAT")],
                      node("n", "Neg", ["a"], T=F), {})
    yield graph_case("fn_no_ret", call("f") + library(no_ret))
    self_in = function("f", [("a", "DT_FLOAT")], [("r", "DT_FLOAT")],
                       node("n", "Neg", ["n:y:0"], T=F), {"r": "n:y:0"})
    yield graph_case("fn_body_self_loop", call("f") + library(self_in))
    # gradient registered for a function: its own gradient (recursion through GradientDef)
    grad_self = ("library { " + _fn_neg("f")
                 + ' gradient { function_name: "f" gradient_func: "f" } }\n')
    yield graph_case("fn_gradient_self", call("f") + grad_self, run_allowed=(0,))
    # While/If whose bodies are missing, recursive, or of the wrong arity
    while_node = lambda cond, body, n_in=1: node(  # noqa: E731
        "y", "While", ["x"] * n_in, T="list { " + " ".join([F] * n_in) + " }",
        cond=func(cond), body=func(body), parallel_iterations="i: 10")
    cond = function("cond", [("a", "DT_FLOAT")], [("r", "DT_BOOL")],
                    node("k", "Const", dtype="type: DT_BOOL",
                         value="tensor { dtype: DT_BOOL tensor_shape {} bool_val: false }"),
                    {"r": "k:output:0"})
    yield graph_case("while_body_missing", X + while_node("cond", "nope") + library(cond))
    yield graph_case("while_cond_missing", X + while_node("nope", "body")
                     + library(_fn_neg("body")))
    two = function("body", [("a", "DT_FLOAT"), ("b", "DT_FLOAT")],
                   [("r", "DT_FLOAT"), ("s", "DT_FLOAT")], node("n", "Neg", ["a"], T=F),
                   {"r": "n:y:0", "s": "n:y:0"})
    yield graph_case("while_body_wrong_arity", X + while_node("cond", "body") + library(cond, two))
    cond_float = function("cond", [("a", "DT_FLOAT")], [("r", "DT_FLOAT")],
                          node("n", "Neg", ["a"], T=F), {"r": "n:y:0"})
    yield graph_case("while_cond_not_bool", X + while_node("cond", "body")
                     + library(cond_float, _fn_neg("body")))
    rec_body = function("body", [("a", "DT_FLOAT")], [("r", "DT_FLOAT")],
                        node("w", "While", ["a"], T="list { type: DT_FLOAT }",
                             cond=func("cond"), body=func("body")), {"r": "w:output:0"})
    yield graph_case("while_body_recursive", X + while_node("cond", "body")
                     + library(cond, rec_body))
    if_node = node("y", "If", ["p", "x"], Tcond="type: DT_BOOL", Tin="list { type: DT_FLOAT }",
                   Tout="list { type: DT_FLOAT }", then_branch=func("t"),
                   else_branch=func("nope"))
    p = node("p", "Const", dtype="type: DT_BOOL",
             value="tensor { dtype: DT_BOOL tensor_shape {} bool_val: true }")
    yield graph_case("if_branch_missing", X + p + if_node + library(_fn_neg("t")))
    if_rec = node("y", "If", ["p", "x"], Tcond="type: DT_BOOL", Tin="list { type: DT_FLOAT }",
                  Tout="list { type: DT_FLOAT }", then_branch=func("t"), else_branch=func("t"))
    t_rec = function("t", [("a", "DT_FLOAT")], [("r", "DT_FLOAT")],
                     p.replace('"p"', '"q"') + node(
                         "i", "If", ["q:output:0", "a"], Tcond="type: DT_BOOL",
                         Tin="list { type: DT_FLOAT }", Tout="list { type: DT_FLOAT }",
                         then_branch=func("t"), else_branch=func("t")), {"r": "i:output:0"})
    yield graph_case("if_recursive", X + p + if_rec + library(t_rec))
    # a chain of 3000 functions each calling the next (deep but finite)
    chain = [_fn_calling(f"f{i}", f"f{i + 1}") for i in range(3000)] + [_fn_neg("f3000")]
    yield graph_case("fn_chain_3000", call("f0") + library(*chain), timeout=60.0)



# --- graph structure ------------------------------------------------------------------------
def _neg(name, inp):
    return node(name, "Neg", [inp], T=F)


def structure_cases():
    for label, inp in [("huge_port", "x:999999999"), ("port_2_63", "x:9223372036854775808"),
                       ("neg_port", "x:-1"), ("empty_input", ""), ("colon", ":"),
                       ("port_text", "x:abc"), ("double_colon", "x:0:0"), ("caret_only", "^"),
                       ("caret_caret", "^^x"), ("unicode", "x\u202e\u0000"),
                       ("ctrl_missing", "^nope"), ("long_name", "n" * 200000)]:
        text = X + node("y", "Neg", [inp] if label != "ctrl_missing" else ["x", inp], T=F)
        yield graph_case(f"input_{label}", text)
    yield graph_case("empty_node_name", X + node("", "Neg", ["x"], T=F) + _neg("y", ""))
    yield graph_case("ctrl_input_first", X + node("y", "Neg", ["^x", "x"], T=F))
    # v1 control flow with wrong shapes of wiring
    p = node("p", "Const", dtype="type: DT_BOOL",
             value="tensor { dtype: DT_BOOL tensor_shape {} bool_val: true }")
    yield graph_case("merge_no_inputs", X + node("y", "Merge", [], T=F, N="i: 0"))
    yield graph_case("merge_n_mismatch", X + node("y", "Merge", ["x"], T=F, N="i: 3"))
    yield graph_case("switch_one_input", X + node("y", "Switch", ["x"], T=F))
    yield graph_case("switch_three_inputs", X + p + node("y", "Switch", ["x", "p", "x"], T=F))
    yield graph_case("switch_pred_float", X + node("y", "Switch", ["x", "x"], T=F))
    yield graph_case("enter_no_frame", X + node("e", "Enter", ["x"], T=F) + node(
        "y", "Exit", ["e"], T=F))
    yield graph_case("enter_two_inputs", X + node("y", "Enter", ["x", "x"], T=F,
                                                  frame_name='s: "f"'))
    yield graph_case("nextiteration_alone", X + node("y", "NextIteration", ["x"], T=F))
    yield graph_case("exit_of_merge_cycle", X + node("m", "Merge", ["x", "n"], T=F, N="i: 2")
                     + node("n", "NextIteration", ["m"], T=F) + node("y", "Exit", ["m"], T=F))
    yield graph_case("loopcond_float", X + node("y", "LoopCond", ["x"]))
    # a while loop whose Enters disagree on the frame
    loop = (X + node("e1", "Enter", ["x"], T=F, frame_name='s: "a"')
            + node("e2", "Enter", ["x"], T=F, frame_name='s: "b"')
            + node("m", "Merge", ["e1", "n"], T=F, N="i: 2")
            + node("a", "Add", ["m", "e2"], T=F) + node("n", "NextIteration", ["a"], T=F)
            + node("y", "Exit", ["m"], T=F))
    yield graph_case("enter_frame_mismatch", loop)
    # 1000 nested frames: Enter of Enter of ...
    def deep():
        text = X + "".join(node(f"e{i}", "Enter", ["x" if i == 0 else f"e{i - 1}"], T=F,
                                frame_name=f's: "f{i}"') for i in range(1000))
        return text + "".join(node(f"x{i}", "Exit", [f"e{999}" if i == 999 else f"x{i + 1}"],
                                   T=F) for i in range(999, -1, -1)).replace('"x0"', '"y"', 1)
    yield graph_case("frames_1000_deep", deep, timeout=60.0, run_allowed=(0, 1, 2))

    # long chains: recursion in topological sorts, renderers, gradient builders
    def chain():
        return (X + "".join(_neg(f"n{i}", "x" if i == 0 else f"n{i - 1}")
                            for i in range(100000)) + node("y", "Identity", ["n99999"], T=F))
    yield graph_case("chain_100k", chain, timeout=300.0, run_allowed=(0,))
    yield graph_case("addn_100k_inputs",
                     lambda: X + node("y", "AddN", ["x"] * 100000, T=F, N="i: 100000"),
                     timeout=120.0, run_allowed=(0,))
    yield graph_case("ctrl_cycle", X + node("a", "Neg", ["x", "^y"], T=F)
                     + node("y", "Neg", ["a"], T=F))
    yield graph_case("no_nodes", "", fetch="x")
    yield graph_case("versions_only", "versions { producer: 99999 min_consumer: 99999 }",
                     fetch="x")
    # valid: TensorFlow refuses only its own consumer version when listed
    yield graph_case("bad_consumers", X + _neg("y", "x")
                     + "versions { producer: 1 bad_consumers: 0 bad_consumers: 1 }",
                     run_allowed=(0,))


# --- attributes and constant values -----------------------------------------------------------
def _tensor_const(name, tensor, dtype="type: DT_FLOAT"):
    return node(name, "Const", dtype=dtype, value=f"tensor {{ {tensor} }}")


def attr_cases():
    for label, shape in [("neg_dim", [-5, 3]), ("huge_dims", [1 << 62, 1 << 62]),
                         ("rank_300", [1] * 300)]:
        yield graph_case(f"placeholder_{label}", placeholder("x", F, shape) + _neg("y", "x"))
    yield graph_case("placeholder_rank_unknown_and_dims", node(
        "x", "Placeholder", dtype=F, shape="shape { unknown_rank: true dim { size: 2 } }")
        + _neg("y", "x"))
    yield graph_case("placeholder_no_dtype", node("x", "Placeholder") + _neg("y", "x"))
    for label, dtype in [("dtype_9999", "type: 9999"), ("dtype_invalid", "type: DT_INVALID"),
                         ("dtype_ref", "type: DT_FLOAT_REF"), ("dtype_variant", "type: DT_VARIANT"),
                         ("dtype_resource", "type: DT_RESOURCE"), ("dtype_string", STR),
                         ("dtype_negative", "type: -3"), ("dtype_list", "list { type: DT_FLOAT }"),
                         ("dtype_is_int", "i: 1")]:
        yield graph_case(f"neg_T_{label}", X + node("y", "Neg", ["x"], T=dtype))
    consts = {
        "const_neg_dim": "dtype: DT_FLOAT tensor_shape { dim { size: -1 } } float_val: 1",
        "const_overflow_dims": "dtype: DT_FLOAT tensor_shape { dim { size: 4294967296 } "
                               "dim { size: 4294967296 } dim { size: 4294967296 } } float_val: 1",
        "const_content_short": "dtype: DT_FLOAT tensor_shape { dim { size: 4 } } "
                               r'tensor_content: "\000\000\000\000"',
        "const_content_long": "dtype: DT_FLOAT tensor_shape { dim { size: 1 } } "
                              r'tensor_content: "\000\000\000\000\000\000\000\000"',
        "const_content_odd": "dtype: DT_FLOAT tensor_shape { dim { size: 1 } } "
                             r'tensor_content: "\000\000\000"',
        "const_half_splat": "dtype: DT_HALF tensor_shape { dim { size: 1073741824 } "
                            "dim { size: 64 } } half_val: 15360",
        "const_too_many_vals": "dtype: DT_FLOAT tensor_shape { dim { size: 2 } } "
                               "float_val: 1 float_val: 2 float_val: 3",
        "const_dtype_mismatch": "dtype: DT_INT32 tensor_shape { } float_val: 1",
        "const_variant": "dtype: DT_VARIANT tensor_shape { } variant_val { type_name: \"x\" }",
        "const_resource": "dtype: DT_RESOURCE tensor_shape { } resource_handle_val { "
                          "device: \"/job:x\" container: \"c\" name: \"n\" }",
        "const_bool_as_float": "dtype: DT_FLOAT tensor_shape { } bool_val: true",
        "const_string_huge_shape": "dtype: DT_STRING tensor_shape { dim { size: 1073741824 } } "
                                   "string_val: \"a\"",
        "const_complex": "dtype: DT_COMPLEX64 tensor_shape { dim { size: 3 } } scomplex_val: 1",
        "const_unknown_rank": "dtype: DT_FLOAT tensor_shape { unknown_rank: true } float_val: 1",
        "const_dtype_enum_big": "dtype: 12345 tensor_shape { } float_val: 1",
        "const_no_values_big": "dtype: DT_FLOAT tensor_shape { dim { size: 1073741824 } }",
    }
    for label, tensor in consts.items():
        dtype = "type: " + tensor.split()[1]
        # TensorFlow reads a Const with values in the wrong field (or half a complex) as
        # zeros: exit 0 is right there; the point is no crash and no huge allocation.
        yield graph_case(label, X + _tensor_const("c", tensor, dtype)
                         + node("y", "Identity", ["c"], T=dtype), xs="c", run_allowed=(0, 1, 2))
    yield graph_case("const_value_missing", X + node("c", "Const", dtype=F)
                     + node("y", "Identity", ["c"], T=F), xs="c")
    yield graph_case("const_value_is_shape", X + node("c", "Const", dtype=F, value=shape_attr([2]))
                     + node("y", "Identity", ["c"], T=F), xs="c")
    yield graph_case("attr_empty_value", X + node("y", "Neg", ["x"], T=""))
    # deep protobuf: function attrs nested 95 levels (binary accepts up to ~100)
    inner = 'func { name: "f" }'
    for _ in range(30):
        inner = f'func {{ name: "f" attr {{ key: "a" value {{ {inner} }} }} }}'
    yield graph_case("attr_func_nested_30", X + node("y", "Neg", ["x"], T=F, deep=inner))
    inner = "list { i: 1 }"
    yield graph_case("attr_list_huge", X + node("y", "Neg", ["x"], T=F,
                                                big="list { " + "i: 1 " * 200000 + "}"))
    variant = 'dtype: DT_VARIANT tensor_shape { } variant_val { type_name: "t" tensors { } }'
    for _ in range(25):
        variant = ('dtype: DT_VARIANT tensor_shape { } variant_val { type_name: "t" tensors { '
                   + variant + " } }")
    yield graph_case("const_variant_nested", X + _tensor_const("c", variant, "type: DT_VARIANT")
                     + node("y", "Identity", ["c"], T="type: DT_VARIANT"), xs="c")



# --- sizes and indices met at run time ----------------------------------------------------------
def _f(name, values, shape=None):
    return const(name, values, "DT_FLOAT", shape)


def _i(name, values, shape=None):
    return const(name, values, "DT_INT32", shape)


D = _f("d", [1, 2, 3, 4, 5, 6], [2, 3])  # float data [2, 3]
BIG = 1 << 30


def runtime_cases():
    T = {"T": F}
    ti = {"Tidx": I32}
    cases = {
        "reshape_two_minus_one": D + _i("s", [-1, -1]) + node("y", "Reshape", ["d", "s"],
                                                               Tshape=I32, **T),
        "reshape_huge": D + _i("s", [BIG, BIG]) + node("y", "Reshape", ["d", "s"], Tshape=I32, **T),
        "reshape_neg": D + _i("s", [-2, -3]) + node("y", "Reshape", ["d", "s"], Tshape=I32, **T),
        "fill_huge": _i("s", [BIG, BIG, 4]) + _f("v", [1], []) + node(
            "y", "Fill", ["s", "v"], index_type=I32, **T),
        "fill_neg": _i("s", [-4, 3]) + _f("v", [1], []) + node(
            "y", "Fill", ["s", "v"], index_type=I32, **T),
        "fill_overflow_int64": const("s", [1 << 40, 1 << 40, 1 << 40], "DT_INT64") + _f(
            "v", [1], []) + node("y", "Fill", ["s", "v"], index_type=I64, **T),
        "tile_huge": D + _i("m", [BIG, BIG]) + node("y", "Tile", ["d", "m"], Tmultiples=I32, **T),
        "tile_neg": D + _i("m", [-1, 2]) + node("y", "Tile", ["d", "m"], Tmultiples=I32, **T),
        "tile_wrong_len": D + _i("m", [2, 2, 2]) + node("y", "Tile", ["d", "m"], Tmultiples=I32,
                                                         **T),
        "broadcast_to_huge": D + _i("s", [BIG, BIG, 3]) + node("y", "BroadcastTo", ["d", "s"],
                                                               **T, **ti),
        "broadcast_to_incompatible": D + _i("s", [5, 7]) + node("y", "BroadcastTo", ["d", "s"],
                                                                **T, **ti),
        "range_delta_zero": _i("a", [0], []) + _i("b", [10], []) + _i("c", [0], []) + node(
            "y", "Range", ["a", "b", "c"], **ti),
        "range_huge": _i("a", [0], []) + _i("b", [2147483647], []) + _i("c", [1], []) + node(
            "y", "Range", ["a", "b", "c"], **ti),
        "range_float_tiny_delta": _f("a", [0], []) + _f("b", [1], []) + _f("c", [1e-30], [])
        + node("y", "Range", ["a", "b", "c"], Tidx=F),
        "range_nan": _f("a", [0], []) + _f("b", ["nan"], []) + _f("c", [1], [])
        + node("y", "Range", ["a", "b", "c"], Tidx=F),
        "onehot_depth_huge": _i("ix", [0, 1]) + _i("n", [BIG], []) + _f("on", [1], [])
        + _f("off", [0], []) + node("y", "OneHot", ["ix", "n", "on", "off"], TI=I32, axis="i: -1",
                                    **T),
        "onehot_depth_neg": _i("ix", [0, 1]) + _i("n", [-3], []) + _f("on", [1], [])
        + _f("off", [0], []) + node("y", "OneHot", ["ix", "n", "on", "off"], TI=I32, axis="i: -1",
                                    **T),
        "onehot_axis_bad": _i("ix", [0, 1]) + _i("n", [3], []) + _f("on", [1], [])
        + _f("off", [0], []) + node("y", "OneHot", ["ix", "n", "on", "off"], TI=I32, axis="i: 7",
                                    **T),
        "pad_huge": D + _i("p", [0, BIG, 0, BIG], [2, 2]) + node("y", "Pad", ["d", "p"],
                                                                  Tpaddings=I32, **T),
        "pad_neg": D + _i("p", [0, -5, 0, 0], [2, 2]) + node("y", "Pad", ["d", "p"],
                                                              Tpaddings=I32, **T),
        "pad_wrong_shape": D + _i("p", [1, 1, 1], [3]) + node("y", "Pad", ["d", "p"],
                                                              Tpaddings=I32, **T),
        "mirrorpad_too_big": D + _i("p", [0, 9, 0, 0], [2, 2]) + node(
            "y", "MirrorPad", ["d", "p"], Tpaddings=I32, mode='s: "REFLECT"', **T),
        "mirrorpad_mode_bad": D + _i("p", [0, 1, 0, 0], [2, 2]) + node(
            "y", "MirrorPad", ["d", "p"], Tpaddings=I32, mode='s: "$(reboot)"', **T),
        "stridedslice_zero_stride": D + _i("b", [0, 0]) + _i("e", [2, 3]) + _i("s", [0, 0])
        + node("y", "StridedSlice", ["d", "b", "e", "s"], Index=I32, begin_mask="i: -1",
               end_mask="i: -1", ellipsis_mask="i: -1", new_axis_mask="i: -1",
               shrink_axis_mask="i: -1", **T),
        "stridedslice_all_masks": D + _i("b", [0, 0]) + _i("e", [2, 3]) + _i("s", [1, 1])
        + node("y", "StridedSlice", ["d", "b", "e", "s"], Index=I32, begin_mask="i: -1",
               end_mask="i: -1", ellipsis_mask="i: -1", new_axis_mask="i: -1",
               shrink_axis_mask="i: -1", **T),
        "stridedslice_two_ellipsis": D + _i("b", [0, 0]) + _i("e", [2, 3]) + _i("s", [1, 1])
        + node("y", "StridedSlice", ["d", "b", "e", "s"], Index=I32, ellipsis_mask="i: 3", **T),
        "stridedslice_new_axis_many": D + _i("b", [0] * 40) + _i("e", [1] * 40)
        + _i("s", [1] * 40) + node("y", "StridedSlice", ["d", "b", "e", "s"], Index=I32,
                                   new_axis_mask="i: 1099511627775", **T),
        # begin/end/strides of 2**27 entries from 3 one-value Consts (fuzz.py --real): the
        # shape function walked the spec, 30 s of CPU in info/render/optimize
        "stridedslice_spec_splat": D + _i("b", [0], [1 << 27]) + _i("e", [1], [1 << 27])
        + _i("s", [1], [1 << 27]) + node("y", "StridedSlice", ["d", "b", "e", "s"], Index=I32,
                                         **T),
        "gather_oob": D + _i("ix", [0, 99]) + _i("ax", [0], []) + node(
            "y", "GatherV2", ["d", "ix", "ax"], Tparams=F, Tindices=I32, Taxis=I32),
        "gather_neg": D + _i("ix", [-1]) + _i("ax", [0], []) + node(
            "y", "GatherV2", ["d", "ix", "ax"], Tparams=F, Tindices=I32, Taxis=I32),
        "gather_axis_bad": D + _i("ix", [0]) + _i("ax", [5], []) + node(
            "y", "GatherV2", ["d", "ix", "ax"], Tparams=F, Tindices=I32, Taxis=I32),
        "gather_batch_dims_bad": D + _i("ix", [0]) + _i("ax", [0], []) + node(
            "y", "GatherV2", ["d", "ix", "ax"], Tparams=F, Tindices=I32, Taxis=I32,
            batch_dims="i: 9"),
        "gathernd_oob": D + _i("ix", [5, 5], [1, 2]) + node("y", "GatherNd", ["d", "ix"],
                                                            Tparams=F, Tindices=I32),
        "gathernd_deep_index": D + _i("ix", [0, 0, 0, 0], [1, 4]) + node(
            "y", "GatherNd", ["d", "ix"], Tparams=F, Tindices=I32),
        "scatternd_huge_shape": _i("ix", [0], [1, 1]) + _f("u", [1]) + _i("s", [BIG, BIG])
        + node("y", "ScatterNd", ["ix", "u", "s"], Tindices=I32, **T),
        "scatternd_oob": _i("ix", [99], [1, 1]) + _f("u", [1]) + _i("s", [4])
        + node("y", "ScatterNd", ["ix", "u", "s"], Tindices=I32, **T),
        "scatternd_neg_shape": _i("ix", [0], [1, 1]) + _f("u", [1]) + _i("s", [-4])
        + node("y", "ScatterNd", ["ix", "u", "s"], Tindices=I32, **T),
        "concat_axis_bad": D + _i("ax", [99], []) + node("y", "ConcatV2", ["d", "d", "ax"],
                                                          N="i: 2", **T, **ti),
        "concat_rank_mismatch": D + _f("e", [1]) + _i("ax", [0], []) + node(
            "y", "ConcatV2", ["d", "e", "ax"], N="i: 2", **T, **ti),
        "split_zero": _i("ax", [0], []) + D + node("y", "Split", ["ax", "d"], num_split="i: 0",
                                                  **T),
        "split_uneven": _i("ax", [1], []) + D + node("y", "Split", ["ax", "d"],
                                                    num_split="i: 2", **T),
        "split_huge_num": _i("ax", [1], []) + D + node("y", "Split", ["ax", "d"],
                                                      num_split="i: 1000000000", **T),
        "splitv_bad_sizes": D + _i("sz", [-1, -1]) + _i("ax", [1], []) + node(
            "y", "SplitV", ["d", "sz", "ax"], num_split="i: 2", Tlen=I32, **T),
        "transpose_perm_bad": D + _i("p", [0, 0]) + node("y", "Transpose", ["d", "p"],
                                                          Tperm=I32, **T),
        "transpose_perm_oob": D + _i("p", [5, -9]) + node("y", "Transpose", ["d", "p"],
                                                           Tperm=I32, **T),
        "invert_permutation_huge": _i("p", [2147483647, 0]) + node(
            "y", "InvertPermutation", ["p"], T=I32),
        "unsorted_segment_huge": D + _i("ix", [0, 1]) + _i("n", [BIG], []) + node(
            "y", "UnsortedSegmentSum", ["d", "ix", "n"], Tindices=I32, Tnumsegments=I32, **T),
        "unsorted_segment_oob": D + _i("ix", [0, 99]) + _i("n", [2], []) + node(
            "y", "UnsortedSegmentSum", ["d", "ix", "n"], Tindices=I32, Tnumsegments=I32, **T),
        "slice_huge_size": D + _i("b", [0, 0]) + _i("s", [BIG, 3]) + node(
            "y", "Slice", ["d", "b", "s"], Index=I32, **T),
        "slice_neg_begin": D + _i("b", [-5, 0]) + _i("s", [1, 1]) + node(
            "y", "Slice", ["d", "b", "s"], Index=I32, **T),
        "expanddims_axis_bad": D + _i("a", [99], []) + node("y", "ExpandDims", ["d", "a"],
                                                             Tdim=I32, **T),
        "squeeze_axis_bad": D + node("y", "Squeeze", ["d"], squeeze_dims=ints(0, 5), **T),
        "topk_neg": D + _i("k", [-1], []) + node("y", "TopKV2", ["d", "k"], **T),
        "topk_huge": D + _i("k", [BIG], []) + node("y", "TopKV2", ["d", "k"], **T),
        "einsum_garbage": D + node("y", "Einsum", ["d", "d"], N="i: 2",
                                   equation='s: "ab,...->$(id)"', **T),
        "einsum_huge_out": D + node("y", "Einsum", ["d", "d"], N="i: 2",
                                    equation='s: "ab,cd->abcdabcdabcd"', **T),
        "cumsum_axis_bad": D + _i("a", [9], []) + node("y", "Cumsum", ["d", "a"], **T, **ti),
        "reverse_axis_bad": D + _i("a", [9]) + node("y", "ReverseV2", ["d", "a"], **T, **ti),
        "reverse_axis_dup": D + _i("a", [0, 0]) + node("y", "ReverseV2", ["d", "a"], **T, **ti),
        "sum_axis_bad": D + _i("a", [9]) + node("y", "Sum", ["d", "a"], keep_dims="b: false",
                                                 **T, **ti),
        "argmax_axis_bad": D + _i("a", [9], []) + node("y", "ArgMax", ["d", "a"],
                                                        output_type=I64, **T, **ti),
        "pack_axis_bad": D + node("y", "Pack", ["d", "d"], N="i: 2", axis="i: 9", **T),
        "unpack_num_wrong": D + node("y", "Unpack", ["d"], num="i: 1000000000", axis="i: 0", **T),
        "random_uniform_huge": _i("s", [BIG, BIG]) + node("y", "RandomUniform", ["s"], dtype=F,
                                                           T=I32),
        "random_int_empty_range": _i("s", [3]) + _i("lo", [5], []) + _i("hi", [5], [])
        + node("y", "RandomUniformInt", ["s", "lo", "hi"], Tout=I32, T=I32),
        "matmul_mismatch": D + node("y", "MatMul", ["d", "d"], **T),
        "bitcast_size_mismatch": D + node("y", "Bitcast", ["d"], T=F, type="type: DT_DOUBLE"),
        "bitcast_to_string": D + node("y", "Bitcast", ["d"], T=F, type=STR),
        "cast_to_string": D + node("y", "Cast", ["d"], SrcT=F, DstT=STR),
        "cast_to_resource": D + node("y", "Cast", ["d"], SrcT=F, DstT="type: DT_RESOURCE"),
        "dynamic_stitch_neg": _i("ix", [-7]) + _f("v", [1]) + node(
            "y", "DynamicStitch", ["ix", "v"], N="i: 1", **T),
        "reverse_sequence_bad": D + const("l", [9, 9], "DT_INT64") + node(
            "y", "ReverseSequence", ["d", "l"], seq_dim="i: 1", batch_dim="i: 0", Tlen=I64, **T),
        "matrix_band_huge": D + const("lo", [BIG], "DT_INT64", []) + const(
            "hi", [-BIG], "DT_INT64", []) + node("y", "MatrixBandPart", ["d", "lo", "hi"],
                                                 Tindex=I64, **T),
        "listdiff_huge": _i("a", [1, 2]) + _i("b", [1]) + node("y", "ListDiff", ["a", "b"],
                                                               T=I32, out_idx=I32),
        "data_format_bad": _i("a", [0, 1, 2, 3]) + node("y", "DataFormatVecPermute", ["a"], T=I32,
                                                        src_format='s: "NHWC"',
                                                        dst_format='s: "NCHWXYZ"'),
        "softmax_xent_mismatch": D + _f("l", [1, 2]) + node(
            "y", "SoftmaxCrossEntropyWithLogits", ["d", "l"], **T),
        "sparse_xent_oob": D + _i("l", [7, -3]) + node(
            "y", "SparseSoftmaxCrossEntropyWithLogits", ["d", "l"], Tlabels=I32, **T),
        "bias_add_mismatch": D + _f("b", [1, 2]) + node("y", "BiasAdd", ["d", "b"], **T),
        "select_mismatch": node("c", "Const", dtype="type: DT_BOOL", value=(
            "tensor { dtype: DT_BOOL tensor_shape { dim { size: 5 } } bool_val: true }"))
        + D + node("y", "Select", ["c", "d", "d"], **T),
        "where_5d": _f("w", [1], [1, 1, 1, 1, 1, 1, 1, 1, 1, 1]) + node("y", "Where", ["w"], **T),
        "add_broadcast_huge": _f("a", [1], [65536, 1]) + _f("b", [1], [1, 65536]) + node(
            "y", "AddV2", ["a", "b"], **T),
        "batchmatmul_huge": _f("a", [1], [65536, 1, 1]) + _f("b", [1], [1, 1, 65536]) + node(
            "y", "BatchMatMulV2", ["a", "b"], **T),
        "matmul_outer_huge": _f("a", [1], [65536, 1]) + _f("b", [1], [1, 65536]) + node(
            "y", "MatMul", ["a", "b"], **T),
        "conv_zero_strides": _f("im", [1], [1, 4, 4, 1]) + _f("k", [1], [2, 2, 1, 1]) + node(
            "y", "Conv2D", ["im", "k"], strides=ints(1, 0, 0, 1), padding='s: "SAME"', **T),
        "conv_neg_strides": _f("im", [1], [1, 4, 4, 1]) + _f("k", [1], [2, 2, 1, 1]) + node(
            "y", "Conv2D", ["im", "k"], strides=ints(1, -1, -1, 1), padding='s: "VALID"', **T),
        "conv_dilation_huge": _f("im", [1], [1, 4, 4, 1]) + _f("k", [1], [2, 2, 1, 1]) + node(
            "y", "Conv2D", ["im", "k"], strides=ints(1, 1, 1, 1), padding='s: "SAME"',
            dilations=ints(1, BIG, BIG, 1), **T),
        "conv_format_garbage": _f("im", [1], [1, 4, 4, 1]) + _f("k", [1], [2, 2, 1, 1]) + node(
            "y", "Conv2D", ["im", "k"], strides=ints(1, 1, 1, 1), padding='s: "SAME"',
            data_format='s: "NWHC"', **T),
        "conv_explicit_bad": _f("im", [1], [1, 4, 4, 1]) + _f("k", [1], [2, 2, 1, 1]) + node(
            "y", "Conv2D", ["im", "k"], strides=ints(1, 1, 1, 1), padding='s: "EXPLICIT"',
            explicit_paddings=ints(0, 0, -5, BIG), **T),
        "conv_explicit_huge": _f("im", [1], [1, 4, 4, 1]) + _f("k", [1], [2, 2, 1, 1]) + node(
            "y", "Conv2D", ["im", "k"], strides=ints(1, 1, 1, 1), padding='s: "EXPLICIT"',
            explicit_paddings=ints(0, 0, 65536, 65536, 65536, 65536, 0, 0), **T),
        "conv_padding_garbage": _f("im", [1], [1, 4, 4, 1]) + _f("k", [1], [2, 2, 1, 1]) + node(
            "y", "Conv2D", ["im", "k"], strides=ints(1, 1, 1, 1), padding='s: "BOTH"', **T),
        "maxpool_ksize_zero": _f("im", [1], [1, 4, 4, 1]) + node(
            "y", "MaxPool", ["im"], ksize=ints(1, 0, 0, 1), strides=ints(1, 1, 1, 1),
            padding='s: "VALID"', **T),
        "maxpool_ksize_huge": _f("im", [1], [1, 4, 4, 1]) + node(
            "y", "MaxPool", ["im"], ksize=ints(1, BIG, BIG, 1), strides=ints(1, 1, 1, 1),
            padding='s: "SAME"', **T),
        "avgpool_ksize_huge": _f("im", [1], [1, 4, 4, 1]) + node(
            "y", "AvgPool", ["im"], ksize=ints(1, BIG, BIG, 1), strides=ints(1, 1, 1, 1),
            padding='s: "SAME"', **T),
        "maxpoolv2_ksize_huge": _f("im", [1], [1, 4, 4, 1]) + _i("ks", [1, BIG, BIG, 1]) + _i(
            "st", [1, 1, 1, 1]) + node("y", "MaxPoolV2", ["im", "ks", "st"], padding='s: "SAME"',
                                       **T),
        "maxpool_ksize_2k": _f("im", [1], [1, 4, 4, 1]) + node(
            "y", "MaxPool", ["im"], ksize=ints(1, 3000, 3000, 1), strides=ints(1, 1, 1, 1),
            padding='s: "SAME"', **T),
        "avgpoolgrad_ksize_huge": _i("s", [1, 4, 4, 1]) + _f("dy", [1], [1, 4, 4, 1]) + node(
            "y", "AvgPoolGrad", ["s", "dy"], ksize=ints(1, BIG, BIG, 1),
            strides=ints(1, 1, 1, 1), padding='s: "SAME"', **T),
        "maxpoolgrad_ksize_huge": _f("im", [1], [1, 4, 4, 1]) + node(
            "y", "MaxPoolGrad", ["im", "im", "im"], ksize=ints(1, BIG, BIG, 1),
            strides=ints(1, 1, 1, 1), padding='s: "SAME"', **T),
        "avgpool_strides_zero": _f("im", [1], [1, 4, 4, 1]) + node(
            "y", "AvgPool", ["im"], ksize=ints(1, 2, 2, 1), strides=ints(1, 0, 0, 1),
            padding='s: "SAME"', **T),
        "maxpoolv2_ksize_neg": _f("im", [1], [1, 4, 4, 1]) + _i("ks", [1, -2, -2, 1]) + _i(
            "st", [1, 1, 1, 1]) + node("y", "MaxPoolV2", ["im", "ks", "st"], padding='s: "SAME"',
                                       **T),
        "tensorarray_neg_size": _i("n", [-1], []) + node(
            "ta", "TensorArrayV3", ["n"], dtype=F, element_shape=shape_attr([2]))
        + node("y", "TensorArraySizeV3", ["ta", "ta:1"]),
        "tensorarray_huge_gather": _i("n", [BIG], []) + node(
            "ta", "TensorArrayV3", ["n"], dtype=F, element_shape=shape_attr([BIG]),
            dynamic_size="b: false", clear_after_read="b: true", identical_element_shapes="b: true")
        + _i("ix", [0]) + node("y", "TensorArrayGatherV3", ["ta", "ix", "ta:1"], dtype=F,
                               element_shape=shape_attr([BIG])),
        "tensorlist_reserve_neg": _i("es", [2]) + _i("n", [-5], []) + node(
            "l", "TensorListReserve", ["es", "n"], element_dtype=F, shape_type=I32)
        + node("y", "TensorListLength", ["l"]),
        "tensorlist_reserve_huge_stack": _i("es", [BIG]) + _i("n", [BIG], []) + node(
            "l", "TensorListReserve", ["es", "n"], element_dtype=F, shape_type=I32)
        + _i("es2", [BIG]) + node("y", "TensorListStack", ["l", "es2"], element_dtype=F,
                                  num_elements="i: -1"),
        "tensorlist_getitem_oob": _i("es", [2]) + _i("n", [3], []) + node(
            "l", "TensorListReserve", ["es", "n"], element_dtype=F, shape_type=I32)
        + _i("k", [99], []) + node("y", "TensorListGetItem", ["l", "k", "es"], element_dtype=F),
        "tensorlist_resize_huge": _i("es", [2]) + _i("n", [3], []) + node(
            "l", "TensorListReserve", ["es", "n"], element_dtype=F, shape_type=I32)
        + _i("k", [2147483647], []) + node("r", "TensorListResize", ["l", "k"])
        + node("y", "TensorListStack", ["r", "es"], element_dtype=F, num_elements="i: -1"),
        "stack_huge_max": _i("m", [2147483647], []) + node(
            "st", "StackV2", ["m"], elem_type=F, stack_name='s: "s"')
        + node("y", "StackPopV2", ["st"], elem_type=F),
        "queue_huge_capacity_dequeue_many": node(
            "q", "FIFOQueueV2", component_types="list { type: DT_FLOAT }",
            capacity="i: 2147483647", shapes="list { shape { dim { size: 1073741824 } } }")
        + _i("n", [BIG], []) + node("y", "QueueDequeueManyV2", ["q", "n"],
                                    component_types="list { type: DT_FLOAT }",
                                    timeout_ms="i: -1"),
        "queue_dequeue_empty": node("q", "FIFOQueueV2", component_types="list { type: DT_FLOAT }",
                                    capacity="i: 10")
        + node("y", "QueueDequeueV2", ["q"], component_types="list { type: DT_FLOAT }",
               timeout_ms="i: -1"),
        "check_numerics": _f("a", ["nan"], []) + node("y", "CheckNumerics", ["a"],
                                                        message='s: "%s%n"', **T),
        "assert_false": node("c", "Const", dtype="type: DT_BOOL", value=(
            "tensor { dtype: DT_BOOL tensor_shape { } bool_val: false }")) + D + node(
            "y", "Assert", ["c", "d"], T="list { type: DT_FLOAT }", summarize="i: 2147483647"),
        "variable_huge_shape": node("y", "VariableV2", dtype=F,
                                    shape=shape_attr([BIG, BIG]), container='s: ""',
                                    shared_name='s: ""'),
        "varhandle_read_uninit": node("v", "VarHandleOp", dtype=F, shape=shape_attr([2]),
                                      shared_name='s: "v"') + node(
            "y", "ReadVariableOp", ["v"], dtype=F),
        "restore_absolute_path": const("p", ["/etc/passwd"], "DT_STRING", []) + const(
            "n", ["a"], "DT_STRING") + const("sl", [""], "DT_STRING") + node(
            "y", "RestoreV2", ["p", "n", "sl"], dtypes="list { type: DT_FLOAT }"),
    }
    for name, text in cases.items():
        allowed = (1, 2)
        if name in ("maxpool_ksize_2k", "listdiff_huge", "where_5d",
                    "stridedslice_new_axis_many"):
            allowed = (0,)  # valid: must run
        if name in ("check_numerics", "assert_false", "varhandle_read_uninit",
                    "restore_absolute_path", "queue_dequeue_empty"):
            allowed = (1, 2)
        # the node that fails: `y`, or the list/array/stack it reads, made by the node before
        says = ["'y'", "'ta'", "'l'", "'r'", "'st'", "'q'"]
        if name == "stridedslice_spec_splat":  # run refuses a 512 MiB Const first
            says = ["'y'", "'b'", "'e'", "'s'"]
        case = run_case(f"rt_{name}", text, says=says, allowed=allowed,
                        timeout=10.0 if name.startswith(("queue_", "stridedslice_spec"))
                        else 30.0)
        if name.startswith("queue_"):
            # A dequeue from a queue nothing fills waits, as in TensorFlow (Ctrl-C ends it):
            # recorded, not a failure (SECURITY.md: tfg does not bound a run's time).
            case.commands[0].waits = True
        yield case



# --- feeds, files, outputs and flags ----------------------------------------------------------
SMALL = X + _neg("y", "x")


def _npz(arrays, compress=False):
    buf = io.BytesIO()
    (np.savez_compressed if compress else np.savez)(buf, **arrays)
    return buf.getvalue()


def _npy_header(shape, descr="<f4", fortran=False, pad=0):
    header = repr({"descr": descr, "fortran_order": fortran, "shape": shape}).encode()
    header += b" " * (pad + (64 - (10 + len(header) + 1) % 64) % 64) + b"\n"
    return b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header


def _object_npz():
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as z:
        arr = io.BytesIO()
        np.save(arr, np.array([{"a": 1}, None], dtype=object), allow_pickle=True)
        z.writestr("x.npy", arr.getvalue())
    return buf.getvalue()


def _zip_bomb():
    """An .npz whose member declares [2**31] float32 (8 GiB) in a few MB of deflate."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        with z.open("x.npy", "w", force_zip64=True) as f:
            f.write(_npy_header((1 << 31,)))
            chunk = bytes(1 << 24)
            for _ in range(4):  # only 64 MiB of zeros stored: the header claims 8 GiB
                f.write(chunk)
    return buf.getvalue()


def feed_cases():
    run = lambda *extra: ["run", "g.pbtxt", "--fetch", "y", "--max-memory", RUN_MEMORY,  # noqa
                          "-o", "r.npz", *extra]
    feeds = {
        "npz_object_pickle": ("f.npz", _object_npz(), ["--feeds", "f.npz"], "f.npz"),
        "npz_not_zip": ("f.npz", b"PK\x03\x04garbage" * 10, ["--feeds", "f.npz"], "f.npz"),
        "npz_empty_file": ("f.npz", b"", ["--feeds", "f.npz"], "f.npz"),
        "npz_wrong_dtype": ("f.npz", _npz({"x": np.array([["a", "b", "c"]] * 2)}),
                            ["--feeds", "f.npz"], "x"),
        "npz_wrong_shape": ("f.npz", _npz({"x": np.zeros((7, 7), np.float32)}),
                            ["--feeds", "f.npz"], "x"),
        "npz_key_not_placeholder": ("f.npz", _npz({"y": np.zeros((2, 3), np.float32)}),
                                    ["--feeds", "f.npz", "--feed", "x=[[1,2,3],[4,5,6]]"], None),
        "npz_key_missing_node": ("f.npz", _npz({"nope:0": np.zeros(3, np.float32)}),
                                 ["--feeds", "f.npz"], "nope"),
        "npz_key_weird": ("f.npz", _npz({"../../x": np.zeros((2, 3), np.float32)}),
                          ["--feeds", "f.npz"], None),
        "npz_zip_bomb": ("f.npz", _zip_bomb(), ["--feeds", "f.npz"], None),
        "npy_huge_header": ("x.npy", _npy_header((1 << 40, 1 << 20)) + b"\0" * 64,
                            ["--feed", "x=@x.npy"], "x"),
        "npy_negative_shape": ("x.npy", _npy_header((-1, 3)) + b"\0" * 64,
                               ["--feed", "x=@x.npy"], "x"),
        "npy_object_descr": ("x.npy", _npy_header((2,), descr="|O") + b"\x80\x04N." * 4,
                             ["--feed", "x=@x.npy"], "x"),
        "npy_header_len_huge": ("x.npy", b"\x93NUMPY\x02\x00" + struct.pack("<I", 1 << 31)
                                + b"{", ["--feed", "x=@x.npy"], "x"),
        "npy_bad_descr": ("x.npy", _npy_header((2,), descr="<f99") + b"\0" * 64,
                          ["--feed", "x=@x.npy"], "x"),
        "npy_structured": ("x.npy", _npy_header((2,), descr=[("a", "<f4"), ("b", "|O")])
                           + b"\0" * 64, ["--feed", "x=@x.npy"], "x"),
        "npy_truncated": ("x.npy", _npy_header((2, 3)) + b"\0" * 5, ["--feed", "x=@x.npy"], "x"),
        "npy_fortran": ("x.npy", _npy_header((2, 3), fortran=True) + b"\0" * 24,
                        ["--feed", "x=@x.npy"], None),
    }
    for name, (fname, data, extra, says) in feeds.items():
        allowed = (0,) if name in ("npy_fortran", "npz_key_not_placeholder") else (2,)
        if name in ("npz_key_not_placeholder", "npz_key_weird"):
            allowed = (0, 2)
        yield Case(f"feed_{name}", {"g.pbtxt": SMALL, fname: data},
                   [Cmd("run", run(*extra), allowed, says, "r.npz")])
    literals = {"deep_list": "x=" + "[" * 100 + "]" * 100, "nan_text": "x=nan",
                "big_int": "x=" + "9" * 5000, "float_overflow": "x=1e999",
                "unbalanced": "x=[[1,2,3],[4,5]]", "no_equals": "x", "empty_name": "=1",
                "dunder": "x=__import__('os').system('false')", "lambda": "x=(lambda: 1)()",
                "set": "x={1,2}", "dict": "x={'a': 1}", "bytes": "x=b'abc'",
                "complex": "x=1j", "at_missing": "x=@nope.npy", "at_dir": "x=@.",
                "at_dev_zero": "x=@/dev/zero", "fifo_name_ok": "x:0=[[1,2,3],[4,5,6]]",
                "port_bad": "x:7=1", "huge_repeat": "x=" + "[" + "1," * 200000 + "1]",
                "non_placeholder": "y=[[1,2,3],[4,5,6]]"}
    for name, lit in literals.items():
        extra = ["--feed", lit]
        if name == "non_placeholder":
            extra += ["--feed", "x=[[1,2,3],[4,5,6]]"]
        allowed = (0,) if name in ("fifo_name_ok",) else (0, 2) if name == "non_placeholder" \
            else (2,)
        yield Case(f"literal_{name}", {"g.pbtxt": SMALL},
                   [Cmd("run", run(*extra), allowed, None, "r.npz", timeout=20.0)])
    # fetches and targets
    for name, fetch in {"dead_port": "x:5", "empty": "", "caret": "^y", "huge_port":
                        "y:99999999999999999999", "colon": "y:", "spaces": " y "}.items():
        yield Case(f"fetch_{name}", {"g.pbtxt": SMALL},
                   [Cmd("run", ["run", "g.pbtxt", "--fetch", fetch, "--feed",
                                "x=[[1,2,3],[4,5,6]]", "-o", "r.npz"], (0, 2), None, "r.npz")])
    # a fetch of a tensor that is dead (the untaken side of a Switch)
    dead = (X + node("p", "Const", dtype="type: DT_BOOL", value=(
        "tensor { dtype: DT_BOOL tensor_shape { } bool_val: true }"))
        + node("s", "Switch", ["x", "p"], T=F) + node("y", "Identity", ["s:0"], T=F))
    yield Case("fetch_dead_tensor", {"g.pbtxt": dead},
               [Cmd("run", run("--feed", "x=[[1,2,3],[4,5,6]]"), (1, 2), "y", "r.npz")])


def _gd_bytes():
    return to_binary(SMALL)


def file_cases():
    small = _gd_bytes()
    # truncated at every byte offset, through `info` (and `run` on a few)
    for cut in range(1, len(small)):
        yield Case(f"trunc_{cut:03d}", {"g.pb": small[:cut]},
                   [Cmd("info", ["info", "g.pb"], (0, 2))])
    # flipped bytes at every offset
    for at in range(len(small)):
        data = bytearray(small)
        data[at] ^= 0xFF
        yield Case(f"flip_{at:03d}", {"g.pb": bytes(data)},
                   [Cmd("info", ["info", "g.pb"], (0, 2)),
                    Cmd("run", ["run", "g.pb", "--fetch", "y", "--feed", "x=[[1,2,3],[4,5,6]]",
                                "--max-memory", RUN_MEMORY, "-o", "r.npz"], (0, 1, 2), None,
                        "r.npz")])
    raw = {
        "varint_overflow": b"\x0a" + b"\xff" * 11 + b"\x01",
        "length_huge": b"\x0a\xff\xff\xff\xff\x0f" + small,
        "wire_type_wrong": b"\x0b" + small,
        "unknown_fields": b"\xf8\xff\x03\x01" + small + b"\xa2\x06\x03abc",
        "group_wire": b"\x0b\x0c" + small,
        "nested_unknown_deep": b"\x92\x06" * 0 + _deep_unknown(200),
        "gzip": gzip.compress(small),
        "gzip_bomb": gzip.compress(bytes(64 << 20)),
        "zip": _npz({"a": np.zeros(3)}),
        "nul_text": b"node { name: \"x\0\" op: \"NoOp\" }",
        "bom_text": b"\xef\xbb\xbf" + SMALL.encode(),
        "latin1_text": SMALL.encode().replace(b"\"y\"", b"\"\xe9\""),
        "utf16_text": SMALL.encode("utf-16"),
        "text_braces_deep": b"node { " * 5000 + b"}" * 5000,
        "text_unclosed": b"node { name: \"x\" op: \"NoOp\" ",
        "text_long_string": b"node { name: \"" + b"a" * (20 << 20) + b"\" op: \"NoOp\" }",
        "text_many_attrs": SMALL.encode() + b"node { name: \"z\" op: \"NoOp\" "
        + b"".join(b"attr { key: \"k%d\" value { i: 1 } } " % i for i in range(50000)) + b"}",
        "only_whitespace": b" \n\t " * 100,
        "json": b'{"node": [{"name": "x", "op": "Placeholder"}]}',
    }
    for name, data in raw.items():
        yield Case(f"file_{name}", {"g": data}, [
            Cmd("info", ["info", "g"], (0, 2)),
            Cmd("convert", ["convert", "g", "-o", "c.pbtxt"], (0, 2), None, "c.pbtxt"),
            Cmd("run", ["run", "g", "--fetch", "y", "--feed", "x=[[1,2,3],[4,5,6]]",
                        "--max-memory", RUN_MEMORY, "-o", "r.npz"], (0, 1, 2), None, "r.npz"),
            Cmd("stdin", ["optimize", "-", "-o", "o.pb"], (0, 2), None, "o.pb", stdin="g")])
    # odd GRAPH paths
    for name, path in {"dev_zero": "/dev/zero", "dev_null": "/dev/null", "dir": ".",
                       "missing": "nope.pb", "proc_self": "/proc/self/mem",
                       "dev_urandom": "/dev/urandom"}.items():
        yield Case(f"path_{name}", {"g.pbtxt": SMALL},
                   [Cmd("info", ["info", path], (2,), None, None, timeout=20.0),
                    Cmd("optimize", ["optimize", path, "-o", "o.pb"], (2,), None, "o.pb",
                        timeout=20.0)])
    fifo = Case("path_fifo", {"g.pbtxt": SMALL, "fifo": lambda p: os.mkfifo(p)},
                [Cmd("info", ["info", "fifo"], (2,), None, None, timeout=5.0)])
    fifo.commands[0].waits = True  # a FIFO nobody writes waits for a writer, as stdin does
    yield fifo
    yield Case("stdin_empty", {"g.pbtxt": SMALL, "empty": b""},
               [Cmd(c, [c, "-"] + (["--ys", "y", "--xs", "x"] if c == "grad" else []),
                    (2,), None, None, stdin="empty")
                for c in ("info", "convert", "optimize", "grad", "place", "partition",
                          "render", "run", "prune")])
    yield Case("stdin_text", {"g.pbtxt": SMALL},
               [Cmd("run", ["run", "-", "--fetch", "y", "--feed", "x=[[1,2,3],[4,5,6]]"], (0,),
                    stdin="g.pbtxt")])
    # odd output paths: a folder, a missing folder, an unwritable folder, /dev/full, the input
    # (/dev/full: before the fix, tfg renamed its temp file over the device node, and as
    # root that replaced /dev/full with a regular file: the sweep checks the node after.)
    outs = {"out_is_dir": ("sub", (2,)), "out_missing_dir": ("nope/o.pb", (2,)),
            "out_dev_full": ("/dev/full", (1, 2)), "out_ro_dir": ("ro/o.pb", (2,)),
            "out_proc": ("/proc/version", (2,))}
    for name, (out, allowed) in outs.items():
        files = {"g.pbtxt": SMALL, "sub/keep": b"", "ro": lambda p: (os.mkdir(p),
                                                                   os.chmod(p, 0o500))}
        cmds = []
        for c in ("convert", "optimize", "place", "partition", "grad", "prune", "render",
                  "run"):
            argv = [c, "g.pbtxt", "-o", out]
            argv += {"grad": ["--ys", "y", "--xs", "x"], "prune": ["--fetch", "y"],
                     "run": ["--fetch", "y", "--feed", "x=[[1,2,3],[4,5,6]]"],
                     "place": ["--devices", "cpu:2"], "partition": ["--devices", "cpu:2"]
                     }.get(c, [])
            if os.geteuid() == 0 and name == "out_ro_dir":
                continue  # root writes anywhere
            cmds.append(Cmd(c, argv, allowed, None, None))
        yield Case(name, files, cmds)
    yield Case("out_same_as_input", {"g.pbtxt": SMALL},
               [Cmd("optimize", ["optimize", "g.pbtxt", "-o", "g.pbtxt"], (0,)),
                Cmd("info", ["info", "g.pbtxt"], (0,))])


def _deep_unknown(levels):
    """An unknown length-delimited field nested `levels` deep (protobuf skips unknown groups
    and length-delimited fields without recursing... or does it?)."""
    data = b"x"
    for _ in range(levels):
        data = b"\xfa\x3e" + _varint(len(data)) + data
    return data


def _varint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        out.append(b | (0x80 if n else 0))
        if not n:
            return bytes(out)


def flag_cases():
    base = {"g.pbtxt": SMALL}
    feed = ["--feed", "x=[[1,2,3],[4,5,6]]", "--fetch", "y"]
    flags = {
        "devices_huge": ["run", "g.pbtxt", "--devices", "cpu:99999999", *feed],
        "devices_neg": ["place", "g.pbtxt", "--devices", "cpu:-1"],
        "devices_empty": ["place", "g.pbtxt", "--devices", ""],
        "devices_garbage": ["partition", "g.pbtxt", "--devices", "tpu:1,,,:"],
        "devices_many_gpus": ["place", "g.pbtxt", "--devices", "gpu:1000000000"],
        "steps_neg": ["run", "g.pbtxt", "--steps", "-1", *feed],
        "steps_huge": ["run", "g.pbtxt", "--steps", "99999999999999999999999", *feed],
        "max_memory_garbage": ["run", "g.pbtxt", "--max-memory", "lots", *feed],
        "max_memory_neg": ["run", "g.pbtxt", "--max-memory", "-5", *feed],
        "max_memory_zero": ["run", "g.pbtxt", "--max-memory", "0", *feed],
        "max_memory_huge": ["run", "g.pbtxt", "--max-memory", "1e400", *feed],
        "cluster_empty": ["run", "g.pbtxt", "--cluster", "worker=", *feed],
        "cluster_port_huge": ["run", "g.pbtxt", "--cluster", "worker=127.0.0.1:99999", *feed],
        "cluster_json_deep": ["run", "g.pbtxt", "--cluster", "c.json", *feed],
        "cluster_json_bad": ["place", "g.pbtxt", "--cluster", "bad.json"],
        "passes_unknown": ["optimize", "g.pbtxt", "--passes", "nope,$(id)"],
        "passes_empty": ["optimize", "g.pbtxt", "--passes", ","],
        "keep_missing": ["optimize", "g.pbtxt", "--keep", "nope"],
        "ys_equals_xs": ["grad", "g.pbtxt", "--ys", "x", "--xs", "x"],
        "ys_missing": ["grad", "g.pbtxt", "--ys", "nope", "--xs", "x"],
        "xs_empty": ["grad", "g.pbtxt", "--ys", "y", "--xs", ","],
        "grad_ys_mismatch": ["grad", "g.pbtxt", "--ys", "y", "--xs", "x", "--grad-ys", "x,x"],
        "prefix_weird": ["grad", "g.pbtxt", "--ys", "y", "--xs", "x", "--prefix", "a:b^"],
        "prefix_empty": ["grad", "g.pbtxt", "--ys", "y", "--xs", "x", "--prefix", ""],
        "prefix_collides": ["grad", "g.pbtxt", "--ys", "y", "--xs", "x", "--prefix", "y"],
        "cost_model_garbage": ["place", "g.pbtxt", "--devices", "cpu:2", "--cost-model",
                               "bad.json"],
        "cost_model_deep": ["place", "g.pbtxt", "--devices", "cpu:2", "--cost-model", "c.json"],
        "cost_model_negative": ["place", "g.pbtxt", "--devices", "cpu:2", "--cost-model",
                                "neg.json"],
        "trace_is_dir": ["run", "g.pbtxt", "--trace", "sub", *feed],
        "tag_on_graph": ["info", "g.pbtxt", "--tag", "serve"],
        "restore_garbage": ["run", "g.pbtxt", "--restore", "bad.json", *feed],
        "restore_dir_garbage": ["run", "g.pbtxt", "--checkpoint-dir", "sub", *feed],
        "render_ext": ["render", "g.pbtxt", "-o", "r.exe"],
        "render_format_inject": ["render", "g.pbtxt", "-o", "-Tps:x.svg"],
        "worker_task_neg": ["worker", "--cluster", "worker=127.0.0.1:1", "--job", "worker",
                            "--task", "-1"],
        "worker_task_big": ["worker", "--cluster", "worker=127.0.0.1:1", "--job", "worker",
                            "--task", "5"],
        "worker_job_missing": ["worker", "--cluster", "worker=127.0.0.1:1", "--job", "ps",
                               "--task", "0"],
        "worker_bind_garbage": ["worker", "--cluster", "worker=127.0.0.1:1", "--job", "worker",
                                "--task", "0", "--bind", "$(id)"],
        "worker_token_file_missing": ["worker", "--cluster", "worker=127.0.0.1:1", "--job",
                                      "worker", "--task", "0", "--auth-token-file", "nope"],
    }
    files = dict(base)
    files.update({"c.json": "[" * 100000 + "]" * 100000, "bad.json": "{not json",
                  "neg.json": json.dumps({"nodes": [{"name": "y", "compute_us": -1e308,
                                                     "max_memory_bytes": -5}]}),
                  "sub/keep": b""})
    files["list.json"] = "[1, 2]"
    files["sparse.json"] = json.dumps({"worker": {"a": "127.0.0.1:1"}})
    flags["cluster_json_list"] = ["place", "g.pbtxt", "--cluster", "list.json"]
    flags["cluster_json_sparse_bad"] = ["place", "g.pbtxt", "--cluster", "sparse.json"]
    for name, argv in flags.items():
        allowed = (0, 2)
        case = Case(f"flag_{name}", files, [Cmd("flag", argv, allowed, None, None,
                                                 timeout=20.0)])
        if name == "steps_huge":  # runs the 1-node graph for ever, as asked (Ctrl-C ends it)
            case.commands[0].waits = True
            case.commands[0].timeout = 5.0
        yield case


def _encrypted_npz():
    """An .npz whose member is flagged encrypted (zipfile refuses to read it)."""
    data = bytearray(_npz({"x": np.zeros((2, 3), np.float32)}))
    for magic, flag_at in ((b"PK\x03\x04", 6), (b"PK\x01\x02", 8)):
        at = data.find(magic)
        data[at + flag_at] |= 0x1
    return bytes(data)


def _bomb_without_suffix():
    """A member named `x` (no .npy): numpy's loader reads such a member whole, as bytes."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        with z.open("x", "w", force_zip64=True) as f:
            chunk = bytes(1 << 24)
            for _ in range(64):  # 1 GiB of zeros in about 1 MB
                f.write(chunk)
    return buf.getvalue()


def contract_cases():
    """Cases of the stop-45 sweep: count attrs of 2**62, render input dot cannot hold, files
    and paths the user names that cannot be read or written."""
    for op, extra in (("AddN", ""), ("ConcatV2", node("axis", "Const", dtype=I32, value=(
            "tensor { dtype: DT_INT32 tensor_shape { } int_val: 0 }")))):
        inputs = ["x", "x"] + (["axis"] if op == "ConcatV2" else [])
        attrs = {"N": "i: 4611686018427387904", "T": F}
        if op == "ConcatV2":
            attrs["Tidx"] = I32
        yield graph_case(f"count_attr_huge_{op}", X + extra + node("y", op, inputs, **attrs),
                         binary=False, says="4611686018427387904")
    long = "d" * 100_000
    for name, text in {"long_device": X + node("y", "Neg", ["x"], T=F).replace(
                           '"Neg"', f'"Neg" device: "{long}"'),
                       "nul_device": X + node("y", "Neg", ["x"], T=F).replace(
                           '"Neg"', '"Neg" device: "/cpu:0\\000x"'),
                       "long_name": X + node("n" * 20_000, "Neg", ["x"], T=F)}.items():
        yield Case(f"render_{name}", {"g.pbtxt": text},
                   [Cmd("render", ["render", "g.pbtxt", "-o", "r.svg"], (0,), None, "r.svg",
                        timeout=60.0)])
    feed = ["--feed", "x=[[1,2,3],[4,5,6]]"]
    run = ["run", "g.pbtxt", "--fetch", "y", "--max-memory", RUN_MEMORY, "-o", "r.npz"]
    files = {"g.pbtxt": SMALL, "enc.npz": _encrypted_npz(), "bomb.npz": _bomb_without_suffix(),
             "tr.json": json.dumps({"traceEvents": [{"name": "y", "ph": "X", "ts": "a",
                                                     "dur": {"a": 1}, "args": [1]}]}),
             "s.pbtxt": placeholder("x", STR, [2]) + node("y", "Identity", ["x"], T=STR),
             "v.pbtxt": (node("v", "VariableV2", dtype=F, shape=shape_attr([2]))
                         + const("c", [1.0, 2.0], "DT_FLOAT", [2])
                         + node("init", "Assign", ["v", "c"], T=F)
                         + node("y", "Identity", ["v"], T=F))}
    cmds = {
        "npz_encrypted": (run + ["--feeds", "enc.npz"], "encrypted"),
        "npz_bomb_no_suffix": (run + ["--feeds", "bomb.npz"], "bomb.npz"),
        "compare_bomb_no_suffix": (["compare", "g.pbtxt", "bomb.npz", *feed], "bomb.npz"),
        "string_lone_surrogate": (["run", "s.pbtxt", "--fetch", "y", "--feed",
                                   "x=['\\udcff', 'a']"], "not valid Unicode"),
        "save_missing_parent": (["run", "v.pbtxt", "--init", "init", "--fetch", "y",
                                 "--save", "g.pbtxt/ckpt"], "cannot write"),
        "compare_rtol_nan": (["compare", "g.pbtxt", "g.pbtxt", *feed, "--rtol", "nan"],
                             "--rtol"),
        "export_trace_bad_values": (["export", "tensorboard", "g.pbtxt", "tb", "--trace",
                                     "tr.json"], "trace event 0"),
        "export_logdir_under_file": (["export", "tensorboard", "g.pbtxt", "g.pbtxt/tb"],
                                     "LOGDIR"),
        "render_trace_bad_values": (["render", "g.pbtxt", "-o", "r.dot", "--trace", "tr.json",
                                     "--color-by", "time"], "trace event 0"),
        "place_device_type_unknown": (["place", "g.pbtxt", "--devices", "cpu:2, gp u:1"],
                                      "unknown device 'gp u:1'"),
    }
    for name, (argv, says) in cmds.items():
        yield Case(f"contract_{name}", files, [Cmd(name, argv, (2,), says, "r.npz",
                                                   timeout=60.0)])
    # a loop whose LoopCond reads an int32 (its predicate must be a bool): run refused it,
    # optimize, place and partition wrote it (stop 46)
    loop = (const("c0", [0], "DT_INT32", [])
            + node("e", "Enter", ["c0"], T=I32, frame_name='s: "f"')
            + node("m", "Merge", ["e", "ni"], T=I32, N="i: 2")
            + node("lc", "LoopCond", ["m"])
            + node("sw", "Switch", ["m", "lc"], T=I32)
            + node("id", "Identity", ["sw:1"], T=I32)
            + node("ni", "NextIteration", ["id"], T=I32)
            + node("ex", "Exit", ["sw"], T=I32))
    for sub, extra in (("optimize", []), ("place", ["--devices", "cpu:2"]),
                       ("partition", ["--devices", "cpu:2"])):
        yield Case(f"contract_loopcond_int32_{sub}", {"g.pbtxt": loop},
                   [Cmd(sub, [sub, "g.pbtxt", *extra, "-o", "o.pb"], (2,), "expected bool",
                        "o.pb", timeout=60.0)])
    tensor = tensor_pb2.TensorProto(dtype=1, float_val=[1.0, 2.0, 3.0])
    tensor.tensor_shape.dim.add(size=3)
    yield Case("contract_tensorproto_as_graph", {"t.pb": tensor.SerializeToString()},
               [Cmd("info", ["info", "t.pb"], (2,), "not a GraphDef", None)])


GROUPS = [function_cases, structure_cases, attr_cases, runtime_cases, feed_cases,
          file_cases, flag_cases, contract_cases]


def all_cases():
    return [case for group in GROUPS for case in group()]
