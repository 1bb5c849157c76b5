"""TensorFlow's CTC beam search (util/ctc/ctc_beam_search.h with the default scorer), step for
step, for CTCBeamSearchDecoder (tfg/kernels/ctc_ops.py).

Which paths survive depends on the order the beam's leaves are kept and extracted in when
their probabilities tie (several -inf ones are common), so the leaves live in a port of
TensorFlow's gtl::TopN (the version TensorFlow 2.21 ships: at most `limit` elements, a full
one a heap), and that in turn in ports of the libstdc++ algorithms it calls
(make_heap, push_heap, pop_heap, sort_heap and std::sort's introsort): the same comparisons in
the same order give the same leaves as TensorFlow's in the same order.

    decoder = BeamSearch(num_classes=4, beam_width=3, dtype=np.float32)
    for row in logits: decoder.step(row)          # row: [num_classes] logits, blank last
    paths, log_probs = decoder.top_paths(2, merge_repeated=True)
"""
import ctypes
import ctypes.util

import numpy as np

_LOG_ZERO = -np.inf


def _load_libm():
    """The C library's expf, log1pf, logf, exp and log: which of two near-equal beams ranks
    first can hang on their last bit, and glibc's expf/log1pf are not always correctly
    rounded (nor is numpy's float32 exp), so the decoder calls the very functions
    TensorFlow's kernel does. None where no libm loads (numpy's then, an ulp apart)."""
    for name in ("libm.so.6", ctypes.util.find_library("m")):
        try:
            lib = ctypes.CDLL(name)
        except (OSError, TypeError):
            continue
        fns = {}
        for fn, ctype in (("expf", ctypes.c_float), ("log1pf", ctypes.c_float),
                          ("logf", ctypes.c_float), ("exp", ctypes.c_double),
                          ("log", ctypes.c_double)):
            f = getattr(lib, fn)
            f.restype, f.argtypes = ctype, [ctype]
            fns[fn] = f
        return fns
    return None


_LIBM = _load_libm()


def c_expf(x):
    """expf(float(x)) as a float32."""
    x = np.float32(x)
    return np.float32(_LIBM["expf"](float(x))) if _LIBM else np.exp(x)


def c_log1pf(x):
    x = np.float32(x)
    return np.float32(_LIBM["log1pf"](float(x))) if _LIBM else np.log1p(x)


def c_log(x, dtype):
    """logf or log of x in dtype (float32 or float64)."""
    if dtype is np.float32:
        return np.float32(_LIBM["logf"](float(x))) if _LIBM else np.log(np.float32(x))
    return np.float64(_LIBM["log"](float(x))) if _LIBM else np.log(np.float64(x))


def c_exp(x, dtype):
    if dtype is np.float32:
        return c_expf(x)
    return np.float64(_LIBM["exp"](float(x))) if _LIBM else np.exp(np.float64(x))


# --- libstdc++'s heap and sort algorithms on a list, `greater` a strict ordering --------------
def _push_heap(a, hole, top, value, greater):
    parent = (hole - 1) // 2
    while hole > top and greater(a[parent], value):
        a[hole] = a[parent]
        hole, parent = parent, (parent - 1) // 2
    a[hole] = value


def _adjust_heap(a, first, hole, length, value, greater):
    """std::__adjust_heap on a[first:first + length] (hole relative to first)."""
    top, child = hole, hole
    while child < (length - 1) // 2:
        child = 2 * (child + 1)
        if greater(a[first + child], a[first + child - 1]):
            child -= 1
        a[first + hole] = a[first + child]
        hole = child
    if length % 2 == 0 and child == (length - 2) // 2:
        child = 2 * (child + 1)
        a[first + hole] = a[first + child - 1]
        hole = child - 1
    view = _Offset(a, first)
    _push_heap(view, hole, top, value, greater)


class _Offset:
    """a[first:] as an indexable view (the heap routines address a sub-range)."""

    def __init__(self, a, first):
        self.a, self.first = a, first

    def __getitem__(self, i):
        return self.a[self.first + i]

    def __setitem__(self, i, v):
        self.a[self.first + i] = v


def make_heap(a, first, last, greater):
    length = last - first
    if length < 2:
        return
    parent = (length - 2) // 2
    while True:
        _adjust_heap(a, first, parent, length, a[first + parent], greater)
        if parent == 0:
            return
        parent -= 1


def push_heap(a, first, last, greater):
    _push_heap(_Offset(a, first), last - first - 1, 0, a[last - 1], greater)


def pop_heap(a, first, last, greater):
    if last - first > 1:
        last -= 1
        value = a[last]
        a[last] = a[first]
        _adjust_heap(a, first, 0, last - first, value, greater)


def sort_heap(a, first, last, greater):
    while last - first > 1:
        pop_heap(a, first, last, greater)
        last -= 1


def _insertion_sort(a, first, last, greater):
    for i in range(first + 1, last):
        value = a[i]
        if greater(value, a[first]):
            a[first + 1:i + 1] = a[first:i]
            a[first] = value
        else:
            _unguarded_linear_insert(a, i, greater)


def _unguarded_linear_insert(a, last, greater):
    value = a[last]
    prev = last - 1
    while greater(value, a[prev]):
        a[last] = a[prev]
        last, prev = prev, prev - 1
    a[last] = value


def _move_median_to_first(a, result, x, y, z, greater):
    if greater(a[x], a[y]):
        if greater(a[y], a[z]):
            pick = y
        elif greater(a[x], a[z]):
            pick = z
        else:
            pick = x
    elif greater(a[x], a[z]):
        pick = x
    elif greater(a[y], a[z]):
        pick = z
    else:
        pick = y
    a[result], a[pick] = a[pick], a[result]


def _unguarded_partition(a, first, last, pivot, greater):
    while True:
        while greater(a[first], a[pivot]):
            first += 1
        last -= 1
        while greater(a[pivot], a[last]):
            last -= 1
        if not first < last:
            return first
        a[first], a[last] = a[last], a[first]
        first += 1


def _introsort_loop(a, first, last, depth, greater):
    while last - first > 16:
        if depth == 0:  # std::partial_sort(first, last, last): a heap sort
            make_heap(a, first, last, greater)
            sort_heap(a, first, last, greater)
            return
        depth -= 1
        mid = first + (last - first) // 2
        _move_median_to_first(a, first, first + 1, mid, last - 1, greater)
        cut = _unguarded_partition(a, first + 1, last, first, greater)
        _introsort_loop(a, cut, last, depth, greater)
        last = cut


def std_sort(a, greater):
    """std::sort(a.begin(), a.end(), greater) as libstdc++ does it."""
    n = len(a)
    if n < 2:
        return
    _introsort_loop(a, 0, n, 2 * (n.bit_length() - 1), greater)
    if n > 16:
        _insertion_sort(a, 0, 16, greater)
        for i in range(16, n):
            _unguarded_linear_insert(a, i, greater)
    else:
        _insertion_sort(a, 0, n, greater)


# --- gtl::TopN ---------------------------------------------------------------------------------
def _more_probable(a, b):
    """BeamComparer: a's current total above b's."""
    return a.total > b.total


class TopN:
    """gtl::TopN<BeamEntry*, BeamComparer>: the `limit` most probable entries pushed."""
    UNORDERED, BOTTOM_KNOWN, HEAP_SORTED = range(3)

    def __init__(self, limit):
        self.limit = limit
        self.reset()

    def reset(self):
        self.elements, self.state = [], self.UNORDERED

    def size(self):
        return min(len(self.elements), self.limit)

    def push(self, v):
        e, greater = self.elements, _more_probable
        if self.state != self.HEAP_SORTED:
            e.append(v)  # one past the limit for a moment: the heap drops the least
            if len(e) == self.limit + 1:
                make_heap(e, 0, len(e), greater)
                pop_heap(e, 0, len(e), greater)
                e.pop()
                self.state = self.HEAP_SORTED
            elif self.state != self.UNORDERED and not greater(e[-1], e[0]):
                e[0], e[-1] = e[-1], e[0]  # keep the bottom at the front
        elif greater(v, e[0]):  # replace the least
            pop_heap(e, 0, len(e), greater)
            e[-1] = v
            push_heap(e, 0, len(e), greater)

    def peek_bottom(self):
        e = self.elements
        if self.state == self.UNORDERED:
            low = 0
            for i in range(1, len(e)):
                if _more_probable(e[low], e[i]):
                    low = i
            e[0], e[low] = e[low], e[0]
            self.state = self.BOTTOM_KNOWN
        return e[0]

    def unsorted(self):
        return list(self.elements)

    def extract(self):
        """The entries, most probable first (destructive, as TopN::Extract)."""
        out, self.elements = self.elements, []
        if self.state != self.HEAP_SORTED:
            std_sort(out, _more_probable)
        else:
            sort_heap(out, 0, len(out), _more_probable)
        return out


# --- the beam ---------------------------------------------------------------------------------
class Entry:
    """A BeamEntry: a label sequence (its parent's plus `label`), its probabilities of the
    previous (old_*) and this step (total, blank, label_p), all log, in the op's dtype."""
    __slots__ = ("parent", "label", "children", "total", "blank", "label_p",
                 "old_total", "old_blank", "old_label_p")

    def __init__(self, parent, label, zero):
        self.parent, self.label, self.children = parent, label, {}
        self.total = self.blank = self.label_p = zero
        self.old_total = self.old_blank = self.old_label_p = zero

    def active(self):
        return self.total != _LOG_ZERO

    def reset_new(self, zero):
        self.total = self.blank = self.label_p = zero

    def labels(self, merge_repeated):
        """LabelSeq: the labels from the root, a repeat merged with merge_repeated."""
        out, prev, e = [], -1, self
        while e.parent is not None:
            if not merge_repeated or e.label != prev:
                out.append(e.label)
            prev, e = e.label, e.parent
        return out[::-1]


class BeamSearch:
    """CTCBeamSearchDecoder<T> with the default (no-op) scorer, one sequence at a time."""

    def __init__(self, num_classes, beam_width, dtype):
        self.num_classes, self.beam_width = num_classes, beam_width
        self.dtype = np.dtype(dtype).type
        self.zero = self.dtype(_LOG_ZERO)
        self.leaves = TopN(beam_width)
        self.reset()

    def reset(self):
        self.leaves.reset()
        root = Entry(None, -1, self.zero)
        root.total = root.blank = self.dtype(0)
        self.leaves.push(root)

    def _log_sum_exp(self, a, b):
        """LogSumExp in T with its correction in float (log1pf, expf), as TensorFlow's."""
        if a == _LOG_ZERO:
            return b
        if b == _LOG_ZERO:
            return a
        hi, lo = (a, b) if a > b else (b, a)
        return hi + self.dtype(c_log1pf(c_expf(lo - hi)))

    def _norm_offset(self, row):
        """max + log(sum(exp(row - max))), the sum in T in class order."""
        top, dt = row.max(), self.dtype
        total = dt(0)
        for v in row - top:
            total = total + c_exp(v, dt)
        return top + c_log(total, dt)

    def _candidate(self, total):
        leaves = self.leaves
        return total > _LOG_ZERO and (leaves.size() < self.beam_width
                                      or total > leaves.peek_bottom().total)

    def step(self, row):
        """One time step of logits row [num_classes] (blank last)."""
        norm = self._norm_offset(row)
        blank = self.num_classes - 1
        branches = self.leaves.extract()
        self.leaves.reset()
        for b in branches:
            b.old_total, b.old_blank, b.old_label_p = b.total, b.blank, b.label_p
        for b in branches:
            self._extend(b, row, norm, blank)
            self.leaves.push(b)
        for b in branches:
            if self._candidate(b.old_total):
                self._grow(b, row, norm)

    def _extend(self, b, row, norm, blank):
        """b's own sequence one step on: by its last label again or by a blank."""
        parent = b.parent
        if parent is not None:
            if parent.active():
                previous = parent.old_blank if b.label == parent.label else parent.old_total
                b.label_p = self._log_sum_exp(b.label_p, previous)
            b.label_p = b.label_p + (row[b.label] - norm)
        b.blank = b.old_total + row[blank] - norm
        b.total = self._log_sum_exp(b.blank, b.label_p)

    def _grow(self, b, row, norm):
        """b's children by every non-blank class, each kept if the beam takes it."""
        for label in range(self.num_classes - 1):
            c = b.children.get(label)
            if c is None:
                c = b.children[label] = Entry(b, label, self.zero)
            if c.active():
                continue
            c.blank = self.zero
            previous = b.old_blank if label == b.label else b.old_total
            c.label_p = row[label] - norm + previous
            c.total = c.label_p
            if self._candidate(c.total):
                if self.leaves.size() == self.beam_width:
                    self.leaves.peek_bottom().reset_new(self.zero)
                self.leaves.push(c)
            else:
                c.old_total = c.old_blank = c.old_label_p = self.zero
                c.reset_new(self.zero)

    def top_paths(self, n, merge_repeated):
        """The n most probable label sequences and their log probabilities, or the error
        words TensorFlow's TopPaths returns."""
        if n > self.beam_width:
            return None, "requested more paths than the beam width."
        if n > self.leaves.size():
            return None, "Less leaves in the beam search than requested."
        best = TopN(n)
        for e in self.leaves.unsorted():
            best.push(e)
        top = best.extract()[:n]
        return ([e.labels(merge_repeated) for e in top], [e.total for e in top]), None
