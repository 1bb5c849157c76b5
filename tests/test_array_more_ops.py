"""The set, partition, search, count, scan and diagonal ops against TensorFlow
(tests/fixtures/array_more, written by tools/gen_array_more_fixtures.py): Unique*,
DynamicPartition, ParallelDynamicStitch, SparseToDense, LowerBound/UpperBound, InTopKV2, TopK
(v1), HistogramFixedWidth, Bincount, Bucketize, EuclideanNorm, CumulativeLogsumexp, LinSpace,
Reverse (v1), Cross, MatrixDiag/MatrixDiagPart/MatrixSetDiag (V1, V2, V3) and
ConjugateTranspose. Values and errors of TensorFlow's runs, `tfg grad` against
tf.gradients, shapes inferred from input values (and the memory guard that reads them), and
the CLI end to end."""
import numpy as np
import pytest

from conftest import FIXTURES
from helpers import numeric_gradient, tfg_cli
from tfg.errors import TfgError
from tfg.executor.session import Session
from tfg.graphdef.graph import Graph
from tfg.graphdef.infer import output_shapes
from tfg.graphdef.io import load, save
from tfg.passes.grad import get_gradient, grad, has_gradient
from tfg.schemas.dtypes import DType
from tfg.schemas.ops.registry import get_op

HERE = FIXTURES / "array_more"
DATA = np.load(HERE / "cases.npz")
CASES = sorted({k.split("/")[0] for k in DATA.files})
VALUE_CASES = [c for c in CASES if f"{c}/out_0" in DATA.files]
ERROR_CASES = [c for c in CASES if f"{c}/error" in DATA.files]
GRAD_CASES = [c for c in CASES if f"{c}/xs" in DATA.files]
# Where tfg's words differ from TensorFlow's (the condition is the same).
REWORDED = {"err_matrix_set_diag_shape": "Either first dimensions of diagonal don't match"}


@pytest.fixture(scope="module")
def graph():
    return load(str(HERE / "graph.pb"))


@pytest.fixture(scope="module")
def session(graph):
    return Session(graph)


def _value(v):
    return v.astype(object) if v.dtype.kind == "S" else v


def _feeds(name):
    out, k = {}, 0
    while f"{name}/feed_{k}" in DATA.files:
        out[f"{name}/in_{k}:0"] = _value(DATA[f"{name}/feed_{k}"])
        k += 1
    return out


def _assert_same(got, want, what, rtol=1e-6):
    got = np.asarray(got)
    if got.dtype == object:
        got = got.astype(bytes)
    assert got.shape == want.shape, f"{what}: shape {got.shape} != {want.shape}"
    assert got.dtype == want.dtype, f"{what}: dtype {got.dtype} != {want.dtype}"
    if want.dtype.kind in "fc":
        np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol, equal_nan=True,
                                   err_msg=what)
        if want.dtype.kind == "f":  # -0.0 stays -0.0 (Unique keeps the first zero it sees)
            same = np.isnan(want) | (np.signbit(got) == np.signbit(want)) | (want != 0)
            assert same.all(), what
    else:
        np.testing.assert_array_equal(got, want, err_msg=what)


@pytest.mark.parametrize("name", VALUE_CASES)
def test_values_match_tensorflow(session, name):
    fetches = [str(t) for t in DATA[f"{name}/fetch"]]
    got = session.run(fetches, _feeds(name))
    wants = [DATA[f"{name}/out_{j}"] for j in range(len(fetches))]
    if name == "top_k_unsorted":  # the order of an unsorted top k is TensorFlow's choice
        order_got, order_want = np.argsort(got[1], -1), np.argsort(wants[1], -1)
        got = [np.take_along_axis(g, order_got, -1) for g in got]
        wants = [np.take_along_axis(w, order_want, -1) for w in wants]
    rtol = 1e-3 if "half" in name else 1e-6
    for j, (g, w) in enumerate(zip(got, wants)):
        _assert_same(g, w, f"{name} output {j}", rtol)


@pytest.mark.parametrize("name", ERROR_CASES)
def test_errors_match_tensorflow(session, name):
    fetches = [str(t) for t in DATA[f"{name}/fetch"]]
    with pytest.raises(TfgError) as err:
        session.run(fetches, _feeds(name))
    expected = REWORDED.get(name, str(DATA[f"{name}/error"]))
    assert " ".join(expected.split()) in " ".join(str(err.value).split()), name


def _with_weights(graph, name, ys):
    """A copy of the graph with a placeholder per y for the grad_ys weights."""
    g = graph.copy()
    names = []
    for j in range(len(ys)):
        w = DATA[f"{name}/w_{j}"]
        node = f"{name}/tfg_w_{j}"
        g.add_node(node, "Placeholder", [], {"dtype": DType.from_numpy(w.dtype)})
        names.append((f"{node}:0", w))
    return g, names


# TensorFlow's gradients of these V2 diagonal ops read their LEFT_LEFT packing as RIGHT_LEFT
# (tfg/passes/grad/linalg_grads.py): tfg's are checked by finite differences instead.
TF_WRONG = {"matrix_diag_v2", "matrix_diag_part_v2_super", "matrix_set_diag_v2_super"}


@pytest.mark.parametrize("name", GRAD_CASES)
def test_gradients_match_tensorflow(graph, name):
    ys = [str(t) for t in DATA[f"{name}/ys"]]
    xs = [str(t) for t in DATA[f"{name}/xs"]]
    g, weights = _with_weights(graph, name, ys)
    g2 = grad(g, ys, xs, grad_ys=[w for w, _ in weights])
    feeds = {**_feeds(name), **dict(weights)}
    outs = [f"grad/{x.rsplit(':', 1)[0]}:0" for x in xs]
    got = Session(g2).run(outs, feeds)
    differs = False
    for x, v in zip(xs, got):
        k = int(x.rsplit(":", 1)[0].rsplit("_", 1)[1])
        want = DATA[f"{name}/grad_{k}"]
        if name in TF_WRONG:
            differs |= not np.allclose(v, want, rtol=1e-3, atol=1e-3)
            want = _weighted_numeric_gradient(g, ys, x, feeds, weights).astype(v.dtype)
            np.testing.assert_allclose(v, want, rtol=1e-3, atol=1e-3, err_msg=f"{name}: d/d{x}")
            continue
        np.testing.assert_allclose(v, want, rtol=2e-5, atol=2e-6, err_msg=f"{name}: d/d{x}")
        assert v.dtype == want.dtype
    assert differs == (name in TF_WRONG), name


def _weighted_numeric_gradient(g, ys, x, feeds, weights):
    """Central differences of sum_j sum(w_j * y_j) with respect to the fed x."""
    sess = Session(g)

    def loss(v):
        outs = sess.run(ys, {**feeds, x: v.astype(feeds[x].dtype)})
        return sum(float(np.sum(np.asarray(o, np.float64) * w)) for o, (_, w) in
                   zip(outs, weights))
    return numeric_gradient(loss, np.asarray(feeds[x], np.float64), eps=1e-3)


# --- tiny graphs of one op -----------------------------------------------------------------
def op_graph(op, inputs, attrs=None, fed=()):
    """Consts (Placeholders for the indices in `fed`) of `inputs` feeding one `op` node named
    "op"; type attrs from the inputs unless given."""
    g = Graph()
    sig = get_op(op)
    full = dict(attrs or {})
    names, i = [], 0
    for arg in sig.inputs:
        count = full.get(arg.number_attr, 1) if arg.number_attr else 1
        for _ in range(count):
            v = np.asarray(inputs[i])
            dtype = DType.from_numpy(v.dtype)
            if i in fed:
                g.add_node(f"in{i}", "Placeholder", [], {"dtype": dtype})
            else:
                g.add_node(f"in{i}", "Const", [], {"dtype": dtype, "value": v})
            names.append(f"in{i}:0")
            if arg.type_attr and arg.type_attr not in full:
                full[arg.type_attr] = dtype
            i += 1
    g.add_node("op", op, names, full)
    return g


def run_op(op, inputs, attrs=None, n_out=1, **session):
    g = op_graph(op, inputs, attrs)
    out = Session(g, **session).run([f"op:{j}" for j in range(n_out)], {})
    return out if n_out > 1 else out[0]


def test_shapes_come_from_input_values():
    g = op_graph("SparseToDense", [np.int64([[0, 1]]), np.int64([3, 5]), np.float32([1]),
                                   np.float32(0)])
    assert output_shapes(g, "op", strict=True) == [(3, 5)]
    g = op_graph("LinSpace", [np.float32(0), np.float32(1), np.int32(9)])
    assert output_shapes(g, "op", strict=True) == [(9,)]
    g = op_graph("Bincount", [np.int32([1, 2]), np.int32(6), np.float32([])])
    assert output_shapes(g, "op", strict=True) == [(6,)]
    g = op_graph("HistogramFixedWidth", [np.float32([1]), np.float32([0, 1]), np.int32(4)])
    assert output_shapes(g, "op", strict=True) == [(4,)]
    g = op_graph("ParallelDynamicStitch", [np.int32([0, 5]), np.float32([[1, 2], [3, 4]])],
                 {"N": 1})
    assert output_shapes(g, "op", strict=True) == [(6, 2)]


def test_shapes_of_the_other_ops():
    x = np.zeros((2, 3, 4), np.float32)
    cases = [
        ("Unique", [np.int32([1, 2])], {}, [(None,), (2,)]),
        ("UniqueWithCounts", [np.int32([1, 2, 2])], {}, [(None,), (3,), (None,)]),
        ("UniqueV2", [x, np.int64([-2])], {}, [(2, None, 4), (3,)]),
        ("DynamicPartition", [x, np.int32([[0, 1, 0], [1, 1, 1]])], {"num_partitions": 2},
         [(None, 4), (None, 4)]),
        ("LowerBound", [np.zeros((2, 5)), np.zeros((2, 3))], {}, [(2, 3)]),
        ("InTopKV2", [np.zeros((4, 3), np.float32), np.int32([0, 1, 2, 0]), np.int32(1)], {},
         [(4,)]),
        ("TopK", [x], {"k": 2}, [(2, 3, 2), (2, 3, 2)]),
        ("EuclideanNorm", [x, np.int32([0, 2])], {"keep_dims": True}, [(1, 3, 1)]),
        ("CumulativeLogsumexp", [x, np.int32(1)], {}, [(2, 3, 4)]),
        ("Reverse", [x, np.array([True, False, True])], {}, [(2, 3, 4)]),
        ("ConjugateTranspose", [x, np.int32([2, 0, 1])], {}, [(4, 2, 3)]),
        ("Cross", [np.zeros((5, 3)), np.zeros((5, 3))], {}, [(5, 3)]),
        ("MatrixDiag", [np.zeros((2, 3))], {}, [(2, 3, 3)]),
        ("MatrixDiagPart", [x], {}, [(2, 3)]),
        ("MatrixSetDiag", [x, np.zeros((2, 3), np.float32)], {}, [(2, 3, 4)]),
        ("MatrixDiagV2", [np.zeros((2, 3, 3)), np.int32([-1, 1]), np.int32(-1), np.int32(-1),
                          np.float64(0)], {}, [(2, 3, 3)]),
        ("MatrixDiagPartV2", [x, np.int32([-1, 1]), np.float32(0)], {}, [(2, 3, 3)]),
        ("MatrixSetDiagV3", [x, np.zeros((2, 3, 3), np.float32), np.int32([-1, 1])], {},
         [(2, 3, 4)]),
    ]
    for op, inputs, attrs, want in cases:
        assert output_shapes(op_graph(op, inputs, attrs), "op", strict=True) == want, op


@pytest.mark.parametrize("op, inputs, attrs, words", [
    ("Unique", [np.zeros((2, 2), np.int32)], {}, "rank 1"),
    ("Reverse", [np.zeros((2, 2)), np.array([True])], {}, "rank 1"),
    ("Cross", [np.zeros((2, 4)), np.zeros((2, 4))], {}, "3-element"),
    ("LinSpace", [np.float32(0), np.float32(1), np.int32(0)], {}, "num > 0"),
    ("HistogramFixedWidth", [np.float32([1]), np.float32([0, 1]), np.int32(-2)], {}, "nbins"),
    ("Bincount", [np.int32([1]), np.int32(-1), np.float32([])], {}, "non-negative"),
    ("SparseToDense", [np.int64([[0]]), np.int64([-4]), np.float32([1]), np.float32(0)], {},
     "must be >= 0"),
    ("TopK", [np.zeros((2, 3))], {"k": 4}, "at least k columns"),
    ("MatrixDiagPart", [np.zeros(3)], {}, "rank at least 2"),
])
def test_shape_functions_refuse_what_tensorflow_refuses(op, inputs, attrs, words):
    with pytest.raises(TfgError, match=words):
        output_shapes(op_graph(op, inputs, attrs), "op", strict=True)


@pytest.mark.parametrize("op, inputs, fed", [
    ("LinSpace", [np.float32(0), np.float32(1), np.int64(10 ** 12)], (2,)),
    ("SparseToDense", [np.int64([[0, 0]]), np.int64([10 ** 6, 10 ** 6]), np.float32([1]),
                       np.float32(0)], (1,)),
    ("Bincount", [np.int32([1]), np.int32(2 ** 31 - 1), np.float64([])], (1,)),
    ("HistogramFixedWidth", [np.float32([1]), np.float32([0, 1]), np.int32(2 ** 30)], (2,)),
    ("ParallelDynamicStitch", [np.int32([0, 10 ** 9]), np.float32([1, 2])], (0,)),
])
def test_the_memory_guard_refuses_huge_outputs_before_allocating(op, inputs, fed):
    attrs = {"N": 1} if op == "ParallelDynamicStitch" else {}
    if op == "LinSpace":
        attrs["Tidx"] = DType.INT64
    g = op_graph(op, inputs, attrs, fed=fed)
    feeds = {f"in{i}:0": np.asarray(inputs[i]) for i in fed}
    with pytest.raises(TfgError, match="would allocate .* over the memory limit"):
        Session(g, max_memory="1M").run(["op:0"], feeds)


# --- semantics beyond the fixtures -----------------------------------------------------------
def test_unique_v2_rows_with_nan_and_signed_zero():
    x = np.array([[0.0, np.nan], [-0.0, 1], [0.0, 1], [0.0, np.nan]], np.float32)
    y, idx = run_op("UniqueV2", [x, np.int64([0])], n_out=2)
    # NaN never equals NaN; -0.0 equals 0.0 (the row seen first is kept)
    np.testing.assert_array_equal(idx, [0, 1, 1, 2])
    assert np.signbit(y[1, 0]) and y.shape == (3, 2)


def test_sparse_to_dense_unvalidated_repeats_keep_the_last_write():
    out = run_op("SparseToDense", [np.int32([[1], [0], [1]]), np.int32([3]),
                                   np.float32([5, 6, 7]), np.float32(-1)],
                 {"validate_indices": False})
    np.testing.assert_array_equal(out, [6, 7, -1])


def test_cumulative_logsumexp_gradient_by_finite_differences():
    x = np.random.default_rng(3).standard_normal((3, 4)) * 3
    w = np.random.default_rng(4).uniform(0.5, 1.5, (3, 4))

    def build(attrs):
        g = Graph()
        g.add_node("x", "Placeholder", [], {"dtype": DType.DOUBLE})
        g.add_node("axis", "Const", [], {"dtype": DType.INT32, "value": np.array(1, np.int32)})
        g.add_node("y", "CumulativeLogsumexp", ["x:0", "axis:0"], {"T": DType.DOUBLE, **attrs})
        g.add_node("w", "Const", [], {"dtype": DType.DOUBLE, "value": w})
        g.add_node("wy", "Mul", ["y:0", "w:0"], {"T": DType.DOUBLE})
        g.add_node("axes", "Const", [], {"dtype": DType.INT32, "value": np.int32([0, 1])})
        g.add_node("loss", "Sum", ["wy:0", "axes:0"], {"T": DType.DOUBLE})
        return g

    for attrs in ({}, {"reverse": True}):  # (exclusive: -inf first, TensorFlow-checked)
        g = build(attrs)
        sess = Session(g)
        got = Session(grad(g, ["loss"], ["x"])).run(["grad/x:0"], {"x:0": x})[0]
        want = numeric_gradient(lambda v: sess.run(["loss:0"], {"x:0": v})[0], x, eps=1e-6)
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


def test_which_ops_have_gradients():
    for op in ("Unique", "UniqueV2", "UniqueWithCounts", "LowerBound", "UpperBound",
               "Bucketize", "HistogramFixedWidth", "Bincount", "InTopKV2", "LinSpace"):
        assert has_gradient(op) and get_gradient(op).fn is None, op  # no gradient flows
    for op in ("DynamicPartition", "ParallelDynamicStitch", "SparseToDense", "EuclideanNorm",
               "CumulativeLogsumexp", "Reverse", "Cross", "MatrixDiag", "MatrixDiagPart",
               "MatrixSetDiag", "MatrixDiagV2", "MatrixDiagPartV2", "MatrixSetDiagV2",
               "MatrixSetDiagV3", "ConjugateTranspose", "TopK"):
        assert get_gradient(op).fn is not None, op


# --- the CLI ---------------------------------------------------------------------------------
def _cli_graph(tmp_path):
    g = Graph()
    g.add_node("x", "Placeholder", [], {"dtype": DType.FLOAT})
    g.add_node("p", "Placeholder", [], {"dtype": DType.INT32})
    g.add_node("parts", "DynamicPartition", ["x:0", "p:0"],
               {"num_partitions": 2, "T": DType.FLOAT})
    g.add_node("u", "Unique", ["parts:1"], {"T": DType.FLOAT})
    path = tmp_path / "g.pb"
    save(g, str(path))
    return path


def test_cli_runs_a_graph_of_these_ops(tmp_path):
    path = _cli_graph(tmp_path)
    np.savez(tmp_path / "f.npz", x=np.float32([3, 1, 3, 2, 1]), p=np.int32([1, 1, 0, 1, 1]))
    tfg_cli("run", path, "--feeds", tmp_path / "f.npz", "--fetch", "u:0", "--fetch", "u:1",
            "-o", tmp_path / "out.npz")
    out = np.load(tmp_path / "out.npz")
    values = [out[k] for k in sorted(out.files)]
    np.testing.assert_array_equal(values[0], [3, 1, 2])  # partition 1 is [3, 1, 2, 1]
    np.testing.assert_array_equal(values[1], [0, 1, 2, 1])


def test_cli_bad_partition_is_one_line_and_exit_1(tmp_path):
    """A kernel refusing its values is a runtime error (exit 1, tfg/errors.py)."""
    path = _cli_graph(tmp_path)
    np.savez(tmp_path / "bad.npz", x=np.float32([3, 1]), p=np.int32([1, 2]))
    p = tfg_cli("run", path, "--feeds", tmp_path / "bad.npz", "--fetch", "u:0", check=False)
    err = p.stderr.decode().strip()
    assert p.returncode == 1
    assert len(err.splitlines()) == 1 and "partitions[1] = 2 is not in [0, 2)" in err
    assert "Traceback" not in err


def test_cli_bad_feed_is_one_line_and_exit_2(tmp_path):
    """Partitions fed as floats: a bad input, refused before anything runs (exit 2)."""
    path = _cli_graph(tmp_path)
    np.savez(tmp_path / "bad.npz", x=np.float32([3, 1]), p=np.float32([1, 0]))
    p = tfg_cli("run", path, "--feeds", tmp_path / "bad.npz", "--fetch", "u:0", check=False)
    err = p.stderr.decode().strip()
    assert p.returncode == 2, err
    assert len(err.splitlines()) == 1 and "Traceback" not in err
