"""The CTC ops (CTCGreedyDecoder, CTCBeamSearchDecoder, CTCLoss) against TensorFlow
(tests/fixtures/ctc_decode, made by tools/gen_ctc_decode_fixtures.py): values (float32 and
float64, every attr, ties and NaNs, beams whose probabilities all tie so that the leaves' order
decides, labels longer than their sequence, repeats, no valid path), errors, tfg's gradient
through CTCLoss and TensorFlow's own gradient graph, shape inference, the memory guard and the
CLI."""
import re

import numpy as np
import pytest

from helpers import tfg_cli
from op_cases import OpCases, case_ids, check, grad_ids, one_op_graph
from tfg.errors import TfgError
from tfg.executor.session import Session
from tfg.graphdef.infer import infer
from tfg.kernels.ctc_beam import TopN
from tfg.passes.grad import grad
from tfg.passes.grad.registry import get_gradient
from tfg.schemas.dtypes import DType

OPS = OpCases("ctc_decode")
DIR, ARRAYS, GRAPH = OPS.dir, OPS.arrays, OPS.graph
RUNS, ERRORS, GRADS = OPS.runs, OPS.errors, OPS.grads
F32, I32, I64 = DType.FLOAT, DType.INT32, DType.INT64


@pytest.fixture(scope="module")
def session():
    return Session(GRAPH)


def test_fixtures_cover_both_ops_dtypes_and_errors():
    ops = {(c["op"], ARRAYS[f"{c['name']}/inputs"].dtype.name) for c in RUNS}
    assert ops == {(op, dt) for op in ("CTCGreedyDecoder", "CTCBeamSearchDecoder", "CTCLoss")
                   for dt in ("float32", "float64")}
    assert len(ERRORS) >= 15 and len(GRADS) >= 10


@pytest.mark.parametrize("case", RUNS, ids=case_ids(RUNS))
def test_values_match_tensorflow(session, case):
    name = case["name"]
    outs = [f"{name}/out{k}:0" for k in range(case["outputs"])]
    for k, got in enumerate(session.run(outs, OPS.feeds(case))):
        check(got, ARRAYS[f"{name}/out{k}"], case, f"{name} out{k}")


@pytest.mark.parametrize("case", ERRORS, ids=case_ids(ERRORS))
def test_errors_match_tensorflow(session, case):
    # TensorFlow's kernel refused these feeds with case["error"]; tfg's must too
    with pytest.raises(TfgError, match=re.escape(case["error"])):
        session.run([f"{case['name']}/out0:0"], OPS.feeds(case))


@pytest.mark.parametrize("case,arg", GRADS, ids=grad_ids(GRADS))
def test_tfg_gradient_matches_tensorflow(case, arg):
    OPS.check_tfg_gradient(case, arg)


@pytest.mark.parametrize("case,arg", GRADS, ids=grad_ids(GRADS))
def test_tensorflow_gradient_graph_runs(session, case, arg):
    """TensorFlow's own gradient nodes (PreventGradient, ExpandDims, Mul) run in tfg."""
    OPS.check_tf_gradient_graph(session, case, arg)


# --- direct checks of the rules the fixtures rely on ------------------------------------------
def _graph(op, inputs, attrs=None):
    """one_op_graph with T from the first input's dtype."""
    return one_op_graph(op, inputs, {"T": inputs[0][1], **(attrs or {})})


def test_greedy_decoder_keeps_a_repeat_across_a_blank():
    # classes per step: 1 1 blank 1 0 0; merged: 1, 1, 0 (the blank splits the 1s)
    steps = [1, 1, 2, 1, 0, 0]
    x = np.eye(3, dtype=np.float32)[steps][:, None, :]
    g = _graph("CTCGreedyDecoder", [(x, F32), ([6], I32)], {"merge_repeated": True})
    idx, vals, shape, logp = Session(g).run([f"op:{k}" for k in range(4)], {})
    np.testing.assert_array_equal(vals, [1, 1, 0])
    np.testing.assert_array_equal(idx, [[0, 0], [0, 1], [0, 2]])
    np.testing.assert_array_equal(shape, [1, 3])
    np.testing.assert_array_equal(logp, [[-6.0]])


def test_loss_gradient_is_softmax_minus_occupancy_and_rows_sum_to_zero():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((5, 2, 4)).astype(np.float64)
    g = _graph("CTCLoss", [(x, DType.DOUBLE), ([[0, 0], [0, 1], [1, 0]], I64),
                           ([1, 2, 0], I32), ([5, 3], I32)])
    loss, dx = Session(g).run(["op:0", "op:1"], {})
    assert np.all(loss > 0)
    np.testing.assert_allclose(dx.sum(axis=2)[:3], 0, atol=1e-6)  # float expf: ~1e-7
    np.testing.assert_array_equal(dx[3:, 1], 0)  # past entry 1's length


def test_top_n_keeps_the_most_probable_and_extracts_them_in_order():
    class Leaf:
        def __init__(self, total):
            self.total = total

    rng = np.random.default_rng(1)
    totals = rng.permutation(40).astype(float)
    for limit in (1, 5, 16, 17, 40, 60):
        top = TopN(limit)
        for i, t in enumerate(totals):
            top.push(Leaf(t))
            if i % 7 == 3:  # a peek reorders the unsorted leaves, keeping them
                assert top.peek_bottom().total == min(sorted(totals[:i + 1])[-limit:])
        got = [leaf.total for leaf in top.extract()]
        assert got == sorted(totals, reverse=True)[:limit]


def test_beam_search_sums_the_paths_of_a_sequence():
    # T=2, classes a and blank: p(a) = P(a-) + P(aa) + P(-a) = .3*.4 + .3*.6 + .7*.4 (GravesTh)
    x = np.log(np.array([[[0.3, 0.7]], [[0.4, 0.6]]], np.float64))
    g = _graph("CTCBeamSearchDecoder", [(x, DType.DOUBLE), ([2], I32)],
               {"beam_width": 2, "top_paths": 2})
    outs = Session(g).run([f"op:{k}" for k in range(7)], {})
    np.testing.assert_array_equal(outs[2], [0])     # best: "a"
    np.testing.assert_array_equal(outs[3], [])      # then: ""
    np.testing.assert_allclose(np.exp(outs[6]), [[0.58, 0.42]], rtol=1e-6)


def test_a_beam_search_too_large_to_finish_is_refused_before_it_starts():
    """beam_width 2**31 over 1,000 steps of 30 classes: days of Python; refused at once, the
    error naming the sizes."""
    from tfg.errors import TfgRuntimeError
    x = np.zeros((1000, 1, 30), np.float32)
    g = _graph("CTCBeamSearchDecoder", [(x, DType.FLOAT), ([1000], I32)],
               {"beam_width": 2 ** 31 - 1, "top_paths": 1})
    with pytest.raises(TfgRuntimeError, match="beam_width 2147483647 over 30 classes"):
        Session(g).run("op:0", {})


# --- shapes and the memory guard --------------------------------------------------------------
@pytest.mark.parametrize("op,inputs,shapes", [
    ("CTCGreedyDecoder", [((7, 3, 5), F32), ((3,), I32)],
     [(None, 2), (None,), (2,), (3, 1)]),
    ("CTCGreedyDecoder", [((7, None, 5), F32), ((4,), I32)],
     [(None, 2), (None,), (2,), (4, 1)]),
    ("CTCLoss", [((7, None, 5), F32), ((9, 2), I64), ((None,), I32), ((3,), I32)],
     [(3,), (7, 3, 5)]),
    ("CTCBeamSearchDecoder", [((7, 3, 5), F32), ((3,), I32)],
     [(None, 2), (None, 2), (None,), (None,), (2,), (2,), (3, 2)]),
])
def test_shapes_are_inferred(op, inputs, shapes):
    attrs = {"beam_width": 4, "top_paths": 2} if op == "CTCBeamSearchDecoder" else {}
    info = infer(_graph(op, inputs, attrs))
    assert [info[("op", k)].shape for k in range(len(shapes))] == shapes


@pytest.mark.parametrize("op,inputs,words", [
    ("CTCGreedyDecoder", [((7, 3), F32), ((3,), I32)], "inputs must have rank 3"),
    ("CTCGreedyDecoder", [((7, 3, 5), F32), ((4,), I32)], "Dimensions must be equal"),
    ("CTCLoss", [((7, 3, 5), F32), ((9, 2), I64), ((8,), I32), ((3,), I32)],
     "Dimensions must be equal, but are 9 and 8"),
])
def test_shape_functions_refuse_what_tensorflow_refuses(op, inputs, words):
    with pytest.raises(TfgError, match=words):
        infer(_graph(op, inputs), strict=True)


def test_memory_guard_sizes_the_loss_gradient_from_the_inputs():
    # the [T, B, C] gradient output (8 MB here) is sized before the kernel runs
    x = np.zeros((1000, 8, 256), np.float32)
    g = _graph("CTCLoss", [((1000, 8, 256), F32), ([[0, 0]], I64), ([1], I32),
                           ([1000] * 8, I32)])
    with pytest.raises(TfgError, match="would allocate"):
        Session(g, max_memory="4M").run(["op:1"], {"in0:0": x})


# --- gradients --------------------------------------------------------------------------------
def test_greedy_decoder_is_not_differentiable():
    assert get_gradient("CTCGreedyDecoder").fn is None


def test_second_derivative_through_ctc_loss_is_refused():
    g = _graph("CTCLoss", [((3, 1, 3), F32), ([[0, 0]], I64), ([1], I32), ([3], I32)])
    g.add_node("s", "Sum", ["op:0", "r:0"], {"T": F32, "Tidx": I32, "keep_dims": False})
    g.add_node("r", "Const", [], {"dtype": I32, "value": np.array([0], np.int32)})
    g2 = grad(g, ["s"], ["in0"])
    g2.add_node("s2", "Sum", ["grad/in0:0", "r3:0"], {"T": F32, "Tidx": I32,
                                                       "keep_dims": False})
    g2.add_node("r3", "Const", [], {"dtype": I32, "value": np.array([0, 1, 2], np.int32)})
    with pytest.raises(TfgError, match="second  derivative of ctc_loss"):
        grad(g2, ["s2"], ["in0"], prefix="grad2")


# --- the CLI ----------------------------------------------------------------------------------
def test_cli_runs_a_case_and_reports_bad_inputs(tmp_path):
    name = "Loss_float32_p0_m1"
    feeds, out = tmp_path / "f.npz", tmp_path / "out.npz"
    case = OPS.feeds_file(feeds, name)
    tfg_cli("run", DIR / "ctc_decode.pb", "--feeds", feeds, "--fetch", f"{name}/out0",
            "--fetch", f"{name}/out1", "-o", out)
    got = np.load(out)
    assert len(got.files) == 2
    for k in range(2):
        key = next(f for f in got.files if f.endswith(f"out{k}"))
        check(got[key], ARRAYS[f"{name}/out{k}"], case, f"cli out{k}")

    # a kernel refusing its values (a sequence past the time axis): one stderr line
    bad = tmp_path / "bad.npz"
    OPS.feeds_file(bad, name, {f"{name}/sequence_length": np.int32([9, 6, 3, 7])})
    p = tfg_cli("run", DIR / "ctc_decode.pb", "--feeds", bad, "--fetch", f"{name}/out0",
                check=False)
    lines = p.stderr.decode().strip().splitlines()
    assert p.returncode != 0 and len(lines) == 1 and "sequence_length(0) <= 8" in lines[0]

    # a feed of the wrong shape for its placeholder: bad input (exit 2), one stderr line
    OPS.feeds_file(bad, name, {f"{name}/sequence_length": np.int32([8, 6, 3])})
    p = tfg_cli("run", DIR / "ctc_decode.pb", "--feeds", bad, "--fetch", f"{name}/out0",
                check=False)
    assert p.returncode == 2
    assert len(p.stderr.decode().strip().splitlines()) == 1
