"""The reference-variable scatters (ScatterUpdate / Add / Sub / Mul / Div / Min / Max,
ScatterNdUpdate / Add / Sub / Max / Min), StridedSliceAssign, CountUpTo, and the value ops
ScatterNdNonAliasingAdd, InplaceUpdate / Add / Sub and AccumulateNV2 against TensorFlow
(tests/fixtures/scatter, made by tools/gen_scatter_fixtures.py): the op's output and the
variable after it for float32/64 and int32/64 with repeated indices, TensorFlow's refusals,
ScatterNdNonAliasingAdd's and AccumulateNV2's gradients, shape inference, updates across steps,
the memory guard and the CLI."""
import re

import numpy as np
import pytest

from helpers import tfg_cli
from op_cases import OpCases, case_ids, check, grad_ids, one_op_graph
from tfg.errors import TfgError
from tfg.executor.session import Session
from tfg.graphdef.attrs import Shape
from tfg.graphdef.graph import Graph
from tfg.graphdef.infer import infer
from tfg.passes.grad.registry import get_gradient
from tfg.schemas.dtypes import DType

OPS = OpCases("scatter")
DIR, CASES, ARRAYS, GRAPH = OPS.dir, OPS.cases, OPS.arrays, OPS.graph
RUNS, ERRORS, GRADS = OPS.runs, OPS.errors, OPS.grads
F32, F64, I32, I64 = DType.FLOAT, DType.DOUBLE, DType.INT32, DType.INT64
REF_OPS = ("ScatterUpdate", "ScatterAdd", "ScatterSub", "ScatterMul", "ScatterDiv", "ScatterMin",
           "ScatterMax", "ScatterNdUpdate", "ScatterNdAdd", "ScatterNdSub", "ScatterNdMax",
           "ScatterNdMin", "StridedSliceAssign", "CountUpTo")
VALUE_OPS = ("ScatterNdNonAliasingAdd", "InplaceUpdate", "InplaceAdd", "InplaceSub",
             "AccumulateNV2")


@pytest.fixture(scope="module")
def session():
    return Session(GRAPH)


def _run_case(session, case, fetches):
    """The case's fetches, its variable (if any) initialized first: each case starts afresh."""
    if case["ref"]:
        session.run(targets=[f"{case['name']}/init"])
    return session.run([f"{case['name']}/{f}:0" for f in fetches], OPS.feeds(case))


def _fetches(case):
    return ["out0", "after"] if case["ref"] and case["op"] != "CountUpTo" else ["out0"]


def test_fixtures_cover_every_op_dtype_and_error():
    assert {c["op"] for c in RUNS} == set(REF_OPS + VALUE_OPS)
    for op in REF_OPS[:12] + VALUE_OPS[:4]:
        dtypes = {ARRAYS[f"{c['name']}/out0"].dtype.name for c in RUNS if c["op"] == op}
        assert dtypes >= {"float32", "float64", "int32", "int64"}, op
    assert {c["op"] for c in ERRORS} >= {"ScatterAdd", "ScatterUpdate", "ScatterNdUpdate",
                                         "ScatterNdAdd", "StridedSliceAssign", "CountUpTo",
                                         "InplaceAdd", "ScatterNdNonAliasingAdd"}
    assert len(ERRORS) >= 17 and len(GRADS) >= 9


@pytest.mark.parametrize("case", RUNS, ids=case_ids(RUNS))
def test_values_match_tensorflow(session, case):
    fetches = _fetches(case)
    for f, got in zip(fetches, _run_case(session, case, fetches)):
        check(got, ARRAYS[f"{case['name']}/{f}"], case, f"{case['name']} {f}")


@pytest.mark.parametrize("case", ERRORS, ids=case_ids(ERRORS))
def test_errors_match_tensorflow(session, case):
    # TensorFlow's kernel refused these feeds with case["error"]; tfg's must too
    with pytest.raises(TfgError, match=re.escape(case["error"])):
        _run_case(session, case, ["out0"])


@pytest.mark.parametrize("case,arg", GRADS, ids=grad_ids(GRADS))
def test_tfg_gradient_matches_tensorflow(case, arg):
    OPS.check_tfg_gradient(case, arg)


@pytest.mark.parametrize("case,arg", GRADS, ids=grad_ids(GRADS))
def test_tensorflow_gradient_graph_runs(session, case, arg):
    OPS.check_tf_gradient_graph(session, case, arg)


# --- state across steps -----------------------------------------------------------------------
def _case(name):
    return next(c for c in CASES if c["name"] == name)


@pytest.mark.parametrize("name", ["ScatterAdd_float64", "ScatterNdSub_int32"])
def test_updates_accumulate_across_steps(session, name):
    """A second step updates the variable the first one left (the same ref buffer)."""
    case = _case(name)
    session.run(targets=[f"{name}/init"])
    w0 = session.run([f"{name}/w:0"])[0].copy()
    for _ in range(2):
        after = session.run([f"{name}/after:0"], OPS.feeds(case))[0]
    delta = ARRAYS[f"{name}/after"] - w0
    check(after, w0 + 2 * delta, case, name)


def test_an_earlier_read_of_the_ref_sees_the_update():
    """TensorFlow's ref kernels write the variable's buffer: an Identity of the ref taken
    before the scatter, fetched after it, holds the update (tfg/kernels/ref_updates.py)."""
    g = _ref_graph("ScatterAdd", np.zeros((3, 2), np.float32),
                   [np.int32([2, 2]), np.ones((2, 2), np.float32)])
    g.add_node("before", "Identity", ["w:0"], {"T": F32})
    g.add_node("late", "Identity", ["before:0", "^op"], {"T": F32})
    s = Session(g)
    s.run(targets=["init"])
    np.testing.assert_array_equal(s.run(["late:0"])[0], [[0, 0], [0, 0], [2, 2]])


def test_count_up_to_counts_then_stops(session):
    case = _case("CountUpTo_int32")
    session.run(targets=["CountUpTo_int32/init"])
    got = [int(session.run(["CountUpTo_int32/out0:0"])[0]) for _ in range(2)]
    assert got == [3, 4]
    with pytest.raises(TfgError, match="Reached limit of 5"):
        session.run(["CountUpTo_int32/out0:0"])
    assert case["attrs"]["limit"] == 5


# --- direct checks of what the fixtures cannot hold ---------------------------------------------
def _ref_graph(op, value, inputs, attrs=None):
    """`w`, a VariableV2 initialized to `value` by `init`, updated by node `op` of type `op`
    with Const inputs (name `in<i>`)."""
    value = np.asarray(value)
    dt = DType.from_numpy(value.dtype)
    g = Graph()
    g.add_node("w", "VariableV2", [], {"dtype": dt, "shape": Shape(value.shape)})
    g.add_node("w0", "Const", [], {"dtype": dt, "value": value})
    g.add_node("init", "Assign", ["w:0", "w0:0"], {"T": dt})
    names = []
    for i, v in enumerate(inputs):
        v = np.asarray(v)
        g.add_node(f"in{i}", "Const", [], {"dtype": DType.from_numpy(v.dtype), "value": v})
        names.append(f"in{i}:0")
    base = {"T": dt} if op != "CountUpTo" else {"T": dt, "limit": 9}
    if len(inputs) >= 2 and op != "StridedSliceAssign":
        base["Tindices"] = DType.from_numpy(np.asarray(inputs[0]).dtype)
    g.add_node("op", op, ["w:0"] + names, dict(base, **(attrs or {})))
    return g


def _run_ref(g, fetch="op:0"):
    s = Session(g)
    s.run(targets=["init"])
    return s.run([fetch])[0]


def test_integer_scatter_div_by_zero_is_refused():
    # (TensorFlow's process dies of SIGFPE)
    g = _ref_graph("ScatterDiv", np.int32([4, 5]), [np.int32([1]), np.int32([0])])
    with pytest.raises(TfgError, match="Integer division by zero"):
        _run_ref(g)


def test_many_repeated_indices_apply_in_order():
    idx = np.int64([3, 0, 3, 3, 1, 3, 0] * 50)
    upd = np.arange(1, idx.size + 1, dtype=np.int64) % 5 + 1
    w = np.int64([10 ** 12, -7, 0, 10 ** 15])
    expected = w.copy()
    for i, u in zip(idx, upd):
        expected[i] = int(expected[i] / u)  # (C++'s division: toward zero)
    np.testing.assert_array_equal(_run_ref(_ref_graph("ScatterDiv", w, [idx, upd])), expected)
    last = _run_ref(_ref_graph("ScatterUpdate", w, [idx, upd]))
    assert last[3] == upd[np.flatnonzero(idx == 3)[-1]] and last[2] == 0


def test_scatter_before_init_names_the_variable():
    g = _ref_graph("ScatterAdd", np.zeros(3, np.float32), [np.int32([0]), np.float32([1])])
    with pytest.raises(TfgError, match="uninitialized value w"):
        Session(g).run(["op:0"])


def test_count_up_to_refuses_a_non_scalar():
    with pytest.raises(TfgError, match=re.escape("input is not a scalar: [2]")):
        _run_ref(_ref_graph("CountUpTo", np.int32([1, 2]), []))


@pytest.mark.parametrize("inputs,words", [
    ([np.float32([[1, 2]]), np.float32([1, 2, 3])], "must all have the same shape"),
    ([np.float32([1, 2]), np.float32([3, 4])], "do not match its shape attr \\[3\\]"),
])
def test_accumulate_n_refuses_mismatched_inputs(inputs, words):
    g = Graph()
    for i, v in enumerate(inputs):
        g.add_node(f"x{i}", "Placeholder", [], {"dtype": F32})
    g.add_node("op", "AccumulateNV2", ["x0:0", "x1:0"], {"T": F32, "N": 2, "shape": Shape((3,))})
    with pytest.raises(TfgError, match=words):
        Session(g).run(["op:0"], {f"x{i}:0": v for i, v in enumerate(inputs)})


def test_inplace_ops_refuse_rows_of_an_empty_x():
    g = one_op_graph("InplaceAdd", [(np.zeros((0, 2), np.float32), F32), ([0], I32),
                                    (np.ones((1, 2), np.float32), F32)], {"T": F32})
    with pytest.raises(TfgError, match="which has none"):
        Session(g).run(["op:0"])


# --- shapes -----------------------------------------------------------------------------------
@pytest.mark.parametrize("op,inputs,attrs,shape", [
    ("ScatterNdNonAliasingAdd", [((4, 3, 2), F32), ((5, 2), I32), ((5, 2), F32)],
     {"T": F32, "Tindices": I32}, (4, 3, 2)),
    ("ScatterNdNonAliasingAdd", [((4, None), F32), ((5, 1), I32), ((5, 7), F32)],
     {"T": F32, "Tindices": I32}, (4, None)),
    ("InplaceUpdate", [((6, 2), F32), ((3,), I32), ((3, 2), F32)], {"T": F32}, (6, 2)),
    ("AccumulateNV2", [((None, 2), F32), ((3, None), F32)],
     {"T": F32, "N": 2, "shape": Shape((None, None))}, (3, 2)),
    ("AccumulateNV2", [((None, 5), F32)], {"T": F32, "N": 1, "shape": Shape((4, None))},
     (4, 5)),
])
def test_value_op_shapes_are_inferred(op, inputs, attrs, shape):
    assert infer(one_op_graph(op, inputs, attrs))[("op", 0)].shape == shape


@pytest.mark.parametrize("op,inputs,attrs,shape", [
    ("ScatterAdd", [np.int32([[0, 1]]), np.zeros((1, 2, 3), np.float32)], {}, (5, 3)),
    ("ScatterNdMax", [np.int32([[0, 1]]), np.zeros(1, np.float32)], {}, (5, 3)),
    ("StridedSliceAssign", [np.int32([1]), np.int32([3]), np.int32([1]), np.float32(1)],
     {"Index": I32}, (5, 3)),
])
def test_ref_op_shapes_are_the_variables(op, inputs, attrs, shape):
    g = _ref_graph(op, np.zeros((5, 3), np.float32), inputs, attrs)
    assert infer(g)[("op", 0)].shape == shape


@pytest.mark.parametrize("op,inputs,words", [
    ("ScatterAdd", [np.int32([0, 1]), np.zeros((2, 4), np.float32)], "must be indices"),
    ("ScatterNdUpdate", [np.int32([[0, 1, 2]]), np.zeros(1, np.float32)], "must be <= the rank"),
    ("ScatterNdAdd", [np.int32([[0]]), np.zeros((1, 2), np.float32)], "ref.shape\\[1:\\]"),
])
def test_shape_functions_refuse_what_tensorflow_refuses(op, inputs, words):
    with pytest.raises(TfgError, match=words):
        infer(_ref_graph(op, np.zeros((5, 3), np.float32), inputs), strict=True)


def test_count_up_to_shape_is_a_scalar():
    assert infer(_ref_graph("CountUpTo", np.int64(0), []))[("op", 0)].shape == ()
    with pytest.raises(TfgError, match="rank 0"):
        infer(_ref_graph("CountUpTo", np.int64([0]), []), strict=True)


# --- the memory guard -------------------------------------------------------------------------
def test_memory_guard_sizes_accumulate_n_from_its_inputs():
    # (no op here sizes its output from a shape input: each has its input's or variable's
    # shape; AccumulateNV2's shape function, which merges the `shape` attr, is the one checked)
    g = Graph()
    g.add_node("x", "Placeholder", [], {"dtype": F32})
    g.add_node("op", "AccumulateNV2", ["x:0", "x:0"], {"T": F32, "N": 2, "shape": Shape((None,))})
    with pytest.raises(TfgError, match="would allocate 3.81 MiB"):
        Session(g, max_memory="1M").run(["op:0"], {"x:0": np.zeros(10 ** 6, np.float32)})
    assert Session(g, max_memory="1M").run(["op:0"], {"x:0": np.ones(4, np.float32)})[0].sum() == 8


# --- gradients --------------------------------------------------------------------------------
@pytest.mark.parametrize("op", ["ScatterAdd", "ScatterSub", "ScatterMul", "ScatterDiv",
                                "ScatterNdUpdate", "ScatterNdAdd", "ScatterNdSub"])
def test_ref_scatters_are_not_differentiable(op):
    assert get_gradient(op).fn is None  # (TensorFlow's state_grad.py)


# --- the CLI ----------------------------------------------------------------------------------
def test_cli_runs_a_scatter_after_init_and_reports_bad_feeds(tmp_path):
    name = "ScatterAdd_float32"
    case = _case(name)
    feeds, out = tmp_path / "f.npz", tmp_path / "out.npz"
    np.savez(feeds, **{f"{name}/{k}": ARRAYS[f"{name}/{k}"] for k in case["args"]})
    tfg_cli("run", DIR / "scatter.pb", "--feeds", feeds, "--init", "init", "--fetch",
            f"{name}/after", "-o", out)
    got = np.load(out)
    check(got[got.files[0]], ARRAYS[f"{name}/after"], case, "cli after")

    # updates of the wrong shape for their placeholder: exit 2, one stderr line
    bad = tmp_path / "bad.npz"
    np.savez(bad, **{f"{name}/indices": ARRAYS[f"{name}/indices"],
                     f"{name}/updates": np.zeros((2, 3), np.float32)})
    p = tfg_cli("run", DIR / "scatter.pb", "--feeds", bad, "--init", "init", "--fetch",
                f"{name}/after", check=False)
    assert p.returncode == 2 and len(p.stderr.decode().strip().splitlines()) == 1
