"""Fused elementwise kernels for a GPU partition: a tree of single-consumer elementwise nodes
runs as ONE kernel launch instead of one per node (each launch costs 10-25 µs on a GPU).

    Before (LSTM gates, 5 launches):  i = Sigmoid(a); g = Tanh(b); ig = Mul(i, g);
                                      fc = Mul(f, c); c2 = Add(fc, ig)
    After (1 launch):  c2 = fused(a, b, f, c), a generated cupy.ElementwiseKernel:
        float t0 = <sigmoid of in0>; float t1 = tanh(in1); float t2 = t0 * t1; ...; out0 = t4;

Grouping (`fuse_groups`, at plan time): a node joins its consumer's group when it is an
elementwise op this module can write in C (`C_EXPRESSIONS`, a subset of the registry's
`elementwise` trait), computes on the device in float32 or float64, has exactly one consumer
(a data edge to another fusable node of the same dtype), and is not fetched. So a value that
something else reads (a fetch, a second consumer, a _Send, a control edge) is never fused away.

The fused function (`fused_kernel`): on CuPy a generated ElementwiseKernel, which broadcasts
its inputs as the unfused kernels do; on the stand-in (tfg.kernels.gpu.standin) the plain
composition of the nodes' own kernels, so CI checks the grouping and the values. A failure
names every node of the group; nothing falls back to the unfused kernels. `TFG_GPU_FUSE=0`
switches fusion off (to compare); CPU devices are never fused.
"""
import os

import numpy as np

from tfg.errors import TfgRuntimeError
from tfg.kernels import memory
from tfg.schemas.dtypes import DType
from tfg.schemas.ops import ops_with

FUSE_ENV = "TFG_GPU_FUSE"

# C (CUDA) statement of each fusable op over operands {0}, {1} of C type {T}; written to give
# what the unfused kernel gives: NaN propagates through Maximum/Minimum/Relu as in xp.maximum,
# and Sigmoid uses exp of a non-positive number only, as math_ops._sigmoid does.
C_EXPRESSIONS = {
    "Add": "{0} + {1}", "AddV2": "{0} + {1}", "Sub": "{0} - {1}", "Mul": "{0} * {1}",
    "RealDiv": "{0} / {1}", "Div": "{0} / {1}", "Neg": "-{0}", "Square": "{0} * {0}",
    "Maximum": "({0} > {1} || isnan({0})) ? {0} : {1}",
    "Minimum": "({0} < {1} || isnan({0})) ? {0} : {1}",
    "Relu": "({0} > ({T})0 || isnan({0})) ? {0} : ({T})0",
    "Tanh": "tanh({0})", "Exp": "exp({0})",
    "Sigmoid": "({0} >= ({T})0) ? ({T})1 / (({T})1 + exp(-fabs({0})))"
               " : exp(-fabs({0})) / (({T})1 + exp(-fabs({0})))",
}
FUSABLE_OPS = frozenset(C_EXPRESSIONS) & ops_with("elementwise")
_C_TYPES = {DType.FLOAT: "float", DType.DOUBLE: "double"}
_PARAM_TYPES = {"float": "float32", "double": "float64"}  # ElementwiseKernel's param names


def enabled():
    """Whether GPU partitions fuse elementwise chains (TFG_GPU_FUSE=0 turns it off)."""
    return os.environ.get(FUSE_ENV, "1") != "0"


def _fusable_dtype(item):
    """The item's C type when it may join a fused group, else None."""
    if item.op not in FUSABLE_OPS or item.num_outputs != 1 or item.needs_step or item.deref:
        return None
    ctx = item.ctx
    if ctx is None or ctx.xp is np:  # a host-memory node of a GPU device
        return None
    return _C_TYPES.get(ctx.attrs.get("T"))


def fuse_groups(runnable, inputs, fetched):
    """Groups of `runnable` (kernel items in schedule order) to fuse, as lists of items in
    schedule order, the last one the group's root (the node whose output leaves the group).

    `inputs[item.id]`: the (source item id, port) of each input; `fetched`: the ids of items
    whose output is fetched. Groups of one node are left out.
    """
    by_id = {it.id: it for it in runnable}
    ctype = {it.id: _fusable_dtype(it) for it in runnable}
    parent = {}
    for it in runnable:
        if ctype[it.id] is None or it.id in fetched or len(it.out_edges) != 1:
            continue
        dst, port, idx = it.out_edges[0]
        if port != 0 or dst not in by_id or ctype[dst] != ctype[it.id]:
            continue  # a control edge, or a consumer that is not fusable with it
        parent[it.id] = dst
    groups = {}
    for it in runnable:
        if ctype[it.id] is None:
            continue
        root = it.id
        while root in parent:
            root = parent[root]
        groups.setdefault(root, []).append(it)  # the root comes last: it reads the others
    return [g for g in groups.values() if len(g) > 1]


def fused_kernel(group, inputs, xp):
    """One kernel `fn(ctx, *external_inputs)` for `group` (items in schedule order, root
    last), and the (source item id, port) of each external input, in argument order."""
    external, wiring = wire(group, inputs)
    names = ", ".join(repr(it.name) for it in group)
    if getattr(xp, "ElementwiseKernel", None) is not None:
        run = _cupy_kernel(group, wiring, len(external), xp)
    else:
        run = _composition(group, wiring, xp)

    def fused(ctx, *args):
        try:
            return run(*args)
        except Exception as e:  # noqa: BLE001 - name every node of the group, then re-raise
            raise TfgRuntimeError(f"fused elementwise kernel of nodes [{names}]: "
                                  f"{type(e).__name__}: {e}") from e
    fused.__name__ = f"fused_{len(group)}"
    fused.members = tuple(it.name for it in group)
    return fused, external


def wire(group, inputs):
    """(external, wiring): the group's external inputs, each (source item id, port) once, and
    per member, per input, ("ext", i) for external input i or ("mem", j) for member j."""
    ids = {it.id: k for k, it in enumerate(group)}
    external, wiring = [], []
    for it in group:
        wires = []
        for src in inputs[it.id]:
            if src[0] in ids:
                wires.append(("mem", ids[src[0]]))
            else:
                if src not in external:
                    external.append(src)
                wires.append(("ext", external.index(src)))
        wiring.append(wires)
    return external, wiring


def _composition(group, wiring, xp):
    """The stand-in's fused function: each node's own kernel, in order (values identical)."""
    def run(*args):
        xp.COUNTS["fused"] += 1
        vals = []
        for it, wires in zip(group, wiring):
            vals.append(it.fn(it.ctx, *[args[i] if kind == "ext" else vals[i]
                                        for kind, i in wires]))
        return vals[-1]
    return run


def kernel_source(group, wiring, n_inputs):
    """(in_params, out_params, body) of the ElementwiseKernel computing `group`.

    >>> kernel_source([Sigmoid a, Mul (a, x)], [[("ext", 0)], [("mem", 0), ("ext", 1)]], 2)
    ('float32 in0, float32 in1', 'float32 out0',
     'float t0 = (in0 >= (float)0) ? ...; float t1 = t0 * in1; out0 = t1;')
    """
    ctype = _C_TYPES[group[-1].ctx.attrs["T"]]
    lines = []
    for k, (it, wires) in enumerate(zip(group, wiring)):
        operands = [f"in{i}" if kind == "ext" else f"t{i}" for kind, i in wires]
        expr = C_EXPRESSIONS[it.op].format(*operands, T=ctype)
        lines.append(f"{ctype} t{k} = {expr};")
    lines.append(f"out0 = t{len(group) - 1};")
    ptype = _PARAM_TYPES[ctype]
    params = ", ".join(f"{ptype} in{i}" for i in range(n_inputs))
    return params, f"{ptype} out0", " ".join(lines)


def _cupy_kernel(group, wiring, n_inputs, xp):
    """CuPy's fused function: one generated ElementwiseKernel (compiled on its first call)."""
    in_params, out_params, body = kernel_source(group, wiring, n_inputs)
    kernel = xp.ElementwiseKernel(in_params, out_params, body, f"tfg_fused_{len(group)}")

    def run(*args):
        return kernel(*[memory.to_device(xp, a) for a in args])
    return run
