"""Function inlining: calls into a GraphDef's function library become plain nodes.

TF2 graphs (a SavedModel's MetaGraphDef, `concrete_function.graph.as_graph_def()`) keep the
computation in `graph.library`: the main graph holds `StatefulPartitionedCall` /
`PartitionedCall` nodes (attr `f` names the function) or nodes whose op *is* a function name.
`inline_functions` replaces every such call with the called FunctionDef's body, recursively:

    Before: x = Placeholder; w = VarHandleOp
            call = StatefulPartitionedCall(x, w, f=dense)      # dense: MatMul(x, Read(w))
            y = Identity(call:0)
    After:  call/ReadVariableOp = ReadVariableOp(w)
            call/MatMul = MatMul(x, call/ReadVariableOp)
            call = IdentityN(call/MatMul, ^<control outputs of dense>)
            y = Identity(call:0)

Body nodes are renamed under the call's name; a body input `arg` is the call's input for that
argument, `node:out_arg:i` (FunctionDef addressing) becomes `call/node:k`, where k counts the
outputs of `node`'s op before `out_arg` (from the op signature, or the callee's output list for
a nested call). The call node's name survives as an IdentityN of the function's results that
also waits on its control outputs (the ops a tf.function must run), so `call:k` tensors and
`^call` control edges elsewhere keep their meaning; a call with no results becomes a NoOp.
Control inputs of the call gate the whole body (through `call/input_control_node`).

Control flow v2 is lowered to the v1 primitives with its functions inlined: `If` and `Case`
(and their stateless forms) to Switch/Merge (tfg.graphdef.lower_if), `While`/`StatelessWhile`
to Enter/Merge/Switch/NextIteration/Exit (tfg.graphdef.lower_while), and the `_SwitchN` of a
Case that TensorFlow lowered itself to Switches (tfg.graphdef.lower_switch_n). What cannot be inlined (a
missing or recursive function, an op tfg has no signature for, `SymbolicGradient`, polymorphic
functions) raises a
`FunctionInliningError` naming the function and node; with `strict=False` that call is kept
as it is and the reason recorded, so the rest of the graph still inlines.
"""
from collections import deque
from dataclasses import dataclass, field

from tfg.errors import TfgInputError
from tfg.graphdef.colocation_refs import fix_colocation_refs
from tfg.graphdef.graph import Node
from tfg.graphdef.lower_if import lower_case, lower_if
from tfg.graphdef.lower_switch_n import lower_switch_n
from tfg.graphdef.lower_while import lower_while
from tfg.graphdef.lowering import (  # noqa: F401  (FunctionInliningError: public here)
    FunctionInliningError, Taken, fresh_name)
from tfg.graphdef.names import input_string
from tfg.schemas.dtypes import DType
from tfg.schemas.ops.registry import get_op, has_op
from tfg.schemas.ops.signature import _arg_dtypes
from tfg.schemas.proto import node_def_pb2

CALL_OPS = frozenset({"PartitionedCall", "StatefulPartitionedCall"})
IF_OPS = frozenset({"If", "StatelessIf"})  # lowered to Switch/Merge (tfg.graphdef.lower_if)
WHILE_OPS = frozenset({"While", "StatelessWhile"})  # lowered to a v1 loop (lower_while)
CASE_OPS = frozenset({"Case", "StatelessCase"})  # lowered to Switch/Merge (lower_if)
# The functional ops tfg inlines or lowers when it loads a graph (they have no signature of
# their own: what runs is their bodies).
LOWERED_OPS = CALL_OPS | IF_OPS | WHILE_OPS | CASE_OPS
# Functional ops whose bodies tfg would have to lower (v2 control flow) or differentiate.
UNSUPPORTED_OPS = {
    "For": "a functional For loop", "SymbolicGradient": "a symbolic gradient function",
    "RemoteCall": "a remote function call",
}
MAX_DEPTH = 64  # nesting deeper than this is a malformed (or adversarial) library
# A small library can still expand exponentially (f calls g twice, g calls h twice, ...).
MAX_NODES = 1_000_000
# ... and by bytes, counted before inlining anything: one leaf holding a 1 MB attr, called 2**k
# ways, passes any node cap. A node costs its NodeDef's bytes plus what tfg holds per node.
MAX_INLINED_BYTES = 512 << 20
NODE_OVERHEAD_BYTES = 1024
# ... and by amplification: past a floor, a call may not add more than this many times the
# library's own bytes. A 12-level bomb with a 64 KiB leaf (a 70 KB file) adds 266 MB, under the
# byte cap, but 3000 times its library: place and partition wrote a 270 MB graph (1.4 GB RSS).
# Real libraries are inlined a few times each (a shared layer function called per layer).
MAX_AMPLIFICATION = 256
AMPLIFICATION_FLOOR_BYTES = 64 << 20


@dataclass
class Inlined:
    """What `inline_functions` did: the new graph, the number of calls it inlined, and the
    calls it kept ({call node name: why}) when run with strict=False."""

    graph: object
    count: int = 0
    skipped: dict = field(default_factory=dict)


def library_functions(graph):
    """{function name: FunctionDef} of the graph's library (empty without one)."""
    if graph.library is None:
        return {}
    return {f.signature.name: f for f in graph.library.function}


def called_function(node, lib):
    """The name of the function `node` calls, or None when it is no call."""
    if node.op in CALL_OPS:
        f = node.get_attr("f", None)
        name = getattr(f, "name", None)
        if not name:
            raise FunctionInliningError(f"node {node.name!r} ({node.op}) has no function attr "
                                        "'f'")
        return name
    return node.op if node.op in lib else None


def inline_functions(graph, strict=True):
    """Inline every function call of `graph` (see the module docstring); returns `Inlined`.

    Before: a graph whose StatefulPartitionedCall nodes call functions of graph.library.
    After:  Inlined(graph=<the same computation without calls>, count=<calls inlined>,
            skipped={}) ; the input graph is not modified and the library is kept verbatim.
    """
    lib = library_functions(graph)
    out = graph.copy()
    result = Inlined(out)
    queue = deque((n.name, ()) for n in out if is_functional(n, lib))
    check_expansion([out[name] for name, _ in queue], lib)
    while queue:
        name, chain = queue.popleft()
        if len(out) > MAX_NODES:  # refused even with strict=False: nothing sensible is left
            raise FunctionInliningError(f"inlining node {name!r} would grow the graph past "
                                        f"{MAX_NODES} nodes; the function library expands "
                                        "too much")
        try:
            node = out[name]
            lower = (lower_if if node.op in IF_OPS else lower_case if node.op in CASE_OPS
                     else lower_while if node.op in WHILE_OPS else _inline_call)
            queue.extend(lower(out, node, lib, chain))
            result.count += 1
        except TfgInputError as e:  # raised before the graph changed: the call stays
            if strict:
                raise
            result.skipped[name] = str(e)
    lower_switch_n(out)  # (TensorFlow's own lowering of a Case, as frozen graphs keep it)
    # A body's `loc:@` may name a node of another function (a gradient body colocated with its
    # forward body): inlined under new names, TensorFlow's import would refuse it.
    fix_colocation_refs(out)
    return result


def check_expansion(calls, lib, limit=MAX_INLINED_BYTES):
    """Refuse a library that would inline to more than `limit` bytes, from its structure alone
    (each function's size is computed once, memoized), before anything is copied.

        Before: root calls f0; f_k calls f_(k+1) twice; f16 holds a 1 MB attr (a 1 MB file)
        After:  FunctionInliningError: inlining node 'root' would add 64 GiB ...
        Before: the same with 12 levels and a 64 KiB leaf (a 66 KB file)
        After:  FunctionInliningError: ... would add 268.2 MiB to the graph, 3075 times the
                function library's 89.3 KiB (at most 256 times past 64.0 MiB) ...
    """
    memo = {}
    own = sum(nd.ByteSize() + NODE_OVERHEAD_BYTES for f in lib.values() for nd in f.node_def)

    def expanded(fname, depth):
        if fname in memo:
            return memo[fname]
        memo[fname] = 0  # a recursive call: inlining itself reports it, naming the chain
        if depth > MAX_DEPTH:
            return 0
        total = 0
        for nd in lib[fname].node_def:
            total += nd.ByteSize() + NODE_OVERHEAD_BYTES
            total += sum(expanded(f, depth + 1) for f in _callees(nd, lib))
        memo[fname] = total
        return total

    for call in calls:
        size = sum(expanded(f, 0) for f in _callees(call, lib))
        if size > limit:
            raise FunctionInliningError(
                f"inlining node {call.name!r} would add {_human(size)} to the graph (at most "
                f"{_human(limit)}); the function library expands too much")
        if size > AMPLIFICATION_FLOOR_BYTES and size > MAX_AMPLIFICATION * own:
            raise FunctionInliningError(
                f"inlining node {call.name!r} would add {_human(size)} to the graph, "
                f"{size // max(own, 1)} times the function library's {_human(own)} (at most "
                f"{MAX_AMPLIFICATION} times past {_human(AMPLIFICATION_FLOOR_BYTES)}); the "
                "function library expands too much")


def _callees(node, lib):
    """Library functions a node (Node or NodeDef) would bring in: its op, or a function-valued
    attr (a call's f, If's branches, While's cond and body)."""
    attrs = node.attr_view if isinstance(node, Node) else node.attr
    names = [node.op] if node.op in lib else []
    for av in attrs.values():
        if av.HasField("func"):
            names.append(av.func.name)
        elif av.HasField("list"):
            names.extend(f.name for f in av.list.func)
    return [n for n in names if n in lib]


def _human(nbytes):
    for unit, shift in (("GiB", 30), ("MiB", 20), ("KiB", 10)):
        if nbytes >= 1 << shift:
            return f"{nbytes / (1 << shift):.1f} {unit}"
    return f"{nbytes} bytes"


_TOUT_CALLS = ("PartitionedCall", "StatefulPartitionedCall")


def _inline_call(graph, call, lib, chain):
    """Replace `call` by its function's body; returns the (name, chain) of nested calls."""
    fname = called_function(call, lib)
    where = f"node {call.name!r}"
    if fname not in lib:
        raise FunctionInliningError(f"{where} calls function {fname!r}, which the graph's "
                                    "library does not define")
    if fname in chain:
        loop = " -> ".join(chain[chain.index(fname):] + (fname,))
        raise FunctionInliningError(f"{where}: recursive function call {loop}")
    if len(chain) >= MAX_DEPTH:
        raise FunctionInliningError(f"{where}: functions nested deeper than {MAX_DEPTH}")
    fdef = lib[fname]
    sig = fdef.signature
    at = f"function {fname!r} (called by {where})"
    in_types = [_fixed_type(a, at) for a in sig.input_arg]
    out_types = [_fixed_type(a, at) for a in sig.output_arg]
    data_in = [input_string(r.node, r.port) for r in call.data_inputs]
    if len(data_in) != len(in_types):
        raise FunctionInliningError(f"{where} passes {len(data_in)} inputs to {at[9:]}, "
                                    f"which takes {len(in_types)}")
    tout = call.get_attr("Tout", None) if call.op in _TOUT_CALLS else None
    if tout is not None and len(tout) != len(out_types):
        # TensorFlow refuses the call when it instantiates the function; inlined, the extra
        # outputs had no producer and a run that did not read them gave a value.
        raise FunctionInliningError(f"{where} expects {len(tout)} outputs (Tout) from "
                                    f"{at[9:]}, which returns {len(out_types)}")

    body = {nd.name: nd for nd in fdef.node_def}
    outputs = {name: _output_ranges(nd, lib, fname) for name, nd in body.items()}
    prefix = call.name + "/"
    taken = Taken(graph, call.name)
    rename = {}
    for name in body:  # renamed only where the plain prefix would collide with a graph node
        new, i = prefix + name, 1
        while new in taken:
            new, i = f"{prefix}{name}_{i}", i + 1
        rename[name] = new
        taken.add(new)

    gate = None
    controls = [input_string(c, -1) for c in call.control_inputs]
    args = dict(zip((a.name for a in sig.input_arg), data_in))
    new_nodes = []
    if controls:  # the call's control inputs must precede every node of the body
        gate = fresh_name(prefix + "input_control_node", taken)
        new_nodes.append(_make(gate, "NoOp", controls, call.device))
    gated = {}

    def argument(name):
        """The tensor an argument reads: the call's input, behind an Identity that waits on
        the gate when the call has control inputs (made on first use)."""
        if gate is None:
            return args[name]
        if name not in gated:
            i = next(k for k, a in enumerate(sig.input_arg) if a.name == name)
            gated[name] = fresh_name(f"{prefix}input/_{i}", taken)
            new_nodes.append(_make(gated[name], "Identity", [args[name], "^" + gate],
                                   call.device, {"T": in_types[i]}))
        return gated[name]

    def resolve(s, node_name):
        if s.startswith("^"):
            if s[1:] not in body:
                raise FunctionInliningError(f"{at}: node {node_name!r} has control input "
                                            f"{s!r}, which is no node of the function")
            return "^" + rename[s[1:]]
        if s in args:
            return argument(s)
        parts = s.split(":")
        if len(parts) != 3 or parts[0] not in body or not parts[2].isdigit():
            raise FunctionInliningError(f"{at}: node {node_name!r} has input {s!r}, which is "
                                        "neither an argument nor node:output:index of the "
                                        "function")
        ranges = outputs[parts[0]]
        if parts[1] not in ranges or int(parts[2]) >= ranges[parts[1]][1]:
            raise FunctionInliningError(f"{at}: node {node_name!r} reads {s!r}, which "
                                        f"{body[parts[0]].op} does not output")
        return input_string(rename[parts[0]], ranges[parts[1]][0] + int(parts[2]))

    nested = []
    for name, nd in body.items():
        copy = node_def_pb2.NodeDef()
        copy.CopyFrom(nd)
        node = Node.from_proto(copy)
        node._name = rename[name]
        node.inputs = [resolve(s, name) for s in nd.input]
        node.device = nd.device or call.device
        if "_class" in copy.attr:  # colocation names a body node by its unprefixed name
            locs = copy.attr["_class"].list.s
            for i, loc in enumerate(locs):
                target = loc[5:].decode("utf-8", "replace")
                if loc.startswith(b"loc:@") and target in rename:
                    locs[i] = b"loc:@" + rename[target].encode()
        if gate is not None and not nd.input:
            node.inputs = ["^" + gate]
        new_nodes.append(node)
        if is_functional(nd, lib):
            nested.append((node.name, chain + (fname,)))
            if gate is not None and nd.input:
                # The gate covers nested bodies too: inlined later, their constants then
                # wait on it, staying in this call's loop frame (a While's cond wrapper
                # calling the cond by name, as tf.nn.ctc_loss's scans write it).
                node.inputs = list(node.inputs) + ["^" + gate]

    rets = []
    for arg in sig.output_arg:
        if arg.name not in fdef.ret:
            raise FunctionInliningError(f"{at}: output {arg.name!r} has no ret entry")
        rets.append(resolve(fdef.ret[arg.name], f"ret {arg.name}"))
    ctrl_rets = []
    for key in sorted(fdef.control_ret):
        target = fdef.control_ret[key]
        ctrl_rets.append(resolve("^" + target, f"control_ret {key}"))
    if out_types:
        result = _make(call.name, "IdentityN", rets + ctrl_rets, call.device, {"T": out_types})
    else:
        result = _make(call.name, "NoOp", ctrl_rets, call.device)

    graph.remove_node(call.name)
    for node in new_nodes:
        graph.add(node)
    graph.add(result)
    return nested


def is_functional(node, lib):
    """Whether inline_functions replaces `node` (a Node or NodeDef): a call or v2 control flow."""
    return node.op in CALL_OPS or node.op in IF_OPS or node.op in CASE_OPS or \
        node.op in WHILE_OPS or node.op in lib


def _fixed_type(arg, at):
    if arg.number_attr or arg.type_list_attr or arg.type_attr or not arg.type:
        raise FunctionInliningError(f"{at}: argument {arg.name!r} has an attr-dependent type "
                                    "(a polymorphic function), which tfg does not instantiate")
    try:
        return DType(arg.type)
    except ValueError:  # a corrupt library: an input error naming the argument
        raise FunctionInliningError(f"{at}: argument {arg.name!r} has type {arg.type}, which "
                                    "is not a valid DType") from None


def _output_ranges(nd, lib, fname):
    """{output arg name: (first output index, count)} of a body node."""
    at = f"function {fname!r} node {nd.name!r}"
    for key, av in nd.attr.items():
        if av.WhichOneof("value") == "placeholder":
            raise FunctionInliningError(f"{at}: attr {key!r} is a placeholder (${av.placeholder}"
                                        "), which tfg does not instantiate")
    if nd.op in UNSUPPORTED_OPS:
        raise FunctionInliningError(f"{at}: op {nd.op} is {UNSUPPORTED_OPS[nd.op]}, which tfg "
                                    "does not support inside functions")
    node = Node.from_proto(nd)
    if nd.op in CALL_OPS or nd.op in IF_OPS or nd.op in CASE_OPS or nd.op in WHILE_OPS:
        tout = node.get_attr("T" if nd.op in WHILE_OPS else "Tout", [])
        return {"output": (0, len(tout) if isinstance(tout, list) else 0)}
    if nd.op in lib:
        return {a.name: (i, 1) for i, a in enumerate(lib[nd.op].signature.output_arg)}
    if not has_op(nd.op):
        raise FunctionInliningError(f"{at}: unknown op {nd.op!r}")
    sig = get_op(nd.op, nd.name)
    ranges, start = {}, 0
    for arg in sig.outputs:
        try:
            n = len(_arg_dtypes(node, arg, sig))
        except TfgInputError as e:
            raise FunctionInliningError(f"{at}: {e}") from None
        ranges[arg.name] = (start, n)
        start += n
    return ranges


def _make(name, op, inputs, device, attrs=None):
    node = Node(name, op, inputs, device)
    for key, value in (attrs or {}).items():
        node.set_attr(key, value, "list(type)" if isinstance(value, list) else None)
    return node


