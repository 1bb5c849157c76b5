"""Where backward nodes go and how they read forward values.

A `Ctx` is a place for new nodes: the root frame, or the frame of one backward while loop.
`Builder.capture(t, ctx)` makes tensor `t` usable in `ctx` the way TensorFlow's
`WhileContext.AddValue` does: a forward value of the loop being differentiated is replaced by
its per-iteration history (a stack pop, see loops.py), a value from an enclosing frame goes in
through a constant Enter, a constant is recreated.

    >>> s = Scope(builder, ctx, "gradients/while/mul_grad")
    >>> s.op("Mul", [g, "while/Identity_1:0"])   # in a backward loop
    'gradients/while/mul_grad/Mul:0'             # reads a StackPopV2, not while/Identity_1

A node created in a loop frame whose inputs are all loop invariants (or that has no inputs)
gets a control edge from the frame's control pivot so that it runs once per iteration, as
TensorFlow's `_MaybeAddControlDependency` does.
"""
import numpy as np

from tfg.errors import GraphValidationError
from tfg.graphdef.names import CONTROL, input_string, parse_input
from tfg.schemas.dtypes import DType
from tfg.schemas.ops import control_flow_names, get_op, has_op, signature

ENTER_OPS = control_flow_names("enter")
EXIT_OPS = control_flow_names("exit")
# What a constant Enter may sit behind: identities proper and Switches.
_IDENTITY_LIKE = control_flow_names("switch") | frozenset({"Identity", "RefIdentity"})


def canon(t):
    """`x`, `x:0` -> 'x:0' (the form used as a key everywhere in the gradient builder)."""
    ref = parse_input(t) if isinstance(t, str) else t
    return f"{ref.node}:{ref.port}"


def node_of(t):
    return parse_input(t).node


def port_of(t):
    return parse_input(t).port


class Ctx:
    """A place for backward nodes: root (frame None) or one backward while-loop frame."""

    def __init__(self, frame=None, parent=None, grad_state=None, parallel_iterations=10):
        self.frame = frame
        self.parent = parent
        self.grad_state = grad_state
        self.parallel_iterations = parallel_iterations
        self.pivot = None  # the backward LoopCond (tensor) its Switches read
        self.control_pivot = None  # node name: control edge that puts a free node in an iteration
        self.captured = {}  # tensor -> the tensor standing for it in this frame

    def __repr__(self):
        return f"<Ctx {self.frame or 'root'}>"

    def has_ancestor(self, other):
        c = self.parent
        while c is not None:
            if c is other:
                return True
            c = c.parent
        return False


class OpView:
    """What a gradient function sees of a forward node: inputs, outputs, attrs with defaults."""

    def __init__(self, builder, node):
        self.builder = builder
        self.node = node
        self.name = node.name
        self.type = node.op
        self.inputs = [f"{r.node}:{r.port}" for r in node.data_inputs]
        n = builder.num_outputs(node)
        self.outputs = [f"{node.name}:{i}" for i in range(n)]

    def attr(self, name, default=None):
        try:
            return signature.attr_or_default(self.node, name)
        except Exception:
            return default

    def input_dtype(self, i):
        return self.builder.dtype_of(self.inputs[i])

    def output_dtype(self, i):
        return self.builder.dtype_of(self.outputs[i])

    def const_input(self, i):
        """The value of input i when it is a Const node (static axes, perms), else None."""
        node = self.builder.graph.get(node_of(self.inputs[i]))
        if node is None or node.op != "Const":
            return None
        return node.get_attr("value", None)


class Scope:
    """The node factory a gradient function gets: a Ctx plus a name scope."""

    def __init__(self, builder, ctx, prefix):
        self.builder = builder
        self.ctx = ctx
        self.prefix = prefix

    def op(self, optype, inputs, attrs=None, name=None, control=()):
        """Add `optype(inputs)` in this scope; returns its output 0 as 'node:0'."""
        full = f"{self.prefix}/{name or optype}"
        node = self.builder.new_node(self.ctx, optype, inputs, attrs, full, control)
        return f"{node}:0"

    @staticmethod
    def out(t, k):
        return f"{node_of(t)}:{k}"

    def dtype(self, t):
        return self.builder.dtype_of(t)

    def const(self, value, dtype, name="Const"):
        dtype = DType.parse(dtype) if not isinstance(dtype, DType) else dtype
        return self.op("Const", [], {"dtype": dtype, "value": np.asarray(value, dtype=dtype.np)},
                       name=name)

    def shape(self, t, out_type=DType.INT32):
        """t's shape: a Const when shape inference knows it (TensorFlow's array_ops.shape does
        the same), else a Shape node."""
        static = self.static_shape(t)
        if static is not None and out_type is not None:
            return self.const(list(static), out_type, name="Shape")
        return self.op("Shape", [t], {"out_type": out_type})

    def static_shape(self, t):
        """The fully known shape of forward tensor t (a tuple), else None."""
        return self.builder.static_shape(t)

    def static_value(self, t):
        """The value of forward tensor t when it is known at graph-build time, else None."""
        return self.builder.static_value(t)

    def same_shape(self, x, y):
        return self.builder.same_static_shape(x, y)

    def zeros_like(self, t):
        return self.op("ZerosLike", [t])

    def scalar_like(self, value, t):
        """A scalar Const of t's dtype."""
        return self.const(value, self.dtype(t))

    def sub(self, name):
        """A nested name scope (e.g. for a helper that builds several nodes)."""
        return Scope(self.builder, self.ctx, f"{self.prefix}/{name}")


class NodeFactory:
    """Mixin of Builder: node creation, dtype lookup, forward-structure queries, capture."""

    # --- dtypes -------------------------------------------------------------------------------
    def dtype_of(self, t, base=True):
        """The dtype of tensor t (base type unless base=False), or None when unknown."""
        ref = parse_input(t)
        dts = self._dtypes.get(ref.node)
        if dts is None:
            node = self.graph.get(ref.node)
            dts = []
            if node is not None and has_op(node.op):
                try:
                    dts = signature.output_dtypes(node)
                except Exception:
                    dts = []
            self._dtypes[ref.node] = dts
        if ref.port >= len(dts):
            return None
        return dts[ref.port].base if base else dts[ref.port]

    def num_outputs(self, node):
        if has_op(node.op):
            return signature.num_outputs(node)
        ports = [r.port for c, _ in self.graph.consumers(node.name)
                 for r in c.input_refs if r.node == node.name]
        return max(ports, default=0) + 1

    def is_differentiable(self, t):
        """Whether gradients flow through tensor t (floats, complex, resources, variants such
        as TensorLists, as TensorFlow's IsTrainable; unknown: yes)."""
        dt = self.dtype_of(t)
        return dt is None or dt.is_differentiable or dt in (DType.RESOURCE, DType.VARIANT)

    # --- creating nodes ---------------------------------------------------------------------
    def new_node(self, ctx, optype, inputs, attrs, name, control=(), out_ctx=None,
                 capture=True):
        """Add a backward node in ctx (inputs captured into ctx); returns its name."""
        ins = [self.capture(t, ctx) for t in inputs] if capture else [canon(t) for t in inputs]
        attrs = dict(attrs or {})
        self._fill_type_attrs(optype, ins, attrs)
        control = list(control)
        if (ctx.frame is not None and not control and ctx.control_pivot is not None
                and all(self.is_constant_enter(t) for t in ins)):
            control = [ctx.control_pivot]
        name = self.graph.unique_name(name)
        self.graph.add_node(name, optype, [_input(t) for t in ins] + ["^" + c for c in control],
                            attrs)
        self.bwd[name] = out_ctx or ctx
        return name

    def fwd_node(self, optype, inputs, attrs, name, frame, conds, control=()):
        """Add a node to the forward graph (a counter, a push, a Shape) in `frame` under `conds`."""
        attrs = dict(attrs or {})
        ins = [canon(t) for t in inputs]
        self._fill_type_attrs(optype, ins, attrs)
        name = self.graph.unique_name(name)
        self.graph.add_node(name, optype, [_input(t) for t in ins] + ["^" + c for c in control],
                            attrs)
        self.fwd_frames[name] = frame
        self.fwd_conds[name] = tuple(conds)
        return name

    def enter(self, t, ctx, is_constant, name=None):
        """Enter tensor t (living in ctx.parent) into ctx's frame."""
        name = self.graph.unique_name(name or f"{ctx.frame}/Enter")
        self.graph.add_node(name, "Enter", [_input(t)], {
            "T": self.dtype_of(t) or DType.FLOAT, "frame_name": ctx.frame.encode(),
            "is_constant": bool(is_constant), "parallel_iterations": ctx.parallel_iterations})
        self.bwd[name] = ctx
        return f"{name}:0"

    def exit(self, t, ctx, name):
        """Exit tensor t of ctx's frame into ctx.parent."""
        dtype = self.dtype_of(t)
        if dtype is None:
            raise GraphValidationError(f"node {node_of(t)!r}: the dtype of {canon(t)} is unknown; "
                                       "its gradient cannot leave the while loop")
        name = self.graph.unique_name(name)
        self.graph.add_node(name, "Exit", [_input(t)], {"T": dtype})
        self.bwd[name] = ctx.parent
        return f"{name}:0"

    def is_constant_enter(self, t):
        node = self.graph.get(node_of(t))
        return node is not None and node.op in ENTER_OPS and bool(
            node.get_attr("is_constant", False))

    def _fill_type_attrs(self, optype, ins, attrs):
        """Set the op's type/number attrs from its inputs' dtypes when the caller did not."""
        sig = get_op(optype)
        variable = [a for a in sig.inputs if a.number_attr or a.type_list_attr]
        n_fixed = len(sig.inputs) - len(variable)
        per_var = (len(ins) - n_fixed) // len(variable) if variable else 0
        i = 0
        for arg in sig.inputs:
            if arg.type_list_attr:
                count = per_var
                if arg.type_list_attr not in attrs:
                    attrs[arg.type_list_attr] = [self.dtype_of(t) for t in ins[i:i + count]]
            else:
                count = 1
                if arg.number_attr:
                    count = int(attrs.setdefault(arg.number_attr, per_var))
                if arg.type_attr and arg.type_attr not in attrs and i < len(ins):
                    dt = self.dtype_of(ins[i])
                    if dt is not None:
                        attrs[arg.type_attr] = dt
            i += count

    # --- the forward graph's structure --------------------------------------------------------
    def frame_of(self, name):
        """The forward Frame node `name` runs in (an Exit runs in the loop it leaves)."""
        if name in self.fwd_frames:
            return self.fwd_frames[name]
        return self.info.frame_of(name)

    def out_frame(self, name):
        """The forward Frame that node `name`'s outputs live in."""
        frame = self.frame_of(name)
        node = self.graph.get(name)
        if frame is not None and node is not None and node.op in EXIT_OPS:
            return frame.parent
        return frame

    def tensor_conds(self, t):
        """[(CondContext, branch)] tensor t is under, outermost first (a Switch output included)."""
        ref = parse_input(t)
        if ref.node in self.fwd_conds:
            conds = tuple(self.fwd_conds[ref.node])
        else:
            conds = tuple(self.info.cond_branch_of(ref.node))
        cond = self.switch_cond.get(ref.node)
        if cond is not None and ref.port in (0, 1):
            conds = conds + ((cond, ref.port),)
        return conds

    def conds_in_frame(self, t, frame):
        return [(c, b) for c, b in self.tensor_conds(t) if c.frame is frame]

    def loop_constant_enter(self, t):
        """The constant Enter that t is an alias of (through Identity/Switch), or None."""
        node = self.graph.get(node_of(t))
        seen = set()
        while node is not None and node.op in _IDENTITY_LIKE and node.name not in seen:
            seen.add(node.name)
            data = node.data_inputs
            if not data:
                return None
            node = self.graph.get(data[0].node)
        if node is not None and node.op in ENTER_OPS and node.get_attr("is_constant", False):
            return node
        return None

    # --- capture (TensorFlow's WhileContext.AddValue) ---------------------------------------
    def capture(self, t, ctx):
        """The tensor standing for t inside ctx (see the module docstring)."""
        t = canon(t)
        name = node_of(t)
        src = self.bwd.get(name)
        if src is ctx:
            return t
        if ctx.frame is None:
            if src is not None or self.out_frame(name) is not None:
                raise GraphValidationError(
                    f"gradient construction error: {t} lives inside a while loop but is used "
                    "outside it")
            return t
        cached = ctx.captured.get(t)
        if cached is not None:
            return cached
        if src is not None:
            if not ctx.has_ancestor(src):
                raise GraphValidationError(
                    f"gradient construction error: {t} ({src}) used in {ctx}")
            real = self.enter(self.capture(t, ctx.parent), ctx, is_constant=True)
        elif self.out_frame(name) is ctx.grad_state.frame:
            real = ctx.grad_state.real_value(t)
        else:
            real = self.enter(self.capture(t, ctx.parent), ctx, is_constant=True)
        ctx.captured[t] = real
        return real


def _input(t):
    ref = parse_input(t)
    return input_string(ref.node, ref.port) if ref.port != CONTROL else t
