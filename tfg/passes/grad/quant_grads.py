"""Gradients of the quantization-aware-training and printing ops (TensorFlow's array_ops.py,
array_grad.py and logging_ops.py rules).

    Before: y = FakeQuantWithMinMaxVars(x, lo, hi)
    After:  FakeQuantWithMinMaxVarsGradient(g, x, lo, hi) -> dx, dlo, dhi
    QuantizeAndDequantizeV2/V3: the gradient passes straight through to the input.
"""
from tfg.passes.grad.registry import gradient, identity_gradient, no_gradient

_FAKE_QUANT_ATTRS = ("num_bits", "narrow_range")


def _attrs(op, names):
    return {n: op.node.attr[n] for n in names if op.node.has_attr(n)}


@gradient("FakeQuantWithMinMaxArgs")
def _fake_quant_args(b, op, grads):
    attrs = _attrs(op, ("min", "max") + _FAKE_QUANT_ATTRS)
    return [b.op("FakeQuantWithMinMaxArgsGradient", [grads[0], op.inputs[0]], attrs)]


@gradient("FakeQuantWithMinMaxVars", "FakeQuantWithMinMaxVarsPerChannel")
def _fake_quant_vars(b, op, grads):
    node = b.op(f"{op.type}Gradient", [grads[0]] + list(op.inputs[:3]),
                _attrs(op, _FAKE_QUANT_ATTRS))
    return [node, b.out(node, 1), b.out(node, 2)]


@gradient("QuantizeAndDequantizeV4")
def _quantize_and_dequantize_v4(b, op, grads):
    node = b.op("QuantizeAndDequantizeV4Grad", [grads[0]] + list(op.inputs[:3]),
                _attrs(op, ("axis",)))
    return [node, b.out(node, 1), b.out(node, 2)]


# Only the unquantized input gets a gradient (V3's num_bits none either).
identity_gradient("QuantizeAndDequantizeV2", "QuantizeAndDequantizeV3", "Print")
no_gradient("FakeQuantWithMinMaxArgsGradient", "FakeQuantWithMinMaxVarsGradient",
            "FakeQuantWithMinMaxVarsPerChannelGradient", "PrintV2", "StringFormat")
