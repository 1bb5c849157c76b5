"""Fold per-channel scales and shifts into the convolution or matmul before them: what an
inference batch normalization (Keras writes it as `x * m + s` with constant m, s) becomes
once constant folding has evaluated m and s. TensorFlow's Grappler folds the Conv2D scale
(ConstantFolding's "Mul(Conv2D, c)") and the remapper fuses a BiasAdd; this pass also covers
depthwise convolutions, MatMul, a shift written as Add/Sub, and chains of them, so that the
remapper sees Conv + BiasAdd + activation.

    before: c = Conv2D(x, W); m = Mul(c, s); a = AddV2(m, t); r = Relu(a)      (s, t Const [C])
    after:  c = Conv2D(x, W * s); a = BiasAdd(c, t); r = Relu(a)
            (the remapper then makes r = _FusedConv2D(x, W * s, t, fused_ops=[BiasAdd, Relu]))

    Mul(base(x, W), s)              -> base(x, W * s)
    Mul(BiasAdd(base(x, W), b), s)  -> BiasAdd(base(x, W * s), b * s)
    Add|AddV2|Sub(base(x, W), t)    -> BiasAdd(base(x, W), +-t)
    Add|AddV2|Sub(BiasAdd(y, b), t) -> BiasAdd(y, b +- t)

`base` is Conv2D or DepthwiseConv2dNative in NHWC, or MatMul (not transpose_a), with a
constant float filter; s and t are constants varying along the channel (last) axis only
(shape [C], [1, C], [1, 1, 1, C] or a scalar for s). Interior nodes have one consumer and no
control edges and are not preserved; everything is on one device. The last node keeps its
name, so fetches keep working. Values change only by float rounding (W * s rounds once
where the graph rounded twice).
"""
import numpy as np

from tfg.graphdef.names import TensorRef, input_string
from tfg.passes.manager import register_pass
from tfg.passes.rewrite import Pat, RewriteContext, graph_rewrite
from tfg.schemas.dtypes import DType

_BASES = ("Conv2D", "DepthwiseConv2dNative", "MatMul")
_ADD = ("Add", "AddV2")
_FLOATS = (DType.FLOAT, DType.DOUBLE, DType.HALF, DType.BFLOAT16)


def _s(ref):
    return input_string(ref.node, ref.port)


def _ok(*nodes):
    """One device, one dtype, a float one."""
    if len({n.device for n in nodes}) != 1:
        return False
    dts = {n.get_attr("T", None) for n in nodes}
    return len(dts) == 1 and dts.pop() in _FLOATS


def _channel_vector(ctx, ref, channels):
    """The constant at `ref` as a [channels] vector when it varies along the last axis only
    (a one-element constant is spread over the channels); None otherwise."""
    v = ctx.const_value(ref)
    if v is None or v.dtype.kind != "f":
        return None
    if v.size == 1:
        return np.full(channels, v.reshape(-1)[0], v.dtype)
    if v.ndim == 0 or v.shape[-1] != channels or any(d != 1 for d in v.shape[:-1]):
        return None
    return v.reshape(-1)


def _output_rank_ok(ctx, node, ref_const):
    """Adding a [1, 1, 1, C] constant to a rank-4 tensor keeps the rank; one of higher rank
    than the output would broadcast it up: refused."""
    v = ctx.const_value(ref_const)
    rank = 2 if node.op == "MatMul" else 4
    return v is not None and v.ndim <= rank


def _channels(ctx, base):
    """Output channels of `base` from its constant filter, and the filter (None, None: not
    foldable)."""
    w_ref = base.data_inputs[1]
    w = ctx.const_value(w_ref)
    if w is None or w.dtype.kind != "f" or ctx.preserved(w_ref.node):
        return None, None
    if base.op == "MatMul":
        if w.ndim != 2 or base.get_attr("transpose_a", False):
            return None, None
        return (w.shape[0] if base.get_attr("transpose_b", False) else w.shape[1]), w
    if w.ndim != 4 or base.get_attr("data_format", b"NHWC") != b"NHWC":
        return None, None
    return (w.shape[2] * w.shape[3] if base.op == "DepthwiseConv2dNative" else w.shape[3]), w


def _scaled_filter(base, w, s):
    if base.op == "DepthwiseConv2dNative":  # output channel i * multiplier + m
        return (w * s.reshape(w.shape[2], w.shape[3])).astype(w.dtype)
    if base.op == "MatMul" and base.get_attr("transpose_b", False):
        return (w * s[:, None]).astype(w.dtype)
    return (w * s).astype(w.dtype)


def _rescale(ctx, base, w, s, anchor):
    """base reads a new Const W * s."""
    w_ref = base.data_inputs[1]
    nw = ctx.new_const(ctx.new_name(f"{base.name}/folded_filter"), _scaled_filter(base, w, s),
                       DType.from_numpy(w.dtype), base.device, inherit=[w_ref],
                       anchors=[anchor])
    ins = list(base.inputs)
    ins[1] = nw.name
    ctx.set_inputs(base, ins)
    ctx.remove_if_dead(w_ref.node)


def mul_into_base(ctx, node, base, c):
    if not _ok(node, base) or node.control_inputs or not _output_rank_ok(ctx, base, c):
        return False
    channels, w = _channels(ctx, base)
    s = None if w is None else _channel_vector(ctx, c, channels)
    if s is None:
        return False
    _rescale(ctx, base, w, s, base.data_inputs[0])
    ctx.replace_with(node, TensorRef(base.name, 0))
    ctx.remove_if_dead(c.node)
    return True


def mul_into_biased(ctx, node, bias, base, b, c):
    if not _ok(node, bias, base) or node.control_inputs or not _output_rank_ok(ctx, base, c):
        return False
    if bias.get_attr("data_format", b"NHWC") != b"NHWC":
        return False
    channels, w = _channels(ctx, base)
    s = None if w is None else _channel_vector(ctx, c, channels)
    bv = ctx.const_value(b)
    if s is None or bv is None or bv.shape != (channels,):
        return False
    _rescale(ctx, base, w, s, base.data_inputs[0])
    nb = ctx.new_const(ctx.new_name(f"{node.name}/folded_bias"), (bv * s).astype(bv.dtype),
                       DType.from_numpy(bv.dtype), node.device, inherit=[b, c],
                       anchors=[base.data_inputs[0]])
    ctx.morph(node, "BiasAdd", [base.name, nb.name],
              {"T": node.get_attr("T"), "data_format": b"NHWC"})
    for name in (bias.name, b.node, c.node):
        ctx.remove_if_dead(name)
    return True


def add_to_bias(ctx, node, base, c):
    if not _ok(node, base) or node.control_inputs or not _output_rank_ok(ctx, base, c):
        return False
    if node.op == "Sub" and node.data_inputs[0].node != base.name:
        return False  # c - conv is not a bias
    channels, w = _channels(ctx, base)
    t = None if w is None else _channel_vector(ctx, c, channels)
    if t is None:
        return False
    if node.op == "Sub":
        t = -t
    nb = ctx.new_const(ctx.new_name(f"{node.name}/bias"), t, DType.from_numpy(t.dtype),
                       node.device, inherit=[c], anchors=[base.data_inputs[0]])
    ctx.morph(node, "BiasAdd", [base.name, nb.name],
              {"T": node.get_attr("T"), "data_format": b"NHWC"})
    ctx.remove_if_dead(c.node)
    return True


def add_into_bias(ctx, node, bias, b, c):
    if not _ok(node, bias) or node.control_inputs:
        return False
    if bias.get_attr("data_format", b"NHWC") != b"NHWC":
        return False
    if node.op == "Sub" and node.data_inputs[0].node != bias.name:
        return False
    bv = ctx.const_value(b)
    if bv is None or bv.ndim != 1:
        return False
    t = _channel_vector(ctx, c, bv.shape[0])
    y = ctx.shape(bias.data_inputs[0])
    cv = ctx.const_value(c)
    if t is None or y is None or cv.ndim > len(y):
        return False
    merged = (bv - t if node.op == "Sub" else bv + t).astype(bv.dtype)
    nb = ctx.new_const(ctx.new_name(f"{node.name}/folded_bias"), merged,
                       DType.from_numpy(bv.dtype), node.device, inherit=[b, c],
                       anchors=[bias.data_inputs[0]])
    ctx.morph(node, "BiasAdd", [_s(bias.data_inputs[0]), nb.name],
              {"T": node.get_attr("T"), "data_format": b"NHWC"})
    for name in (bias.name, b.node, c.node):
        ctx.remove_if_dead(name)
    return True


def rules():
    v, c = Pat.var, Pat.const
    base = Pat(_BASES, [v(), c()], name="base", one_consumer=True)
    biased = Pat("BiasAdd", [base, c("b")], name="bias", one_consumer=True)
    any_bias = Pat("BiasAdd", [v(), c("b")], name="bias", one_consumer=True)
    return [
        (Pat("Mul", [base, c("c")], commutative=True), mul_into_base),
        (Pat("Mul", [biased, c("c")], commutative=True), mul_into_biased),
        (Pat(_ADD, [base, c("c")], commutative=True), add_to_bias),
        (Pat("Sub", [base, c("c")]), add_to_bias),
        (Pat(_ADD, [any_bias, c("c")], commutative=True), add_into_bias),
        (Pat("Sub", [any_bias, c("c")]), add_into_bias),
    ]


@register_pass("affine", "Fold per-channel constant Mul/Add/Sub after Conv2D, "
               "DepthwiseConv2dNative and MatMul into their filter and a BiasAdd (inference "
               "batch norms), for the remapper to fuse.")
def fold_affine(graph, opts):
    """Apply the folds above to a fixed point; returns whether anything changed."""
    ctx = RewriteContext(graph, opts, stage="Affine")
    return graph_rewrite(ctx, rules())
