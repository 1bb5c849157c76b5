"""The CTC ops (TensorFlow's ctc_decoder_ops.cc and ctc_loss_op.cc with
util/ctc/ctc_loss_calculator.h), CPU only as in TensorFlow.

    CTCGreedyDecoder: per step the first class of the largest logit (a NaN only wins at class
        0, as TensorFlow's `>` scan); blanks dropped, with merge_repeated a repeat of the
        previous step's class too; log_probability = -sum of the steps' maxima.
    CTCBeamSearchDecoder: TensorFlow's beam search (tfg/kernels/ctc_beam.py) per sequence,
        its top_paths best label sequences and their log probabilities.
    CTCLoss: per batch entry the softmax of the logits, Graves' alpha-beta recursions in log
        space over l' = [blank, l0, blank, l1, ..., blank] (the blank is the last class), the
        loss -log p(l|x) and its gradient by the logits, softmax - occupancy.

The recursions run step by step in the op's dtype, in TensorFlow's order of log-sum-exps, so
values match TensorFlow's to a few ulps; TensorFlow's log-sum-exp correction and occupancy
term are computed with `log1pf`/`expf` (float even for a double op), and so they are here (with
numpy's float32 functions, an ulp of float from glibc's at times: a double loss agrees to about
1e-7 relative, as float-accurate as TensorFlow's own).
"""
import numpy as np

from tfg.kernels._util import fail, tf_dims
from tfg.kernels.ctc_beam import BeamSearch
from tfg.kernels.registry import kernel

_LOG_ZERO = -np.inf


# --- CTCGreedyDecoder -------------------------------------------------------------------------
def _check_decoder_inputs(x, lens):
    """TensorFlow's ValidateInputsGenerateOutputs, in its order."""
    if x.ndim != 3:
        fail("inputs is not a 3-Tensor")
    if x.size == 0:
        fail("inputs must not be empty")
    if lens.ndim != 1:
        fail("sequence_length is not a vector")
    max_time, batch = x.shape[:2]
    if lens.shape[0] != batch:
        fail(f"len(sequence_length) != batch_size.  len(sequence_length):  {lens.shape[0]} "
             f"batch_size: {batch}")
    past = np.flatnonzero(lens > max_time)
    if past.size:
        fail(f"sequence_length({past[0]}) <= {max_time}")


def _blank_class(blank_index, num_classes):
    """blank_index with a negative one counted from the end, checked as TensorFlow does."""
    if not -num_classes <= blank_index < num_classes:
        fail(f"blank_index expected to be between {-num_classes} and {num_classes - 1} but "
             f"was {blank_index}")
    return blank_index + num_classes if blank_index < 0 else blank_index


def _row_max(x):
    """(max, class) per row as TensorFlow's RowMax: the first largest by a strict `>` scan
    from class 0, so a NaN is only picked (and propagated) where it is class 0."""
    later = x[..., 1:]
    scan = np.concatenate([x[..., :1], np.where(np.isnan(later), -np.inf, later)], axis=-1)
    cls = np.argmax(scan, axis=-1)
    cls[np.isnan(x[..., 0])] = 0
    return np.take_along_axis(x, cls[..., None], axis=-1)[..., 0], cls


def _sparse_sequences(keep, cls):
    """The kept classes of keep/cls [B, T] as a SparseTensor [B, longest], batch-major."""
    counts = keep.sum(axis=1)
    values = cls[keep].astype(np.int64)
    starts = np.repeat(np.cumsum(counts) - counts, counts)
    rows = np.repeat(np.arange(keep.shape[0], dtype=np.int64), counts)
    indices = np.stack([rows, np.arange(values.size, dtype=np.int64) - starts], axis=1)
    longest = int(counts.max()) if counts.size else 0
    return indices.reshape(-1, 2), values, np.array([keep.shape[0], longest], np.int64)


@kernel("CTCGreedyDecoder")
def ctc_greedy_decoder(ctx, inputs, sequence_length):
    """The best path of each sequence, its repeats merged (merge_repeated) and blanks
    removed, with -sum(max logit) over its steps."""
    x, lens = np.asarray(inputs), np.asarray(sequence_length)
    _check_decoder_inputs(x, lens)
    blank = _blank_class(int(ctx.attrs["blank_index"]), x.shape[2])
    best, cls = _row_max(x)                                   # [T, B]
    live = np.arange(x.shape[0])[:, None] < lens[None, :]     # t < sequence_length(b)
    log_prob = np.zeros(x.shape[1], x.dtype)
    for t in range(x.shape[0]):  # step by step, as TensorFlow's running sum
        log_prob += np.where(live[t], -best[t], x.dtype.type(0))
    previous = np.concatenate([np.full((1, x.shape[1]), -1), cls[:-1]])
    keep = live & (cls != blank)
    if ctx.attrs["merge_repeated"]:
        keep &= cls != previous
    indices, values, shape = _sparse_sequences(keep.T, cls.T)
    return indices, values, shape, log_prob[:, None]


# --- CTCBeamSearchDecoder ---------------------------------------------------------------------
def _sparse_from_lists(sequences):
    """Label lists, one per batch entry, as a SparseTensor [B, longest], batch-major."""
    counts = np.array([len(q) for q in sequences], np.int64)
    values = np.array([v for q in sequences for v in q], np.int64)
    rows = np.repeat(np.arange(len(sequences), dtype=np.int64), counts)
    positions = np.concatenate([np.arange(n, dtype=np.int64) for n in counts])
    longest = int(counts.max()) if counts.size else 0
    return (np.stack([rows, positions], axis=1).reshape(-1, 2), values,
            np.array([len(sequences), longest], np.int64))


# The most candidate beams (beam entries x classes, summed over the time steps searched) one
# call expands: the search runs in Python, about a microsecond a candidate, so a hostile
# beam_width of 2**31 over long sequences would run for days. A speech model's decoder
# (beam 100, 30 classes, 1,000 steps, batch 32) expands under 1e8.
MAX_BEAM_CANDIDATES = 10 ** 9


def _check_beam_work(beam_width, num_classes, lens):
    """Refuse a search larger than MAX_BEAM_CANDIDATES (the beam grows to at most beam_width
    entries, each expanded by every class at every step)."""
    steps = int(np.clip(lens, 0, None).sum()) if lens.size else 0
    work = steps * min(beam_width, MAX_BEAM_CANDIDATES) * max(num_classes, 1)
    if work > MAX_BEAM_CANDIDATES:
        fail(f"a beam search of beam_width {beam_width} over {num_classes} classes and "
             f"{steps} time steps expands about {work:.3g} candidates; tfg takes at most "
             f"{MAX_BEAM_CANDIDATES:.0e}")


@kernel("CTCBeamSearchDecoder")
def ctc_beam_search_decoder(ctx, inputs, sequence_length):
    """TensorFlow's beam search over each sequence's logits (blank last): top_paths
    SparseTensors (indices, then values, then shapes) and their log probabilities [B, n]."""
    x, lens = np.asarray(inputs), np.asarray(sequence_length)
    _check_decoder_inputs(x, lens)
    a = ctx.attrs
    n, merge = int(a["top_paths"]), bool(a["merge_repeated"])
    _check_beam_work(int(a["beam_width"]), x.shape[2], lens)
    search = BeamSearch(x.shape[2], int(a["beam_width"]), x.dtype)
    paths = [[None] * x.shape[1] for _ in range(n)]
    log_probs = np.zeros((x.shape[1], n), x.dtype)
    with np.errstate(all="ignore"):
        for b in range(x.shape[1]):
            for t in range(int(lens[b])):
                search.step(x[t, b])
            found, error = search.top_paths(n, merge)
            if error:
                fail(error)
            for p in range(n):
                paths[p][b] = found[0][p]
                log_probs[b, p] = found[1][p]
            search.reset()
    sparse = [_sparse_from_lists(per_batch) for per_batch in paths]
    return ([s[0] for s in sparse] + [s[1] for s in sparse] + [s[2] for s in sparse]
            + [log_probs])


# --- CTCLoss: inputs and labels ---------------------------------------------------------------
def _check_loss_inputs(x, indices, values, lens):
    """ctc_loss_op.cc's checks of ranks and sizes, in its order."""
    if x.ndim != 3:
        fail("inputs is not a 3-Tensor")
    if lens.ndim != 1:
        fail("sequence_length is not a vector")
    if indices.ndim != 2:
        fail("labels_indices is not a matrix")
    if values.ndim != 1:
        fail("labels_values is not a vector")
    if x.shape[0] == 0:
        fail("Max time or first dimension of input cannot be 0.")
    if lens.shape[0] != x.shape[1]:
        fail(f"len(sequence_length) != batch_size.  len(sequence_length):  {lens.shape[0]} "
             f"batch_size: {x.shape[1]}")
    if indices.shape[0] != values.shape[0]:
        fail("labels_indices and labels_values must contain the same number of rows, but saw "
             f"shapes: {tf_dims(indices.shape)} vs. {tf_dims(values.shape)}")
    if x.shape[1] == 0:
        fail("batch_size must not be 0")
    if indices.shape[1] != 2:
        fail(f"label SparseTensor is not valid: labels_indices has {indices.shape[1]} columns, "
             "a batch and a position expected")


def _check_label_indices(indices, batch):
    """SparseTensor::IndicesValid on [batch, longest label]: each entry in bounds, then in
    strictly increasing row-major order (the first bad entry reported, bounds first)."""
    longest = int(indices[:, 1].max()) + 1 if indices.shape[0] else 0
    bounds = np.array([batch, longest])
    outside = np.any((indices < 0) | (indices >= bounds), axis=1)
    step = indices[1:] - indices[:-1]
    lead = np.where(step[:, 0] != 0, step[:, 0], step[:, 1])  # first nonzero difference
    unordered = np.concatenate([[False], lead < 0])
    repeated = np.concatenate([[False], lead == 0])
    bad = np.flatnonzero(outside | unordered | repeated)
    if not bad.size:
        return
    i = int(bad[0])
    where = f"indices[{i}] = [{indices[i, 0]},{indices[i, 1]}]"
    if outside[i]:
        why = f"is out of bounds: need 0 <= index < [{batch},{longest}]"
    elif unordered[i]:
        why = ("is out of order. Many sparse ops require sorted indices. Use "
               "`tf.sparse.reorder` to create a correctly ordered copy.")
    else:
        why = "is repeated"
    fail(f"label SparseTensor is not valid: {where} {why}")


def _label_sequences(indices, values, batch):
    """Each batch entry's label list, in the (checked, sorted) order of the indices."""
    counts = np.bincount(indices[:, 0], minlength=batch)
    return np.split(values.astype(np.int64), np.cumsum(counts)[:-1])


def _target(label, b, num_classes, time, collapse, ignore_longer):
    """PopulateLPrimes for one entry: the labels up to the first blank-or-above class
    (repeats collapsed with preprocess_collapse_repeated), checked as TensorFlow does."""
    if label.size == 0:
        fail(f"Labels length is zero in batch {b}")
    blank = num_classes - 1
    kept, finished = [], False
    for i, v in enumerate(label.tolist()):
        if i and collapse and v == label[i - 1]:
            continue
        if v >= blank:
            finished = True
        elif finished:
            fail(f"Saw a non-null label (index >= num_classes - 1) following a null label, "
                 f"batch: {b} num_classes: {num_classes} labels: {_join(label)} labels seen so "
                 f"far: {_join(kept)}")
        else:
            kept.append(v)
    if any(v < 0 for v in kept):
        fail(f"All labels must be nonnegative integers, batch: {b} labels: {_join(kept)}")
    if not ignore_longer and label.size > time:
        fail(f"Not enough time for target transition sequence (required: {label.size}, "
             f"available: {time}){b}You can turn this error into a warning by using the flag "
             "ignore_longer_outputs_than_inputs")
    return kept


def _join(labels):
    return ",".join(str(int(v)) for v in labels)


# --- CTCLoss: the alpha-beta recursions -------------------------------------------------------
def _log_sum_exp(a, b):
    """TensorFlow's LogSumExp elementwise: the other where one is log(0), else
    max + log1pf(expf(min - max)), the correction in float whatever the dtype (as
    TensorFlow's, whose double loss is thus only float-accurate)."""
    hi, lo = np.maximum(a, b), np.minimum(a, b)
    both = hi + _float_log1p(_float_exp(lo - hi)).astype(hi.dtype)
    return np.where(a == _LOG_ZERO, b, np.where(b == _LOG_ZERO, a, both))


def _float_exp(x):
    """C's expf: x rounded to float, its exp correctly rounded to float (computed in double
    and rounded once, as glibc's expf rounds; numpy's float32 exp can be an ulp off)."""
    return np.exp(np.asarray(x).astype(np.float32).astype(np.float64)).astype(np.float32)


def _float_log1p(x):
    """C's log1pf of a float x, rounded the same way as _float_exp."""
    return np.log1p(np.asarray(x, np.float32).astype(np.float64)).astype(np.float32)


def _softmax_rows(x):
    e = np.exp(x - x.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _live_states(t, steps, states):
    """The states u of step t that can still reach the end and could have been reached."""
    return max(0, states - 2 * (steps - t)), min(states, 2 * (t + 1))


def _forward(log_y, lp, blank, merge):
    """log alpha [U, T] (GravesTh eq. 7.5-7.9)."""
    steps, states = log_y.shape[0], lp.size
    alpha = np.full((states, steps), _LOG_ZERO, log_y.dtype)
    alpha[0, 0] = log_y[0, blank]
    if states > 1:
        alpha[1, 0] = log_y[0, lp[1]]
    stay = merge | (lp == blank)
    skip = np.zeros(states, bool)
    skip[2:] = (lp[2:] != blank) & ~(merge & (lp[2:] == lp[:-2]))
    for t in range(1, steps):
        prev = alpha[:, t - 1]
        total = np.where(stay, prev, _LOG_ZERO)
        total[1:] = _log_sum_exp(total[1:], prev[:-1])
        total[2:] = np.where(skip[2:], _log_sum_exp(total[2:], prev[:-2]), total[2:])
        lo, hi = _live_states(t, steps, states)
        alpha[lo:hi, t] = log_y[t, lp[lo:hi]] + total[lo:hi]
    return alpha


def _backward(log_y, lp, blank, merge):
    """log beta [U, T] (GravesTh eq. 7.13-7.15)."""
    steps, states = log_y.shape[0], lp.size
    beta = np.full((states, steps), _LOG_ZERO, log_y.dtype)
    beta[max(states - 2, 0):, steps - 1] = 0
    stay = merge | (lp == blank)
    skip = np.zeros(states, bool)
    skip[:-2] = (lp[:-2] != blank) & ~(merge & (lp[:-2] == lp[2:]))
    for t in range(steps - 2, -1, -1):
        ahead = beta[:, t + 1] + log_y[t + 1, lp]
        total = np.where(stay, ahead, _LOG_ZERO)
        total[:-1] = _log_sum_exp(total[:-1], ahead[1:])
        total[:-2] = np.where(skip[:-2], _log_sum_exp(total[:-2], ahead[2:]), total[:-2])
        lo, hi = _live_states(t, steps, states)
        beta[lo:hi, t] = total[lo:hi]
    return beta


def _loss_and_gradient(x_b, labels, merge):
    """-log p(labels | x_b) and its gradient by the logits x_b [T, C] of one entry."""
    blank = x_b.shape[1] - 1
    lp = np.full(2 * len(labels) + 1, blank, np.int64)
    lp[1::2] = labels
    y = _softmax_rows(x_b)
    log_y = np.log(y)
    alpha, beta = _forward(log_y, lp, blank, merge), _backward(log_y, lp, blank, merge)
    occupied = alpha + beta
    log_p = x_b.dtype.type(_LOG_ZERO)
    for u in range(lp.size):
        log_p = _log_sum_exp(log_p, occupied[u, 0])
    if log_p == _LOG_ZERO:  # no path can emit the labels: TensorFlow's gradient is y
        return -log_p, y
    per_class = np.full((x_b.shape[1], x_b.shape[0]), _LOG_ZERO, x_b.dtype)
    for u in range(lp.size):
        per_class[lp[u]] = _log_sum_exp(per_class[lp[u]], occupied[u])
    # TensorFlow's expf: the occupancy in float precision, whatever the op's dtype
    occupancy = _float_exp(per_class - log_p).astype(x_b.dtype)
    return -log_p, y - occupancy.T


@kernel("CTCLoss")
def ctc_loss(ctx, inputs, labels_indices, labels_values, sequence_length):
    """Per batch entry the CTC loss of its labels and the loss's gradient by the logits
    (zero past the entry's length, and for an empty or ignored entry)."""
    x, indices = np.asarray(inputs), np.asarray(labels_indices)
    values, lens = np.asarray(labels_values), np.asarray(sequence_length)
    _check_loss_inputs(x, indices, values, lens)
    max_time, batch, num_classes = x.shape
    _check_label_indices(indices, batch)
    labels = _label_sequences(indices, values, batch)
    past = np.flatnonzero(lens > max_time)
    if past.size:
        fail(f"sequence_length({past[0]}) <= {max_time}")
    negative = np.flatnonzero(lens < 0)
    if negative.size:
        fail(f"seq_len({negative[0]}) < 0")
    a = ctx.attrs
    ignore = bool(a["ignore_longer_outputs_than_inputs"])
    targets = [_target(labels[b], b, num_classes, int(lens[b]),
                       bool(a["preprocess_collapse_repeated"]), ignore) for b in range(batch)]
    loss = np.zeros(batch, x.dtype)
    gradient = np.zeros_like(x)
    with np.errstate(all="ignore"):
        for b in range(batch):
            steps = int(lens[b])
            if steps == 0 or (ignore and labels[b].size > steps):
                continue
            loss[b], gradient[:steps, b] = _loss_and_gradient(
                x[:steps, b], targets[b], bool(a["ctc_merge_repeated"]))
    return loss, gradient
