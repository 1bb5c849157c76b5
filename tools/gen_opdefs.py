#!/usr/bin/env python3
"""Dump TensorFlow's OpDefs for every op tfg registers, as JSON (needs TensorFlow).

    /tmp/tfenv/bin/python tools/gen_opdefs.py > tests/fixtures/opdefs/opdefs.json

tests/test_signatures.py compares tfg's registrations with this file: argument names and order,
type attrs, attr types, defaults, allowed values and the stateful/commutative/aggregate flags.
This script imports TensorFlow only (never tfg: both register protobuf messages of the same name).
"""
import json
import sys

from tensorflow.core.framework import types_pb2
from tensorflow.python.framework import op_def_registry

OPS = """
Const Placeholder PlaceholderWithDefault Identity IdentityN NoOp StopGradient PreventGradient
CheckNumerics Assert AddV2 Add Sub Mul RealDiv Div DivNoNan FloorDiv FloorMod TruncateDiv
TruncateMod Neg Abs Sign Square Sqrt Rsqrt Reciprocal Inv Exp Expm1 Log Log1p Sin Cos Tan Tanh
Sigmoid Erf Pow Maximum Minimum SquaredDifference AddN Cast Equal NotEqual Less LessEqual
Greater GreaterEqual LogicalAnd LogicalOr LogicalNot Select SelectV2 IsFinite IsNan IsInf
Floor Ceil Round Rint Cumsum Cumprod MatMul BatchMatMul BatchMatMulV2 BatchMatMulV3 BiasAdd
BiasAddV1 BiasAddGrad Conv2D Conv2DBackpropInput Conv2DBackpropFilter DepthwiseConv2dNative
MaxPool MaxPoolV2 MaxPoolGrad AvgPool AvgPoolGrad FusedBatchNorm FusedBatchNormV2
FusedBatchNormV3 FusedBatchNormGrad FusedBatchNormGradV3 Relu ReluGrad Relu6 Relu6Grad Elu
EluGrad Selu SeluGrad LeakyRelu LeakyReluGrad Softplus SoftplusGrad Softsign Softmax
LogSoftmax SoftmaxCrossEntropyWithLogits SparseSoftmaxCrossEntropyWithLogits L2Loss TanhGrad
SigmoidGrad SqrtGrad RsqrtGrad ReciprocalGrad InvGrad Sum Mean Max Min Prod All Any ArgMax ArgMin
Shape ShapeN Size Rank Reshape Squeeze ExpandDims Transpose InvertPermutation ConcatV2
Concat ConcatOffset Pack Unpack SplitV Split Slice StridedSlice StridedSliceGrad GatherV2
Gather ScatterNd GatherNd UnsortedSegmentSum DynamicStitch Tile Pad PadV2 MirrorPad ReverseV2
Fill ZerosLike OnesLike Range OneHot BroadcastTo BroadcastArgs BroadcastGradientArgs ListDiff
Where Snapshot EnsureShape DataFormatVecPermute DataFormatDimMap RandomUniform
RandomUniformInt RandomStandardNormal TruncatedNormal ApplyGradientDescent ApplyMomentum
ApplyAdam ApplyRMSProp ApplyAdagrad ResourceApplyGradientDescent ResourceApplyMomentum
ResourceApplyAdam ResourceApplyRMSProp ResourceApplyAdagrad Switch RefSwitch Merge
RefMerge Enter RefEnter Exit RefExit NextIteration RefNextIteration LoopCond ControlTrigger
Abort VariableV2 Variable Assign AssignAdd AssignSub VarHandleOp ReadVariableOp
AssignVariableOp AssignAddVariableOp AssignSubVariableOp VarIsInitializedOp IsVariableInitialized
DestroyResourceOp StackV2 StackPushV2 StackPopV2 StackCloseV2 FIFOQueueV2
RandomShuffleQueueV2 QueueEnqueueV2 QueueEnqueueManyV2 QueueDequeueV2 QueueDequeueManyV2
QueueCloseV2 QueueSizeV2 SaveV2 RestoreV2 _Send _Recv _HostSend _HostRecv _Arg _Retval
EmptyTensorList TensorListReserve TensorListFromTensor TensorListGetItem TensorListSetItem
TensorListStack TensorListGather TensorListLength TensorListElementShape TensorListPushBack
TensorListPopBack TensorListResize
TensorArrayV3 TensorArrayReadV3 TensorArrayWriteV3 TensorArrayGatherV3 TensorArrayScatterV3
TensorArrayConcatV3 TensorArraySplitV3 TensorArraySizeV3 TensorArrayCloseV3 TensorArrayGradV3
TensorArrayGradWithShape ReverseSequence TopKV2 Erfc TensorListScatter TensorListScatterV2
TensorListScatterIntoExistingList TensorListConcat TensorListConcatV2 TensorListSplit
DepthwiseConv2dNativeBackpropInput DepthwiseConv2dNativeBackpropFilter
Acos Asin Atan Atan2 Sinh Cosh Xdivy SoftsignGrad Bitcast RefIdentity MaxPoolGradV2
FusedBatchNormGradV2 QueueIsClosedV2 PlaceholderV2
Einsum MirrorPadGrad VariableShape MatrixBandPart
ResizeBilinear ResizeNearestNeighbor ResizeBicubic ResizeBilinearGrad ResizeNearestNeighborGrad
ResizeBicubicGrad FFT IFFT FFT2D IFFT2D FFT3D IFFT3D RFFT IRFFT RFFT2D IRFFT2D RFFT3D IRFFT3D
Complex Real Imag ComplexAbs Angle Conj ApplyCenteredRMSProp ApplyAdadelta ApplyAdagradV2
ApplyAdaMax ResourceApplyCenteredRMSProp ResourceApplyAdadelta ResourceApplyAdagradV2
ResourceApplyAdaMax SpaceToBatchND BatchToSpaceND DepthToSpace SpaceToDepth Roll SegmentSum
SegmentMean SegmentMax SegmentMin SegmentProd SparseSegmentSum SparseSegmentMean
SparseSegmentSqrtN SparseSegmentSumWithNumSegments SparseSegmentMeanWithNumSegments
SparseSegmentSqrtNWithNumSegments MatrixInverse Cholesky MatrixTriangularSolve
SparseSegmentSumGrad SparseSegmentMeanGrad SparseSegmentSqrtNGrad SparseSegmentSumGradV2
SparseSegmentMeanGradV2 SparseSegmentSqrtNGradV2 MatrixDiagV3 MatrixDiagPartV3 Lgamma Digamma
DenseBincount
Empty OptionalFromValue OptionalGetValue OptionalHasValue OptionalNone TensorScatterAdd
TensorScatterMax TensorScatterMin TensorScatterSub TensorScatterUpdate UnsortedSegmentMax
UnsortedSegmentMin UnsortedSegmentProd XlaDynamicUpdateSlice
Asinh Acosh Atanh BitwiseAnd BitwiseOr BitwiseXor Invert LeftShift RightShift PopulationCount
Erfinv Ndtri BesselI0e BesselI1e BesselI0 BesselI1 Mod MulNoNan Xlogy Xlog1py ClipByValue
Unique UniqueV2 UniqueWithCounts DynamicPartition ParallelDynamicStitch SparseToDense LowerBound
UpperBound InTopKV2 TopK HistogramFixedWidth Bincount Bucketize EuclideanNorm
CumulativeLogsumexp LinSpace Reverse Cross MatrixDiag MatrixDiagPart MatrixSetDiag MatrixDiagV2
MatrixDiagPartV2 MatrixSetDiagV2 MatrixSetDiagV3 ConjugateTranspose
Conv3D Conv3DBackpropInputV2 Conv3DBackpropFilterV2 MaxPool3D AvgPool3D MaxPool3DGrad
AvgPool3DGrad LRN LRNGrad MaxPoolWithArgmax MaxPoolGradWithArgmax ExtractImagePatches
CropAndResize NonMaxSuppressionV3 NonMaxSuppressionV4 NonMaxSuppressionV5 NonMaxSuppression
NonMaxSuppressionV2 RGBToHSV HSVToRGB AdjustContrastv2 AdjustSaturation AdjustHue ResizeArea
StatelessRandomUniform StatelessRandomNormal StatelessTruncatedNormal StatelessRandomUniformInt
StatelessRandomUniformV2 StatelessRandomNormalV2 StatelessTruncatedNormalV2
StatelessRandomUniformIntV2 StatelessRandomUniformFullIntV2 StatelessRandomGetKeyCounter
StatelessRandomGetAlg StatelessRandomGetKeyCounterAlg StatelessMultinomial
BlockLSTM BlockLSTMV2 LSTMBlockCell GRUBlockCell BlockLSTMGrad BlockLSTMGradV2 LSTMBlockCellGrad
GRUBlockCellGrad _SwitchN
CropAndResizeGradImage CropAndResizeGradBoxes
MatrixDeterminant LogMatrixDeterminant MatrixSolve MatrixSolveLs Qr Svd SelfAdjointEigV2 Lu
MatrixSquareRoot
SparseTensorDenseMatMul SparseReorder SparseAdd SparseAddGrad SparseReduceSum
SparseReduceSumSparse SparseSoftmax SparseReshape SparseFillEmptyRows SparseFillEmptyRowsGrad
SparseDenseCwiseMul SparseDenseCwiseAdd SparseDenseCwiseDiv
ScaleAndTranslate ScaleAndTranslateGrad Igamma Igammac IgammaGradA Polygamma Zeta
PrintV2 StringFormat Print FakeQuantWithMinMaxArgs FakeQuantWithMinMaxArgsGradient
FakeQuantWithMinMaxVars FakeQuantWithMinMaxVarsGradient FakeQuantWithMinMaxVarsPerChannel
FakeQuantWithMinMaxVarsPerChannelGradient QuantizeAndDequantizeV2 QuantizeAndDequantizeV3
QuantizeAndDequantizeV4 QuantizeAndDequantizeV4Grad ResourceGather ResourceScatterAdd
ResourceScatterUpdate ImageProjectiveTransformV2 ImageProjectiveTransformV3 Multinomial
ResourceSparseApplyAdagrad ResourceSparseApplyAdagradV2 ResourceSparseApplyMomentum
CTCGreedyDecoder CTCBeamSearchDecoder CTCLoss
HashTableV2 MutableHashTableV2 MutableHashTableOfTensorsV2 InitializeTableV2
InitializeTableFromTextFileV2 LookupTableFindV2 LookupTableInsertV2 LookupTableRemoveV2
LookupTableSizeV2 LookupTableExportV2 LookupTableImportV2 AnonymousHashTable
AnonymousMutableHashTable AnonymousMutableHashTableOfTensors
StringLower StringUpper StaticRegexReplace RegexReplace StaticRegexFullMatch RegexFullMatch
StringSplitV2 StringSplit StringJoin ReduceJoin Substr StringLength StringStrip AsString
StringToNumber StringNGrams EncodeBase64 DecodeBase64
StringToHashBucketFast StringToHashBucketStrong StringToHashBucket Fingerprint
RaggedTensorToTensor RaggedTensorToSparse RaggedRange RaggedGather RaggedBincount SparseBincount
SparseCross SparseCrossHashed SparseCrossV2 DisableCopyOnRead
ScatterUpdate ScatterAdd ScatterSub ScatterMul ScatterDiv ScatterMin ScatterMax ScatterNdUpdate
ScatterNdAdd ScatterNdSub ScatterNdMax ScatterNdMin ScatterNdNonAliasingAdd StridedSliceAssign
CountUpTo InplaceAdd InplaceSub InplaceUpdate AccumulateNV2
CombinedNonMaxSuppression DrawBoundingBoxes DrawBoundingBoxesV2 Dilation2D
Dilation2DBackpropInput Dilation2DBackpropFilter UnravelIndex EditDistance NthElement
RandomShuffle SampleDistortedBoundingBoxV2
Diag DiagPart InTopK ApproximateEqual NextAfter GuaranteeConst ToBool CheckNumericsV2
MaxPoolGradGrad MaxPoolGradGradV2 MaxPool3DGradGrad UniqueWithCountsV2 Dawsn Expint
FresnelCos FresnelSin Spence
UnicodeDecode UnicodeDecodeWithOffsets UnicodeEncode UnicodeTranscode
""".split()


def dtype_name(t):
    return types_pb2.DataType.Name(t)


def attr_value(av):
    """AttrValue -> JSON: {"kind": field, "value": ...}."""
    which = av.WhichOneof("value")
    if which is None:
        return {"kind": "list", "value": []}
    if which == "list":
        lv = av.list
        for field in ("s", "i", "f", "b", "type", "shape"):
            vals = list(getattr(lv, field))
            if vals:
                return {"kind": f"list({field})", "value": [scalar(field, v) for v in vals]}
        return {"kind": "list", "value": []}
    return {"kind": which, "value": scalar(which, getattr(av, which))}


def scalar(field, v):
    if field == "s":
        return v.decode()
    if field == "type":
        return dtype_name(v)
    if field == "shape":
        return None if v.unknown_rank else [d.size for d in v.dim]
    if field == "tensor":
        return {"dtype": dtype_name(v.dtype)}
    return v


def arg(a):
    return {"name": a.name, "type": dtype_name(a.type) if a.type else None,
            "type_attr": a.type_attr or None, "number_attr": a.number_attr or None,
            "type_list_attr": a.type_list_attr or None, "is_ref": a.is_ref}


def opdef(name):
    od = op_def_registry.get(name)
    if od is None:
        raise SystemExit(f"TensorFlow has no op {name}")
    attrs = []
    for a in od.attr:
        attrs.append({
            "name": a.name, "type": a.type,
            "default": attr_value(a.default_value) if a.HasField("default_value") else None,
            "allowed": attr_value(a.allowed_values)["value"]
            if a.HasField("allowed_values") else None,
            "minimum": a.minimum if a.has_minimum else None})
    return {"name": od.name, "inputs": [arg(a) for a in od.input_arg],
            "outputs": [arg(a) for a in od.output_arg], "attrs": attrs,
            "is_stateful": od.is_stateful, "is_commutative": od.is_commutative,
            "is_aggregate": od.is_aggregate}


def main():
    import tensorflow as tf  # noqa: F401  (registers every op)

    out = {name: opdef(name) for name in sorted(set(OPS))}
    out["_tensorflow_version"] = tf.__version__
    json.dump(out, sys.stdout, indent=1, sort_keys=True)
    sys.stdout.write("\n")


if __name__ == "__main__":
    main()
