"""Lookup tables: HashTableV2 (initialized once), MutableHashTableV2 and
MutableHashTableOfTensorsV2 (changed by insert/remove/import), their Anonymous forms, and the
ops that initialize, read, change, export and import them.

    t = HashTableV2(key_dtype=string, value_dtype=int64)
    InitializeTableV2(t, ["a", "b"], [1, 2]); LookupTableFindV2(t, [["a", "z"]], -1) -> [[1, -1]]
    LookupTableFindV2 before any initializer -> error "Table not initialized."
    m = MutableHashTableOfTensorsV2(key_dtype=int64, value_dtype=float, value_shape=[2])
    LookupTableInsertV2(m, [7], [[1., 2.]]); LookupTableFindV2(m, [7, 8], [0., 0.])
        -> [[1., 2.], [0., 0.]]

A table lives in `step.session_resources` like a queue, keyed by (container, shared_name), or
by the node's name when shared_name is empty (private to the node unless
`use_node_name_sharing`); its handle is the `Table` object. Anonymous tables are made afresh by
each run of their op and kept nowhere. `resolve_table` also accepts a `ResourceHandle` naming
a table in a resource manager. Tables are in host memory: every kernel here is CPU only.

What TensorFlow's kernels do, kept here (lookup_table_op.cc, initializable_lookup_table.cc,
lookup_util.cc): an initializer on an initialized HashTable is a no-op when it brings as many
entries as the table holds and fails "Table was already initialized with different data."
otherwise; a key given two values in one initialization fails, leaving the entries before it
in an uninitialized table; LookupTableImportV2 initializes a HashTable the same way and
replaces a mutable table's contents; Find takes a default of the value shape, or one per key
(which a mutable table honours, and a HashTable accepts but reads only the first of).
"""
import os
import re
import stat
import threading

import numpy as np

from tfg.kernels._util import fail, s, tf_dims
from tfg.kernels.registry import kernel
from tfg.kernels.resources import ResourceHandle
from tfg.schemas.dtypes import DType

_S, _I32, _I64 = DType.STRING, DType.INT32, DType.INT64
_F32, _F64, _B = DType.FLOAT, DType.DOUBLE, DType.BOOL
# (key dtype, value dtype) pairs TensorFlow 2.21 registers kernels for, per kind of table
# (`tensorflow.python.framework.kernels.get_registered_kernels_for_op`). MutableHashTable's
# (int64, variant) is left out: tfg keeps no variant values in tables.
_TENSOR_PAIRS = frozenset(
    [(_I32, v) for v in (_F64, _F32, _I32)]
    + [(_I64, v) for v in (_F64, _F32, _I32, _I64, _S)]
    + [(_S, v) for v in (_B, _F64, _F32, _I32, _I64)])
_PAIRS = {"HashTable": _TENSOR_PAIRS | {(_I32, _S), (_S, _S)},
          "MutableHashTable": _TENSOR_PAIRS,
          "MutableHashTableOfTensors": _TENSOR_PAIRS}
# InitializeTableFromTextFileV2 reads files up to this size.
MAX_TEXT_FILE_BYTES = 1 << 30
_MISSING = object()


def _type_name(dtype):
    """A dtype as TensorFlow's DataTypeString writes it in its messages (float, double)."""
    name = dtype.tf_name if isinstance(dtype, DType) else str(dtype)
    return {"float32": "float", "float64": "double"}.get(name, name)


def _show(value):
    """A key or value as TensorFlow prints it in a message."""
    if isinstance(value, bytes):
        return value.decode(errors="replace")
    if isinstance(value, np.ndarray):
        return str(value.tolist())
    return str(value)


def _flat(arr):
    """The elements of `arr` as hashable Python values (bytes for strings), row-major."""
    flat = np.asarray(arr).reshape(-1)
    if flat.dtype != object:
        return flat.tolist()
    return [v if isinstance(v, bytes) else str(v).encode() for v in flat.tolist()]


def _array(values, dtype, shape):
    """An array of `dtype` and `shape` from a flat list of Python values."""
    if dtype == _S:
        out = np.empty(len(values), dtype=object)
        out[:] = values
    else:
        out = np.array(values, dtype=dtype.np)
    return out.reshape(shape)


class Table:
    """A hash table of keys (scalars) to values of `value_shape`.

    `initializable` tables (HashTable) are filled once by an initializer; the others take
    inserts, removals and imports. Values of shape () are kept as Python scalars, others as
    read-only arrays. Every method takes the table's lock.
    """

    def __init__(self, kind, name, key_dtype, value_dtype, value_shape=()):
        self.kind = kind
        self.name = name
        self.key_dtype = key_dtype
        self.value_dtype = value_dtype
        self.value_shape = tuple(value_shape)
        self.initializable = kind == "HashTable"
        self.initialized = False
        self.data = {}
        self.lock = threading.Lock()

    def __repr__(self):
        return (f"<{self.kind} {self.name!r} {_type_name(self.key_dtype)}->"
                f"{_type_name(self.value_dtype)} size={len(self.data)}>")

    @property
    def handle_info(self):
        """(value dtype, value shape): what shape functions read from a table handle (the
        memory guard sizes LookupTableFindV2's output by it)."""
        return (self.value_dtype, self.value_shape)

    # --- checks TensorFlow's LookupInterface makes
    def check_signature(self, keys_dtype, values_dtype=None, outputs=()):
        """OpKernelContext::MatchSignature: the op's dtypes against the table's."""
        have = [DType.RESOURCE, keys_dtype] + ([values_dtype] if values_dtype else [])
        want = [DType.RESOURCE, self.key_dtype] + ([self.value_dtype] if values_dtype else [])
        want_out = [self.value_dtype] * len(outputs)
        if have != want or list(outputs) != want_out:
            def sig(ins, outs):
                return ", ".join(map(_type_name, ins)) + "->" + ", ".join(map(_type_name, outs))
            fail(f"Signature mismatch, have: {sig(have, outputs)} expected: "
                 f"{sig(want, want_out)}")

    def check_values(self, keys, values):
        """Values must have the keys' shape followed by the value shape."""
        want = tuple(np.shape(keys)) + self.value_shape
        if tuple(np.shape(values)) != want:
            fail(f"Expected shape {tf_dims(want)} for value, got {tf_dims(np.shape(values))}")

    def _rows(self, keys, values):
        """(key, value) pairs of flat keys and their values in the table's representation."""
        ks = _flat(keys)
        if not self.value_shape:
            return list(zip(ks, _flat(values)))
        rows = np.asarray(values).reshape((len(ks),) + self.value_shape)
        out = []
        for k, row in zip(ks, rows):
            row = row.copy()
            row.flags.writeable = False
            out.append((k, row))
        return out

    # --- HashTable
    def initialize(self, pairs, total):
        """Fill an initializable table from (key, value) `pairs`, an iterable of `total`
        entries; a no-op on an initialized table holding `total` entries."""
        if not self.initializable:
            fail(f"Table '{self.name}' (a {self.kind}) is not initializable")
        with self.lock:
            if self.initialized:
                if total != len(self.data):
                    fail("Table was already initialized with different data.")
                return
            for k, v in pairs:
                old = self.data.setdefault(k, v)
                if old is not v and _differ(old, v):
                    fail(f"HashTable has different value for same key. Key {_show(k)} has "
                         f"{_show(old)} and trying to add value {_show(v)}")
            self.initialized = True

    # --- mutable tables
    def _require_mutable(self, what):
        if self.initializable:
            fail(f"{what} not supported by InitializableLookupTable implementations")

    def insert(self, keys, values, replace=False):
        self._require_mutable("Insert")
        self.check_values(keys, values)
        rows = self._rows(keys, values)
        with self.lock:
            if replace:
                self.data.clear()
            self.data.update(rows)

    def remove(self, keys):
        self._require_mutable("Remove")
        with self.lock:
            for k in _flat(keys):
                self.data.pop(k, None)

    # --- every table
    def size(self):
        with self.lock:
            return 0 if self.initializable and not self.initialized else len(self.data)

    def find(self, keys, default):
        if self.initializable and not self.initialized:
            fail("Table not initialized.")
        keys_shape, default = tuple(np.shape(keys)), np.asarray(default)
        full = keys_shape + self.value_shape
        if default.shape != self.value_shape and default.shape != full:
            fail(f"Expected shape {tf_dims(self.value_shape)} or {tf_dims(full)} for default "
                 f"value, got {tf_dims(default.shape)}")
        # A mutable table takes a default per key; a HashTable takes the first one for all
        # (HashTable::DoFind reads default_flat(0) whatever the default's accepted shape).
        per_key = default.shape == full and full != self.value_shape and \
            not self.initializable
        ks = _flat(keys)
        with self.lock:
            got = [self.data.get(k, _MISSING) for k in ks]
        if not self.value_shape:
            defaults = _flat(default)
            values = [v if v is not _MISSING else defaults[i if per_key else 0]
                      for i, v in enumerate(got)]
            return _array(values, self.value_dtype, keys_shape)
        out = np.empty((len(ks),) + self.value_shape, dtype=self.value_dtype.np)
        rows = default.reshape((len(ks),) + self.value_shape) if per_key else None
        for i, v in enumerate(got):
            out[i] = v if v is not _MISSING else (rows[i] if per_key else default)
        return out.reshape(full)

    def export(self):
        with self.lock:
            if self.initializable and not self.initialized:
                fail("HashTable is not initialized.")
            items = list(self.data.items())
        keys = _array([k for k, _ in items], self.key_dtype, (len(items),))
        if not self.value_shape:
            return keys, _array([v for _, v in items], self.value_dtype, (len(items),))
        values = np.empty((len(items),) + self.value_shape, dtype=self.value_dtype.np)
        for i, (_, v) in enumerate(items):
            values[i] = v
        return keys, values


def _differ(a, b):
    if isinstance(a, np.ndarray):
        return not np.array_equal(a, b)
    return a != b


def resolve_table(handle):
    """The Table behind a handle (the Table itself, or a ResourceHandle naming one)."""
    if isinstance(handle, ResourceHandle):
        handle = handle.lookup()
    if not isinstance(handle, Table):
        fail(f"expected a lookup table handle, got {type(handle).__name__}")
    return handle


def make_table(kind, name, key_dtype, value_dtype, value_shape=(), op=None):
    """A new empty Table of `kind` (HashTable, MutableHashTable, MutableHashTableOfTensors),
    refusing a dtype pair TensorFlow registers no kernel for."""
    if value_dtype == DType.VARIANT:
        fail(f"{op or kind}: tfg does not support variant values in lookup tables")
    if (key_dtype, value_dtype) not in _PAIRS[kind]:
        fail(f"No OpKernel was registered to support Op '{op or kind}' with key_dtype="
             f"{_type_name(key_dtype)} and value_dtype={_type_name(value_dtype)} (TensorFlow "
             f"has {kind} kernels for keys of string, int32 and int64 only, and not every "
             f"value dtype)")
    if kind == "MutableHashTableOfTensors":
        if value_shape is None or len(value_shape) != 1:
            fail("Default value must be a vector, got shape "
                 f"{'<unknown>' if value_shape is None else tf_dims(value_shape)}")
    return Table(kind, name, key_dtype, value_dtype, value_shape)


def _table_name(ctx):
    """(container, name) of a named table: shared_name, or the node's name (private to the
    node unless use_node_name_sharing, as TensorFlow's ContainerInfo)."""
    container, shared = s(ctx.attrs.get("container", b"")), s(ctx.attrs.get("shared_name", b""))
    if not shared:
        shared = ctx.name if ctx.attrs.get("use_node_name_sharing") else f"_table_{ctx.name}"
    return container, shared


def _value_shape(ctx, kind):
    """The value_shape attr of the tables of tensors; scalars for the others."""
    return ctx.attrs.get("value_shape") if kind == "MutableHashTableOfTensors" else ()


def _named(ctx, step, kind):
    container, name = _table_name(ctx)
    key_dtype, value_dtype = ctx.attrs["key_dtype"], ctx.attrs["value_dtype"]
    table = step.session_resources.get_or_create(
        container, name,
        lambda: make_table(kind, name, key_dtype, value_dtype, _value_shape(ctx, kind), ctx.op))
    if not isinstance(table, Table):
        fail(f"resource {container}/{name} is a {type(table).__name__}, not a lookup table")
    if (table.key_dtype, table.value_dtype) != (key_dtype, value_dtype):
        fail(f"Conflicting key/value dtypes {_type_name(key_dtype)}->{_type_name(value_dtype)}"
             f" with {_type_name(table.key_dtype)}-{_type_name(table.value_dtype)} for table "
             f"{name}")
    return table


def _anonymous(ctx, kind):
    return make_table(kind, ctx.name, ctx.attrs["key_dtype"], ctx.attrs["value_dtype"],
                      _value_shape(ctx, kind), ctx.op)


@kernel("HashTableV2", needs_step=True)
def hash_table(ctx, step):
    return _named(ctx, step, "HashTable")


@kernel("MutableHashTableV2", needs_step=True)
def mutable_hash_table(ctx, step):
    return _named(ctx, step, "MutableHashTable")


@kernel("MutableHashTableOfTensorsV2", needs_step=True)
def mutable_hash_table_of_tensors(ctx, step):
    return _named(ctx, step, "MutableHashTableOfTensors")


@kernel("AnonymousHashTable")
def anonymous_hash_table(ctx):
    return _anonymous(ctx, "HashTable")


@kernel("AnonymousMutableHashTable")
def anonymous_mutable_hash_table(ctx):
    return _anonymous(ctx, "MutableHashTable")


@kernel("AnonymousMutableHashTableOfTensors")
def anonymous_mutable_hash_table_of_tensors(ctx):
    return _anonymous(ctx, "MutableHashTableOfTensors")


# --------------------------------------------------------------------------- initializers
@kernel("InitializeTableV2")
def initialize_table(ctx, handle, keys, values):
    table = resolve_table(handle)
    table.check_signature(ctx.attrs["Tkey"], ctx.attrs["Tval"])
    for what, x in (("Keys", keys), ("Values", values)):
        if np.ndim(x) != 1:
            fail(f"{what} must be a vector, but received shape{tf_dims(np.shape(x))}")
    if np.size(keys) != np.size(values):
        fail(f"Keys and values must have the same size {np.size(keys)} vs {np.size(values)}")
    if np.size(keys) == 0:
        fail("keys and values cannot be empty tensors.")
    table.initialize(table._rows(keys, values), np.size(keys))
    return ()


@kernel("LookupTableImportV2")
def lookup_table_import(ctx, handle, keys, values):
    table = resolve_table(handle)
    table.check_signature(ctx.attrs["Tin"], ctx.attrs["Tout"])
    table.check_values(keys, values)
    if table.initializable:
        table.initialize(table._rows(keys, values), np.size(keys))
    else:
        table.insert(keys, values, replace=True)
    return ()


# A line's column index meaning the whole line, or the line's number (lookup_util.cc).
_WHOLE_LINE, _LINE_NUMBER = -2, -1
_INT = re.compile(rb"[+-]?[0-9]+\Z")
_INT_RANGE = {_I32: (-(1 << 31), (1 << 31) - 1), _I64: (-(1 << 63), (1 << 63) - 1)}


def _check_text_file_dtypes(table, key_index, value_index):
    for what, index, dtype in (("Key", key_index, table.key_dtype),
                               ("Value", value_index, table.value_dtype)):
        if index == _LINE_NUMBER and dtype != _I64:
            fail(f"{what} index for line number requires table {what.lower()} dtype of int64, "
                 f"got {_type_name(dtype)}")
        if index == _WHOLE_LINE and dtype not in (_S, _I32, _I64):
            fail(f"{what} index for whole line requires table {what.lower()} dtype of integer "
                 f"or string, got {_type_name(dtype)}")


def _read_lines(path, shown):
    """The file's lines (bytes, without their line ending), at most MAX_TEXT_FILE_BYTES."""
    try:
        info = os.stat(path)
        if stat.S_ISDIR(info.st_mode):
            raise IsADirectoryError(path)
        if not stat.S_ISREG(info.st_mode):  # a FIFO would block forever, /dev/zero never end
            fail(f"{shown}; not a regular file (InitializeTableFromTextFileV2 reads a text "
                 "file)")
        size = info.st_size
        if size > MAX_TEXT_FILE_BYTES:
            fail(f"{shown}: the vocabulary file is {size} bytes, over tfg's limit of "
                 f"{MAX_TEXT_FILE_BYTES} bytes for InitializeTableFromTextFileV2")
        with open(path, "rb") as f:
            data = f.read(MAX_TEXT_FILE_BYTES + 1)
    except FileNotFoundError:
        fail(f"{shown}; No such file or directory")
    except IsADirectoryError:
        fail(f"{shown}; Is a directory (InitializeTableFromTextFileV2 needs a file)")
    except OSError as e:
        fail(f"{shown}; cannot read it: {e.strerror or e}")
    lines = data.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    return [line[:-1] if line.endswith(b"\r") else line for line in lines]


def _field(token, dtype, line_no):
    """A line's token as a key or value of `dtype` (TensorFlow's safe_strto* rules)."""
    if dtype == _S:
        return token
    text = token.strip(b" \t\n\v\f\r")
    if dtype in _INT_RANGE:
        lo, hi = _INT_RANGE[dtype]
        if _INT.match(text) and lo <= int(text) <= hi:
            return int(text)
    elif dtype in (_F32, _F64):
        value = _float(text)
        if value is not None:
            return float(np.float32(value)) if dtype == _F32 else value
    else:
        fail(f"Data type {_type_name(dtype)} not supported.")
    fail(f"Field {_show(token)} in line {line_no} is not a valid {_type_name(dtype)}.")


def _float(text):
    """A float token, or None: decimal or exponent notation, inf and nan (no underscores,
    which Python's float() would take)."""
    if not text or b"_" in text:
        return None
    try:
        return float(text)
    except ValueError:
        return None


def _text_entries(lines, shown, attrs, table, ends):
    """(key, value) of each line in turn, as TensorFlow's TextFileLineIterator reads them;
    a bad line raises when reached (the entries before it are in the table by then).
    `ends` collects the byte offset after each line, for the empty-line message."""
    key_index, value_index = attrs["key_index"], attrs["value_index"]
    vocab_size, offset, delim = attrs["vocab_size"], attrs["offset"], attrs["delimiter"]
    split = max(key_index, value_index) >= 0
    for n, line in enumerate(lines):
        if vocab_size != -1 and n >= vocab_size:
            return
        if not line:
            fail(f"Invalid content in {shown}: empty line found at position {ends[n]}.")
        tokens = line.split(delim) if split else []
        if split and len(tokens) < max(key_index, value_index) + 1:
            fail(f"Invalid number of columns in {shown} line {n} ({_show(line)}) : expected "
                 f"at least {max(key_index, value_index) + 1} got {len(tokens)}")

        def pick(index, dtype):
            if index == _LINE_NUMBER:
                return n + offset
            return _field(line if index == _WHOLE_LINE else tokens[index], dtype, n)
        yield pick(key_index, table.key_dtype), pick(value_index, table.value_dtype)
    if vocab_size != -1 and len(lines) != vocab_size:
        fail(f"Invalid vocab_size in {shown}: expected {vocab_size} but got {len(lines)}")


@kernel("InitializeTableFromTextFileV2")
def initialize_table_from_text_file(ctx, handle, filename):
    attrs = dict(ctx.attrs)
    delim = attrs.get("delimiter", b"\t")
    attrs["delimiter"] = delim if isinstance(delim, bytes) else str(delim).encode()
    if len(attrs["delimiter"]) != 1:
        fail("delimiter should be only 1 char")
    table = resolve_table(handle)
    if np.ndim(filename) != 0:
        fail(f"filename should be a single string, but got {tf_dims(np.shape(filename))}")
    name = _flat(filename)[0]
    shown = name.decode(errors="replace")
    _check_text_file_dtypes(table, attrs["key_index"], attrs["value_index"])
    if not table.initializable:
        fail(f"Table '{table.name}' (a {table.kind}) is not initializable")
    lines = _read_lines(os.fsdecode(name), shown)
    if not lines:
        fail(f"{shown} is empty: no lines to initialize the table with")
    if attrs["vocab_size"] == 0:
        fail(f"Finished reading 0 of lines from {shown}")
    ends = np.cumsum([len(line) + 1 for line in lines]).tolist()
    entries = _text_entries(lines, shown, attrs, table, ends)
    # TensorFlow's iterator reads the first line before looking at the table: its errors
    # come first, then "already initialized".
    first = next(entries, None)
    total = attrs["vocab_size"] if attrs["vocab_size"] != -1 else len(lines)
    table.initialize(_chain(first, entries), total)
    return ()


def _chain(first, rest):
    if first is not None:
        yield first
    yield from rest


# --------------------------------------------------------------------------- reads, updates
@kernel("LookupTableFindV2")
def lookup_table_find(ctx, handle, keys, default_value):
    table = resolve_table(handle)
    table.check_signature(ctx.attrs["Tin"], ctx.attrs["Tout"], outputs=[ctx.attrs["Tout"]])
    return table.find(keys, default_value)


@kernel("LookupTableInsertV2")
def lookup_table_insert(ctx, handle, keys, values):
    table = resolve_table(handle)
    table.check_signature(ctx.attrs["Tin"], ctx.attrs["Tout"])
    table.insert(keys, values)
    return ()


@kernel("LookupTableRemoveV2")
def lookup_table_remove(ctx, handle, keys):
    table = resolve_table(handle)
    table.check_signature(ctx.attrs["Tin"])
    table.remove(keys)
    return ()


@kernel("LookupTableSizeV2")
def lookup_table_size(ctx, handle):
    return np.int64(resolve_table(handle).size())


@kernel("LookupTableExportV2")
def lookup_table_export(ctx, handle):
    table = resolve_table(handle)
    want = (ctx.attrs["Tkeys"], ctx.attrs["Tvalues"])
    if want != (table.key_dtype, table.value_dtype):
        fail(f"Signature mismatch, have: resource->{', '.join(map(_type_name, want))} "
             f"expected: resource->{_type_name(table.key_dtype)}, "
             f"{_type_name(table.value_dtype)}")
    return table.export()
