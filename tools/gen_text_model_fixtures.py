#!/usr/bin/env python3
"""TensorFlow-made text models whose graphs carry strings, lookup tables, hashing and ragged ops
(needs TensorFlow and Keras 3; run with a Python that has them):

    /path/to/tf-python tools/gen_text_model_fixtures.py

Writes tests/fixtures/text_models/:
- <name>/: a Keras 3 model exported as a TF2 SavedModel (`model.export`), each fed a batch of
  strings (or int64 ids) through its `serve` signature:
  - textvec_int: TextVectorization(int, output_sequence_length=8) -> Embedding ->
    GlobalAveragePooling1D -> Dense. The vocabulary is a HashTableV2 its SavedModel's init op
    fills (LookupTableImportV2); the text goes StringLower -> StaticRegexReplace ->
    StringSplitV2 -> LookupTableFindV2 -> RaggedTensorToTensor.
  - textvec_multihot: TextVectorization(multi_hot, ngrams=2) -> Dense (StringNGrams,
    RaggedBincount).
  - textvec_tfidf: TextVectorization(tf_idf) -> Dense (the idf weights a variable).
  - hashing: Hashing(num_bins=32) and Hashing(num_bins=32, salt=[7, 11]) on the same strings
    -> two Embeddings -> Dense (StringToHashBucketFast, StringToHashBucketStrong).
  - lookup: StringLookup(vocabulary, num_oov_indices=2) and IntegerLookup(vocabulary) ->
    Embeddings -> Dense.
  - lookup_only: StringLookup alone, no variables: the SavedModel has no variables/ data, and
    its init op must still fill the table.
  - vocab_file: StringLookup(vocabulary=<a file>) -> Embedding -> Dense: the file is an asset
    (assets/words.txt), read by InitializeTableFromTextFileV2 from the path the loader feeds.
- tf1_vocab_file/: a TF1 SavedModel (tf.compat.v1.saved_model.Builder) of an indicator column
  of categorical_column_with_vocabulary_file: its vocabulary an asset listed in the
  "saved_model_assets" collection, its tables filled by the builder's main op.
- feature_columns.pb: a TF1 graph of feature columns, frozen (the estimator-era input layer):
  an embedding_column of categorical_column_with_vocabulary_list("word", 2 OOV buckets), an
  indicator_column of categorical_column_with_hash_bucket("city", 10) and numeric_column("age")
  -> input_layer -> MatMul `out`. Tables are HashTableV2s filled by LookupTableImportV2 under
  `init_all_tables`; feature_columns_feeds.npz (word, city, age) and `feature_columns/out` in
  expected.npz (the step after running init_all_tables).
- <name>_feeds.npz: its signature's inputs: `text` (bytes) and, for lookup, `ids` (int64).
- expected.npz: `<name>/<signature output key>`: what TensorFlow's reloaded SavedModel computed.
- meta.json: per model its signature's input and output keys.

This script never imports tfg (both register protobuf messages of the same names).
"""
import json
import os
import shutil

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402
import keras  # noqa: E402

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures",
                   "text_models")

CORPUS = [b"The quick brown fox jumps over the lazy dog.", b"Hello, World! Hello again...",
          b"a b c d e f g h i j k l", b"Caf\xc3\xa9 cr\xc3\xa8me BR\xc3\x9bL\xc3\x89E, \xc3\xbcber",
          b"fox fox fox dog", b"  spaces   between\twords\n"]
TEXT = np.array([b"The lazy dog; the QUICK fox!", b"", b"unknown words only zzz",
                 b"Caf\xc3\xa9 \xc3\x9cBER cr\xc3\xa8me", b"hello hello hello hello hello "
                 b"hello hello hello hello hello world", b"fox"], dtype=object)
IDS = np.array([3, 5, 9, 4, 0, 9], dtype=np.int64)


def text_input():
    return keras.Input(shape=(), dtype="string", name="text")


def textvec_int():
    tv = keras.layers.TextVectorization(max_tokens=40, output_mode="int",
                                        output_sequence_length=8)
    tv.adapt(np.array(CORPUS, dtype=object))
    inp = text_input()
    x = keras.layers.Embedding(40, 6)(tv(inp))
    x = keras.layers.GlobalAveragePooling1D()(x)
    return keras.Model(inp, keras.layers.Dense(3)(x)), {"text": "text"}


def textvec_multihot():
    tv = keras.layers.TextVectorization(max_tokens=60, output_mode="multi_hot", ngrams=2)
    tv.adapt(np.array(CORPUS, dtype=object))
    inp = text_input()
    return keras.Model(inp, keras.layers.Dense(3)(tv(inp))), {"text": "text"}


def textvec_tfidf():
    tv = keras.layers.TextVectorization(max_tokens=30, output_mode="tf_idf")
    tv.adapt(np.array(CORPUS, dtype=object))
    inp = text_input()
    return keras.Model(inp, keras.layers.Dense(2)(tv(inp))), {"text": "text"}


def hashing():
    inp = text_input()
    plain = keras.layers.Hashing(num_bins=32)(inp)
    salted = keras.layers.Hashing(num_bins=32, salt=[7, 11])(inp)
    x = keras.layers.Concatenate()([keras.layers.Embedding(32, 4)(plain),
                                    keras.layers.Embedding(32, 4)(salted)])
    return keras.Model(inp, keras.layers.Dense(2)(x)), {"text": "text"}


def lookup():
    text = text_input()
    ids = keras.Input(shape=(), dtype="int64", name="ids")
    words = keras.layers.StringLookup(vocabulary=["the", "fox", "dog", "hello", ""],
                                      num_oov_indices=2)(text)
    nums = keras.layers.IntegerLookup(vocabulary=[3, 5, 9])(ids)
    x = keras.layers.Concatenate()([keras.layers.Embedding(8, 3)(words),
                                    keras.layers.Embedding(5, 3)(nums)])
    return keras.Model([text, ids], keras.layers.Dense(2)(x)), {"text": "text", "ids": "ids"}


def feature_columns():
    """The frozen TF1 graph, its feeds and its `out` after `init_all_tables`."""
    tf1 = tf.compat.v1
    fc = tf1.feature_column
    g = tf.Graph()
    with g.as_default():
        tf1.set_random_seed(5)
        feeds = {"word": tf1.placeholder(tf.string, [None], name="word"),
                 "city": tf1.placeholder(tf.string, [None], name="city"),
                 "age": tf1.placeholder(tf.float32, [None], name="age")}
        words = fc.categorical_column_with_vocabulary_list("word", ["a", "b", "c"],
                                                           num_oov_buckets=2)
        cols = [fc.embedding_column(words, 4),
                fc.indicator_column(fc.categorical_column_with_hash_bucket("city", 10)),
                fc.numeric_column("age")]
        x = fc.input_layer(feeds, cols)
        w = tf1.get_variable("out_w", [x.shape[1], 2])
        out = tf.identity(tf.matmul(x, w), name="out")
        tables = tf1.tables_initializer(name="init_all_tables")
        values = {"word": np.array([b"a", b"c", b"zz", b"b", b""]),
                  "city": np.array([b"Paris", b"Oslo", b"", b"Paris", b"Lima"]),
                  "age": np.array([3.0, 40.0, -1.0, 0.5, 7.0], np.float32)}
        with tf1.Session(graph=g) as sess:
            sess.run([tf1.global_variables_initializer(), tables])
            result = sess.run(out, {feeds[k]: v for k, v in values.items()})
            gd = tf1.graph_util.convert_variables_to_constants(
                sess, g.as_graph_def(), ["out", "init_all_tables"])
    return gd, values, result


def lookup_only():
    text = text_input()
    out = keras.layers.StringLookup(vocabulary=["fox", "dog", "the"], num_oov_indices=1)(text)
    return keras.Model(text, out), {"text": "text"}


def vocab_file():
    words = os.path.join(OUT, "words.txt")
    with open(words, "w") as f:
        f.write("the\nfox\ndog\nhello\ncaf\u00e9\n")
    text = text_input()
    ids = keras.layers.StringLookup(vocabulary=words, num_oov_indices=1)(text)
    out = keras.layers.Dense(2)(keras.layers.Embedding(6, 3)(ids))
    return keras.Model(text, out), {"text": "text"}


def tf1_vocab_file():
    """The TF1 SavedModel folder, its feeds and its `y`."""
    tf1 = tf.compat.v1
    fc = tf1.feature_column
    path = os.path.join(OUT, "tf1_vocab_file")
    vocab = os.path.join(OUT, "tf1_vocab.txt")
    with open(vocab, "w") as f:
        f.write("apple\nbanana\ncherry\n")
    g = tf.Graph()
    values = {"word": np.array([b"banana", b"kiwi", b"apple", b""])}
    with g.as_default():
        tf1.set_random_seed(9)
        word = tf1.placeholder(tf.string, [None], name="word")
        col = fc.indicator_column(fc.categorical_column_with_vocabulary_file(
            "word", vocab, num_oov_buckets=1))
        x = fc.input_layer({"word": word}, [col])
        y = tf.identity(tf.matmul(x, tf1.get_variable("w", [4, 2])), name="y")
        with tf1.Session(graph=g) as sess:
            sess.run([tf1.global_variables_initializer(), tf1.tables_initializer()])
            result = sess.run(y, {word: values["word"]})
            builder = tf1.saved_model.Builder(path)
            builder.add_meta_graph_and_variables(
                sess, ["serve"], signature_def_map={
                    "serving_default": tf1.saved_model.predict_signature_def({"word": word},
                                                                             {"y": y})},
                assets_collection=tf1.get_collection(tf1.GraphKeys.ASSET_FILEPATHS),
                main_op=tf1.tables_initializer())
            builder.save()
    os.remove(vocab)  # the SavedModel's own copy under assets/ is what a loader must read
    return values, result


MODELS = [textvec_int, textvec_multihot, textvec_tfidf, hashing, lookup, lookup_only,
          vocab_file]


def main():
    shutil.rmtree(OUT, ignore_errors=True)
    os.makedirs(OUT)
    keras.utils.set_random_seed(3)
    feeds = {"text": TEXT, "ids": IDS}
    expected, meta = {}, {}
    for build in MODELS:
        name = build.__name__
        model, inputs = build()
        path = os.path.join(OUT, name)
        model.export(path, verbose=False)
        sig = tf.saved_model.load(path).signatures["serving_default"]
        _, kwargs = sig.structured_input_signature
        args = {k: tf.constant(feeds[inputs[k]]) for k in kwargs}
        outs = sig(**args)
        for key, value in outs.items():
            expected[f"{name}/{key}"] = value.numpy()
        meta[name] = {"signature": "serving_default", "inputs": sorted(kwargs),
                      "outputs": sorted(outs)}
        np.savez(os.path.join(OUT, f"{name}_feeds.npz"),
                 **{k: np.asarray(feeds[inputs[k]]).astype(bytes) if k == "text"
                    else feeds[inputs[k]] for k in kwargs})
    values, result = tf1_vocab_file()
    np.savez(os.path.join(OUT, "tf1_vocab_file_feeds.npz"), **values)
    expected["tf1_vocab_file/y"] = result
    meta["tf1_vocab_file"] = {"signature": "serving_default", "inputs": ["word"],
                              "outputs": ["y"]}
    os.remove(os.path.join(OUT, "words.txt"))
    gd, values, result = feature_columns()
    with open(os.path.join(OUT, "feature_columns.pb"), "wb") as f:
        f.write(gd.SerializeToString())
    np.savez(os.path.join(OUT, "feature_columns_feeds.npz"), **values)
    expected["feature_columns/out"] = result
    np.savez(os.path.join(OUT, "expected.npz"), **expected)
    with open(os.path.join(OUT, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1, sort_keys=True)
    print(json.dumps(meta, indent=1))


if __name__ == "__main__":
    main()
