"""The machinery of a while loop's gradient (TensorFlow's GradLoopState), on a GraphDef.

For a forward loop frame F being differentiated:

- a forward counter is added to F: `Const 0 -> Enter -> Merge -> Switch(pivot) -> Add 1 ->
  NextIteration`, whose Exit is N, the number of iterations that ran;
- the backward loop (frame `gradients/<F>`) counts N down: `Enter(N) -> Merge ->
  GreaterEqual(m, 1) -> LoopCond -> Switch -> Sub 1 -> NextIteration`, its `Exit` at zero;
- a forward value v that the backward loop needs is pushed every iteration on a stack made
  outside the loop (`StackV2`, entered as a constant), by a `StackPushV2` ordered after the
  counter's increment, and popped by a `StackPopV2` in the backward loop (ordered after the
  backward counter, and before its next iteration through the `b_sync` ControlTrigger);
  a value inside a cond is pushed only when its branch ran, and popped behind a Switch on the
  saved predicate; loop invariants are entered, constants recreated;
- a nested loop's N is itself pushed on the outer loop's stack.

    Before: while/Identity_1 -> while/mul (forward, frame while/while_context)
    After:  ... -> StackPushV2(f_acc, while/Identity_1, ^f_count add)   (forward)
            StackPopV2(f_acc, ^b_count sub) -> gradients/while/mul_grad/Mul (backward)
"""
import numpy as np

from tfg.passes.grad.emitter import Ctx, node_of
from tfg.schemas.dtypes import DType
from tfg.schemas.ops import control_flow_names


class GradLoopState:
    """Counters, stacks and the backward frame for one forward loop frame."""

    def __init__(self, builder, frame, outer):
        self.b = builder
        self.frame = frame
        self.outer = outer
        self.history = {}  # forward tensor -> its value in the backward frame
        self.switch_map = {}  # forward loop Switch -> backward Merge (b_switch)
        self.pending_exits = len(frame.exits)
        self.ready_exits = []
        self.forward_sync = None
        self.grad_sync = None
        self._entered_stacks = {}
        self._add_forward_counter()
        self._add_backward_counter()

    @property
    def grad_ctx(self):
        return self.ctx

    # --- counters ---------------------------------------------------------------------------
    def _add_forward_counter(self):
        b, f = self.b, self.frame
        scope = b.scope
        parent = f.parent
        enter_node = b.graph[f.enters[0]]
        conds = [c for c in b.info.cond_branch_of(enter_node.name) if c[0].frame is parent]
        control = []
        if self.outer is not None:
            # The i-th run of an inner loop pushes before the (i+1)-th (TensorFlow orders the
            # inner counter after the outer one's increment).
            control.append(node_of(self.outer.forward_add))
        if conds:
            # A loop inside a cond branch must not start its counter when the branch is dead.
            data = enter_node.data_inputs[0]
            gate = b.fwd_node("Identity", [f"{data.node}:{data.port}"], {},
                              f"{scope}/f_count/gate", parent, conds)
            control.append(gate)
        zero = b.fwd_node("Const", [], {"dtype": DType.INT32,
                                        "value": np.asarray(0, np.int32)},
                          f"{scope}/f_count", parent, conds, control)
        enter = b.fwd_node("Enter", [zero], {
            "frame_name": f.name.encode(), "is_constant": False,
            "parallel_iterations": f.parallel_iterations}, f"{scope}/f_count", f, ())
        merge = b.fwd_node("Merge", [enter, enter], {}, f"{scope}/Merge", f, ())
        switch = b.fwd_node("Switch", [merge, f.pivot], {}, f"{scope}/Switch", f, ())
        one = b.fwd_node("Const", [], {"dtype": DType.INT32, "value": np.asarray(1, np.int32)},
                         f"{scope}/Add/y", f, (), [self._body_pivot()])
        add = b.fwd_node("AddV2", [f"{switch}:1", one], {}, f"{scope}/Add", f, ())
        nxt = b.fwd_node("NextIteration", [add], {}, f"{scope}/NextIteration", f, ())
        b.graph[merge].inputs = [enter, nxt]
        exit_ = b.fwd_node("Exit", [f"{switch}:0"], {}, f"{scope}/f_count", f, ())
        self.forward_add = f"{add}:0"
        self.forward_index = nxt
        self.total_iterations = f"{exit_}:0"
        # Exits are in the loop's frame; their outputs are in the parent's.
        b.fwd_conds[exit_] = tuple(conds)

    def _body_pivot(self):
        """A node that runs once per iteration of the body (reads a loop Switch's true output)."""
        b, f = self.b, self.frame
        for var in f.loop_vars:
            if var.switch is None:
                continue
            for c, _ in b.graph.consumers(var.switch, port=1):
                if c.op == "Identity":
                    return c.name
        var = next(v for v in f.loop_vars if v.switch is not None)
        return b.fwd_node("Identity", [f"{var.switch}:1"], {}, f"{b.scope}/pivot_for_body", f, ())

    def _add_backward_counter(self):
        b, f = self.b, self.frame
        scope = b.scope
        parent_ctx = self.outer.ctx if self.outer is not None else b.root
        if self.outer is not None:
            stack = self.outer.add_forward_accumulator(self.total_iterations)
            count = self.outer.add_backprop_accumulated_value(stack, self.total_iterations)
        else:
            count = self.total_iterations
        self.ctx = ctx = Ctx(f"{scope}/{f.name}", parent_ctx, self, f.parallel_iterations)
        one = b.new_node(parent_ctx, "Const", [], {
            "dtype": DType.INT32, "value": np.asarray(1, np.int32)}, f"{scope}/b_count")
        enter = b.enter(b.capture(count, parent_ctx), ctx, False, f"{scope}/b_count")
        merge = b.new_node(ctx, "Merge", [enter, enter], {}, f"{scope}/Merge")
        one_in = b.capture(f"{one}:0", ctx)
        ge = b.new_node(ctx, "GreaterEqual", [f"{merge}:0", one_in], {},
                        f"{scope}/GreaterEqual")
        pivot = b.new_node(ctx, "LoopCond", [ge], {}, f"{scope}/b_count")
        switch = b.new_node(ctx, "Switch", [f"{merge}:0", pivot], {}, f"{scope}/Switch")
        index = b.new_node(ctx, "Sub", [f"{switch}:1", one_in], {}, f"{scope}/Sub")
        nxt = b.new_node(ctx, "NextIteration", [index], {}, f"{scope}/NextIteration")
        b.graph[merge].inputs = [enter, nxt]
        exit_ = b.exit(f"{switch}:0", ctx, f"{scope}/b_count")
        ctx.pivot = f"{pivot}:0"
        ctx.control_pivot = index
        self.grad_index = nxt
        if self.outer is not None:
            # The pops of the i-th run of the inner backward loop come before the (i+1)-th's.
            self.outer.sync_backward(node_of(exit_))

    # --- ordering -----------------------------------------------------------------------------
    def sync_forward(self, push, in_cond):
        """Make the forward loop's next iteration wait for `push`."""
        if not in_cond:
            self.b.graph[self.forward_index].add_control_input(push)
            return
        if self.forward_sync is None:
            # A push in a cond branch may be dead; a ControlTrigger never is.
            self.forward_sync = self.b.fwd_node("ControlTrigger", [], {},
                                                f"{self.b.scope}/f_sync", self.frame, ())
            self.b.graph[self.forward_index].add_control_input(self.forward_sync)
        self.b.graph[self.forward_sync].add_control_input(push)

    def sync_backward(self, node):
        """Make the backward loop's next iteration wait for `node` (a pop, an inner Exit)."""
        if self.grad_sync is None:
            self.grad_sync = self.b.graph.unique_name(f"{self.b.scope}/b_sync")
            self.b.graph.add_node(self.grad_sync, "ControlTrigger", [])
            self.b.bwd[self.grad_sync] = self.ctx
            self.b.graph[self.grad_index].add_control_input(self.grad_sync)
        self.b.graph[self.grad_sync].add_control_input(node)

    # --- stacks -------------------------------------------------------------------------------
    def add_forward_accumulator(self, value):
        """Push `value` (a tensor of this loop's frame) every iteration; returns the stack."""
        b, f = self.b, self.frame
        scope = f"{b.scope}/{node_of(value)}"
        size = b.fwd_node("Const", [], {"dtype": DType.INT32, "value": np.asarray(-1, np.int32)},
                          f"{scope}/Const", None, ())
        stack = b.fwd_node("StackV2", [size], {"elem_type": b.dtype_of(value)},
                           f"{scope}/f_acc", None, ())
        handle = self._enter_forward(f"{stack}:0", f)
        conds = b.conds_in_frame(value, f)
        push = b.fwd_node("StackPushV2", [handle, value], {}, f"{scope}/StackPushV2", f, conds,
                          [node_of(self.forward_add)])
        self.sync_forward(push, bool(conds))
        return f"{stack}:0"

    def _enter_forward(self, t, frame):
        """Enter root tensor t into forward frame `frame` through every enclosing frame."""
        if frame is None:
            return t
        key = (t, frame.name)
        if key not in self._entered_stacks:
            outer = self._enter_forward(t, frame.parent)
            enter = self.b.fwd_node("Enter", [outer], {
                "frame_name": frame.name.encode(), "is_constant": True,
                "parallel_iterations": frame.parallel_iterations},
                f"{node_of(t)}/Enter", frame, ())
            self._entered_stacks[key] = f"{enter}:0"
        return self._entered_stacks[key]

    def add_backprop_accumulated_value(self, stack, value):
        """Pop `value`'s history from `stack` in the backward loop (guarded if in a cond)."""
        b, ctx = self.b, self.ctx
        scope = f"{b.scope}/{node_of(value)}"
        handle = b.capture(stack, ctx)
        conds = b.conds_in_frame(value, self.frame)
        if conds:
            cond, branch = conds[-1]
            pred = self.real_value(cond.pred)
            switch = b.new_node(ctx, "Switch", [handle, pred], {}, f"{scope}/Switch")
            handle = f"{switch}:{branch}"
        pop = b.new_node(ctx, "StackPopV2", [handle], {"elem_type": b.dtype_of(value)},
                         f"{scope}/StackPopV2")
        self.sync_backward(pop)
        return f"{pop}:0"

    def real_value(self, value):
        """What forward tensor `value` (of this loop's frame) is in the backward loop."""
        value = f"{node_of(value)}:{value.rsplit(':', 1)[1]}" if ":" in value else f"{value}:0"
        real = self.history.get(value)
        if real is not None:
            return real
        b = self.b
        cur, state = value, self
        stack = None
        while True:
            enter = b.loop_constant_enter(cur)
            if enter is not None:
                src = enter.data_inputs[0]
                cur, state = f"{src.node}:{src.port}", state.outer
                if state is None:
                    real = b.capture(cur, self.ctx)
                    break
                continue
            node = b.graph[node_of(cur)]
            if node.op == "Const":
                attrs = {"dtype": node.get_attr("dtype"), "value": node.get_attr("value")}
                real = f"{b.new_node(self.ctx, 'Const', [], attrs, f'{b.scope}/{node.name}')}:0"
                break
            stack = state.add_forward_accumulator(cur)
            break
        if real is None:
            real = state.add_backprop_accumulated_value(stack, cur)
            if state is not self:
                real = b.capture(real, self.ctx)
        self.history[value] = real
        return real


# What a loop exit's value passes through unchanged on its way from the loop variable.
_PASS_THROUGH = (control_flow_names("exit", "switch", "merge", "enter")
                 | frozenset({"Identity", "RefIdentity"}))


def loop_var_zeros(b, t, ctx, name):
    """The zero gradient of loop exit `t` that received none, so that the loop variable's
    body gradients still have a backward loop to flow around: zeros for a float, a list of
    zeros for a TensorList (Keras' lowered loops carry their input list through), and for a
    resource handle carried through (the variables of a lowered `While`) zeros of the
    variable's value when that variable is differentiated; None when t gets no gradient."""
    dt = b.dtype_of(t)
    if dt is None:
        return None
    if dt.is_differentiable or dt == DType.VARIANT:
        return b.zeros_like(t, ctx, name)
    if dt != DType.RESOURCE:
        return None
    var = _variable_of(b, t)
    if var is None or var.name not in getattr(b, "x_nodes", ()):
        return None
    read = b.new_node(ctx, "ReadVariableOp", [t], {"dtype": var.get_attr("dtype")},
                      f"{name}/read")
    return f"{b.new_node(ctx, 'ZerosLike', [f'{read}:0'], {}, f'{name}/zeros')}:0"


def _variable_of(b, t, limit=64):
    """The VarHandleOp a resource tensor is carried from (through loop primitives, Identity
    and IdentityN), or None."""
    node, port = b.graph.get(node_of(t)), int(t.rsplit(":", 1)[1])
    for _ in range(limit):
        if node is None:
            return None
        if node.op == "VarHandleOp":
            return node
        data = node.data_inputs
        if node.op == "IdentityN" and port < len(data):
            ref = data[port]
        elif node.op in _PASS_THROUGH and data:
            ref = data[0]
        else:
            return None
        node, port = b.graph.get(ref.node), ref.port
    return None
