"""The string ops against TensorFlow (tests/fixtures/strings, made by
tools/gen_string_fixtures.py): values (attrs, UTF-8 and invalid UTF-8 text, empty strings and
tensors, broadcasting, a TextVectorization-like chain), TensorFlow's errors, the RE2 patterns
tfg refuses and why, the bounds on regex work and on output sizes the shape functions cannot
see, shape inference, gradients and the CLI."""
import re
import time

import numpy as np
import pytest

from helpers import tfg_cli
from op_cases import OpCases, case_ids, one_op_graph
from tfg.errors import TfgError, TfgRuntimeError
from tfg.executor.session import Session
from tfg.graphdef.attrs import Shape
from tfg.graphdef.graph import Graph
from tfg.graphdef.infer import infer
from tfg.kernels import string_ops
from tfg.kernels.re2_syntax import Re2Error, Regex, Unsupported
from tfg.passes.grad.registry import get_gradient
from tfg.schemas.dtypes import DType

OPS = OpCases("strings")
DIR, CASES, ARRAYS, GRAPH = OPS.dir, OPS.cases, OPS.arrays, OPS.graph
# TensorFlow's RE2 runs these; tfg refuses them (an input error naming the construct)
TFG_REFUSES = {"StaticRegexReplace_nested_quantifier": "nested quantifiers",
               "StaticRegexFullMatch_case_insensitive": "the (?i) flag"}
RUNS = [c for c in OPS.runs if c["name"] not in TFG_REFUSES]
ERRORS = OPS.errors
S, I32, I64 = DType.STRING, DType.INT32, DType.INT64
OP_NAMES = {"StringLower", "StringUpper", "StaticRegexReplace", "RegexReplace",
            "StaticRegexFullMatch", "RegexFullMatch", "StringSplitV2", "StringSplit",
            "StringJoin", "ReduceJoin", "Substr", "StringLength", "StringStrip", "AsString",
            "StringToNumber", "StringNGrams", "EncodeBase64", "DecodeBase64"}


@pytest.fixture(scope="module")
def session():
    return Session(GRAPH)


def same(got, expected, what):
    """got is TensorFlow's value exactly: strings byte for byte, numbers bit for bit (NaN
    where TensorFlow has NaN)."""
    got = np.asarray(got)
    assert got.shape == expected.shape, what
    if expected.dtype.kind == "S":  # ('S' drops no byte: the generator keeps no final NUL)
        assert got.dtype == object, what
        assert got.reshape(-1).tolist() == expected.reshape(-1).tolist(), what
        return
    assert got.dtype == expected.dtype, what
    np.testing.assert_array_equal(got, expected, err_msg=what)


def test_fixtures_cover_every_op_and_its_errors():
    assert {c["op"] for c in RUNS} == OP_NAMES | {"chain"}
    assert {c["op"] for c in ERRORS} >= OP_NAMES - {"StringLength", "StringStrip",
                                                    "EncodeBase64", "StaticRegexFullMatch"}
    assert len(RUNS) >= 200 and len(ERRORS) >= 50


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


@pytest.mark.parametrize("name", sorted(TFG_REFUSES))
def test_patterns_tfg_refuses_name_the_construct(session, name):
    case = next(c for c in CASES if c["name"] == name)
    with pytest.raises(TfgError, match=re.escape(TFG_REFUSES[name])):
        session.run([f"{name}/out0:0"], OPS.feeds(case))


def test_the_text_vectorization_chain_runs_whole(session):
    case = next(c for c in CASES if c["op"] == "chain")
    tokens, ngrams = session.run([f"{case['name']}/out1:0", f"{case['name']}/out3:0"],
                                 OPS.feeds(case))
    assert b"hello" in tokens.tolist() and b"the quick" in ngrams.tolist()


# --- RE2 syntax: what is translated, what is refused ------------------------------------------
@pytest.mark.parametrize("pattern,text,expected", [
    (rb"\s", "\x0b", False),               # RE2's \s has no \v (Python's has)
    (rb"a$", "a\n", False),                 # $ is the end of the text, not before a final \n
    (rb"^.$", "é", True),               # one UTF-8 character, not one byte
    (rb"[^a]", "\n", True),
    (rb".", "\n", False),
    (rb"(?s).", "\n", True),
    (rb"^\d\w\W$", "1_é", True),          # ASCII classes: é is not a word character
    (rb"[^a]|.", "\udcff", False),           # a byte that is not UTF-8 (surrogateescape)
])
def test_translated_patterns_mean_what_re2_means(pattern, text, expected):
    assert (Regex(pattern).regex.search(text) is not None) == expected


@pytest.mark.parametrize("pattern,words", [
    (rb"(a+)+b", "nested quantifiers"),
    (rb"(?:x*y)*", "nested quantifiers"),
    (rb"(a|ab)*c", "branches can start with the same character"),
    (rb"(?:a|)+", "empty branch"),
    (rb"(?i)abc", "the (?i) flag"),
    (rb"(?U)a+", "the (?U) flag"),
    (rb"\pL+", "Unicode class"),
    (rb"a\C", "any byte"),
    (rb"\b*", "repeated empty-width assertion"),
])
def test_refused_constructs(pattern, words):
    with pytest.raises(Unsupported, match=re.escape(words)):
        Regex(pattern)


@pytest.mark.parametrize("pattern,words", [
    (rb"(a)\1", "invalid escape sequence: \\1"),
    (rb"a(?<=b)", "invalid perl operator"),
    (rb"a(?!b)", "invalid perl operator"),
    (rb"*a", "missing argument to repetition operator"),
    (rb"a{2}{3}", "bad repetition operator"),
    (rb"[z-a]", "bad character class range"),
    (rb"a\Z", "invalid escape sequence"),
    (b"\xff", "invalid UTF-8"),
])
def test_what_re2_refuses_is_an_invalid_pattern(pattern, words):
    with pytest.raises(Re2Error, match=re.escape(words)):
        Regex(pattern)


def _regex_graph(op, pattern, shape=(None,), rewrite=b"-"):
    g = Graph()
    g.add_node("x", "Placeholder", [], {"dtype": S, "shape": Shape(shape)})
    attrs = {"pattern": pattern}
    if op == "StaticRegexReplace":
        attrs["rewrite"] = rewrite
    g.add_node("op", op, ["x:0"], attrs)
    return g


@pytest.mark.parametrize("op,pattern,text", [
    # quadratic when searched: every start scans to the end for an 'x' that is not there
    ("StaticRegexReplace", b"a.*x", "a" * 200_000),
    # a run of a's split every way between the repeats before the missing 'b'
    ("StaticRegexFullMatch", b"a*a*a*a*b", "a" * 400),
])
def test_backtracking_work_is_bounded_before_it_starts(op, pattern, text):
    s = Session(_regex_graph(op, pattern))
    start = time.monotonic()
    with pytest.raises(TfgRuntimeError, match="steps of Python's backtracking regex engine"):
        s.run("op:0", {"x:0": np.array([text.encode()], dtype=object)})
    assert time.monotonic() - start < 5
    # the same patterns on short text run (and agree with what RE2 returns)
    got = s.run("op:0", {"x:0": np.array([b"aab", b"xy"], dtype=object)})
    assert got.shape == (2,)


def test_alternations_with_too_many_paths_are_refused_whatever_the_text():
    # 2**40 paths through alternations whose branches start alike, even for a short string
    s = Session(_regex_graph("StaticRegexFullMatch", b"(?:a|a)" * 40 + b"b"))
    with pytest.raises(TfgRuntimeError, match="about 1.1e\\+12 steps"):
        s.run("op:0", {"x:0": np.array([b"ab"], dtype=object)})
    # a handful of them is fine
    s = Session(_regex_graph("StaticRegexFullMatch", b"(?:a|ab)" * 3))
    got = s.run("op:0", {"x:0": np.array([b"aabab", b"aaaa"], dtype=object)})
    assert got.tolist() == [True, False]


def test_keras_punctuation_pattern_on_long_text_is_linear():
    keras = rb'[!"#$%&()\*\+,-\./:;<=>?@\[\\\]^_`{|}~\']'
    s = Session(_regex_graph("StaticRegexReplace", keras, rewrite=b""))
    text = ("Hello, world! " * 100_000).encode()
    start = time.monotonic()
    got = s.run("op:0", {"x:0": np.array([text], dtype=object)})
    assert got[0] == b"Hello world " * 100_000
    assert time.monotonic() - start < 10


# --- outputs the shape functions cannot size --------------------------------------------------
_graph = one_op_graph


def _strings(values):
    out = np.empty(len(values), dtype=object)
    out[:] = values
    return out


NGRAM_ATTRS = {"separator": b" ", "left_pad": b"<", "right_pad": b">",
               "preserve_short_sequences": False, "Tsplits": I64}


@pytest.mark.parametrize("op,inputs,attrs", [
    # a billion-wide n-gram with full padding: a billion n-grams of a billion tokens each
    ("StringNGrams", [(_strings([b"a"]), S), ([0, 1], I64)],
     {**NGRAM_ATTRS, "ngram_widths": [10 ** 9], "pad_width": -1}),
    ("AsString", [(np.arange(4, dtype=np.int32), I32)], {"T": I32, "width": 10 ** 9}),
    ("AsString", [(np.ones(2, np.float32), DType.FLOAT)],
     {"T": DType.FLOAT, "precision": 10 ** 9}),
    # a million empty strings joined by a 2 KiB separator: 2 GiB
    ("ReduceJoin", [(_strings([b""] * 10 ** 6), S), ([0], I32)], {"separator": b"s" * 2048}),
    ("StringJoin", [(_strings([b""] * 10 ** 6), S), (_strings([b""] * 10 ** 6), S)],
     {"N": 2, "separator": b"s" * 2048}),
    # an empty pattern matches around every character: a million 4 KiB rewrites
    ("StaticRegexReplace", [(_strings([b"a" * 10 ** 6]), S)],
     {"pattern": b"", "rewrite": b"r" * 4096}),
])
def test_hostile_output_sizes_fail_before_allocating(op, inputs, attrs):
    start = time.monotonic()
    with pytest.raises(TfgRuntimeError, match="bytes of strings; tfg allows at most"):
        Session(_graph(op, inputs, attrs)).run("op:0", {})
    assert time.monotonic() - start < 10


def test_the_memory_guard_sizes_what_the_shape_function_knows():
    # Substr broadcasts [2000, 1] strings against [1, 2000] positions: 4M strings, 32 MB of
    # pointers alone, over a 1 MB limit, refused before the kernel runs
    g = _graph("Substr", [((2000, 1), S), ((1, 2000), I32), ((1, 2000), I32)], {"T": I32})
    feeds = {"in0:0": np.full((2000, 1), b"abc", dtype=object),
             "in1:0": np.zeros((1, 2000), np.int32), "in2:0": np.ones((1, 2000), np.int32)}
    with pytest.raises(TfgError, match="would allocate"):
        Session(g, max_memory="1M").run("op:0", feeds)
    small = {"in0:0": feeds["in0:0"][:20], "in1:0": feeds["in1:0"][:, :20],
             "in2:0": feeds["in2:0"][:, :20]}
    g = _graph("Substr", [((20, 1), S), ((1, 20), I32), ((1, 20), I32)], {"T": I32})
    assert Session(g, max_memory="1M").run("op:0", small).shape == (20, 20)


def test_the_text_cap_is_what_the_kernels_check(monkeypatch):
    monkeypatch.setattr(string_ops, "MAX_TEXT_BYTES", 1000)
    g = _graph("StringNGrams", [(_strings([b"word"] * 20), S), ([0, 20], I64)],
               {**NGRAM_ATTRS, "ngram_widths": [3], "pad_width": 0})
    with pytest.raises(TfgRuntimeError, match="StringNGrams would make about"):
        Session(g).run("op:0", {})


# --- shapes and gradients ---------------------------------------------------------------------
@pytest.mark.parametrize("op,inputs,attrs,shapes", [
    ("StringSplitV2", [((None,), S), ((), S)], {}, [(None, 2), (None,), (2,)]),
    ("StringSplit", [((4,), S), ((), S)], {}, [(None, 2), (None,), (2,)]),
    ("StringNGrams", [((None,), S), ((5,), I64)],
     {**NGRAM_ATTRS, "ngram_widths": [2], "pad_width": 0}, [(None,), (5,)]),
    ("Substr", [((2, 1), S), ((1, 3), I32), ((1, 3), I32)], {"T": I32}, [(2, 3)]),
    ("StringJoin", [((), S), ((4, 2), S), ((None, 2), S)], {"N": 3}, [(4, 2)]),
    ("StringJoin", [((), S), ((), S)], {"N": 2}, [()]),
    ("ReduceJoin", [((3, 4, 5), S), ([1, -1], I32)], {"keep_dims": True}, [(3, 1, 1)]),
    ("ReduceJoin", [((3, 4, 5), S), ([0], I32)], {}, [(4, 5)]),
    ("AsString", [((3, 2), DType.FLOAT)], {"T": DType.FLOAT}, [(3, 2)]),
    ("StringToNumber", [((7,), S)], {"out_type": DType.DOUBLE}, [(7,)]),
    ("RegexFullMatch", [((2, 2), S), ((), S)], {}, [(2, 2)]),
])
def test_shapes_are_inferred(op, inputs, attrs, shapes):
    info = infer(_graph(op, inputs, attrs))
    assert [info[("op", k)].shape for k in range(len(shapes))] == shapes


@pytest.mark.parametrize("op,inputs,attrs,words", [
    ("StringSplitV2", [((2, 2), S), ((), S)], {}, "input must have rank 1"),
    ("RegexReplace", [((2,), S), ((1,), S), ((), S)], {}, "pattern must have rank 0"),
    ("StringJoin", [((2,), S), ((3,), S)], {"N": 2}, "Input shapes do not match: [2] vs. [3]"),
    ("Substr", [((2,), S), ((2,), I32), ((3,), I32)], {"T": I32}, "not compatible"),
])
def test_shape_functions_refuse_what_tensorflow_refuses(op, inputs, attrs, words):
    with pytest.raises(TfgError, match=re.escape(words)):
        infer(_graph(op, inputs, attrs), strict=True)


@pytest.mark.parametrize("op", sorted(OP_NAMES))
def test_string_ops_are_not_differentiable(op):
    assert get_gradient(op).fn is None


# --- the CLI ----------------------------------------------------------------------------------
def _feeds(path, case, change=None):
    name = case["name"]
    args = {f"{name}/{k}": ARRAYS[f"{name}/{k}"] for k in case["args"]}
    args.update(change or {})
    np.savez(path, **args)


def test_cli_runs_the_chain_and_reports_errors_in_one_line(tmp_path):
    case = next(c for c in CASES if c["op"] == "chain")
    name, pb = case["name"], DIR / "strings.pb"
    feeds, out = tmp_path / "f.npz", tmp_path / "out.npz"
    _feeds(feeds, case)
    tfg_cli("run", pb, "--feeds", feeds, "--fetch", f"{name}/out3", "--fetch",
            f"{name}/out4", "-o", out)
    got = np.load(out, allow_pickle=False)
    for k in (3, 4):
        key = next(f for f in got.files if f.endswith(f"out{k}"))
        assert got[key].tolist() == ARRAYS[f"{name}/out{k}"].tolist()

    # a kernel refusing a value (a string that is no number): exit 1, one stderr line
    number = next(c for c in CASES if c["name"] == "StringToNumber_float32")
    text = ARRAYS[f"{number['name']}/string_tensor"].copy()
    text[3] = b"x1"
    _feeds(feeds, number, {f"{number['name']}/string_tensor": text})
    p = tfg_cli("run", pb, "--feeds", feeds, "--fetch", f"{number['name']}/out0", check=False)
    lines = p.stderr.decode().strip().splitlines()
    assert p.returncode == 1 and len(lines) == 1
    assert "StringToNumberOp could not correctly convert string: x1" in lines[0]

    # a pattern tfg refuses: a kernel error (the executor names the node), one stderr line
    # naming the construct
    refused = next(c for c in CASES if c["name"] == "StaticRegexReplace_nested_quantifier")
    _feeds(feeds, refused)
    p = tfg_cli("run", pb, "--feeds", feeds, "--fetch", f"{refused['name']}/out0",
                check=False)
    lines = p.stderr.decode().strip().splitlines()
    assert p.returncode == 1 and len(lines) == 1 and "nested quantifiers" in lines[0]

    # a feed of the wrong rank for its placeholder: bad input (exit 2), one stderr line
    _feeds(feeds, case, {f"{name}/input": np.array([[b"a"]])})
    p = tfg_cli("run", pb, "--feeds", feeds, "--fetch", f"{name}/out1", check=False)
    assert p.returncode == 2 and len(p.stderr.decode().strip().splitlines()) == 1
