"""Kernels of the sequence-model ops (CPU): ReverseSequence (bidirectional RNNs), TopKV2 and
TopK (beam search) and InTopKV2 (top-k accuracy), with TensorFlow's semantics and error words.

    ReverseSequence([[1, 2, 3], [4, 5, 6]], seq_lengths=[2, 3], seq_dim=1)
        -> [[2, 1, 3], [6, 5, 4]]        # only each row's first seq_lengths[b] steps reversed
    TopKV2([1, 3, 3, 2], k=2) -> values [3, 3], indices [1, 2]   # ties: lower index first
"""
import math

import numpy as np

from tfg.kernels._util import check_rank, fail
from tfg.kernels.basic import shape_string
from tfg.kernels.registry import kernel


@kernel("ReverseSequence")
def reverse_sequence(ctx, x, seq_lengths):
    x, lengths = np.asarray(x), np.asarray(seq_lengths)
    seq_dim, batch_dim = int(ctx.attrs["seq_dim"]), int(ctx.attrs.get("batch_dim", 0))
    if lengths.ndim != 1:
        fail(f"seq_lengths must be 1-dim, not {lengths.ndim}")
    if not 0 <= batch_dim < x.ndim:
        fail(f"batch_dim must be < input rank: {batch_dim} vs. {x.ndim}")
    if not 0 <= seq_dim < x.ndim:
        fail(f"seq_dim must be < input rank: {seq_dim} vs. {x.ndim}")
    if seq_dim == batch_dim:
        fail(f"seq_dim == batch_dim == {seq_dim}")
    if lengths.shape[0] != x.shape[batch_dim]:
        fail(f"Length of seq_lengths != input.dims({batch_dim}), ({lengths.shape[0]} vs. "
             f"{x.shape[batch_dim]})")
    out = x.copy()
    for b, n in enumerate(lengths.tolist()):
        if n < 0:
            fail(f"seq_lens({b}) < 0")
        if n > x.shape[seq_dim]:
            fail(f"seq_lens({b}) > input.dims({seq_dim})")
        # Index [b, :n] along (batch_dim, seq_dim) and write it reversed.
        src = [slice(None)] * x.ndim
        src[batch_dim], src[seq_dim] = b, slice(0, n)
        dst = list(src)
        dst[seq_dim] = slice(n - 1, None, -1) if n else slice(0, 0)
        out[tuple(src)] = x[tuple(dst)]
    return out


@kernel("TopKV2")
def top_k_v2(ctx, x, k):
    x, kv = np.asarray(x), np.asarray(k)
    check_rank(kv, 0, "k must be 0-D, got shape")
    k = int(kv)
    if k < 0:
        fail(f"Need k >= 0, got {k}")
    if x.ndim < 1:
        fail(f"input must be >= 1-D, got shape {shape_string(x.shape)}")
    n = x.shape[-1]
    if n < k:
        fail(f"input must have at least k columns. Had {n}, needed {k}")
    # A stable ascending sort of the reversed row, reversed back, is a descending sort whose
    # ties keep the lower index first (TensorFlow's order), for every dtype without negation.
    order = np.argsort(x[..., ::-1], axis=-1, kind="stable")[..., ::-1]
    indices = (n - 1 - order)[..., :k]
    # (rows of a 2-D view indexed directly: np.take_along_axis's Python was half the call)
    m = math.prod(x.shape[:-1])
    rows = x.reshape(m, n)
    values = rows[np.arange(m)[:, None], indices.reshape(m, k)].reshape(indices.shape)
    index_dtype = ctx.output_dtypes[1].np if len(ctx.output_dtypes) > 1 else np.int32
    return values, indices.astype(index_dtype)


@kernel("TopK")
def top_k(ctx, x):
    """TopK (v1): TopKV2 with k an attr and int32 indices. (TensorFlow 2.21's CPU kernel
    refuses the v1 node, wanting an index_type attr it lacks; older graphs carry it.)"""
    return top_k_v2(ctx, x, np.int32(ctx.attrs["k"]))


@kernel("InTopK")
def in_top_k(ctx, predictions, targets):
    """InTopKV2 with k an attr."""
    return in_top_k_v2(ctx, predictions, targets, np.int64(ctx.attrs["k"]))


@kernel("InTopKV2")
def in_top_k_v2(ctx, predictions, targets, k):
    """Whether each row's target class is among its k largest predictions: fewer than k
    classes strictly greater (so ties count in its favour). A target out of range, or a row
    with a non-finite prediction, is False, as in TensorFlow's kernel."""
    pred, targets, kv = np.asarray(predictions), np.asarray(targets), np.asarray(k)
    check_rank(pred, 2, "predictions must be 2-dimensional, got shape")
    check_rank(targets, 1, "targets must be 1-dimensional, got shape")
    if pred.shape[0] != targets.shape[0]:
        fail(f"First dimension of predictions {pred.shape[0]} must match length of targets "
             f"{targets.shape[0]}")
    check_rank(kv, 0, "k must be 0-D, got shape")
    classes = pred.shape[1]
    valid = (targets >= 0) & (targets < classes)
    rows = np.arange(pred.shape[0])
    with np.errstate(invalid="ignore"):
        target = pred[rows, np.where(valid, targets, 0)] if classes else np.zeros(len(rows))
        greater = (pred > target[:, None]).sum(axis=1)
    finite = np.isfinite(pred).all(axis=1)
    return valid & finite & (greater < int(kv))
