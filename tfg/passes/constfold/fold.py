"""Constant folding proper: materialize shape queries of statically known shapes, and evaluate
nodes whose inputs are all constants with the CPU kernels.

    before: a = Const 1, b = Const 2, c = AddN(a, b), d = AddN(b, c)      (fetch d)
    after:  d = Const 5

A folded single-output node becomes a Const with the same name; outputs of a multi-output node
become `ConstantFolding/<node>-<port>`. The Const inherits the node's control inputs and those
of its constant inputs, so it runs in the same frame and after the same things.
"""
import numpy as np

from tfg.errors import TfgError
from tfg.graphdef.infer import TensorInfo, infer_node
from tfg.graphdef.names import TensorRef
from tfg.kernels.context import KernelContext
from tfg.kernels.registry import get_kernel
from tfg.kernels.scratch import scratch_shape
from tfg.passes.rewrite import CONST_OPS, PLACEHOLDERS
from tfg.schemas.dtypes import DType
from tfg.schemas.ops import control_flow_names, get_op, has_op, ops_with
from tfg.schemas.ops.signature import output_dtypes
from tfg.schemas.ops.value_fns import MAX_ELEMENTS

# Output larger than the inputs and above this: folding would bloat the graph file.
MAX_CONSTANT_BYTES = 100 * 1024
# A kernel whose scratch (a pool's padded input) is larger than this is left to run time,
# where the memory guard sizes it: a 4x4 MaxPool with a 2**30 window hung `tfg optimize`.
MAX_SCRATCH_BYTES = 64 << 20

# Never evaluated, besides stateful ops and ops without a signature (`foldable` asks the
# registry): control flow, feeds, variables, Consts already folded, and IdentityN, whose
# outputs would each need a Const of their own for nothing.
NEVER_FOLD = (control_flow_names() | ops_with("variable") | PLACEHOLDERS | CONST_OPS
              | frozenset({"IdentityN"}))
_SHAPE_OPS = ops_with("shape_metadata")


def materialize_shapes(ctx):
    """Shape/Size/Rank/ShapeN of statically known shapes -> Consts (`^input` keeps order)."""
    changed = False
    for node in list(ctx.graph):
        if node.op not in _SHAPE_OPS or ctx.graph.get(node.name) is not node:
            continue
        if node.name in ctx.opts.feeds:
            continue
        if node.op == "ShapeN":
            changed |= _materialize_shape_n(ctx, node)
            continue
        ref = node.data_inputs[0]
        shape = ctx.shape(ref)
        if shape is None or (node.op != "Rank" and any(d is None for d in shape)):
            continue
        if node.op == "Rank":
            value, dtype = np.int32(len(shape)), DType.INT32
        else:
            dtype = node.get_attr("out_type", DType.INT32)
            value = (np.array(shape, dtype=dtype.np) if node.op == "Shape"
                     else np.asarray(int(np.prod(shape, dtype=np.int64)), dtype=dtype.np))
        ctrls = ["^" + c for c in node.control_inputs] + [ctx.control_dep_for(ref)]
        ctx.morph(node, "Const", ctrls, {"dtype": dtype, "value": np.asarray(value)})
        ctx.remove_if_dead(ref.node)
        changed = True
    return changed


def _materialize_shape_n(ctx, node):
    dtype = node.get_attr("out_type", DType.INT32)
    changed = False
    for port, ref in enumerate(node.data_inputs):
        shape = ctx.full_shape(ref)
        if shape is None or not ctx.consumers(node.name, port):
            continue
        name = ctx.new_name(f"ConstantFolding/{node.name}-matshapes-{port}")
        ctrls = ["^" + c for c in node.control_inputs] + [ctx.control_dep_for(ref)]
        ctx.add_node(name, "Const", ctrls, {"dtype": dtype,
                                            "value": np.array(shape, dtype=dtype.np)},
                     node.device)
        ctx.reroute(TensorRef(node.name, port), TensorRef(name, 0))
        changed = True
    return changed


def foldable(ctx, node):
    """Whether `node` may be evaluated now: all data inputs constant, stateless, not fed."""
    if node.op in NEVER_FOLD or node.name in ctx.opts.feeds:
        return False
    refs = node.data_inputs
    if not refs:
        return False
    get = ctx.graph.get
    for r in refs:  # the cheap test first: most nodes read something that is not a Const
        src = get(r.node)
        if src is None or src.op not in CONST_OPS:
            return False
    if not has_op(node.op) or get_op(node.op).stateful:
        return False
    if not ctx.has_consumers(node.name) and not ctx.preserved(node.name):
        return False
    if _opaque_outputs(node):
        return False
    return all(ctx.const_value(r) is not None for r in refs)


def _opaque_outputs(node):
    """A variant or resource output cannot be a Const, and no shape function sizes it:
    evaluating TensorListReserve(num_elements=2**31-1) only to throw the list away allocated
    16 GiB of item slots before the session's memory check could refuse it."""
    try:
        return any(d.base in (DType.VARIANT, DType.RESOURCE) for d in output_dtypes(node))
    except TfgError:
        return True  # an output dtype the signature cannot tell: not worth the risk


def evaluate(node, inputs):
    """Run the node's CPU kernel on numpy inputs -> list of arrays (cast to output dtypes)."""
    kd = get_kernel(node.op, "CPU", node.name)
    if kd.needs_step or kd.ref_inputs:
        raise _NotFoldable
    kctx = KernelContext.for_node(node)
    scratch = scratch_shape(node.op, kctx.attrs, inputs)
    if scratch is not None and np.prod(scratch[0], dtype=np.float64) * scratch[1].itemsize \
            > MAX_SCRATCH_BYTES:
        raise _NotFoldable
    out = kd.fn(kctx, *inputs)
    outs = list(out) if isinstance(out, (tuple, list)) else [out]
    dtypes = kctx.output_dtypes
    if len(dtypes) != len(outs):
        raise _NotFoldable
    result = []
    for value, dt in zip(outs, dtypes):
        if dt.is_ref or dt.base in (DType.RESOURCE, DType.VARIANT):
            raise _NotFoldable
        value = np.asarray(value)
        if dt.base != DType.STRING and value.dtype != dt.np:
            value = value.astype(dt.np)
        result.append(value)
    return result


class _NotFoldable(Exception):
    pass


def output_nbytes(node, inputs):
    """Bytes the node's outputs would take, from static shape inference on its constant
    inputs, without running it; None when some output's shape or dtype is not known.

        >>> output_nbytes(fill, [np.array([1 << 14, 1 << 13], np.int32), np.float32(1)])
        536870912                            # a Fill of [16384, 8192] float32: never evaluated
    """
    try:
        outs = infer_node(node, [_const_info(v) for v in inputs])
    except Exception:  # noqa: BLE001 - inference is best effort: None means "not known"
        return None
    total = 0
    for info in outs:
        if info.dtype is None or info.shape is None or any(d is None for d in info.shape):
            return None
        count = 1
        for d in info.shape:
            count *= d
        base = info.dtype.base
        try:  # a string is at least a pointer, as numpy holds it
            itemsize = 8 if base == DType.STRING else base.np.itemsize
        except TfgError:
            return None
        total += count * itemsize
    return total


def _const_info(value):
    """The TensorInfo shape inference gives a Const holding `value` (values of small tensors
    only, as tfg.graphdef.infer keeps them)."""
    value = np.asarray(value)
    dtype = DType.from_numpy(value.dtype)
    if value.dtype == object or value.size > MAX_ELEMENTS or value.ndim > 8:
        return TensorInfo(dtype, tuple(value.shape))
    elems = (tuple(int(x) for x in value.reshape(-1))
             if value.dtype.kind in "iu" and value.size <= 64 else None)
    return TensorInfo(dtype, tuple(value.shape), value, elems)


def fold_constants(ctx):
    """Evaluate every foldable node (topological order, so chains fold in one sweep)."""
    changed = False
    for node in ctx.ordered_nodes():
        if ctx.graph.get(node.name) is not node or not foldable(ctx, node):
            continue
        refs = node.data_inputs
        inputs = [ctx.const_value(r) for r in refs]
        # What the graph file holds, not the decoded arrays: folding Identity(splat) would
        # write a splat's gigabyte out in full.
        in_bytes = sum(ctx.graph[r.node].attr_view["value"].ByteSize() for r in refs)
        # Decide on the size before evaluating: a Fill of 8 GiB must not be allocated to find
        # out that it is too large to keep.
        if too_large(output_nbytes(node, inputs), in_bytes):
            continue
        try:
            outs = evaluate(node, inputs)
        except (_NotFoldable, TfgError, ArithmeticError, ValueError, TypeError, IndexError,
                KeyError, NotImplementedError, MemoryError):
            continue  # a kernel error here is the run's error to report, not the optimizer's
        if too_large(sum(v.nbytes for v in outs), in_bytes):
            continue  # the shape was not known statically (or inference was wrong)
        ctrls = ["^" + c for c in node.control_inputs]
        for r in refs:
            ctrls += ["^" + c for c in ctx.graph[r.node].control_inputs]
        producers = {r.node for r in refs}
        if len(outs) == 1:
            dtype = DType.from_numpy(outs[0].dtype) if outs[0].dtype != object else DType.STRING
            ctx.morph(node, "Const", ctrls, {"dtype": dtype, "value": outs[0]})
            changed = True
        else:
            changed |= _fold_multi(ctx, node, outs, ctrls)
        for p in producers:
            ctx.remove_if_dead(p)
    return changed


def too_large(out_bytes, in_bytes):
    """Folding would bloat the graph: larger than the inputs, and than MAX_CONSTANT_BYTES."""
    return out_bytes is not None and out_bytes > in_bytes and out_bytes > MAX_CONSTANT_BYTES


def _fold_multi(ctx, node, outs, ctrls):
    changed = False
    for port, value in enumerate(outs):
        if not ctx.consumers(node.name, port):
            continue
        dtype = DType.from_numpy(value.dtype) if value.dtype != object else DType.STRING
        name = ctx.new_name(f"ConstantFolding/{node.name}-{port}")
        ctx.add_node(name, "Const", ctrls, {"dtype": dtype, "value": value}, node.device)
        ctx.reroute(TensorRef(node.name, port), TensorRef(name, 0))
        changed = True
    if changed:
        ctx.remove_if_dead(node.name)
    return changed
