"""The loop optimizer (Grappler's LoopOptimizer, the parts that remove work):

- a stack that is pushed but never popped: each StackPushV2 becomes Identity(value, ^handle)
      before: h = StackV2(n); p = StackPushV2(h, x)      after: p = Identity(x, ^h)
- a while loop whose condition is constant false at iteration 0 runs zero times: the whole
  frame goes, each Exit becomes Identity of the value that entered its loop variable
      before: e = Enter(x); m = Merge(e, ni); c = LoopCond(Less(Enter(5), Enter(3)));
              s = Switch(m, c); out = Exit(s:0); ...body(s:1)... ni = NextIteration(...)
      after:  out = Identity(x)
- the dead branch of a constant-predicate Switch is removed and a Merge left with one live
  input becomes an Identity (shared with constant folding).

Loops are only removed when that is provable: every loop variable is Merge(Enter, NextIteration)
read by a Switch on the LoopCond, the condition evaluates from constants, the frame holds no
preserved node and no stateful op outside the body, and nothing outside reads the frame except
through its Exits.
"""
import numpy as np

from tfg.errors import TfgError
from tfg.graphdef.names import TensorRef, input_string
from tfg.passes.constfold.fold import evaluate, output_nbytes, too_large
from tfg.passes.constfold.switch import fold_constant_switches
from tfg.passes.manager import register_pass
from tfg.passes.rewrite import FRAME_OPS, RewriteContext, SWITCH_OPS
from tfg.schemas.ops import control_flow_names, get_op, has_op

_STACKS = frozenset({"StackV2", "Stack"})
_ENTERS = control_flow_names("enter")
_EXITS = control_flow_names("exit")
_NEXTS = control_flow_names("next_iteration")
_MERGES = control_flow_names("merge")
_FORWARD = (_ENTERS | _EXITS | _NEXTS | _MERGES | SWITCH_OPS
            | frozenset({"Identity", "RefIdentity"}))


@register_pass("loop", "Loop optimizer: StackPushV2 without a pop -> Identity, remove while loops "
               "that provably run zero times, dead branches of constant-predicate Switches.")
def loop_optimizer(graph, opts):
    """Run the loop rewrites once each; returns whether anything changed.

    >>> optimize(g, passes=["loop"])   # before: Exit(Switch(Merge(Enter(x), ..), false))
    ...                                # after:  Identity(x)
    """
    ctx = RewriteContext(graph, opts, stage="LoopOptimizer")
    changed = remove_stack_pushes(ctx)
    if ctx.has_frames:
        changed |= remove_zero_iteration_loops(ctx)
    changed |= fold_constant_switches(ctx)
    return changed


# --- stacks ----------------------------------------------------------------------------------
def remove_stack_pushes(ctx):
    """StackPushV2 on a stack no StackPopV2 reads -> Identity(value, ^handle)."""
    changed = False
    for stack in [n for n in ctx.graph if n.op in _STACKS]:
        pushes = _pushes_without_pop(ctx, stack)
        for push in pushes or ():
            if ctx.preserved(push.name) and push.name in ctx.opts.keep:
                continue  # a kept push is a target: the user wants the push itself
            handle, value = push.inputs[0], push.inputs[1]
            ctrls = [s for s in push.inputs[2:] if s.startswith("^")]
            t = push.get_attr("T")
            handle_node = handle.split(":")[0]
            ctx.morph(push, "Identity", [value, "^" + handle_node] + ctrls, {"T": t})
            changed = True
    return changed


def _pushes_without_pop(ctx, stack):
    """The StackPushV2 nodes on `stack`'s handle, or None if anything may read the stack."""
    pushes, seen, queue = [], {stack.name}, [stack]
    while queue:
        node = queue.pop()
        for consumer, idx in ctx.consumers(node.name):
            if consumer.name in seen:
                continue
            seen.add(consumer.name)
            if consumer.op == "StackPushV2" and idx == 0:
                pushes.append(consumer)
            elif consumer.op == "StackCloseV2":
                continue
            elif consumer.op in _FORWARD:
                queue.append(consumer)
            else:
                return None  # a pop, or an op we cannot see through
    return pushes


# --- zero-iteration loops --------------------------------------------------------------------
def remove_zero_iteration_loops(ctx):
    changed = False
    for cond in [n for n in ctx.graph if n.op == "LoopCond"]:
        if ctx.graph.get(cond.name) is cond and _remove_if_never_runs(ctx, cond):
            changed = True
    return changed


def _remove_if_never_runs(ctx, cond):
    switches = [c for c, i in ctx.consumers(cond.name) if c.op in SWITCH_OPS and i == 1]
    if not switches or len(switches) != len(ctx.consumers(cond.name, include_control=True)):
        return False
    exits, frame = {}, None
    for sw in switches:
        merge = ctx.graph.get(sw.data_inputs[0].node)
        if merge is None or merge.op not in _MERGES or len(merge.data_inputs) != 2:
            return False
        enter = _entering(ctx, merge)
        if enter is None:
            return False
        name = enter.get_attr("frame_name", b"")
        if frame not in (None, name):
            return False
        frame = name
        for consumer, idx in ctx.consumers(sw.name, 0):
            if consumer.op not in _EXITS:
                return False
            exits[consumer.name] = enter.data_inputs[0]
    value = _eval_iteration0(ctx, cond.data_inputs[0], frame, {})
    if value is None or value.size != 1 or bool(value.ravel()[0]):
        return False
    region = _frame_region(ctx, frame, exits)
    if region is None:
        return False
    for name, entered in exits.items():
        node = ctx.graph[name]
        attrs = {"T": node.get_attr("T")} if node.has_attr("T") else {}
        ctx.morph(node, "Identity", [input_string(entered.node, entered.port)], attrs)
    for name in region:
        for consumer in ctx.control_consumers(name):
            if consumer.name not in region:
                ctx.set_inputs(consumer, [s for s in consumer.inputs if s != "^" + name])
    for name in region:
        ctx.remove(ctx.graph[name])
    return True


def _entering(ctx, merge):
    """The Enter feeding a loop variable's Merge (the other input is a NextIteration)."""
    srcs = [ctx.graph.get(r.node) for r in merge.data_inputs]
    if any(s is None for s in srcs):
        return None
    ops = sorted(s.op in _ENTERS for s in srcs)
    nexts = [s for s in srcs if s.op in _NEXTS]
    if ops != [False, True] or len(nexts) != 1:
        return None
    return next(s for s in srcs if s.op in _ENTERS)


def _eval_iteration0(ctx, ref, frame, memo, depth=0):
    """The value of `ref` in the first iteration of `frame` from constants only, else None."""
    if depth > 50:
        return None
    key = (ref.node, ref.port)
    if key in memo:
        return memo[key]
    memo[key] = None  # cycle guard
    node = ctx.graph.get(ref.node)
    result = None
    if node is None or node.name in ctx.opts.feeds:
        return None
    const = ctx.const_value(ref)
    if const is not None:
        result = const
    elif node.op in _ENTERS and node.get_attr("frame_name", b"") == frame:
        result = ctx.const_value(node.data_inputs[0])
    elif node.op in _MERGES:
        enter = _entering(ctx, node)
        if enter is not None and enter.get_attr("frame_name", b"") == frame:
            result = _eval_iteration0(ctx, TensorRef(enter.name, 0), frame, memo, depth + 1)
    elif node.op in ("Identity", "LoopCond") or node.op not in FRAME_OPS:
        result = _eval_op(ctx, node, ref.port, frame, memo, depth)
    memo[key] = result
    return result


def _eval_op(ctx, node, port, frame, memo, depth):
    if not has_op(node.op) or get_op(node.op).stateful:
        return None
    args = []
    for r in node.data_inputs:
        v = _eval_iteration0(ctx, r, frame, memo, depth + 1)
        if v is None:
            return None
        args.append(v)
    if node.op in ("Identity", "LoopCond"):
        return args[0]
    if too_large(output_nbytes(node, args), sum(np.asarray(a).nbytes for a in args)):
        return None  # not worth allocating to prove a loop never runs
    try:
        outs = evaluate(node, args)
    except (TfgError, Exception):  # noqa: BLE001 - anything unexpected: not provable
        return None
    return outs[port] if port < len(outs) else None


def _frame_region(ctx, frame, exits):
    """Names of every node of the loop (exits excluded), or None if it must stay."""
    enters = [n for n in ctx.graph if n.op in _ENTERS and n.get_attr("frame_name", b"") == frame]
    region, queue = set(), list(enters)
    while queue:
        node = queue.pop()
        if node.name in region or node.name in exits:
            continue
        if ctx.preserved(node.name) or node.name in ctx.opts.feeds:
            return None
        region.add(node.name)
        queue.extend(c for c, _ in ctx.consumers(node.name, include_control=True))
    body = _downstream_of_body(ctx, region)
    for name in region:
        node = ctx.graph[name]
        if name in body:
            continue  # the body never runs
        if not has_op(node.op) or (get_op(node.op).stateful and node.op not in FRAME_OPS):
            return None
    for name in exits:
        if any(c.name in region for c in ctx.control_consumers(name)):
            return None
    return region


def _downstream_of_body(ctx, region):
    """Region nodes reachable from a loop Switch's true output (the body)."""
    seen, queue = set(), []
    for name in region:
        node = ctx.graph[name]
        if node.op in SWITCH_OPS:
            queue.extend(c for c, _ in ctx.consumers(name, 1))
    while queue:
        node = queue.pop()
        if node.name in seen or node.name not in region:
            continue
        seen.add(node.name)
        queue.extend(c for c, _ in ctx.consumers(node.name, include_control=True))
    return seen
