"""Switch with a constant predicate: the untaken branch can never run, so it is deleted, the
taken branch reads the Switch's input directly, and a Merge left with one live input becomes an
Identity (its index output a Const). Grappler leaves these branches in place.

    before: p = Const true; s = Switch(x, p); a = Neg(s:0); b = Exp(s:1); m = Merge(a, b)
    after:  b = Exp(x); m = Identity(b)            (a is gone; m:1 would be Const 1)

Only plain conds are rewritten: a dead region that reaches a loop (Enter/Exit/NextIteration)
or a preserved node is left alone.
"""
import numpy as np

from tfg.graphdef.names import TensorRef, input_string
from tfg.passes.rewrite import SWITCH_OPS
from tfg.schemas.dtypes import DType
from tfg.schemas.ops import control_flow_names

_MERGES = control_flow_names("merge")
_LOOP_OPS = control_flow_names("enter", "exit", "next_iteration", "loop_cond")


def fold_constant_switches(ctx):
    changed = False
    for node in list(ctx.graph):
        if node.op in SWITCH_OPS and ctx.graph.get(node.name) is node:
            changed |= _fold_switch(ctx, node)
    return changed


def _fold_switch(ctx, switch):
    if ctx.preserved(switch.name) or len(switch.data_inputs) != 2:
        return False
    data, pred = switch.data_inputs
    v = ctx.const_value(pred)
    if v is None or v.size != 1:
        return False
    live = 1 if bool(v.ravel()[0]) else 0
    dead_port = 1 - live
    region = _dead_region(ctx, switch, dead_port)
    if region is None:
        return False
    dead, merges = region
    # Merges keep their live inputs; check every one can be simplified before editing.
    plans = {}
    for m in merges:
        live_idx = [i for i, r in enumerate(m.data_inputs)
                    if not _is_dead(r, dead, switch.name, dead_port)]
        if len(live_idx) != 1 and ctx.consumers(m.name, 1):
            return False  # the index output would change meaning
        plans[m.name] = live_idx
    for m in merges:
        _shrink_merge(ctx, m, plans[m.name], dead)
    for name in dead:
        node = ctx.graph.get(name)
        if node is not None:
            for consumer in ctx.control_consumers(name):
                if consumer.name not in dead:
                    ctx.set_inputs(consumer, [s for s in consumer.inputs if s != "^" + name])
    for name in dead:
        node = ctx.graph.get(name)
        if node is not None:
            ctx.remove(node)
    ctx.reroute(TensorRef(switch.name, live), data)
    if not ctx.has_consumers(switch.name):
        ctx.remove(switch)
        ctx.remove_if_dead(pred.node)
    return True


def _is_dead(ref, dead, switch, dead_port):
    return ref.node in dead or (ref.node == switch and ref.port == dead_port)


def _dead_region(ctx, switch, dead_port):
    """(dead node names, Merges fed by them) or None when the region is not a plain branch."""
    dead, merges = set(), {}
    queue = [c for c, _ in ctx.consumers(switch.name, dead_port)]
    while True:
        while queue:
            node = queue.pop()
            if node.name in dead:
                continue
            if node.op in _MERGES:
                merges[node.name] = node
                continue
            if node.op in _LOOP_OPS or ctx.preserved(node.name):
                return None
            dead.add(node.name)
            queue.extend(c for c, _ in ctx.consumers(node.name, include_control=True))
        grown = False
        for m in list(merges.values()):
            if m.name not in dead and all(_is_dead(r, dead, switch.name, dead_port)
                                          for r in m.data_inputs):
                if ctx.preserved(m.name) or any(r.node == m.name for r in m.data_inputs):
                    return None
                del merges[m.name]
                dead.add(m.name)
                queue.extend(c for c, _ in ctx.consumers(m.name, include_control=True))
                grown = True
        if not grown:
            break
    return dead, list(merges.values())


def _shrink_merge(ctx, merge, live_idx, dead):
    refs = merge.data_inputs
    ctrls = ["^" + c for c in merge.control_inputs if c not in dead]
    if len(live_idx) == 1:
        i = live_idx[0]
        if ctx.consumers(merge.name, 1):
            idx = ctx.new_const(ctx.new_name(f"ConstantFolding/{merge.name}_index"), np.int32(i),
                                DType.INT32, merge.device, anchors=[refs[i]])
            ctx.reroute(TensorRef(merge.name, 1), TensorRef(idx.name, 0))
        attrs = {"T": merge.get_attr("T")} if merge.has_attr("T") else {}
        ctx.morph(merge, "Identity", [input_string(refs[i].node, refs[i].port)] + ctrls, attrs)
    else:
        keep = [refs[i] for i in live_idx]
        ctx.set_inputs(merge, [input_string(r.node, r.port) for r in keep] + ctrls)
        merge.set_attr("N", len(keep))
