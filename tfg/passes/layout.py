"""The layout optimizer: on GPU, NHWC convolutions, pooling, BiasAdd and batch norm (and their
gradients) run in NCHW; Transposes go around them, layout-agnostic ops between them move into
NCHW too, and adjacent inverse Transposes cancel.

    before: c1 = Conv2D(x, W1) ; r = Relu(c1) ; c2 = Conv2D(r, W2)           (all NHWC, GPU)
    after:  x' = Transpose(x)  ; c1 (NCHW) ; r (NCHW) ; c2 (NCHW) ; Transpose back to NHWC

Transposes are named `<n>-<port>-TransposeNHWCToNCHW-LayoutOptimizer` (into n) and
`<n>-<port>-<k>-TransposeNCHWToNHWC-LayoutOptimizer` (out of n), as TensorFlow names them;
shape-like inputs (Conv2DBackpropInput's input_sizes, AvgPoolGrad's orig_input_shape) are
permuted as constants or through DataFormatVecPermute. Runs only when a GPU is targeted
(`devices` contains a GPU, or nodes are placed on one); CPU nodes and preserved nodes keep
their layout. Scalar operands (e.g. of SelectV2) stay as they are; inside while loops the
permutation constants wait on the tensor they permute, so they live in its frame.
"""
import numpy as np

from tfg.graphdef.names import TensorRef, input_string
from tfg.passes.manager import register_pass
from tfg.passes.rewrite import RewriteContext
from tfg.schemas.dtypes import DType
from tfg.schemas.ops import get_op, ops_with

TO_NCHW, TO_NHWC = (0, 3, 1, 2), (0, 2, 3, 1)
# op -> (NHWC data input ports, shape-like input ports, NHWC output ports)
SENSITIVE = {
    "Conv2D": ((0,), (), (0,)),
    "MaxPool": ((0,), (), (0,)),
    "AvgPool": ((0,), (), (0,)),
    "BiasAdd": ((0,), (), (0,)),
    "FusedBatchNorm": ((0,), (), (0,)),
    "FusedBatchNormV2": ((0,), (), (0,)),
    "FusedBatchNormV3": ((0,), (), (0,)),
    "Conv2DBackpropInput": ((2,), (0,), (0,)),
    "Conv2DBackpropFilter": ((0, 2), (), ()),
    "MaxPoolGrad": ((0, 1, 2), (), (0,)),
    "AvgPoolGrad": ((1,), (0,), (0,)),
    "BiasAddGrad": ((0,), (), ()),
    "FusedBatchNormGrad": ((0, 1), (), (0,)),
    "FusedBatchNormGradV3": ((0, 1), (), (0,)),
}
# Ops that commute with a transpose of their data inputs (trait "layout_agnostic"): those with
# one single-tensor input carry the transpose through input 0; the others through every input.
AGNOSTIC_UNARY = frozenset(
    n for n in ops_with("layout_agnostic")
    if len(get_op(n).inputs) == 1 and get_op(n).num_inputs_fixed)
AGNOSTIC_MULTI = ops_with("layout_agnostic") - AGNOSTIC_UNARY
_PERM_ATTRS = ("strides", "ksize", "dilations")
SUFFIX_IN, SUFFIX_OUT = "-TransposeNHWCToNCHW-LayoutOptimizer", "-TransposeNCHWToNHWC-LayoutOptimizer"


def _on_gpu(ctx, node):
    dev = node.device.lower()
    return "gpu" in dev or (not dev and ctx.opts.gpu_targeted)


def _perm(ctx, name, perm, anchor, device):
    """The permutation Const (one per graph at the root; per tensor inside loops)."""
    if not ctx.has_frames:
        shared = "PermConst" + ("NHWCToNCHW" if perm == TO_NCHW else "NCHWToNHWC") + \
                 "-LayoutOptimizer" + (f"-{device}" if device else "")
        shared = shared.replace("/", "_").replace(":", "_")
        if shared not in ctx.graph:
            ctx.new_const(shared, np.array(perm, np.int32), DType.INT32, device)
        return shared
    return ctx.new_const(ctx.new_name(name + "/perm"), np.array(perm, np.int32), DType.INT32,
                         device, anchors=[anchor]).name


def _transpose(ctx, name, ref, perm, device):
    dtype = ctx.dtype(ref)
    name = ctx.new_name(name)
    p = _perm(ctx, name, perm, ref, device)
    ctx.add_node(name, "Transpose", [input_string(ref.node, ref.port), p],
                 {"T": dtype.base, "Tperm": DType.INT32}, device)
    return TensorRef(name, 0)


def _rank(ctx, ref):
    s = ctx.shape(ref)
    return None if s is None else len(s)


def _convert_sensitive(ctx, node):
    ins, shape_ins, outs = SENSITIVE[node.op]
    refs = node.data_inputs
    if any(_rank(ctx, refs[i]) not in (4, None) for i in ins) or _rank(ctx, refs[ins[0]]) != 4:
        return False
    for i in shape_ins:
        if ctx.const_value(refs[i]) is None and not ctx.op_available("DataFormatVecPermute"):
            return False
    new = list(node.inputs)
    for i in ins:
        t = _transpose(ctx, f"{node.name}-{i}{SUFFIX_IN}", refs[i], TO_NCHW, node.device)
        new[i] = input_string(t.node, t.port)
    for i in shape_ins:
        new[i] = _permute_shape(ctx, node, i, refs[i])
    ctx.set_inputs(node, new)
    node.set_attr("data_format", b"NCHW")
    for attr in _PERM_ATTRS:
        v = node.get_attr(attr, None)
        if v and len(v) == 4:
            node.set_attr(attr, [v[p] for p in TO_NCHW], "list(i)")
    pads = node.get_attr("explicit_paddings", None)
    if pads and len(pads) == 8:
        pairs = [pads[2 * k: 2 * k + 2] for k in range(4)]
        node.set_attr("explicit_paddings", [x for p in TO_NCHW for x in pairs[p]], "list(i)")
    for port in outs:
        _transpose_outputs(ctx, node, port)
    return True


def _permute_shape(ctx, node, i, ref):
    v = ctx.const_value(ref)
    name = f"{node.name}-{i}-DataFormatVecPermuteNHWCToNCHW-LayoutOptimizer"
    if v is not None and v.shape == (4,):
        c = ctx.new_const(ctx.new_name(name), v[list(TO_NCHW)], DType.from_numpy(v.dtype),
                          node.device, inherit=[ref], anchors=[ref])
        return c.name
    name = ctx.new_name(name)
    ctx.add_node(name, "DataFormatVecPermute", [input_string(ref.node, ref.port)],
                 {"T": ctx.dtype(ref).base, "src_format": b"NHWC", "dst_format": b"NCHW"},
                 node.device)
    return name


def _transpose_outputs(ctx, node, port):
    consumers = ctx.consumers(node.name, port)
    if not consumers:
        return
    t = _transpose(ctx, f"{node.name}-{port}-0{SUFFIX_OUT}", TensorRef(node.name, port), TO_NHWC,
                   node.device)
    for consumer, idx in consumers:
        ins = list(consumer.inputs)
        ins[idx] = input_string(t.node, t.port)
        ctx.set_inputs(consumer, ins)


def _is_ours(ctx, ref, perm):
    node = ctx.graph.get(ref.node)
    if node is None or node.op != "Transpose" or ref.port != 0:
        return None
    pv = ctx.const_value(node.data_inputs[1])
    if pv is None or tuple(int(p) for p in pv.ravel()) != perm:
        return None
    return node


def _move_agnostic(ctx, node):
    """Run an elementwise node in NCHW when its 4-D inputs come out of NCHW->NHWC Transposes."""
    refs = node.data_inputs
    if not refs:
        return False
    plan, any_ours = [], False
    for ref in refs:
        t = _is_ours(ctx, ref, TO_NHWC)
        rank = _rank(ctx, ref)
        if t is not None:
            plan.append(("bypass", t.data_inputs[0]))
            any_ours = True
        elif rank == 0:
            plan.append(("keep", ref))
        elif rank == 4:
            plan.append(("transpose", ref))
        else:
            return False
    if not any_ours:
        return False
    if node.op == "Select" and _rank(ctx, refs[0]) not in (0, 4):
        return False
    new = list(node.inputs)
    for i, (kind, ref) in enumerate(plan):
        if kind == "bypass":
            new[i] = input_string(ref.node, ref.port)
        elif kind == "transpose":
            t = _transpose(ctx, f"{node.name}-{i}{SUFFIX_IN}", ref, TO_NCHW, node.device)
            new[i] = input_string(t.node, t.port)
    old_inputs = [r.node for r in refs]
    ctx.set_inputs(node, new)
    _transpose_outputs(ctx, node, 0)
    for name in old_inputs:
        ctx.remove_if_dead(name)
    return True


def _cancel_pairs(ctx):
    changed = False
    for node in list(ctx.graph):
        if ctx.graph.get(node.name) is not node or node.op != "Transpose":
            continue
        if _is_ours(ctx, TensorRef(node.name, 0), TO_NCHW) is None:
            continue
        inner = _is_ours(ctx, node.data_inputs[0], TO_NHWC)
        if inner is None or ctx.preserved(node.name) or node.control_inputs:
            continue
        ctx.reroute(TensorRef(node.name, 0), inner.data_inputs[0])
        ctx.remove_if_dead(node.name)
        changed = True
    return changed


@register_pass("layout", "Layout optimizer (GPU only): NHWC Conv2D/pooling/BiasAdd/"
               "FusedBatchNorm and their grads run in NCHW, elementwise ops between them follow, "
               "inverse Transposes cancel.", first_round_only=True)
def layout(graph, opts):
    """Convert GPU-placed NHWC layout-sensitive ops to NCHW; returns whether anything changed."""
    ctx = RewriteContext(graph, opts, stage="LayoutOptimizer")
    if not opts.gpu_targeted and not any("gpu" in n.device.lower() for n in graph):
        return False
    changed = False
    for node in ctx.ordered_nodes():
        if (node.op in SENSITIVE and _on_gpu(ctx, node) and not ctx.preserved(node.name)
                and node.get_attr("data_format", b"NHWC") == b"NHWC"):
            changed |= _convert_sensitive(ctx, node)
    if not changed:
        return False
    for _ in range(100):
        moved = False
        for node in ctx.ordered_nodes():
            if (ctx.graph.get(node.name) is node and _on_gpu(ctx, node)
                    and not ctx.preserved(node.name)
                    and (node.op in AGNOSTIC_UNARY or node.op in AGNOSTIC_MULTI)):
                moved |= _move_agnostic(ctx, node)
        moved |= _cancel_pairs(ctx)
        if not moved:
            break
    return True
