"""What a kernel sees of its node: decoded attrs (with defaults), the array module, the device.

Made once per node when a graph is prepared, so kernels pay no decoding cost per call.
`xp` is the device's array module, except for a GPU node that computes in host memory
(int32 or string `T`, or a host-only kernel such as Shape): numpy there, as in TensorFlow.

    >>> ctx = KernelContext.for_node(node, device="/job:localhost/replica:0/task:0/device:CPU:0")
    >>> ctx.attrs["transpose_a"], ctx.output_dtypes
    (False, [DType.FLOAT])
"""
import numpy as np

from tfg.kernels.memory import computes_on_host
from tfg.kernels.registry import GPU, find_kernel
from tfg.schemas.ops import get_op
from tfg.schemas.ops import signature


class KernelContext:
    __slots__ = ("node", "name", "op", "attrs", "xp", "device", "output_dtypes", "cache")

    def __init__(self, node, attrs, xp=np, device="", output_dtypes=()):
        self.node = node
        self.name = node.name
        self.op = node.op
        self.attrs = attrs
        self.xp = xp
        self.device = device
        self.output_dtypes = list(output_dtypes)
        self.cache = {}  # a kernel may memoize node-constant work here (e.g. a Const's array)

    @staticmethod
    def for_node(node, device="", xp=np):
        sig = get_op(node.op, node.name)
        attrs = {}
        for name, ad in sig.attrs.items():
            if node.has_attr(name):
                attrs[name] = node.get_attr(name)
            elif ad.has_default:
                attrs[name] = ad.default
        for name in node.attr:  # attrs outside the signature (e.g. _class) stay visible
            if name not in attrs:
                attrs[name] = node.get_attr(name)
        try:
            dtypes = signature.output_dtypes(node)
        except Exception:  # a malformed attr surfaces where the kernel reads it
            dtypes = []
        if xp is not np:
            kd = find_kernel(node.op, GPU)
            if kd is not None and computes_on_host(kd.host_only, attrs):
                xp = np
        return KernelContext(node, attrs, xp, device, dtypes)
