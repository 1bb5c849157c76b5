"""Einsum (TensorFlow's linalg_ops Einsum), through numpy's or CuPy's einsum, and
MatrixBandPart (tf.linalg.band_part: Keras' causal attention mask); the diagonal ops (MatrixDiag,
MatrixDiagPart, MatrixSetDiag in their V1/V2/V3 forms, one implementation each) and Cross;
the determinants, solves and decompositions (MatrixDeterminant, LogMatrixDeterminant,
MatrixSolve, MatrixSolveLs, Qr, Svd, SelfAdjointEigV2, Lu, MatrixSquareRoot) through
numpy.linalg and a partial-pivot LU that pivots as Eigen's does.

    Einsum(q[b,q,h,d], k[b,k,h,d], equation="bqhd,bkhd->bhqk") -> scores[b,h,q,k]
    MatrixBandPart(ones[3,3], num_lower=-1, num_upper=0) -> [[1,0,0],[1,1,0],[1,1,1]]

The equation is validated by the signature's parser (schemas/ops/linalg_ops.py) so a bad one
fails with the same words at build and run time. Two operands of the plain form (no ellipsis,
no repeated or broadcast label) are planned once per operand shapes as transposes around one
matmul (einsum_plan.py), TensorFlow's own transpose-GEMM-transpose; other two-operand ones go
through numpy's optimized path (tensordot), or, tiny (under 2**16 multiply-adds), straight to
numpy's C loop: the optimized path's planning costs ~40 us a call, the loop ~5 us.
"""
import numpy as np

from tfg.kernels import einsum_plan
from tfg.kernels._util import errstate, fail, np_dtype, s, tf_dims, tf_name, \
    unsupported_dtype
from tfg.kernels.registry import ALL_DEVICES, kernel
from tfg.schemas.ops.linalg_ops import diag_matrix_size, parse_einsum
from tfg.schemas.ops.shape_fns import ShapeError


def _numpy_equation(equation, n):
    """(the equation in explicit form ('->' always: an implicit output is made explicit) with
    each output label once, and None or what _inflate needs where an output label is written
    more than once: TensorFlow's kernel puts "i->ii" on a diagonal of zeros, numpy refuses)."""
    try:
        labels, out, ells, out_ell = parse_einsum(equation, n)
    except ShapeError as e:
        fail(str(e))

    def join(subs, ell):
        return subs if ell is None else subs[:ell] + "..." + subs[ell:]
    if any(e is not None for e in ells) and out_ell is None:
        # TensorFlow sums the broadcast dims away; numpy would refuse: say so plainly.
        fail(f"einsum {s(equation)!r}: an ellipsis in the inputs must appear in the output")
    unique = "".join(dict.fromkeys(out))
    unique_ell = None if out_ell is None else len(dict.fromkeys(out[:out_ell]))
    inflate = None if unique == out else (out, out_ell, unique, unique_ell)
    return (",".join(join(a, e) for a, e in zip(labels, ells)) + "->" + join(unique, unique_ell),
            inflate)


def _inflate(xp, y, out, out_ell, unique, unique_ell):
    """y (labelled `unique`) written into zeros labelled `out`, where a label repeats: each
    repeated label's axes index y's one axis together (a diagonal).

        y [a, b], unique "ij", out "iji"  ->  z [a, b, a], z[p, q, p] = y[p, q], 0 elsewhere
    """
    n_ell = y.ndim - len(unique)

    def axes(labels, ell):  # one key per axis: the label, or the ellipsis dim's number
        keys = list(labels)
        if ell is not None:
            keys[ell:ell] = list(range(n_ell))
        return keys
    src = {key: i for i, key in enumerate(axes(unique, unique_ell))}
    dst = [src[key] for key in axes(out, out_ell)]
    z = xp.zeros([y.shape[i] for i in dst], dtype=y.dtype)
    z[tuple(xp.arange(y.shape[i]).reshape([-1 if j == i else 1 for j in range(y.ndim)])
            for i in dst)] = y
    return z


# Above this many multiply-adds numpy's unblocked C loop loses to the optimized path's GEMM.
_C_LOOP_MAX = 1 << 16
_MAX_PLANS = 64  # operand shapes a node keeps plans for


@kernel("Einsum", device_types=ALL_DEVICES)
def einsum(ctx, *inputs):
    xp = ctx.xp
    key = ("einsum", len(inputs))
    plan = ctx.cache.get(key)
    if plan is None:
        plan = ctx.cache[key] = _numpy_equation(ctx.attrs["equation"], len(inputs))
    eq, inflate = plan
    arrays = [xp.asarray(x) for x in inputs]
    if xp is np and len(arrays) == 2 and inflate is None:
        # One matmul between transposes, planned once per operand shapes (einsum_plan.py)
        shapes = (arrays[0].shape, arrays[1].shape)
        planned = ctx.cache.get(shapes)
        if planned is None:
            if len(ctx.cache) > _MAX_PLANS:  # (a decode loop's shapes grow every step)
                ctx.cache.clear()
                ctx.cache[key] = plan
            planned = ctx.cache[shapes] = einsum_plan.plan(eq, *shapes) or False
        if planned and arrays[0].dtype == arrays[1].dtype:
            return planned(*arrays)
    try:
        # The C loop's work is the product of every label's size, which is at most the
        # product of the two operands' sizes.
        optimize = len(arrays) > 2 or (len(arrays) == 2
                                       and arrays[0].size * arrays[1].size > _C_LOOP_MAX)
        out = (np.einsum(eq, *arrays, optimize=optimize) if xp is np
               else xp.einsum(eq, *arrays))
    except ValueError as e:
        fail(f"einsum {eq!r} on shapes {[list(a.shape) for a in arrays]}: {e}")
    out = xp.asarray(out, dtype=arrays[0].dtype)
    # A pure transpose comes back as a view of the input: later in-place kernels must not
    # write through it.
    if out.base is not None and any(np.may_share_memory(out, a) for a in arrays
                                    if isinstance(a, np.ndarray)):
        out = out.copy()
    elif xp is not np and out.base is not None:
        out = out.copy()
    return out if inflate is None else _inflate(xp, out, *inflate)


@kernel("MatrixBandPart", device_types=ALL_DEVICES, host_inputs=(1, 2))
def matrix_band_part(ctx, x, num_lower, num_upper):
    """Keeps x[..., i, j] where (lower < 0 or i - j <= lower) and (upper < 0 or j - i <= upper),
    zero elsewhere; TensorFlow refuses a limit above the matrix's row (lower) or column
    (upper) count."""
    xp = ctx.xp
    x = xp.asarray(x)
    if x.ndim < 2:
        fail(f"MatrixBandPart: input must be at least rank 2, got shape {list(x.shape)}")
    m, n = x.shape[-2:]
    lower, upper = int(np.asarray(num_lower)), int(np.asarray(num_upper))
    if lower > m:
        fail(f"MatrixBandPart: num_lower must be negative or less or equal to number of rows "
             f"({m}), got {lower}")
    if upper > n:
        fail(f"MatrixBandPart: num_upper must be negative or less or equal to number of "
             f"columns ({n}), got {upper}")
    diff = xp.arange(m).reshape(m, 1) - xp.arange(n).reshape(1, n)  # i - j
    keep = xp.ones((m, n), dtype=bool)
    if lower >= 0:
        keep &= diff <= lower
    if upper >= 0:
        keep &= -diff <= upper
    return xp.where(keep, x, xp.zeros((), dtype=x.dtype))


def _matrices(x, what):
    x = np.asarray(x)
    if x.ndim < 2:
        fail(f"{what} must have rank >= 2, got shape {list(x.shape)}")
    return x


def _adjoint(x):
    return np.conj(np.swapaxes(x, -1, -2))


@kernel("MatrixInverse")
def matrix_inverse(ctx, x):
    x = _matrices(x, "input")
    if x.shape[-1] != x.shape[-2]:
        fail(f"input must be square, got {list(x.shape)}")
    if ctx.attrs.get("adjoint", False):
        x = _adjoint(x)
    try:
        return np.linalg.inv(x).astype(x.dtype, copy=False)
    except np.linalg.LinAlgError:
        fail("Input is not invertible.")


@kernel("Cholesky")
def cholesky(ctx, x):
    """Reads the lower triangle only, as TensorFlow does."""
    x = _matrices(x, "input")
    if x.shape[-1] != x.shape[-2]:
        fail(f"input must be square, got {list(x.shape)}")
    low = np.tril(x)
    sym = low + _adjoint(np.tril(x, -1))
    try:
        return np.linalg.cholesky(sym).astype(x.dtype, copy=False)
    except np.linalg.LinAlgError:
        fail("Cholesky decomposition was not successful. The input might not be valid.")


@kernel("MatrixTriangularSolve")
def matrix_triangular_solve(ctx, matrix, rhs):
    """Solves with the lower (or upper) triangle of matrix only; adjoint solves A^H x = b."""
    a, b = _matrices(matrix, "matrix"), _matrices(rhs, "rhs")
    if a.shape[-1] != a.shape[-2] or a.shape[-1] != b.shape[-2]:
        fail(f"matrix must be square and match rhs: {list(a.shape)} vs {list(b.shape)}")
    a = np.tril(a) if ctx.attrs.get("lower", True) else np.triu(a)
    if ctx.attrs.get("adjoint", False):
        a = _adjoint(a)
    batch = np.broadcast_shapes(a.shape[:-2], b.shape[:-2])
    a = np.broadcast_to(a, batch + a.shape[-2:])
    b = np.broadcast_to(b, batch + b.shape[-2:])
    try:
        out = np.linalg.solve(a, b)
    except np.linalg.LinAlgError:
        fail("Input matrix is not invertible.")
    return out.astype(np.result_type(matrix, rhs), copy=False)


def _k_range(k):
    k = [int(v) for v in np.asarray(k).reshape(-1)]
    if not 1 <= len(k) <= 2:
        fail(f"k must be a scalar or a pair, got {len(k)} values")
    lo, hi = (k[0], k[0]) if len(k) == 1 else k
    if lo > hi:
        fail(f"lower diagonal index {lo} must not exceed the upper one {hi}")
    return lo, hi


def _diagonals(lo, hi, rows, cols, max_len, align):
    """Per diagonal d (hi first): its row in the packed diagonals, length and offset there,
    as ComputeDiagLenAndContentOffset (superdiagonals are d >= 0)."""
    align = s(align)
    left_super = align in ("LEFT_RIGHT", "LEFT_LEFT")
    left_sub = align in ("RIGHT_LEFT", "LEFT_LEFT")
    for d in range(hi, lo - 1, -1):
        length = min(rows + min(0, d), cols - max(0, d))
        left = left_super if d >= 0 else left_sub
        yield hi - d, d, max(length, 0), 0 if left else max_len - length


def diag_matrix(diagonal, k, num_rows, num_cols, padding_value, align):
    """MatrixDiagV3's output: the diagonals k (packed as `align` says) in matrices of
    padding_value."""
    diag = np.asarray(diagonal)
    lo, hi = _k_range(k)
    if lo == hi:
        diag = diag[..., None, :]
    if diag.ndim < 2 or diag.shape[-2] != hi - lo + 1:
        fail(f"diagonal must have {hi - lo + 1} diagonals, got shape {list(np.shape(diagonal))}")
    n = diag.shape[-1]
    rows, cols = int(np.asarray(num_rows).reshape(())), int(np.asarray(num_cols).reshape(()))
    rows, cols, min_rows, min_cols = diag_matrix_size(n, lo, hi, rows, cols)
    if rows < min_rows or cols < min_cols:
        fail(f"num_rows {rows} / num_cols {cols} too small for diagonals of length {n}")
    out = np.full(diag.shape[:-2] + (rows, cols), np.asarray(padding_value), diag.dtype)
    for i, d, length, offset in _diagonals(lo, hi, rows, cols, n, align):
        m = np.arange(length)
        out[..., m - min(d, 0), m + max(d, 0)] = diag[..., i, offset:offset + length]
    return out


def diag_part(x, k, padding_value, align):
    """MatrixDiagPartV3's output: the diagonals k of x's matrices, packed as `align` says."""
    x = np.asarray(x)
    if x.ndim < 2:
        fail(f"input must have rank >= 2, got shape {list(x.shape)}")
    lo, hi = _k_range(k)
    rows, cols = x.shape[-2:]
    if not (-rows < lo <= hi < cols) and (rows or cols):
        fail(f"diagonal index out of range: k = ({lo}, {hi}) for a {rows}x{cols} matrix")
    n = max(min(rows + min(hi, 0), cols - max(lo, 0)), 0)
    out = np.full(x.shape[:-2] + (hi - lo + 1, n), np.asarray(padding_value), x.dtype)
    for i, d, length, offset in _diagonals(lo, hi, rows, cols, n, align):
        m = np.arange(length)
        out[..., i, offset:offset + length] = x[..., m - min(d, 0), m + max(d, 0)]
    return out[..., 0, :] if lo == hi else out


def set_diag(x, diagonal, k, align):
    """MatrixSetDiagV3's output: x with its diagonals k replaced by `diagonal` (packed as
    `align` says), whose shape must be exactly what MatrixDiagPartV3 would give."""
    x, diag = np.asarray(x), np.asarray(diagonal)
    if x.ndim < 2:
        fail(f"input must be at least 2-dim, received shape: {list(x.shape)}")
    if diag.ndim < 1:
        fail(f"diagonal must be at least 1-dim, received shape: {list(diag.shape)}")
    lo, hi = _k_range(k)
    rows, cols = x.shape[-2:]
    for name, v in (("lower", lo), ("upper", hi)):
        if not (-rows < v < cols or v == 0):
            fail(f"{name}_diag_index is out of bound: {v} It must be between {-rows} and "
                 f"{cols}")
    n = min(rows + min(hi, 0), cols - max(lo, 0))
    expected = x.shape[:-2] + ((hi - lo + 1,) if lo != hi else ()) + (n,)
    if diag.shape != expected:
        fail(f"Either first dimensions of diagonal don't match input.shape[:-2], or "
             f"diagonal.shape[:-1] is not equal to the longests diagonal in range "
             f"[lower_diag_index:upper_diag_index]. Input shape: {list(x.shape)}, "
             f"diagonal shape: {list(diag.shape)}, expected {list(expected)}")
    if lo == hi:
        diag = diag[..., None, :]
    out = x.copy()
    for i, d, length, offset in _diagonals(lo, hi, rows, cols, n, align):
        m = np.arange(length)
        out[..., m - min(d, 0), m + max(d, 0)] = diag[..., i, offset:offset + length]
    return out


# V1 is V3 with k = 0 and a square output; V2 packs every diagonal to the left (LEFT_LEFT).
_V2_ALIGN = "LEFT_LEFT"


def _v3_and_v2(v3, v2, fn, host_inputs):
    """Register `fn(*inputs, align)` as op v3, aligned as its `align` attr says, and as op v2,
    always _V2_ALIGN."""

    @kernel(v3, host_inputs=host_inputs)
    def run_v3(ctx, *inputs):
        return fn(*inputs, ctx.attrs["align"])

    @kernel(v2, host_inputs=host_inputs)
    def run_v2(ctx, *inputs):
        return fn(*inputs, _V2_ALIGN)


_v3_and_v2("MatrixDiagV3", "MatrixDiagV2", diag_matrix, (1, 2, 3))
_v3_and_v2("MatrixDiagPartV3", "MatrixDiagPartV2", diag_part, (1,))
_v3_and_v2("MatrixSetDiagV3", "MatrixSetDiagV2", set_diag, (2,))


@kernel("MatrixDiag")
def matrix_diag(ctx, diagonal):
    diag = np.asarray(diagonal)
    if diag.ndim < 1:
        fail(f"diagonal must be at least 1-dim, received shape: {list(diag.shape)}")
    return diag_matrix(diag, 0, -1, -1, np.zeros((), diag.dtype), _V2_ALIGN)


@kernel("MatrixDiagPart")
def matrix_diag_part(ctx, x):
    x = np.asarray(x)
    if x.ndim < 2:
        fail(f"input must be at least 2-dim, received shape: {list(x.shape)}")
    return diag_part(x, 0, np.zeros((), x.dtype), _V2_ALIGN)


@kernel("MatrixSetDiag")
def matrix_set_diag(ctx, x, diagonal):
    return set_diag(x, diagonal, 0, _V2_ALIGN)


@kernel("Cross", device_types=ALL_DEVICES)
def cross(ctx, a, b):
    """The cross product of the 3-vectors in the last dim, as TensorFlow computes it:
    (a1 b2 - a2 b1, a2 b0 - a0 b2, a0 b1 - a1 b0) in the inputs' dtype (integers wrap)."""
    xp = ctx.xp
    a, b = xp.asarray(a), xp.asarray(b)
    if a.shape != b.shape:
        fail(f"Both inputs must be of same shape: {tf_dims(a.shape)} vs. {tf_dims(b.shape)}")
    if a.ndim < 1:
        fail(f"Input must be at least 1D, got shape {list(a.shape)}")
    if a.shape[-1] != 3:
        fail("Cross-products are only defined for 3-element vectors.")
    a0, a1, a2 = a[..., 0], a[..., 1], a[..., 2]
    b0, b1, b2 = b[..., 0], b[..., 1], b[..., 2]
    with errstate(xp, over="ignore"):
        return xp.stack([a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0], axis=-1)


# --- determinants, solves and decompositions (TensorFlow's determinant_op, matrix_solve_op,
# matrix_solve_ls_op, qr_op, svd_op, self_adjoint_eig_v2_op, lu_op, matrix_square_root_op):
# numpy.linalg on each matrix of the batch [..., M, N]. TensorFlow's CPU kernels take float,
# double and the complex types (Qr half too); its messages are the LinearAlgebraOp's.
_NOT_INVERTIBLE = "Input matrix is not invertible."


def _decomp_input(ctx, x, square=True, half=False, what="Input tensor 0"):
    """x as a batch of matrices of a dtype TensorFlow's CPU kernel takes, or its error."""
    x = np.asarray(x)
    if x.dtype.kind not in "fc" or (x.dtype == np.float16 and not half):
        unsupported_dtype(ctx.op, x)
    if x.ndim < 2:
        fail(f"{what} must have rank >= 2, got {x.ndim}")
    if square and x.shape[-1] != x.shape[-2]:
        fail("Input matrix must be square.")
    return x


def _each_matrix(x):
    """x [..., M, N] as [B, M, N] (B = the batch's size)."""
    return x.reshape((int(np.prod(x.shape[:-2])),) + x.shape[-2:])


def _non_finite(x):
    """Per matrix of x [..., M, N]: whether it holds a NaN or an infinity."""
    return ~np.all(np.isfinite(x), axis=(-2, -1))


def _finite_stand_in(x, bad):
    """x with its non-finite matrices (bad) replaced by zeros, so that LAPACK converges; the
    caller overwrites their outputs the way TensorFlow's kernel leaves them."""
    return np.where(bad[..., None, None], np.zeros((), x.dtype), x) if bad.any() else x


def _mark(out, bad, value):
    """out [batch..., rest...] with `value` in every result of a bad matrix (bad [batch...])."""
    if not bad.any():
        return out
    mask = bad.reshape(bad.shape + (1,) * (out.ndim - bad.ndim))
    return np.where(mask, np.asarray(value, out.dtype), out)


def lu_factor(a):
    """Partial-pivot LU of each square matrix of a [..., n, n], as Eigen's PartialPivLU: the
    largest |entry| of the column (the first on ties) pivots. -> (lu packed as LAPACK's getrf,
    perm: row i of P a is row perm[i] of a, the permutation's parity: +1 or -1)."""
    n = a.shape[-1]
    lu = _each_matrix(a).copy()
    count = lu.shape[0]
    perm = np.tile(np.arange(n), (count, 1))
    parity = np.ones(count, np.int64)
    rows = np.arange(count)
    with np.errstate(all="ignore"):
        for k in range(n):
            piv = k + np.argmax(np.abs(lu[:, k:, k]), axis=1)
            moved = piv != k
            parity[moved] *= -1
            lu[rows, k], lu[rows, piv] = lu[rows, piv], lu[rows, k].copy()
            perm[rows, k], perm[rows, piv] = perm[rows, piv], perm[rows, k].copy()
            pivot = lu[:, k, k]
            # a zero pivot (a zero column below it too) divides nothing, as in Eigen
            safe = np.where(pivot == 0, 1, pivot)
            lu[:, k + 1:, k] /= safe[:, None]
            lu[:, k + 1:, k + 1:] -= lu[:, k + 1:, k:k + 1] * lu[:, k:k + 1, k + 1:]
    batch = a.shape[:-2]
    return lu.reshape(a.shape), perm.reshape(batch + (n,)), parity.reshape(batch)


def _invertible(lu):
    """Per matrix: whether every pivot of its LU is nonzero (NaN: not), TensorFlow's test."""
    diag = np.abs(np.diagonal(lu, axis1=-2, axis2=-1))
    return np.all(diag > 0, axis=-1)


@kernel("MatrixDeterminant")
def matrix_determinant(ctx, x):
    """The product of the LU's pivots times the permutation's parity (1 for an empty matrix;
    0 for a singular one, inf where it overflows, as TensorFlow)."""
    x = _decomp_input(ctx, x)
    lu, _, parity = lu_factor(x)
    diag = np.diagonal(lu, axis1=-2, axis2=-1)
    with np.errstate(all="ignore"):
        return (np.prod(diag, axis=-1) * parity).astype(x.dtype)


@kernel("LogMatrixDeterminant")
def log_matrix_determinant(ctx, x):
    """(sign, log|det|) from the LU's pivots: sign the parity times the pivots' phases (0 and
    -inf for a singular matrix, NaN for a NaN one); for complex input both are complex."""
    x = _decomp_input(ctx, x)
    lu, _, parity = lu_factor(x)
    diag = np.diagonal(lu, axis1=-2, axis2=-1)
    absd = np.abs(diag)
    with np.errstate(all="ignore"):
        log_abs = np.sum(np.log(absd), axis=-1)
        phase = np.where(absd == 0, 0, diag / np.where(absd == 0, 1, absd))
        sign = np.prod(phase, axis=-1) * parity
    return sign.astype(x.dtype), log_abs.astype(x.dtype)


def _same_batches(a, b):
    """MatrixSolve's and MatrixSolveLs' checks: equal ranks and batch dims, rows that match."""
    if a.ndim != b.ndim:
        fail("All input tensors must have the same rank.")
    if a.shape[:-2] != b.shape[:-2]:
        fail("All input tensors must have the same outer dimensions.")
    if a.shape[-2] != b.shape[-2]:
        fail("Input matrix and rhs are incompatible.")


@kernel("MatrixSolve")
def matrix_solve(ctx, matrix, rhs):
    """Solves A X = B (adjoint: A^H X = B) for each matrix of the batch (no broadcasting);
    refuses a matrix whose LU has a zero or NaN pivot, as TensorFlow does."""
    a = _decomp_input(ctx, matrix)
    b = _decomp_input(ctx, rhs, square=False, what="Input tensor 1")
    if b.dtype != a.dtype:
        fail(f"matrix and rhs must have one dtype, got {tf_name(a)} and {tf_name(b)}")
    _same_batches(a, b)
    if a.size == 0 or b.size == 0:
        return np.zeros(b.shape, a.dtype)
    if ctx.attrs.get("adjoint", False):
        a = _adjoint(a)
    try:
        with np.errstate(all="ignore"):
            out = np.linalg.solve(a, b)
    except np.linalg.LinAlgError:
        fail(_NOT_INVERTIBLE)
    if not np.all(np.isfinite(out)) and not np.all(_invertible(lu_factor(a)[0])):
        fail(_NOT_INVERTIBLE)  # a NaN pivot, which LAPACK passes through
    return out.astype(a.dtype, copy=False)


_RANK_DEFICIENT = ("Input matrix was rank deficient or ill-conditioned. Try setting fast=False "
                   "or provide a larger l2_regularizer > 0.")


def _regularized_gram_solve(a, b, l2):
    """fast=True: the normal equations through a Cholesky factorization, as TensorFlow:
    M >= N: X = (A^H A + l2 I)^-1 A^H B; M < N: X = A^H (A A^H + l2 I)^-1 B."""
    rows, cols = a.shape[-2:]
    tall = rows >= cols
    gram = _adjoint(a) @ a if tall else a @ _adjoint(a)
    gram = gram + l2 * np.eye(gram.shape[-1], dtype=a.dtype)
    try:
        np.linalg.cholesky(gram)  # TensorFlow's test of the Gramian (Eigen's LLT)
    except np.linalg.LinAlgError:
        fail(_RANK_DEFICIENT)
    with np.errstate(all="ignore"):
        if tall:
            return np.linalg.solve(gram, _adjoint(a) @ b)
        return _adjoint(a) @ np.linalg.solve(gram, b)


@kernel("MatrixSolveLs", host_inputs=(2,))
def matrix_solve_ls(ctx, matrix, rhs, l2_regularizer):
    """Least squares min ||A X - B||^2 + l2 ||X||^2 per matrix; fast=False: the minimum-norm
    solution (TensorFlow's complete orthogonal decomposition; here the pseudo-inverse), where
    TensorFlow ignores l2_regularizer."""
    a = _decomp_input(ctx, matrix, square=False)
    b = _decomp_input(ctx, rhs, square=False, what="Input tensor 1")
    l2 = np.asarray(l2_regularizer)
    if l2.ndim != 0:
        fail(f"l2_regularizer must be scalar, got shape {tf_dims(l2.shape)}")
    if not float(l2) >= 0:
        fail("l2_regularizer must be >= 0.")
    _same_batches(a, b)
    out_shape = a.shape[:-2] + (a.shape[-1], b.shape[-1])
    if a.size == 0 or b.size == 0:
        return np.zeros(out_shape, a.dtype)
    if ctx.attrs.get("fast", True):
        out = _regularized_gram_solve(a, b, a.real.dtype.type(l2))
    else:
        # a non-finite matrix: the decomposition finds rank 0, and TensorFlow answers zeros
        bad = _non_finite(a)
        eps = np.finfo(a.dtype).eps * min(a.shape[-2:])
        out = _mark(np.linalg.pinv(_finite_stand_in(a, bad), rcond=eps) @ b, bad, 0)
    return out.astype(a.dtype, copy=False)


@kernel("Qr")
def qr(ctx, x):
    """Householder QR per matrix: q [..., M, P] and r [..., P, N] (P = min(M, N); M with
    full_matrices). half is computed in float."""
    x = _decomp_input(ctx, x, square=False, half=True)
    m, n = x.shape[-2:]
    full = bool(ctx.attrs.get("full_matrices", False))
    p = m if full else min(m, n)
    batch = x.shape[:-2]
    if x.size == 0:
        q = np.broadcast_to(np.eye(m, p, dtype=x.dtype), batch + (m, p)).copy()
        return q, np.zeros(batch + (p, n), x.dtype)
    work = x.astype(np.float32) if x.dtype == np.float16 else x
    q, r = np.linalg.qr(work, mode="complete" if full else "reduced")
    return q.astype(x.dtype), r.astype(x.dtype)


@kernel("Svd")
def svd(ctx, x):
    """Singular values, descending, in the input's dtype (complex for complex input); u and
    v (not v^H: TensorFlow's convention, a = u diag(s) v^H), or [0]-shaped u, v without
    compute_uv."""
    x = _decomp_input(ctx, x, square=False)
    m, n = x.shape[-2:]
    compute_uv = bool(ctx.attrs.get("compute_uv", True))
    full = bool(ctx.attrs.get("full_matrices", False))
    batch, p = x.shape[:-2], min(m, n)
    empty_uv = np.zeros((0,), x.dtype)
    if x.size == 0:
        s = np.zeros(batch + (p,), x.dtype)
        if not compute_uv:
            return s, empty_uv, empty_uv.copy()
        u = np.broadcast_to(np.eye(m, m if full else p, dtype=x.dtype), batch + (m, m if full
                                                                                 else p))
        v = np.broadcast_to(np.eye(n, n if full else p, dtype=x.dtype), batch + (n, n if full
                                                                                 else p))
        return s, u.copy(), v.copy()
    bad = _non_finite(x)  # TensorFlow: NaN in every output
    work = _finite_stand_in(x, bad)
    if not compute_uv:
        s = _mark(np.linalg.svd(work, compute_uv=False), bad, np.nan)
        return s.astype(x.dtype), empty_uv, empty_uv.copy()
    u, s, vh = np.linalg.svd(work, full_matrices=full)
    u, s, v = (_mark(t, bad, np.nan) for t in (u, s, _adjoint(vh)))
    return s.astype(x.dtype), u.astype(x.dtype, copy=False), v.astype(x.dtype, copy=False)


@kernel("SelfAdjointEigV2")
def self_adjoint_eig_v2(ctx, x):
    """Eigenvalues ascending (in the input's dtype) and unit eigenvectors as columns, of the
    matrix the lower triangle defines (TensorFlow reads only that)."""
    x = _decomp_input(ctx, x)
    compute_v = bool(ctx.attrs.get("compute_v", True))
    empty_v = np.zeros((0,), x.dtype)
    if x.size == 0:
        return np.zeros(x.shape[:-1], x.dtype), x.copy() if compute_v else empty_v
    lower = np.tril(x)
    if np.isnan(lower).any():
        fail("Self-adjoint eigen decomposition was not successful. The input might not be "
             "valid.")
    bad = _non_finite(lower)  # an infinity: NaN eigenvalues, identity vectors (TensorFlow)
    work = _finite_stand_in(x, bad)
    if not compute_v:
        e = _mark(np.linalg.eigvalsh(work, UPLO="L"), bad, np.nan)
        return e.astype(x.dtype), empty_v
    e, v = np.linalg.eigh(work, UPLO="L")
    if bad.any():
        v = np.where(bad[..., None, None], np.eye(x.shape[-1], dtype=v.dtype), v)
    return _mark(e, bad, np.nan).astype(x.dtype), v.astype(x.dtype, copy=False)


@kernel("Lu")
def lu(ctx, x):
    """(lu, p): L (unit diagonal, below) and U packed in one matrix with x[..., p, :] = L U,
    as TensorFlow; a singular matrix fails as there."""
    x = _decomp_input(ctx, x)
    factors, perm, _ = lu_factor(x)
    if not np.all(_invertible(factors)):
        fail("Input is not invertible.")
    idx = np_dtype(ctx.attrs.get("output_idx_type", "int32"))
    return factors, perm.astype(idx)


@kernel("MatrixSquareRoot")
def matrix_square_root(ctx, x):
    """The principal square root per matrix, through its eigendecomposition (TensorFlow uses
    Eigen's Schur method: the same root for a diagonalizable matrix). A real matrix with a
    negative real eigenvalue has no real root: NaN there, as TensorFlow's; so is a matrix
    whose eigenvectors are not independent."""
    x = _decomp_input(ctx, x)
    if x.size == 0:
        return x.copy()
    bad = _non_finite(x)  # TensorFlow: all NaN
    work = _finite_stand_in(x, bad).astype(np.complex128)
    with np.errstate(all="ignore"):
        w, vec = np.linalg.eig(work)
        root = (vec * np.sqrt(w)[..., None, :]) @ _safe_inverse(vec)
    if x.dtype.kind == "f":
        negative = np.any((w.imag == 0) & (w.real < 0), axis=-1)
        root = np.where(negative[..., None, None], np.nan, root.real)
    return _mark(root, bad, np.nan).astype(x.dtype)


def _safe_inverse(m):
    """Each matrix's inverse; NaN for a singular one (a defective eigenvector basis)."""
    try:
        return np.linalg.inv(m)
    except np.linalg.LinAlgError:
        pass  # one of them is singular: invert each alone
    out = np.full(m.shape, np.nan, m.dtype)
    flat, dst = _each_matrix(m), out.reshape((-1,) + m.shape[-2:])
    for i, one in enumerate(flat):
        try:
            dst[i] = np.linalg.inv(one)
        except np.linalg.LinAlgError:
            pass
    return out
