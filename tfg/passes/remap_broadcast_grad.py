"""A broadcasting op's gradient, reduced to an operand's shape at run time, as one node:
Reshape(Sum(g, BroadcastGradientArgs(s0, s1)[i]), s_i) -> _TfgBroadcastGradSum(g, s_i,
s_other), for tfg's Session only (a remap rule, opts.extra["tfg_kernels"]).

    before: r = BroadcastGradientArgs(Shape(x), Shape(y))
            gx = Reshape(Sum(g, r:0), Shape(x));  gy = Reshape(Sum(g, r:1), Shape(y))
    after:  gx = _TfgBroadcastGradSum(g, Shape(x), Shape(y))
            gy = _TfgBroadcastGradSum(g, Shape(y), Shape(x))

Why: `tfg grad` and TensorFlow's gradients emit this where an operand's shape is not fully
known while the graph is built (a None batch dimension): seven calls a broadcasting op
(two Shapes, the BroadcastGradientArgs, two Sums, two Reshapes), where Grappler folds them
away from its symbolic shapes. In a loop they run every iteration: an LSTM's gradient loop
over 20 steps with an unknown batch ran in 1.9x the time of the same loop with static shapes
(docs/performance.md, stop 43). The new node computes what the three did (the same axes, the
same Sum, the same errors) and, where the two shapes are equal (no broadcast: the usual
case), returns g itself, as a Sum over no axes and a Reshape to its own shape do.

The node keeps the Reshape's name, so a fetch of it still works; the Sum must be read by the
Reshape alone (not kept, keep_dims false), and the Reshape's shape must be the
BroadcastGradientArgs's own operand. The Sum, and the BroadcastGradientArgs once both its
outputs are taken, are removed.
"""


def broadcast_grad_sum(ctx, node, total, shape):
    """Reshape(Sum(g, BroadcastGradientArgs(...)[i]), shape) -> _TfgBroadcastGradSum (see the
    module docstring)."""
    if not ctx.opts.extra.get("tfg_kernels", False) or total.op != "Sum":
        return False
    if ctx.preserved(total.name) or total.get_attr("keep_dims", False):
        return False
    if len(total.data_inputs) != 2 or len(node.data_inputs) != 2:
        return False
    axes = total.data_inputs[1]
    args = ctx.graph.get(axes.node)
    if args is None or args.op != "BroadcastGradientArgs" or axes.port not in (0, 1):
        return False
    operands = args.data_inputs
    if len(operands) != 2 or operands[axes.port] != shape:
        return False
    nodes = (node, total, args)
    if any(n.control_inputs for n in nodes) or len({n.device for n in nodes}) != 1:
        return False
    if ctx.control_consumers(total.name) or len(ctx.consumers(total.name)) != 1:
        return False
    attrs = {"T": total.get_attr("T"), "Tshape": args.get_attr("T")}
    grad, other = total.data_inputs[0], operands[1 - axes.port]
    ctx.morph(node, "_TfgBroadcastGradSum", [grad, shape, other], attrs)
    ctx.remove_if_dead(total.name)
    return True
