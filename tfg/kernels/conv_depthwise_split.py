"""Depthwise convolutions over a step's intra-op threads: one image group per thread.

    run = split(x.shape, w.shape, g)          # None: small, or a batch of one
    y = run(x, w, ctx.cache)                  # DepthwiseConv2dNative
    y = run(x, w, ctx.cache, bias, act)       # _FusedDepthwiseConv2dNative [BiasAdd, act]

Why: a depthwise convolution is one numpy einsum (conv_depthwise.py), which releases the GIL
but runs on one core; at batch 2 MobileNetV2's and EfficientNetB0's take 0.2-1.4 ms each
(cold, a model's step), with their bias and activation (EfficientNet's swish: an exp a
value) after. TensorFlow splits them over its intra-op pool. Here each thread pads its own
images, convolves them into its slice of one output (einsum's `out`: the same loop, so the
same values) and adds the bias and applies the activation there. Whether that beats the
whole batch on one thread is measured per kernel (conv_choice.Chooser), and only asked when
the step has two threads for small kernels (conv_threads.split_workers: 1 on a loaded
machine).
"""
from time import perf_counter

import numpy as np

from tfg.kernels import conv_depthwise, conv_threads
from tfg.kernels.conv_choice import Chooser

# Depthwise convolutions of at least this many multiply-adds may run their images on the
# step's threads: a handoff costs 10-20 us, the einsum ~0.33 ns a multiply-add hot and
# several times that on the cold filters and inputs of a model's step.
SPLIT_MIN_MACS = 1 << 17


class DepthwiseSplit:
    """run(x, w, cache, bias=None, act=None) for NHWC numpy inputs of one signature: on one
    thread the whole batch as before (then the bias and act(y, out=y)); on the step's
    intra-op threads (conv_threads.py) one image group per part, each padded, convolved into
    its slice of the output (einsum's `out`) and given its bias and activation there. The
    same einsum loop per image, so the same values."""

    __slots__ = ("run", "spans", "runs", "out_shape", "chooser")

    def __init__(self, x_shape, w_shape, g):
        n, h, wd, c = x_shape
        m = w_shape[3]
        self.out_shape = (n, g.oh, g.ow, c * m)
        self.run = _strategy(x_shape, w_shape, g)
        self.spans = [(0, n // 2), (n // 2, n)]
        self.runs = {j - i: _strategy((j - i, h, wd, c), w_shape, g) for i, j in self.spans}
        self.chooser = Chooser()

    def __call__(self, x, w, cache, bias=None, act=None):
        if conv_threads.split_workers() < 2:
            return self.whole(x, w, cache, bias, act)
        threaded = self.chooser.pick()
        t = perf_counter()
        y = (self.parts if threaded else self.whole)(x, w, cache, bias, act)
        self.chooser.record(threaded, perf_counter() - t)
        return y

    def whole(self, x, w, cache, bias=None, act=None):
        """One thread: the whole batch as before, then the bias and act(y, out=y)."""
        y = self.run(x, w, cache)
        if bias is not None:
            np.add(y, bias, out=y)
        if act is not None:
            act(y, out=y)
        return y

    def parts(self, x, w, cache, bias=None, act=None):
        """The image groups on conv_threads, each into its slice of one output."""
        out = np.empty(self.out_shape, np.result_type(x, w))
        runs = self.runs

        def part(span, buf):
            i, j = span
            o = runs[j - i](x[i:j], w, cache, out[i:j])
            if bias is not None:
                np.add(o, bias, out=o)
            if act is not None:
                act(o, out=o)
        conv_threads.run_chunks(part, self.spans, 0, out.dtype)
        return out


def _strategy(x_shape, w_shape, g):
    """run(x, w, cache, out=None): `prepared`'s, else `forward` deciding per call."""
    run = conv_depthwise.prepared(x_shape, w_shape, g)
    return run if run is not None else (lambda x, w, cache, out=None:
                                        conv_depthwise.forward(x, w, g, cache, out))


def split(x_shape, w_shape, g):
    """A DepthwiseSplit for a batch of >= 2 NHWC images whose convolution has at least
    SPLIT_MIN_MACS multiply-adds, else None."""
    n, _, _, c = x_shape
    kh, kw, _, m = w_shape
    if n < 2 or n * g.oh * g.ow * c * m * kh * kw < SPLIT_MIN_MACS:
        return None
    return DepthwiseSplit(x_shape, w_shape, g)
