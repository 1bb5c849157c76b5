"""TensorFlow's `_SwitchN` rewritten into v1 Switches, when a graph is loaded.

TensorFlow lowers a `Case` (`tf.switch_case`) into `_SwitchN` nodes (lower_case_op.cc), and a
graph frozen with `convert_variables_to_constants_v2(lower_control_flow=True)` keeps them:
`_SwitchN(data, output_index, num_outs=N)` forwards `data` to output `output_index` (an index
out of [0, N) takes the last output, the default branch) and leaves the others dead. tfg's
executor, placement, partitioner and gradients know the two-way Switch; each `_SwitchN` becomes
one Switch per output, on predicates made as tfg lowers a Case (tfg.graphdef.lower_if):

    Before: s = _SwitchN(x, i, num_outs=3); a = Mul(s:0, two); b = Sin(s:1); c = AddV2(s:2, ten)
    After:  s/index_0 = Const(0, ^i); s/is_0 = Equal(i, s/index_0)
            s/index_1 = Const(1, ^i); s/is_1 = Equal(i, s/index_1)
            s/any_1 = LogicalOr(s/is_0, s/is_1); s/is_2 = LogicalNot(s/any_1)
            s/switch_k = Switch(x, s/is_k)                       (k = 0, 1, 2)
            a = Mul(s/switch_0:1, two); b = Sin(s/switch_1:1); c = AddV2(s/switch_2:1, ten)

Exactly one predicate is true, so exactly one output is live. `^s` elsewhere becomes
`^s/switch_0`: a Switch's control output is live when its inputs are, as the `_SwitchN`'s was.
The node's own name is gone (its outputs were only ever read by the branches it feeds).
"""
import numpy as np

from tfg.errors import TfgInputError
from tfg.graphdef.lowering import Lowering
from tfg.graphdef.names import input_string
from tfg.schemas.dtypes import DType

OP = "_SwitchN"


def has_switch_n(graph):
    """Whether `graph` holds a `_SwitchN` for `lower_switch_n` to rewrite."""
    return any(n.op == OP for n in graph)


def lower_switch_n(graph):
    """Rewrite every `_SwitchN` of `graph` in place (see the module docstring); returns how
    many it rewrote. A malformed one is a TfgInputError naming it."""
    names = [n.name for n in graph if n.op == OP]
    for name in names:
        _lower_one(graph, graph[name])
    return len(names)


def _lower_one(graph, node):
    where = f"node {node.name!r} ({OP})"
    data = node.data_inputs
    if len(data) != 2:
        raise TfgInputError(f"{where} has {len(data)} data inputs; it takes data and "
                            "output_index")
    n = node.get_attr("num_outs", None)
    if not isinstance(n, int) or isinstance(n, bool) or n < 1:
        raise TfgInputError(f"{where}: attr num_outs must be an int >= 1, got {n!r}")
    dtype = node.get_attr("T", None)
    if not isinstance(dtype, DType):
        raise TfgInputError(f"{where} has no type attr T")
    readers = graph.consumers(node.name)
    waiters = [(c, i) for c, i in graph.consumers(node.name, include_control=True)
               if c.input_refs[i].is_control]
    for consumer, idx in readers:
        port = consumer.input_refs[idx].port
        if port >= n:
            raise TfgInputError(f"node {consumer.name!r} reads output {port} of {where}, "
                                f"which has {n} outputs")
    low = Lowering(graph, node)

    def add(base, op, inputs, attrs=None):
        return low.add(base, op, inputs, attrs).name

    value, index = (input_string(r.node, r.port) for r in data)
    controls = ["^" + c for c in node.control_inputs]
    # Constants wait on the index's producer: inside a loop they must join its frame.
    anchor = ["^" + data[1].node] + controls
    preds = []
    for k in range(n - 1):
        const = add(f"index_{k}", "Const", anchor, {"dtype": DType.INT32,
                                                    "value": np.array(k, np.int32)})
        preds.append(add(f"is_{k}", "Equal", [index, const], {"T": DType.INT32}))
    if preds:
        any_other = preds[0]
        for k, p in enumerate(preds[1:], 1):
            any_other = add(f"any_{k}", "LogicalOr", [any_other, p])
        preds.append(add(f"is_{n - 1}", "LogicalNot", [any_other]))
    else:  # one output: it always takes the value (a true predicate in the index's frame)
        preds.append(add("index_0", "Const", anchor, {"dtype": DType.BOOL,
                                                      "value": np.array(True)}))
    switches = [add(f"switch_{k}", "Switch", [value, pred] + controls, {"T": dtype})
                for k, pred in enumerate(preds)]
    graph.remove_node(node.name)
    for new in low.new:
        graph.add(new)
    for consumer, idx in readers:
        port = consumer.input_refs[idx].port
        graph.replace_input(consumer.name, idx, input_string(switches[port], 1))
    for consumer, idx in waiters:
        graph.replace_input(consumer.name, idx, "^" + switches[0])
