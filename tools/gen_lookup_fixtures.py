"""Generate tests/fixtures/lookup: TensorFlow's lookup tables in tf.compat.v1 graphs, and what
TensorFlow computes with them (tests/test_lookup_ops.py).

NEEDS TENSORFLOW (run with /work/tfvenv/bin/python); never imports tfg.

  lookup.pb, lookup.npz, cases.json: tables made by StaticHashTable (KeyValueTensorInitializer
      string->int64, int64->string, int64->float, int32->double, string->bool), by
      TextFileInitializer over vocab.txt (column 0 -> line number, column 0 -> column 1) and
      by index_table_from_file / index_to_string_table_from_file over words.txt, all
      initialized by `init_all_tables` (tf.compat.v1.tables_initializer); an AnonymousHashTable
      made and initialized within its case. Each case feeds `<case>/keys` (and `default`) and
      fetches `<case>/out` (Find), sizes and exports. The graph names the vocabulary files
      relatively (Consts `vocab_filename` and `words_filename`): a test rewrites them to the
      fixture's absolute paths.
  mutable.pb, mutable.npz, steps.json: a MutableHashTable (string->int64) and a
      MutableHashTableOfTensors (int64->float [2]) driven through insert, find, remove, size,
      export and import, one Session.run per step; `step<i>/<fetch>` holds TensorFlow's
      values (exports in TensorFlow's unspecified order: compare sorted).
"""
import json
import os

import numpy as np
import tensorflow as tf

from fixture_cases import CaseSet, fixture_dir, generate

tf1 = tf.compat.v1
tf1.disable_eager_execution()
OUT = fixture_dir("lookup")
VOCAB = "apple\t3\nbanana\t5\ncherry\t7\ndate\t11\n"
WORDS = "the\nquick\nbrown\nfox\n"


def no_objects(arrays):
    """Strings as bytes ('S') arrays: an .npz holds no pickled object arrays."""
    return {k: v.astype(bytes) if v.dtype == object else v
            for k, v in ((k, np.asarray(v)) for k, v in arrays.items())}


class LookupCases(CaseSet):
    """Cases run after the graph's tables are initialized, as a user runs
    `init_all_tables` once and then the steps."""

    def prepare(self, sess, graph):
        sess.run(graph.get_operation_by_name("init_all_tables"))

    def write(self, out, stem, graph):
        """Also names each case's fetches' tensors in cases.json (`fetches`)."""
        for case in self.index:
            case["fetches"] = {k: t.name for k, t in self.fetches.items()
                               if k.startswith(case["name"] + "/")}
        self.arrays = no_objects(self.arrays)
        super().write(out, stem, graph)


def _case(cases, name, table, keys, key_dtype, default=None, default_feed=None, error=None):
    """Find `keys` (fed) in `table`; default a constant, or fed when default_feed is set."""
    with tf.name_scope(name):
        k = tf1.placeholder(key_dtype, None, name="keys")
        cases.arrays[f"{name}/keys"] = keys
        args = ["keys"]
        if default_feed is not None:
            default = tf1.placeholder(table.value_dtype, None, name="default")
            cases.arrays[f"{name}/default"] = default_feed
            args.append("default")
        out = tf.raw_ops.LookupTableFindV2(table_handle=table.resource_handle, keys=k,
                                           default_value=default, name="find")
        cases.fetches[f"{name}/out"] = out
    cases.index.append({"name": name, "args": args, "error": error})


def _static(keys, values, kd, vd, default, name):
    init = tf.lookup.KeyValueTensorInitializer(tf.constant(keys, kd), tf.constant(values, vd))
    return tf.lookup.StaticHashTable(init, tf.constant(default, vd), name=name)


def static_tables(cases):
    s2i = _static(["apple", "banana", "cherry"], [1, 2, 3], tf.string, tf.int64, -1, "s2i")
    d = tf.constant(-1, tf.int64)
    strs = np.array
    _case(cases, "s2i_vec", s2i, strs([b"banana", b"zzz", b"apple"], object), tf.string, d)
    _case(cases, "s2i_2d", s2i, strs([[b"apple", b"x"], [b"cherry", b"banana"]], object),
          tf.string, d)
    _case(cases, "s2i_scalar", s2i, strs(b"cherry", object), tf.string, d)
    _case(cases, "s2i_empty", s2i, np.zeros((0, 3), object), tf.string, d)
    _case(cases, "s2i_per_key_default", s2i, strs([b"apple", b"nope", b"x"], object),
          tf.string, default_feed=np.array([7, 8, 9], np.int64))
    _case(cases, "s2i_bad_default", s2i, strs([b"apple", b"nope"], object), tf.string,
          default_feed=np.array([7, 8, 9], np.int64),
          error="Expected shape [] or [2] for default value, got [3]")
    with tf.name_scope("s2i_export"):
        cases.fetches["s2i_export/size"] = tf.raw_ops.LookupTableSizeV2(
            table_handle=s2i.resource_handle)
        keys, values = tf.raw_ops.LookupTableExportV2(
            table_handle=s2i.resource_handle, Tkeys=tf.string, Tvalues=tf.int64)
        cases.fetches["s2i_export/keys"], cases.fetches["s2i_export/values"] = keys, values
    cases.index.append({"name": "s2i_export", "args": [], "error": None})

    i2s = _static([10, 20, 30], ["ten", "twenty", "thirty"], tf.int64, tf.string, "?", "i2s")
    _case(cases, "i2s_vec", i2s, np.array([10, 5, 30, 20], np.int64), tf.int64,
          tf.constant("?"))
    i2f = _static([1, 2, 3], [0.5, 1.5, -2.25], tf.int64, tf.float32, -1.0, "i2f")
    _case(cases, "i2f_2d", i2f, np.array([[1, 4], [3, 2]], np.int64), tf.int64,
          tf.constant(np.nan, tf.float32))
    i32d = _static([-1, 0, 7], [1e-300, 2.5, 1e300], tf.int32, tf.float64, 0.0, "i32d")
    _case(cases, "i32d_vec", i32d, np.array([7, -1, 8, 0], np.int32), tf.int32,
          tf.constant(-0.5, tf.float64))
    s2b = _static(["yes", "no"], [True, False], tf.string, tf.bool, False, "s2b")
    _case(cases, "s2b_vec", s2b, np.array([b"yes", b"no", b"maybe"], object), tf.string,
          tf.constant(True))


def text_tables(cases):
    vocab = tf.constant("vocab.txt", name="vocab_filename")
    line = tf.lookup.StaticHashTable(tf.lookup.TextFileInitializer(
        vocab, tf.string, 0, tf.int64, tf.lookup.TextFileIndex.LINE_NUMBER, delimiter="\t"),
        -1, name="line_table")
    count = tf.lookup.StaticHashTable(tf.lookup.TextFileInitializer(
        vocab, tf.string, 0, tf.int64, 1, delimiter="\t"), -1, name="count_table")
    keys = np.array([b"date", b"apple", b"fig", b"banana"], object)
    _case(cases, "text_line", line, keys, tf.string, tf.constant(-1, tf.int64))
    _case(cases, "text_count", count, keys, tf.string, tf.constant(-1, tf.int64))
    words = tf.constant("words.txt", name="words_filename")
    index = tf.lookup.StaticHashTable(tf.lookup.TextFileInitializer(
        words, tf.string, tf.lookup.TextFileIndex.WHOLE_LINE, tf.int64,
        tf.lookup.TextFileIndex.LINE_NUMBER), -1, name="index_table")
    _case(cases, "words_index", index, np.array([[b"fox", b"the"], [b"cat", b"quick"]], object),
          tf.string, tf.constant(-1, tf.int64))
    reverse = tf.lookup.StaticHashTable(tf.lookup.TextFileInitializer(
        words, tf.int64, tf.lookup.TextFileIndex.LINE_NUMBER, tf.string,
        tf.lookup.TextFileIndex.WHOLE_LINE), "UNK", name="reverse_table")
    _case(cases, "words_reverse", reverse, np.array([3, 0, 9, 1], np.int64), tf.int64,
          tf.constant("UNK"))


def anonymous_table(cases):
    name = "anonymous"
    with tf.name_scope(name):
        table = tf.raw_ops.AnonymousHashTable(key_dtype=tf.int64, value_dtype=tf.int64)
        init = tf.raw_ops.InitializeTableV2(table_handle=table, keys=tf.constant([5, 6], tf.int64),
                                            values=tf.constant([50, 60], tf.int64))
        k = tf1.placeholder(tf.int64, None, name="keys")
        with tf.control_dependencies([init]):
            cases.fetches[f"{name}/out"] = tf.raw_ops.LookupTableFindV2(
                table_handle=table, keys=k, default_value=tf.constant(0, tf.int64))
    cases.arrays[f"{name}/keys"] = np.array([6, 7, 5], np.int64)
    cases.index.append({"name": name, "args": ["keys"], "error": None})


def finish_static(cases):
    tf1.tables_initializer()  # init_all_tables


# ------------------------------------------------------------------------------- mutable steps
def mutable_graph():
    """The mutable tables' graph and its ops, by role."""
    graph = tf.Graph()
    with graph.as_default():
        m = tf.lookup.experimental.MutableHashTable(tf.string, tf.int64, -1, name="m_table")
        t = tf.lookup.experimental.MutableHashTable(tf.int64, tf.float32, [-1.0, -2.0],
                                                    name="t_table")
        for table, prefix, kd, vd in ((m, "m", tf.string, tf.int64),
                                      (t, "t", tf.int64, tf.float32)):
            with tf.name_scope(prefix):
                ph = {n: tf1.placeholder(d, None, name=n) for n, d in (
                    ("ins_keys", kd), ("ins_values", vd), ("rm_keys", kd), ("find_keys", kd),
                    ("imp_keys", kd), ("imp_values", vd), ("default", vd))}
                handle = table.resource_handle
                tf.raw_ops.LookupTableInsertV2(table_handle=handle, keys=ph["ins_keys"],
                                               values=ph["ins_values"], name="insert")
                tf.raw_ops.LookupTableRemoveV2(table_handle=handle, keys=ph["rm_keys"],
                                               name="remove")
                tf.identity(table.lookup(ph["find_keys"]), name="find")
                tf.raw_ops.LookupTableFindV2(table_handle=handle, keys=ph["find_keys"],
                                             default_value=ph["default"], name="find_default")
                tf.identity(table.size(), name="size")
                keys, values = table.export()
                tf.identity(keys, name="export_keys")
                tf.identity(values, name="export_values")
                tf.raw_ops.LookupTableImportV2(table_handle=handle,
                                               keys=ph["imp_keys"], values=ph["imp_values"],
                                               name="import")
    return graph


def _steps(p, keys, values, find, rm, imp_keys, imp_values, per_key):
    """The step sequence of table `p` (insert, find, overwrite, remove, import)."""
    look = [f"{p}/find", f"{p}/size"]
    export = [f"{p}/export_keys", f"{p}/export_values"]
    return [
        {"targets": [f"{p}/insert"], "feeds": {f"{p}/ins_keys": keys[0],
                                               f"{p}/ins_values": values[0]}},
        {"fetches": look, "feeds": {f"{p}/find_keys": find}},
        {"targets": [f"{p}/insert"], "feeds": {f"{p}/ins_keys": keys[1],
                                               f"{p}/ins_values": values[1]}},
        {"targets": [f"{p}/remove"], "feeds": {f"{p}/rm_keys": rm}},
        {"fetches": look + export, "feeds": {f"{p}/find_keys": find}},
        {"fetches": [f"{p}/find_default"], "feeds": {f"{p}/find_keys": find,
                                                     f"{p}/default": per_key}},
        {"targets": [f"{p}/import"], "feeds": {f"{p}/imp_keys": imp_keys,
                                               f"{p}/imp_values": imp_values}},
        {"fetches": look + export, "feeds": {f"{p}/find_keys": find}},
    ]


def mutable_steps():
    s = np.array
    m = _steps("m", [s([b"a", b"b", b"c"], object), s([b"b", b"d", b"b"], object)],
               [s([1, 2, 3], np.int64), s([20, 4, 21], np.int64)],
               s([[b"a", b"z"], [b"c", b"b"]], object), s([b"a", b"zz"], object),
               s([b"x", b"y"], object), s([7, 8], np.int64), s([[-5, -6], [-7, -8]], np.int64))
    t = _steps("t", [s([1, 2, 3], np.int64), s([2, 9], np.int64)],
               [s([[1, 2], [3, 4], [5, 6]], np.float32), s([[30, 40], [9, 9]], np.float32)],
               s([[1, 2], [9, 4]], np.int64), s([1], np.int64),
               s([5], np.int64), s([[0.5, 0.25]], np.float32),
               np.arange(8, dtype=np.float32).reshape(2, 2, 2))
    return m + t


def write_mutable():
    graph, steps = mutable_graph(), mutable_steps()
    arrays, index = {}, []
    with tf1.Session(graph=graph) as sess:
        for i, step in enumerate(steps):
            feeds = {}
            for name, value in step["feeds"].items():
                arrays[f"step{i}/{name}"] = value
                feeds[graph.get_tensor_by_name(name + ":0")] = value
            fetches = step.get("fetches", [])
            ops = [graph.get_operation_by_name(n) for n in step.get("targets", [])]
            values = sess.run([graph.get_tensor_by_name(f + ":0") for f in fetches] + ops,
                              feeds)
            arrays.update({f"step{i}/{f}": v for f, v in zip(fetches, values)})
            index.append({"targets": step.get("targets", []), "fetches": fetches,
                          "feeds": sorted(step["feeds"])})
    with open(os.path.join(OUT, "mutable.pb"), "wb") as f:
        f.write(graph.as_graph_def().SerializeToString())
    np.savez_compressed(os.path.join(OUT, "mutable.npz"), **no_objects(arrays))
    with open(os.path.join(OUT, "steps.json"), "w") as f:
        json.dump(index, f, indent=1)
        f.write("\n")
    print(OUT, len(index), "steps,", len(arrays), "arrays")


def main():
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "vocab.txt"), "w") as f:
        f.write(VOCAB)
    with open(os.path.join(OUT, "words.txt"), "w") as f:
        f.write(WORDS)
    os.chdir(OUT)  # the graph names the vocabulary files relatively
    generate(LookupCases(), [static_tables, text_tables, anonymous_table, finish_static],
             OUT, "lookup")
    write_mutable()


if __name__ == "__main__":
    main()
