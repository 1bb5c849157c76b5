"""`cond` and `while_loop` compiled to Switch / Merge / Enter / Exit / NextIteration exactly as
TensorFlow's v1 control flow does ("Implementation of Control Flow in TensorFlow").

    >>> r = cond(x < y, lambda: x + z, lambda: tb.square(y))
    # cond/Switch(pred, pred) -> cond/switch_t, cond/switch_f (branch pivots), cond/pred_id,
    # one Switch per outside tensor a branch reads (cond/add/Switch: Switch(x, pred_id)),
    # one Merge per output: cond/Merge(false_value, true_value)

    >>> i, acc = while_loop(lambda i, a: i < n, lambda i, a: (i + 1, a * 2), [0, x])
    # per loop variable: while/Enter -> while/Merge(Enter, NextIteration) -> while/Switch(Merge,
    # LoopCond) -> while/Identity (the body's input) ... -> while/NextIteration; Switch:0 ->
    # while/Exit. Outside tensors the loop reads enter once with is_constant=true.

A context records which tensors it captured; ops made while it is current get their outside
inputs captured (through every enclosing context, innermost last), and ops without inputs get a
control edge from the context's pivot so they run once per branch / iteration.
"""
from tfg.errors import TfgInputError
from tfg.graphdef.builder.core import Operation, get_default_builder
from tfg.graphdef.builder.constants import convert_to_tensor
from tfg.schemas.dtypes import DType
from tfg.schemas.ops import control_flow_names

_ENTER_OPS = control_flow_names("enter")


def _is_ancestor(a, b):
    """Whether context `a` (None = the root) is `b` or encloses it."""
    if a is None:
        return True
    while b is not None:
        if b is a:
            return True
        b = b.outer
    return False


def _colocation(t):
    node = t.builder.graph[t.op.name]
    return node.get_attr("_class") if node.has_attr("_class") else [f"loc:@{t.op.name}".encode()]


class _Context:
    """Common part of cond-branch and while-body contexts."""

    def __init__(self, builder, outer):
        self.builder, self.outer = builder, outer
        self.external = {}  # outside tensor name -> its captured tensor in this context

    def add_value(self, t):
        """`t` made usable here: itself when made here, else captured (Switch/Enter)."""
        if t.ctx is self:
            return t
        hit = self.external.get(t.name)
        if hit is not None:
            return hit
        if not _is_ancestor(t.ctx, self):
            raise TfgInputError(
                f"tensor {t.name!r} was made inside {t.ctx.describe()} and cannot be used in "
                f"{self.describe()}; return it from that branch/loop body instead")
        v = self.outer.add_value(t) if self.outer is not None else t
        b = self.builder
        with b.control_dependencies(None):
            new = self._capture(v)
        self.external[t.name] = new
        return new

    def while_context(self):
        c = self
        while c is not None and not isinstance(c, WhileContext):
            c = c.outer
        return c

    def fix_control_inputs(self, b, name, in_strings, controls):
        """TensorFlow's _AddOpInternal rules for the control inputs of an op made here."""
        loop = self.while_context()
        internal, external = [], []
        for c in controls:
            op = b._ops.get(c)
            inside = loop is None or (op is not None and _is_ancestor(loop, op.ctx))
            (internal if inside else external).append(c)
        controls = list(internal)
        mine = [c for c in internal if c in b._ops and _is_ancestor(self, b._ops[c].ctx)]
        if not in_strings:
            if not mine:
                controls.append(self.control_pivot().op.name)
        elif isinstance(self, WhileContext) and not internal and all(
                _is_constant_enter(b, s) for s in in_strings):
            # Reads only loop invariants: without the pivot it would run once, not per iteration.
            controls.append(self.control_pivot().op.name)
        for c in external:
            # A control edge from outside a loop would fire once; carry it in as data instead.
            op = b._ops.get(c)
            if op is None or not op.outputs:
                raise TfgInputError(
                    f"node {name!r} inside {loop.describe()} depends on {c!r} from outside "
                    "the loop, which has no output to carry the dependency in")
            with b.control_dependencies(None):
                src = op.outputs[0]
                ident = b.make_op("Identity", [src], {"T": src.dtype.base}, name="Identity",
                                  out_dtypes=[src.dtype.base])
            controls.append(ident.name)
        return controls


def _is_constant_enter(b, s):
    node = b.graph.get(s.split(":")[0].lstrip("^"))
    return node is not None and node.op in _ENTER_OPS and \
        node.get_attr("is_constant", False)


class CondContext(_Context):
    def __init__(self, builder, outer, pred_id, pivot, branch, name):
        super().__init__(builder, outer)
        self.pred_id, self.pivot, self.branch, self.name = pred_id, pivot, branch, name

    def describe(self):
        return f"the {'true' if self.branch else 'false'} branch of cond {self.name!r}"

    def control_pivot(self):
        return self.pivot

    def _capture(self, v):
        op_type = "RefSwitch" if v.dtype.is_ref else "Switch"
        sw = self.builder.make_op(
            op_type, [v, self.pred_id], {"T": v.dtype.base, "_class": _colocation(v)},
            name="Switch", out_dtypes=[v.dtype] * 2, out_shapes=[v.shape] * 2, ctx=self,
            capture=False)
        return sw.outputs[self.branch]


class WhileContext(_Context):
    def __init__(self, builder, outer, frame_name, parallel_iterations):
        super().__init__(builder, outer)
        self.frame_name = frame_name
        self.parallel_iterations = parallel_iterations
        self.pivot_for_pred = None
        self.pivot_for_body = None

    def describe(self):
        return f"while loop {self.frame_name!r}"

    def control_pivot(self):
        return self.pivot_for_body if self.pivot_for_body is not None else self.pivot_for_pred

    def enter(self, v, is_constant, name="Enter"):
        op_type = "RefEnter" if v.dtype.is_ref else "Enter"
        with self.builder.control_dependencies(None):
            op = self.builder.make_op(
                op_type, [v], {"T": v.dtype.base, "frame_name": self.frame_name.encode(),
                               "is_constant": bool(is_constant),
                               "parallel_iterations": int(self.parallel_iterations)},
                name=name, out_dtypes=[v.dtype], out_shapes=[v.shape], ctx=self, capture=False)
        return op.outputs[0]

    def _capture(self, v):
        return self.enter(v, is_constant=True)


def _flatten(value):
    if isinstance(value, (list, tuple)):
        return list(value), type(value)
    return [value], None


def _pack(flat, structure):
    return flat[0] if structure is None else structure(flat)


def cond(pred, true_fn, false_fn, name=None):
    """Run `true_fn` or `false_fn` by a scalar bool `pred`; returns Merge outputs.

    Builds (names for the default name "cond"): Switch(pred, pred) -> switch_t/switch_f
    Identity pivots and pred_id; each branch in its own context; Merge(false, true) per output.
    """
    b = get_default_builder()
    if not callable(true_fn) or not callable(false_fn):
        raise TfgInputError("cond: true_fn and false_fn must be callables")
    outer = b.ctx
    with b.name_scope(name or "cond") as scope:
        p = convert_to_tensor(pred, DType.BOOL, name="pred")
        if p.dtype.base != DType.BOOL or (p.shape is not None and p.shape != ()):
            raise TfgInputError(f"cond: pred {p.name!r} must be a scalar bool, got "
                                f"{p.dtype.tf_name} {p.shape}")
        sw = b.make_op("Switch", [p, p], {"T": DType.BOOL}, name="Switch",
                       out_dtypes=[DType.BOOL] * 2, out_shapes=[()] * 2)
        p = b.get_operation(sw.name).node.inputs[0]  # the (possibly captured) pred
        pred_t = _tensor_for(b, p)
        ctx_t = CondContext(b, outer, None, None, 1, scope[:-1])
        ctx_f = CondContext(b, outer, None, None, 0, scope[:-1])
        pivot_t = b.make_op("Identity", [sw.outputs[1]], {"T": DType.BOOL}, name="switch_t",
                            out_dtypes=[DType.BOOL], out_shapes=[()], ctx=ctx_t,
                            capture=False).outputs[0]
        pivot_f = b.make_op("Identity", [sw.outputs[0]], {"T": DType.BOOL}, name="switch_f",
                            out_dtypes=[DType.BOOL], out_shapes=[()], ctx=ctx_f,
                            capture=False).outputs[0]
        pred_id = b.make_op("Identity", [pred_t], {"T": DType.BOOL}, name="pred_id",
                            out_dtypes=[DType.BOOL], out_shapes=[()]).outputs[0]
        for ctx, pivot in ((ctx_t, pivot_t), (ctx_f, pivot_f)):
            ctx.pred_id, ctx.pivot = pred_id, pivot
            ctx.external[pred_id.name] = pred_id
        res_t, struct_t = _build_branch(b, ctx_t, true_fn, scope)
        res_f, struct_f = _build_branch(b, ctx_f, false_fn, scope)
        if len(res_t) != len(res_f):
            raise TfgInputError(f"cond {scope[:-1]!r}: true_fn returned {len(res_t)} values, "
                                f"false_fn {len(res_f)}")
        merges = []
        for vf, vt in zip(res_f, res_t):
            if vf.dtype != vt.dtype:
                raise TfgInputError(f"cond {scope[:-1]!r}: branches return {vt.dtype.tf_name} "
                                    f"(true) and {vf.dtype.tf_name} (false)")
            shape = vt.shape if vt.shape == vf.shape else None
            m = b.make_op("Merge", [vf, vt], {"N": 2, "T": vt.dtype.base}, name="Merge",
                          out_dtypes=[vt.dtype.base, DType.INT32], out_shapes=[shape, ()],
                          capture=False)
            merges.append(m.outputs[0])
    return _pack(merges, struct_t)


def _compatible(a, b):
    if a is None or b is None:
        return True
    return len(a) == len(b) and all(x is None or y is None or x == y for x, y in zip(a, b))


def _tensor_for(b, input_str):
    node, _, port = input_str.partition(":")
    return b.get_operation(node).outputs[int(port or 0)]


def _build_branch(b, ctx, fn, scope):
    saved = b.ctx
    b.ctx = ctx
    try:
        flat, structure = _flatten(fn())
        out = []
        for v in flat:
            if v is None or isinstance(v, Operation):
                raise TfgInputError(f"cond {scope[:-1]!r}: a branch must return tensors "
                                    f"(got {v!r})")
            t = convert_to_tensor(v)
            with b.name_scope(scope):
                out.append(ctx.add_value(t))
    finally:
        b.ctx = saved
    return out, structure


def while_loop(cond, body, loop_vars, parallel_iterations=10, name=None,
               shape_invariants=None, return_same_structure=False):
    """Repeat `body` while `cond` holds; returns the Exit tensors.

    `cond(*vars)` returns a scalar bool; `body(*vars)` returns new values (same count and
    dtypes, and shapes compatible with `shape_invariants`, by default the initial shapes).
    Like TensorFlow v1, a single result is returned bare unless `return_same_structure`.
    """
    b = get_default_builder()
    if not callable(cond) or not callable(body):
        raise TfgInputError("while_loop: cond and body must be callables")
    if int(parallel_iterations) < 1:
        raise TfgInputError("while_loop: parallel_iterations must be a positive integer")
    flat, structure = _flatten(loop_vars)
    if not flat:
        raise TfgInputError("while_loop: loop_vars is empty")
    outer = b.ctx
    with b.name_scope(name or "while"):
        flat = [convert_to_tensor(v) for v in flat]
        for v in flat:
            if v.dtype.is_ref:
                raise TfgInputError(f"while_loop: loop variable {v.name!r} is a reference; "
                                    "read it first (tb.identity)")
        ctx = WhileContext(b, outer, b.unique_name("while_context"), int(parallel_iterations))
        if shape_invariants is None:
            shapes = [v.shape for v in flat]
        else:
            shapes, _ = _flatten(shape_invariants)
            if len(shapes) != len(flat):
                raise TfgInputError("while_loop: shape_invariants and loop_vars differ in length")
            shapes = [None if s is None else tuple(s) for s in shapes]
            for v, s in zip(flat, shapes):
                if not _compatible(v.shape, s):
                    raise TfgInputError(f"while_loop: {v.name!r} of shape {v.shape} does not "
                                        f"match its shape invariant {s}")
        real = [outer.add_value(v) if outer is not None else v for v in flat]
        enters = [ctx.enter(v, is_constant=False) for v in real]
        merges = [b.make_op("Merge", [e, e], {"N": 2, "T": e.dtype}, name="Merge",
                            out_dtypes=[e.dtype, DType.INT32], out_shapes=[s, ()], ctx=ctx,
                            capture=False, control=False).outputs[0]
                  for e, s in zip(enters, shapes)]
        b.ctx = ctx
        try:
            ctx.pivot_for_pred = merges[0]
            c = convert_to_tensor(cond(*merges), DType.BOOL)
            c = ctx.add_value(c)
            if c.shape not in (None, ()):
                raise TfgInputError(f"while_loop: cond returned shape {c.shape}, not a scalar")
            pivot = b.make_op("LoopCond", [c], {}, name="LoopCond", out_dtypes=[DType.BOOL],
                              out_shapes=[()]).outputs[0]
            switches = [b.make_op("Switch", [m, pivot], {"T": m.dtype,
                                                         "_class": _colocation(m)},
                                  name="Switch", out_dtypes=[m.dtype] * 2,
                                  out_shapes=[m.shape] * 2).outputs for m in merges]
            idents = [b.make_op("Identity", [s[1]], {"T": s[1].dtype}, name="Identity",
                                out_dtypes=[s[1].dtype], out_shapes=[s[1].shape]).outputs[0]
                      for s in switches]
            ctx.pivot_for_body = idents[0]
            res, _ = _flatten(body(*idents))
            if len(res) != len(flat):
                raise TfgInputError(f"while_loop: body returned {len(res)} values for "
                                    f"{len(flat)} loop variables")
            nexts = []
            for v, m in zip(res, merges):
                t = ctx.add_value(convert_to_tensor(v, m.dtype))
                if t.dtype.base != m.dtype.base:
                    raise TfgInputError(f"while_loop: body returned {t.dtype.tf_name} for a "
                                        f"{m.dtype.tf_name} loop variable")
                nexts.append(t)
            for t, m in zip(nexts, merges):
                nx = b.make_op("NextIteration", [t], {"T": t.dtype.base}, name="NextIteration",
                               out_dtypes=[t.dtype.base], out_shapes=[t.shape])
                node = b.graph[m.op.name]
                node.inputs = [node.inputs[0], nx.name] + list(node.inputs[2:])
                if not _compatible(t.shape, m.shape):
                    raise TfgInputError(
                        f"while_loop: loop variable {m.name!r} enters with shape {m.shape} but "
                        f"has shape {t.shape} after one iteration; pass shape_invariants "
                        "(None dims) to let it vary")
            exits = [b.make_op("Exit", [s[0]], {"T": s[0].dtype}, name="Exit",
                               out_dtypes=[s[0].dtype], out_shapes=[s[0].shape], ctx=outer,
                               capture=False).outputs[0] for s in switches]
        finally:
            b.ctx = outer
    if structure is None or (len(exits) == 1 and not return_same_structure):
        return exits[0]
    return structure(exits)


def no_op(name="NoOp"):
    return get_default_builder().make_op("NoOp", [], {}, name=name)


def group(*inputs, name="group_deps"):
    """A NoOp that runs after every input (Tensors, Operations or names)."""
    b = get_default_builder()
    flat = []
    for x in inputs:
        flat.extend(x if isinstance(x, (list, tuple)) else [x])
    with b.control_dependencies(flat):
        return b.make_op("NoOp", [], {}, name=name)


def tuple_(tensors, name="tuple"):
    """Identity of each tensor, all gated on every tensor (tf.tuple)."""
    b = get_default_builder()
    tensors = [convert_to_tensor(t) for t in tensors]
    with b.name_scope(name):
        gate = group(*tensors, name="group_deps")
        out = []
        for t in tensors:
            with b.control_dependencies([gate]):
                out.append(b.make_op("Identity", [t], {"T": t.dtype}, name="control_dependency",
                                     out_dtypes=[t.dtype], out_shapes=[t.shape]).outputs[0])
    return out


def with_dependencies(deps, t, name=None):
    """Identity of `t` that runs after `deps`."""
    b = get_default_builder()
    t = convert_to_tensor(t)
    with b.control_dependencies(deps):
        return b.make_op("Identity", [t], {"T": t.dtype}, name=name or "control_dependency",
                         out_dtypes=[t.dtype], out_shapes=[t.shape]).outputs[0]


__all__ = ["cond", "while_loop", "no_op", "group", "tuple_", "with_dependencies",
           "CondContext", "WhileContext"]
