"""Control flow v2 conditionals lowered to v1 Switch/Merge (as TensorFlow's LowerIfOp and
LowerCaseOp): `If` / `StatelessIf` here, `Case` / `StatelessCase` in `lower_case`.

    Before: out = StatelessIf(pred, a, b, then_branch=t, else_branch=e, Tout=[float])
    After:  out/switch_pred = Switch(pred, pred)
            out/switch_0 = Switch(a, pred); out/switch_1 = Switch(b, pred)
            out/then = PartitionedCall(out/switch_0:1, out/switch_1:1, ^out/pivot_t, f=t)
            out/else = PartitionedCall(out/switch_0,   out/switch_1,   ^out/pivot_f, f=e)
            out/merge_0 = Merge(out/then, out/else)
            out = IdentityN(out/merge_0, ^out/branch_executed)

The two branch calls are then inlined like any call (tfg.graphdef.functions): the pivot
control input gates every node of a branch, so the untaken branch is dead (its stateful ops do
not run) and each Merge forwards the taken branch's value. `branch_executed` (a Merge of one
Identity per branch, each waiting for its branch call) carries the If's control outputs
without making the result wait on the dead branch. The If's own control inputs gate the
Switches. The node keeps its name, so `if:k` and `^if` elsewhere keep their meaning.
"""
import numpy as np

from tfg.graphdef.lowering import FunctionInliningError, Lowering
from tfg.graphdef.names import input_string
from tfg.schemas.dtypes import DType


def lower_if(graph, node, lib, chain):
    """Replace the If `node` of `graph` (see module docstring); returns the (name, chain) of
    the two branch calls, for the caller's inlining queue."""
    where = f"node {node.name!r} ({node.op})"
    data = [input_string(r.node, r.port) for r in node.data_inputs]
    if not data:
        raise FunctionInliningError(f"{where} has no condition input")
    tcond = node.get_attr("Tcond", DType.BOOL)
    if tcond != DType.BOOL:
        raise FunctionInliningError(f"{where}: a condition of type {tcond} (not bool) is not "
                                    "supported")
    tin = node.get_attr("Tin", [])
    tout = node.get_attr("Tout", [])
    if not isinstance(tin, list) or not isinstance(tout, list) or len(tin) != len(data) - 1:
        raise FunctionInliningError(f"{where}: attrs Tin/Tout do not match its {len(data) - 1} "
                                    "inputs")
    branches = {}
    for key in ("then_branch", "else_branch"):
        f = node.get_attr(key, None)
        if not getattr(f, "name", None):
            raise FunctionInliningError(f"{where} has no function attr {key!r}")
        branches[key] = f

    low = Lowering(graph, node)

    def add(base, op, inputs, attrs=None):
        return low.add(base, op, inputs, attrs).name

    pred, controls = data[0], ["^" + c for c in node.control_inputs]

    switch_pred = add("switch_pred", "Switch", [pred, pred] + controls, {"T": DType.BOOL})
    pivots = {"else_branch": add("pivot_f", "Identity", [switch_pred], {"T": DType.BOOL}),
              "then_branch": add("pivot_t", "Identity", [f"{switch_pred}:1"],
                                 {"T": DType.BOOL})}
    switches = [add(f"switch_{i}", "Switch", [x, pred] + controls, {"T": t})
                for i, (x, t) in enumerate(zip(data[1:], tin))]
    calls, done = {}, []
    for key, port, base in (("then_branch", 1, "then"), ("else_branch", 0, "else")):
        calls[key] = add(base, "PartitionedCall",
                         [input_string(s, port) for s in switches] + ["^" + pivots[key]],
                         {"f": branches[key], "Tin": list(tin), "Tout": list(tout)})
        done.append(add(f"{base}_done", "Identity", [pivots[key], "^" + calls[key]],
                        {"T": DType.BOOL}))
    executed = add("branch_executed", "Merge", done, {"T": DType.BOOL, "N": 2})
    merges = [add(f"merge_{i}", "Merge", [input_string(calls["then_branch"], i),
                                          input_string(calls["else_branch"], i)],
                  {"T": t, "N": 2})
              for i, t in enumerate(tout)]
    low.replace_with_merged(merges, executed, tout)
    return [(calls["then_branch"], chain), (calls["else_branch"], chain)]


def lower_case(graph, node, lib, chain):
    """Replace the Case/StatelessCase `node`: one predicate per branch, then as for If.

    Before: out = Case(index, a, branches=[f0, f1, f2], Tout=[float])
    After:  out/is_0 = Equal(index, 0); out/is_1 = Equal(index, 1)
            out/is_2 = LogicalNot(out/is_0 or out/is_1)     # the last branch is the default:
                                                            # an out-of-range index takes it
            per branch k: out/switch_pred_k = Switch(out/is_k, out/is_k),
            out/pivot_k = Identity(out/switch_pred_k:1), out/switch_k_i = Switch(a_i, out/is_k),
            out/branch_k = PartitionedCall(out/switch_k_i:1 ..., ^out/pivot_k, f=fk)
            out/merge_j = Merge(out/branch_0:j, out/branch_1:j, out/branch_2:j)
            out = IdentityN(out/merge_j ..., ^out/branch_executed)
    Exactly one predicate is true, so exactly one branch is live.
    """
    where = f"node {node.name!r} ({node.op})"
    data = [input_string(r.node, r.port) for r in node.data_inputs]
    tin = node.get_attr("Tin", [])
    tout = node.get_attr("Tout", [])
    funcs = node.get_attr("branches", [])
    if not data or not isinstance(tin, list) or not isinstance(tout, list) or \
            len(tin) != len(data) - 1:
        raise FunctionInliningError(f"{where}: attrs Tin/Tout do not match its inputs")
    if not isinstance(funcs, list) or not funcs or not all(getattr(f, "name", None)
                                                           for f in funcs):
        raise FunctionInliningError(f"{where} has no branch functions")
    low = Lowering(graph, node)

    def add(base, op, inputs, attrs=None):
        return low.add(base, op, inputs, attrs).name

    index, controls = data[0], ["^" + c for c in node.control_inputs]
    # Constants wait on the index's producer: inside a loop they must join its frame.
    anchor = ["^" + node.data_inputs[0].node] + controls
    preds = []
    for k in range(len(funcs) - 1):
        const = add(f"index_{k}", "Const", anchor, {"dtype": DType.INT32,
                                                    "value": np.array(k, np.int32)})
        preds.append(add(f"is_{k}", "Equal", [index, const], {"T": DType.INT32}))
    if preds:
        any_other = preds[0]
        for k, p in enumerate(preds[1:], 1):
            any_other = add(f"any_{k}", "LogicalOr", [any_other, p])
        preds.append(add(f"is_{len(funcs) - 1}", "LogicalNot", [any_other]))
    else:  # one branch: it always runs; a true predicate in the index's frame
        const = add("index_0", "Const", anchor, {"dtype": DType.BOOL, "value": np.array(True)})
        preds.append(const)
    calls, done = [], []
    for k, (f, pred) in enumerate(zip(funcs, preds)):
        switch_pred = add(f"switch_pred_{k}", "Switch", [pred, pred] + controls,
                          {"T": DType.BOOL})
        pivot = add(f"pivot_{k}", "Identity", [f"{switch_pred}:1"], {"T": DType.BOOL})
        switches = [add(f"switch_{k}_{i}", "Switch", [x, pred] + controls, {"T": t})
                    for i, (x, t) in enumerate(zip(data[1:], tin))]
        call = add(f"branch_{k}", "PartitionedCall",
                   [f"{s}:1" for s in switches] + ["^" + pivot],
                   {"f": f, "Tin": list(tin), "Tout": list(tout)})
        calls.append(call)
        done.append(add(f"branch_{k}_done", "Identity", [pivot, "^" + call], {"T": DType.BOOL}))
    executed = add("branch_executed", "Merge", done, {"T": DType.BOOL, "N": len(done)})
    merges = [add(f"merge_{j}", "Merge", [input_string(c, j) for c in calls],
                  {"T": t, "N": len(calls)})
              for j, t in enumerate(tout)]
    low.replace_with_merged(merges, executed, tout)
    return [(c, chain) for c in calls]
