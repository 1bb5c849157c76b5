"""Arithmetic simplifications (Grappler's ArithmeticOptimizer stages), as rewrite rules.

    Add(Add(a, b), c)             -> AddN(a, b, c)          (leaves grouped by shape)
    AddN(x, x, x) / Add(x, x)     -> Mul(3, x) / Mul(2, x)
    AddN(x*c1, c2*x, x*c3)        -> x * AddN(c1, c2, c3)
    Neg(Neg(x)), Reciprocal(Reciprocal(x)), LogicalNot(LogicalNot(x)), inverse Transposes -> x
    Cast(x: T -> T) -> x;  Reshape(Reshape(x)) -> Reshape(x);  Reshape to x's shape -> x
    Reshape(Sum(x[32,1], [0], keep_dims), []) -> Sum(x, [0, 1])  (a keep_dims reduction whose
    Reshape only drops dims: one reduction over the dropped axes; Mean/Prod/Max/Min likewise)
    a + Neg(b) -> a - b;  Mul(x, x) -> Square(x);  LogicalNot(Equal) -> NotEqual (and the
    orderings for non-float types);  x / Sqrt(y) -> x * Rsqrt(y);  Pow(x, 2|1|.5|0|-.5|-1) ->
    Square/x/Sqrt/OnesLike/Rsqrt/Reciprocal;  Log(x + 1) -> Log1p(x);  Exp(x) - 1 -> Expm1(x);
    Log(Softmax(x)) -> LogSoftmax(x);  MatMul(Transpose(a), b) -> MatMul(a, b, transpose_a)

The rewritten node keeps its name (fetches survive); new nodes are named
`ArithmeticOptimizer/<Stage>_<node>`. Absorbed interior nodes must have one consumer, no control
edges, not be preserved, and sit on the same device.
"""
import numpy as np

from tfg.graphdef.names import TensorRef, input_string
from tfg.passes.rewrite import Pat
from tfg.passes.shapes import broadcasts_into
from tfg.schemas.dtypes import DType

_ADD = ("Add", "AddV2")
_ADDS = _ADD + ("AddN",)


def _s(ref):
    return input_string(ref.node, ref.port)


def _ctrls(node):
    return ["^" + c for c in node.control_inputs]


def _same_dev(*nodes):
    return len({n.device for n in nodes}) == 1


def _float(ctx, ref):
    dt = ctx.dtype(ref)
    return dt is not None and (dt.is_floating or dt.is_complex)


def _absorb(ctx, node, *interior):
    for n in interior:
        ctx.remove_if_dead(n.name)
    return True


# --- additions ---------------------------------------------------------------------------------

def _add_leaves(ctx, node, root=True):
    """Leaves of the Add tree under `node` (through interior adds on the same device)."""
    out, interior = [], []
    for ref in node.data_inputs:
        child = ctx.graph.get(ref.node)
        if (ref.port == 0 and child is not None and child.op in _ADDS and ctx.is_interior(child)
                and _same_dev(child, node)):
            leaves, inner = _add_leaves(ctx, child, False)
            out += leaves
            interior += [child] + inner
        else:
            out.append(ref)
    return out, interior


def add_ops_rewrite(ctx, node):
    """Add trees -> AddN per leaf shape, then broadcasting Adds from the smallest shape up."""
    leaves, interior = _add_leaves(ctx, node)
    if len(set(map(tuple, leaves))) == 1 and len(leaves) > 1:
        return aggregate_same(ctx, node, leaves, interior)
    if not interior:
        return False
    shapes = [ctx.full_shape(r) for r in leaves]
    if any(s is None for s in shapes):
        return False
    groups = {}
    for ref, shape in zip(leaves, shapes):
        groups.setdefault(shape, []).append(ref)
    order = sorted(groups, key=lambda s: (int(np.prod(s)) if s else 1, len(s)))
    t = node.get_attr("T")
    if len(order) == 1:
        ctx.morph(node, "AddN", [_s(r) for r in leaves] + _ctrls(node), {"T": t, "N": len(leaves)})
        return _absorb(ctx, node, *interior)
    partial = []
    for shape in order:
        refs = groups[shape]
        if len(refs) == 1:
            partial.append(refs[0])
            continue
        name = ctx.stage_name("AddOpsRewrite", f"Add_{'x'.join(map(str, shape)) or 'scalar'}_"
                              f"{node.name}")
        ctx.add_node(name, "AddN", [_s(r) for r in refs], {"T": t, "N": len(refs)}, node.device)
        partial.append(TensorRef(name, 0))
    acc = partial[0]
    for i, ref in enumerate(partial[1:-1]):
        name = ctx.stage_name("AddOpsRewrite", f"Leaf_{i}_{node.name}")
        ctx.add_node(name, "AddV2", [_s(acc), _s(ref)], {"T": t}, node.device)
        acc = TensorRef(name, 0)
    ctx.morph(node, "AddV2", [_s(acc), _s(partial[-1])] + _ctrls(node), {"T": t})
    return _absorb(ctx, node, *interior)


def aggregate_same(ctx, node, leaves=None, interior=()):
    """AddN(x, ..., x) -> Mul(N, x)."""
    leaves = leaves or node.data_inputs
    x = leaves[0]
    dt = ctx.dtype(TensorRef(node.name, 0))
    if dt is None or dt == DType.BOOL or len(leaves) < 2 or any(r != x for r in leaves):
        return False
    c = ctx.new_const(ctx.stage_name("AggregationConst", node.name), np.asarray(len(leaves)),
                      dt, node.device, anchors=[x])
    ctx.morph(node, "Mul", [c.name, _s(x)] + _ctrls(node), {"T": dt.base})
    return _absorb(ctx, node, *interior)


def hoist_common_factor(ctx, node):
    """AddN(x*y1, y2*x, ...) -> x * AddN(y1, y2, ...) (all y of one known shape)."""
    refs = node.data_inputs
    muls = [ctx.graph.get(r.node) for r in refs]
    if len(refs) < 2 or any(m is None or m.op != "Mul" or r.port != 0 or not ctx.is_interior(m)
                            or not _same_dev(m, node) for m, r in zip(muls, refs)):
        return False
    if len({m.name for m in muls}) != len(muls):
        return False
    common = set(muls[0].data_inputs)
    for m in muls[1:]:
        common &= set(m.data_inputs)
    if not common:
        return False
    x = sorted(common)[0]
    ys = []
    for m in muls:
        a, b = m.data_inputs
        ys.append(b if a == x else a)
    shapes = {ctx.full_shape(y) for y in ys}
    sx = ctx.shape(x)
    if len(shapes) != 1 or None in shapes or sx is None:
        return False
    (sy,) = shapes
    if not broadcasts_into(sx, sy) and not broadcasts_into(sy, sx):
        return False
    t = node.get_attr("T")
    name = ctx.stage_name("HoistCommonFactor", f"Add_{node.name}")
    ctx.add_node(name, "AddN", [_s(y) for y in ys], {"T": t, "N": len(ys)}, node.device)
    ctx.morph(node, "Mul", [_s(x), name] + _ctrls(node), {"T": t})
    return _absorb(ctx, node, *muls)


def add_neg(ctx, node, a, neg):
    (b,) = neg.data_inputs
    if not _same_dev(node, neg):
        return False
    ctx.morph(node, "Sub", [_s(a), _s(b)] + _ctrls(node), {"T": node.get_attr("T")})
    return _absorb(ctx, node, neg)


# --- involutions and no-ops ---------------------------------------------------------------------

def involution(ctx, node, inner):
    if inner.op != node.op or not _same_dev(node, inner):
        return False
    return ctx.replace_with(node, inner.data_inputs[0]) and _absorb(ctx, node, inner)


def inverse_transposes(ctx, node, inner, p2):
    x, p1 = inner.data_inputs
    v1, v2 = ctx.const_value(p1), ctx.const_value(p2)
    if v1 is None or v1.shape != v2.shape or not _same_dev(node, inner):
        return False
    if not np.array_equal(v1.ravel()[v2.ravel()], np.arange(v2.size)):
        return False
    ctx.replace_with(node, x)
    return _absorb(ctx, node, inner)


def same_type_cast(ctx, node, x):
    src = node.get_attr("SrcT", None) if node.op == "Cast" else node.get_attr("T", None)
    dst = node.get_attr("DstT", None) if node.op == "Cast" else node.get_attr("type", None)
    if src is None or src != dst or node.get_attr("Truncate", False):
        return False
    return ctx.replace_with(node, x)


def reshape_reshape(ctx, node, inner, s2):
    if not _same_dev(node, inner):
        return False
    x = inner.data_inputs[0]
    ctx.set_inputs(node, [_s(x), _s(s2)] + _ctrls(node))
    return _absorb(ctx, node, inner)


def noop_reshape(ctx, node, x, s):
    sx = ctx.full_shape(x)
    if sx is None or sx != ctx.full_shape(TensorRef(node.name, 0)):
        return False
    extra = [] if ctx.const_value(s) is not None else [ctx.control_dep_for(s)]
    producers = [s.node]
    ctx.replace_with(node, x, extra)
    return _absorb(ctx, node, *[ctx.graph[p] for p in producers if p in ctx.graph])


_REDUCTIONS = ("Sum", "Mean", "Prod", "Max", "Min")


def _squeezed_axes(shape, axes, target):
    """Axes of `shape` to drop so that it becomes `target`: all of `axes` (reduced to 1) plus
    size-1 dims; None when `target` is not `shape` with dims dropped that way."""
    dropped, j = [], 0
    for i, d in enumerate(shape):
        if i in axes:
            dropped.append(i)
        elif j < len(target) and d == target[j]:
            j += 1
        elif d == 1:
            dropped.append(i)
        else:
            return None
    return dropped if j == len(target) else None


def reduce_then_squeeze(ctx, node, red, s):
    if not _same_dev(node, red) or not red.get_attr("keep_dims", False):
        return False
    x, axes_ref = red.data_inputs
    sx, target = ctx.full_shape(x), ctx.full_shape(TensorRef(node.name, 0))
    axes = ctx.const_value(axes_ref)
    if sx is None or target is None or axes is None or not sx:
        return False
    axes = {int(a) % len(sx) for a in np.ravel(axes)}
    dropped = _squeezed_axes(sx, axes, tuple(target))
    if dropped is None:
        return False
    # Reducing over a size-1 axis leaves the values as they are, for every reduction here.
    tidx = red.get_attr("Tidx", DType.INT32)
    if sorted(axes) == dropped:
        new_axes = axes_ref
    else:
        new_axes = TensorRef(ctx.new_const(ctx.stage_name("ReduceSqueeze", node.name),
                                           np.asarray(dropped), tidx, device=node.device,
                                           inherit=[axes_ref], anchors=[x]).name, 0)
    extra = [] if ctx.const_value(s) is not None else [ctx.control_dep_for(s)]
    ctx.morph(node, red.op, [_s(x), _s(new_axes)] + extra + _ctrls(node),
              {"T": red.get_attr("T"), "Tidx": tidx, "keep_dims": False})
    _absorb(ctx, node, red)
    ctx.remove_if_dead(axes_ref.node)
    ctx.remove_if_dead(s.node)
    return True


# --- op replacements ------------------------------------------------------------------------------

def mul_square(ctx, node, x):
    ctx.morph(node, "Square", [_s(x)] + _ctrls(node), {"T": node.get_attr("T")})
    return True


_INVERSE_CMP = {"Equal": "NotEqual", "NotEqual": "Equal"}
_INVERSE_ORDER = {"Less": "GreaterEqual", "GreaterEqual": "Less", "Greater": "LessEqual",
                  "LessEqual": "Greater"}


def logical_not_cmp(ctx, node, cmp):
    inv = _INVERSE_CMP.get(cmp.op)
    if inv is None and not _float(ctx, cmp.data_inputs[0]):
        inv = _INVERSE_ORDER.get(cmp.op)  # not(a < b) != (a >= b) when either is NaN
    if inv is None or not _same_dev(node, cmp):
        return False
    attrs = {k: cmp.get_attr(k) for k in cmp.attr if not k.startswith("_")}
    ctx.morph(node, inv, [_s(r) for r in cmp.data_inputs] + _ctrls(node), attrs)
    return _absorb(ctx, node, cmp)


def sqrt_div(ctx, node, x, sqrt):
    if not _float(ctx, x) or not _same_dev(node, sqrt):
        return False
    name = ctx.stage_name("SqrtDivToRsqrtMul", node.name)
    ctx.add_node(name, "Rsqrt", [_s(sqrt.data_inputs[0])], {"T": sqrt.get_attr("T")},
                 sqrt.device)
    ctx.morph(node, "Mul", [_s(x), name] + _ctrls(node), {"T": node.get_attr("T")})
    return _absorb(ctx, node, sqrt)


_POW = {2.0: "Square", 0.5: "Sqrt", -0.5: "Rsqrt", -1.0: "Reciprocal", 0.0: "OnesLike"}


def pow_const(ctx, node, x, y):
    v = ctx.const_value(y)
    if v is None or v.size == 0 or not _float(ctx, x) or not np.all(v == v.ravel()[0]):
        return False
    if not broadcasts_into(v.shape, ctx.shape(x)):
        return False
    e = float(np.real(v.ravel()[0]))
    if e == 1.0:
        producers = [y.node]
        ctx.replace_with(node, x)
        return _absorb(ctx, node, *[ctx.graph[p] for p in producers if p in ctx.graph])
    op = _POW.get(e)
    if op is None or not ctx.op_available(op):
        return False
    ctx.morph(node, op, [_s(x)] + _ctrls(node), {"T": node.get_attr("T")})
    ctx.remove_if_dead(y.node)
    return True


def log1p(ctx, node, inner):
    x = [r for r in inner.data_inputs if ctx.const_value(r) is None]
    if len(x) != 1 or len(inner.data_inputs) != 2 or not _same_dev(node, inner):
        return False
    one = [r for r in inner.data_inputs if r != x[0]][0]
    v = ctx.const_value(one)
    if (not np.all(v == 1) or not _float(ctx, x[0])
            or not broadcasts_into(v.shape, ctx.shape(x[0]))):
        return False
    ctx.morph(node, "Log1p", [_s(x[0])] + _ctrls(node), {"T": node.get_attr("T")})
    ctx.remove_if_dead(inner.name)
    ctx.remove_if_dead(one.node)
    return True


def expm1(ctx, node, inner, one):
    v = ctx.const_value(one)
    x = inner.data_inputs[0]
    if (not np.all(v == 1) or not _float(ctx, x) or not broadcasts_into(v.shape, ctx.shape(x))
            or not _same_dev(node, inner)):
        return False
    ctx.morph(node, "Expm1", [_s(x)] + _ctrls(node), {"T": node.get_attr("T")})
    ctx.remove_if_dead(one.node)
    return _absorb(ctx, node, inner)


def log_softmax(ctx, node, inner):
    if not _same_dev(node, inner) or not ctx.op_available("LogSoftmax"):
        return False
    ctx.morph(node, "LogSoftmax", [_s(inner.data_inputs[0])] + _ctrls(node),
              {"T": node.get_attr("T")})
    return _absorb(ctx, node, inner)


def transpose_into_matmul(ctx, node):
    a, b = node.data_inputs
    for idx, ref, flag in ((0, a, "transpose_a"), (1, b, "transpose_b")):
        t = ctx.graph.get(ref.node)
        if t is None or t.op != "Transpose" or ref.port != 0 or not ctx.is_interior(t):
            continue
        x, perm = t.data_inputs
        pv = ctx.const_value(perm)
        if pv is None or list(pv.ravel()) != [1, 0] or not _same_dev(node, t):
            continue
        ins = list(node.inputs)
        ins[idx] = _s(x)
        ctx.set_inputs(node, ins)
        node.set_attr(flag, not bool(node.get_attr(flag, False)))
        _absorb(ctx, node, t)
        ctx.remove_if_dead(perm.node)
        return True
    return False


def rules():
    v, c = Pat.var, Pat.const
    interior = lambda ops, name: Pat(ops, name=name, one_consumer=True)  # noqa: E731
    return [
        (Pat(_ADDS), add_ops_rewrite),
        (Pat(_ADDS), hoist_common_factor),
        (Pat(_ADD, [v("a"), interior("Neg", "neg")], commutative=True), add_neg),
        (Pat(("Neg", "Reciprocal", "LogicalNot", "Conj"),
             [interior(("Neg", "Reciprocal", "LogicalNot", "Conj"), "inner")]), involution),
        (Pat("Transpose", [interior("Transpose", "inner"), c("p2")]), inverse_transposes),
        (Pat(("Cast", "Bitcast"), [v("x")]), same_type_cast),
        (Pat("Reshape", [interior("Reshape", "inner"), v("s2")]), reshape_reshape),
        (Pat("Reshape", [v("x"), v("s")]), noop_reshape),
        (Pat("Reshape", [interior(_REDUCTIONS, "red"), v("s")]), reduce_then_squeeze),
        (Pat("Mul", [v("x"), v("x")]), mul_square),
        (Pat("LogicalNot", [interior(("Equal", "NotEqual", "Less", "LessEqual", "Greater",
                                      "GreaterEqual"), "cmp")]), logical_not_cmp),
        (Pat(("Div", "RealDiv"), [v("x"), interior("Sqrt", "sqrt")]), sqrt_div),
        (Pat("Pow", [v("x"), c("y")]), pow_const),
        (Pat("Log", [interior(_ADD, "inner")]), log1p),
        (Pat("Sub", [interior("Exp", "inner"), c("one")]), expm1),
        (Pat("Log", [interior("Softmax", "inner")]), log_softmax),
        (Pat("MatMul"), transpose_into_matmul),
    ]
