#include "plan/plan.h"

namespace memlane {

const char* op_type_name(OpType t) {
  switch (t) {
    case OpType::kConv: return "Conv";
    case OpType::kGemm: return "Gemm";
    case OpType::kMatMul: return "MatMul";
    case OpType::kAdd: return "Add";
    case OpType::kSub: return "Sub";
    case OpType::kMul: return "Mul";
    case OpType::kDiv: return "Div";
    case OpType::kRelu: return "Relu";
    case OpType::kLeakyRelu: return "LeakyRelu";
    case OpType::kSigmoid: return "Sigmoid";
    case OpType::kTanh: return "Tanh";
    case OpType::kErf: return "Erf";
    case OpType::kGelu: return "Gelu";
    case OpType::kMaxPool: return "MaxPool";
    case OpType::kAveragePool: return "AveragePool";
    case OpType::kGlobalAveragePool: return "GlobalAveragePool";
    case OpType::kFlatten: return "Flatten";
    case OpType::kReshape: return "Reshape";
    case OpType::kTranspose: return "Transpose";
    case OpType::kConcat: return "Concat";
    case OpType::kSoftmax: return "Softmax";
    case OpType::kLayerNorm: return "LayerNormalization";
    case OpType::kPow: return "Pow";
    case OpType::kSqrt: return "Sqrt";
    case OpType::kReciprocal: return "Reciprocal";
    case OpType::kExp: return "Exp";
    case OpType::kNeg: return "Neg";
    case OpType::kLog: return "Log";
    case OpType::kAbs: return "Abs";
    case OpType::kReduceMean: return "ReduceMean";
    case OpType::kReduceSum: return "ReduceSum";
    case OpType::kReduceMax: return "ReduceMax";
    case OpType::kAttention: return "Attention";
    case OpType::kGather: return "Gather";
    case OpType::kCast: return "Cast";
    case OpType::kWhere: return "Where";
    case OpType::kEqual: return "Equal";
    case OpType::kLess: return "Less";
    case OpType::kGreater: return "Greater";
    case OpType::kNot: return "Not";
    case OpType::kAnd: return "And";
    case OpType::kOr: return "Or";
    case OpType::kMod: return "Mod";
    case OpType::kExpand: return "Expand";
    case OpType::kSlice: return "Slice";
    case OpType::kRange: return "Range";
    case OpType::kConstantOfShape: return "ConstantOfShape";
    case OpType::kLessOrEqual: return "LessOrEqual";
    case OpType::kGreaterOrEqual: return "GreaterOrEqual";
    case OpType::kClip: return "Clip";
    case OpType::kHardSigmoid: return "HardSigmoid";
    case OpType::kHardSwish: return "HardSwish";
    case OpType::kSiLU: return "SiLU";
    case OpType::kPad: return "Pad";
    case OpType::kSplit: return "Split";
    case OpType::kLSTM: return "LSTM";
    case OpType::kMax: return "Max";
    case OpType::kMin: return "Min";
    case OpType::kGatherND: return "GatherND";
    case OpType::kCumSum: return "CumSum";
    case OpType::kGatherElements: return "GatherElements";
    case OpType::kSin: return "Sin";
    case OpType::kCos: return "Cos";
    case OpType::kArgMax: return "ArgMax";
    case OpType::kElu: return "Elu";
    case OpType::kSelu: return "Selu";
    case OpType::kCelu: return "Celu";
    case OpType::kSoftplus: return "Softplus";
    case OpType::kSoftsign: return "Softsign";
    case OpType::kMish: return "Mish";
    case OpType::kThresholdedRelu: return "ThresholdedRelu";
    case OpType::kTan: return "Tan";
    case OpType::kAsin: return "Asin";
    case OpType::kAcos: return "Acos";
    case OpType::kAtan: return "Atan";
    case OpType::kSinh: return "Sinh";
    case OpType::kCosh: return "Cosh";
    case OpType::kAsinh: return "Asinh";
    case OpType::kAcosh: return "Acosh";
    case OpType::kAtanh: return "Atanh";
    case OpType::kPRelu: return "PRelu";
    case OpType::kConvTranspose: return "ConvTranspose";
    case OpType::kLogSoftmax: return "LogSoftmax";
    case OpType::kGRU: return "GRU";
    case OpType::kTopK: return "TopK";
  }
  return "?";
}

const char* dtype_name(DType t) {
  switch (t) {
    case DType::kFloat32: return "float32";
    case DType::kInt64: return "int64";
    case DType::kInt32: return "int32";
    case DType::kBool: return "bool";
  }
  return "?";
}

bool parse_dtype(const std::string& s, DType* t) {
  for (DType d : {DType::kFloat32, DType::kInt64, DType::kInt32, DType::kBool})
    if (s == dtype_name(d)) { *t = d; return true; }
  return false;
}

}  // namespace memlane
