"""The graph builder: `GraphBuilder` (a Graph plus TensorFlow's construction-time state),
`Tensor` and `Operation` handles, name scopes, control dependencies and device scopes.

    >>> b = GraphBuilder()
    >>> with b.as_default():
    ...     x = tb.placeholder(tb.float32, [None, 3], name="x")
    ...     with tb.name_scope("dense"):
    ...         y = tb.constant(2.0)          # node "dense/Const"
    >>> b.graph["dense/Const"].op
    'Const'

Names follow TensorFlow's rules (`dense`, `dense_1`, and a scope name blocks the same op name),
so a graph built here has the node names TensorFlow would give it. Ops created inside `cond`
branches and `while_loop` bodies go through the current control-flow context (see
control_flow.py), which captures outside tensors with Switch / Enter nodes as TensorFlow does.
"""
import contextlib
import threading

from tfg.errors import TfgInputError
from tfg.graphdef import io
from tfg.graphdef.attrs import Shape
from tfg.graphdef.graph import Graph
from tfg.graphdef.infer import TensorInfo, infer_node
from tfg.graphdef.names import CONTROL, DeviceSpec, input_string
from tfg.schemas.dtypes import DType
from tfg.schemas.ops import get_op, has_op
from tfg.schemas.ops.signature import output_dtypes

_state = threading.local()


def _stack():
    if not hasattr(_state, "stack"):
        _state.stack = []
    return _state.stack


def get_default_builder():
    """The builder ops are added to: the innermost `as_default()`, else a global one."""
    stack = _stack()
    if stack:
        return stack[-1]
    if getattr(_state, "default", None) is None:
        _state.default = GraphBuilder()
    return _state.default


def reset_default_graph():
    """Forget the global default builder (like tf.compat.v1.reset_default_graph)."""
    if _stack():
        raise TfgInputError("reset_default_graph() inside a `with builder.as_default()` block")
    _state.default = None


class Operation:
    """A node made by the builder: `.name`, `.type`, `.outputs` (Tensors), `.node` (the Node)."""

    __slots__ = ("builder", "name", "type", "outputs", "ctx")

    def __init__(self, builder, name, op_type, ctx):
        self.builder, self.name, self.type, self.ctx = builder, name, op_type, ctx
        self.outputs = []

    @property
    def node(self):
        return self.builder.graph[self.name]

    def __repr__(self):
        return f"<tb.Operation {self.name!r} type={self.type}>"


class Tensor:
    """One output of an Operation; supports Python operators (see math_ops) and slicing."""

    __slots__ = ("op", "port", "dtype", "shape")
    # numpy must defer to our reflected operators (np.float32(2) * t -> Mul node).
    __array_priority__ = 100

    def __init__(self, op, port, dtype, shape=None):
        self.op, self.port, self.dtype = op, port, DType(dtype)
        self.shape = None if shape is None else tuple(shape)

    @property
    def name(self):
        """The tensor name `node:port` used in feeds and fetches."""
        return f"{self.op.name}:{self.port}"

    @property
    def builder(self):
        return self.op.builder

    @property
    def graph(self):
        return self.op.builder

    @property
    def ctx(self):
        # Exit outputs live in the parent frame even though the op belongs to the loop.
        return self.op.ctx

    @property
    def input_string(self):
        return input_string(self.op.name, self.port)

    @property
    def ndim(self):
        return None if self.shape is None else len(self.shape)

    def get_shape(self):
        return self.shape

    def __repr__(self):
        return f"<tb.Tensor {self.name!r} dtype={self.dtype.tf_name} shape={self.shape}>"

    def __bool__(self):
        raise TypeError(f"using tensor {self.name!r} as a Python bool; use tb.cond for "
                        "graph-level conditionals")

    def __iter__(self):
        raise TypeError(f"tensor {self.name!r} is not iterable; use tb.unstack")

    def __len__(self):
        raise TypeError(f"len() of tensor {self.name!r}; use tb.shape")


class _Controller:
    """One `control_dependencies(...)` block: its control inputs and the ops made inside."""

    def __init__(self, names):
        self.names = list(names)
        self.seen = set()


class GraphBuilder:
    """Builds a tfg Graph with TensorFlow's naming, scoping and control-flow rules.

        >>> b = GraphBuilder()
        >>> with b.as_default():
        ...     a = constant([1.0, 2.0], name="a")
        ...     c = a * 3.0                   # nodes mul/y (Const) and mul (Mul)
        >>> b.save("g.pb")
    """

    def __init__(self, graph=None, seed=None):
        self.graph = graph if graph is not None else Graph()
        if graph is None:
            self.graph.versions.producer = 1994  # a TF 2.x producer that import_graph_def accepts
        self._names_in_use = {}
        for name in self.graph.node_names():
            self._names_in_use[name.lower()] = 1
        self._scope = ""
        self._controllers = []
        self._device = ""
        self._colocate = None
        self.ctx = None  # the current control-flow context (cond branch or while body)
        self._ops = {}
        self.variables = []
        self.seed = seed
        self._last_op_seed = 0

    # --- default-builder protocol --------------------------------------------------------
    @contextlib.contextmanager
    def as_default(self):
        """Make module-level functions (tb.constant, tb.matmul, ...) add to this builder."""
        _stack().append(self)
        try:
            yield self
        finally:
            _stack().pop()

    def __enter__(self):
        _stack().append(self)
        return self

    def __exit__(self, *exc):
        _stack().pop()
        return False

    def save(self, path, fmt=None):
        """Write the GraphDef (binary, or text for *.pbtxt) atomically."""
        io.save(self.graph, path, fmt)

    def as_graph_def(self):
        return self.graph.to_proto()

    # --- names ---------------------------------------------------------------------------
    def unique_name(self, name, mark_as_used=True):
        """`scope/name` made unique the way TensorFlow's Graph.unique_name does."""
        if self._scope:
            name = f"{self._scope}/{name}"
        key = name.lower()
        i = self._names_in_use.get(key, 0)
        if mark_as_used:
            self._names_in_use[key] = i + 1
        if i > 0:
            base = key
            while key in self._names_in_use:
                key = f"{base}_{i}"
                i += 1
            if mark_as_used:
                self._names_in_use[key] = 1
            name = f"{name}_{i - 1}"
        return name

    @contextlib.contextmanager
    def name_scope(self, name):
        """Open a name scope; yields the scope string with a trailing '/'.

        `"dense"` twice gives `dense/` then `dense_1/`; a name ending in '/' re-enters that
        exact scope; None or "" returns to the root.
        """
        old = self._scope
        if not name:
            new = ""
        elif name.endswith("/"):
            new = name[:-1]
        else:
            new = self.unique_name(name)
        self._scope = new
        try:
            yield (new + "/") if new else ""
        finally:
            self._scope = old

    def get_name_scope(self):
        return self._scope

    def get_operation(self, name):
        try:
            return self._ops[name]
        except KeyError:
            raise TfgInputError(f"the builder made no operation named {name!r}") from None

    def get_tensor(self, name):
        node, _, port = name.partition(":")
        op = self.get_operation(node)
        return op.outputs[int(port or 0)]

    # --- control dependencies and devices ------------------------------------------------
    @contextlib.contextmanager
    def control_dependencies(self, deps):
        """Ops made inside run after `deps` (Tensors, Operations or names); None clears."""
        if deps is None:
            saved, self._controllers = self._controllers, []
            try:
                yield
            finally:
                self._controllers = saved
            return
        names = []
        for d in deps:
            names.append(_op_name(d))
        ctl = _Controller(names)
        self._controllers.append(ctl)
        try:
            yield
        finally:
            self._controllers.remove(ctl)

    @contextlib.contextmanager
    def device(self, spec):
        """Device scope; nested partial specs merge (inner fields win). None clears."""
        old = self._device
        if spec is None or spec == "":
            self._device = ""
        else:
            inner = DeviceSpec.parse(str(spec))
            self._device = inner.merged_with(DeviceSpec.parse(old)).to_string()
        try:
            yield
        finally:
            self._device = old

    @contextlib.contextmanager
    def colocate_with(self, target):
        """Ops made inside get `_class: loc:@target` (TensorFlow's colocation attr)."""
        old = self._colocate
        self._colocate = _op_name(target)
        try:
            yield
        finally:
            self._colocate = old

    def op_seeds(self, seed=None):
        """(seed, seed2) for a random op, TensorFlow's rule: graph seed + op seed/counter."""
        if self.seed is not None:
            if seed is None:
                self._last_op_seed = len(self._ops)
                seed = self._last_op_seed
            return int(self.seed), int(seed)
        if seed is not None:
            return 87654321, int(seed)  # TensorFlow's DEFAULT_GRAPH_SEED
        return 0, 0

    # --- making ops ----------------------------------------------------------------------
    def make_op(self, op_type, inputs=(), attrs=None, name=None, out_dtypes=(),
                out_shapes=None, ctx=..., capture=True, control=True, exact_name=False):
        """Add a node; returns its Operation (outputs typed by `out_dtypes`).

        `inputs` are Tensors (or input strings for control-flow internals); inside a
        control-flow context outside tensors are captured first (Switch/Enter named
        `<node>/Switch`, `<node>/Enter`). Control inputs of enclosing
        `control_dependencies` blocks are added unless an input already carries them.
        """
        if exact_name:
            full = name
            self._names_in_use.setdefault(full.lower(), 1)
        elif name and name.endswith("/"):
            full = name[:-1]
        else:
            full = self.unique_name(name or op_type)
        if full in self.graph:
            raise TfgInputError(f"node name {full!r} is already in the graph")
        op_ctx = self.ctx if ctx is ... else ctx
        tensors = [t for t in inputs if isinstance(t, Tensor)]
        for t in tensors:
            if t.builder is not self:
                raise TfgInputError(f"tensor {t.name!r} belongs to another graph builder")
        if capture and op_ctx is not None:
            with self.name_scope(full + "/"):
                inputs = [op_ctx.add_value(t) if isinstance(t, Tensor) else t for t in inputs]
        elif capture:
            for t in tensors:
                if t.ctx is not None:
                    raise TfgInputError(
                        f"tensor {t.name!r} was made inside {t.ctx.describe()} and cannot be "
                        "used outside it; return it from that branch/loop body instead")
        in_strings = [t.input_string if isinstance(t, Tensor) else str(t) for t in inputs]
        input_ops = {t.op.name for t in inputs if isinstance(t, Tensor)}
        controls = []
        if control:
            for ctl in self._controllers:
                if any(n in ctl.seen for n in input_ops):
                    continue  # an input already runs after these control inputs
                controls.extend(n for n in ctl.names if n not in input_ops)
        if op_ctx is not None and capture:
            controls = op_ctx.fix_control_inputs(self, full, in_strings, controls)
        for ctl in self._controllers:
            ctl.seen.add(full)
        controls = sorted(set(controls))  # TensorFlow writes control inputs sorted
        all_attrs = dict(attrs or {})
        if self._colocate is not None and "_class" not in all_attrs:
            all_attrs["_class"] = [f"loc:@{self._colocate}".encode()]
        dev = self._device
        if self._colocate is not None and self._colocate in self.graph:
            dev = self.graph[self._colocate].device  # colocation beats device scopes, as in TF
        node = self.graph.add_node(full, op_type, in_strings + ["^" + c for c in controls],
                                   device=dev)
        for key, value in all_attrs.items():
            if isinstance(value, A):
                node.set_attr(key, value.value, value.kind)
                if value.kind == "shape":
                    # A scalar shape has no dims; mark the field set so `shape {}` is written.
                    node.attr[key].shape.SetInParent()
            else:
                node.set_attr(key, value)
        _fill_default_attrs(node)
        op = Operation(self, full, op_type, op_ctx)
        shapes = list(out_shapes) if out_shapes is not None else [None] * len(out_dtypes)
        op.outputs = [Tensor(op, i, dt, sh) for i, (dt, sh) in enumerate(zip(out_dtypes, shapes))]
        self._ops[full] = op
        return op


class A:
    """An attr value with an explicit AttrValue kind (e.g. A([], "list(int)"))."""

    __slots__ = ("value", "kind")

    def __init__(self, value, kind):
        self.value, self.kind = value, kind


def _fill_default_attrs(node):
    """Write the signature's defaulted attrs too, as TensorFlow's graph construction does."""
    if not has_op(node.op):
        return
    for name, ad in get_op(node.op).attrs.items():
        if ad.has_default and not node.has_attr(name) and ad.default is not None:
            kind = {"list(type)": "list(type)", "list(int)": "list(i)", "list(string)": "list(s)",
                    "list(float)": "list(f)", "list(bool)": "list(b)", "list(shape)": "list(shape)",
                    "type": "type", "int": "i", "float": "f", "bool": "b", "string": "s",
                    "shape": "shape"}.get(ad.type)
            if kind is None:
                continue
            node.set_attr(name, ad.default, kind)


def _op_name(x):
    if isinstance(x, Tensor):
        return x.op.name
    if isinstance(x, Operation):
        return x.name
    if hasattr(x, "op") and isinstance(getattr(x, "op"), Operation):  # Variable
        return x.op.name
    if isinstance(x, str):
        return x.lstrip("^").split(":")[0]
    raise TfgInputError(f"not an op or tensor: {x!r}")


# --- module-level helpers over the default builder -------------------------------------------
def is_tensorish(v):
    """Whether `v` is a Tensor or converts to one itself (a Variable)."""
    return isinstance(v, Tensor) or hasattr(v, "_as_tensor")


def make(op_type, inputs, attrs, name, out_dtypes=None, out_shapes=None):
    """Add `op_type` named by scope `name` (a trailing '/' means exactly that name).

    Output dtypes (unless given) come from the op's signature and output shapes (unless given)
    from its shape function, the one shape engine, which reads constant inputs' values as
    TensorFlow's graph construction does:

        >>> make("MatMul", [x, w], {"T": DType.FLOAT}, "dense").outputs[0].shape
        (None, 10)            # x: [None, 3], w: [3, 10]

    Inputs the shape function rejects raise TfgInputError naming the node, and leave the
    graph as it was.
    """
    b = get_default_builder()
    op = b.make_op(op_type, inputs, attrs, name=name, out_dtypes=out_dtypes or [],
                   out_shapes=out_shapes)
    if out_dtypes is not None and out_shapes is not None:
        return op
    node = b.graph[op.name]
    try:
        dtypes = [t.base for t in output_dtypes(node)] if out_dtypes is None else out_dtypes
        shapes = _inferred_shapes(b, node) if out_shapes is None else out_shapes
    except TfgInputError as e:
        b.graph.remove_node(op.name)
        del b._ops[op.name]
        named = str(e) if str(e).startswith(f"node {op.name!r}") else \
            f"node {op.name!r} ({op_type}): {e}"  # (inference's errors name it already)
        raise TfgInputError(named) from None
    op.outputs = [Tensor(op, i, dt, sh) for i, (dt, sh) in enumerate(zip(dtypes, shapes))]
    return op


def _inferred_shapes(b, node):
    if not has_op(node.op):  # an op tfg has no signature for: shapes unknown, as before
        return [None] * len(b._ops[node.name].outputs)
    infos = []
    for ref in node.input_refs:
        if ref.port == CONTROL:
            continue
        src, op = b.graph.get(ref.node), b._ops.get(ref.node)
        if op is None or src is None or ref.port >= len(op.outputs):
            infos.append(TensorInfo(None, None))  # a control-flow internal named by string
            continue
        t = op.outputs[ref.port]
        value = src.get_attr("value", None) if src.op == "Const" else None
        infos.append(TensorInfo(t.dtype, t.shape, value))
    return [info.shape for info in infer_node(node, infos, strict=True)]


def name_scope(name):
    return get_default_builder().name_scope(name)


def control_dependencies(deps):
    return get_default_builder().control_dependencies(deps)


def device(spec):
    return get_default_builder().device(spec)


def colocate_with(target):
    return get_default_builder().colocate_with(target)


__all__ = ["GraphBuilder", "Tensor", "Operation", "A", "Shape", "get_default_builder", "make",
           "reset_default_graph", "name_scope", "control_dependencies", "device",
           "colocate_with"]
