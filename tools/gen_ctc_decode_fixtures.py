#!/usr/bin/env python3
"""TensorFlow's values, errors and gradients of the CTC ops (CTCGreedyDecoder,
CTCBeamSearchDecoder, CTCLoss) for
tests/test_ctc_decode_ops.py. NEEDS TENSORFLOW; never imports tfg:

    /work/tfvenv/bin/python tools/gen_ctc_decode_fixtures.py

Writes tests/fixtures/ctc_decode/: ctc_decode.pb (one tf.compat.v1 graph: per case
`<case>/<arg>` placeholders -> `<case>/out<k>` (Identity of the op's output k); a CTCLoss case
with a gradient also has `<case>/loss` = sum(loss * weights) and TensorFlow's own gradient
graph, `<case>/tf_dinputs`), ctc_decode.npz (`<case>/<arg>` feeds, `<case>/out<k>`,
`<case>/dinputs`) and cases.json (per case: op, args, outputs, the args with gradients,
tolerances, or the error TensorFlow's kernel raises on those feeds).
"""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from fixture_cases import CaseSet, fixture_dir, generate  # noqa: E402

OUT = fixture_dir("ctc_decode")
R = tf.raw_ops
RNG = np.random.default_rng(45)
I32, I64 = np.int32, np.int64
# CTCLoss's alpha-beta recursions sum in log space over T steps: a few ulps more than one op.
# TensorFlow's double CTCLoss takes its log-sum-exp corrections and occupancies in float
# (log1pf, expf), so it is only float-accurate: an ulp of float apart here and there
TOL = {np.float32: (2e-5, 2e-6), np.float64: (1e-11, 1e-12)}
LOSS_TOL = {np.float32: TOL[np.float32], np.float64: (1e-6, 1e-7)}


class Cases(CaseSet):
    """The cases' graph pieces, arrays and index (tools/fixture_cases.py writes them)."""

    refusals = (tf.errors.OpError,)  # (the decoders refuse with FailedPrecondition too)

    def add(self, name, op, args, attrs=None, grad=False, error=None, tol=None):
        """args: {input name: array}; grad: take TensorFlow's gradient of sum(loss * w) by
        `inputs` (CTCLoss only); error: words of the error TensorFlow raises on the feeds."""
        dt = args["inputs"].dtype.type
        rtol, atol = tol or (LOSS_TOL if op == "CTCLoss" else TOL)[dt]
        with tf.name_scope(name):
            phs = {k: tf.compat.v1.placeholder(v.dtype, None if error else v.shape, name=k)
                   for k, v in args.items()}
            outs = []  # flat: CTCBeamSearchDecoder's first three outputs are lists
            for o in getattr(R, op)(**phs, **(attrs or {}), name="op"):
                outs.extend(o if isinstance(o, (list, tuple)) else [o])
            for k, o in enumerate(outs):
                self.fetches[f"{name}/out{k}"] = tf.identity(o, name=f"out{k}")
            self.arrays.update({f"{name}/{k}": v for k, v in args.items()})
            if grad:
                # distinct weights per batch entry: the gradient's broadcast multiply shows
                weights = np.linspace(1.0, -0.5, args["sequence_length"].shape[0]).astype(dt)
                loss = tf.reduce_sum(outs[0] * weights, name="loss")
                (d,) = tf.gradients(loss, [phs["inputs"]])
                self.fetches[f"{name}/dinputs"] = tf.identity(d, name="tf_dinputs")
        self.index.append({"name": name, "op": op, "args": list(args), "outputs": len(outs),
                           "attrs": dict(attrs or {}), "grad": ["inputs"] if grad else [],
                           "rtol": rtol, "atol": atol, "error": error})


def logits(t, b, c, dt, scale=3.0):
    return (RNG.standard_normal((t, b, c)) * scale).astype(dt)


def sparse_labels(rows):
    """A batch of label lists as CTCLoss's sparse labels (row-major indices, int32 values)."""
    idx = [[b, i] for b, row in enumerate(rows) for i in range(len(row))]
    vals = [v for row in rows for v in row]
    return np.array(idx, I64).reshape(-1, 2), np.array(vals, I32)


def greedy_cases(c):
    for dt in (np.float32, np.float64):
        n = dt.__name__
        x = logits(6, 3, 5, dt)
        lens = I32([6, 3, 0])
        for merge in (False, True):
            for blank in (-1, 0, 2, -5):
                c.add(f"Greedy_{n}_m{int(merge)}_b{blank}", "CTCGreedyDecoder",
                      {"inputs": x, "sequence_length": lens},
                      {"merge_repeated": merge, "blank_index": blank})
        # ties (the first maximum wins), repeats across a blank, a class run
        ties = np.array([[[1, 1, 0]], [[0, 2, 2]], [[0, 2, 2]], [[3, 0, 3]], [[0, 0, 0]],
                         [[0, 4, 0]], [[0, 4, 0]]], dt)
        for merge in (False, True):
            c.add(f"Greedy_{n}_ties_m{int(merge)}", "CTCGreedyDecoder",
                  {"inputs": ties, "sequence_length": I32([7])}, {"merge_repeated": merge})
    nan = logits(3, 2, 4, np.float32)
    nan[0, 0, 2] = np.nan
    nan[1, 1, 0] = np.nan
    c.add("Greedy_nan", "CTCGreedyDecoder", {"inputs": nan, "sequence_length": I32([3, 3])})
    c.add("Greedy_one_step", "CTCGreedyDecoder",
          {"inputs": logits(1, 1, 1, np.float32), "sequence_length": I32([1])})
    c.add("Greedy_all_empty", "CTCGreedyDecoder",
          {"inputs": logits(2, 2, 3, np.float32), "sequence_length": I32([0, 0])})
    x = logits(4, 2, 3, np.float32)
    c.add("GreedyErr_seq_len_past_time", "CTCGreedyDecoder",
          {"inputs": x, "sequence_length": I32([4, 5])}, error="sequence_length(1) <= 4")
    c.add("GreedyErr_seq_len_size", "CTCGreedyDecoder",
          {"inputs": x, "sequence_length": I32([4, 4, 4])},
          error="len(sequence_length) != batch_size")
    c.add("GreedyErr_blank_index", "CTCGreedyDecoder",
          {"inputs": x, "sequence_length": I32([4, 4])}, {"blank_index": 3},
          error="blank_index expected to be between -3 and 2 but was 3")
    c.add("GreedyErr_rank", "CTCGreedyDecoder",
          {"inputs": x[0], "sequence_length": I32([4, 4])}, error="inputs is not a 3-Tensor")
    c.add("GreedyErr_empty", "CTCGreedyDecoder",
          {"inputs": np.zeros((0, 2, 3), np.float32), "sequence_length": I32([0, 0])},
          error="inputs must not be empty")


def beam_cases(c):
    for dt in (np.float32, np.float64):
        n = dt.__name__
        x = logits(8, 3, 6, dt, scale=2.0)
        lens = I32([8, 5, 1])
        for width, top in ((1, 1), (3, 2), (10, 3), (20, 4)):
            for merge in (True, False):
                c.add(f"Beam_{n}_w{width}_p{top}_m{int(merge)}", "CTCBeamSearchDecoder",
                      {"inputs": x, "sequence_length": lens},
                      {"beam_width": width, "top_paths": top, "merge_repeated": merge})
        # equal logits: every probability ties, so the leaves' order decides (TopN, sorts)
        for width in (4, 17, 40):
            c.add(f"Beam_{n}_ties_w{width}", "CTCBeamSearchDecoder",
                  {"inputs": np.zeros((5, 2, 4), dt), "sequence_length": I32([5, 3])},
                  {"beam_width": width, "top_paths": 3})
        c.add(f"Beam_{n}_rounded_w6", "CTCBeamSearchDecoder",
              {"inputs": np.round(logits(7, 2, 4, dt)), "sequence_length": I32([7, 6])},
              {"beam_width": 6, "top_paths": 6, "merge_repeated": False})
    # many classes: beams above 16 leaves (std::sort's introsort, not only insertion sort)
    c.add("Beam_wide", "CTCBeamSearchDecoder",
          {"inputs": logits(10, 2, 30, np.float32, scale=1.0), "sequence_length": I32([10, 9])},
          {"beam_width": 50, "top_paths": 5})
    x = logits(4, 2, 3, np.float32)
    c.add("BeamErr_fewer_leaves", "CTCBeamSearchDecoder",
          {"inputs": x, "sequence_length": I32([4, 0])}, {"beam_width": 3, "top_paths": 2},
          error="Less leaves in the beam search than requested.")
    c.add("BeamErr_top_paths_over_width", "CTCBeamSearchDecoder",
          {"inputs": x, "sequence_length": I32([4, 4])}, {"beam_width": 2, "top_paths": 3},
          error="requested more paths than the beam width.")
    c.add("BeamErr_seq_len_past_time", "CTCBeamSearchDecoder",
          {"inputs": x, "sequence_length": I32([4, 5])}, {"beam_width": 3, "top_paths": 1},
          error="sequence_length(1) <= 4")


def loss_case(c, name, x, rows, lens, attrs=None, grad=True, error=None):
    idx, vals = sparse_labels(rows)
    c.add(name, "CTCLoss", {"inputs": x, "labels_indices": idx, "labels_values": vals,
                            "sequence_length": I32(lens)}, attrs, grad=grad, error=error)


def loss_cases(c):
    for dt in (np.float32, np.float64):
        n = dt.__name__
        x = logits(8, 4, 5, dt)
        rows = [[1, 2], [3, 3, 0], [2], [0, 1, 1, 1]]
        lens = [8, 6, 3, 7]
        for pre in (False, True):
            for merge in (False, True):
                loss_case(c, f"Loss_{n}_p{int(pre)}_m{int(merge)}", x, rows, lens,
                          {"preprocess_collapse_repeated": pre, "ctc_merge_repeated": merge})
        # a label longer than its sequence (and an empty sequence): zero loss and gradient
        loss_case(c, f"Loss_{n}_ignore_longer", x, [[1, 2, 3], [0], [1, 1, 2, 3], [2]],
                  [2, 0, 8, 4], {"ignore_longer_outputs_than_inputs": True})
        # the blank class ends a label ([1, 4] is [1]); repeats needing more time than there
        # is: no valid path, loss inf and the gradient the softmax itself
        loss_case(c, f"Loss_{n}_blank_ends_label", x, [[1, 4], [2, 4, 4], [0], [3]],
                  [8, 5, 2, 1])
        loss_case(c, f"Loss_{n}_no_valid_path", x, [[1, 1], [2], [0], [3]], [2, 3, 8, 8],
                  grad=False)
    big = logits(5, 2, 4, np.float32, scale=30.0)
    loss_case(c, "Loss_large_logits", big, [[0, 1], [2, 2]], [5, 4])
    loss_case(c, "Loss_one_step", logits(1, 1, 2, np.float32), [[0]], [1])
    x = logits(4, 2, 4, np.float32)
    errors = [
        ("not_enough_time", [[0, 1, 2], [1]], [2, 4], None,
         "Not enough time for target transition sequence (required: 3, available: 2)0"),
        ("seq_len_past_time", [[0], [1]], [5, 4], None, "sequence_length(0) <= 4"),
        ("negative_seq_len", [[0], [1]], [-1, 4], {"ignore_longer_outputs_than_inputs": True},
         "seq_len(0) < 0"),
        ("empty_label", [[0], []], [4, 4], None, "Labels length is zero in batch 1"),
        ("negative_label", [[0, -2], [1]], [4, 4], None,
         "All labels must be nonnegative integers, batch: 0 labels: 0,-2"),
        ("label_after_blank", [[0, 3, 1], [1]], [4, 4], None,
         "Saw a non-null label (index >= num_classes - 1) following a null label, batch: 0 "
         "num_classes: 4 labels: 0,3,1 labels seen so far: 0"),
    ]
    for what, rows, lens, attrs, msg in errors:
        loss_case(c, f"LossErr_{what}", x, rows, lens, attrs, grad=False, error=msg)
    idx, vals = sparse_labels([[0, 1], [1]])
    bad = [("unsorted", idx[[1, 0, 2]], vals, "label SparseTensor is not valid"),
           ("batch_past_end", idx + I64([[1, 0]]), vals, "label SparseTensor is not valid"),
           ("rows_mismatch", idx, vals[:2], "labels_indices and labels_values must contain the "
                                            "same number of rows"),
           ("indices_rank", idx[:, 0], vals, "labels_indices is not a matrix")]
    for what, i, v, msg in bad:
        c.add(f"LossErr_{what}", "CTCLoss", {"inputs": x, "labels_indices": i,
                                             "labels_values": v,
                                             "sequence_length": I32([4, 4])}, error=msg)
    c.add("LossErr_batch_size", "CTCLoss", {"inputs": x, "labels_indices": idx,
                                            "labels_values": vals,
                                            "sequence_length": I32([4, 4, 4])},
          error="len(sequence_length) != batch_size.")
    c.add("LossErr_zero_time", "CTCLoss",
          {"inputs": np.zeros((0, 2, 4), np.float32), "labels_indices": idx,
           "labels_values": vals, "sequence_length": I32([0, 0])},
          error="Max time or first dimension of input cannot be 0.")


if __name__ == "__main__":
    generate(Cases(), [greedy_cases, beam_cases, loss_cases], OUT, "ctc_decode")
