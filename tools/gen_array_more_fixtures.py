#!/usr/bin/env python3
"""TensorFlow's values, gradients and errors of the set, partition, search, count, scan and
diagonal ops, for tests/test_array_more_ops.py. NEEDS TENSORFLOW; never imports tfg:

    /work/tfvenv/bin/python tools/gen_array_more_fixtures.py

Writes tests/fixtures/array_more/graph.pb: one tf.compat.v1 graph holding every case under its
own name scope (`<case>/in_<k>` placeholders, raw ops as TensorFlow's graph builder writes
them, and for differentiable cases the weights `<case>/w_<j>` of the loss sum(w * y)), and
cases.npz:

    <case>/feed_<k>    the value fed to <case>/in_<k>
    <case>/fetch       the tensor names tfg runs (a unicode array), <case>/out_<j> TF's values
    <case>/ys, /xs     for a gradient case: the ys and xs, <case>/w_<i> the grad_ys fed
                       for ys[i],
                       <case>/grad_<k> TF's tf.gradients w.r.t. xs[k]
    <case>/error       for an error case: the first line of TensorFlow's message

String values are stored as bytes arrays ('S'), never pickled objects. TopK (v1): TensorFlow
2.21's CPU kernel refuses the v1 node (it wants an index_type attr the v1 op lacks), so its
expected values and gradients come from TopKV2 on the same input.
"""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from fixture_cases import fixture_dir  # noqa: E402

OUT = fixture_dir("array_more")
R = tf.raw_ops
v1 = tf.compat.v1
RNG = np.random.default_rng(45)

f32, f64, i32, i64 = np.float32, np.float64, np.int32, np.int64


def randn(*shape, dtype=f32):
    return RNG.standard_normal(shape).astype(dtype)


# name -> (inputs, build(placeholders) -> outputs or (outputs, TensorFlow's reference
# tensors), gradient: indices of the float inputs to differentiate (None: no gradient),
# which outputs are ys (default: all float outputs), shapes known to the placeholders)
CASES = {}


def case(name, inputs, build, grad=None, ys=None, known_shapes=True):
    CASES[name] = (inputs, build, grad, ys, known_shapes)


def error(name, inputs, build):
    """A case whose run TensorFlow refuses (placeholders of unknown shape, so the kernel
    decides)."""
    CASES[name] = (inputs, build, "error", None, False)


NAN, INF = np.nan, np.inf

# --- Unique, UniqueV2, UniqueWithCounts
case("unique_int32", [np.array([4, 1, 4, 7, 1, 0, 7, 7], i32)], lambda p: R.Unique(x=p[0]))
case("unique_float_nan_zero", [np.array([NAN, 1, -0.0, 0.0, NAN, 1, 2.5], f32)],
     lambda p: R.Unique(x=p[0], out_idx=tf.int64))
case("unique_float64_empty", [np.zeros([0], f64)], lambda p: R.Unique(x=p[0]))
case("unique_int8", [np.array([-3, 5, -3, 127, -128, 5], np.int8)], lambda p: R.Unique(x=p[0]))
case("unique_bool", [np.array([True, False, True, True])], lambda p: R.Unique(x=p[0]))
case("unique_string", [np.array([b"b", b"a", b"b", b"", b"a"])], lambda p: R.Unique(x=p[0]))
case("unique_with_counts", [np.array([4, 1, 4, 4, 2, 1], i64)],
     lambda p: R.UniqueWithCounts(x=p[0], out_idx=tf.int64))
case("unique_with_counts_f32", [np.array([0.5, -1, 0.5, 3], f32)],
     lambda p: R.UniqueWithCounts(x=p[0]))
case("unique_v2_axis0", [np.array([[1, 2], [3, 4], [1, 2], [1, 3]], i32),
                         np.array([0], i64)], lambda p: R.UniqueV2(x=p[0], axis=p[1]))
case("unique_v2_axis_neg", [np.array([[1, 2, 1, 5], [3, 4, 3, 6]], f32), np.array([-1], i32)],
     lambda p: R.UniqueV2(x=p[0], axis=p[1], out_idx=tf.int64))
case("unique_v2_axis1_3d", [np.array([[[1, 1], [2, 2], [1, 1]], [[0, 0], [5, 5], [0, 0]]],
                                     i64), np.array([1], i64)],
     lambda p: R.UniqueV2(x=p[0], axis=p[1]))
case("unique_v2_no_axis", [np.array([3, 3, 1], i32), np.zeros([0], i64)],
     lambda p: R.UniqueV2(x=p[0], axis=p[1]))
case("unique_v2_empty_rows", [np.zeros([3, 0], f32), np.array([0], i64)],
     lambda p: R.UniqueV2(x=p[0], axis=p[1]))
error("err_unique_matrix", [np.zeros([2, 2], f32)], lambda p: R.Unique(x=p[0]))
error("err_unique_v2_axis", [np.zeros([2, 2], f32), np.array([2], i64)],
      lambda p: R.UniqueV2(x=p[0], axis=p[1]))
error("err_unique_v2_two_axes", [np.zeros([2, 2], f32), np.array([0, 1], i64)],
      lambda p: R.UniqueV2(x=p[0], axis=p[1]))

# --- DynamicPartition, ParallelDynamicStitch
case("dynamic_partition", [randn(6, 2), np.array([1, 0, 2, 1, 1, 0], i32)],
     lambda p: R.DynamicPartition(data=p[0], partitions=p[1], num_partitions=4), grad=[0])
case("dynamic_partition_2d", [randn(2, 3, 2, dtype=f64), np.array([[0, 1, 0], [1, 1, 0]], i32)],
     lambda p: R.DynamicPartition(data=p[0], partitions=p[1], num_partitions=2), grad=[0])
case("dynamic_partition_int_one", [np.arange(5, dtype=i64), np.zeros(5, i32)],
     lambda p: R.DynamicPartition(data=p[0], partitions=p[1], num_partitions=1))
case("dynamic_partition_one_output_used", [randn(5), np.array([0, 1, 1, 0, 1], i32)],
     lambda p: R.DynamicPartition(data=p[0], partitions=p[1], num_partitions=2)[1:],
     grad=[0])
case("parallel_dynamic_stitch",
     [np.array([0, 4], i32), np.array([[1, 3], [2, 5]], i32), randn(2, 3), randn(2, 2, 3)],
     lambda p: R.ParallelDynamicStitch(indices=[p[0], p[1]], data=[p[2], p[3]]), grad=[2, 3])
case("parallel_dynamic_stitch_gap", [np.array([0, 3], i32), np.array([7, 8], i64)],
     lambda p: R.ParallelDynamicStitch(indices=[p[0]], data=[p[1]]))
error("err_dynamic_partition_range", [randn(3), np.array([0, 2, 1], i32)],
      lambda p: R.DynamicPartition(data=p[0], partitions=p[1], num_partitions=2))
error("err_dynamic_partition_negative", [randn(3), np.array([0, -1, 1], i32)],
      lambda p: R.DynamicPartition(data=p[0], partitions=p[1], num_partitions=2))
error("err_dynamic_partition_shape", [randn(3), np.array([0, 1], i32)],
      lambda p: R.DynamicPartition(data=p[0], partitions=p[1], num_partitions=2))
error("err_parallel_dynamic_stitch_negative", [np.array([0, -1], i32), randn(2)],
      lambda p: R.ParallelDynamicStitch(indices=[p[0]], data=[p[1]]))

# --- SparseToDense
case("sparse_to_dense", [np.array([[0, 1], [1, 0], [2, 3]], i64), np.array([3, 4], i64),
                         randn(3), np.array(0.5, f32)],
     lambda p: R.SparseToDense(sparse_indices=p[0], output_shape=p[1], sparse_values=p[2],
                               default_value=p[3]), grad=[2, 3])
case("sparse_to_dense_vector_indices", [np.array([0, 2, 5], i32), np.array([6], i32),
                                        np.array([1, 2, 3], i32), np.array(-1, i32)],
     lambda p: R.SparseToDense(sparse_indices=p[0], output_shape=p[1], sparse_values=p[2],
                               default_value=p[3]))
case("sparse_to_dense_scalar", [np.array(2, i32), np.array([4], i32), np.array(7.0, f64),
                                np.array(9.0, f64)],
     lambda p: R.SparseToDense(sparse_indices=p[0], output_shape=p[1], sparse_values=p[2],
                               default_value=p[3]))
case("sparse_to_dense_broadcast_value", [np.array([[0, 0, 0], [1, 1, 1]], i32),
                                         np.array([2, 2, 2], i32), np.array(True),
                                         np.array(False)],
     lambda p: R.SparseToDense(sparse_indices=p[0], output_shape=p[1], sparse_values=p[2],
                               default_value=p[3]))
case("sparse_to_dense_unvalidated", [np.array([[2], [0], [2]], i64), np.array([3], i64),
                                     np.array([1, 2, 3], f32), np.array(0, f32)],
     lambda p: R.SparseToDense(sparse_indices=p[0], output_shape=p[1], sparse_values=p[2],
                               default_value=p[3], validate_indices=False))
case("sparse_to_dense_empty", [np.zeros([0, 2], i64), np.array([2, 3], i64),
                               np.zeros([0], f32), np.array(4, f32)],
     lambda p: R.SparseToDense(sparse_indices=p[0], output_shape=p[1], sparse_values=p[2],
                               default_value=p[3]))


def _std(idx, shape, validate=True):
    vals = np.arange(1, len(idx) + 1, dtype=f32)
    return ([np.array(idx, i64), np.array(shape, i64), vals, np.array(0, f32)],
            lambda p: R.SparseToDense(sparse_indices=p[0], output_shape=p[1],
                                      sparse_values=p[2], default_value=p[3],
                                      validate_indices=validate))


error("err_sparse_to_dense_order", *_std([[1, 1], [0, 2]], [3, 3]))
error("err_sparse_to_dense_repeat", *_std([[1, 1], [1, 1]], [3, 3]))
error("err_sparse_to_dense_bounds", *_std([[1, 1], [2, 3]], [3, 3]))
error("err_sparse_to_dense_bounds_unvalidated", *_std([[1, 1], [3, 0]], [3, 3], False))
error("err_sparse_to_dense_negative_dim", *_std([[0]], [-3]))

# --- LowerBound, UpperBound, Bucketize, HistogramFixedWidth, Bincount
sorted_rows = np.array([[1, 2, 2, 5, 9], [-3, 0, 0, 0, 1]], f32)
probes = np.array([[2, 0, 9.5, 5], [0, -4, 1, 0.5]], f32)
for _op, _name in ((R.LowerBound, "lower_bound"), (R.UpperBound, "upper_bound")):
    case(_name, [sorted_rows, probes],
         lambda p, _op=_op: _op(sorted_inputs=p[0], values=p[1]))
    case(_name + "_int64", [sorted_rows.astype(i64), probes.astype(i64)],
         lambda p, _op=_op: _op(sorted_inputs=p[0], values=p[1], out_type=tf.int64))
error("err_lower_bound_batch", [sorted_rows, probes[:1]],
      lambda p: R.LowerBound(sorted_inputs=p[0], values=p[1]))
case("bucketize", [np.array([[-1, 0, 0.5], [1, 10, NAN], [INF, -INF, 3]], f32)],
     lambda p: R.Bucketize(input=p[0], boundaries=[0.0, 1.0, 3.0, 3.0]))
case("bucketize_float64", [np.array([0.1, 0.10000001, 1e300], f64)],
     lambda p: R.Bucketize(input=p[0], boundaries=[0.1, 5.0]))
case("bucketize_int64_rounding", [np.array([16777217, 3, -7], i64)],
     lambda p: R.Bucketize(input=p[0], boundaries=[-7.0, 16777216.0, 16777218.0]))
case("bucketize_int32_no_boundaries", [np.array([1, 2], i32)],
     lambda p: R.Bucketize(input=p[0], boundaries=[]))
error("err_bucketize_unsorted", [np.array([1.0], f32)],
      lambda p: R.Bucketize(input=p[0], boundaries=[1.0, 0.0]))
case("histogram", [np.array([-1, 0, 0.5, 1, 1.49, 1.5, 5, INF, -INF], f32),
                   np.array([0, 1.5], f32), np.array(3, i32)],
     lambda p: R.HistogramFixedWidth(values=p[0], value_range=p[1], nbins=p[2]))
case("histogram_float64_int64", [randn(50, dtype=f64), np.array([-1, 1], f64),
                                 np.array(7, i32)],
     lambda p: R.HistogramFixedWidth(values=p[0], value_range=p[1], nbins=p[2],
                                     dtype=tf.int64))
case("histogram_int", [np.array([[-1, 0, 5], [7, 100, 3]], i32), np.array([0, 7], i32),
                       np.array(3, i32)],
     lambda p: R.HistogramFixedWidth(values=p[0], value_range=p[1], nbins=p[2]))
case("histogram_int64", [np.array([2 ** 40, 5, -2 ** 40], i64), np.array([0, 2 ** 41], i64),
                         np.array(4, i32)],
     lambda p: R.HistogramFixedWidth(values=p[0], value_range=p[1], nbins=p[2]))
error("err_histogram_nan", [np.array([1, NAN], f32), np.array([0, 1.5], f32),
                            np.array(3, i32)],
      lambda p: R.HistogramFixedWidth(values=p[0], value_range=p[1], nbins=p[2]))
error("err_histogram_range", [np.array([1], f32), np.array([1, 1], f32), np.array(3, i32)],
      lambda p: R.HistogramFixedWidth(values=p[0], value_range=p[1], nbins=p[2]))
error("err_histogram_nbins", [np.array([1], f32), np.array([0, 1], f32), np.array(0, i32)],
      lambda p: R.HistogramFixedWidth(values=p[0], value_range=p[1], nbins=p[2]))
case("bincount", [np.array([1, 1, 3, 9, 0, 1], i32), np.array(5, i32), np.zeros([0], f32)],
     lambda p: R.Bincount(arr=p[0], size=p[1], weights=p[2]))
case("bincount_weights", [np.array([[1, 1], [3, 4]], i32), np.array(4, i32),
                          np.array([[0.5, 0.25], [2, 8]], f64)],
     lambda p: R.Bincount(arr=p[0], size=p[1], weights=p[2]))
case("bincount_int64_size0", [np.array([0, 2], i32), np.array(0, i32), np.zeros([0], i64)],
     lambda p: R.Bincount(arr=p[0], size=p[1], weights=p[2]))
case("bincount_int32", [np.array([0, 2, 2], i32), np.array(3, i32), np.array([1, 5, 7], i32)],
     lambda p: R.Bincount(arr=p[0], size=p[1], weights=p[2]))
error("err_bincount_negative", [np.array([1, -1], i32), np.array(3, i32), np.zeros([0], f32)],
      lambda p: R.Bincount(arr=p[0], size=p[1], weights=p[2]))
error("err_bincount_weights", [np.array([1, 2], i32), np.array(3, i32), np.ones([3], f32)],
      lambda p: R.Bincount(arr=p[0], size=p[1], weights=p[2]))
error("err_bincount_size", [np.array([1, 2], i32), np.array(-1, i32), np.zeros([0], f32)],
      lambda p: R.Bincount(arr=p[0], size=p[1], weights=p[2]))

# --- InTopKV2, TopK (v1)
preds = np.array([[1, INF, 3], [1, 2, 3], [NAN, 1, 2], [3, 3, 3], [5, 3, 3], [0.5, 0.1, 0.2]],
                 f32)
for _k in (0, 1, 2, 4):
    case(f"in_top_k_{_k}", [preds, np.array([2, 5, 2, 1, 2, -1], i32), np.array(_k, i32)],
         lambda p: R.InTopKV2(predictions=p[0], targets=p[1], k=p[2]))
case("in_top_k_int64", [randn(4, 5), np.array([0, 1, 2, 3], i64), np.array(2, i64)],
     lambda p: R.InTopKV2(predictions=p[0], targets=p[1], k=p[2]))
error("err_in_top_k_rows", [preds, np.array([1], i32), np.array(1, i32)],
      lambda p: R.InTopKV2(predictions=p[0], targets=p[1], k=p[2]))
# TopK (v1) cases: TensorFlow's Python refuses to build the v1 node (removed in GraphDef
# version 7), so main() adds `<case>/top_k_v1` to the GraphDef itself, next to the TopKV2
# node whose values and gradients are expected of it.
TOP_K_V1 = {}
for _name, _x, _k, _sorted in (
        ("top_k", randn(3, 6), 3, True), ("top_k_ties", np.array([1, 3, 3, 2, 3], f32), 2, True),
        ("top_k_int32", np.array([[5, -2, 9, 9], [0, 0, 0, 1]], i32), 4, True),
        ("top_k_zero", randn(2, 3), 0, True), ("top_k_unsorted", randn(2, 7), 4, False)):
    TOP_K_V1[_name] = (_k, _sorted)
    case(_name, [_x], lambda p, _k=_k, _sorted=_sorted: list(R.TopKV2(input=p[0], k=_k,
                                                                         sorted=_sorted)),
         grad=[0] if _x.dtype == f32 and _k and _sorted else None, ys=[0])

# --- EuclideanNorm, CumulativeLogsumexp, LinSpace
x34 = randn(3, 4)
case("euclidean_norm", [x34, np.array([1], i32)],
     lambda p: R.EuclideanNorm(input=p[0], axis=p[1]), grad=[0])
case("euclidean_norm_keep", [randn(2, 3, 4), np.array([0, -1], i64)],
     lambda p: R.EuclideanNorm(input=p[0], axis=p[1], keep_dims=True), grad=[0])
case("euclidean_norm_all_f64", [randn(2, 5, dtype=f64), np.array([0, 1], i32)],
     lambda p: R.EuclideanNorm(input=p[0], axis=p[1]), grad=[0])
case("euclidean_norm_int", [np.array([[3, 4], [1, 1], [-6, 8]], i32), np.array(1, i32)],
     lambda p: R.EuclideanNorm(input=p[0], axis=p[1]))
case("euclidean_norm_complex", [np.array([[3 + 4j, 1j], [2, 2 - 1j]], np.complex64),
                                np.array([0], i32)],
     lambda p: R.EuclideanNorm(input=p[0], axis=p[1]))
case("euclidean_norm_no_axes", [np.array([-3, 4], f32), np.zeros([0], i32)],
     lambda p: R.EuclideanNorm(input=p[0], axis=p[1]))
case("euclidean_norm_empty", [np.zeros([0, 2], f32), np.array([0], i32)],
     lambda p: R.EuclideanNorm(input=p[0], axis=p[1], keep_dims=True))
for _ex in (False, True):
    for _rev in (False, True):
        _n = f"cumulative_logsumexp{'_exclusive' if _ex else ''}{'_reverse' if _rev else ''}"
        case(_n, [randn(3, 5), np.array(1 if _rev else 0, i32)],
             lambda p, _ex=_ex, _rev=_rev: R.CumulativeLogsumexp(x=p[0], axis=p[1],
                                                                 exclusive=_ex, reverse=_rev),
             grad=[0])
case("cumulative_logsumexp_f64_neg_axis", [randn(2, 3, 4, dtype=f64) * 30, np.array(-2, i64)],
     lambda p: R.CumulativeLogsumexp(x=p[0], axis=p[1], reverse=True), grad=[0])
case("cumulative_logsumexp_half", [randn(8, dtype=np.float16), np.array(0, i32)],
     lambda p: R.CumulativeLogsumexp(x=p[0], axis=p[1]))
case("cumulative_logsumexp_nonfinite",
     [np.array([[0, 1, NAN, 2, -INF], [NAN, 1, 2, INF, 3], [INF, INF, -INF, 1, 0],
                [-INF, -INF, 1, -INF, 100]], f32), np.array(1, i32)],
     lambda p: R.CumulativeLogsumexp(x=p[0], axis=p[1]))
case("cumulative_logsumexp_nonfinite_axis0",
     [np.array([[NAN, 1, INF], [1, NAN, INF], [2, 2, 5]], f32), np.array(0, i32)],
     lambda p: R.CumulativeLogsumexp(x=p[0], axis=p[1], exclusive=True))
error("err_cumulative_logsumexp_axis", [randn(3), np.array(1, i32)],
      lambda p: R.CumulativeLogsumexp(x=p[0], axis=p[1]))
for _name, _s, _e, _n, _t in (("lin_space", 0.1, 1.7, 7, f32), ("lin_space_one", 0.1, 1.7, 1, f32),
                              ("lin_space_f64_down", 5.0, -3.0, 13, f64),
                              ("lin_space_int64_num", -1.0, 1.0, 4, f32)):
    case(_name, [np.array(_s, _t), np.array(_e, _t),
                 np.array(_n, i64 if "int64" in _name else i32)],
         lambda p: R.LinSpace(start=p[0], stop=p[1], num=p[2]))
error("err_lin_space_num", [np.array(0.0, f32), np.array(1.0, f32), np.array(0, i32)],
      lambda p: R.LinSpace(start=p[0], stop=p[1], num=p[2]))

# --- Reverse (v1), ConjugateTranspose, Cross
case("reverse", [randn(2, 3, 4), np.array([True, False, True])],
     lambda p: R.Reverse(tensor=p[0], dims=p[1]), grad=[0])
case("reverse_bool_none", [np.array([[True, False]]), np.array([False, False])],
     lambda p: R.Reverse(tensor=p[0], dims=p[1]))
case("reverse_string", [np.array([b"a", b"bc", b""]), np.array([True])],
     lambda p: R.Reverse(tensor=p[0], dims=p[1]))
case("reverse_scalar", [np.array(3.0, f64), np.zeros([0], bool)],
     lambda p: R.Reverse(tensor=p[0], dims=p[1]))
error("err_reverse_dims", [randn(2, 2), np.array([True])],
      lambda p: R.Reverse(tensor=p[0], dims=p[1]))
case("conjugate_transpose", [(randn(2, 3, 4) + 1j * randn(2, 3, 4)).astype(np.complex64),
                             np.array([2, 0, 1], i32)],
     lambda p: R.ConjugateTranspose(x=p[0], perm=p[1]))
case("conjugate_transpose_real", [randn(2, 3, 4), np.array([1, 2, 0], i64)],
     lambda p: R.ConjugateTranspose(x=p[0], perm=p[1]), grad=[0])
error("err_conjugate_transpose_perm", [randn(2, 3), np.array([0, 0], i32)],
      lambda p: R.ConjugateTranspose(x=p[0], perm=p[1]))
case("cross", [randn(4, 3), randn(4, 3)], lambda p: R.Cross(a=p[0], b=p[1]), grad=[0, 1])
case("cross_int", [np.array([[1, 2, 3], [-4, 5, 9]], i32), np.array([[3, 2, 1], [7, -1, 0]], i32)],
     lambda p: R.Cross(a=p[0], b=p[1]))
case("cross_uint8", [np.array([1, 2, 3], np.uint8), np.array([3, 2, 1], np.uint8)],
     lambda p: R.Cross(a=p[0], b=p[1]))
error("err_cross_width", [randn(2, 4), randn(2, 4)], lambda p: R.Cross(a=p[0], b=p[1]))
error("err_cross_shapes", [randn(2, 3), randn(3, 3)], lambda p: R.Cross(a=p[0], b=p[1]))

# --- the diagonal ops
case("matrix_diag", [randn(2, 3)], lambda p: R.MatrixDiag(diagonal=p[0]), grad=[0])
case("matrix_diag_int", [np.array([1, 2], i32)], lambda p: R.MatrixDiag(diagonal=p[0]))
case("matrix_diag_part_square", [randn(2, 3, 3)], lambda p: R.MatrixDiagPart(input=p[0]),
     grad=[0])
case("matrix_diag_part_wide", [randn(3, 5)], lambda p: R.MatrixDiagPart(input=p[0]), grad=[0])
case("matrix_diag_part_unknown_shape", [randn(2, 4, 4)],
     lambda p: R.MatrixDiagPart(input=p[0]), grad=[0], known_shapes=False)
case("matrix_set_diag", [randn(2, 3, 4), randn(2, 3)],
     lambda p: R.MatrixSetDiag(input=p[0], diagonal=p[1]), grad=[0, 1])
error("err_matrix_set_diag_shape", [np.zeros([2, 3], i32), np.array([7, 8, 9], i32)],
      lambda p: R.MatrixSetDiag(input=p[0], diagonal=p[1]))
error("err_matrix_diag_scalar", [np.array(1, i32)], lambda p: R.MatrixDiag(diagonal=p[0]))
band = randn(2, 3, 3)
case("matrix_diag_v2", [band, np.array([-1, 1], i32), np.array(-1, i32), np.array(-1, i32),
                        np.array(0, f32)],
     lambda p: R.MatrixDiagV2(diagonal=p[0], k=p[1], num_rows=p[2], num_cols=p[3],
                              padding_value=p[4]), grad=[0])
case("matrix_diag_v2_superdiagonals", [randn(2, 4), np.array([1, 2], i32), np.array(4, i32),
                                       np.array(6, i32), np.array(9, f32)],
     lambda p: R.MatrixDiagV2(diagonal=p[0], k=p[1], num_rows=p[2], num_cols=p[3],
                              padding_value=p[4]), grad=[0])
case("matrix_diag_v2_single", [np.array([[1, 2], [3, 4]], i64), np.array(-1, i32),
                               np.array(-1, i32), np.array(4, i32), np.array(-5, i64)],
     lambda p: R.MatrixDiagV2(diagonal=p[0], k=p[1], num_rows=p[2], num_cols=p[3],
                              padding_value=p[4]))
case("matrix_diag_part_v2", [randn(2, 3, 4), np.array([-1, 1], i32), np.array(9, f32)],
     lambda p: R.MatrixDiagPartV2(input=p[0], k=p[1], padding_value=p[2]), grad=[0])
case("matrix_diag_part_v2_super", [randn(4, 5), np.array([1, 3], i32), np.array(0, f32)],
     lambda p: R.MatrixDiagPartV2(input=p[0], k=p[1], padding_value=p[2]), grad=[0])
# (k a Const here: TensorFlow's MatrixSetDiag gradient cannot be built with k unknown)
case("matrix_set_diag_v2", [randn(3, 4), randn(3, 3)],
     lambda p: R.MatrixSetDiagV2(input=p[0], diagonal=p[1], k=tf.constant([-1, 1])),
     grad=[0, 1])
case("matrix_set_diag_v2_super", [randn(2, 4, 5), randn(2, 3, 4)],
     lambda p: R.MatrixSetDiagV2(input=p[0], diagonal=p[1], k=tf.constant([1, 3])),
     grad=[0, 1])
for _align in ("LEFT_RIGHT", "RIGHT_LEFT", "LEFT_LEFT", "RIGHT_RIGHT"):
    case(f"matrix_set_diag_v3_{_align.lower()}", [randn(3, 4), randn(3, 3)],
         lambda p, _align=_align: R.MatrixSetDiagV3(input=p[0], diagonal=p[1],
                                                    k=tf.constant([-1, 1]), align=_align),
         grad=[0, 1])
case("matrix_set_diag_v3_single", [np.zeros([3, 4], i32), np.array([5, 6], i32),
                                   np.array(2, i32)],
     lambda p: R.MatrixSetDiagV3(input=p[0], diagonal=p[1], k=p[2]))
error("err_matrix_set_diag_v3_k", [np.zeros([3, 4], i32), np.zeros([3, 3], i32),
                                   np.array([-4, 1], i32)],
      lambda p: R.MatrixSetDiagV3(input=p[0], diagonal=p[1], k=p[2]))


def _as_saved(v):
    v = np.asarray(v)
    return v.astype(bytes) if v.dtype == object else v


def _tf_dtype(v):
    return tf.string if v.dtype.kind in "SO" else tf.as_dtype(v.dtype)


def _first_line(message):
    """The kernel's own words out of a graph-execution error (the line after `Node: ...`)."""
    lines = message.split("\n")
    for i, line in enumerate(lines[:-1]):
        if line.startswith("Node: "):
            return lines[i + 1]
    return lines[0]


def main():
    graph = tf.Graph()
    built = {}
    with graph.as_default():
        for name, (inputs, build, grad, ys, known) in CASES.items():
            with v1.name_scope(name + "/") as scope:
                ph = [v1.placeholder(_tf_dtype(v), v.shape if known else None, name=f"in_{k}")
                      for k, v in enumerate(inputs)]
                made = build(ph)
                outs, refs = made if isinstance(made, tuple) and len(made) == 2 and isinstance(
                    made[0], (list, tuple)) else (made, made)
                outs = list(outs) if isinstance(outs, (list, tuple)) else [outs]
                refs = list(refs) if isinstance(refs, (list, tuple)) else [refs]
                built[name] = (scope, ph, outs, refs)
    data = {}
    with v1.Session(graph=graph) as sess:
        for name, (inputs, build, grad, ys, known) in CASES.items():
            scope, ph, outs, refs = built[name]
            feed = dict(zip(ph, inputs))
            for k, v in enumerate(inputs):
                data[f"{name}/feed_{k}"] = _as_saved(v)
            names = [t.name for t in outs]
            if name in TOP_K_V1:
                names = [f"{scope}top_k_v1:0", f"{scope}top_k_v1:1"]
            data[f"{name}/fetch"] = names = np.array(names)
            if grad == "error":
                try:
                    sess.run(refs, feed)
                except tf.errors.OpError as e:
                    data[f"{name}/error"] = np.array(_first_line(e.message))
                    continue
                raise SystemExit(f"{name}: TensorFlow did not refuse it")
            values = sess.run(refs, feed)
            for j, v in enumerate(values):
                data[f"{name}/out_{j}"] = _as_saved(v)
            if grad is None:
                continue
            picks = ys if ys is not None else [j for j, t in enumerate(refs)
                                               if t.dtype.is_floating]
            with graph.as_default(), v1.name_scope(name + "/grads/"):
                ws = [v1.placeholder(refs[j].dtype, None, name=f"w_{j}") for j in picks]
                grads = tf.gradients([refs[j] for j in picks], [ph[k] for k in grad],
                                     grad_ys=ws)
            wv = {}
            for i, (w, j) in enumerate(zip(ws, picks)):
                wv[w] = RNG.uniform(0.5, 1.5, values[j].shape).astype(values[j].dtype)
                data[f"{name}/w_{i}"] = wv[w]
            for k, g in zip(grad, sess.run(grads, {**feed, **wv})):
                data[f"{name}/grad_{k}"] = g
            data[f"{name}/ys"] = np.array([names[j] for j in picks])
            data[f"{name}/xs"] = np.array([ph[k].name for k in grad])
    # Only the forward graph: tf.gradients' nodes are TensorFlow's, not the tests' business.
    gd = graph.as_graph_def()
    keep = {n.name for n in gd.node if "/grads/" not in n.name and "/gradients" not in n.name
            and not n.name.startswith("gradients")}
    del_nodes = [n for n in gd.node if n.name not in keep]
    for n in del_nodes:
        gd.node.remove(n)
    for name, (k, is_sorted) in TOP_K_V1.items():
        scope, ph, _, _ = built[name]
        node = gd.node.add(name=f"{scope}top_k_v1", op="TopK", input=[ph[0].op.name])
        node.attr["T"].type = ph[0].dtype.as_datatype_enum
        node.attr["k"].i = k
        node.attr["sorted"].b = is_sorted
    os.makedirs(OUT, exist_ok=True)
    with open(os.path.join(OUT, "graph.pb"), "wb") as f:
        f.write(gd.SerializeToString())
    np.savez_compressed(os.path.join(OUT, "cases.npz"), **data)
    print(OUT, len(CASES), "cases,", len(data), "arrays")


if __name__ == "__main__":
    main()
