"""The sparse tensor ops (SparseTensorDenseMatMul, SparseReorder, SparseReduceSum(Sparse),
SparseSoftmax, SparseAdd(Grad), SparseReshape, SparseFillEmptyRows(Grad),
SparseDenseCwiseMul/Add/Div) against TensorFlow (tests/fixtures/sparse, made by
tools/gen_sparse_fixtures.py): values, output orders, errors, tfg's gradients and TensorFlow's
own gradient graphs run by tfg, shape inference, the memory guard and the CLI."""
import re

import numpy as np
import pytest

from helpers import tfg_cli
from op_cases import OpCases, case_ids, check, grad_ids
from tfg.errors import TfgError
from tfg.executor.session import Session
from tfg.graphdef.attrs import Shape
from tfg.graphdef.graph import Graph
from tfg.graphdef.infer import infer
from tfg.passes.grad import grad
from tfg.passes.grad.emitter import NodeFactory
from tfg.passes.grad.registry import get_gradient
from tfg.schemas.dtypes import DType

OPS = OpCases("sparse")
DIR, CASES, ARRAYS, GRAPH = OPS.dir, OPS.cases, OPS.arrays, OPS.graph
RUNS, ERRORS, GRADS = OPS.runs, OPS.errors, OPS.grads
# TensorFlow's own gradient graph of SparseDenseCwiseMul/Div's dense operand writes
# SparseTensorDenseAdd, which tfg does not have (tfg's gradient writes TensorScatterAdd)
TF_GRAPH_GRADS = [(c, k) for c, k in GRADS if not (c["op"].startswith("SparseDenseCwise")
                                                   and k == "dense")]
I64, F32 = DType.INT64, DType.FLOAT


@pytest.fixture(scope="module")
def session():
    return Session(GRAPH)


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


@pytest.mark.parametrize("case,arg", TF_GRAPH_GRADS, ids=grad_ids(TF_GRAPH_GRADS))
def test_tensorflow_gradient_graph_runs(session, case, arg):
    """The nodes TensorFlow's own gradients emit (SparseAddGrad, SparseFillEmptyRowsGrad,
    InvertPermutation, GatherNd ...) run in tfg to TensorFlow's values."""
    OPS.check_tf_gradient_graph(session, case, arg)


# --- direct checks of the orders and rules the fixtures rely on -------------------------------
def _graph(op, inputs, attrs=None):
    """One op node on Consts (a value) or Placeholders (a tuple: the shape); inputs is
    [(value or shape, DType)]; type attrs come from the inputs' dtypes."""
    g = Graph()
    names = []
    for i, (v, dt) in enumerate(inputs):
        if isinstance(v, tuple):
            g.add_node(f"in{i}", "Placeholder", [], {"dtype": dt, "shape": Shape(v)})
        else:
            g.add_node(f"in{i}", "Const", [], {"dtype": dt, "value": np.asarray(v, dt.np)})
        names.append(f"in{i}:0")
    factory = NodeFactory()
    factory.graph, factory._dtypes = g, {}
    attrs = dict(attrs or {})
    factory._fill_type_attrs(op, names, attrs)
    g.add_node("op", op, names, attrs)
    return g


def _run(op, inputs, attrs=None, outputs=1):
    return Session(_graph(op, inputs, attrs)).run([f"op:{k}" for k in range(outputs)], {})


def test_reorder_is_row_major_and_stable():
    idx = [[1, 0], [0, 2], [1, 0], [0, 0]]
    out_idx, out_vals = _run("SparseReorder", [(idx, I64), ([1, 2, 3, 4], F32), ([2, 3], I64)],
                             outputs=2)
    np.testing.assert_array_equal(out_idx, [[0, 0], [0, 2], [1, 0], [1, 0]])
    np.testing.assert_array_equal(out_vals, [4, 2, 1, 3])  # the repeat keeps its order


def test_sparse_add_keeps_lone_entries_below_thresh_and_drops_small_sums():
    idx, vals, shape = _run(
        "SparseAdd", [([[0, 0], [1, 1]], I64), ([0.01, 1.0], F32), ([2, 2], I64),
                      ([[1, 1], [1, 0]], I64), ([-0.95, 0.02], F32), ([2, 2], I64),
                      (0.1, F32)], outputs=3)
    # [0, 0] alone (0.01 < thresh, kept); [1, 0] alone; [1, 1]: 0.05 < thresh, dropped
    np.testing.assert_array_equal(idx, [[0, 0], [1, 0]])
    np.testing.assert_allclose(vals, [0.01, 0.02])
    np.testing.assert_array_equal(shape, [2, 2])


def test_softmax_output_follows_row_major_order():
    (y,) = _run("SparseSoftmax", [([[1, 0], [0, 1], [0, 0]], I64),
                                     ([5.0, 1.0, 1.0], F32), ([2, 2], I64)])
    np.testing.assert_allclose(y, [0.5, 0.5, 1.0])  # rows [0, 0], [0, 1], then [1, 0]


def test_fill_empty_rows_reverse_map_and_indicator():
    idx, vals, empty, rev = _run(
        "SparseFillEmptyRows", [([[2, 1], [0, 0], [2, 0]], I64), ([1.0, 2.0, 3.0], F32),
                                ([4, 2], I64), (9.0, F32)], outputs=4)
    np.testing.assert_array_equal(idx, [[0, 0], [1, 0], [2, 1], [2, 0], [3, 0]])
    np.testing.assert_array_equal(vals, [2, 9, 1, 3, 9])
    np.testing.assert_array_equal(empty, [False, True, False, True])
    np.testing.assert_array_equal(rev, [2, 0, 3])


# --- shapes and the memory guard --------------------------------------------------------------
IDX3, VAL3 = ((5, 3), I64), ((5,), F32)


@pytest.mark.parametrize("op,inputs,attrs,shapes", [
    ("SparseTensorDenseMatMul", [((5, 2), I64), VAL3, ([3, 4], I64), ((4, 7), F32)],
     {"T": F32}, [(3, 7)]),
    ("SparseTensorDenseMatMul", [((5, 2), I64), VAL3, ([3, 4], I64), ((7, 3), F32)],
     {"T": F32, "adjoint_a": True, "adjoint_b": True}, [(4, 7)]),
    ("SparseReorder", [IDX3, VAL3, ((3,), I64)], {"T": F32}, [(5, 3), (5,)]),
    ("SparseReduceSum", [IDX3, VAL3, ([2, 4, 3], I64), ([1, -1], DType.INT32)], {"T": F32},
     [(2,)]),
    ("SparseReduceSum", [IDX3, VAL3, ([2, 4, 3], I64), ([0], DType.INT32)],
     {"T": F32, "keep_dims": True}, [(1, 4, 3)]),
    ("SparseReduceSumSparse", [IDX3, VAL3, ([2, 4, 3], I64), ([0], DType.INT32)], {"T": F32},
     [(None, 2), (None,), (2,)]),
    ("SparseSoftmax", [IDX3, VAL3, ((3,), I64)], {"T": F32}, [(5,)]),
    ("SparseAdd", [IDX3, VAL3, ((3,), I64), ((2, 3), I64), ((2,), F32), ((3,), I64),
                   ((), F32)], {"T": F32, "Treal": F32}, [(None, 3), (None,), (3,)]),
    ("SparseReshape", [IDX3, ((3,), I64), ([6, -1], I64)], {}, [(5, 2), (2,)]),
    ("SparseFillEmptyRows", [IDX3, VAL3, ([6, 2, 2], I64), ((), F32)], {"T": F32},
     [(None, 3), (None,), (6,), (5,)]),
    ("SparseFillEmptyRowsGrad", [((5,), I64), ((8,), F32)], {"T": F32}, [(5,), ()]),
    ("SparseDenseCwiseMul", [IDX3, VAL3, ((3,), I64), ((4, 3), F32)], {"T": F32}, [(5,)]),
])
def test_shapes_are_inferred(op, inputs, attrs, shapes):
    info = infer(_graph(op, inputs, attrs))
    assert [info[("op", k)].shape for k in range(len(shapes))] == shapes


def test_shape_functions_refuse_what_tensorflow_refuses():
    with pytest.raises(TfgError, match="inner dimension does not match: 4 vs. 5"):
        infer(_graph("SparseTensorDenseMatMul", [((5, 2), I64), VAL3, ([3, 4], I64),
                                                 ((5, 7), F32)]), strict=True)
    with pytest.raises(TfgError, match="Invalid reduction dimension 3"):
        infer(_graph("SparseReduceSum", [IDX3, VAL3, ([2, 4, 3], I64), ([3], DType.INT32)]),
              strict=True)


@pytest.mark.parametrize("op,inputs", [
    # dense outputs sized from the dense_shape VALUE: refused before any kernel runs
    ("SparseTensorDenseMatMul", [([[0, 0]], I64), ([1.0], F32), ([10**9, 4], I64),
                                 (np.ones((4, 1000)), F32)]),
    ("SparseReduceSum", [([[0, 0, 0]], I64), ([1.0], F32), ([10**6, 10**6, 5], I64),
                         ([2], DType.INT32)]),
    ("SparseFillEmptyRows", [([[0, 0]], I64), ([1.0], F32), ([10**12, 2], I64), (0.0, F32)]),
])
def test_memory_guard_refuses_huge_outputs_from_shape_values(op, inputs):
    g = _graph(op, inputs, {"T": F32})
    with pytest.raises(TfgError, match="would allocate"):
        Session(g, max_memory="1M").run(["op:0"], {})


# --- gradients that do not exist --------------------------------------------------------------
def test_sparse_dense_cwise_add_gradient_is_refused_as_in_tensorflow():
    g = _graph("SparseDenseCwiseAdd", [IDX3, VAL3, ([2, 4, 3], I64), ((3,), F32)], {"T": F32})
    with pytest.raises(TfgError, match="SparseDenseCwiseAdd is not implemented"):
        grad(g, ["op"], ["in1"])


def test_sparse_add_grad_is_not_differentiable():
    assert get_gradient("SparseAddGrad").fn is None


# --- the CLI ----------------------------------------------------------------------------------
def test_cli_runs_a_case_and_reports_bad_inputs(tmp_path):
    case = next(c for c in CASES if c["name"] == "Add_float32_0.1")
    feeds = tmp_path / "f.npz"
    np.savez(feeds, **{f"Add_float32_0.1/{k}": ARRAYS[f"Add_float32_0.1/{k}"]
                       for k in case["args"]})
    out = tmp_path / "out.npz"
    tfg_cli("run", DIR / "sparse.pb", "--feeds", feeds, "--fetch", "Add_float32_0.1/out1",
            "-o", out)
    got = np.load(out)
    check(got[got.files[0]], ARRAYS["Add_float32_0.1/out1"], case, "cli")

    # a kernel refusing its values (an index past the shape): a run failure, one stderr line
    bad = tmp_path / "bad.npz"
    args = {f"MatMul_bad_k/{k}": ARRAYS[f"MatMul_bad_k/{k}"] for k in
            ("a_indices", "a_values", "a_shape", "b")}
    np.savez(bad, **args)
    p = tfg_cli("run", DIR / "sparse.pb", "--feeds", bad, "--fetch", "MatMul_bad_k/out0",
                check=False)
    assert p.returncode == 1
    lines = p.stderr.decode().strip().splitlines()
    assert len(lines) == 1 and "k (4) from index[1,1] out of bounds (>=4)" in lines[0]

    # a feed of the wrong shape for its placeholder: bad input (exit 2), one stderr line
    args = {f"Reorder_float32/{k}": ARRAYS[f"Reorder_float32/{k}"] for k in
            ("input_indices", "input_values", "input_shape")}
    args["Reorder_float32/input_values"] = args["Reorder_float32/input_values"][:2]
    np.savez(bad, **args)
    p = tfg_cli("run", DIR / "sparse.pb", "--feeds", bad, "--fetch", "Reorder_float32/out1",
                check=False)
    assert p.returncode == 2
    assert len(p.stderr.decode().strip().splitlines()) == 1
