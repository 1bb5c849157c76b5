"""The feature-crossing ops (SparseCross, SparseCrossHashed, SparseCrossV2) against TensorFlow
(tests/fixtures/cross, made by tools/gen_cross_fixtures.py): values bit for bit (strings and
int64s, hashed with every hash_key/num_buckets/salt/strong_hash variant), TensorFlow's
refusals, a Keras HashedCrossing layer's graph, shape inference, the size cap and memory
guard, and the CLI."""
import json
import re

import numpy as np
import pytest

from helpers import tfg_cli
from op_cases import OpCases, case_ids, check
from tfg.errors import TfgError
from tfg.executor.session import Session
from tfg.graphdef import io
from tfg.graphdef.graph import Graph
from tfg.graphdef.infer import infer
from tfg.kernels import get_kernel
from tfg.kernels.context import KernelContext
from tfg.kernels.cross_ops import MAX_CROSSES
from tfg.passes.grad.registry import get_gradient
from tfg.schemas.dtypes import DType

OPS = OpCases("cross")
DIR, ARRAYS, GRAPH = OPS.dir, OPS.arrays, OPS.graph
RUNS, ERRORS = OPS.runs, OPS.errors
I64, STR, BOOL = DType.INT64, DType.STRING, DType.BOOL
CROSS_OPS = ("SparseCross", "SparseCrossHashed", "SparseCrossV2")


@pytest.fixture(scope="module")
def session():
    return Session(GRAPH)


def test_fixtures_cover_every_op_and_variant():
    assert {c["op"] for c in RUNS} == set(CROSS_OPS)
    assert {c["op"] for c in ERRORS} == set(CROSS_OPS)
    names = {c["name"] for c in RUNS}
    assert {"Sch_b0_kdef", "Sch_b1000_km1", "Sh_strong_s1_2_b1000", "V2_custom_sep",
            "Sc_empty_batch", "Sc_unsorted_rows"} <= names
    assert len(RUNS) >= 70 and len(ERRORS) >= 15


@pytest.mark.parametrize("case", RUNS, ids=case_ids(RUNS))
def test_values_match_tensorflow(session, case):
    name = case["name"]
    outs = [f"{name}/out{k}:0" for k in range(3)]
    for k, got in enumerate(session.run(outs, OPS.feeds(case))):
        check(got, ARRAYS[f"{name}/out{k}"], case, f"{name} out{k}")


@pytest.mark.parametrize("case", ERRORS, ids=case_ids(ERRORS))
def test_errors_match_tensorflow(session, case):
    # TensorFlow's kernel refused these feeds with case["error"]; tfg's must too
    with pytest.raises(TfgError, match=re.escape(case["error"])):
        session.run([f"{case['name']}/out0:0"], OPS.feeds(case))


def test_keras_hashed_crossing_layer_graph():
    index = json.loads((DIR / "keras_crossing.json").read_text())
    arrays = np.load(DIR / "keras_crossing.npz")
    g = io.load(str(DIR / "keras_crossing.pb"))
    assert "SparseCross" in index["ops"]
    feeds = {index["feeds"][k]: arrays[k] for k in ("a", "b")}
    got = Session(g).run([index["fetch"]], feeds)[0]
    np.testing.assert_array_equal(got, arrays["y"])
    assert got.dtype == arrays["y"].dtype


def test_crosses_are_not_differentiable():
    for op in CROSS_OPS:
        assert get_gradient(op).fn is None


# --- graphs built here --------------------------------------------------------------------
def _cross_graph(op, sparse, dense, attrs=None, extra=()):
    """op on Placeholders: per sparse input (indices, values, shape) dtypes, per dense input
    its dtype, then `extra` inputs' dtypes; in{i} in input order."""
    g = Graph()
    n = len(sparse)
    dtypes = ([I64] * n + [v for _, v, _ in sparse] + [I64] * n + list(dense) + list(extra))
    for i, dt in enumerate(dtypes):
        g.add_node(f"in{i}", "Placeholder", [], {"dtype": dt})
    base = {"N": n, "sparse_types": [v for _, v, _ in sparse], "dense_types": list(dense)}
    if op == "SparseCross":
        base.update({"hashed_output": True, "num_buckets": 0, "hash_key": 1,
                     "out_type": I64, "internal_type": STR})
    base.update(attrs or {})
    g.add_node("op", op, [f"in{i}:0" for i in range(len(dtypes))], base)
    return g


def _hostile(columns, per_row):
    """`columns` sparse string inputs of `per_row` features in row 0 (batch 1)."""
    sparse = [(I64, STR, I64)] * columns
    idx = np.stack([np.zeros(per_row, np.int64), np.arange(per_row, dtype=np.int64)], 1)
    vals = np.array([b"v%d" % i for i in range(per_row)], object)
    feeds = {}
    for i in range(columns):
        feeds[f"in{i}:0"] = idx
        feeds[f"in{columns + i}:0"] = vals
        feeds[f"in{2 * columns + i}:0"] = np.int64([1, per_row])
    return _cross_graph("SparseCross", sparse, []), feeds


def test_memory_guard_refuses_a_hostile_cross_before_the_kernel():
    # ten inputs of 1000 features in one row: 1e30 crosses
    g, feeds = _hostile(10, 1000)
    with pytest.raises(TfgError, match=r"would allocate .*shape \[10{30}, 2\] of int64"):
        Session(g, max_memory="1M").run(["op:0"], feeds)


def test_kernel_caps_the_crosses_past_what_the_guard_allows():
    # 2**27 crosses (2 GiB of indices) within a 1 TiB guard: the kernel's own limit refuses
    g, feeds = _hostile(3, 512)
    assert 512 ** 3 > MAX_CROSSES
    with pytest.raises(TfgError, match=f"would make 134217728 crosses .*limit of {MAX_CROSSES}"):
        Session(g, max_memory="1T").run(["op:0"], feeds)
    # the kernel alone (as constant folding calls it, with no guard): refused, not built
    g, feeds = _hostile(10, 1000)
    node = g["op"]
    fn = get_kernel("SparseCross", "CPU").fn
    with pytest.raises(TfgError, match="would make 10{30} crosses"):
        fn(KernelContext.for_node(node), *[feeds[f"in{i}:0"] for i in range(30)])


def test_hostile_batch_size_is_never_looped_over():
    g = _cross_graph("SparseCrossV2", [(I64, STR, I64)], [STR], extra=[STR])
    feeds = {"in0:0": np.int64([[0, 0], [10 ** 15, 0]]), "in1:0": np.array([b"a", b"b"], object),
             "in2:0": np.int64([10 ** 18, 1]), "in3:0": np.array([[b"x"]], object),
             "in4:0": np.array(b"-", object)}
    with pytest.raises(TfgError, match="Expected batch size 1000000000000000000 got 1 at "
                                       "dense tensor 0"):
        Session(g).run(["op:0"], feeds)
    g = _cross_graph("SparseCrossV2", [(I64, STR, I64)], [], extra=[STR])
    feeds = {"in0:0": np.int64([[0, 0], [10 ** 15, 0]]), "in1:0": np.array([b"a", b"b"], object),
             "in2:0": np.int64([10 ** 18, 1]), "in3:0": np.array(b"-", object)}
    idx, vals, shape = Session(g).run(["op:0", "op:1", "op:2"], feeds)
    assert idx.tolist() == [[0, 0], [10 ** 15, 0]] and vals.tolist() == [b"a", b"b"]
    assert shape.tolist() == [10 ** 18, 1]


def test_strong_hash_of_an_int64_dense_input_is_refused():
    # TensorFlow 2.21 segfaults on it: a clear error here
    g = _cross_graph("SparseCrossHashed", [], [I64], extra=[I64, BOOL, I64])
    feeds = {"in0:0": np.int64([[1], [2]]), "in1:0": np.int64(10), "in2:0": np.bool_(True),
             "in3:0": np.int64([1, 2])}
    with pytest.raises(TfgError, match="strong_hash=True on an int64 dense input"):
        Session(g).run(["op:1"], feeds)
    feeds["in1:0"] = np.int64([10, 11])
    with pytest.raises(TfgError, match="num_buckets must be a scalar, got shape \\[2\\]"):
        Session(g).run(["op:1"], feeds)


# --- shapes -------------------------------------------------------------------------------
def test_shapes_are_inferred_from_known_values():
    g = Graph()
    consts = [np.int64([[0, 0], [0, 1], [2, 0]]), np.array([b"a", b"b", b"c"], object),
              np.int64([3, 2])]
    for i, (v, dt) in enumerate(zip(consts, (I64, STR, I64))):
        g.add_node(f"c{i}", "Const", [], {"dtype": dt, "value": v})
    g.add_node("d", "Placeholder", [], {"dtype": STR, "shape": [3, 4]})
    g.add_node("op", "SparseCrossV2", ["c0:0", "c1:0", "c2:0", "d:0", "sep:0"],
               {"N": 1, "sparse_types": [STR], "dense_types": [STR]})
    g.add_node("sep", "Const", [], {"dtype": STR, "value": np.array(b"-", object)})
    info = infer(g)
    # rows 0 and 2 have 2 and 1 features, times the dense input's 4: 12 crosses
    assert [info[("op", k)].shape for k in range(3)] == [(12, 2), (12,), (2,)]
    g2 = _cross_graph("SparseCross", [(I64, STR, I64)], [STR])
    assert [infer(g2)[("op", k)].shape for k in range(3)] == [(None, 2), (None,), (2,)]


# --- the CLI ------------------------------------------------------------------------------
def test_cli_crosses_string_feeds_and_reports_bad_inputs(tmp_path):
    name = "Sch_b1000_kdef"
    feeds, out = tmp_path / "f.npz", tmp_path / "out.npz"
    case = OPS.feeds_file(feeds, name)  # numpy 'S' bytes arrays
    tfg_cli("run", DIR / "cross.pb", "--feeds", feeds, "--fetch", f"{name}/out1", "-o", out)
    got = np.load(out)
    check(got[got.files[0]], ARRAYS[f"{name}/out1"], case, "cli out1")

    # a kernel refusing its values (a batch mismatch): exit 1, one stderr line
    bad = tmp_path / "bad.npz"
    OPS.feeds_file(bad, name, {f"{name}/s1_shape": np.int64([4, 3])})
    p = tfg_cli("run", DIR / "cross.pb", "--feeds", bad, "--fetch", f"{name}/out1",
                check=False)
    lines = p.stderr.decode().strip().splitlines()
    assert p.returncode == 1 and len(lines) == 1
    assert "Expected batch size 3 got 4 at position 1" in lines[0]

    # bad input, a shape of the wrong rank for its placeholder: exit 2, one stderr line
    OPS.feeds_file(bad, name, {f"{name}/s1_shape": np.int64([[3, 3]])})
    p = tfg_cli("run", DIR / "cross.pb", "--feeds", bad, "--fetch", f"{name}/out1",
                check=False)
    assert p.returncode == 2 and len(p.stderr.decode().strip().splitlines()) == 1
