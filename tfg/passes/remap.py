"""The remapper: fuse common op chains into one of Grappler's fused ops.

    Conv2D + BiasAdd (+ Relu|Relu6|Elu|LeakyRelu)       -> _FusedConv2D(x, W, b)
    MatMul + BiasAdd (+ act), DepthwiseConv2dNative + BiasAdd (+ act)   likewise (depthwise:
                                            on a GPU or for tfg's Session, see _tf_has_kernel)
    Conv2D|MatMul|DepthwiseConv2dNative + act (no bias) -> the same with a zero BiasAdd
    Conv2D + FusedBatchNorm (is_training=False) (+ act) -> _FusedConv2D(x, W, scale, offset,
                                                          mean, variance), num_args=4
    FusedBatchNorm + Relu (GPU, as in TensorFlow)       -> _FusedBatchNormEx
    Pad(x, [[0,0],[t,b],[l,r],[0,0]]) + a VALID or EXPLICIT convolution (tfg's Session only)
                                                        -> the convolution with
                                                           padding=EXPLICIT on x
    AvgPool 1x1 VALID of a crop of a zero Pad (tfg's Session only)
                                                        -> Pad(StridedSlice(x)) of the sample
    Sigmoid(_Fused*(fused_ops=[BiasAdd])) (tfg's Session only) -> fused_ops=[BiasAdd, Sigmoid]
    Mul(_Fused*(fused_ops=[BiasAdd, Relu6]), 1/6) (tfg's Session only)
                                          -> fused_ops=[BiasAdd, _TfgHardSigmoid]
    Reshape(Mean(x), [N, 1, 1, C]) (tfg's Session only)  -> Mean(x, keep_dims=True)
                                                           (remap_squeeze.py)
    Reshape(Sum(g, BroadcastGradientArgs(sx, sy)[i]), sx) (tfg's Session only)
                                        -> _TfgBroadcastGradSum(g, sx, sy)
                                           (remap_broadcast_grad.py)

    before: c = Conv2D(x, W); b = BiasAdd(c, bias); r = Relu(b)
    after:  r = _FusedConv2D(x, W, bias, fused_ops=[BiasAdd, Relu], num_args=1)

The fused node takes the last node's name, so fetches keep working. Matched nodes have no
control edges; the intermediates have one consumer, are not preserved, and every matched node
has the same dtype and device. Fused ops have no gradient: run `tfg grad` before optimizing.
"""
import numpy as np

from tfg.graphdef.names import TensorRef, input_string
from tfg.passes.manager import register_pass
from tfg.passes.remap_broadcast_grad import broadcast_grad_sum
from tfg.passes.remap_squeeze import squeeze_keepdims
from tfg.passes.rewrite import Pat, RewriteContext, graph_rewrite
from tfg.schemas.dtypes import DType

_FUSED = {"Conv2D": "_FusedConv2D", "MatMul": "_FusedMatMul",
          "DepthwiseConv2dNative": "_FusedDepthwiseConv2dNative"}
_FUSED_DTYPES = {"_FusedConv2D": {DType.FLOAT, DType.DOUBLE, DType.HALF},
                 "_FusedMatMul": {DType.FLOAT, DType.HALF, DType.BFLOAT16},
                 "_FusedDepthwiseConv2dNative": {DType.FLOAT, DType.DOUBLE, DType.HALF}}
_ACTS = ("Relu", "Relu6", "Elu", "LeakyRelu")
_BN = ("FusedBatchNorm", "FusedBatchNormV2", "FusedBatchNormV3")
_BASE_ATTRS = ("strides", "padding", "explicit_paddings", "data_format", "dilations",
               "use_cudnn_on_gpu", "transpose_a", "transpose_b")


def _s(ref):
    return input_string(ref.node, ref.port)


def _on_gpu(ctx, node):
    dev = node.device.lower()
    return "gpu" in dev or (not dev and ctx.opts.gpu_targeted)


def _compatible(ctx, *nodes):
    if any(n.control_inputs for n in nodes):
        return False
    if len({n.device for n in nodes}) != 1:
        return False
    return len({n.get_attr("T", None) for n in nodes}) == 1


def _format_ok(ctx, base):
    fmt = base.get_attr("data_format", b"NHWC")
    return base.op == "MatMul" or fmt == b"NHWC" or _on_gpu(ctx, base)


def _base_attrs(base):
    return {k: base.get_attr(k) for k in _BASE_ATTRS if base.has_attr(k)}


def _dense_conv(ctx, base):
    """Whether a Conv2D is known not to be grouped: TensorFlow's _FusedConv2D refuses grouped
    convolutions ("does not support grouped convolutions"), so those stay unfused."""
    x, w = (ctx.shape(ref) for ref in base.data_inputs)
    if x is None or w is None or len(x) != 4 or len(w) != 4:
        return False
    nchw = base.get_attr("data_format", b"NHWC") == b"NCHW"
    channels = x[1] if nchw else x[3]
    return channels is not None and channels == w[2]


def _tf_has_kernel(ctx, base):
    """TensorFlow's CPU build has no _FusedDepthwiseConv2dNative kernel (a GPU and oneDNN
    op): fuse it only for a GPU, or for tfg's own Session (opts.extra["tfg_kernels"]), whose
    rewritten graph no TensorFlow runs."""
    return (base.op != "DepthwiseConv2dNative" or _on_gpu(ctx, base)
            or ctx.opts.extra.get("tfg_kernels", False))


def _make_fused(ctx, last, base, args, fused_ops, epsilon=None, alpha=None):
    op = _FUSED[base.op]
    t = base.get_attr("T")
    if t not in _FUSED_DTYPES[op] or not ctx.op_available(op) or not _tf_has_kernel(ctx, base):
        return False
    if base.op == "Conv2D" and not _dense_conv(ctx, base):
        return False
    attrs = _base_attrs(base)
    attrs.update({"T": t, "num_args": len(args), "fused_ops": [o.encode() for o in fused_ops]})
    if op == "_FusedConv2D":
        attrs["TArgs"] = [t] * len(args)
    if epsilon is not None:
        attrs["epsilon"] = float(epsilon)
    if alpha is not None:
        attrs["leakyrelu_alpha"] = float(alpha)
    x, w = base.data_inputs
    ctx.morph(last, op, [_s(x), _s(w)] + [_s(a) for a in args], attrs)
    return True


def bias_add(ctx, node, base, bias):
    if not _compatible(ctx, node, base) or not _format_ok(ctx, base):
        return False
    if node.get_attr("data_format", b"NHWC") != base.get_attr("data_format", b"NHWC"):
        return False
    if not _make_fused(ctx, node, base, [bias], ["BiasAdd"]):
        return False
    ctx.remove_if_dead(base.name)
    return True


def conv_bn(ctx, node, base, scale, offset, mean, var):
    if node.get_attr("is_training", True) or base.op != "Conv2D":
        return False
    if any(ctx.consumers(node.name, p) for p in range(1, 6)):
        return False
    if node.get_attr("data_format", b"NHWC") != base.get_attr("data_format", b"NHWC"):
        return False
    if node.get_attr("U", DType.FLOAT) != base.get_attr("T") and node.op != "FusedBatchNorm":
        return False
    if not _compatible(ctx, node, base) or not _format_ok(ctx, base):
        return False
    if not _make_fused(ctx, node, base, [scale, offset, mean, var], ["FusedBatchNorm"],
                       epsilon=node.get_attr("epsilon", 1e-4)):
        return False
    ctx.remove_if_dead(base.name)
    return True


def activation(ctx, node, fused):
    """act(_Fused*(... fused_ops=[BiasAdd|FusedBatchNorm])) -> one fused node with the act."""
    ops = [o.decode() for o in fused.get_attr("fused_ops", [])]
    if len(ops) != 1 or ops[0] not in ("BiasAdd", "FusedBatchNorm"):
        return False
    if fused.op == "_FusedMatMul" and ops[0] != "BiasAdd":
        return False
    if not _compatible(ctx, node, fused):
        return False
    alpha = node.get_attr("alpha", 0.2) if node.op == "LeakyRelu" else None
    attrs = {k: fused.get_attr(k) for k in fused.attr if not k.startswith("_")}
    attrs["fused_ops"] = [o.encode() for o in ops + [node.op]]
    if alpha is not None:
        attrs["leakyrelu_alpha"] = float(alpha)
    ctx.morph(node, fused.op, list(fused.inputs), attrs)
    ctx.remove_if_dead(fused.name)
    return True


def bare_activation(ctx, node, base):
    """act(base(x, W)) -> _Fused*(x, W, zeros, fused_ops=[BiasAdd, act]): TensorFlow's fused
    ops want a BiasAdd first; adding zeros is exact and cheaper than a separate node."""
    if not _compatible(ctx, node, base) or not _format_ok(ctx, base):
        return False
    w = ctx.shape(base.data_inputs[1])
    if w is None or any(d is None for d in w):
        return False
    if base.op == "MatMul":
        if len(w) != 2:
            return False
        channels = w[0] if base.get_attr("transpose_b", False) else w[1]
    elif len(w) != 4 or base.get_attr("data_format", b"NHWC") != b"NHWC":
        return False
    else:
        channels = w[2] * w[3] if base.op == "DepthwiseConv2dNative" else w[3]
    t = base.get_attr("T")
    if t not in _FUSED_DTYPES[_FUSED[base.op]] or not ctx.op_available(_FUSED[base.op]):
        return False
    if not _tf_has_kernel(ctx, base):
        return False
    if base.op == "Conv2D" and not _dense_conv(ctx, base):
        return False
    zeros = ctx.new_const(ctx.new_name(f"{base.name}/zero_bias"), np.zeros(channels, t.np), t,
                          base.device, anchors=[base.data_inputs[0]])
    alpha = node.get_attr("alpha", 0.2) if node.op == "LeakyRelu" else None
    return _make_fused(ctx, node, base, [TensorRef(zeros.name, 0)], ["BiasAdd", node.op], alpha=alpha) and \
        (ctx.remove_if_dead(base.name) or True)


def sigmoid_gate(ctx, node, fused):
    """Sigmoid(_Fused*(fused_ops=[BiasAdd])) -> one fused node with the activation Sigmoid
    (only for tfg's Session, opts.extra["tfg_kernels"]: TensorFlow's Eigen kernels fuse no
    Sigmoid). The gate of a squeeze-excite block after its expanding 1x1 convolution:
    EfficientNetB0's 16 a step. The fused kernel computes the Sigmoid kernel's values.
    Not a MatMul's in a while loop: there the loop's fused chain takes the MatMul, the bias,
    the Sigmoid and the gate's elementwise nodes after it as one compiled program
    (tfg/executor/loop_fusion.py; a TF1 GRUCell's gate: one call an iteration instead of
    two, 2.3% fewer instructions a training step), where a fused node's Sigmoid would end
    the chain before them."""
    if not ctx.opts.extra.get("tfg_kernels", False):
        return False
    if [o.decode() for o in fused.get_attr("fused_ops", [])] != ["BiasAdd"]:
        return False
    if fused.op == "_FusedMatMul" and ctx.in_loop(node.name):
        return False
    return activation(ctx, node, fused)


def swish(ctx, node, fused, sig):
    """Mul(f, Sigmoid(f)) with f = _Fused*(fused_ops=[BiasAdd]) or a bare base op ->
    one fused node with the activation _MklSwish (TensorFlow's oneDNN name; only for tfg's
    Session, opts.extra["tfg_kernels"], as TensorFlow's Eigen kernels lack it)."""
    if not ctx.opts.extra.get("tfg_kernels", False) or sig.data_inputs[0].node != fused.name:
        return False
    if sig.data_inputs[0].port != 0 or ctx.preserved(fused.name) or fused.control_inputs:
        return False
    if ctx.preserved(sig.name) or sig.control_inputs or ctx.control_consumers(sig.name):
        return False
    readers = {n.name for n, _ in ctx.consumers(fused.name, include_control=True)}
    if readers != {node.name, sig.name} or ctx.control_consumers(fused.name):
        return False
    if not _compatible(ctx, node, sig, fused):
        return False
    return _with_activation(ctx, node, fused, sig, b"_MklSwish", [sig])


def _with_activation(ctx, node, fused, reader, activation, absorbed):
    """The shared end of swish and hard_swish: `node` becomes `fused`'s op with fused_ops
    [BiasAdd, activation]. A bare base op `fused` first becomes _Fused*(x, W, zeros,
    fused_ops=[BiasAdd, <reader's op>]) in `reader` (bare_activation); then `absorbed` and the
    base are removed where nothing else reads them."""
    base = fused
    if fused.op in _FUSED:
        if not bare_activation(ctx, reader, base):
            return False
        fused = reader
    elif [o.decode() for o in fused.get_attr("fused_ops", [])] != ["BiasAdd"]:
        return False
    attrs = {k: fused.get_attr(k) for k in fused.attr if not k.startswith("_")}
    attrs["fused_ops"] = [b"BiasAdd", activation]
    attrs.pop("leakyrelu_alpha", None)  # LeakyRelu's only
    ctx.morph(node, fused.op, list(fused.inputs), attrs)
    for n in absorbed + [base]:
        ctx.remove_if_dead(n.name)
    return True


def _scalar(ctx, ref, value):
    """Whether `ref` is a constant holding `value` (exactly, in its own dtype) alone."""
    v = ctx.const_value(ref)
    return v is not None and v.size == 1 and v.dtype.kind == "f" and \
        v.reshape(-1)[0] == v.dtype.type(value)


def hard_swish(ctx, node, fused, add, relu6, scale):
    """Mul(f, Mul(Relu6(AddV2(f, 3)), 1/6)) with f = _Fused*(fused_ops=[BiasAdd]) or a bare
    base op -> one fused node with the activation _TfgHardSwish: MobileNetV3's hard swish
    (Keras's x * relu6(x + 3) / 6, the division made a Mul by constant folding), the same
    roundings in the same order (fused.py). tfg's Session only (opts.extra["tfg_kernels"])."""
    if not ctx.opts.extra.get("tfg_kernels", False):
        return False
    three = [r for r in add.data_inputs if r.node != fused.name]
    sixth = [r for r in scale.data_inputs if r.node != relu6.name]
    if len(three) != 1 or len(sixth) != 1 or not _scalar(ctx, three[0], 3.0) or \
            not _scalar(ctx, sixth[0], 1 / 6):
        return False
    if any(r.port != 0 for r in add.data_inputs if r.node == fused.name):
        return False
    for n in (fused, add, relu6, scale):
        if ctx.preserved(n.name) or n.control_inputs or ctx.control_consumers(n.name):
            return False
    readers = {n.name for n, _ in ctx.consumers(fused.name, include_control=True)}
    if readers != {node.name, add.name} or not _compatible(ctx, node, add, relu6, scale, fused):
        return False
    return _with_activation(ctx, node, fused, add, b"_TfgHardSwish", [scale, relu6, add])


def hard_sigmoid(ctx, node, fused):
    """Mul(_Fused*(fused_ops=[BiasAdd, Relu6]), 1/6) -> one fused node with the activation
    _TfgHardSigmoid: the gate of MobileNetV3's squeeze-excite blocks (Keras's relu6(x + 3) / 6,
    the + 3 folded into the bias), 9 Mul calls a step in MobileNetV3Small; the same roundings
    (fused.py). tfg's Session only (opts.extra["tfg_kernels"])."""
    if not ctx.opts.extra.get("tfg_kernels", False):
        return False
    if [o.decode() for o in fused.get_attr("fused_ops", [])] != ["BiasAdd", "Relu6"]:
        return False
    sixth = [r for r in node.data_inputs if r.node != fused.name]
    if len(sixth) != 1 or not _scalar(ctx, sixth[0], 1 / 6):
        return False
    if any(r.port != 0 for r in node.data_inputs if r.node == fused.name):
        return False
    for n in (fused, node):
        if n.control_inputs or ctx.control_consumers(n.name):
            return False
    if ctx.preserved(fused.name) or not _compatible(ctx, node, fused):
        return False
    attrs = {k: fused.get_attr(k) for k in fused.attr if not k.startswith("_")}
    attrs["fused_ops"] = [b"BiasAdd", b"_TfgHardSigmoid"]
    ctx.morph(node, fused.op, list(fused.inputs), attrs)
    ctx.remove_if_dead(fused.name)
    return True


def bn_relu(ctx, node, bn):
    """FusedBatchNorm + Relu -> _FusedBatchNormEx (only where TensorFlow has the kernel: GPU)."""
    if not _on_gpu(ctx, bn) or not _compatible(ctx, node, bn):
        return False
    if any(ctx.consumers(bn.name, p) for p in range(1, 6)):
        return False
    if not ctx.op_available("_FusedBatchNormEx") or bn.get_attr("T") not in (
            DType.FLOAT, DType.HALF, DType.BFLOAT16):
        return False
    attrs = {"T": bn.get_attr("T"), "U": bn.get_attr("U", DType.FLOAT),
             "epsilon": float(bn.get_attr("epsilon", 1e-4)),
             "exponential_avg_factor": float(bn.get_attr("exponential_avg_factor", 1.0)),
             "data_format": bn.get_attr("data_format", b"NHWC"),
             "is_training": bool(bn.get_attr("is_training", True)),
             "num_side_inputs": 0, "activation_mode": b"Relu"}
    ctx.morph(node, "_FusedBatchNormEx", list(bn.inputs), attrs)
    ctx.remove_if_dead(bn.name)
    return True


_PADDED = ("Conv2D", "DepthwiseConv2dNative", "_FusedConv2D", "_FusedDepthwiseConv2dNative")


def pad_into_conv(ctx, node):
    """conv(Pad(x, zeros around H and W), VALID|EXPLICIT) -> conv(x, EXPLICIT, the pads
    added): Keras's ZeroPadding2D before a strided convolution (MobileNets, NASNet), one
    call and one copy of the input less; the kernel pads it in the copy it makes anyway.
    Only for tfg's Session (opts.extra["tfg_kernels"]), NHWC, a Pad read by this node only."""
    if not ctx.opts.extra.get("tfg_kernels", False) or not node.data_inputs:
        return False
    ref = node.data_inputs[0]
    pad = ctx.graph.get(ref.node)
    if pad is None or pad.op != "Pad" or ref.port != 0 or ctx.preserved(pad.name):
        return False
    if pad.control_inputs or node.control_inputs or pad.device != node.device:
        return False
    if len(ctx.consumers(pad.name, include_control=True)) != 1:
        return False
    if pad.get_attr("T", None) != node.get_attr("T", None):
        return False
    if node.get_attr("data_format", b"NHWC") != b"NHWC":
        return False
    padding = node.get_attr("padding", b"")
    if padding not in (b"VALID", b"EXPLICIT"):
        return False
    p = ctx.const_value(pad.data_inputs[1])
    if p is None or p.dtype.kind not in "iu" or p.shape != (4, 2) or (p < 0).any():
        return False
    if p[0].any() or p[3].any():
        return False  # batch or channel padding: not a convolution's
    old = list(node.get_attr("explicit_paddings", [])) if padding == b"EXPLICIT" else []
    old = old if len(old) == 8 else [0] * 8
    attrs = {k: node.get_attr(k) for k in node.attr if not k.startswith("_")}
    attrs["padding"] = b"EXPLICIT"
    attrs["explicit_paddings"] = [int(a) + int(b) for a, b in zip(old, p.reshape(-1))]
    ctx.morph(node, node.op, [_s(pad.data_inputs[0])] + list(node.inputs[1:]), attrs)
    ctx.remove_if_dead(pad.name)
    return True


def _crop_bounds(b, e, length, begin_bit, end_bit):
    """A StridedSlice's [b, e) along one dim of `length` (stride 1, TensorFlow's clamping)."""
    b = 0 if begin_bit else (b + length if b < 0 else b)
    e = length if end_bit else (e + length if e < 0 else e)
    return min(max(b, 0), length), min(max(e, 0), length)


def sampled_crop(ctx, node):
    """AvgPool(ksize 1x1, VALID, strides s)(StridedSlice(Pad(x, zeros)), a crop with stride 1)
    -> Pad(StridedSlice(x, stride s)) (tfg's Session only): NASNet's adjust blocks (Keras's
    ZeroPadding2D, Cropping2D, then a 1x1 average pool of stride 2) pad and crop the whole
    tensor, then keep one pixel in four; after, the pixels are sampled first and only the
    few that fell in the padding are zeros. A 1x1 average is the pixel itself (x / 1): the
    same values exactly, 3 calls and 2 full-size copies become 2 calls on a quarter.

        before: p = Pad(x[2,47,47,32], [[0,0],[0,1],[0,1],[0,0]]); c = p[:, 1:, 1:, :]
                y = AvgPool(c, ksize=[1,1,1,1], strides=[1,2,2,1], VALID)      # [2,24,24,32]
        after:  y = Pad(x[:, 1:46:2, 1:46:2, :], [[0,0],[0,1],[0,1],[0,0]])
                (y = x[:, 1:24:2, 1:24:2, :] itself when no sampled pixel is padding)
    """
    if not ctx.opts.extra.get("tfg_kernels", False) or not node.data_inputs:
        return False
    if (list(node.get_attr("ksize", [])) != [1, 1, 1, 1] or node.get_attr("padding") != b"VALID"
            or node.get_attr("data_format", b"NHWC") != b"NHWC"):
        return False
    st = list(node.get_attr("strides", []))
    if len(st) != 4 or st[0] != 1 or st[3] != 1 or min(st) < 1:
        return False
    ss = ctx.graph.get(node.data_inputs[0].node)
    if ss is None or ss.op != "StridedSlice" or node.data_inputs[0].port != 0:
        return False
    pad = ctx.graph.get(ss.data_inputs[0].node) if ss.data_inputs else None
    if pad is None or pad.op != "Pad" or ss.data_inputs[0].port != 0:
        return False
    for n in (ss, pad):
        if not ctx.is_interior(n) or n.device != node.device:
            return False
    if node.control_inputs or any(ss.get_attr(m, 0) for m in (
            "ellipsis_mask", "new_axis_mask", "shrink_axis_mask")):
        return False
    x = pad.data_inputs[0]
    shape = ctx.shape(x)
    paddings = ctx.const_value(pad.data_inputs[1])
    begin, end, strides = (ctx.const_value(r) for r in ss.data_inputs[1:4])
    if shape is None or len(shape) != 4 or any(d is None or d < 0 for d in shape):
        return False
    if any(v is None or v.shape != (4,) for v in (begin, end, strides)):
        return False
    if (paddings is None or paddings.shape != (4, 2) or (paddings < 0).any()
            or (strides != 1).any()):
        return False
    bm, em = ss.get_attr("begin_mask", 0), ss.get_attr("end_mask", 0)
    x_begin, x_end, out_pads = [0, 0, 0, 0], list(shape), [[0, 0] for _ in range(4)]
    for d in range(4):
        lo, size = int(paddings[d][0]), int(shape[d])
        length = size + lo + int(paddings[d][1])
        b, e = _crop_bounds(int(begin[d]), int(end[d]), length, bm >> d & 1, em >> d & 1)
        if d in (0, 3):
            if lo or paddings[d][1] or b != 0 or e != length:
                return False  # batch or channels cropped or padded: not this pattern
            continue
        s = int(st[d])
        out = (e - b - 1) // s + 1 if e > b else 0
        # output i reads padded b + s*i, i.e. x[b + s*i - lo]: valid for i in [i0, i1)
        i0 = min(max(-(-(lo - b) // s), 0), out)
        i1 = min(max(-(-(size + lo - b) // s), i0), out)
        if i1 == i0:
            return False  # nothing of x left: not worth a rule
        x_begin[d] = b - lo + s * i0
        x_end[d] = x_begin[d] + s * (i1 - i0 - 1) + 1
        out_pads[d] = [i0, out - i1]
    t = node.get_attr("T")
    base = node.name + "/tfg_sampled"
    consts = [ctx.new_const(ctx.new_name(f"{base}/{what}"), np.array(v, np.int32),
                            DType.INT32, node.device)
              for what, v in (("begin", x_begin), ("end", x_end),
                              ("strides", [1, *st[1:3], 1]))]
    slice_attrs = {"T": t, "Index": DType.INT32, "begin_mask": 0, "end_mask": 0,
                   "ellipsis_mask": 0, "new_axis_mask": 0, "shrink_axis_mask": 0}
    if not any(a or b for a, b in out_pads):
        # Every sampled pixel is one of x's (NASNet's 24x24 -> 12x12 adjust blocks): the
        # pool becomes the slice itself, without a Pad by zeros (a copy, ~65 us a step each)
        ctx.morph(node, "StridedSlice", [_s(x)] + [c.name for c in consts], slice_attrs)
        ctx.remove_if_dead(ss.name)
        return True
    sampled = ctx.add_node(ctx.new_name(base), "StridedSlice",
                           [_s(x)] + [c.name for c in consts], slice_attrs, node.device)
    pads = ctx.new_const(ctx.new_name(f"{base}/paddings"), np.array(out_pads, np.int32),
                         DType.INT32, node.device)
    ctx.morph(node, "Pad", [sampled.name, pads.name], {"T": t, "Tpaddings": DType.INT32})
    ctx.remove_if_dead(ss.name)
    return True


def rules():
    v = Pat.var
    base = Pat(tuple(_FUSED), name="base", one_consumer=True)
    fused = Pat(tuple(_FUSED.values()), name="fused", one_consumer=True)
    return [
        (Pat(("BiasAdd",), [base, v("bias")]), bias_add),
        (Pat(_BN, [base, v("scale"), v("offset"), v("mean"), v("var")]), conv_bn),
        (Pat(_ACTS, [fused]), activation),
        (Pat(_ACTS, [base]), bare_activation),
        (Pat("Mul", [Pat(tuple(_FUSED) + tuple(_FUSED.values()), name="fused"),
                     Pat("Sigmoid", name="sig")], commutative=True), swish),
        (Pat("Relu", [Pat(_BN, name="bn", one_consumer=True)]), bn_relu),
        (Pat(_PADDED), pad_into_conv),
        (Pat(("AvgPool",)), sampled_crop),
        (Pat(("Sigmoid",), [fused]), sigmoid_gate),
        (Pat("Mul", [fused, v()], commutative=True), hard_sigmoid),
        (Pat(("Reshape",), [Pat(("Mean",), name="mean", one_consumer=True), v()]),
         squeeze_keepdims),
        (Pat(("Reshape",), [Pat(("Sum",), name="total", one_consumer=True), v("shape")]),
         broadcast_grad_sum),
        (Pat("Mul", [Pat(tuple(_FUSED) + tuple(_FUSED.values()), name="fused"),
                     Pat("Mul", [Pat("Relu6", [Pat(("AddV2", "Add"), name="add",
                                                   one_consumer=True)],
                                     name="relu6", one_consumer=True), v()],
                         name="scale", commutative=True, one_consumer=True)],
             commutative=True), hard_swish),
    ]


@register_pass("remap", "Remapper: fuse Conv2D/MatMul/DepthwiseConv2dNative + BiasAdd (+act), "
               "Conv2D + inference FusedBatchNorm (+act), FusedBatchNorm + Relu (GPU) into "
               "_FusedConv2D/_FusedMatMul/_FusedBatchNormEx.")
def remap(graph, opts):
    """Fuse the patterns above; returns whether anything changed."""
    # lazy: the fused ops' kernels; importing a kernel module loads the kernels package,
    # which `tfg optimize` without remap never needs (tfg.schemas.ops registers the signatures)
    import tfg.kernels.fused  # noqa: F401
    ctx = RewriteContext(graph, opts, stage="Remapper")
    return graph_rewrite(ctx, rules())
