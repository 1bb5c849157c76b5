"""The gradients of the linalg ops. MatrixBandPart's is the same band of the output gradient;
Einsum's (TensorFlow's math_grad._EinsumGrad): for each input, an Einsum of the output
gradient with the other inputs, then the input's own summed-out labels and broadcast ellipsis
dims restored.

    Before: c = Einsum(a, b, "bqd,bkd->bqk")
    After:  da = Einsum(g, b, "bqk,bkd->bqd"),  db = Einsum(g, a, "bqk,bqd->bkd")

    Before: s = Einsum(x, "...ij->...j")   (label i summed away)
    After:  dx = BroadcastTo(ExpandDims(Einsum(g, "...j->...j"), -2), Shape(x))
"""
from tfg.errors import TfgInputError
from tfg.passes.grad.registry import gradient
from tfg.schemas.dtypes import DType
from tfg.schemas.ops.linalg_ops import parse_einsum
from tfg.schemas.ops.shape_fns import broadcast

_I32 = DType.INT32


def _with_ell(subs, ell):
    return subs if ell is None else subs[:ell] + "..." + subs[ell:]


def _slice(b, vec, begin, end):
    """vec[begin:end] of a 1-D int32 tensor (end None: to the end)."""
    return b.op("StridedSlice", [vec, b.const([begin], _I32), b.const([end or 0], _I32),
                                 b.const([1], _I32)], {"end_mask": 1 if end is None else 0})


def _ell_shapes(b, inputs, labels, ells):
    """Each input's static ellipsis shape (None where unknown or the input has none)."""
    out = []
    for t, subs, ell in zip(inputs, labels, ells):
        shape = b.static_shape(t) if ell is not None else None
        out.append(None if shape is None else
                   tuple(shape[ell:ell + len(shape) - len(subs)]))
    return out


def _needs_ell_reduction(b, inputs, labels, ells, i):
    """Whether input i's gradient has broadcast ellipsis dims to sum away (True when unsure)."""
    shapes = _ell_shapes(b, inputs, labels, ells)
    if any(s is None for s, e in zip(shapes, ells) if e is not None):
        return True
    full = ()
    for s in shapes:
        if s is not None:
            full = broadcast(full, s)
    mine = shapes[i] if ells[i] is not None else ()
    return tuple(full) != tuple(mine)


@gradient("Einsum")
def _einsum(b, op, grads):
    inputs = op.inputs
    labels, out, ells, out_ell = parse_einsum(op.attr("equation"), len(inputs))
    if len(set(out)) != len(out) or any(len(set(s)) != len(s) for s in labels):
        raise TfgInputError(f"the gradient of Einsum {op.name!r} "
                            f"({op.attr('equation')!r}): a label repeated within one operand "
                            f"(a diagonal or trace) is not supported")
    has_ell = out_ell is not None or any(e is not None for e in ells)
    g = grads[0]
    result = []
    for i, (x, subs, ell) in enumerate(zip(inputs, labels, ells)):
        others = [j for j in range(len(inputs)) if j != i]
        present = set(out).union(*[labels[j] for j in others])
        kept = "".join(c for c in subs if c in present)
        mid = ("..." if has_ell else "") + kept
        eq = ",".join([_with_ell(out, out_ell)] + [_with_ell(labels[j], ells[j])
                                                   for j in others]) + "->" + mid
        dx = b.op("Einsum", [g] + [inputs[j] for j in others], {"equation": eq})
        if has_ell and _needs_ell_reduction(b, inputs, labels, ells, i):
            dx = _reduce_ellipsis(b, dx, x, subs, ell, len(kept))
        # dx's labels now: ('...' if x has one) + kept. Put them in x's order.
        tail = kept if ell is None else "..." + kept
        before = sum(1 for c in subs[:ell or 0] if c in present) if ell is not None else 0
        target = "".join(c for c in subs if c in present)
        target = target if ell is None else target[:before] + "..." + target[before:]
        if target != tail:
            dx = b.op("Einsum", [dx], {"equation": f"{tail}->{target}"})
        if len(kept) != len(subs):
            dx = _restore_summed(b, dx, x, subs, ell, present)
        result.append(dx)
    return result


def _reduce_ellipsis(b, dx, x, subs, ell, n_kept):
    """Sum dx's leading ellipsis dims (broadcast over the other operands) down to x's own."""
    shape = b.op("Shape", [dx], {"out_type": _I32})
    ell_dx = _slice(b, shape, 0, -n_kept if n_kept else None)
    if ell is None:
        ell_x = b.const([], _I32)
    else:
        after = len(subs) - ell
        ell_x = _slice(b, b.shape(x), ell, -after if after else None)
    axes = b.out(b.op("BroadcastGradientArgs", [ell_x, ell_dx]), 0)
    summed = b.op("Sum", [dx, axes], {"keep_dims": True})
    rest = _slice(b, shape, -n_kept, None) if n_kept else b.const([], _I32)
    return b.op("Reshape", [summed, b.op("ConcatV2", [ell_x, rest, b.const(0, _I32)])])


def _restore_summed(b, dx, x, subs, ell, present):
    """Labels only x has were summed away: put them back as size-1 dims and broadcast."""
    front = subs if ell is None else subs[:ell]
    for pos, c in enumerate(front):
        if c not in present:
            dx = b.op("ExpandDims", [dx, b.const(pos, _I32)])
    if ell is not None:
        back = subs[ell:]
        for pos in range(len(back) - 1, -1, -1):
            if back[pos] not in present:
                dx = b.op("ExpandDims", [dx, b.const(pos - len(back), _I32)])
    return b.op("BroadcastTo", [dx, b.shape(x)])


@gradient("MatrixBandPart")
def _matrix_band_part(b, op, grads):
    """TensorFlow's array_grad._MatrixBandPartGrad: only the band reached the output."""
    return [b.op("MatrixBandPart", [grads[0], op.inputs[1], op.inputs[2]]), None, None]


# --- inverse, triangular solve, Cholesky (TensorFlow's linalg_grad.py)
def _matmul(b, x, y, adj_x=False, adj_y=False):
    return b.op("BatchMatMulV2", [x, y], {"adj_x": adj_x, "adj_y": adj_y})


def _band(b, x, lower, upper):
    return b.op("MatrixBandPart", [x, b.const(lower, DType.INT64), b.const(upper, DType.INT64)])


@gradient("MatrixInverse")
def _matrix_inverse(b, op, grads):
    ainv = op.outputs[0]
    adjoint = bool(op.attr("adjoint", False))
    inner = _matmul(b, grads[0], ainv, adj_x=adjoint, adj_y=not adjoint)
    return [b.op("Neg", [_matmul(b, ainv, inner, adj_x=not adjoint)])]


@gradient("MatrixTriangularSolve")
def _matrix_triangular_solve(b, op, grads):
    a, rhs = op.inputs
    lower, adjoint = bool(op.attr("lower", True)), bool(op.attr("adjoint", False))
    c = op.outputs[0]
    grad_b = b.op("MatrixTriangularSolve", [a, grads[0]],
                  {"lower": lower, "adjoint": not adjoint})
    grad_a = _matmul(b, c, grad_b, adj_y=True) if adjoint else _matmul(b, grad_b, c, adj_y=True)
    grad_a = b.op("Neg", [grad_a])
    grad_a = _band(b, grad_a, -1, 0) if lower else _band(b, grad_a, 0, -1)
    sa, sb = b.static_shape(a), b.static_shape(rhs)
    if sa is not None and sb is not None and sa[:-2] == sb[:-2]:
        return [grad_a, grad_b]
    # batch dims broadcast (or unknown while building): sum each gradient back to its input
    shape_a, shape_b = b.shape(a), b.shape(rhs)

    def batch(shape):
        return b.op("StridedSlice", [shape, b.const([0], _I32), b.const([-2], _I32),
                                     b.const([1], _I32)])
    args = b.op("BroadcastGradientArgs", [batch(shape_a), batch(shape_b)])
    grad_a = b.op("Reshape", [b.op("Sum", [grad_a, b.out(args, 0)]), shape_a])
    grad_b = b.op("Reshape", [b.op("Sum", [grad_b, b.out(args, 1)]), shape_b])
    return [grad_a, grad_b]


@gradient("Cholesky")
def _cholesky(b, op, grads):
    """A = L L^H: dA = 1/2 (X + X^H), X = L^-H Phi(L^H dL) L^-1, Phi = the lower triangle
    with the diagonal halved."""
    l = op.outputs[0]
    eye = _band(b, b.op("OnesLike", [l]), 0, 0)
    l_inv = b.op("MatrixTriangularSolve", [l, eye], {"lower": True, "adjoint": False})
    middle = _matmul(b, l, grads[0], adj_x=True)
    half = b.const(0.5, op.output_dtype(0))
    middle = b.op("Sub", [_band(b, middle, -1, 0), b.op("Mul", [half, _band(b, middle, 0, 0)])])
    x = _matmul(b, _matmul(b, l_inv, middle, adj_x=True), l_inv)
    xt = b.op("Transpose", [x, _last_two(b, l)])
    if op.output_dtype(0).is_complex:
        xt = b.op("Conj", [xt])
    return [b.op("Mul", [b.op("AddV2", [x, xt]), half])]


def _last_two(b, x):
    """The permutation that swaps the last two axes of forward tensor x (and of every tensor
    of its rank)."""
    r = b.builder.static_rank(x)
    if r is None:
        rank = b.op("Rank", [x])
        head = b.op("Range", [b.const(0, _I32), b.op("Sub", [rank, b.const(2, _I32)]),
                              b.const(1, _I32)])
        tail = b.op("Pack", [b.op("Sub", [rank, b.const(1, _I32)]),
                             b.op("Sub", [rank, b.const(2, _I32)])], {"axis": 0})
        return b.op("ConcatV2", [head, tail, b.const(0, _I32)])
    return b.const(list(range(r - 2)) + [r - 1, r - 2], _I32)


@gradient("MatrixDiagV3")
def _matrix_diag_v3(b, op, grads):
    zero = b.const(0, op.input_dtype(0))
    part = b.op("MatrixDiagPartV3", [grads[0], op.inputs[1], zero],
                {"align": op.attr("align", b"RIGHT_LEFT")})
    return [part, None, None, None, None]


@gradient("MatrixDiagPartV3")
def _matrix_diag_part_v3(b, op, grads):
    x = op.inputs[0]
    shape = b.shape(x)

    def dim(i):
        return b.op("StridedSlice", [shape, b.const([i], _I32), b.const([i + 1], _I32),
                                     b.const([1], _I32)], {"shrink_axis_mask": 1})
    zero = b.const(0, op.input_dtype(0))
    out = b.op("MatrixDiagV3", [grads[0], op.inputs[1], dim(-2), dim(-1), zero],
               {"align": op.attr("align", b"RIGHT_LEFT")})
    return [out, None, None]
