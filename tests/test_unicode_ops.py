"""The Unicode ops against TensorFlow (tests/fixtures/unicode, made by
tools/gen_unicode_fixtures.py): values (ASCII, multi-byte and emoji text, empty strings and
tensors, control characters, UTF-16-BE and UTF-32-BE, every class of malformed input under
each errors policy, random malformed bytes), TensorFlow's errors, the encodings tfg refuses,
the bounds on output sizes, shape inference, gradients and the CLI."""
import re

import numpy as np
import pytest

from helpers import tfg_cli
from op_cases import OpCases, case_ids, one_op_graph
from tfg.errors import TfgError, TfgRuntimeError
from tfg.executor.session import Session
from tfg.graphdef.infer import infer
from tfg.kernels import string_ops
from tfg.passes.grad.registry import get_gradient
from tfg.schemas.dtypes import DType

OPS = OpCases("unicode")
DIR, CASES, ARRAYS, GRAPH = OPS.dir, OPS.cases, OPS.arrays, OPS.graph
RUNS, ERRORS = OPS.runs, OPS.errors
S, I32, I64 = DType.STRING, DType.INT32, DType.INT64
OP_NAMES = {"UnicodeDecode", "UnicodeDecodeWithOffsets", "UnicodeEncode", "UnicodeTranscode"}


@pytest.fixture(scope="module")
def session():
    return Session(GRAPH)


def same(got, expected, what):
    """got is TensorFlow's value exactly: strings byte for byte (the fixture holds their hex),
    integers with TensorFlow's dtype."""
    got = np.asarray(got)
    assert got.shape == expected.shape, what
    if expected.dtype.kind == "S":
        assert got.dtype == object, what
        want = [bytes.fromhex(h.decode()) for h in expected.reshape(-1)]
        assert got.reshape(-1).tolist() == want, what
        return
    assert got.dtype == expected.dtype, what
    np.testing.assert_array_equal(got, expected, err_msg=what)


def test_fixtures_cover_every_op_and_its_errors():
    assert {c["op"] for c in RUNS} == OP_NAMES
    assert {c["op"] for c in ERRORS} == OP_NAMES
    assert len(RUNS) >= 100 and len(ERRORS) >= 25


@pytest.mark.parametrize("case", RUNS, ids=case_ids(RUNS))
def test_values_match_tensorflow(session, case):
    name = case["name"]
    outs = session.run([f"{name}/out{k}:0" for k in range(case["outputs"])], OPS.feeds(case))
    for k, got in enumerate(outs):
        same(got, ARRAYS[f"{name}/out{k}"], f"{name} out{k}")


@pytest.mark.parametrize("case", ERRORS, ids=case_ids(ERRORS))
def test_errors_match_tensorflow(session, case):
    # TensorFlow's kernel refused these feeds with case["error"]; tfg's must too
    with pytest.raises(TfgRuntimeError, match=re.escape(case["error"].strip())):
        session.run([f"{case['name']}/out0:0"], OPS.feeds(case))


# --- encodings --------------------------------------------------------------------------------
def _strings(values):
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


def _decode(x, **attrs):
    g = one_op_graph("UnicodeDecodeWithOffsets", [(_strings(x), S)],
                     {"Tsplits": I64, **attrs})
    return [v.tolist() for v in Session(g).run(["op:0", "op:1", "op:2"], {})]


@pytest.mark.parametrize("name,codec,offsets", [
    # ICU compares converter names ignoring case, punctuation and a number's leading zero
    ("utf8", "utf-8", [0, 2]), ("UTF_08", "utf-8", [0, 2]), (" u-t-f 8", "utf-8", [0, 2]),
    ("utf16be", "utf-16-be", [0, 2]), ("UTF-16BE", "utf-16-be", [0, 2]),
    ("Utf-32-Be", "utf-32-be", [0, 4]),
])
def test_icu_spellings_of_the_three_encodings(name, codec, offsets):
    text = "\u00e9\u20ac".encode(codec)
    assert _decode([text], input_encoding=name) == [[0, 2], [0xE9, 0x20AC], offsets]


@pytest.mark.parametrize("name", ["latin1", "ISO-8859-1", "UTF-16", "UTF-16LE", "Shift_JIS"])
def test_other_encodings_tensorflows_icu_knows_are_refused_clearly(name):
    # TensorFlow's ICU reads these; tfg refuses them, saying what it reads
    with pytest.raises(TfgRuntimeError, match="tfg reads only UTF-8, UTF-16-BE and UTF-32-BE"):
        _decode([b"abc"], input_encoding=name)


def test_decode_with_offsets_int32_splits_gives_values():
    # (TensorFlow 2.21 aborts its process here: its kernel reads the int64 offsets as int32)
    g = one_op_graph("UnicodeDecodeWithOffsets", [(_strings([b"a\xc3\xa9", b""]), S)],
                     {"Tsplits": I32, "input_encoding": b"UTF-8"})
    splits, chars, offsets = Session(g).run(["op:0", "op:1", "op:2"], {})
    assert splits.dtype == np.int32 and offsets.dtype == np.int64
    assert (splits.tolist(), chars.tolist(), offsets.tolist()) == ([0, 2, 2], [97, 233],
                                                                  [0, 1])


# --- outputs the shape functions cannot size --------------------------------------------------
@pytest.mark.parametrize("op,inputs,attrs", [
    # a million code points of 4 bytes each: 4 MB of UTF-8
    ("UnicodeEncode", [(np.full(10 ** 6, 0x1F600, np.int32), I32), ([0, 10 ** 6], I64)],
     {"output_encoding": b"UTF-8", "Tsplits": I64}),
    # a megabyte of ASCII as UTF-32: 4 MB
    ("UnicodeTranscode", [(_strings([b"a" * 10 ** 6]), S)],
     {"input_encoding": b"UTF-8", "output_encoding": b"UTF-32-BE"}),
])
def test_text_outputs_are_counted_before_they_are_made(monkeypatch, op, inputs, attrs):
    monkeypatch.setattr(string_ops, "MAX_TEXT_BYTES", 10 ** 6)
    with pytest.raises(TfgRuntimeError, match=f"{op} would make about 4e\\+06 bytes"):
        Session(one_op_graph(op, inputs, attrs)).run("op:0", {})


def test_the_memory_guard_sizes_the_row_splits():
    # 200k strings: 1.6 MB of int64 row_splits, over a 1 MB limit, refused before the kernel
    g = one_op_graph("UnicodeDecode", [((200_000,), S)], {"input_encoding": b"UTF-8"})
    feeds = {"in0:0": np.full(200_000, b"ab", dtype=object)}
    with pytest.raises(TfgError, match="would allocate"):
        Session(g, max_memory="1M").run("op:0", feeds)
    g = one_op_graph("UnicodeDecode", [((20,), S)], {"input_encoding": b"UTF-8"})
    assert Session(g, max_memory="1M").run("op:1", {"in0:0": feeds["in0:0"][:20]}).size == 40


# --- shapes and gradients ---------------------------------------------------------------------
DECODE = {"input_encoding": b"UTF-8", "Tsplits": I64}


@pytest.mark.parametrize("op,inputs,attrs,shapes", [
    ("UnicodeDecode", [((3, 4), S)], DECODE, [(13,), (None,)]),
    ("UnicodeDecode", [((None, 4), S)], DECODE, [(None,), (None,)]),
    ("UnicodeDecode", [((), S)], DECODE, [(2,), (None,)]),
    ("UnicodeDecodeWithOffsets", [((5,), S)], DECODE, [(6,), (None,), (None,)]),
    ("UnicodeEncode", [((None,), I32), ((7,), I64)], {"output_encoding": b"UTF-8"}, [(6,)]),
    ("UnicodeEncode", [((9,), I32), ((None,), I64)], {"output_encoding": b"UTF-8"}, [(None,)]),
    ("UnicodeTranscode", [((2, 3), S)],
     {"input_encoding": b"UTF-8", "output_encoding": b"UTF-16-BE"}, [(2, 3)]),
])
def test_shapes_are_inferred(op, inputs, attrs, shapes):
    info = infer(one_op_graph(op, inputs, attrs))
    assert [info[("op", k)].shape for k in range(len(shapes))] == shapes


@pytest.mark.parametrize("inputs,words", [
    ([((2, 2), I32), ((3,), I64)], "input_values must have rank 1"),
    ([((4,), I32), ((), I64)], "input_splits must have rank 1"),
    ([((4,), I32), ((0,), I64)], "Negative dimension size caused by subtracting 1 from 0"),
])
def test_encode_shape_function_refuses_what_tensorflow_refuses(inputs, words):
    with pytest.raises(TfgError, match=re.escape(words)):
        infer(one_op_graph("UnicodeEncode", inputs, {"output_encoding": b"UTF-8"}),
              strict=True)


@pytest.mark.parametrize("op", sorted(OP_NAMES))
def test_unicode_ops_are_not_differentiable(op):
    assert get_gradient(op).fn is None


# --- the CLI ----------------------------------------------------------------------------------
def test_cli_splits_strings_into_characters_and_reports_errors_in_one_line(tmp_path):
    case = next(c for c in CASES if c["name"] == "DecOff_text")
    name, pb = case["name"], DIR / "unicode.pb"
    feeds, out = tmp_path / "f.npz", tmp_path / "out.npz"
    text = ARRAYS[f"{name}/input"]
    assert text.dtype.kind == "S"  # a numpy bytes array, as a user's .npz holds text
    np.savez(feeds, **{f"{name}/input": text})
    tfg_cli("run", pb, "--feeds", feeds, "--fetch", f"{name}/out1", "--fetch",
            f"{name}/out2", "-o", out)
    got = np.load(out, allow_pickle=False)
    for k in (1, 2):
        key = next(f for f in got.files if f.endswith(f"out{k}"))
        assert got[key].tolist() == ARRAYS[f"{name}/out{k}"].tolist()

    # malformed text under errors='strict': a kernel error, exit 1, one stderr line
    strict = next(c for c in CASES if c["name"] == "DecOffErr_strict0")
    np.savez(feeds, **{f"{strict['name']}/input": ARRAYS[f"{strict['name']}/input"]})
    p = tfg_cli("run", pb, "--feeds", feeds, "--fetch", f"{strict['name']}/out1",
                check=False)
    lines = p.stderr.decode().strip().splitlines()
    assert p.returncode == 1 and len(lines) == 1
    assert "Invalid formatting on input string" in lines[0]

    # a feed of the wrong rank for its placeholder: bad input (exit 2), one stderr line
    np.savez(feeds, **{f"{name}/input": text.reshape(2, 4)})
    p = tfg_cli("run", pb, "--feeds", feeds, "--fetch", f"{name}/out1", check=False)
    assert p.returncode == 2 and len(p.stderr.decode().strip().splitlines()) == 1
