#!/usr/bin/env python3
"""Make tests/fixtures/real_ops/ (tests/test_real_ops.py): the ops of real models' graphs (see
tools/op_census.py and docs/ops.md) that the other fixture sets do not already check, as
TensorFlow computes them and their gradients.

NEEDS TENSORFLOW; never imports tfg. It reuses the two fixture mechanisms:

    kernels.pb, expected.npz, cases.json   one op node per case fed by Const nodes
                                           (tools/gen_kernel_fixtures.build_and_run)
    grad.pb, grad.npz, grad_cases.json     forward graphs of placeholders and TensorFlow's
                                           tf.gradients of them (tools/gen_grad_fixtures.Group)

    /work/tfvenv/bin/python tools/gen_real_ops_fixtures.py
"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

import numpy as np  # noqa: E402
import tensorflow as tf  # noqa: E402

import gen_kernel_fixtures as kernel_fx  # noqa: E402  (first: it runs eager code on import)
import gen_grad_fixtures as grad_fx  # noqa: E402  (then TF1 graph mode, v1 control flow)

OUT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "fixtures",
                   "real_ops")
rng = np.random.default_rng(2222)


def f32(*shape, lo=-1.0, hi=1.0):
    return rng.uniform(lo, hi, shape).astype(np.float32)


KERNELS = []


def kcase(name, op, rtol=1e-5, atol=1e-5, **kw):
    KERNELS.append((name, op, rtol, atol, kw))


# --------------------------------------------------------------------------- Einsum
EINSUMS = {  # name -> (equation, input shapes): the equations Keras' layers write
    "mha_scores": ("aecd,abcd->acbe", [(2, 5, 2, 4), (2, 3, 2, 4)]),
    "mha_context": ("acbe,aecd->abcd", [(2, 2, 3, 5), (2, 5, 2, 4)]),
    "dense_qkv": ("abc,cde->abde", [(2, 3, 6), (6, 2, 4)]),
    "dense_out": ("abcd,cde->abe", [(2, 3, 2, 4), (2, 4, 6)]),
    "ellipsis_bcast": ("...ij,...jk->...ik", [(2, 1, 3, 4), (3, 4, 2)]),
    "transpose": ("ij->ji", [(3, 4)]),
    "sum_out": ("bij,jk->bk", [(2, 3, 4), (4, 5)]),
    "outer": ("ab,cd->abcd", [(2, 3), (4, 2)]),
}
for name, (eq, shapes) in EINSUMS.items():
    kcase(f"einsum_{name}", "Einsum", inputs=[f32(*s) for s in shapes], equation=eq)


def einsum_grads(gr):
    for name, (eq, shapes) in EINSUMS.items():
        xs = [gr.ph(f"einsum_{name}_{i}", f32(*s)) for i, s in enumerate(shapes)]
        y = tf.einsum(eq, *xs)
        w = tf.constant(f32(*y.shape), name=f"einsum_{name}_w")
        gr.case(f"einsum_{name}", [tf.identity(y * w, name=f"t_einsum_{name}")], xs)


# --------------------------------------------------------------------------- MirrorPad
for mode in ("REFLECT", "SYMMETRIC"):
    kcase(f"mirror_pad_grad_{mode.lower()}", "MirrorPadGrad", input=f32(7, 6, 3),
          paddings=np.array([[2, 1], [0, 2], [1, 0]], np.int32), mode=mode)


def mirror_pad_grads(gr):
    for mode in ("REFLECT", "SYMMETRIC"):
        x = gr.ph(f"mirror_{mode.lower()}", f32(3, 4, 2))
        y = tf.pad(x, [[2, 1], [1, 2], [0, 1]], mode=mode)
        w = tf.constant(f32(*y.shape))
        gr.case(f"mirror_pad_{mode.lower()}", [tf.identity(y * w, name=f"t_mirror_{mode}")],
                [x])


# --------------------------------------------------------------------------- MatrixBandPart
BANDS = {"causal": (-1, 0), "upper": (0, -1), "tridiagonal": (1, 1), "all": (-1, -1),
         "wide": (2, 0)}
for name, (lo, up) in BANDS.items():
    kcase(f"band_part_{name}", "MatrixBandPart", input=f32(2, 4, 5),
          num_lower=np.int64(lo), num_upper=np.int64(up))
kcase("band_part_int32_limits", "MatrixBandPart", input=f32(3, 3),
      num_lower=np.int32(0), num_upper=np.int32(1))


def band_part_grads(gr):
    for name, (lo, up) in BANDS.items():
        x = gr.ph(f"band_{name}", f32(2, 4, 5))
        y = tf.linalg.band_part(x, lo, up)
        gr.case(f"band_part_{name}", [tf.identity(y * tf.constant(f32(2, 4, 5)),
                                                  name=f"t_band_{name}")], [x])


# --------------------------------------------------------------------------- model blocks
def block_grads(gr):
    """The pieces Keras' layers emit, each with tf.gradients of a weighted sum."""
    x = gr.ph("blk_x", f32(2, 5, 6))
    w = tf.constant(f32(2, 5, 6), name="blk_w")

    def case(name, y, xs):
        gr.case(name, [tf.identity(y * w if y.shape == w.shape else y, name=f"t_{name}")], xs)

    case("gelu_exact", tf.nn.gelu(x, approximate=False), [x])
    case("gelu_tanh", tf.nn.gelu(x, approximate=True), [x])
    case("silu", tf.nn.silu(x), [x])
    case("hard_swish", x * tf.nn.relu6(x * 3.0 + 3.0) / 6.0, [x])
    case("selu", tf.nn.selu(x), [x])
    gamma, beta = gr.ph("blk_gamma", f32(6)), gr.ph("blk_beta", f32(6))
    mean, var = tf.nn.moments(x, [-1], keepdims=True)
    case("layer_norm", tf.nn.batch_normalization(x, mean, var, beta, gamma, 1e-3),
         [x, gamma, beta])
    mask = tf.constant(rng.integers(0, 2, (2, 5, 6)).astype(bool), name="blk_mask")
    case("masked_softmax", tf.nn.softmax(x + (1.0 - tf.cast(mask, tf.float32)) * -1e9), [x])
    case("log_softmax_rsqrt", tf.nn.log_softmax(x) * tf.math.rsqrt(x * x + 1.0), [x])
    a, bm = gr.ph("bmm_a", f32(2, 1, 3, 4)), gr.ph("bmm_b", f32(5, 4, 2))
    y = tf.matmul(a, bm)
    gr.case("batch_matmul_bcast", [tf.identity(y * tf.constant(f32(2, 5, 3, 2)),
                                               name="t_bmm")], [a, bm])
    img = gr.ph("bn_x", f32(2, 4, 4, 3, lo=-2, hi=3))
    scale, offset = gr.ph("bn_scale", f32(3, lo=0.5, hi=1.5)), gr.ph("bn_offset", f32(3))
    y, _, _ = tf1.nn.fused_batch_norm(img, scale, offset, epsilon=1e-3, is_training=True)
    gr.case("fused_batch_norm_training", [tf.identity(y * tf.constant(f32(2, 4, 4, 3)),
                                                      name="t_bn")], [img, scale, offset])


def second_order_grads(gr):
    """Gradients TensorFlow has for ops its own gradients emit (second order)."""
    x, y = gr.ph("so_x", f32(3, 4, lo=0.3, hi=1.5)), gr.ph("so_y", f32(4, lo=-1.5, hi=-0.3))
    gr.case("atan2", [tf.identity(tf.math.atan2(x, y) * tf.constant(f32(3, 4)),
                                  name="t_atan2")], [x, y])
    first = tf.gradients(tf.reduce_sum(tf.nn.selu(x - 0.9) * x), x)[0]  # SeluGrad
    gr.case("selu_grad_grad", [tf.identity(first * first, name="t_selu2")], [x])
    upd = gr.ph("so_updates", f32(3, 4))
    sc = tf.scatter_nd(tf.constant([[1], [4], [1]]), upd, [5, 4])
    gr.case("scatter_nd", [tf.identity(sc * tf.constant(f32(5, 4)), name="t_scatter")], [upd])
    first = tf.gradients(tf.reduce_sum(x[1:, ::2] ** 2), x)[0]  # StridedSliceGrad
    gr.case("strided_slice_grad_grad", [tf.identity(first * first, name="t_ssg2")], [x])


# --------------------------------------------------------------------------- the real-model
# sweep's ops (dilated Keras convs, pixel shuffle, embedding_lookup_sparse, tf.math.segment_*,
# tf.roll), from their own generator so the values above stay put
rng2 = np.random.default_rng(3333)


def g32(*shape, lo=-1.0, hi=1.0):
    return rng2.uniform(lo, hi, shape).astype(np.float32)


i32 = np.int32
kcase("space_to_batch_2d", "SpaceToBatchND", input=g32(2, 5, 6, 3),
      block_shape=np.array([2, 3], i32), paddings=np.array([[1, 2], [0, 3]], i32))
kcase("space_to_batch_1d_rest", "SpaceToBatchND", input=g32(3, 7, 2, 2),
      block_shape=np.array([4], np.int64), paddings=np.array([[0, 1]], np.int64))
kcase("batch_to_space_2d", "BatchToSpaceND", input=g32(12, 3, 3, 2),
      block_shape=np.array([2, 3], i32), crops=np.array([[1, 0], [2, 1]], i32))
kcase("depth_to_space", "DepthToSpace", input=g32(2, 3, 2, 12), block_size=2)
kcase("space_to_depth", "SpaceToDepth", input=g32(2, 6, 9, 2), block_size=3)
kcase("roll_multi_axis", "Roll", input=g32(3, 4, 5), shift=np.array([1, -2, 7], i32),
      axis=np.array([0, 2, 2], i32))
SEG_IDS = np.array([0, 0, 2, 3, 3, 3], i32)
SEG_DATA = np.round(g32(6, 4) * 4) / 4  # ties for max/min
for kind in ("Sum", "Mean", "Max", "Min", "Prod"):
    kcase(f"segment_{kind.lower()}", f"Segment{kind}", data=SEG_DATA, segment_ids=SEG_IDS)
SP_IDX = np.array([4, 1, 1, 0, 3], i32)
SP_SEG = np.array([0, 0, 1, 3, 3], i32)
for kind in ("Sum", "Mean", "SqrtN"):
    kcase(f"sparse_segment_{kind.lower()}", f"SparseSegment{kind}", data=g32(5, 3),
          indices=SP_IDX, segment_ids=SP_SEG)
    kcase(f"sparse_segment_{kind.lower()}_num", f"SparseSegment{kind}WithNumSegments",
          data=g32(5, 3), indices=SP_IDX, segment_ids=np.array([0, 0, 2, 3, 5], i32),
          num_segments=np.int32(6))


def sweep_grads(gr):
    x = gr.ph("s2b_x", g32(2, 5, 6, 3))
    y = tf.space_to_batch_nd(x, [2, 3], [[1, 2], [0, 3]])
    gr.case("space_to_batch", [tf.identity(y * tf.constant(g32(*y.shape)), name="t_s2b")], [x])
    x = gr.ph("b2s_x", g32(12, 3, 3, 2))
    y = tf.compat.v1.batch_to_space_nd(x, [2, 3], [[1, 0], [2, 1]])
    gr.case("batch_to_space", [tf.identity(y * tf.constant(g32(*y.shape)), name="t_b2s")], [x])
    x = gr.ph("d2s_x", g32(2, 3, 2, 12))
    y = tf.nn.space_to_depth(tf.nn.depth_to_space(x, 2) * tf.constant(g32(2, 6, 4, 3)), 2)
    gr.case("depth_space", [tf.identity(y * tf.constant(g32(*y.shape)), name="t_d2s")], [x])
    x = gr.ph("roll_x", g32(3, 4, 5))
    y = tf.roll(x, [1, -2, 7], [0, 2, 2])
    gr.case("roll", [tf.identity(y * tf.constant(g32(3, 4, 5)), name="t_roll")], [x])
    d = gr.ph("seg_d", SEG_DATA)
    for kind, fn in (("sum", tf.math.segment_sum), ("mean", tf.math.segment_mean),
                     ("max", tf.math.segment_max), ("min", tf.math.segment_min)):
        y = fn(d, SEG_IDS)
        gr.case(f"segment_{kind}", [tf.identity(y * tf.constant(g32(4, 4)),
                                                name=f"t_seg_{kind}")], [d])
    d = gr.ph("sps_d", g32(5, 3))
    for kind, fn in (("sum", tf.sparse.segment_sum), ("mean", tf.sparse.segment_mean),
                     ("sqrt_n", tf.sparse.segment_sqrt_n)):
        y = fn(d, SP_IDX, SP_SEG)
        gr.case(f"sparse_segment_{kind}", [tf.identity(y * tf.constant(g32(4, 3)),
                                                       name=f"t_sps_{kind}")], [d])
        y = fn(d, SP_IDX, np.array([0, 0, 2, 3, 5], i32), num_segments=6)
        gr.case(f"sparse_segment_{kind}_num", [tf.identity(y * tf.constant(g32(6, 3)),
                                                           name=f"t_spsn_{kind}")], [d])
    d = gr.ph("uss_d", g32(5, 2, 3))
    y = tf.math.unsorted_segment_sum(d, np.array([[1, -1], [0, 2], [-1, -1], [3, 1], [0, 0]],
                                                 i32), 4)
    gr.case("unsorted_segment_sum_negative_ids",
            [tf.identity(y * tf.constant(g32(4, 3)), name="t_uss")], [d])


# TensorFlow's own sparse-segment gradient ops (in graphs holding tf.gradients of
# embedding_lookup_sparse)
for kind in ("Sum", "Mean", "SqrtN"):
    for v2 in ("", "V2"):
        kw = {"dense_output_dim0" if v2 else "output_dim0": np.int32(6)}
        kcase(f"sparse_segment_{kind.lower()}_grad{v2.lower()}", f"SparseSegment{kind}Grad{v2}",
              grad=g32(4, 3), indices=np.array([4, 1, 1, 0, 5], i32),
              segment_ids=np.array([0, 0, 1, 3, 3], i32), **kw)


def _spd(n, batch=()):
    a = g32(*batch, n, n)
    return (a @ np.swapaxes(a, -1, -2) + 2 * np.eye(n, dtype=np.float32)).astype(np.float32)


def _tri(n, batch=()):
    return (g32(*batch, n, n) + 3 * np.eye(n, dtype=np.float32)).astype(np.float32)


for adj in (False, True):
    kcase(f"matrix_inverse_adj{int(adj)}", "MatrixInverse", input=_tri(3, (2,)), adjoint=adj)
kcase("cholesky", "Cholesky", input=_spd(4, (2,)) + np.triu(g32(4, 4), 1))  # upper ignored
for lower in (True, False):
    for adj in (False, True):
        kcase(f"triangular_solve_l{int(lower)}_a{int(adj)}", "MatrixTriangularSolve",
              matrix=_tri(3, (2,)), rhs=g32(2, 3, 2), lower=lower, adjoint=adj)
kcase("triangular_solve_bcast", "MatrixTriangularSolve", matrix=_tri(3), rhs=g32(2, 3, 4))


def linalg_grads(gr):
    for adj in (False, True):
        a = gr.ph(f"inv_a{int(adj)}", _tri(3, (2,)))
        y = tf.raw_ops.MatrixInverse(input=a, adjoint=adj)
        gr.case(f"matrix_inverse_adj{int(adj)}",
                [tf.identity(y * tf.constant(g32(2, 3, 3)), name=f"t_inv{int(adj)}")], [a])
    a = gr.ph("chol_a", _spd(4, (2,)))
    y = tf.linalg.cholesky(a)
    gr.case("cholesky", [tf.identity(y * tf.constant(g32(2, 4, 4)), name="t_chol")], [a])
    for lower in (True, False):
        for adj in (False, True):
            m = gr.ph(f"ts_m{int(lower)}{int(adj)}", _tri(3, (2,)))
            r = gr.ph(f"ts_r{int(lower)}{int(adj)}", g32(2, 3, 2))
            y = tf.linalg.triangular_solve(m, r, lower=lower, adjoint=adj)
            gr.case(f"triangular_solve_l{int(lower)}_a{int(adj)}",
                    [tf.identity(y * tf.constant(g32(2, 3, 2)),
                                 name=f"t_ts{int(lower)}{int(adj)}")], [m, r])


# MatrixDiagV3 / MatrixDiagPartV3 (tf.eye and tf.linalg.diag in a tf.function): one
# diagonal, a band of them in every alignment, inferred and explicit sizes
for align in ("RIGHT_LEFT", "LEFT_RIGHT", "LEFT_LEFT", "RIGHT_RIGHT"):
    kcase(f"matrix_diag_band_{align.lower()}", "MatrixDiagV3", diagonal=g32(2, 3, 4),
          k=np.array([-1, 1], i32), num_rows=np.int32(-1), num_cols=np.int32(5),
          padding_value=np.float32(9.0), align=align)
    kcase(f"matrix_diag_part_band_{align.lower()}", "MatrixDiagPartV3", input=g32(2, 4, 5),
          k=np.array([-2, 1], i32), padding_value=np.float32(-7.0), align=align)
kcase("matrix_diag_eye", "MatrixDiagV3", diagonal=np.ones(3, np.float32), k=np.int32(0),
      num_rows=np.int32(3), num_cols=np.int32(4), padding_value=np.float32(0.0))
kcase("matrix_diag_part_main", "MatrixDiagPartV3", input=g32(3, 4), k=np.int32(1),
      padding_value=np.float32(0.0))


SPECIAL_X = np.array([0.5, 1.0, 2.5, 7.25, 13.0, 0.01, -0.5, -2.75, -3.0, 0.0, 40.0],
                     np.float32)
kcase("lgamma", "Lgamma", x=SPECIAL_X)
BINS = np.array([[0, 3, 3, 7, 1], [2, 2, 9, 0, 4]], i32)
kcase("dense_bincount_counts", "DenseBincount", input=BINS[0], size=np.int32(6),
      weights=np.zeros(0, np.float32))
kcase("dense_bincount_weights_2d", "DenseBincount", input=BINS, size=np.int32(5),
      weights=g32(2, 5))
kcase("dense_bincount_binary", "DenseBincount", input=BINS.astype(np.int64),
      size=np.int64(8), weights=np.zeros(0, np.int32), binary_output=True)
kcase("digamma", "Digamma", x=SPECIAL_X, rtol=1e-4, atol=1e-5)


def diag_grads(gr):
    x = gr.ph("lgamma_x", np.array([0.5, 1.5, 3.25, 8.0, -0.5, -2.25], np.float32))
    gr.case("lgamma", [tf.identity(tf.math.lgamma(x) * tf.constant(g32(6)), name="t_lgamma")],
            [x])
    d = gr.ph("diag_d", g32(2, 3, 4))
    y = tf.linalg.diag(d, k=(-1, 1), num_cols=5)
    gr.case("matrix_diag_band", [tf.identity(y * tf.constant(g32(2, 4, 5)), name="t_diag")],
            [d])
    x = gr.ph("diag_x", g32(2, 4, 5))
    y = tf.linalg.diag_part(x, k=(-2, 1), align="LEFT_RIGHT")
    gr.case("matrix_diag_part_band", [tf.identity(y * tf.constant(g32(2, 4, 4)),
                                                  name="t_diag_part")], [x])


tf1 = tf.compat.v1
GRAD_GROUPS = [("grad", [einsum_grads, mirror_pad_grads, band_part_grads, block_grads,
                         second_order_grads, sweep_grads, linalg_grads, diag_grads])]


def main():
    os.makedirs(OUT, exist_ok=True)
    from tensorflow.core.framework import graph_pb2

    merged = graph_pb2.GraphDef()
    expected, metas = {}, []
    for name, op, rtol, atol, kw in KERNELS:
        gd, exp, meta = kernel_fx.build_and_run(name, op, rtol, atol, kw)
        if not merged.HasField("versions"):
            merged.versions.CopyFrom(gd.versions)
        merged.node.extend(gd.node)
        expected.update(exp)
        metas.append(meta)
    with open(os.path.join(OUT, "kernels.pb"), "wb") as f:
        f.write(merged.SerializeToString())
    np.savez_compressed(os.path.join(OUT, "expected.npz"), **expected)
    with open(os.path.join(OUT, "cases.json"), "w") as f:
        json.dump({"tensorflow": tf.__version__, "cases": metas}, f, indent=1)

    grad_fx.OUT = OUT  # Group.write puts <group>.pb/.npz there
    index = {}
    for name, builders in GRAD_GROUPS:
        gr = grad_fx.Group(name)
        with gr.graph.as_default():
            for build in builders:
                build(gr)
        gr.write(index)
    with open(os.path.join(OUT, "grad_cases.json"), "w") as f:
        json.dump(index, f, indent=1, sort_keys=True)
    print(f"{len(metas)} kernel cases, {sum(len(v) for v in index.values())} gradient cases",
          file=sys.stderr)


if __name__ == "__main__":
    main()
