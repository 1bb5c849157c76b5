"""Einsum (TensorFlow's linalg_ops Einsum), through numpy's or CuPy's einsum, and
MatrixBandPart (tf.linalg.band_part: Keras' causal attention mask).

    Einsum(q[b,q,h,d], k[b,k,h,d], equation="bqhd,bkhd->bhqk") -> scores[b,h,q,k]
    MatrixBandPart(ones[3,3], num_lower=-1, num_upper=0) -> [[1,0,0],[1,1,0],[1,1,1]]

The equation is validated by the signature's parser (schemas/ops/linalg_ops.py) so a bad one
fails with the same words at build and run time. Two operands go through numpy's optimized
path (tensordot: one BLAS GEMM); TensorFlow's own kernel is also a transpose-GEMM-transpose.
"""
import numpy as np

from tfg.kernels._util import fail, s
from tfg.kernels.registry import ALL_DEVICES, kernel
from tfg.schemas.ops.linalg_ops import diag_matrix_size, parse_einsum
from tfg.schemas.ops.shape_fns import ShapeError


def _numpy_equation(equation, n):
    """The equation in explicit form ('->' always: an implicit output is made explicit)."""
    try:
        labels, out, ells, out_ell = parse_einsum(equation, n)
    except ShapeError as e:
        fail(str(e))

    def join(subs, ell):
        return subs if ell is None else subs[:ell] + "..." + subs[ell:]
    if any(e is not None for e in ells) and out_ell is None:
        # TensorFlow sums the broadcast dims away; numpy would refuse: say so plainly.
        fail(f"einsum {s(equation)!r}: an ellipsis in the inputs must appear in the output")
    return ",".join(join(a, e) for a, e in zip(labels, ells)) + "->" + join(out, out_ell)


@kernel("Einsum", device_types=ALL_DEVICES)
def einsum(ctx, *inputs):
    xp = ctx.xp
    key = ("einsum", len(inputs))
    eq = ctx.cache.get(key)
    if eq is None:
        eq = ctx.cache[key] = _numpy_equation(ctx.attrs["equation"], len(inputs))
    arrays = [xp.asarray(x) for x in inputs]
    try:
        out = (np.einsum(eq, *arrays, optimize=len(arrays) > 1) if xp is np
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
    return out


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


@kernel("MatrixDiagV3", host_inputs=(1, 2, 3))
def matrix_diag_v3(ctx, diagonal, k, num_rows, num_cols, padding_value):
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
    for i, d, length, offset in _diagonals(lo, hi, rows, cols, n, ctx.attrs["align"]):
        m = np.arange(length)
        out[..., m - min(d, 0), m + max(d, 0)] = diag[..., i, offset:offset + length]
    return out


@kernel("MatrixDiagPartV3", host_inputs=(1,))
def matrix_diag_part_v3(ctx, x, k, padding_value):
    x = np.asarray(x)
    if x.ndim < 2:
        fail(f"input must have rank >= 2, got shape {list(x.shape)}")
    lo, hi = _k_range(k)
    rows, cols = x.shape[-2:]
    if not (-rows < lo <= hi < cols) and (rows or cols):
        fail(f"diagonal index out of range: k = ({lo}, {hi}) for a {rows}x{cols} matrix")
    n = max(min(rows + min(hi, 0), cols - max(lo, 0)), 0)
    out = np.full(x.shape[:-2] + (hi - lo + 1, n), np.asarray(padding_value), x.dtype)
    for i, d, length, offset in _diagonals(lo, hi, rows, cols, n, ctx.attrs["align"]):
        m = np.arange(length)
        out[..., i, offset:offset + length] = x[..., m - min(d, 0), m + max(d, 0)]
    return out[..., 0, :] if lo == hi else out
