#!/usr/bin/env python3
"""TensorFlow's values and errors of the string-hashing ops (StringToHashBucketFast,
StringToHashBucketStrong, StringToHashBucket, Fingerprint) and the ragged and bincount ops
(RaggedTensorToTensor, RaggedTensorToSparse, RaggedRange, RaggedGather, RaggedBincount,
SparseBincount) for tests/test_hash_ragged_ops.py. NEEDS TENSORFLOW; never imports tfg:

    /work/tfvenv/bin/python tools/gen_hash_ragged_fixtures.py

Writes tests/fixtures/hash_ragged/: hash_ragged.pb (one tf.compat.v1 graph: per case
`<case>/<arg>` placeholders -> `<case>/out<k>`, Identity of the op's output k; the
RaggedTensorToTensor cases with a gradient also `<case>/loss` = sum(out0 * weights) and
TensorFlow's gradients `<case>/tf_dvalues`, `<case>/tf_ddefault_value`), hash_ragged.npz
(feeds, `<case>/out<k>`, `<case>/d<arg>`; strings as numpy bytes arrays, which drop trailing
NULs, so no random string ends in one), cases.json; and keras_hashing_<name>.pb/.npz, the
concrete functions of Keras Hashing layers (feed `x`, fetch in keras_hashing.json).
"""
import json
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from fixture_cases import CaseSet, fixture_dir, generate  # noqa: E402

OUT = fixture_dir("hash_ragged")
R = tf.raw_ops
RNG = np.random.default_rng(47)
I32, I64, F32, F64 = np.int32, np.int64, np.float32, np.float64


class Cases(CaseSet):
    """The cases' graph pieces, arrays and index (tools/fixture_cases.py writes them)."""

    def add(self, name, op, args, attrs=None, lists=None, error=None, grad=()):
        """args: {input name: array}; lists: {list input name: [arg names]} (the ops' N *
        T inputs); grad: the args TensorFlow differentiates sum(out0 * w) by."""
        lists = lists or {}
        with tf.name_scope(name):
            # TensorFlow's shape function wants RaggedTensorToTensor's scalar shape (-1,
            # unknown) static: a Const, not fed
            consts = {k for k, v in args.items() if k == "shape" and v.ndim == 0}
            phs = {k: tf.constant(v, name=k) if k in consts else
                   tf.compat.v1.placeholder(tf.as_dtype(v.dtype) if v.dtype.kind != "S"
                                            else tf.string, None if error else v.shape, name=k)
                   for k, v in args.items()}
            args = {k: v for k, v in args.items() if k not in consts}
            kwargs = {k: v for k, v in phs.items()
                      if not any(k in names for names in lists.values())}
            kwargs.update({k: [phs[n] for n in names] for k, names in lists.items()})
            result = getattr(R, op)(**kwargs, **(attrs or {}), name="op")
            outs = []
            for o in (result if isinstance(result, (list, tuple)) else [result]):
                outs.extend(o if isinstance(o, (list, tuple)) else [o])
            for k, o in enumerate(outs):
                self.fetches[f"{name}/out{k}"] = tf.identity(o, name=f"out{k}")
            self.arrays.update({f"{name}/{k}": v for k, v in args.items()})
            if grad:
                w = RNG.standard_normal(2 * 3 * 4 * 5).astype(args["values"].dtype)
                weights = tf.reshape(tf.constant(w)[:tf.size(outs[0])], tf.shape(outs[0]))
                loss = tf.reduce_sum(outs[0] * weights, name="loss")
                for arg, d in zip(grad, tf.gradients(loss, [phs[a] for a in grad])):
                    # (the values' gradient is IndexedSlices: made dense, as tf.gradients'
                    # callers see it)
                    self.fetches[f"{name}/d{arg}"] = tf.identity(tf.convert_to_tensor(d),
                                                                 name=f"tf_d{arg}")
        self.index.append({"name": name, "op": op, "args": list(args), "outputs": len(outs),
                           "attrs": {k: v if isinstance(v, (int, list)) else str(v)
                                     for k, v in (attrs or {}).items()},
                           "grad": list(grad), "rtol": 1e-6, "atol": 1e-6, "error": error})


    def write(self, out, stem, graph):
        """As CaseSet's, TensorFlow's string values as bytes arrays (an npz never pickles)."""
        for k, v in self.arrays.items():
            if v.dtype == object:
                self.arrays[k] = v.astype("S")
        super().write(out, stem, graph)


def random_strings(per_length=2, longest=300):
    """Random bytes (non-ASCII too) of every length 0..longest, none ending in a NUL."""
    out = []
    for n in range(longest + 1):
        for _ in range(per_length):
            s = bytearray(RNG.integers(0, 256, n, dtype=np.uint8).tobytes())
            if n and s[-1] == 0:
                s[-1] = 1
            out.append(bytes(s))
    return np.array(out, dtype=object).astype("S")


def strings_of(*items):
    return np.array(items, dtype="S")


def hash_cases(c):
    # every length 0..300 (FarmHash's branches) with the widest modulus, which keeps 63 bits
    # of the hash; other bucket counts on shorter strings (random bytes do not compress)
    s, short = random_strings(), random_strings(per_length=1, longest=70)
    words = strings_of("Hello", "TensorFlow", "2.x", "", "caf\u00e9".encode(), "a b c")
    for nb in (1, 3, 1000, 2 ** 31 - 1, 2 ** 63 - 1):
        x = s if nb == 2 ** 63 - 1 else short
        c.add(f"Fast_b{nb}", "StringToHashBucketFast", {"input": x}, {"num_buckets": nb})
        c.add(f"Hash64_b{nb}", "StringToHashBucket", {"string_tensor": x}, {"num_buckets": nb})
    for key in ([0, 0], [1, 2], [2 ** 62 + 12345, -5], [-1, 2 ** 63 - 1]):
        for nb, x in ((7, short), (2 ** 63 - 1, s if key[0] in (1, -1) else short)):
            c.add(f"Strong_k{key[0] & 0xffff}_{key[1] & 0xffff}_b{nb}",
                  "StringToHashBucketStrong", {"input": x}, {"num_buckets": nb, "key": key})
    c.add("Fast_words_2d", "StringToHashBucketFast", {"input": words.reshape(2, 3)},
          {"num_buckets": 3})
    c.add("Fast_empty", "StringToHashBucketFast", {"input": strings_of()}, {"num_buckets": 5})
    c.add("Strong_scalar", "StringToHashBucketStrong", {"input": np.array(b"TF", "S")},
          {"num_buckets": 3, "key": [1, 2]})
    c.add("StrongErr_key", "StringToHashBucketStrong", {"input": words},
          {"num_buckets": 3, "key": [1]}, error="Key must have 2 elements")


def fingerprint_cases(c):
    s = random_strings(per_length=2, longest=150)
    method = np.array(b"farmhash64", "S")
    fp = lambda name, data, m=method, **kw: c.add(  # noqa: E731
        name, "Fingerprint", {"data": data, "method": m}, **kw)
    fp("Fp_strings", s)
    fp("Fp_strings_rows", s.reshape(151, 2))
    fp("Fp_strings_3d", s[:300].reshape(10, 3, 10))
    fp("Fp_strings_col", s[:20].reshape(20, 1, 1))
    fp("Fp_int32", RNG.integers(-2 ** 31, 2 ** 31, (4, 3, 5), dtype=I32))
    fp("Fp_float64", RNG.standard_normal((3, 7)))
    fp("Fp_uint8_long", RNG.integers(0, 256, (6, 200), dtype=np.uint8))
    fp("Fp_bool", RNG.random((5, 3)) < 0.5)
    fp("Fp_int64_vec", RNG.integers(-2 ** 62, 2 ** 62, 9, dtype=I64))
    fp("Fp_float32_zero_width", np.zeros((4, 0), F32))
    fp("Fp_empty_batch", np.zeros((0, 3), F32))
    fp("FpErr_method", np.zeros(3, F32), np.array(b"md5", "S"),
       error="Unsupported fingerprint method: md5")
    fp("FpErr_rank0", np.array(1, I32), error="`data` should have at least one dimension")


def _rtt(c, name, shape, values, default, parts, types, error=None, grad=()):
    args = {"shape": shape, "values": values, "default_value": default}
    names = [f"p{i}" for i in range(len(parts))]
    args.update(zip(names, parts))
    c.add(name, "RaggedTensorToTensor", args, {"row_partition_types": types},
          lists={"row_partition_tensors": names}, error=error, grad=grad)


def to_tensor_cases(c):
    v = np.arange(1, 7, dtype=F32)
    sp = I64([0, 2, 2, 6])
    splits = ["ROW_SPLITS"]
    rowids = ["FIRST_DIM_SIZE", "VALUE_ROWIDS"]
    _rtt(c, "Rtt_splits", I64(-1), v, F32(0), [sp], splits, grad=("values", "default_value"))
    _rtt(c, "Rtt_splits_i32", np.int32(-1), v.astype(I32), I32(-7), [sp.astype(I32)], splits)
    _rtt(c, "Rtt_shape_pad", I64([4, 5]), v, F32(9), [sp], splits,
         grad=("values", "default_value"))
    _rtt(c, "Rtt_shape_cut", I64([2, 1]), v, F32(9), [sp], splits,
         grad=("values", "default_value"))
    _rtt(c, "Rtt_shape_m1_cols", I64([-1, 2]), v, F32(0), [sp], splits)
    _rtt(c, "Rtt_shape_m1_rows", I64([5, -1]), v, F32(0), [sp], splits)
    _rtt(c, "Rtt_shape_zero", I64([0, 3]), v, F32(0), [sp], splits)
    _rtt(c, "Rtt_rowids", I64(-1), v, F32(-1), [I64(4), I64([0, 0, 2, 2, 2, 3])], rowids,
         grad=("values", "default_value"))
    _rtt(c, "Rtt_rowids_short", I64(-1), v, F32(0), [I64(4), I64([0, 0, 2, 2, 2])], rowids)
    _rtt(c, "Rtt_rowids_empty", I64(-1), v[:0], F32(0), [I64(3), I64([])], rowids)
    _rtt(c, "Rtt_empty_rows", I64(-1), v[:0], F32(0), [I64([0, 0, 0])], splits)
    _rtt(c, "Rtt_no_rows", I64(-1), v[:0], F32(0), [I64([0])], splits)
    _rtt(c, "Rtt_splits_short", I64(-1), v, F32(0), [I64([0, 2, 2, 5])], splits)
    m = np.arange(12, dtype=F64).reshape(6, 2)
    _rtt(c, "Rtt_inner_default_vec", I64(-1), m, F64([7, 8]), [sp], splits,
         grad=("values", "default_value"))
    _rtt(c, "Rtt_inner_default_one", I64([3, -1, -1]), m, F64([5]), [sp], splits)
    _rtt(c, "Rtt_inner_default_scalar", I64([2, 3, 2]), m, F64(-1), [sp], splits)
    _rtt(c, "Rtt_rank2_splits", I64(-1), v, F32(0), [I64([0, 1, 3]), sp], splits * 2,
         grad=("values",))
    _rtt(c, "Rtt_rank2_rowids", I64([2, 2, -1]), v, F32(0),
         [I64(2), I64([0, 1, 1]), I64([0, 0, 2, 2, 2])], rowids + ["VALUE_ROWIDS"])
    _rtt(c, "Rtt_rank2_short_parent", I64(-1), v, F32(0), [I64([0, 1, 4]), sp], splits * 2)
    _rtt(c, "Rtt_strings", I64([-1, 3]), strings_of("a", "bb", "ccc"), np.array(b"pad", "S"),
         [I64([0, 2, 2, 3])], splits)
    long = RNG.integers(0, 9, 40).astype(I64)
    lens = RNG.integers(0, 9, 8)
    lens[-1] = 40 - lens[:-1].sum() if lens[:-1].sum() <= 40 else 0
    lens = lens if lens.sum() == 40 else np.array([5] * 8)
    _rtt(c, "Rtt_random", I64([-1, 6]), long, I64(0),
         [np.concatenate([[0], np.cumsum(lens)]).astype(I64)], splits)
    # TensorFlow's refusals
    _rtt(c, "RttErr_split_start", I64(-1), v, F32(0), [I64([1, 2, 2, 6])], splits,
         error="Invalid row split size.")
    _rtt(c, "RttErr_split_decreasing", I64(-1), v, F32(0), [I64([0, 3, 2, 6])], splits,
         error="Invalid row split size.")
    _rtt(c, "RttErr_split_empty", I64(-1), v, F32(0), [I64([])], splits,
         error="Invalid first partition input. Tensor requires at least one element.")
    _rtt(c, "RttErr_rowid_big", I64(-1), v, F32(0), [I64(4), I64([0, 0, 2, 2, 2, 4])], rowids,
         error="Got next_value_rowid=4 which is not less than 4")
    _rtt(c, "RttErr_rowid_neg", I64(-1), v, F32(0), [I64(4), I64([-1, 0, 2, 2, 2, 3])],
         rowids, error="Got current_value_rowid=-1 which is not less than 4")
    _rtt(c, "RttErr_first_dim_neg", I64(-1), v, F32(0), [I64(-2), I64([0, 0, 2, 2, 2, 3])],
         rowids, error="Dimension -2 must be >= 0")
    _rtt(c, "RttErr_default_shape", I64(-1), m, F64([1, 2, 3]), [sp], splits,
         error="default_value.shape[-1] = 3 but rt_input.flat_values.shape[-1] = 2")
    _rtt(c, "RttErr_default_rank", I64(-1), m, F64([[1, 2]]), [sp], splits,
         error="are incompatible: default_value.rank = 2")  # (then two spaces)
    _rtt(c, "RttErr_shape_rank", I64([2, 5, 3]), v, F32(0), [sp], splits,
         error="rt_input.rank = 2 but shape.rank = 3")
    _rtt(c, "RttErr_shape_neg", I64([-2, 3]), v, F32(0), [sp], splits,
         error="Dimension -2 must be >= -1")
    _rtt(c, "RttErr_shape_inner", I64([3, 4, 3]), m, F64(0), [sp], splits,
         error="rt_input.shape[2] = 2 but shape[2] = 3")
    _rtt(c, "RttErr_nested_rows", I64(-1), v, F32(0), [I64([0, 1, 2]), sp], splits * 2,
         error="Row partition size is greater than output size: 3 > 2")


def to_sparse_cases(c):
    v = np.arange(1, 7, dtype=F32)

    def sparse(name, nested, values, error=None):
        names = [f"s{i}" for i in range(len(nested))]
        args = dict(zip(names, nested))
        args["rt_dense_values"] = values
        c.add(name, "RaggedTensorToSparse", args, lists={"rt_nested_splits": names},
              error=error)

    sparse("Rts_rank1", [I64([0, 2, 2, 6])], v)
    sparse("Rts_rank1_i32", [I32([0, 2, 2, 6])], v.astype(I32))
    sparse("Rts_rank2", [I64([0, 1, 3]), I64([0, 2, 2, 6])], v.reshape(6, 1))
    sparse("Rts_inner", [I64([0, 3, 3])], np.arange(9, dtype=F64).reshape(3, 3))
    sparse("Rts_strings", [I64([0, 1, 1, 3])], strings_of("x", "yy", "z"))
    sparse("Rts_empty", [I64([0, 0, 0])], v[:0])
    sparse("RtsErr_start", [I64([1, 2, 2, 6])], v, "First value of ragged splits must be 0.")
    sparse("RtsErr_decreasing", [I64([0, 3, 2, 6])], v,
           "Ragged splits should be non decreasing, but we got 3 followed by 2")
    sparse("RtsErr_last", [I64([0, 2, 2, 5])], v,
           "Final value of ragged splits must match the length the corresponding ragged "
           "values.")
    sparse("RtsErr_empty", [I64([])], v, "ragged splits may not be empty.")
    sparse("RtsErr_inner_last", [I64([0, 1, 4]), I64([0, 2, 2, 6])], v,
           "Final value of ragged splits must match")


def range_cases(c):
    def rng(name, s, lim, d, attrs=None, error=None):
        c.add(name, "RaggedRange", {"starts": s, "limits": lim, "deltas": d}, attrs,
              error=error)

    rng("Range_i32", I32([0, 5, 8, 5, -3]), I32([8, 7, 8, 1, 4]), I32([2, 1, 1, -1, 3]))
    rng("Range_i64_splits32", I64([0, 5]), I64([4, -100]), I64([1, -7]), {"Tsplits": tf.int32})
    rng("Range_f32", F32([0.1, 5, -1.5]), F32([3.3, -1, 2]), F32([0.1, -0.7, 0.25]))
    rng("Range_f64", F64([0.1, 1e-3]), F64([30.3, 1.0]), F64([2.7, 0.01]))
    rng("Range_bcast_starts", I32(3), I32([4, 6, 2]), I32(1))
    rng("Range_bcast_all", I64(0), I64(5), I64(2))
    rng("Range_empty_rows", I32([]), I32([]), I32([]))
    rng("Range_wrong_way", I32([5, 0]), I32([0, 5]), I32([1, -1]))
    rng("RangeErr_delta0", I32([0, 1]), I32([4, 2]), I32([1, 0]), error="Requires delta != 0")
    rng("RangeErr_shapes", I32([1, 2]), I32([4, 6, 2]), I32(1),
        error="starts, limits, and deltas must have the same shape")
    rng("RangeErr_rank", I32([[1, 2]]), I32([4, 6]), I32(1),
        error="starts must be a scalar or vector")
    rng("RangeErr_splits32", I64([0]), I64([2 ** 31 + 5]), I64([1]), {"Tsplits": tf.int32},
        error="Requires ((limit - start) / delta) <= 2147483647")


def gather_cases(c):
    v = np.arange(1, 7, dtype=F32)

    def gather(name, nested, values, indices, error=None):
        names = [f"s{i}" for i in range(len(nested))]
        args = dict(zip(names, nested))
        args.update({"params_dense_values": values, "indices": indices})
        c.add(name, "RaggedGather", args,
              {"OUTPUT_RAGGED_RANK": np.ndim(indices) + len(nested) - 1},
              lists={"params_nested_splits": names}, error=error)

    sp = I64([0, 2, 2, 6])
    gather("Gather_1d", [sp], v, I32([2, 0, 1, 2]))
    gather("Gather_2d", [sp], v, I64([[2, 0], [1, 2]]))
    gather("Gather_3d", [sp], v, I32([[[2], [0]], [[1], [1]]]))
    gather("Gather_scalar", [I64([0, 2, 2, 6]), I64([0, 1, 1, 2, 3, 5, 6])], v, I32(2))
    gather("Gather_rank2", [I64([0, 1, 3]), sp], v, I32([1, 1, 0]))
    gather("Gather_inner", [I32([0, 1, 3])], np.arange(6, dtype=F64).reshape(3, 2), I32([1]))
    gather("Gather_strings", [sp], strings_of("a", "b", "c", "d", "e", "f"), I32([0, 2]))
    gather("Gather_empty", [sp], v, I32([]))
    gather("GatherErr_oob", [sp], v, I32([3]), error="indices[0] = 3 is not in [0, 3)")
    gather("GatherErr_neg", [sp], v, I32([0, -1]), error="indices[1] = -1 is not in [0, 3)")
    gather("GatherErr_unsorted", [I64([0, 2, 1, 6])], v, I32([1]),
           error="Ragged splits must be sorted")
    gather("GatherErr_past", [I64([0, 2, 2, 9])], v, I32([1]),
           error="Ragged splits must not point past values")


def bincount_cases(c):
    vals = I32([1, 1, 0, 3, 9, 2])
    sp = I64([0, 2, 2, 6])

    def ragged(name, splits, values, size, weights, binary=False, error=None):
        c.add(name, "RaggedBincount", {"splits": splits, "values": values, "size": size,
                                       "weights": weights}, {"binary_output": binary},
              error=error)

    ragged("Rbc_counts", sp, vals, I32(4), F32([]))
    ragged("Rbc_weights", sp, vals, I32(4), F32([1, 2, 3, 4, 5, 6]))
    ragged("Rbc_binary", sp, vals, I32(4), F32([1, 2, 3, 4, 5, 6]), True)
    ragged("Rbc_i64_weights", sp, vals.astype(I64), I64(10), I64([1, 2, 3, 4, 5, 6]))
    ragged("Rbc_double", sp, vals, I32(3), F64([0.5, 0.25, 1, 2, 3, 4]))
    ragged("Rbc_size0", sp, vals, I32(0), F32([]))
    ragged("Rbc_empty", I64([0, 0]), I32([]), I32(3), I32([]))
    ragged("Rbc_splits_decrease", I64([0, 3, 2, 6]), vals, I32(4), F32([]))
    text = RNG.integers(0, 50, 300).astype(I64)
    ragged("Rbc_text", np.sort(np.concatenate([[0, 300], RNG.integers(0, 300, 9)])).astype(I64),
           text, I64(40), F32(RNG.random(300)))
    ragged("RbcErr_negative", sp, I32([1, -1, 0, 3, 9, 2]), I32(4), F32([]),
           error="Input must be non-negative")
    ragged("RbcErr_size", sp, vals, I32(-1), F32([]), error="size (-1) must be non-negative")
    ragged("RbcErr_start", I64([1, 2, 2, 6]), vals, I32(4), F32([]),
           error="Splits must start with 0, not with 1")
    ragged("RbcErr_end", I64([0, 2, 2, 5]), vals, I32(4), F32([]),
           error="Splits must end with the number of values, got 5 instead of 6")
    ragged("RbcErr_empty", I64([]), vals, I32(4), F32([]), error="Splits must be non-empty")

    def sparse(name, indices, values, shape, size, weights, binary=False, error=None):
        c.add(name, "SparseBincount", {"indices": indices, "values": values,
                                       "dense_shape": shape, "size": size,
                                       "weights": weights}, {"binary_output": binary},
              error=error)

    idx2 = I64([[0, 0], [0, 3], [2, 1], [2, 2]])
    sparse("Sbc_2d", idx2, I32([1, 1, 2, 7]), I64([3, 4]), I32(3), F32([]))
    sparse("Sbc_2d_weights", idx2, I64([1, 1, 2, 0]), I64([3, 4]), I64(3), F64([1, 2, 3, 4]))
    sparse("Sbc_2d_binary", idx2, I32([1, 1, 2, 7]), I64([3, 4]), I32(3), I32([5, 6, 7, 8]),
           True)
    sparse("Sbc_1d", I64([[0], [3], [4]]), I32([1, 1, 2]), I64([5]), I32(3), F32([1, 2, 3]))
    sparse("Sbc_3d", I64([[0, 0, 0], [3, 0, 0]]), I32([1, 2]), I64([5, 1, 1]), I32(3), F32([]))
    sparse("Sbc_empty", np.zeros((0, 2), I64), I32([]), I64([2, 3]), I32(2), F32([]))
    sparse("SbcErr_negative", I64([[0], [3], [4]]), I32([1, -1, 2]), I64([5]), I32(3), F32([]),
           error="Input arr must be non-negative!")
    sparse("SbcErr_size", I64([[0], [3], [4]]), I32([1, 1, 2]), I64([5]), I32(-3), F32([]),
           error="size (-3) must be non-negative")
    sparse("SbcErr_weights", I64([[0], [3], [4]]), I32([1, 1, 2]), I64([5]), I32(3), F32([1]),
           error="Input indices and weights must have the same size.")
    sparse("SbcErr_index", I64([[0, 0], [7, 3]]), I32([1, 1]), I64([3, 4]), I32(3), F32([]),
           error="Sparse index tuple indices[1, :] = [7, 3] is out of bounds")
    sparse("SbcErr_count", I64([[0, 0], [1, 3]]), I32([1, 1, 1]), I64([3, 4]), I32(3), F32([]),
           error="Number of elements in indices (2) and values (3) do not match")


def keras_hashing(out):
    """Keras Hashing layers' concrete functions, frozen to GraphDefs, with feeds and values;
    only where the graph is plain (no captured resources)."""
    import keras
    x = random_strings(per_length=1, longest=80)
    index = {}
    arrays = {"x": x}
    for name, layer in (("bins7", keras.layers.Hashing(num_bins=7)),
                        ("salt", keras.layers.Hashing(num_bins=11, salt=[123, 456])),
                        ("mask", keras.layers.Hashing(num_bins=5, mask_value=b""))):
        fn = tf.function(lambda t, layer=layer: tf.identity(layer(t), name="y"),
                         input_signature=[tf.TensorSpec([None], tf.string, name="x")])
        cf = fn.get_concrete_function()
        gd = cf.graph.as_graph_def()
        if cf.captured_inputs or any(n.op in ("VarHandleOp", "Placeholder") and
                                     n.name != "x" for n in gd.node):
            print("skipped (captures)", name)
            continue
        with open(os.path.join(out, f"keras_hashing_{name}.pb"), "wb") as f:
            f.write(gd.SerializeToString())
        arrays[name] = cf(tf.constant(x.astype(object))).numpy()
        index[name] = {"feed": "x:0", "fetch": cf.outputs[0].name,
                       "ops": sorted({n.op for n in gd.node})}
    np.savez_compressed(os.path.join(out, "keras_hashing.npz"), **arrays)
    with open(os.path.join(out, "keras_hashing.json"), "w") as f:
        json.dump(index, f, indent=1)
        f.write("\n")
    print("keras hashing:", sorted(index))


if __name__ == "__main__":
    generate(Cases(), [hash_cases, fingerprint_cases, to_tensor_cases, to_sparse_cases,
                       range_cases, gather_cases, bincount_cases], OUT, "hash_ragged")
    keras_hashing(OUT)
