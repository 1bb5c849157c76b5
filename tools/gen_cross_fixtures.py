#!/usr/bin/env python3
"""TensorFlow's values and errors of the feature-crossing ops (SparseCross, SparseCrossHashed,
SparseCrossV2) for tests/test_cross_ops.py. NEEDS TENSORFLOW; never imports tfg:

    /work/tfvenv/bin/python tools/gen_cross_fixtures.py

Writes tests/fixtures/cross/: cross.pb (one tf.compat.v1 graph: per case placeholders
`<case>/s<i>_indices`, `<case>/s<i>_values`, `<case>/s<i>_shape` per sparse input,
`<case>/d<i>` per dense input and the op's own extra inputs (`sep`, `num_buckets`,
`strong_hash`, `salt`) -> `<case>/out<k>`, Identity of the op's output k), cross.npz (feeds
and outputs; strings as numpy bytes arrays), cases.json; and keras_crossing.pb/.npz/.json, a
Keras HashedCrossing layer's concrete function (a string and an int64 input).
"""
import json
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from fixture_cases import CaseSet, fixture_dir, generate  # noqa: E402

OUT = fixture_dir("cross")
R = tf.raw_ops
I64 = np.int64
DEFAULT_KEY = 956888297470  # tf.sparse.cross_hashed's default hash_key


def S(*items):
    return np.array(items, dtype="S")


def sp(indices, values, shape):
    """A SparseTensor's three arrays; values as bytes or int64."""
    values = np.asarray(values)
    values = values.astype("S") if values.dtype.kind in "SU" else values.astype(I64)
    return np.asarray(indices, I64), values, np.asarray(shape, I64)


class Cases(CaseSet):
    """The cases' graph pieces, arrays and index (tools/fixture_cases.py writes them)."""

    def add(self, name, op, sparse=(), dense=(), attrs=None, extra=None, error=None):
        """sparse: [(indices, values, shape)]; dense: [array]; extra: {input: array}."""
        args = {}
        for i, (idx, val, shp) in enumerate(sparse):
            args.update({f"s{i}_indices": idx, f"s{i}_values": val, f"s{i}_shape": shp})
        args.update({f"d{i}": d for i, d in enumerate(dense)})
        args.update(extra or {})
        with tf.name_scope(name):
            phs = {k: tf.compat.v1.placeholder(
                tf.string if v.dtype.kind == "S" else tf.as_dtype(v.dtype),
                None if error else v.shape, name=k) for k, v in args.items()}
            n = len(sparse)
            kwargs = {"indices": [phs[f"s{i}_indices"] for i in range(n)],
                      "values": [phs[f"s{i}_values"] for i in range(n)],
                      "shapes": [phs[f"s{i}_shape"] for i in range(n)],
                      "dense_inputs": [phs[f"d{i}"] for i in range(len(dense))]}
            kwargs.update({k: phs[k] for k in (extra or {})})
            outs = getattr(R, op)(**kwargs, **(attrs or {}), name="op")
            for k, o in enumerate(outs):
                self.fetches[f"{name}/out{k}"] = tf.identity(o, name=f"out{k}")
        self.arrays.update({f"{name}/{k}": v for k, v in args.items()})
        self.index.append({"name": name, "op": op, "args": list(args), "outputs": 3,
                           "attrs": {k: v if isinstance(v, (int, bool)) else str(v)
                                     for k, v in (attrs or {}).items()},
                           "grad": [], "rtol": 0, "atol": 0, "error": error})

    def write(self, out, stem, graph):
        """As CaseSet's, TensorFlow's string values as bytes arrays (an npz never pickles)."""
        for k, v in self.arrays.items():
            if v.dtype == object:
                self.arrays[k] = v.astype("S")
        super().write(out, stem, graph)


# shared inputs: batch 3; row 1 of A empty, row 2 of B with three features
A = sp([[0, 0], [0, 1], [2, 0]], S("a", "b", "c"), [3, 2])
B = sp([[0, 0], [1, 0], [2, 0], [2, 1], [2, 2]], S("d", "e", "f", "g", "hh"), [3, 3])
AI = sp([[0, 0], [0, 1], [2, 0]], I64([7, -5, 2 ** 62 + 3]), [3, 2])
BI = sp([[0, 0], [1, 0], [2, 0], [2, 1]], I64([0, 1, -(2 ** 63), 2 ** 63 - 1]), [3, 2])
D = S(["x", "y"], ["z", ""], ["w", "v"])
DI = I64([[11], [-12], [13]])


def cross_attrs(hashed, out, internal, num_buckets=0, hash_key=DEFAULT_KEY):
    return {"hashed_output": hashed, "num_buckets": num_buckets, "hash_key": hash_key,
            "out_type": out, "internal_type": internal}


STR_STR = cross_attrs(False, tf.string, tf.string)
STR_INT = cross_attrs(False, tf.string, tf.int64)


def sparse_cross_cases(c):
    x = lambda name, sparse=(), dense=(), attrs=STR_STR, **kw: c.add(  # noqa: E731
        name, "SparseCross", sparse, dense, attrs, **kw)
    x("Sc_sparse_sparse", [A, B])
    x("Sc_sparse_dense", [A], [D])
    x("Sc_three", [A, B], [D])
    x("Sc_dense_dense", [], [D, D[:, :1]])
    x("Sc_one_input", [B])
    x("Sc_string_int64", [AI, B], [DI], STR_INT)
    x("Sc_int64_int64", [AI, BI], [DI], STR_INT)
    x("Sc_int_internal_strings", [A], [D], STR_INT)
    x("Sc_empty_sparse", [sp(np.zeros((0, 2)), S(), [3, 4]), B])
    x("Sc_empty_batch", [], [np.zeros((0, 2), "S"), np.zeros((0, 1), "S")])
    x("Sc_zero_width", [A], [np.zeros((3, 0), "S")])
    x("Sc_unsorted_rows", [sp([[2, 0], [0, 0], [1, 0]], S("p", "q", "r"), [3, 1]), B])
    x("Sc_rows_past_batch", [sp([[0, 0], [5, 0]], S("p", "q"), [3, 1]), B])
    # the output type chooses hashing, whatever hashed_output says
    x("Sc_out_string_hashed_attr", [A, B], attrs=cross_attrs(True, tf.string, tf.string))
    x("Sc_out_int64_unhashed_attr", [A, B],
      attrs=cross_attrs(False, tf.int64, tf.string, 10))
    for nb in (0, 1, 7, 1000):
        for ktag, key in (("def", DEFAULT_KEY), ("0", 0), ("m1", -1), ("max", 2 ** 63 - 1)):
            if nb in (1, 7) and ktag not in ("def", "m1"):
                continue
            tag = f"b{nb}_k{ktag}"
            x(f"Sch_{tag}", [A, B], [D], cross_attrs(True, tf.int64, tf.string, nb, key))
            x(f"Sch_int_{tag}", [AI, B], [DI], cross_attrs(True, tf.int64, tf.int64, nb, key))
    x("Sch_long_strings", [sp([[0, 0], [0, 1]], S("q" * 70, "r" * 20), [1, 2])],
      [S(["s" * 40, "t" * 9])], cross_attrs(True, tf.int64, tf.string, 0, 5))
    x("Sch_int_only", [BI], [DI], cross_attrs(True, tf.int64, tf.int64, 0, 3))
    # TensorFlow's refusals
    x("ScErr_int_values", [AI, B], error="Input values should be of internal type")
    x("ScErr_int_dense", [A], [DI], error="Dense inputs should be of internal type")
    x("ScErr_indices_rank", [sp(I64([0, 1]), S("a", "b"), [2, 1])],
      error="Input indices should be a matrix but received shape [2] at position 0")
    x("ScErr_indices_d2", [(I64([[0, 0, 0]]), S("a"), I64([2, 1]))],
      error="Expected D2 of index to be 2 got 3 at position 0")
    x("ScErr_values_rank", [(I64([[0, 0]]), S(["a"]), I64([2, 1]))],
      error="Input values should be a vector but received shape [1,1] at position 0")
    x("ScErr_values_size", [A, (B[0], B[1][:4], B[2])],
      error="Expected size of values to be 5 got 4 at position 1")
    x("ScErr_shape_rank", [(A[0], A[1], I64(3))],
      error="Input shapes should be a vector but received shape [] at position 0")
    x("ScErr_shape_size", [(A[0], A[1], I64([3, 2, 1]))],
      error="shape should imply a 2D tensor, but got [3] at position 0")
    x("ScErr_dense_rank", [A], [S("x", "y", "z")],
      error="Dense inputs should be a matrix but received shape [3] at position 0")
    x("ScErr_batch_sparse", [A, (B[0], B[1], I64([4, 3]))],
      error="Expected batch size 3 got 4 at position 1")
    x("ScErr_batch_dense", [A], [D[:2]], error="Expected batch size 3 got 2 at dense tensor 0")
    x("ScErr_batch_dense_only", [], [D, D[:1]],
      error="Expected batch size 3 got 1 at dense tensor 1")


def hashed_cases(c):
    def h(name, sparse=(), dense=(), nb=0, strong=False, salt=(0, 0), error=None):
        c.add(name, "SparseCrossHashed", sparse, dense,
              extra={"num_buckets": I64(nb), "strong_hash": np.bool_(strong),
                     "salt": I64(salt)}, error=error)

    for strong in (False, True):
        for salt in ((0, 0), (1, 2), (-7, 2 ** 63 - 1)):
            for nb in (0, 1000):
                tag = f"{'strong' if strong else 'fast'}_s{salt[0] & 0xff}_{salt[1] & 0xff}"
                h(f"Sh_{tag}_b{nb}", [A, B], [D], nb, strong, salt)
                # (TensorFlow 2.21 segfaults on strong_hash with an int64 dense input)
                h(f"Sh_int_{tag}_b{nb}", [AI, BI], [] if strong else [DI], nb, strong, salt)
    h("Sh_dense_int_first", [A], [DI, D], 0, False, (3, 4))
    h("Sh_negative_buckets", [A, B], [D], -5, False, (1, 2))
    h("Sh_one_input", [B], [], 13, True, (5, 6))
    h("Sh_empty_batch", [], [np.zeros((0, 1), I64)], 10)
    h("ShErr_salt", [A, B], [], 10, False, (1, 2, 3),
      error='Input "salt" must have length 2 but has length 3')
    h("ShErr_batch", [A], [D[:1]], 10, error="Expected batch size 3 got 1 at dense tensor 0")


def v2_cases(c):
    def v2(name, sparse=(), dense=(), sep=b"_X_", error=None):
        c.add(name, "SparseCrossV2", sparse, dense, extra={"sep": np.array(sep, "S")},
              error=error)

    v2("V2_default_sep", [A, B], [D])
    v2("V2_custom_sep", [A, B], [D], b"--")
    v2("V2_empty_sep", [A], [D], b"")
    v2("V2_int64", [AI, BI], [DI], b"|")
    v2("V2_mixed", [AI, B], [D], b" x ")
    v2("V2Err_sep", [A, B], [], [b"a", b"b"], error="Input separator should be a scalar.")
    v2("V2Err_indices_d2", [(I64([[0, 0, 0]]), S("a"), I64([2, 1]))],
       error="Expected D2 of index to be 2 got 3 at position 0")


def keras_crossing(out):
    """A Keras HashedCrossing layer's concrete function (string and int64 inputs), frozen to a
    GraphDef, with feeds and values."""
    import keras
    layer = keras.layers.HashedCrossing(num_bins=97)
    fn = tf.function(lambda a, b: tf.identity(layer((a, b)), name="y"),
                     input_signature=[tf.TensorSpec([None], tf.string, name="a"),
                                      tf.TensorSpec([None], tf.int64, name="b")])
    cf = fn.get_concrete_function()
    gd = cf.graph.as_graph_def()
    a = S("red", "green", "blue", "", "caf\u00e9".encode(), "red")
    b = I64([1, 2, -3, 4, 2 ** 40, 1])
    y = cf(tf.constant(a.astype(object)), tf.constant(b)).numpy()
    with open(os.path.join(out, "keras_crossing.pb"), "wb") as f:
        f.write(gd.SerializeToString())
    np.savez_compressed(os.path.join(out, "keras_crossing.npz"), a=a, b=b, y=y)
    index = {"feeds": {"a": "a:0", "b": "b:0"}, "fetch": cf.outputs[0].name,
             "ops": sorted({n.op for n in gd.node})}
    with open(os.path.join(out, "keras_crossing.json"), "w") as f:
        json.dump(index, f, indent=1)
        f.write("\n")
    print("keras crossing:", index)


if __name__ == "__main__":
    generate(Cases(), [sparse_cross_cases, hashed_cases, v2_cases], OUT, "cross")
    keras_crossing(OUT)
