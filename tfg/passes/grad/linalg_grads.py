"""The gradients of the linalg ops. MatrixBandPart's is the same band of the output gradient;
Einsum's (TensorFlow's math_grad._EinsumGrad): for each input, an Einsum of the output
gradient with the other inputs, then the input's own summed-out labels and broadcast ellipsis
dims restored.

    Before: c = Einsum(a, b, "bqd,bkd->bqk")
    After:  da = Einsum(g, b, "bqk,bkd->bqd"),  db = Einsum(g, a, "bqk,bqd->bkd")

    Before: s = Einsum(x, "...ij->...j")   (label i summed away)
    After:  dx = BroadcastTo(ExpandDims(Einsum(g, "...j->...j"), -2), Shape(x))

    Before: t = Einsum(x, "ii->")          (a trace: a label repeated within one operand)
    After:  dx = Einsum(BroadcastTo(Reshape(g, [1]), [n]), "i->ii")   (g on the diagonal)
"""
import numpy as np

from tfg.errors import TfgInputError
from tfg.passes.grad.registry import conj, gradient
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
    has_ell = out_ell is not None or any(e is not None for e in ells)
    g = grads[0]
    result = []
    for i, (x, subs, ell) in enumerate(zip(inputs, labels, ells)):
        others = [j for j in range(len(inputs)) if j != i]
        present = set(out).union(*[labels[j] for j in others])
        # each label once: where x repeats one, _restore_repeated writes the diagonal
        kept = "".join(dict.fromkeys(c for c in subs if c in present))
        mid = ("..." if has_ell else "") + kept
        eq = ",".join([_with_ell(out, out_ell)] + [_with_ell(labels[j], ells[j])
                                                   for j in others]) + "->" + mid
        # complex operands: the gradient is in the conjugate direction
        dx = b.op("Einsum", [g] + [conj(b, inputs[j]) for j in others], {"equation": eq})
        if has_ell and _needs_ell_reduction(b, inputs, labels, ells, i):
            dx = _reduce_ellipsis(b, dx, x, subs, ell, len(kept))
        # dx's labels now: ('...' if x has one) + kept. Put them in x's order.
        tail = kept if ell is None else "..." + kept
        if len(set(subs)) != len(subs):
            result.append(_restore_repeated(b, dx, x, subs, ell, tail, present))
            continue
        before = sum(1 for c in subs[:ell or 0] if c in present) if ell is not None else 0
        target = "".join(c for c in subs if c in present)
        target = target if ell is None else target[:before] + "..." + target[before:]
        if target != tail:
            dx = b.op("Einsum", [dx], {"equation": f"{tail}->{target}"})
        if len(kept) != len(subs):
            dx = _restore_summed(b, dx, x, subs, ell, present)
        result.append(dx)
    return result


def _restore_repeated(b, dx, x, subs, ell, tail, present):
    """x repeats a label, so the op read only that diagonal of x (TensorFlow's
    _GetGradReduced): the labels only x has get their sizes in front (a broadcast), then one
    Einsum from those and dx's labels to x's writes each diagonal, zeros elsewhere.

        Before: t = Einsum(x[k, k, n], "iij->j")
        After:  dx = Einsum(BroadcastTo(Reshape(g, [1, n]), [k, n]), "ij->iij")
    """
    summed = "".join(dict.fromkeys(c for c in subs if c not in present))
    if summed:
        shape = b.op("Shape", [dx], {"out_type": _I32})
        ones = b.const([1] * len(summed), _I32)
        dx = b.op("Reshape", [dx, b.op("ConcatV2", [ones, shape, b.const(0, _I32)])])
        full = b.op("ConcatV2", [_label_sizes(b, x, subs, ell, summed), shape,
                                 b.const(0, _I32)])
        dx = b.op("BroadcastTo", [dx, full])
    return b.op("Einsum", [dx], {"equation": f"{summed}{tail}->{_with_ell(subs, ell)}"})


def _label_sizes(b, x, subs, ell, chars):
    """The sizes of x's labels `chars` (each at its leftmost axis): a 1-D int32 tensor."""
    axes = [p if ell is None or p < ell else p - len(subs) for p in map(subs.index, chars)]
    static = b.static_shape(x)
    if static is not None:
        return b.const([static[a] for a in axes], _I32)
    shape = b.op("Shape", [x], {"out_type": _I32})
    parts = [_slice(b, shape, a, a + 1 or None) for a in axes]
    return parts[0] if len(parts) == 1 else b.op("ConcatV2", parts + [b.const(0, _I32)])


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


# --- the v1/v2 diagonal ops and MatrixSetDiag* (TensorFlow's array_grad.py: its Python
# wrappers emit the V3 ops, with align RIGHT_LEFT unless the forward op is a V3 with its own.
# The V2 ops pack their diagonals LEFT_LEFT, so TensorFlow's V2 gradients read a band of sub-
# and superdiagonals of different lengths misplaced (0.5 off finite differences on a 3x4 case);
# tfg's V2 gradients use LEFT_LEFT, their own packing, and so differ from TensorFlow's there)
_RIGHT_LEFT = b"RIGHT_LEFT"
_LEFT_LEFT = b"LEFT_LEFT"


def _diag_part(b, g, k, align=_RIGHT_LEFT):
    zero = b.const(0, b.dtype(g))
    return b.op("MatrixDiagPartV3", [g, k, zero], {"align": align})


def _main_diagonal(b):
    """k = 0: the diagonal the v1 ops (which take no k) work on."""
    return b.const(0, _I32, name="k")


@gradient("MatrixDiag")
def _matrix_diag_v1(b, op, grads):
    return [_diag_part(b, grads[0], _main_diagonal(b))]


@gradient("MatrixDiagV2")
def _matrix_diag_v2(b, op, grads):
    return [_diag_part(b, grads[0], op.inputs[1], _LEFT_LEFT), None, None, None, None]


def _diag_part_grad(b, op, g, k, align, square_only):
    """A matrix of x's shape holding g on diagonals k: MatrixDiagV3 when x's matrix shape is
    known (square, for the v1 op), else MatrixSetDiagV3 of zeros like x."""
    x = op.inputs[0]
    shape = b.static_shape(x)
    matrix = None if shape is None else tuple(shape[-2:])
    if matrix is not None and (not square_only or matrix[0] == matrix[1]):
        rows, cols = (-1, -1) if square_only else matrix
        zero = b.const(0, b.dtype(g))
        return b.op("MatrixDiagV3", [g, k, b.const(rows, _I32, name="num_rows"),
                                     b.const(cols, _I32, name="num_cols"), zero],
                    {"align": align})
    return b.op("MatrixSetDiagV3", [b.zeros_like(x), g, k], {"align": align})


@gradient("MatrixDiagPart")
def _matrix_diag_part_v1(b, op, grads):
    return [_diag_part_grad(b, op, grads[0], _main_diagonal(b), _RIGHT_LEFT, True)]


@gradient("MatrixDiagPartV2")
def _matrix_diag_part_v2(b, op, grads):
    return [_diag_part_grad(b, op, grads[0], op.inputs[1], _LEFT_LEFT, False), None, None]


def _set_diag_grads(b, op, g, k, align):
    """(input gradient: g with the diagonals zeroed, diagonal gradient: g's diagonals)."""
    zeros = b.zeros_like(op.inputs[1])  # the diagonal's shape, which the forward op checked
    return (b.op("MatrixSetDiagV3", [g, zeros, k], {"align": align}),
            _diag_part(b, g, k, align))


@gradient("MatrixSetDiag")
def _matrix_set_diag_v1(b, op, grads):
    return list(_set_diag_grads(b, op, grads[0], _main_diagonal(b), _RIGHT_LEFT))


@gradient("MatrixSetDiagV2")
def _matrix_set_diag_v2(b, op, grads):
    return list(_set_diag_grads(b, op, grads[0], op.inputs[2], _LEFT_LEFT)) + [None]


@gradient("MatrixSetDiagV3")
def _matrix_set_diag_v3(b, op, grads):
    align = op.attr("align", _RIGHT_LEFT)
    return list(_set_diag_grads(b, op, grads[0], op.inputs[2], align)) + [None]


@gradient("Cross")
def _cross(b, op, grads):
    u, v = op.inputs
    return [b.op("Cross", [v, grads[0]]), b.op("Cross", [grads[0], u])]


# --- determinants, solves and decompositions (TensorFlow's linalg_grad.py, node for node
# where the values depend on it; Lu has no gradient there, so none here either)
def _adjoint(b, x, like):
    """x's conjugate transpose over the last two axes (x has forward tensor like's rank)."""
    xt = b.op("Transpose", [x, _last_two(b, like)])
    return b.op("Conj", [xt]) if b.dtype(like).is_complex else xt


def _diag(b, d):
    """array_ops.matrix_diag: MatrixDiagV3 with k = 0."""
    return b.op("MatrixDiagV3", [d, b.const(0, _I32), b.const(-1, _I32), b.const(-1, _I32),
                                 b.const(0, b.dtype(d))], {"align": _RIGHT_LEFT})


def _set_diag(b, x, d):
    return b.op("MatrixSetDiagV3", [x, d, b.const(0, _I32)], {"align": _RIGHT_LEFT})


def _diag_of(b, x):
    return b.op("MatrixDiagPartV3", [x, b.const(0, _I32), b.const(0, b.dtype(x))],
                {"align": _RIGHT_LEFT})


def _safe_reciprocal(b, x, dtype):
    """x / (x^2 + 1e-20): TensorFlow's Lorentz-broadened 1/x for (near) equal values."""
    eps = b.const(1e-20, dtype)
    return b.op("Mul", [x, b.op("Reciprocal", [b.op("AddV2", [b.op("Mul", [x, x]), eps])])])


def _det_multipliers(b, g, c):
    """g (shaped like c, [...]) reshaped to [..., 1, 1]."""
    shape = b.op("ConcatV2", [b.shape(c), b.const([1, 1], _I32), b.const(0, _I32)])
    return b.op("Reshape", [g, shape])


@gradient("MatrixDeterminant")
def _matrix_determinant(b, op, grads):
    """d det(A) = det(A) A^-H."""
    a, c = op.inputs[0], op.outputs[0]
    a_adj_inv = b.op("MatrixInverse", [a], {"adjoint": True})
    return [b.op("Mul", [_det_multipliers(b, b.op("Mul", [grads[0], c]), c), a_adj_inv])]


@gradient("LogMatrixDeterminant")
def _log_matrix_determinant(b, op, grads):
    """d log|det A| = A^-H (the sign has no gradient)."""
    a, c = op.inputs[0], op.outputs[1]
    a_adj_inv = b.op("MatrixInverse", [a], {"adjoint": True})
    return [b.op("Mul", [_det_multipliers(b, grads[1], c), a_adj_inv])]


@gradient("MatrixSolve")
def _matrix_solve(b, op, grads):
    a = op.inputs[0]
    adjoint = bool(op.attr("adjoint", False))
    c = op.outputs[0]
    grad_b = b.op("MatrixSolve", [a, grads[0]], {"adjoint": not adjoint})
    grad_a = _matmul(b, c, grad_b, adj_y=True) if adjoint else _matmul(b, grad_b, c, adj_y=True)
    return [b.op("Neg", [grad_a]), grad_b]


def _cholesky_solve(b, chol, rhs):
    """linalg_ops.cholesky_solve: two triangular solves with L L^H."""
    y = b.op("MatrixTriangularSolve", [chol, rhs], {"lower": True, "adjoint": False})
    return b.op("MatrixTriangularSolve", [chol, y], {"lower": True, "adjoint": True})


def _regularized_gramian_cholesky(b, a, l2, first_kind, small_dim):
    """Cholesky(A^H A + l2 I) (first kind) or Cholesky(A A^H + l2 I)."""
    gram = _matmul(b, a, a, adj_x=first_kind, adj_y=not first_kind)
    dtype = b.dtype(a)
    shape = b.static_shape(a)
    eye = np.broadcast_to(np.eye(small_dim, dtype=dtype.np), tuple(shape[:-2]) +
                          (small_dim, small_dim))
    gram = b.op("AddV2", [gram, b.op("Mul", [l2, b.const(eye, dtype, name="eye")])])
    return b.op("Cholesky", [gram])


@gradient("MatrixSolveLs")
def _matrix_solve_ls(b, op, grads):
    """The normal equations' gradients: of the first kind for M >= N, of the second
    otherwise. TensorFlow has none for fast=False; an unknown matrix shape (where TensorFlow
    builds a cond) is refused."""
    if not op.attr("fast", True):
        raise TfgInputError(f"MatrixSolveLs {op.name!r}: gradient not defined for fast=False")
    a, rhs, x = op.inputs[0], op.inputs[1], op.outputs[0]
    shape = b.static_shape(a)
    if shape is None:
        raise TfgInputError(f"MatrixSolveLs {op.name!r}: its gradient needs the matrix's "
                            f"static shape")
    g = grads[0]
    l2 = b.op("Cast", [op.inputs[2]], {"SrcT": DType.DOUBLE, "DstT": b.dtype(a)})
    m, n = shape[-2:]
    if m >= n:
        chol = _regularized_gramian_cholesky(b, a, l2, True, n)
        z = _cholesky_solve(b, chol, g)
        xzt = _matmul(b, x, z, adj_y=True)
        zx_sym = b.op("AddV2", [xzt, b.op("Transpose", [xzt, _last_two(b, a)])])
        grad_a = b.op("AddV2", [b.op("Neg", [_matmul(b, a, zx_sym)]),
                                _matmul(b, rhs, z, adj_y=True)])
        return [grad_a, _matmul(b, a, z), None]
    chol = _regularized_gramian_cholesky(b, a, l2, False, m)
    grad_b = _cholesky_solve(b, chol, _matmul(b, a, g))
    tmp = _cholesky_solve(b, chol, rhs)
    a1 = b.op("Neg", [_matmul(b, grad_b, _matmul(b, tmp, a, adj_x=True))])
    a2 = b.op("Sub", [g, _matmul(b, a, grad_b, adj_x=True)])
    a2 = _matmul(b, tmp, a2, adj_y=True)
    return [b.op("AddV2", [a1, a2]), grad_b, None]


@gradient("SelfAdjointEigV2")
def _self_adjoint_eig_v2(b, op, grads):
    """A = V diag(e) V^H: dA = V (diag(de) + F o (V^H dV)) V^H, F_ij = 1 / (e_j - e_i) off
    the diagonal; then symmetrized onto the lower triangle the op reads."""
    a, e = op.inputs[0], op.outputs[0]
    grad_e, grad_v = grads
    dtype = op.output_dtype(0)
    if op.attr("compute_v", True):
        v = op.outputs[1]
        diff = b.op("Sub", [b.op("ExpandDims", [e, b.const(-2, _I32)]),
                            b.op("ExpandDims", [e, b.const(-1, _I32)])])
        f = _set_diag(b, _safe_reciprocal(b, diff, dtype), b.zeros_like(e))
        inner = b.op("AddV2", [_diag(b, grad_e), b.op("Mul", [f, _matmul(b, v, grad_v,
                                                                         adj_x=True)])])
        grad_a = _matmul(b, v, _matmul(b, inner, v, adj_y=True))
    else:
        v = b.out(b.op("SelfAdjointEigV2", [a], {"compute_v": True}), 1)
        grad_a = _matmul(b, v, _matmul(b, _diag(b, grad_e), v, adj_y=True))
    grad_a = _band(b, b.op("AddV2", [grad_a, _adjoint(b, grad_a, a)]), -1, 0)
    half = b.op("Mul", [b.const(0.5, dtype), _diag_of(b, grad_a)])
    return [_set_diag(b, grad_a, half)]


def _cols(b, x, start, stop):
    """x[..., :, start:stop] (stop None: to the end)."""
    end_mask = 2 | (4 if stop is None else 0)
    return b.op("StridedSlice", [x, b.const([0, 0, start], _I32),
                                 b.const([0, 0, stop or 0], _I32), b.const([1, 1, 1], _I32)],
                {"ellipsis_mask": 1, "begin_mask": 2, "end_mask": end_mask})


def _static_matrix(b, op, what):
    shape = b.static_shape(op.inputs[0])
    if shape is None or None in shape[-2:]:
        raise TfgInputError(f"{what} {op.name!r}: its gradient needs the input's static "
                            f"matrix shape")
    return shape[-2:]


@gradient("Svd")
def _svd(b, op, grads):
    """TensorFlow's _SvdGrad (Giles; Townsend for the thin case; the complex correction)."""
    a = op.inputs[0]
    dtype = op.input_dtype(0)
    grad_s, grad_u, grad_v = grads
    grad_s_mat = _diag(b, grad_s)
    if not op.attr("compute_uv", True):
        svd = b.op("Svd", [a], {"compute_uv": True, "full_matrices": False})
        u, v = b.out(svd, 1), b.out(svd, 2)
        return [_matmul(b, u, _matmul(b, grad_s_mat, v, adj_y=True))]
    full = bool(op.attr("full_matrices", False))
    m, n = _static_matrix(b, op, "Svd")
    s, u, v = op.outputs
    use_adjoint = m > n
    if use_adjoint:
        m, n = n, m
        u, v = v, u
        grad_u, grad_v = grad_v, grad_u
    if full and abs(m - n) > 1:
        raise TfgInputError(f"Svd {op.name!r}: the gradient is not implemented for "
                            f"abs(m - n) > 1 when full_matrices is true (TensorFlow neither)")
    s_mat = _diag(b, s)
    s2 = b.op("Square", [s])
    diff = b.op("Sub", [b.op("ExpandDims", [s2, b.const(-2, _I32)]),
                        b.op("ExpandDims", [s2, b.const(-1, _I32)])])
    f = _set_diag(b, _safe_reciprocal(b, diff, dtype), b.zeros_like(s))
    s_inv_mat = _diag(b, _safe_reciprocal(b, s, dtype))
    v1, grad_v1 = _cols(b, v, 0, m), _cols(b, grad_v, 0, m)
    f_u = b.op("Mul", [f, _matmul(b, u, grad_u, adj_x=True)])
    v_gv = _matmul(b, v1, grad_v1, adj_x=True)
    f_v = b.op("Mul", [f, v_gv])
    term1_nouv = b.op("AddV2", [
        b.op("AddV2", [grad_s_mat, _matmul(b, b.op("AddV2", [f_u, _adjoint(b, f_u, a)]),
                                           s_mat)]),
        _matmul(b, s_mat, b.op("AddV2", [f_v, _adjoint(b, f_v, a)]))])
    grad = _matmul(b, u, _matmul(b, term1_nouv, v1, adj_y=True))
    if m != n:
        gv1t = _adjoint(b, grad_v1, a)
        term2_nous = b.op("Sub", [gv1t, _matmul(b, _matmul(b, gv1t, v1), v1, adj_y=True)])
        if full:
            v2, grad_v2 = _cols(b, v, m, n), _cols(b, grad_v, m, n)
            term2_nous = b.op("Sub", [term2_nous, _matmul(
                b, _matmul(b, v1, grad_v2, adj_x=True), v2, adj_y=True)])
        term2 = _matmul(b, _matmul(b, u, s_inv_mat), term2_nous)
        grad = b.op("AddV2", [grad, term2])
    if dtype.is_complex:
        l = _set_diag(b, b.zeros_like(v_gv), _diag_of(b, v_gv))  # eye * v_gv
        term3_nouv = _matmul(b, s_inv_mat, b.op("Sub", [_adjoint(b, l, a), l]))
        term3 = _matmul(b, u, _matmul(b, term3_nouv, v1, adj_y=True))
        grad = b.op("AddV2", [grad, b.op("Mul", [b.const(0.5, dtype), term3])])
    return [_adjoint(b, grad, a) if use_adjoint else grad]


def _triangular_solve_right(b, x, r, like):
    """x r^-1 for upper-triangular r: adjoint(MatrixTriangularSolve(r, adjoint(x)))."""
    solved = b.op("MatrixTriangularSolve", [r, _adjoint(b, x, like)],
                  {"lower": False, "adjoint": False})
    return _adjoint(b, solved, like)


def _qr_square_or_deep(b, q, r, dq, dr, like, dtype):
    """TensorFlow's _QrGradSquareAndDeepMatrices (arXiv:2009.10071)."""
    qdq = _matmul(b, q, dq, adj_x=True)
    qdq_ = b.op("Sub", [qdq, _adjoint(b, qdq, like)])
    rdr = _matmul(b, r, dr, adj_y=True)
    rdr_ = b.op("Sub", [rdr, _adjoint(b, rdr, like)])
    tril = _band(b, b.op("AddV2", [qdq_, rdr_]), -1, 0)
    grad_a = _matmul(b, q, b.op("AddV2", [dr, _triangular_solve_right(b, tril, r, like)]))
    grad_b = _triangular_solve_right(b, b.op("Sub", [dq, _matmul(b, q, qdq)]), r, like)
    ret = b.op("AddV2", [grad_a, grad_b])
    if dtype.is_complex:
        m = b.op("Sub", [rdr, _adjoint(b, qdq, like)])
        eyem = _set_diag(b, b.zeros_like(m), _diag_of(b, m))
        real_dt = DType.from_numpy(np.zeros(0, dtype.np).real.dtype)
        real = b.op("Real", [eyem], {"Tout": real_dt})
        real = b.op("Cast", [real], {"SrcT": real_dt, "DstT": dtype})
        correction = b.op("Sub", [eyem, real])
        ret = b.op("AddV2", [ret, _triangular_solve_right(
            b, _matmul(b, q, _adjoint(b, correction, like)), r, like)])
    return ret


@gradient("Qr")
def _qr(b, op, grads):
    """TensorFlow's _QrGrad: square and deep inputs directly, wide ones split as [x, y];
    like TensorFlow, none for a deep input with full_matrices."""
    a = op.inputs[0]
    q, r = op.outputs
    dq, dr = grads
    dtype = op.input_dtype(0)
    m, n = _static_matrix(b, op, "Qr")
    if m > n and op.attr("full_matrices", False):
        raise TfgInputError(f"Qr {op.name!r}: the gradient is not implemented when nrows > "
                            f"ncols and full_matrices is true (TensorFlow neither)")
    if m >= n:
        return [_qr_square_or_deep(b, q, r, dq, dr, a, dtype)]
    y = _cols(b, a, m, None)
    u = _cols(b, r, 0, m)
    dv, du = _cols(b, dr, m, None), _cols(b, dr, 0, m)
    dy = _matmul(b, q, dv)
    dx = _qr_square_or_deep(b, q, u, b.op("AddV2", [dq, _matmul(b, y, dv, adj_y=True)]), du,
                            a, dtype)
    return [b.op("ConcatV2", [dx, dy, b.const(-1, _I32)])]


@gradient("MatrixSquareRoot")
def _matrix_square_root(b, op, grads):
    """R = sqrtm(A), dA = R dR + dR R: solve the Sylvester equation as one linear system,
    (I kron R^T + R kron I) vec(dR) = vec(dA), as TensorFlow does (needs the static shape)."""
    a, root = op.inputs[0], op.outputs[0]
    shape = b.static_shape(root)
    if shape is None:
        raise TfgInputError(f"MatrixSquareRoot {op.name!r}: its gradient needs the input's "
                            f"static shape")
    batch, order = tuple(shape[:-2]), shape[-1]
    dtype = op.output_dtype(0)
    eye = b.const(np.broadcast_to(np.eye(order, dtype=dtype.np), shape), dtype, name="eye")
    swap = _last_two(b, a)

    def kron(x, y):
        xr = b.op("Reshape", [x, b.const(batch + (order, 1, order, 1), _I32)])
        yr = b.op("Reshape", [y, b.const(batch + (1, order, 1, order), _I32)])
        return b.op("Reshape", [b.op("Mul", [xr, yr]),
                                b.const(batch + (order * order,) * 2, _I32)])
    ksum = b.op("AddV2", [kron(eye, b.op("Transpose", [root, swap])), kron(root, eye)])
    vec_da = b.op("Reshape", [b.op("Transpose", [grads[0], swap]),
                              b.const(batch + (order * order, 1), _I32)])
    vec_dr = b.op("MatrixSolve", [ksum, vec_da])
    return [b.op("Transpose", [b.op("Reshape", [vec_dr, b.const(shape, _I32)]), swap])]
