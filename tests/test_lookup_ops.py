"""Lookup tables (tfg/kernels/lookup_ops.py) against TensorFlow (tools/gen_lookup_fixtures.py):
static tables initialized once by `init_all_tables` then looked up, text-file vocabularies,
mutable tables changed and read over several runs of one session, the CLI, errors and the
memory guard."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from conftest import FIXTURES
from tfg.errors import TfgError
from tfg.executor.session import Session
from tfg.graphdef import io
from tfg.graphdef.graph import Graph
from tfg.graphdef.infer import infer
from tfg.passes.grad import has_gradient
from tfg.schemas.dtypes import DType

DIR = FIXTURES / "lookup"
CASES = json.loads((DIR / "cases.json").read_text())
ARRAYS = dict(np.load(DIR / "lookup.npz"))
STEPS = json.loads((DIR / "steps.json").read_text())
STEP_ARRAYS = dict(np.load(DIR / "mutable.npz"))


def _value(a):
    """An npz array as tfg holds it: bytes ('S') arrays as object arrays of bytes."""
    a = np.asarray(a)
    return a.astype(object) if a.dtype.kind == "S" else a


def _strings(*values):
    out = np.empty(len(values), object)
    out[:] = [v.encode() if isinstance(v, str) else v for v in values]
    return out


def static_graph():
    """lookup.pb with its vocabulary files named by absolute path."""
    g = io.load(str(DIR / "lookup.pb"))
    for const, path in (("vocab_filename", "vocab.txt"), ("words_filename", "words.txt")):
        g[const].set_attr("value", np.array(str(DIR / path).encode(), dtype=object))
    return g


@pytest.fixture(scope="module")
def static_session():
    sess = Session(static_graph())
    sess.run(targets=["init_all_tables"])
    return sess


def _case_feeds(case):
    name = case["name"]
    return {f"{name}/{k}:0": _value(ARRAYS[f"{name}/{k}"]) for k in case["args"]}


def _check(got, want, what):
    got, want = np.asarray(got), _value(want)
    assert got.shape == want.shape, what
    assert got.dtype == want.dtype, (what, got.dtype, want.dtype)
    if want.dtype.kind == "f":
        np.testing.assert_array_equal(got, want, err_msg=what)  # exact, NaN where TF has
    else:
        assert got.tolist() == want.tolist(), what


@pytest.mark.parametrize("case", [c for c in CASES if not c["error"]], ids=lambda c: c["name"])
def test_static_tables_match_tensorflow(static_session, case):
    name = case["name"]
    keys = sorted(case["fetches"])
    got = static_session.run([case["fetches"][k] for k in keys], _case_feeds(case))
    for k, value in zip(keys, got):
        if name == "s2i_export" and k != "s2i_export/size":
            continue
        _check(value, ARRAYS[k], k)
    if name == "s2i_export":  # TensorFlow's order is unspecified: compare the pairs
        pairs = dict(zip(got[0].tolist(), got[2].tolist()))
        want = dict(zip(_value(ARRAYS["s2i_export/keys"]).tolist(),
                        ARRAYS["s2i_export/values"].tolist()))
        assert pairs == want


@pytest.mark.parametrize("case", [c for c in CASES if c["error"]], ids=lambda c: c["name"])
def test_static_table_errors_match_tensorflow(static_session, case):
    with pytest.raises(TfgError, match=case["error"].replace("[", r"\[").replace("]", r"\]")):
        static_session.run([f"{case['name']}/find:0"], _case_feeds(case))


def test_initializing_twice_is_a_no_op_and_anonymous_tables_are_fresh(static_session):
    static_session.run(targets=["init_all_tables"])  # same data: TensorFlow's no-op
    case = next(c for c in CASES if c["name"] == "anonymous")
    for _ in range(2):  # a second run makes and initializes a new table
        got = static_session.run([case["fetches"]["anonymous/out"]], _case_feeds(case))[0]
        _check(got, ARRAYS["anonymous/out"], "anonymous")


def test_mutable_tables_persist_across_runs_as_in_tensorflow():
    sess = Session(io.load(str(DIR / "mutable.pb")))
    for i, step in enumerate(STEPS):
        feeds = {f"{n}:0": _value(STEP_ARRAYS[f"step{i}/{n}"]) for n in step["feeds"]}
        got = sess.run([f + ":0" for f in step["fetches"]], feeds, targets=step["targets"])
        values = dict(zip(step["fetches"], got))
        for f, value in values.items():
            if not f.endswith(("export_keys", "export_values")):
                _check(value, STEP_ARRAYS[f"step{i}/{f}"], f"step {i} {f}")
        exports = [f for f in values if f.endswith("export_keys")]
        for f in exports:  # unspecified order: compare the exported pairs
            vf = f.replace("keys", "values")
            _check(np.sort(values[f]), np.sort(_value(STEP_ARRAYS[f"step{i}/{f}"])), f)
            got_pairs = {k: np.asarray(v).tolist() for k, v in zip(values[f].tolist(),
                                                                    values[vf])}
            want_pairs = {k: np.asarray(v).tolist() for k, v in zip(
                _value(STEP_ARRAYS[f"step{i}/{f}"]).tolist(), STEP_ARRAYS[f"step{i}/{vf}"])}
            assert got_pairs == want_pairs, f"step {i} {f}"
            assert values[vf].dtype == STEP_ARRAYS[f"step{i}/{vf}"].dtype


# ----------------------------------------------------------------------- hand-built graphs
def _const(g, name, value, dtype):
    return g.add_node(name, "Const", attrs={"dtype": dtype, "value": value})


def table_graph(keys, values, key_dtype=DType.STRING, value_dtype=DType.INT64, op="HashTableV2",
                extra=None):
    """A table `t`, `init` (InitializeTableV2 of keys/values), and `find` of fed `keys`."""
    g = Graph()
    g.add_node("t", op, attrs={"key_dtype": key_dtype, "value_dtype": value_dtype,
                               **(extra or {})})
    _const(g, "k", keys, key_dtype)
    _const(g, "v", values, value_dtype)
    g.add_node("init", "InitializeTableV2", ["t", "k", "v"],
               {"Tkey": key_dtype, "Tval": value_dtype})
    g.add_node("keys", "Placeholder", attrs={"dtype": key_dtype})
    _const(g, "d", np.array(-1, value_dtype.np) if value_dtype != DType.STRING
           else np.array(b"", object), value_dtype)
    g.add_node("find", "LookupTableFindV2", ["t", "keys", "d"],
               {"Tin": key_dtype, "Tout": value_dtype})
    return g


def test_find_before_initialization_fails():
    g = table_graph(_strings("a"), np.array([1], np.int64))
    with pytest.raises(TfgError, match="Table not initialized"):
        Session(g).run(["find:0"], {"keys:0": _strings("a")})


def test_conflicting_duplicate_keys_fail_and_reinit_with_other_size_fails():
    g = table_graph(_strings("a", "b", "a"), np.array([1, 2, 3], np.int64))
    with pytest.raises(TfgError, match="HashTable has different value for same key. Key a has "
                                       "1 and trying to add value 3"):
        Session(g).run(targets=["init"])
    g = table_graph(_strings("a", "b", "a"), np.array([1, 2, 1], np.int64))
    sess = Session(g)
    sess.run(targets=["init"])  # the same value twice is fine
    assert sess.run(["find:0"], {"keys:0": _strings("a", "b", "c")})[0].tolist() == [1, 2, -1]
    with pytest.raises(TfgError, match="already initialized with different data"):
        sess.run(targets=["init"])  # 3 entries brought, 2 held: TensorFlow's comparison


def test_unregistered_dtype_pair_is_refused_naming_the_types():
    g = table_graph(_strings("a"), _strings("x"), value_dtype=DType.STRING,
                    op="MutableHashTableV2")
    with pytest.raises(TfgError, match="key_dtype=string and value_dtype=string"):
        Session(g).run(["find:0"], {"keys:0": _strings("a")})


def test_insert_into_a_hash_table_is_unimplemented():
    g = table_graph(_strings("a"), np.array([1], np.int64))
    g.add_node("ins", "LookupTableInsertV2", ["t", "k", "v"],
               {"Tin": DType.STRING, "Tout": DType.INT64})
    with pytest.raises(TfgError, match="Insert not supported"):
        Session(g).run(targets=["ins"])


def text_graph(path, key_index=-2, value_index=-1, **attrs):
    g = Graph()
    g.add_node("t", "HashTableV2", attrs={"key_dtype": DType.STRING,
                                          "value_dtype": DType.INT64})
    _const(g, "f", np.array(str(path).encode(), object), DType.STRING)
    g.add_node("init", "InitializeTableFromTextFileV2", ["t", "f"],
               {"key_index": key_index, "value_index": value_index, **attrs})
    g.add_node("export", "LookupTableExportV2", ["t"],
               {"Tkeys": DType.STRING, "Tvalues": DType.INT64})
    return g


def test_text_file_rules(tmp_path):
    with pytest.raises(TfgError, match="missing.txt; No such file or directory"):
        Session(text_graph(tmp_path / "missing.txt")).run(targets=["init"])
    (tmp_path / "gap.txt").write_bytes(b"x\n\ny\n")
    with pytest.raises(TfgError, match="empty line found at position 3"):
        Session(text_graph(tmp_path / "gap.txt")).run(targets=["init"])
    (tmp_path / "v.txt").write_bytes(b"a 1\r\nb 2\r\nc 3")
    with pytest.raises(TfgError, match="expected 5 but got 3"):
        Session(text_graph(tmp_path / "v.txt", vocab_size=5)).run(targets=["init"])
    sess = Session(text_graph(tmp_path / "v.txt", 0, 1, delimiter=b" ", vocab_size=2))
    sess.run(targets=["init"])
    keys, values = sess.run(["export:0", "export:1"])
    assert dict(zip(keys.tolist(), values.tolist())) == {b"a": 1, b"b": 2}
    sess = Session(text_graph(tmp_path / "v.txt", 0, -1, delimiter=b" ", offset=10))
    sess.run(targets=["init"])
    keys, values = sess.run(["export:0", "export:1"])
    assert dict(zip(keys.tolist(), values.tolist())) == {b"a": 10, b"b": 11, b"c": 12}
    with pytest.raises(TfgError, match=r"Field a in line 0 is not a valid int64"):
        Session(text_graph(tmp_path / "v.txt", -2, 0, delimiter=b" ")).run(targets=["init"])


def test_text_file_size_bound(tmp_path, monkeypatch):
    from tfg.kernels import lookup_ops
    (tmp_path / "big.txt").write_bytes(b"word\n" * 100)
    monkeypatch.setattr(lookup_ops, "MAX_TEXT_FILE_BYTES", 64)
    with pytest.raises(TfgError, match="over tfg's limit of 64 bytes"):
        Session(text_graph(tmp_path / "big.txt")).run(targets=["init"])


def test_text_file_that_is_not_a_regular_file_is_refused(tmp_path):
    """A FIFO would block the read forever and /dev/zero never end: refused before opening."""
    fifo = tmp_path / "vocab.fifo"
    os.mkfifo(fifo)
    for path in (fifo, "/dev/zero"):
        with pytest.raises(TfgError, match="not a regular file"):
            Session(text_graph(path)).run(targets=["init"])


def tensors_graph(value_shape):
    g = Graph()
    g.add_node("t", "MutableHashTableOfTensorsV2",
               attrs={"key_dtype": DType.INT64, "value_dtype": DType.FLOAT,
                      "value_shape": value_shape})
    g.add_node("keys", "Placeholder", attrs={"dtype": DType.INT64, "shape": [3, -1]})
    _const(g, "d", np.zeros(value_shape, np.float32), DType.FLOAT)
    g.add_node("find", "LookupTableFindV2", ["t", "keys", "d"],
               {"Tin": DType.INT64, "Tout": DType.FLOAT})
    g.add_node("export", "LookupTableExportV2", ["t"],
               {"Tkeys": DType.INT64, "Tvalues": DType.FLOAT})
    return g


def test_shape_inference_appends_the_value_shape():
    info = infer(tensors_graph([2]))
    assert info[("find", 0)].shape == (3, None, 2)
    assert info[("export", 0)].shape == (None,)
    assert info[("export", 1)].shape == (None, 2)
    assert info[("t", 0)].shape == ()


def test_memory_guard_sizes_find_by_keys_and_value_shape():
    sess = Session(tensors_graph([4096]), max_memory="1M")
    with pytest.raises(TfgError, match=r"would allocate .* \(shape \[3, 1000, 4096\]"):
        sess.run(["find:0"], {"keys:0": np.zeros((3, 1000), np.int64)})
    got = sess.run(["find:0"], {"keys:0": np.zeros((3, 2), np.int64)})[0]
    assert got.shape == (3, 2, 4096)


def test_table_ops_are_not_differentiable_where_tensorflow_says_so():
    for op in ("HashTableV2", "InitializeTableV2", "LookupTableFindV2",
               "InitializeTableFromTextFileV2", "LookupTableInsertV2", "LookupTableSizeV2"):
        assert has_gradient(op), op


# ----------------------------------------------------------------------------------- CLI
def _tfg(*args, cwd):
    return subprocess.run([sys.executable, "-m", "tfg", "run", *args], cwd=cwd,
                          capture_output=True, text=True, timeout=120)


def test_cli_init_then_fetch_and_errors(tmp_path):
    """`tfg run --init init_all_tables` then the fetch, as TensorFlow's values; a missing
    init and conflicting keys fail the step (exit 1), a feed of the wrong dtype is bad input
    (exit 2), each with one line on stderr."""
    io.save(static_graph(), str(tmp_path / "g.pb"))
    np.savez(tmp_path / "f.npz", **{"s2i_2d/keys:0": ARRAYS["s2i_2d/keys"],
                                    "text_count/keys:0": ARRAYS["text_count/keys"]})
    r = _tfg("g.pb", "--init", "init_all_tables", "--feeds", "f.npz",
             "--fetch", "s2i_2d/find,text_count/find", "-o", "out.npz", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    out = np.load(tmp_path / "out.npz")
    _check(out["s2i_2d/find"], ARRAYS["s2i_2d/out"], "cli s2i_2d")
    _check(out["text_count/find"], ARRAYS["text_count/out"], "cli text_count")

    r = _tfg("g.pb", "--feeds", "f.npz", "--fetch", "s2i_2d/find", cwd=tmp_path)
    # A kernel's failure on a valid graph exits 1, bad input 2 (docs/cli-contract.md).
    assert r.returncode == 1 and "Table not initialized" in r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr

    np.savez(tmp_path / "bad.npz", **{"i2s_vec/keys:0": np.array([b"ten"])})
    r = _tfg("g.pb", "--init", "init_all_tables", "--feeds", "bad.npz",
             "--fetch", "i2s_vec/find", cwd=tmp_path)
    assert r.returncode == 2 and "i2s_vec/keys" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr

    io.save(table_graph(_strings("a", "a"), np.array([1, 2], np.int64)), str(tmp_path / "d.pb"))
    np.savez(tmp_path / "k.npz", **{"keys:0": np.array([b"a"])})
    r = _tfg("d.pb", "--init", "init", "--feeds", "k.npz", "--fetch", "find", cwd=tmp_path)
    assert r.returncode == 1 and "different value for same key" in r.stderr, r.stderr
    assert len(r.stderr.strip().splitlines()) == 1, r.stderr
