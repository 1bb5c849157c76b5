"""One BLAS thread for steps whose GEMMs are all small: the 'adaptive' setting's size floor.

    >>> floor = GemmFloor(graph, needed, feed_refs)   # once per prepared step
    >>> floor.limit(ADAPTIVE, feed_values)            # every step: 1 when the step's largest
    1                                                 # GEMM is under FLOOR_MACS, else ADAPTIVE

Why: on a quiet machine 'adaptive' (tfg/executor/blas.py) gives OpenBLAS both cores, and
OpenBLAS threads every GEMM above 262,144 multiply-adds (its compiled-in threshold). Between
that and about 4 million its second thread costs more than it brings. With 20 us of Python
between calls, as in a loop body (benchmarks/bench_gemm_floor.py): 32x128x128, the rnn row's
250 products a step, 19.5 us on one thread against 34.5 us on two; 128x128x128 56 against 57;
64x256x256 (4.2M) 111 against 94, and from there on two threads win (128x784x1024: 0.69x).
The rnn step itself: 9.4 / 15.1 ms on one thread against 12.9 / 18.8 ms on two (A B, one
process), and a quiet suite run gave 19.7 ms with 38 ms of CPU on two threads.

The decision is made once per prepared step and feed signature (the feeds' shapes), on its
second step (a one-shot run keeps the adaptive count and infers nothing), never per call,
and only when it matters (the process may use two cores or more: adaptive, or on a busy
machine the thread trial of blas_trial.py, could give BLAS two threads): the shape
functions (tfg.graphdef.infer) give every BLAS op's operands; the step runs on one BLAS
thread when each of them is known and under the floor. An op whose shapes are not known, a
BLAS op this module cannot size (Einsum), and graphs of over 1,000 nodes (inferring them
would cost 0.1-0.6 s once) keep the adaptive count, as does an explicit count (`blas_threads=
2`, `--blas-threads`, $TFG_BLAS_THREADS): the user's. $TFG_GEMM_FLOOR sets the floor in
multiply-adds (0: no floor, for comparisons).
"""
from tfg.executor.blas import ADAPTIVE
from tfg.executor.contention import choices, meter, threads_for, usable_cores
from tfg.graphdef.infer import infer
from tfg.kernels import onednn
from tfg.kernels.gemm_floor import SMALL_GEMM_MACS, gemm_floor
from tfg.schemas.ops import has_trait

FLOOR_MACS = SMALL_GEMM_MACS  # (tfg/kernels/gemm_floor.py: also each small convolution's)
# Forward convolutions that oneDNN runs where it is installed (tfg/kernels/onednn.py): its
# small kernels gain from a second thread (MobileNetV3Small's step: 3.4 ms on two, 4.4 on
# one), so a step holding one keeps the adaptive count, and the BLAS trial times both.
ONEDNN_OPS = ("Conv2D", "_FusedConv2D", "DepthwiseConv2dNative",
              "_FusedDepthwiseConv2dNative")
# Inference runs at about 130 us a node (NASNet's 4,587: 0.63 s). Larger graphs keep the
# adaptive count: the all-small case is a loop's graph (the rnn row's: 101 nodes, 9 ms).
_MAX_NODES = 1000
_MAX_SIGNATURES = 8


floor_macs = gemm_floor  # $TFG_GEMM_FLOOR, else FLOOR_MACS (0: none)


def adaptive_count():
    """The count 'adaptive' would choose now (not counted in contention.choices)."""
    return threads_for(usable_cores(), meter().others())


def _dims(info, node, port):
    shape = info.get((node, port))
    shape = getattr(shape, "shape", None)
    if shape is None or any(d is None or d < 0 for d in shape):
        return None
    return tuple(shape)


def _product(dims):
    n = 1
    for d in dims:
        n *= d
    return n


def gemm_macs(node, info):
    """Multiply-adds of the largest single GEMM `node` makes, from inferred shapes, or None
    when they are unknown or the op is not sized here.
    Before: MatMul [32,128] x [128,128]. After: 524288 (32 * 128 * 128)."""
    op = node.op
    ins = [_dims(info, r.node, r.port) for r in node.data_inputs]
    out = _dims(info, node.name, 0)
    if out is None or not ins or ins[0] is None:
        return None
    if op in ("MatMul", "_FusedMatMul", "BatchMatMul", "BatchMatMulV2", "BatchMatMulV3"):
        a = ins[0]
        if len(a) < 2 or len(out) < 2:
            return None
        transposed = node.get_attr("transpose_a", node.get_attr("adj_x", False))
        k = a[-2] if transposed else a[-1]
        return out[-2] * out[-1] * k  # per matrix: OpenBLAS threads each GEMM on its own
    if op in ("Conv2D", "_FusedConv2D", "Conv2DBackpropInput", "DepthwiseConv2dNative",
              "DepthwiseConv2dNativeBackpropInput"):
        filt = ins[1] if len(ins) > 1 else None
        if filt is None or len(filt) != 4:
            return None
        per_out = filt[0] * filt[1] * (filt[3] if "BackpropInput" in op else filt[2])
        if op.startswith("Depthwise"):
            per_out = filt[0] * filt[1]
        return _product(out) * per_out
    if op in ("Conv2DBackpropFilter", "DepthwiseConv2dNativeBackpropFilter"):
        grad = ins[2] if len(ins) > 2 else None
        if grad is None:
            return None
        return _product(out) * _product(grad) // max(1, grad[-1])
    return None


class GemmFloor:
    """Per prepared step: whether its BLAS ops are all small, per feed signature."""

    def __init__(self, graph, needed, feed_refs):
        self.graph = graph
        self.blas = [graph[n] for n in needed if has_trait(graph[n].op, "blas")]
        self.feed_refs = tuple(feed_refs)
        self.small = {}  # feed shapes -> bool
        self.seen = set()  # feed shapes whose first step ran: decided on the second

    def limit(self, limit, feed_values):
        """The BLAS limit for one step: 1 instead of ADAPTIVE when every GEMM is small."""
        if limit != ADAPTIVE or not self.blas:
            return limit
        floor = floor_macs()
        if not floor:
            return limit
        key = (floor,) + tuple(getattr(v, "shape", None) for v in feed_values)
        small = self.small.get(key)
        if small is None:
            if key not in self.seen:  # a one-shot run (`tfg run`) never pays the inference
                if len(self.seen) >= _MAX_SIGNATURES:
                    self.seen.clear()
                self.seen.add(key)
                return limit
            if len(self.graph) > _MAX_NODES:
                small = False
            elif usable_cores() < 2:
                return limit  # one BLAS thread anyway (on a busy machine of two cores or
                # more the trial may give two: blas_trial.py, which a small step skips)
            else:
                small = self._all_small(feed_values, floor)
            if len(self.small) >= _MAX_SIGNATURES:
                self.small.clear()
            self.small[key] = small
        if small:
            choices["1 (gemm floor)"] += 1  # what the benchmarks report as adaptive's choices
            return 1
        return limit

    def _all_small(self, feed_values, floor):
        shapes = {(r.node, r.port): tuple(getattr(v, "shape", ()))
                  for r, v in zip(self.feed_refs, feed_values) if hasattr(v, "shape")}
        try:
            info = infer(self.graph, shapes=shapes)
        except Exception:  # noqa: BLE001 - best effort (as passes/shapes.py): keep adaptive
            return False
        on_onednn = onednn.wanted()
        for node in self.blas:
            if on_onednn and node.op in ONEDNN_OPS:
                return False  # oneDNN's convolution, on its own threads: no OpenBLAS floor
            macs = gemm_macs(node, info)
            if macs is None or macs >= floor:
                return False
        return True
