"""Control flow v2 `While` / `StatelessWhile` lowered to a v1 loop (as TensorFlow's LowerWhileOp).

    Before: out = StatelessWhile(i, acc, T=[int32, float], cond=c, body=b)
    After:  out/enter_k = Enter(input_k, frame_name="out", parallel_iterations=P)
            out/merge_k = Merge(out/enter_k, out/next_iteration_k)
            out/cond = PartitionedCall(out/merge_0, out/merge_1, ^out/merge_0, f=c)
            out/loop_cond = LoopCond(out/cond)
            out/switch_k = Switch(out/merge_k, out/loop_cond)
            out/exit_k = Exit(out/switch_k)              # output_false: the loop is done
            out/body = PartitionedCall(out/switch_0:1, out/switch_1:1, ^out/pivot, f=b)
            out/next_iteration_k = NextIteration(out/body:k)
            out = IdentityN(out/exit_0, out/exit_1)

The cond and body calls are then inlined (tfg.graphdef.functions); their control input puts
every node of the inlined functions, constants included, inside the loop's frame. The frame
is named after the While node (unique in the graph); the While's control inputs gate its
Enters. Loop variables of any type (resource handles too) travel through Enter/Exit.
"""
from tfg.graphdef.graph import Node
from tfg.graphdef.lowering import FunctionInliningError, Lowering
from tfg.graphdef.names import input_string
from tfg.schemas.dtypes import DType


def lower_while(graph, node, lib, chain):
    """Replace the While `node` of `graph` (see module docstring); returns the (name, chain)
    of the cond and body calls, for the caller's inlining queue."""
    where = f"node {node.name!r} ({node.op})"
    data = [input_string(r.node, r.port) for r in node.data_inputs]
    types = node.get_attr("T", [])
    if not isinstance(types, list) or len(types) != len(data) or not data:
        raise FunctionInliningError(f"{where}: attr T does not match its {len(data)} inputs")
    funcs = {}
    for key in ("cond", "body"):
        f = node.get_attr(key, None)
        if not getattr(f, "name", None):
            raise FunctionInliningError(f"{where} has no function attr {key!r}")
        funcs[key] = f
    cond_def = lib.get(funcs["cond"].name)
    if cond_def is not None and [a.type for a in cond_def.signature.output_arg] != \
            [DType.BOOL.value]:
        raise FunctionInliningError(f"{where}: cond function {funcs['cond'].name!r} must "
                                    "return one bool")
    parallel = node.get_attr("parallel_iterations", 10)
    name, device = node.name, node.device
    low = Lowering(graph, node)
    add = low.add

    controls = ["^" + c for c in node.control_inputs]
    frame = name.encode()
    enters = [add(f"enter_{k}", "Enter", [x] + controls,
                  {"T": t, "frame_name": frame, "is_constant": False,
                   "parallel_iterations": parallel})
              for k, (x, t) in enumerate(zip(data, types))]
    merges = [add(f"merge_{k}", "Merge", [e.name, e.name], {"T": t, "N": 2})
              for k, (e, t) in enumerate(zip(enters, types))]  # input 1: set below
    cond = add("cond", "PartitionedCall", [m.name for m in merges] + ["^" + merges[0].name],
               {"f": funcs["cond"], "Tin": list(types), "Tout": [DType.BOOL]})
    loop_cond = add("loop_cond", "LoopCond", [cond.name])
    switches = [add(f"switch_{k}", "Switch", [m.name, loop_cond.name], {"T": t})
                for k, (m, t) in enumerate(zip(merges, types))]
    exits = [add(f"exit_{k}", "Exit", [s.name], {"T": t})
             for k, (s, t) in enumerate(zip(switches, types))]
    pivot = add("pivot", "Identity", [input_string(switches[0].name, 1)], {"T": types[0]})
    body = add("body", "PartitionedCall",
               [input_string(s.name, 1) for s in switches] + ["^" + pivot.name],
               {"f": funcs["body"], "Tin": list(types), "Tout": list(types)})
    for k, (m, t) in enumerate(zip(merges, types)):
        nxt = add(f"next_iteration_{k}", "NextIteration", [input_string(body.name, k)],
                  {"T": t})
        m.inputs = [enters[k].name, nxt.name]
    result = Node(name, "IdentityN", [e.name for e in exits], device)
    result.set_attr("T", list(types), "list(type)")
    low.replace_with(result)
    return [(cond.name, chain), (body.name, chain)]
