"""Every registered gradient against central finite differences, on small random inputs.

Each spec builds one op node fed by Placeholders (the inputs differentiated) and Consts (axes,
shapes, indices); y = sum_k sum(output_k * W_k) with fixed random W_k, so that every output's
gradient matters. Control-flow ops are covered by test_grad_fixtures / test_grad_structure.
"""
import numpy as np
import pytest

from helpers import numeric_gradient
from tfg.executor.session import Session
from tfg.graphdef.attrs import Shape
from tfg.graphdef.graph import Graph
from tfg.passes.grad import grad, registered
from tfg.passes.grad.emitter import NodeFactory
from tfg.schemas.dtypes import DType
from tfg.schemas.ops import signature

rng = np.random.default_rng(7)


def r(*shape, lo=-1.0, hi=1.0):
    return rng.uniform(lo, hi, shape)


def pos(*shape):
    return rng.uniform(0.5, 2.0, shape)


def away(*shape):
    """Values away from 0 (kinks of Abs/Relu/Max...)."""
    v = rng.uniform(0.2, 1.0, shape)
    return v * rng.choice([-1.0, 1.0], shape)


def C(value, dtype=None):
    return ("c", np.asarray(value, dtype=dtype))


def P(value, dtype=np.float64):
    return ("p", np.asarray(value, dtype=dtype))


i32 = np.int32
NHWC = {"data_format": b"NHWC"}
CONV = {"strides": [1, 1, 1, 1], "padding": b"SAME", **NHWC}
DEPTHWISE = {"strides": [1, 2, 2, 1], "padding": b"SAME", **NHWC}
POOL = {"ksize": [1, 2, 2, 1], "strides": [1, 1, 1, 1], "padding": b"VALID", **NHWC}

# op -> (inputs, attrs[, eps, tolerance[, outputs in y]]); P = differentiated input, C = constant.
SPECS = {
    "Abs": ([P(away(3, 2))], {}), "Neg": ([P(r(3))], {}), "Square": ([P(r(2, 3))], {}),
    "Sqrt": ([P(pos(3))], {}), "Rsqrt": ([P(pos(3))], {}), "Reciprocal": ([P(pos(3))], {}),
    "Inv": ([P(pos(3))], {}), "Exp": ([P(r(3))], {}), "Expm1": ([P(r(3))], {}),
    "Log": ([P(pos(3))], {}), "Log1p": ([P(pos(3))], {}), "Sin": ([P(r(3))], {}),
    "Cos": ([P(r(3))], {}), "Tan": ([P(r(3))], {}), "Tanh": ([P(r(3))], {}),
    "Sigmoid": ([P(r(3))], {}), "Erf": ([P(r(3))], {}), "Sign": ([P(away(3))], {}),
    "Cast": ([P(r(3))], {"DstT": DType.FLOAT}, 1e-3, 1e-3),
    "Identity": ([P(r(3))], {}), "Snapshot": ([P(r(3))], {}),
    "EnsureShape": ([P(r(2, 3))], {"shape": Shape((2, 3))}),
    "CheckNumerics": ([P(r(3))], {"message": b"x"}),
    "PlaceholderWithDefault": ([P(r(3))], {"shape": Shape((3,))}),
    "IdentityN": ([P(r(3)), P(r(2))], {}),
    "Relu": ([P(away(4))], {}), "Relu6": ([P(away(4) * 8)], {}), "Elu": ([P(away(4))], {}),
    "Selu": ([P(away(4))], {}), "LeakyRelu": ([P(away(4))], {"alpha": 0.3}),
    "Softplus": ([P(r(4))], {}), "Softsign": ([P(away(4))], {}),
    "Softmax": ([P(r(2, 4))], {}), "LogSoftmax": ([P(r(2, 4))], {}),
    "TanhGrad": ([P(r(3)), P(r(3))], {}), "SigmoidGrad": ([P(r(3)), P(r(3))], {}),
    "SqrtGrad": ([P(pos(3)), P(r(3))], {}), "RsqrtGrad": ([P(pos(3)), P(r(3))], {}),
    "ReciprocalGrad": ([P(pos(3)), P(r(3))], {}), "InvGrad": ([P(pos(3)), P(r(3))], {}),
    "ReluGrad": ([P(r(4)), P(away(4))], {}), "Relu6Grad": ([P(r(4)), P(away(4) * 8)], {}),
    "EluGrad": ([P(r(4)), P(away(4))], {}), "LeakyReluGrad": ([P(r(4)), P(away(4))], {}),
    "SoftplusGrad": ([P(r(4)), P(r(4))], {}),
    "AddV2": ([P(r(2, 3)), P(r(3))], {}), "Add": ([P(r(2, 1)), P(r(3))], {}),
    "Sub": ([P(r(2, 3)), P(r(2, 1))], {}), "Mul": ([P(r(3, 1)), P(r(1, 2))], {}),
    "RealDiv": ([P(r(2, 3)), P(pos(3))], {}), "Div": ([P(r(2, 3)), P(pos(3))], {}),
    "DivNoNan": ([P(r(2, 3)), P(pos(3))], {}), "Pow": ([P(pos(2, 3)), P(r(3))], {}),
    "Maximum": ([P(r(2, 3)), P(r(3) + 0.05)], {}), "Minimum": ([P(r(2, 3)), P(r(3) + 0.05)], {}),
    "SquaredDifference": ([P(r(2, 3)), P(r(3))], {}), "FloorMod": ([P(pos(3) + 3), P(pos(3))], {}),
    "AddN": ([P(r(2, 2)), P(r(2, 2)), P(r(2, 2))], {}),
    "Select": ([C([True, False, True]), P(r(3, 2)), P(r(3, 2))], {}),
    "SelectV2": ([C([[True], [False]]), P(r(2, 3)), P(r(3))], {}),
    "MatMul": ([P(r(2, 3)), P(r(3, 4))], {}),
    "BatchMatMulV2": ([P(r(2, 2, 3)), P(r(2, 3))], {"adj_y": True}),
    "BatchMatMul": ([P(r(2, 3, 2)), P(r(2, 3, 2))], {"adj_x": True}),
    "BatchMatMulV3": ([P(r(2, 2, 3)), P(r(1, 3, 2))], {"Tout": DType.DOUBLE}),
    "BiasAdd": ([P(r(2, 3)), P(r(3))], {}), "BiasAddV1": ([P(r(2, 3)), P(r(3))], {}),
    "BiasAddGrad": ([P(r(2, 2, 3))], {}),
    "L2Loss": ([P(r(2, 3))], {}),
    "Sum": ([P(r(2, 3, 2)), C([0, -1], i32)], {}), "Mean": ([P(r(2, 3)), C(1, i32)], {}),
    "Max": ([P(r(2, 3)), C([1], i32)], {"keep_dims": True}),
    "Min": ([P(r(2, 3)), C(0, i32)], {}), "Prod": ([P(pos(2, 3)), C([1], i32)], {}),
    "Cumsum": ([P(r(2, 3)), C(1, i32)], {"exclusive": True}),
    "Cumprod": ([P(pos(2, 3)), C(0, i32)], {"reverse": True}),
    "SoftmaxCrossEntropyWithLogits": ([P(r(2, 3)), P(np.array([[0.2, 0.5, 0.3], [1, 0, 0]]))],
                                      {}),
    "SparseSoftmaxCrossEntropyWithLogits": ([P(r(3, 4)), C([0, 3, 1], i32)], {}),
    "Conv2D": ([P(r(1, 4, 4, 2)), P(r(3, 3, 2, 2))], CONV),
    "Einsum": ([P(r(2, 3, 2, 4)), P(r(2, 5, 2, 4))], {"equation": b"bqhd,bkhd->bhqk"}),
    "MatrixBandPart": ([P(r(2, 4, 3)), C(1, i32), C(0, i32)], {}),
    "Conv2DBackpropInput": ([C([1, 4, 4, 2], i32), P(r(2, 2, 2, 3)), P(r(1, 4, 4, 3))], CONV),
    "Conv2DBackpropFilter": ([P(r(1, 4, 4, 2)), C([2, 2, 2, 3], i32), P(r(1, 4, 4, 3))], CONV),
    "DepthwiseConv2dNative": ([P(r(1, 5, 5, 2)), P(r(3, 3, 2, 2))], DEPTHWISE),
    "DepthwiseConv2dNativeBackpropInput": (
        [C([1, 5, 5, 2], i32), P(r(3, 3, 2, 2)), P(r(1, 3, 3, 4))], DEPTHWISE),
    "DepthwiseConv2dNativeBackpropFilter": (
        [P(r(1, 5, 5, 2)), C([3, 3, 2, 2], i32), P(r(1, 3, 3, 4))], DEPTHWISE),
    "Erfc": ([P(r(3))], {}),
    "ReverseSequence": ([P(r(3, 4, 2)), C([4, 0, 2], np.int64)], {"seq_dim": 1}),
    "TopKV2": ([P(r(2, 6)), C(3, i32)], {}, 1e-6, 1e-5, [0]),
    "MaxPool": ([P(r(1, 3, 3, 2))], POOL), "AvgPool": ([P(r(1, 3, 3, 2))], POOL),
    "AvgPoolGrad": ([C([1, 3, 3, 2], i32), P(r(1, 2, 2, 2))], POOL),
    "FusedBatchNormV3": ([P(r(2, 2, 2, 3), np.float32), P(pos(3), np.float32),
                          P(r(3), np.float32), C(np.zeros(3, np.float32)),
                          C(np.ones(3, np.float32))],
                         {"epsilon": 0.001, "is_training": True, **NHWC}, 1e-2, 2e-2, [0]),
    "FusedBatchNormV2": ([P(r(2, 2, 2, 3), np.float32), P(pos(3), np.float32),
                          P(r(3), np.float32), C(r(3), np.float32), C(pos(3), np.float32)],
                         {"epsilon": 0.001, "is_training": False, **NHWC}, 1e-2, 2e-2, [0]),
    "FusedBatchNorm": ([P(r(2, 2, 2, 3), np.float32), P(pos(3), np.float32),
                        P(r(3), np.float32), C(np.zeros(3, np.float32)),
                        C(np.ones(3, np.float32))],
                       {"epsilon": 0.001, "is_training": True, **NHWC}, 1e-2, 2e-2, [0]),
    "Reshape": ([P(r(2, 3)), C([3, 2], i32)], {}), "Squeeze": ([P(r(2, 1, 3))], {}),
    "ExpandDims": ([P(r(2, 3)), C(-1, i32)], {}),
    "Transpose": ([P(r(2, 3, 2)), C([1, 2, 0], i32)], {}),
    "ConcatV2": ([P(r(2, 1)), P(r(2, 3)), C(-1, i32)], {}),
    "Concat": ([C(0, i32), P(r(1, 2)), P(r(2, 2))], {}),
    "Pack": ([P(r(3)), P(r(3))], {"axis": 1}), "Unpack": ([P(r(2, 3))], {"num": 3, "axis": 1}),
    "Split": ([C(1, i32), P(r(2, 4))], {"num_split": 2}),
    "SplitV": ([P(r(2, 5)), C([2, 3], i32), C(1, i32)], {"num_split": 2}),
    "Slice": ([P(r(3, 4)), C([1, 0], i32), C([2, 3], i32)], {}),
    "StridedSlice": ([P(r(3, 4)), C([0, 1], i32), C([3, 4], i32), C([2, 2], i32)], {}),
    "GatherV2": ([P(r(3, 2)), C([2, 0, 2], i32), C(0, i32)], {}),
    "Gather": ([P(r(3, 2)), C([1, 1], i32)], {}),
    "GatherNd": ([P(r(3, 2)), C([[0, 1], [2, 0], [0, 1]], i32)], {}),
    "Tile": ([P(r(2, 1)), C([2, 3], i32)], {}), "Pad": ([P(r(2, 2)), C([[1, 0], [0, 2]], i32)], {}),
    "PadV2": ([P(r(2, 2)), C([[0, 1], [1, 1]], i32), P(np.array(0.5))], {}),
    "Atan2": ([P(away(2, 3)), P(away(3))], {}),
    "SeluGrad": ([P(r(2, 3)), P(away(2, 3))], {}),
    "ScatterNd": ([C([[1], [3], [1]], i32), P(r(3, 2)), C([5, 2], i32)], {}),
    "StridedSliceGrad": ([C([4, 5], i32), C([1, 0], i32), C([4, 5], i32), C([2, 2], i32),
                          P(r(2, 3))], {}),
    "MirrorPad": ([P(r(3, 4)), C([[1, 2], [2, 1]], i32)], {"mode": b"REFLECT"}),
    "MirrorPadGrad": ([P(r(6, 7)), C([[1, 2], [2, 1]], i32)], {"mode": b"SYMMETRIC"}),
    "ReverseV2": ([P(r(2, 3)), C([1], i32)], {}),
    "BroadcastTo": ([P(r(3)), C([2, 3], i32)], {}),
    "Fill": ([C([2, 3], i32), P(np.array(0.7))], {}),
    "ReadVariableOp": None,  # needs a resource variable: see test_grad_structure
    # float32 outputs whatever the image dtype: float32 finite differences
    "ResizeBilinear": ([P(r(1, 3, 4, 2)), C([5, 3], i32)], {"half_pixel_centers": True},
                       1e-3, 2e-3),
    "ResizeBicubic": ([P(r(1, 4, 3, 2)), C([3, 6], i32)], {"align_corners": True}, 1e-3, 2e-3),
    "ResizeNearestNeighbor": ([P(r(2, 3, 4, 1)), C([5, 2], i32)], {"half_pixel_centers": True}),
    "SpaceToBatchND": ([P(r(2, 3, 4, 1)), C([2, 2], i32), C([[1, 0], [0, 2]], i32)], {}),
    "BatchToSpaceND": ([P(r(4, 2, 3, 1)), C([2, 2], i32), C([[1, 0], [0, 2]], i32)], {}),
    "DepthToSpace": ([P(r(1, 2, 3, 8))], {"block_size": 2}),
    "SpaceToDepth": ([P(r(1, 4, 2, 3))], {"block_size": 2}),
    "Roll": ([P(r(3, 4)), C([2, -1], i32), C([0, 1], i32)], {}),
    "UnsortedSegmentSum": ([P(r(4, 2)), C([1, -1, 0, 1], i32), C(3, i32)], {}),
    "SegmentSum": ([P(r(4, 2)), C([0, 0, 2, 2], i32)], {}),
    "SegmentMean": ([P(r(4, 2)), C([0, 0, 0, 2], i32)], {}),
    "SegmentMax": ([P(away(4, 2)), C([0, 1, 1, 1], i32)], {}),
    "SegmentMin": ([P(away(4, 2)), C([0, 0, 1, 1], i32)], {}),
    "UnsortedSegmentMax": ([P(away(5, 2)), C([2, -1, 0, 1, 2], i32), C(3, i32)], {}),
    "UnsortedSegmentMin": ([P(away(4, 2)), C([1, 1, 0, 1], i32), C(2, i32)], {}),
    "UnsortedSegmentProd": ([P(away(4, 2)), C([0, 2, 0, 2], i32), C(3, i32)], {}),
    "TensorScatterUpdate": ([P(r(4, 2)), C([[3], [0]], i32), P(r(2, 2))], {}),
    "TensorScatterAdd": ([P(r(4, 2)), C([[3], [0], [3]], i32), P(r(3, 2))], {}),
    "ScatterNdNonAliasingAdd": ([P(r(4, 2)), C([[3], [0], [3]], i32), P(r(3, 2))], {}),
    "AccumulateNV2": ([P(r(2, 2)), P(r(2, 2)), P(r(2, 2))], {"shape": Shape((2, 2))}),
    "TensorScatterSub": ([P(r(3, 2)), C([[1, 1], [0, 0]], i32), P(r(2))], {}),
    "TensorScatterMax": ([P(away(4, 2)), C([[3], [0]], i32), P(away(2, 2))], {}),
    "TensorScatterMin": ([P(away(4, 2)), C([[1], [2]], i32), P(away(2, 2))], {}),
}
_M = r(2, 3, 3) + 3 * np.eye(3)
SPECS.update({
    "MatrixInverse": ([P(_M)], {"adjoint": True}),
    "MatrixTriangularSolve": ([P(_M), P(r(2, 3, 2))], {"lower": False}),
})
SPECS.update({
    "MatrixDiagV3": ([P(r(2, 3, 4)), C([-1, 1], i32), C(-1, i32), C(5, i32), C(0.0)],
                     {"align": b"LEFT_RIGHT"}),
    "MatrixDiagPartV3": ([P(r(2, 4, 5)), C([-2, 1], i32), C(0.0)], {}),
    "Lgamma": ([P(np.array([0.4, 1.7, 3.2, -0.6, -2.3]))], {}),
})
# The array_more family (tests/test_array_more_ops.py checks them against TensorFlow's
# gradients). The V2 diagonal ops: sub- and main diagonals only, where TensorFlow's rule
# (which packs superdiagonals RIGHT, the V2 ops LEFT) is the true gradient.
SPECS.update({
    "DynamicPartition": ([P(r(5, 2)), C([1, 0, 2, 1, 1], i32)], {"num_partitions": 3}),
    "DynamicStitch": ([C([0, 3], i32), C([[1, 2]], i32), P(r(2, 3)), P(r(1, 2, 3))],
                      {"N": 2}),
    "ParallelDynamicStitch": ([C([0, 3], i32), C([1, 2], i32), P(r(2, 3)), P(r(2, 3))],
                              {"N": 2}),
    "SparseToDense": ([C([[0, 1], [2, 0]], i32), C([3, 2], i32), P(r(2)), P(np.array(0.3))],
                      {}),
    "EuclideanNorm": ([P(away(2, 3)), C([1], i32)], {}),
    "CumulativeLogsumexp": ([P(r(2, 4)), C(1, i32)], {"reverse": True}),
    "Reverse": ([P(r(2, 3)), C([True, False])], {}),
    "Cross": ([P(r(2, 3)), P(r(2, 3))], {}),
    "ConjugateTranspose": ([P(r(2, 3, 4)), C([2, 0, 1], i32)], {}),
    "TopK": ([P(rng.permutation(12).reshape(2, 6) * 0.1)], {"k": 3}, 1e-6, 1e-5, [0]),
    "MatrixDiag": ([P(r(2, 3))], {}),
    "MatrixDiagPart": ([P(r(2, 3, 4))], {}),
    "MatrixSetDiag": ([P(r(2, 3, 4)), P(r(2, 3))], {}),
    "MatrixDiagV2": ([P(r(2, 2, 3)), C([-2, -1], i32), C(-1, i32), C(-1, i32), C(0.0)], {}),
    "MatrixDiagPartV2": ([P(r(2, 4, 5)), C([-2, 0], i32), C(0.0)], {}),
    "MatrixSetDiagV2": ([P(r(2, 4, 5)), P(r(2, 3, 4)), C([-2, 0], i32)], {}),
    "MatrixSetDiagV3": ([P(r(2, 4, 5)), P(r(2, 4, 4)), C([-1, 2], i32)],
                        {"align": b"LEFT_RIGHT"}),
})
# 3-D convolution and pooling, LRN, pooling with argmax, image patches (tests/test_nn3d_ops.py
# checks them against TensorFlow). TensorFlow's CPU 3-D pools and LRN are float32 only;
# distinct values keep every window's max a finite difference away from a tie.
_CONV3D = {"strides": [1, 1, 2, 1, 1], "padding": b"SAME"}
_POOL3D = {"ksize": [1, 2, 2, 2, 1], "strides": [1, 2, 2, 2, 1], "padding": b"SAME"}
SPECS.update({
    "Conv3D": ([P(r(1, 3, 4, 3, 2)), P(r(2, 2, 2, 2, 2))], _CONV3D),
    "Conv3DBackpropInputV2": ([C([1, 3, 4, 3, 2], i32), P(r(2, 2, 2, 2, 2)),
                               P(r(1, 3, 2, 3, 2))], _CONV3D),
    "Conv3DBackpropFilterV2": ([P(r(1, 3, 4, 3, 2)), C([2, 2, 2, 2, 2], i32),
                                P(r(1, 3, 2, 3, 2))], _CONV3D),
    "MaxPool3D": ([P(rng.permutation(72).reshape(1, 3, 4, 3, 2) * 0.05, np.float32)],
                  _POOL3D, 1e-3, 2e-3),
    "AvgPool3D": ([P(r(1, 3, 4, 3, 2), np.float32)], _POOL3D, 1e-3, 2e-3),
    "AvgPool3DGrad": ([C([1, 3, 4, 3, 2], i32), P(r(1, 2, 2, 2, 2), np.float32)], _POOL3D,
                      1e-3, 2e-3),
    "LRN": ([P(r(1, 2, 2, 5), np.float32)],
            {"depth_radius": 2, "bias": 1.5, "alpha": 0.4, "beta": 0.75}, 1e-3, 3e-3),
    "MaxPoolWithArgmax": ([P(rng.permutation(40).reshape(1, 4, 5, 2) * 0.1)],
                          {"ksize": [1, 2, 2, 1], "strides": [1, 2, 2, 1], "padding": b"SAME"},
                          1e-6, 1e-5, [0]),
    "ExtractImagePatches": ([P(r(1, 4, 5, 2))], {"ksizes": [1, 2, 3, 1], "strides": [1, 2, 1, 1],
                                                 "rates": [1, 1, 2, 1], "padding": b"SAME"}),
})
# More maths and SegmentProd (tests/test_more_grads.py checks them against TensorFlow's
# gradients too; Xdivy away from x = 0, where TensorFlow's d/dx is 0).
SPECS.update({
    "Sinh": ([P(r(2, 3))], {}), "Cosh": ([P(r(2, 3))], {}), "Asin": ([P(r(3) * 0.9)], {}),
    "Acos": ([P(r(3) * 0.9)], {}), "Atan": ([P(r(2, 3) * 3)], {}),
    "Xdivy": ([P(away(2, 3)), P(pos(3))], {}),
    "SegmentProd": ([P(away(5, 2)), C([0, 0, 1, 1, 1], i32)], {}),
})
for _kind in ("Sum", "Mean", "SqrtN"):
    SPECS[f"SparseSegment{_kind}"] = (
        [P(r(4, 3)), C([3, 1, 1, 0], i32), C([0, 0, 1, 3], i32)], {})
    SPECS[f"SparseSegment{_kind}WithNumSegments"] = (
        [P(r(4, 3)), C([3, 1, 2], i32), C([0, 2, 2], i32), C(5, i32)], {})
SKIP = {"Switch", "RefSwitch", "Merge", "RefMerge", "Enter", "RefEnter", "Exit", "RefExit",
        "NextIteration", "RefNextIteration", "RefIdentity", "PreventGradient", "ReadVariableOp"}
# Ops over TensorArray handles and TensorLists: their gradients are checked against
# TensorFlow's and finite differences in test_tensor_array.py and test_tensor_list_grad.py.
SKIP |= {op for op in registered() if op.startswith(("TensorArray", "TensorList"))}
# Complex inputs or outputs (the harness differentiates real values): checked against
# TensorFlow's gradients and finite differences in test_spectral_ops.py.
SKIP |= {"FFT", "IFFT", "FFT2D", "IFFT2D", "FFT3D", "IFFT3D", "RFFT", "IRFFT", "Complex", "Real",
         "Imag", "ComplexAbs", "Conj"}
SKIP |= {"Angle"}  # (test_more_grads.py: against TensorFlow)
# (test_spectral_einsum_grad.py: against TensorFlow and finite differences)
SKIP |= {"RFFT2D", "IRFFT2D", "RFFT3D", "IRFFT3D"}
# The Optional ops pass a variant: test_more_grads.py, against TensorFlow.
SKIP |= {"OptionalFromValue", "OptionalGetValue"}
# Cholesky reads the lower triangle only, but TensorFlow's gradient is the symmetric one (of
# the function of a symmetric matrix), which finite differences of the raw input cannot give:
# checked against TensorFlow in test_real_ops.py.
SKIP.add("Cholesky")
# The determinants and MatrixSolve against finite differences; the decompositions (vectors
# unique up to sign, symmetric gradients, static shapes needed) against TensorFlow's gradients
# in test_linalg_more_ops.py. Lu has no gradient (as in TensorFlow).
SPECS.update({
    "MatrixDeterminant": ([P(_M)], {}),
    "LogMatrixDeterminant": ([P(_M)], {}, 1e-6, 1e-5, [1]),
    "MatrixSolve": ([P(_M), P(r(2, 3, 2))], {"adjoint": True}),
})
SKIP |= {"MatrixSolveLs", "Qr", "Svd", "SelfAdjointEigV2", "MatrixSquareRoot"}
# The elementwise family of stop 45 (tests/test_math_more_ops.py checks them against
# TensorFlow's gradients), and the differentiable detection/colour ops (the boxes kept
# constant: their gradient has kinks at pixel boundaries).
SPECS.update({
    "Asinh": ([P(r(3))], {}), "Acosh": ([P(rng.uniform(1.5, 3.0, 3))], {}),
    "Atanh": ([P(r(3, lo=-0.8, hi=0.8))], {}), "Erfinv": ([P(r(3, lo=-0.8, hi=0.8))], {}),
    "Ndtri": ([P(rng.uniform(0.1, 0.9, 3))], {}),
    "BesselI0": ([P(r(3, lo=-2, hi=2))], {}), "BesselI1": ([P(r(3, lo=-2, hi=2))], {}),
    "BesselI0e": ([P(away(3))], {}), "BesselI1e": ([P(away(3))], {}),
    "ClipByValue": ([P(np.array([-0.9, -0.2, 0.3, 0.8])), C(-0.5), C(0.5)], {}),
    "MulNoNan": ([P(r(2, 3)), P(away(3))], {}),
    "Xlogy": ([P(away(3)), P(pos(3))], {}), "Xlog1py": ([P(away(3)), P(pos(3))], {}),
    "RGBToHSV": ([P(rng.uniform(0.1, 0.9, (2, 3)))], {}),
    "CropAndResize": ([P(r(1, 4, 5, 2)), C(np.array([[0.1, 0.2, 0.8, 0.7]], np.float32)),
                       C(np.array([0], i32)), C(np.array([3, 2], i32))],
                      {"method": b"bilinear", "extrapolation_value": 0.0}, 1e-2, 1e-3),
})  # (CropAndResize's output is float32 whatever the image's dtype: a coarser difference)
SPECS["ScaleAndTranslate"] = (  # float32 only (TensorFlow's ScaleAndTranslateGrad)
    [P(r(1, 4, 5, 2), np.float32), C([3, 7], i32), C([0.75, 1.4], np.float32),
     C([0.2, -0.3], np.float32)], {"kernel_type": b"lanczos3", "antialias": True}, 1e-2, 1e-3)
# (TensorFlow differentiates Zeta in q only and Polygamma in x only: the other input constant)
SPECS.update({
    "Digamma": ([P(np.array([0.3, 1.7, 4.2, -0.6]))], {}),
    "Zeta": ([C(np.array([[1.5], [3.0]])), P(np.array([0.5, 2.0, 7.5]))], {}),
    "Polygamma": ([C(np.array([[0.0], [2.0]])), P(np.array([0.4, 3.0]))], {}),
    "Igamma": ([P(np.array([[0.6], [2.5]])), P(np.array([0.3, 1.8, 6.0]))], {}),
    "Igammac": ([P(np.array([[0.6], [2.5]])), P(np.array([0.3, 1.8, 6.0]))], {}),
})
# The fused RNN cells: checked against TensorFlow's gradients and finite differences in
# test_rnn_block_ops.py (their forward clips the cell state and their backward, as
# TensorFlow's, ignores the clip, so random inputs would need the clip kept out of reach).
SKIP |= {"LSTMBlockCell", "BlockLSTM", "BlockLSTMV2", "GRUBlockCell"}
# The sparse tensor ops (tests/test_sparse_ops.py also checks them against TensorFlow's
# gradients): indices and shapes constant, the values (and a dense operand) differentiated.
_SP_IDX, _SP_SHAPE = C([[0, 1], [1, 0], [1, 3], [2, 0], [2, 2]], np.int64), C([3, 4], np.int64)
_SP3 = (C([[0, 1, 2], [1, 0, 0], [1, 2, 3], [0, 2, 1]], np.int64), C([2, 3, 4], np.int64))
SPECS.update({
    "SparseTensorDenseMatMul": ([_SP_IDX, P(r(5)), _SP_SHAPE, P(r(2, 4))], {"adjoint_b": True}),
    "SparseReorder": ([C([[2, 0], [0, 1], [1, 3]], np.int64), P(r(3)), _SP_SHAPE], {}),
    "SparseReduceSum": ([_SP_IDX, P(r(5)), _SP_SHAPE, C([1], i32)], {"keep_dims": True}),
    "SparseSoftmax": ([_SP_IDX, P(r(5)), _SP_SHAPE], {}),
    "SparseAdd": ([_SP_IDX, P(r(5)), _SP_SHAPE, C([[0, 0], [1, 0], [2, 2]], np.int64), P(r(3)),
                   _SP_SHAPE, C(np.float64(0))], {}),
    "SparseFillEmptyRows": ([C([[3, 1], [1, 0], [3, 0]], np.int64), P(r(3)), C([5, 2], np.int64),
                             P(np.array(0.3))], {}),
    "SparseDenseCwiseMul": ([_SP3[0], P(r(4)), _SP3[1], P(pos(3, 1))], {}),
    "SparseDenseCwiseDiv": ([_SP3[0], P(r(4)), _SP3[1], P(pos(4))], {}),
})
SKIP.add("SparseDenseCwiseAdd")  # no gradient in TensorFlow either: asking is an error
# Stop 47's morphology and order statistics (also against TensorFlow's gradients in
# test_detection_more_ops.py): random values, so no ties between a window's candidates.
SPECS.update({
    "Dilation2D": ([P(r(1, 5, 5, 2)), P(r(3, 3, 2))],
                   {"strides": [1, 1, 1, 1], "rates": [1, 1, 1, 1], "padding": b"VALID"}),
    "NthElement": ([P(r(3, 5)), C(np.int32(2))], {}),
})
# A ragged tensor padded to [3, 4] (rows of 2, 0 and 3 values; one value past the width is
# dropped): values and default_value differentiated.
SPECS["RaggedTensorToTensor"] = (
    [C(np.array([3, 2], np.int64)), P(r(5)), P(np.array(0.3)),
     C(np.array([0, 2, 2, 5], np.int64))], {"row_partition_types": [b"ROW_SPLITS"]})
# Stop 46's ops, their gradients checked against TensorFlow's in their own files:
# fake quantization and quantize-and-dequantize are straight-through estimators (the forward
# is a staircase: no finite difference is its gradient; test_quant_print_ops.py, with Print,
# which passes input 0 through and would print from every probe); ImageProjectiveTransform's
# rule resamples the gradient through the inverse transform, not the bilinear map's exact
# derivative, and ResourceGather differentiates a variable through its handle
# (test_augment_embed_ops.py); CTCLoss takes sparse labels (test_ctc_decode_ops.py).
SKIP |= {"FakeQuantWithMinMaxArgs", "FakeQuantWithMinMaxVars",
         "FakeQuantWithMinMaxVarsPerChannel", "QuantizeAndDequantizeV2",
         "QuantizeAndDequantizeV3", "QuantizeAndDequantizeV4", "Print",
         "ImageProjectiveTransformV2", "ImageProjectiveTransformV3", "ResourceGather", "CTCLoss"}
# The math misc family (tests/test_math_misc_ops.py checks them against TensorFlow's
# gradients): the second-order max pool gradients in their gradient input, orig_input and
# orig_output constant (distinct values: no tie moves within a difference); 3-D in float32.
_MP_X = rng.permutation(32).reshape(1, 4, 4, 2) * 0.1
_MP_Y = _MP_X.reshape(1, 2, 2, 2, 2, 2).max(axis=(2, 4))
_MP = {"ksize": [1, 2, 2, 1], "strides": [1, 2, 2, 1], "padding": b"VALID"}
_MP3_X = (rng.permutation(64).reshape(1, 2, 4, 4, 2) * 0.1).astype(np.float32)
_MP3_Y = _MP3_X.reshape(1, 1, 2, 2, 2, 2, 2, 2).max(axis=(2, 4, 6))
_MP3 = {"ksize": [1, 2, 2, 2, 1], "strides": [1, 2, 2, 2, 1], "padding": b"VALID"}
SPECS.update({
    "Diag": ([P(r(2, 3))], {}), "DiagPart": ([P(r(2, 3, 2, 3))], {}),
    "CheckNumericsV2": ([P(r(3))], {"message": b"m"}),
    "MaxPoolGrad": ([C(_MP_X), C(_MP_Y), P(r(1, 2, 2, 2))], _MP),
    "MaxPoolGradV2": ([C(_MP_X), C(_MP_Y), P(r(1, 2, 2, 2)), C([1, 2, 2, 1], i32),
                       C([1, 2, 2, 1], i32)], {"padding": b"VALID"}),
    "MaxPoolGradGrad": ([C(_MP_X), C(_MP_Y), P(r(1, 4, 4, 2))], _MP),
    "MaxPool3DGrad": ([C(_MP3_X), C(_MP3_Y), P(r(1, 1, 2, 2, 2), np.float32)], _MP3, 1e-3, 2e-3),
    "MaxPool3DGradGrad": ([C(_MP3_X), C(_MP3_Y), P(r(1, 2, 4, 4, 2), np.float32)], _MP3, 1e-3,
                          2e-3),
    "Dawsn": ([P(r(3, lo=-4, hi=4))], {}), "Expint": ([P(rng.uniform(0.3, 5, 3))], {}),
    "FresnelCos": ([P(r(3, lo=-2, hi=2))], {}), "FresnelSin": ([P(r(3, lo=-2, hi=2))], {}),
    "Spence": ([P(np.array([0.2, 0.7, 1.6, 3.0]))], {}),
})


def _build(op, inputs, attrs, static=False):
    """The op fed by Placeholders of unknown shape (the gradients' dynamic-shape path) or,
    with static=True, of declared shape (shapes known while building the gradient)."""
    g = Graph()
    factory = NodeFactory()
    factory.graph, factory._dtypes = g, {}
    names, feeds = [], {}
    for i, (kind, value) in enumerate(inputs):
        dtype = DType.from_numpy(value.dtype)
        name = f"in{i}"
        if kind == "p":
            shape = {"shape": Shape(value.shape)} if static else {}
            g.add_node(name, "Placeholder", attrs={"dtype": dtype, **shape})
            feeds[f"{name}:0"] = value
        else:
            g.add_node(name, "Const", attrs={"dtype": dtype, "value": value})
        names.append(f"{name}:0")
    attrs = dict(attrs)
    factory._fill_type_attrs(op, names, attrs)
    if op == "IdentityN":
        attrs["T"] = [DType.DOUBLE] * len(names)
    g.add_node("op", op, names, attrs)
    return g, feeds


def _finish(g, feeds, only=None):
    """Add y = sum_k sum(out_k * W_k) over the float outputs; returns their weights."""
    dts = signature.output_dtypes(g["op"])
    outs = [f"op:{k}" for k, dt in enumerate(dts)
            if dt.is_floating and (only is None or k in only)]
    values = Session(g).run(outs, feeds)
    terms, weights = [], []
    for k, (t, v) in enumerate(zip(outs, values)):
        w = rng.uniform(0.5, 1.5, np.shape(v)).astype(np.asarray(v).dtype)
        weights.append(w)
        dtype = DType.from_numpy(w.dtype)
        g.add_node(f"w{k}", "Const", attrs={"dtype": dtype, "value": w})
        g.add_node(f"m{k}", "Mul", [t, f"w{k}"], {"T": dtype})
        g.add_node(f"axes{k}", "Const", attrs={"dtype": DType.INT32, "value": np.arange(
            np.ndim(v), dtype=np.int32)})
        g.add_node(f"s{k}", "Sum", [f"m{k}", f"axes{k}"], {"T": dtype})
        terms.append(f"s{k}")
    return outs, weights, terms


# More shapes for the rules with a static-shape fast path (constant reduction shapes,
# constant broadcast axes): kept dims, every axis, negative and several axes, scalars,
# size-1 dims of an operand that get broadcast.
VARIANTS = [
    ("Sum", [P(r(2, 3)), C([1], i32)], {"keep_dims": True}),
    ("Sum", [P(r(2, 3, 2)), C([0, 1, 2], i32)], {}),
    ("Sum", [P(np.array(0.3)), C(np.zeros(0, i32))], {}),
    ("Sum", [P(r(2, 1, 3)), C([1], i32)], {}),
    ("Mean", [P(r(2, 3, 2)), C([0, 2], i32)], {"keep_dims": True}),
    ("Mean", [P(r(4)), C(-1, i32)], {}),
    ("Prod", [P(pos(2, 3, 2)), C([2, 0], i32)], {}),
    ("Prod", [P(pos(2, 3)), C(-1, i32)], {"keep_dims": True}),
    ("Max", [P(r(2, 3, 2)), C([-1, 0], i32)], {}),
    ("Min", [P(r(3, 2)), C([0, 1], i32)], {"keep_dims": True}),
    ("Mul", [P(r(2, 1, 3)), P(r(4, 3))], {}),
    ("AddV2", [P(np.array(0.4)), P(r(3))], {}),
    ("Sub", [P(r(1)), P(r(2, 3))], {}),
    ("RealDiv", [P(r(3, 1)), P(pos(1, 1, 4))], {}),
    ("SquaredDifference", [P(r(2, 3)), P(r(2, 3))], {}),
    ("MirrorPad", [P(r(2, 3, 2)), C([[2, 2], [0, 3], [1, 0]], i32)], {"mode": b"SYMMETRIC"}),
    ("MirrorPadGrad", [P(r(5, 6)), C([[1, 1], [0, 2]], i32)], {"mode": b"REFLECT"}),
    # Einsum: broadcast ellipsis, labels summed away, a transpose, ellipsis inside the labels.
    ("Einsum", [P(r(2, 1, 3, 4)), P(r(3, 4, 2))], {"equation": b"...ij,...jk->...ik"}),
    ("Einsum", [P(r(2, 3, 4)), P(r(4, 5))], {"equation": b"bij,jk->bk"}),
    ("Einsum", [P(r(2, 3, 4))], {"equation": b"ijk->kj"}),
    ("Einsum", [P(r(2, 3, 4)), P(r(4))], {"equation": b"a...b,b->...a"}),
    # GatherV2 with batch_dims (DeBERTa's take_along_axis): repeated indices per batch row,
    # a dim between the batch dims and the axis, int64 indices, batch_dims counted from the end
    ("GatherV2", [P(r(2, 3, 4)), C([[0, 2, 2, 1, 0], [1, 1, 0, 2, 2]], i32), C(1, i32)],
     {"batch_dims": 1}),
    ("GatherV2", [P(r(2, 3, 4, 2)), C([[3, 0, 3], [1, 2, 1]], i32), C(2, i32)],
     {"batch_dims": 1}),
    ("GatherV2", [P(r(2, 3, 5)), C([[[4, 0], [1, 1], [2, 4]], [[0, 0], [3, 1], [4, 2]]],
                                   np.int64), C(2, i32)], {"batch_dims": 2}),
    ("GatherV2", [P(r(2, 4, 3)), C([[3, 1, 3, 0], [2, 2, 0, 1]], i32), C(1, i32)],
     {"batch_dims": -1}),
]


def _variant_id(v):
    return f"{v[0]}-" + "-".join("x".join(map(str, value.shape)) or "scalar"
                                  for _, value in v[1])


@pytest.mark.parametrize("static", [False, True], ids=["dynamic", "static"])
@pytest.mark.parametrize("variant", VARIANTS, ids=[_variant_id(v) for v in VARIANTS])
def test_shape_variants_match_finite_differences(variant, static):
    op, inputs, attrs = variant
    _check(op, (inputs, attrs), static)


@pytest.mark.parametrize("static", [False, True], ids=["dynamic", "static"])
@pytest.mark.parametrize("op", sorted(SPECS))
def test_gradient_matches_finite_differences(op, static):
    spec = SPECS[op]
    if spec is None:
        pytest.skip("covered elsewhere")
    _check(op, spec, static)


def _check(op, spec, static):
    inputs, attrs = spec[0], spec[1]
    eps, tol = (spec[2], spec[3]) if len(spec) > 2 else (1e-6, 1e-5)
    g, feeds = _build(op, inputs, attrs, static)
    outs, weights, terms = _finish(g, feeds, spec[4] if len(spec) > 4 else None)
    xs = sorted(feeds)
    g2 = grad(g, terms, xs)
    got = Session(g2).run([f"grad/{x.split(':')[0]}:0" for x in xs], feeds)
    fwd = Session(g)

    for x, analytic in zip(xs, got):
        def f(value, x=x):
            fed = dict(feeds)
            fed[x] = value.astype(feeds[x].dtype)
            vals = fwd.run(outs, fed)
            return sum(float(np.sum(np.asarray(v, np.float64) * w))
                       for v, w in zip(vals, weights))

        numeric = numeric_gradient(f, feeds[x], eps=eps)
        np.testing.assert_allclose(analytic, numeric, rtol=tol, atol=tol,
                                   err_msg=f"{op}: d/d{x}")


def test_every_registered_gradient_has_a_spec():
    missing = [op for op in registered() if op not in SPECS and op not in SKIP]
    assert not missing, f"registered gradients without a finite-difference spec: {missing}"
