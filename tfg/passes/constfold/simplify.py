"""Constant-folding simplifications: rewrites that need some (not all) inputs constant.

    x * 1, x + 0, x - 0, x / 1     -> Identity(x)   (BroadcastTo when the constant widens x;
                                      Snapshot(x) where a node writes a variable in place)
    x * 0                          -> zeros          (output shape fully known)
    0 - y -> Neg(y);  1 / y -> Reciprocal(y);  x / 2.0 -> x * 0.5 (floats only)
    1 + (2 + x) -> x + 3;  5 * (4 * y) -> y * 20   (5 * (4 + x) is left alone)
    Transpose/ReverseV2/Slice/Tile/Pad/Squeeze/Reshape/Split(1) that change nothing -> Identity
    Sum/Mean/... over no axes -> Identity;  Pack(x) -> ExpandDims(x, axis)
    Select with a constant predicate -> the chosen input
    Mul(Conv2D(x, W), c) -> Conv2D(x, W * c);  Concat/AddN: adjacent constants merged

Each rule is a (Pat, callback) pair for the rewrite engine. A bypassed constant contributes its
own control inputs; a bypassed non-constant tensor becomes a `^` dependency.
"""
import numpy as np

from tfg.graphdef.names import TensorRef, input_string
from tfg.passes.rewrite import Pat
from tfg.passes.shapes import broadcast_shapes, broadcasts_into
from tfg.schemas.dtypes import DType

_ADD = ("Add", "AddV2")
_DIV = ("Div", "RealDiv")


def deps_of(ctx, refs):
    """Control inputs that stand for bypassed data inputs `refs`."""
    out = []
    for ref in refs:
        node = ctx.graph.get(ref.node)
        if node is not None and node.op in ("Const", "HostConst"):
            out += ["^" + c for c in node.control_inputs]
        else:
            out.append(ctx.control_dep_for(ref))
    return out


def forward(ctx, node, x, others):
    """node's output := tensor x; the other data inputs become control dependencies."""
    extra = deps_of(ctx, others)
    producers = [r.node for r in node.data_inputs]
    ctx.replace_with(node, x, extra)
    for p in producers:
        ctx.remove_if_dead(p)
    return True


def _all(v, x):
    return v is not None and v.dtype != object and v.size > 0 and bool(np.all(v == x))


def _is_float(ctx, ref):
    dt = ctx.dtype(ref)
    return dt is not None and (dt.is_floating or dt.is_complex)


def _same_device(ctx, *nodes):
    return len({n.device for n in nodes}) == 1


# --- identity ops --------------------------------------------------------------------------

def _identity_if(pred):
    def fn(ctx, node, x, a):
        v = ctx.const_value(a)
        shape = ctx.shape(x)
        if v is None or not pred(v, shape, node):
            return False
        return forward(ctx, node, x, [a])
    return fn


def _perm_identity(v, shape, node):
    return bool(np.array_equal(v.ravel(), np.arange(v.size)))


def _reverse_identity(v, shape, node):
    if v.size == 0:
        return True
    if shape is None:
        return False
    axes = [int(a) % len(shape) for a in v.ravel()] if shape else []
    return all(shape[a] == 1 for a in axes)


def _all_one(v, shape, node):
    return _all(v, 1)


def _all_zero(v, shape, node):
    return v.size == 0 or _all(v, 0)


def _reshape_identity(v, shape, node):
    if shape is None or any(d is None for d in shape):
        return False
    target = [int(d) for d in v.ravel()]
    if target.count(-1) == 1:
        rest = int(np.prod([d for d in target if d != -1])) if len(target) > 1 else 1
        total = int(np.prod(shape)) if shape else 1
        if rest == 0:
            return False
        target[target.index(-1)] = total // rest
    return tuple(target) == tuple(shape)


def _reduce_identity(v, shape, node):
    if v.size == 0:
        return True
    if shape is None or not node.get_attr("keep_dims", False):
        return False
    return all(shape[int(a) % len(shape)] == 1 for a in v.ravel()) if shape else True


def slice_identity(ctx, node, x, b, s):
    begin, size = ctx.const_value(b), ctx.const_value(s)
    if begin is None or size is None or not _all_zero(begin, None, node):
        return False
    shape = ctx.shape(x)
    if not _all(size, -1) and (shape is None or
                               any(sz != -1 and sz != d for sz, d in zip(size.ravel(), shape))):
        return False
    return forward(ctx, node, x, [b, s])


def squeeze_identity(ctx, node, x):
    shape = ctx.full_shape(x)
    if shape is None:
        return False
    # Explicit axes always drop dims or fail (one out of range, or not of size 1, as
    # TensorFlow says): never an identity. Before, squeeze_dims=[0, 5] of a [2, 3] was
    # bypassed and the run gave the input back.
    if node.get_attr("squeeze_dims", []) or 1 in shape:
        return False
    return forward(ctx, node, x, [])


def split_one(ctx, node, axis, x):
    if node.get_attr("num_split", 0) != 1:
        return False
    return forward(ctx, node, x, [axis])


def splitv_one(ctx, node, x, sizes, axis):
    if node.get_attr("num_split", 0) != 1:
        return False
    return forward(ctx, node, x, [sizes, axis])


def pack_one(ctx, node, x):
    if not ctx.op_available("ExpandDims"):
        return False
    axis = int(node.get_attr("axis", 0))
    c = ctx.new_const(ctx.new_name(f"ConstantFolding/{node.name}_const_axis"), np.int32(axis),
                      DType.INT32, node.device, anchors=[x])
    ctx.morph(node, "ExpandDims", [input_string(x.node, x.port), c.name] +
              ["^" + n for n in node.control_inputs],
              {"T": node.get_attr("T"), "Tdim": DType.INT32})
    return True


def select_const(ctx, node, p, t, e):
    v = ctx.const_value(p)
    if v is None or v.size == 0 or not (np.all(v) or not np.any(v)):
        return False
    chosen, other = (t, e) if np.all(v) else (e, t)
    if node.op == "SelectV2" or v.ndim > 0:
        st, se, sp, sc = ctx.full_shape(t), ctx.full_shape(e), ctx.shape(p), ctx.full_shape(chosen)
        if st is None or se is None or sp is None or sc is None:
            return False
        out = broadcast_shapes(broadcast_shapes(sp, st), se)
        if out != sc:
            return False
    return forward(ctx, node, chosen, [p, other])


# --- arithmetic with constants ---------------------------------------------------------------

def neutral(ctx, node, x, c):
    """x*1, 1*x, x+0, 0+x, x-0, x/1 -> x."""
    v = ctx.const_value(c)
    op = node.op
    c_first = node.data_inputs[0] == c and node.data_inputs[1] == x
    if op in _ADD:
        ok = _all(v, 0)
    elif op == "Sub":
        ok = _all(v, 0) and not c_first
    elif op == "Mul":
        ok = _all(v, 1)
    else:  # Div/RealDiv
        ok = _all(v, 1) and not c_first
    if not ok:
        return False
    sx, sc = ctx.shape(x), tuple(v.shape)
    if sx is not None and broadcasts_into(sc, sx):
        if ctx.writes_inputs():  # x may be a variable's buffer: a copy of it (rewrite.py)
            ctrls = ["^" + n for n in node.control_inputs] + deps_of(ctx, [c])
            ctx.morph(node, "Snapshot", [input_string(x.node, x.port)] + ctrls,
                      {"T": node.get_attr("T")})
            ctx.remove_if_dead(c.node)
            return True
        return forward(ctx, node, x, [c])
    out = ctx.full_shape(TensorRef(node.name, 0))
    if out is None and sx is not None and all(d is not None for d in sx):
        try:
            out = broadcast_shapes(sx, sc)
        except ValueError:
            return False
    if out is None or not ctx.op_available("BroadcastTo"):
        return False
    shape = ctx.new_const(ctx.new_name(f"ConstantFolding/{node.name}-broadcastto_shape"),
                          np.array(out, np.int32), DType.INT32, node.device, inherit=[c],
                          anchors=[x])
    ctrls = ["^" + n for n in node.control_inputs] + deps_of(ctx, [c])
    ctx.morph(node, "BroadcastTo", [input_string(x.node, x.port), shape.name] + ctrls,
              {"T": node.get_attr("T"), "Tidx": DType.INT32})
    ctx.remove_if_dead(c.node)
    return True


def times_zero(ctx, node, x, c):
    v = ctx.const_value(c)
    if not _all(v, 0):
        return False
    sx = ctx.full_shape(x)
    if sx is None:
        return False
    try:
        out = broadcast_shapes(sx, tuple(v.shape))
    except ValueError:
        return False
    dtype = ctx.dtype(TensorRef(node.name, 0))
    if dtype is None:
        return False
    ctrls = ["^" + n for n in node.control_inputs] + deps_of(ctx, [x, c])
    ctx.morph(node, "Const", ctrls, {"dtype": dtype.base, "value": np.zeros(out, dtype.np)})
    ctx.remove_if_dead(c.node)
    ctx.remove_if_dead(x.node)
    return True


def zero_minus(ctx, node, c, y):
    v = ctx.const_value(c)
    if not _all(v, 0) or not broadcasts_into(tuple(v.shape), ctx.shape(y)):
        return False
    ctx.morph(node, "Neg", [input_string(y.node, y.port)] + ["^" + n for n in node.control_inputs]
              + deps_of(ctx, [c]), {"T": node.get_attr("T")})
    ctx.remove_if_dead(c.node)
    return True


def one_over(ctx, node, c, y):
    v = ctx.const_value(c)
    if (not _all(v, 1) or not _is_float(ctx, y)
            or not broadcasts_into(tuple(v.shape), ctx.shape(y))):
        return False
    ctx.morph(node, "Reciprocal", [input_string(y.node, y.port)] +
              ["^" + n for n in node.control_inputs] + deps_of(ctx, [c]),
              {"T": node.get_attr("T")})
    ctx.remove_if_dead(c.node)
    return True


def div_by_const(ctx, node, x, c):
    v = ctx.const_value(c)
    if v is None or not _is_float(ctx, c) or _all(v, 1):
        return False
    with np.errstate(divide="ignore", over="ignore", invalid="ignore"):
        recip = (np.ones_like(v) / v).astype(v.dtype)
    r = ctx.new_const(ctx.new_name(f"ConstantFolding/{node.name}_recip"), recip,
                      DType.from_numpy(v.dtype), node.device, inherit=[c], anchors=[x])
    ctx.morph(node, "Mul", [input_string(x.node, x.port), r.name] +
              ["^" + n for n in node.control_inputs], {"T": node.get_attr("T")})
    ctx.remove_if_dead(c.node)
    return True


def push_down(ctx, node, c1, inner):
    """c1 op (c2 op x) -> x op (c1 op c2) for op in Add/Mul, keeping x's shape."""
    ops = _ADD if node.op in _ADD else (node.op,)
    if inner.op not in ops or not _same_device(ctx, node, inner):
        return False
    refs = inner.data_inputs
    consts = [r for r in refs if ctx.const_value(r) is not None]
    if len(consts) != 1:
        return False
    c2 = consts[0]
    x = refs[1] if refs[0] == c2 else refs[0]
    v1, v2 = ctx.const_value(c1), ctx.const_value(c2)
    sx = ctx.shape(x)
    if not (broadcasts_into(v1.shape, sx) and broadcasts_into(v2.shape, sx)):
        return False
    value = (v1 + v2) if node.op in _ADD else (v1 * v2)
    value = np.asarray(value, dtype=v1.dtype)
    c = ctx.new_const(ctx.new_name(f"ConstantFolding/{node.name}_const"), value,
                      DType.from_numpy(value.dtype), node.device, inherit=[c1, c2],
                      anchors=[x])
    ctx.set_inputs(node, [input_string(x.node, x.port), c.name] +
                   ["^" + n for n in node.control_inputs])
    for name in (inner.name, c1.node, c2.node):
        ctx.remove_if_dead(name)
    return True


def mul_into_conv(ctx, node, conv, c):
    """Mul(Conv2D(x, W), c) -> Conv2D(x, W * c) when c scales output channels (NHWC)."""
    v = ctx.const_value(c)
    if conv.get_attr("data_format", b"NHWC") != b"NHWC" or not _same_device(ctx, node, conv):
        return False
    x, w = conv.data_inputs
    wv = ctx.const_value(w)
    if wv is None or wv.ndim != 4 or not _is_float(ctx, w):
        return False
    if v.size != 1 and (v.ndim == 0 or v.shape[-1] != wv.shape[-1]
                        or any(d != 1 for d in v.shape[:-1])):
        return False
    scaled = (wv * v.reshape(-1)).astype(wv.dtype)
    nw = ctx.new_const(ctx.new_name(f"ConstantFolding/{conv.name}_scaled_filter"), scaled,
                       DType.from_numpy(wv.dtype), conv.device, inherit=[w, c], anchors=[x])
    attrs = {k: conv.get_attr(k) for k in conv.attr if not k.startswith("_")}
    ctx.morph(node, "Conv2D", [input_string(x.node, x.port), nw.name] +
              ["^" + n for n in node.control_inputs], attrs)
    for name in (conv.name, w.node, c.node):
        ctx.remove_if_dead(name)
    return True


def merge_const_runs(ctx, node):
    """ConcatV2 / AddN with several constant inputs: one Const for each run (Concat) or for
    all of them (AddN)."""
    refs = node.data_inputs
    if node.op == "ConcatV2":
        values, axis_ref = refs[:-1], refs[-1]
        axis = ctx.const_value(axis_ref)
        if axis is None:
            return False
    else:
        values, axis_ref = refs, None
    is_c = [ctx.const_value(r) is not None for r in values]
    if all(is_c) or sum(is_c) < 2:
        return False
    if node.op == "AddN":
        consts = [r for r, k in zip(values, is_c) if k]
        shapes = {ctx.const_value(r).shape for r in consts}
        if len(shapes) != 1:
            return False
        total = np.sum([ctx.const_value(r) for r in consts], axis=0).astype(
            ctx.const_value(consts[0]).dtype)
        c = ctx.new_const(ctx.new_name(f"ConstantFolding/{node.name}_partial_split_{len(values)}"),
                          total, DType.from_numpy(total.dtype), node.device, inherit=consts,
                          anchors=[values[0]])
        new_values = [r for r, k in zip(values, is_c) if not k] + [TensorRef(c.name, 0)]
        removed = consts
    else:
        new_values, removed, i = [], [], 0
        while i < len(values):
            j = i
            while j < len(values) and is_c[j]:
                j += 1
            if j - i >= 2:
                run = values[i:j]
                joined = np.concatenate([ctx.const_value(r) for r in run], axis=int(axis))
                c = ctx.new_const(ctx.new_name(f"ConstantFolding/{node.name}_partial_split_{i}"),
                                  joined, DType.from_numpy(joined.dtype), node.device,
                                  inherit=run, anchors=[values[0]])
                new_values.append(TensorRef(c.name, 0))
                removed += run
                i = j
            else:
                new_values.append(values[i])
                i += 1
        if not removed:
            return False
    tail = [axis_ref] if axis_ref is not None else []
    ctx.set_inputs(node, [input_string(r.node, r.port) for r in new_values + tail] +
                   ["^" + n for n in node.control_inputs])
    node.set_attr("N", len(new_values))
    for r in removed:
        ctx.remove_if_dead(r.node)
    return True


def rules():
    v, c = Pat.var, Pat.const
    ident = lambda ops, pred: (Pat(ops, [v("x"), c("a")]), _identity_if(pred))  # noqa: E731
    return [
        ident("Transpose", _perm_identity),
        ident("ReverseV2", _reverse_identity),
        ident("Tile", _all_one),
        ident(("Pad", "MirrorPad"), _all_zero),
        ident("Reshape", _reshape_identity),
        ident(("Sum", "Prod", "Max", "Min", "Mean", "All", "Any"), _reduce_identity),
        (Pat("Slice", [v("x"), c("b"), c("s")]), slice_identity),
        (Pat("Squeeze", [v("x")]), squeeze_identity),
        (Pat("Split", [c("axis"), v("x")]), split_one),
        (Pat("SplitV", [v("x"), c("sizes"), c("axis")]), splitv_one),
        (Pat("Pack", [v("x")]), pack_one),
        (Pat(("Select", "SelectV2"), [c("p"), v("t"), v("e")]), select_const),
        (Pat(_ADD + ("Sub", "Mul") + _DIV, [v("x"), c("c")], commutative=True), neutral),
        (Pat("Mul", [v("x"), c("c")], commutative=True), times_zero),
        (Pat("Sub", [c("c"), v("y")]), zero_minus),
        (Pat(_DIV, [c("c"), v("y")]), one_over),
        (Pat(_DIV, [v("x"), c("c")]), div_by_const),
        (Pat(_ADD + ("Mul",), [c("c1"), Pat(_ADD + ("Mul",), name="inner", one_consumer=True)],
             commutative=True), push_down),
        (Pat("Mul", [Pat("Conv2D", name="conv", one_consumer=True), c("c")], commutative=True),
         mul_into_conv),
        (Pat(("ConcatV2", "AddN")), merge_const_runs),
    ]
