"""The stateless random ops bit for bit against TensorFlow (tests/fixtures/stateless_random,
made by tools/gen_stateless_random_fixtures.py): every case of cases.json as a graph of Consts
and the op; tf.random.stateless_* on a fed seed and a Keras 3 Dropout step through
`tfg run`; TensorFlow's errors; shape inference, the memory guard, no gradients; Philox's
known answers and its speed."""
import json
import time

import numpy as np
import pytest

from conftest import FIXTURES
from helpers import tfg_cli
from tfg.errors import TfgError
from tfg.executor.session import Session
from tfg.graphdef.graph import Graph
from tfg.graphdef.infer import output_shapes
from tfg.kernels import philox, stateless_random
from tfg.passes.grad import get_gradient
from tfg.schemas.dtypes import DType
from tfg.schemas.ops.registry import get_op

DIR = FIXTURES / "stateless_random"
META = json.loads((DIR / "cases.json").read_text())
ARRAYS = np.load(DIR / "cases.npz")
CASES = {c["name"]: c for c in META["cases"]}
ERRORS = {c["name"]: c for c in META["errors"]}
OPS = ["StatelessRandomUniform", "StatelessRandomNormal", "StatelessTruncatedNormal",
       "StatelessRandomUniformInt", "StatelessRandomUniformV2", "StatelessRandomNormalV2",
       "StatelessTruncatedNormalV2", "StatelessRandomUniformIntV2",
       "StatelessRandomUniformFullIntV2", "StatelessRandomGetKeyCounter",
       "StatelessRandomGetAlg", "StatelessRandomGetKeyCounterAlg", "StatelessMultinomial"]


def _has_bfloat16():
    try:
        return DType.BFLOAT16.np is not None
    except TfgError:
        return False


def _inputs(case):
    """A case's inputs; bfloat16 ones are stored as their bits."""
    out, name = [], case["name"]
    while f"{name}/in{len(out)}" in ARRAYS.files:
        v = ARRAYS[f"{name}/in{len(out)}"]
        out.append(v.view(DType.BFLOAT16.np) if len(out) in case.get("in_bits", ()) else v)
    return out


def op_graph(op, inputs, attrs):
    """Consts of `inputs` feeding one `op` node named "op"; type attrs from the inputs."""
    g = Graph()
    sig = get_op(op)
    names = []
    full = {k: DType.parse(v) for k, v in attrs.items()}
    for i, (arg, v) in enumerate(zip(sig.inputs, map(np.asarray, inputs))):
        g.add_node(f"in{i}", "Const", [], {"dtype": DType.from_numpy(v.dtype), "value": v})
        names.append(f"in{i}:0")
        if arg.type_attr:
            full[arg.type_attr] = DType.from_numpy(v.dtype)
    g.add_node("op", op, names, full)
    return g


def run_case(case, **session):
    g = op_graph(case["op"], _inputs(case), case["attrs"])
    n = len(get_op(case["op"]).outputs)
    return Session(g, **session).run([f"op:{j}" for j in range(n)], {})


def _needs_bfloat16(case):
    return "bfloat16" in case["name"] and not _has_bfloat16()


@pytest.mark.parametrize("name", sorted(CASES))
def test_bits_equal_tensorflows(name):
    case = CASES[name]
    if _needs_bfloat16(case):
        pytest.skip("bfloat16 needs ml_dtypes")
    got = run_case(case)
    for j, value in enumerate(got):
        want = ARRAYS[f"{name}/out{j}"]
        value = np.asarray(value)
        if j in case["bits"]:
            value = value.view(np.uint16)
        assert value.dtype == want.dtype and value.shape == want.shape
        assert value.tobytes() == want.tobytes(), f"output {j} differs"


def test_every_op_and_dtype_is_covered():
    assert sorted({c["op"] for c in META["cases"]}) == sorted(OPS)
    for op in ("StatelessRandomUniform", "StatelessRandomNormalV2", "StatelessTruncatedNormal"):
        dts = {c["attrs"]["dtype"] for c in META["cases"] if c["op"] == op}
        assert dts == {"float16", "bfloat16", "float32", "float64"}


def test_bfloat16_rounding_matches_tensorflow_without_ml_dtypes():
    """The bfloat16 bits tfg makes (from float32 values, rounded to nearest even), checked
    even where bfloat16 itself cannot be a numpy dtype: uniform from the words directly,
    normals from TensorFlow's float32 values of the same seed."""
    gen = philox.key_counter_from_seed(1, 2)
    words = stateless_random._words(gen, 105)
    want = ARRAYS["StatelessRandomUniform-bfloat16-3x5x7/out0"]
    assert np.array_equal(stateless_random._bfloat16_bits_of(words), want.reshape(-1))
    for op in ("StatelessRandomNormal", "StatelessTruncatedNormal"):
        f32 = ARRAYS[f"{op}-float32-3x5x7/out0"]
        want = ARRAYS[f"{op}-bfloat16-3x5x7/out0"]
        assert np.array_equal(stateless_random.bfloat16_bits(f32), want)


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_errors_as_tensorflow(name):
    case = ERRORS[name]
    phrase = {
        "v1-seed-3": "seed must have shape [2], not [3]",
        "v1-int-empty-range": "Need minval < maxval, got 5 >= 5",
        "v2-threefry": "Unsupported algorithm id: 2",
        "v2-key-2": "key must have shape [1], not [2]",
        "v2-counter-0": "counter must be a vector with length at least",
        "v2-int-range": "Need minval < maxval, got 9 >= -9",
        "keycounter-seed-1": "seed must have shape [2], not [1]",
        "multinomial-negative": "num_samples should be non-negative, got -1",
        "multinomial-noclasses": "num_classes should be positive, got 0",
        "multinomial-rank": "logits should be a matrix, got shape [3]",
    }[name]
    assert phrase in case["tf_message"]
    with pytest.raises(TfgError, match=r".*".join(map(_escape, phrase.split()))):
        run_case(case, graph_rewrites=False)


def _escape(word):
    import re  # lazy: only the error tests need it
    return re.escape(word)


def test_dtypes_tensorflow_has_no_cpu_kernel_for_are_refused():
    g = op_graph("StatelessRandomUniformIntV2",
                 [np.int32([3]), np.uint64([5]), np.uint64([3, 4]), np.int32(1),
                  np.uint32(0), np.uint32(9)], {"dtype": "uint32"})
    with pytest.raises(TfgError, match="no CPU kernel in TensorFlow"):
        Session(g).run(["op:0"], {})
    g = op_graph("StatelessMultinomial", [np.int32([[1, 2]]), np.int32(3), np.int64([1, 2])],
                 {"output_dtype": "int64"})
    with pytest.raises(TfgError, match="no CPU kernel in TensorFlow"):
        Session(g).run(["op:0"], {})


def test_empty_output_skips_the_algorithm_and_bounds_checks():
    """TensorFlow returns an empty output before it reads alg's meaning or the bounds."""
    g = op_graph("StatelessRandomUniformV2",
                 [np.int32([0, 3]), np.uint64([5]), np.uint64([3, 4]), np.int32(2)],
                 {"dtype": "float32"})
    assert Session(g).run(["op:0"], {})[0].shape == (0, 3)
    g = op_graph("StatelessRandomUniformInt",
                 [np.int32([0]), np.int64([1, 2]), np.int32(5), np.int32(1)],
                 {"dtype": "int32"})
    assert Session(g).run(["op:0"], {})[0].shape == (0,)


# --- graphs TensorFlow wrote, through the CLI ------------------------------------------------
def test_tf_random_api_graph_via_cli(tmp_path):
    out = tmp_path / "out.npz"
    tfg_cli("run", DIR / "api.pb", "--feeds", DIR / "api_feeds.npz",
            "--fetch", "y1,y2,y3,y4,y5,y6", "-o", out)
    got, want = np.load(out), np.load(DIR / "api_expected.npz")
    for k in ("y1", "y2", "y3", "y4", "y5", "y6"):
        assert got[k].dtype == want[f"{k}:0"].dtype
        assert got[k].tobytes() == want[f"{k}:0"].tobytes(), k


def test_keras_dropout_training_step_via_cli(tmp_path):
    """Keras 3 Dropout(0.5)(x, training=True) on TensorFlow: its seed generator's state
    through StatelessRandomGetKeyCounter and StatelessRandomUniformV2; the same mask."""
    out = tmp_path / "out.npz"
    tfg_cli("run", DIR / "dropout.pb", "--feeds", DIR / "dropout_feeds.npz",
            "--fetch", "Identity", "-o", out)
    got, want = np.load(out)["Identity"], np.load(DIR / "dropout_expected.npz")["Identity:0"]
    assert np.array_equal(got, want)
    assert 0 < np.count_nonzero(got) < got.size


def test_cli_bad_seed_is_one_line_and_exit_2(tmp_path):
    feeds = dict(np.load(DIR / "api_feeds.npz"))
    feeds["seed"] = np.int64([1, 2, 3])
    np.savez(tmp_path / "bad.npz", **feeds)
    p = tfg_cli("run", DIR / "api.pb", "--feeds", tmp_path / "bad.npz", "--fetch", "y1",
                check=False)
    err = p.stderr.decode().strip()
    assert p.returncode == 2
    assert len(err.splitlines()) == 1 and "seed" in err and "Traceback" not in err


# --- shapes, the memory guard, gradients ----------------------------------------------------
def test_shape_inference_from_the_shape_values():
    g = op_graph("StatelessRandomNormalV2",
                 [np.int64([3, 5, 7]), np.uint64([5]), np.uint64([3, 4]), np.int32(1)],
                 {"dtype": "float64"})
    assert output_shapes(g, "op", strict=True) == [(3, 5, 7)]
    g = op_graph("StatelessMultinomial",
                 [np.zeros((4, 3), np.float32), np.int32(9), np.int64([1, 2])],
                 {"output_dtype": "int32"})
    assert output_shapes(g, "op", strict=True) == [(4, 9)]
    g = op_graph("StatelessRandomGetKeyCounterAlg", [np.int32([1, 2])], {})
    assert output_shapes(g, "op", strict=True) == [(1,), (2,), ()]


@pytest.mark.parametrize("op,inputs,attrs", [
    ("StatelessRandomUniform", [np.int64([100000, 100000]), np.int64([1, 2])],
     {"dtype": "float32"}),
    ("StatelessTruncatedNormalV2",
     [np.int32([1 << 20, 1 << 12]), np.uint64([5]), np.uint64([3, 4]), np.int32(1)],
     {"dtype": "float64"}),
    ("StatelessRandomUniformFullIntV2",
     [np.int32([1 << 30]), np.uint64([5]), np.uint64([3, 4]), np.int32(1)],
     {"dtype": "uint64"}),
    ("StatelessMultinomial", [np.zeros((1000, 2), np.float32), np.int32(1 << 30),
                              np.int64([1, 2])], {"output_dtype": "int64"}),
])
def test_memory_guard_refuses_a_huge_shape(op, inputs, attrs):
    g = op_graph(op, inputs, attrs)
    with pytest.raises(TfgError, match="would allocate"):
        Session(g, max_memory="1M", graph_rewrites=False).run(["op:0"], {})


def test_no_gradients_as_tensorflow():
    for op in OPS:
        assert get_gradient(op).fn is None, op


def test_only_get_alg_is_stateful():
    assert [op for op in OPS if get_op(op).stateful] == ["StatelessRandomGetAlg"]


# --- Philox itself ----------------------------------------------------------------------------
def test_philox_known_answers():
    """Random123's known-answer vectors for philox4x32-10."""
    assert philox.blocks((0, 0), (0, 0, 0, 0), 0, 1).tolist() == [
        [0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8]]
    assert philox.blocks((0xA4093822, 0x299F31D0),
                         (0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), 0, 1).tolist() == [
        [0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1]]


def test_philox_skip_carries_across_128_bits():
    key, counter = (1, 2), (0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF, 0xFFFFFFFF)
    run = philox.blocks(key, counter, 0, 3)
    assert np.array_equal(run[1:], philox.blocks(key, (0, 0, 0, 0), 0, 2))
    assert np.array_equal(philox.blocks_at(key, counter, [2, 0]), run[[2, 0]])


def test_philox_million_words_well_under_a_second():
    gen = philox.key_counter_from_seed(3, 4)
    stateless_random._words(gen, 1000)
    start = time.perf_counter()
    stateless_random._words(gen, 1 << 20)
    assert time.perf_counter() - start < 0.9
