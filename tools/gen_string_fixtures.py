#!/usr/bin/env python3
"""TensorFlow's values and errors of the string ops (StringLower, StringUpper, the regex ops,
StringSplitV2, StringSplit, StringJoin, ReduceJoin, Substr, StringLength, StringStrip, AsString,
StringToNumber, StringNGrams, EncodeBase64, DecodeBase64) for tests/test_string_ops.py, and one
TextVectorization-like chain. NEEDS TENSORFLOW; never imports tfg:

    /work/tfvenv/bin/python tools/gen_string_fixtures.py

Writes tests/fixtures/strings/: strings.pb (one tf.compat.v1 graph: per case `<case>/<arg>`
placeholders -> `<case>/out<k>`, the Identity of the op's output k), strings.npz (`<case>/<arg>`
feeds and `<case>/out<k>` values; strings as numpy 'S' arrays, never pickled objects) and
cases.json (per case: op, args, outputs, attrs, or the error TensorFlow's kernel raises).
A case whose error words do not match TensorFlow's fails the run once every case has run,
all of them listed (tools/fixture_cases.py).
"""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from fixture_cases import CaseSet, fixture_dir, generate  # noqa: E402

OUT = fixture_dir("strings")
R = tf.raw_ops
I32, I64 = np.int32, np.int64
KERAS_PUNCT = r'[!"#$%&()\*\+,-\./:;<=>?@\[\\\]^_`{|}~\']'


def S(values):
    """A string array as TensorFlow feeds and returns them: bytes, utf-8 for text."""
    def enc(v):
        return v if isinstance(v, bytes) else v.encode()
    arr = np.array(values, dtype=object)
    flat = [enc(v) for v in arr.reshape(-1)]
    out = np.empty(len(flat), dtype=object)
    out[:] = flat
    return out.reshape(arr.shape)


def to_npz(value):
    """A string array as an 'S' array (npz without pickles); no value may end in a NUL,
    which 'S' would drop."""
    value = np.asarray(value)
    if value.dtype != object:
        return value
    assert all(not v.endswith(b"\0") for v in value.reshape(-1)), value
    width = max([len(v) for v in value.reshape(-1)] + [1])
    return np.array(value.reshape(-1).tolist(), dtype=f"S{width}").reshape(value.shape)


class Cases(CaseSet):
    """The cases' graph pieces, arrays and index (tools/fixture_cases.py writes them)."""

    refusals = (tf.errors.InvalidArgumentError, tf.errors.OutOfRangeError)

    def add(self, name, op, args, attrs=None, error=None):
        """args: {input name: array or list of arrays (a list input)}; error: words of the
        error TensorFlow raises on the feeds."""
        with tf.name_scope(name):
            phs, names = {}, []
            for k, v in args.items():
                if isinstance(v, list):
                    phs[k] = [self._placeholder(f"{k}_{i}", x, error)
                              for i, x in enumerate(v)]
                    names += [f"{k}_{i}" for i in range(len(v))]
                    self.arrays.update({f"{name}/{k}_{i}": to_npz(x) for i, x in enumerate(v)})
                else:
                    phs[k] = self._placeholder(k, v, error)
                    names.append(k)
                    self.arrays[f"{name}/{k}"] = to_npz(v)
            outs = getattr(R, op)(**phs, **(attrs or {}), name="op")
            outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
            for k, o in enumerate(outs):
                self.fetches[f"{name}/out{k}"] = tf.identity(o, name=f"out{k}")
        self.index.append({"name": name, "op": op, "args": names, "outputs": len(outs),
                           "attrs": {k: _jsonable(v) for k, v in (attrs or {}).items()},
                           "grad": [], "error": error})

    @staticmethod
    def _placeholder(k, v, error):
        v = np.asarray(v)
        dt = tf.string if v.dtype == object else tf.as_dtype(v.dtype)
        return tf.compat.v1.placeholder(dt, None if error else v.shape, name=k)

    def run(self, graph):
        super().run(graph)
        self.arrays = {k: to_npz(v) for k, v in self.arrays.items()}


def _jsonable(v):
    if isinstance(v, tf.dtypes.DType):
        return v.name
    return v.decode() if isinstance(v, bytes) else v


TEXT = S([["Hello, World!", "ÄÖÜ straße ǅ İ"], ["", "MiXeD 123 ΟΔΟΣ"]])


def case_ops(c):
    for op in ("StringLower", "StringUpper"):
        for enc in ("", "utf-8"):
            c.add(f"{op}_{enc or 'ascii'}", op, {"input": TEXT}, {"encoding": enc})
        c.add(f"{op}_empty", op, {"input": S(np.zeros((0, 3), object))})
        c.add(f"{op}_scalar", op, {"input": S("aBc")})
        c.add(f"{op}_bad_utf8", op, {"input": S([b"a\xffB\xc3", b"\xe2\x82Z"])},
              {"encoding": "utf-8"})
        c.add(f"{op}Err_encoding", op, {"input": S(["a"])}, {"encoding": "latin1"},
              error="only utf-8 or '' (no encoding) is supported, received latin1")


REGEX_TEXT = S(["The quick, brown fox!", "a\nb\n", "baaac", "", "é€日本 x1_y2",
                "  lead\ttrail \x0b ", "user@example dom@host", b"a\xffb\xc3"])

REPLACE = [  # (name, pattern, rewrite, replace_global)
    ("keras_punct", KERAS_PUNCT, "", True),
    ("star_global", "a*", "-", True),
    ("star_first", "a*", "-", False),
    ("empty_pattern", "", "|", True),
    ("dot", ".", "x", True),
    ("dot_s", "(?s).", "x", True),
    ("groups", r"(\w+)@(\w+)", r"\2 at \1 [\0] \\", True),
    ("optional_group", r"(x)?(\d)", r"<\1\2>", True),
    ("anchors", r"^|$", "#", True),
    ("multiline", r"(?m)^(\w)|$", r"[\1]", True),
    ("not_a", r"[^a]", "_", True),
    ("space_class", r"\s+", " ", True),
    ("space_v", r"[\s]", "S", True),
    ("digits_words", r"\d\W", "D", True),
    ("boundary", r"\b", "|", True),
    ("counted", r"a{2,3}|b{2}", "N", True),
    ("lazy", r"b.+?[,!]", "L", True),
    ("alternation", r"quick|brown|fo", "Q", False),
    ("posix", r"[[:upper:][:digit:]]", "P", True),
    ("hex_octal", r"\x{20AC}|\x41|\101|\x65", "H", True),
    ("quoted", r"\Q.+\E|\.", "q", True),
    ("class_ranges", r"[a-cx-z0-9é-ê]", "r", True),
    ("rewrite_bad_escape", r"(o)", r"z\yq", True),
    ("rewrite_bad_escape_first", r"(o)", r"z\yq", False),
    ("rewrite_group_past_end", r"(o)", r"\2", True),
    ("text_end", r"\z", "E", True),
    ("begin", r"\A.", "B", True),
    ("named", r"(?P<w>o)(?:x)?", r"[\1]", True),
]
FULLMATCH = ["", ".*", "a\nb\n", "(?s).*", r"[\w ,!]+", r"\w+@\w+ \w+@\w+", ".", ".{2}.*",
             r"(?s)a.b.", "baa+c|x", r"\s*\S+\s*", "[^x]*"]


def regex_cases(c):
    for name, pattern, rewrite, glob in REPLACE:
        c.add(f"StaticRegexReplace_{name}", "StaticRegexReplace", {"input": REGEX_TEXT},
              {"pattern": pattern, "rewrite": rewrite, "replace_global": glob})
    c.add("RegexReplace_tensor", "RegexReplace",
          {"input": REGEX_TEXT, "pattern": S(r"(\w)(\w)"), "rewrite": S(r"\2\1")})
    c.add("RegexReplace_first", "RegexReplace",
          {"input": REGEX_TEXT[:, None], "pattern": S("o"), "rewrite": S("0")},
          {"replace_global": False})
    c.add("RegexReplace_empty_input", "RegexReplace",
          {"input": S(np.zeros((2, 0), object)), "pattern": S("o"), "rewrite": S("0")})
    for i, pattern in enumerate(FULLMATCH):
        c.add(f"StaticRegexFullMatch_{i}", "StaticRegexFullMatch", {"input": REGEX_TEXT},
              {"pattern": pattern})
    c.add("RegexFullMatch_tensor", "RegexFullMatch",
          {"input": REGEX_TEXT.reshape(2, 4), "pattern": S(r"[a-z ]*")})
    # TensorFlow's RE2 runs these; tfg refuses them (the test names why)
    c.add("StaticRegexReplace_nested_quantifier", "StaticRegexReplace", {"input": REGEX_TEXT},
          {"pattern": "(a+)+c", "rewrite": "N"})
    c.add("StaticRegexFullMatch_case_insensitive", "StaticRegexFullMatch",
          {"input": S(["K", "\u212a", "k"])}, {"pattern": "(?i)k"})
    for name, pattern, words in [("unclosed", "(a", "Invalid pattern: (a, error: missing )"),
                                 ("backreference", r"(a)\1", "Invalid pattern: (a)\\1"),
                                 ("lookahead", "a(?=b)", "Invalid pattern: a(?=b)"),
                                 ("double_star", "a**", "Invalid pattern: a**"),
                                 ("big_repeat", "a{1001}", "Invalid pattern: a{1001}")]:
        c.add(f"StaticRegexReplaceErr_{name}", "StaticRegexReplace", {"input": S(["a"])},
              {"pattern": pattern, "rewrite": "x"}, error=words)
    c.add("RegexReplaceErr_pattern_shape", "RegexReplace",
          {"input": S(["a"]), "pattern": S(["a", "b"]), "rewrite": S("x")},
          error="Pattern must be scalar, but received [2]")
    c.add("RegexReplaceErr_rewrite_shape", "RegexReplace",
          {"input": S(["a"]), "pattern": S("a"), "rewrite": S(["x"])},
          error="Rewrite must be scalar, but received [1]")
    c.add("RegexFullMatchErr_pattern_shape", "RegexFullMatch",
          {"input": S(["a"]), "pattern": S(["a"])},
          error="Pattern must be scalar, but received [1]")
    c.add("RegexFullMatchErr_invalid", "RegexFullMatch",
          {"input": S(["a"]), "pattern": S("[a")}, error="Invalid pattern: [a")


SPLIT_TEXT = S(["  hello  world ", "a,b,,c,", "", ",", "one", "tab\tsep\nnl\x0bvt\x0cff\x1cfs",
                "x<>y<><>z", "日本 語\u3000全角\xa0nb"])


def split_cases(c):
    for sep in ("", ",", " ", "<>", "日"):
        for maxsplit in (-1, 0, 1, 2):
            c.add(f"StringSplitV2_{sep.encode().hex() or 'ws'}_m{maxsplit}", "StringSplitV2",
                  {"input": SPLIT_TEXT, "sep": S(sep)}, {"maxsplit": maxsplit})
    c.add("StringSplitV2_empty", "StringSplitV2",
          {"input": S(np.zeros(0, object)), "sep": S(",")})
    c.add("StringSplitV2_all_empty", "StringSplitV2", {"input": S(["", "  "]), "sep": S("")})
    c.add("StringSplitV2Err_rank", "StringSplitV2",
          {"input": SPLIT_TEXT.reshape(2, 4), "sep": S("")}, error="input must be a vector")
    c.add("StringSplitV2Err_sep", "StringSplitV2",
          {"input": SPLIT_TEXT, "sep": S([","])}, error="sep must be a scalar")
    for delim in ("", " ", ",<", "\t\n"):
        for skip in (True, False):
            c.add(f"StringSplit_{delim.encode().hex() or 'none'}_s{int(skip)}", "StringSplit",
                  {"input": SPLIT_TEXT, "delimiter": S(delim)}, {"skip_empty": skip})
    c.add("StringSplit_empty", "StringSplit",
          {"input": S(np.zeros(0, object)), "delimiter": S(",")})
    c.add("StringSplitErr_rank", "StringSplit",
          {"input": SPLIT_TEXT.reshape(2, 4), "delimiter": S(" ")},
          error="input must be a vector")
    c.add("StringSplitErr_delimiter", "StringSplit",
          {"input": SPLIT_TEXT, "delimiter": S([" "])}, error="delimiter must be a scalar")


def join_cases(c):
    a, b = S([["a", "bc"], ["", "日"]]), S([["1", "2"], ["3", ""]])
    c.add("StringJoin_two", "StringJoin", {"inputs": [a, b]})
    c.add("StringJoin_sep", "StringJoin", {"inputs": [a, S("-"), b]}, {"separator": ", "})
    c.add("StringJoin_scalars", "StringJoin", {"inputs": [S("x"), S("y")]}, {"separator": "+"})
    c.add("StringJoin_one", "StringJoin", {"inputs": [a]}, {"separator": "+"})
    c.add("StringJoin_empty", "StringJoin", {"inputs": [S(np.zeros((0, 2), object)), S("s")]})
    c.add("StringJoinErr_shapes", "StringJoin", {"inputs": [a, S(["1", "2"])]},
          error="Input shapes do not match: [2,2] vs. [2]")
    x = S(np.array([[["a", "b", "c"], ["d", "e", "f"]], [["g", "h", "i"], ["j", "k", "l"]]]))
    for axes in ([0], [1], [2], [-1], [0, 1], [1, 0], [2, 0], [0, 1, 2], [-3, -1], []):
        for keep in (False, True):
            c.add(f"ReduceJoin_{'_'.join(map(str, axes)).replace('-', 'n') or 'none'}"
                  f"_k{int(keep)}", "ReduceJoin",
                  {"inputs": x, "reduction_indices": I32(axes)},
                  {"keep_dims": keep, "separator": "."})
    c.add("ReduceJoin_scalar_axis", "ReduceJoin",
          {"inputs": x, "reduction_indices": I32(1)}, {"separator": "|"})
    c.add("ReduceJoin_empty_axis", "ReduceJoin",
          {"inputs": S(np.zeros((2, 0), object)), "reduction_indices": I32([1])},
          {"separator": "|"})
    c.add("ReduceJoin_empty_kept", "ReduceJoin",
          {"inputs": S(np.zeros((0, 3), object)), "reduction_indices": I32([1])},
          {"keep_dims": True})
    c.add("ReduceJoin_scalar_input", "ReduceJoin",
          {"inputs": S("only"), "reduction_indices": I32([])})
    c.add("ReduceJoinErr_duplicate", "ReduceJoin",
          {"inputs": x, "reduction_indices": I32([1, -2])},
          error="Duplicate reduction dimension -2")
    c.add("ReduceJoinErr_range", "ReduceJoin", {"inputs": x, "reduction_indices": I32([3])},
          error="Invalid reduction dimension 3 for input with 3 dimension(s)")
    c.add("ReduceJoinErr_negative_range", "ReduceJoin",
          {"inputs": x, "reduction_indices": I32([-4])},
          error="Invalid reduction dimension -4 for input with 3 dimension(s)")


SUB_TEXT = S(["Hello", "日本語テキスト", "", "ab"])


def substr_cases(c):
    for dt in (I32, I64):
        n = dt.__name__
        c.add(f"Substr_{n}_scalar", "Substr",
              {"input": SUB_TEXT, "pos": dt(0), "len": dt(2)})
        c.add(f"Substr_{n}_elementwise", "Substr",
              {"input": SUB_TEXT, "pos": dt([1, 3, 0, -2]), "len": dt([3, 2, 5, 9])})
    c.add("Substr_negative_len", "Substr",
          {"input": SUB_TEXT, "pos": I32([1, 0, 0, 1]), "len": I32([-1, -3, 0, -1])})
    c.add("Substr_broadcast_rows", "Substr",
          {"input": S([["abcdef", "ghijkl"], ["mnopqr", "stuvwx"]]), "pos": I32([1, 2]),
           "len": I32([2, 3])})
    c.add("Substr_broadcast_input", "Substr",
          {"input": S(["abcdef"]), "pos": I32([[0], [2]]), "len": I32([[1], [3]])})
    c.add("Substr_broadcast_both", "Substr",
          {"input": S([["abcdef"], ["ghijkl"]]), "pos": I32([[0, 1, 2]]),
           "len": I32([[1, 2, 3]])})
    for unit_case, pos, ln in [("a", [0, 1, 0, 1], [3, 2, 0, 5]), ("b", [-2, -7, 0, -1],
                                                                  [1, 3, 3, 1])]:
        c.add(f"Substr_utf8_{unit_case}", "Substr",
              {"input": SUB_TEXT, "pos": I32(pos), "len": I32(ln)}, {"unit": "UTF8_CHAR"})
    c.add("Substr_utf8_scalar", "Substr",
          {"input": S(["日本語", "ab", "é"]), "pos": I32(1), "len": I32(1)},
          {"unit": "UTF8_CHAR"})
    c.add("Substr_empty", "Substr",
          {"input": S(np.zeros((0,), object)), "pos": I32(0), "len": I32(1)})
    c.add("Substr_pos_at_end", "Substr",
          {"input": S(["abc"]), "pos": I32([3]), "len": I32([1])})
    c.add("SubstrErr_pos", "Substr", {"input": S(["abc"]), "pos": I32([5]), "len": I32([1])},
          error="pos 5 out of range for string b'abc' at index 0")
    c.add("SubstrErr_negative_pos", "Substr",
          {"input": S(["ab", "abc"]), "pos": I32(-3), "len": I32(1)},
          error="pos -3 out of range for string b'ab' at index 0")
    c.add("SubstrErr_utf8_pos", "Substr",
          {"input": S(["日本"]), "pos": I32([3]), "len": I32([1])}, {"unit": "UTF8_CHAR"},
          error="pos 3 out of range for string at index 0")
    c.add("SubstrErr_shapes", "Substr",
          {"input": S(["abc", "d"]), "pos": I32([0, 1]), "len": I32([1])},
          error="pos and len should have the same shape, got: [2] vs. [1]")
    c.add("SubstrErr_broadcast", "Substr",
          {"input": S(["abc", "d", "e"]), "pos": I32([0, 1]), "len": I32([1, 1])},
          error="Incompatible shapes: [3] vs. [2]")
    c.add("SubstrErr_broadcast_pos_range", "Substr",
          {"input": S([["abc"], ["d"]]), "pos": I32([[0, 2]]), "len": I32([[1, 1]])},
          error="pos 2 out of range for string b'd' at index (1, 1)")


def misc_cases(c):
    for unit in ("BYTE", "UTF8_CHAR"):
        c.add(f"StringLength_{unit}", "StringLength",
              {"input": S([["", "abc", "日本語"], ["é", b"\xff\xc3", "ǅ x"]])}, {"unit": unit})
    c.add("StringLength_empty", "StringLength", {"input": S(np.zeros((0, 2), object))})
    c.add("StringStrip", "StringStrip",
          {"input": S(["  a b  ", "\t\n\x0b\x0cx\r", "", "\xa0y\xa0", " \x1c ", "   "])})
    c.add("EncodeBase64", "EncodeBase64",
          {"input": S(["", "f", "fo", "foo", "foob", b"\xfb\xff\xfe", "日本"])})
    c.add("EncodeBase64_pad", "EncodeBase64",
          {"input": S(["", "f", "fo", "foo", "foob", b"\xfb\xff\xfe", "日本"])}, {"pad": True})
    c.add("DecodeBase64", "DecodeBase64",
          {"input": S(["", "Zg", "Zg==", "Zm8", "Zm8=", "Zm9v", "-_-_", "5pel5pys"])})
    c.add("DecodeBase64Err_len1", "DecodeBase64", {"input": S(["Zg", "Zm9vY"])},
          error="Base64 string length cannot be 1 modulo 4.")
    for name, text in [("char", "Zm$v"), ("standard", "+/+/"),
                       ("pad_middle", "Zg==Zg=="), ("one_pad", "Zg=")]:
        c.add(f"DecodeBase64Err_{name}", "DecodeBase64", {"input": S([text])},
              error="Invalid character found in base64.")


FLOATS = [0.1, 1 / 3, 1e4, 1e-7, 123456789.0, np.nan, np.inf, -np.inf, -0.0, 100.0, 2.5,
          -1.25e-5]
AS_ATTRS = [({}, "default"), ({"shortest": True}, "shortest"),
            ({"scientific": True}, "scientific"), ({"precision": 3}, "p3"),
            ({"precision": 0}, "p0"), ({"precision": 3, "width": 12, "fill": "0"}, "p3w12f0"),
            ({"width": 14, "fill": "-"}, "w14fminus"), ({"width": 9, "fill": " "}, "w9fspace"),
            ({"fill": "+"}, "fplus"), ({"fill": "#", "precision": 0}, "fhash_p0"),
            ({"shortest": True, "precision": 2}, "shortest_p2"),
            ({"scientific": True, "precision": 1, "width": 12}, "sci_p1_w12")]


def float_array(dt):
    with np.errstate(over="ignore"):  # (half: 123456789 is inf)
        return np.array(FLOATS).astype(dt)


def as_string_cases(c):
    for dt in (np.float32, np.float64, np.float16):
        for attrs, n in AS_ATTRS:
            if dt == np.float16 and n not in ("default", "shortest", "p3"):
                continue
            c.add(f"AsString_{dt.__name__}_{n}", "AsString",
                  {"input": float_array(dt)}, attrs)
    ints = [0, 1, -2, 127, -128, 100]
    for dt in (np.int8, np.int16, np.int32, np.int64, np.uint8, np.uint16, np.uint32,
               np.uint64):
        vals = np.array([abs(v) if dt().dtype.kind == "u" else v for v in ints], dt)
        c.add(f"AsString_{dt.__name__}", "AsString", {"input": vals})
        c.add(f"AsString_{dt.__name__}_w5", "AsString", {"input": vals}, {"width": 5})
    c.add("AsString_int64_extremes", "AsString",
          {"input": np.array([2 ** 63 - 1, -2 ** 63], I64)}, {"width": 3, "fill": "0"})
    c.add("AsString_uint64_max", "AsString", {"input": np.array([2 ** 64 - 1], np.uint64)})
    c.add("AsString_int32_fills", "AsString", {"input": I32([[5, -5], [0, 12]])},
          {"width": 4, "fill": "+"})
    c.add("AsString_int32_hash", "AsString", {"input": I32([5, -5])}, {"width": 4, "fill": "#"})
    c.add("AsString_int32_minus", "AsString", {"input": I32([5, -5])},
          {"width": 4, "fill": "-"})
    c.add("AsString_bool", "AsString", {"input": np.array([[True, False]])})
    c.add("AsString_bool_width", "AsString", {"input": np.array([True, False])}, {"width": 7})
    for dt in (np.complex64, np.complex128):
        z = np.array([1 + 2j, -0.5 - 1e10j, complex(np.nan, np.inf)], dt)
        c.add(f"AsString_{dt.__name__}", "AsString", {"input": z})
        c.add(f"AsString_{dt.__name__}_p2w8", "AsString", {"input": z},
              {"precision": 2, "width": 8})
        c.add(f"AsString_{dt.__name__}_shortest", "AsString", {"input": z}, {"shortest": True})
    c.add("AsString_string", "AsString", {"input": S(["ab", "", "日本"])}, {"width": 6})
    c.add("AsString_empty", "AsString", {"input": np.zeros((3, 0), np.float32)})
    c.add("AsString_scalar", "AsString", {"input": np.float32(2.5)})
    f = np.array([1.5], np.float32)
    c.add("AsStringErr_fill_x", "AsString", {"input": f}, {"fill": "x"},
          error='Fill argument not supported: "x"')
    c.add("AsStringErr_fill_long", "AsString", {"input": f}, {"fill": "ab"},
          error="Fill string must be one or fewer characters")
    c.add("AsStringErr_sci_short", "AsString", {"input": f},
          {"scientific": True, "shortest": True},
          error="Cannot select both scientific and shortest notation")
    c.add("AsStringErr_int_precision", "AsString", {"input": I32([1])}, {"precision": 2},
          error="precision not supported for datatype int32")
    c.add("AsStringErr_int_scientific", "AsString", {"input": I32([1])}, {"scientific": True},
          error="scientific and shortest format not supported for datatype int32")
    c.add("AsStringErr_int_shortest", "AsString", {"input": I64([1])}, {"shortest": True},
          error="scientific and shortest format not supported for datatype int64")
    c.add("AsStringErr_bool_precision", "AsString", {"input": np.array([True])},
          {"precision": 1}, error="precision not supported for datatype bool")
    c.add("AsString_string_fill", "AsString", {"input": S(["a", "bcdef"])},
          {"fill": "0", "width": 4})


NUMBERS = ["1.5", " 2", "3 ", "0x10", "1e3", "inf", "nan", "-INF", "+7", ".5", "5.", "-0",
           "1E-3", "\t8\n", "Infinity", "nan(1)", "-nan", "1e40", "1e-50", "00012", "-0X1f"]


def number_cases(c):
    for dt in (tf.float32, tf.float64):
        c.add(f"StringToNumber_{dt.name}", "StringToNumber",
              {"string_tensor": S(NUMBERS)}, {"out_type": dt})
    ints = [" 12 ", "+3", "-0", "0", "007", "2147483647", "-2147483648", "\t5\n"]
    for dt in (tf.int32, tf.int64):
        c.add(f"StringToNumber_{dt.name}", "StringToNumber", {"string_tensor": S(ints)},
              {"out_type": dt})
    c.add("StringToNumber_int64_big", "StringToNumber",
          {"string_tensor": S(["9223372036854775807", "-9223372036854775808"])},
          {"out_type": tf.int64})
    c.add("StringToNumber_uint32", "StringToNumber",
          {"string_tensor": S(["4294967295", "0", "+1"])}, {"out_type": tf.uint32})
    c.add("StringToNumber_uint64", "StringToNumber",
          {"string_tensor": S(["18446744073709551615", "5"])}, {"out_type": tf.uint64})
    c.add("StringToNumber_empty", "StringToNumber",
          {"string_tensor": S(np.zeros((2, 0), object))})
    c.add("StringToNumber_default", "StringToNumber", {"string_tensor": S([["1", "2.25"]])})
    bad = [("float", tf.float32, "1.5f"), ("empty", tf.float32, ""), ("space", tf.float64, " "),
           ("underscore", tf.float64, "1_000"), ("unicode_digit", tf.float32, "١"),
           ("int_float", tf.int32, "1.5"), ("int_hex", tf.int32, "0x10"),
           ("int_overflow", tf.int32, "2147483648"), ("int64_overflow", tf.int64,
                                                        "9223372036854775808"),
           ("uint_negative", tf.uint32, "-1"), ("int_space_inside", tf.int64, "1 2"),
           ("exp_only", tf.float32, "1e"),
           ("uint64_over", tf.uint64, "18446744073709551616")]
    for name, dt, text in bad:
        c.add(f"StringToNumberErr_{name}", "StringToNumber", {"string_tensor": S(["1", text])},
              {"out_type": dt},
              error=f"StringToNumberOp could not correctly convert string: {text}")


NGRAM_DATA = S(["a", "b", "c", "d", "e", "f", "g", "日", "本"])
NGRAM_SPLITS = [0, 4, 4, 5, 7, 9]


def ngram_cases(c):
    base = {"separator": " ", "left_pad": "<L>", "right_pad": "<R>",
            "preserve_short_sequences": False}
    variants = [
        ("w1", [1], 0, False), ("w2", [2], 0, False), ("w23", [2, 3], 0, False),
        ("w3_pad_dyn", [3], -1, False), ("w3_pad1", [3], 1, False), ("w2_pad5", [2], 5, False),
        ("w132_pad_dyn", [1, 3, 2], -1, False), ("w5_short", [5], 0, True),
        ("w5_short_pad1", [5], 1, True), ("w4_short_dyn", [4], -1, True),
        ("w3_no_preserve", [3], 0, False), ("w_none", [], 0, False),
        ("w6_short_23", [2, 6], 0, True),
    ]
    for dt in (I64, I32):
        for name, widths, pad, short in variants:
            if dt is I32 and name not in ("w23", "w3_pad_dyn"):
                continue
            c.add(f"StringNGrams_{dt.__name__}_{name}", "StringNGrams",
                  {"data": NGRAM_DATA, "data_splits": dt(NGRAM_SPLITS)},
                  {**base, "ngram_widths": widths, "pad_width": pad,
                   "preserve_short_sequences": short})
    c.add("StringNGrams_separator", "StringNGrams",
          {"data": NGRAM_DATA, "data_splits": I64([0, 9])},
          {**base, "separator": "--", "ngram_widths": [2], "pad_width": 1, "left_pad": "",
           "right_pad": "END"})
    c.add("StringNGrams_no_rows", "StringNGrams",
          {"data": S(np.zeros(0, object)), "data_splits": I64([0])},
          {**base, "ngram_widths": [2], "pad_width": -1})
    c.add("StringNGrams_empty_rows", "StringNGrams",
          {"data": S(np.zeros(0, object)), "data_splits": I64([0, 0, 0])},
          {**base, "ngram_widths": [3], "pad_width": -1})
    errs = [("first_split", I64([1, 4, 9]), "First split value must be 0, got 1"),
            ("decreasing", I64([0, 5, 4, 9]), "Invalid split value 4, must be in [5, 9]"),
            ("past_end", I64([0, 10]), "Invalid split value 10, must be in [0, 9]"),
            ("last_split", I64([0, 4, 8]), "Last split value must be data size. Expected 9, "
                                           "got 8")]
    for name, splits, words in errs:
        c.add(f"StringNGramsErr_{name}", "StringNGrams",
              {"data": NGRAM_DATA, "data_splits": splits},
              {**base, "ngram_widths": [2], "pad_width": 0}, error=words)
    c.add("StringNGramsErr_width", "StringNGrams",
          {"data": NGRAM_DATA, "data_splits": I64(NGRAM_SPLITS)},
          {**base, "ngram_widths": [0], "pad_width": 0},
          error="ngram_widths must contain positive values")


def chain_case(c):
    """The TextVectorization graph: lower -> strip punctuation -> split on whitespace ->
    bigrams of the ragged tokens (its values and row splits)."""
    text = S(["Hello, World! The QUICK brown fox...", "", "Ünïcödé? TEXT;  spaced\tout",
              "one"])
    name = "Chain_text_vectorization"
    with tf.name_scope(name):
        ph = tf.compat.v1.placeholder(tf.string, [None], name="input")
        lower = R.StringLower(input=ph, encoding="utf-8")
        clean = R.StaticRegexReplace(input=lower, pattern=KERAS_PUNCT, rewrite="")
        idx, vals, shape = R.StringSplitV2(input=clean, sep="")
        rows = tf.math.bincount(tf.cast(idx[:, 0], tf.int32), minlength=tf.shape(ph)[0],
                                dtype=tf.int64)
        splits = tf.concat([[0], tf.cumsum(rows)], 0)
        ngrams, ngram_splits = R.StringNGrams(
            data=vals, data_splits=splits, separator=" ", ngram_widths=[1, 2], left_pad="",
            right_pad="", pad_width=0, preserve_short_sequences=False)
        for k, o in enumerate([idx, vals, shape, ngrams, ngram_splits]):
            c.fetches[f"{name}/out{k}"] = tf.identity(o, name=f"out{k}")
    c.arrays[f"{name}/input"] = text
    c.index.append({"name": name, "op": "chain", "args": ["input"], "outputs": 5,
                    "attrs": {}, "grad": [], "error": None})


def main():
    generate(Cases(), [case_ops, regex_cases, split_cases, join_cases, substr_cases,
                       misc_cases, as_string_cases, number_cases, ngram_cases, chain_case],
             OUT, "strings")


if __name__ == "__main__":
    main()
