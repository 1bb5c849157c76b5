#!/usr/bin/env python3
"""TensorFlow's values and errors of the Unicode ops (UnicodeDecode, UnicodeDecodeWithOffsets,
UnicodeEncode, UnicodeTranscode) for tests/test_unicode_ops.py. NEEDS TENSORFLOW; never
imports tfg:

    /work/tfvenv/bin/python tools/gen_unicode_fixtures.py

Writes tests/fixtures/unicode/: unicode.pb (one tf.compat.v1 graph: per case `<case>/<arg>`
placeholders -> `<case>/out<k>`, Identity of the op's output k), unicode.npz (feeds and
`<case>/out<k>`; feeds as numpy bytes arrays, which drop trailing NULs, so no feed ends in
one; TensorFlow's string outputs as the hex of their bytes) and cases.json. The cases:
ASCII, multi-byte and emoji text, empty strings and tensors, control characters, UTF-16-BE
and UTF-32-BE input, every class of malformed UTF-8, UTF-16 and UTF-32 sequence under each
errors policy, and TensorFlow's refusals.

(TensorFlow 2.21 aborts its whole process on UnicodeDecodeWithOffsets with Tsplits=int32: its
kernel reads the int64 offsets output as int32, a CHECK failure. No case runs it.)
"""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from fixture_cases import CaseSet, fixture_dir, generate  # noqa: E402

OUT = fixture_dir("unicode")
R = tf.raw_ops
U8, U16, U32 = "UTF-8", "UTF-16-BE", "UTF-32-BE"
ENCODINGS = (U8, U16, U32)
RNG = np.random.default_rng(47)


class Cases(CaseSet):
    """The cases' graph pieces, arrays and index (tools/fixture_cases.py writes them)."""

    def add(self, name, op, args, attrs=None, error=None):
        """args: {input name: array}; attrs: the op's attrs (tf.int32 for Tsplits)."""
        attrs = attrs or {}
        with tf.name_scope(name):
            phs = {k: tf.compat.v1.placeholder(tf.string if v.dtype.kind == "S" else
                                               tf.as_dtype(v.dtype),
                                               None if error else v.shape, name=k)
                   for k, v in args.items()}
            result = getattr(R, op)(**phs, **attrs, name="op")
            outs = list(result) if isinstance(result, (list, tuple)) else [result]
            for k, o in enumerate(outs):
                self.fetches[f"{name}/out{k}"] = tf.identity(o, name=f"out{k}")
            self.arrays.update({f"{name}/{k}": v for k, v in args.items()})
        self.index.append({"name": name, "op": op, "args": list(args), "outputs": len(outs),
                           "attrs": {k: v if isinstance(v, (int, bool)) else str(v)
                                     for k, v in attrs.items()},
                           "grad": [], "rtol": 0, "atol": 0, "error": error})

    def write(self, out, stem, graph):
        """As CaseSet's, strings as bytes arrays (an npz never pickles): the feeds as they
        are, TensorFlow's strings (UTF-16 and UTF-32 often end in a NUL, which an 'S' array
        would drop) in hex."""
        for k, v in self.arrays.items():
            if isinstance(v, bytes):  # (a scalar string Session.run returns)
                v = np.array(v, dtype=object)
            if v.dtype == object:
                self.arrays[k] = np.array([s.hex() for s in v.reshape(-1)],
                                          dtype="S").reshape(v.shape)
            elif v.dtype.kind == "S":
                assert not any(s.endswith(b"\0") for s in v.reshape(-1)), k
        super().write(out, stem, graph)


def strings(*items, shape=None):
    """A bytes array ('S'; str items as UTF-8)."""
    b = [s.encode() if isinstance(s, str) else s for s in items]
    out = np.array(b, dtype="S") if b else np.zeros(0, "S1")
    return out.reshape(shape) if shape else out


TEXT = strings("hello", "", "caf\u00e9", "\u4f60\u597d\u4e16\u754c", "\U0001f600\U0001f44d!",
               "a\tb\nc", " ", "\u00e9\u0301\u05d0\u0627")
# one or more of every kind of malformed UTF-8: a stray continuation byte, bytes no sequence
# starts with (C0, C1, F5..FF), truncated 2/3/4-byte sequences (at the end and mid-text),
# overlong forms, encoded surrogates, past U+10FFFF, a 5-byte form, mixed with good text
MALFORMED_UTF8 = strings(b"\x80", b"a\xbfb", b"\xc0\xaf", b"\xc1\xbf", b"\xf5\x80\x80\x80",
                         b"\xff\xfe", b"\xc3", b"x\xe2\x82", b"\xe2\x82x", b"\xf0\x9f\x98",
                         b"\xf0\x9f\x98 \xf0\x9f", b"\xe0\x80\xaf", b"\xf0\x80\x80\xaf",
                         b"\xed\xa0\x80", b"\xed\xbf\xbf\xed\xa0\x80", b"\xf4\x90\x80\x80",
                         b"\xf8\x88\x80\x80\x80", b"\xfc\x84\x80\x80\x80\x80",
                         b"caf\xe9!", b"\xc2\xc2\xa9", b"\xe1\x80\xe1\x80\x80",
                         "ok \u20ac".encode() + b"\x9f" + "\U0001f600".encode())
CONTROL = strings(b"a\x00b", b"\x01\x1f\x20\x7f", "\t\u0085\r\n".encode(), b"x\x1b[0m")


def utf16(*texts):
    return strings(*[t.encode("utf-16-be") for t in texts])


def utf32(*texts):
    return strings(*[t.encode("utf-32-be") for t in texts])


UTF16_TEXT = utf16("hello", "", "caf\u00e9", "\U0001f600\U0001f44d", "\u4f60\u597d", "a\x01b")
# lone high and low surrogates, a high one at the end with 0/1 bytes after it, odd lengths,
# reversed pairs, a byte order mark (kept as U+FEFF)
MALFORMED_UTF16 = strings(b"\x00a\xd8\x00", b"\x00a\xd8\x00\x00b", b"\xdc\x00\x00b",
                          b"\xd8\x00\xd8\x00\xdc\x00", b"\xd8\x00A", b"\xdc\x00\xd8",
                          b"\x00a\x00", b"\xde\x00\xd8\x3d", b"\xfe\xff\x00A", b"\xd8")
UTF32_TEXT = utf32("hello", "", "caf\u00e9", "\U0001f600", "\u4f60\x02")
MALFORMED_UTF32 = strings(b"\x00\x11\x00\x00", b"\x00\x00\xd8\x00\x00\x00\x00A",
                          b"\x7f\xff\xff\xff", b"\xff\xff\xff\xff", b"\x00\x00\x00A\x00\x01",
                          b"\x00\x11\x00\x00\x00", b"\x00\x00\xdf\xff")


def random_malformed(alphabet, longest, count=300):
    """count random strings of 0..longest bytes drawn from `alphabet` (the bytes the
    encoding's rules turn on), none ending in a NUL."""
    out = []
    for _ in range(count):
        s = bytes(RNG.choice(alphabet, RNG.integers(0, longest + 1)))
        out.append(s[:-1] + b"A" if s.endswith(b"\0") else s)
    return strings(*out)


# lead bytes of every class, each end of every continuation range, ASCII and controls
FUZZ = {U8: random_malformed([0x00, 0x01, 0x41, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF,
                              0xC0, 0xC1, 0xC2, 0xDF, 0xE0, 0xE1, 0xED, 0xEF, 0xF0, 0xF1,
                              0xF4, 0xF5, 0xFF], 8),
        U16: random_malformed([0x00, 0x41, 0xD8, 0xDB, 0xDC, 0xDF, 0xFF, 0x01], 9),
        U32: random_malformed([0x00, 0x10, 0x11, 0xD8, 0xDF, 0xFF, 0x41, 0x01], 9)}


def fuzz_cases(c):
    for enc, tag in ((U8, "8"), (U16, "16"), (U32, "32")):
        c.add(f"DecOff_fuzz{tag}", "UnicodeDecodeWithOffsets", {"input": FUZZ[enc]},
              {"input_encoding": enc})
        c.add(f"DecOff_fuzz{tag}_ignore", "UnicodeDecodeWithOffsets", {"input": FUZZ[enc]},
              {"input_encoding": enc, "errors": "ignore", "replace_control_characters": True})
        c.add(f"Tr_fuzz{tag}", "UnicodeTranscode", {"input": FUZZ[enc]},
              {"input_encoding": enc, "output_encoding": U8 if enc != U8 else U16,
               "replacement_char": 0x10400})


def decode_cases(c):
    for op in ("UnicodeDecode", "UnicodeDecodeWithOffsets"):
        short = "Dec" if op == "UnicodeDecode" else "DecOff"
        d = {"input_encoding": U8}
        c.add(f"{short}_text", op, {"input": TEXT}, d)
        c.add(f"{short}_text_2d", op, {"input": TEXT.reshape(2, 4)}, d)
        c.add(f"{short}_scalar", op, {"input": np.array("\u00fcber".encode(), "S")}, d)
        c.add(f"{short}_empty", op, {"input": strings()}, d)
        c.add(f"{short}_empty_strings", op, {"input": strings("", "", shape=(2, 1))}, d)
        c.add(f"{short}_alias_utf8", op, {"input": TEXT[:4]}, {"input_encoding": "utf8"})
        c.add(f"{short}_alias_utf_16be", op, {"input": UTF16_TEXT},
              {"input_encoding": "utf_16be"})
        for errors in ("replace", "ignore"):
            for rc in (0xFFFD, 0x3F, 0x1F600):
                if errors == "ignore" and rc != 0xFFFD:
                    continue
                attrs = {**d, "errors": errors, "replacement_char": rc}
                c.add(f"{short}_malformed_{errors}_{rc:x}", op, {"input": MALFORMED_UTF8},
                      attrs)
                c.add(f"{short}_malformed16_{errors}_{rc:x}", op,
                      {"input": MALFORMED_UTF16}, {**attrs, "input_encoding": U16})
                c.add(f"{short}_malformed32_{errors}_{rc:x}", op,
                      {"input": MALFORMED_UTF32}, {**attrs, "input_encoding": U32})
            c.add(f"{short}_control_{errors}", op, {"input": CONTROL},
                  {**d, "errors": errors, "replace_control_characters": True})
        c.add(f"{short}_control_kept", op, {"input": CONTROL}, d)
        # strict: good text and control characters (replaced, not an error) decode
        c.add(f"{short}_strict_ok", op, {"input": TEXT}, {**d, "errors": "strict"})
        c.add(f"{short}_strict_control", op, {"input": CONTROL},
              {**d, "errors": "strict", "replace_control_characters": True})
        c.add(f"{short}_utf16", op, {"input": UTF16_TEXT}, {"input_encoding": U16})
        c.add(f"{short}_utf32", op, {"input": UTF32_TEXT}, {"input_encoding": U32})
        for i, bad in enumerate((b"ok\xff", b"\xe2\x82", b"\xed\xa0\x80")):
            c.add(f"{short}Err_strict{i}", op, {"input": strings("fine", bad)},
                  {**d, "errors": "strict"}, error="Invalid formatting on input string")
        c.add(f"{short}Err_strict16", op, {"input": strings(b"\xdc\x00")},
              {"input_encoding": U16, "errors": "strict"},
              error="Invalid formatting on input string")
        c.add(f"{short}Err_encoding", op, {"input": TEXT}, {"input_encoding": "NoSuchCode"},
              error="Could not create converter for input encoding: NoSuchCode")
        for rc in (-1, 0x110000):
            c.add(f"{short}Err_rc{rc & 0xffffff:x}", op, {"input": TEXT},
                  {**d, "replacement_char": rc},
                  error="replacement_char out of unicode codepoint range")
    c.add("Dec_splits_int32", "UnicodeDecode", {"input": MALFORMED_UTF8},
          {"input_encoding": U8, "Tsplits": tf.int32})


def transcode_cases(c):
    inputs = {U8: np.concatenate([TEXT, MALFORMED_UTF8, CONTROL]),
              U16: np.concatenate([UTF16_TEXT, MALFORMED_UTF16]),
              U32: np.concatenate([UTF32_TEXT, MALFORMED_UTF32])}
    tag = {U8: "8", U16: "16", U32: "32"}
    for src in ENCODINGS:
        for dst in ENCODINGS:
            c.add(f"Tr_{tag[src]}_{tag[dst]}", "UnicodeTranscode", {"input": inputs[src]},
                  {"input_encoding": src, "output_encoding": dst})
        for errors in ("replace", "ignore"):
            for rc in (0xFFFD, 0xD800):  # a lone surrogate: U+FFFD in UTF-8, kept in 16/32
                for dst in ENCODINGS:
                    if errors == "ignore" and rc != 0xFFFD:
                        continue
                    c.add(f"Tr_{tag[src]}_{tag[dst]}_{errors}_{rc:x}_control",
                          "UnicodeTranscode", {"input": inputs[src]},
                          {"input_encoding": src, "output_encoding": dst, "errors": errors,
                           "replacement_char": rc, "replace_control_characters": True})
    c.add("Tr_2d", "UnicodeTranscode", {"input": TEXT.reshape(4, 2)},
          {"input_encoding": U8, "output_encoding": U16})
    c.add("Tr_scalar", "UnicodeTranscode", {"input": np.array(b"\xf0\x9f\x98\x80", "S")},
          {"input_encoding": U8, "output_encoding": U32})
    c.add("Tr_empty", "UnicodeTranscode", {"input": strings(shape=(0, 3))},
          {"input_encoding": U8, "output_encoding": U8})
    c.add("Tr_strict_ok", "UnicodeTranscode", {"input": TEXT},
          {"input_encoding": U8, "output_encoding": U16, "errors": "strict"})
    # strict transcoding fails on control characters it is told to replace
    c.add("TrErr_strict_control", "UnicodeTranscode", {"input": CONTROL},
          {"input_encoding": U8, "output_encoding": U8, "errors": "strict",
           "replace_control_characters": True}, error="Invalid formatting on input string")
    c.add("TrErr_strict", "UnicodeTranscode", {"input": MALFORMED_UTF16},
          {"input_encoding": U16, "output_encoding": U8, "errors": "strict"},
          error="Invalid formatting on input string")
    c.add("TrErr_encoding", "UnicodeTranscode", {"input": TEXT},
          {"input_encoding": "UTF-7-ish", "output_encoding": U8},
          error="Could not create converter for input encoding: UTF-7-ish")
    c.add("TrErr_rc", "UnicodeTranscode", {"input": TEXT},
          {"input_encoding": U8, "output_encoding": U8, "replacement_char": 0x7FFFFFFF},
          error="replacement_char out of unicode codepoint range")


CODE_POINTS = np.array([0x48, 0x69, 0xE9, 0x4F60, 0x1F600, 0, 0x7F, 0x80, 0x7FF, 0x800, 0xFFFF,
                        0x10000, 0x10FFFF, 0xFEFF], np.int32)
BAD_POINTS = np.array([0x41, 0xD800, 0x110000, 0x42, -1, 0xDFFF, 0xD83D, 0xDE00,
                       -2 ** 31, 2 ** 31 - 1, 0x43], np.int32)


def encode_cases(c):
    tag = {U8: "8", U16: "16", U32: "32"}
    I64 = np.int64
    for dst in ENCODINGS:
        c.add(f"Enc_{tag[dst]}", "UnicodeEncode",
              {"input_values": CODE_POINTS, "input_splits": I64([0, 2, 2, 5, 14])},
              {"output_encoding": dst})
        for errors in ("replace", "ignore"):
            for rc in (0xFFFD, 0x3F, 0xDC00, 0x10FFFF):
                if errors == "ignore" and rc != 0xFFFD:
                    continue
                c.add(f"Enc_{tag[dst]}_bad_{errors}_{rc:x}", "UnicodeEncode",
                      {"input_values": BAD_POINTS, "input_splits": I64([0, 3, 3, 8, 11])},
                      {"output_encoding": dst, "errors": errors, "replacement_char": rc})
    c.add("Enc_splits_int32", "UnicodeEncode",
          {"input_values": CODE_POINTS, "input_splits": np.int32([0, 7, 14])},
          {"output_encoding": U8})  # (Tsplits from the splits' dtype)
    c.add("Enc_empty", "UnicodeEncode",
          {"input_values": np.zeros(0, np.int32), "input_splits": I64([0])},
          {"output_encoding": U8})
    c.add("Enc_empty_rows", "UnicodeEncode",
          {"input_values": np.zeros(0, np.int32), "input_splits": I64([0, 0, 0])},
          {"output_encoding": U16})
    c.add("Enc_strict_ok", "UnicodeEncode",
          {"input_values": CODE_POINTS, "input_splits": I64([0, 14])},
          {"output_encoding": U32, "errors": "strict"})
    cp = {"output_encoding": U8}
    for name, values, splits, attrs, error in (
            ("strict_range", [65, 0x110000], [0, 2], {"errors": "strict"},
             "Code point is out of range for Unicode, or is a surrogate."),
            ("strict_surrogate", [65, 0xDC00], [0, 1, 2], {"errors": "strict"},
             "Code point is out of range for Unicode, or is a surrogate."),
            ("strict_negative", [-5], [0, 1], {"errors": "strict"},
             "Code point is out of range for Unicode, or is a surrogate."),
            ("first_split", [65, 66], [1, 2], {}, "First value in input_splits must be zero."),
            ("last_split", [65, 66], [0, 1], {},
             "Last value in input_splits must be equal to length of input_tensor."),
            ("last_split_past", [65, 66], [0, 3], {},
             "Last value in input_splits must be equal to length of input_tensor."),
            ("descending", [65, 66], [0, 2, 1, 2], {},
             "Values in input_splits must be equal or in ascending order."),
            ("no_splits", [65, 66], [], {}, "Input_splits should contain elements, but given "
                                            "input_values has 0 elements"),
            ("rank", [[65, 66]], [0, 2], {},
             "Both the input_tensor and input_splits should be of rank 1."),
            ("rc", [65], [0, 1], {"replacement_char": -3},
             "replacement_char out of unicode codepoint range")):
        c.add(f"EncErr_{name}", "UnicodeEncode",
              {"input_values": np.array(values, np.int32),
               "input_splits": np.array(splits, np.int64)}, {**cp, **attrs}, error=error)


if __name__ == "__main__":
    generate(Cases(), [decode_cases, transcode_cases, encode_cases, fuzz_cases], OUT, "unicode")
