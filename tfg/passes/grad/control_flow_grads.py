"""Gradients of the control-flow primitives (TensorFlow's control_flow_grad, on a GraphDef).

cond: Merge's gradient is `Switch(grad, pred)` (output b to the input from branch b); Switch's
gradient is `Merge([g_false, g_true])`, the untaken branch's gradient being zeros that are
live exactly when that branch ran, so the Merge always has one live input.

while: Exit's gradient is an Enter into the backward frame (`b_exit`); a loop Switch's is a
Merge (`b_switch`) whose second input becomes NextIteration of the body's gradient when the
Switch is reached again from the body; a loop Merge's is a Switch on the backward LoopCond;
NextIteration's is the identity; a non-constant Enter's is an Exit; a constant Enter (a loop
invariant) gets its gradient summed over the iterations by an accumulator loop
(`zeros -> Enter -> Merge -> Switch -> Add(grad) -> NextIteration`, Exit).

    Before: while/Exit_1 <- while/Switch_1 <- while/Merge_1 <- (while/Enter_1, NextIteration_1)
    After:  gradients/while/Exit_1_grad/b_exit -> b_switch Merge -> Switch(b_count LoopCond)
            -> Exit (gradient of Enter_1's input) | body gradients -> NextIteration -> b_switch
"""
from tfg.graphdef.frames import NEXT_ITERATION_OPS
from tfg.passes.grad.emitter import node_of
from tfg.passes.grad.registry import gradient, identity_gradient, no_gradient
from tfg.schemas.dtypes import DType


@gradient("Switch", "RefSwitch", fill_zeros=False)
def _switch_grad(b, op, grads):
    B = b.builder
    if op.name in B.loop_switches:
        gs = b.ctx.grad_state
        merge = gs.switch_map.get(op.name)
        if merge is not None:
            # Second visit, from the body: close the backward loop's back edge.
            g = grads[1]
            if g is None:
                # The next iteration's value does not depend on this one: zero gradient.
                live = b.op("Switch", [merge, b.ctx.pivot])
                g = b.op("ZerosLike", [b.out(live, 1)])
            nxt = b.op("NextIteration", [g])
            node = B.graph[node_of(merge)]
            node.inputs = [node.inputs[0], node_of(nxt)]
            return [None, None]
        if grads[0] is None:
            return [None, None]
        merge = b.op("Merge", [grads[0], grads[0]], name="b_switch")
        gs.switch_map[op.name] = merge
        return [merge, None]
    g = list(grads)
    for port in (0, 1):
        if g[port] is None:
            g[port] = gated_zeros(b, op, port)
    return [b.op("Merge", g, name="cond_grad"), None]


def gated_zeros(b, op, port):
    """Zeros shaped like Switch `op`'s data, live exactly when output `port` was taken."""
    B = b.builder
    if b.ctx.frame is None:
        return b.op("ZerosLike", [op.outputs[port]])
    shape = B.fwd_shape(op.inputs[0])
    gate = b.op("Switch", [shape, op.inputs[1]])
    zero = b.const(0, op.input_dtype(0))
    return b.op("Fill", [b.out(gate, port), zero])


@gradient("Merge", "RefMerge", fill_zeros=False)
def _merge_grad(b, op, grads):
    B, g = b.builder, grads[0]
    if g is None:
        return [None] * len(op.inputs)
    if op.name in B.loop_merges:
        switch = b.op("Switch", [g, b.ctx.pivot])
        return [b.out(switch, 1 if B.graph[node_of(t)].op in NEXT_ITERATION_OPS else 0)
                for t in op.inputs]
    cond = B.merge_cond.get(op.name)
    if cond is not None:
        branches = []
        for t in op.inputs:
            found = [br for c, br in B.tensor_conds(t) if c is cond]
            branches.append(found[-1] if found else None)
        if None not in branches:
            switch = b.op("Switch", [g, cond.pred], name="cond_grad")
            return [b.out(switch, br) for br in branches]
    # A Merge that closes no recognizable cond: route by the index it took.
    out = []
    for i in range(len(op.inputs)):
        taken = b.op("Equal", [op.outputs[1], b.const(i, DType.INT32)])
        out.append(b.out(b.op("Switch", [g, taken]), 1))
    return out


@gradient("Enter", "RefEnter")
def _enter_grad(b, op, grads):
    B, ctx, g = b.builder, b.ctx, grads[0]
    if ctx.grad_state is None:
        return [g]
    if op.attr("is_constant", False):
        return [accumulate(b, op, g)]
    return [B.exit(B.capture(g, ctx), ctx, f"{b.prefix}/Exit")]


def accumulate(b, op, g):
    """Sum a loop invariant's per-iteration gradient `g` over the backward loop's iterations."""
    B, ctx = b.builder, b.ctx
    init = B.zeros_like(op.inputs[0], ctx.parent, f"{b.prefix}/b_acc")
    enter = B.enter(init, ctx, False, f"{b.prefix}/b_acc")
    merge = b.op("Merge", [enter, enter], name="b_acc")
    switch = b.op("Switch", [merge, ctx.pivot])
    if B.dtype_of(op.inputs[0]) == DType.VARIANT:  # a TensorList: AddN adds lists item-wise
        add = b.op("AddN", [b.out(switch, 1), g], name="Add")
    else:
        add = b.op("AddV2", [b.out(switch, 1), g], name="Add")
    nxt = b.op("NextIteration", [add])
    node = B.graph[node_of(merge)]
    node.inputs = [node.inputs[0], node_of(nxt)]
    return B.exit(b.out(switch, 0), ctx, f"{b.prefix}/b_acc")


@gradient("Exit", "RefExit")
def _exit_grad(b, op, grads):
    B, ctx = b.builder, b.ctx
    return [B.enter(B.capture(grads[0], ctx.parent), ctx, False, f"{b.prefix}/b_exit")]


identity_gradient("NextIteration", "RefNextIteration")
no_gradient("LoopCond", "ControlTrigger")
