"""RE2 patterns (TensorFlow's regex ops) translated to Python `re` patterns of the same
meaning, and refused where tfg cannot promise that meaning or a bounded running time.

RE2 matches UTF-8 text a character at a time; the string ops decode each string with
`surrogateescape`, so a byte that is not UTF-8 becomes one lone surrogate. RE2 never matches
such a byte with `.` or a class, so every class here leaves the surrogates out. Every class is
written out as explicit code point ranges (`\\d`, `\\s`, `\\w`, `.`, POSIX classes, negations),
so no Python flag changes their meaning: RE2's `\\s` is [\\t\\n\\f\\r ] (Python's also has \\v),
`$` is the end of the text (Python's also matches before a final newline).

    >>> rx = Regex(rb"(\\w+)@(\\w+)")
    >>> rx.groups, rx.regex.fullmatch("me@host") is not None, rx.regex.match("\u00e9@x")
    (2, True, None)

Refused (`Unsupported`, a TfgInputError naming the construct):
    - what RE2 has and Python's `re` lacks or means otherwise: \\p{..} classes, \\C, (?i) and
      (?U) flags (RE2 folds case by Unicode's simple folding, Python by its own).
    - shapes Python's backtracking engine can take exponential time on, where RE2 is
      linear: a repeated group holding a quantifier (`(a+)+`), a repeated alternation whose
      branches can start alike or be empty (`(a|ab)*`).
What RE2 itself refuses (backreferences, lookaround, `a**`, counts over 1000) is `Re2Error`,
TensorFlow's "Invalid pattern" error.

What remains can still take polynomial time: `.*x` searched tries every start, `a*a*b` every
split of a run of a's, `(a|a)(a|a)...` every path. `Regex.work` bounds the steps for the
strings at hand (the starts, times the runs of characters each repeat can take, times the
paths through alternations whose branches can start alike), and the kernels refuse work over
a limit before running.
"""
import re

from tfg.errors import TfgInputError

MAX_CODE = 0x10FFFF
_SURROGATES = (0xD800, 0xDFFF)
_MAX_REPEAT = 1000  # RE2's limit on a counted repetition


class Re2Error(Exception):
    """A pattern RE2 refuses: TensorFlow fails with "Invalid pattern: ..., error: <this>"."""


class Unsupported(TfgInputError):
    """A valid RE2 pattern tfg does not run (see the module docstring)."""


# --- code point sets: sorted, merged [(lo, hi)] --------------------------------------------
def _normalize(ranges):
    out = []
    for lo, hi in sorted(ranges):
        if out and lo <= out[-1][1] + 1:
            out[-1] = (out[-1][0], max(out[-1][1], hi))
        else:
            out.append((lo, hi))
    return out


def _without_surrogates(ranges):
    out = []
    for lo, hi in ranges:
        if hi < _SURROGATES[0] or lo > _SURROGATES[1]:
            out.append((lo, hi))
            continue
        if lo < _SURROGATES[0]:
            out.append((lo, _SURROGATES[0] - 1))
        if hi > _SURROGATES[1]:
            out.append((_SURROGATES[1] + 1, hi))
    return out


def _complement(ranges):
    out, start = [], 0
    for lo, hi in _normalize(ranges):
        if lo > start:
            out.append((start, lo - 1))
        start = hi + 1
    if start <= MAX_CODE:
        out.append((start, MAX_CODE))
    return out


def _intersects(a, b):
    i = j = 0
    while i < len(a) and j < len(b):
        if a[i][1] < b[j][0]:
            i += 1
        elif b[j][1] < a[i][0]:
            j += 1
        else:
            return True
    return False


def _chars(text):
    return [(ord(c), ord(c)) for c in text]


_DIGIT = [(0x30, 0x39)]
_SPACE = _chars("\t\n\f\r ")
_WORD = [(0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)]
_PERL = {"d": _DIGIT, "s": _SPACE, "w": _WORD}
_POSIX = {
    "alnum": [(0x30, 0x39), (0x41, 0x5A), (0x61, 0x7A)], "alpha": [(0x41, 0x5A), (0x61, 0x7A)],
    "ascii": [(0, 0x7F)], "blank": _chars("\t "), "cntrl": [(0, 0x1F), (0x7F, 0x7F)],
    "digit": _DIGIT, "graph": [(0x21, 0x7E)], "lower": [(0x61, 0x7A)],
    "print": [(0x20, 0x7E)], "punct": [(0x21, 0x2F), (0x3A, 0x40), (0x5B, 0x60), (0x7B, 0x7E)],
    "space": _chars("\t\n\v\f\r "), "upper": [(0x41, 0x5A)], "word": _WORD,
    "xdigit": [(0x30, 0x39), (0x41, 0x46), (0x61, 0x66)],
}
_SIMPLE_ESCAPES = {"a": 7, "f": 12, "t": 9, "n": 10, "r": 13, "v": 11}


# --- the syntax tree ---------------------------------------------------------------------
# ("set", ranges) one character; ("assert", kind) an empty-width test; ("group", index or None,
# [branch, ...]) with each branch a list of nodes; ("repeat", node, lo, hi or None, lazy).
def _set(ranges):
    return ("set", _normalize(_without_surrogates(_normalize(ranges))))


class _Parser:
    """RE2's syntax (re2/syntax), read from the pattern's code points."""

    def __init__(self, text):
        self.text, self.i, self.groups = text, 0, 0

    def error(self, what):
        raise Re2Error(what)

    def peek(self, k=0):
        j = self.i + k
        return self.text[j] if j < len(self.text) else None

    def take(self):
        c = self.peek()
        self.i += 1
        return c

    def parse(self):
        flags = {"s": False, "m": False}
        branches = self.alternation(flags)
        if self.peek() is not None:  # a ')' without its '('
            self.error(f"unexpected ): {self.text}")
        return ("group", None, branches)

    def alternation(self, flags):
        branches = [self.sequence(flags)]
        while self.peek() == "|":
            self.take()
            branches.append(self.sequence(flags))
        return branches

    def sequence(self, flags):
        items = []
        while self.peek() not in (None, "|", ")"):
            start = self.i
            atoms = self.atom(flags)
            if atoms is None:
                continue
            quantified = self.quantifier(atoms[-1] if atoms else None, start)
            if quantified is not None:
                atoms[-1] = quantified
            items.extend(atoms)
        return items

    def quantifier(self, node, start):
        """The atom just read under a following *, +, ? or {n,m} (and a lazy ?), or None."""
        op_start = self.i
        rep = self.repeat_spec()
        if rep is None:
            return None
        if node is None:
            self.error(f"missing argument to repetition operator: {self.text[start:self.i]}")
        lo, hi = rep
        lazy = self.peek() == "?"
        if lazy:
            self.take()
        op_end = self.i
        if self.repeat_spec(peek_only=True):
            self.error(f"bad repetition operator: {self.text[op_start:op_end + 1]}")
        if node[0] == "assert":
            raise Unsupported("a repeated empty-width assertion (^*, \\b+ ...)")
        return ("repeat", node, lo, hi, lazy)

    def repeat_spec(self, peek_only=False):
        c = self.peek()
        if c in ("*", "+", "?"):
            if not peek_only:
                self.take()
            return {"*": (0, None), "+": (1, None), "?": (0, 1)}[c]
        if c != "{":
            return None
        m = re.match(r"\{(\d+)(,(\d*))?\}", self.text[self.i:])
        if m is None:
            return None  # a literal '{'
        if peek_only:
            return True
        lo = int(m.group(1))
        hi = lo if m.group(2) is None else (int(m.group(3)) if m.group(3) else None)
        if lo > _MAX_REPEAT or (hi is not None and (hi > _MAX_REPEAT or hi < lo)):
            self.error(f"invalid repetition size: {m.group(0)}")
        self.i += m.end()
        return lo, hi

    def atom(self, flags):
        """The nodes of one atom (a \\Q..\\E run gives several), or None for a flag group."""
        c = self.take()
        if c == "(":
            return self.group(flags)
        if c == "[":
            return [self.char_class()]
        if c == ".":
            return [_set([(0, MAX_CODE)] if flags["s"] else [(0, 9), (11, MAX_CODE)])]
        if c == "^":
            return [("assert", "mbol" if flags["m"] else "A")]
        if c == "$":
            return [("assert", "meol" if flags["m"] else "z")]
        if c in ("*", "+", "?"):
            self.error(f"missing argument to repetition operator: {c}")
        if c == "\\":
            return self.escape()
        if c == "{":
            self.i -= 1
            if self.repeat_spec(peek_only=True):  # a {n,m} with nothing before it
                self.error(f"missing argument to repetition operator: {c}")
            self.i += 1
        return [_set([(ord(c), ord(c))])]

    def group(self, flags):
        if self.peek() != "?":
            self.groups += 1
            index = self.groups
            return [("group", index, self.group_body(flags))]
        self.take()
        rest = self.text[self.i:]
        named = re.match(r"P?<([A-Za-z0-9_]+)>", rest)
        if named:
            self.i += named.end()
            self.groups += 1
            index = self.groups
            return [("group", index, self.group_body(flags))]
        m = re.match(r"([imsU-]*)([:)])", rest)
        if m is None or m.group(1).endswith("-") or m.group(1).count("-") > 1:
            self.error(f"invalid perl operator: (?{rest[:1]}")
        self.i += m.end()
        scoped = dict(flags) if m.group(2) == ":" else flags
        on = True
        for f in m.group(1):
            if f == "-":
                on = False
            elif f in "iU":
                if on:
                    raise Unsupported(f"the (?{f}) flag (RE2's "
                                      + ("Unicode case folding" if f == "i" else
                                         "swapped greediness") + " differs from Python's)")
            else:
                scoped[f] = on
        if m.group(2) == ")":
            return None  # flags for the rest of the enclosing group
        return [("group", None, self.group_body(scoped))]

    def group_body(self, flags):
        branches = self.alternation(dict(flags))
        if self.take() != ")":
            self.error(f"missing ): {self.text}")
        return branches

    def escape(self):
        c = self.take()
        if c is None:
            self.error("trailing \\")
        if c in _PERL or c.lower() in _PERL:
            ranges = _PERL[c.lower()]
            return [_set(_complement(ranges) if c.isupper() else ranges)]
        if c in ("b", "B", "A", "z"):
            return [("assert", c)]
        if c == "Q":
            end = self.text.find("\\E", self.i)
            literal = self.text[self.i:] if end < 0 else self.text[self.i:end]
            self.i = len(self.text) if end < 0 else end + 2
            return [_set([(ord(x), ord(x))]) for x in literal]
        self.i -= 1
        code = self.escaped_char()
        return [_set([(code, code)])]

    def escaped_char(self):
        """The code point of a one-character escape (after the backslash)."""
        c = self.take()
        if c is None:
            self.error("trailing \\")
        if c in ("p", "P"):
            raise Unsupported(f"the Unicode class \\{c} (Python's re has no \\p)")
        if c == "C":
            raise Unsupported("\\C (any byte: tfg matches UTF-8 characters)")
        if c in _SIMPLE_ESCAPES:
            return _SIMPLE_ESCAPES[c]
        if "0" <= c <= "7":
            nxt = self.peek()
            if c != "0" and not (nxt is not None and "0" <= nxt <= "7"):
                self.error(f"invalid escape sequence: \\{c}")
            digits = c
            while len(digits) < 3 and self.peek() is not None and "0" <= self.peek() <= "7":
                digits += self.take()
            return int(digits, 8)
        if c == "x":
            m = re.match(r"\{([0-9A-Fa-f]+)\}|([0-9A-Fa-f]{2})", self.text[self.i:])
            if m is None or int(m.group(1) or m.group(2), 16) > MAX_CODE:
                self.error(f"invalid escape sequence: \\x{self.text[self.i:self.i + 2]}")
            self.i += m.end()
            return int(m.group(1) or m.group(2), 16)
        if ord(c) < 0x80 and not c.isalnum():
            return ord(c)
        self.error(f"invalid escape sequence: \\{c}")

    def char_class(self):
        start = self.i - 1
        negate = self.peek() == "^"
        if negate:
            self.take()
        ranges, first = [], True
        while True:
            c = self.peek()
            if c is None:
                self.error(f"missing ]: {self.text[start:]}")
            if c == "]" and not first:
                self.take()
                break
            first = False
            posix = re.match(r"\[:(\^?)([a-z]+):\]", self.text[self.i:])
            if posix:
                if posix.group(2) not in _POSIX:
                    self.error(f"invalid character class range: {posix.group(0)}")
                got = _POSIX[posix.group(2)]
                ranges += _complement(got) if posix.group(1) else got
                self.i += posix.end()
                continue
            if c == "\\" and self.peek(1) is not None and self.peek(1).lower() in _PERL:
                letter = self.peek(1)
                self.i += 2
                got = _PERL[letter.lower()]
                ranges += _complement(got) if letter.isupper() else got
                continue
            lo = self.class_char()
            if self.peek() == "-" and self.peek(1) not in (None, "]"):
                self.take()
                hi = self.class_char()
                if hi < lo:
                    self.error(f"bad character class range: {chr(lo)}-{chr(hi)}")
                ranges.append((lo, hi))
            else:
                ranges.append((lo, lo))
        return _set(_complement(ranges) if negate else ranges)

    def class_char(self):
        c = self.take()
        if c == "\\":
            return self.escaped_char()
        return ord(c)


# --- facts about the tree ----------------------------------------------------------------
def _nullable(node):
    kind = node[0]
    if kind == "set":
        return False
    if kind == "assert":
        return True
    if kind == "repeat":
        return node[2] == 0 or _nullable(node[1])
    return any(all(_nullable(n) for n in b) for b in node[2])


def _char_set(node):
    """Every code point the node can consume."""
    kind = node[0]
    if kind == "set":
        return node[1]
    if kind == "assert":
        return []
    if kind == "repeat":
        return _char_set(node[1])
    return _normalize([r for b in node[2] for n in b for r in _char_set(n)])


def _first_set(seq):
    """The code points a sequence can start with."""
    out = []
    for n in seq:
        if n[0] == "set":
            out += n[1]
        elif n[0] == "repeat":
            out += _first_set([n[1]])
        elif n[0] == "group":
            for b in n[2]:
                out += _first_set(b)
        if not _nullable(n):
            break
    return _normalize(out)


def _variable(node):
    return node[0] == "repeat" and node[3] != node[2]


def _walk(node):
    yield node
    if node[0] == "repeat":
        yield from _walk(node[1])
    elif node[0] == "group":
        for b in node[2]:
            for n in b:
                yield from _walk(n)


def _check_nesting(root):
    """Refuse a repeat around a variable repeat, or around an ambiguous alternation."""
    for node in _walk(root):
        if node[0] != "repeat" or (node[3] is not None and node[3] <= 1):
            continue
        inner = list(_walk(node[1]))
        if any(_variable(n) for n in inner):
            raise Unsupported("nested quantifiers (a repeated group that holds a quantifier, "
                              "as in (a+)+): Python's backtracking engine can take "
                              "exponential time on them, RE2 linear")
        for g in inner:
            if g[0] == "group" and len(g[2]) > 1:
                _check_alternation(g[2])


def _check_alternation(branches):
    firsts = []
    for b in branches:
        if all(_nullable(n) for n in b):
            raise Unsupported("a repeated alternation with an empty branch: Python's "
                              "backtracking engine can take exponential time on it")
        first = _first_set(b)
        if any(_intersects(first, f) for f in firsts):
            raise Unsupported("a repeated alternation whose branches can start with the same "
                              "character (as in (a|ab)*): Python's backtracking engine can "
                              "take exponential time on it, RE2 linear")
        firsts.append(first)


def _ambiguity(root):
    """The product of the branch counts of the alternations (outside repeats) whose branches
    can start alike or be empty: the paths a backtracking engine may try through them."""
    paths = 1
    for node in _walk(root):
        if node[0] == "group" and len(node[2]) > 1:
            firsts = [_first_set(b) for b in node[2]]
            if any(all(_nullable(n) for n in b) for b in node[2]) or any(
                    _intersects(f, g) for i, f in enumerate(firsts) for g in firsts[i + 1:]):
                paths *= len(node[2])
    return paths


# --- Python's pattern --------------------------------------------------------------------
def _class_text(ranges):
    def one(c):
        return f"\\U{c:08x}"
    parts = [one(lo) if lo == hi else f"{one(lo)}-{one(hi)}" for lo, hi in ranges]
    return "[" + "".join(parts) + "]"


_ASSERTS = {"A": r"\A", "z": r"\Z", "b": r"\b", "B": r"\B", "mbol": r"(?:(?<=\n)|\A)",
            "meol": r"(?=\n|\Z)"}


def _emit(node):
    kind = node[0]
    if kind == "set":
        ranges = node[1]
        if not ranges:
            return "(?!)"
        if len(ranges) == 1 and ranges[0][0] == ranges[0][1]:
            return re.escape(chr(ranges[0][0]))
        return _class_text(ranges)
    if kind == "assert":
        return _ASSERTS[node[1]]
    if kind == "group":
        body = "|".join("".join(_emit(n) for n in b) for b in node[2])
        return f"({body})" if node[1] is not None else f"(?:{body})"
    inner, lo, hi, lazy = _emit(node[1]), node[2], node[3], node[4]
    if node[1][0] == "set" and len(inner) > 1 and not inner.startswith("["):
        inner = f"(?:{inner})"  # an escaped literal, e.g. '\\.'
    if (lo, hi) == (0, None):
        q = "*"
    elif (lo, hi) == (1, None):
        q = "+"
    elif (lo, hi) == (0, 1):
        q = "?"
    else:
        q = f"{{{lo},{'' if hi is None else hi}}}" if hi != lo else f"{{{lo}}}"
    return inner + q + ("?" if lazy else "")


class Regex:
    """One RE2 pattern (bytes) as a compiled Python pattern over surrogateescape-decoded
    text: `regex`, `groups` (its capture groups), `runs` (a regex of each variable repeat's
    characters, for the work estimate), `first` (a regex of the characters a match can start
    with, or None when it can start anywhere or be empty)."""

    def __init__(self, pattern):
        try:
            text = pattern.decode("utf-8")
        except UnicodeDecodeError:
            raise Re2Error("invalid UTF-8") from None
        parser = _Parser(text)
        root = parser.parse()
        _check_nesting(root)
        self.paths = _ambiguity(root)
        self.python = "".join("".join(_emit(n) for n in b) for b in [[root]])
        self.regex = re.compile(self.python, re.ASCII)
        self.groups = parser.groups
        self.runs = [(re.compile(_class_text(_char_set(n)) + "+"), n[3])
                     for n in _walk(root) if _variable(n) and _char_set(n)]
        first = _first_set([root])
        self.first = (re.compile(_class_text(first)) if first and not _nullable(root)
                      else None)

    def work(self, text, search):
        """About how many steps Python's engine may take on `text`: per start (every
        position when searching, those a match can begin at), the product of the runs each
        variable repeat can take."""
        steps = self.paths
        for run, hi in self.runs:
            longest = max((m.end() - m.start() for m in run.finditer(text)), default=0)
            steps *= min(longest, hi if hi is not None else longest) + 1
        if not search:
            return steps
        starts = len(text) + 1 if self.first is None else len(self.first.findall(text))
        return steps * max(starts, 1)
