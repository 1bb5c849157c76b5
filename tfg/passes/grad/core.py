"""Reverse-mode differentiation of a GraphDef: `grad(graph, ys, xs)`.

The backward graph is built the way TensorFlow's `tf.gradients` builds it: find the ops
between xs and ys, give each a pending count (how many of its consumers on the path still have
to send their gradient back), and visit ops in reverse topological order from ys, summing the
partial gradients of each output with AddN and calling the op's registered gradient function.
While loops get counters, stacks and a backward loop (loops.py); an op is visited in the
backward frame of the loop it runs in. New nodes go under the `gradients/` name scope; the
gradient of each x is exposed as the Identity `<prefix>/<node>` (`<prefix>/<node>_<port>` for
an output port p > 0).

The input graph is validated first (tfg.graphdef.validate; unknown ops are allowed off the
path): a malformed graph is a GraphValidationError naming the node, never a crash inside a
gradient rule. Shapes known from shape inference make shapes, reduction shapes and broadcast
axes constants, as TensorFlow's static-shape fast paths do; the partials that lead to no x
(a loss's labels, a constant operand) are pruned at the end, so the graph holds what
tf.gradients would build.

    >>> g2 = grad(g, ys=["loss"], xs=["w1", "b1"])
    >>> [n.name for n in g2 if n.name.startswith("grad/")]
    ['grad/w1', 'grad/b1']
"""
import collections
import warnings

import numpy as np

from tfg.errors import GraphValidationError, TfgError, TfgInputError, UnknownOpError
from tfg.graphdef import frames
from tfg.graphdef.canonical import canonicalize
from tfg.graphdef.infer import infer
from tfg.graphdef.names import parse_input, parse_tensor
from tfg.graphdef.validate import validate
from tfg.passes.grad.emitter import Ctx, EXIT_OPS, NodeFactory, OpView, Scope, canon, node_of
from tfg.passes.grad.loops import GradLoopState, loop_var_zeros
from tfg.passes.grad.registry import get_gradient
from tfg.passes.grad.training import add_training
from tfg.schemas.dtypes import DType
from tfg.schemas.ops import has_op


class GradientWarning(UserWarning):
    """An x that the ys do not depend on (its gradient is zeros)."""


class Builder(NodeFactory):
    """State of one gradient construction: the graph, its control flow, partial gradients."""

    def __init__(self, graph, info, scope):
        self.graph = graph
        self.info = info
        self.scope = scope
        self.root = Ctx()
        self.bwd = {}
        self.fwd_frames = {}
        self.fwd_conds = {}
        self._dtypes = {}
        self._shapes = {}
        self.switch_cond = {s: c for c in info.conds for s in c.switches}
        self.merge_cond = {m: c for c in info.conds for m in c.merges}
        self.loop_switches = {s for f in info.frames.values() for s in f.switches}
        self.loop_merges = {m for f in info.frames.values() for m in f.merges}
        self.loop_exits = {v.switch: v.exit for f in info.frames.values() for v in f.loop_vars}
        self.grad_states = {}
        self.grads = collections.defaultdict(list)
        self.forward = graph.copy()
        self._infer = None

    # --- contexts -----------------------------------------------------------------------------
    def grad_state(self, frame):
        gs = self.grad_states.get(frame.name)
        if gs is None:
            outer = self.grad_state(frame.parent) if frame.parent is not None else None
            gs = self.grad_states[frame.name] = GradLoopState(self, frame, outer)
        return gs

    def ctx_for(self, frame):
        return self.root if frame is None else self.grad_state(frame).ctx

    # --- forward helpers ----------------------------------------------------------------------
    def fwd_shape(self, t):
        """A forward Shape of t, computed where t (or the invariant it aliases) is made."""
        src = canon(t)
        while True:
            enter = self.loop_constant_enter(src)
            if enter is None:
                break
            src = canon(enter.inputs[0])
        if src not in self._shapes:
            name = node_of(src)
            shape = self.fwd_node("Shape", [src], {"out_type": DType.INT32},
                                  f"{self.scope}/{name}/Shape", self.out_frame(name),
                                  self.tensor_conds(src))
            self._shapes[src] = f"{shape}:0"
        return self._shapes[src]

    def zeros_like(self, t, ctx, name):
        """Zeros shaped like forward tensor t, made in ctx (its shape saved if t is in a loop)."""
        if ctx.frame is None or self.dtype_of(t) == DType.VARIANT:
            # A TensorList has no shape to Fill: ZerosLike makes the list of zero items.
            return f"{self.new_node(ctx, 'ZerosLike', [t], {}, f'{name}/zeros')}:0"
        static = self.static_shape(t)
        if static is not None:  # no forward Shape to save per iteration
            shape = self.new_node(ctx, "Const", [], {
                "dtype": DType.INT32, "value": _scalar(list(static), DType.INT32)},
                f"{name}/zeros/Shape")
            shape = f"{shape}:0"
        else:
            shape = self.fwd_shape(t)
        zero = self.new_node(ctx, "Const", [], {"dtype": self.dtype_of(t),
                                                "value": _scalar(0, self.dtype_of(t))},
                             f"{name}/zeros/Const")
        return f"{self.new_node(ctx, 'Fill', [shape, f'{zero}:0'], {}, f'{name}/zeros')}:0"

    def _inferred_shape(self, t):
        """t's shape from shape inference of the forward graph (None dims unknown), or None."""
        if self._infer is None:
            try:
                self._infer = infer(self.forward)
            except Exception:  # inference is an optimization only
                self._infer = {}
        node, _, port = canon(t).rpartition(":")
        if node not in self.forward:
            return None  # made by the gradient: not in the inferred forward graph
        return getattr(self._infer.get((node, int(port))), "shape", None)

    def static_shape(self, t):
        """t's fully known shape, else None."""
        shape = self._inferred_shape(t)
        # Dims beyond int32 stay dynamic: the constant shapes and axes are int32 tensors.
        if shape is None or any(d is None or not 0 <= d < 2 ** 31 for d in shape):
            return None
        return tuple(int(d) for d in shape)

    def static_rank(self, t):
        shape = self._inferred_shape(t)
        return None if shape is None else len(shape)

    def static_value(self, t):
        """Forward tensor t's value when inference knows all of it (a Const, a folded shape),
        else None. Backward tensors are never known."""
        self._inferred_shape(t)  # makes sure inference ran
        node, _, port = canon(t).rpartition(":")
        if node not in self.forward:
            return None
        return getattr(self._infer.get((node, int(port))), "value", None)

    def same_static_shape(self, x, y):
        sx, sy = self.static_shape(canon(x)), self.static_shape(canon(y))
        return sx is not None and sx == sy

    # --- partial gradients --------------------------------------------------------------------
    def aggregate(self, t, ctx):
        """The sum of t's partial gradients (AddN when several), or None."""
        parts = self.grads.get(t)
        if not parts:
            return None
        if len(parts) > 1:
            total = self.new_node(ctx, "AddN", parts, {}, f"{self.scope}/{node_of(t)}_grad/AddN")
            self.grads[t] = [f"{total}:0"]
        return self.grads[t][0]


def grad(graph, ys, xs, grad_ys=None, prefix="grad", warn=None, optimizer=None,
         swap_memory=False):
    """The graph with gradient nodes of sum(ys) w.r.t. each x added (a new Graph).

    Before: y = Sum(Mul(x, w)).  After: the same nodes plus `gradients/...` and the Identity
    `grad/x` holding d sum(y) / dx. `ys`, `xs`, `grad_ys`: tensor names (`node` or
    `node:port`) or one comma-separated string. An x the ys do not depend on gets zeros and a
    warning (`warn(message)`, default: warnings.warn). `optimizer` ("sgd:0.1",
    "momentum:0.1,0.9", "adam:0.001", "rmsprop:0.01"; see training.py) also adds the Apply*
    updates of the variable xs and a `train` NoOp grouping them. `swap_memory=True` marks
    the while loops' stack pushes `swap_memory` (as TensorFlow's `while_loop(swap_memory=
    True)`): on a GPU their entries wait for the backward loop in host memory.
    """
    ys, xs = _names(ys, "ys"), _names(xs, "xs")
    grad_ys = _names(grad_ys, "grad_ys") if grad_ys else None
    if grad_ys is not None and len(grad_ys) != len(ys):
        raise TfgInputError(f"--grad-ys has {len(grad_ys)} names for {len(ys)} ys")
    graph = canonicalize(graph)  # calls inlined, functional control flow lowered
    # A structurally broken graph (a dangling input, a wrong input count, a bad attr) is
    # refused here with a message naming the node, before any gradient function reads it.
    validate(graph, require_known_ops=False)
    _check_names(graph)
    g = graph.copy()
    _complete_exits(g)
    info = frames.analyze(g)
    b = Builder(g, info, _unique_scope(g, "gradients"))
    y_refs = [_resolve(b, y, "y") for y in ys]
    x_refs = [_resolve(b, x, "x") for x in xs]
    out_names = _output_names(g, x_refs, prefix)
    for y in y_refs:
        dt = b.dtype_of(y)
        if dt is not None and not b.is_differentiable(y):
            raise TfgInputError(f"y {y} is {dt.tf_name}; gradients need floating-point ys")
    for i, y in enumerate(y_refs):
        if grad_ys is not None:
            gy = canon(_resolve(b, grad_ys[i], "grad_ys tensor"))
        else:
            gy = f"{b.new_node(b.root, 'OnesLike', [y], {}, f'{b.scope}/grad_ys_{i}')}:0"
        b.grads[y].append(gy)
    _backprop(b, y_refs, x_refs)
    _expose(b, x_refs, out_names, warn)
    _prune(g, graph, out_names)
    if swap_memory:
        for node in g:
            if node.op == "StackPushV2" and node.name not in graph:
                node.set_attr("swap_memory", True)
    if optimizer:
        add_training(g, x_refs, out_names, optimizer, b.scope)
    return g


def _refuse_unknown_ops(g, between):
    """An op without a signature between the ys and the xs: its outputs' dtypes are unknown,
    so no gradient through it can be built (a rule below it would fail on a None dtype)."""
    for name in sorted(between):
        op = g[name].op
        if not has_op(op):
            raise UnknownOpError(f"node {name!r} lies between the ys and the xs, and tfg has "
                                 f"no signature for its op {op!r}: its gradient cannot be "
                                 "built")


def _backprop(b, y_refs, x_refs):
    g = b.graph
    b.x_nodes = {node_of(x) for x in x_refs}
    between = _between(b, {node_of(y) for y in y_refs}, {node_of(x) for x in x_refs})
    _refuse_unknown_ops(g, between)
    # Every exit of a loop on the path takes part: the backward loop needs all its loop vars.
    for name in list(between):
        if g[name].op in EXIT_OPS:
            gs = b.grad_state(b.frame_of(name))
            between.update(gs.frame.exits)
    pending = collections.Counter()
    for name in between:
        node = g[name]
        for ref in node.data_inputs:
            if ref.node in between and not (ref.node in b.loop_switches
                                            and b.loop_exits.get(ref.node) == name):
                pending[ref.node] += 1
    stop = {node_of(x) for x in x_refs
            if not any(r.node in between for r in g[node_of(x)].data_inputs)}
    queue = collections.deque()
    visits = collections.Counter()

    def ready(name):
        if g[name].op in EXIT_OPS:
            _exit_ready(b, name, queue)
        else:
            queue.append(name)

    for name in dict.fromkeys(node_of(y) for y in y_refs):
        if pending[name] == 0:
            ready(name)
    for gs in list(b.grad_states.values()):
        for e in gs.frame.exits:
            if pending[e] == 0 and e not in {node_of(y) for y in y_refs}:
                _exit_ready(b, e, queue)
    while queue:
        name = queue.popleft()
        node = g[name]
        visits[name] += 1
        second = name in b.loop_switches and visits[name] > 1
        _visit(b, node, stop, second)
        if second:
            continue
        for ref in node.data_inputs:
            src = ref.node
            if src not in between:
                continue
            if src in b.loop_switches:
                if b.loop_exits.get(src) == name:
                    queue.append(src)  # first visit, from the Exit
                    if pending[src] == 0:
                        queue.append(src)  # no body consumers: close the back edge now
                else:
                    pending[src] -= 1
                    if pending[src] == 0 and visits[src] + queue.count(src) >= 1:
                        queue.append(src)
                continue
            pending[src] -= 1
            if pending[src] == 0:
                ready(src)


def _exit_ready(b, name, queue):
    gs = b.grad_state(b.frame_of(name))
    gs.ready_exits.append(name)
    gs.pending_exits -= 1
    if gs.pending_exits:
        return
    used = [e for e in gs.ready_exits if b.grads.get(f"{e}:0")]
    if used:
        parent = b.ctx_for(gs.frame.parent)
        for e in gs.ready_exits:
            t = f"{e}:0"
            if e not in used:
                zeros = loop_var_zeros(b, t, parent, f"{b.scope}/{e}_grad")
                if zeros is not None:
                    b.grads[t].append(zeros)
    queue.extend(gs.ready_exits)


def _visit(b, node, stop, second):
    name = node.name
    before = b.ctx_for(b.out_frame(name))
    after = b.ctx_for(b.frame_of(name))
    n_out = b.num_outputs(node)
    if second:
        out_grads = [None, b.aggregate(f"{name}:1", before)]
    else:
        out_grads = [b.aggregate(f"{name}:{i}", before) for i in range(n_out)]
    inputs = [f"{r.node}:{r.port}" for r in node.data_inputs]
    in_grads = [None] * len(inputs)
    if (any(og is not None for og in out_grads) or second) and name not in stop:
        gd = get_gradient(node.op, name)
        if gd.fn is not None:
            scope_name = f"{b.scope}/{name}_grad"
            if gd.fill_zeros:
                for i, og in enumerate(out_grads):
                    t = f"{name}:{i}"
                    dt = b.dtype_of(t)
                    if og is None and (dt is None or dt.is_differentiable):
                        out_grads[i] = b.zeros_like(t, after, scope_name)
            try:
                result = gd.fn(Scope(b, after, scope_name), OpView(b, node), out_grads)
            except TfgError:
                raise
            except (ValueError, TypeError, IndexError, KeyError) as e:
                # A graph that passed validation but whose structure the rule cannot use
                # (inputs the op does not have, attrs of the wrong kind): the input's fault.
                raise GraphValidationError(
                    f"node {name!r} ({node.op}): cannot build its gradient: "
                    f"{type(e).__name__}: {e}") from e
            in_grads = [result] if isinstance(result, str) else list(result)
            if len(in_grads) != len(inputs):
                raise TfgInputError(
                    f"gradient of {node.op} (node {name!r}) returned {len(in_grads)} values "
                    f"for {len(inputs)} inputs")
    for t, gin in zip(inputs, in_grads):
        if gin is not None and b.is_differentiable(t):
            b.grads[t].append(canon(gin))


def _between(b, y_nodes, x_nodes):
    """Nodes on a path of differentiable tensors from an x to a y."""
    g = b.graph
    reached = set()
    queue = collections.deque(x_nodes)
    while queue:
        name = queue.popleft()
        if name in reached:
            continue
        reached.add(name)
        for consumer, idx in g.consumers(name):
            ref = consumer.input_refs[idx]
            if b.is_differentiable(f"{name}:{ref.port}"):
                queue.append(consumer.name)
    between = set()
    queue = collections.deque(y_nodes)
    while queue:
        name = queue.popleft()
        if name in reached and name not in between:
            between.add(name)
            queue.extend(r.node for r in g[name].data_inputs)
    return between


def _expose(b, x_refs, out_names, warn):
    made = {}
    for x, out in zip(x_refs, out_names):
        if out in made:
            continue
        total = b.aggregate(x, b.root)
        if total is None:
            msg = (f"tfg grad: the ys do not depend on {x} (through floating-point tensors); "
                   f"its gradient {out} is zeros")
            (warn or (lambda m: warnings.warn(m, GradientWarning, stacklevel=3)))(msg)
            total = _zeros_for_x(b, x)
        made[out] = b.new_node(b.root, "Identity", [total], {}, out)


def _check_names(graph):
    """Refuse node names that cannot be read back as tensor names (`a:b`, `^x`): the builder
    refers to every tensor as `node:port`, as TensorFlow, which never allows them, does."""
    for node in graph:
        if ":" in node.name or node.name.startswith("^"):
            raise GraphValidationError(
                f"node {node.name!r} ({node.op}): ':' and a leading '^' are not allowed in node "
                "names")


def _complete_exits(g):
    """Give every loop Switch an Exit. A frozen or pruned graph (extract_sub_graph,
    convert_variables_to_constants) drops the Exits of loop variables nothing reads after the
    loop (raw_rnn's time and final c, dynamic_rnn's time); the backward loop still needs a
    loop variable for each (its gradient is zeros), or it never closes and every gradient
    through the loop came out as zeros. The added Exits read nothing new; _prune drops those
    no gradient uses.

        Before: Merge_4 -> Switch_4(LoopCond) -> Identity_4 -> ...   (no Exit_4)
        After:  ... Switch_4:0 -> Switch_4/tfg_exit (Exit)
    """
    for node in list(g):
        if node.op not in ("Switch", "RefSwitch") or len(node.data_inputs) != 2:
            continue
        pred = g.get(node.data_inputs[1].node)
        if pred is None or pred.op != "LoopCond":
            continue
        if any(c.op in EXIT_OPS for c, _ in g.consumers(node.name, port=0)):
            continue
        op = "RefExit" if node.op == "RefSwitch" else "Exit"
        g.add_node(_free_name(g, f"{node.name}/tfg_exit"), op, [f"{node.name}:0"],
                   {"T": node.get_attr("T")}, node.device)


def _free_name(g, name):
    base, i = name, 0
    while name in g:
        i += 1
        name = f"{base}_{i}"
    return name


def _prune(g, original, roots):
    """Remove the added nodes that no exposed gradient needs.

    Gradient functions return a partial for every input, and the backward pass sums what
    reaches each tensor; partials towards inputs that lead to no x (the labels of a loss,
    a constant operand) end nowhere. TensorFlow never builds them; dropping them afterwards is
    the same graph. Control inputs count as needs (stack pushes, loop synchronisation)."""
    keep = set()
    stack = list(roots)
    while stack:
        name = stack.pop()
        if name in keep or name in original:
            continue
        keep.add(name)
        stack.extend(parse_input(i).node for i in g[name].inputs)
    g.remove_nodes([n for n in g.node_names() if n not in original and n not in keep])


def _zeros_for_x(b, x):
    node = b.graph[node_of(x)]
    if b.dtype_of(x) == DType.RESOURCE:
        dtype = node.get_attr("dtype")
        read = b.new_node(b.root, "ReadVariableOp", [x], {"dtype": dtype},
                          f"{b.scope}/{node.name}/read")
        x = f"{read}:0"
    return f"{b.new_node(b.root, 'ZerosLike', [x], {}, f'{b.scope}/{node.name}_zeros')}:0"


def _names(value, what):
    if value is None:
        return []
    if isinstance(value, str):
        value = [value]
    out = []
    for v in value:
        out.extend(s.strip() for s in str(v).split(",") if s.strip())
    if not out:
        raise TfgInputError(f"no tensor names given for {what}")
    return out


def _resolve(b, name, what):
    ref = parse_tensor(name)
    node = b.graph.get(ref.node)
    if node is None:
        raise TfgInputError(f"{what} {name!r}: no node named {ref.node!r} in the graph")
    if ref.port >= b.num_outputs(node):
        raise TfgInputError(f"{what} {name!r}: node {ref.node!r} ({node.op}) has "
                            f"{b.num_outputs(node)} outputs")
    if what in ("x", "y") and b.out_frame(ref.node) is not None:
        raise TfgInputError(f"{what} {name!r} is inside while loop "
                            f"{b.out_frame(ref.node).name!r}; tfg grad differentiates tensors "
                            "outside loops")
    return f"{ref.node}:{ref.port}"


def _output_names(g, x_refs, prefix):
    prefix = prefix.strip("/") or "grad"
    out = []
    for x in x_refs:
        node, port = x.rsplit(":", 1)
        name = f"{prefix}/{node}" if port == "0" else f"{prefix}/{node}_{port}"
        if name in g:
            raise TfgInputError(f"the graph already has a node {name!r}; pick another --prefix")
        out.append(name)
    return out


def _unique_scope(g, base):
    used = {n.split("/", 1)[0] for n in g.node_names()}
    if base not in used:
        return base
    i = 1
    while f"{base}_{i}" in used:
        i += 1
    return f"{base}_{i}"


def _scalar(value, dtype):
    return np.asarray(value, dtype=dtype.np)
