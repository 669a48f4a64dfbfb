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
  }
  return "?";
}

}  // namespace memlane
