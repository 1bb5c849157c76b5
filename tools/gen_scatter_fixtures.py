#!/usr/bin/env python3
"""TensorFlow's values and errors of the reference-variable scatters (ScatterUpdate / Add / Sub
/ Mul / Div / Min / Max, ScatterNdUpdate / Add / Sub / Max / Min), StridedSliceAssign and
CountUpTo, and of ScatterNdNonAliasingAdd, InplaceUpdate / Add / Sub and AccumulateNV2, for
tests/test_scatter_ops.py. NEEDS TENSORFLOW; never imports tfg:

    /work/tfvenv/bin/python tools/gen_scatter_fixtures.py

Writes tests/fixtures/scatter/: scatter.pb (one tf.compat.v1 graph; per case `<case>/<arg>`
placeholders -> `<case>/out0`, Identity of the op's output; a ref case also its variable
`<case>/w` (VariableV2, initial value a Const), `<case>/init` (its initializer) and
`<case>/after`, the variable read after the op; `init` runs every case's initializer; a case
with a gradient `<case>/loss` = sum(out0 * weights) and TensorFlow's gradients
`<case>/tf_d<arg>`), scatter.npz (feeds, `<case>/out0`, `<case>/after`, `<case>/d<arg>`),
cases.json.
"""
import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")
import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

from fixture_cases import CaseSet, fixture_dir, generate  # noqa: E402

OUT = fixture_dir("scatter")
R = tf.raw_ops
V1 = tf.compat.v1
RNG = np.random.default_rng(47)
I32, I64, F32, F64 = np.int32, np.int64, np.float32, np.float64
DTYPES = (F32, F64, I32, I64)


def _values(shape, dtype, low=-9, high=9):
    """Small random values of `dtype` (integers in [low, high), floats in [-2, 2))."""
    if np.dtype(dtype).kind in "iu":
        return RNG.integers(low, high, shape).astype(dtype)
    if dtype == np.bool_:
        return RNG.random(shape) < 0.5
    return (RNG.random(shape) * 4 - 2).astype(dtype)


class Cases(CaseSet):
    """The cases' graph pieces, arrays and index (tools/fixture_cases.py writes them)."""

    refusals = (tf.errors.InvalidArgumentError, tf.errors.OutOfRangeError)

    def __init__(self):
        super().__init__()
        self.inits = []

    def add(self, name, op, args, attrs=None, var=None, error=None, grad=(), lists=None,
            slice_=None, static=True, rtol=1e-6):
        """args: {input name: array}, fed through placeholders (of unknown shape where the
        case is an error or not `static`); var: the initial value of the reference variable
        the op updates (`ref`); lists: {list input: [arg names]}; slice_: (key, value arg) for a
        `w[key].assign(value)` (StridedSliceAssign); grad: the args TensorFlow differentiates
        sum(out0 * weights) by."""
        lists = lists or {}
        with tf.name_scope(name):
            phs = {k: V1.placeholder(tf.as_dtype(v.dtype), v.shape if static and not error
                                     else None, name=k)
                   for k, v in args.items()}
            kwargs = {k: v for k, v in phs.items()
                      if not any(k in names for names in lists.values())}
            kwargs.update({k: [phs[n] for n in names] for k, names in lists.items()})
            w = None
            if var is not None:
                w = V1.Variable(var, use_resource=False, name="w")
                self.inits.append(tf.group(w.initializer, name="init"))
            if slice_ is not None:
                out = w[slice_[0]].assign(phs[slice_[1]])
            elif w is not None:
                out = getattr(R, op)(ref=w._ref(), **kwargs, **(attrs or {}), name="op")
            else:
                out = getattr(R, op)(**kwargs, **(attrs or {}), name="op")
            self.fetches[f"{name}/out0"] = tf.identity(out, name="out0")
            if w is not None and op != "CountUpTo":
                with tf.control_dependencies([out]):
                    self.fetches[f"{name}/after"] = tf.identity(w._ref(), name="after")
            self.arrays.update({f"{name}/{k}": v for k, v in args.items()})
            if grad:
                weights = tf.constant(_values(out.shape, out.dtype.as_numpy_dtype))
                loss = tf.reduce_sum(out * weights, name="loss")
                for arg, d in zip(grad, tf.gradients(loss, [phs[a] for a in grad])):
                    self.fetches[f"{name}/d{arg}"] = tf.identity(tf.convert_to_tensor(d),
                                                                 name=f"tf_d{arg}")
        self.index.append({"name": name, "op": op, "args": list(args), "ref": var is not None,
                           "attrs": {k: v if isinstance(v, (int, list)) else str(v)
                                     for k, v in (attrs or {}).items()},
                           "grad": list(grad), "rtol": rtol, "atol": rtol, "error": error})

    def feeds(self, graph, case):
        """As CaseSet's, copies: TensorFlow's Inplace* kernels write into their input's
        buffer, which may be the fed array itself."""
        return {k: v.copy() for k, v in super().feeds(graph, case).items()}

    def prepare(self, sess, graph):
        """Every variable's initial value (each case updates its own variable once)."""
        sess.run(tf.group(*self.inits, name="init"))


def _row_cases(c):
    """The row scatters on a [6, 3] variable, every dtype, repeated indices."""
    ops = ("ScatterUpdate", "ScatterAdd", "ScatterSub", "ScatterMul", "ScatterDiv",
           "ScatterMin", "ScatterMax")
    idx = np.int32([4, 1, 4, 0, 4])
    for op in ops:
        for dt in DTYPES:
            var = _values((6, 3), dt, 1, 30)
            upd = _values((5, 3), dt, 1, 7) if op == "ScatterDiv" else _values((5, 3), dt)
            c.add(f"{op}_{dt.__name__}", op, {"indices": idx, "updates": upd}, var=var)
    # integer division rounds toward zero (C++), not down
    c.add("ScatterDiv_signs", "ScatterDiv",
          {"indices": I64([0, 1, 2, 3, 3]), "updates": I32([2, -2, 3, -4, 3])},
          var=I32([-7, 7, -8, 9]))
    c.add("ScatterAdd_scalar_updates", "ScatterAdd",
          {"indices": I64([[2, 0], [2, 5]]), "updates": F32(1.5)}, var=_values((6, 3), F32),
          attrs={"use_locking": True})
    c.add("ScatterUpdate_empty", "ScatterUpdate",
          {"indices": np.zeros(0, I32), "updates": np.zeros((0, 3), F32)},
          var=_values((6, 3), F32))
    c.add("ScatterMax_1d", "ScatterMax", {"indices": I32(3), "updates": F64(5)},
          var=_values(5, F64))
    w = _values((5, 2), F32)
    c.add("ScatterAdd_out_of_range", "ScatterAdd",
          {"indices": I32([1, 7]), "updates": F32([[1, 2], [3, 4]])}, var=w,
          error="indices[1] = 7 is not in [0, 5)")
    c.add("ScatterSub_negative", "ScatterSub",
          {"indices": I64([[0, -1]]), "updates": F32([[[1, 2], [3, 4]]])}, var=w,
          error="indices[0,1] = -1 is not in [0, 5)")
    c.add("ScatterUpdate_bad_updates", "ScatterUpdate",
          {"indices": I32([1, 2]), "updates": F32([1, 2])}, var=w,
          error="Must have updates.shape = indices.shape + params.shape[1:] or updates.shape"
                " = [], got updates.shape [2], indices.shape [2], params.shape [5,2]")
    c.add("ScatterMul_scalar_var", "ScatterMul",
          {"indices": I32([0]), "updates": F32([2])}, var=F32(3),
          error="params must be at least 1-D, got shape []")


def _nd_cases(c):
    """The ScatterNd updates of a [4, 3, 2] variable: rows, elements, repeated indices."""
    ops = ("ScatterNdUpdate", "ScatterNdAdd", "ScatterNdSub", "ScatterNdMax", "ScatterNdMin")
    for op in ops:
        for dt in DTYPES:
            idx = I32([[1, 2], [3, 0], [1, 2], [0, 1]])
            c.add(f"{op}_{dt.__name__}", op, {"indices": idx, "updates": _values((4, 2), dt)},
                  var=_values((4, 3, 2), dt))
    # (1-D indices: k = 3 to the shape function, one index of one row to the kernel)
    c.add("ScatterNdAdd_rows_1d", "ScatterNdAdd",
          {"indices": I64([2, 0, 2]), "updates": _values((3, 3, 2), F32)},
          var=_values((4, 3, 2), F32), static=False)
    c.add("ScatterNdUpdate_elements_batch", "ScatterNdUpdate",
          {"indices": I32([[[0, 0, 1], [3, 2, 0]], [[1, 1, 1], [2, 0, 0]]]),
           "updates": _values((2, 2), F64)}, var=_values((4, 3, 2), F64))
    c.add("ScatterNdMax_whole", "ScatterNdMax",
          {"indices": np.zeros((2, 0), I32), "updates": _values((2, 4, 3), F32)},
          var=_values((4, 3), F32),
          error="Indices and updates specified for empty output.")  # (then "  indices ...")
    c.add("ScatterNdUpdate_ignore", "ScatterNdUpdate",
          {"indices": I32([[1, 0], [5, 0], [2, -1], [0, 1]]), "updates": F32([1, 2, 3, 4])},
          var=_values((3, 2), F32), attrs={"bad_indices_policy": "IGNORE"})
    w = _values((3, 2), F32)
    c.add("ScatterNdUpdate_out_of_range", "ScatterNdUpdate",
          {"indices": I32([[1], [5]]), "updates": F32([[1, 2], [3, 4]])}, var=w,
          error="indices[1] = [5] does not index into shape [3,2]")
    c.add("ScatterNdAdd_out_of_range_batch", "ScatterNdAdd",
          {"indices": I64([[[0, 0], [1, 1]], [[2, 1], [2, 2]]]), "updates": F32([[1, 2], [3, 4]])},
          var=w, error="indices[1,1] = [2, 2] does not index into shape [3,2]")
    # (TensorFlow's kernel reads the first of 1-D indices only: 3 is not checked)
    c.add("ScatterNdSub_1d_first_only", "ScatterNdSub",
          {"indices": I32([0, 3]), "updates": F32([[1, 2], [3, 4]])}, var=w, static=False)
    c.add("ScatterNdAdd_batch_mismatch", "ScatterNdAdd",
          {"indices": I32([[1], [2]]), "updates": F32([[1, 2]])}, var=w,
          error="Dimensions [0,1) of indices[shape=[2,1]] = 2 must match dimensions [0,1) of "
                "updates[shape=[1,2]] = 1")
    c.add("ScatterNdUpdate_inner_mismatch", "ScatterNdUpdate",
          {"indices": I32([[1], [2]]), "updates": F32([[1, 2, 3], [4, 5, 6]])}, var=w,
          error="Dimensions [1,2) of input[shape=[3,2]] must match dimensions [1,2) of "
                "updates[shape=[2,3]]")
    c.add("ScatterNdUpdate_bad_policy", "ScatterNdUpdate",
          {"indices": I32([[1, 0]]), "updates": F32([1])}, var=w,
          attrs={"bad_indices_policy": "FOO"},
          error="Unknown bad indices handling attribute: FOO")


def _non_aliasing_cases(c):
    idx = I32([[1, 2], [3, 0], [1, 2]])
    for dt in DTYPES:
        c.add(f"NonAliasingAdd_{dt.__name__}", "ScatterNdNonAliasingAdd",
              {"input": _values((4, 3, 2), dt), "indices": idx, "updates": _values((3, 2), dt)},
              grad=("input", "updates") if dt in (F32, F64) else ())
    c.add("NonAliasingAdd_bool", "ScatterNdNonAliasingAdd",
          {"input": np.array([True, False, False, False]), "indices": I64([[1], [1], [0], [2]]),
           "updates": np.array([True, True, False, False])})
    c.add("NonAliasingAdd_rows", "ScatterNdNonAliasingAdd",
          {"input": _values((4, 3), F32), "indices": I32([[3], [0], [3]]),
           "updates": _values((3, 3), F32)}, grad=("input", "updates"))
    c.add("NonAliasingAdd_out_of_range", "ScatterNdNonAliasingAdd",
          {"input": _values((3, 2), F32), "indices": I32([[1], [1], [7]]),
           "updates": _values((3, 2), F32)},
          error="indices[2] = [7] does not index into shape [3,2]")


def _slice_assign_cases(c):
    w = np.arange(20, dtype=F32).reshape(5, 4)
    c.add("SliceAssign_rows", "StridedSliceAssign", {"value": _values((2, 4), F32)}, var=w,
          slice_=(slice(1, 4, 2), "value"))
    c.add("SliceAssign_shrink", "StridedSliceAssign", {"value": _values(2, F32)}, var=w,
          slice_=((2, slice(1, 3)), "value"))
    c.add("SliceAssign_broadcast", "StridedSliceAssign", {"value": F32(7)}, var=w,
          slice_=((slice(None), slice(None, None, -2)), "value"))
    c.add("SliceAssign_ellipsis_newaxis", "StridedSliceAssign",
          {"value": _values((5, 1), I64)}, var=np.arange(20, dtype=I64).reshape(5, 4),
          slice_=((Ellipsis, -1, tf.newaxis), "value"))
    c.add("SliceAssign_int32_reverse", "StridedSliceAssign", {"value": I32([1, 2])},
          var=I32([9, 8, 7, 6, 5]), slice_=(slice(-1, 0, -2), "value"))
    c.add("SliceAssign_empty", "StridedSliceAssign", {"value": F32([1, 2, 3])}, var=w,
          slice_=(slice(3, 1), "value"))
    c.add("SliceAssign_bad_value", "StridedSliceAssign", {"value": _values((2, 3), F32)},
          var=w, slice_=(slice(1, 4, 2), "value"),
          error="Cannot broadcast input shape [2,3] into final shape [2,4]")


def _count_up_to_cases(c):
    c.add("CountUpTo_int32", "CountUpTo", {}, var=I32(3), attrs={"limit": 5})
    c.add("CountUpTo_int64", "CountUpTo", {}, var=I64(-2), attrs={"limit": 0})
    c.add("CountUpTo_reached", "CountUpTo", {}, var=I32(5), attrs={"limit": 5},
          error="Reached limit of 5")


def _inplace_cases(c):
    for op in ("InplaceUpdate", "InplaceAdd", "InplaceSub"):
        for dt in DTYPES:
            # rows wrap around x's rows: 5 is row 1, -1 row 3 (TensorFlow's kernel)
            c.add(f"{op}_{dt.__name__}", op,
                  {"x": _values((4, 3), dt), "i": I32([1, 5, -1, 0]), "v": _values((4, 3), dt)})
    c.add("InplaceAdd_vector", "InplaceAdd",
          {"x": _values(6, F32), "i": I32([2, 2]), "v": _values(2, F32)})
    c.add("InplaceUpdate_none", "InplaceUpdate",
          {"x": _values((3, 2), F32), "i": np.zeros(0, I32), "v": np.zeros((0, 2), F32)})
    x = _values((4, 2), F32)
    c.add("InplaceUpdate_count", "InplaceUpdate",
          {"x": x, "i": I32([1]), "v": _values((2, 2), F32)},
          error="i and x shape doesn't match at index 0: [1] vs. [2,2]")
    c.add("InplaceSub_inner", "InplaceSub", {"x": x, "i": I32([1]), "v": _values((1, 3), F32)},
          error="x and v shape doesn't match at index 1 : [4,2] vs. [1,3]")
    c.add("InplaceAdd_rank", "InplaceAdd", {"x": x, "i": I32([1]), "v": _values(2, F32)},
          error="x and v shape doesn't match (ranks differ): [4,2] vs. [2]")
    c.add("InplaceAdd_matrix_i", "InplaceAdd", {"x": x, "i": I32([[1]]), "v": _values((1, 2), F32)},
          error="i must be a vector. [1,1]")


def _accumulate_cases(c):
    for dt in DTYPES:
        args = {f"x{k}": _values((3, 2), dt) for k in range(3)}
        c.add(f"AccumulateNV2_{dt.__name__}", "AccumulateNV2", args, lists={"inputs": list(args)},
              attrs={"shape": [3, 2]}, grad=list(args) if dt == F32 else ())
    args = {f"x{k}": _values(4, F64) for k in range(2)}
    c.add("AccumulateNV2_partial_shape", "AccumulateNV2", args, lists={"inputs": list(args)},
          attrs={"shape": tf.TensorShape([None])})
    c.add("AccumulateNV2_one", "AccumulateNV2", {"x0": _values((2, 2), F32)},
          lists={"inputs": ["x0"]}, attrs={"shape": tf.TensorShape(None)})


def main():
    generate(Cases(), [_row_cases, _nd_cases, _non_aliasing_cases, _slice_assign_cases,
                       _count_up_to_cases, _inplace_cases, _accumulate_cases], OUT, "scatter")


if __name__ == "__main__":
    main()
