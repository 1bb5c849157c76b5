#!/usr/bin/env python3
"""TensorFlow's values, errors and gradients of the sparse tensor ops (SparseTensorDenseMatMul,
SparseReorder, SparseReduceSum(Sparse), SparseSoftmax, SparseAdd(Grad), SparseReshape,
SparseFillEmptyRows(Grad), SparseDenseCwiseMul/Add/Div) for tests/test_sparse_ops.py.
NEEDS TENSORFLOW; never imports tfg:

    /work/tfvenv/bin/python tools/gen_sparse_fixtures.py

Writes tests/fixtures/sparse/: sparse.pb (one tf.compat.v1 graph: per case `<case>/<arg>`
placeholders -> `<case>/out<k>` (Identity of the op's output k); a differentiable case also
has `<case>/loss` = sum(y + y * y / 2) over its value outputs y (the real part for a
complex y) and TensorFlow's own gradient graph, `<case>/tf_d<arg>`), sparse.npz
(`<case>/<arg>` feeds, `<case>/out<k>`, `<case>/d<arg>`) and
cases.json (per case: op, args, outputs, the args with gradients, tolerances, or the error
TensorFlow's kernel raises on those feeds).
"""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from fixture_cases import CaseSet, fixture_dir, generate  # noqa: E402

OUT = fixture_dir("sparse")
R = tf.raw_ops
RNG = np.random.default_rng(5)
I64 = np.int64
TOL = {np.float32: (2e-6, 1e-6), np.float64: (1e-12, 1e-13), np.complex64: (2e-6, 1e-6)}
# op -> the outputs a loss is taken over (the value outputs)
VALUE_OUTPUTS = {"SparseTensorDenseMatMul": [0], "SparseReorder": [1], "SparseReduceSum": [0],
                 "SparseSoftmax": [0], "SparseAdd": [1], "SparseFillEmptyRows": [1],
                 "SparseDenseCwiseMul": [0], "SparseDenseCwiseDiv": [0]}


class Cases(CaseSet):
    """The cases' graph pieces, arrays and index (tools/fixture_cases.py runs and writes them)."""

    def add(self, name, op, args, attrs=None, grad=(), error=None, tol=None):
        """args: {input name: array}; grad: the args TensorFlow's gradient is taken for."""
        dts = [v.dtype.type for v in args.values() if v.dtype.kind in "fc"]
        rtol, atol = tol or TOL.get(dts[0] if dts else None, (0, 0))
        with tf.name_scope(name):
            phs = {k: tf.compat.v1.placeholder(v.dtype, None if error else v.shape, name=k)
                   for k, v in args.items()}
            outs = getattr(R, op)(**phs, **(attrs or {}), name="op")
            outs = [outs] if isinstance(outs, tf.Tensor) else list(outs)
            for k, o in enumerate(outs):
                self.fetches[f"{name}/out{k}"] = tf.identity(o, name=f"out{k}")
            for k, v in args.items():
                self.arrays[f"{name}/{k}"] = v
            if grad:
                # sum(y + y * y / 2): a gradient of 1 + y differs per element (output
                # shapes can depend on input values, so no fixed weights); flat, so that a scalar
                # output's sum needs no reduction over no axes
                terms = [tf.reduce_sum(tf.reshape(outs[k] + outs[k] * outs[k] / 2, [-1]))
                         for k in VALUE_OUTPUTS[op]]
                if outs[0].dtype.is_complex:  # a real loss: its real part
                    terms = [tf.math.real(t) for t in terms]
                loss = tf.add_n(terms, name="loss")
                for k, d in zip(grad, tf.gradients(loss, [phs[k] for k in grad])):
                    self.fetches[f"{name}/d{k}"] = tf.identity(d, name=f"tf_d{k}")
        self.index.append({"name": name, "op": op, "args": list(args), "outputs": len(outs),
                           "attrs": {k: v for k, v in (attrs or {}).items()},
                           "grad": list(grad), "rtol": rtol, "atol": atol, "error": error})


def f32(*shape):
    return RNG.uniform(-1, 1, shape).astype(np.float32)


def matmul_cases(c):
    idx = I64([[0, 1], [2, 3], [1, 0], [0, 1], [2, 0]])  # unsorted, a repeat (summed)
    for adj_a in (False, True):
        for adj_b in (False, True):
            inner = 3 if adj_a else 4
            b_shape = (2, inner) if adj_b else (inner, 2)
            for dt in (np.float32, np.float64):
                c.add(f"MatMul_{int(adj_a)}{int(adj_b)}_{dt.__name__}", "SparseTensorDenseMatMul",
                      {"a_indices": idx, "a_values": f32(5).astype(dt), "a_shape": I64([3, 4]),
                       "b": f32(*b_shape).astype(dt)},
                      {"adjoint_a": adj_a, "adjoint_b": adj_b}, grad=["a_values", "b"])
    c.add("MatMul_int32", "SparseTensorDenseMatMul",
          {"a_indices": idx, "a_values": np.int32([1, -2, 3, 4, 5]), "a_shape": I64([3, 4]),
           "b": RNG.integers(-5, 5, (4, 3)).astype(np.int32)})
    c.add("MatMul_int32_indices", "SparseTensorDenseMatMul",
          {"a_indices": idx.astype(np.int32), "a_values": f32(5), "a_shape": I64([3, 4]),
           "b": f32(4, 3)}, grad=["a_values", "b"])
    for adj_a in (False, True):  # complex: the adjoints conjugate
        for adj_b in (False, True):
            inner = 3 if adj_a else 4
            b_shape = (2, inner) if adj_b else (inner, 2)
            z = (f32(5) + 1j * f32(5)).astype(np.complex64)
            zb = (f32(*b_shape) + 1j * f32(*b_shape)).astype(np.complex64)
            c.add(f"MatMul_{int(adj_a)}{int(adj_b)}_complex64", "SparseTensorDenseMatMul",
                  {"a_indices": idx, "a_values": z, "a_shape": I64([3, 4]), "b": zb},
                  {"adjoint_a": adj_a, "adjoint_b": adj_b}, grad=["a_values", "b"])
    c.add("MatMul_empty", "SparseTensorDenseMatMul",
          {"a_indices": np.zeros((0, 2), I64), "a_values": f32(0), "a_shape": I64([3, 4]),
           "b": f32(4, 2)})
    c.add("MatMul_bad_k", "SparseTensorDenseMatMul",
          {"a_indices": I64([[0, 1], [1, 4]]), "a_values": f32(2), "a_shape": I64([3, 4]),
           "b": f32(4, 2)}, error="k (4) from index[1,1] out of bounds (>=4)")
    c.add("MatMul_bad_m", "SparseTensorDenseMatMul",
          {"a_indices": I64([[0, 1], [3, 2]]), "a_values": f32(2), "a_shape": I64([3, 4]),
           "b": f32(4, 2)}, error="m (3) from index[1,0] out of bounds (>=3)")
    c.add("MatMul_bad_inner", "SparseTensorDenseMatMul",
          {"a_indices": I64([[0, 1]]), "a_values": f32(1), "a_shape": I64([3, 4]),
           "b": f32(5, 2)}, error="Cannot multiply A and B because inner dimension does not "
                                  "match: 4 vs. 5")


def reorder_cases(c):
    idx = I64([[1, 2, 0], [0, 3, 1], [1, 0, 2], [0, 0, 0], [0, 3, 0]])
    for dt in (np.float32, np.float64):
        c.add(f"Reorder_{dt.__name__}", "SparseReorder",
              {"input_indices": idx, "input_values": f32(5).astype(dt),
               "input_shape": I64([2, 4, 3])}, grad=["input_values"])
    c.add("Reorder_int64", "SparseReorder",
          {"input_indices": idx, "input_values": I64([10, 20, 30, 40, 50]),
           "input_shape": I64([2, 4, 3])})
    c.add("Reorder_sorted", "SparseReorder",
          {"input_indices": I64([[0, 1], [1, 0], [2, 2]]), "input_values": f32(3),
           "input_shape": I64([3, 3])})
    c.add("Reorder_empty", "SparseReorder",
          {"input_indices": np.zeros((0, 2), I64), "input_values": f32(0),
           "input_shape": I64([3, 3])})
    # TensorFlow's SparseReorder checks no bounds: an index past the shape sorts as any other
    c.add("Reorder_out_of_bounds", "SparseReorder",
          {"input_indices": I64([[1, 0], [0, 5]]), "input_values": f32(2),
           "input_shape": I64([3, 3])})


def reduce_cases(c):
    idx = I64([[1, 2, 0], [0, 3, 1], [1, 0, 2], [0, 0, 0], [0, 3, 0], [1, 2, 2]])
    vals = f32(6)
    for axes, keep in (([1], False), ([-1, 0], False), ([2], True), ([0, 1, 2], False),
                       ([0, 2, 1], True)):
        tag = "_".join(str(a).replace("-", "m") for a in axes) + ("_keep" if keep else "")
        for dt in (np.float32, np.float64):
            c.add(f"ReduceSum_{tag}_{dt.__name__}", "SparseReduceSum",
                  {"input_indices": idx, "input_values": vals.astype(dt),
                   "input_shape": I64([2, 4, 3]), "reduction_axes": np.int32(axes)},
                  {"keep_dims": keep}, grad=["input_values"])
        c.add(f"ReduceSumSparse_{tag}", "SparseReduceSumSparse",
              {"input_indices": idx, "input_values": vals, "input_shape": I64([2, 4, 3]),
               "reduction_axes": np.int32(axes)}, {"keep_dims": keep})
    c.add("ReduceSum_int32_dup", "SparseReduceSum",
          {"input_indices": I64([[0, 1], [0, 1], [2, 0]]), "input_values": np.int32([1, 2, 3]),
           "input_shape": I64([3, 2]), "reduction_axes": np.int32([1])})
    c.add("ReduceSum_scalar_axis", "SparseReduceSum",
          {"input_indices": idx, "input_values": vals, "input_shape": I64([2, 4, 3]),
           "reduction_axes": np.int32(1)})
    c.add("ReduceSum_bad_axis", "SparseReduceSum",
          {"input_indices": idx, "input_values": vals, "input_shape": I64([2, 4, 3]),
           "reduction_axes": np.int32([3])},
          error="Invalid reduction dimension 3, for input with 3 dimensions.")
    c.add("ReduceSumSparse_bad_axis", "SparseReduceSumSparse",
          {"input_indices": idx, "input_values": vals, "input_shape": I64([2, 4, 3]),
           "reduction_axes": np.int32([-4])},
          error="Invalid reduction dimension -4, for input with 3 dimensions.")


def softmax_cases(c):
    idx2 = I64([[0, 0], [0, 2], [2, 1], [1, 3], [2, 3], [2, 0]])
    idx3 = I64([[1, 0, 1], [0, 1, 0], [0, 1, 2], [1, 0, 0], [0, 0, 1]])
    for dt in (np.float32, np.float64):
        c.add(f"Softmax_2d_{dt.__name__}", "SparseSoftmax",
              {"sp_indices": idx2, "sp_values": (3 * f32(6)).astype(dt),
               "sp_shape": I64([3, 4])}, grad=["sp_values"])
        c.add(f"Softmax_3d_{dt.__name__}", "SparseSoftmax",
              {"sp_indices": idx3, "sp_values": (3 * f32(5)).astype(dt),
               "sp_shape": I64([2, 2, 3])}, grad=["sp_values"])
    c.add("Softmax_rank1", "SparseSoftmax",
          {"sp_indices": I64([[0], [1]]), "sp_values": f32(2), "sp_shape": I64([3])},
          error="Input should have rank >= 2, but received shape: 3")


def add_cases(c):
    a_idx, b_idx = I64([[0, 1], [1, 0], [1, 2], [2, 2]]), I64([[0, 0], [1, 0], [2, 2], [2, 3]])
    for dt in (np.float32, np.float64):
        a, b = f32(4).astype(dt), f32(4).astype(dt)
        b[2] = -a[3] + dt(0.01)  # a small sum at [2, 2]: dropped by thresh 0.1
        for thresh in (0.0, 0.1):
            c.add(f"Add_{dt.__name__}_{thresh}", "SparseAdd",
                  {"a_indices": a_idx, "a_values": a, "a_shape": I64([3, 4]),
                   "b_indices": b_idx, "b_values": b, "b_shape": I64([3, 4]),
                   "thresh": dt(thresh)}, grad=["a_values", "b_values"])
    c.add("Add_int32", "SparseAdd",
          {"a_indices": a_idx, "a_values": np.int32([1, 2, 3, 4]), "a_shape": I64([3, 4]),
           "b_indices": b_idx, "b_values": np.int32([5, 6, -4, 8]), "b_shape": I64([3, 4]),
           "thresh": np.int32(1)})
    c.add("Add_unsorted", "SparseAdd",
          {"a_indices": I64([[2, 2], [0, 1], [1, 0]]), "a_values": f32(3), "a_shape": I64([3, 4]),
           "b_indices": I64([[1, 0], [0, 0]]), "b_values": f32(2), "b_shape": I64([3, 4]),
           "thresh": np.float32(0)})
    c.add("Add_empty", "SparseAdd",
          {"a_indices": np.zeros((0, 2), I64), "a_values": f32(0), "a_shape": I64([3, 4]),
           "b_indices": b_idx, "b_values": f32(4), "b_shape": I64([3, 4]),
           "thresh": np.float32(0)})
    c.add("Add_bad_shape", "SparseAdd",
          {"a_indices": a_idx, "a_values": f32(4), "a_shape": I64([3, 4]),
           "b_indices": b_idx, "b_values": f32(4), "b_shape": I64([3, 5]),
           "thresh": np.float32(0)},
          error="Operands' shapes do not match: got 4 and 5 for dimension 1")
    c.add("AddGrad", "SparseAddGrad",
          {"backprop_val_grad": f32(6), "a_indices": a_idx, "b_indices": b_idx,
           "sum_indices": I64([[0, 0], [0, 1], [1, 0], [1, 2], [2, 2], [2, 3]])})


def reshape_cases(c):
    idx = I64([[0, 0, 1], [0, 2, 3], [1, 1, 0], [1, 2, 2]])
    for tag, new in (("m1", [6, -1]), ("4x6", [4, 6]), ("same", [2, 3, 4]), ("flat", [-1])):
        c.add(f"Reshape_{tag}", "SparseReshape",
              {"input_indices": idx, "input_shape": I64([2, 3, 4]), "new_shape": I64(new)})
    c.add("Reshape_empty", "SparseReshape",
          {"input_indices": np.zeros((0, 2), I64), "input_shape": I64([0, 4]),
           "new_shape": I64([2, 0, 3])})
    c.add("Reshape_two_unknown", "SparseReshape",
          {"input_indices": idx, "input_shape": I64([2, 3, 4]), "new_shape": I64([-1, -1])},
          error="only one output dimension may be -1, not both 0 and 1")
    c.add("Reshape_bad_size", "SparseReshape",
          {"input_indices": idx, "input_shape": I64([2, 3, 4]), "new_shape": I64([5, 5])},
          error="but the requested shape has 25")


def fill_cases(c):
    idx = I64([[3, 1], [1, 0], [3, 0], [1, 2]])
    for dt in (np.float32, np.float64):
        c.add(f"Fill_{dt.__name__}", "SparseFillEmptyRows",
              {"indices": idx, "values": f32(4).astype(dt), "dense_shape": I64([5, 3]),
               "default_value": dt(-1.5)}, grad=["values", "default_value"])
    c.add("Fill_int64", "SparseFillEmptyRows",
          {"indices": I64([[0, 1], [0, 0]]), "values": I64([7, 8]), "dense_shape": I64([2, 2]),
           "default_value": I64(9)})
    c.add("Fill_empty", "SparseFillEmptyRows",
          {"indices": np.zeros((0, 3), I64), "values": f32(0), "dense_shape": I64([3, 2, 2]),
           "default_value": np.float32(4)})
    c.add("Fill_bad_row", "SparseFillEmptyRows",
          {"indices": I64([[0, 1], [5, 0]]), "values": f32(2), "dense_shape": I64([3, 2]),
           "default_value": np.float32(0)}, error="indices(1, 0) is invalid: 5 >= 3")
    c.add("FillGrad", "SparseFillEmptyRowsGrad",
          {"reverse_index_map": I64([3, 0, 4]), "grad_values": f32(6)})
    c.add("FillGrad_bad", "SparseFillEmptyRowsGrad",
          {"reverse_index_map": I64([3, 7]), "grad_values": f32(6)},
          error="Elements in reverse index must be in [0, 6) but got 7")


def cwise_cases(c):
    idx = I64([[0, 1, 2], [1, 0, 0], [1, 2, 3], [0, 2, 1]])
    for op in ("Mul", "Add", "Div"):
        for tag, shape in (("full", (2, 3, 4)), ("bcast", (3, 1)), ("row", (4,)),
                           ("scalar", ())):
            # (TensorFlow's own gradient fails on a scalar dense: ranks 1 to 5 only)
            grad = [] if op == "Add" or not shape else ["sp_values", "dense"]
            dense = RNG.uniform(0.5, 2, shape).astype(np.float64)
            c.add(f"Cwise{op}_{tag}", f"SparseDenseCwise{op}",
                  {"sp_indices": idx, "sp_values": f32(4).astype(np.float64),
                   "sp_shape": I64([2, 3, 4]), "dense": dense}, grad=grad)
        c.add(f"Cwise{op}_float32", f"SparseDenseCwise{op}",
              {"sp_indices": idx, "sp_values": f32(4), "sp_shape": I64([2, 3, 4]),
               "dense": RNG.uniform(0.5, 2, (3, 4)).astype(np.float32)})
    c.add("CwiseMul_int32", "SparseDenseCwiseMul",
          {"sp_indices": idx, "sp_values": np.int32([1, 2, 3, 4]), "sp_shape": I64([2, 3, 4]),
           "dense": np.arange(12, dtype=np.int32).reshape(3, 4)})
    c.add("CwiseMul_bad_bounds", "SparseDenseCwiseMul",
          {"sp_indices": I64([[0, 3, 0]]), "sp_values": f32(1), "sp_shape": I64([2, 3, 4]),
           "dense": f32(3, 4)},
          error="Provided indices are out-of-bounds w.r.t. dense side with broadcasted shape")
    c.add("CwiseAdd_bad_bcast", "SparseDenseCwiseAdd",
          {"sp_indices": idx, "sp_values": f32(4), "sp_shape": I64([2, 3, 4]),
           "dense": f32(2, 2, 3, 4)}, error="SparseDenseBinaryOpShared broadcasts dense to "
                                            "sparse only; got incompatible shapes")


def main():
    generate(Cases(), (matmul_cases, reorder_cases, reduce_cases, softmax_cases, add_cases,
                       reshape_cases, fill_cases, cwise_cases), OUT, "sparse")


if __name__ == "__main__":
    main()
