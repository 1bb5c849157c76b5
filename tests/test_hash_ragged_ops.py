"""The string-hashing ops (StringToHashBucketFast/Strong, StringToHashBucket, Fingerprint) and the
ragged and bincount ops (RaggedTensorToTensor, RaggedTensorToSparse, RaggedRange, RaggedGather,
RaggedBincount, SparseBincount) against TensorFlow (tests/fixtures/hash_ragged, made by
tools/gen_hash_ragged_fixtures.py): values bit for bit (random bytes of every length 0..300
through FarmHash's, SipHash's and Hash64's length branches), TensorFlow's refusals, Keras
Hashing layers' graphs, RaggedTensorToTensor's gradient, shape inference, the memory guard and
the CLI."""
import json
import re

import numpy as np
import pytest

from helpers import tfg_cli
from op_cases import OpCases, case_ids, check, grad_ids, one_op_graph
from tfg.errors import TfgError
from tfg.executor.session import Session
from tfg.graphdef import io
from tfg.graphdef.graph import Graph
from tfg.graphdef.infer import infer
from tfg.kernels.hash_ops import fingerprint64, siphash24, tf_hash64
from tfg.passes.grad.registry import get_gradient
from tfg.schemas.dtypes import DType

OPS = OpCases("hash_ragged")
DIR, ARRAYS, GRAPH = OPS.dir, OPS.arrays, OPS.graph
RUNS, ERRORS, GRADS = OPS.runs, OPS.errors, OPS.grads
F32, F64, I32, I64, STR = DType.FLOAT, DType.DOUBLE, DType.INT32, DType.INT64, DType.STRING
HASH_OPS = ("StringToHashBucketFast", "StringToHashBucketStrong", "StringToHashBucket",
            "Fingerprint")
RAGGED_OPS = ("RaggedTensorToTensor", "RaggedTensorToSparse", "RaggedRange", "RaggedGather",
              "RaggedBincount", "SparseBincount")


@pytest.fixture(scope="module")
def session():
    return Session(GRAPH)


def test_fixtures_cover_every_op_its_lengths_and_errors():
    assert {c["op"] for c in RUNS} == set(HASH_OPS + RAGGED_OPS)
    assert {c["op"] for c in ERRORS} >= set(RAGGED_OPS) | {"Fingerprint"}
    lengths = {len(s) for s in ARRAYS["Fast_b9223372036854775807/input"].tolist()}
    assert lengths == set(range(301))  # (every FarmHash branch: 0-16, 17-32, 33-64, > 64)
    assert len(ERRORS) >= 35 and len(GRADS) >= 8


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
    """TensorFlow's own gradient nodes (RaggedTensorToTensor of a Range, boolean_mask,
    UnsortedSegmentSum) run in tfg."""
    OPS.check_tf_gradient_graph(session, case, arg)


# --- the hash functions themselves ------------------------------------------------------------
def test_hash_functions_give_the_published_values():
    # TensorFlow's documented examples: to_hash_bucket_fast(["Hello", "TensorFlow", "2.x"], 3)
    # is [0, 2, 2]; to_hash_bucket_strong(["Hello", "TF"], 3, [1, 2]) is [2, 0]
    assert [fingerprint64(s) % 3 for s in (b"Hello", b"TensorFlow", b"2.x")] == [0, 2, 2]
    assert [siphash24(1, 2, s) % 3 for s in (b"Hello", b"TF")] == [2, 0]
    # SipHash-2-4's reference vector: key 00..0f, message 00..0e -> a129ca6149be45e5
    key = bytes(range(16))
    k0, k1 = int.from_bytes(key[:8], "little"), int.from_bytes(key[8:], "little")
    assert siphash24(k0, k1, bytes(range(15))) == 0xa129ca6149be45e5
    assert fingerprint64(b"") == 0x9ae16a3b2f90404f  # FarmHash's k2, its empty-input value
    assert tf_hash64(b"") != tf_hash64(b"\0")


@pytest.mark.parametrize("name", ["bins7", "salt", "mask"])
def test_keras_hashing_layers_graphs(name):
    index = json.loads((DIR / "keras_hashing.json").read_text())[name]
    arrays = np.load(DIR / "keras_hashing.npz")
    g = io.load(str(DIR / f"keras_hashing_{name}.pb"))
    got = Session(g).run([index["fetch"]], {index["feed"]: arrays["x"]})[0]
    np.testing.assert_array_equal(got, arrays[name])
    assert got.dtype == arrays[name].dtype


# --- shapes -----------------------------------------------------------------------------------
_graph = one_op_graph


_RTT = {"T": F32, "Tindex": I64, "Tshape": I64, "num_row_partition_tensors": 1,
        "row_partition_types": ["ROW_SPLITS"]}


@pytest.mark.parametrize("op,inputs,attrs,shapes", [
    ("StringToHashBucketFast", [((3, None), STR)], {"num_buckets": 5}, [(3, None)]),
    ("Fingerprint", [((7, 2, 3), I32), (b"farmhash64", STR)], {"T": I32}, [(7, 8)]),
    ("Fingerprint", [((None,), STR), (b"farmhash64", STR)], {"T": STR}, [(None, 8)]),
    # the shape input's value, or the splits' values where it says -1
    ("RaggedTensorToTensor", [([4, 5], I64), ((None,), F32), (0, F32), ((None,), I64)], _RTT,
     [(4, 5)]),
    ("RaggedTensorToTensor", [(-1, I64), ((6, 2), F32), (0, F32), ([0, 2, 2, 6], I64)], _RTT,
     [(3, 4, 2)]),
    ("RaggedTensorToTensor", [([-1, 7], I64), ((6,), F32), (0, F32), ((None,), I64)], _RTT,
     [(None, 7)]),
    ("RaggedTensorToSparse", [((4,), I64), ((6, 2), F32)],
     {"RAGGED_RANK": 1, "T": F32}, [(12, 3), (12,), (3,)]),
    ("RaggedRange", [([0, 5], I32), ([4, 1], I32), ([1, -2], I32)], {"T": I32},
     [(3,), (6,)]),
    ("RaggedRange", [((None,), F32), ((3,), F32), (1, F32)], {"T": F32}, [(4,), (None,)]),
    ("RaggedGather", [((4,), I64), ((6, 3), F32), ((2, 5), I32)],
     {"Tvalues": F32, "Tindices": I32, "PARAMS_RAGGED_RANK": 1, "OUTPUT_RAGGED_RANK": 2},
     [(None,), (None,), (None, 3)]),
    ("RaggedBincount", [((4,), I64), ((None,), I32), (10, I32), ((0,), F32)],
     {"Tidx": I32, "T": F32}, [(3, 10)]),
    ("SparseBincount", [((None, 2), I64), ((None,), I32), ([3, 9], I64), (4, I32),
                        ((0,), F32)], {"Tidx": I32, "T": F32}, [(3, 4)]),
    ("SparseBincount", [((None, 1), I64), ((None,), I32), ((1,), I64), (4, I32), ((0,), F32)],
     {"Tidx": I32, "T": F32}, [(4,)]),
])
def test_shapes_are_inferred(op, inputs, attrs, shapes):
    info = infer(_graph(op, inputs, attrs))
    assert [info[("op", k)].shape for k in range(len(shapes))] == shapes


@pytest.mark.parametrize("op,inputs,attrs,words", [
    ("Fingerprint", [((), I32), (b"farmhash64", STR)], {"T": I32}, "rank"),
    ("RaggedTensorToTensor", [([2, 5, 3], I64), ((6,), F32), (0, F32), ((4,), I64)], _RTT,
     "rt_input.rank = 2 but shape.rank = 3"),
    ("RaggedTensorToTensor", [(-1, I64), ((6,), F32), (0, F32), ((6,), I64)],
     dict(_RTT, row_partition_types=["VALUE_ROWIDS"]), "VALUE_ROWIDS cannot be first"),
    ("RaggedRange", [([[0]], I32), ([4], I32), ([1], I32)], {"T": I32},
     "starts must be a scalar or vector"),
    ("RaggedBincount", [((4,), I64), ((None,), I32), (-1, I32), ((0,), F32)],
     {"Tidx": I32, "T": F32}, "size \\(-1\\) must be non-negative"),
])
def test_shape_functions_refuse_what_tensorflow_refuses(op, inputs, attrs, words):
    with pytest.raises(TfgError, match=words):
        infer(_graph(op, inputs, attrs), strict=True)


# --- the memory guard -------------------------------------------------------------------------
def _fed(op, inputs, attrs):
    """The op on Placeholders in{i} (shape unknown): the guard sees only fed values."""
    g = Graph()
    for i, dt in enumerate(inputs):
        g.add_node(f"in{i}", "Placeholder", [], {"dtype": dt})
    g.add_node("op", op, [f"in{i}:0" for i in range(len(inputs))], attrs)
    return g


def test_memory_guard_sizes_ragged_to_tensor_from_its_shape_input():
    g = _fed("RaggedTensorToTensor", [I64, F32, F32, I64], _RTT)
    feeds = {"in0:0": np.int64([1000000, 1000000]), "in1:0": np.ones(6, np.float32),
             "in2:0": np.float32(0), "in3:0": np.int64([0, 2, 2, 6])}
    with pytest.raises(TfgError, match="would allocate 3.64 TiB"):
        Session(g, max_memory="1M").run(["op:0"], feeds)
    # a -1 takes the longest row: 10 rows of which one is 300,000 long -> 11 MiB of float32
    feeds.update({"in0:0": np.int64([-1, -1]), "in1:0": np.ones(300000, np.float32),
                  "in3:0": np.int64([0] * 10 + [300000])})
    with pytest.raises(TfgError, match="would allocate"):
        Session(g, max_memory="1M").run(["op:0"], feeds)
    small = dict(feeds, **{"in0:0": np.int64([10, 4])})
    assert Session(g, max_memory="1M").run(["op:0"], small)[0].shape == (10, 4)


def test_memory_guard_sizes_ragged_range_from_its_inputs():
    g = _fed("RaggedRange", [I64, I64, I64], {"T": I64})
    feeds = {"in0:0": np.int64([0, 0]), "in1:0": np.int64([2 ** 40, 5]),
             "in2:0": np.int64([1, 1])}
    with pytest.raises(TfgError, match="would allocate 8.00 TiB"):
        Session(g, max_memory="1M").run(["op:1"], feeds)
    # float inputs beyond what the guard reads: the kernel bounds the size first
    g = _fed("RaggedRange", [F32, F32, F32], {"T": F32, "Tsplits": I32})
    big = {"in0:0": np.zeros(2000, np.float32), "in1:0": np.full(2000, 3e6, np.float32),
           "in2:0": np.full(2000, 1.0, np.float32)}
    with pytest.raises(TfgError, match="Requires \\(\\(limit - start\\) / delta\\) <= 2147"):
        Session(g, max_memory="1M").run(["op:1"], big)


@pytest.mark.parametrize("op,inputs,feeds,attrs", [
    ("RaggedBincount", [I64, I32, I32, F32],
     [np.int64([0, 1]), np.int32([1]), np.int32(2 ** 30), np.float32([])],
     {"Tidx": I32, "T": F32}),
    ("SparseBincount", [I64, I32, I64, I32, F32],
     [np.int64([[0, 0]]), np.int32([1]), np.int64([100000, 5]), np.int32(1000),
      np.float32([])], {"Tidx": I32, "T": F32}),
])
def test_memory_guard_sizes_bincounts_from_size(op, inputs, feeds, attrs):
    g = _fed(op, inputs, attrs)
    with pytest.raises(TfgError, match="would allocate"):
        Session(g, max_memory="1M").run(["op:0"], {f"in{i}:0": v for i, v in enumerate(feeds)})


# --- direct checks of what the fixtures cannot hold ---------------------------------------------
def test_splits_past_the_values_are_refused_where_tensorflow_reads_past_them():
    g = _fed("RaggedTensorToTensor", [I64, F32, F32, I64], _RTT)
    feeds = {"in0:0": np.int64(-1), "in1:0": np.ones(6, np.float32), "in2:0": np.float32(0),
             "in3:0": np.int64([0, 2, 2, 7])}
    with pytest.raises(TfgError, match="describe 7 values, but values has only 6"):
        Session(g).run(["op:0"], feeds)
    g = _fed("RaggedBincount", [I64, I32, I32, F32], {"Tidx": I32, "T": F32})
    feeds = {"in0:0": np.int64([0, 2]), "in1:0": np.int32([1, 1]), "in2:0": np.int32(3),
             "in3:0": np.float32([1])}
    with pytest.raises(TfgError, match="1 weights for 2 values"):
        Session(g).run(["op:0"], feeds)


def test_string_to_hash_bucket_strong_reads_negative_keys_as_uint64():
    g = _graph("StringToHashBucketStrong", [([b"a", b"bc"], STR)],
               {"num_buckets": 2 ** 63 - 1, "key": [-1, 5]})
    got = Session(g).run(["op:0"], {})[0]
    assert got.tolist() == [siphash24(2 ** 64 - 1, 5, s) % (2 ** 63 - 1) for s in (b"a", b"bc")]


# --- gradients --------------------------------------------------------------------------------
@pytest.mark.parametrize("op", HASH_OPS + RAGGED_OPS[1:])
def test_hashing_and_other_ragged_ops_are_not_differentiable(op):
    assert get_gradient(op).fn is None


# --- the CLI ----------------------------------------------------------------------------------
def test_cli_hashes_string_feeds_and_reports_bad_inputs(tmp_path):
    name = "Fast_b1000"
    feeds, out = tmp_path / "f.npz", tmp_path / "out.npz"
    case = OPS.feeds_file(feeds, name)  # a numpy 'S' bytes array
    tfg_cli("run", DIR / "hash_ragged.pb", "--feeds", feeds, "--fetch", f"{name}/out0",
            "-o", out)
    got = np.load(out)
    check(got[got.files[0]], ARRAYS[f"{name}/out0"], case, "cli out0")

    # a kernel refusing its values (splits not starting at 0): a failure while running
    # (exit 1, docs/run.md), one stderr line naming the node and TensorFlow's words
    bad = tmp_path / "bad.npz"
    name = "Rbc_counts"
    OPS.feeds_file(bad, name, {f"{name}/splits": np.int64([1, 2, 2, 6])})
    p = tfg_cli("run", DIR / "hash_ragged.pb", "--feeds", bad, "--fetch", f"{name}/out0",
                check=False)
    lines = p.stderr.decode().strip().splitlines()
    assert p.returncode == 1 and len(lines) == 1
    assert "Rbc_counts/op" in lines[0] and "Splits must start with 0, not with 1" in lines[0]

    # bad input, splits of the wrong shape for their placeholder: exit 2, one stderr line
    OPS.feeds_file(bad, name, {f"{name}/splits": np.int64([[0, 2], [2, 6]])})
    p = tfg_cli("run", DIR / "hash_ragged.pb", "--feeds", bad, "--fetch", f"{name}/out0",
                check=False)
    assert p.returncode == 2 and len(p.stderr.decode().strip().splitlines()) == 1
