"""Grayscale morphology and index kernels with TensorFlow's arithmetic: Dilation2D and its two
backprops (dilation_ops.cc), NthElement (nth_element_op.cc), UnravelIndex
(unravel_index_op.cc) and EditDistance (edit_distance_op.cc).

    Dilation2D(input [B, H, W, D], filter [h, w, D]) -> max over the window of input + filter
    NthElement(x [..., n], k) -> x's k-th smallest (largest with reverse) along its last axis
    UnravelIndex(indices, dims) -> [len(dims), len(indices)] coordinates, C's / and %
    EditDistance(hypothesis, truth SparseTensors) -> Levenshtein distance per sequence

Dilation2D takes the window's taps in (row, column) order and keeps a value only when it is
strictly greater (TensorFlow's loop: ties go to the first tap, NaN never wins, an empty window
is the type's lowest value); the backprops route each out_backprop entry to that tap's input
pixel (filter entry), summed in TensorFlow's loop order.
"""
import numpy as np

from tfg.kernels._util import fail, tf_dims, tf_name
from tfg.kernels.registry import kernel

F32 = np.float32


# --- Dilation2D ------------------------------------------------------------------------------
def _window_out(size, eff, stride, padding):
    """GetWindowedOutputSize: (output size, padding before)."""
    if stride <= 0:
        fail(f"Stride must be > 0, but got {stride}")
    if padding == "VALID":
        span = size - eff + stride
        out = int(np.fix(span / stride))  # C++'s truncating division
        if out < 0:
            fail(f"Computed output size would be negative: {out} [input_size: {size}, "
                 f"effective_filter_size: {eff}, stride: {stride}]")
        return out, 0
    out = (size + stride - 1) // stride
    return out, max((out - 1) * stride + eff - size, 0) // 2


class _Dilation:
    """The geometry ParseAttributes and ParseSizes check and compute, and for each filter tap
    the input rows and columns it reads (with whether they lie in the image)."""

    def __init__(self, ctx, x, f):
        strides, rates = list(ctx.attrs["strides"]), list(ctx.attrs["rates"])
        if len(strides) != 4:
            fail("Sliding window stride field must specify 4 dimensions")
        if strides[0] != 1 or strides[3] != 1:
            fail("Stride is only supported across spatial dimensions.")
        if len(rates) != 4:
            fail("Input stride (atrous rate) field must specify 4 dimensions")
        if rates[0] != 1 or rates[3] != 1:
            fail("Rate is only supported across spatial dimensions.")
        if x.ndim != 4:
            fail(f"input must be 4-dimensional{tf_dims(x.shape)}")
        if f.ndim != 3:
            fail(f"filter must be 3-dimensional: {tf_dims(f.shape)}")
        if x.shape[3] != f.shape[2]:
            fail(f"input and filter must have the same depth: {x.shape[3]} vs {f.shape[2]}")
        padding = ctx.attrs["padding"]
        padding = padding.decode() if isinstance(padding, bytes) else str(padding)
        self.in_rows, self.in_cols = x.shape[1], x.shape[2]
        self.rows, self.cols = f.shape[0], f.shape[1]
        self.rate_r, self.rate_c = rates[1], rates[2]
        eff_r = self.rows + (self.rows - 1) * (self.rate_r - 1)
        eff_c = self.cols + (self.cols - 1) * (self.rate_c - 1)
        self.out_rows, pad_top = _window_out(self.in_rows, eff_r, strides[1], padding)
        self.out_cols, pad_left = _window_out(self.in_cols, eff_c, strides[2], padding)
        self.row_beg = np.arange(self.out_rows) * strides[1] - pad_top
        self.col_beg = np.arange(self.out_cols) * strides[2] - pad_left

    def out_shape(self, x):
        return (x.shape[0], self.out_rows, self.out_cols, x.shape[3])

    def taps(self):
        """(h, w, rows [out_rows], cols [out_cols], in-image mask [out_rows, out_cols])."""
        for h in range(self.rows):
            r = self.row_beg + h * self.rate_r
            r_ok = (r >= 0) & (r < self.in_rows)
            for w in range(self.cols):
                c = self.col_beg + w * self.rate_c
                c_ok = (c >= 0) & (c < self.in_cols)
                yield (h, w, np.clip(r, 0, max(self.in_rows - 1, 0)),
                       np.clip(c, 0, max(self.in_cols - 1, 0)), r_ok[:, None] & c_ok[None, :])

    def argmax(self, x, f):
        """The dilation's value and, per output entry, the winning tap's input row, column
        and filter row, column (TensorFlow's defaults where no tap wins)."""
        shape = self.out_shape(x)
        lowest = np.finfo(x.dtype).min if x.dtype.kind == "f" else np.iinfo(x.dtype).min
        cur = np.full(shape, lowest, x.dtype)
        row_beg = np.broadcast_to(self.row_beg[None, :, None, None], shape)
        col_beg = np.broadcast_to(self.col_beg[None, None, :, None], shape)
        in_r, in_c = np.maximum(row_beg, 0), np.maximum(col_beg, 0)
        f_r, f_c = np.zeros(shape, np.int64), np.zeros(shape, np.int64)
        if 0 in shape:
            return cur, (in_r, in_c, f_r, f_c)
        with np.errstate(over="ignore", invalid="ignore"):
            for h, w, rows, cols, ok in self.taps():
                val = x[:, rows][:, :, cols] + f[h, w]
                better = ok[None, :, :, None] & (val > cur)
                cur = np.where(better, val, cur)
                in_r = np.where(better, rows[None, :, None, None], in_r)
                in_c = np.where(better, cols[None, None, :, None], in_c)
                f_r = np.where(better, h, f_r)
                f_c = np.where(better, w, f_c)
        return cur.astype(x.dtype, copy=False), (in_r, in_c, f_r, f_c)


@kernel("Dilation2D")
def dilation2d(ctx, x, f):
    x, f = np.asarray(x), np.asarray(f)
    return _Dilation(ctx, x, f).argmax(x, f)[0]


def _backprop_args(ctx, x, f, g):
    x, f, g = np.asarray(x), np.asarray(f), np.asarray(g)
    geo = _Dilation(ctx, x, f)
    if g.shape != geo.out_shape(x):
        fail("out_backprop has incompatible size.")
    return x, f, g, geo.argmax(x, f)[1]


def _batch_depth(shape):
    b = np.broadcast_to(np.arange(shape[0])[:, None, None, None], shape)
    d = np.broadcast_to(np.arange(shape[3])[None, None, None, :], shape)
    return b, d


@kernel("Dilation2DBackpropInput")
def dilation2d_backprop_input(ctx, x, f, out_backprop):
    x, f, g, (in_r, in_c, _, _) = _backprop_args(ctx, x, f, out_backprop)
    out = np.zeros(x.shape, x.dtype)
    b, d = _batch_depth(g.shape)
    # np.add.at adds in the flattened (b, row, col, d) order: TensorFlow's loop's
    with np.errstate(over="ignore"):
        np.add.at(out, (b.ravel(), in_r.ravel(), in_c.ravel(), d.ravel()), g.ravel())
    return out


@kernel("Dilation2DBackpropFilter")
def dilation2d_backprop_filter(ctx, x, f, out_backprop):
    x, f, g, (_, _, f_r, f_c) = _backprop_args(ctx, x, f, out_backprop)
    out = np.zeros(f.shape, f.dtype)
    _, d = _batch_depth(g.shape)
    with np.errstate(over="ignore"):
        np.add.at(out, (f_r.ravel(), f_c.ravel(), d.ravel()), g.ravel())
    return out


# --- NthElement ------------------------------------------------------------------------------
@kernel("NthElement", host_inputs=(1,))
def nth_element(ctx, x, n):
    n = np.asarray(n)
    if n.ndim != 0:
        fail(f"N must be scalar but has rank {n.ndim}")
    n = int(n)
    if n < 0:
        fail(f"n must be non-negative but is {n}")
    x = np.asarray(x)
    if x.ndim < 1:
        fail(f"Input must be at least rank 1 but is rank {x.ndim}")
    last = x.shape[-1]
    if last <= n:
        fail(f"Input must have last dimension > n = {n}")
    if ctx.attrs.get("reverse", False):
        n = last - n - 1
    if x.size == 0:
        return np.zeros(x.shape[:-1], x.dtype)
    if x.dtype.kind not in "iuf":  # bfloat16: numpy cannot partition it; float32 keeps order
        return np.partition(x.astype(F32), n, axis=-1)[..., n].astype(x.dtype)
    return np.partition(x, n, axis=-1)[..., n]


# --- UnravelIndex ----------------------------------------------------------------------------
@kernel("UnravelIndex")
def unravel_index(ctx, indices, dims):
    indices, dims = np.asarray(indices), np.asarray(dims)
    if indices.ndim > 1:
        fail(f'The indices can only be scalar or vector, got "{tf_dims(indices.shape)}"')
    if dims.ndim != 1:
        fail(f'The indices can only be 1-D, got "{tf_dims(dims.shape)}"')
    if indices.size == 0:
        fail(f"received empty tensor indices: Tensor<type: {tf_name(indices)} shape: "
             f"{tf_dims(indices.shape)} values: >")
    limit = np.iinfo(np.int64 if dims.dtype == np.int64 else np.int32).max
    prod = 1.0  # a double, as the kernel's
    for i, d in enumerate(int(v) for v in dims):
        if d == 0:
            fail(f"Input dims cannot contain a dim of zero, but dims contains zero at index {i}")
        if d < 0:
            fail(f"Input dims cannot be negative. Got dim = {d} at index {i}")
        if not prod <= limit // d:
            fail("Input dims product is causing integer overflow")
        prod *= d
    sizes = [int(v) for v in dims]
    total = int(np.prod(sizes, dtype=object))
    if not (indices.astype(np.int64) < total).all():
        fail("index is out of bound as with dims")
    strides = np.array([int(np.prod(sizes[i + 1:], dtype=object)) for i in range(len(sizes))],
                       np.int64).reshape(-1)
    flat = indices.reshape(-1).astype(np.int64)
    # C++'s division and remainder truncate toward zero (a negative index stays negative)
    quotient = np.sign(flat)[None, :] * (np.abs(flat)[None, :] // strides[:, None])
    out = np.fmod(quotient, np.asarray(sizes, np.int64)[:, None]).astype(indices.dtype)
    return out[:, 0] if indices.ndim == 0 else out


# --- EditDistance ----------------------------------------------------------------------------
def _matrix(a, what):
    if a.ndim != 2:
        fail(f"{what} should be a matrix, but got shape: {tf_dims(a.shape)}")


def _vector(a, what):
    if a.ndim != 1:
        fail(f"{what} should be a vector, but got shape: {tf_dims(a.shape)}")


def _validate_edit_inputs(hi, hv, hs, ti, tv, ts):
    """ValidateShapes, in its order and words."""
    _matrix(hi, "hypothesis_indices")
    _matrix(ti, "truth_indices")
    _vector(hv, "hypothesis_values")
    _vector(tv, "truth_values")
    _vector(hs, "hypothesis_shape")
    _vector(ts, "truth_shape")
    if hv.size != hi.shape[0]:
        fail(f"Expected hypothesis_values.NumElements == #rows(hypothesis_indices), their "
             f"shapes are: {tf_dims(hv.shape)} and {tf_dims(hi.shape)}")
    if hs.size != hi.shape[1]:
        fail(f"Expected hypothesis_shape.NumElements == #cols(hypothesis_indices), their "
             f"shapes are: {tf_dims(hs.shape)} and {tf_dims(hi.shape)}")
    if ts.size < 2:
        fail(f"Input SparseTensors must have rank at least 2, but truth_shape rank is: "
             f"{ts.size}")
    if tv.size != ti.shape[0]:
        fail(f"Expected truth_values.NumElements == #rows(truth_indices), their shapes are: "
             f"{tf_dims(tv.shape)} and {tf_dims(ti.shape)}")
    if ts.size != ti.shape[1]:
        fail(f"Expected truth_shape.NumElements == #cols(truth_indices), their shapes are: "
             f"{tf_dims(ts.shape)} and {tf_dims(ti.shape)}")
    if ts.size != hs.size:
        fail(f"Expected truth and hypothesis to have matching ranks, but their shapes are: "
             f"{tf_dims(ts.shape)} and {tf_dims(hs.shape)}")


def _dense_shape(shape):
    """TensorShapeUtils::MakeShape: every dim non-negative."""
    for d in shape.tolist():
        if d < 0:
            fail(f"Dimension {d} must be >= 0")
    return shape.tolist()


def _groups(indices, values):
    """SparseTensor::group over all but the last dim: runs of consecutive entries with the
    same leading indices, as (key, values)."""
    keys = indices[:, :-1]
    if keys.shape[0] == 0:
        return []
    starts = np.concatenate([[0], np.nonzero((keys[1:] != keys[:-1]).any(axis=1))[0] + 1,
                             [keys.shape[0]]])
    return [(tuple(keys[a].tolist()), values[a:b]) for a, b in zip(starts[:-1], starts[1:])]


def levenshtein(s, t):
    """gtl::LevenshteinDistance of two sequences (numpy arrays), one DP row at a time: the
    insertions along a row are a running minimum of (row - position)."""
    if len(s) == 0 or len(t) == 0:
        return max(len(s), len(t))
    pos = np.arange(len(t) + 1)
    prev = pos.copy()
    for i, a in enumerate(s, 1):
        cost = (t != a).astype(np.int64)
        cand = np.empty_like(prev)
        cand[0] = i
        cand[1:] = np.minimum(prev[1:] + 1, prev[:-1] + cost)
        prev = pos + np.minimum.accumulate(cand - pos)
    return int(prev[-1])


class _EditOutput:
    """The output's flat buffer, written at the inner product of a group with its strides."""

    def __init__(self, shape):
        self.shape = shape
        self.flat = np.zeros(int(np.prod(shape, dtype=np.int64)), F32)
        self.strides = [int(np.prod(shape[d + 1:], dtype=np.int64)) for d in range(len(shape))]

    def put(self, key, value):
        loc = sum(k * s for k, s in zip(key, self.strides))
        if not 0 <= loc < self.flat.size:
            fail(f"Got an inner product {loc} which would require writing to outside of the "
                 f"buffer for the output tensor (max elements {self.flat.size})")
        self.flat[loc] = value


@kernel("EditDistance")
def edit_distance(ctx, hyp_indices, hyp_values, hyp_shape, truth_indices, truth_values,
                  truth_shape):
    args = [np.asarray(a) for a in (hyp_indices, hyp_values, hyp_shape, truth_indices,
                                    truth_values, truth_shape)]
    _validate_edit_inputs(*args)
    hi, hv, hs, ti, tv, ts = args
    h_shape, t_shape = _dense_shape(hs), _dense_shape(ts)
    shape = [max(a, b) for a, b in zip(h_shape[:-1], t_shape[:-1])]
    if int(np.prod(shape, dtype=object)) > np.iinfo(np.int64).max:
        fail(f"Encountered overflow when multiplying the dims of output shape "
             f"{tf_dims(shape)}")
    if int(np.prod(shape, dtype=object)) <= 0:
        fail(f"Got output shape {tf_dims(shape)} which has 0 elements")
    out = _EditOutput(shape)
    normalize = bool(ctx.attrs.get("normalize", True))
    hyps, truths = _groups(hi, hv), _groups(ti, tv)
    h, t = 0, 0
    while h < len(hyps) or t < len(truths):
        if h < len(hyps) and t < len(truths) and hyps[h][0] == truths[t][0]:
            key, seq = truths[t]
            dist = F32(levenshtein(seq, hyps[h][1]))
            out.put(key, dist / F32(len(seq)) if normalize else dist)
            h, t = h + 1, t + 1
        elif t == len(truths) or (h < len(hyps) and truths[t][0] > hyps[h][0]):
            key, seq = hyps[h]  # no truth: the hypothesis' length (inf normalised)
            out.put(key, np.inf if normalize and len(seq) else F32(len(seq)))
            h += 1
        else:
            key, seq = truths[t]  # no hypothesis: the truth's length (1 normalised)
            out.put(key, 1.0 if normalize else F32(len(seq)))
            t += 1
    return out.flat.reshape(shape)
