"""Signatures of the linear-algebra ops tfg runs: Einsum, MatrixInverse, Cholesky,
MatrixTriangularSolve, the determinants, solves and decompositions (MatrixDeterminant,
LogMatrixDeterminant, MatrixSolve, MatrixSolveLs, Qr, Svd, SelfAdjointEigV2, Lu,
MatrixSquareRoot: TensorFlow's linalg_ops.cc) and MatrixBandPart (array_ops.cc; Python's
tf.linalg.band_part).

    >>> parse_einsum("bqhd,bkhd->bhqk", 2)
    (['bqhd', 'bkhd'], 'bhqk', [None, None], None)
    >>> parse_einsum("...ij,jk->...ik", 2)[2]  # where each input's ellipsis sits
    [0, None]
"""
from tfg.schemas.ops.registry import op
from tfg.schemas.ops.shape_fns import ShapeError, broadcast, fmt, merge_dim, with_rank, \
    with_rank_at_least


def _split_ellipsis(subs):
    """'a...bc' -> ('abc', 1): labels without the ellipsis, and where it was (None: none)."""
    if subs.count("...") > 1 or "." in subs.replace("...", ""):
        raise ShapeError(f"bad einsum subscripts {subs!r}")
    if "..." not in subs:
        return subs, None
    return subs.replace("...", ""), subs.index("...")


def parse_einsum(equation, n_inputs):
    """(input label strings, output labels, ellipsis position per input, in the output).

    Labels are letters; implicit mode (no '->') gives the labels that appear once, sorted,
    after an ellipsis if any input has one (numpy's and TensorFlow's rule)."""
    eq = equation.decode() if isinstance(equation, bytes) else str(equation)
    eq = eq.replace(" ", "")
    lhs, arrow, rhs = eq.partition("->")
    parts = lhs.split(",")
    if len(parts) != n_inputs:
        raise ShapeError(f"einsum equation {eq!r} names {len(parts)} inputs, the op has "
                         f"{n_inputs}")
    split = [_split_ellipsis(p) for p in parts]
    labels = [s for s, _ in split]
    for s in labels + ([rhs.replace("...", "")] if arrow else []):
        if not all(c.isalpha() for c in s):
            raise ShapeError(f"einsum labels must be letters: {eq!r}")
    if not arrow:
        counts = {}
        for s in labels:
            for c in s:
                counts[c] = counts.get(c, 0) + 1
        rhs = ("..." if any(p is not None for _, p in split) else "") + "".join(
            sorted(c for c, k in counts.items() if k == 1))
    out, out_ell = _split_ellipsis(rhs)
    if any(c not in "".join(labels) for c in out):
        raise ShapeError(f"einsum output label not in any input: {eq!r}")
    return labels, out, [p for _, p in split], out_ell


def einsum(ctx):
    labels, out, ells, out_ell = parse_einsum(ctx.attr("equation"), ctx.num_inputs)
    dims, ell_shape = {}, ()
    for i, (subs, ell) in enumerate(zip(labels, ells)):
        shape = ctx.shape(i)
        if shape is None:
            if ell is not None:
                ell_shape = None
            continue
        if len(shape) < len(subs) or (ell is None and len(shape) != len(subs)):
            raise ShapeError(f"einsum input {i} has rank {len(shape)}, subscripts {subs!r}")
        n_ell = len(shape) - len(subs)
        named = list(shape[:ell]) + list(shape[ell + n_ell:]) if ell is not None else shape
        for c, d in zip(subs, named):
            # A dim of 1 broadcasts against a batch label of the other input (TensorFlow).
            prev = dims.get(c)
            dims[c] = d if prev in (None, 1) else (prev if d in (None, 1) else merge_dim(prev, d))
        if ell is not None and ell_shape is not None:
            ell_shape = broadcast(ell_shape, tuple(shape[ell:ell + n_ell]))
    named = [dims.get(c) for c in out]
    if out_ell is None:
        return [tuple(named)]
    if ell_shape is None:
        return [None]
    return [tuple(named[:out_ell]) + tuple(ell_shape) + tuple(named[out_ell:])]


op("Einsum",
   inputs=["inputs: N * T"],
   outputs=["output: T"],
   attrs=["equation: string", "N: int >= 1", "T: type"],
   shape_fn=einsum,
   traits=["blas"])


def band_part(ctx):
    """MatrixBandPart: a batch of matrices (rank >= 2) in, the same shape out; the band
    limits are scalars."""
    with_rank(ctx.shape(1), 0, "MatrixBandPart num_lower")
    with_rank(ctx.shape(2), 0, "MatrixBandPart num_upper")
    return [with_rank_at_least(ctx.shape(0), 2, "MatrixBandPart input")]


op("MatrixBandPart",
   inputs=["input: T", "num_lower: Tindex", "num_upper: Tindex"],
   outputs=["band: T"],
   attrs=["T: type", "Tindex: {int32, int64} = DT_INT64"],
   shape_fn=band_part)


def square_matrices(ctx):
    """MatrixInverse, Cholesky: a batch of square matrices, the same shape out."""
    s = with_rank_at_least(ctx.shape(0), 2, f"{ctx.node.op} input")
    if s is not None and s[-1] is not None and s[-2] is not None and s[-1] != s[-2]:
        raise ShapeError(f"{ctx.node.op} input must be square, got {fmt(s)}")
    return [s]


def triangular_solve(ctx):
    """matrix [..., M, M], rhs [..., M, K] -> [broadcast batch, M, K]."""
    a = with_rank_at_least(ctx.shape(0), 2, "matrix")
    rhs = with_rank_at_least(ctx.shape(1), 2, "rhs")
    if a is None or rhs is None:
        return [None]
    batch = broadcast(tuple(a[:-2]), tuple(rhs[:-2]))
    return [None if batch is None else tuple(batch) + tuple(rhs[-2:])]


_LINALG_T = "T: {double, float, half, complex64, complex128}"
op("MatrixInverse",
   inputs=["input: T"],
   outputs=["output: T"],
   attrs=["adjoint: bool = false", _LINALG_T],
   shape_fn=square_matrices)
op("Cholesky",
   inputs=["input: T"],
   outputs=["output: T"],
   attrs=[_LINALG_T],
   shape_fn=square_matrices)
op("MatrixTriangularSolve",
   inputs=["matrix: T", "rhs: T"],
   outputs=["output: T"],
   attrs=["lower: bool = true", "adjoint: bool = false",
          "T: {bfloat16, double, float, half, complex64, complex128}"],
   shape_fn=triangular_solve)


def _diag_range(ctx, i):
    k = ctx.elems(i)
    if k is None or not 1 <= len(k) <= 2 or any(v is None for v in k):
        return None
    lo, hi = (k[0], k[0]) if len(k) == 1 else k
    if lo > hi:
        raise ShapeError(f"lower diagonal index {lo} must not exceed the upper one {hi}")
    return lo, hi


def matrix_diag(ctx):
    """MatrixDiagV3: diagonal [..., (num_diags,) max_len] -> [..., num_rows, num_cols]."""
    d, k = ctx.shape(0), _diag_range(ctx, 1)
    rows, cols = ctx.scalar(2), ctx.scalar(3)
    if d is None or k is None:
        return [None]
    batch = d[:-1] if k[0] == k[1] else d[:-2]
    n = d[-1]
    if n is None or rows is None or cols is None:
        return [tuple(batch) + (None, None)]
    rows, cols, _, _ = diag_matrix_size(n, k[0], k[1], rows, cols)
    return [tuple(batch) + (rows, cols)]


def diag_matrix_size(n, lo, hi, rows, cols):
    """MatrixDiagV3's output rows and columns for diagonals lo..hi of length n, where -1
    asks for the smallest that holds them; -> (rows, cols, min_rows, min_cols)."""
    min_rows, min_cols = n - min(hi, 0), n + max(lo, 0)
    if rows == -1 and cols == -1:
        rows = cols = max(min_rows, min_cols)
    elif rows == -1:
        rows = min_rows
    elif cols == -1:
        cols = min_cols
    return rows, cols, min_rows, min_cols


def matrix_diag_part(ctx):
    """MatrixDiagPartV3: [..., M, N] -> [..., (num_diags,) max_len]."""
    s = with_rank_at_least(ctx.shape(0), 2, "input")
    k = _diag_range(ctx, 1)
    if s is None or k is None:
        return [None]
    m, n = s[-2], s[-1]
    size = None if m is None or n is None else min(m + min(k[1], 0), n - max(k[0], 0))
    mid = () if k[0] == k[1] else (k[1] - k[0] + 1,)
    return [tuple(s[:-2]) + mid + (size,)]


_ALIGN = "align: {'LEFT_RIGHT', 'RIGHT_LEFT', 'LEFT_LEFT', 'RIGHT_RIGHT'} = 'RIGHT_LEFT'"
op("MatrixDiagV3",
   inputs=["diagonal: T", "k: int32", "num_rows: int32", "num_cols: int32",
           "padding_value: T"],
   outputs=["output: T"],
   attrs=["T: type", _ALIGN],
   shape_fn=matrix_diag)
op("MatrixDiagPartV3",
   inputs=["input: T", "k: int32", "padding_value: T"],
   outputs=["diagonal: T"],
   attrs=["T: type", _ALIGN],
   shape_fn=matrix_diag_part)


# --- the v1/v2 diagonal ops (MatrixDiagV2/PartV2 read like V3 with LEFT_LEFT packing) and
# the MatrixSetDiag family
def matrix_diag_v1(ctx):
    """MatrixDiag: diagonal [..., n] -> [..., n, n]."""
    d = with_rank_at_least(ctx.shape(0), 1, "diagonal")
    return [None if d is None else tuple(d) + (d[-1],)]


def matrix_diag_part_v1(ctx):
    """MatrixDiagPart: [..., m, n] -> [..., min(m, n)]."""
    s = with_rank_at_least(ctx.shape(0), 2, "input")
    if s is None:
        return [None]
    m, n = s[-2], s[-1]
    return [tuple(s[:-2]) + (None if m is None or n is None else min(m, n),)]


def matrix_set_diag(ctx):
    """MatrixSetDiag*: the input's shape; the diagonal's batch dims must match it."""
    s = with_rank_at_least(ctx.shape(0), 2, "input")
    d = with_rank_at_least(ctx.shape(1), 1, "diagonal")
    if s is not None and d is not None and len(d) >= len(s) - 1:
        s = tuple(merge_dim(a, b) for a, b in zip(s, d[:len(s) - 2])) + tuple(s[-2:])
    return [s]


def cross(ctx):
    """Cross: two [..., 3] of one shape -> the same shape."""
    a = with_rank_at_least(ctx.shape(0), 1, "a")
    b = with_rank_at_least(ctx.shape(1), 1, "b")
    if a is not None and b is not None and len(a) != len(b):
        raise ShapeError(f"Both inputs must be of same shape: {fmt(a)} vs. {fmt(b)}")
    out = a if b is None else (b if a is None else tuple(merge_dim(x, y) for x, y in zip(a, b)))
    if out is not None and out[-1] is not None and out[-1] != 3:
        raise ShapeError(f"Cross-products are only defined for 3-element vectors, got {fmt(out)}")
    return [out]


op("MatrixDiag",
   inputs=["diagonal: T"],
   outputs=["output: T"],
   attrs=["T: type"],
   shape_fn=matrix_diag_v1)
op("MatrixDiagPart",
   inputs=["input: T"],
   outputs=["diagonal: T"],
   attrs=["T: type"],
   shape_fn=matrix_diag_part_v1)
op("MatrixSetDiag",
   inputs=["input: T", "diagonal: T"],
   outputs=["output: T"],
   attrs=["T: type"],
   shape_fn=matrix_set_diag)
op("MatrixDiagV2",
   inputs=["diagonal: T", "k: int32", "num_rows: int32", "num_cols: int32",
           "padding_value: T"],
   outputs=["output: T"],
   attrs=["T: type"],
   shape_fn=matrix_diag)
op("MatrixDiagPartV2",
   inputs=["input: T", "k: int32", "padding_value: T"],
   outputs=["diagonal: T"],
   attrs=["T: type"],
   shape_fn=matrix_diag_part)
op("MatrixSetDiagV2",
   inputs=["input: T", "diagonal: T", "k: int32"],
   outputs=["output: T"],
   attrs=["T: type"],
   shape_fn=matrix_set_diag)
op("MatrixSetDiagV3",
   inputs=["input: T", "diagonal: T", "k: int32"],
   outputs=["output: T"],
   attrs=["T: type", _ALIGN],
   shape_fn=matrix_set_diag)
op("Cross",
   inputs=["a: T", "b: T"],
   outputs=["product: T"],
   attrs=["T: realnumbertype"],
   shape_fn=cross)


# --- determinants, solves and decompositions (TensorFlow's linalg_ops.cc). Shapes read like
# TensorFlow's shape functions: a batch [...] of matrices in the last two dims.
def _square(ctx, what="input"):
    """Input 0 as a batch of square matrices (its last two dims merged)."""
    s = with_rank_at_least(ctx.shape(0), 2, f"{ctx.node.op} {what}")
    if s is None:
        return None
    if s[-1] is not None and s[-2] is not None and s[-1] != s[-2]:
        raise ShapeError(f"{ctx.node.op}: input matrix must be square, got {fmt(s)}")
    n = merge_dim(s[-2], s[-1])
    return tuple(s[:-2]) + (n, n)


def determinant(ctx):
    """MatrixDeterminant: [..., M, M] -> [...]."""
    s = _square(ctx)
    return [None if s is None else s[:-2]]


def log_determinant(ctx):
    """LogMatrixDeterminant: [..., M, M] -> sign [...], log_abs_determinant [...]."""
    out = determinant(ctx)[0]
    return [out, out]


def _solve_shape(ctx, square):
    """MatrixSolve (square) and MatrixSolveLs: matrix [..., M, N], rhs [..., M, K] -> [..., N, K]
    (no batch broadcasting: both batches must be equal)."""
    a = _square(ctx, "matrix") if square else with_rank_at_least(ctx.shape(0), 2, "matrix")
    rhs = with_rank_at_least(ctx.shape(1), 2, "rhs")
    if a is None or rhs is None:
        return None
    if len(a) != len(rhs):
        raise ShapeError(f"{ctx.node.op}: matrix {fmt(a)} and rhs {fmt(rhs)} must have the same "
                         f"rank")
    batch = tuple(merge_dim(x, y) for x, y in zip(a[:-2], rhs[:-2]))
    merge_dim(a[-2], rhs[-2])
    return batch + (a[-1], rhs[-1])


def matrix_solve(ctx):
    return [_solve_shape(ctx, True)]


def matrix_solve_ls(ctx):
    with_rank(ctx.shape(2), 0, "MatrixSolveLs l2_regularizer")
    return [_solve_shape(ctx, False)]


def qr(ctx):
    """Qr: [..., M, N] -> q [..., M, P or M], r [..., P or M, N], P = min(M, N)."""
    s = with_rank_at_least(ctx.shape(0), 2, "Qr input")
    if s is None:
        return [None, None]
    m, n = s[-2], s[-1]
    p = m if ctx.attr("full_matrices") else (None if m is None or n is None else min(m, n))
    return [tuple(s[:-2]) + (m, p), tuple(s[:-2]) + (p, n)]


def svd(ctx):
    """Svd: [..., M, N] -> s [..., P], u [..., M, P or M], v [..., N, P or N]; u and v are
    [0] when compute_uv is false."""
    s = with_rank_at_least(ctx.shape(0), 2, "Svd input")
    if s is None:
        return [None, None, None] if ctx.attr("compute_uv") else [None, (0,), (0,)]
    m, n = s[-2], s[-1]
    p = None if m is None or n is None else min(m, n)
    batch = tuple(s[:-2])
    if not ctx.attr("compute_uv"):
        return [batch + (p,), (0,), (0,)]
    full = ctx.attr("full_matrices")
    return [batch + (p,), batch + (m, m if full else p), batch + (n, n if full else p)]


def self_adjoint_eig(ctx):
    """SelfAdjointEigV2: [..., N, N] -> e [..., N], v [..., N, N] ([0] without compute_v)."""
    s = _square(ctx)
    v = s if ctx.attr("compute_v") else (0,)
    return [None if s is None else s[:-1], v]


def lu(ctx):
    """Lu: [..., N, N] -> lu [..., N, N], p [..., N]."""
    s = _square(ctx)
    return [s, None if s is None else s[:-1]]


def square_unchanged(ctx):
    """MatrixSquareRoot: a batch of square matrices, the same shape out."""
    return [_square(ctx)]


_DECOMP_T = "T: {double, float, half, complex64, complex128}"
op("MatrixDeterminant",
   inputs=["input: T"],
   outputs=["output: T"],
   attrs=["T: {half, float, double, complex64, complex128}"],
   shape_fn=determinant)
op("LogMatrixDeterminant",
   inputs=["input: T"],
   outputs=["sign: T", "log_abs_determinant: T"],
   attrs=["T: {half, float, double, complex64, complex128}"],
   shape_fn=log_determinant)
op("MatrixSolve",
   inputs=["matrix: T", "rhs: T"],
   outputs=["output: T"],
   attrs=["adjoint: bool = false", _DECOMP_T],
   shape_fn=matrix_solve)
op("MatrixSolveLs",
   inputs=["matrix: T", "rhs: T", "l2_regularizer: double"],
   outputs=["output: T"],
   attrs=[_DECOMP_T, "fast: bool = true"],
   shape_fn=matrix_solve_ls)
op("Qr",
   inputs=["input: T"],
   outputs=["q: T", "r: T"],
   attrs=["full_matrices: bool = false", _DECOMP_T],
   shape_fn=qr)
op("Svd",
   inputs=["input: T"],
   outputs=["s: T", "u: T", "v: T"],
   attrs=["compute_uv: bool = true", "full_matrices: bool = false", _DECOMP_T],
   shape_fn=svd)
op("SelfAdjointEigV2",
   inputs=["input: T"],
   outputs=["e: T", "v: T"],
   attrs=["compute_v: bool = true", _DECOMP_T],
   shape_fn=self_adjoint_eig)
op("Lu",
   inputs=["input: T"],
   outputs=["lu: T", "p: output_idx_type"],
   attrs=[_DECOMP_T, "output_idx_type: {int32, int64} = DT_INT32"],
   shape_fn=lu)
op("MatrixSquareRoot",
   inputs=["input: T"],
   outputs=["output: T"],
   attrs=[_DECOMP_T],
   shape_fn=square_unchanged)
